//! The Debian package, as an admin uses it: `packaging/debian/build-deb.sh`
//! builds it from this checkout, `apt-get install ./<deb>` installs it, a
//! test cluster with `PluginDir=` from the package runs jobs with our
//! plugins, `gres-rs status` says so (and says stock once the directory is
//! out of `PluginDir` and the daemons restarted), `man gres-rs-check`
//! works, and `apt-get remove` leaves nothing behind.
//!
//! Installs a package on this machine, so it runs only as root with the
//! test bed's Slurm (tests/run.sh); a package installed before the test is
//! left installed, one the test installed is removed, pass or fail.
//!
//! The packages for the test bed's other Debian releases (trixie, sid) are
//! built with `build-deb.sh --for <suite>` and installed the same way
//! inside their chroot, in a copy-on-write overlay over it that the test
//! unmounts at the end (the cached chroot is not changed: checked).  There
//! the optional `slurm-gpu-gres-divert` package is also installed over the
//! main one (ours through Slurm's own plugin directory, no slurm.conf
//! change) and removed again (Slurm's files back, `dpkg --verify` clean);
//! it is never installed on this machine, whose stock files the other
//! tests use.
//!
//! Around the packages, what a node needs to keep starting slurmd (issue
//! 26): the slurmd drop-in (`slurmd-gres-rs-check.conf`), run exactly as
//! systemd runs its `ExecStartPre=`, skips a removed `gres-rs`, never asks
//! NVML, lets slurmd start when the check hangs and refuses only a fatal
//! verdict (`systemd-analyze verify` passes after removal); `postinst`,
//! the drop-in and the prerms return within seconds with a driver whose
//! `nvmlInit` does not (the NVML stand-in with `init_delay_ms`, asked
//! nothing: its call log); the prerms warn when, with `AutoDetect=nvml`,
//! removal leaves slurmd no `gpu_nvml.so` (Debian ships none).

use gres_test_harness as harness;

use harness::standin;
use harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const PACKAGE: &str = "slurm-gpu-gres";
/// The optional package that diverts the stock plugin files.
const DIVERT_PACKAGE: &str = "slurm-gpu-gres-divert";

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn installed() -> bool {
    run(Command::new("dpkg-query").args(["-W", "-f=${Status}", PACKAGE])).1.contains("install ok installed")
}

/// Removes the package at the end if this test installed it.
struct Uninstall(bool);

impl Drop for Uninstall {
    fn drop(&mut self) {
        if self.0 && installed() {
            let _ = Command::new("apt-get").args(["purge", "-y", "-q", PACKAGE]).env("DEBIAN_FRONTEND", "noninteractive").status();
        }
    }
}

fn multiarch() -> String {
    let (ok, out) = run(Command::new("dpkg-architecture").arg("-qDEB_HOST_MULTIARCH"));
    assert!(ok, "dpkg-architecture: {out}");
    out.trim().to_string()
}

fn gres_rs_status() -> (Option<i32>, String) {
    let out = Command::new("/usr/bin/gres-rs").arg("status").output().expect("run /usr/bin/gres-rs status");
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn status_lines_of(text: &str, pid: u32) -> String {
    let head = format!("(pid {pid}):");
    let mut lines = text.lines().skip_while(|l| !l.ends_with(&head));
    let mut out = String::new();
    if let Some(h) = lines.next() {
        out.push_str(h);
        out.push('\n');
        for l in lines.take_while(|l| l.starts_with("  ")) {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn env_value(env_output: &str, key: &str) -> Option<String> {
    env_output.lines().find_map(|l| l.strip_prefix(&format!("{key}=")).map(|v| v.to_string()))
}

/// The drop-in as the packages ship it.
const DROP_IN: &str = "packaging/debian/slurmd-gres-rs-check.conf";
/// Where an admin installs it (the drop-in's own instructions).
const DROP_IN_PATH: &str = "/etc/systemd/system/slurmd.service.d/gres-rs-check.conf";
/// systemd's `PATH` for a system unit's commands.
const UNIT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// What "within a few seconds" means for a package script or the drop-in
/// with a hanging NVML: they never ask it, so well under their own
/// 10-second limit.
const QUICK: Duration = Duration::from_secs(8);

/// The `ExecStartPre=` command of a unit file's text, as systemd runs it
/// (systemd.syntax(7), systemd.service(5)): a line ending in a backslash
/// is joined with the next one, the backslash made a space; the value is
/// split into words at whitespace outside single or double quotes, which
/// are removed; `$$` is a `$` (its environment expansion) and `%%` a `%`
/// (its specifiers).  Anything else systemd would rewrite (a backslash
/// escape, another `$` or `%`) fails the test, so the words are exactly
/// systemd's.
fn exec_start_pre(unit: &str) -> Vec<String> {
    let mut logical = Vec::new();
    let mut cur = String::new();
    for line in unit.lines() {
        if cur.is_empty() && (line.starts_with('#') || line.starts_with(';')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                cur.push_str(head);
                cur.push(' ');
            }
            None => {
                cur.push_str(line);
                logical.push(std::mem::take(&mut cur));
            }
        }
    }
    let lines: Vec<&String> = logical.iter().filter(|l| l.trim_start().starts_with("ExecStartPre=")).collect();
    assert_eq!(lines.len(), 1, "one ExecStartPre= in the drop-in:\n{unit}");
    let value = lines[0].trim_start().trim_start_matches("ExecStartPre=").trim();
    assert!(!value.contains('\\'), "a backslash escape in ExecStartPre= (systemd rewrites it): {value}");
    assert!(!value.replace("$$", "").contains('$'), "a $ systemd expands (write $$): {value}");
    assert!(!value.replace("%%", "").contains('%'), "a % systemd expands (write %%): {value}");
    assert!(!value.starts_with(['-', '@', ':', '+', '!']), "a prefix on ExecStartPre=: {value}");
    let mut words = Vec::new();
    let (mut word, mut quote, mut in_word) = (String::new(), None::<char>, false);
    for c in value.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "an unclosed quote in ExecStartPre=: {value}");
    if in_word {
        words.push(word);
    }
    words.into_iter().map(|w| w.replace("$$", "$").replace("%%", "%")).collect()
}

/// Runs a unit command's words as systemd does (its `PATH`, no other
/// environment than `env`; `cmd` runs `argv[0]`, here or in a chroot):
/// its exit code, output and time.
fn run_unit_command(mut cmd: Command, argv: &[String], env: &[(String, String)]) -> (Option<i32>, String, Duration) {
    cmd.args(&argv[1..]).env_clear().env("PATH", UNIT_PATH).env("LANG", "C.UTF-8").envs(env.iter().map(|(k, v)| (k, v)));
    let t = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {argv:?}: {e}"));
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)), t.elapsed())
}

/// The NVML stand-in as a wedged driver: its `nvmlInit` takes a minute
/// (`init_delay_ms`), every call logged.
struct HangingNvml {
    env: Vec<(String, String)>,
    calls: PathBuf,
}

impl HangingNvml {
    fn new(tag: &str) -> HangingNvml {
        let dir = standin::scratch_dir();
        let fixture = dir.join(format!("hanging-{tag}.conf"));
        let gpu = "gpu\nname NVIDIA A100-SXM4-40GB\nuuid GPU-6d6f9a3a-0000-0000-0000-000000000001\nbus_id 00000000:07:00.0\nminor 0\ncpus 0\n";
        std::fs::write(&fixture, format!("init_delay_ms 60000\n{gpu}")).unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
        let calls = dir.join(format!("hanging-{tag}.calls"));
        let _ = std::fs::remove_file(&calls);
        let mut env = standin::daemon_env(&fixture);
        env.push(("GRES_RS_NVML_CALLS".into(), calls.display().to_string()));
        HangingNvml { env, calls }
    }

    /// Nothing asked NVML since [`HangingNvml::new`].
    fn assert_untouched(&self, what: &str) {
        let calls = std::fs::read_to_string(&self.calls).unwrap_or_default();
        assert!(calls.trim().is_empty(), "{what} asked NVML (gres-rs without --no-detect):\n{calls}");
    }
}

/// A slurm.conf and gres.conf for this host's node: one GPU,
/// `AutoDetect=nvml`, `plugin_dir` as `PluginDir`.
fn nvml_node_conf(plugin_dir: &str) -> (String, String) {
    let h = fsutil::short_hostname();
    (
        format!("ClusterName=pkgtest\nSlurmctldHost={h}\nGresTypes=gpu\nPluginDir={plugin_dir}\nNodeName={h} CPUs=1 Gres=gpu:1 State=UNKNOWN\nPartitionName=p Nodes={h} Default=YES\n"),
        "AutoDetect=nvml\n".into(),
    )
}

/// `systemd-analyze verify slurmd.service` with the drop-in `drop_in`
/// beside `unit` (slurmd's unit file text), offline: (passed, output).
/// None without systemd-analyze.
fn verify_slurmd_unit(unit: &str, drop_in: &str) -> Option<(bool, String)> {
    if !Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success()) {
        assert!(!strict_mode(), "systemd-analyze missing (package systemd)");
        return None;
    }
    let dir = TempDir::new(&format!("gres-rs-units-{}", std::process::id()));
    std::fs::create_dir_all(dir.0.join("slurmd.service.d")).unwrap();
    std::fs::write(dir.0.join("slurmd.service"), unit).unwrap();
    std::fs::write(dir.0.join("slurmd.service.d/gres-rs-check.conf"), drop_in).unwrap();
    // The trailing colon: then the default unit directories (munge, the
    // targets slurmd.service names).
    Some(run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.0.join("slurmd.service"))
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.0.display()))))
}

/// slurmd's unit file on this machine, or a minimal one.
fn slurmd_unit() -> String {
    ["/lib/systemd/system/slurmd.service", "/usr/lib/systemd/system/slurmd.service"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_else(|| "[Unit]\nDescription=Slurm node daemon\n\n[Service]\nType=simple\nExecStart=/usr/sbin/slurmd -D -s\n".into())
}

/// The drop-in, run as systemd runs it, with `gres-rs` replaced by
/// stand-ins (no package, no root): a removed gres-rs lets slurmd start,
/// a check that hangs is killed after 10 seconds and slurmd starts (the
/// journal says so), only the fatal verdict (exit status 1) refuses the
/// start, any other failure lets it start; the real check is run with
/// `--no-detect` and `--fail-on fatal`.  `systemd-analyze verify` takes
/// slurmd's unit with it where this machine has no `/usr/bin/gres-rs`.
#[test]
fn the_slurmd_drop_in_starts_slurmd_unless_the_check_is_fatal() {
    let text = std::fs::read_to_string(workspace_root().join(DROP_IN)).expect("the drop-in");
    let argv = exec_start_pre(&text);
    assert!(argv.len() == 3 && argv[0] == "/bin/sh" && argv[1] == "-c", "ExecStartPre= is not a guarded /bin/sh -c '...': {argv:?}");
    let script = &argv[2];
    for want in ["test -x /usr/bin/gres-rs", "timeout -k ", "/usr/bin/gres-rs check --quiet --no-detect --fail-on fatal"] {
        assert!(script.contains(want), "{want} not in the drop-in's command: {script}");
    }
    let dir = TempDir::new(&format!("gres-rs-drop-in-{}", std::process::id()));
    let n = std::cell::Cell::new(0);
    let with = |stub: Option<&str>| -> (Option<i32>, String, Duration) {
        n.set(n.get() + 1);
        let path = dir.0.join(format!("gres-rs-{}", n.get()));
        if let Some(body) = stub {
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        let argv: Vec<String> = argv.iter().map(|w| w.replace("/usr/bin/gres-rs", &path.display().to_string())).collect();
        run_unit_command(Command::new(&argv[0]), &argv, &[])
    };
    let (code, out, _) = with(None);
    assert!(code == Some(0) && out.contains("is not installed: slurmd starts unchecked"), "without gres-rs: {code:?}\n{out}");
    let (code, out, _) = with(Some("echo \"$*\"; exit 0"));
    assert!(code == Some(0) && out.contains("check --quiet --no-detect --fail-on fatal"), "a passing check: {code:?}\n{out}");
    let (code, out, _) = with(Some("echo 'error[fatal]: slurmd stops' >&2; exit 1"));
    assert!(code == Some(1) && out.contains("error[fatal]") && out.contains("not started"), "a fatal verdict: {code:?}\n{out}");
    let (code, out, _) = with(Some("echo 'gres-rs: check: cannot read slurm.conf' >&2; exit 2"));
    assert!(code == Some(0) && out.contains("exit status 2"), "an unreadable slurm.conf: {code:?}\n{out}");
    let (code, out, took) = with(Some("trap '' TERM; sleep 60"));
    assert!(code == Some(0) && out.contains("did not finish in 10 seconds"), "a hanging check: {code:?}\n{out}");
    assert!(took < Duration::from_secs(20), "the hanging check held slurmd's start {took:?}");

    if !Path::new("/usr/bin/gres-rs").exists() {
        if let Some((ok, out)) = verify_slurmd_unit(&slurmd_unit(), &text) {
            assert!(ok && !out.contains("gres-rs"), "systemd-analyze verify slurmd.service with the drop-in, no /usr/bin/gres-rs:\n{out}");
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

fn assert_breaks_other_divert_versions(deb: &Path) {
    let (_, v) = run(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg("Version"));
    let (_, breaks) = run(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg("Breaks"));
    let v = v.trim();
    for want in [format!("{DIVERT_PACKAGE} (<< {v})"), format!("{DIVERT_PACKAGE} (>> {v})")] {
        assert!(breaks.contains(&want), "Breaks: {want} not in {}: {breaks}", deb.display());
    }
}

/// A prerm's output, removal leaving slurmd without a gpu_nvml.so while
/// it picks gpu/nvml: the files it loads after, and the warning.
fn assert_prerm_warns(out: &str, package: &str) {
    let p = format!("{package}:");
    for want in [
        format!("{p}     gres_gpu.so    /"),
        format!("{p}     gpu_nvml.so    none, and slurmd picks gpu/nvml ("),
        format!("{p} WARNING: slurmd will not start"),
    ] {
        assert!(out.contains(&want), "{want} not in the prerm's output:\n{out}");
    }
}

/// The installed slurmd's release, e.g. "22.05.8".
fn slurm_version_installed() -> String {
    let (ok, out) = run(Command::new("slurmd").arg("-V"));
    assert!(ok, "slurmd -V: {out}");
    out.split_whitespace().last().unwrap_or_default().to_string()
}

/// The RPM spec, for sites that build Slurm's RPMs from SchedMD's tarball:
/// rpm's own parser takes it for a given release (the release is in the
/// package's release and in its exact requirements), rpmlint finds no
/// error, and rpmbuild makes the source package.  The binary build
/// (`rpmbuild -bb`, a full release build of the workspace) is verified by
/// hand (docs/install.md).
#[test]
fn the_rpm_spec_parses_lints_and_makes_a_source_package() {
    let have = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !have("rpmspec") || !have("rpmbuild") {
        assert!(!strict_mode(), "rpmspec/rpmbuild missing (tests/setup-debian.sh installs rpm)");
        harness::ledger::skipped("the_rpm_spec_parses_lints_and_makes_a_source_package", "no rpmspec/rpmbuild");
        return;
    }
    let spec = workspace_root().join("packaging/rpm/slurm-gpu-gres.spec");
    let (ok, parsed) = run(Command::new("rpmspec").arg("-P").arg(&spec).args(["--define", "slurm_version 24.05.8"]));
    assert!(ok, "rpmspec -P:\n{parsed}");
    let version = env!("CARGO_PKG_VERSION");
    // The library in a package of its own, which the plugin files'
    // requires, so that rpm installs it first (docs/install.md, "Upgrades").
    let libs =
        format!("%files libs\n%license packaging/debian/copyright\n%dir %{{_libdir}}/slurm-gpu-gres\n%{{_libdir}}/slurm-gpu-gres/libgres_rs-{version}.so");
    assert!(
        parsed.lines().any(|l| l.starts_with("Requires:       slurm-gpu-gres-libs") && l.ends_with(&format!(") = {version}-1.slurm24.05.8"))),
        "the plugin files do not require their library's package:\n{parsed}"
    );
    for want in
        ["Release:        1.slurm24.05.8", "BuildRequires:  slurm-devel = 24.05.8", "Requires:       slurm = 24.05.8", "%{_libdir}/slurm-gpu-gres", &libs]
    {
        let want = want.replace("%{_libdir}", "/usr/lib64");
        assert!(parsed.contains(&want), "{want} not in the parsed spec:\n{parsed}");
    }
    // The scriptlets as rpm runs them (sh, $1 the count left), with
    // AutoDetect=nvml and a wedged driver: every gres-rs run is time-limited
    // and without NVML, each returns within seconds, asking NVML nothing;
    // %preun tells that slurmd, which picks gpu/nvml, finds no gpu_nvml.so
    // once the package is gone.
    let conf_dir = TempDir::new(&format!("gres-rs-rpm-conf-{}", std::process::id()));
    let (conf, gres) = nvml_node_conf(&format!("/usr/lib64/slurm-gpu-gres:{}", stock_plugin_dir().display()));
    std::fs::write(conf_dir.0.join("slurm.conf"), conf).unwrap();
    std::fs::write(conf_dir.0.join("gres.conf"), gres).unwrap();
    let nvml = HangingNvml::new("rpm");
    let mut env = nvml.env.clone();
    env.push(("SLURM_CONF".into(), conf_dir.0.join("slurm.conf").display().to_string()));
    let mut outputs = Vec::new();
    for (name, count) in [("%post", "1"), ("%preun", "0")] {
        let body: Vec<&str> = parsed.lines().skip_while(|l| *l != name).skip(1).take_while(|l| !l.starts_with('%')).collect();
        let body = body.join("\n");
        assert!(body.contains("exit 0"), "no {name} scriptlet in the parsed spec:\n{parsed}");
        for l in body.lines().filter(|l| l.contains("/gres-rs check")) {
            assert!(l.contains("timeout -k ") && l.contains("--no-detect"), "{name} runs gres-rs without a time limit or with NVML: {l}");
        }
        let body = body.replace("/usr/bin/gres-rs", env!("CARGO_BIN_EXE_gres-rs"));
        let t = Instant::now();
        let (ok, out) = run(Command::new("sh").arg("-c").arg(&body).arg(name).arg(count).envs(env.iter().map(|(k, v)| (k, v))));
        assert!(ok && t.elapsed() < QUICK, "{name} (AutoDetect=nvml, hanging NVML) failed or took {:?}:\n{out}", t.elapsed());
        nvml.assert_untouched(name);
        outputs.push(out);
    }
    assert!(outputs[0].contains("gres-rs check --quiet --no-detect"), "%post runs no check:\n{}", outputs[0]);
    assert_prerm_warns(&outputs[1], PACKAGE);
    if have("rpmlint") {
        // Debian's rpmlint checks Mandriva's naming too: a -libs package
        // named without %mklibname is an error there, and the convention
        // of the RHEL-like systems this spec is for.
        let mandriva_only = "E: lib-package-without-%mklibname";
        let (_, lint) = run(Command::new("rpmlint").arg(&spec));
        let errors = lint.lines().filter(|l| l.contains(" E: ") && !l.contains(mandriva_only)).count();
        let counted = lint.lines().find_map(|l| l.split_once(" errors").and_then(|(n, _)| n.rsplit(' ').next()?.parse::<usize>().ok()));
        let ignored = lint.lines().filter(|l| l.contains(mandriva_only)).count();
        assert!(errors == 0 && counted == Some(ignored), "rpmlint:\n{lint}");
    }
    let top = target_dir().join("rpm-test");
    let _ = std::fs::remove_dir_all(&top);
    std::fs::create_dir_all(top.join("SOURCES")).unwrap();
    let tarball = top.join("SOURCES/slurm-gpu-gres-0.1.0.tar.gz");
    let (ok, out) =
        run(Command::new("git").arg("-C").arg(workspace_root()).args(["archive", "--prefix=slurm-gpu-gres-0.1.0/", "-o"]).arg(&tarball).arg("HEAD"));
    assert!(ok, "git archive: {out}");
    let (ok, out) = run(Command::new("rpmbuild")
        .args(["-bs", "--nodeps", "--define"])
        .arg(format!("_topdir {}", top.display()))
        .args(["--define", "slurm_version 24.05.8"])
        .arg(&spec));
    assert!(ok, "rpmbuild -bs:\n{out}");
    assert!(top.join("SRPMS/slurm-gpu-gres-0.1.0-1.slurm24.05.8.src.rpm").is_file(), "no source RPM:\n{out}");
}

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

/// What a test-bed chroot holds: its dpkg status file, and each file and
/// symbolic link (path, kind, size, modification time, link target).
/// Directories and empty files are left out: the harness makes those as
/// mount points for binds in the chroot (empty, and kept), and other tests
/// running at the same time may add them.
struct ChrootSnapshot {
    status: Vec<u8>,
    files: std::collections::BTreeMap<PathBuf, String>,
}

impl ChrootSnapshot {
    fn take(root: &Path) -> ChrootSnapshot {
        use std::os::unix::fs::MetadataExt;
        let status = std::fs::read(root.join("var/lib/dpkg/status")).expect("the chroot's dpkg status");
        let mut files = std::collections::BTreeMap::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(d) = todo.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                let Ok(md) = std::fs::symlink_metadata(&p) else { continue };
                let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
                if md.is_dir() {
                    todo.push(p);
                } else if md.file_type().is_symlink() {
                    files.insert(rel, format!("link {}", std::fs::read_link(&p).map(|t| t.display().to_string()).unwrap_or_default()));
                } else if md.len() > 0 {
                    files.insert(rel, format!("{:o} {} {}.{}", md.mode(), md.len(), md.mtime(), md.mtime_nsec()));
                }
            }
        }
        ChrootSnapshot { status, files }
    }

    fn assert_same(&self, after: &ChrootSnapshot) {
        assert!(self.status == after.status, "the chroot's dpkg status file changed");
        let changed: Vec<String> = self
            .files
            .iter()
            .filter(|(p, v)| after.files.get(*p) != Some(v))
            .map(|(p, v)| format!("- {} {v} (now {:?})", p.display(), after.files.get(p)))
            .chain(after.files.iter().filter(|(p, _)| !self.files.contains_key(*p)).map(|(p, v)| format!("+ {} {v}", p.display())))
            .collect();
        assert!(changed.is_empty(), "the chroot changed ({} files):\n{}", changed.len(), changed.iter().take(40).cloned().collect::<Vec<_>>().join("\n"));
    }
}

/// Every path (files, links, directories) under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(p.clone());
            }
            v.push(p.strip_prefix(dir).unwrap_or(&p).to_path_buf());
        }
    }
    v.sort();
    v
}
