//! gres/gpu node-configuration merging, proven identical to the stock
//! plugin on real Slurm: `slurmd -G` with a `fake_gpus.conf` (Slurm's
//! stand-in for GPU detection) and a gres.conf, run with the stock plugins
//! and with ours; the final GRES lines, the GRES_PARSABLE lines and the
//! outcome must be the same, and so must the errors and warnings (up to
//! the plugin/function prefix of the log line). A last test starts a
//! cluster pair on a merged configuration and compares job environments.
//!
//! Each test runs on every release of the test bed (`per_release!`,
//! `GRES_RS_SLURM`).  Needs root, the Debian Slurm packages and `cargo
//! build --workspace`.

use gres_test_harness as harness;
use gres_test_harness::gpu as gpu_common;

use gpu_common::merge_cases::*;
use gpu_common::*;
use harness::*;

per_release! {
    /// Every merging case, `slurmd -G` on stock and on ours (our files
    /// proven loaded by `slurmd_g_pair`).
    fn merge_cases_match_stock(bed) {
        let _ = bed;
        let mut diffs = Vec::new();
        for case in MERGE_CASES {
            diffs.extend(g_case(case.name, &case.config(), true));
        }
        assert_no_diffs("slurmd -G merging", &diffs);
    }

    /// A merged configuration (devices reordered by Links, Cores from the
    /// "detected" GPUs) as jobs see it: the same variables on both sides.
    fn merged_config_in_jobs(bed) {
    // The "links-order" case, with CUDA_VISIBLE_DEVICES asked for by the
    // detected GPUs (gres.conf sets no env flag, so theirs are used).
    let case = MergeCase {
        name: "links-order-nvidia-env",
        node_gres: "gpu:4",
        gres_conf: "Name=gpu File={DEV}/nvidia[0-3]\n",
        fake_gpus: "(null)|4|0|0,0,0,-1|{DEV}/nvidia0|(null)|nvidia_gpu_env\n\
                    (null)|4|1|0,0,-1,0|{DEV}/nvidia1|(null)|nvidia_gpu_env\n\
                    (null)|4|2|0,-1,0,0|{DEV}/nvidia2|(null)|nvidia_gpu_env\n\
                    (null)|4|3|-1,0,0,0|{DEV}/nvidia3|(null)|nvidia_gpu_env\n",
        devices: 4,
    };
    // One core per socket: each GPU's Cores (one core) is then a whole
    // socket.  From 24.11 slurmctld drains a node whose GPU Cores split a
    // socket ("GRES core specification ... doesn't match socket
    // boundaries", src/interfaces/gres.c `_check_core_range_matches_sock`,
    // absent from 24.05.8), stock plugins and ours alike; this layout
    // runs the same merge on every release.
    let mut cfg = case.config().with_cpus(4, 1, 1);
    cfg.dump_prolog_epilog_env = true;
    let scn = Scenario::new("merged-links-order", cfg)
        .run(Run::slurmd_g("conf"))
        .run(Run::srun("one", &["--gres=gpu:1"]))
        .run(Run::srun("three", &["--gres=gpu:3"]))
        .run(Run::srun("per-task", &["-n2", "--gpus-per-task=1"]))
        .run(Run::srun("closest", &["-n4", "--gpus=4", "--gpu-bind=verbose,closest"]))
        .run(Run::srun("map", &["-n2", "--gpus=4", "--gpu-bind=verbose,map_gpu:3,0"]));
    let Some((stock, ours)) = bed.differential(&scn, "merged_config_in_jobs") else { return };
    eprintln!("verbose lines: {:#?}", verbose_lines(&stock));
    assert_no_diffs("merged config in jobs", &compare_verbose(&stock, &ours));
    }
}
