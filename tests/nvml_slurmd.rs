//! Our gpu_nvml.so in a real slurmd: `slurmd -G` with `AutoDetect=nvml`
//! on the NVML stand-in (reachable as `libnvidia-ml.so`, which is what
//! makes slurmd choose gpu/nvml) must report the same GPUs as the stock
//! plugins given the same node in `fake_gpus.conf`.
//!
//! Debian ships no gpu_nvml.so, so the gpu/nvml plugin slurmd loads is
//! always ours; gres/gpu is Debian's or ours.  Needs root,
//! the Debian Slurm packages and `cargo build --workspace` (see
//! crates/test-harness); skipped otherwise.

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;

/// The node of fixtures/slurmd_node.conf as stock fake_gpus.conf lines:
/// `type|cpu count|cpus|links|file|unique id|flags`.
const FAKE_GPUS: &str = "\
nvidia_h100_80gb_hbm3|2|0|-1,2,0|/dev/nvidia0|(null)|nvidia_gpu_env
nvidia_h100_80gb_hbm3|2|1|2,-1,0|/dev/nvidia1|(null)|nvidia_gpu_env
nvidia_a100_1g.10gb|2|0-1|-1,0|/dev/nvidia2,/dev/nvidia-caps/nvidia-cap336,/dev/nvidia-caps/nvidia-cap337|MIG-3f9a1b2c-0d4e-5f6a-7b8c-9d0e1f2a3b4c|nvidia_gpu_env
nvidia_a100_1g.10gb|2|0-1|0,-1|/dev/nvidia2,/dev/nvidia-caps/nvidia-cap345,/dev/nvidia-caps/nvidia-cap346|MIG-4f9a1b2c-0d4e-5f6a-7b8c-9d0e1f2a3b4c|nvidia_gpu_env
";

fn node(plugins: PluginSet) -> ClusterConfig {
    // Typed, so that slurmd keeps the detected types (an untyped Gres=
    // makes it drop them) and the lines show them.
    let gres = "gpu:nvidia_h100_80gb_hbm3:2,gpu:nvidia_a100_1g.10gb:2";
    let mut c = ClusterConfig::gpus(plugins, 0).with_cpus(1, 2, 1).with_gres(gres, "AutoDetect=nvml\n");
    c.debug_gres = true;
    c.slurmd_debug = "debug2".into();
    // gres/gpu and gpu/nvml alone: with mps or shard in GresTypes the stock
    // sharing plugins make a GPU of each MIG file (docs/deviations.md,
    // MPS/shard 6; tests/nvml_jobs.rs covers MIG with them loaded).
    c.gres_types = "gpu".into();
    c
}

/// The GPU lines of `slurmd -G`: the final merged list and the
/// `Gres Name=` summary, without log prefixes.
fn gpu_lines(g: &SlurmdG) -> Vec<String> {
    g.normalized()
        .lines()
        .filter(|l| l.contains("GRES[gpu]") || l.contains("Gres Name=gpu"))
        .map(|l| {
            let l = l.trim_start_matches("slurmd: ");
            let l = l.split_once(": ").filter(|(lvl, _)| !lvl.contains(' ')).map(|(_, rest)| rest).unwrap_or(l);
            l.trim().to_string()
        })
        .collect()
}

#[test]
fn autodetect_nvml_matches_fake_gpus_conf() {
    if !require_slurm("autodetect_nvml_matches_fake_gpus_conf") {
        return;
    }
    let lib_dir = standin::library_dir();

    let mut stock = node(PluginSet::Stock);
    stock.fake_gpus_conf = Some(FAKE_GPUS.into());
    let want = Cluster::slurmd_g(&stock);

    let want_lines = gpu_lines(&want);
    assert!(!want_lines.is_empty(), "stock slurmd -G printed no GPU lines:\n{}", want.normalized());

    // Our gpu_nvml.so under stock gres_gpu.so, then all of ours.
    for (set, loaded) in [(PluginSet::OursOnly(vec!["gpu_nvml".into()]), vec!["gpu_nvml"]), (PluginSet::Ours, vec!["gpu_nvml", "gres_gpu"])] {
        let label = set.label();
        // The test build: it reads GRES_RS_MIG_MINORS.
        let mut ours = node(set).with_test_build();
        ours.slurmd_env = vec![
            ("LD_LIBRARY_PATH".into(), lib_dir.to_string_lossy().into_owned()),
            ("GRES_RS_NVML_FIXTURE".into(), standin::fixture("slurmd_node.conf").to_string_lossy().into_owned()),
            ("GRES_RS_MIG_MINORS".into(), standin::fixture("mig-minors").to_string_lossy().into_owned()),
        ];
        let got = Cluster::slurmd_g(&ours);
        got.assert_ours_loaded(&loaded);
        let got_lines = gpu_lines(&got);
        assert_eq!(
            got_lines,
            want_lines,
            "{label}\n---- stock (fake_gpus.conf) ----\n{}\n---- {label} (AutoDetect=nvml) ----\n{}",
            want.normalized(),
            got.normalized()
        );
        assert!(got.normalized().contains("gpu/nvml: 3 GPU system device(s) detected"), "{label}\n{}", got.normalized());
        assert!(got_lines.iter().any(|l| l.contains("Type=nvidia_a100_1g.10gb")), "{got_lines:#?}");
    }
}

#[test]
fn no_driver_keeps_configured_gpus() {
    if !require_slurm("no_driver_keeps_configured_gpus") {
        return;
    }
    let conf = "AutoDetect=nvml\nName=gpu File={DEV}/nvidia[0-1]\n";
    let mut stock = ClusterConfig::gpus(PluginSet::Stock, 2).with_cpus(1, 2, 1).with_gres("gpu:2", conf);
    stock.debug_gres = true;
    let want = Cluster::slurmd_g(&stock);

    // The stand-in without a fixture fails nvmlInit as without a driver.
    let mut ours = stock.clone().with_plugins(PluginSet::OursOnly(vec!["gpu_nvml".into()]));
    ours.slurmd_env = vec![("LD_LIBRARY_PATH".into(), standin::library_dir().to_string_lossy().into_owned())];
    let got = Cluster::slurmd_g(&ours);
    got.assert_ours_loaded(&["gpu_nvml"]);

    let (want_lines, got_lines) = (gpu_lines(&want), gpu_lines(&got));
    assert_eq!(want_lines.len(), 2, "{}", want.normalized());
    assert_eq!(got_lines, want_lines, "\n---- stock ----\n{}\n---- ours ----\n{}", want.normalized(), got.normalized());
    assert!(got.normalized().contains("Failed to initialize NVML: Driver Not Loaded"), "{}", got.normalized());
}

/// `srun --gpu-freq`: slurmstepd hands the step's GPUs to our gpu_nvml.so,
/// which sets their application clocks and puts the defaults back when the
/// step ends (seen in the stand-in's call log).
#[test]
fn gpu_freq_sets_and_resets_step_clocks() {
    if !require_slurm("gpu_freq_sets_and_resets_step_clocks") {
        return;
    }
    let calls = standin::scratch_dir().join("cluster-calls.log");
    let _ = std::fs::remove_file(&calls);
    let mut c =
        ClusterConfig::gpus(PluginSet::OursOnly(vec!["gpu_nvml".into()]), 0).with_cpus(1, 2, 1).with_gres("gpu:nvidia_h100_80gb_hbm3:2", "AutoDetect=nvml\n");
    c.slurmd_env = vec![
        ("LD_LIBRARY_PATH".into(), standin::library_dir().to_string_lossy().into_owned()),
        ("GRES_RS_NVML_FIXTURE".into(), standin::fixture("h100x2.conf").to_string_lossy().into_owned()),
        ("GRES_RS_NVML_CALLS".into(), calls.to_string_lossy().into_owned()),
    ];
    let cluster = Cluster::start(c);
    cluster.assert_ours_loaded(&["gpu_nvml"]);

    let out = cluster.srun(&["--gres=gpu:2", "--gpu-freq=low,memory=high,verbose", "true"]);
    assert!(out.ok(), "{out}\n{}", cluster.log_tails(40));
    // `verbose`: the first GPU's clocks on the step's stderr, as Slurm does.
    assert!(out.stderr.contains("GpuFreq=memory_freq:2619,graphics_freq:345"), "{out}");
    let log = std::fs::read_to_string(&calls).unwrap_or_default();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("ApplicationsClocks")).collect();
    assert_eq!(
        lines,
        vec![
            "nvmlDeviceSetApplicationsClocks gpu0 2619 345",
            "nvmlDeviceSetApplicationsClocks gpu1 2619 345",
            "nvmlDeviceResetApplicationsClocks gpu0",
            "nvmlDeviceResetApplicationsClocks gpu1",
        ],
        "calls:\n{log}\nsrun:\n{out}\n{}",
        cluster.log_tails(40)
    );
    let _ = std::fs::remove_file(&calls);
}
