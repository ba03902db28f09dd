//! The bodies of the functions every plugin file exports, gres or gpu:
//! `init`, `fini` and the step hardware hooks (`gres_p_*` and `gpu_p_*`
//! alike), each given the plugin's `plugin_type` and its function.

use super::guard::guard;
use super::host::SlurmHost;
use super::slurm;
use super::sys;
use crate::plugins::Host;
use gres_core::model::Bitmap;
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

/// The line that tells our plugin file from the stock one in a daemon's
/// log: what it is, our version, the Slurm release it was built for and
/// the path it was loaded from (among the objects the dynamic loader has
/// loaded: reading and parsing `/proc/self/maps` instead, some hundred
/// lines in slurmd, cost each init about 90,000 instructions, 3% of a
/// `slurmd -G` for the three GRES plugins).
///
/// At info in slurmd and slurmctld, which load the plugins once.  A
/// slurmstepd loads them for every step and logs into slurmd's file: there
/// the line is debug, where stock's own `init: loaded` lines are, and not
/// built at all below that level (it was 3 info lines per step, and about
/// 65,000 of the instructions a step's slurmstepd executes); a step's
/// slurmstepd is shown by `gres-rs status` and its `/proc/<pid>/maps`.
fn log_loaded(plugin_type: &str) {
    let in_stepd = std::env::args_os().next().is_some_and(|a| gres_core::plugin_files::is_slurmstepd(a.as_encoded_bytes()));
    if in_stepd && !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let file = gres_core::plugin_files::PLUGIN_FILES.iter().find(|f| f.plugin_type == plugin_type);
    let path = file.and_then(|f| {
        let objects = loaded_objects(&[&format!("{}.so", f.file), gres_core::plugin_files::LIBRARY_FILE]);
        gres_core::plugin_files::loaded_from(objects.iter().map(String::as_str), f.file)
    });
    let path = path.as_deref().unwrap_or("(not found among the loaded objects)");
    let (version, release) = (env!("CARGO_PKG_VERSION"), crate::SLURM_VERSION);
    if in_stepd {
        tracing::debug!("slurm-gpu-gres {version} (Rust) for Slurm {release}, loaded from {path}");
    } else {
        tracing::info!("slurm-gpu-gres {version} (Rust) for Slurm {release}, loaded from {path}");
    }
}

/// The path names of the objects loaded into this process whose file name
/// is one of `names`, as the dynamic loader opened them (`dl_iterate_phdr`).
fn loaded_objects(names: &[&str]) -> Vec<String> {
    struct Found<'a> {
        names: &'a [&'a str],
        paths: Vec<String>,
    }
    /// Called by `dl_iterate_phdr` once per object, with `data` the
    /// `Found` it was given.
    unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut std::ffi::c_void) -> c_int {
        // SAFETY: `info` is the loader's valid description of one object
        // for the duration of the call (dl_iterate_phdr(3)); `dlpi_name`
        // is NULL or a NUL-terminated string it owns, copied here.
        let name = unsafe { (*info).dlpi_name };
        if !name.is_null() {
            // SAFETY: NUL-terminated, valid during the call (above).
            let name = unsafe { std::ffi::CStr::from_ptr(name) };
            // SAFETY: `data` is the `&mut Found` that `loaded_objects`
            // passed, alive and not otherwise borrowed until
            // dl_iterate_phdr returns.
            let found = unsafe { &mut *data.cast::<Found>() };
            // The file name compared as bytes: only a match is checked
            // for UTF-8 and copied (slurmd has some 40 objects loaded).
            let bytes = name.to_bytes();
            let base = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
            if found.names.iter().any(|n| n.as_bytes() == base) {
                if let Ok(path) = name.to_str() {
                    found.paths.push(path.to_string());
                }
            }
        }
        0
    }
    let mut found = Found { names, paths: Vec::new() };
    // SAFETY: `collect` matches the callback type and touches only `found`
    // (through `data`) and the loader's per-call data; called from init(),
    // after slurmd's dlopen() has returned (the loader's lock is free).
    unsafe { libc::dl_iterate_phdr(Some(collect), std::ptr::addr_of_mut!(found).cast()) };
    found.paths
}

/// `fini()` of any plugin file.
pub fn fini(plugin_type: &'static str, fini: impl FnOnce(&dyn Host)) -> c_int {
    guard(plugin_type, "fini", SLURM_SUCCESS, || {
        fini(&SlurmHost::plain());
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
