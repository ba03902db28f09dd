//! `gres_gpu.so`: GPUs as a generic resource.

use super::{EnvTarget, GresPlugin, Host, NodeConfig, SetEnv};
use crate::core::devices::{self, DeviceList};
use crate::core::env::{self, EnvChange, EnvOp, EnvState, GpuEnvRequest};
use crate::core::model::{ConfFlags, EpilogInfo, GresDevice, GresRecord, JobAlloc};
use crate::core::wire::{self, WireError, WireReader, WireWriter};
use std::sync::{Mutex, MutexGuard};

/// The plugin's state in this process (slurmd, or one slurmstepd).
#[derive(Default)]
struct State {
    devices: Vec<GresDevice>,
    node_flags: ConfFlags,
    generation: u64,
    /// A configuration was loaded before: a failing load is a
    /// reconfiguration, not slurmd's start.
    loaded: bool,
    step_env: EnvState,
    task_env: EnvState,
}

static STATE: Mutex<State> = Mutex::new(State {
    devices: Vec::new(),
    node_flags: ConfFlags(0),
    generation: 0,
    loaded: false,
    step_env: EnvState { already_seen: false, local_inx: 0 },
    task_env: EnvState { already_seen: false, local_inx: 0 },
});

/// A poisoned lock only means a panic was caught while it was held; the
/// state itself is always left consistent, so keep using it.
fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct GresGpu;

impl GresGpu {
    fn set_devices(st: &mut State, devices: Vec<GresDevice>, node_flags: ConfFlags) {
        st.devices = devices;
        st.node_flags = node_flags;
        st.generation += 1;
    }
}

/// Log the problems of a device list; `Err` if one is fatal.
pub(crate) fn report_device_problems(list: &DeviceList, plugin_name: &str) -> Result<(), String> {
    for p in &list.problems {
        tracing::error!("{}", p.message);
    }
    if list.has_fatal() {
        Err(format!("{plugin_name} failed to load configuration"))
    } else {
        Ok(())
    }
}

/// Merge the detected GPUs into `records` and build the device list; on a
/// fatal problem the device list is left as it was.
fn load_config(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>, st: &mut State) -> Result<(), String> {
    super::gpu_detect::merge_detected_gpus(host, cfg, records, GresGpu::PLUGIN_NAME)?;
    let list = devices::build_device_list(records, GresGpu::GRES_NAME, cfg.in_slurmd, &devices::stat_device);
    if cfg.in_slurmd {
        // Stock says nothing here; two jobs could then be given one GPU.
        for same in devices::same_devices(&devices::file_uses(records, GresGpu::GRES_NAME, Some(&devices::stat_device))) {
            tracing::warn!("WARNING: {}", same.log_message(records));
        }
    }
    if host.debug_gres() {
        for d in &list.devices {
            tracing::info!(target: crate::log::VERBOSE, "GRES: {} device number {}({}):{}", GresGpu::GRES_NAME, d.dev_num, d.path, devices::device_id_string(d));
        }
    }
    report_device_problems(&list, GresGpu::PLUGIN_NAME)?;
    let flags = devices::node_env_flags(records);
    GresGpu::set_devices(st, list.devices, flags);
    Ok(())
}

impl GresPlugin for GresGpu {
    const PLUGIN_NAME: &'static str = super::files::GRES_GPU.name;
    const PLUGIN_TYPE: &'static str = super::files::GRES_GPU.plugin_type;
    const GRES_NAME: &'static str = "gpu";

    fn init() -> Result<(), String> {
        tracing::debug!("init: loaded");
        Ok(())
    }

    fn fini() {
        tracing::debug!("fini: unloading");
        let mut st = state();
        Self::set_devices(&mut st, Vec::new(), ConfFlags(0));
    }

    fn node_config_load(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<(), String> {
        let mut st = state();
        let reconfiguring = st.loaded;
        if reconfiguring {
            tracing::debug!("{}: Resetting gres_devices", Self::PLUGIN_NAME);
        }
        match load_config(host, cfg, records, &mut st) {
            Err(e) if reconfiguring => {
                // A reconfiguration with a broken configuration: slurmd
                // keeps running, and so do the jobs on the devices we
                // already had.  (The caller logs `e`.)
                tracing::error!("keeping the previous device list until gres.conf is fixed");
                Err(e)
            }
            // On the first load (slurmd's start, `slurmd -G`, slurmctld
            // for a cloud node) the stock plugin stops the process, and so
            // does ours: slurmd -G and the daemons end as they do with it.
            Err(e) => {
                drop(st);
                super::fatal(&e)
            }
            Ok(()) => {
                st.loaded = true;
                Ok(())
            }
        }
    }

    fn devices() -> Vec<GresDevice> {
        state().devices.clone()
    }

    fn devices_generation() -> u64 {
        state().generation
    }

    fn set_env(host: &dyn Host, target: EnvTarget<'_>, req: &SetEnv<'_>) -> EnvChange {
        let Some(mut st) = super::lock_for_env(&STATE, &target) else { return EnvChange::default() };
        let st = &mut *st;
        let mut job_state = EnvState::default();
        let (scope, env_state) = super::env_scope(target, &mut job_state, &mut st.step_env, &mut st.task_env);
        let request = GpuEnvRequest {
            devices: &st.devices,
            alloc: req.alloc,
            scope,
            flags: req.flags,
            node_flags: st.node_flags,
            use_local_dev_index: host.use_local_device_index(),
        };
        env::gpu_env(&request, env_state, req.current)
    }

    fn send_stepd(w: &mut dyn WireWriter) {
        let st = state();
        wire::write_gpu(w, &st.devices, st.node_flags);
    }

    fn recv_stepd(r: &mut dyn WireReader) -> Result<(), WireError> {
        let mut st = state();
        match wire::read_gpu(r) {
            Ok((devices, flags)) => {
                Self::set_devices(&mut st, devices, flags);
                Ok(())
            }
            Err(e) => {
                // Never keep half a device list: no GPU is better than a
                // wrong one.
                Self::set_devices(&mut st, Vec::new(), ConfFlags(0));
                Err(e)
            }
        }
    }

    fn epilog_build_env(job: &JobAlloc) -> Option<EpilogInfo> {
        Some(EpilogInfo { node_cnt: job.node_cnt, bit_alloc: job.bit_alloc.clone(), cnt_node_alloc: None })
    }

    fn epilog_set_env(info: &EpilogInfo, node_inx: usize) -> Vec<EnvOp> {
        if info.node_cnt == 0 {
            return Vec::new();
        }
        if node_inx >= info.node_cnt as usize {
            tracing::error!("epilog_set_env: bad node index ({node_inx} >= {})", info.node_cnt);
            return Vec::new();
        }
        let st = state();
        let alloc = info.bit_alloc.get(node_inx).and_then(Option::as_ref);
        env::epilog_env(&st.devices, alloc, st.node_flags)
    }

    fn step_hardware_init(host: &dyn Host, usable: Option<&crate::core::model::Bitmap>, settings: Option<&str>) {
        host.gpu_step_hardware_init(usable, settings);
    }

    fn step_hardware_fini(host: &dyn Host) {
        host.gpu_step_hardware_fini();
    }
}
