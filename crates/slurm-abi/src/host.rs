//! [`Host`] for the real slurmd: calls back into libslurmfull.so.

use super::slurm::{self, bitmap_to_c, string_from_c};
use super::sys;
use gres_core::host::Host;
use gres_core::model::{Bitmap, GresRecord};
use std::ffi::{c_char, c_int, CString};
use std::ptr;

/// slurmd's `int (*)(char *in_range, char **out_range)` CPU converter.
type CpuConverter = unsafe extern "C" fn(*mut c_char, *mut *mut c_char) -> c_int;

/// Largest CPU id + 1 an NVML affinity mask can name.
const MAX_CPUS: usize = gres_core::nvml_model::MAX_CPUS;

/// The host of one call from slurmd.  Its fields are private and the
/// constructor that takes slurmd's pointer is `unsafe`: safe code can only
/// make [`SlurmHost::plain`], which holds no pointer.
///
/// ```
/// let host = gres_slurm_abi::host::SlurmHost::plain();
/// # let _ = host;
/// ```
///
/// ```compile_fail
/// // A dangling pointer that a safe method would dereference: refused.
/// let host = gres_slurm_abi::host::SlurmHost { mac_to_abs: None, node_config: 8 as *mut _ };
/// ```
pub struct SlurmHost {
    /// `node_config_load_t.xcpuinfo_mac_to_abs`, when slurmd passed one.
    mac_to_abs: Option<CpuConverter>,
    /// The `node_config_load_t` of the current call, for slurmd's gpu plugin.
    node_config: *mut sys::node_config_load_t,
}

impl SlurmHost {
    /// No call's configuration: what every entry point but
    /// `node_config_load` and `get_system_gpu_list` is given.
    pub fn plain() -> SlurmHost {
        SlurmHost { mac_to_abs: None, node_config: ptr::null_mut() }
    }

    /// The host of a `node_config_load` / `get_system_gpu_list` call.
    ///
    /// # Safety
    /// `cfg` is NULL or the `node_config_load_t` slurmd passed to the
    /// current call, valid until it returns; the host must not outlive
    /// the call.
    pub(super) unsafe fn for_node_config(cfg: *mut sys::node_config_load_t) -> SlurmHost {
        if cfg.is_null() {
            return SlurmHost::plain();
        }
        // SAFETY: valid for the call per this function's contract.
        let mac_to_abs = unsafe { (*cfg).xcpuinfo_mac_to_abs };
        SlurmHost { mac_to_abs, node_config: cfg }
    }
}

/// Run slurmd's CPU range converter (`xcpuinfo_mac_to_abs`) on `range`.
fn convert_cpus(f: CpuConverter, range: &str) -> Option<String> {
    let c = CString::new(range).ok()?;
    let mut out: *mut c_char = ptr::null_mut();
    // SAFETY: slurmd's converter reads the NUL-terminated range and
    // stores an xmalloc'd result (or nothing) in `out`.
    let rc = unsafe { f(c.as_ptr() as *mut c_char, &mut out) };
    // SAFETY: NULL or a valid C string.
    let s = unsafe { string_from_c(out) };
    let mut v = out.cast();
    // SAFETY: `out` came from xmalloc or is NULL.
    unsafe { sys::slurm_xfree(&mut v) };
    (rc == 0).then_some(s).flatten()
}

fn free_bitmap(mut b: *mut sys::bitstr_t) {
    if !b.is_null() {
        // SAFETY: `b` came from bitmap_to_c; bit_free takes its address.
        unsafe { sys::slurm_bit_free(&mut b) };
    }
}

impl Host for SlurmHost {
    fn behaviour(&self) -> &gres_core::behaviour::Behaviour {
        super::behaviour::build()
    }

    fn autodetect_flags(&self) -> u32 {
        // SAFETY: no arguments; reads slurmd's parsed gres.conf state.
        unsafe { sys::gres_get_autodetect_flags() }
    }

    fn gpu_plugin_system_gpus(&self) -> Option<Vec<GresRecord>> {
        if self.node_config.is_null() {
            return None;
        }
        // SAFETY: `node_config` is the valid pointer slurmd passed to this
        // node_config_load call; the returned list is ours to destroy.
        unsafe { slurm::take_record_list(sys::gpu_g_get_system_gpu_list(self.node_config)) }
    }

    fn extra_conf_path(&self, name: &str) -> Option<String> {
        slurm::extra_conf_path(name)
    }

    fn mac_to_abs(&self, mac: &str) -> Option<String> {
        convert_cpus(self.mac_to_abs?, mac)
    }

    fn enabled_cpus(&self) -> Option<Bitmap> {
        // SAFETY: the shim returns slurm_conf.slurmd_params (NULL or a
        // string owned by the daemon's configuration), copied at once.
        let params = unsafe { string_from_c(sys::gres_rs_slurmd_params()) }.unwrap_or_default();
        if params.to_ascii_lowercase().contains("allow_ecores") {
            return None;
        }
        // slurmd's CPUs are reached only through its converter, which
        // takes a machine CPU exactly when it is below the size of slurmd's
        // block_map (the topology it loaded, E-cores left out): find that
        // size, doubling then halving.
        let f = self.mac_to_abs?;
        let takes = |cpu: usize| convert_cpus(f, &cpu.to_string()).is_some();
        if !takes(0) {
            return None;
        }
        let (mut yes, mut no) = (0, 1);
        while no < MAX_CPUS && takes(no) {
            yes = no;
            no = (no * 2).min(MAX_CPUS);
        }
        while no - yes > 1 {
            let mid = yes + (no - yes) / 2;
            if takes(mid) {
                yes = mid;
            } else {
                no = mid;
            }
        }
        let cpus: Vec<usize> = (0..=yes).collect();
        Some(Bitmap::from_indices(yes + 1, &cpus))
    }

    fn gpu_plugin_fini(&self) {
        // SAFETY: no arguments; slurmd's gpu interface does nothing when no
        // gpu plugin is loaded, and takes its own lock otherwise.
        unsafe { sys::gpu_plugin_fini() };
    }

    fn use_local_device_index(&self) -> bool {
        // SAFETY: no arguments; reads slurmd's configuration.
        unsafe { sys::gres_use_local_device_index() }
    }

    fn debug_gres(&self) -> bool {
        // SAFETY: shim reading slurm_conf.debug_flags.
        unsafe { sys::gres_rs_debug_flag_gres() }
    }

    fn gpu_step_hardware_init(&self, usable: Option<&Bitmap>, settings: Option<&str>) {
        let b = usable.map(bitmap_to_c).unwrap_or(ptr::null_mut());
        let s = settings.and_then(|s| CString::new(s).ok());
        let sp = s.as_ref().map(|s| s.as_ptr() as *mut c_char).unwrap_or(ptr::null_mut());
        // SAFETY: both arguments are valid or NULL for the call; the gpu
        // plugin copies what it keeps.
        unsafe { sys::gpu_g_step_hardware_init(b, sp) };
        free_bitmap(b);
    }

    fn gpu_step_hardware_fini(&self) {
        // SAFETY: no arguments.
        unsafe { sys::gpu_g_step_hardware_fini() };
    }

    fn gpu_freq_def(&self) -> Option<String> {
        // SAFETY: the shim returns slurm_conf.gpu_freq_def (NULL or a
        // string owned by slurmd's configuration), copied at once.
        unsafe { string_from_c(sys::gres_rs_gpu_freq_def()) }
    }

    fn test_cpu_conv(&self, mask: &str) -> Option<String> {
        let c = CString::new(mask).ok()?;
        // SAFETY: valid string; the result is xmalloc'd or NULL.
        let p = unsafe { sys::gpu_g_test_cpu_conv(c.as_ptr() as *mut c_char) };
        // SAFETY: NULL or a valid C string.
        let s = unsafe { string_from_c(p) };
        let mut v = p.cast();
        // SAFETY: from xmalloc or NULL.
        unsafe { sys::slurm_xfree(&mut v) };
        s
    }
}
