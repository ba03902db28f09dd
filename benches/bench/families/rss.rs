//! `rss` rows: slurmd's memory once the node is idle.

use crate::options::Opts;
use crate::row::Row;
use crate::stats::{interleaved, Side};
use gres_test_harness::{is_library_file, Cluster, ClusterConfig, Daemon, PluginSet};
use std::time::Duration;

/// (VmRSS, Pss, Private_Dirty) of a process in KiB.
fn memory_of(pid: u32) -> (f64, f64, f64) {
    let kib = |text: &str, key: &str| -> f64 {
        text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    (kib(&status, "VmRSS:"), kib(&rollup, "Pss:"), kib(&rollup, "Private_Dirty:"))
}

/// Resident KiB of each mapped `gres_*.so` / `gpu_*.so` file and of our
/// `libgres_rs.so` (all its mappings together), for the report.
fn plugin_rss(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut per: Vec<(String, u64, u64)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            current = line
                .split_whitespace()
                .nth(5)
                .filter(|p| {
                    let f = p.rsplit('/').next().unwrap_or("");
                    f.starts_with("gres_") || f.starts_with("gpu_") || is_library_file(f)
                })
                .map(|p| match per.iter().position(|(n, _, _)| n == p) {
                    Some(i) => i,
                    None => {
                        per.push((p.to_string(), 0, 0));
                        per.len() - 1
                    }
                });
        } else if let Some(i) = current {
            let kib = |key: &str| line.strip_prefix(key).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok());
            if let Some(v) = kib("Rss:") {
                per[i].1 += v;
            }
            if let Some(v) = kib("Private_Dirty:") {
                per[i].2 += v;
            }
        }
    }
    per.iter().map(|(n, r, d)| format!("{} {r} KiB ({d} KiB private dirty)", n.rsplit('/').next().unwrap_or(n))).collect::<Vec<_>>().join(", ")
}

/// The rss rows, on the host's release `v` only.
pub fn rows_rss(opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    let n = opts.n(5, 2);
    let mut pss = (Vec::new(), Vec::new());
    let mut dirty = (Vec::new(), Vec::new());
    let (s, o) = interleaved(n, |side| {
        let plugins = if side == Side::Stock { PluginSet::Stock } else { PluginSet::Ours };
        let c = Cluster::start(ClusterConfig::gpus(plugins, 4));
        // Let registration and the first node health exchange finish.
        std::thread::sleep(Duration::from_secs(3));
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");
        let (rss, p, d) = memory_of(pid);
        eprintln!("bench: slurmd ({side:?}) RSS by GRES plugin file: {}", plugin_rss(pid));
        if side == Side::Stock {
            pss.0.push(p / 1024.0);
            dirty.0.push(d / 1024.0);
        } else {
            pss.1.push(p / 1024.0);
            dirty.1.push(d / 1024.0);
        }
        rss / 1024.0
    });
    rows.push(Row::memory(
        "rss",
        v,
        "slurmd resident memory once the node is idle (VmRSS)",
        &s,
        &o,
        "GresTypes=gpu,mps,shard (three GRES plugins loaded), 4 fake GPUs; most of the difference is the clean, shareable text of libgres_rs.so (see stderr)",
    ));
    rows.push(Row::memory(
        "rss",
        v,
        "slurmd proportional set size once the node is idle (Pss)",
        &pss.0,
        &pss.1,
        "shared library pages divided among the processes mapping them",
    ));
    rows.push(Row::memory(
        "rss",
        v,
        "slurmd private dirty memory once the node is idle (Private_Dirty)",
        &dirty.0,
        &dirty.1,
        "memory no other process shares and the kernel cannot drop",
    ));
}
