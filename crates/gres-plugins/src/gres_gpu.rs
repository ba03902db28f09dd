//! `gres_gpu.so`: GPUs as a generic resource.

use super::state::PluginState;
use super::{EnvTarget, GresPlugin, Host, NodeConfig, SetEnv};
use gres_core::devices::{self, DeviceList};
use gres_core::env::{self, EnvChange, EnvOp, EnvState, GpuEnvRequest};
use gres_core::model::{ConfFlags, EpilogInfo, GresDevice, GresRecord, JobAlloc};
use gres_core::wire::{self, WireError, WireReader, WireWriter};

/// What a load (or slurmstepd's message from slurmd) gives gres/gpu.
#[derive(Default)]
struct GpuDevices {
    devices: Vec<GresDevice>,
    node_flags: ConfFlags,
}

impl GpuDevices {
    const NONE: GpuDevices = GpuDevices { devices: Vec::new(), node_flags: ConfFlags(0) };
}

/// The plugin's state in this process (slurmd, or one slurmstepd).
static STATE: PluginState<GpuDevices> = PluginState::new(GpuDevices::NONE);

pub struct GresGpu;

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
fn load_config(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<GpuDevices, String> {
    super::gpu_detect::merge_detected_gpus(host, cfg, records, GresGpu::PLUGIN_NAME)?;
    let list = devices::build_device_list_with_files(records, GresGpu::GRES_NAME, cfg.in_slurmd, &devices::stat_device);
    if cfg.in_slurmd {
        // Stock says nothing here; two jobs could then be given one GPU.
        for same in devices::same_devices(&list.files) {
            tracing::warn!("WARNING: {}", same.log_message(records));
        }
    }
    if host.debug_gres() {
        for d in &list.devices {
            tracing::info!(target: crate::log::VERBOSE, "GRES: {} device number {}({}):{}", GresGpu::GRES_NAME, d.dev_num, d.path, devices::device_id_string(d));
        }
    }
    report_device_problems(&list, GresGpu::PLUGIN_NAME)?;
    Ok(GpuDevices { devices: list.devices, node_flags: devices::node_env_flags_for(records, host.behaviour()) })
}

impl GresPlugin for GresGpu {
    const PLUGIN_NAME: &'static str = gres_core::plugin_files::GRES_GPU.name;
    const PLUGIN_TYPE: &'static str = gres_core::plugin_files::GRES_GPU.plugin_type;
    const GRES_NAME: &'static str = "gpu";

    fn init() -> Result<(), String> {
        tracing::debug!("init: loaded");
        Ok(())
    }

    fn fini(host: &dyn Host) {
        tracing::debug!("fini: unloading");
        // slurmd's gpu plugin goes with gres/gpu, as stock unloads it
        // here: a reconfiguration then loads the one gres.conf now names.
        host.gpu_plugin_fini();
        STATE.lock().clear();
    }

    fn node_config_load(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<(), String> {
        STATE.load(|st| {
            if st.loaded() {
                tracing::debug!("{}: Resetting gres_devices", Self::PLUGIN_NAME);
            }
            load_config(host, cfg, records)
        })
    }

    fn devices() -> Vec<GresDevice> {
        STATE.lock().data().devices.clone()
    }

    fn devices_generation() -> u64 {
        STATE.generation()
    }

    fn set_env(host: &dyn Host, target: EnvTarget<'_>, req: &SetEnv<'_>) -> EnvChange {
        set_env(&STATE, host, target, req)
    }

    fn send_stepd_as(behaviour: &gres_core::behaviour::Behaviour, w: &mut dyn WireWriter) {
        let st = STATE.lock();
        wire::write_gpu_as(w, &st.data().devices, st.data().node_flags, behaviour);
    }

    fn recv_stepd_as(behaviour: &gres_core::behaviour::Behaviour, r: &mut dyn WireReader) -> Result<(), WireError> {
        let mut st = STATE.lock();
        match wire::read_gpu_as(r, behaviour) {
            Ok((devices, node_flags)) => {
                st.replace(GpuDevices { devices, node_flags });
                Ok(())
            }
            Err(e) => {
                // Never keep half a device list: no GPU is better than a
                // wrong one.
                st.clear();
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
        let st = STATE.lock();
        let alloc = info.bit_alloc.get(node_inx).and_then(Option::as_ref);
        env::epilog_env(&st.data().devices, alloc, st.data().node_flags)
    }

    fn step_hardware_init(host: &dyn Host, usable: Option<&gres_core::model::Bitmap>, settings: Option<&str>) {
        host.gpu_step_hardware_init(usable, settings);
    }

    fn step_hardware_fini(host: &dyn Host) {
        host.gpu_step_hardware_fini();
    }
}

/// `set_env` of gres/gpu over `state`.
fn set_env(state: &'static PluginState<GpuDevices>, host: &dyn Host, target: EnvTarget<'_>, req: &SetEnv<'_>) -> EnvChange {
    let Some(mut st) = state.lock_for_env(&target) else { return EnvChange::default() };
    let mut job_state = EnvState::default();
    let (data, scope, kept) = st.for_env(target, &mut job_state);
    // 22.05 keeps what an earlier call of the process set; later releases
    // start every call afresh.
    let mut fresh = EnvState::default();
    let env_state = if host.behaviour().stateless_env { &mut fresh } else { kept };
    let request = GpuEnvRequest {
        devices: &data.devices,
        alloc: req.alloc,
        scope,
        flags: req.flags,
        node_flags: data.node_flags,
        use_local_dev_index: host.use_local_device_index(),
        unique_id_in_env: host.behaviour().unique_id_in_env,
    };
    env::gpu_env(&request, env_state, req.current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_core::host::StandaloneHost as TestHost;
    use gres_core::model::{Bitmap, InternalFlags};

    /// A task's call never waits for the state lock: in slurmstepd's
    /// forked task a lock held at fork() is never released.  (Held here by
    /// another thread; the call must return at once, setting nothing.)
    #[test]
    fn task_set_env_never_waits_for_the_state_lock() {
        static STATE: PluginState<GpuDevices> = PluginState::new(GpuDevices::NONE);
        STATE.lock().replace(GpuDevices { devices: gres_core::model::test_devices(2), node_flags: ConfFlags(ConfFlags::ENV_NVML) });
        crate::state::tests::assert_task_set_env_never_waits(&STATE, || {
            let alloc = Bitmap::from_indices(2, &[1]);
            let usable = Bitmap::from_indices(2, &[1]);
            let none = |_: &str| None;
            let req = SetEnv { alloc: Some(&alloc), gres_cnt: 1, flags: InternalFlags(0), current: &none };
            set_env(&STATE, &TestHost::default(), EnvTarget::Task { usable: Some(&usable) }, &req)
        });
    }

    /// 22.05 (stateful): a second step call of the process keeps the
    /// variables an earlier one set; later releases (stateless) start
    /// afresh.  A whole GPU with a UniqueId is named by it only where the
    /// release says so.
    #[test]
    fn step_env_follows_the_behaviour() {
        use gres_core::behaviour::{Behaviour, UniqueIdInEnv};
        use gres_core::env::apply_to_map;
        use std::collections::HashMap;
        static STATE: PluginState<GpuDevices> = PluginState::new(GpuDevices::NONE);
        let run = |behaviour: Behaviour| {
            let mut devices = gres_core::model::test_devices(2);
            devices[0].unique_id = Some("GPU-0".into());
            STATE.lock().replace(GpuDevices { devices, node_flags: ConfFlags(ConfFlags::ENV_NVML) });
            let host = TestHost::new(behaviour);
            let mut env: HashMap<String, String> = HashMap::new();
            let alloc = Bitmap::from_indices(2, &[0, 1]);
            for alloc in [Some(&alloc), None] {
                let snapshot = env.clone();
                let current = |k: &str| snapshot.get(k).cloned();
                let req = SetEnv { alloc, gres_cnt: 2, flags: InternalFlags(0), current: &current };
                apply_to_map(&mut env, &set_env(&STATE, &host, EnvTarget::Step, &req).ops);
                if alloc.is_some() {
                    assert_eq!(env["SLURM_STEP_GPUS"], "0,1");
                }
            }
            env
        };
        let old = run(Behaviour::BASELINE);
        assert_eq!((old["SLURM_STEP_GPUS"].as_str(), old["CUDA_VISIBLE_DEVICES"].as_str()), ("0,1", "GPU-0,1"));
        let stateless = Behaviour { stateless_env: true, unique_id_in_env: UniqueIdInEnv::MigOnly, ..Behaviour::BASELINE };
        let new = run(stateless);
        assert!(!new.contains_key("SLURM_STEP_GPUS") && !new.contains_key("CUDA_VISIBLE_DEVICES"), "{new:?}");
    }
}
