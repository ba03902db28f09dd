//! The Debian package on this machine: installed, jobs run, versions
//! changed under running daemons, removed cleanly.

use crate::common::{assert_breaks_other_divert_versions, assert_prerm_warns, env_value, gres_rs_status, installed, multiarch, run, status_lines_of, PACKAGE};
use crate::drop_in::{exec_start_pre, run_unit_command, slurmd_unit, verify_slurmd_unit};
use crate::hanging_nvml::{nvml_node_conf, HangingNvml, QUICK};
use gres_test_harness as harness;
use harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Removes the package at the end if this test installed it.
struct Uninstall(bool);

impl Drop for Uninstall {
    fn drop(&mut self) {
        if self.0 && installed() {
            let _ = Command::new("apt-get").args(["purge", "-y", "-q", PACKAGE]).env("DEBIAN_FRONTEND", "noninteractive").status();
        }
    }
}

#[test]
fn the_debian_package_installs_runs_jobs_and_removes_cleanly() {
    if !require_slurm("the_debian_package_installs_runs_jobs_and_removes_cleanly") {
        return;
    }
    let was_installed = installed();
    let root = workspace_root();
    let out_dir = target_dir().join("debian-test");
    let built = Command::new("bash").arg(root.join("packaging/debian/build-deb.sh")).arg(&out_dir).current_dir(&root).output().expect("run build-deb.sh");
    let (stdout, stderr) = (String::from_utf8_lossy(&built.stdout), String::from_utf8_lossy(&built.stderr));
    assert!(built.status.success(), "build-deb.sh failed:\n{stdout}{stderr}");
    // Its last line on standard output is the package.
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    assert!(deb.is_file() && deb.extension().is_some_and(|e| e == "deb"), "build-deb.sh printed no .deb:\n{stdout}{stderr}");

    // Depends pins the upstream release slurmd checks.
    let (_, fields) = run(Command::new("dpkg-deb").args(["-f"]).arg(&deb).args(["Version", "Depends"]));
    let slurm = slurm_version_installed();
    assert!(fields.contains(&format!("+slurm{slurm}-1")), "{fields}");
    assert!(fields.contains(&format!("slurm-wlm-basic-plugins (>= {slurm})")) && fields.contains("slurm-wlm-basic-plugins (<< "), "{fields}");
    assert_breaks_other_divert_versions(&deb);
    // Each package's library comes before the plugin files (dpkg renames
    // files into place in the order of the data), the divert package's
    // link to it before its links to them.
    let divert = PathBuf::from(stdout.lines().rev().nth(1).unwrap_or_default().trim());
    for package in [&deb, &divert] {
        assert_library_first(package);
    }

    let _cleanup = Uninstall(!was_installed);
    let (ok, inst) = run(Command::new("apt-get").args(["install", "-y", "-q"]).arg(&deb).env("DEBIAN_FRONTEND", "noninteractive"));
    assert!(ok, "apt-get install {}:\n{inst}", deb.display());
    let plugin_dir = PathBuf::from(format!("/usr/lib/{}/slurm-gpu-gres", multiarch()));
    assert!(inst.contains(&format!("PluginDir={}:", plugin_dir.display())), "postinst prints the PluginDir= line:\n{inst}");
    for f in ["gres_gpu.so", "gres_mps.so", "gres_shard.so", "gpu_nvml.so", LIBRARY_FILE] {
        assert!(plugin_dir.join(f).is_file(), "{} missing after install", plugin_dir.join(f).display());
    }
    // No file of the package belongs to another package.
    let (_, list) = run(Command::new("dpkg").args(["-L", PACKAGE]));
    for path in list.lines().filter(|p| Path::new(p).is_file()) {
        let (_, owners) = run(Command::new("dpkg").args(["-S", path]));
        assert!(owners.lines().all(|l| l.starts_with(&format!("{PACKAGE}:"))), "{path} is also another package's: {owners}");
    }

    // The package scripts and the drop-in with AutoDetect=nvml and a
    // wedged driver: they return within seconds, asking NVML nothing.
    let conf_dir = TempDir::new(&format!("gres-rs-pkg-conf-{}", std::process::id()));
    let slurm_conf = conf_dir.0.join("slurm.conf");
    let (conf, gres) = nvml_node_conf(&format!("{}:{}", plugin_dir.display(), stock_plugin_dir().display()));
    std::fs::write(&slurm_conf, conf).unwrap();
    std::fs::write(conf_dir.0.join("gres.conf"), gres).unwrap();
    let nvml = HangingNvml::new("host");
    let mut env = nvml.env.clone();
    env.push(("SLURM_CONF".into(), slurm_conf.display().to_string()));
    let t = Instant::now();
    let (ok, post) = run(Command::new(format!("/var/lib/dpkg/info/{PACKAGE}.postinst")).arg("configure").envs(env.iter().map(|(k, v)| (k, v))));
    assert!(ok && post.contains("gres-rs check --quiet --no-detect"), "postinst configure, SLURM_CONF with AutoDetect=nvml:\n{post}");
    assert!(t.elapsed() < QUICK, "postinst configure took {:?} with a hanging NVML:\n{post}", t.elapsed());
    nvml.assert_untouched("postinst");
    let drop_in = std::fs::read_to_string(format!("/usr/share/doc/{PACKAGE}/slurmd-gres-rs-check.conf")).expect("the package's drop-in");
    let argv = exec_start_pre(&drop_in);
    let (code, out, took) = run_unit_command(Command::new(&argv[0]), &argv, &env);
    assert!(code == Some(0) && took < QUICK, "the drop-in's ExecStartPre, ours in PluginDir, hanging NVML: {code:?} in {took:?}\n{out}");
    nvml.assert_untouched("the drop-in");
    // Without ours in PluginDir, slurmd (gpu/nvml, no gpu_nvml.so) stops:
    // so does the drop-in.
    let (conf, _) = nvml_node_conf(&stock_plugin_dir().display().to_string());
    std::fs::write(&slurm_conf, conf).unwrap();
    let (code, out, _) = run_unit_command(Command::new(&argv[0]), &argv, &env);
    assert!(code == Some(1) && out.contains("gpu_nvml.so") && out.contains("not started"), "the drop-in, stock PluginDir, AutoDetect=nvml: {code:?}\n{out}");
    let (conf, _) = nvml_node_conf(&format!("{}:{}", plugin_dir.display(), stock_plugin_dir().display()));
    std::fs::write(&slurm_conf, conf).unwrap();

    // The man pages from the same definitions as --help.
    let (ok, man) = run(Command::new("man").args(["-P", "cat", "gres-rs-check"]).env("MANWIDTH", "100"));
    assert!(ok && man.contains("--no-device-check") && man.contains("EXIT STATUS"), "man gres-rs-check:\n{man}");

    // A cluster whose PluginDir starts with the package's directory.
    let mut c = Cluster::start(ClusterConfig::gpus(PluginSet::Installed(plugin_dir.clone()), 4));
    c.assert_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard"]);
    let job = c.srun(&["--gres=gpu:2", "env"]).expect_ok("srun --gres=gpu:2 env");
    assert_eq!(env_value(&job.stdout, "CUDA_VISIBLE_DEVICES").as_deref(), Some("0,1"), "{job}");
    let slurmd = c.pid(Daemon::Slurmd).expect("slurmd pid");
    // Each plugin file says in the log what it is and where it came from.
    let log = c.log(Daemon::Slurmd);
    for (t, f) in [("gres/gpu", "gres_gpu"), ("gres/mps", "gres_mps"), ("gres/shard", "gres_shard")] {
        let want = format!("{t}: slurm-gpu-gres {} (Rust) for Slurm {slurm}, loaded from {}/{f}.so", env!("CARGO_PKG_VERSION"), plugin_dir.display());
        assert!(log.contains(&want), "{want} not in slurmd's log:\n{log}");
    }
    let (code, status) = gres_rs_status();
    assert_eq!(code, Some(0), "gres-rs status with ours loaded:\n{status}");
    // The HealthCheckProgram slurmd can run without arguments.
    let link = std::fs::read_link("/usr/bin/gres-rs-health").expect("/usr/bin/gres-rs-health");
    assert_eq!(link, Path::new("gres-rs"), "/usr/bin/gres-rs-health -> {}", link.display());
    let ours = status_lines_of(&status, slurmd);
    for t in ["gres/gpu", "gres/mps", "gres/shard"] {
        let want = format!("  {t:<12} ours   Slurm {slurm}");
        assert!(ours.lines().any(|l| l.starts_with(&want) && l.contains(&plugin_dir.display().to_string())), "{want} in:\n{ours}");
    }
    // Under the running daemons: to an earlier version and back.
    versions_change_under_running_daemons(&c, &deb, &plugin_dir, slurmd);
    c.stop();

    // Out of PluginDir and restarted: stock.
    let mut c = Cluster::start(ClusterConfig::gpus(PluginSet::Stock, 4));
    let slurmd = c.pid(Daemon::Slurmd).expect("slurmd pid");
    let (_, status) = gres_rs_status();
    let stock = status_lines_of(&status, slurmd);
    let want = format!("  gres/gpu     stock  Slurm {slurm}");
    assert!(stock.lines().any(|l| l.starts_with(&want)), "{want} in:\n{stock}");
    assert!(!stock.contains(" ours "), "{stock}");
    assert!(!c.log(Daemon::Slurmd).contains("slurm-gpu-gres"), "the stock plugins' log names us");
    c.stop();

    if !was_installed {
        // Removed with AutoDetect=nvml, a driver and ours in PluginDir:
        // the prerm says that slurmd then finds no gpu_nvml.so (Debian's
        // 22.05.8 picks gpu/nvml when libnvidia-ml.so loads, its
        // force-nvml patch, and ships none) and stops.
        let (ok, rm) =
            run(Command::new("apt-get").args(["remove", "-y", "-q", PACKAGE]).env("DEBIAN_FRONTEND", "noninteractive").envs(env.iter().map(|(k, v)| (k, v))));
        assert!(ok, "apt-get remove:\n{rm}");
        assert!(rm.contains("To roll back") || rm.contains("roll back"), "prerm says how to roll back:\n{rm}");
        assert_prerm_warns(&rm, PACKAGE);
        nvml.assert_untouched("prerm");
        // The drop-in, left behind: slurmd starts, systemd takes the unit.
        let (code, out, _) = run_unit_command(Command::new(&argv[0]), &argv, &env);
        assert!(code == Some(0) && out.contains("not installed"), "the drop-in after removal: {code:?}\n{out}");
        if let Some((ok, out)) = verify_slurmd_unit(&slurmd_unit(), &drop_in) {
            assert!(ok && !out.contains("gres-rs"), "systemd-analyze verify slurmd.service with the drop-in after removal:\n{out}");
        }
        assert!(!plugin_dir.exists(), "{} left after removal", plugin_dir.display());
        assert!(!Path::new("/usr/bin/gres-rs").exists(), "/usr/bin/gres-rs left after removal");
        assert!(std::fs::symlink_metadata("/usr/bin/gres-rs-health").is_err(), "/usr/bin/gres-rs-health left after removal");
        assert!(!installed());
        // Removed, only dpkg's record of its maintainer scripts is left
        // ("rc"); purging leaves nothing.
        let (ok, purge) = run(Command::new("apt-get").args(["purge", "-y", "-q", PACKAGE]).env("DEBIAN_FRONTEND", "noninteractive"));
        assert!(ok, "apt-get purge:\n{purge}");
        let (_, state) = run(Command::new("dpkg-query").args(["-W", "-f=${db:Status-Abbrev}", PACKAGE]));
        assert!(state.trim().is_empty() || state.contains("no packages found"), "dpkg still knows {PACKAGE}: {state}");
    }
}

/// The main package `Breaks` every other version of the divert package,
/// whose `Depends` pins the main one's exact version.
/// In the data of package `deb`, our library comes before every plugin
/// file of its directory.
fn assert_library_first(deb: &Path) {
    let (ok, list) = run(Command::new("sh").arg("-c").arg("dpkg-deb --fsys-tarfile \"$1\" | tar -t").arg("sh").arg(deb));
    assert!(ok, "the data of {}: {list}", deb.display());
    let at = |name: &str| list.lines().position(|l| l.ends_with(&format!("/{name}"))).unwrap_or_else(|| panic!("no {name} in {}:\n{list}", deb.display()));
    for f in ["gres_gpu.so", "gres_mps.so", "gres_shard.so", "gpu_nvml.so"] {
        assert!(at(LIBRARY_FILE) < at(f), "{f} before {LIBRARY_FILE} in {}:\n{list}", deb.display());
    }
}

/// `deb` with the library named for an earlier version (the version with
/// every digit 0), its plugin files naming that library and its
/// `Version` that earlier one, packed as `build-deb.sh` packs: the package
/// of an earlier release as far as an upgrade is concerned (file names,
/// the order dpkg sees them in).
fn earlier_package(deb: &Path, dir: &Path) -> (PathBuf, String) {
    let ours = env!("CARGO_PKG_VERSION");
    let earlier: String = ours.chars().map(|c| if c.is_ascii_digit() { '0' } else { c }).collect();
    assert_ne!(earlier, ours, "version {ours} has no earlier version of the same length");
    let earlier_library = LIBRARY_FILE.replace(ours, &earlier);
    let tree = dir.join("tree");
    let (ok, out) = run(Command::new("dpkg-deb").arg("-R").arg(deb).arg(&tree));
    assert!(ok, "dpkg-deb -R {}: {out}", deb.display());
    let plugins = tree.join(format!("usr/lib/{}/slurm-gpu-gres", multiarch()));
    std::fs::rename(plugins.join(LIBRARY_FILE), plugins.join(&earlier_library)).unwrap();
    let (from, to) = (format!("$ORIGIN/{LIBRARY_FILE}"), format!("$ORIGIN/{earlier_library}"));
    for f in ["gres_gpu.so", "gres_mps.so", "gres_shard.so", "gpu_nvml.so"] {
        let bytes = std::fs::read(plugins.join(f)).unwrap();
        let at = bytes.windows(from.len()).position(|w| w == from.as_bytes()).unwrap_or_else(|| panic!("{f} does not name {from}"));
        let mut patched = bytes.clone();
        patched[at..at + to.len()].copy_from_slice(to.as_bytes());
        std::fs::write(plugins.join(f), patched).unwrap();
    }
    let control = tree.join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).unwrap().replace(&format!("{ours}+slurm"), &format!("{earlier}+slurm"));
    std::fs::write(&control, text).unwrap();
    // Packed as build-deb.sh packs (the library first).
    let older = dir.join("earlier.deb");
    let first = Path::new("/").join(plugins.strip_prefix(&tree).unwrap()).join(&earlier_library);
    let (ok, out) = run(Command::new("bash").arg(workspace_root().join("packaging/debian/pack-deb.sh")).arg(&tree).arg(&older).arg(&first));
    assert!(ok, "pack-deb.sh {}: {out}", tree.display());
    (older, earlier_library)
}

/// `dpkg -i deb` under strace: the files it renamed into place and
/// removed in `plugin_dir`, in order ("+name", "-name").
fn dpkg_install_traced(deb: &Path, plugin_dir: &Path, trace: &Path) -> Vec<String> {
    let (ok, out) = run(Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=rename,renameat,renameat2,unlink,unlinkat", "-o"])
        .arg(trace)
        .args(["dpkg", "-i"])
        .arg(deb)
        .env("DEBIAN_FRONTEND", "noninteractive"));
    assert!(ok, "strace dpkg -i {} (strace installed?):\n{out}", deb.display());
    let dir = format!("{}/", plugin_dir.display());
    let mut events = Vec::new();
    for line in std::fs::read_to_string(trace).unwrap().lines().filter(|l| l.ends_with("= 0")) {
        let quoted: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        let last = quoted.last().and_then(|p| p.strip_prefix(&dir)).filter(|n| !n.contains('/'));
        match (line.contains("rename"), last) {
            (true, Some(name)) if quoted.first().is_some_and(|f| f.ends_with(".dpkg-new")) => events.push(format!("+{name}")),
            (false, Some(name)) if !name.contains(".dpkg-") => events.push(format!("-{name}")),
            _ => {}
        }
    }
    events
}

/// Replace the installed package by one of another version while slurmd
/// runs, and back: each time dpkg puts the new library in place before
/// every plugin file that names it and removes the old library only after
/// them, so that a slurmstepd starting at any instant finds a plugin file
/// with its own library; a step started afterwards maps the new library,
/// and slurmd goes on running on the files it had mapped.
fn versions_change_under_running_daemons(c: &Cluster, deb: &Path, plugin_dir: &Path, slurmd: u32) {
    let dir = TempDir::new(&format!("gres-rs-pkg-upgrade-{}", std::process::id()));
    let (earlier, earlier_library) = earlier_package(deb, &dir.0);
    let plugin_files = ["gres_gpu.so", "gres_mps.so", "gres_shard.so", "gpu_nvml.so"];
    for (step, (package, new, old)) in
        [(&earlier, earlier_library.as_str(), LIBRARY_FILE), (&deb.to_path_buf(), LIBRARY_FILE, earlier_library.as_str())].into_iter().enumerate()
    {
        let events = dpkg_install_traced(package, plugin_dir, &dir.0.join(format!("trace-{step}")));
        let at = |e: &str| {
            events.iter().position(|x| x == e).unwrap_or_else(|| panic!("{e} not among dpkg's renames and removals in {}: {events:?}", plugin_dir.display()))
        };
        for f in plugin_files {
            assert!(at(&format!("+{new}")) < at(&format!("+{f}")), "dpkg put {f} in place before {new}, the library it names: {events:?}");
            assert!(at(&format!("+{f}")) < at(&format!("-{old}")), "dpkg removed {old} before {f} stopped naming it: {events:?}");
        }
        assert!(
            plugin_dir.join(new).is_file() && !plugin_dir.join(old).exists(),
            "after dpkg -i {}: {:?}",
            package.display(),
            std::fs::read_dir(plugin_dir).map(|d| d.count())
        );
        let job = c.srun(&["--gres=gpu:1", "sh", "-c", "cat /proc/$PPID/maps"]).expect_ok("a step after the upgrade: its slurmstepd's maps");
        let (new_path, old_path) = (plugin_dir.join(new).display().to_string(), plugin_dir.join(old).display().to_string());
        assert!(job.stdout.contains(&new_path) && !job.stdout.contains(&old_path), "the step's slurmstepd maps {new_path}, not {old_path}:\n{job}");
    }
    assert_eq!(c.pid(Daemon::Slurmd), Some(slurmd), "slurmd went on running");
    let (_, status) = gres_rs_status();
    let lines = status_lines_of(&status, slurmd);
    assert!(lines.contains("library") && lines.contains("(replaced since the daemon started"), "slurmd runs on the files it mapped, replaced since:\n{lines}");
}

/// The installed slurmd's release, e.g. "22.05.8".
fn slurm_version_installed() -> String {
    let (ok, out) = run(Command::new("slurmd").arg("-V"));
    assert!(ok, "slurmd -V: {out}");
    out.split_whitespace().last().unwrap_or_default().to_string()
}
