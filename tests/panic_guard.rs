//! The panic guard on real Slurm: the test build of our plugins
//! (`TestBed::our_test_build`, `--features fault-injection,test-hooks`)
//! panics inside the exported functions named by `GRES_RS_PANIC_IN`; each
//! panic must become an error line in the daemon's log and a safe return,
//! with slurmd and slurmstepd serving on.  On every release of the test
//! bed (`per_release!`, `GRES_RS_SLURM`).

use gres_test_harness as harness;

use harness::testbed::{skip_or_fail, TestBed};
use harness::*;

/// Two GPUs with our test build for `bed`'s release and `GRES_RS_PANIC_IN`;
/// `None` when there is no test build (skipped, or a failure under
/// `GRES_RS_REQUIRE_SLURM=1`).
fn config(bed: &TestBed, test: &str, panic_in: &str) -> Option<ClusterConfig> {
    let mut cfg = bed.config(PluginSet::Ours, 2);
    cfg.slurmd_env.push(("GRES_RS_PANIC_IN".into(), panic_in.into()));
    match bed.our_test_build() {
        Ok(b) => Some(bed.on(b.apply(cfg))),
        Err(e) => {
            skip_or_fail(test, &format!("our test build for {} failed: {e}", bed.version));
            None
        }
    }
}

per_release! {
    fn panics_in_slurmd_and_slurmstepd_are_logged_and_survived(bed) {
        // Functions slurmd and slurmstepd call while running jobs.
        let funcs = "send_stepd,recv_stepd,job_set_env,step_set_env,task_set_env,get_devices,epilog_build_env";
        let Some(cfg) = config(bed, "panics_in_slurmd_and_slurmstepd_are_logged_and_survived", funcs) else { return };
        // Cluster::start proves that slurmd and slurmctld mapped our files.
        let c = Cluster::start(cfg);
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

    fn panic_in_node_config_load_fails_cleanly(bed) {
        let Some(cfg) = config(bed, "panic_in_node_config_load_fails_cleanly", "node_config_load") else { return };
        let g = Cluster::slurmd_g(&cfg);
        // The panic line below comes only from our file; this proves it
        // was the one loaded, and by the loader's own list too.
        g.assert_ours_loaded(&["gres_gpu"]);
        let text = g.output.combined();
        assert!(
            text.contains("gres/gpu: node_config_load: internal error (panic): injected panic in node_config_load"),
            "slurmd -G output lacks the panic line:\n{text}"
        );
        assert!(text.contains("injected panic in node_config_load (at crates/slurm-abi/src/guard.rs:"), "the panic line does not name where it happened:\n{text}");
        assert_eq!(g.output.signal, None, "slurmd -G must not die of a signal:\n{text}");
    }
}
