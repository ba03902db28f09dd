//! `detect`: without NVML, with a given library and files, and a process's
//! usage.

use crate::run::{text, GRES_RS};
use gres_test_harness::standin;
use std::fs;
use std::path::Path;
use std::process::Command;

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
    // `gres-rs detect ARGS` on the stand-in's fixture, with `mig_minors`.
    let detect = |args: &[&str], mig_minors: &Path| {
        Command::new(GRES_RS)
            .arg("detect")
            .args(args)
            .arg("--nvml-lib")
            .arg(&lib)
            .arg("--mig-minors")
            .arg(mig_minors)
            .env("GRES_RS_NVML_FIXTURE", &fixture)
            .output()
            .unwrap()
    };
    let minors = standin::fixture("mig-minors");
    let out = detect(&["--format", "gres-conf", "--node-name", "n1", "--dev-dir", "/fake/dev"], &minors);
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    let files: Vec<&str> = stdout.lines().filter_map(|l| l.split(" MultipleFiles=").nth(1)).collect();
    assert_eq!(files.len(), 7, "{stdout}");
    assert!(files.iter().all(|f| f.starts_with("/fake/dev/nvidia0,/fake/dev/nvidia-caps/nvidia-cap")), "{stdout}");
    // Another mig-minors file: the one given is read.
    let out = detect(&[], Path::new("/nonexistent/mig-minors"));
    assert!(text(&out.stderr).contains("Could not open file `/nonexistent/mig-minors`"), "{}", text(&out.stderr));
    // The error once, and a last line that adds up.
    let err = text(&out.stderr);
    assert_eq!(err.matches("Could not open file `/nonexistent/mig-minors`").count(), 1, "{err}");
    assert!(err.lines().any(|l| l.starts_with("gres-rs: detect: NVML counts 1 GPU; ") && l.ends_with("1 error above: what it concerns is left out")), "{err}");

    // The node's words for slurm.conf.
    let out = detect(&["--format", "slurm-conf", "--node-name", "n1"], &minors);
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
