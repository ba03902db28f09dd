//! The panic guard on real Slurm: the test build of our plugins
//! (harness `test_build_dir`, `--features fault-injection`) panics inside the exported functions
//! named by `GRES_RS_PANIC_IN`; each panic must become an error line in the
//! daemon's log and a safe return, with slurmd and slurmstepd serving on.

use gres_test_harness as harness;

use harness::*;

fn config(panic_in: &str) -> ClusterConfig {
    let mut cfg = ClusterConfig::gpus(PluginSet::Ours, 2).with_test_build();
    cfg.slurmd_env.push(("GRES_RS_PANIC_IN".into(), panic_in.into()));
    cfg
}

#[test]
fn panics_in_slurmd_and_slurmstepd_are_logged_and_survived() {
    if !require_slurm("panics_in_slurmd_and_slurmstepd_are_logged_and_survived") {
        return;
    }
    // Functions slurmd and slurmstepd call while running jobs.
    let c = Cluster::start(config("send_stepd,recv_stepd,job_set_env,step_set_env,task_set_env,get_devices,epilog_build_env"));
    let slurmd = c.pid(Daemon::Slurmd).expect("slurmd running");
    for round in 0..2 {
        let out = c.srun(&["--gres=gpu:1", "true"]);
        assert!(out.ok(), "srun round {round} failed: {}", out.combined());
    }
    let job = c.sbatch(&["--gres=gpu:1"], "srun true\n");
    assert!(job.ok(), "batch job failed: {:?}", job.state);
    assert_eq!(c.pid(Daemon::Slurmd), Some(slurmd), "slurmd must keep serving");
    let log = c.log(Daemon::Slurmd);
    for func in ["send_stepd", "job_set_env"] {
        let line = format!("gres/gpu: {func}: internal error (panic): injected panic in {func}");
        assert!(log.contains(&line), "slurmd log lacks `{line}`:\n{}", c.log_tails(40));
        // The line names where the panic happened (the fault-injection
        // hook's panic!, in crates/slurm-abi/src/guard.rs): file, line and column.
        let located = format!("{line} (at crates/slurm-abi/src/guard.rs:");
        let rest = log.split(&located).nth(1).unwrap_or_else(|| panic!("slurmd log lacks `{located}`:\n{}", c.log_tails(40)));
        let place = rest.split(')').next().unwrap_or("");
        assert!(place.split(':').count() == 2 && place.split(':').all(|n| n.parse::<u32>().is_ok()), "not LINE:COL after `{located}`: `{place}`");
    }
    assert!(!log.contains("panicked at"), "the default panic hook wrote to the log");
}

#[test]
fn panic_in_node_config_load_fails_cleanly() {
    if !require_slurm("panic_in_node_config_load_fails_cleanly") {
        return;
    }
    let g = Cluster::slurmd_g(&config("node_config_load"));
    let text = g.output.combined();
    assert!(
        text.contains("gres/gpu: node_config_load: internal error (panic): injected panic in node_config_load"),
        "slurmd -G output lacks the panic line:\n{text}"
    );
    assert!(text.contains("injected panic in node_config_load (at crates/slurm-abi/src/guard.rs:"), "the panic line does not name where it happened:\n{text}");
    assert_eq!(g.output.signal, None, "slurmd -G must not die of a signal:\n{text}");
}
