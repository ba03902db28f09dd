//! Ours against the stock plugins, measured in one run on one machine.
//!
//! ```sh
//! cargo build --release --workspace        # the plugin files and gres-rs
//! cargo bench --bench bench                # table on stdout, JSON in target/bench.json
//! cargo bench --bench bench -- --quick --json /tmp/b.json --only slurmd-g,steps
//! GRES_RS_SLURM=24.11 cargo bench --bench bench -- --quick --only slurmd-g,steps
//! ```
//!
//! Releases: the `slurmd-g` and `steps` rows are measured on each Slurm
//! release of the test bed that `GRES_RS_SLURM` selects, as for the tests
//! (`22.05`, `24.11`, `26.05`, a list, or `all`; unset: the host's and
//! every chroot that is built), each row labelled with its release (also
//! in the JSON).  On a chroot's release (`harness::testbed::TestBed`) ours
//! is built for it (`target/slurm-<version>`), the daemons, `slurmd -G`
//! and valgrind are the chroot's, and `slurmd -G` is timed inside the
//! chroot (`Chroot::timed_runs`), where it needs munged (a started
//! cluster).  The NVML nodes need the test bed's stock gpu_nvml.so
//! (`TestBed::stock_gpu_nvml`; on the host `GRES_RS_STOCK_GPU_NVML` may
//! name another), with the stand-in's mig-minors where the driver has it
//! (`Chroot::command`; on the host the bench's own mount namespace).
//! `rss` and `check` run on the host's release only.
//!
//! Rows (each a ratio ours/stock; lower is better for ours):
//! * `slurmd-g`: wall time of `slurmd -G` (median of many runs), on a
//!   fake-GPU node (`fake_gpus.conf`, both sides), and on NVML stand-in
//!   nodes (8 GPUs with NVLink; 8 GPUs x 7 MIG devices) where ours detects
//!   through NVML, and so does stock with the test bed's stock
//!   gpu_nvml.so (Debian ships none; the host's is built from Debian's
//!   source); plus the NVML calls of both sides
//!   (stock's also derived from gpu_nvml.c of 22.05.8, see
//!   `stock_nvml_calls`).
//!   For the fake-GPU node also the instructions `slurmd -G` executes, as
//!   counted by valgrind's callgrind (when valgrind is installed): exact
//!   where the wall time of this shared machine drifts by a few percent.
//! * `steps`: sequential `srun --gres=gpu:1 true` steps inside one
//!   allocation, time per step; and the instructions one such step's
//!   slurmstepd executes (callgrind), over a range of step environment
//!   sizes (`STEP_ENV_PADS`).
//! * `usage`: `gpu_p_usage_read` for 64 processes of a step on 8 GPUs,
//!   one poll of slurmstepd's job accounting (23.02 on): NVML calls and
//!   instructions (callgrind), both plugins in benches/usage-read.c in
//!   the release's chroot.
//! * `rss`: slurmd's resident memory once the node is idle.
//! * `check`: `gres-rs check --all-nodes` against `slurmd -G`, on a
//!   100,000-line gres.conf.
//!
//! Stock and ours alternate (stock, ours, ours, stock, ...) and medians are
//! reported, to keep a shared machine's noise out of the ratios (a step's
//! instructions: the mean over step environment sizes, `STEP_ENV_PADS`).  Needs
//! root and Debian's Slurm packages, like the real-Slurm tests.

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::chroot::{Chroot, TimedRun};
use harness::testbed::{behaviour_of, Selection, TestBed};
use harness::*;
use slurm_gpu_gres::core::nvml_model;
use standin::{FixtureGpu, FixtureMig};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Options and results
// ---------------------------------------------------------------------------

struct Opts {
    /// Started by `cargo bench` (which passes `--bench`), not by `cargo
    /// test --benches`/`--all-targets`, where the bench does nothing.
    bench: bool,
    quick: bool,
    json: PathBuf,
    only: Option<Vec<String>>,
}

impl Opts {
    fn parse() -> Opts {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut o = Opts { bench: false, quick: false, json: root.join("target").join("bench.json"), only: None };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                // cargo bench passes --bench to harness = false targets
                "--bench" => o.bench = true,
                "--quick" => o.quick = true,
                "--json" => o.json = PathBuf::from(args.next().expect("--json PATH")),
                "--only" => o.only = Some(args.next().expect("--only ROWS").split(',').map(str::to_string).collect()),
                "-h" | "--help" => {
                    println!("cargo bench --bench bench -- [--quick] [--json PATH] [--only slurmd-g,steps,rss,check]");
                    std::process::exit(0);
                }
                other => panic!("unknown argument {other:?} (try --help)"),
            }
        }
        o
    }
    fn wants(&self, group: &str) -> bool {
        match &self.only {
            None => true,
            Some(v) => v.iter().any(|g| g == group),
        }
    }
    /// `full` iterations normally, `quick` with --quick.
    fn n(&self, full: usize, quick: usize) -> usize {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Row {
    group: &'static str,
    /// The Slurm release measured, e.g. "24.11.5".
    release: String,
    what: String,
    metric: String,
    unit: String,
    stock: Option<f64>,
    ours: Option<f64>,
    /// Samples per side.
    n: usize,
    goal: String,
    note: String,
}

impl Row {
    /// Instructions of one `slurmd -G` a side (callgrind), in thousands.
    fn instructions(release: &str, what: String, stock: f64, ours: f64, note: &str) -> Row {
        Row {
            group: "slurmd-g",
            release: release.into(),
            what,
            metric: "instructions `slurmd -G` executes (valgrind callgrind)".into(),
            unit: "k".into(),
            stock: Some(stock / 1e3),
            ours: Some(ours / 1e3),
            n: 1,
            goal: "<= 1.00".into(),
            note: note.into(),
        }
    }
    /// Medians of memory samples (MiB) a side, against the 1 MiB goal.
    fn memory(group: &'static str, release: &str, what: &str, stock: &[f64], ours: &[f64], note: &str) -> Row {
        let (s, o) = (median(stock), median(ours));
        Row {
            group,
            release: release.into(),
            what: what.into(),
            metric: format!("difference ours - stock: {:+.2} MiB", o - s),
            unit: "MiB".into(),
            stock: Some(s),
            ours: Some(o),
            n: stock.len().min(ours.len()),
            goal: "difference < 1 MiB".into(),
            note: note.into(),
        }
    }
    /// A row that a release cannot measure: why, in its note.
    fn not_measured(group: &'static str, release: &str, what: &str, metric: &str, note: String) -> Row {
        Row { group, release: release.into(), what: what.into(), metric: metric.into(), goal: "-".into(), note, ..Default::default() }
    }
    fn ratio(&self) -> Option<f64> {
        match (self.stock, self.ours) {
            (Some(s), Some(o)) if s > 0.0 => Some(o / s),
            _ => None,
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `n` runs per side, alternating which side goes first (stock, ours,
/// ours, stock, ...).
fn alternating(n: usize) -> Vec<Side> {
    (0..n).flat_map(|i| if i % 2 == 0 { [Side::Stock, Side::Ours] } else { [Side::Ours, Side::Stock] }).collect()
}

/// The samples of each side (stock, ours) of values taken in `order`.
fn by_side(order: &[Side], values: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let pick = |want: Side| order.iter().zip(values).filter(|(s, _)| **s == want).map(|(_, v)| *v).collect();
    (pick(Side::Stock), pick(Side::Ours))
}

/// Runs `f(side)` `n` times per side in [`alternating`] order; returns
/// the samples of each side.
fn interleaved<F: FnMut(Side) -> f64>(n: usize, mut f: F) -> (Vec<f64>, Vec<f64>) {
    let order = alternating(n);
    let values: Vec<f64> = order.iter().map(|&side| f(side)).collect();
    by_side(&order, &values)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Stock,
    Ours,
}

// ---------------------------------------------------------------------------
// slurmd -G in a prepared directory
// ---------------------------------------------------------------------------

/// A cluster directory prepared by the harness (slurm.conf, gres.conf,
/// fake devices, our plugins installed) in which `slurmd -G` is run
/// directly, so that only slurmd itself is timed.  On a release whose
/// `slurmd -G` authenticates first (24.11 and later:
/// `Behaviour::slurmd_g_needs_munged`) the harness's cluster stays up
/// for its munged; in a chroot every run is the chroot's slurmd (and
/// valgrind).
struct GDir {
    dir: PathBuf,
    node: String,
    env: Vec<(String, String)>,
    /// The release's chroot (`None`: the host).
    chroot: Option<Chroot>,
    /// Host paths the chroot's commands need besides `dir` (the NVML
    /// stand-in).
    binds: Vec<PathBuf>,
    /// The started cluster whose munged `slurmd -G` needs.
    cluster: Option<Cluster>,
}

impl GDir {
    fn prepare(cfg: &ClusterConfig) -> GDir {
        if behaviour_of(&cfg.slurm_version()).slurmd_g_needs_munged {
            // As Cluster::slurmd_g does it, keeping the cluster.
            let mut c = cfg.clone();
            c.wait_idle = false;
            c.verify_ours_loaded = false;
            let cluster = Cluster::start(c);
            let g = cluster.slurmd_g_in();
            if !g.output.ok() {
                panic!("slurmd -G failed while preparing {}:\n{}", g.dir.display(), g.output);
            }
            if g.our_dir.is_some() {
                g.assert_ours_loaded(&["gres_gpu"]);
            }
            let dir = cluster.layout.root.clone();
            return GDir {
                dir,
                node: cfg.node_name.clone(),
                env: cfg.slurmd_env.clone(),
                chroot: cfg.chroot.clone(),
                binds: cfg.binds.clone(),
                cluster: Some(cluster),
            };
        }
        let keep = std::env::var_os("GRES_RS_KEEP").is_some();
        std::env::set_var("GRES_RS_KEEP", "1");
        let g = Cluster::slurmd_g(cfg);
        if !keep {
            std::env::remove_var("GRES_RS_KEEP");
        }
        let d = GDir {
            dir: g.dir.clone(),
            node: cfg.node_name.clone(),
            env: cfg.slurmd_env.clone(),
            chroot: cfg.chroot.clone(),
            binds: cfg.binds.clone(),
            cluster: None,
        };
        if !g.output.ok() {
            panic!("slurmd -G failed while preparing {}:\n{}", d.dir.display(), g.output);
        }
        if let Some(our) = &g.our_dir {
            let names: Vec<&str> = ["gres_gpu"].into_iter().filter(|n| our.join(format!("{n}.so")).exists()).collect();
            g.assert_ours_loaded(&names);
        }
        d
    }
    fn slurm_conf(&self) -> PathBuf {
        self.dir.join("etc").join("slurm.conf")
    }
    /// `prog` (a host tool, or in the chroot the chroot's, run there) with `args`, the
    /// directory's slurm.conf and nothing of Slurm's or our environment.
    fn command(&self, prog: &str, args: &[&str]) -> Command {
        let mut cmd = match (&self.cluster, &self.chroot) {
            (Some(c), _) => c.command(prog),
            // A chroot's release whose `slurmd -G` needs no munged (23.02).
            (None, Some(r)) => {
                let binds: Vec<PathBuf> = std::iter::once(self.dir.clone()).chain(self.binds.iter().cloned()).collect();
                r.command(r.tool(prog).unwrap_or_else(|| PathBuf::from(prog)), &binds)
            }
            (None, None) => Command::new(tool(prog)),
        };
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("SLURM_") || k.starts_with("GRES_RS_") || k == "LD_LIBRARY_PATH" {
                cmd.env_remove(&k);
            }
        }
        cmd.args(args).env("SLURM_CONF", self.slurm_conf()).env("LC_ALL", "C").current_dir(&self.dir);
        cmd.stdin(Stdio::null());
        cmd
    }
    /// A program of the release as `slurmd -G` runs it: the path inside
    /// the chroot, or the host's.
    fn program(&self, name: &str) -> String {
        let p = match &self.chroot {
            Some(r) => r.tool(name).unwrap_or_else(|| panic!("no {name} in chroot {}", r.root().display())),
            None => tool(name),
        };
        p.to_string_lossy().into_owned()
    }
    fn slurmd_g(&self, extra_env: &[(&str, &Path)]) -> Command {
        let mut cmd = self.command("slurmd", &["-G", "-N", &self.node]);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd
    }
    /// `slurmd -G` as one command of `Chroot::timed_runs`.
    fn timed_run(&self) -> TimedRun {
        let mut env = vec![("SLURM_CONF".to_string(), self.slurm_conf().to_string_lossy().into_owned())];
        env.extend(self.env.iter().cloned());
        TimedRun { argv: vec![self.program("slurmd"), "-G".into(), "-N".into(), self.node.clone()], dir: self.dir.clone(), env }
    }
}

impl Drop for GDir {
    fn drop(&mut self) {
        // A cluster removes its own directory (and keeps it under
        // GRES_RS_KEEP=1).
        if self.cluster.is_some() {
            return;
        }
        // GRES_RS_KEEP=1 keeps it for a closer look (perf, strace), as the
        // harness keeps its clusters.
        if std::env::var_os("GRES_RS_KEEP").is_some() {
            eprintln!("bench: kept {}", self.dir.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Wall times (seconds) of `runs` `slurmd -G` a side, in [`alternating`]
/// order: on the host each timed from here; in a chroot timed inside it,
/// all in one mount namespace (`Chroot::timed_runs`: entering the chroot
/// costs more than a `slurmd -G`).
fn slurmd_g_times(what: &str, stock: &GDir, ours: &GDir, runs: usize) -> (Vec<f64>, Vec<f64>) {
    let order = alternating(runs);
    let times: Vec<f64> = match &stock.chroot {
        Some(root) => root
            .timed_runs(
                &[stock.dir.clone(), ours.dir.clone()].into_iter().chain(stock.binds.iter().cloned()).collect::<Vec<_>>(),
                &[stock.timed_run(), ours.timed_run()],
                &order.iter().map(|s| usize::from(*s == Side::Ours)).collect::<Vec<_>>(),
            )
            .unwrap_or_else(|e| panic!("{what}: {e}")),
        None => order
            .iter()
            .map(|&side| {
                let d = if side == Side::Stock { stock } else { ours };
                let (t, out) = timed(d.slurmd_g(&[]));
                assert!(out.status.success(), "{what} ({side:?}): slurmd -G failed:\n{}", text(&out));
                t
            })
            .collect(),
    };
    by_side(&order, &times)
}

/// The instructions one `slurmd -G` in `d` executes, user space, counted
/// by valgrind's callgrind (the release's: the chroot's valgrind on the
/// chroot's slurmd; `None` without valgrind).  With
/// `GRES_RS_CALLGRIND_DIR=<dir>` the profiles stay there
/// (`<dir>/<label>.<pid>.out`, one per run, for `callgrind_annotate`).
fn instructions(d: &GDir, label: &str) -> Option<f64> {
    if d.chroot.as_ref().map_or(!tool("valgrind").is_file(), |r| r.tool("valgrind").is_none()) {
        eprintln!("bench: no valgrind for {label}");
        return None;
    }
    let keep = std::env::var_os("GRES_RS_CALLGRIND_DIR").map(PathBuf::from);
    // In a chroot the profile is written in the (bound) directory first.
    let out_dir = match (&keep, &d.chroot) {
        (Some(k), None) => Some(k.clone()),
        (Some(_), Some(_)) => Some(d.dir.clone()),
        (None, _) => None,
    };
    if let Some(k) = &keep {
        // valgrind does not make the directory (on the host the profile
        // is written there directly).
        let _ = std::fs::create_dir_all(k);
    }
    let out_file = match &out_dir {
        Some(dir) => format!("--callgrind-out-file={}/{label}.%p.out", dir.display()),
        None => "--callgrind-out-file=/dev/null".to_string(),
    };
    let slurmd = d.program("slurmd");
    let mut cmd = d.command("valgrind", &["--tool=callgrind", &out_file, &slurmd, "-G", "-N", &d.node]);
    for (k, v) in &d.env {
        cmd.env(k, v);
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!("bench: valgrind slurmd -G ({label}) failed:\n{}", text(&out));
        return None;
    }
    if let (Some(k), Some(_)) = (&keep, &d.chroot) {
        for e in std::fs::read_dir(&d.dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&format!("{label}.")) && name.ends_with(".out") {
                if let Err(err) = std::fs::copy(e.path(), k.join(&name)) {
                    eprintln!("bench: keeping {}: {err}", e.path().display());
                }
            }
        }
    }
    text(&out).lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().parse::<f64>().ok()))
}

/// Runs a command to completion; returns its wall time and output.
fn timed(mut cmd: Command) -> (f64, Output) {
    let t = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (t.elapsed().as_secs_f64(), out)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn gres_lines(out: &Output) -> usize {
    text(out).lines().filter(|l| l.contains("Gres Name=gpu")).count()
}

// ---------------------------------------------------------------------------
// NVML nodes
// ---------------------------------------------------------------------------

/// The GPUs of a stand-in fixture file (`standin::parse_fixture`, the
/// Rust reader of the format `nvml_standin.c` reads).
fn read_fixture(path: &Path) -> Vec<FixtureGpu> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    standin::parse_fixture(&text)
}

/// NVML calls stock gpu/nvml (src/plugins/gpu/nvml/gpu_nvml.c of 22.05.8,
/// `_get_system_gpu_list_nvml`, built with MIG support and NVML 12's
/// `NVML_NVLINK_MAX_LINKS` = 18) makes to detect `gpus`:
/// init, driver and NVML versions, device count, shutdown; per GPU a
/// handle and PCI info for the bus-id table, then handle, MIG mode, name,
/// UUID, PCI info, minor number, CPU affinity, NVLink state of all 18
/// lanes (one call when NVLink is not supported) plus the remote PCI info
/// of each active lane, the supported memory clocks and the graphics
/// clocks of each (at most 5) memory clock; per MIG GPU the maximum MIG
/// count, one handle per MIG device (plus the failing one when fewer than
/// the maximum exist), and per MIG device handle, UUID, GPU and compute
/// instance ids and attributes; the driver version once more for the first
/// MIG device.
fn stock_nvml_calls(gpus: &[FixtureGpu]) -> u64 {
    let mut calls = 5u64;
    let mut mig_driver_asked = false;
    for g in gpus {
        calls += 2;
        calls += 7;
        calls += if g.lanes == 0 { 1 } else { 18 + g.links.len() as u64 };
        if g.mig_mode {
            let migs = g.migs.len() as u64;
            calls += 1 + migs + u64::from(migs < u64::from(g.mig_max)) + 5 * migs;
            if migs > 0 && !mig_driver_asked {
                calls += 1;
                mig_driver_asked = true;
            }
        }
        calls += 1 + if g.mem_clocks == 0 { 0 } else { u64::from(g.mem_clocks.min(5)) };
    }
    calls
}

/// Slurm's type name of a GPU or of one of its MIG devices
/// (`core::nvml_model`, the rule our gpu/nvml applies).
fn type_name(g: &FixtureGpu, mig: Option<&FixtureMig>) -> String {
    let t = nvml_model::gpu_type_from_name(&g.name);
    match mig {
        None => t,
        Some(m) => nvml_model::mig_type(&t, m.slices, m.mem_mb),
    }
}

/// The fixture's node as `fake_gpus.conf` lines (what the stock side
/// reads instead of asking NVML), and the node's `Gres=`: the type names,
/// NVLink strings, MIG capability minors and device files by the rules of
/// `core::nvml_model`, as our gpu/nvml builds them from NVML.
fn fake_gpus_of(gpus: &[FixtureGpu], cpus: u32, mig_minors: &Path) -> (String, String) {
    let minors = std::fs::read_to_string(mig_minors).unwrap_or_default();
    let dev = nvml_model::DEV_DIR;
    let mut lines = String::new();
    let mut types: Vec<(String, u32)> = Vec::new();
    let mut count_type = |t: &str| match types.iter_mut().find(|(n, _)| n == t) {
        Some((_, c)) => *c += 1,
        None => types.push((t.to_string(), 1)),
    };
    let n = gpus.len();
    let lut: Vec<Option<String>> = gpus.iter().map(|g| Some(g.bus_id.clone())).collect();
    for (i, g) in gpus.iter().enumerate() {
        let gpu_file = nvml_model::device_file(dev, g.minor);
        if g.mig_mode && !g.migs.is_empty() {
            let m = g.migs.len();
            for (j, mig) in g.migs.iter().enumerate() {
                let (gi_minor, ci_minor) =
                    nvml_model::mig_cap_minors(&minors, g.minor, mig.gi, mig.ci).unwrap_or_else(|e| panic!("{}: {e}", mig_minors.display()));
                let files = nvml_model::mig_files(dev, &gpu_file, gi_minor, ci_minor);
                let t = type_name(g, Some(mig));
                count_type(&t);
                let _ = writeln!(lines, "{t}|{cpus}|{}|{}|{files}|{}|nvidia_gpu_env", g.cpus, nvml_model::empty_links(j, m), mig.uuid);
            }
        } else {
            let links = nvml_model::links_string(i, n, &lut, &g.links);
            let t = type_name(g, None);
            count_type(&t);
            let _ = writeln!(lines, "{t}|{cpus}|{}|{links}|{gpu_file}|(null)|nvidia_gpu_env", g.cpus);
        }
    }
    let gres = types.iter().map(|(t, c)| format!("gpu:{t}:{c}")).collect::<Vec<_>>().join(",");
    (lines, gres)
}

/// Where the stock gpu/nvml plugin reads MIG minors (the only place; ours
/// too, in a release build).
const MIG_MINORS_PATH: &str = nvml_model::MIG_MINORS_PATH;
/// Set once the bench runs in its own mount namespace.
const MOUNT_NS_ENV: &str = "GRES_RS_BENCH_MOUNT_NS";

/// Put the stand-in's `mig-minors` where the stock plugin reads it, so
/// that the MIG node compares like with like: the bench re-runs itself in
/// a mount namespace of its own (`unshare -m`; it and its children only),
/// where a tmpfs over `/proc/driver` holds the file.  `false` (the MIG
/// node's stock side then reads `fake_gpus.conf`) where that cannot be
/// done.
fn mig_minors_in_place(opts: &Opts) -> bool {
    if !opts.wants("slurmd-g") {
        return false;
    }
    if std::env::var_os(MOUNT_NS_ENV).is_none() {
        let probe = Command::new("unshare").args(["-m", "--propagation", "private", "true"]).status();
        if !probe.map(|s| s.success()).unwrap_or(false) {
            eprintln!("bench: no mount namespace (unshare -m); the MIG node's stock side reads fake_gpus.conf");
            return false;
        }
        let exe = std::env::current_exe().expect("the bench's own path");
        // Returns only if the exec failed.
        let err = std::os::unix::process::CommandExt::exec(
            Command::new("unshare").args(["-m", "--propagation", "private"]).arg(exe).args(std::env::args_os().skip(1)).env(MOUNT_NS_ENV, "1"),
        );
        eprintln!("bench: unshare -m: {err}; the MIG node's stock side reads fake_gpus.conf");
        return false;
    }
    let mounted = Command::new("mount").args(["-t", "tmpfs", "gres-rs-bench", "/proc/driver"]).status().map(|s| s.success()).unwrap_or(false);
    let placed = mounted
        && Path::new(MIG_MINORS_PATH).parent().is_some_and(|d| std::fs::create_dir_all(d).is_ok())
        && std::fs::copy(standin::fixture("mig-minors"), MIG_MINORS_PATH).is_ok();
    if !placed {
        eprintln!("bench: could not place {MIG_MINORS_PATH} in the bench's mount namespace; the MIG node's stock side reads fake_gpus.conf");
    }
    placed
}

/// The node of a fixture for `slurmd -G`: ours asks the NVML stand-in; so
/// does stock with `stock_nvml` (the stock gpu_nvml.so), else it reads the
/// same GPUs from `fake_gpus.conf`.  Ours is the release build, which
/// reads `mig-minors` where the driver has it, as stock does: when that
/// file could not be put in place (`mig_minors_placed` false), ours on a
/// MIG node is the release build with the feature `test-hooks` (harness
/// `test_build_dir`), told the stand-in's file by `GRES_RS_MIG_MINORS`.
fn nvml_node(side: Side, fixture: &Path, sockets: u32, cores: u32, threads: u32, stock_nvml: Option<&Path>, mig_minors_placed: bool) -> ClusterConfig {
    let gpus = read_fixture(fixture);
    let cpus = sockets * cores * threads;
    let minors = standin::fixture("mig-minors");
    let (fake, gres) = fake_gpus_of(&gpus, cpus, &minors);
    let plugins = match side {
        Side::Stock => PluginSet::Stock,
        Side::Ours => PluginSet::Ours,
    };
    let mut c = ClusterConfig::gpus(plugins, 0).with_cpus(sockets, cores, threads).with_gres(&gres, "AutoDetect=nvml\n").with_binds(standin::chroot_binds());
    c.node_name = "gpunode".into();
    c.real_memory_mb = 1000;
    let mut standin_env = standin::daemon_env(fixture);
    // In a chroot: the driver's mig-minors file for both sides (the
    // chroot's commands mount it where stock reads it).
    standin_env.push(("GRES_RS_TEST_MIG_MINORS".into(), minors.to_string_lossy().into_owned()));
    match (side, stock_nvml) {
        (Side::Stock, None) => c.fake_gpus_conf = Some(fake),
        (Side::Stock, Some(so)) => {
            c.extra_stock_plugins = vec![so.to_path_buf()];
            c.slurmd_env = standin_env;
        }
        (Side::Ours, _) => {
            c.slurmd_env = standin_env;
            if !mig_minors_placed && gpus.iter().any(|g| g.mig_mode) {
                c.plugin_build_dir = Some(test_build_dir(true));
                c.slurmd_env.push(("GRES_RS_MIG_MINORS".into(), minors.to_string_lossy().into_owned()));
            }
        }
    }
    c
}

/// `slurmd -G` on two prepared directories, interleaved, `runs` times
/// each (a full run).
#[allow(clippy::too_many_arguments)]
fn bench_slurmd_g(opts: &Opts, release: &str, what: &str, stock: &GDir, ours: &GDir, runs: usize, goal: &str, note: &str) -> Row {
    let n = opts.n(runs, 7);
    // Both must configure GPUs.  (The numbers of lines may differ: with
    // gres/mps or gres/shard loaded, stock splits a MIG device into one
    // GPU per device file, ours keeps it one GPU: docs/deviations.md,
    // MPS/shard 6.)
    let (_, s_out) = timed(stock.slurmd_g(&[]));
    let (_, o_out) = timed(ours.slurmd_g(&[]));
    let (sl, ol) = (gres_lines(&s_out), gres_lines(&o_out));
    if std::env::var_os("GRES_RS_BENCH_SHOW").is_some() {
        eprintln!("---- {what}: stock ----\n{}\n---- ours ----\n{}", text(&s_out), text(&o_out));
    }
    assert!(sl > 0 && ol > 0, "{what}: stock printed {sl} GPU lines, ours {ol}\n---- stock ----\n{}\n---- ours ----\n{}", text(&s_out), text(&o_out));
    let lines = if sl == ol { format!("{sl} `Gres Name=gpu` lines") } else { format!("`Gres Name=gpu` lines: stock {sl}, ours {ol}") };
    let (s, o) = slurmd_g_times(what, stock, ours, n);
    let ms = |v: Vec<f64>| v.into_iter().map(|t| t * 1000.0).collect::<Vec<_>>();
    let (s, o) = (ms(s), ms(o));
    Row {
        group: "slurmd-g",
        release: release.into(),
        what: format!("{what} ({lines})"),
        metric: "`slurmd -G` wall time, median".into(),
        unit: "ms".into(),
        stock: Some(median(&s)),
        ours: Some(median(&o)),
        n,
        goal: goal.into(),
        note: note.into(),
    }
}

/// A copy of a stand-in fixture whose GPUs are attached to this machine's
/// CPUs 0 (first half of the GPUs) and 1 (second half): slurmd converts
/// NVML's CPU affinity with the real machine's topology and refuses CPUs
/// the machine lacks.
fn two_cpu_fixture(name: &str) -> PathBuf {
    let src = standin::fixture(name);
    let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let n = text.lines().filter(|l| l.trim() == "gpu").count();
    let (mut gpu, mut out) = (0usize, String::new());
    for line in text.lines() {
        if line.trim() == "gpu" {
            gpu += 1;
        }
        if line.trim_start().starts_with("cpus ") {
            out.push_str(if gpu <= n / 2 { "cpus 0\n" } else { "cpus 1\n" });
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    let dst = standin::scratch_dir().join(format!("bench-{name}"));
    std::fs::write(&dst, out).unwrap_or_else(|e| panic!("{}: {e}", dst.display()));
    dst
}

/// Where ours' `slurmd -G` time goes on an NVML node (stderr only):
/// the same run with NVML failing at init (library loaded, nothing
/// detected) and with a fixture of no GPU.
fn explain_nvml(ours: &GDir, fixture: &Path) {
    let variants = [
        ("as measured", fixture.to_path_buf()),
        ("nvmlInit fails", standin::scratch_dir().join("bench-init-fails.conf")),
        ("no GPU", standin::scratch_dir().join("bench-no-gpu.conf")),
    ];
    let _ = std::fs::write(&variants[1].1, "init_error 999\n");
    let _ = std::fs::write(&variants[2].1, "driver 535.104.05\n");
    for (label, f) in &variants {
        let t: Vec<f64> = (0..15)
            .map(|_| {
                let (t, out) = timed(ours.slurmd_g(&[("GRES_RS_NVML_FIXTURE", f)]));
                let _ = out;
                t * 1000.0
            })
            .collect();
        eprintln!("bench: explain {}: ours slurmd -G, {label}: median {:.1} ms", fixture.display(), median(&t));
    }
}

/// The slurmd-g rows of release `bed` with our build for it (`build`).
fn rows_slurmd_g(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, mig_minors: bool, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let h100 = two_cpu_fixture("h100x8.conf");
    let mig = two_cpu_fixture("a100x8_mig.conf");
    const FAKE: &str = "fake-GPU node: 8 GPUs in fake_gpus.conf";
    const NVML: [&str; 2] = ["NVML node: 8x H100 with NVLink", "NVML node: 8x A100 x 7 MIG = 56 MIG devices"];
    if let Err(e) = build {
        for what in std::iter::once(FAKE).chain(NVML) {
            rows.push(Row::not_measured("slurmd-g", v, what, "`slurmd -G`", format!("not measured: our build for Slurm {v} failed: {e}")));
        }
        return;
    }
    // Ours for a chroot's release is the build for it (on the host the
    // workspace's, as the config has it).
    let ours_cfg = |c: ClusterConfig| match (&bed.chroot, build) {
        (Some(_), Ok(b)) => b.apply(bed.on(c)),
        _ => bed.on(c),
    };
    // (a1) the same fake-GPU node on both sides.
    let fake_node = |side: Side| {
        let mut c = nvml_node(Side::Stock, &h100, 1, 2, 1, None, mig_minors);
        c.plugins = if side == Side::Stock { PluginSet::Stock } else { PluginSet::Ours };
        c.gres_conf = String::new();
        c
    };
    {
        let (s, o) = (GDir::prepare(&bed.on(fake_node(Side::Stock))), GDir::prepare(&ours_cfg(fake_node(Side::Ours))));
        let where_ = if bed.chroot.is_some() { ", timed inside the chroot" } else { "" };
        // Like with like, and a small difference: more runs.
        rows.push(bench_slurmd_g(opts, v, FAKE, &s, &o, 401, "<= 1.00", &format!("both sides read fake_gpus.conf{where_}")));
        let valgrind = if bed.chroot.is_some() { "the chroot's valgrind on its slurmd; " } else { "" };
        match (instructions(&s, &format!("{v}-stock-fake")), instructions(&o, &format!("{v}-ours-fake"))) {
            (Some(stock), Some(ours)) => rows.push(Row::instructions(
                v,
                FAKE.into(),
                stock,
                ours,
                &format!("{valgrind}the CPU part of the wall time, without the machine's noise (one run a side is exact)"),
            )),
            _ => rows.push(Row::not_measured(
                "slurmd-g",
                v,
                FAKE,
                "instructions `slurmd -G` executes (valgrind callgrind)",
                "not measured: valgrind missing or failed (see stderr)".into(),
            )),
        }
    }
    // (a2, a3) NVML stand-in nodes: the host's stock gpu_nvml.so built
    // from Debian's source, a chroot's from the test bed; in a chroot the
    // stand-in's mig-minors is where the driver has it, for both sides.
    let stock_nvml = match std::env::var_os("GRES_RS_STOCK_GPU_NVML") {
        Some(p) if bed.chroot.is_none() => Some(PathBuf::from(p)),
        _ => bed.stock_gpu_nvml().map_err(|e| eprintln!("bench: {e}")).ok(),
    };
    let mig_minors = mig_minors || bed.chroot.is_some();
    // The stock plugin reads MIG minors from MIG_MINORS_PATH only: without
    // it in place, the MIG node's stock side reads fake_gpus.conf.
    for (label, fixture, mig_node) in [("8x H100 with NVLink", &h100, false), ("8x A100 x 7 MIG = 56 MIG devices", &mig, true)] {
        let stock_so = if mig_node && !mig_minors { None } else { stock_nvml.as_deref() };
        let stock = GDir::prepare(&bed.on(nvml_node(Side::Stock, fixture, 1, 2, 1, stock_so, mig_minors)));
        let ours = GDir::prepare(&ours_cfg(nvml_node(Side::Ours, fixture, 1, 2, 1, None, mig_minors)));
        let (goal, note) = match stock_so {
            Some(_) => (
                "<= 1.00",
                if bed.chroot.is_some() {
                    "AutoDetect=nvml on the NVML stand-in, both sides, timed inside the chroot; stock gpu_nvml.so of the test bed (TestBed::stock_gpu_nvml)"
                } else {
                    "AutoDetect=nvml on the NVML stand-in, both sides; stock gpu_nvml.so of the test bed, built from Debian's slurm-wlm source (Debian ships none)"
                },
            ),
            // Not like with like: no goal.
            None => {
                ("-", "ours: AutoDetect=nvml on the NVML stand-in; stock: the same GPUs from fake_gpus.conf (no stock gpu_nvml.so, or no mig-minors for it)")
            }
        };
        rows.push(bench_slurmd_g(opts, v, &format!("NVML node: {label}"), &stock, &ours, 101, goal, note));
        if stock_so.is_some() {
            let tag = if mig_node { "mig" } else { "nvlink" };
            if let (Some(s), Some(o)) = (instructions(&stock, &format!("{v}-stock-{tag}")), instructions(&ours, &format!("{v}-ours-{tag}"))) {
                rows.push(Row::instructions(v, format!("NVML node: {label}"), s, o, "both sides include the NVML stand-in's own work"));
            }
        }
        if std::env::var_os("GRES_RS_BENCH_EXPLAIN").is_some() {
            explain_nvml(&ours, fixture);
        }
        // NVML calls: one counted run a side (stock counted too when it has
        // gpu_nvml.so); the count derived from gpu_nvml.c checks it.
        let count = |d: &GDir, who: &str| -> (f64, Vec<(String, usize)>) {
            let calls = standin::scratch_dir().join(format!("bench-calls-{who}-{}.log", fixture.file_stem().unwrap_or_default().to_string_lossy()));
            let _ = std::fs::remove_file(&calls);
            let (_, out) = timed(d.slurmd_g(&[("GRES_RS_NVML_CALLS", &calls)]));
            assert!(out.status.success(), "{}", text(&out));
            let log = std::fs::read_to_string(&calls).unwrap_or_default();
            let _ = std::fs::remove_file(&calls);
            let mut by_fn: Vec<(String, usize)> = Vec::new();
            for l in log.lines() {
                let f = l.split_whitespace().next().unwrap_or("").to_string();
                match by_fn.iter_mut().find(|(n, _)| *n == f) {
                    Some((_, c)) => *c += 1,
                    None => by_fn.push((f, 1)),
                }
            }
            (log.lines().count() as f64, by_fn)
        };
        let (ours_calls, by_fn) = count(&ours, "ours");
        eprintln!("bench: NVML calls of ours for {label}: {by_fn:?}");
        let derived = stock_nvml_calls(&read_fixture(fixture)) as f64;
        let (stock_calls, note) = if stock_so.is_some() {
            let (n, by_fn) = count(&stock, "stock");
            eprintln!("bench: NVML calls of stock for {label}: {by_fn:?}");
            let derived = if bed.chroot.is_none() { format!(" (stock derived from gpu_nvml.c 22.05.8: {derived:.0})") } else { String::new() };
            (n, format!("both counted by the stand-in{derived}"))
        } else {
            (derived, "ours counted by the stand-in; stock derived from gpu_nvml.c (22.05.8), not measured".to_string())
        };
        rows.push(Row {
            group: "slurmd-g",
            release: v.into(),
            what: format!("NVML node: {label}"),
            metric: "NVML calls during `slurmd -G`".into(),
            unit: "calls".into(),
            stock: Some(stock_calls),
            ours: Some(ours_calls),
            n: 1,
            goal: "<= 1.00".into(),
            note,
        });
    }
}

// ---------------------------------------------------------------------------
// Step launch
// ---------------------------------------------------------------------------

/// The steps rows of release `bed` with our build for it (`build`); the
/// steps are timed inside the allocation (in the chroot for a chroot's
/// release).
fn rows_steps(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let steps = opts.n(20, 5);
    let rounds = opts.n(25, 3);
    let what = format!("{steps} sequential `srun --gres=gpu:1 true` steps in one allocation");
    let ours = match build {
        Ok(b) if bed.chroot.is_some() => b.apply(bed.config(PluginSet::Ours, 4)),
        Ok(_) => bed.config(PluginSet::Ours, 4),
        Err(e) => {
            rows.push(Row::not_measured("steps", v, &what, "time per step, median of rounds", format!("not measured: our build for Slurm {v} failed: {e}")));
            return;
        }
    };
    let stock = Cluster::start(bed.config(PluginSet::Stock, 4));
    let ours = Cluster::start(ours);
    ours.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:1"]);
    let script = format!(
        "s=$(date +%s%N); i=0; while [ $i -lt {steps} ]; do srun --gres=gpu:1 true || exit 1; i=$((i+1)); done; e=$(date +%s%N); echo STEP_NS=$((e-s))"
    );
    let round = |c: &Cluster| -> f64 {
        let out = c.run("salloc", &["--gres=gpu:1", "bash", "-c", &script], Duration::from_secs(600));
        let ns: f64 = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("STEP_NS="))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("step round failed:\n{out}\n{}", c.log_tails(20)));
        ns / 1e6 / steps as f64
    };
    // Warm-up (first allocation, page cache).
    round(&stock);
    round(&ours);
    let (s, o) = interleaved(rounds, |side| round(if side == Side::Stock { &stock } else { &ours }));
    // slurmstepd's memory: a step's task reads its parent's VmRSS.
    let stepd_rss = |c: &Cluster| -> f64 {
        let out = c.srun(&["--gres=gpu:1", "sh", "-c", "awk '/^VmRSS/{print $2}' /proc/$PPID/status"]);
        out.stdout.trim().parse::<f64>().unwrap_or_else(|_| panic!("stepd VmRSS:\n{out}")) / 1024.0
    };
    let (rs, ro) = interleaved(opts.n(5, 2), |side| stepd_rss(if side == Side::Stock { &stock } else { &ours }));
    rows.push(Row {
        group: "steps",
        release: v.into(),
        what,
        metric: "time per step, median of rounds".into(),
        unit: "ms".into(),
        stock: Some(median(&s)),
        ours: Some(median(&o)),
        n: rounds,
        goal: "<= 1.02".into(),
        note: "4 fake GPUs, GresTypes=gpu,mps,shard".into(),
    });
    rows.push(Row::memory(
        "steps",
        v,
        "slurmstepd resident memory of a `srun --gres=gpu:1` step (VmRSS)",
        &rs,
        &ro,
        "read by the step's task from /proc/$PPID/status",
    ));
    drop((stock, ours));
    rows_stepd_instructions(opts, bed, build, rows);
}

/// The mean of counts.
fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// `ours - stock` per step environment size (the mean of the rounds), in
/// thousands, in the order of the sizes.
fn by_layout_k(stock: &[f64], ours: &[f64]) -> String {
    let mut d = [(0.0, 0); STEP_ENV_PADS];
    for (j, (s, o)) in stock.iter().zip(ours).enumerate() {
        let e = &mut d[j % STEP_ENV_PADS];
        e.0 += o - s;
        e.1 += 1;
    }
    d.iter().filter(|e| e.1 > 0).map(|(sum, n)| format!("{:+.0}", sum / *n as f64 / 1e3)).collect::<Vec<_>>().join(" ")
}

/// The step-instruction runs give each step's environment one more
/// variable, `GRES_RS_BENCH_PAD`, of `k * 8 KiB` bytes for `k` in
/// `0..STEP_ENV_PADS`: users' environments differ in size, and so does
/// where slurmstepd's heap stands when its own code `xcalloc`s.  glibc's
/// `calloc` clears only the part of a block that the heap had in use
/// before (memory fresh from the kernel is zero), so the same step's
/// instructions depend on the sizes of what was allocated before it by
/// up to some 250,000 instructions (24.11.5's `setenvf` and
/// `env_array_merge` `xcalloc` 256 KiB buffers): a side that keeps 22 KiB
/// less on the heap (ours: the step's device lists as Rust data, stock:
/// five Slurm lists and twelve device records) can count 80,000 more or
/// 80,000 fewer in one layout.  Sixteen sizes 8 KiB apart step the heap
/// through the 128 KiB by which glibc grows it, and the rows report the
/// mean over them, the same sizes for both sides: the cost of a step
/// whatever its environment.  Each size stays below the kernel's 128 KiB
/// limit on one environment string.
const STEP_ENV_PADS: usize = 16;
const STEP_ENV_PAD_STEP: usize = 8 * 1024;

/// How the step-instruction clusters install the plugins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepdSide {
    Stock,
    /// Ours among the stock files, one `PluginDir` entry as stock has
    /// (`ClusterConfig::single_plugin_dir`): the plugins' own cost.
    OursOneDir,
    /// `PluginDir=<ours>:<stock>`, as the README installs them: slurmd
    /// also looks in our directory first for every other plugin.
    OursFirst,
}

impl StepdSide {
    fn label(self) -> &'static str {
        match self {
            StepdSide::Stock => "stock",
            StepdSide::OursOneDir => "ours-onedir",
            StepdSide::OursFirst => "ours-first",
        }
    }
}

/// The instructions a step's slurmstepd executes on each side, counted by
/// callgrind: each side's slurmd starts its slurmstepd through a wrapper
/// (`slurmd -d <wrapper>`) that runs it under the release's valgrind
/// (`--callgrind-out-file=<dir>/cg.%p.out`), with a dump before every
/// `fork`/`vfork` and `execve` (a dump zeroes the counters, so the parts
/// of a process and of its forked children add up without counting the
/// parent's part twice).  A step is one `srun --gres=gpu:1 true`: the
/// step's slurmstepd and its task's fork up to the exec of `true`, which
/// callgrind does not follow.  The daemons log at info without
/// DebugFlags=Gres, as a production node does, and track processes with
/// proctrack/pgid (linuxproc's walk of /proc depends on the machine).  `n` steps a side in
/// rotating order after one warm-up each; `None` without valgrind.
fn stepd_instructions(opts: &Opts, bed: &TestBed, build: &testbed::OurBuild, sides: &[StepdSide]) -> Option<(Vec<Vec<f64>>, usize)> {
    let valgrind_missing = bed.chroot.as_ref().map_or(!tool("valgrind").is_file(), |r| r.tool("valgrind").is_none());
    if valgrind_missing {
        eprintln!("bench: no valgrind for Slurm {}", bed.version);
        return None;
    }
    let keep = std::env::var_os("GRES_RS_CALLGRIND_DIR").map(PathBuf::from);
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("target/tmp/bench-stepd-{}", bed.version));
    let _ = std::fs::remove_dir_all(&base);
    let stepd = bed.chroot.as_ref().and_then(|r| r.tool("slurmstepd")).unwrap_or_else(|| tool("slurmstepd"));
    let side_dir = |side: StepdSide| base.join(side.label());
    let mut clusters = Vec::new();
    for &side in sides {
        let dir = side_dir(side);
        std::fs::create_dir_all(&dir).expect("bench: stepd profile directory");
        let wrapper = dir.join("slurmstepd-callgrind");
        let script = format!(
            "#!/bin/sh\nexec valgrind --tool=callgrind --dump-before=fork --dump-before=vfork --dump-before=execve --log-file={d}/vg.%p.log --callgrind-out-file={d}/cg.%p.out {stepd} \"$@\"\n",
            d = dir.display(),
            stepd = stepd.display()
        );
        std::fs::write(&wrapper, script).expect("bench: stepd wrapper");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("bench: stepd wrapper mode");
        }
        let mut cfg = bed.config(if side == StepdSide::Stock { PluginSet::Stock } else { PluginSet::Ours }, 4);
        if side != StepdSide::Stock && bed.chroot.is_some() {
            cfg = build.apply(cfg);
        }
        cfg.single_plugin_dir = side == StepdSide::OursOneDir;
        // proctrack/linuxproc reads every process's /proc/<pid>/stat to
        // find the step's, which made the count vary by up to 470,000
        // with what else ran on the machine.
        cfg.proctrack = "proctrack/pgid".into();
        cfg.slurmd_debug = "info".into();
        cfg.debug_gres = false;
        cfg.slurmd_args = vec!["-d".into(), wrapper.display().to_string()];
        let c = Cluster::start(cfg.with_binds([dir.clone()]));
        if side != StepdSide::Stock {
            c.assert_stepd_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard"], &["--gres=gpu:1"]);
        }
        clusters.push(c);
    }
    // The profiles of one step: every process of it has ended once its
    // log has callgrind's closing lines or it is gone.
    let one_step = |i: usize, label: &str, pad: usize| -> (f64, usize) {
        let (c, side) = (&clusters[i], sides[i]);
        let dir = side_dir(side);
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("cg.") || name.starts_with("vg.") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let export = format!("--export=ALL,GRES_RS_BENCH_PAD={}", "x".repeat(pad));
        let out = c.srun_timeout(&["--gres=gpu:1", &export, "true"], Duration::from_secs(300));
        assert!(out.ok(), "step under callgrind ({side:?}) failed:\n{out}\n{}", c.log_tails(20));
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            // vg.<pid>.log: the task's fork execs `true`, which runs
            // without valgrind, so its log never closes.
            let logs: Vec<(bool, String)> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = name.strip_prefix("vg.")?.strip_suffix(".log")?.to_string();
                    let log = std::fs::read_to_string(e.path()).unwrap_or_default();
                    Some((log.contains("Collected") || !Path::new("/proc").join(&pid).exists(), log))
                })
                .collect();
            if !logs.is_empty() && logs.iter().all(|(done, _)| *done) {
                break;
            }
            let logs: Vec<String> = logs.into_iter().map(|(_, l)| l).collect();
            assert!(Instant::now() < deadline, "bench: the step's slurmstepd under callgrind ({side:?}) did not end:\n{}", logs.join("\n"));
            std::thread::sleep(Duration::from_millis(100));
        }
        let (mut total, mut files) = (0.0, 0);
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("cg.") {
                continue;
            }
            // One part of one process (a process that execs leaves an
            // empty file after its last dump).
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            if text.is_empty() {
                continue;
            }
            let n = text.lines().find_map(|l| l.strip_prefix("summary:")).and_then(|v| v.trim().parse::<f64>().ok());
            total += n.unwrap_or_else(|| panic!("bench: no summary line in {}", e.path().display()));
            files += 1;
            if let Some(k) = &keep {
                let _ = std::fs::create_dir_all(k);
                let _ = std::fs::copy(e.path(), k.join(format!("{}-{label}-stepd.{name}", bed.version)));
            }
        }
        (total, files)
    };
    // Warm-up: the first step of a node (page cache, first allocation).
    for (i, side) in sides.iter().enumerate() {
        one_step(i, &format!("warmup-{}", side.label()), 0);
    }
    let mut counts = vec![Vec::new(); sides.len()];
    let mut files = 0;
    // Every side runs each environment size once a round, in the same
    // order, so `counts[side][j]` are one layout; which side goes first
    // rotates from step to step.
    for round in 0..opts.n(2, 1) {
        for layout in 0..STEP_ENV_PADS {
            let pad = layout * STEP_ENV_PAD_STEP;
            for k in 0..sides.len() {
                let i = (round * STEP_ENV_PADS + layout + k) % sides.len();
                let (t, f) = one_step(i, &format!("{}-{round}-pad{layout}", sides[i].label()), pad);
                files = files.max(f);
                counts[i].push(t);
            }
        }
    }
    Some((counts, files))
}

/// The step-instruction rows of a release: ours among the stock files and
/// ours first in `PluginDir`, each against stock.
fn rows_stepd_instructions(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let metric = "instructions the step's slurmstepd executes (valgrind callgrind), mean over step environment sizes";
    let sides = [StepdSide::Stock, StepdSide::OursOneDir, StepdSide::OursFirst];
    let what = |side: StepdSide| match side {
        StepdSide::OursFirst => "one `srun --gres=gpu:1 true` step's slurmstepd; ours first in PluginDir (ours:stock, as the README installs)",
        _ => "one `srun --gres=gpu:1 true` step's slurmstepd; ours among the stock files (one PluginDir entry, as stock)",
    };
    let measured = match build {
        Ok(b) => stepd_instructions(opts, bed, b, &sides),
        Err(e) => {
            for side in &sides[1..] {
                rows.push(Row::not_measured("steps", v, what(*side), metric, format!("not measured: our build for Slurm {v} failed: {e}")));
            }
            return;
        }
    };
    let Some((counts, files)) = measured else {
        for side in &sides[1..] {
            rows.push(Row::not_measured("steps", v, what(*side), metric, "not measured: no valgrind for this release".into()));
        }
        return;
    };
    for (i, side) in sides.iter().enumerate().skip(1) {
        rows.push(Row {
            group: "steps",
            release: v.into(),
            what: what(*side).into(),
            metric: metric.into(),
            unit: "k".into(),
            stock: Some(mean(&counts[0]) / 1e3),
            ours: Some(mean(&counts[i]) / 1e3),
            n: counts[0].len().min(counts[i].len()),
            goal: "<= 1.00".into(),
            note: format!(
                "slurmd starts slurmstepd under the release's callgrind (slurmd -d <wrapper>), SlurmdDebug=info, ProctrackType=proctrack/pgid; {files} profiles a step (slurmstepd and its forks, to the task's exec); environment 0 to {} KiB larger in {} steps (see STEP_ENV_PADS); ours - stock by size: {}",
                (STEP_ENV_PADS - 1) * STEP_ENV_PAD_STEP / 1024,
                STEP_ENV_PADS,
                by_layout_k(&counts[0], &counts[i])
            ),
        });
    }
}

// ---------------------------------------------------------------------------
// usage_read: one poll of a step's GPU accounting
// ---------------------------------------------------------------------------

/// Processes of the step each poll asks about (8 on each of the 8 GPUs of
/// h100x8.conf).
const USAGE_PIDS: u32 = 64;
const USAGE_FIRST_PID: u32 = 1000;

/// h100x8.conf with 8 of the step's processes on each GPU, each holding
/// memory and with a utilisation sample.
fn usage_fixture() -> String {
    let text = std::fs::read_to_string(standin::fixture("h100x8.conf")).expect("h100x8.conf");
    let mut parts = text.split("\ngpu\n");
    let mut out = parts.next().unwrap_or_default().to_string();
    let per_gpu = USAGE_PIDS / 8;
    for (g, part) in parts.enumerate() {
        out.push_str("\ngpu\n");
        out.push_str(part.trim_end_matches('\n'));
        out.push('\n');
        for k in 0..per_gpu {
            let pid = USAGE_FIRST_PID + g as u32 * per_gpu + k;
            let _ = writeln!(out, "proc compute {pid} {}\nutil {pid} {} {}", 256 * (k + 1), 10 + k, 5 + k);
        }
    }
    out
}

/// Runs benches/usage-read.c in the release's chroot on `plugin` for
/// `polls` polls; with `calls`, the stand-in logs the NVML calls of all
/// polls but the first there; with `callgrind`, under the chroot's
/// callgrind, counting inside gpu_p_usage_read only.  Returns the
/// program's line ("memory_bytes ... util ...") and the instructions.
fn usage_run(root: &Chroot, dir: &Path, plugin: &Path, polls: u32, calls: Option<&Path>, callgrind: bool) -> Result<(String, Option<f64>), String> {
    let full = ["slurm-wlm", "slurm"]
        .iter()
        .map(|d| format!("/usr/lib/{}/{d}/libslurmfull.so", harness::chroot::triplet()))
        .find(|p| root.host_path(p).is_file())
        .ok_or("no libslurmfull.so in the chroot")?;
    let driver = dir.join("usage-read").to_string_lossy().into_owned();
    let args = [full, plugin.to_string_lossy().into_owned(), polls.to_string(), USAGE_FIRST_PID.to_string(), USAGE_PIDS.to_string()];
    let mut cmd = if callgrind {
        let mut c = root.command("valgrind", &[dir.to_path_buf()]);
        c.args(["--tool=callgrind", "--toggle-collect=gpu_p_usage_read", "--callgrind-out-file=/dev/null", &driver]);
        c
    } else {
        root.command(&driver, &[dir.to_path_buf()])
    };
    cmd.args(&args);
    cmd.env("LD_LIBRARY_PATH", dir).env("GRES_RS_NVML_FIXTURE", dir.join("usage.conf"));
    if let Some(c) = calls {
        let _ = std::fs::remove_file(c);
        cmd.env("GRES_RS_NVML_CALLS", c);
    }
    let out = cmd.output().map_err(|e| format!("usage-read: {e}"))?;
    if !out.status.success() {
        return Err(format!("usage-read {} failed:\n{}", plugin.display(), text(&out)));
    }
    let line = String::from_utf8_lossy(&out.stdout).lines().find(|l| l.starts_with("memory_bytes ")).unwrap_or_default().to_string();
    let ir = text(&out).lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().parse::<f64>().ok()));
    Ok((line, ir))
}

/// The work directory: the driver, the fixture, the stand-in NVML, and
/// both plugin files (ours beside its library); (stock, ours) plugins.
fn usage_setup(bed: &TestBed, build: &testbed::OurBuild, stock: &Path) -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target").join(format!("bench-usage-{}", bed.version));
    fn e(what: &'static str) -> impl Fn(std::io::Error) -> String {
        move |err| format!("{what}: {err}")
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("stock")).map_err(e("work dir"))?;
    std::fs::create_dir_all(dir.join("ours")).map_err(e("work dir"))?;
    let src = root.join("benches/usage-read.c");
    // Built with the release's own declarations of what the plugins use.
    let headers = root.join("crates/slurm-abi/slurm-headers").join(&bed.series);
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-rdynamic", "-I"])
        .arg(&headers)
        .arg("-o")
        .arg(dir.join("usage-read"))
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(e("cc"))?;
    if !out.status.success() {
        return Err(format!("cc {}:\n{}", src.display(), text(&out)));
    }
    std::fs::write(dir.join("usage.conf"), usage_fixture()).map_err(e("fixture"))?;
    std::fs::copy(standin::library_dir().join("libnvidia-ml.so.1"), dir.join("libnvidia-ml.so.1")).map_err(e("stand-in"))?;
    std::os::unix::fs::symlink("libnvidia-ml.so.1", dir.join("libnvidia-ml.so")).map_err(e("stand-in link"))?;
    std::fs::copy(stock, dir.join("stock/gpu_nvml.so")).map_err(e("stock gpu_nvml.so"))?;
    let files = build.plugin_files_dir.as_ref().ok_or("our build names no plugin files")?;
    std::fs::copy(files.join("gpu_nvml.so"), dir.join("ours/gpu_nvml.so")).map_err(e("our gpu_nvml.so"))?;
    std::fs::copy(build.lib_dir.join(BUILT_LIBRARY_FILE), dir.join("ours").join(LIBRARY_FILE)).map_err(e("our library"))?;
    Ok((dir.clone(), dir.join("stock/gpu_nvml.so"), dir.join("ours/gpu_nvml.so")))
}

/// `usage` rows: slurmstepd's jobacct_gather asks the gpu plugin about
/// every process of the step at every poll (gpu_p_usage_read, 23.02 on).
/// Stock queries each GPU's processes again for each process; ours reads
/// each GPU once a poll.  NVML calls and instructions per poll, 8 GPUs x
/// 64 processes, both plugins in one program against the same stand-in
/// (benches/usage-read.c); the accounted memory and utilisation must agree.
fn rows_usage(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let what = format!("gpu_p_usage_read for each of {USAGE_PIDS} processes of a step on 8 GPUs, one poll");
    let no = |metric: &str, note: String| Row::not_measured("usage", v, &what, metric, note);
    let (calls_metric, ir_metric) = ("NVML calls per poll", "instructions per poll in gpu_p_usage_read (valgrind callgrind)");
    let skip = |rows: &mut Vec<Row>, note: String| {
        rows.push(no(calls_metric, note.clone()));
        rows.push(no(ir_metric, note));
    };
    let Some(root) = &bed.chroot else {
        return skip(rows, format!("not measured: Slurm {v} has no gpu_p_usage_read (23.02 on)"));
    };
    let stock = match bed.stock_gpu_nvml() {
        Ok(p) => p,
        Err(e) => return skip(rows, format!("not measured: {e}")),
    };
    let build = match build {
        Ok(b) => b,
        Err(e) => return skip(rows, format!("not measured: our build for Slurm {v} failed: {e}")),
    };
    let setup = usage_setup(bed, build, &stock);
    let (dir, stock, ours) = match setup {
        Ok(s) => s,
        Err(e) => return skip(rows, format!("not measured: {e}")),
    };
    let polls = opts.n(6, 3) as u32;
    // NVML calls of polls 2..=polls, per poll; the sums must agree.
    let calls = |plugin: &Path, side: &str| -> Result<(f64, String), String> {
        let log = dir.join(format!("calls-{side}.log"));
        let (line, _) = usage_run(root, &dir, plugin, polls, Some(&log), false)?;
        let n = std::fs::read_to_string(&log).unwrap_or_default().lines().filter(|l| !l.starts_with("nvmlShutdown")).count();
        Ok((n as f64 / f64::from(polls - 1), line))
    };
    match (calls(&stock, "stock"), calls(&ours, "ours")) {
        (Ok((s, sl)), Ok((o, ol))) => {
            // 23.11's stock keeps only the last GPU's figures of a process
            // (docs/deviations.md, NVML 5); elsewhere both sum all GPUs.
            let agree = if bed.behaviour.usage_last_gpu_only {
                format!("stock keeps the last GPU's only: stock {sl}, ours {ol}")
            } else {
                assert_eq!(ol, sl, "ours accounts other GPU memory or utilisation than stock ({v})");
                format!("both sides accounted the same ({sl})")
            };
            rows.push(Row {
                group: "usage",
                release: v.into(),
                what: what.clone(),
                metric: calls_metric.into(),
                unit: "calls".into(),
                stock: Some(s),
                ours: Some(o),
                n: 1,
                goal: "<= 0.10".into(),
                note: format!("the NVML stand-in's call log, polls 2 to {polls}; {agree}"),
            });
        }
        (s, o) => rows.push(no(calls_metric, format!("not measured: {}", [s.err(), o.err()].into_iter().flatten().collect::<Vec<_>>().join("; ")))),
    }
    if root.tool("valgrind").is_none() {
        rows.push(no(ir_metric, "not measured: no valgrind in the chroot".into()));
        return;
    }
    // Instructions of polls 2..=polls: the run with them less the run of
    // the first poll alone (NVML's initialization).
    let per_poll = |plugin: &Path| -> Result<f64, String> {
        let one = usage_run(root, &dir, plugin, 1, None, true)?.1.ok_or("no callgrind total")?;
        let all = usage_run(root, &dir, plugin, polls, None, true)?.1.ok_or("no callgrind total")?;
        Ok((all - one) / f64::from(polls - 1))
    };
    match (per_poll(&stock), per_poll(&ours)) {
        (Ok(s), Ok(o)) => rows.push(Row {
            group: "usage",
            release: v.into(),
            what,
            metric: ir_metric.into(),
            unit: "k".into(),
            stock: Some(s / 1e3),
            ours: Some(o / 1e3),
            n: 1,
            goal: "<= 0.10".into(),
            note: format!("--toggle-collect=gpu_p_usage_read (the stand-in's work included); runs of {polls} polls less runs of 1"),
        }),
        (s, o) => rows.push(no(ir_metric, format!("not measured: {}", [s.err(), o.err()].into_iter().flatten().collect::<Vec<_>>().join("; ")))),
    }
}

// ---------------------------------------------------------------------------
// slurmd memory
// ---------------------------------------------------------------------------

/// (VmRSS, Pss, Private_Dirty) of a process in KiB.
fn memory_of(pid: u32) -> (f64, f64, f64) {
    let kib = |text: &str, key: &str| -> f64 {
        text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    (kib(&status, "VmRSS:"), kib(&rollup, "Pss:"), kib(&rollup, "Private_Dirty:"))
}

/// Resident KiB of each mapped `gres_*.so` / `gpu_*.so` file and of our
/// `libgres_rs.so` (all its mappings together), for the report.
fn plugin_rss(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut per: Vec<(String, u64, u64)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            current = line
                .split_whitespace()
                .nth(5)
                .filter(|p| {
                    let f = p.rsplit('/').next().unwrap_or("");
                    f.starts_with("gres_") || f.starts_with("gpu_") || is_library_file(f)
                })
                .map(|p| match per.iter().position(|(n, _, _)| n == p) {
                    Some(i) => i,
                    None => {
                        per.push((p.to_string(), 0, 0));
                        per.len() - 1
                    }
                });
        } else if let Some(i) = current {
            let kib = |key: &str| line.strip_prefix(key).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok());
            if let Some(v) = kib("Rss:") {
                per[i].1 += v;
            }
            if let Some(v) = kib("Private_Dirty:") {
                per[i].2 += v;
            }
        }
    }
    per.iter().map(|(n, r, d)| format!("{} {r} KiB ({d} KiB private dirty)", n.rsplit('/').next().unwrap_or(n))).collect::<Vec<_>>().join(", ")
}

/// The rss rows, on the host's release `v` only.
fn rows_rss(opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    let n = opts.n(5, 2);
    let mut pss = (Vec::new(), Vec::new());
    let mut dirty = (Vec::new(), Vec::new());
    let (s, o) = interleaved(n, |side| {
        let plugins = if side == Side::Stock { PluginSet::Stock } else { PluginSet::Ours };
        let c = Cluster::start(ClusterConfig::gpus(plugins, 4));
        // Let registration and the first node health exchange finish.
        std::thread::sleep(Duration::from_secs(3));
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");
        let (rss, p, d) = memory_of(pid);
        eprintln!("bench: slurmd ({side:?}) RSS by GRES plugin file: {}", plugin_rss(pid));
        if side == Side::Stock {
            pss.0.push(p / 1024.0);
            dirty.0.push(d / 1024.0);
        } else {
            pss.1.push(p / 1024.0);
            dirty.1.push(d / 1024.0);
        }
        rss / 1024.0
    });
    rows.push(Row::memory(
        "rss",
        v,
        "slurmd resident memory once the node is idle (VmRSS)",
        &s,
        &o,
        "GresTypes=gpu,mps,shard (three GRES plugins loaded), 4 fake GPUs; most of the difference is the clean, shareable text of libgres_rs.so (see stderr)",
    ));
    rows.push(Row::memory(
        "rss",
        v,
        "slurmd proportional set size once the node is idle (Pss)",
        &pss.0,
        &pss.1,
        "shared library pages divided among the processes mapping them",
    ));
    rows.push(Row::memory(
        "rss",
        v,
        "slurmd private dirty memory once the node is idle (Private_Dirty)",
        &dirty.0,
        &dirty.1,
        "memory no other process shares and the kernel cannot drop",
    ));
}

// ---------------------------------------------------------------------------
// gres-rs check on a large gres.conf
// ---------------------------------------------------------------------------

/// The check row, on the host's release `v` only.
fn rows_check(opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    const NODES: usize = 12_500;
    const PER_NODE: usize = 8;
    let what = format!("{}-line gres.conf ({NODES} nodes x {PER_NODE} GPUs)", NODES * PER_NODE);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let gres_rs = std::env::var_os("GRES_RS_BIN").map(PathBuf::from).unwrap_or_else(|| root.join("target/release/gres-rs"));
    let pending = |note: String| Row {
        group: "check",
        release: v.into(),
        what: what.clone(),
        metric: "`gres-rs check --all-nodes` vs `slurmd -G`, median".into(),
        unit: "ms".into(),
        n: 0,
        goal: "-".into(),
        note,
        ..Default::default()
    };
    if !gres_rs.is_file() {
        rows.push(pending(format!("pending: {} not built", gres_rs.display())));
        return;
    }
    let mut conf = String::with_capacity(NODES * PER_NODE * 64);
    for n in 0..NODES {
        for k in 0..PER_NODE {
            let cores = if k < PER_NODE / 2 { "0-1" } else { "2-3" };
            let _ = writeln!(conf, "NodeName=gpu{n:05} Name=gpu Type=h100 File={{DEV}}/nvidia{k} Cores={cores}");
        }
    }
    let mut cfg = ClusterConfig::gpus(PluginSet::Stock, PER_NODE as u32).with_gres(&format!("gpu:h100:{PER_NODE}"), &conf);
    cfg.node_name = "gpu00000".into();
    cfg.debug_gres = false;
    cfg.extra_slurm_conf = vec![format!(
        "NodeName=gpu[00001-{:05}] CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:h100:{PER_NODE} State=UNKNOWN",
        NODES - 1
    )];
    let d = GDir::prepare(&cfg);
    let conf_path = d.slurm_conf();
    let check = || {
        let mut cmd = d.command(&gres_rs.to_string_lossy(), &["check", "--all-nodes", "--quiet", "--slurm-conf"]);
        cmd.arg(&conf_path);
        cmd
    };
    let (_, first) = timed(check());
    if first.status.code() == Some(2) || first.status.code().is_none() {
        rows.push(pending(format!("gres-rs check failed (status {:?}): {}", first.status, text(&first).lines().take(5).collect::<Vec<_>>().join(" / "))));
        return;
    }
    let n = opts.n(5, 2);
    let (s, o) = interleaved(n, |side| {
        let (t, out) = if side == Side::Stock { timed(d.slurmd_g(&[])) } else { timed(check()) };
        if side == Side::Stock {
            assert!(out.status.success(), "slurmd -G failed:\n{}", text(&out));
        }
        t * 1000.0
    });
    let mut row = pending(format!(
        "stock: `slurmd -G` for one node of the file; ours: `gres-rs check --all-nodes` (status {}) for all {NODES} nodes",
        first.status.code().unwrap_or(-1)
    ));
    row.stock = Some(median(&s));
    row.ours = Some(median(&o));
    row.n = n;
    row.goal = "<= 1.00".into();
    rows.push(row);
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

fn cmd_line(prog: &str, args: &[&str]) -> String {
    Command::new(prog).args(args).output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

fn machine() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo.lines().find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())).unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 =
        meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:")).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let os = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    vec![
        ("cpu".into(), format!("{model} ({cpus} CPUs available)")),
        ("memory".into(), format!("{:.1} GiB", mem_kib / 1024.0 / 1024.0)),
        ("os".into(), format!("{os}, kernel {}", cmd_line("uname", &["-r"]))),
        ("slurm".into(), cmd_line(&tool("slurmd").to_string_lossy(), &["-V"])),
        ("rustc".into(), cmd_line("rustc", &["-V"])),
        ("load average at start".into(), load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
    ]
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.is_nan() => "-".into(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

fn table(rows: &[Row]) -> String {
    let mut s = String::from("| Slurm | what | metric | stock | ours | ours/stock | goal | n | note |\n|---|---|---|---:|---:|---:|---|---:|---|\n");
    for r in rows {
        let unit = if r.unit.is_empty() { String::new() } else { format!(" {}", r.unit) };
        let val = |v: Option<f64>| if v.is_some() { format!("{}{unit}", fmt_num(v)) } else { "-".into() };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.release,
            r.what,
            r.metric,
            val(r.stock),
            val(r.ours),
            r.ratio().map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into()),
            r.goal,
            r.n,
            r.note
        );
    }
    s
}

/// `target/bench.json`: when, how long, the machine, and each row with its
/// ratio (numbers that are not finite as `null`).
fn json(machine: &[(String, String)], rows: &[Row], started: &str, secs: f64) -> String {
    #[derive(serde::Serialize)]
    struct Report<'a> {
        started: &'a str,
        duration_s: f64,
        #[serde(serialize_with = "in_order")]
        machine: &'a [(String, String)],
        rows: Vec<JsonRow<'a>>,
    }
    #[derive(serde::Serialize)]
    struct JsonRow<'a> {
        group: &'a str,
        release: &'a str,
        what: &'a str,
        metric: &'a str,
        unit: &'a str,
        stock: Option<f64>,
        ours: Option<f64>,
        ratio: Option<f64>,
        n: usize,
        goal: &'a str,
        note: &'a str,
    }
    /// The machine's facts as an object, in their order.
    fn in_order<S: serde::Serializer>(m: &&[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k, v)))
    }
    let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
    let report = Report {
        started,
        // In tenths of a second.
        duration_s: format!("{secs:.1}").parse().unwrap_or(secs),
        machine,
        rows: rows
            .iter()
            .map(|r| JsonRow {
                group: r.group,
                release: &r.release,
                what: &r.what,
                metric: &r.metric,
                unit: &r.unit,
                stock: finite(r.stock),
                ours: finite(r.ours),
                ratio: finite(r.ratio()),
                n: r.n,
                goal: &r.goal,
                note: &r.note,
            })
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&report).expect("the report serializes");
    s.push('\n');
    s
}

// ---------------------------------------------------------------------------
// Checks of the bench's own rules (run by `cargo test --bench bench`)
// ---------------------------------------------------------------------------

/// What the bench derives without Slurm: the stock side's `fake_gpus.conf`
/// and `Gres=` for the NVML nodes, stock's NVML call count, and the JSON.
/// (A `harness = false` target runs no `#[test]`s: `main` calls this when
/// not started by `cargo bench`.)
fn self_test() {
    let minors = standin::fixture("mig-minors");
    let node = |name: &str, cpus: u32| fake_gpus_of(&read_fixture(&standin::fixture(name)), cpus, &minors);

    // Type names, NVLink strings and device files of an NVLink node.
    let (lines, gres) = node("h100x2.conf", 2);
    assert_eq!(gres, "gpu:nvidia_h100_80gb_hbm3:2");
    assert_eq!(lines, "nvidia_h100_80gb_hbm3|2|0|-1,2|/dev/nvidia0|(null)|nvidia_gpu_env\nnvidia_h100_80gb_hbm3|2|1|2,-1|/dev/nvidia1|(null)|nvidia_gpu_env\n");
    assert_eq!(node("h100x8.conf", 2).1, "gpu:nvidia_h100_80gb_hbm3:8");
    // MIG devices: profile type names, capability files from mig-minors.
    let (lines, gres) = node("a100x8_mig.conf", 2);
    assert_eq!(gres, "gpu:nvidia_a100_1g.10gb:56");
    assert_eq!(lines.lines().count(), 56);
    assert_eq!(
        lines.lines().next(),
        Some(
            "nvidia_a100_1g.10gb|2|0-31|-1,0,0,0,0,0,0|/dev/nvidia0,/dev/nvidia-caps/nvidia-cap66,/dev/nvidia-caps/nvidia-cap67\
             |MIG-d23f0824-128b-2f33-0c5c-7fd0a6a3a450|nvidia_gpu_env"
        )
    );
    // Stock's NVML calls as derived from gpu_nvml.c; both agree with the
    // counts the stand-in measured of the stock build (docs/benchmarks.md).
    assert_eq!(stock_nvml_calls(&read_fixture(&standin::fixture("h100x8.conf"))), 381);
    assert_eq!(stock_nvml_calls(&read_fixture(&standin::fixture("a100x8_mig.conf"))), 582);

    // JSON: the fields in order, numbers that are not finite as null,
    // strings escaped.
    let machine = vec![("cpu".to_string(), "x \"y\"".to_string()), ("os".to_string(), "a\\b\tc".to_string())];
    let rows = vec![
        Row {
            group: "steps",
            release: "24.11.5".into(),
            what: "w\nx".into(),
            unit: "ms".into(),
            stock: Some(2.0),
            ours: Some(1.5),
            n: 3,
            goal: "<= 1.02".into(),
            ..Default::default()
        },
        Row { group: "check", stock: Some(f64::NAN), ours: None, note: "pending".into(), ..Default::default() },
    ];
    let text = json(&machine, &rows, "2026-01-01T00:00:00Z", 12.34);
    let v: serde_json::Value = serde_json::from_str(&text).expect("bench JSON parses");
    assert_eq!(v["started"], "2026-01-01T00:00:00Z");
    assert_eq!(v["duration_s"], 12.3);
    assert_eq!(v["machine"]["cpu"], "x \"y\"");
    assert_eq!(v["machine"]["os"], "a\\b\tc");
    let keys = |o: &serde_json::Value| o.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert!(text.find("\"cpu\"") < text.find("\"os\""), "machine facts in order:\n{text}");
    let r0 = &v["rows"][0];
    assert_eq!(
        (r0["group"].as_str(), r0["release"].as_str(), r0["what"].as_str(), r0["stock"].as_f64(), r0["ours"].as_f64(), r0["ratio"].as_f64(), r0["n"].as_u64()),
        (Some("steps"), Some("24.11.5"), Some("w\nx"), Some(2.0), Some(1.5), Some(0.75), Some(3))
    );
    let r1 = &v["rows"][1];
    assert!(r1["stock"].is_null() && r1["ours"].is_null() && r1["ratio"].is_null(), "{text}");
    let mut want = ["goal", "group", "metric", "n", "note", "ours", "ratio", "release", "stock", "unit", "what"].map(String::from).to_vec();
    let mut got = keys(r1);
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let order = ["group", "release", "what", "metric", "unit", "stock", "ours", "ratio", "n", "goal", "note"].map(|k| text.rfind(&format!("\"{k}\"")));
    assert!(order.windows(2).all(|w| w[0] < w[1]), "row fields in order:\n{text}");
}

/// The releases `GRES_RS_SLURM` selects (as for the tests: unset, empty
/// or `all` is the host's and every chroot that is built), opened, and a
/// line for each selected one that cannot be (a chroot not built).  An
/// explicitly named release that cannot be opened ends the bench.
fn test_beds() -> (Vec<TestBed>, Vec<String>) {
    let sel = Selection::from_env().unwrap_or_else(|e| {
        eprintln!("bench: {e}");
        std::process::exit(2)
    });
    let (mut beds, mut skipped) = (Vec::new(), Vec::new());
    for series in testbed::all_series() {
        if !sel.selects(series) {
            continue;
        }
        match TestBed::open(series) {
            Ok(b) => beds.push(b),
            Err(e) if sel == Selection::All => {
                eprintln!("bench: Slurm {series} skipped: {e}");
                skipped.push(format!("Slurm {series} not measured ({e})"));
            }
            Err(e) => {
                eprintln!("bench: GRES_RS_SLURM selects Slurm {series}, which cannot be opened: {e}");
                std::process::exit(2);
            }
        }
    }
    (beds, skipped)
}

/// `valgrind --version` of a release (the chroot's in a chroot).
fn valgrind_version(bed: &TestBed) -> String {
    let out = match &bed.chroot {
        Some(r) => match r.tool("valgrind") {
            Some(v) => r.command(v, &[]).arg("--version").output().ok(),
            None => None,
        },
        None => Command::new(tool("valgrind")).arg("--version").output().ok(),
    };
    out.filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_else(|| "none".into())
}

fn main() {
    let opts = Opts::parse();
    if !opts.bench {
        self_test();
        eprintln!("bench: checked its own rules; run it with `cargo bench --bench bench` (under `cargo test` it measures nothing)");
        return;
    }
    // Before any thread starts: the mount namespace for the MIG node.
    let mig_minors = mig_minors_in_place(&opts);
    let problems = prereq_problems();
    if !problems.is_empty() {
        eprintln!("bench: cannot run real Slurm here:\n  - {}", problems.join("\n  - "));
        std::process::exit(2);
    }
    // The release build of our plugins, unless told otherwise.
    if std::env::var_os("GRES_RS_PLUGIN_DIR").is_none() {
        let release = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release");
        if !release.join(BUILT_LIBRARY_FILE).is_file() {
            eprintln!("bench: {} lacks {BUILT_LIBRARY_FILE}; run `cargo build --release --workspace` first", release.display());
            std::process::exit(2);
        }
        std::env::set_var("GRES_RS_PLUGIN_DIR", &release);
    }
    let (beds, skipped) = test_beds();
    let started = cmd_line("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]);
    let t0 = Instant::now();
    let mut machine = machine();
    machine.push(("test bed".into(), beds.iter().map(TestBed::label).chain(skipped.iter().cloned()).collect::<Vec<_>>().join("; ")));
    machine.push(("valgrind".into(), beds.iter().map(|b| format!("{}: {}", b.version, valgrind_version(b))).collect::<Vec<_>>().join("; ")));
    // Our build for each release (a chroot's: built for it, once).
    let builds: Vec<Result<testbed::OurBuild, String>> =
        if opts.wants("slurmd-g") || opts.wants("steps") || opts.wants("usage") { beds.iter().map(TestBed::our_build).collect() } else { Vec::new() };
    let mut rows = Vec::new();
    if opts.wants("slurmd-g") {
        for (bed, build) in beds.iter().zip(&builds) {
            rows_slurmd_g(&opts, bed, build, mig_minors && bed.chroot.is_none(), &mut rows);
        }
    }
    if opts.wants("steps") {
        for (bed, build) in beds.iter().zip(&builds) {
            rows_steps(&opts, bed, build, &mut rows);
        }
    }
    if opts.wants("usage") {
        for (bed, build) in beds.iter().zip(&builds) {
            rows_usage(&opts, bed, build, &mut rows);
        }
    }
    // Memory and gres-rs check: the host's release only.
    let host = beds.iter().find(|b| b.chroot.is_none()).map(|b| b.version.clone());
    for (group, f) in [("rss", rows_rss as fn(&Opts, &str, &mut Vec<Row>)), ("check", rows_check)] {
        if !opts.wants(group) {
            continue;
        }
        match &host {
            Some(v) => f(&opts, v, &mut rows),
            None => rows.push(Row::not_measured(
                group,
                "-",
                group,
                "-",
                "not measured: measured on the host's release only, which GRES_RS_SLURM does not select".into(),
            )),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("\nMachine:");
    for (k, v) in &machine {
        println!("- {k}: {v}");
    }
    println!(
        "\nPlugins: on the host ours from {}, stock from {}; in a chroot ours built for its release (target/slurm-<version>), stock the chroot's\n",
        std::env::var("GRES_RS_PLUGIN_DIR").unwrap_or_default(),
        stock_plugin_dir().display()
    );
    print!("{}", table(&rows));
    if let Some(dir) = opts.json.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(&opts.json, json(&machine, &rows, &started, secs)) {
        Ok(()) => println!("\nJSON: {} ({secs:.0} s)", opts.json.display()),
        Err(e) => eprintln!("bench: writing {}: {e}", opts.json.display()),
    }
}
