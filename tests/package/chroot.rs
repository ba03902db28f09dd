//! The packages for the test bed's other Debian releases, installed in a
//! copy-on-write overlay over their chroot, and the divert package over
//! the main one.

use crate::common::{assert_breaks_other_divert_versions, assert_prerm_warns, env_value, multiarch, run, status_lines_of, DIVERT_PACKAGE, PACKAGE};
use crate::drop_in::{exec_start_pre, run_unit_command, DROP_IN_PATH};
use crate::hanging_nvml::{nvml_node_conf, HangingNvml, QUICK};
use crate::snapshot::{files_under, ChrootSnapshot};
use gres_test_harness as harness;
use harness::standin;
use harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The package for the Debian release of each test-bed chroot (trixie:
/// Slurm 24.11.5, sid: 26.05.5), as an admin of that release uses it:
/// `build-deb.sh --for <suite>` builds it on this machine, `apt-get install
/// ./<deb>` installs it offline inside the chroot (every dependency is
/// already there), a cluster of the chroot's daemons with `PluginDir=` from
/// the package runs a job with our plugins, `gres-rs status` (the
/// package's, inside) says so, and `apt-get remove` then `purge` leave no
/// file of it.  The chroot is the shared cache of the test bed and stays
/// as it is: everything happens in a copy-on-write [`chroot::Overlay`] over
/// it, and the test compares the chroot's dpkg status file and its files
/// before and after.
fn package_in_chroot(bed: &testbed::TestBed) {
    let t0 = std::time::Instant::now();
    let suite = bed.release.suite;
    let slurm = bed.version.clone();
    let lower = bed.chroot.clone().expect("a chroot release");
    let root = workspace_root();
    let out_dir = target_dir().join(format!("debian-test-{suite}"));
    let built = Command::new("bash")
        .arg(root.join("packaging/debian/build-deb.sh"))
        .args(["--for", suite])
        .arg(&out_dir)
        .current_dir(&root)
        .output()
        .expect("run build-deb.sh");
    let (stdout, stderr) = (String::from_utf8_lossy(&built.stdout), String::from_utf8_lossy(&built.stderr));
    assert!(built.status.success(), "build-deb.sh --for {suite} failed:\n{stdout}{stderr}");
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    assert!(deb.is_file() && deb.extension().is_some_and(|e| e == "deb"), "build-deb.sh printed no .deb:\n{stdout}{stderr}");
    let divert = PathBuf::from(stdout.lines().rev().nth(1).unwrap_or_default().trim());
    assert!(
        divert.is_file() && divert.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{DIVERT_PACKAGE}_"))),
        "build-deb.sh printed no {DIVERT_PACKAGE} .deb before the main one:\n{stdout}{stderr}"
    );
    eprintln!("package_in_chroot[{suite}]: built {} and {} in {:.1?}", deb.display(), divert.display(), t0.elapsed());

    // The release is the chroot's, Depends pins it and names what that
    // release has: libc6 at least what the binaries' symbols need.
    let (_, fields) = run(Command::new("dpkg-deb").args(["-f"]).arg(&deb).args(["Package", "Version", "Depends"]));
    eprintln!("package_in_chroot[{suite}]:\n{fields}");
    assert!(fields.contains(&format!("Version: {}+slurm{slurm}-1", env!("CARGO_PKG_VERSION"))), "{fields}");
    let (a, b, c) = lower.slurm_version_triple().expect("chroot's release");
    let next = format!("{a}.{b:02}.{}", c + 1);
    for want in [format!("slurm-wlm-basic-plugins (>= {slurm})"), format!("slurm-wlm-basic-plugins (<< {next}~)"), "libc6 (>= ".into()] {
        assert!(fields.contains(&want), "{want} not in {fields}");
    }
    assert_breaks_other_divert_versions(&deb);

    let before = ChrootSnapshot::take(lower.root());
    let ov_dir = fsutil::make_unique_dir("gres-rs-ovl").expect("a directory for the overlay");
    let mut ov = chroot::Overlay::new(&lower, &ov_dir).unwrap_or_else(|e| panic!("{e}"));
    let inside = ov.chroot().clone();
    let deb_dir = deb.parent().expect("deb's directory").to_path_buf();
    let sh = |script: &str| -> (bool, String) {
        run(inside
            .command("/bin/sh", std::slice::from_ref(&deb_dir))
            .args(["-c", script])
            .current_dir(&deb_dir)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C")
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    // The same with the NVML stand-in's files at their paths, and `env`.
    let binds: Vec<PathBuf> = std::iter::once(deb_dir.clone()).chain(standin::chroot_binds()).collect();
    let sh_env = |script: &str, env: &[(String, String)]| -> (bool, String) {
        run(inside
            .command("/bin/sh", &binds)
            .args(["-c", script])
            .current_dir(&deb_dir)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .envs(env.iter().map(|(k, v)| (k, v))))
    };

    // Offline: the package alone, nothing fetched but the file itself,
    // nothing else installed.  (`--no-download` cannot be used: apt then
    // fails on a local file, "Internal Error, Pathname to install is not
    // absolute", apt 3.0 in trixie and sid.)
    let file = deb.file_name().expect("deb's name").to_string_lossy().into_owned();
    let (ok, inst) = sh(&format!("apt-get install -y -q ./{file}"));
    assert!(ok, "apt-get install ./{file} in the {suite} overlay:\n{inst}");
    assert!(inst.contains("0 upgraded, 1 newly installed, 0 to remove"), "apt-get installed more than the package:\n{inst}");
    for l in inst.lines().filter(|l| l.starts_with("Get:")) {
        assert!(l.contains(&file) && !l.contains("://"), "apt-get fetched something else: {l}\n{inst}");
    }
    let plugin_dir = PathBuf::from(format!("/usr/lib/{}/slurm-gpu-gres", multiarch()));
    assert!(inst.contains(&format!("PluginDir={}:", plugin_dir.display())), "postinst prints the PluginDir= line:\n{inst}");
    for f in ["gres_gpu.so", "gres_mps.so", "gres_shard.so", "gpu_nvml.so", LIBRARY_FILE] {
        assert!(inside.host_path(plugin_dir.join(f)).is_file(), "{} missing after install", plugin_dir.join(f).display());
    }
    // Installed, its Depends satisfied, no file of it another package's.
    let (ok, audit) = sh(&format!(
        "set -e; dpkg-query -W -f='${{db:Status-Abbrev}} ${{Version}}\\n' {PACKAGE}; apt-get check -q; dpkg --audit; \
         dpkg -L {PACKAGE} | while read -r p; do [ -d \"$p\" ] || dpkg -S \"$p\"; done"
    ));
    assert!(ok && audit.starts_with(&format!("ii  {}+slurm{slurm}-1", env!("CARGO_PKG_VERSION"))), "{PACKAGE} not installed cleanly:\n{audit}");
    for l in audit.lines().filter(|l| l.contains(": /")) {
        assert!(l.starts_with(&format!("{PACKAGE}: ")), "a file of the package is also another package's: {l}");
    }

    // A cluster of the chroot's daemons, PluginDir from the package.
    let mut c = Cluster::start(bed.config(PluginSet::Installed(plugin_dir.clone()), 4).in_chroot(inside.clone()));
    c.assert_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard"]);
    let job = c.srun(&["--gres=gpu:2", "env"]).expect_ok("srun --gres=gpu:2 env");
    assert_eq!(env_value(&job.stdout, "CUDA_VISIBLE_DEVICES").as_deref(), Some("0,1"), "{job}");
    c.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:1"]);
    let slurmd = c.pid(Daemon::Slurmd).expect("slurmd pid");
    let log = c.log(Daemon::Slurmd);
    for (t, f) in [("gres/gpu", "gres_gpu"), ("gres/mps", "gres_mps"), ("gres/shard", "gres_shard")] {
        let want = format!("{t}: slurm-gpu-gres {} (Rust) for Slurm {slurm}, loaded from {}/{f}.so", env!("CARGO_PKG_VERSION"), plugin_dir.display());
        assert!(log.contains(&want), "{want} not in slurmd's log:\n{log}");
    }
    // The package's gres-rs, run where slurmd's files are (its mount
    // namespace and root), as on a node of that release.
    let mut cmd = c.command_beside(Daemon::Slurmd, "/usr/bin/gres-rs").unwrap_or_else(|e| panic!("{e}"));
    let (ok, status) = run(cmd.arg("status"));
    assert!(ok, "gres-rs status in the {suite} overlay with ours loaded:\n{status}");
    let ours = status_lines_of(&status, slurmd);
    eprintln!("package_in_chroot[{suite}]: gres-rs status, for the cluster's slurmd:\n{ours}");
    for (t, f) in [("gres/gpu", "gres_gpu"), ("gres/mps", "gres_mps"), ("gres/shard", "gres_shard")] {
        let want = format!("  {t:<12} ours   Slurm {slurm}  {}/{f}.so", plugin_dir.display());
        assert!(ours.lines().any(|l| l.trim_end() == want), "{want} in:\n{status}");
    }
    assert!(ours.contains(&format!("  library      ours                  {}/{LIBRARY_FILE}", plugin_dir.display())) && !ours.contains("replaced"), "{ours}");
    // And from the host's mount namespace (an admin's shell outside the
    // chroot): the same files, none "replaced" (the paths in slurmd's maps
    // are those of the overlay's namespace, looked up through
    // /proc/<pid>/root).
    let (_, outside) = run(Command::new(env!("CARGO_BIN_EXE_gres-rs")).arg("status"));
    let outside = status_lines_of(&outside, slurmd);
    assert!(!outside.is_empty() && outside.contains("ours") && !outside.contains("replaced"), "gres-rs status from the host's namespace:\n{outside}");
    c.stop();
    drop(c);

    let nvml = HangingNvml::new(suite);
    divert_in_chroot(bed, &inside, &divert, &plugin_dir, &sh, &|script| sh_env(script, &nvml.env));

    // This node's slurm.conf with ours first in PluginDir, gres.conf with
    // AutoDetect=nvml, a wedged driver: postinst (run again, as dpkg
    // does) and the drop-in, run as systemd would from where an admin
    // installs it, return within seconds and ask NVML nothing; systemd
    // takes the unit with it.
    let stock_dir = inside.stock_plugin_dir();
    let (conf, gres) = nvml_node_conf(&format!("{}:{}", plugin_dir.display(), stock_dir.display()));
    std::fs::write(inside.host_path("/etc/slurm/slurm.conf"), conf).unwrap();
    std::fs::write(inside.host_path("/etc/slurm/gres.conf"), gres).unwrap();
    let t = Instant::now();
    let (ok, post) = sh_env(&format!("/var/lib/dpkg/info/{PACKAGE}.postinst configure"), &nvml.env);
    assert!(ok && post.contains("gres-rs check --quiet --no-detect"), "postinst configure in the {suite} overlay, AutoDetect=nvml:\n{post}");
    assert!(t.elapsed() < QUICK, "postinst configure took {:?} in the {suite} overlay with a hanging NVML:\n{post}", t.elapsed());
    nvml.assert_untouched("postinst");
    let (ok, out) = sh(&format!("install -D -m 0644 /usr/share/doc/{PACKAGE}/slurmd-gres-rs-check.conf {DROP_IN_PATH}"));
    assert!(ok, "installing the drop-in:\n{out}");
    let drop_in = std::fs::read_to_string(inside.host_path(DROP_IN_PATH)).expect("the drop-in in the overlay");
    let argv = exec_start_pre(&drop_in);
    let (code, out, took) = run_unit_command(inside.command(&argv[0], &binds), &argv, &nvml.env);
    assert!(code == Some(0) && took < QUICK, "the drop-in's ExecStartPre in the {suite} overlay, hanging NVML: {code:?} in {took:?}\n{out}");
    nvml.assert_untouched("the drop-in");
    let (ok, verify) = sh("systemd-analyze verify --man=no slurmd.service 2>&1");
    assert!(ok && !verify.contains("gres-rs"), "systemd-analyze verify slurmd.service with the drop-in in the {suite} overlay:\n{verify}");

    // Removed: the prerm tells that slurmd, which picks gpu/nvml, then
    // finds no gpu_nvml.so, and stops; the drop-in lets slurmd start and
    // systemd still takes the unit.
    let (ok, rm) = sh_env(&format!("apt-get remove -y -q {PACKAGE}"), &nvml.env);
    assert!(ok, "apt-get remove:\n{rm}");
    assert!(rm.contains("roll back"), "prerm says how to roll back:\n{rm}");
    assert_prerm_warns(&rm, PACKAGE);
    nvml.assert_untouched("prerm");
    let (code, out, _) = run_unit_command(inside.command(&argv[0], &binds), &argv, &nvml.env);
    assert!(code == Some(0) && out.contains("not installed"), "the drop-in after removal in the {suite} overlay: {code:?}\n{out}");
    let (ok, verify) = sh("systemd-analyze verify --man=no slurmd.service 2>&1");
    assert!(ok && !verify.contains("gres-rs"), "systemd-analyze verify slurmd.service with the drop-in after removal in the {suite} overlay:\n{verify}");
    let (ok, out) =
        sh(&format!("rm -f {DROP_IN_PATH} /etc/slurm/slurm.conf /etc/slurm/gres.conf && rmdir {}", Path::new(DROP_IN_PATH).parent().unwrap().display()));
    assert!(ok, "removing the drop-in and the node's configuration:\n{out}");
    assert!(!inside.host_path(&plugin_dir).exists(), "{} left after removal", plugin_dir.display());
    assert!(!inside.host_path("/usr/bin/gres-rs").exists(), "/usr/bin/gres-rs left after removal");
    let (ok, purge) = sh(&format!("apt-get purge -y -q {PACKAGE}; dpkg-query -W -f='${{db:Status-Abbrev}}' {PACKAGE} 2>&1 || true"));
    assert!(ok, "apt-get purge:\n{purge}");
    assert!(purge.lines().last().is_some_and(|l| l.contains("no packages found")), "dpkg still knows {PACKAGE}:\n{purge}");
    // All the package wrote went to the overlay's upper layer; none of it
    // is left there.
    let left: Vec<String> = files_under(&ov.upper())
        .into_iter()
        .filter(|p| p.iter().any(|c| c.to_str().is_some_and(|c| c.contains(PACKAGE) || c.contains("gres-rs") || c.contains("libgres_rs"))))
        .map(|p| p.display().to_string())
        .collect();
    assert!(left.is_empty(), "files of the package left after purge: {left:#?}\nin the upper layer: {:#?}", files_under(&ov.upper()));

    // Torn down: no process has the overlay mounted, and the chroot is as
    // it was.
    ov.unmount(std::time::Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    drop(ov);
    assert!(!ov_dir.exists(), "{} left", ov_dir.display());
    let after = ChrootSnapshot::take(lower.root());
    before.assert_same(&after);
    eprintln!("package_in_chroot[{suite}]: the chroot's dpkg status and its {} files are as before", before.files.len());
    eprintln!("package_in_chroot[{suite}]: passed in {:.1?}", t0.elapsed());
}

/// The optional divert package over the installed main one: Slurm's own
/// plugin files moved aside (`<name>.so.stock`) and links to ours in their
/// place, so a cluster with the stock `PluginDir=` runs ours; removing it
/// puts Slurm's files back exactly (`dpkg --verify`), with no diversion
/// left.
/// `sh_nvml` runs a command as `sh` does, with a wedged NVML driver; the
/// removal is run so, with this node's slurm.conf naming Slurm's
/// directory alone in PluginDir and gres.conf with `AutoDetect=nvml`: the
/// prerm warns that slurmd, which picks gpu/nvml, finds no gpu_nvml.so
/// once Slurm's own files are back.
fn divert_in_chroot(
    bed: &testbed::TestBed,
    inside: &chroot::Chroot,
    divert: &Path,
    plugin_dir: &Path,
    sh: &dyn Fn(&str) -> (bool, String),
    sh_nvml: &dyn Fn(&str) -> (bool, String),
) {
    let suite = bed.release.suite;
    let stock_dir = inside.stock_plugin_dir();
    let file = divert.file_name().expect("divert deb's name").to_string_lossy().into_owned();
    let (ok, inst) = sh(&format!("apt-get install -y -q ./{file}"));
    assert!(ok, "apt-get install ./{file} in the {suite} overlay:\n{inst}");
    assert!(inst.contains("0 upgraded, 1 newly installed, 0 to remove"), "apt-get installed more than the divert package:\n{inst}");
    assert!(inst.contains("needs no PluginDir= change"), "postinst says what changed:\n{inst}");
    let (ok, diversions) = sh("dpkg-divert --list");
    assert!(ok, "dpkg-divert --list:\n{diversions}");
    for f in ["gres_gpu", "gres_mps", "gres_shard", "gpu_nvml"] {
        let want = format!("diversion of {0}/{f}.so to {0}/{f}.so.stock by {DIVERT_PACKAGE}", stock_dir.display());
        assert!(diversions.lines().any(|l| l.trim() == want), "{want} not in:\n{diversions}");
    }
    for f in ["gres_gpu.so", "gres_mps.so", "gres_shard.so", "gpu_nvml.so", LIBRARY_FILE] {
        let link = inside.host_path(stock_dir.join(f));
        let target = std::fs::read_link(&link).unwrap_or_else(|e| panic!("{}: {e}", link.display()));
        assert_eq!(target, Path::new("../slurm-gpu-gres").join(f), "{}", link.display());
    }
    for f in ["gres_gpu", "gres_mps", "gres_shard"] {
        let kept = inside.host_path(stock_dir.join(format!("{f}.so.stock")));
        assert!(kept.symlink_metadata().is_ok_and(|m| m.is_file()), "{} not kept", kept.display());
    }
    let (ok, verify) = sh("dpkg --verify slurm-wlm-basic-plugins");
    assert!(ok && verify.trim().is_empty(), "dpkg --verify slurm-wlm-basic-plugins with the diversions:\n{verify}");

    // The stock PluginDir= only, ours loaded (maps: the files in the main
    // package's directory; our init line: the path slurmd opened).
    let c = Cluster::start(bed.config(PluginSet::Diverted(plugin_dir.to_path_buf()), 4).in_chroot(inside.clone()));
    assert_eq!(c.plugin_dir_setting, stock_dir.display().to_string());
    c.assert_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard"]);
    let job = c.srun(&["--gres=gpu:2", "env"]).expect_ok("srun --gres=gpu:2 env");
    assert_eq!(env_value(&job.stdout, "CUDA_VISIBLE_DEVICES").as_deref(), Some("0,1"), "{job}");
    c.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:1"]);
    let log = c.log(Daemon::Slurmd);
    for (t, f) in [("gres/gpu", "gres_gpu"), ("gres/mps", "gres_mps"), ("gres/shard", "gres_shard")] {
        let want = format!("{t}: slurm-gpu-gres {} (Rust) for Slurm {}, loaded from {}/{f}.so", env!("CARGO_PKG_VERSION"), bed.version, stock_dir.display());
        assert!(log.contains(&want), "{want} not in slurmd's log:\n{log}");
    }
    drop(c);

    let (conf, gres) = nvml_node_conf(&stock_dir.display().to_string());
    std::fs::write(inside.host_path("/etc/slurm/slurm.conf"), conf).unwrap();
    std::fs::write(inside.host_path("/etc/slurm/gres.conf"), gres).unwrap();
    let (ok, rm) = sh_nvml(&format!("apt-get remove -y -q {DIVERT_PACKAGE}"));
    assert!(ok, "apt-get remove {DIVERT_PACKAGE}:\n{rm}");
    assert!(rm.contains("roll back"), "prerm says how it rolls back:\n{rm}");
    assert_prerm_warns(&rm, DIVERT_PACKAGE);
    let (ok, diversions) = sh("dpkg-divert --list");
    assert!(ok && !diversions.contains(DIVERT_PACKAGE), "diversions left after removal:\n{diversions}");
    for f in ["gres_gpu", "gres_mps", "gres_shard"] {
        let back = inside.host_path(stock_dir.join(format!("{f}.so")));
        assert!(back.symlink_metadata().is_ok_and(|m| m.is_file()), "{} not back", back.display());
        assert!(inside.host_path(stock_dir.join(format!("{f}.so.stock"))).symlink_metadata().is_err(), "{f}.so.stock left");
    }
    for f in ["gpu_nvml.so", LIBRARY_FILE] {
        assert!(inside.host_path(stock_dir.join(f)).symlink_metadata().is_err(), "{f} left in {}", stock_dir.display());
    }
    let (ok, verify) = sh("dpkg --verify slurm-wlm-basic-plugins");
    assert!(ok && verify.trim().is_empty(), "dpkg --verify slurm-wlm-basic-plugins after removal:\n{verify}");
    let (ok, purge) = sh(&format!("apt-get purge -y -q {DIVERT_PACKAGE}; dpkg-query -W -f='${{db:Status-Abbrev}}' {DIVERT_PACKAGE} 2>&1 || true"));
    // Purged: unknown to dpkg, or (the main package's Breaks names it)
    // known only as a name, "un": not installed, no files.
    assert!(ok && purge.lines().last().is_some_and(|l| l.contains("no packages found") || l.trim_end() == "un"), "dpkg still knows {DIVERT_PACKAGE}:\n{purge}");
    eprintln!("package_in_chroot[{suite}]: {DIVERT_PACKAGE} ran ours from {} and put the stock files back", stock_dir.display());
}

#[test]
fn the_trixie_package_installs_in_its_chroot_runs_jobs_and_removes_cleanly() {
    testbed::run_test("the_trixie_package_installs_in_its_chroot_runs_jobs_and_removes_cleanly", "24.11", package_in_chroot);
}

#[test]
fn the_sid_package_installs_in_its_chroot_runs_jobs_and_removes_cleanly() {
    testbed::run_test("the_sid_package_installs_in_its_chroot_runs_jobs_and_removes_cleanly", "26.05", package_in_chroot);
}
