//! Smoke tests on real Slurm daemons, on every release of the test bed
//! (`GRES_RS_SLURM`, see crates/test-harness): each test is a module of
//! `slurm_22_05`, `slurm_24_11`, `slurm_26_05`.
//!
//! Need root and the Debian slurm packages (tests/setup-debian.sh); without
//! them they print "skipped" (or fail when CI=true). Tests with our plugins
//! need `cargo build --workspace` first (tests/run.sh does it).

use gres_test_harness as harness;

use harness::*;
use std::collections::BTreeSet;

/// Value of `KEY=` in `env` output.
fn env_value(env_output: &str, key: &str) -> Option<String> {
    env_output.lines().find_map(|l| l.strip_prefix(&format!("{key}=")).map(|v| v.to_string()))
}

fn check_srun_env(c: &Cluster) {
    let one = c.srun(&["--gres=gpu:1", "env"]).expect_ok("srun --gres=gpu:1 env");
    let cvd = env_value(&one.stdout, "CUDA_VISIBLE_DEVICES").unwrap_or_else(|| panic!("no CUDA_VISIBLE_DEVICES:\n{one}"));
    assert_eq!(cvd.split(',').count(), 1, "one GPU requested, got CUDA_VISIBLE_DEVICES={cvd}");
    assert_eq!(env_value(&one.stdout, "SLURM_GPUS_ON_NODE").as_deref(), Some("1"), "{one}");
    assert_eq!(env_value(&one.stdout, "SLURM_STEP_GPUS"), Some(cvd.clone()), "{one}");

    let two = c.srun(&["--gres=gpu:2", "env"]).expect_ok("srun --gres=gpu:2 env");
    let cvd = env_value(&two.stdout, "CUDA_VISIBLE_DEVICES").unwrap_or_else(|| panic!("no CUDA_VISIBLE_DEVICES:\n{two}"));
    assert_eq!(cvd, "0,1", "{two}");
    assert_eq!(env_value(&two.stdout, "SLURM_GPUS_ON_NODE").as_deref(), Some("2"), "{two}");

    // salloc + srun inside the allocation.
    let sa = c.salloc(&["--gres=gpu:2"], &["srun", "printenv", "CUDA_VISIBLE_DEVICES"]).expect_ok("salloc --gres=gpu:2 srun printenv");
    assert_eq!(sa.stdout.trim(), "0,1", "{sa}");

    // No GPU requested: no GPU variables.
    let none = c.srun(&["env"]).expect_ok("srun env");
    assert_eq!(env_value(&none.stdout, "CUDA_VISIBLE_DEVICES"), None, "{none}");
}

fn concurrent_steps(cfg: ClusterConfig) {
    let c = Cluster::start(cfg);
    let job = c.sbatch(&["--gres=gpu:4", "-n3"], CONCURRENT_STEPS).expect_ok("batch job with 3 concurrent steps");
    c.wait_no_jobs(std::time::Duration::from_secs(30));
    let blocks = c.collect_dumps();
    let batch: Vec<&EnvBlock> = blocks.iter().filter(|b| b.tag == "batch").collect();
    assert_eq!(batch.len(), 1, "{}", job.output);
    assert_eq!(batch[0].get("SLURM_JOB_GPUS"), Some("0,1,2,3"), "{}", job.output);
    assert_eq!(batch[0].get("CUDA_VISIBLE_DEVICES"), Some("0,1,2,3"), "{}", job.output);
    assert_eq!(batch[0].get("SLURM_GPUS_ON_NODE"), Some("4"), "{}", job.output);
    let steps: Vec<&EnvBlock> = blocks.iter().filter(|b| b.tag == "step").collect();
    assert_eq!(steps.len(), 3, "{}", job.output);
    let mut cvd = BTreeSet::new();
    let mut ssg = BTreeSet::new();
    for s in &steps {
        let v = s.get("CUDA_VISIBLE_DEVICES").unwrap_or_else(|| panic!("step without CUDA_VISIBLE_DEVICES: {s:?}"));
        assert_eq!(v.split(',').count(), 1, "each step asked for one GPU: {s:?}");
        assert_eq!(s.get("SLURM_GPUS_ON_NODE"), Some("1"), "{s:?}");
        cvd.insert(v.to_string());
        ssg.insert(s.get("SLURM_STEP_GPUS").unwrap_or("").to_string());
    }
    assert_eq!(cvd.len(), 3, "steps must get distinct GPUs: {cvd:?}\n{}", job.output);
    assert_eq!(ssg.len(), 3, "steps must get distinct SLURM_STEP_GPUS: {ssg:?}\n{}", job.output);
    eprintln!("{}", job.output);
}

per_release! {
    fn stock_srun_sees_cuda_visible_devices(bed) {
        let c = Cluster::start(bed.config(PluginSet::Stock, 4));
        assert_eq!(c.node_field("Gres").as_deref(), Some("gpu:4"));
        check_srun_env(&c);
    }

    fn ours_srun_sees_cuda_visible_devices_and_ours_are_loaded(bed) {
        let Some(cfg) = bed.ours_config(bed.config(PluginSet::Ours, 4), "ours_srun_sees_cuda_visible_devices_and_ours_are_loaded") else { return };
        let c = Cluster::start(cfg);
        let gres = ["gres_gpu", "gres_mps", "gres_shard"];
        c.assert_ours_loaded(&gres);
        // slurmctld loads a GRES plugin only for GRES some node reports.
        c.assert_ours_loaded_in(Daemon::Slurmctld, &["gres_gpu"]);
        c.assert_stepd_ours_loaded(&gres, &["--gres=gpu:1"]);
        assert_eq!(c.node_field("Gres").as_deref(), Some("gpu:4"));
        check_srun_env(&c);
    }

    /// gpu_nvml.so is only loaded when slurmd picks gpu/nvml, i.e. with
    /// `AutoDetect=nvml` and a loadable libnvidia-ml.so (a stub here, whose
    /// nvmlInit fails: the plugin must then report no GPUs and gres.conf wins).
    /// Where slurmd unloads the gpu plugin after loading its config
    /// (`StockQuirks::slurmd_keeps_gpu_plugin`, 26.05), slurmstepd's maps prove it.
    fn ours_gpu_nvml_is_loaded_with_autodetect_nvml(bed) {
        let mut cfg = bed.config(PluginSet::Ours, 4);
        cfg.nvml_stub = true;
        cfg.gres_conf = format!("AutoDetect=nvml\n{}", gpu_gres_line(4));
        let Some(cfg) = bed.ours_config(cfg, "ours_gpu_nvml_is_loaded_with_autodetect_nvml") else { return };

        let g = Cluster::slurmd_g(&cfg);
        g.assert_ours_loaded(&["gres_gpu", "gpu_nvml"]);
        assert!(g.output.ok(), "slurmd -G failed:\n{}", g.output);
        assert_eq!(g.gres_lines().len(), 4, "expected 4 GPUs from gres.conf:\n{}", g.output);

        let c = Cluster::start(cfg);
        if bed.behaviour.slurmd_keeps_gpu_plugin {
            c.assert_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard", "gpu_nvml"]);
        } else {
            c.assert_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard"]);
            c.assert_stepd_ours_loaded(&["gres_gpu", "gpu_nvml"], &["--gres=gpu:1"]);
        }
        let out = c.srun(&["--gres=gpu:1", "env"]).expect_ok("srun with gpu/nvml selected");
        assert!(env_value(&out.stdout, "CUDA_VISIBLE_DEVICES").is_some(), "{out}");
    }

    /// gres/gpu's `fini` unloads slurmd's gpu plugin (stock's
    /// `gpu_plugin_fini()`), whose own `fini` then logs its unloading: at
    /// slurmd's shutdown with gpu/generic (or, where slurmd unloads the gpu
    /// plugin after its configuration, 25.11 on, already then).  slurmd's
    /// log with ours has stock's lines.
    fn gpu_plugin_unloaded_with_gres_gpu(bed) {
        let unloading = |cfg: ClusterConfig| {
            let ours = cfg.plugins != PluginSet::Stock;
            let mut c = Cluster::start(ClusterConfig { slurmd_debug: "debug".into(), ..cfg });
            if ours {
                c.assert_ours_loaded(&["gres_gpu"]);
            }
            assert!(c.terminate_slurmd().is_some(), "slurmd did not stop");
            // Without the time stamp.
            let log = c.log(Daemon::Slurmd);
            log.lines().filter(|l| l.contains("unloading GPU")).map(|l| l.split_once("] ").map_or(l, |(_, r)| r).to_string()).collect::<Vec<_>>()
        };
        let want = unloading(bed.config(PluginSet::Stock, 2));
        let Some(ours) = bed.ours_config(bed.config(PluginSet::Ours, 2), "gpu_plugin_unloaded_with_gres_gpu") else { return };
        let got = unloading(ours);
        eprintln!("gpu_plugin_unloaded_with_gres_gpu [Slurm {}]: {want:?}", bed.version);
        assert!(!want.is_empty(), "stock logged no gpu plugin unloading");
        assert_eq!(got, want);
    }

    /// `slurmd -G` prints the same GRES configuration with both plugin sets.
    fn slurmd_g_same_config_stock_and_ours(bed) {
        let stock = Cluster::slurmd_g(&bed.config(PluginSet::Stock, 4));
        assert!(stock.output.ok(), "{}", stock.output);
        assert_eq!(stock.gres_lines().len(), 4, "{}", stock.output);
        // The release's log prefix (StockQuirks::log_prefix) is what comes off.
        for l in stock.gres_lines() {
            assert!(l.starts_with("Gres Name="), "{:?} prefix not stripped: {l:?}", bed.behaviour.log_prefix);
        }
        let Some(cfg) = bed.ours_config(bed.config(PluginSet::Ours, 4), "slurmd_g_same_config_stock_and_ours") else { return };
        let ours = Cluster::slurmd_g(&cfg);
        ours.assert_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard"]);
        assert!(ours.output.ok(), "{}", ours.output);
        assert_eq!(stock.gres_lines(), ours.gres_lines());
    }

    fn stock_concurrent_exclusive_steps_get_distinct_gpus(bed) {
        concurrent_steps(bed.config(PluginSet::Stock, 4));
    }

    fn ours_concurrent_exclusive_steps_get_distinct_gpus(bed) {
        let Some(cfg) = bed.ours_config(bed.config(PluginSet::Ours, 4), "ours_concurrent_exclusive_steps_get_distinct_gpus") else { return };
        concurrent_steps(cfg);
    }

    /// The same GPU scenario on stock and on ours gives the same GPU
    /// variables in tasks, batch scripts, prolog and epilog.
    fn differential_gpu_basic(bed) {
        let mut cfg = ClusterConfig::gpus(PluginSet::Stock, 4);
        cfg.dump_prolog_epilog_env = true;
        let scn = Scenario::new("gpu-basic", cfg)
            .run(Run::slurmd_g("slurmd-g"))
            .run(Run::srun("gpu1", &["--gres=gpu:1"]))
            .run(Run::srun("gpu2", &["--gres=gpu:2"]))
            .run(Run::srun("two-tasks", &["-n2", "--gres=gpu:3"]))
            .run(Run::srun("gpus-per-task", &["-n2", "--gpus-per-task=1"]))
            .run(Run::srun("no-gpu", &[]))
            .run(Run::srun("too-many", &["--gres=gpu:5", "--immediate=5"]))
            .run(Run::sbatch("batch-concurrent", &["--gres=gpu:4", "-n3"], CONCURRENT_STEPS).unordered());
        bed.differential(&scn, "differential_gpu_basic");
    }
}

// gres/mps and gres/shard scenarios, with their documented deviations from
// the stock plugins, are in tests/sharing.rs.
