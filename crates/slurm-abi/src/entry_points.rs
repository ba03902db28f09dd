//! The entry points of the plugin files, written once.  Each plugin file
//! (`gres_gpu.so` ...) holds only the data symbols slurmd reads and, for
//! every function slurmd resolves in it, a jump to that plugin's function
//! in `libgres_rs.so` (see [`crate::export_macros`]).  The lists below give
//! each function's name, C signature and body; `build.rs` includes this
//! file to take the names for the plugin files, `crates/gres_rs` expands
//! the bodies into `libgres_rs.so`.
//!
//! No dependencies: `build.rs` compiles it on its own.

/// How the names of `libgres_rs.so`'s functions for the plugin files
/// begin (`gres-rs install` checks that a plugin file finds all it needs).
pub const LIBRARY_SYMBOL_PREFIX: &str = "gres_rs_";

/// The name in `libgres_rs.so` of plugin file `file`'s function
/// `function`: [`LIBRARY_SYMBOL_PREFIX`], the file, the function
/// (`gres_rs_gres_gpu_init`).  `__library_symbol!` is the same as a
/// literal, for `#[export_name]`.
pub fn library_symbol(file: &str, function: &str) -> String {
    format!("{LIBRARY_SYMBOL_PREFIX}{file}_{function}")
}

/// [`library_symbol`] as a literal.
#[doc(hidden)]
#[macro_export]
macro_rules! __library_symbol {
    ($tag:ident, $name:ident) => {
        concat!("gres_rs_", stringify!($tag), "_", stringify!($name))
    };
}

/// Every function of a GRES plugin (`gres_p_*`, `init`, `fini`): name, C
/// signature, the releases that resolve it (`, since "23.02"`: from that
/// series on; `, until "24.11"`: before that series; neither: every
/// release; see [`crate::releases::present`]), and the body in
/// `libgres_rs.so` (`P` is the plugin type, `DEVICES` its device-list
/// cache; `gres` is [`crate::gres_functions`], `common`
/// [`crate::common_functions`]).  Calls `$emit!` with them.  The ranges
/// are those of the `syms[]` array of each release's
/// `src/interfaces/gres.c` (`src/common/gres.c` in 22.05); they agree with
/// [`crate::releases::CHANGES`].
#[doc(hidden)]
#[macro_export]
macro_rules! gres_plugin_functions {
    ($emit:ident ! ($tag:ident)) => {
        $crate::$emit! { $tag;
            fn init() -> c_int => common::init(P::PLUGIN_TYPE, P::init);
            fn fini() -> c_int => common::fini(P::PLUGIN_TYPE, P::fini);
            fn gres_p_node_config_load(list: sys::List, cfg: *mut sys::node_config_load_t) -> c_int => gres::node_config_load::<P>(list, cfg);
            fn gres_p_job_set_env(env: *mut *mut *mut c_char, alloc: *mut sys::bitstr_t, cnt: u64, flags: sys::gres_internal_flags_t) -> ()
                => gres::set_env::<P>(env, alloc, cnt, gres::SetEnvCall::Job, flags);
            fn gres_p_step_set_env(env: *mut *mut *mut c_char, alloc: *mut sys::bitstr_t, cnt: u64, flags: sys::gres_internal_flags_t) -> ()
                => gres::set_env::<P>(env, alloc, cnt, gres::SetEnvCall::Step, flags);
            // The arguments in the order slurmd passes them.
            fn gres_p_task_set_env(env: *mut *mut *mut c_char, alloc: *mut sys::bitstr_t, cnt: u64, usable: *mut sys::bitstr_t, flags: sys::gres_internal_flags_t) -> ()
                => gres::set_env::<P>(env, alloc, cnt, gres::SetEnvCall::Task(usable), flags);
            fn gres_p_send_stepd(buffer: *mut sys::buf_t) -> () => gres::send_stepd::<P>(buffer);
            fn gres_p_recv_stepd(buffer: *mut sys::buf_t) -> () => gres::recv_stepd::<P>(buffer);
            fn gres_p_get_job_info(js: *mut sys::gres_job_state_t, node_inx: u32, data_type: sys::gres_job_data_type, data: *mut c_void) -> c_int, until "24.11"
                => gres::get_info::<P>(data);
            fn gres_p_get_step_info(ss: *mut sys::gres_step_state_t, node_inx: u32, data_type: sys::gres_step_data_type, data: *mut c_void) -> c_int, until "24.11"
                => gres::get_info::<P>(data);
            fn gres_p_get_devices() -> sys::List => gres::get_devices::<P>(&DEVICES);
            fn gres_p_step_hardware_init(usable: *mut sys::bitstr_t, settings: *mut c_char) -> ()
                => common::step_hardware_init(P::PLUGIN_TYPE, usable, settings, P::step_hardware_init);
            fn gres_p_step_hardware_fini() -> () => common::step_hardware_fini(P::PLUGIN_TYPE, P::step_hardware_fini);
            // Renamed prep_* in 23.02 (gres_epilog_info_t became
            // gres_prep_t, same layout; our headers keep the old name).
            fn gres_p_epilog_build_env(js: *mut sys::gres_job_state_t) -> *mut sys::gres_epilog_info_t, until "23.02"
                => gres::epilog_build_env::<P>(js);
            fn gres_p_epilog_set_env(env: *mut *mut *mut c_char, ei: *mut sys::gres_epilog_info_t, node_inx: c_int) -> (), until "23.02"
                => gres::epilog_set_env::<P>(env, ei, node_inx);
            fn gres_p_prep_build_env(js: *mut sys::gres_job_state_t) -> *mut sys::gres_epilog_info_t, since "23.02"
                => gres::epilog_build_env::<P>(js);
            fn gres_p_prep_set_env(env: *mut *mut *mut c_char, ei: *mut sys::gres_epilog_info_t, node_inx: c_int) -> (), since "23.02"
                => gres::epilog_set_env::<P>(env, ei, node_inx);
        }
    };
}

/// Every function of a gpu plugin (`gpu_p_*`, `init`, `fini`), like
/// [`gres_plugin_functions!`] (`gpu` is [`crate::gpu_functions`]; ranges
/// from `syms[]` of `src/interfaces/gpu.c`).
#[doc(hidden)]
#[macro_export]
macro_rules! gpu_plugin_functions {
    ($emit:ident ! ($tag:ident)) => {
        $crate::$emit! { $tag;
            fn init() -> c_int => common::init(P::PLUGIN_TYPE, P::init);
            fn fini() -> c_int => common::fini(P::PLUGIN_TYPE, P::fini);
            fn gpu_p_reconfig() -> c_int, until "24.05" => gpu::reconfig::<P>();
            fn gpu_p_get_system_gpu_list(cfg: *mut sys::node_config_load_t) -> sys::List => gpu::get_system_gpu_list::<P>(cfg);
            fn gpu_p_step_hardware_init(usable: *mut sys::bitstr_t, settings: *mut c_char) -> ()
                => common::step_hardware_init(P::PLUGIN_TYPE, usable, settings, P::step_hardware_init);
            fn gpu_p_step_hardware_fini() -> () => common::step_hardware_fini(P::PLUGIN_TYPE, P::step_hardware_fini);
            fn gpu_p_test_cpu_conv(range: *mut c_char) -> *mut c_char => gpu::test_cpu_conv::<P>(range);
            fn gpu_p_energy_read(dv_ind: u32, gpu: *mut sys::gpu_status_t) -> c_int => gpu::energy_read::<P>(dv_ind, gpu);
            fn gpu_p_get_device_count(count: *mut c_uint) -> () => gpu::get_device_count::<P>(count);
            // pid_t is int on every Linux target.
            fn gpu_p_usage_read(pid: c_int, data: *mut sys::acct_gather_data_t) -> c_int, since "23.02" => gpu::usage_read::<P>(pid, data);
        }
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn library_names_as_literal_and_as_text_agree() {
        assert_eq!(crate::__library_symbol!(gres_gpu, init), super::library_symbol("gres_gpu", "init"));
        assert_eq!(crate::__library_symbol!(gpu_nvml, gpu_p_reconfig), "gres_rs_gpu_nvml_gpu_p_reconfig");
    }
}
