//! The bodies of the exported `gres_p_*` functions, generic over the
//! plugin (those every plugin file has are in [`super::common_functions`]).
//! Each one runs under the panic guard, converts Slurm's arguments to core
//! types, calls the plugin, and writes the results back.

use super::common_functions::{SLURM_ERROR, SLURM_SUCCESS};
use super::guard::guard;
use super::host::SlurmHost;
use super::slurm::{self, BufReader, BufWriter, DeviceListCache, EnvArray};
use super::sys;
use crate::plugins::{EnvTarget, GresPlugin, NodeConfig, SetEnv};
use gres_core::model::InternalFlags;
use std::ffi::{c_char, c_int, c_void};
use std::ptr;

/// # Safety
/// Arguments as slurmd passes them to `gres_p_node_config_load`.
pub unsafe fn node_config_load<P: GresPlugin>(list: sys::List, cfg: *mut sys::node_config_load_t) -> c_int {
    guard(P::PLUGIN_TYPE, "node_config_load", SLURM_ERROR, || {
        if list.is_null() || cfg.is_null() {
            tracing::error!("node_config_load: called without a configuration");
            return SLURM_ERROR;
        }
        // SAFETY: `cfg` is slurmd's valid node_config_load_t for this call.
        let c = unsafe { &*cfg };
        // SAFETY: slurmd's pointer for this call; `host` lives only in it.
        let host = unsafe { SlurmHost::for_node_config(cfg) };
        let config = NodeConfig { cpu_cnt: c.cpu_cnt, in_slurmd: c.in_slurmd };
        // SAFETY: `list` is slurmd's valid list of gres_slurmd_conf_t.
        let mut records = unsafe { slurm::records_from_list(list) };
        let rc = match P::node_config_load(&host, config, &mut records) {
            Ok(()) => SLURM_SUCCESS,
            Err(e) => {
                tracing::error!("{e}");
                SLURM_ERROR
            }
        };
        // The list is still what `records` was copied from: compared in
        // place rather than against a kept copy (slurmd -G loads three
        // plugins, each copying the node's whole list).
        // SAFETY: same list, unchanged since it was copied.
        if !unsafe { slurm::list_matches_records(list, &records) } {
            // SAFETY: same list; records rebuilt the way slurmd frees them.
            unsafe { slurm::replace_list_records(list, &records) };
        }
        rc
    })
}

/// Which `gres_p_*_set_env` slurmd called: the entry-point list
/// ([`crate::gres_plugin_functions!`]) names it with the function, so the
/// target never depends on matching a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetEnvCall {
    /// `gres_p_job_set_env` (the job's environment: batch script, Prolog).
    Job,
    /// `gres_p_step_set_env` (slurmstepd, for the step).
    Step,
    /// `gres_p_task_set_env` (slurmstepd's forked task), with the task's
    /// usable GRES bitmap (NULL or valid).
    Task(*mut sys::bitstr_t),
}

impl SetEnvCall {
    /// The function's name in log lines (`gres/gpu: task_set_env: ...`).
    pub fn function(self) -> &'static str {
        match self {
            SetEnvCall::Job => "job_set_env",
            SetEnvCall::Step => "step_set_env",
            SetEnvCall::Task(_) => "task_set_env",
        }
    }
}

/// # Safety
/// `env` is slurmd's `char ***` environment; `alloc` and a task's usable
/// bitmap NULL or valid.
pub unsafe fn set_env<P: GresPlugin>(
    env: *mut *mut *mut c_char,
    alloc: *mut sys::bitstr_t,
    gres_cnt: u64,
    call: SetEnvCall,
    flags: sys::gres_internal_flags_t,
) {
    guard(P::PLUGIN_TYPE, call.function(), (), || {
        // SAFETY: per the function's contract.
        let Some(mut env) = (unsafe { EnvArray::new(env) }) else { return };
        // SAFETY: NULL or valid bitmaps for the call.
        let alloc = unsafe { slurm::bitmap_from_c(alloc) };
        let usable_map;
        let target = match call {
            SetEnvCall::Job => EnvTarget::Job,
            SetEnvCall::Step => EnvTarget::Step,
            SetEnvCall::Task(usable) => {
                // SAFETY: as above.
                usable_map = unsafe { slurm::bitmap_from_c(usable) };
                EnvTarget::Task { usable: usable_map.as_ref() }
            }
        };
        let snapshot = |name: &str| env.get(name);
        // The job a fault hit (`step_xids = on`): slurmstepd gives the
        // step's environment once a step, batch and interactive steps
        // through job_set_env, the others through step_set_env.
        if matches!(call, SetEnvCall::Job | SetEnvCall::Step) && crate::plugins::step_windows::step_began(alloc.as_ref()) {
            register_step_end();
        }
        let req = SetEnv { alloc: alloc.as_ref(), gres_cnt, flags: InternalFlags(flags), current: &snapshot };
        let change = P::set_env(&SlurmHost::plain(), target, &req);
        // The environment first: nothing that happens to the verbose line
        // (a closed or full stderr) can cost the task its GPUs.
        env.apply(&change.ops);
        if let Some(line) = change.verbose_line {
            write_stderr_line(&line);
        }
    })
}

/// The end of the step's window when its slurmstepd exits: slurmstepd
/// calls no plugin function at the end of every step (no `gres_fini`
/// outside `MEMORY_LEAK_DEBUG`, `step_hardware_fini` only with a
/// `tres_freq`), and exits once the step ended.
fn register_step_end() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `step_end_at_exit` is a plain `extern "C" fn()` of this
        // library that never unwinds (its body runs under the guard); it
        // is run at exit, or when the library is unloaded (glibc runs a
        // library's handlers at its `dlclose`), so never after the
        // library is gone.
        if unsafe { libc::atexit(step_end_at_exit) } != 0 {
            tracing::error!("gres-rs: the step's end will not be recorded (atexit failed)");
        }
    });
}

extern "C" fn step_end_at_exit() {
    guard("gres", "step_end", (), crate::plugins::step_windows::step_ended)
}

/// `--gpu-bind=verbose`'s line on the task's stderr, as the stock plugin's
/// `fprintf(stderr, ...)`: a failed write (stderr closed, `--error=/dev/full`)
/// is ignored.  One `write(2)` loop on fd 2: no lock (this runs in
/// slurmstepd's forked task) and no panic.
fn write_stderr_line(line: &str) {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        // SAFETY: `rest` is a live buffer of `rest.len()` bytes; write(2)
        // only reads it.
        let n = unsafe { libc::write(libc::STDERR_FILENO, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            rest = &rest[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        } else {
            return;
        }
    }
}

/// # Safety
/// `buffer` is slurmd's pack buffer.
pub unsafe fn send_stepd<P: GresPlugin>(buffer: *mut sys::buf_t) {
    guard(P::PLUGIN_TYPE, "send_stepd", (), || {
        // SAFETY: per the function's contract.
        if let Some(mut w) = unsafe { BufWriter::new(buffer) } {
            P::send_stepd_as(crate::behaviour::build(), &mut w);
        }
    })
}

/// # Safety
/// `buffer` is slurmstepd's pack buffer.
pub unsafe fn recv_stepd<P: GresPlugin>(buffer: *mut sys::buf_t) {
    guard(P::PLUGIN_TYPE, "recv_stepd", (), || {
        // SAFETY: per the function's contract.
        let Some(mut r) = (unsafe { BufReader::new(buffer) }) else { return };
        if let Err(e) = P::recv_stepd_as(crate::behaviour::build(), &mut r) {
            tracing::error!("recv_stepd: failed: {e}");
        }
    })
}

pub fn get_devices<P: GresPlugin>(cache: &DeviceListCache) -> sys::List {
    guard(P::PLUGIN_TYPE, "get_devices", ptr::null_mut(), || cache.get(P::devices, P::devices_generation()))
}

/// # Safety
/// `js` is NULL or slurmd's valid job state.
pub unsafe fn epilog_build_env<P: GresPlugin>(js: *mut sys::gres_job_state_t) -> *mut sys::gres_epilog_info_t {
    guard(P::PLUGIN_TYPE, "epilog_build_env", ptr::null_mut(), || {
        // SAFETY: per the function's contract.
        let Some(job) = (unsafe { slurm::job_alloc_from_c(js) }) else { return ptr::null_mut() };
        match P::epilog_build_env(&job) {
            Some(info) => slurm::epilog_info_to_c(&info),
            None => ptr::null_mut(),
        }
    })
}

/// # Safety
/// `env` is slurmd's environment; `ei` NULL or a record we built.
pub unsafe fn epilog_set_env<P: GresPlugin>(env: *mut *mut *mut c_char, ei: *mut sys::gres_epilog_info_t, node_inx: c_int) {
    guard(P::PLUGIN_TYPE, "epilog_set_env", (), || {
        // SAFETY: per the function's contract.
        let Some(mut env) = (unsafe { EnvArray::new(env) }) else { return };
        // SAFETY: per the function's contract.
        let Some(info) = (unsafe { slurm::epilog_info_from_c(ei) }) else { return };
        if node_inx < 0 {
            tracing::error!("epilog_set_env: bad node index ({node_inx})");
            return;
        }
        env.apply(&P::epilog_set_env(&info, node_inx as usize));
    })
}

/// `gres_p_get_job_info` / `gres_p_get_step_info`: no plugin-specific data
/// (EINVAL), as the stock GPU plugins.
pub fn get_info<P: GresPlugin>(_data: *mut c_void) -> c_int {
    libc::EINVAL
}
