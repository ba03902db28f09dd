//! The other Debian releases of the test bed: a cluster on the STOCK
//! plugins of Slurm 24.11.5 (Debian 13, trixie chroot) and 26.05.5 (Debian
//! unstable, sid chroot), each on 4 fake GPUs given by fake_gpus.conf, and
//! the same cluster on OURS built for that release (`ours_*`: the build of
//! `tests/releases.rs`, `target/slurm-<version>/plugins/`), which must
//! give what stock gave.
//! Checks that the daemons are the chroot's, that slurmd mapped the
//! chroot's own stock plugin files (by device and inode, not by path: the
//! host has files of the same names), and that `slurmd -G` and one
//! `srun --gres=gpu:2 env` give what stock gave there
//! (`tests/testbed/baselines/stock-<version>-*.tsv`).
//!
//! The chroots come from `tests/testbed/debian-chroot.sh trixie|sid` (run
//! by tests/setup-debian.sh); a release whose chroot is missing is skipped,
//! or fails under `GRES_RS_REQUIRE_SLURM=1` / `CI=true`.  Needs root.

use gres_test_harness as harness;

use harness::chroot::{self, Chroot, Release};
use harness::{Cluster, ClusterConfig, Daemon, PluginSet};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

const GPUS: u32 = 4;

fn release(suite: &str) -> Release {
    chroot::RELEASES.into_iter().find(|r| r.suite == suite).unwrap_or_else(|| panic!("no test-bed release {suite}"))
}

/// The release's chroot, or None after saying why it is skipped.
#[track_caller]
fn open_or_skip(test: &str, rel: &Release) -> Option<Chroot> {
    let problem = match rel.open() {
        Ok(root) => match root.problems().first() {
            None => return Some(root),
            Some(p) => p.clone(),
        },
        Err(e) => e,
    };
    let msg = format!("{test}: no {} chroot for Slurm {} ({}): {problem}", rel.suite, rel.slurm, rel.debian);
    if harness::strict_mode() {
        panic!("{msg}\n(GRES_RS_REQUIRE_SLURM/CI is set, so this is a failure; run tests/testbed/debian-chroot.sh {} as root)", rel.suite);
    }
    harness::ledger::skipped(test, &format!("{msg}; build it with tests/testbed/debian-chroot.sh {}", rel.suite));
    None
}

fn baseline(version: &str, what: &str) -> String {
    let p = harness::workspace_root().join(format!("tests/testbed/baselines/stock-{version}-{what}.tsv"));
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The node of the baselines: 4 untyped GPUs from fake_gpus.conf (with
/// all four vendor-variable flags), each with 100 MPS and 2 shards.
fn config(root: Chroot, plugins: PluginSet) -> ClusterConfig {
    let mut c = ClusterConfig::gpus(plugins, GPUS).in_chroot(root);
    c.node_gres = Some(format!("gpu:{GPUS},mps:{},shard:{}", 100 * GPUS, 2 * GPUS));
    // No gpu line: the GPUs (and their vendor-variable flags) come from
    // fake_gpus.conf alone, as in the baselines.
    c.gres_conf = format!("Name=mps Count={}\nName=shard Count={}\n", 100 * GPUS, 2 * GPUS);
    c.fake_gpus_conf = Some(
        (0..GPUS)
            .map(|i| format!("(null)|{GPUS}|0-{}|(null)|{{DEV}}/nvidia{i}|(null)|nvidia_gpu_env,amd_gpu_env,intel_gpu_env,opencl_env\n", GPUS - 1))
            .collect(),
    );
    c
}

/// The chroot's stock plugin files by (device, inode) -> file name.
fn stock_files(root: &Chroot) -> BTreeMap<(u64, u64), String> {
    let dir = root.resolve(root.stock_plugin_dir()).expect("stock plugin dir");
    fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let md = fs::metadata(e.path()).ok()?;
            name.ends_with(".so").then(|| ((md.dev(), md.ino()), name))
        })
        .collect()
}

/// The gres_*/gpu_* plugin files of the chroot that `pid` maps, found by
/// device and inode.
fn mapped_stock_plugins(root: &Chroot, pid: u32) -> BTreeSet<String> {
    let files = stock_files(root);
    let mut v = BTreeSet::new();
    for (_, name) in files.iter().filter(|(_, n)| n.starts_with("gres_") || n.starts_with("gpu_")) {
        let host = root.resolve(root.stock_plugin_dir().join(name)).expect("resolved");
        if chroot::mapping_of(pid, &host).unwrap_or_else(|e| panic!("{e}")).is_some() {
            v.insert(name.clone());
        }
    }
    v
}

/// File names of a loaded.tsv row (`who` column).
fn loaded_row(version: &str, who: &str) -> BTreeSet<String> {
    let text = baseline(version, "loaded");
    let row = text.lines().find_map(|l| l.strip_prefix(&format!("{who}\t"))).unwrap_or_else(|| panic!("no {who:?} row in stock-{version}-loaded.tsv"));
    row.split(';').filter_map(|p| p.rsplit('/').next()).map(str::to_string).collect()
}

/// `Gres Name=...` lines of `slurmd -G` as baseline rows (tab-separated:
/// name type count index id file links flags), the cluster dir as `$BED`.
fn slurmd_g_rows(out: &str, dir: &str) -> Vec<String> {
    let cols = ["Name", "Type", "Count", "Index", "ID", "File", "Links", "Flags"];
    out.lines()
        .filter_map(|l| l.find("Gres Name=").map(|i| &l[i + 5..]))
        .map(|l| {
            let fields: BTreeMap<&str, &str> = l.split_whitespace().filter_map(|w| w.split_once('=')).collect();
            cols.iter().map(|c| fields.get(c).copied().unwrap_or("").replace(dir, "$BED")).collect::<Vec<_>>().join("\t")
        })
        .collect()
}

/// Which plugins a run uses: the chroot's stock ones, or ours built for
/// the chroot's release (`harness::build_for_release`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Stock,
    Ours,
}

/// Our plugin files slurmd loads on this node (fake_gpus.conf, no
/// AutoDetect: gpu/generic, not our gpu/nvml).
const OURS_LOADED: [&str; 3] = ["gres_gpu", "gres_mps", "gres_shard"];

fn run_release(test: &str, suite: &str, side: Side) {
    let t0 = Instant::now();
    let rel = release(suite);
    let Some(root) = open_or_skip(test, &rel) else { return };
    let version = root.slurm_version().expect("slurm version");
    assert_eq!(version, rel.slurm, "{} chroot {} holds Slurm {version}, the test bed expects {}", rel.suite, root.root().display(), rel.slurm);
    eprintln!("{test}: {} ({}) in {}: Slurm {version}, libslurmfull {}", rel.suite, rel.debian, root.root().display(), root.libslurmfull().display());

    let mut cfg = config(root.clone(), if side == Side::Ours { PluginSet::Ours } else { PluginSet::Stock });
    if side == Side::Ours {
        let built = harness::build_for_release(&version, &root.host_path("/usr/include")).unwrap_or_else(|e| panic!("{test}: {e}"));
        cfg.plugin_build_dir = Some(built);
    }
    let c = Cluster::start(cfg);
    let dir = c.layout.root.to_string_lossy().into_owned();
    let slurmd = c.pid(Daemon::Slurmd).expect("slurmd pid");
    let slurmctld = c.pid(Daemon::Slurmctld).expect("slurmctld pid");

    // The daemons are the chroot's: slurmd's executable is the chroot's
    // file, its root directory the chroot, and it says its version.
    let exe = root.resolve("/usr/sbin/slurmd").expect("slurmd in chroot");
    let exe_md = fs::metadata(&exe).expect("slurmd-wlm");
    let running = fs::metadata(format!("/proc/{slurmd}/exe")).expect("/proc/<slurmd>/exe");
    assert_eq!((running.dev(), running.ino()), (exe_md.dev(), exe_md.ino()), "slurmd (pid {slurmd}) does not run {}", exe.display());
    assert_eq!(fs::read_link(format!("/proc/{slurmd}/root")).ok(), Some(root.root().to_path_buf()), "slurmd's root is not the chroot");
    let log = c.log(Daemon::Slurmd);
    assert!(log.contains(&format!("slurmd version {version} started")), "slurmd's log does not say version {version}:\n{}", c.log_tails(30));

    // The stock gres/gpu plugin of the chroot is mapped, and the host's
    // file of that name is not.
    let host_gpu = harness::stock_plugin_dir().join("gres_gpu.so");
    if host_gpu.is_file() {
        assert!(chroot::mapping_of(slurmd, &host_gpu).expect("maps").is_none(), "slurmd maps the host's {}", host_gpu.display());
    }
    let full = root.resolve(root.libslurmfull()).unwrap_or_else(|| panic!("no {} in the chroot", root.libslurmfull().display()));
    assert!(chroot::mapping_of(slurmd, &full).expect("maps").is_some(), "slurmd does not map the chroot's {}", full.display());
    let by_slurmd = mapped_stock_plugins(&root, slurmd);
    if side == Side::Stock {
        assert!(by_slurmd.contains("gres_gpu.so"), "slurmd (pid {slurmd}) does not map the chroot's gres_gpu.so; it maps {by_slurmd:?}");
        assert_eq!(by_slurmd, loaded_row(&version, "slurmd (maps)"), "plugins slurmd maps vs. stock-{version}-loaded.tsv");
        assert_eq!(mapped_stock_plugins(&root, slurmctld), loaded_row(&version, "slurmctld (maps)"), "plugins slurmctld maps vs. stock-{version}-loaded.tsv");
    } else {
        // Ours, built for this release, and none of the chroot's files
        // of those names: by path in slurmd's maps (the cluster's plugin
        // dir is bound at the same path inside the chroot) and by inode.
        c.assert_ours_loaded_in(Daemon::Slurmd, &OURS_LOADED);
        let our_dir = c.our_dir.clone().expect("our plugin dir");
        for f in OURS_LOADED.iter().map(|n| format!("{n}.so")).chain([harness::LIBRARY_FILE.to_string()]) {
            assert!(chroot::mapping_of(slurmd, &our_dir.join(&f)).expect("maps").is_some(), "slurmd (pid {slurmd}) does not map our {f}");
            assert!(!by_slurmd.contains(&f), "slurmd (pid {slurmd}) maps the chroot's stock {f}");
        }
        // A job step's slurmstepd too.
        c.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:2"]);
    }

    // slurmd -G (with munged up: 24.11 and later authenticate first).
    let g = c.run("slurmd", &["-G", "-N", &c.config.node_name], Duration::from_secs(30));
    assert!(g.ok(), "slurmd -G:\n{g}");
    // Sorted: slurmd prints the sharing GRES interleaved with the GPUs.
    // The baseline's node had its GPUs in gres.conf File= lines, whose
    // vendor-variable flags are the default (ENV_DEFAULT with the four
    // ENV_*); fake_gpus.conf names the four (without a flags field it gives
    // none, and the job no CUDA_VISIBLE_DEVICES): all else is the same.
    let mut rows = slurmd_g_rows(&g.combined(), &dir);
    rows.sort();
    let mut want: Vec<String> = baseline(&version, "slurmd-G").lines().skip(1).map(|l| l.replace(",ENV_DEFAULT", "")).collect();
    want.sort();
    assert_eq!(rows, want, "slurmd -G vs. stock-{version}-slurmd-G.tsv (without ENV_DEFAULT):\n{g}");

    // One job step on two GPUs: the variables stock sets there (the
    // baseline's steps, for two GPUs instead of one).
    let out = c.srun(&["--gres=gpu:2", "-n1", "env"]).expect_ok("srun --gres=gpu:2 env");
    let mut env: BTreeMap<&str, &str> = out.stdout.lines().filter_map(|l| l.split_once('=')).filter(|(k, _)| harness::PLUGIN_ENV_VARS.contains(k)).collect();
    if side == Side::Ours {
        // Ours adds CUDA_DEVICE_ORDER=PCI_BUS_ID with CUDA_VISIBLE_DEVICES,
        // which stock never sets (docs/deviations.md, "MPS/shard 3").
        assert_eq!(env.remove("CUDA_DEVICE_ORDER"), Some("PCI_BUS_ID"), "CUDA_DEVICE_ORDER of ours:\n{out}");
    }
    // The baseline's steps ran inside a batch job, whose environment gave
    // them SLURM_JOB_GPUS; an srun that makes its own job gets none.
    let step_vars: BTreeSet<String> = baseline(&version, "jobs")
        .lines()
        .find_map(|l| l.strip_prefix("gpu4_n3\tstep1\t"))
        .expect("gpu4_n3 step1 row")
        .split(';')
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
        .filter(|k| k != "SLURM_JOB_GPUS")
        .collect();
    assert_eq!(env.keys().map(|k| k.to_string()).collect::<BTreeSet<_>>(), step_vars, "variables of the step vs. stock-{version}-jobs.tsv:\n{out}");
    for k in ["CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "SLURM_STEP_GPUS"] {
        assert_eq!(env.get(k).copied(), Some("0,1"), "{k}:\n{out}");
    }
    assert_eq!(env.get("SLURM_GPUS_ON_NODE").copied(), Some("2"), "{out}");

    // A task's child that leaves the step (new session, reparented): seen
    // from the host its cwd and files carry the chroot's prefix, so only
    // its mount namespace (slurmd's) marks it; stopping must end it.
    let out = c.srun(&["-n1", "/bin/sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo STRAY=$!"]).expect_ok("srun leaving a process");
    let stray: u32 =
        out.stdout.lines().find_map(|l| l.strip_prefix("STRAY=")).and_then(|p| p.trim().parse().ok()).unwrap_or_else(|| panic!("no STRAY= pid:\n{out}"));
    assert!(harness::process::pid_alive(stray), "the stray {stray} is already gone:\n{out}");
    drop(c);
    assert!(!harness::process::pid_alive(stray), "the cluster's stray process {stray} outlived it");
    for pid in [slurmd, slurmctld] {
        assert!(!harness::process::pid_alive(pid), "daemon {pid} outlived the cluster");
    }
    eprintln!("{test}: Slurm {version} passed in {:.1?}", t0.elapsed());
}

#[test]
fn stock_24_11_in_trixie_chroot() {
    run_release("stock_24_11_in_trixie_chroot", "trixie", Side::Stock);
}

#[test]
fn stock_26_05_in_sid_chroot() {
    run_release("stock_26_05_in_sid_chroot", "sid", Side::Stock);
}

/// Ours built for 24.11.5 (`target/slurm-24.11.5`), on the trixie
/// chroot's daemons: loaded by slurmd and slurmstepd, and the same
/// `slurmd -G` and job environment as stock.
#[test]
fn ours_24_11_in_trixie_chroot() {
    run_release("ours_24_11_in_trixie_chroot", "trixie", Side::Ours);
}

/// Ours built for 26.05.5 on the sid chroot's daemons.
#[test]
fn ours_26_05_in_sid_chroot() {
    run_release("ours_26_05_in_sid_chroot", "sid", Side::Ours);
}

#[test]
fn releases_are_listed() {
    let versions: Vec<&str> = chroot::RELEASES.iter().map(|r| r.slurm).collect();
    assert_eq!(versions, ["22.05.8", "24.11.5", "26.05.5"]);
    assert_eq!(chroot::chroot_releases().map(|r| r.suite).collect::<Vec<_>>(), ["trixie", "sid"]);
    assert!(release("bookworm").chroot().is_none());
}
