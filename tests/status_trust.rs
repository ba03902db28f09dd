//! `gres-rs status` trusts only real daemons and prints nothing raw that a
//! process made up: a process of `nobody` named `slurmd` (a copy of sleep
//! in a directory whose name holds a terminal escape sequence) that maps
//! files named `gres_gpu.so` and our library from there is listed as
//! ignored, escaped, and never makes the exit status "ours in use"; the
//! same paths mapped by a daemon root started are printed escaped.  Root
//! only (skipped otherwise); no Slurm needed.

#![cfg(feature = "cli")]

use gres_test_harness::TempDir;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const GRES_RS: &str = env!("CARGO_BIN_EXE_gres-rs");

/// The name part that a terminal would act on: red text.
const EVIL: &str = "\x1b[31mevil";

/// One fake at a time: the root one is a daemon, which the other test
/// would see.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// A small shared library that only needs the C library (glibc's stub
/// `librt.so.1`), found beside the C library this test runs with.
fn small_library() -> Option<PathBuf> {
    let maps = fs::read_to_string("/proc/self/maps").ok()?;
    let libc = maps.lines().filter_map(|l| l.find('/').map(|i| &l[i..])).find(|p| p.ends_with("/libc.so.6"))?;
    let rt = Path::new(libc).parent()?.join("librt.so.1");
    rt.is_file().then_some(rt)
}

/// A fake daemon: killed (by its pid, `Child::kill`) and reaped when
/// dropped, whatever the test did.
struct Fake(Child);

impl Fake {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory `<tmp>/gres-rs-status-<pid>-<tag>-ESC[31mevil` holding
/// `slurmd` (a copy of sleep), `gres_gpu.so` and our library (copies
/// of `lib`), all owned by `uid`.
fn fake_dir(tag: &str, lib: &Path, uid: u32) -> TempDir {
    let d = TempDir::new(&format!("gres-rs-status-{}-{tag}-{EVIL}", std::process::id()));
    fs::set_permissions(&d.0, fs::Permissions::from_mode(0o755)).unwrap();
    let sleep = fs::canonicalize("/bin/sleep").unwrap();
    for (from, to) in [(sleep.as_path(), "slurmd"), (lib, "gres_gpu.so"), (lib, slurm_gpu_gres::LIBRARY_FILE)] {
        fs::copy(from, d.0.join(to)).unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), d.0.display()));
        fs::set_permissions(d.0.join(to), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(d.0.join(to), Some(uid), Some(uid)).unwrap();
    }
    std::os::unix::fs::chown(&d.0, Some(uid), Some(uid)).unwrap();
    d
}

/// Starts `dir/slurmd 300` with both `.so` files preloaded (so mapped), as
/// `user` through setpriv when given, and waits until its maps show them.
fn start(dir: &Path, user: Option<(u32, u32)>) -> Fake {
    let preload = format!("{}:{}", dir.join("gres_gpu.so").display(), dir.join(slurm_gpu_gres::LIBRARY_FILE).display());
    let mut cmd = match user {
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.args([format!("--reuid={uid}"), format!("--regid={gid}"), "--clear-groups".into(), "env".into()]);
            c.arg(format!("LD_PRELOAD={preload}")).arg(dir.join("slurmd"));
            c
        }
        None => {
            let mut c = Command::new(dir.join("slurmd"));
            c.env("LD_PRELOAD", &preload);
            c
        }
    };
    cmd.arg("300").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let fake = Fake(cmd.spawn().unwrap_or_else(|e| panic!("start the fake slurmd: {e}")));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let comm = fs::read_to_string(format!("/proc/{}/comm", fake.pid())).unwrap_or_default();
        let maps = fs::read(format!("/proc/{}/maps", fake.pid())).unwrap_or_default();
        let mapped = String::from_utf8_lossy(&maps).contains(slurm_gpu_gres::LIBRARY_FILE);
        if comm.trim_end() == "slurmd" && mapped {
            return fake;
        }
        assert!(Instant::now() < deadline, "the fake slurmd (pid {}) did not start: comm {comm:?}", fake.pid());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn status(conf: &Path, json: bool) -> (Option<i32>, String) {
    let mut cmd = Command::new(GRES_RS);
    cmd.arg("status").arg("--slurm-conf").arg(conf);
    if json {
        cmd.args(["--format", "json"]);
    }
    let out: Output = cmd.env_remove("SLURM_CONF").output().unwrap();
    let mut all = out.stdout.clone();
    all.extend_from_slice(&out.stderr);
    assert!(!all.contains(&0x1b), "gres-rs status printed a raw ESC:\n{}", String::from_utf8_lossy(&all));
    assert!(!all.iter().any(|&b| b.is_ascii_control() && b != b'\n'), "a control character:\n{}", String::from_utf8_lossy(&all));
    (out.status.code(), String::from_utf8(out.stdout).expect("UTF-8 only"))
}

/// Whether the output lists a daemon (one started by something else on
/// this host, e.g. a test bed running beside this test).
fn other_daemons(text: &str, pid: u32) -> bool {
    text.lines().any(|l| l.ends_with("):") && !l.contains(&format!("(pid {pid})")))
}

fn setup(name: &str) -> Option<(PathBuf, (u32, u32))> {
    if !root() {
        gres_test_harness::ledger::skipped(name, "not root: it starts a process as nobody");
        return None;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        gres_test_harness::ledger::skipped(name, "no setpriv");
        return None;
    }
    let Some(lib) = small_library() else {
        gres_test_harness::ledger::skipped(name, "no librt.so.1 beside libc.so.6");
        return None;
    };
    let passwd = fs::read_to_string("/etc/passwd").unwrap();
    let nobody = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == "nobody")
        .map(|f| (f[2].parse().unwrap(), f[3].parse().unwrap()));
    let Some(nobody) = nobody else {
        gres_test_harness::ledger::skipped(name, "no user nobody");
        return None;
    };
    Some((lib, nobody))
}

#[test]
fn status_ignores_a_fake_slurmd_of_nobody() {
    let Some((lib, (uid, gid))) = setup("status_ignores_a_fake_slurmd_of_nobody") else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fake_dir("nobody", &lib, uid);
    let fake = start(&dir.0, Some((uid, gid)));
    let pid = fake.pid();
    let escaped_dir = dir.0.display().to_string().replace('\x1b', "\\x1b");
    let conf = TempDir::new(&format!("gres-rs-status-{}-conf", std::process::id()));
    // Root alone; then nobody as SlurmUser: the executable, nobody's copy
    // of sleep, still makes it no daemon.
    for (slurm_user, why) in [
        ("root", format!("runs as uid {uid}, not as root; /proc/{pid}/exe is {escaped_dir}/slurmd, not a root-owned Slurm binary (owned by uid {uid})")),
        ("nobody", format!("/proc/{pid}/exe is {escaped_dir}/slurmd, not a root-owned Slurm binary (owned by uid {uid})")),
    ] {
        let slurm_conf = conf.0.join(format!("slurm-{slurm_user}.conf"));
        fs::write(&slurm_conf, format!("SlurmUser={slurm_user}\n")).unwrap();
        let (code, text) = status(&slurm_conf, false);
        let want = format!("ignored: pid {pid} named slurmd: {why}");
        assert!(text.lines().any(|l| l == want), "SlurmUser={slurm_user}: no line\n{want}\nin:\n{text}");
        assert!(!text.contains(&format!("slurmd (pid {pid})")), "the fake is shown as a daemon:\n{text}");
        if !other_daemons(&text, pid) {
            assert_eq!(code, Some(1), "{text}");
            assert!(text.starts_with("no slurmd, slurmstepd or slurmctld runs on this host\n"), "{text}");
        }
        let (code_json, json) = status(&slurm_conf, true);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let ignored = v["ignored"].as_array().unwrap();
        assert!(ignored.iter().any(|i| i["pid"] == pid && i["reason"] == why.as_str()), "{json}");
        assert!(!v["daemons"].as_array().unwrap().iter().any(|d| d["pid"] == pid), "{json}");
        if !other_daemons(&text, pid) {
            assert_eq!(code_json, Some(1), "{json}");
        }
    }
    drop(fake);
}

#[test]
fn status_escapes_the_paths_a_daemon_of_root_mapped() {
    let Some((lib, _)) = setup("status_escapes_the_paths_a_daemon_of_root_mapped") else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Root's own copy in root's directory: a daemon, as root chose; what
    // it mapped from the directory with the escape sequence is shown,
    // escaped.
    let dir = fake_dir("root", &lib, 0);
    let fake = start(&dir.0, None);
    let pid = fake.pid();
    let escaped_dir = dir.0.display().to_string().replace('\x1b', "\\x1b");
    let conf = TempDir::new(&format!("gres-rs-status-{}-rootconf", std::process::id()));
    let slurm_conf = conf.0.join("slurm.conf");
    fs::write(&slurm_conf, "SlurmUser=root\n").unwrap();
    let (code, text) = status(&slurm_conf, false);
    assert!(text.contains(&format!("slurmd (pid {pid}):\n")), "{text}");
    assert!(text.contains(&format!("library      ours                  {escaped_dir}/{}\n", slurm_gpu_gres::LIBRARY_FILE)), "{text}");
    assert!(text.contains(&format!("gres_gpu.so  ours                  {escaped_dir}/gres_gpu.so  (")), "{text}");
    assert!(text.lines().last().is_some_and(|l| l.starts_with("our plugins are in use by: ") && l.contains(&format!("slurmd (pid {pid})"))), "{text}");
    assert_eq!(code, Some(0), "{text}");
    let (_, json) = status(&slurm_conf, true);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let d = v["daemons"].as_array().unwrap().iter().find(|d| d["pid"] == pid).unwrap_or_else(|| panic!("{json}"));
    assert!(d["plugins"].as_array().unwrap().iter().any(|p| p["path"] == format!("{escaped_dir}/gres_gpu.so").as_str()), "{json}");
    drop(fake);
}
