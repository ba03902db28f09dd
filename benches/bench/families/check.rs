//! The `check` row: `gres-rs check --all-nodes` against `slurmd -G` on a
//! large gres.conf.

use crate::exec::{text, timed};
use crate::gdir::GDir;
use crate::options::Opts;
use crate::row::Row;
use crate::stats::{interleaved, median, Side};
use gres_test_harness::{ClusterConfig, PluginSet};
use std::fmt::Write as _;
use std::path::PathBuf;

/// The check row, on the host's release `v` only.
pub fn rows_check(opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    const NODES: usize = 12_500;
    const PER_NODE: usize = 8;
    let what = format!("{}-line gres.conf ({NODES} nodes x {PER_NODE} GPUs)", NODES * PER_NODE);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let gres_rs = std::env::var_os("GRES_RS_BIN").map(PathBuf::from).unwrap_or_else(|| root.join("target/release/gres-rs"));
    let pending = |note: String| Row {
        group: "check",
        release: v.into(),
        what: what.clone(),
        metric: "`gres-rs check --all-nodes` vs `slurmd -G`, median".into(),
        unit: "ms".into(),
        n: 0,
        goal: "-".into(),
        note,
        ..Default::default()
    };
    if !gres_rs.is_file() {
        rows.push(pending(format!("pending: {} not built", gres_rs.display())));
        return;
    }
    let mut conf = String::with_capacity(NODES * PER_NODE * 64);
    for n in 0..NODES {
        for k in 0..PER_NODE {
            let cores = if k < PER_NODE / 2 { "0-1" } else { "2-3" };
            let _ = writeln!(conf, "NodeName=gpu{n:05} Name=gpu Type=h100 File={{DEV}}/nvidia{k} Cores={cores}");
        }
    }
    let mut cfg = ClusterConfig::gpus(PluginSet::Stock, PER_NODE as u32).with_gres(&format!("gpu:h100:{PER_NODE}"), &conf);
    cfg.node_name = "gpu00000".into();
    cfg.debug_gres = false;
    cfg.extra_slurm_conf = vec![format!(
        "NodeName=gpu[00001-{:05}] CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:h100:{PER_NODE} State=UNKNOWN",
        NODES - 1
    )];
    let d = GDir::prepare(&cfg);
    let conf_path = d.slurm_conf();
    let check = || {
        let mut cmd = d.command(&gres_rs.to_string_lossy(), &["check", "--all-nodes", "--quiet", "--slurm-conf"]);
        cmd.arg(&conf_path);
        cmd
    };
    let (_, first) = timed(check());
    if first.status.code() == Some(2) || first.status.code().is_none() {
        rows.push(pending(format!("gres-rs check failed (status {:?}): {}", first.status, text(&first).lines().take(5).collect::<Vec<_>>().join(" / "))));
        return;
    }
    let n = opts.n(5, 2);
    let (s, o) = interleaved(n, |side| {
        let (t, out) = if side == Side::Stock { timed(d.slurmd_g(&[])) } else { timed(check()) };
        if side == Side::Stock {
            assert!(out.status.success(), "slurmd -G failed:\n{}", text(&out));
        }
        t * 1000.0
    });
    let mut row = pending(format!(
        "stock: `slurmd -G` for one node of the file; ours: `gres-rs check --all-nodes` (status {}) for all {NODES} nodes",
        first.status.code().unwrap_or(-1)
    ));
    row.stock = Some(median(&s));
    row.ours = Some(median(&o));
    row.n = n;
    row.goal = "<= 1.00".into();
    rows.push(row);
}
