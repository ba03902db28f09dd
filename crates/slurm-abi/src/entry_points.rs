//! The entry points of the plugin files, written once.  Each plugin file
//! (`gres_gpu.so` ...) holds only the data symbols slurmd reads and, for
//! every function slurmd resolves in it, a jump to that plugin's function
//! in `libgres_rs.so` through the plugin's table there ([`table_symbol`],
//! [`crate::export_macros`]).  The lists below give
//! each function's name, C signature and body; `build.rs` includes this
//! file to take the names for the plugin files, `crates/gres_rs` expands
//! the bodies into `libgres_rs.so`.
//!
//! No dependencies: `build.rs` compiles it on its own.

/// How the names of `libgres_rs.so`'s symbols for the plugin files begin
/// (`gres-rs install` checks that a plugin file finds what it needs).
pub const LIBRARY_SYMBOL_PREFIX: &str = "gres_rs_";

/// The name in `libgres_rs.so` of plugin file `file`'s table of functions
/// (its entry points, in the order `functions` gives them, for `release`):
/// [`LIBRARY_SYMBOL_PREFIX`], the file, `_entries_`, and a checksum of the
/// release and the names in order (FNV-1a, 64 bits).  Each entry point of
/// the plugin file jumps through its slot of the table, so the plugin
/// file needs one symbol of the library, not one per function (one lookup
/// when slurmd or a step's slurmstepd loads it, where it took 15); and a
/// library whose table is for another release or another list has another
/// name: `dlopen()` fails cleanly, as it did for a missing function.
pub fn table_symbol(file: &str, release: &str, functions: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in std::iter::once(release).chain(functions.iter().copied()) {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{LIBRARY_SYMBOL_PREFIX}{file}_entries_{hash:016x}")
}

/// One plugin file's table in `libgres_rs.so` (made by the export macros
/// from the list build.rs writes, `__entry_table!`): the addresses of its
/// functions, in the plugin file's order.
#[repr(transparent)]
pub struct EntryTable<const N: usize>(pub [*const (); N]);

// SAFETY: the table holds code addresses, written by the dynamic loader's
// relocation before any thread can see the library and never after;
// sharing them between threads only reads them.
unsafe impl<const N: usize> Sync for EntryTable<N> {}

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
    fn a_table_for_another_release_or_list_has_another_name() {
        let t = super::table_symbol("gres_gpu", "22.05.8", &["init", "fini"]);
        assert!(t.starts_with("gres_rs_gres_gpu_entries_") && t.len() == "gres_rs_gres_gpu_entries_".len() + 16, "{t}");
        assert_eq!(t, super::table_symbol("gres_gpu", "22.05.8", &["init", "fini"]));
        for other in [
            super::table_symbol("gres_gpu", "22.05.9", &["init", "fini"]),
            super::table_symbol("gres_gpu", "22.05.8", &["fini", "init"]),
            super::table_symbol("gres_gpu", "22.05.8", &["in", "itfini"]),
            super::table_symbol("gres_gpu", "22.05.8", &["init"]),
        ] {
            assert_ne!(t, other);
        }
    }
}
