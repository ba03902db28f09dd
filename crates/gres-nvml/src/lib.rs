#![deny(unsafe_code)]
//! NVIDIA GPUs through NVML (`nvml-wrapper`, which loads the NVML library
//! at run time): detection for `AutoDetect=nvml` in the form Slurm 22.05's
//! gpu/nvml gives it, `--gpu-freq` clock setting, device count and energy.
//!
//! - [`mod@session`]: the process-wide NVML handle.
//! - [`mod@detect`]: the node's GPUs as gres.conf records.
//! - [`clocks`]: application clocks for a step's GPUs.
//! - [`report`]: detection as a table and gres.conf lines, for a CLI.
//! - [`usage`]: per-process GPU memory and utilisation for job accounting.
//! - [`health`]: ECC, retired pages, remapped rows, throttling, NVLink and
//!   XID events of each GPU, for a health check; every call bounded by a
//!   deadline ([`bounded`]).
//! - [`step_watch`]: a job step's GPUs registered for XID events at its
//!   start and collected at its end, for our gpu/nvml in slurmstepd.
//!
//! The pure rules (type names, links, MIG files, the record) are in
//! [`gres_core::nvml_model`] and [`gres_core::gpu_freq`].
//!
//! Where NVML and the GPUs' files are is a [`Paths`] argument of every
//! function that opens NVML: [`Paths::default`] is the system's places
//! (`libnvidia-ml.so.1`, `/dev`, `/proc/driver/nvidia-caps/mig-minors`).
//! This module reads no environment: the plugins pass the system's places
//! (test builds with the cargo feature `test-hooks` take them from the
//! daemon's environment, see `slurm_gpu_gres::plugins::nvml_paths`), `gres-rs
//! detect` its options, and tests their stand-ins.

pub mod bounded;
pub mod clocks;
pub mod detect;
pub mod health;
pub mod report;
pub mod session;
pub mod step_watch;
pub mod usage;

pub use detect::{detect, system_gpu_list};
pub use health::{read_health, GpuIds, HealthReading, XidWatch};
pub use report::{detect_report, DetectReport};
pub use session::DetectError;
pub use session::{release, session, Session};

use gres_core::model::{self, GpuEnergy, LogLevel, LogLine};

/// The NVML library loaded by default (what `nvml-wrapper` loads, and what
/// the stock plugin links against).
pub const DEFAULT_LIB: &str = "libnvidia-ml.so.1";

/// Where NVML and the GPUs' files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// The NVML library file to load (a name for the dynamic loader's
    /// search, or a path).
    pub library: std::ffi::OsString,
    /// The directory of the GPUs' device files (in the records' `File`,
    /// so in the cgroup device list).
    pub dev_dir: String,
    /// The driver's `mig-minors` file.
    pub mig_minors: std::path::PathBuf,
}

impl Default for Paths {
    /// The system's places.
    fn default() -> Self {
        Paths { library: DEFAULT_LIB.into(), dev_dir: gres_core::nvml_model::DEV_DIR.into(), mig_minors: gres_core::nvml_model::MIG_MINORS_PATH.into() }
    }
}

/// Log lines of one operation: each goes to `tracing` (slurmd's log in
/// slurmd) when it is made, and is kept for callers that show them
/// elsewhere (the CLI report, tests).  Which lines are made at all is the
/// core's [`model::Log`] rule (the default keeps every line).
#[derive(Debug, Default)]
pub struct Log {
    kept: model::Log,
}

impl Log {
    pub fn new(max: LogLevel) -> Self {
        Log { kept: model::Log::new(max) }
    }
    /// For the plugins: what the daemon's log lets through.
    pub fn daemon() -> Self {
        Log::new(gres_log::max_level())
    }
    pub fn line(&mut self, level: LogLevel, message: impl std::fmt::Display) {
        if self.kept.wants(level) {
            let line = LogLine { level, message: message.to_string() };
            gres_log::emit(&line);
            self.kept.push(level, line.message);
        }
    }
    pub fn error(&mut self, m: impl std::fmt::Display) {
        self.line(LogLevel::Error, m);
    }
    pub fn info(&mut self, m: impl std::fmt::Display) {
        self.line(LogLevel::Info, m);
    }
    pub fn verbose(&mut self, m: impl std::fmt::Display) {
        self.line(LogLevel::Verbose, m);
    }
    pub fn debug(&mut self, m: impl std::fmt::Display) {
        self.line(LogLevel::Debug, m);
    }
    pub fn debug2(&mut self, m: impl std::fmt::Display) {
        self.line(LogLevel::Debug2, m);
    }
    pub fn debug3(&mut self, m: impl std::fmt::Display) {
        self.line(LogLevel::Debug3, m);
    }
    pub fn lines(&self) -> &[LogLine] {
        self.kept.lines()
    }
    pub fn into_lines(self) -> Vec<LogLine> {
        self.kept.into_lines()
    }
    /// The messages at `level` or more important.
    pub fn at_most(&self, level: LogLevel) -> impl Iterator<Item = &str> {
        self.lines().iter().filter(move |l| l.level <= level).map(|l| l.message.as_str())
    }
}

/// Number of GPUs NVML sees (Slurm's `gpu_p_get_device_count`); `None`,
/// with the reason logged, when NVML is unusable.
pub fn device_count(paths: &Paths) -> Option<u32> {
    let s = match session(paths) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return None;
        }
    };
    match s.nvml.device_count() {
        Ok(n) => Some(n),
        Err(e) => {
            tracing::error!("Failed to get device count: {}", s.text(&e));
            None
        }
    }
}

/// Power and energy of the GPU with NVML index `index`: the power draw
/// (NVML reports milliwatts) and the energy used since the driver loaded
/// (NVML reports millijoules; 0 where the GPU cannot tell, before Volta).
pub fn energy_read(index: u32, paths: &Paths) -> Option<GpuEnergy> {
    let s = match session(paths) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return None;
        }
    };
    let dev = match s.nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("Failed to get device handle for GPU {index}: {}", s.text(&e));
            return None;
        }
    };
    let milliwatts = match dev.power_usage() {
        Ok(mw) => mw,
        Err(e) => {
            tracing::error!("NVML: Failed to get power of GPU {index}: {}", s.text(&e));
            return None;
        }
    };
    let millijoules = dev.total_energy_consumption().unwrap_or_else(|e| {
        tracing::debug!("NVML: no energy counter for GPU {index}: {}", s.text(&e));
        0
    });
    Some(GpuEnergy { consumed_energy_j: millijoules / 1000, current_watts: milliwatts / 1000 })
}
