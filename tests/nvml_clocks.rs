//! The gpu/nvml plugin's other calls against the NVML stand-in:
//! `--gpu-freq` clock setting and reset, device count, energy, the
//! `fake_gpus.conf` mask test.  Needs `cc`; no GPU, no Slurm.  The plugin's
//! calls are made with the stand-in's [`standin::paths`] (the plugin
//! itself passes the system's places).

use gres_test_harness::standin;

use gres_core::host::StandaloneHost;
use gres_core::model::{Bitmap, GpuEnergy};
use slurm_gpu_gres::nvml::clocks::{set_step_freqs, StepFreqContext};
use slurm_gpu_gres::nvml::{self, Log};
use slurm_gpu_gres::plugins::gpu_nvml::GpuNvml;
use slurm_gpu_gres::plugins::GpuPlugin;
use standin::Standin;

/// The stand-in's calls of the clock setters, without the function name
/// prefix ("gpu1 2619 210").
fn sets(s: &Standin, f: &str) -> Vec<String> {
    s.calls().iter().filter_map(|c| c.strip_prefix(&format!("{f} ")).map(str::to_string)).collect()
}

const SET: &str = "nvmlDeviceSetApplicationsClocks";
const RESET: &str = "nvmlDeviceResetApplicationsClocks";

#[test]
fn step_sets_and_resets_its_gpus() {
    let s = Standin::new("h100x8.conf");
    let usable = Bitmap::from_indices(8, &[1, 3]);
    GpuNvml::step_freqs_init(&StandaloneHost::default(), Some(&usable), Some("gpu:low,memory=high"), &s.paths());
    assert_eq!(sets(&s, SET), vec!["gpu1 2619 210", "gpu3 2619 210"]);
    assert!(sets(&s, RESET).is_empty());
    GpuNvml::step_freqs_fini(&StandaloneHost::default(), &s.paths());
    assert_eq!(sets(&s, RESET), vec!["gpu1", "gpu3"]);
    // Nothing saved any more: a second fini does nothing.
    GpuNvml::step_freqs_fini(&StandaloneHost::default(), &s.paths());
    assert_eq!(sets(&s, RESET).len(), 2);
}

#[test]
fn step_numbers_round_up_and_levels_pick() {
    let s = Standin::new("h100x8.conf");
    let usable = Bitmap::from_indices(8, &[0]);
    // H100 fixture: graphics 1980, 1965, ..., 210 (119 clocks), memory 2619.
    for (spec, want) in [
        ("cpu:high;gpu:1501;mem:x", "gpu0 2619 1515"),
        ("gpu:medium,memory=medium", "gpu0 2619 1095"),
        ("gpu:highm1", "gpu0 2619 1965"),
        ("gpu:5000", "gpu0 2619 1980"),
        ("gpu:1", "gpu0 2619 210"),
        // GpuFreqDef's default (high,memory=high) fills in.
        ("gpu:verbose", "gpu0 2619 1980"),
    ] {
        let before = sets(&s, SET).len();
        GpuNvml::step_freqs_init(&StandaloneHost::default(), Some(&usable), Some(spec), &s.paths());
        GpuNvml::step_freqs_fini(&StandaloneHost::default(), &s.paths());
        assert_eq!(sets(&s, SET)[before..], [want.to_string()], "{spec}");
    }
    // No GPU part, no GPUs or no settings: nothing happens, nothing to reset.
    let calls = s.calls().len();
    GpuNvml::step_freqs_init(&StandaloneHost::default(), Some(&usable), Some("cpu:high"), &s.paths());
    GpuNvml::step_freqs_init(&StandaloneHost::default(), None, Some("gpu:low"), &s.paths());
    GpuNvml::step_freqs_init(&StandaloneHost::default(), Some(&usable), None, &s.paths());
    GpuNvml::step_freqs_fini(&StandaloneHost::default(), &s.paths());
    assert_eq!(s.calls().len(), calls);
}

#[test]
fn local_ids_and_outcome() {
    let s = Standin::new("h100x8.conf");
    let ctx = StepFreqContext { local_ids: true, debug_gres: true, ..Default::default() };
    let mut log = Log::default();
    let out = set_step_freqs(&Bitmap::from_indices(8, &[5, 6]), "high,verbose", &ctx, &s.paths(), &mut log);
    assert_eq!(out.gpus, vec![0, 1]);
    assert_eq!(out.set, 2);
    assert_eq!(out.stderr, vec!["GpuFreq=memory_freq:2619,graphics_freq:1980"]);
    assert_eq!(sets(&s, SET), vec!["gpu0 2619 1980", "gpu1 2619 1980"]);
    let msgs: Vec<&str> = log.lines().iter().map(|l| l.message.as_str()).collect();
    assert!(msgs.contains(&"GRES: Successfully set GPU[1] memory_freq:2619,graphics_freq:1980"), "{msgs:#?}");
    assert!(msgs.contains(&"Memory frequency before set: 2619"), "{msgs:#?}");
    assert!(msgs.contains(&"Graphics frequency before set: 1755"), "{msgs:#?}");
    assert!(msgs.contains(&"Graphics frequency after set: 1980"), "{msgs:#?}");

    // No GpuFreqDef and only a memory request: nothing to set.
    let ctx = StepFreqContext { freq_def: None, ..Default::default() };
    let out = set_step_freqs(&Bitmap::from_indices(8, &[0]), "memory=low", &ctx, &s.paths(), &mut Log::default());
    assert_eq!((out.gpus.len(), out.set), (0, 0));
}

/// From 23.02 slurmd has no built-in `GpuFreqDef`: a component neither
/// `--gpu-freq` nor slurm.conf gives keeps the GPU's current application
/// clock (22.05 fills in `high,memory=high`), with a GPU whose current
/// memory clock is not its highest to tell them apart.
#[test]
fn gpu_freq_def_unset_keeps_what_is_not_asked() {
    let gpu = "gpu\nname NVIDIA A100-PCIE-40GB\nminor 0\ncpus 0\nmem_clocks 3000,2000\ngfx_clocks 3000 1500,900,300\ngfx_clocks 2000 1200,800,200\napp_clocks 2000 800\n";
    let usable = Bitmap::from_indices(1, &[0]);
    let later = slurm_gpu_gres::ffi::behaviour::for_release(23, 2, 8).unwrap();
    for (host, spec, want) in [
        // 22.05: the built-in default pins memory at its highest.
        (StandaloneHost::default(), "gpu:low", "gpu0 3000 300"),
        (StandaloneHost::new(later), "gpu:low", "gpu0 2000 200"),
        (StandaloneHost::new(later), "gpu:memory=low", "gpu0 2000 800"),
        (StandaloneHost::new(later), "gpu:high,memory=high", "gpu0 3000 1500"),
    ] {
        let s = Standin::from_text(gpu);
        GpuNvml::step_freqs_init(&host, Some(&usable), Some(spec), &s.paths());
        GpuNvml::step_freqs_fini(&host, &s.paths());
        assert_eq!(sets(&s, SET), [want.to_string()], "{spec}");
        assert_eq!(sets(&s, RESET), ["gpu0".to_string()], "{spec}");
    }
}

/// 26.05: locked clocks, each set only when asked for (graphics among
/// those at the current memory clock when memory is not asked for), read
/// back from the clocks themselves, both locks released at the end.
#[test]
fn locked_clocks_from_26_05() {
    const SET_MEM: &str = "nvmlDeviceSetMemoryLockedClocks";
    const SET_GPU: &str = "nvmlDeviceSetGpuLockedClocks";
    let gpu = "gpu\nname NVIDIA H100 80GB HBM3\nminor 0\ncpus 0\nmem_clocks 3000,2000\ngfx_clocks 3000 1500,900,300\ngfx_clocks 2000 1200,800,200\napp_clocks 2000 800\n";
    let host = StandaloneHost::new(slurm_gpu_gres::ffi::behaviour::for_release(26, 5, 5).unwrap());
    let usable = Bitmap::from_indices(1, &[0]);
    for (spec, mem, gfx) in [
        ("gpu:450", vec![], vec!["gpu0 800 800"]),
        ("gpu:low,memory=high", vec!["gpu0 3000 3000"], vec!["gpu0 300 300"]),
        ("gpu:memory=low", vec!["gpu0 2000 2000"], vec![]),
    ] {
        let s = Standin::from_text(gpu);
        GpuNvml::step_freqs_init(&host, Some(&usable), Some(spec), &s.paths());
        assert_eq!(sets(&s, SET_MEM), mem, "{spec}");
        assert_eq!(sets(&s, SET_GPU), gfx, "{spec}");
        assert!(sets(&s, SET).is_empty(), "{spec}: no application clocks");
        assert!(s.count("nvmlDeviceGetClockInfo") > 0, "{spec}");
        GpuNvml::step_freqs_fini(&host, &s.paths());
        assert_eq!(s.count("nvmlDeviceResetMemoryLockedClocks"), 1, "{spec}");
        assert_eq!(s.count("nvmlDeviceResetGpuLockedClocks"), 1, "{spec}");
        assert_eq!(s.count(RESET), 0, "{spec}");
    }
    // A failed lock is stock's error line and the step's stderr line.
    let s = Standin::from_text(&format!("{gpu}fail nvmlDeviceSetGpuLockedClocks 4\n"));
    let ctx = StepFreqContext { locked: true, freq_def: None, ..Default::default() };
    let mut log = Log::default();
    let out = set_step_freqs(&usable, "low", &ctx, &s.paths(), &mut log);
    assert_eq!(out.stderr, vec!["Could not set frequencies for all GPUs. Set 0/1 total GPUs"]);
    assert!(
        log.lines().iter().any(|l| l.message == "_nvml_set_freqs: Failed to set GPU clock frequency (200) for the GPU: Insufficient Permissions"),
        "{log:?}"
    );
}

#[test]
fn failed_set_is_reported_on_stderr() {
    let s = Standin::from_text(
        "gpu\nname NVIDIA H100 PCIe\nminor 0\ncpus 0\nmem_clocks 1593\ngfx_clocks 1593 1755,1000\napp_clocks 1593 1000\nfail nvmlDeviceSetApplicationsClocks 4\n",
    );
    let mut log = Log::default();
    let out = set_step_freqs(&Bitmap::from_indices(1, &[0]), "low", &StepFreqContext::default(), &s.paths(), &mut log);
    assert_eq!(out.set, 0);
    assert_eq!(out.stderr, vec!["Could not set frequencies for all GPUs. Set 0/1 total GPUs"]);
    assert!(log
        .lines()
        .iter()
        .any(|l| l.message == "_nvml_set_freqs: Failed to set memory and graphics clock frequency pair (1593, 1000) for the GPU: Insufficient Permissions"));
    assert_eq!(sets(&s, SET), vec!["gpu0 1593 1000"]);
}

#[test]
fn count_energy_and_cpu_masks() {
    let s = Standin::new("h100x8.conf");
    let paths = s.paths();
    assert_eq!(nvml::device_count(&paths), Some(8));
    assert_eq!(nvml::energy_read(2, &paths), Some(GpuEnergy { consumed_energy_j: (123_456_789 + 2 * 1_000_003) / 1000, current_watts: 73 }));
    assert_eq!(nvml::energy_read(8, &paths), None);
    assert_eq!(GpuNvml::test_cpu_conv(Some("~half")).as_deref(), Some("8-15"));
    assert_eq!(GpuNvml::test_cpu_conv(Some("~nonsense")).as_deref(), Some(""));
    assert_eq!(GpuNvml::test_cpu_conv(Some("0-3")).as_deref(), Some(""));
    assert_eq!(GpuNvml::test_cpu_conv(None).as_deref(), Some(""), "slurmd's NULL: an empty range, as stock");
}

#[test]
fn no_driver() {
    let s = Standin::with_fixture(None);
    assert_eq!(nvml::device_count(&s.paths()), None);
    assert_eq!(nvml::energy_read(0, &s.paths()), None);
    // The step goes on; the clocks are just not set.
    GpuNvml::step_freqs_init(&StandaloneHost::default(), Some(&Bitmap::from_indices(2, &[0])), Some("gpu:low"), &s.paths());
    GpuNvml::step_freqs_fini(&StandaloneHost::default(), &s.paths());
}
