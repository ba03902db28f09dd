//! What gres/mps and gres/shard have in common: a shared GRES whose count is
//! spread over the node's GPUs.  Each plugin file keeps one [`SharedState`]
//! and forwards its [`super::GresPlugin`] functions here with its
//! [`SharedKind`]; the rules themselves are in [`gres_core::sharing`].

use super::state::PluginState;
use super::{EnvTarget, Host, NodeConfig, SetEnv};
use gres_core::devices;
use gres_core::env::{EnvChange, EnvOp, EnvState};
use gres_core::model::{ConfFlags, EpilogInfo, GresDevice, GresRecord, JobAlloc};
use gres_core::sharing::{self, LoadInput, SharedDev, SharedEnvRequest, SharedKind};
use gres_core::wire::{self, SharedStepd, WireError, WireReader, WireWriter};

/// What a load (or slurmstepd's message from slurmd) gives a shared plugin.
#[derive(Default)]
pub struct SharedDevices {
    devices: Vec<GresDevice>,
    counts: Vec<SharedDev>,
    node_flags: ConfFlags,
}

impl SharedDevices {
    pub const NONE: SharedDevices = SharedDevices { devices: Vec::new(), counts: Vec::new(), node_flags: ConfFlags(0) };
}

/// A shared plugin's state in this process (slurmd, or one slurmstepd).
pub type SharedState = PluginState<SharedDevices>;

pub fn node_config_load(kind: SharedKind, state: &'static SharedState, host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<(), String> {
    state.load(|st| {
        if !st.data().devices.is_empty() {
            tracing::debug!("Resetting share_devices");
        }
        load(kind, host, cfg, records)
    })
}

/// Load the shared plugin's records and spread its counts over the GPUs.
fn load(kind: SharedKind, host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<SharedDevices, String> {
    let fake_gpus = host.extra_conf_path("fake_gpus.conf").is_some_and(|p| std::path::Path::new(&p).exists());
    let input = LoadInput {
        records,
        kind,
        in_slurmd: cfg.in_slurmd,
        debug_gres: host.debug_gres(),
        init_list_line_spelled: host.behaviour().init_list_line_spelled,
        fake_gpus,
        stat: &devices::stat_device,
        log_max: crate::log::max_level(),
    };
    let (result, logs) = sharing::load(&input);
    super::log_lines(&logs);
    let loaded = result?;
    // The node flags of the whole list, as the release forms them (bit 14
    // too where it means UUID: gres/shard then names devices by UUID).
    let node_flags = devices::node_env_flags_for(&loaded.records, host.behaviour());
    *records = loaded.records;
    Ok(SharedDevices { devices: loaded.devices, counts: loaded.counts, node_flags })
}

pub fn devices(state: &'static SharedState) -> Vec<GresDevice> {
    state.lock().data().devices.clone()
}

pub fn devices_generation(state: &'static SharedState) -> u64 {
    state.generation()
}

pub fn set_env(kind: SharedKind, state: &'static SharedState, host: &dyn Host, target: EnvTarget<'_>, req: &SetEnv<'_>) -> EnvChange {
    let Some(mut st) = state.lock_for_env(&target) else { return EnvChange::default() };
    let mut job_state = EnvState::default();
    let (data, scope, kept) = st.for_env(target, &mut job_state);
    let mut fresh = EnvState::default();
    let env_state = if host.behaviour().stateless_env { &mut fresh } else { kept };
    let request = SharedEnvRequest {
        kind,
        devices: &data.devices,
        counts: &data.counts,
        alloc: req.alloc,
        gres_cnt: req.gres_cnt,
        scope,
        flags: req.flags,
        node_flags: data.node_flags,
        use_local_dev_index: host.use_local_device_index(),
        unique_id_in_env: host.behaviour().unique_id_in_env,
    };
    let out = sharing::shared_env(&request, env_state, req.current);
    super::log_lines(&out.logs);
    out.change
}

pub fn send_stepd(kind: SharedKind, state: &'static SharedState, w: &mut dyn WireWriter, behaviour: &gres_core::behaviour::Behaviour) {
    let st = state.lock();
    let data = st.data();
    let info = SharedStepd { devices: data.devices.clone(), node_flags: data.node_flags, counts: data.counts.clone() };
    wire::write_shared_as(w, kind, &info, behaviour);
}

pub fn recv_stepd(kind: SharedKind, state: &'static SharedState, r: &mut dyn WireReader, behaviour: &gres_core::behaviour::Behaviour) -> Result<(), WireError> {
    let mut st = state.lock();
    match wire::read_shared_as(r, kind, behaviour) {
        Ok(info) => {
            st.replace(SharedDevices { devices: info.devices, counts: info.counts, node_flags: info.node_flags });
            Ok(())
        }
        Err(e) => {
            // No device is better than a wrong one.
            st.clear();
            Err(e)
        }
    }
}

pub fn epilog_build_env(job: &JobAlloc) -> Option<EpilogInfo> {
    Some(sharing::epilog_info(job))
}

pub fn epilog_set_env(kind: SharedKind, state: &'static SharedState, info: &EpilogInfo, node_inx: usize) -> Vec<EnvOp> {
    let st = state.lock();
    let data = st.data();
    let (ops, logs) = sharing::shared_epilog_env(kind, &data.devices, &data.counts, data.node_flags, info, node_inx);
    super::log_lines(&logs);
    ops
}

/// Declare a shared GRES plugin type (`gres_mps`, `gres_shard`): its
/// `GresPlugin` implementation over this module, with its own state.
/// `forward_gpu_freq` hands `--gpu-freq` to slurmd's gpu plugin, as the
/// stock gres/shard does (jobs using MPS cannot ask for a GPU frequency).
macro_rules! sharing_gres_plugin {
    ($plugin:ident, $kind:expr, file: $file:expr, gres: $gres:literal, forward_gpu_freq: $hw:literal) => {
        pub struct $plugin;

        static STATE: $crate::sharing::SharedState = $crate::sharing::SharedState::new($crate::sharing::SharedDevices::NONE);
        const KIND: ::gres_core::sharing::SharedKind = $kind;

        impl $crate::GresPlugin for $plugin {
            const PLUGIN_NAME: &'static str = $file.name;
            const PLUGIN_TYPE: &'static str = $file.plugin_type;
            const GRES_NAME: &'static str = $gres;

            fn init() -> Result<(), String> {
                tracing::debug!("loaded");
                Ok(())
            }
            fn fini(_host: &dyn $crate::Host) {
                tracing::debug!("unloading");
            }
            fn node_config_load(host: &dyn $crate::Host, cfg: $crate::NodeConfig, records: &mut Vec<::gres_core::model::GresRecord>) -> Result<(), String> {
                $crate::sharing::node_config_load(KIND, &STATE, host, cfg, records)
            }
            fn devices() -> Vec<::gres_core::model::GresDevice> {
                $crate::sharing::devices(&STATE)
            }
            fn devices_generation() -> u64 {
                $crate::sharing::devices_generation(&STATE)
            }
            fn set_env(host: &dyn $crate::Host, target: $crate::EnvTarget<'_>, req: &$crate::SetEnv<'_>) -> ::gres_core::env::EnvChange {
                $crate::sharing::set_env(KIND, &STATE, host, target, req)
            }
            fn send_stepd_as(behaviour: &::gres_core::behaviour::Behaviour, w: &mut dyn ::gres_core::wire::WireWriter) {
                $crate::sharing::send_stepd(KIND, &STATE, w, behaviour)
            }
            fn recv_stepd_as(
                behaviour: &::gres_core::behaviour::Behaviour,
                r: &mut dyn ::gres_core::wire::WireReader,
            ) -> Result<(), ::gres_core::wire::WireError> {
                $crate::sharing::recv_stepd(KIND, &STATE, r, behaviour)
            }
            fn epilog_build_env(job: &::gres_core::model::JobAlloc) -> Option<::gres_core::model::EpilogInfo> {
                $crate::sharing::epilog_build_env(job)
            }
            fn epilog_set_env(info: &::gres_core::model::EpilogInfo, node_inx: usize) -> Vec<::gres_core::env::EnvOp> {
                $crate::sharing::epilog_set_env(KIND, &STATE, info, node_inx)
            }
            fn step_hardware_init(host: &dyn $crate::Host, usable: Option<&::gres_core::model::Bitmap>, settings: Option<&str>) {
                if $hw {
                    host.gpu_step_hardware_init(usable, settings);
                }
            }
            fn step_hardware_fini(host: &dyn $crate::Host) {
                if $hw {
                    host.gpu_step_hardware_fini();
                }
            }
        }
    };
}
pub(crate) use sharing_gres_plugin;

#[cfg(test)]
mod tests {
    use super::*;
    use gres_core::model::{Bitmap, InternalFlags};
    use gres_core::sharing::SharedDev;
    use gres_core::wire::MemWire;

    /// Outside slurmd: no fake_gpus.conf, no gpu plugin.
    use gres_core::host::StandaloneHost as TestHost;

    fn gpus() -> GresRecord {
        GresRecord {
            name: "gpu".into(),
            count: 2,
            cpu_cnt: 4,
            file: Some("/dev/nvidia[0-1]".into()),
            flags: ConfFlags(ConfFlags::HAS_FILE | ConfFlags::ENV_NVML),
            ..Default::default()
        }
    }

    fn nvidia(n: u32) -> Vec<GresDevice> {
        gres_core::model::test_devices(n)
    }

    /// Where bit 14 means UUID (`Flags=env_uuid`), gres/shard's node flags
    /// carry it; elsewhere they do not.
    #[test]
    fn shard_node_flags_carry_uuid_where_the_release_does() {
        use gres_core::behaviour::{Behaviour, ConfBit14};
        static STATE: SharedState = SharedState::new(SharedDevices::NONE);
        let node_flags = |behaviour: Behaviour| {
            let gpu = GresRecord { flags: ConfFlags(ConfFlags::HAS_FILE | ConfFlags::ENV_NVML | ConfFlags::BIT14), ..gpus() };
            let shard = GresRecord { name: "shard".into(), count: 4, cpu_cnt: 4, ..Default::default() };
            let mut records = vec![gpu, shard];
            let cfg = NodeConfig { cpu_cnt: 4, in_slurmd: false };
            node_config_load(SharedKind::Shard, &STATE, &TestHost::new(behaviour), cfg, &mut records).unwrap();
            STATE.lock().data().node_flags.0
        };
        assert_eq!(node_flags(Behaviour::BASELINE), ConfFlags::ENV_NVML);
        assert_eq!(node_flags(Behaviour { conf_bit14: ConfBit14::GlobalIndex, ..Behaviour::BASELINE }), ConfFlags::ENV_NVML);
        assert_eq!(node_flags(Behaviour { conf_bit14: ConfBit14::Uuid, ..Behaviour::BASELINE }), ConfFlags::ENV_NVML | ConfFlags::BIT14);
    }

    #[test]
    fn load_rewrites_records_and_keeps_counts() {
        static STATE: SharedState = SharedState::new(SharedDevices::NONE);
        let mps = GresRecord { name: "mps".into(), count: 300, cpu_cnt: 4, ..Default::default() };
        let mut records = vec![gpus(), mps];
        let cfg = NodeConfig { cpu_cnt: 4, in_slurmd: false };
        node_config_load(SharedKind::Mps, &STATE, &TestHost::default(), cfg, &mut records).unwrap();
        assert_eq!(records.len(), 4);
        assert_eq!(STATE.lock().data().counts, vec![SharedDev { id: 0, count: 150 }, SharedDev { id: 1, count: 150 }]);
        let generation = devices_generation(&STATE);

        // A broken configuration leaves records and state as they were.
        let mut bad = vec![GresRecord { name: "mps".into(), count: 1, ..Default::default() }];
        let before = bad.clone();
        assert!(node_config_load(SharedKind::Mps, &STATE, &TestHost::default(), cfg, &mut bad).is_err());
        assert_eq!(bad, before);
        assert_eq!(STATE.lock().data().counts.len(), 2);
        assert_eq!(devices_generation(&STATE), generation);
    }

    #[test]
    fn stepd_state_drives_the_environment() {
        static SLURMD: SharedState = SharedState::new(SharedDevices::NONE);
        static STEPD: SharedState = SharedState::new(SharedDevices::NONE);
        SLURMD.lock().replace(SharedDevices {
            devices: nvidia(2),
            counts: vec![SharedDev { id: 0, count: 1300 }, SharedDev { id: 1, count: 1200 }],
            node_flags: ConfFlags(0),
        });
        let mut w = MemWire::default();
        send_stepd(SharedKind::Mps, &SLURMD, &mut w, &gres_core::behaviour::Behaviour::BASELINE);
        recv_stepd(SharedKind::Mps, &STEPD, &mut w, &gres_core::behaviour::Behaviour::BASELINE).unwrap();
        assert_eq!(super::devices(&STEPD), nvidia(2));

        let alloc = Bitmap::from_indices(2, &[1]);
        let none = |_: &str| None;
        let req = SetEnv { alloc: Some(&alloc), gres_cnt: 200, flags: InternalFlags(0), current: &none };
        let change = set_env(SharedKind::Mps, &STEPD, &TestHost::default(), EnvTarget::Step, &req);
        assert!(change.ops.contains(&EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "1".into())));
        assert!(change.ops.contains(&EnvOp::Set("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "16".into())));

        // A truncated message leaves no device behind.
        let mut w = MemWire::default();
        send_stepd(SharedKind::Mps, &SLURMD, &mut w, &gres_core::behaviour::Behaviour::BASELINE);
        w.bytes.truncate(w.bytes.len() - 3);
        assert!(recv_stepd(SharedKind::Mps, &STEPD, &mut w, &gres_core::behaviour::Behaviour::BASELINE).is_err());
        assert!(super::devices(&STEPD).is_empty());
    }

    /// Where the release packs the device flags, a MIG device stays one in
    /// slurmstepd, and a shard step on it is named by its UUID under the
    /// MIG-only rule; with the baseline layout it is named by index.
    #[test]
    fn mig_mark_reaches_slurmstepd_where_the_release_packs_it() {
        use gres_core::behaviour::{Behaviour, UniqueIdInEnv};
        static SLURMD: SharedState = SharedState::new(SharedDevices::NONE);
        static STEPD: SharedState = SharedState::new(SharedDevices::NONE);
        let mut devices = nvidia(2);
        devices[1].unique_id = Some("MIG-1".into());
        devices[1].mig = true;
        SLURMD.lock().replace(SharedDevices {
            devices,
            counts: vec![SharedDev { id: 0, count: 2 }, SharedDev { id: 1, count: 2 }],
            node_flags: ConfFlags(ConfFlags::ENV_NVML),
        });
        let vendor = |behaviour: Behaviour| {
            let mut w = MemWire::default();
            send_stepd(SharedKind::Shard, &SLURMD, &mut w, &behaviour);
            recv_stepd(SharedKind::Shard, &STEPD, &mut w, &behaviour).unwrap();
            let alloc = Bitmap::from_indices(2, &[1]);
            let none = |_: &str| None;
            let req = SetEnv { alloc: Some(&alloc), gres_cnt: 1, flags: InternalFlags(0), current: &none };
            let change = set_env(SharedKind::Shard, &STEPD, &TestHost::new(behaviour), EnvTarget::Step, &req);
            change.ops.iter().find_map(|op| match op {
                EnvOp::Set(k, v) if k == "CUDA_VISIBLE_DEVICES" => Some(v.clone()),
                _ => None,
            })
        };
        let mig_only = Behaviour { unique_id_in_env: UniqueIdInEnv::MigOnly, stateless_env: true, ..Behaviour::BASELINE };
        assert_eq!(vendor(Behaviour { device_flags_on_wire: true, ..mig_only }), Some("MIG-1".into()));
        assert_eq!(vendor(mig_only), Some("1".into()));
        assert_eq!(vendor(Behaviour::BASELINE), Some("MIG-1".into()));
    }

    /// A task's call never waits for the state lock: in slurmstepd's
    /// forked task a lock held at fork() is never released.  (Held here by
    /// another thread; the call must return at once, setting nothing.)
    #[test]
    fn task_set_env_never_waits_for_the_state_lock() {
        static STATE: SharedState = SharedState::new(SharedDevices::NONE);
        STATE.lock().replace(SharedDevices {
            devices: nvidia(2),
            counts: vec![SharedDev { id: 0, count: 100 }, SharedDev { id: 1, count: 100 }],
            node_flags: ConfFlags(0),
        });
        crate::state::tests::assert_task_set_env_never_waits(&STATE, || {
            let alloc = Bitmap::from_indices(2, &[1]);
            let usable = Bitmap::from_indices(2, &[1]);
            let none = |_: &str| None;
            let req = SetEnv { alloc: Some(&alloc), gres_cnt: 50, flags: InternalFlags(0), current: &none };
            set_env(SharedKind::Mps, &STATE, &TestHost::default(), EnvTarget::Task { usable: Some(&usable) }, &req)
        });
    }

    #[test]
    fn epilog_of_a_shard_job() {
        static STATE: SharedState = SharedState::new(SharedDevices::NONE);
        STATE.lock().replace(SharedDevices { devices: nvidia(2), counts: Vec::new(), node_flags: ConfFlags(ConfFlags::ENV_NVML | ConfFlags::ENV_RSMI) });
        let job = JobAlloc { node_cnt: 1, bit_alloc: vec![Some(Bitmap::from_indices(2, &[0]))], cnt_node_alloc: Some(vec![3]) };
        let info = epilog_build_env(&job).unwrap();
        let ops = epilog_set_env(SharedKind::Shard, &STATE, &info, 0);
        assert_eq!(
            ops,
            vec![
                EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "0".into()),
                EnvOp::Set("ROCR_VISIBLE_DEVICES".into(), "0".into()),
                EnvOp::Set("SLURM_JOB_GPUS".into(), "0".into()),
            ]
        );
    }
}
