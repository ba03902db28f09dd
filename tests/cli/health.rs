//! `gres-rs health` without Slurm (`--no-slurm`) on recorded kernel logs:
//! what it finds, what it would drain with, the XID cursor, the site's
//! rules, the exit statuses, and the textfile.

use crate::run::{gres_rs, temp_dir, text};
use std::fs;
use std::path::Path;
use std::process::Output;

/// A dmesg of a node whose GPU 0000:41:00.0 had an application fault
/// (XID 13) and then fell off the bus (XID 79).
const DMESG: &str = "\
[    5.123456] nvidia: loading out-of-tree module taints kernel.
[ 1234.567890] NVRM: Xid (PCI:0000:41:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address
[ 1300.000001] NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
";

/// The same as `/dev/kmsg` records, application faults only.
const KMSG_APP_ONLY: &str = "\
6,3545,51282211373,-;nvidia: loading out-of-tree module taints kernel.
4,3546,51282211380,-;NVRM: Xid (PCI:0000:41:00): 13, pid=4242, name=python3, Graphics SM Warp Exception
 SUBSYSTEM=pci
 DEVICE=+pci:0000:41:00.0
4,3547,51282211390,-;NVRM: Xid (PCI:0000:41:00): 43, pid=4242, name=python3, Ch 00000008
4,3548,51282211399,-;NVRM: Xid (PCI:0000:41:00): 45, pid=4242, name=python3, Ch 00000008
";

fn health(dir: &Path, log: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["health", "--no-slurm", "--node", "tux0", "--kmsg", log.to_str().unwrap(), "--state-dir", dir.to_str().unwrap()];
    let empty = dir.join("empty");
    fs::create_dir_all(&empty).unwrap();
    // No GPU files and no PCI GPUs: the counts agree (zero each).
    args.extend_from_slice(&["--dev-dir", empty.to_str().unwrap(), "--sys-dir", empty.to_str().unwrap()]);
    args.extend_from_slice(extra);
    gres_rs(&args)
}

#[test]
fn a_gpu_fallen_off_the_bus_drains_with_a_reason_naming_it() {
    let d = temp_dir("health-79");
    let log = d.0.join("dmesg.txt");
    fs::write(&log, DMESG).unwrap();
    let out = health(&d.0, &log, &["--dry-run"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("ignore: node: xid 13 (graphics engine exception)"), "{stdout}");
    let verdict = stdout.lines().find(|l| l.starts_with("verdict: ")).unwrap();
    assert!(verdict.starts_with("verdict: drain: gres-rs: gpu 0000:41:00.0 xid 79 (fallen off the bus) -> reboot node [resume:reboot@"), "{verdict}");
    // Slurm not asked: nothing is changed, and it says so.
    assert!(stdout.contains("note: --no-slurm: Slurm not asked; the node is left as it is"), "{stdout}");
    // A dry run saves no cursor: the next run sees the same XIDs.
    assert!(!d.0.join("health.state").exists());
    let again = health(&d.0, &log, &["--dry-run", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(doc["verdict"], "drain");
    assert_eq!(doc["exit_status"], 3);
    assert_eq!(doc["new_xids"], 2);
    assert_eq!(doc["findings"][1]["pci"], "0000:41:00.0");
    assert_eq!(doc["findings"][1]["remedy"], "reboot node");
    assert_eq!(doc["tool"], "gres-rs");
}

#[test]
fn each_xid_is_reported_once() {
    let d = temp_dir("health-once");
    let log = d.0.join("dmesg.txt");
    fs::write(&log, DMESG).unwrap();
    assert_eq!(health(&d.0, &log, &[]).status.code(), Some(3));
    assert!(fs::read_to_string(d.0.join("health.state")).unwrap().starts_with("gres-rs-health-state 2"));
    // The same log replayed: nothing new, nothing to drain for.
    let out = health(&d.0, &log, &["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((doc["new_xids"].as_u64(), doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc}");
    assert_eq!(out.status.code(), Some(0));
    // A new line in the log is new.
    fs::write(&log, format!("{DMESG}[ 1400.0] NVRM: Xid (PCI:0000:41:00): 48, pid=1, name=x, An uncorrectable double bit error\n")).unwrap();
    let out = health(&d.0, &log, &["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["new_xids"], 1, "{doc}");
    assert!(doc["reason"].as_str().unwrap().contains("xid 48"), "{doc}");
}

#[test]
fn application_xids_drain_nothing() {
    let d = temp_dir("health-app");
    let log = d.0.join("kmsg.txt");
    fs::write(&log, KMSG_APP_ONLY).unwrap();
    let out = health(&d.0, &log, &["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "nothing", "{doc}");
    assert_eq!(doc["findings"].as_array().unwrap().len(), 3);
    assert!(doc["findings"].as_array().unwrap().iter().all(|f| f["action"] == "ignore"), "{doc}");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn the_sites_rules_change_the_action_and_a_typo_names_its_place() {
    let d = temp_dir("health-site");
    let log = d.0.join("dmesg.txt");
    fs::write(&log, DMESG).unwrap();
    let conf = d.0.join("health.conf");
    fs::write(&conf, "# this site lets XID 79 only warn\nxid 79 = warn\n").unwrap();
    let out = health(&d.0, &log, &["--dry-run", "--config", conf.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("verdict: warn"), "{stdout}");
    fs::write(&conf, "xid 79 = drian\n").unwrap();
    let out = health(&d.0, &log, &["--dry-run", "--config", conf.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:1:", conf.display())) && err.contains("drain"), "{err}");
}

#[test]
fn a_fifo_as_the_sites_file_is_refused_without_waiting() {
    let d = temp_dir("health-fifo");
    let log = d.0.join("dmesg.txt");
    fs::write(&log, DMESG).unwrap();
    let fifo = d.0.join("health.conf");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let t = std::time::Instant::now();
    let out = health(&d.0, &log, &["--dry-run", "--config", fifo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn the_textfile_holds_the_findings_for_node_exporter() {
    let d = temp_dir("health-textfile");
    let log = d.0.join("dmesg.txt");
    fs::write(&log, DMESG).unwrap();
    let prom = d.0.join("gres_rs_health.prom");
    health(&d.0, &log, &["--dry-run", "--textfile", prom.to_str().unwrap()]);
    let metrics = fs::read_to_string(&prom).unwrap();
    assert!(metrics.contains("# TYPE ") && metrics.contains("xid"), "{metrics}");
    assert!(metrics.lines().any(|l| l.contains("pci=\"0000:41:00.0\"") && l.contains("79")), "{metrics}");
    // Replaced whole, no temporary file left beside it.
    assert_eq!(fs::read_dir(&d.0).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".tmp")).count(), 0);
}

#[test]
fn as_gres_rs_health_it_runs_the_health_check() {
    // slurmd runs HealthCheckProgram with no arguments.
    let d = temp_dir("health-link");
    let link = d.0.join("gres-rs-health");
    std::os::unix::fs::symlink(crate::run::GRES_RS, &link).unwrap();
    let out = std::process::Command::new(&link).arg("--help").output().unwrap();
    assert!(text(&out.stdout).contains("HealthCheckProgram"), "{}", text(&out.stdout));
}

/// `gres-rs health` on the NVML stand-in playing `fixture`, with the 8
/// device files and 8 PCI GPUs of the node it plays; its JSON document.
pub(crate) fn on_standin(dir: &Path, fixture: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    on_standin_with(dir, fixture, extra, &[])
}

pub(crate) fn on_standin_with(dir: &Path, fixture: &str, extra: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, serde_json::Value) {
    on_library_with(dir, &gres_test_harness::standin::library(), fixture, extra, env)
}

/// [`on_standin_with`] with the NVML library `lib` (a build of the
/// stand-in that lacks functions, say).
pub(crate) fn on_library_with(dir: &Path, lib: &Path, fixture: &str, extra: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, serde_json::Value) {
    let dev = dir.join("dev");
    let pci = dir.join("sys/bus/pci/devices");
    for i in 0..8 {
        fs::create_dir_all(&dev).unwrap();
        fs::write(dev.join(format!("nvidia{i}")), "").unwrap();
        let p = pci.join(format!("0000:{:02x}:00.0", 0x10 + i));
        fs::create_dir_all(&p).unwrap();
        fs::write(p.join("vendor"), "0x10de\n").unwrap();
        fs::write(p.join("class"), "0x030200\n").unwrap();
    }
    let log = dir.join("empty.log");
    fs::write(&log, "").unwrap();
    let mut args = vec!["health", "--no-slurm", "--node", "n1", "--format", "json", "--nvml-timeout", "1000"];
    let (d, s, l, k, st) = (dev.to_str().unwrap(), dir.join("sys"), lib.to_str().unwrap(), log.to_str().unwrap(), dir.join("state"));
    let (s, st) = (s.to_str().unwrap().to_string(), st.to_str().unwrap().to_string());
    args.extend_from_slice(&["--dev-dir", d, "--sys-dir", &s, "--nvml-lib", l, "--kmsg", k, "--state-dir", &st]);
    args.extend_from_slice(extra);
    let out = std::process::Command::new(crate::run::GRES_RS)
        .args(&args)
        .env("GRES_RS_NVML_FIXTURE", gres_test_harness::standin::fixture(fixture))
        .env_remove("SLURM_CONF")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    (out.status.code(), doc)
}

/// The kinds and actions of a document's findings.
pub(crate) fn kinds(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["findings"].as_array().unwrap().iter().map(|f| (f["kind"].as_str().unwrap().to_string(), f["action"].as_str().unwrap().to_string())).collect()
}

#[test]
fn a_healthy_node_on_nvml_is_healthy() {
    let d = temp_dir("health-nvml-ok");
    let (code, doc) = on_standin(&d.0, "health_h100x8.conf", &["--dry-run"]);
    assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
    assert!(kinds(&doc).is_empty(), "{doc:#}");
    // Every GPU read: 1 count and at most 30 calls a GPU (the stand-in's log
    // has the exact list: tests/nvml_health.rs).
    let calls = doc["nvml_calls"].as_u64().unwrap();
    assert!((8..=1 + 8 * 30).contains(&calls), "{calls} NVML calls");
    assert!(doc["notes"].as_array().unwrap().iter().any(|n| n == "8 GPUs in NVML, 8 GPU device files, 8 NVIDIA GPUs on the PCI bus, - configured"), "{doc:#}");
}

#[test]
fn each_nvml_fault_gets_its_action() {
    for (fixture, want) in [
        ("health_dbe.conf", ("dbe", "drain")),
        ("health_retired.conf", ("retire_pending", "drain")),
        ("health_remap.conf", ("remap_failure", "drain")),
        ("health_lost.conf", ("gpu_lost", "drain")),
        ("health_hang.conf", ("nvml_hang", "drain")),
        ("health_throttle.conf", ("throttle", "warn")),
        ("health_recovery.conf", ("recovery_action", "drain")),
    ] {
        let d = temp_dir(&format!("health-nvml-{fixture}"));
        if fixture == "health_hang.conf" {
            // A hang may pass: a warning on the first two checks in a row,
            // a drain on the third (transient_runs = 3).
            for run in 1..=2 {
                let (code, doc) = on_standin(&d.0, fixture, &[]);
                assert_eq!((code, kinds(&doc)), (Some(1), vec![("nvml_transient".to_string(), "warn".to_string())]), "run {run}: {doc:#}");
            }
        }
        let (code, doc) = on_standin(&d.0, fixture, &["--dry-run"]);
        let found = kinds(&doc);
        assert!(found.contains(&(want.0.to_string(), want.1.to_string())), "{fixture}: {found:?}\n{doc:#}");
        let expect = if want.1 == "drain" { (Some(3), "drain") } else { (Some(1), "warn") };
        assert_eq!((code, doc["verdict"].as_str().unwrap()), expect, "{fixture}: {doc:#}");
        if want.1 == "drain" {
            assert!(doc["reason"].as_str().unwrap().starts_with("gres-rs: gpu "), "{fixture}: {doc:#}");
        }
        if fixture == "health_recovery.conf" {
            // GPU 5's driver asks for a reboot; GPU 0's "none" is no finding.
            let f: Vec<&serde_json::Value> = doc["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "recovery_action").collect();
            assert_eq!(f.len(), 1, "{doc:#}");
            assert_eq!((f[0]["gpu"].as_u64(), f[0]["remedy"].as_str()), (Some(5), Some("reboot node")), "{doc:#}");
            assert!(doc["reason"].as_str().unwrap().contains("-> reboot node"), "{doc:#}");
        }
    }
}

#[test]
fn an_nvlink_is_down_only_after_it_was_seen_up() {
    let d = temp_dir("health-nvlink");
    // The first check sees the lanes down, never up: no fault.
    let (code, doc) = on_standin(&d.0, "health_nvlink_down.conf", &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    fs::remove_file(d.0.join("state/nvlinks.state")).unwrap();
    // Seen up on a healthy check, then down.
    assert_eq!(on_standin(&d.0, "health_h100x8.conf", &[]).0, Some(0));
    let (code, doc) = on_standin(&d.0, "health_nvlink_down.conf", &[]);
    assert_eq!(code, Some(3), "{doc:#}");
    let links: Vec<&str> = doc["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "nvlink_down").map(|f| f["detail"].as_str().unwrap()).collect();
    assert_eq!(links, ["3", "9"], "{doc:#}");
}

#[test]
fn a_thousand_checks_of_a_healthy_node_drain_nothing() {
    let d = temp_dir("health-thousand");
    for i in 0..1000 {
        let (code, doc) = on_standin(&d.0, "health_h100x8.conf", &[]);
        assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "check {i}: {doc:#}");
    }
}

#[test]
fn old_xids_after_a_reboot_drain_nothing() {
    let d = temp_dir("health-reboot");
    let log = d.0.join("kern.log");
    fs::write(&log, DMESG).unwrap();
    assert_eq!(health(&d.0, &log, &[]).status.code(), Some(3));
    // The node reboots: another boot id; the kernel log kept on disk
    // still holds the XIDs of the boot before.
    let state = d.0.join("health.state");
    let text = fs::read_to_string(&state).unwrap();
    let rebooted: String = text
        .lines()
        .map(|l| if l.starts_with("boot_id=") { "boot_id=00000000-1111-2222-3333-444444444444".to_string() } else { l.to_string() } + "\n")
        .collect();
    assert_ne!(text, rebooted);
    fs::write(&state, rebooted).unwrap();
    let out = health(&d.0, &log, &["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((out.status.code(), doc["verdict"].as_str(), doc["new_xids"].as_u64()), (Some(0), Some("nothing"), Some(0)), "{doc:#}");
}

#[test]
fn fewer_gpus_than_slurm_conf_configures_drain() {
    let d = temp_dir("health-configured");
    let conf = d.0.join("slurm.conf");
    fs::write(&conf, "GresTypes=gpu\nNodeName=n1 CPUs=8 Gres=gpu:h100:8,gpu:a100:8\n").unwrap();
    let (code, doc) = on_standin_with(&d.0, "health_h100x8.conf", &["--dry-run"], &[("SLURM_CONF", &conf)]);
    assert_eq!(code, Some(3), "{doc:#}");
    assert!(doc["reason"].as_str().unwrap().contains("conf 16"), "{doc:#}");
    // More GPUs than configured is the admin's choice.
    fs::write(&conf, "GresTypes=gpu\nNodeName=n1 CPUs=8 Gres=gpu:h100:4\n").unwrap();
    let (code, doc) = on_standin_with(&d.0, "health_h100x8.conf", &["--dry-run"], &[("SLURM_CONF", &conf)]);
    assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
    assert!(doc["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().ends_with(", 4 configured")), "{doc:#}");
}

/// Records our gpu/nvml wrote in two steps (`step_xids = on`) in this
/// boot: XID 79 on GPU 3 during job 12 step 0, XID 13 on GPU 1 during job
/// 14 step 2 (each line 98 bytes whatever the time, until 2286).
pub(crate) fn step_records() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    format!(
        "step-xid 1 time={now} job=12 step=0 pid=4567 gpu=3 uuid=GPU-5c1b2e3f pci=0000:41:00.0 xid=79\n\
         step-xid 1 time={now} job=14 step=2 pid=4600 gpu=1 uuid=GPU-0a1b2c3d pci=0000:42:00.0 xid=13\n"
    )
}

#[test]
fn the_xids_that_hit_a_step_are_findings_once() {
    let d = temp_dir("health-steps");
    let log = d.0.join("dmesg.txt");
    fs::write(&log, "").unwrap();
    fs::write(d.0.join("step-xids"), step_records()).unwrap();
    let out = health(&d.0, &log, &["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{doc}");
    assert_eq!(doc["new_xids"], 2, "{doc}");
    let f = &doc["findings"];
    assert_eq!((f[0]["source"].as_str(), f[0]["kind"].as_str(), f[0]["gpu"].as_u64()), (Some("step 12.0"), Some("xid"), Some(3)), "{doc}");
    assert_eq!(f[0]["text"], "xid 79 (fallen off the bus)");
    assert_eq!((f[1]["source"].as_str(), f[1]["action"].as_str()), (Some("step 14.2"), Some("ignore")), "{doc}");
    assert!(doc["reason"].as_str().unwrap().starts_with("gres-rs: gpu 3 GPU-5c1b2e3f 0000:41:00.0 xid 79 (fallen off the bus) job 12.0 -> "), "{doc}");
    assert!(fs::read_to_string(d.0.join("health.state")).unwrap().contains("step_records=196"));
    // Reported once: the next run finds nothing new.
    let out = health(&d.0, &log, &["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((doc["new_xids"].as_u64(), doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc}");
}

/// The kernel's line for the XID a step's record has too is not a second
/// finding; another GPU's XID in the kernel's log is.
#[test]
fn a_kernel_xid_a_step_recorded_is_one_finding() {
    let d = temp_dir("health-steps-kmsg");
    let log = d.0.join("dmesg.txt");
    fs::write(
        &log,
        "[ 100.000000] NVRM: Xid (PCI:0000:41:00): 79, pid=4711, name=python, GPU has fallen off the bus.\n\
         [ 101.000000] NVRM: Xid (PCI:0000:43:00): 31, pid=4712, name=python, Ch 00000010, intr 10000000. MMU Fault\n",
    )
    .unwrap();
    fs::write(d.0.join("step-xids"), step_records()).unwrap();
    let out = health(&d.0, &log, &["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{doc}");
    let seen: Vec<(&str, &str)> = doc["findings"].as_array().unwrap().iter().map(|f| (f["source"].as_str().unwrap(), f["text"].as_str().unwrap())).collect();
    assert_eq!(seen.len(), 3, "{doc:#}");
    assert!(seen.contains(&("step 12.0", "xid 79 (fallen off the bus)")), "{doc:#}");
    assert!(seen.iter().any(|(src, text)| src.starts_with("log line 2") && text.starts_with("xid 31")), "{doc:#}");
    assert!(!seen.iter().any(|(src, text)| src.starts_with("log line") && text.starts_with("xid 79")), "{doc:#}");
    assert!(doc["reason"].as_str().unwrap().contains(" job 12.0 -> "), "{doc}");
}

#[test]
fn jobs_lists_the_steps_a_fault_hit() {
    let d = temp_dir("health-jobs");
    let dir = d.0.to_str().unwrap();
    let out = gres_rs(&["health", "--jobs", "--state-dir", dir]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("no step had a GPU fault recorded"), "{}", text(&out.stdout));
    fs::write(d.0.join("step-xids"), format!("{}step-xid 1 time=1 job=1 st", step_records())).unwrap();
    let out = gres_rs(&["health", "--jobs", "--state-dir", dir]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let rows: Vec<&str> = stdout.lines().collect();
    assert!(rows[0].starts_with("JOB") && rows[0].contains("XID"), "{stdout}");
    assert!(rows[1].starts_with("12 ") && rows[1].contains(" 0 ") && rows[1].contains("0000:41:00.0") && rows[1].ends_with("fallen off the bus"), "{stdout}");
    assert!(rows[2].starts_with("14 ") && rows[2].contains("GPU-0a1b2c3d"), "{stdout}");
    assert!(stdout.contains("note: line 3 is not a record"), "{stdout}");
    let out = gres_rs(&["health", "--jobs", "--state-dir", dir, "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["tool"], "gres-rs");
    let r = &doc["records"];
    assert_eq!(
        (r[0]["job"].as_u64(), r[0]["step"].as_str(), r[0]["xid"].as_u64(), r[0]["name"].as_str()),
        (Some(12), Some("0"), Some(79), Some("fallen off the bus")),
        "{doc}"
    );
    assert_eq!((r[1]["job"].as_u64(), r[1]["gpu"].as_u64()), (Some(14), Some(1)));
    assert_eq!(doc["bad_lines"], serde_json::json!([3]));
}
