//! gres/gpu on real Slurm, stock plugin and ours side by side: every
//! scenario runs on a cluster with the stock plugins and on one with ours
//! (the harness proves our files were the ones slurmd, slurmctld and
//! slurmstepd mapped), and every GPU variable of every task, batch script,
//! salloc shell, Prolog and Epilog is compared field by field, as are the
//! `slurmd -G` lines and the `--gpu-bind=verbose` lines.
//!
//! Scenarios sharing a configuration share one cluster pair.
//! Needs root, the Debian Slurm packages and `cargo build --workspace`.

use gres_test_harness as harness;
use gres_test_harness::gpu as gpu_common;

use gpu_common::*;
use harness::testbed::TestBed;
use harness::*;

/// Runs `scn` on both plugin sets, compares environments, outcomes,
/// `slurmd -G` lines and verbose lines, and checks that every run not in
/// `expected_failures` succeeded on the stock side (so that a scenario
/// cannot pass by failing the same way twice).
/// `None`: ours was skipped on this release (no build; printed).
#[track_caller]
fn check(bed: &TestBed, scn: &Scenario, expected_failures: &[&str]) -> Option<(ScenarioResult, ScenarioResult)> {
    let (stock, ours) = bed.differential(scn, &scn.name)?;
    let verbose = verbose_lines(&stock);
    if verbose.values().any(|v| !v.is_empty()) {
        eprintln!("--gpu-bind=verbose lines (stock): {verbose:#?}");
    }
    let mut diffs = compare_verbose(&stock, &ours);
    for r in &stock.runs {
        let want_ok = !expected_failures.contains(&r.label.as_str());
        if r.ok != want_ok {
            diffs.push(format!(
                "[{}] stock run ended {} but {} was expected (the scenario would prove nothing):\n{}",
                r.label,
                r.outcome,
                if want_ok { "success" } else { "a failure" },
                r.output
            ));
        }
    }
    assert_no_diffs(&scn.name, &diffs);
    Some((stock, ours))
}

/// The concurrent `srun --exclusive` steps of run `label` got one GPU each,
/// all different.
#[track_caller]
fn assert_distinct_step_gpus(r: &ScenarioResult, label: &str) {
    let steps: Vec<&EnvBlock> = r.run(label).blocks.iter().filter(|b| b.tag == "step").collect();
    let gpus: std::collections::BTreeSet<&str> = steps.iter().filter_map(|b| b.get("SLURM_STEP_GPUS")).collect();
    assert!(
        steps.len() == 3 && gpus.len() == 3 && gpus.iter().all(|g| !g.contains(',')),
        "{} [{label}]: steps must get one distinct GPU each: {gpus:?}",
        r.plugins.label()
    );
}

/// `--gres=none` (and friends) inside a job that has GPUs.
const GRES_NONE_STEPS: &str = r#"#!/bin/bash
"$GRES_RS_DUMP_ENV" batch
srun -n1 --gres=none "$GRES_RS_DUMP_ENV" none
srun -n1 "$GRES_RS_DUMP_ENV" inherit
srun -n1 --gres=gpu:1 "$GRES_RS_DUMP_ENV" one
srun -n1 --gpus=1 "$GRES_RS_DUMP_ENV" gpus-one
srun -n1 --gres=gpu:0 "$GRES_RS_DUMP_ENV" zero
"#;

const SALLOC_CMD: &str = r#""$GRES_RS_DUMP_ENV" salloc-shell >/dev/null
srun -n1 "$GRES_RS_DUMP_ENV" salloc-step
srun -n1 --gres=none "$GRES_RS_DUMP_ENV" salloc-none"#;

/// Two sockets of two cores, four GPUs (two per socket, with Cores),
/// memory as a consumable resource; Prolog and Epilog dump their
/// environment.
fn sockets_config() -> ClusterConfig {
    let mut c = ClusterConfig::gpus(PluginSet::Stock, 4).with_cpus(2, 2, 1);
    c.gres_conf = "Name=gpu File={DEV}/nvidia[0-1] Cores=0-1\n\
                   Name=gpu File={DEV}/nvidia[2-3] Cores=2-3\n"
        .into();
    c.dump_prolog_epilog_env = true;
    c.select_type_parameters = "CR_Core_Memory".into();
    c.extra_slurm_conf = vec!["DefMemPerCPU=100".into()];
    c
}

per_release! {
    /// Ranges, the GPU request options, binding, steps, salloc, --gres=none,
    /// Prolog and Epilog on one two-socket node.
    fn gpu_requests_and_binding(bed) {
        let scn = Scenario::new("requests-and-binding", sockets_config())
            .run(Run::slurmd_g("conf"))
            .run(Run::srun("gres1", &["--gres=gpu:1"]))
            .run(Run::srun("gres3", &["--gres=gpu:3"]))
            .run(Run::srun("gres3-two-tasks", &["-n2", "--gres=gpu:3"]))
            .run(Run::srun("gpus2", &["--gpus=2"]))
            .run(Run::srun("gpus-per-node", &["--gpus-per-node=2"]))
            .run(Run::srun("per-task-3", &["-n3", "--gpus-per-task=1"]))
            .run(Run::srun("per-task-2x2", &["-n2", "--gpus-per-task=2"]))
            .run(Run::srun("per-socket", &["-n2", "--sockets-per-node=2", "--ntasks-per-socket=1", "--gpus-per-socket=1"]))
            .run(Run::srun("cpus-per-gpu", &["--gpus=2", "--cpus-per-gpu=2"]))
            .run(Run::srun("mem-per-gpu", &["--gpus=2", "--mem-per-gpu=200"]))
            .run(Run::srun("bind-closest", &["-n2", "--gpus=4", "--gpu-bind=closest"]))
            .run(Run::srun("bind-single", &["-n4", "--gpus=2", "--gpu-bind=single:2"]))
            .run(Run::srun("bind-map", &["-n3", "--gpus=4", "--gpu-bind=map_gpu:3,1,0"]))
            .run(Run::srun("bind-mask", &["-n2", "--gpus=4", "--gpu-bind=mask_gpu:0x3,0xC"]))
            .run(Run::srun("verbose-map", &["-n2", "--gpus=2", "--gpu-bind=verbose,map_gpu:1,0"]))
            .run(Run::srun("verbose-single", &["-n3", "--gpus=3", "--gpu-bind=verbose,single:1"]))
            .run(Run::srun("verbose-closest", &["-n2", "--gpus=4", "--gpu-bind=verbose,closest"]))
            .run(Run::srun("verbose-mask", &["-n2", "--gpus=3", "--gpu-bind=verbose,mask_gpu:0x5,0x2"]))
            .run(Run::srun("per-task-single", &["-n2", "--gpus-per-task=1", "--gpu-bind=verbose,single:1"]))
            .run(Run::srun("ntasks-per-gpu", &["--gpus=2", "--ntasks-per-gpu=1"]))
            .run(Run::srun("enforce-binding", &["--gres=gpu:1", "--gres-flags=enforce-binding", "-c2"]))
            .run(Run::srun("no-gpu", &[]))
            .run(Run::srun("too-many", &["--gres=gpu:5", "--immediate=5"]))
            .run(Run::sbatch("concurrent", &["--gres=gpu:4", "-n3"], CONCURRENT_STEPS).unordered())
            .run(Run::sbatch("gres-none", &["--gres=gpu:2"], GRES_NONE_STEPS))
            .run(Run::sbatch("batch-per-task", &["-n2", "--gpus-per-task=1"], "\"$GRES_RS_DUMP_ENV\" batch\nsrun \"$GRES_RS_DUMP_ENV\" step\n"))
            .run(Run::salloc("salloc", &["--gres=gpu:2"], &["/bin/sh", "-c", SALLOC_CMD]));
        let Some((_, ours)) = check(bed, &scn, &["too-many"]) else { return };
        assert_distinct_step_gpus(&ours, "concurrent");
    }

    /// Two Types, Links, a File list given out of order, typed requests.
    fn gpu_types_links_file_lists(bed) {
        let mut cfg = ClusterConfig::gpus(PluginSet::Stock, 4);
        cfg.node_gres = Some("gpu:tesla:2,gpu:k80:2".into());
        cfg.gres_conf = "Name=gpu Type=tesla File={DEV}/nvidia0 Links=-1,2,0,0\n\
                         Name=gpu Type=tesla File={DEV}/nvidia1 Links=2,-1,0,0\n\
                         Name=gpu Type=k80 File={DEV}/nvidia3,{DEV}/nvidia2\n"
            .into();
        cfg.dump_prolog_epilog_env = true;
        let scn = Scenario::new("types-links-lists", cfg)
            .run(Run::slurmd_g("conf"))
            .run(Run::srun("tesla1", &["--gres=gpu:tesla:1"]))
            .run(Run::srun("k80-1", &["--gres=gpu:k80:1"]))
            .run(Run::srun("k80-2", &["--gres=gpu:k80:2"]))
            .run(Run::srun("mixed", &["--gres=gpu:tesla:1,gpu:k80:1"]))
            .run(Run::srun("untyped3", &["--gres=gpu:3"]))
            .run(Run::srun("gpus-k80", &["--gpus=k80:1"]))
            .run(Run::srun("per-node-tesla", &["--gpus-per-node=tesla:2"]))
            .run(Run::srun("per-task-tesla", &["-n2", "--gpus-per-task=tesla:1"]))
            .run(Run::srun("no-such-type", &["--gres=gpu:a100:1", "--immediate=5"]))
            .run(Run::sbatch("batch-k80", &["--gres=gpu:k80:2"], "\"$GRES_RS_DUMP_ENV\" batch\nsrun --gres=gpu:k80:1 \"$GRES_RS_DUMP_ENV\" step\n"));
        check(bed, &scn, &["no-such-type"]);
    }

    /// A GPU made of several device files (`MultipleFiles`).
    fn gpu_multiple_files(bed) {
        let mut cfg = ClusterConfig::gpus(PluginSet::Stock, 4);
        cfg.node_gres = Some("gpu:2".into());
        // gres/gpu alone: with mps or shard in GresTypes the stock sharing
        // plugins make a GPU of each file (docs/deviations.md, MPS/shard 6).
        cfg.gres_types = "gpu".into();
        cfg.gres_conf = "Name=gpu MultipleFiles={DEV}/nvidia0,{DEV}/nvidia1\n\
                         Name=gpu MultipleFiles={DEV}/nvidia2,{DEV}/nvidia3\n"
            .into();
        cfg.dump_prolog_epilog_env = true;
        let scn = Scenario::new("multiple-files", cfg)
            .run(Run::slurmd_g("conf"))
            .run(Run::srun("one", &["--gres=gpu:1"]))
            .run(Run::srun("two", &["--gres=gpu:2"]))
            .run(Run::srun("verbose-map", &["-n2", "--gpus=2", "--gpu-bind=verbose,map_gpu:1,0"]));
        check(bed, &scn, &[]);
    }

    /// One cluster pair per env flag (the flags of one node must agree, so
    /// they cannot share a gres.conf).
    fn gpu_env_flags(bed) {
        for flags in ["nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env", "no_gpu_env", "amd_gpu_env,intel_gpu_env"] {
            let mut cfg = ClusterConfig::gpus(PluginSet::Stock, 2);
            cfg.gres_conf = format!("Name=gpu File={{DEV}}/nvidia[0-1] Flags={flags}\n");
            cfg.dump_prolog_epilog_env = true;
            let scn = Scenario::new(&format!("flags-{flags}"), cfg)
                .run(Run::slurmd_g("conf"))
                .run(Run::srun("bound", &["-n2", "--gpus=2", "--gpu-bind=verbose,map_gpu:1,0"]))
                .run(Run::sbatch(
                    "batch",
                    &["--gres=gpu:2"],
                    "\"$GRES_RS_DUMP_ENV\" batch\nsrun --gres=gpu:1 \"$GRES_RS_DUMP_ENV\" step\n\
                     srun --gres=none \"$GRES_RS_DUMP_ENV\" none\n",
                ));
            check(bed, &scn, &[]);
        }
    }

    /// `AutoDetect=off`: the configured GPUs as they are.
    fn gpu_autodetect_off(bed) {
        let mut cfg = ClusterConfig::gpus(PluginSet::Stock, 4);
        cfg.gres_conf = "AutoDetect=off\nName=gpu File={DEV}/nvidia[0-3]\n".into();
        let scn = Scenario::new("autodetect-off", cfg)
            .run(Run::slurmd_g("conf"))
            .run(Run::srun("two", &["--gres=gpu:2"]))
            .run(Run::srun("per-task", &["-n2", "--gpus-per-task=2"]));
        check(bed, &scn, &[]);
    }

    /// `Flags=CountOnly`: slurmd does not load a plugin for the GRES at all,
    /// so neither gres_gpu.so may be mapped, while our gres_mps/gres_shard
    /// are; jobs get the same (GPU-variable-free) environment.
    fn gpu_count_only(bed) {
        let mut cfg = ClusterConfig::gpus(PluginSet::Stock, 2);
        cfg.gres_conf = "Name=gpu File={DEV}/nvidia[0-1] Flags=CountOnly\n".into();
        cfg.dump_prolog_epilog_env = true;

        // Proof of loading, by the dynamic loader's own list.
        let mut g = bed.on(cfg.clone());
        g.plugins = PluginSet::Stock;
        let stock_g = Cluster::slurmd_g(&g);
        g.plugins = PluginSet::Ours;
        let Some(g) = bed.ours_config(g, "gpu_count_only") else { return };
        let ours_g = Cluster::slurmd_g(&g);
        ours_g.assert_ours_loaded(&["gres_mps", "gres_shard"]);
        for (side, run) in [("stock", &stock_g), ("ours", &ours_g)] {
            let gpu: Vec<&String> = run.loaded_files.iter().filter(|f| f.ends_with("/gres_gpu.so")).collect();
            assert!(gpu.is_empty(), "{side}: CountOnly GPU plugin file loaded: {gpu:?}");
        }
        assert_no_diffs("count-only slurmd -G", &compare_g(&report(&stock_g), &report(&ours_g), true));

        // Jobs. Our gres_gpu.so is never loaded here, so the usual proofs of
        // loading are replaced by the one above.
        cfg.verify_ours_loaded = false;
        let mut scn = Scenario::new("count-only", cfg).run(Run::srun("one", &["--gres=gpu:1"])).run(Run::sbatch(
            "batch",
            &["--gres=gpu:2"],
            "\"$GRES_RS_DUMP_ENV\" batch\nsrun --gres=gpu:1 \"$GRES_RS_DUMP_ENV\" step\n",
        ));
        scn.stepd_proof_args = None;
        check(bed, &scn, &[]);
    }

    /// `task/cgroup` with `ConstrainDevices=yes`: devices are numbered from 0
    /// inside the job's and step's cgroup (local device index), while
    /// `SLURM_*_GPUS`, Prolog and Epilog keep the node's numbers. Skipped when
    /// the machine cannot run task/cgroup (the stock cluster's first run fails).
    fn gpu_constrained_devices_local_index(bed) {
        let mut cfg = sockets_config();
        cfg.extra_slurm_conf = vec![
            // Later settings win: replaces the harness's task/none.
            "TaskPlugin=task/cgroup".into(),
            // Job ids name the cgroup directories: keep them apart from other
            // clusters on this machine.
            format!("FirstJobId={}", 100_000 + (std::process::id() % 100_000) * 10),
        ];
        cfg.select_type_parameters = "CR_Core".into();
        cfg.cgroup_conf = Some("CgroupPlugin=cgroup/v1\nConstrainDevices=yes\n".into());
        let scn = Scenario::new("constrained-devices", cfg)
            .run(Run::srun("two", &["--gres=gpu:2"]))
            .run(Run::srun("per-task", &["-n2", "--gpus-per-task=1"]))
            .run(Run::srun("verbose-map", &["-n2", "--gpus=3", "--gpu-bind=verbose,map_gpu:2,0"]))
            .run(Run::sbatch("concurrent", &["--gres=gpu:4", "-n3"], CONCURRENT_STEPS).unordered());
        let mut scn = scn;
        scn.config = bed.on(scn.config);
        let stock = run_scenario(&scn, PluginSet::Stock);
        if !stock.runs[0].ok {
            eprintln!("{}", stock.runs[0].output);
            harness::ledger::skipped("gpu_constrained_devices_local_index", "task/cgroup does not work here");
            return;
        }
        let mut ours_cfg = scn.config.clone();
        ours_cfg.plugins = PluginSet::Ours;
        let Some(ours_cfg) = bed.ours_config(ours_cfg, "gpu_constrained_devices_local_index") else { return };
        scn.config = ours_cfg;
        let ours = run_scenario(&scn, PluginSet::Ours);
        eprintln!("{}{}", stock.report(), ours.report());
        let mut diffs = compare_envs(&stock, &ours);
        diffs.extend(compare_verbose(&stock, &ours));
        for r in &stock.runs {
            if !r.ok {
                diffs.push(format!("[{}] stock run failed: {}\n{}", r.label, r.outcome, r.output));
            }
        }
        assert_no_diffs(&scn.name, &diffs);
        assert_distinct_step_gpus(&ours, "concurrent");
    }

    /// `--gpu-bind=verbose` with the task's stderr on a full device: the
    /// verbose line cannot be written, and each task still gets its own GPU,
    /// as with the stock plugin's `fprintf(stderr, ...)`.  (`--error` with
    /// `%u` makes slurmstepd open the file for the task itself, so fd 2 of the
    /// task is `/dev/full`, through a link named after the job's user.)
    fn verbose_line_on_a_full_stderr(bed) {
        let user = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| "root".into());
        let script = "ls -l /proc/self/fd/2 | grep -q -- '-> /dev/full' && echo task$SLURM_PROCID=$CUDA_VISIBLE_DEVICES";
        for plugins in [PluginSet::Stock, PluginSet::Ours] {
            let cfg = bed.config(plugins.clone(), 2);
            let cfg = if plugins == PluginSet::Stock {
                cfg
            } else {
                let Some(cfg) = bed.ours_config(cfg, "verbose_line_on_a_full_stderr") else { return };
                cfg
            };
            let c = Cluster::start(cfg);
            // In the cluster's dir: what a chroot's tasks see at the same path.
            let full = c.layout.root.join("full");
            std::fs::create_dir_all(&full).expect("dir for the link");
            std::os::unix::fs::symlink("/dev/full", full.join(&user)).expect("link to /dev/full");
            let error = format!("--error={}/%u", full.display());
            let out = c.srun(&["-n2", "--gpus=2", "--gpu-bind=verbose,single:1", &error, "sh", "-c", script]).expect_ok("srun with stderr on /dev/full");
            let mut lines: Vec<&str> = out.stdout.lines().collect();
            lines.sort();
            assert_eq!(lines, ["task0=0", "task1=1"], "{}: {out}", plugins.label());
            if plugins == PluginSet::Ours {
                c.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:1"]);
                let log = c.log(Daemon::Slurmd);
                assert!(!log.contains("internal error"), "{}", c.log_tails(20));
            }
        }
    }
}
