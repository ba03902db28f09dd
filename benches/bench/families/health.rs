//! The `health` rows: one `gres-rs health` of the 8-GPU NVML stand-in
//! node (`health_h100x8.conf`), as slurmd's HealthCheckProgram runs it
//! every interval: its wall time and its NVML calls; and one run over a
//! replayed kernel log of 100,000 XID lines, read whole (the first run)
//! and again once nothing was added (the next).  Slurm has no health
//! check of its own to compare with: the goals are absolute (under 1 s;
//! the calls bounded by 1 count and 30 a GPU).

use crate::exec::{text, timed};
use crate::options::Opts;
use crate::row::Row;
use crate::stats::median;
use gres_test_harness::standin;
use std::path::{Path, PathBuf};
use std::process::Command;

/// At most this many NVML calls for 8 GPUs: the count, and 30 a GPU.
const MAX_CALLS: f64 = 1.0 + 8.0 * 30.0;

/// The node's files outside NVML: 8 device files and 8 PCI GPUs.
fn node_files(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    for i in 0..8 {
        std::fs::create_dir_all(dir.join("dev")).expect("dev dir");
        std::fs::write(dir.join(format!("dev/nvidia{i}")), "").expect("device file");
        let p = dir.join(format!("sys/bus/pci/devices/0000:{:02x}:00.0", 0x10 + i));
        std::fs::create_dir_all(&p).expect("pci dir");
        std::fs::write(p.join("vendor"), "0x10de\n").expect("vendor");
        std::fs::write(p.join("class"), "0x030200\n").expect("class");
    }
    std::fs::write(dir.join("kmsg.log"), "").expect("kernel log");
}

pub fn rows_health(opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let gres_rs = std::env::var_os("GRES_RS_BIN").map(PathBuf::from).unwrap_or_else(|| root.join("target/release/gres-rs"));
    let what = "8-GPU NVML node (health_h100x8 on the stand-in), healthy";
    let row = |metric: &str, unit: &str, goal: &str, note: String| Row {
        group: "health",
        release: v.into(),
        what: what.into(),
        metric: metric.into(),
        unit: unit.into(),
        goal: goal.into(),
        note,
        ..Default::default()
    };
    if !gres_rs.is_file() {
        rows.push(row("`gres-rs health` wall time, median", "ms", "-", format!("pending: {} not built", gres_rs.display())));
        return;
    }
    let dir = standin::scratch_dir().join("bench-health");
    node_files(&dir);
    let check = || {
        let mut cmd = Command::new(&gres_rs);
        cmd.args(["health", "--no-slurm", "--dry-run", "--node", "n1", "--format", "json", "--nvml-lib"]).arg(standin::library());
        for (opt, sub) in [("--kmsg", "kmsg.log"), ("--state-dir", "state"), ("--dev-dir", "dev"), ("--sys-dir", "sys")] {
            cmd.arg(opt).arg(dir.join(sub));
        }
        cmd.env("GRES_RS_NVML_FIXTURE", standin::fixture("health_h100x8.conf"));
        cmd
    };
    let n = opts.n(21, 5);
    let mut times = Vec::new();
    let mut calls = None;
    for _ in 0..n {
        let (t, out) = timed(check());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("gres-rs health: {e}:\n{}", text(&out)));
        assert_eq!(doc["verdict"], "nothing", "a healthy node:\n{}", text(&out));
        calls = doc["nvml_calls"].as_f64();
        times.push(t * 1000.0);
    }
    let note = "a process start, NVML loaded and read, the decision and JSON; no Slurm asked (--no-slurm)".to_string();
    let mut wall = row("`gres-rs health` wall time, median", "ms", "< 1000 ms", note);
    wall.ours = Some(median(&times));
    wall.n = n;
    rows.push(wall);
    let mut nvml = row("NVML calls of one `gres-rs health`", "calls", &format!("<= {MAX_CALLS}"), "counted by gres-nvml's bounded reader".into());
    nvml.ours = calls;
    nvml.n = 1;
    rows.push(nvml);
    rows_log(&gres_rs, &dir, opts, v, rows);
}

/// Lines of the replayed log.
const LOG_LINES: usize = 100_000;

/// A run over a replayed log of [`LOG_LINES`] XID lines (one XID 48 and
/// application XIDs), no NVML: read whole with no state, then again with
/// the state the first run saved (nothing new: the mark's two windows).
fn rows_log(gres_rs: &Path, dir: &Path, opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    let log = dir.join("kern-100k.log");
    let mut log_text = String::from("[   10.000000] NVRM: Xid (PCI:0000:41:00): 48, pid=1, name=x, An uncorrectable double bit error\n");
    for i in 0..LOG_LINES - 1 {
        log_text.push_str(&format!(
            "[{:>5}.{:06}] NVRM: Xid (PCI:0000:41:00): 13, pid={i}, name=python3, Graphics SM Warp Exception\n",
            20 + i / 1000,
            i % 1000
        ));
    }
    std::fs::write(&log, &log_text).expect("log");
    let state = dir.join("state-100k");
    let check = || {
        let mut cmd = Command::new(gres_rs);
        cmd.args(["health", "--no-slurm", "--no-nvml", "--node", "n1", "--format", "json", "--kmsg"]).arg(&log);
        for (opt, sub) in [("--state-dir", "state-100k"), ("--dev-dir", "dev"), ("--sys-dir", "sys")] {
            cmd.arg(opt).arg(dir.join(sub));
        }
        cmd
    };
    let n = opts.n(11, 3);
    let (mut whole, mut again) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let _ = std::fs::remove_dir_all(&state);
        let (t, out) = timed(check());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("gres-rs health: {e}:\n{}", text(&out)));
        assert_eq!((doc["verdict"].as_str(), doc["new_xids"].as_u64()), (Some("drain"), Some(LOG_LINES as u64)), "{}", text(&out));
        whole.push(t * 1000.0);
        let (t, out) = timed(check());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("gres-rs health: {e}:\n{}", text(&out)));
        assert_eq!(doc["new_xids"], 0, "{}", text(&out));
        again.push(t * 1000.0);
    }
    let what = format!("replayed kernel log of {} XID lines ({} MiB), no NVML", LOG_LINES, log_text.len() >> 20);
    for (metric, samples, note) in [
        ("`gres-rs health --kmsg` wall time, first run (read whole), median", whole, "parse, classify, the reported set, the state saved"),
        ("`gres-rs health --kmsg` wall time, next run (nothing new), median", again, "the mark's two 4 KiB windows read, nothing parsed"),
    ] {
        rows.push(Row {
            group: "health",
            release: v.into(),
            what: what.clone(),
            metric: metric.into(),
            unit: "ms".into(),
            goal: "< 1000 ms".into(),
            note: note.into(),
            ours: Some(median(&samples)),
            n,
            ..Default::default()
        });
    }
}
