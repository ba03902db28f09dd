//! The `gres-rs` command as users see it: exit statuses, messages with
//! their place and caret, JSON, the examples, `detect` without NVML, and
//! `install`.  No Slurm daemon is needed (`install` uses Slurm's own plugin
//! files when they are installed).

#![cfg(feature = "cli")]

#[path = "nvml-standin/standin.rs"]
mod standin;

use slurm_gpu_gres::SHARED_LIBRARY_FILE;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GRES_RS: &str = env!("CARGO_BIN_EXE_gres-rs");

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("gres-rs-cli-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    Dir(d)
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
    assert_eq!(
        text(&out.stdout),
        "NodeName=n1 CPUs=8 AutoDetect=unset\n\
         Gres Name=gpu Type=(null) Count=1 Index=0 ID=7696487 File=/dev/nvidia0 (null)\n\
         Gres Name=gpu Type=(null) Count=1 Index=1 ID=7696487 File=/dev/nvidia1 (null)\n"
    );
    assert!(text(&out.stderr).ends_with("gres-rs: check: 1 node: 0 fatal, 0 errors, 0 warnings\n"), "{}", text(&out.stderr));
    // All nodes read the same lines: one table.
    let out = check(&d, &["--all-nodes"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("NodeName=n[1-4] CPUs=8"), "{}", text(&out.stdout));
    let out = check(&d, &["--all-nodes", "--quiet"]);
    assert!(out.stdout.is_empty());
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
    assert!(!text(&out.stdout).contains("Gres Name="));
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
    assert_eq!(v["nodes"][0]["starts"], true);
    assert_eq!(v["nodes"][0]["gres"][0]["name"], "mps");
    assert_eq!(v["nodes"][0]["lines"].as_array().unwrap().len(), 6);
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
    let out = gres_rs(&["detect", "--help"]);
    let help = text(&out.stdout);
    for s in ["--nvml-lib <FILE>", "--dev-dir <DIR>", "--mig-minors <FILE>", "EXIT STATUS"] {
        assert!(help.contains(s), "{s}:\n{help}");
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
        assert!(text(&out.stdout).contains("Gres Name=gpu"), "{}", dir.display());
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
        eprintln!("install_plugins: skipped (no Slurm plugins installed)");
        return;
    };
    // The plugin files are built into gres-rs; the library comes from
    // --from.
    let built = Path::new(GRES_RS).parent().unwrap();
    let from = temp_dir("install-from");
    fs::copy(built.join(SHARED_LIBRARY_FILE), from.0.join(SHARED_LIBRARY_FILE)).expect("our libgres_rs.so is built (cargo build --workspace)");
    let to = temp_dir("install-to");
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
    assert_eq!(fs::read(dest.join(SHARED_LIBRARY_FILE)).unwrap(), fs::read(built.join(SHARED_LIBRARY_FILE)).unwrap());
    assert!(err.contains("libgres_rs.so (the plugins' code)"), "{err}");
    assert!(err.contains("gres_gpu.so (gres/gpu, Slurm 22.05.8)"), "{err}");
    assert_eq!(text(&out.stdout), format!("PluginDir={}:{}\n", dest.display(), stock.display()));
    assert_eq!(fs::read_dir(&dest).unwrap().count(), 5, "no temporary files left");
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
    fs::copy(stock.join("gpu_generic.so"), from.0.join(SHARED_LIBRARY_FILE)).unwrap();
    for force in [false, true] {
        let out = run("22.05.8", force);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("not the plugins' shared library"), "{}", text(&out.stderr));
    }
    let mut other_build = fs::read(built.join(SHARED_LIBRARY_FILE)).unwrap();
    assert!(replace_all(&mut other_build, b"gres_rs_gres_mps_", b"gres_rs_gres_mpX_"), "the library names its functions gres_rs_<file>_*");
    fs::write(from.0.join(SHARED_LIBRARY_FILE), &other_build).unwrap();
    let out = run("22.05.8", true);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("gres_mps.so (built into gres-rs) calls gres_rs_gres_mps_") && err.contains("the two are from different builds"), "{err}");
    assert!(!dest.exists(), "nothing installed");
    // No library: a usage error.
    fs::remove_file(from.0.join(SHARED_LIBRARY_FILE)).unwrap();
    let out = run("22.05.8", false);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no libgres_rs.so in"), "{}", text(&out.stderr));
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
        assert!(!text(&out.stdout).contains("Gres Name="), "{args:?}");
    }
    // Included files are read too, and a missing one stops slurmd.
    let d = conf("include", SLURM, Some("Name=gpu File=/dev/nvidia[0-1]\ninclude missing.conf\n"));
    let out = check(&d, &["--node", "n1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("\"Include\" failed: unable to read"), "{}", text(&out.stderr));
    let d = conf("include-ok", SLURM, Some("include more.conf\n"));
    fs::write(d.0.join("more.conf"), "NodeName=n[1-4] Name=gpu File=/dev/nvidia[0-1]\n").unwrap();
    let out = check(&d, &["--all-nodes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).matches("Gres Name=gpu").count(), 2);
}
