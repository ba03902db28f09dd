//! `install`: the directories it makes or refuses, and installing next to
//! Slurm's own plugin files.  The helpers are shared with the tests that
//! need our files installed (`plugin_dir`, `nvml`).

use crate::run::{temp_dir, text, GRES_RS};
use gres_test_harness::TempDir as Dir;
use slurm_gpu_gres::{BUILT_LIBRARY_FILE, LIBRARY_FILE};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A new directory for `install` to write into, under cargo's target
/// directory: `install` refuses one in /tmp (writable by everyone) or one
/// not owned by root.  `None` (the test is skipped) where the target
/// directory is not root's, or the tests do not run as root.
pub fn install_dir(name: &str) -> Option<Dir> {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gres-rs-cli-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    let safe = |a: &Path| fs::metadata(a).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0);
    if let Some(unsafe_dir) = d.ancestors().find(|a| !safe(a)) {
        gres_test_harness::ledger::skipped(name, &format!("{} is not root's, or is writable by others: install would refuse it", unsafe_dir.display()));
        return None;
    }
    Some(Dir(d))
}

/// `gres-rs install` of this build's files into `dest`, for Slurm 22.05.8.
fn install_args(dest: &Path, force: bool) -> Vec<std::ffi::OsString> {
    let built = Path::new(GRES_RS).parent().unwrap();
    let mut args: Vec<std::ffi::OsString> = vec!["install".into(), "--plugin-dir".into(), dest.into(), "--from".into(), built.into()];
    args.extend(["--slurm-conf".into(), "/nonexistent/slurm.conf".into()]);
    if force {
        args.push("--force".into());
    }
    args
}

pub fn install_into(dest: &Path, force: bool) -> Output {
    Command::new(GRES_RS).args(install_args(dest, force)).env("GRES_RS_SLURMD_VERSION", "22.05.8").output().unwrap()
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

const INSTALLED: [&str; 5] = ["gpu_nvml.so", "gres_gpu.so", "gres_mps.so", "gres_shard.so", LIBRARY_FILE];

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn install_makes_dirs_0755_whatever_the_umask() {
    let Some(base) = install_dir("umask") else { return };
    let dest = base.0.join("a/b/plugins");
    let out = Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\"", GRES_RS])
        .args(install_args(&dest, false))
        .env("GRES_RS_SLURMD_VERSION", "22.05.8")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for d in ["a", "a/b", "a/b/plugins"] {
        assert_eq!(mode(&base.0.join(d)), 0o755, "{d} under umask 000");
    }
    assert_eq!(entries(&dest), INSTALLED);
    for name in INSTALLED {
        let f = dest.join(name);
        assert!(fs::symlink_metadata(&f).unwrap().file_type().is_file(), "{name}");
        assert_eq!(mode(&f), 0o755, "{name}");
    }
}

#[test]
fn install_refuses_dirs_others_may_write() {
    let Some(base) = install_dir("unsafe") else { return };
    let why = "anyone who can write to a PluginDir entry can make root's daemons load their code";
    // The directory itself writable by group or others: refused, nothing
    // written.
    for (m, who) in [(0o775, "group"), (0o757, "others"), (0o777, "group and others")] {
        let dest = base.0.join(format!("mode-{m:o}"));
        fs::create_dir(&dest).unwrap();
        fs::set_permissions(&dest, fs::Permissions::from_mode(m)).unwrap();
        let out = install_into(&dest, false);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("gres-rs: error: {} is writable by {who} (mode {m:04o}", dest.display())), "{err}");
        assert!(err.contains(why) && err.contains("(--force installs anyway)") && err.contains("nothing installed"), "{err}");
        assert!(entries(&dest).is_empty(), "nothing installed in {}", dest.display());
    }
    // --force: installed, with the same words as a warning.
    let dest = base.0.join("mode-777");
    let out = install_into(&dest, true);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("gres-rs: warning: {} is writable by group and others (mode 0777", dest.display())), "{err}");
    assert!(err.contains("(installing anyway: --force)") && !err.contains("error:"), "{err}");
    assert_eq!(entries(&dest), INSTALLED);
    // A parent writable by everyone, even with the sticky bit (/tmp):
    // whoever may add a name there may replace the whole tree below.
    let sticky = base.0.join("sticky");
    fs::create_dir(&sticky).unwrap();
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
    let dest = sticky.join("plugins");
    let out = install_into(&dest, false);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("gres-rs: error: {} is writable by group and others (mode 1777", sticky.display())), "{err}");
    assert!(err.contains("sticky") && err.contains(why), "{err}");
    assert!(!dest.exists(), "not even the directory is made");
    // A symlink in that parent to a safe directory: what slurmd follows
    // can be changed by anyone.
    let safe = base.0.join("safe");
    fs::create_dir(&safe).unwrap();
    std::os::unix::fs::symlink(&safe, sticky.join("link")).unwrap();
    let out = install_into(&sticky.join("link"), false);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("gres-rs: error: {} is writable by group and others (mode 1777", sticky.display())), "{err}");
    assert!(entries(&safe).is_empty());
}

#[test]
fn install_refuses_dirs_not_owned_by_root() {
    let Some(base) = install_dir("owner") else { return };
    let dest = base.0.join("nobodys");
    fs::create_dir(&dest).unwrap();
    std::os::unix::fs::chown(&dest, Some(65534), Some(65534)).unwrap();
    let owner = Command::new("id").args(["-nu", "65534"]).output().map(|o| text(&o.stdout).trim().to_string()).unwrap_or_default();
    let owner = if owner.is_empty() { "65534".to_string() } else { owner };
    for sub in [&dest, &dest.join("plugins")] {
        let out = install_into(sub, false);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("gres-rs: error: {} is owned by {owner} (uid 65534), not root", dest.display())), "{err}");
        assert!(err.contains("anyone who can write to a PluginDir entry can make root's daemons load their code"), "{err}");
        assert!(entries(&dest).is_empty(), "nothing installed");
    }
}

#[test]
fn install_leaves_a_directory_at_a_files_name() {
    let Some(base) = install_dir("isdir") else { return };
    fs::create_dir(base.0.join("gres_gpu.so")).unwrap();
    fs::write(base.0.join("gres_gpu.so/keep"), "x").unwrap();
    let out = install_into(&base.0, false);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("gres-rs: error: cannot install {}: Is a directory", base.0.join("gres_gpu.so").display())), "{err}");
    assert_eq!(fs::read(base.0.join("gres_gpu.so/keep")).unwrap(), b"x");
    assert!(entries(&base.0).iter().all(|n| !n.starts_with('.')), "no temporary file left: {:?}", entries(&base.0));
}

#[test]
fn install_refuses_the_package_managers_dir() {
    let Some(stock) = stock_dir() else {
        gres_test_harness::ledger::skipped("install_refuses_the_package_managers_dir", "no Slurm plugins installed");
        return;
    };
    let Some(package) = Command::new("dpkg")
        .arg("-S")
        .arg(&stock)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| text(&o.stdout).lines().find_map(|l| l.strip_suffix(&format!(": {}", stock.display())).map(str::to_string)))
    else {
        gres_test_harness::ledger::skipped("install_refuses_the_package_managers_dir", &format!("dpkg does not know {}", stock.display()));
        return;
    };
    let snapshot = || -> Vec<(String, Vec<u8>, u32)> {
        entries(&stock).into_iter().map(|n| (n.clone(), fs::read(stock.join(&n)).unwrap_or_default(), mode(&stock.join(&n)))).collect()
    };
    // In a mount namespace of its own, the directory bind-mounted
    // read-only over itself: should the refusal ever break, the install
    // fails there instead of overwriting the system's plugins.
    let read_only = |force: bool| {
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", "mount -o bind,ro \"$0\" \"$0\" && exec \"$@\""])
            .arg(&stock)
            .arg(GRES_RS)
            .args(install_args(&stock, force))
            .env("GRES_RS_SLURMD_VERSION", "22.05.8")
            .output()
            .unwrap()
    };
    if !Command::new("unshare").args(["--mount", "true"]).status().is_ok_and(|s| s.success()) {
        gres_test_harness::ledger::skipped("install_refuses_the_package_managers_dir", "no unshare --mount: not root?");
        return;
    }
    let before = snapshot();
    // Not even with --force: the package's next upgrade or removal would
    // overwrite or delete what was installed, and rollback is gone.
    for force in [false, true] {
        let out = read_only(force);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("gres-rs: error: {} belongs to the package {package}", stock.display())), "{err}");
        assert!(err.contains("--force does not change this") && err.contains("nothing installed"), "{err}");
        assert!(snapshot() == before, "{} untouched", stock.display());
    }
}

pub fn stock_dir() -> Option<PathBuf> {
    ["/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib64/slurm", "/usr/lib/slurm"]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("gres_gpu.so").is_file() && d.join("gpu_generic.so").is_file())
}

#[test]
fn install_plugins() {
    let Some(stock) = stock_dir() else {
        gres_test_harness::ledger::skipped("install_plugins", "no Slurm plugins installed");
        return;
    };
    // The plugin files are built into gres-rs; the library comes from
    // --from.
    let built = Path::new(GRES_RS).parent().unwrap();
    let from = temp_dir("install-from");
    fs::copy(built.join(BUILT_LIBRARY_FILE), from.0.join(BUILT_LIBRARY_FILE)).expect("our libgres_rs.so is built (cargo build --workspace)");
    let Some(to) = install_dir("install-to") else { return };
    let dest = to.0.join("plugins");
    let run = |version: &str, force: bool| {
        let mut c = Command::new(GRES_RS);
        c.args(["install", "--plugin-dir"]).arg(&dest).arg("--from").arg(&from.0).args(["--slurm-conf", "/nonexistent/slurm.conf"]);
        if force {
            c.arg("--force");
        }
        c.env("GRES_RS_SLURMD_VERSION", version).output().unwrap()
    };
    let out = run("22.05.8", false);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for name in ["gres_gpu", "gres_mps", "gres_shard", "gpu_nvml"] {
        let file = dest.join(format!("{name}.so"));
        assert!(file.is_file(), "{name}.so");
        // What slurmd would check first: a Slurm plugin of this release.
        let nm = Command::new("nm").args(["-D", "--defined-only"]).arg(&file).output().unwrap();
        let symbols = text(&nm.stdout);
        for sym in ["plugin_name", "plugin_type", "plugin_version", "init", "fini"] {
            assert!(symbols.lines().any(|l| l.ends_with(&format!(" {sym}"))), "{name}.so lacks {sym}:\n{symbols}");
        }
    }
    assert_eq!(fs::read(dest.join(LIBRARY_FILE)).unwrap(), fs::read(built.join(BUILT_LIBRARY_FILE)).unwrap());
    assert!(err.contains(&format!("{LIBRARY_FILE} (the plugins' code)")), "{err}");
    assert!(err.contains("gres_gpu.so (gres/gpu, Slurm 22.05.8)"), "{err}");
    assert_eq!(text(&out.stdout), format!("PluginDir={}:{}\n", dest.display(), stock.display()));
    assert_eq!(fs::read_dir(&dest).unwrap().count(), 5, "no temporary files left");
    // Earlier versions' libraries go once the plugin files naming them are
    // replaced; anything else stays.
    for earlier in ["libgres_rs.so", "libgres_rs-0.0.9.so"] {
        fs::write(dest.join(earlier), b"an earlier library").unwrap();
    }
    std::os::unix::fs::symlink(LIBRARY_FILE, dest.join("libgres_rs-0.0.8.so")).unwrap();
    fs::write(dest.join("libgres_rs.so.1"), b"not ours").unwrap();
    let out = run("22.05.8", false);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for earlier in ["libgres_rs.so", "libgres_rs-0.0.9.so"] {
        assert!(!dest.join(earlier).exists(), "{earlier} removed: {err}");
        assert!(err.contains(&format!("removed {} (an earlier version's library", dest.join(earlier).display())), "{err}");
    }
    let installed_at = |name: &str| err.find(&format!("installed {}", dest.join(name).display())).unwrap_or_else(|| panic!("{name}: {err}"));
    let removed_at = err.find("removed ").unwrap();
    assert!(
        INSTALLED.iter().all(|f| installed_at(LIBRARY_FILE) <= installed_at(f) && installed_at(f) < removed_at),
        "library, plugin files, then removals: {err}"
    );
    assert!(
        dest.join("libgres_rs.so.1").is_file() && fs::symlink_metadata(dest.join("libgres_rs-0.0.8.so")).is_ok(),
        "only regular files of our library's names"
    );
    fs::remove_file(dest.join("libgres_rs.so.1")).unwrap();
    fs::remove_file(dest.join("libgres_rs-0.0.8.so")).unwrap();
    // Another release: refused, unless forced.
    fs::remove_dir_all(&dest).unwrap();
    let out = run("23.02.1", false);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is for Slurm 22.05.8, the installed slurmd is 23.02.1"), "{}", text(&out.stderr));
    assert!(!dest.exists(), "nothing installed");
    let out = run("23.02.1", true);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    fs::remove_dir_all(&dest).unwrap();
    // Not our library at all, or one of another build that lacks the
    // functions the plugin files jump to: refused, --force or not.
    fs::copy(stock.join("gpu_generic.so"), from.0.join(BUILT_LIBRARY_FILE)).unwrap();
    for force in [false, true] {
        let out = run("22.05.8", force);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("not the plugins' shared library"), "{}", text(&out.stderr));
    }
    let mut other_build = fs::read(built.join(BUILT_LIBRARY_FILE)).unwrap();
    assert!(replace_all(&mut other_build, b"gres_rs_gres_mps_", b"gres_rs_gres_mpX_"), "the library names its symbols gres_rs_<file>_*");
    fs::write(from.0.join(BUILT_LIBRARY_FILE), &other_build).unwrap();
    let out = run("22.05.8", true);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("gres_mps.so (built into gres-rs) needs gres_rs_gres_mps_entries_") && err.contains("the two are from different builds"), "{err}");
    assert!(!dest.exists(), "nothing installed");
    // No library: a usage error.
    fs::remove_file(from.0.join(BUILT_LIBRARY_FILE)).unwrap();
    let out = run("22.05.8", false);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&format!("no {BUILT_LIBRARY_FILE} or {LIBRARY_FILE} in")), "{}", text(&out.stderr));
    assert!(!dest.exists(), "nothing installed");
}

/// Replace every occurrence of `from` in `bytes` by `to` (same length);
/// whether there was one.
pub fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> bool {
    let mut found = false;
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            found = true;
            i += from.len();
        } else {
            i += 1;
        }
    }
    found
}
