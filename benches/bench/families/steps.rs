//! `steps` rows: time per step of sequential `srun --gres=gpu:1 true`
//! steps and slurmstepd's resident memory.

use super::stepd::rows_stepd_instructions;
use crate::options::Opts;
use crate::row::Row;
use crate::stats::{interleaved, median, Side};
use gres_test_harness::testbed::{self, TestBed};
use gres_test_harness::{Cluster, PluginSet};
use std::time::Duration;

/// The steps rows of release `bed` with our build for it (`build`); the
/// steps are timed inside the allocation (in the chroot for a chroot's
/// release).
pub fn rows_steps(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let steps = opts.n(20, 5);
    let rounds = opts.n(25, 3);
    let what = format!("{steps} sequential `srun --gres=gpu:1 true` steps in one allocation");
    let ours = match build {
        Ok(b) if bed.chroot.is_some() => b.apply(bed.config(PluginSet::Ours, 4)),
        Ok(_) => bed.config(PluginSet::Ours, 4),
        Err(e) => {
            rows.push(Row::not_measured("steps", v, &what, "time per step, median of rounds", format!("not measured: our build for Slurm {v} failed: {e}")));
            return;
        }
    };
    let stock = Cluster::start(bed.config(PluginSet::Stock, 4));
    let ours = Cluster::start(ours);
    ours.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:1"]);
    let round = |c: &Cluster| time_per_step(c, steps, "--gres=gpu:1");
    // Warm-up (first allocation, page cache).
    round(&stock);
    round(&ours);
    let (s, o) = interleaved(rounds, |side| round(if side == Side::Stock { &stock } else { &ours }));
    // slurmstepd's memory: a step's task reads its parent's VmRSS.
    let stepd_rss = |c: &Cluster| -> f64 {
        let out = c.srun(&["--gres=gpu:1", "sh", "-c", "awk '/^VmRSS/{print $2}' /proc/$PPID/status"]);
        out.stdout.trim().parse::<f64>().unwrap_or_else(|_| panic!("stepd VmRSS:\n{out}")) / 1024.0
    };
    let (rs, ro) = interleaved(opts.n(5, 2), |side| stepd_rss(if side == Side::Stock { &stock } else { &ours }));
    rows.push(Row {
        group: "steps",
        release: v.into(),
        what,
        metric: "time per step, median of rounds".into(),
        unit: "ms".into(),
        stock: Some(median(&s)),
        ours: Some(median(&o)),
        n: rounds,
        goal: "<= 1.02".into(),
        note: "4 fake GPUs, GresTypes=gpu,mps,shard".into(),
    });
    rows.push(Row::memory(
        "steps",
        v,
        "slurmstepd resident memory of a `srun --gres=gpu:1` step (VmRSS)",
        &rs,
        &ro,
        "read by the step's task from /proc/$PPID/status",
    ));
    drop((stock, ours));
    rows_stepd_instructions(opts, bed, build, rows);
}

/// Milliseconds per step of `steps` sequential `srun <srun_args> true`
/// steps in one allocation on `c`, timed inside it (in the chroot for a
/// chroot's release).
pub fn time_per_step(c: &Cluster, steps: usize, srun_args: &str) -> f64 {
    let script =
        format!("s=$(date +%s%N); i=0; while [ $i -lt {steps} ]; do srun {srun_args} true || exit 1; i=$((i+1)); done; e=$(date +%s%N); echo STEP_NS=$((e-s))");
    let out = c.run("salloc", &["--gres=gpu:1", "bash", "-c", &script], Duration::from_secs(600));
    let ns: f64 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("STEP_NS="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("step round failed:\n{out}\n{}", c.log_tails(20)));
    ns / 1e6 / steps as f64
}
