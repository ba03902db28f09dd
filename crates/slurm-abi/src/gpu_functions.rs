//! The bodies of the exported `gpu_p_*` functions (the gpu plugin
//! interface of slurmd), generic over the plugin (those every plugin file
//! has are in [`super::common_functions`]).

use super::common_functions::{SLURM_ERROR, SLURM_SUCCESS};
use super::guard::guard;
use super::host::SlurmHost;
use super::slurm;
use super::sys;
use crate::plugins::{GpuPlugin, NodeConfig};
use std::ffi::{c_char, c_int, c_uint};
use std::ptr;

pub fn reconfig<P: GpuPlugin>() -> c_int {
    guard(P::PLUGIN_TYPE, "reconfig", SLURM_SUCCESS, || {
        P::reconfig();
        SLURM_SUCCESS
    })
}

/// # Safety
/// `cfg` is slurmd's `node_config_load_t` for the call.
pub unsafe fn get_system_gpu_list<P: GpuPlugin>(cfg: *mut sys::node_config_load_t) -> sys::List {
    guard(P::PLUGIN_TYPE, "get_system_gpu_list", ptr::null_mut(), || {
        if cfg.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: valid for the call per the contract.
        let c = unsafe { &*cfg };
        // SAFETY: slurmd's pointer for this call; `host` lives only in it.
        let host = unsafe { SlurmHost::for_node_config(cfg) };
        match P::system_gpu_list(&host, NodeConfig { cpu_cnt: c.cpu_cnt, in_slurmd: c.in_slurmd }) {
            None => ptr::null_mut(),
            Some(records) => {
                // SAFETY: a new list destroyed by slurmd with the records'
                // own destructor.
                let list = unsafe { sys::slurm_list_create(Some(sys::destroy_gres_slurmd_conf)) };
                // SAFETY: `list` is a valid list of gres_slurmd_conf_t.
                unsafe { slurm::replace_list_records(list, &records) };
                list
            }
        }
    })
}

/// # Safety
/// `range` NULL or a C string.
pub unsafe fn test_cpu_conv<P: GpuPlugin>(range: *mut c_char) -> *mut c_char {
    guard(P::PLUGIN_TYPE, "test_cpu_conv", ptr::null_mut(), || {
        // SAFETY: per the contract.
        let Some(r) = (unsafe { slurm::string_from_c(range) }) else { return ptr::null_mut() };
        slurm::xstrdup(P::test_cpu_conv(&r).as_deref())
    })
}

/// # Safety
/// `gpu` NULL or a valid `gpu_status_t` to fill.
///
/// As gpu/rsmi does: the current power goes to `last_update_watt` with the
/// time of the reading (the previous time moves to `previous_update_time`),
/// from which acct_gather_energy/gpu integrates the energy; a failed
/// reading sets `current_watts` to NO_VAL.
pub unsafe fn energy_read<P: GpuPlugin>(dv_ind: u32, gpu: *mut sys::gpu_status_t) -> c_int {
    guard(P::PLUGIN_TYPE, "energy_read", SLURM_ERROR, || {
        if gpu.is_null() {
            return SLURM_ERROR;
        }
        // SAFETY: valid per the contract; plain field writes.
        let g = unsafe { &mut *gpu };
        match P::energy_read(dv_ind) {
            None => {
                g.energy.current_watts = crate::core::model::NO_VAL;
                SLURM_ERROR
            }
            Some(e) => {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
                g.last_update_watt = e.current_watts;
                g.previous_update_time = g.last_update_time;
                g.last_update_time = now;
                SLURM_SUCCESS
            }
        }
    })
}

/// # Safety
/// `count` NULL or valid for a write.
pub unsafe fn get_device_count<P: GpuPlugin>(count: *mut c_uint) {
    guard(P::PLUGIN_TYPE, "get_device_count", (), || {
        if count.is_null() {
            return;
        }
        // SAFETY: valid for a write per the contract.
        unsafe { *count = P::device_count().unwrap_or(0) };
    })
}

/// `gpu_p_usage_read` (slurmstepd's jobacct_gather, 23.02 on): the GPU
/// memory and utilisation of process `pid` into `data`, an array indexed
/// by TRES position.  Ours tracks neither TRES: like stock gpu/generic,
/// and like gpu/nvml when `AccountingStorageTRES` has no `gres/gpumem` /
/// `gres/gpuutil`, it leaves `data` as it is and succeeds.
#[cfg(slurm_gpu_usage_read)]
pub fn usage_read<P: GpuPlugin>(_pid: c_int, _data: *mut sys::acct_gather_data_t) -> c_int {
    guard(P::PLUGIN_TYPE, "usage_read", SLURM_SUCCESS, || SLURM_SUCCESS)
}
