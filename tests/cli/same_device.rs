//! `check` of a GPU whose device files gres.conf names more than once
//! (another order, a symbolic link, a range).

use crate::run::{check, conf, text, this_host, SLURM};
use gres_test_harness::TempDir as Dir;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

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
