//! `gres-rs health`'s own state against what goes wrong around it: a
//! damaged or foreign state file, step records of an earlier boot, a
//! replayed log that grows past any number of lines, a replayed
//! `/dev/kmsg` copy of another boot, a state directory that cannot be
//! written, a second run at once, a huge log, faults kept while Slurm
//! cannot be asked, and a MIG node whose devices could not be counted.
//! Without Slurm daemons (`--no-slurm`, or a slurm.conf whose
//! controller does not answer).

use crate::health::step_records;
use crate::run::{temp_dir, text, GRES_RS};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `gres-rs health` on `dir`'s files: the kernel log `log`, the state in
/// `dir/state`, no GPU anywhere; extra arguments and environment.
fn health(dir: &Path, log: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Output {
    let empty = dir.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let state = dir.join("state");
    let mut args = vec!["health", "--node", "tux0", "--format", "json", "--kmsg", log.to_str().unwrap(), "--state-dir", state.to_str().unwrap()];
    args.extend_from_slice(&["--dev-dir", empty.to_str().unwrap(), "--sys-dir", empty.to_str().unwrap(), "--no-nvml"]);
    args.extend_from_slice(extra);
    Command::new(GRES_RS).args(&args).env_remove("SLURM_CONF").envs(env.iter().copied()).output().unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)))
}

fn notes(doc: &serde_json::Value) -> Vec<String> {
    doc["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

fn state_file(dir: &Path) -> PathBuf {
    dir.join("state/health.state")
}

fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim().to_string()
}

const XID48: &str = "[ 100.000000] NVRM: Xid (PCI:0000:41:00): 48, pid=1, name=x, An uncorrectable double bit error\n";

fn xid13(i: usize) -> String {
    format!("[ {}.000000] NVRM: Xid (PCI:0000:41:00): 13, pid={i}, name=x, Graphics SM Warp Exception\n", 200 + i)
}

/// Item 4: a state file that is not one (a later format's header after a
/// downgrade, a file cut short, garbage) is kept aside and said; the run
/// acts on nothing older than the boot.
#[test]
fn a_damaged_state_file_is_kept_aside_and_acts_on_nothing_older_than_the_boot() {
    let d = temp_dir("health-state-damaged");
    let log = d.0.join("empty.log");
    fs::write(&log, "").unwrap();
    fs::create_dir_all(d.0.join("state")).unwrap();
    // A step record of 2023 (before this boot) and one of now.
    let old = "step-xid 1 time=1690000000 job=3 step=0 pid=77 gpu=0 uuid=GPU-00aa pci=0000:40:00.0 xid=48\n";
    fs::write(d.0.join("state/step-xids"), format!("{old}{}", step_records())).unwrap();
    fs::write(state_file(&d.0), format!("gres-rs-health-state 2\nboot_id={}\nkmsg_seq=12", boot_id())).unwrap();
    let out = health(&d.0, &log, &["--no-slurm"], &[]);
    let doc = json(&out);
    let n = notes(&doc);
    assert!(n.iter().any(|l| l.contains("cut short") && l.contains("health.state.bad-") && l.contains("nothing older than this boot")), "{n:?}");
    assert!(n.iter().any(|l| l.contains("1 step XID record(s) written before this boot")), "{n:?}");
    // The old record drains nothing; this boot's XID 79 does, with its job.
    let reason = doc["reason"].as_str().unwrap();
    assert!(reason.contains("xid 79") && reason.contains("job 12.0") && !reason.contains("xid 48"), "{doc:#}");
    let kept: Vec<String> = fs::read_dir(d.0.join("state")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(kept.iter().any(|f| f.starts_with("health.state.bad-")), "{kept:?}");
    // A state file of a later version with keys this one does not know
    // is read, not kept aside.
    let later = format!("gres-rs-health-state 7\nboot_id={}\nstep_records=0\nnew_thing=on\nend\n", boot_id());
    fs::write(state_file(&d.0), later).unwrap();
    let doc = json(&health(&d.0, &log, &["--no-slurm", "--dry-run"], &[]));
    assert!(!notes(&doc).iter().any(|l| l.contains("health.state")), "{doc:#}");
}

/// Item 5: a step record written before this boot does not drain the
/// rebooted node (it would wait for a second reboot).
#[test]
fn a_step_record_of_an_earlier_boot_drains_nothing() {
    let d = temp_dir("health-state-old-record");
    let log = d.0.join("empty.log");
    fs::write(&log, "").unwrap();
    fs::create_dir_all(d.0.join("state")).unwrap();
    fs::write(d.0.join("state/step-xids"), "step-xid 1 time=1690000000 job=3 step=0 pid=77 gpu=0 uuid=GPU-00aa pci=0000:40:00.0 xid=79\n").unwrap();
    let out = health(&d.0, &log, &["--no-slurm"], &[]);
    let doc = json(&out);
    assert_eq!((out.status.code(), doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
    assert!(notes(&doc).iter().any(|l| l.contains("before this boot")), "{doc:#}");
}

/// Item 6: one XID 48 and more XID 13 lines than any hash list holds:
/// the 48 is reported once, however the log grows.
#[test]
fn no_number_of_later_lines_brings_an_old_xid_back() {
    let d = temp_dir("health-state-many-lines");
    let log = d.0.join("kern.log");
    let mut text = XID48.to_string();
    for i in 0..4100 {
        text.push_str(&xid13(i));
    }
    fs::write(&log, &text).unwrap();
    let doc = json(&health(&d.0, &log, &["--no-slurm"], &[]));
    assert_eq!((doc["verdict"].as_str(), doc["new_xids"].as_u64()), (Some("drain"), Some(4101)), "{}", doc["reason"]);
    for round in 0..3 {
        let out = health(&d.0, &log, &["--no-slurm"], &[]);
        let doc = json(&out);
        assert_eq!((out.status.code(), doc["verdict"].as_str()), (Some(0), Some("nothing")), "round {round}: {}", doc["reason"]);
        // It grows by another 4,100 application XIDs.
        for i in 0..4100 {
            text.push_str(&xid13(5000 * (round + 1) + i));
        }
        fs::write(&log, &text).unwrap();
        let doc = json(&health(&d.0, &log, &["--no-slurm"], &[]));
        assert_eq!((doc["verdict"].as_str(), doc["new_xids"].as_u64()), (Some("nothing"), Some(4100)), "round {round}");
    }
    // The line numbers go on from where the last run stopped.
    assert!(doc["findings"].as_array().unwrap().iter().all(|f| f["source"].as_str().unwrap().starts_with("log line")), "{doc:#}");
}

/// Item 7: replaying a saved `/dev/kmsg` copy of another boot never moves
/// the live cursor of this boot.
#[test]
fn a_replayed_kmsg_copy_never_moves_the_live_cursor() {
    let d = temp_dir("health-state-replay-kmsg");
    fs::create_dir_all(d.0.join("state")).unwrap();
    fs::write(state_file(&d.0), format!("gres-rs-health-state 2\nboot_id={}\nkmsg_seq=300\nend\n", boot_id())).unwrap();
    let copy = d.0.join("kmsg-of-last-week.txt");
    fs::write(&copy, "4,2000000,51282211380,-;NVRM: Xid (PCI:0000:41:00): 48, pid=1, name=x, DBE\n").unwrap();
    let doc = json(&health(&d.0, &copy, &["--no-slurm"], &[]));
    assert_eq!(doc["new_xids"], 1, "{doc:#}");
    let state = fs::read_to_string(state_file(&d.0)).unwrap();
    assert!(state.contains("kmsg_seq=300\n") && !state.contains("2000000"), "{state}");
    // Replayed again: nothing new.
    assert_eq!(json(&health(&d.0, &copy, &["--no-slurm"], &[]))["new_xids"], 0);
}

/// Item 10: with the state directory unwritable (a full disk), the XID is
/// not acted on (it would be acted on again at every run) and the run
/// says so; once the state can be saved, it is acted on, once.
#[test]
fn a_state_that_cannot_be_saved_acts_on_no_xid_and_says_so() {
    let d = temp_dir("health-state-full");
    let log = d.0.join("kern.log");
    fs::write(&log, XID48).unwrap();
    fs::create_dir_all(d.0.join("state")).unwrap();
    fs::write(d.0.join("state/health.lock"), "").unwrap();
    let state = d.0.join("state");
    // Immutable (root cannot create a file in it either): as a full disk
    // does, saving fails.
    let chattr = |flag: &str| Command::new("chattr").arg(flag).arg(&state).status().map(|s| s.success()).unwrap_or(false);
    if !chattr("+i") {
        eprintln!("skipped: chattr +i does not work here (not root, or a file system without it)");
        return;
    }
    let out = health(&d.0, &log, &["--no-slurm"], &[]);
    assert!(chattr("-i"), "chattr -i");
    let doc = json(&out);
    assert_eq!(doc["verdict"], "warn", "{doc:#}");
    assert_eq!(out.status.code(), Some(1), "{doc:#}");
    assert!(notes(&doc).iter().any(|l| l.contains("cannot save the state") && l.contains("not acted on")), "{doc:#}");
    // Writable again: acted on now, and once.
    assert_eq!(json(&health(&d.0, &log, &["--no-slurm"], &[]))["verdict"], "drain");
    assert_eq!(json(&health(&d.0, &log, &["--no-slurm"], &[]))["verdict"], "nothing");
}

/// Item 11: a second run while one holds the state directory waits a
/// little, then exits with its own status and changes nothing.
#[test]
fn a_second_run_at_once_waits_then_gives_up() {
    let d = temp_dir("health-state-lock");
    let log = d.0.join("kern.log");
    fs::write(&log, XID48).unwrap();
    fs::create_dir_all(d.0.join("state")).unwrap();
    let lock = d.0.join("state/health.lock");
    // util-linux flock(1) holds it, as a first run would.
    let Ok(mut holder) = Command::new("flock").arg("-o").arg(&lock).args(["sleep", "20"]).spawn() else {
        eprintln!("skipped: no flock(1)");
        return;
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let t = std::time::Instant::now();
    let out = health(&d.0, &log, &["--no-slurm", "--budget", "8"], &[]);
    let waited = t.elapsed();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.status.code(), Some(2), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stderr).contains("another gres-rs health holds"), "{}", text(&out.stderr));
    assert!(waited.as_secs_f32() >= 1.5, "{waited:?}");
    assert!(!state_file(&d.0).exists(), "the second run saved nothing");
    // Free again: the XID is acted on.
    assert_eq!(json(&health(&d.0, &log, &["--no-slurm"], &[]))["verdict"], "drain");
}

/// Item 13: a log over the most read at once neither fails the check nor
/// keeps it from NVML and the counts: its newest part is read.
#[test]
fn a_huge_log_is_read_from_its_end_and_the_rest_is_still_checked() {
    let d = temp_dir("health-state-huge");
    let log = d.0.join("kern.log");
    let filler = "[ 1.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n";
    let mut text = filler.repeat((65 << 20) / filler.len());
    text.push_str(XID48);
    fs::write(&log, &text).unwrap();
    drop(text);
    let out = health(&d.0, &log, &["--no-slurm"], &[]);
    let doc = json(&out);
    assert_eq!((out.status.code(), doc["verdict"].as_str()), (Some(3), Some("drain")), "{doc:#}");
    let n = notes(&doc);
    assert!(n.iter().any(|l| l.contains("bytes not read")), "{n:?}");
    assert!(n.iter().any(|l| l.contains("GPU device files")), "{n:?}");
}

/// Item 9, without a controller: an XID read while `sinfo` fails is kept
/// in the state, and the next run that can ask acts on it.
#[test]
fn an_xid_seen_while_slurm_does_not_answer_is_kept_for_the_next_run() {
    let d = temp_dir("health-state-pending");
    let log = d.0.join("kern.log");
    fs::write(&log, XID48).unwrap();
    // A controller nobody listens for, refused at once.
    let conf = d.0.join("slurm.conf");
    fs::write(
        &conf,
        "ClusterName=x\nSlurmctldHost=localhost\nSlurmctldPort=1\nMessageTimeout=1\nTCPTimeout=1\nNodeName=tux0 CPUs=1\nPartitionName=p Nodes=tux0\n",
    )
    .unwrap();
    let out = health(&d.0, &log, &[], &[("SLURM_CONF", &conf)]);
    let doc = json(&out);
    if !notes(&doc).iter().any(|l| l.contains("the node is left as it is")) {
        eprintln!("skipped: sinfo is not installed here ({doc})");
        return;
    }
    assert_eq!(doc["action"], serde_json::Value::Null, "{doc:#}");
    let state = fs::read_to_string(state_file(&d.0)).unwrap();
    assert!(state.contains("pending=xid=48 "), "{state}");
    // The log has nothing new, but the kept XID is acted on (here: decided
    // on, Slurm not being asked) by the next run.
    let doc = json(&health(&d.0, &log, &["--no-slurm"], &[]));
    assert_eq!((doc["verdict"].as_str(), doc["new_xids"].as_u64()), (Some("drain"), Some(0)), "{doc:#}");
    assert!(doc["reason"].as_str().unwrap().contains("xid 48"), "{doc:#}");
    assert!(!fs::read_to_string(state_file(&d.0)).unwrap().contains("pending="));
    assert_eq!(json(&health(&d.0, &log, &["--no-slurm"], &[]))["verdict"], "nothing");
}

/// Item 15: a MIG node whose devices could not be counted (no NVML) has
/// no count mismatch with the MIG devices slurm.conf configures.
#[test]
fn a_count_that_could_not_be_taken_is_no_mismatch() {
    let d = temp_dir("health-state-mig");
    let log = d.0.join("empty.log");
    fs::write(&log, "").unwrap();
    let conf = d.0.join("slurm.conf");
    fs::write(&conf, "GresTypes=gpu\nNodeName=tux0 CPUs=8 Gres=gpu:1g.10gb:56\n").unwrap();
    let out = health(&d.0, &log, &["--no-slurm"], &[("SLURM_CONF", &conf)]);
    let doc = json(&out);
    assert_eq!((out.status.code(), doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
}
