//! `check`: exit statuses, messages with their place and caret, the
//! problems slurmd only logs, and what `--fail-on` and `--node` do.

use crate::run::{check, conf, gres_rs, text, SLURM};
use std::fs;
use std::process::Command;

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
