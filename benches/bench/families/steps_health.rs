//! The `steps-health` row: what the job a fault hit costs a step.  With
//! `step_xids = on` our gpu/nvml registers the step's GPUs for NVML's XID
//! events when the step starts and collects them when it ends; the row
//! times steps that reach those hooks (`--gpu-freq`: 22.05's slurmstepd
//! calls them only then) with the switch off and on, ours both times, on
//! the NVML stand-in's two-GPU node.

use super::steps::time_per_step;
use crate::options::Opts;
use crate::row::Row;
use crate::stats::{interleaved, median, Side};
use gres_test_harness::testbed::{series_of, TestBed};
use gres_test_harness::{standin, Cluster, ClusterConfig, PluginSet};
use std::os::unix::fs::PermissionsExt;

pub fn rows_steps_health(opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    let steps = opts.n(20, 5);
    let rounds = opts.n(15, 3);
    let what = format!("{steps} sequential `srun --gres=gpu:1 --gpu-freq=high true` steps, ours with step_xids off (left) and on (right)");
    let not = |why: String| Row::not_measured("steps-health", v, &what, "time per step, median of rounds", why);
    let bed = match TestBed::open(&series_of(v)) {
        Ok(b) => b,
        Err(e) => return rows.push(not(format!("not measured: {e}"))),
    };
    let cluster = |switch: &str| -> Result<Cluster, String> {
        let dir = standin::scratch_dir().join(format!("bench-steps-health-{switch}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        let conf = dir.join("gres-rs-health.conf");
        std::fs::write(&conf, format!("step_xids = {switch}\n")).map_err(|e| e.to_string())?;
        let cfg = ClusterConfig::gpus(PluginSet::Ours, 0).with_cpus(2, 1, 1).with_gres("gpu:nvidia_h100_80gb_hbm3:2", "AutoDetect=nvml\n").with_test_build();
        let mut cfg = bed.ours_config(cfg.with_binds(standin::chroot_binds()), "steps-health").ok_or("no test build of ours")?;
        cfg.slurmd_env = standin::daemon_env(&standin::fixture("h100x2.conf"));
        cfg.slurmd_env.push(("GRES_RS_HEALTH_CONF".into(), conf.to_string_lossy().into_owned()));
        cfg.slurmd_env.push(("GRES_RS_STATE_DIR".into(), dir.join("state").to_string_lossy().into_owned()));
        let c = Cluster::start(cfg);
        c.assert_ours_gpu_plugin_loaded("gpu_nvml");
        Ok(c)
    };
    let (off, on) = match (cluster("off"), cluster("on")) {
        (Ok(off), Ok(on)) => (off, on),
        (Err(e), _) | (_, Err(e)) => return rows.push(not(format!("not measured: {e}"))),
    };
    let round = |c: &Cluster| time_per_step(c, steps, "--gres=gpu:1 --gpu-freq=high");
    round(&off);
    round(&on);
    let (s, o) = interleaved(rounds, |side| round(if side == Side::Stock { &off } else { &on }));
    rows.push(Row {
        group: "steps-health",
        release: v.into(),
        what,
        metric: "time per step, median of rounds".into(),
        unit: "ms".into(),
        stock: Some(median(&s)),
        ours: Some(median(&o)),
        n: rounds,
        goal: "<= 1.01".into(),
        note: "both columns ours (test build, NVML stand-in h100x2): left step_xids off, right on".into(),
    });
}
