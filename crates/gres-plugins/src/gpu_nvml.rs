//! `gpu_nvml.so`: NVIDIA GPU detection through NVML for `AutoDetect=nvml`,
//! `--gpu-freq` for steps, the XIDs that hit a step ([`crate::step_xids`]),
//! device count and energy readings.  The work is in [`crate::nvml`]; this
//! is the plugin's state and its answers to slurmd.

use super::{GpuPlugin, Host, NodeConfig};
use crate::nvml::clocks::{self, StepFreqContext};
use crate::nvml::{self, Log};
use gres_core::model::{Bitmap, GpuEnergy, GresRecord};
use gres_core::{gpu_freq, nvml_model};
use std::io::Write;
use std::sync::{Mutex, PoisonError};

/// The step's clock-setting context from slurmd's configuration
/// (slurm.conf `GpuFreqDef`, or 22.05's built-in one, and `DebugFlags`,
/// cgroup device constraint).
fn step_context(host: &dyn Host) -> StepFreqContext {
    let b = host.behaviour();
    let builtin = b.gpu_freq_def_builtin;
    let freq_def = host.gpu_freq_def().or_else(|| builtin.then(|| gpu_freq::DEFAULT_GPU_FREQ_DEF.to_string()));
    StepFreqContext { freq_def, keep_current: !builtin, locked: b.gpu_locked_clocks, local_ids: host.use_local_device_index(), debug_gres: host.debug_gres() }
}

/// The step's GPUs whose clocks were changed, to reset in fini (Slurm's
/// `saved_gpus`); `None` when `--gpu-freq` asked for nothing.
static SAVED: Mutex<Option<Vec<u32>>> = Mutex::new(None);

/// Lines for the step's stderr (where Slurm prints them too); a failed
/// write is ignored (`eprintln!` would panic).
fn to_stderr(lines: &[String]) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    for line in lines {
        let _ = writeln!(err, "{line}");
    }
}

pub struct GpuNvml;

impl GpuNvml {
    /// [`GpuPlugin::step_hardware_init`] with NVML where `paths` says.
    pub fn step_freqs_init(host: &dyn Host, usable: Option<&Bitmap>, settings: Option<&str>, paths: &nvml::Paths) {
        let (Some(usable), Some(settings)) = (usable, settings) else { return };
        let Some(spec) = gpu_freq::gpu_part_of_tres_freq(settings) else { return };
        let ctx = step_context(host);
        let mut log = Log::daemon();
        let out = clocks::set_step_freqs(usable, spec, &ctx, paths, &mut log);
        // Slurm resets every GPU of the step at fini once a GPU frequency
        // was asked for, even when nothing was set.
        let gpus = if out.gpus.is_empty() { usable.ones().map(|i| i as u32).collect() } else { out.gpus };
        *SAVED.lock().unwrap_or_else(PoisonError::into_inner) = Some(gpus);
        to_stderr(&out.stderr);
    }

    /// [`GpuPlugin::step_hardware_fini`] with NVML where `paths` says.
    pub fn step_freqs_fini(host: &dyn Host, paths: &nvml::Paths) {
        let Some(gpus) = SAVED.lock().unwrap_or_else(PoisonError::into_inner).take() else { return };
        let ctx = step_context(host);
        let mut stderr = Vec::new();
        clocks::reset_step_freqs(&gpus, &ctx, paths, &mut Log::daemon(), &mut stderr);
        to_stderr(&stderr);
        nvml::release();
    }
}

impl GpuPlugin for GpuNvml {
    const PLUGIN_NAME: &'static str = gres_core::plugin_files::GPU_NVML.name;
    const PLUGIN_TYPE: &'static str = gres_core::plugin_files::GPU_NVML.plugin_type;

    fn init() -> Result<(), String> {
        tracing::debug!("init: {} loaded", Self::PLUGIN_NAME);
        Ok(())
    }

    fn fini(_host: &dyn Host) {
        tracing::debug!("fini: unloading {}", Self::PLUGIN_NAME);
        nvml::release();
    }

    fn system_gpu_list(host: &dyn Host, cfg: NodeConfig) -> Option<Vec<GresRecord>> {
        nvml::system_gpu_list(host, cfg, &super::nvml_paths())
    }

    fn step_hardware_init(host: &dyn Host, usable: Option<&Bitmap>, settings: Option<&str>) {
        let paths = super::nvml_paths();
        // The job a fault hit (`step_xids = on`; nothing when off).
        crate::step_xids::step_start(host, usable, &paths);
        GpuNvml::step_freqs_init(host, usable, settings, &paths);
    }

    fn step_hardware_fini(host: &dyn Host) {
        // Before the clocks' reset, which releases NVML.
        crate::step_xids::step_end();
        GpuNvml::step_freqs_fini(host, &super::nvml_paths());
    }

    fn test_cpu_conv(mask: Option<&str>) -> Option<String> {
        tracing::info!("gpu_p_test_cpu_conv: cpu_range: {}", mask.unwrap_or("(null)"));
        let Some(mask) = mask else {
            tracing::error!("cpu_range is null");
            return Some(String::new());
        };
        if !mask.starts_with('~') {
            tracing::error!("cpu_range doesn't start with `~`!");
            return Some(String::new());
        }
        let Some(converted) = nvml_model::test_cpu_conv(mask) else {
            tracing::error!("Unknown test keyword");
            return Some(String::new());
        };
        // The words go to the daemon's stdout, as Slurm's test tools read
        // them there.
        let _ = writeln!(std::io::stdout(), "{}", converted.stdout_line);
        if converted.range.is_empty() {
            tracing::error!("cpu_set_bitstr is empty! No CPU affinity for device");
        }
        Some(converted.range)
    }

    fn device_count() -> Option<u32> {
        nvml::device_count(&super::nvml_paths())
    }

    fn energy_read(dv_ind: u32) -> Option<GpuEnergy> {
        nvml::energy_read(dv_ind, &super::nvml_paths())
    }

    fn usage_read(pid: u32, last_time: u64) -> Option<gres_core::gpu_usage::ProcessUsage> {
        nvml::usage::process_usage(pid, last_time, &super::nvml_paths(), &mut Log::daemon())
    }
}
