//! The declaration macros: one line in a plugin crate exports the data
//! symbols slurmd reads (`plugin_name`, `plugin_type`, `plugin_version`,
//! as character arrays and a `u32`) and every function it resolves.

/// `s` as a NUL-terminated byte array of length `N` (= `s.len() + 1`).
pub const fn c_bytes<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    assert!(b.len() + 1 == N, "array length must be the string length plus one");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < b.len() {
        assert!(b[i] != 0, "plugin strings cannot contain NUL");
        out[i] = b[i];
        i += 1;
    }
    out
}

/// Declare a GRES plugin file: `declare_gres_plugin!(path::to::Plugin);`
/// where the type implements [`crate::plugins::GresPlugin`].
#[macro_export]
macro_rules! declare_gres_plugin {
    ($plugin:ty) => {
        const _: () = {
            use ::std::ffi::{c_char, c_int, c_void};
            use $crate::ffi::exports as ex;
            use $crate::ffi::sys;
            use $crate::plugins::GresPlugin as _;

            const NAME: &str = <$plugin>::PLUGIN_NAME;
            const TYPE: &str = <$plugin>::PLUGIN_TYPE;

            #[no_mangle]
            #[used]
            pub static plugin_name: [u8; NAME.len() + 1] = $crate::ffi::declare::c_bytes(NAME);
            #[no_mangle]
            #[used]
            pub static plugin_type: [u8; TYPE.len() + 1] = $crate::ffi::declare::c_bytes(TYPE);
            #[no_mangle]
            #[used]
            pub static plugin_version: u32 = $crate::SLURM_VERSION_NUMBER;

            static DEVICES: $crate::ffi::slurm::DeviceListCache = $crate::ffi::slurm::DeviceListCache::new();

            #[no_mangle]
            pub extern "C" fn init() -> c_int {
                ex::init::<$plugin>()
            }
            #[no_mangle]
            pub extern "C" fn fini() -> c_int {
                ex::fini::<$plugin>()
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_node_config_load(list: sys::List, cfg: *mut sys::node_config_load_t) -> c_int {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::node_config_load::<$plugin>(list, cfg) }
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_job_set_env(env: *mut *mut *mut c_char, alloc: *mut sys::bitstr_t, cnt: u64, flags: sys::gres_internal_flags_t) {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::set_env::<$plugin>(env, alloc, cnt, None, flags, "job_set_env") }
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_step_set_env(env: *mut *mut *mut c_char, alloc: *mut sys::bitstr_t, cnt: u64, flags: sys::gres_internal_flags_t) {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::set_env::<$plugin>(env, alloc, cnt, None, flags, "step_set_env") }
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_task_set_env(
                env: *mut *mut *mut c_char,
                alloc: *mut sys::bitstr_t,
                cnt: u64,
                usable: *mut sys::bitstr_t,
                flags: sys::gres_internal_flags_t,
            ) {
                // SAFETY: slurmd's arguments (in the order slurmd passes
                // them), passed through unchanged.
                unsafe { ex::set_env::<$plugin>(env, alloc, cnt, Some(usable), flags, "task_set_env") }
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_send_stepd(buffer: *mut sys::buf_t) {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::send_stepd::<$plugin>(buffer) }
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_recv_stepd(buffer: *mut sys::buf_t) {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::recv_stepd::<$plugin>(buffer) }
            }
            #[no_mangle]
            pub extern "C" fn gres_p_get_job_info(
                _js: *mut sys::gres_job_state_t,
                _node_inx: u32,
                _data_type: sys::gres_job_data_type,
                data: *mut c_void,
            ) -> c_int {
                ex::get_info::<$plugin>(data)
            }
            #[no_mangle]
            pub extern "C" fn gres_p_get_step_info(
                _ss: *mut sys::gres_step_state_t,
                _node_inx: u32,
                _data_type: sys::gres_step_data_type,
                data: *mut c_void,
            ) -> c_int {
                ex::get_info::<$plugin>(data)
            }
            #[no_mangle]
            pub extern "C" fn gres_p_get_devices() -> sys::List {
                ex::get_devices::<$plugin>(&DEVICES)
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_step_hardware_init(usable: *mut sys::bitstr_t, settings: *mut c_char) {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::step_hardware_init::<$plugin>(usable, settings) }
            }
            #[no_mangle]
            pub extern "C" fn gres_p_step_hardware_fini() {
                ex::step_hardware_fini::<$plugin>()
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_epilog_build_env(js: *mut sys::gres_job_state_t) -> *mut sys::gres_epilog_info_t {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::epilog_build_env::<$plugin>(js) }
            }
            #[no_mangle]
            pub unsafe extern "C" fn gres_p_epilog_set_env(env: *mut *mut *mut c_char, ei: *mut sys::gres_epilog_info_t, node_inx: c_int) {
                // SAFETY: slurmd's arguments, passed through unchanged.
                unsafe { ex::epilog_set_env::<$plugin>(env, ei, node_inx) }
            }
        };
    };
}
