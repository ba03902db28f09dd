//! The `gres-rs` command as users see it: exit statuses, messages with
//! their place and caret, JSON, the examples, `detect` without NVML, and
//! `install`.  No Slurm daemon is needed (`install` uses Slurm's own plugin
//! files when they are installed).

#![cfg(feature = "cli")]

use gres_test_harness::standin;

use gres_test_harness::TempDir as Dir;
use slurm_gpu_gres::{BUILT_LIBRARY_FILE, LIBRARY_FILE};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GRES_RS: &str = env!("CARGO_BIN_EXE_gres-rs");

fn temp_dir(name: &str) -> Dir {
    Dir::new(&format!("gres-rs-cli-{}-{name}", std::process::id()))
}

/// A configuration in a new directory: slurm.conf and (if given) gres.conf.
fn conf(name: &str, slurm: &str, gres: Option<&str>) -> Dir {
    let d = temp_dir(name);
    fs::write(d.0.join("slurm.conf"), slurm).unwrap();
    if let Some(g) = gres {
        fs::write(d.0.join("gres.conf"), g).unwrap();
    }
    d
}

fn gres_rs(args: &[&str]) -> Output {
    Command::new(GRES_RS).args(args).env_remove("SLURM_CONF").env("NO_COLOR", "1").output().unwrap()
}

fn check(dir: &Dir, extra: &[&str]) -> Output {
    let slurm = dir.0.join("slurm.conf");
    let mut args = vec!["check", "--slurm-conf", slurm.to_str().unwrap()];
    args.extend_from_slice(extra);
    gres_rs(&args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const SLURM: &str = "GresTypes=gpu,mps\nNodeName=n[1-4] CPUs=8 Gres=gpu:2\n";

#[test]
fn clean_configuration() {
    let d = conf("clean", SLURM, Some("Name=gpu File=/dev/nvidia[0-1]\n"));
    let out = check(&d, &["--node", "n1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // For people: the node, then a table.
    assert_eq!(
        text(&out.stdout),
        "n1: 8 CPUs, AutoDetect=unset, from gres.conf\n  \
         NAME  TYPE  COUNT  INDEX  FILE          CORES\n  \
         gpu   -     1      0      /dev/nvidia0  -\n  \
         gpu   -     1      1      /dev/nvidia1  -\n"
    );
    assert!(text(&out.stderr).ends_with("gres-rs: check: 1 node: 0 fatal, 0 errors, 0 warnings\n"), "{}", text(&out.stderr));
    // For diffing with slurmd -G: its lines.
    let out = check(&d, &["--node", "n1", "--format", "slurmd"]);
    assert_eq!(
        text(&out.stdout),
        "NodeName=n1 CPUs=8 AutoDetect=unset\n\
         Gres Name=gpu Type=(null) Count=1 Index=0 ID=7696487 File=/dev/nvidia0 (null)\n\
         Gres Name=gpu Type=(null) Count=1 Index=1 ID=7696487 File=/dev/nvidia1 (null)\n"
    );
    // All nodes read the same lines: one table.
    let out = check(&d, &["--all-nodes"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("n[1-4]: 8 CPUs, AutoDetect=unset, from gres.conf\n  NAME "), "{}", text(&out.stdout));
    let out = check(&d, &["--all-nodes", "--format", "slurmd"]);
    assert!(text(&out.stdout).starts_with("NodeName=n[1-4] CPUs=8"), "{}", text(&out.stdout));
    for format in ["text", "slurmd"] {
        let out = check(&d, &["--all-nodes", "--quiet", "--format", format]);
        assert!(out.stdout.is_empty(), "{format}");
    }
}

#[test]
fn fatal_error_with_caret_and_suggestion() {
    let d = conf("fatal", SLURM, Some("# gpus\nName=gpu Tpye=a100 File=/dev/nvidia[0-1]\n"));
    let out = check(&d, &["--node", "n2"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let gres = d.0.join("gres.conf");
    assert!(err.contains("error[fatal]: Parsing error at unrecognized key: Tpye"), "{err}");
    assert!(err.contains(&format!("--> {}:2:10", gres.display())), "{err}");
    assert!(err.contains("2 | Name=gpu Tpye=a100 File=/dev/nvidia[0-1]"), "{err}");
    assert!(err.contains("|          ^^^^ did you mean `Type`?"), "{err}");
    assert!(err.contains("1 fatal"), "{err}");
    // slurmd would not start: no table.
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(check(&d, &["--node", "n2", "--format", "slurmd"]).stdout.is_empty());
}

#[test]
fn problems_slurmd_only_logs() {
    let d = conf(
        "logs",
        "GresTypes=gpu,mps\nNodeName=n1 CPUs=8 Gres=gpu:4,mps:10\n",
        Some("Name=gpu File=/dev/nvidia[0-2]\nName=mps Count=10\nName=gpux Count=1\n"),
    );
    let out = check(&d, &["--node", "n1", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems: Vec<String> = v["nodes"][0]["problems"].as_array().unwrap().iter().map(|p| p["message"].as_str().unwrap().to_string()).collect();
    let has = |s: &str| problems.iter().any(|p| p.contains(s));
    assert!(has("Ignoring gres.conf record, invalid name: gpux"), "{problems:?}");
    assert!(has("mps Count=10 does not divide over the node's 3 GPUs"), "{problems:?}");
    assert!(has("gres/gpu count reported lower than configured (3 < 4): slurmctld drains the node"), "{problems:?}");
    let gpux = v["nodes"][0]["problems"].as_array().unwrap().iter().find(|p| p["message"].as_str().unwrap().contains("gpux")).unwrap();
    assert_eq!(gpux["suggestion"], "gpu");
    assert_eq!((gpux["line"].as_u64(), gpux["column"].as_u64(), gpux["len"].as_u64()), (Some(3), Some(6), Some(4)));
    assert_eq!(v["summary"]["fatal"], 0);
    assert_eq!((v["schema"].as_u64(), v["tool"].as_str(), v["tool_version"].as_str()), (Some(1), Some("gres-rs"), Some(env!("CARGO_PKG_VERSION"))));
    assert!(v["plugins_for_slurm"].as_str().is_some_and(|r| r.split('.').count() == 3), "{v}");
    let gpu = v["nodes"][0]["gres"].as_array().unwrap().iter().find(|r| r["name"] == "gpu" && r["file"] == "/dev/nvidia2").unwrap();
    assert_eq!(gpu["index"], 2);
    assert_eq!(v["nodes"][0]["starts"], true);
    assert_eq!(v["nodes"][0]["gres"][0]["name"], "mps");
    assert_eq!(v["nodes"][0]["lines"].as_array().unwrap().len(), 6);
}

#[test]
fn fail_on_chooses_the_least_severe_problem_that_fails() {
    // Errors but nothing fatal: slurmd starts (and drains the node).
    let d = conf("failon", "GresTypes=gpu,mps\nNodeName=n1 CPUs=8 Gres=gpu:4,mps:10\n", Some("Name=gpu File=/dev/nvidia[0-2]\nName=mps Count=10\n"));
    let status = |extra: &[&str]| {
        let mut args = vec!["--node", "n1", "--quiet", "--no-device-check"];
        args.extend_from_slice(extra);
        check(&d, &args).status.code()
    };
    assert_eq!(status(&[]), Some(1));
    assert_eq!(status(&["--fail-on", "error"]), Some(1));
    assert_eq!(status(&["--fail-on", "fatal"]), Some(0));
    // A fatal one fails at every level.
    let f = conf("failon-fatal", SLURM, Some("Name=gpu Tpye=a100 File=/dev/nvidia[0-1]\n"));
    assert_eq!(check(&f, &["--node", "n1", "--quiet", "--fail-on", "fatal"]).status.code(), Some(1));
    // A warning only: fails only with --fail-on warning.
    let w = conf("failon-warning", "GresTypes=gpu\nNodeName=n1 CPUs=8 Gres=gpu:2\n", Some("Name=gpu File=/dev/nvidia[0-1] Flags=env_uuid\n"));
    let out = check(&w, &["--node", "n1", "--no-device-check", "--slurm-release", "22.05"]);
    assert!(text(&out.stderr).contains("0 fatal, 0 errors, 1 warning"), "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(check(&w, &["--node", "n1", "--no-device-check", "--slurm-release", "22.05", "--fail-on", "warning"]).status.code(), Some(1));
    let out = check(&w, &["--node", "n1", "--fail-on", "never"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn without_gres_conf() {
    let d = conf("nogres", SLURM, None);
    let out = check(&d, &["--node", "n1", "--verbose"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("note: Can not stat gres.conf file"), "{err}");
    assert!(err.contains("gres/gpu count reported lower than configured (0 < 2)"), "{err}");
}

#[test]
fn usage_errors() {
    let d = conf("usage", SLURM, Some(""));
    let out = check(&d, &["--node", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("gres-rs: error: node nosuch is not in"), "{}", text(&out.stderr));
    let out = gres_rs(&["check", "--slurm-conf", "/nonexistent/slurm.conf", "--all-nodes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("gres-rs: error: unable to read \"/nonexistent/slurm.conf\""), "{}", text(&out.stderr));
    let out = check(&d, &["--gres-conf", "/nonexistent/gres.conf", "--all-nodes"]);
    assert_eq!(out.status.code(), Some(2));
    let out = check(&d, &["--node", "n1", "--all-nodes"]);
    assert_eq!(out.status.code(), Some(2));
    let out = gres_rs(&["check", "--format", "yaml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_reads_like_a_man_page() {
    let out = gres_rs(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for s in ["DESCRIPTION", "EXAMPLES", "EXIT STATUS", "check", "detect", "install"] {
        assert!(help.contains(s), "{s}:\n{help}");
    }
    let out = gres_rs(&["check", "--help"]);
    let help = text(&out.stdout);
    assert!(help.contains("slurmd -G") && help.contains("--no-device-check") && help.contains("EXIT STATUS"), "{help}");
    assert!(help.contains("- slurmd: The exact lines `slurmd -G` prints") && help.contains("- text:   For people"), "{help}");
    let out = gres_rs(&["install", "--help"]);
    let help = text(&out.stdout);
    assert!(help.contains("anyone who can write to a PluginDir") && help.contains("refused even with --force"), "{help}");
    let out = gres_rs(&["detect", "--help"]);
    let help = text(&out.stdout);
    for s in ["--nvml-lib <FILE>", "--dev-dir <DIR>", "--mig-minors <FILE>", "EXIT STATUS"] {
        assert!(help.contains(s), "{s}:\n{help}");
    }
}

#[test]
fn man_pages_and_completions_from_the_help_definitions() {
    let d = temp_dir("generate");
    let man = d.0.join("man");
    let out = gres_rs(&["generate", "man", man.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut pages: Vec<String> = fs::read_dir(&man).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    pages.sort();
    assert_eq!(pages, ["gres-rs-check.1", "gres-rs-detect.1", "gres-rs-install.1", "gres-rs-status.1", "gres-rs.1"]);
    let check = fs::read_to_string(man.join("gres-rs-check.1")).unwrap();
    assert!(check.contains(".TH gres-rs-check 1") && check.contains("no\\-device\\-check") && check.contains("EXIT STATUS"), "{check}");
    assert!(check.contains("slurmd: The exact lines `slurmd \\-G` prints"), "{check}");
    // The hidden command has no page.
    assert!(!fs::read_to_string(man.join("gres-rs.1")).unwrap().contains("gres\\-rs\\-generate"));

    let comp = d.0.join("completions");
    let out = gres_rs(&["generate", "completions", comp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (file, has) in [("gres-rs.bash", "--no-device-check"), ("_gres-rs", "--no-device-check"), ("gres-rs.fish", "no-device-check")] {
        let body = fs::read_to_string(comp.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(body.contains(has) && body.contains("status"), "{file}:\n{body}");
    }
}

#[test]
fn examples_are_clean() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut checked = 0;
    for entry in fs::read_dir(&examples).unwrap() {
        let dir = entry.unwrap().path();
        let slurm = dir.join("slurm.conf");
        if !slurm.is_file() || !dir.join("gres.conf").is_file() {
            continue;
        }
        assert!(dir.join("README.md").is_file(), "{} has no README.md", dir.display());
        let out = gres_rs(&["check", "--slurm-conf", slurm.to_str().unwrap(), "--all-nodes", "--no-device-check"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}:\n{err}", dir.display());
        assert!(err.contains(" 0 fatal, 0 errors, 0 warnings"), "{}:\n{err}", dir.display());
        assert!(text(&out.stdout).lines().any(|l| l.starts_with("  gpu ")), "{}", dir.display());
        checked += 1;
    }
    assert!(checked >= 5, "{checked} examples");
}

#[test]
fn detect_without_nvml() {
    let out = Command::new(GRES_RS).args(["detect", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("gres-rs: error: NVML is not available: Cannot load the NVML library /nonexistent/libnvidia-ml.so.1"), "{err}");
    let out = Command::new(GRES_RS).args(["detect", "--format", "json", "--nvml-lib", "/nonexistent/x.so"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpus"].as_array().map(Vec::len), Some(0));
    assert_eq!(v["library"], "/nonexistent/x.so");
    assert!(v["error"].as_str().unwrap().contains("Cannot load the NVML library"));
}

/// A new directory for `install` to write into, under cargo's target
/// directory: `install` refuses one in /tmp (writable by everyone) or one
/// not owned by root.  `None` (the test is skipped) where the target
/// directory is not root's, or the tests do not run as root.
fn install_dir(name: &str) -> Option<Dir> {
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

fn install_into(dest: &Path, force: bool) -> Output {
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

/// `--nvml-lib`, `--dev-dir` and `--mig-minors` are where detection looks
/// (the NVML stand-in reads its fixture from `GRES_RS_NVML_FIXTURE`).
#[test]
fn detect_with_given_library_and_files() {
    let lib = standin::library();
    // The fixture's GPU on CPU 0 (this host may have only a few).
    let fixture = standin::scratch_dir().join("cli-a100_mig.conf");
    fs::write(&fixture, fs::read_to_string(standin::fixture("a100_mig.conf")).unwrap().replace("cpus 0-31", "cpus 0")).unwrap();
    let out = Command::new(GRES_RS)
        .args(["detect", "--format", "gres-conf", "--node-name", "n1", "--dev-dir", "/fake/dev", "--nvml-lib"])
        .arg(&lib)
        .arg("--mig-minors")
        .arg(standin::fixture("mig-minors"))
        .env("GRES_RS_NVML_FIXTURE", &fixture)
        .output()
        .unwrap();
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    let files: Vec<&str> = stdout.lines().filter_map(|l| l.split(" MultipleFiles=").nth(1)).collect();
    assert_eq!(files.len(), 7, "{stdout}");
    assert!(files.iter().all(|f| f.starts_with("/fake/dev/nvidia0,/fake/dev/nvidia-caps/nvidia-cap")), "{stdout}");
    // Another mig-minors file: the one given is read.
    let out = Command::new(GRES_RS)
        .args(["detect", "--nvml-lib"])
        .arg(&lib)
        .args(["--mig-minors", "/nonexistent/mig-minors"])
        .env("GRES_RS_NVML_FIXTURE", &fixture)
        .output()
        .unwrap();
    assert!(text(&out.stderr).contains("Could not open file `/nonexistent/mig-minors`"), "{}", text(&out.stderr));
    // The error once, and a last line that adds up.
    let err = text(&out.stderr);
    assert_eq!(err.matches("Could not open file `/nonexistent/mig-minors`").count(), 1, "{err}");
    assert!(err.lines().any(|l| l.starts_with("gres-rs: detect: NVML counts 1 GPU; ") && l.ends_with("1 error above: what it concerns is left out")), "{err}");

    // The node's words for slurm.conf.
    let out = Command::new(GRES_RS)
        .args(["detect", "--format", "slurm-conf", "--node-name", "n1", "--nvml-lib"])
        .arg(&lib)
        .arg("--mig-minors")
        .arg(standin::fixture("mig-minors"))
        .env("GRES_RS_NVML_FIXTURE", &fixture)
        .output()
        .unwrap();
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    let line = stdout.lines().last().unwrap_or_default();
    assert!(line.starts_with("NodeName=n1 Gres=gpu:nvidia_a100_") && line.ends_with(" Features=a100,mig"), "{stdout}");
    assert!(err.lines().any(|l| l.starts_with("gres-rs: detect: NVML counts 1 GPU; 7 listed (7 of them MIG devices)")), "{err}");
}

/// `detect --usage PID`: what gpu/nvml's usage_read accounts to a process
/// (the stand-in reports PID 4242 with 1 GiB and 30% on GPU 0, 512 MiB in
/// a graphics context and 20% on GPU 1, another process beside it): both
/// GPUs summed, the other process not; a process on no GPU gets zeros.
#[test]
fn detect_usage_of_a_process() {
    let lib = standin::library();
    let fixture = standin::scratch_dir().join("cli-usage-h100x2.conf");
    let mut text_out = String::new();
    for line in fs::read_to_string(standin::fixture("h100x2.conf")).unwrap().lines() {
        text_out.push_str(line);
        text_out.push('\n');
        if line.starts_with("uuid GPU-0") {
            text_out.push_str("proc compute 4242 1024\nutil 4242 30 4\n");
        } else if line.starts_with("uuid GPU-1") {
            text_out.push_str("proc compute 999999 4096\nutil 999999 90 40\nproc graphics 4242 512\nutil 4242 20 2\n");
        }
    }
    fs::write(&fixture, text_out).unwrap();
    let run = |format: &str| {
        let out = Command::new(GRES_RS)
            .args(["detect", "--format", format, "--usage", "4242", "--usage", "31337", "--nvml-lib"])
            .arg(&lib)
            .env("GRES_RS_NVML_FIXTURE", &fixture)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    };
    let table = run("table");
    assert!(table.contains("# usage of pid 4242: gres/gpumem=1610612736 gres/gpuutil=50\n"), "{table}");
    assert!(table.contains("# usage of pid 31337: gres/gpumem=0 gres/gpuutil=0\n"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(json["usage"][0], serde_json::json!({"pid": 4242, "gpumem_bytes": 1610612736u64, "gpuutil_percent": 50}), "{json}");
    // Without --usage the JSON is as before (no "usage" key).
    let out = Command::new(GRES_RS).args(["detect", "--format", "json", "--nvml-lib"]).arg(&lib).env("GRES_RS_NVML_FIXTURE", &fixture).output().unwrap();
    let json: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert!(json.get("usage").is_none(), "{json}");
}

fn stock_dir() -> Option<PathBuf> {
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
fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> bool {
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

#[test]
fn syntax_errors_anywhere_stop_every_node() {
    // A bad line for another node: slurmd reads (and refuses) it on n1 too.
    let d = conf(
        "syntax",
        SLURM,
        Some("NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n9 Name=gpu Fle=/dev/nvidia0\nNodeName=n8 Name=gpu Fle=/dev/nvidia0\n"),
    );
    for args in [&["--node", "n1"][..], &["--all-nodes"][..]] {
        let out = check(&d, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("error[fatal]: Parsing error at unrecognized key: Fle"), "{err}");
        assert!(err.contains(&format!("{}:2:22", d.0.join("gres.conf").display())), "{err}");
        assert!(err.contains("did you mean `File`?"), "{err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Included files are read too, and a missing one stops slurmd.
    let d = conf("include", SLURM, Some("Name=gpu File=/dev/nvidia[0-1]\ninclude missing.conf\n"));
    let out = check(&d, &["--node", "n1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("\"Include\" failed: unable to read"), "{}", text(&out.stderr));
    let d = conf("include-ok", SLURM, Some("include more.conf\n"));
    fs::write(d.0.join("more.conf"), "NodeName=n[1-4] Name=gpu File=/dev/nvidia[0-1]\n").unwrap();
    let out = check(&d, &["--all-nodes", "--format", "slurmd"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).matches("Gres Name=gpu").count(), 2);
}

/// This host's name, as `check` matches it (device files are only looked
/// at on the node the check runs on).
fn this_host() -> String {
    let full = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    full.trim().split('.').next().unwrap().to_string()
}

/// `dir/dev` with character devices `nvidia0` (195:0) and `nvidia1`
/// (195:1) and symbolic links `gpu-a` -> `nvidia0`, `gpu-b` -> `nvidia1`;
/// `None` where device nodes cannot be made (not root).
fn fake_devices(dir: &Dir) -> Option<PathBuf> {
    let dev = dir.0.join("dev");
    fs::create_dir_all(&dev).unwrap();
    for minor in 0..2 {
        let st = Command::new("mknod").arg(dev.join(format!("nvidia{minor}"))).args(["c", "195", &minor.to_string()]).status().ok()?;
        if !st.success() {
            gres_test_harness::ledger::skipped("fake device files", "mknod failed (not root?)");
            return None;
        }
    }
    std::os::unix::fs::symlink("nvidia0", dev.join("gpu-a")).unwrap();
    std::os::unix::fs::symlink(dev.join("nvidia1"), dev.join("gpu-b")).unwrap();
    Some(dev)
}

/// What `check` says of this host as a node with `gpus` GPUs and gres.conf
/// `gres` (`{T}`: the test directory, with the devices in `{T}/dev`).
struct DeviceCheck {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// The test directory.
    t: String,
}

impl DeviceCheck {
    fn run(name: &str, gpus: u32, gres: &str, extra: &[&str]) -> Option<DeviceCheck> {
        let host = this_host();
        let d = conf(name, &format!("GresTypes=gpu\nNodeName={host} CPUs=2 Gres=gpu:{gpus}\n"), None);
        fake_devices(&d)?;
        let t = d.0.to_str().unwrap().to_string();
        fs::write(d.0.join("gres.conf"), gres.replace("{T}", &t)).unwrap();
        let mut args = vec!["--node", host.as_str()];
        args.extend_from_slice(extra);
        let out = check(&d, &args);
        Some(DeviceCheck { code: out.status.code(), stdout: text(&out.stdout).replace(&host, "$HOST"), stderr: text(&out.stderr), t })
    }

    /// `{T}` in `s` replaced by the test directory.
    fn at(&self, s: &str) -> String {
        s.replace("{T}", &self.t)
    }

    /// Dashes under `s` (`{T}` replaced).
    fn under(&self, s: &str) -> String {
        "-".repeat(self.at(s).len())
    }
}

const SAME_DEVICE_HELP: &str = "name each GPU's device files once in gres.conf (symbolic links and other names of a device count as the device)";

#[test]
fn same_device_in_multiple_files_in_another_order() {
    let gres = "# GPUs\nName=gpu MultipleFiles={T}/dev/nvidia[0-1]\nName=gpu MultipleFiles={T}/dev/nvidia1,{T}/dev/nvidia0\n";
    let Some(c) = DeviceCheck::run("same-mult", 2, gres, &[]) else { return };
    // A warning: slurmd starts (as the stock one does, silently).
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    let files = c.at("{T}/dev/nvidia1,{T}/dev/nvidia0");
    let pad = |s: &str| format!("{s:<w$}", w = files.len());
    assert_eq!(
        c.stdout,
        format!(
            "$HOST: 2 CPUs, AutoDetect=unset, from gres.conf\n  \
             NAME  TYPE  COUNT  INDEX  {}  CORES\n  \
             gpu   -     1      0      {}  -\n  \
             gpu   -     1      0      {files}  -\n",
            pad("FILE"),
            pad(&c.at("{T}/dev/nvidia[0-1]"))
        )
    );
    let want = format!(
        "warning: {{T}}/dev/nvidia1 is the same device as {{T}}/dev/nvidia1 (GPU 0, line 2): two jobs could be given one GPU\n \
         --> {{T}}/gres.conf:3:24\n  \
         |\n\
         3 | Name=gpu MultipleFiles={{T}}/dev/nvidia1,{{T}}/dev/nvidia0\n  \
         |                        {}\n  \
         |\n \
         ::: {{T}}/gres.conf:2:24\n  \
         |\n\
         2 | Name=gpu MultipleFiles={{T}}/dev/nvidia[0-1]\n  \
         |                        {} note: GPU 0 uses {{T}}/dev/nvidia1\n  \
         |\n  \
         = help: {SAME_DEVICE_HELP}\n\n\
         gres-rs: check: 1 node: 0 fatal, 0 errors, 1 warning\n",
        c.under("{T}/dev/nvidia1"),
        c.under("{T}/dev/nvidia[0-1]"),
    );
    assert_eq!(c.stderr, c.at(&want));
}

#[test]
fn same_device_through_a_symlink() {
    let gres = "Name=gpu File={T}/dev/nvidia0\nName=gpu File={T}/dev/gpu-a\n";
    let Some(c) = DeviceCheck::run("same-link", 2, gres, &[]) else { return };
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    let want = format!(
        "warning: {{T}}/dev/gpu-a is the same device as {{T}}/dev/nvidia0 (GPU 0, line 1): two jobs could be given one GPU\n \
         --> {{T}}/gres.conf:2:15\n  \
         |\n\
         2 | Name=gpu File={{T}}/dev/gpu-a\n  \
         |               {}\n  \
         |\n \
         ::: {{T}}/gres.conf:1:15\n  \
         |\n\
         1 | Name=gpu File={{T}}/dev/nvidia0\n  \
         |               {} note: GPU 0 uses {{T}}/dev/nvidia0\n  \
         |\n  \
         = help: {SAME_DEVICE_HELP}\n\n\
         gres-rs: check: 1 node: 0 fatal, 0 errors, 1 warning\n",
        c.under("{T}/dev/gpu-a"),
        c.under("{T}/dev/nvidia0"),
    );
    assert_eq!(c.stderr, c.at(&want));
    // The same in JSON, the first place as `related`.
    let Some(c) = DeviceCheck::run("same-link-json", 2, gres, &["--format", "json"]) else { return };
    assert_eq!(c.code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&c.stdout).unwrap();
    assert_eq!(v["summary"]["warnings"], 1);
    let gres_conf = c.at("{T}/gres.conf");
    assert_eq!(
        v["nodes"][0]["problems"],
        serde_json::json!([{
            "severity": "warning",
            "message": c.at("{T}/dev/gpu-a is the same device as {T}/dev/nvidia0 (GPU 0, line 1): two jobs could be given one GPU"),
            "file": gres_conf,
            "line": 2,
            "column": 15,
            "len": c.at("{T}/dev/gpu-a").len(),
            "suggestion": null,
            "help": SAME_DEVICE_HELP,
            "nodes": "$HOST",
            "related": {
                "message": c.at("GPU 0 uses {T}/dev/nvidia0"),
                "file": gres_conf,
                "line": 1,
                "column": 15,
                "len": c.at("{T}/dev/nvidia0").len(),
            },
        }])
    );
}

#[test]
fn same_device_in_a_range_and_a_symlink() {
    // The second GPU of a range and a link to it (an absolute one).
    let gres = "Name=gpu File={T}/dev/nvidia[0-1]\nName=gpu File={T}/dev/gpu-b\n";
    let Some(c) = DeviceCheck::run("same-range", 3, gres, &["--format", "json"]) else { return };
    assert_eq!(c.code, Some(0), "{}", c.stdout);
    let v: serde_json::Value = serde_json::from_str(&c.stdout).unwrap();
    let problems = v["nodes"][0]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert_eq!(p["message"], c.at("{T}/dev/gpu-b is the same device as {T}/dev/nvidia1 (GPU 1, line 1): two jobs could be given one GPU"));
    assert_eq!((p["line"].as_u64(), p["related"]["line"].as_u64()), (Some(2), Some(1)));
    assert_eq!(p["related"]["message"], c.at("GPU 1 uses {T}/dev/nvidia1"));
    // With two GPUs in slurm.conf the link is cut off before the device
    // list (slurmd's own warning): no GPU is the same device.
    let Some(c) = DeviceCheck::run("same-range-2", 2, gres, &["--format", "json"]) else { return };
    let v: serde_json::Value = serde_json::from_str(&c.stdout).unwrap();
    let messages: Vec<&str> = v["nodes"][0]["problems"].as_array().unwrap().iter().map(|p| p["message"].as_str().unwrap()).collect();
    assert!(!messages.iter().any(|m| m.contains("same device")), "{messages:?}");
}

#[test]
fn different_devices_no_warning() {
    for gres in [
        "Name=gpu File={T}/dev/nvidia[0-1]\n",
        "Name=gpu File={T}/dev/gpu-a\nName=gpu File={T}/dev/gpu-b\n",
        "Name=gpu File={T}/dev/nvidia0\nName=gpu File={T}/dev/gpu-b\n",
        "Name=gpu MultipleFiles={T}/dev/nvidia0,{T}/dev/gpu-a\nName=gpu File={T}/dev/nvidia1\n",
    ] {
        let Some(c) = DeviceCheck::run("different", 2, gres, &[]) else { return };
        assert_eq!(c.code, Some(0), "{gres}: {}", c.stderr);
        assert_eq!(c.stderr, "gres-rs: check: 1 node: 0 fatal, 0 errors, 0 warnings\n", "{gres}");
    }
}

#[test]
fn same_device_names_without_device_check() {
    // Not looked at: the names are compared (after hostlist expansion).
    let d = conf("same-names", SLURM, Some("Name=gpu MultipleFiles=/dev/nvidia[0-1]\nName=gpu MultipleFiles=/dev/nvidia1,/dev//nvidia0\n"));
    let out = check(&d, &["--node", "n1", "--no-device-check", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["nodes"][0]["problems"][0];
    assert_eq!(p["message"], "/dev/nvidia1 is the same device as /dev/nvidia1 (GPU 0, line 1): two jobs could be given one GPU");
    assert_eq!((p["line"].as_u64(), p["related"]["line"].as_u64()), (Some(2), Some(1)));
    assert_eq!(v["summary"]["warnings"], 1);
}

#[test]
fn version_names_the_slurm_release() {
    let out = gres_rs(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), format!("gres-rs {} (plugins for Slurm {})\n", env!("CARGO_PKG_VERSION"), slurm_gpu_gres::SLURM_VERSION));
}

const RELEASE_GRES: &str = "AutoDetect=full\nName=gpu File=/dev/nvidia[0-1] Flags=nvidia_gpu_env,env_uuid\n";

#[test]
fn values_of_later_releases_name_their_release() {
    let d = conf("release", SLURM, Some(RELEASE_GRES));
    let gres = d.0.join("gres.conf");
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "24.11"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let expected_error = format!(
        "error: unknown autodetect flag 'full' (AutoDetect=full exists from Slurm 26.05.0; checked for Slurm 24.11)\n \
         --> {}:1:12\n  |\n1 | AutoDetect=full\n  |            ^^^^\n",
        gres.display()
    );
    assert!(err.contains(&expected_error), "{err}");
    let expected_warning = format!(
        "warning: Flags word \"env_uuid\" is unknown to this Slurm release, which ignores it (Flags=env_uuid exists from Slurm 26.05.0; checked for Slurm 24.11)\n \
         --> {}:2:53\n  |\n2 | Name=gpu File=/dev/nvidia[0-1] Flags=nvidia_gpu_env,env_uuid\n  |                                                     --------\n",
        gres.display()
    );
    assert!(err.contains(&expected_warning), "{err}");
    assert!(err.ends_with("gres-rs: check: 1 node: 0 fatal, 1 error, 1 warning\n"), "{err}");
    // slurmd 24.11 reads AutoDetect=full as no AutoDetect.
    assert!(text(&out.stdout).starts_with("n1: 8 CPUs, AutoDetect=unset, from gres.conf\n"), "{}", text(&out.stdout));

    // 26.05 knows both.
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "26.05.3"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("n1: 8 CPUs, AutoDetect=full, from gres.conf; detection (AutoDetect=full) runs on the node, not here\n"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).ends_with("gres-rs: check: 1 node: 0 fatal, 0 errors, 0 warnings\n"), "{}", text(&out.stderr));

    // Flags=explicit exists from 23.02, AutoDetect=nvidia from 24.11.
    let d = conf("release-old", SLURM, Some("NodeName=n1 AutoDetect=nvidia\nName=gpu File=/dev/nvidia[0-1] Flags=Explicit\n"));
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "22.05.8", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["slurm_release"], "22.05.8");
    let problems: Vec<(String, String, u64, u64)> = v["nodes"][0]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["severity"].as_str().unwrap_or("").to_string(),
                p["message"].as_str().unwrap().to_string(),
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(
        problems.contains(&(
            "error".into(),
            "unknown autodetect flag 'nvidia' (AutoDetect=nvidia exists from Slurm 24.11.0; checked for Slurm 22.05.8)".into(),
            1,
            24
        )),
        "{problems:?}"
    );
    assert!(
        problems.contains(&(
            "warning".into(),
            "Flags word \"explicit\" is unknown to this Slurm release, which ignores it (Flags=explicit exists from Slurm 23.02.0; checked for Slurm 22.05.8)"
                .into(),
            2,
            38
        )),
        "{problems:?}"
    );
    let out = check(&d, &["--node", "n1", "--no-device-check", "--slurm-release", "24.11", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn unsupported_slurm_releases_are_refused() {
    let d = conf("release-bad", SLURM, Some(""));
    for (release, message) in [
        (
            "21.08",
            "gres-rs: error: --slurm-release: Slurm 21.08 is not supported: supported series are 22.05, 23.02, 23.11, 24.05, 24.11, 25.05, 25.11, 26.05\n",
        ),
        ("24", "gres-rs: error: --slurm-release: '24' is not a Slurm release: want MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 24.11 or 24.11.5\n"),
        ("24.11.x", "gres-rs: error: --slurm-release: '24.11.x' is not a Slurm release: want MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 24.11 or 24.11.5\n"),
    ] {
        let out = check(&d, &["--node", "n1", "--slurm-release", release]);
        assert_eq!(out.status.code(), Some(2), "{release}");
        assert_eq!(text(&out.stderr), message);
        assert!(out.stdout.is_empty());
    }
}

/// `check` with our files in `ours` and slurm.conf's `PluginDir=<dirs>`:
/// its standard error, with `GRES_RS_SLURMD_VERSION=<slurmd>`.
fn check_plugin_dir(name: &str, dirs: &str, slurmd: &str) -> (Option<i32>, String) {
    let d = conf(name, &format!("GresTypes=gpu\nPluginDir={dirs}\nNodeName=n1 CPUs=8 Gres=gpu:1\n"), Some("Name=gpu File=/dev/null\n"));
    let slurm = d.0.join("slurm.conf");
    let out = Command::new(GRES_RS)
        .args(["check", "--node", "n1", "--verbose", "--slurm-conf"])
        .arg(&slurm)
        .env("GRES_RS_SLURMD_VERSION", slurmd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr))
}

#[test]
fn check_predicts_which_plugin_file_slurmd_loads() {
    let Some(ours) = install_dir("plugin-dir") else { return };
    let out = install_into(&ours.0, false);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stock = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
    if !Path::new(stock).join("gres_gpu.so").is_file() {
        gres_test_harness::ledger::skipped("check_predicts_which_plugin_file_slurmd_loads", &format!("no stock plugins in {stock}"));
        return;
    }
    let o = ours.0.display().to_string();

    // Ours first: loaded.
    let (_, err) = check_plugin_dir("pd-ours", &format!("{o}:{stock}"), "22.05.8");
    assert!(err.contains(&format!("note: slurmd loads {o}/gres_gpu.so (ours, Slurm 22.05.8)")), "{err}");

    // The stock directory first: the stock file, and a warning naming ours.
    let (_, err) = check_plugin_dir("pd-stock-first", &format!("{stock}:{o}"), "22.05.8");
    assert!(
        err.contains(&format!(
            "warning: slurmd loads the stock {stock}/gres_gpu.so and not ours at {o}/gres_gpu.so: a directory with the stock plugins comes first in PluginDir"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("= help: put {o} first in PluginDir")), "{err}");

    // The library missing beside our plugin file: slurmd passes over it.
    fs::remove_file(ours.0.join(LIBRARY_FILE)).unwrap();
    let (_, err) = check_plugin_dir("pd-nolib", &format!("{o}:{stock}"), "22.05.8");
    assert!(
        err.contains(&format!(
            "warning: slurmd passes over {o}/gres_gpu.so: {LIBRARY_FILE}, which it loads, is not beside it, so dlopen() fails, and loads {stock}/gres_gpu.so (stock, Slurm 22.05.8) instead"
        )),
        "{err}"
    );
    assert!(install_into(&ours.0, false).status.success());

    // A slurmd of another release refuses every file: it stops.
    let (code, err) = check_plugin_dir("pd-release", &format!("{o}:{stock}"), "24.11.5");
    assert!(
        err.contains(&format!("warning: slurmd passes over {o}/gres_gpu.so: it is built for Slurm 22.05.8, slurmd is 24.11.5, and finds no other")),
        "{err}"
    );
    assert!(err.contains(&format!("error[fatal]: slurmd finds no gres_gpu.so it can load in PluginDir={o}:{stock}: it stops")), "{err}");
    assert_eq!(code, Some(1), "{err}");
}

#[test]
fn traps_slurm_passes_in_silence() {
    let d = conf(
        "traps",
        "GresTypes=gpu,mps,shard\nNodeName=n1 CPUs=8 Gres=gpu:2,mps:200,shard:4\n",
        Some("Name=gpu File=/dev/nvidia[0-1] Flags=nvida_gpu_env\nName=mps Count=200\nName=shard Count=4\n"),
    );
    let out = check(&d, &["--node", "n1", "--no-device-check"]);
    let err = text(&out.stderr);
    let gres = d.0.join("gres.conf");
    assert!(err.contains("warning: Flags word \"nvida_gpu_env\" is not a flag Slurm knows: slurmd ignores it without a word"), "{err}");
    assert!(err.contains(&format!("--> {}:1:38", gres.display())), "{err}");
    assert!(err.contains("------------- did you mean `nvidia_gpu_env`?"), "{err}");
    assert!(
        err.contains("warning: gres/mps and gres/shard are both configured on this node: slurmctld links each GPU to one sharing GRES only, so the jobs of the other get no GPU device"),
        "{err}"
    );
    assert!(err.contains(&format!("--> {}:3:1", gres.display())) && err.contains("note: mps is configured here"), "{err}");
    assert!(err.ends_with("gres-rs: check: 1 node: 0 fatal, 0 errors, 2 warnings\n"), "{err}");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn node_takes_a_hostlist_and_suggests_a_close_name() {
    let d = conf("hostlist", "GresTypes=gpu\nNodeName=gpu[01-04] CPUs=8 Gres=gpu:1\n", Some("Name=gpu File=/dev/nvidia0\n"));
    for flag in ["--node", "-n", "-N", "-w", "--nodelist"] {
        let out = check(&d, &[flag, "gpu[01-02],gpu04", "--no-device-check"]);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", text(&out.stderr));
        assert!(text(&out.stderr).ends_with("gres-rs: check: 3 nodes: 0 fatal, 0 errors, 0 warnings\n"), "{flag}: {}", text(&out.stderr));
    }
    let out = check(&d, &["-w", "gpu1", "--no-device-check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).ends_with(&format!("gres-rs: error: node gpu1 is not in {} (did you mean gpu01?)\n", d.0.join("slurm.conf").display())),
        "{}",
        text(&out.stderr)
    );
    let out = check(&d, &["-w", "gpu[01-", "--no-device-check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("gres-rs: error: --node gpu[01-: "), "{}", text(&out.stderr));
}

#[test]
fn autodetect_nvml_and_gpu_energy_without_a_driver() {
    let host = Command::new("hostname").arg("-s").output().map(|o| text(&o.stdout).trim().to_string()).unwrap_or_default();
    let have_driver = Path::new("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists() || Path::new("/usr/lib64/libnvidia-ml.so.1").exists();
    if host.is_empty() || have_driver {
        gres_test_harness::ledger::skipped("autodetect_nvml_and_gpu_energy_without_a_driver", "needs a host without the NVIDIA driver");
        return;
    }
    let d = conf(
        "nodriver",
        &format!("GresTypes=gpu\nAcctGatherEnergyType=acct_gather_energy/gpu\nNodeName={host} CPUs=1 Gres=gpu:1\n"),
        Some("AutoDetect=nvml\nName=gpu File=/dev/null\n"),
    );
    let out = check(&d, &["--node", &host, "--no-detect"]);
    let err = text(&out.stderr);
    assert!(err.contains("warning: AutoDetect=nvml, but there is no NVIDIA driver here (libnvidia-ml.so.1 missing): NVML detects no GPU"), "{err}");
    assert!(err.contains(&format!("--> {}:1:", d.0.join("gres.conf").display())), "{err}");
    assert!(
        err.contains("warning: AcctGatherEnergyType=acct_gather_energy/gpu, but slurmd will use gpu/generic, which reads no energy: jobs' GPU energy stays 0"),
        "{err}"
    );
    assert!(err.contains(&format!("--> {}:2:", d.0.join("slurm.conf").display())), "{err}");
}

#[test]
fn a_character_device_that_is_no_gpu() {
    let host = Command::new("hostname").arg("-s").output().map(|o| text(&o.stdout).trim().to_string()).unwrap_or_default();
    if host.is_empty() {
        return;
    }
    let d = conf("notgpu", &format!("GresTypes=gpu\nNodeName={host} CPUs=1 Gres=gpu:1\n"), Some("Name=gpu File=/dev/null\n"));
    let out = check(&d, &["--node", &host, "--no-detect"]);
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: /dev/null is a character device with major 1, not a GPU's (NVIDIA 195 or nvidia-caps, DRM 226): slurmd takes it, and jobs get it as their GPU"),
        "{err}"
    );
    assert!(err.contains(&format!("--> {}:1:15", d.0.join("gres.conf").display())), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn a_type_of_gres_conf_the_node_does_not_have_is_one_diagnosis() {
    let d = conf("typemismatch", "GresTypes=gpu\nNodeName=n1 CPUs=8 Gres=gpu:a100:2\n", Some("Name=gpu Type=h100 File=/dev/nvidia[0-1]\n"));
    let out = check(&d, &["--node", "n1", "--no-device-check"]);
    let err = text(&out.stderr);
    assert!(
        err.contains("error: gres.conf's gpu Type=h100 matches none of the node's Gres= types in slurm.conf (a100): jobs asking for gpu:a100 cannot run on this node, and slurmctld drains it"),
        "{err}"
    );
    assert!(err.contains(&format!("--> {}:1:15", d.0.join("gres.conf").display())) && err.contains("note: the node's types"), "{err}");
    assert!(err.contains("= help: use the same Type in both files (Type=a100 in gres.conf, or gpu:h100:<count> in Gres=)"), "{err}");
    assert!(err.ends_with("gres-rs: check: 1 node: 0 fatal, 1 error, 0 warnings\n"), "{err}");
    // Another case is another type for slurmctld: the node does not drain.
    let case = conf("typecase", "GresTypes=gpu\nNodeName=n1 CPUs=8 Gres=gpu:a100:2\n", Some("Name=gpu Type=A100 File=/dev/nvidia[0-1]\n"));
    let err = text(&check(&case, &["--node", "n1", "--no-device-check"]).stderr);
    assert!(
        err.contains(
            "error: gres.conf's gpu Type=A100 matches none of the node's Gres= types in slurm.conf (a100): jobs asking for gpu:a100 cannot run on this node\n"
        ),
        "{err}"
    );
    assert!(err.ends_with("gres-rs: check: 1 node: 0 fatal, 1 error, 0 warnings\n"), "{err}");
    // The same type: no such diagnosis.
    let ok = conf("typematch", "GresTypes=gpu\nNodeName=n1 CPUs=8 Gres=gpu:a100:2\n", Some("Name=gpu Type=a100 File=/dev/nvidia[0-1]\n"));
    assert!(!text(&check(&ok, &["--node", "n1", "--no-device-check"]).stderr).contains("matches none of the node's Gres= types"));
}

/// Whether this host has an NVIDIA driver's NVML (the tests below need
/// one the stand-in can play, not a real one).
fn host_has_nvml() -> bool {
    ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu", "/usr/lib"]
        .iter()
        .any(|d| Path::new(d).join("libnvidia-ml.so.1").exists() || Path::new(d).join("libnvidia-ml.so").exists())
}

/// A directory with the NVML stand-in as the NVIDIA driver installs it
/// (`libnvidia-ml.so.1` only), and, with `dev_link`, the unversioned
/// `libnvidia-ml.so` of the driver's development package too: given as
/// `LD_LIBRARY_PATH`, it is what `dlopen()` finds in gres-rs, as in slurmd
/// on such a host.
fn nvml_lib_dir(name: &str, dev_link: bool) -> Dir {
    let d = temp_dir(name);
    fs::copy(standin::library(), d.0.join("libnvidia-ml.so.1")).unwrap();
    if dev_link {
        std::os::unix::fs::symlink("libnvidia-ml.so.1", d.0.join("libnvidia-ml.so")).unwrap();
    }
    d
}

/// `check --verbose --no-detect` of this host as a node with
/// `AutoDetect=nvml`, `PluginDir=<dirs>` and
/// `AcctGatherEnergyType=acct_gather_energy/gpu`, NVML found in `lib_dir`,
/// the installed slurmd taken as `slurmd`: exit status, standard error and
/// the configuration's directory.
fn check_nvml_host(name: &str, dirs: &str, lib_dir: &Dir, slurmd: &str, extra: &[&str]) -> (Option<i32>, String, Dir) {
    let host = this_host();
    let d = conf(
        name,
        &format!("GresTypes=gpu\nPluginDir={dirs}\nAcctGatherEnergyType=acct_gather_energy/gpu\nNodeName={host} CPUs=1 Gres=gpu:1\n"),
        Some("AutoDetect=nvml\nName=gpu File=/dev/null\n"),
    );
    let out = Command::new(GRES_RS)
        .args(["check", "--node", &host, "--verbose", "--no-detect", "--slurm-conf"])
        .arg(d.0.join("slurm.conf"))
        .args(extra)
        .env("LD_LIBRARY_PATH", &lib_dir.0)
        .env("GRES_RS_SLURMD_VERSION", slurmd)
        .env("NO_COLOR", "1")
        .env_remove("SLURM_CONF")
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr), d)
}

#[test]
fn gpu_plugin_slurmd_picks_and_its_file() {
    let stock = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
    if host_has_nvml() || !Path::new(stock).join("gpu_generic.so").is_file() || Path::new(stock).join("gpu_nvml.so").exists() {
        gres_test_harness::ledger::skipped("gpu_plugin_slurmd_picks_and_its_file", "needs Debian's stock plugins (no gpu_nvml.so) and no NVIDIA driver");
        return;
    }
    let Some(ours) = install_dir("gpu-plugin") else { return };
    assert!(install_into(&ours.0, false).status.success());
    let o = ours.0.display().to_string();
    let so1 = nvml_lib_dir("nvml-so1", false);
    let both = nvml_lib_dir("nvml-both", true);

    let slurm_conf = |d: &Dir| d.0.join("slurm.conf").display().to_string();

    // Debian 12's slurmd (22.05) with the driver's development link picks
    // gpu/nvml, and the stock directory has no gpu_nvml.so: slurmd stops.
    let (code, err, d) = check_nvml_host("gpu-nvml-missing", stock, &both, "22.05.8", &[]);
    let missing = format!(
        "error[fatal]: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so can be loaded), but there is no gpu_nvml.so in PluginDir={stock}: it stops (cannot create gpu context for gpu/nvml) and the node gets no GRES\n \
         --> {}:2:11\n"
    , slurm_conf(&d));
    assert!(err.contains(&missing), "{err}");
    assert!(
        err.contains("= help: install ours for this release (gres-rs install --plugin-dir DIR, DIR first in PluginDir); the stock packages of Debian ship no gpu_nvml.so"),
        "{err}"
    );
    assert_eq!(code, Some(1), "{err}");
    // 24.11 also tries libnvidia-ml.so.1: the driver alone is enough.
    let (code, err, _d) = check_nvml_host("gpu-nvml-missing-2411", stock, &so1, "22.05.8", &["--slurm-release", "24.11"]);
    assert!(
        err.contains(&format!(
            "error[fatal]: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so.1 can be loaded), but there is no gpu_nvml.so in PluginDir={stock}: it stops"
        )),
        "{err}"
    );
    assert_eq!(code, Some(1), "{err}");

    // A gpu_nvml.so of another release (ours, built for 24.11.5) beside
    // its library: passed over, and none accepted.
    let other = temp_dir("gpu-nvml-other");
    let mut bytes = fs::read(ours.0.join("gpu_nvml.so")).unwrap();
    let v2205 = 0x16_05_08u32.to_le_bytes();
    assert_eq!(bytes.windows(4).filter(|w| *w == v2205).count(), 1, "plugin_version 22.05.8 found once in gpu_nvml.so");
    assert!(replace_all(&mut bytes, &v2205, &0x18_0b_05u32.to_le_bytes()));
    fs::write(other.0.join("gpu_nvml.so"), &bytes).unwrap();
    fs::copy(ours.0.join(LIBRARY_FILE), other.0.join(LIBRARY_FILE)).unwrap();
    let x = other.0.display().to_string();
    let (code, err, _d) = check_nvml_host("gpu-nvml-mismatch", &format!("{x}:{stock}"), &both, "22.05.8", &[]);
    assert!(
        err.contains(&format!("warning: slurmd passes over {x}/gpu_nvml.so: it is built for Slurm 24.11.5, slurmd is 22.05.8, and finds no other")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "error[fatal]: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so can be loaded), but no gpu_nvml.so in PluginDir={x}:{stock} is one it accepts: it stops (cannot create gpu context for gpu/nvml) and the node gets no GRES"
        )),
        "{err}"
    );
    assert_eq!(code, Some(1), "{err}");

    // Ours first: loaded, and slurmd starts.
    let (code, err, _d) = check_nvml_host("gpu-nvml-ours", &format!("{o}:{stock}"), &both, "22.05.8", &[]);
    assert!(
        err.contains(&format!("note: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so can be loaded): loads {o}/gpu_nvml.so (ours, Slurm 22.05.8)")),
        "{err}"
    );
    assert!(!err.contains("AcctGatherEnergyType") && !err.contains("error:") && !err.contains("error["), "{err}");
    assert_eq!(code, Some(0), "{err}");
}

/// The `AutoDetect=nvml` warnings that depend on libnvidia-ml.so.1 being
/// there (the NVML stand-in as the driver installs it, through
/// `LD_LIBRARY_PATH`), with our gres/gpu and with the stock one.
#[test]
fn autodetect_nvml_with_the_driver_but_no_development_link() {
    let stock = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
    if host_has_nvml() || !Path::new(stock).join("gpu_generic.so").is_file() {
        gres_test_harness::ledger::skipped("autodetect_nvml_with_the_driver_but_no_development_link", "needs Debian's stock plugins and no NVIDIA driver");
        return;
    }
    let Some(ours) = install_dir("nvml-so1-only") else { return };
    assert!(install_into(&ours.0, false).status.success());
    let o = ours.0.display().to_string();
    let so1 = nvml_lib_dir("nvml-so1-only", false);
    let gres = |d: &Dir| d.0.join("gres.conf").display().to_string();
    let slurm_conf = |d: &Dir| d.0.join("slurm.conf").display().to_string();

    // 22.05 with the driver's libnvidia-ml.so.1 only: gpu/generic.  Our
    // gres/gpu detects through libnvidia-ml.so.1 (AutoDetect=nvml works),
    // but gpu/nvml's --gpu-freq and energy are missing.
    let (code, err, d) = check_nvml_host("gpu-nvml-ours-so1", &format!("{o}:{stock}"), &so1, "22.05.8", &[]);
    assert!(
        err.contains(&format!(
            "note: slurmd picks gpu/generic (AutoDetect=nvml, but libnvidia-ml.so cannot be loaded): loads {stock}/gpu_generic.so (stock, Slurm 22.05.8)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "warning: AutoDetect=nvml: our gres/gpu detects the GPUs through libnvidia-ml.so.1, but slurmd picks gpu/generic (libnvidia-ml.so, unversioned, cannot be loaded), so --gpu-freq and acct_gather_energy/gpu have no gpu/nvml\n \
             --> {}:1:12\n",
            gres(&d)
        )),
        "{err}"
    );
    assert!(
        err.contains(
            "= help: install the driver's development link (Debian: apt install libnvidia-ml-dev, or ln -s libnvidia-ml.so.1 libnvidia-ml.so next to it)\n"
        ),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "warning: AcctGatherEnergyType=acct_gather_energy/gpu, but slurmd will use gpu/generic, which reads no energy: jobs' GPU energy stays 0\n \
             --> {}:3:22\n",
            slurm_conf(&d)
        )),
        "{err}"
    );
    assert!(err.contains("= help: energy needs gpu/nvml: AutoDetect=nvml in gres.conf and the driver's libnvidia-ml.so (unversioned) loadable"), "{err}");
    assert!(!err.contains("no NVIDIA driver"), "{err}");
    assert_eq!(code, Some(0), "{err}");

    // The same with the stock gres/gpu: it detects nothing then.
    let (code, err, d) = check_nvml_host("gpu-nvml-stock-so1", stock, &so1, "22.05.8", &[]);
    assert!(
        err.contains(&format!(
            "warning: AutoDetect=nvml, but libnvidia-ml.so (unversioned) cannot be loaded here: the stock slurmd falls back to gpu/generic and detects no GPU\n \
             --> {}:1:12\n",
            gres(&d)
        )),
        "{err}"
    );
    assert!(err.contains("gres-rs's gres_gpu.so asks NVML through libnvidia-ml.so.1 itself"), "{err}");
    assert!(!err.contains("our gres/gpu detects"), "{err}");
    assert_eq!(code, Some(0), "{err}");
    // 24.11 picks gpu/nvml there: no such warning (and no gpu_nvml.so).
    let (_, err, _d) = check_nvml_host("gpu-nvml-stock-so1-2411", stock, &so1, "22.05.8", &["--slurm-release", "24.11"]);
    assert!(!err.contains("cannot be loaded here") && !err.contains("acct_gather_energy/gpu, but"), "{err}");
}

/// `detect` warns as check does when slurmd would not pick gpu/nvml: the
/// GPUs detected through the driver's libnvidia-ml.so.1, no unversioned
/// libnvidia-ml.so.
#[test]
fn detect_warns_when_slurmd_would_not_pick_gpu_nvml() {
    if host_has_nvml() {
        gres_test_harness::ledger::skipped("detect_warns_when_slurmd_would_not_pick_gpu_nvml", "this host has an NVIDIA driver");
        return;
    }
    let fixture = standin::scratch_dir().join("cli-detect-a100.conf");
    fs::write(&fixture, fs::read_to_string(standin::fixture("a100_mig.conf")).unwrap().replace("cpus 0-31", "cpus 0")).unwrap();
    let detect = |lib_dir: &Dir| {
        let out = Command::new(GRES_RS)
            .args(["detect", "--mig-minors"])
            .arg(standin::fixture("mig-minors"))
            .env("LD_LIBRARY_PATH", &lib_dir.0)
            .env("GRES_RS_NVML_FIXTURE", &fixture)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let warning = "gres-rs: warning: libnvidia-ml.so (unversioned) cannot be loaded here: slurmd picks gpu/generic instead of gpu/nvml (the stock gres/gpu then detects no GPU; ours detects through libnvidia-ml.so.1, but --gpu-freq and acct_gather_energy/gpu need gpu/nvml): install the driver's development link (Debian: apt install libnvidia-ml-dev)\n";
    let (code, err) = detect(&nvml_lib_dir("detect-so1", false));
    assert_eq!(code, Some(0), "{err}");
    // Only a slurmd before 24.05 needs the unversioned name.
    if slurm_gpu_gres::ffi::behaviour::build().nvml_versioned_lib {
        assert!(!err.contains("warning"), "{err}");
    } else {
        assert!(err.contains(warning), "{err}");
        assert_eq!(err.matches("gres-rs: warning:").count(), 1, "{err}");
    }
    // With the development link slurmd picks gpu/nvml: no warning.
    let (code, err) = detect(&nvml_lib_dir("detect-both", true));
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
}

// ---------------------------------------------------------------------------
// check: slurmd's default PluginDir (issue 26, item 3)
// ---------------------------------------------------------------------------

/// No `PluginDir=` in slurm.conf: `check` searches slurmd's compiled-in
/// default, the directory, even when the plugin files in it are dangling
/// links (the divert package installed, the main package removed with
/// --force-depends), and reports the same fatal problem as when that
/// directory is written out.  Root: the real slurmd and its default
/// directory, with a copy of it holding the dangling link bind-mounted over
/// it in a mount namespace of its own.
#[test]
fn check_searches_slurmds_default_plugin_dir_even_with_dangling_links() {
    let name = "check_searches_slurmds_default_plugin_dir_even_with_dangling_links";
    let Some(stock) = stock_dir() else {
        gres_test_harness::ledger::skipped(name, "no Slurm plugins installed");
        return;
    };
    if !Command::new("unshare").args(["--mount", "true"]).status().is_ok_and(|s| s.success()) {
        gres_test_harness::ledger::skipped(name, "no unshare --mount: not root?");
        return;
    }
    // The stock directory as the rollback leaves it: Slurm's library, and
    // gres_gpu.so a link to the removed package's file.
    let fake = temp_dir("default-plugin-dir");
    let dir = fake.0.join("plugins");
    fs::create_dir(&dir).unwrap();
    fs::copy(stock.join("libslurmfull.so"), dir.join("libslurmfull.so")).unwrap();
    std::os::unix::fs::symlink(fake.0.join("removed-package/gres_gpu.so"), dir.join("gres_gpu.so")).unwrap();
    let run = |conf_name: &str, plugin_dir: &str| {
        let d = conf(conf_name, &format!("GresTypes=gpu\n{plugin_dir}NodeName=n1 CPUs=8 Gres=gpu:1\n"), Some("Name=gpu File=/dev/null\n"));
        let out = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", "mount --bind \"$0\" \"$1\" && shift && exec \"$@\""])
            .arg(&dir)
            .arg(&stock)
            .arg(GRES_RS)
            .args(["check", "--node", "n1", "--slurm-conf"])
            .arg(d.0.join("slurm.conf"))
            .env("GRES_RS_SLURMD_VERSION", "22.05.8")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let fatal = format!("error[fatal]: slurmd finds no gres_gpu.so it can load in PluginDir={}: it stops", stock.display());
    let (code, written) = run("pd-written", &format!("PluginDir={}\n", stock.display()));
    assert!(written.contains(&fatal), "{written}");
    assert_eq!(code, Some(1), "{written}");
    let (code, default) = run("pd-default", "");
    assert!(default.contains(&fatal), "{default}");
    assert!(default.contains("gres-rs: check: 0 nodes: 1 fatal, 0 errors, 0 warnings"), "{default}");
    assert_eq!(code, Some(1), "{default}");
}

/// `--slurm-conf` and `--gres-conf` say they are not for sudo rules: the
/// errors quote the file's lines (issue 26, item 7).
#[test]
fn check_conf_options_are_not_for_sudo_rules() {
    let out = gres_rs(&["check", "--help"]);
    let help = text(&out.stdout);
    assert!(help.contains("Not for sudo rules: the errors quote the lines of the file named"), "{help}");
    assert!(help.contains("Not for sudo rules either: the errors quote the file's lines."), "{help}");
    // What it warns of: the named file's lines, whatever the file.
    let d = conf("sudo-echo", "GresTypes=gpu\nsecret-line-of-another-file\n", None);
    let out = check(&d, &["--all-nodes"]);
    assert!(text(&out.stderr).contains("secret-line-of-another-file"), "{}", text(&out.stderr));
}
