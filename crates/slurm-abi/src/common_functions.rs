//! The bodies of the functions every plugin file exports, gres or gpu:
//! `init`, `fini` and the step hardware hooks (`gres_p_*` and `gpu_p_*`
//! alike), each given the plugin's `plugin_type` and its function.

use super::guard::guard;
use super::host::SlurmHost;
use super::slurm;
use super::sys;
use crate::core::model::Bitmap;
use crate::plugins::Host;
use std::ffi::{c_char, c_int};

pub const SLURM_SUCCESS: c_int = 0;
pub const SLURM_ERROR: c_int = -1;

/// `init()` of any plugin file: route our logs to slurmd, then run
/// `init` under the guard; an error makes slurmd load the next file of the
/// same name in `PluginDir` (the stock plugin).
pub fn init(plugin_type: &'static str, init: impl FnOnce() -> Result<(), String>) -> c_int {
    super::log::install();
    guard(plugin_type, "init", SLURM_ERROR, || match init() {
        Ok(()) => {
            log_loaded(plugin_type);
            SLURM_SUCCESS
        }
        Err(e) => {
            tracing::error!("init: {e}");
            SLURM_ERROR
        }
    })
}

/// The info line that tells our plugin file from the stock one in a
/// daemon's log: what it is, our version, the Slurm release it was built
/// for and the path it was loaded from.
fn log_loaded(plugin_type: &str) {
    let file = crate::plugins::files::PLUGIN_FILES.iter().find(|f| f.plugin_type == plugin_type);
    let path = file.and_then(|f| {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        crate::plugins::files::loaded_from(&maps, f.file)
    });
    tracing::info!(
        "slurm-gpu-gres {} (Rust) for Slurm {}, loaded from {}",
        env!("CARGO_PKG_VERSION"),
        crate::SLURM_VERSION,
        path.as_deref().unwrap_or("(not found in /proc/self/maps)")
    );
}

/// `fini()` of any plugin file.
pub fn fini(plugin_type: &'static str, fini: impl FnOnce()) -> c_int {
    guard(plugin_type, "fini", SLURM_SUCCESS, || {
        fini();
        SLURM_SUCCESS
    })
}

/// `gres_p_step_hardware_init` / `gpu_p_step_hardware_init`.
///
/// # Safety
/// `usable` NULL or a valid bitmap; `settings` NULL or a C string.
pub unsafe fn step_hardware_init(
    plugin_type: &'static str,
    usable: *mut sys::bitstr_t,
    settings: *mut c_char,
    init: impl FnOnce(&dyn Host, Option<&Bitmap>, Option<&str>),
) {
    guard(plugin_type, "step_hardware_init", (), || {
        // SAFETY: per the function's contract.
        let usable = unsafe { slurm::bitmap_from_c(usable) };
        // SAFETY: per the function's contract.
        let settings = unsafe { slurm::string_from_c(settings) };
        init(&SlurmHost::plain(), usable.as_ref(), settings.as_deref());
    })
}

/// `gres_p_step_hardware_fini` / `gpu_p_step_hardware_fini`.
pub fn step_hardware_fini(plugin_type: &'static str, fini: impl FnOnce(&dyn Host)) {
    guard(plugin_type, "step_hardware_fini", (), || fini(&SlurmHost::plain()))
}
