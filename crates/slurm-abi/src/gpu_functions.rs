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
        let r = unsafe { slurm::string_from_c(range) };
        slurm::xstrdup(P::test_cpu_conv(r.as_deref()).as_deref())
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
                g.energy.current_watts = gres_core::model::NO_VAL;
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
/// memory and utilisation of process `pid` into `data`, slurmstepd's
/// array of the cluster's TRES, at the positions of `gres/gpumem` and
/// `gres/gpuutil` (`gpu_get_tres_pos`; -1 for a TRES the cluster does not
/// account, which is never written).  What is read follows
/// [`gres_core::gpu_usage`]; a position that is not accounted is left
/// as jobacct_gather set it.
///
/// # Safety
/// `data` NULL or slurmstepd's array of one `acct_gather_data_t` per TRES,
/// which the positions `gpu_get_tres_pos` gives index.
#[cfg(slurm_gpu_usage_read)]
pub unsafe fn usage_read<P: GpuPlugin>(pid: c_int, data: *mut sys::acct_gather_data_t) -> c_int {
    use gres_core::gpu_usage::Tracked;
    guard(P::PLUGIN_TYPE, "usage_read", SLURM_SUCCESS, || {
        let (mut mem_pos, mut util_pos): (c_int, c_int) = (-1, -1);
        // SAFETY: two valid out-pointers; slurmstepd's libslurmfull looks
        // the TRES up once in its association manager and caches them.
        unsafe { sys::gpu_get_tres_pos(&mut mem_pos, &mut util_pos) };
        let tracked = Tracked { gpumem: mem_pos >= 0, gpuutil: util_pos >= 0 };
        if data.is_null() || pid <= 0 || !tracked.reads(super::behaviour::build().usage_tres_independent) {
            tracing::trace!("gpu_p_usage_read: We are not tracking TRES gpuutil/gpumem");
            return SLURM_SUCCESS;
        }
        // SAFETY: `util_pos` indexes `data` per the contract when it is
        // not -1; a plain field read.
        let last_time = if tracked.gpuutil { unsafe { (*data.add(util_pos as usize)).last_time } } else { 0 };
        let Some(usage) = P::usage_read(pid as u32, last_time) else { return SLURM_SUCCESS };
        if tracked.gpumem {
            // SAFETY: as above, for `mem_pos`.
            unsafe { (*data.add(mem_pos as usize)).size_read = usage.mem_bytes };
        }
        if tracked.gpuutil {
            // SAFETY: as above.
            let d = unsafe { &mut *data.add(util_pos as usize) };
            d.size_read = usage.sm_util;
            d.last_time = usage.last_time;
        }
        tracing::trace!(target: gres_log::DEBUG3, "pid {pid} has GPUUtil={} and MemMB={}", usage.sm_util, usage.mem_bytes / 1_048_576);
        SLURM_SUCCESS
    })
}
