//! The plugin roles: what each of our four plugin files does, in safe Rust
//! over the core types.  The Slurm ABI layer (`gres-slurm-abi`) turns
//! slurmd's calls into calls of [`GresPlugin`] and [`GpuPlugin`]; the
//! cdylib `crates/gres_rs` (`libgres_rs.so`) exports them, one line per
//! plugin file.  Nothing here knows Slurm's memory or its releases.

#![deny(unsafe_code)]

pub use gres_log as log;
pub use gres_nvml as nvml;

use gres_core::env::{EnvChange, EnvOp};
use gres_core::model::{Bitmap, EpilogInfo, GresDevice, GresRecord, InternalFlags, JobAlloc, LogLine};
use gres_core::wire::{WireError, WireReader, WireWriter};

pub mod gpu_detect;
pub mod gpu_nvml;
pub mod gres_gpu;
pub mod gres_mps;
pub mod gres_shard;
pub mod sharing;
pub mod state;
pub mod step_windows;
pub mod step_xids;

/// Send a core log line to the log at its level.
pub(crate) fn log_line(line: &LogLine) {
    crate::log::emit(line);
}

/// Send core log lines to the log, in order.
pub(crate) fn log_lines(lines: &[LogLine]) {
    lines.iter().for_each(log_line);
}

/// Stop the process as Slurm's `fatal()` does: the message at the fatal
/// level ("fatal: ..."), then `exit(1)`.  Only for a broken configuration
/// on the first load, where the stock plugins stop slurmd too.
pub(crate) fn fatal(message: &str) -> ! {
    tracing::error!(target: crate::log::FATAL, "{message}");
    std::process::exit(1)
}

pub use gres_core::host::{Host, NodeConfig};

/// Where the plugins find NVML and the GPUs' files: the system's places.
#[cfg(not(feature = "test-hooks"))]
pub(crate) fn nvml_paths() -> crate::nvml::Paths {
    crate::nvml::Paths::default()
}

/// Where the plugins find NVML and the GPUs' files.  Test builds (cargo
/// feature `test-hooks`, never in a release) take them from the daemon's
/// environment where set: `GRES_RS_NVML_LIB` (the library to load, e.g.
/// the NVML stand-in), `GRES_RS_DEV_DIR` (fake device files),
/// `GRES_RS_MIG_MINORS`.
#[cfg(feature = "test-hooks")]
pub(crate) fn nvml_paths() -> crate::nvml::Paths {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut paths = crate::nvml::Paths::default();
    if let Some(v) = var("GRES_RS_NVML_LIB") {
        paths.library = v;
    }
    if let Some(v) = var("GRES_RS_DEV_DIR") {
        paths.dev_dir = v.to_string_lossy().into_owned();
    }
    if let Some(v) = var("GRES_RS_MIG_MINORS") {
        paths.mig_minors = v.into();
    }
    paths
}

/// A `*_set_env` call.
pub struct SetEnv<'a> {
    pub alloc: Option<&'a Bitmap>,
    pub gres_cnt: u64,
    pub flags: InternalFlags,
    /// The environment as it is before the call.
    pub current: &'a dyn Fn(&str) -> Option<String>,
}

/// Which `*_set_env` slurmd called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvTarget<'a> {
    Job,
    Step,
    Task { usable: Option<&'a Bitmap> },
}

/// One GRES plugin file (`gres_gpu.so`, `gres_mps.so`, `gres_shard.so`).
/// Every function has the meaning of the `gres_p_*` function of that name.
pub trait GresPlugin: 'static {
    /// `plugin_name`, e.g. "Gres GPU plugin".
    const PLUGIN_NAME: &'static str;
    /// `plugin_type`, e.g. "gres/gpu".
    const PLUGIN_TYPE: &'static str;
    /// The GRES name, e.g. "gpu".
    const GRES_NAME: &'static str;

    fn init() -> Result<(), String> {
        Ok(())
    }
    fn fini(_host: &dyn Host) {}
    /// Validate and complete the node's records (which include other
    /// GRES's records), and set up the device list.  `Err` stops slurmd as
    /// the stock plugins do, with the message logged.
    fn node_config_load(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<(), String>;
    /// The node's device list, for `gres_p_get_devices`.
    fn devices() -> Vec<GresDevice>;
    /// A counter that changes whenever [`Self::devices`] does.
    fn devices_generation() -> u64;
    fn set_env(host: &dyn Host, target: EnvTarget<'_>, req: &SetEnv<'_>) -> EnvChange;
    /// slurmd's message to slurmstepd, in the baseline release's layout
    /// (`send_stepd_as(&Behaviour::BASELINE, w)`).
    fn send_stepd(w: &mut dyn WireWriter) {
        Self::send_stepd_as(&gres_core::behaviour::Behaviour::BASELINE, w)
    }
    fn recv_stepd(r: &mut dyn WireReader) -> Result<(), WireError> {
        Self::recv_stepd_as(&gres_core::behaviour::Behaviour::BASELINE, r)
    }
    /// The message in the layout of the release that behaves as
    /// `behaviour` (each device's flags from 25.11), for the entry points
    /// to call with the build's behaviour.
    fn send_stepd_as(behaviour: &gres_core::behaviour::Behaviour, w: &mut dyn WireWriter);
    fn recv_stepd_as(behaviour: &gres_core::behaviour::Behaviour, r: &mut dyn WireReader) -> Result<(), WireError>;
    /// Prolog/Epilog record, or `None` when there is nothing to set.
    fn epilog_build_env(job: &JobAlloc) -> Option<EpilogInfo>;
    fn epilog_set_env(info: &EpilogInfo, node_inx: usize) -> Vec<EnvOp>;
    fn step_hardware_init(_host: &dyn Host, _usable: Option<&Bitmap>, _settings: Option<&str>) {}
    fn step_hardware_fini(_host: &dyn Host) {}
}

/// The gpu plugin file (`gpu_nvml.so`): `gpu_p_*` functions.
pub trait GpuPlugin: 'static {
    const PLUGIN_NAME: &'static str;
    const PLUGIN_TYPE: &'static str;

    fn init() -> Result<(), String> {
        Ok(())
    }
    fn fini(_host: &dyn Host) {}
    fn reconfig() {}
    /// The GPUs of this node, or `None` when detection is impossible.
    fn system_gpu_list(host: &dyn Host, cfg: NodeConfig) -> Option<Vec<GresRecord>>;
    fn step_hardware_init(host: &dyn Host, usable: Option<&Bitmap>, settings: Option<&str>);
    fn step_hardware_fini(host: &dyn Host);
    /// `fake_gpus.conf` CPU mask (`~one`, `~XX`) to a CPU range; `None`
    /// for slurmd's NULL.
    fn test_cpu_conv(mask: Option<&str>) -> Option<String>;
    fn device_count() -> Option<u32>;
    /// Energy readings per GPU, for `gpu_p_energy_read`.
    fn energy_read(_dv_ind: u32) -> Option<gres_core::model::GpuEnergy> {
        None
    }
    /// The GPU memory and utilisation of process `pid` for job accounting
    /// (`gpu_p_usage_read`), starting from the record's `last_time`;
    /// `None` writes nothing.
    fn usage_read(_pid: u32, _last_time: u64) -> Option<gres_core::gpu_usage::ProcessUsage> {
        None
    }
}
