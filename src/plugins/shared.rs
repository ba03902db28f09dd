//! What gres/mps and gres/shard have in common: a shared GRES whose count is
//! spread over the node's GPUs.  Each plugin file keeps one [`SharedState`]
//! and forwards its [`super::GresPlugin`] functions here with its
//! [`SharedKind`]; the rules themselves are in [`crate::core::shared`].

use super::{EnvTarget, Host, NodeConfig, SetEnv};
use crate::core::devices;
use crate::core::env::{EnvChange, EnvOp, EnvState};
use crate::core::model::{ConfFlags, EpilogInfo, GresDevice, GresRecord, JobAlloc};
use crate::core::shared::{self, LoadInput, SharedDev, SharedEnvRequest, SharedKind, StepdInfo};
use crate::core::wire::{WireError, WireReader, WireWriter};
use std::sync::{Mutex, MutexGuard};

/// A shared plugin's state in this process (slurmd, or one slurmstepd).
pub struct SharedState {
    devices: Vec<GresDevice>,
    counts: Vec<SharedDev>,
    node_flags: ConfFlags,
    generation: u64,
    /// A configuration was loaded before: a failing load is a
    /// reconfiguration, not slurmd's start.
    loaded: bool,
    step_env: EnvState,
    task_env: EnvState,
}

impl SharedState {
    pub const fn new() -> SharedState {
        SharedState {
            devices: Vec::new(),
            counts: Vec::new(),
            node_flags: ConfFlags(0),
            generation: 0,
            loaded: false,
            step_env: EnvState { already_seen: false, local_inx: 0 },
            task_env: EnvState { already_seen: false, local_inx: 0 },
        }
    }

    fn replace(&mut self, devices: Vec<GresDevice>, counts: Vec<SharedDev>, node_flags: ConfFlags) {
        self.devices = devices;
        self.counts = counts;
        self.node_flags = node_flags;
        self.generation += 1;
    }
}

impl Default for SharedState {
    fn default() -> Self {
        Self::new()
    }
}

/// A poisoned lock only means a panic was caught while it was held; the
/// state is replaced as a whole, so it is always consistent.
pub fn lock(state: &'static Mutex<SharedState>) -> MutexGuard<'static, SharedState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn node_config_load(
    kind: SharedKind,
    state: &'static Mutex<SharedState>,
    host: &dyn Host,
    cfg: NodeConfig,
    records: &mut Vec<GresRecord>,
) -> Result<(), String> {
    let mut st = lock(state);
    if !st.devices.is_empty() {
        tracing::debug!("Resetting share_devices");
    }
    let fake_gpus = host.extra_conf_path("fake_gpus.conf").is_some_and(|p| std::path::Path::new(&p).exists());
    let input = LoadInput {
        records,
        kind,
        in_slurmd: cfg.in_slurmd,
        debug_gres: host.debug_gres(),
        fake_gpus,
        stat: &devices::stat_device,
        log_max: crate::log::max_level(),
    };
    let (result, logs) = shared::load(&input);
    super::log_lines(&logs);
    match result {
        Ok(loaded) => {
            *records = loaded.records;
            st.replace(loaded.devices, loaded.counts, loaded.node_flags);
            st.loaded = true;
            Ok(())
        }
        // On a reconfiguration the node keeps what it had and slurmd runs
        // on; on the first load the process stops, as with the stock
        // plugin's fatal().
        Err(e) if st.loaded => {
            tracing::error!("keeping the previous device list until gres.conf is fixed");
            Err(e)
        }
        Err(e) => {
            drop(st);
            super::fatal(&e)
        }
    }
}

pub fn devices(state: &'static Mutex<SharedState>) -> Vec<GresDevice> {
    lock(state).devices.clone()
}

pub fn devices_generation(state: &'static Mutex<SharedState>) -> u64 {
    lock(state).generation
}

pub fn set_env(kind: SharedKind, state: &'static Mutex<SharedState>, host: &dyn Host, target: EnvTarget<'_>, req: &SetEnv<'_>) -> EnvChange {
    let Some(mut st) = super::lock_for_env(state, &target) else { return EnvChange::default() };
    let st = &mut *st;
    let mut job_state = EnvState::default();
    let (scope, env_state) = super::env_scope(target, &mut job_state, &mut st.step_env, &mut st.task_env);
    let request = SharedEnvRequest {
        kind,
        devices: &st.devices,
        counts: &st.counts,
        alloc: req.alloc,
        gres_cnt: req.gres_cnt,
        scope,
        flags: req.flags,
        node_flags: st.node_flags,
        use_local_dev_index: host.use_local_device_index(),
    };
    let out = shared::shared_env(&request, env_state, req.current);
    super::log_lines(&out.logs);
    out.change
}

pub fn send_stepd(kind: SharedKind, state: &'static Mutex<SharedState>, w: &mut dyn WireWriter) {
    let st = lock(state);
    let info = StepdInfo { devices: st.devices.clone(), node_flags: st.node_flags, counts: st.counts.clone() };
    shared::write_stepd(w, kind, &info);
}

pub fn recv_stepd(kind: SharedKind, state: &'static Mutex<SharedState>, r: &mut dyn WireReader) -> Result<(), WireError> {
    let mut st = lock(state);
    match shared::read_stepd(r, kind) {
        Ok(info) => {
            st.replace(info.devices, info.counts, info.node_flags);
            Ok(())
        }
        Err(e) => {
            // No device is better than a wrong one.
            st.replace(Vec::new(), Vec::new(), ConfFlags(0));
            Err(e)
        }
    }
}

pub fn epilog_build_env(job: &JobAlloc) -> Option<EpilogInfo> {
    Some(shared::epilog_info(job))
}

pub fn epilog_set_env(kind: SharedKind, state: &'static Mutex<SharedState>, info: &EpilogInfo, node_inx: usize) -> Vec<EnvOp> {
    let st = lock(state);
    let (ops, logs) = shared::shared_epilog_env(kind, &st.devices, &st.counts, st.node_flags, info, node_inx);
    super::log_lines(&logs);
    ops
}

/// Declare a shared GRES plugin type (`gres_mps`, `gres_shard`): its
/// `GresPlugin` implementation over this module, with its own state.
/// `forward_gpu_freq` hands `--gpu-freq` to slurmd's gpu plugin, as the
/// stock gres/shard does (jobs using MPS cannot ask for a GPU frequency).
macro_rules! shared_gres_plugin {
    ($plugin:ident, $kind:expr, file: $file:expr, gres: $gres:literal, forward_gpu_freq: $hw:literal) => {
        pub struct $plugin;

        static STATE: std::sync::Mutex<$crate::plugins::shared::SharedState> = std::sync::Mutex::new($crate::plugins::shared::SharedState::new());
        const KIND: $crate::core::shared::SharedKind = $kind;

        impl $crate::plugins::GresPlugin for $plugin {
            const PLUGIN_NAME: &'static str = $file.name;
            const PLUGIN_TYPE: &'static str = $file.plugin_type;
            const GRES_NAME: &'static str = $gres;

            fn init() -> Result<(), String> {
                tracing::debug!("loaded");
                Ok(())
            }
            fn fini() {
                tracing::debug!("unloading");
            }
            fn node_config_load(
                host: &dyn $crate::plugins::Host,
                cfg: $crate::plugins::NodeConfig,
                records: &mut Vec<$crate::core::model::GresRecord>,
            ) -> Result<(), String> {
                $crate::plugins::shared::node_config_load(KIND, &STATE, host, cfg, records)
            }
            fn devices() -> Vec<$crate::core::model::GresDevice> {
                $crate::plugins::shared::devices(&STATE)
            }
            fn devices_generation() -> u64 {
                $crate::plugins::shared::devices_generation(&STATE)
            }
            fn set_env(
                host: &dyn $crate::plugins::Host,
                target: $crate::plugins::EnvTarget<'_>,
                req: &$crate::plugins::SetEnv<'_>,
            ) -> $crate::core::env::EnvChange {
                $crate::plugins::shared::set_env(KIND, &STATE, host, target, req)
            }
            fn send_stepd(w: &mut dyn $crate::core::wire::WireWriter) {
                $crate::plugins::shared::send_stepd(KIND, &STATE, w)
            }
            fn recv_stepd(r: &mut dyn $crate::core::wire::WireReader) -> Result<(), $crate::core::wire::WireError> {
                $crate::plugins::shared::recv_stepd(KIND, &STATE, r)
            }
            fn epilog_build_env(job: &$crate::core::model::JobAlloc) -> Option<$crate::core::model::EpilogInfo> {
                $crate::plugins::shared::epilog_build_env(job)
            }
            fn epilog_set_env(info: &$crate::core::model::EpilogInfo, node_inx: usize) -> Vec<$crate::core::env::EnvOp> {
                $crate::plugins::shared::epilog_set_env(KIND, &STATE, info, node_inx)
            }
            fn step_hardware_init(host: &dyn $crate::plugins::Host, usable: Option<&$crate::core::model::Bitmap>, settings: Option<&str>) {
                if $hw {
                    host.gpu_step_hardware_init(usable, settings);
                }
            }
            fn step_hardware_fini(host: &dyn $crate::plugins::Host) {
                if $hw {
                    host.gpu_step_hardware_fini();
                }
            }
        }
    };
}
pub(crate) use shared_gres_plugin;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{Bitmap, InternalFlags};
    use crate::core::shared::SharedDev;
    use crate::core::wire::MemWire;

    /// Outside slurmd: no fake_gpus.conf, no gpu plugin.
    use crate::core::host::StandaloneHost as TestHost;

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
        crate::core::model::test_devices(n)
    }

    #[test]
    fn load_rewrites_records_and_keeps_counts() {
        static STATE: Mutex<SharedState> = Mutex::new(SharedState::new());
        let mps = GresRecord { name: "mps".into(), count: 300, cpu_cnt: 4, ..Default::default() };
        let mut records = vec![gpus(), mps];
        let cfg = NodeConfig { cpu_cnt: 4, in_slurmd: false };
        node_config_load(SharedKind::Mps, &STATE, &TestHost, cfg, &mut records).unwrap();
        assert_eq!(records.len(), 4);
        assert_eq!(lock(&STATE).counts, vec![SharedDev { id: 0, count: 150 }, SharedDev { id: 1, count: 150 }]);
        let generation = devices_generation(&STATE);

        // A broken configuration leaves records and state as they were.
        let mut bad = vec![GresRecord { name: "mps".into(), count: 1, ..Default::default() }];
        let before = bad.clone();
        assert!(node_config_load(SharedKind::Mps, &STATE, &TestHost, cfg, &mut bad).is_err());
        assert_eq!(bad, before);
        assert_eq!(lock(&STATE).counts.len(), 2);
        assert_eq!(devices_generation(&STATE), generation);
    }

    #[test]
    fn stepd_state_drives_the_environment() {
        static SLURMD: Mutex<SharedState> = Mutex::new(SharedState::new());
        static STEPD: Mutex<SharedState> = Mutex::new(SharedState::new());
        lock(&SLURMD).replace(nvidia(2), vec![SharedDev { id: 0, count: 1300 }, SharedDev { id: 1, count: 1200 }], ConfFlags(0));
        let mut w = MemWire::default();
        send_stepd(SharedKind::Mps, &SLURMD, &mut w);
        recv_stepd(SharedKind::Mps, &STEPD, &mut w).unwrap();
        assert_eq!(super::devices(&STEPD), nvidia(2));

        let alloc = Bitmap::from_indices(2, &[1]);
        let none = |_: &str| None;
        let req = SetEnv { alloc: Some(&alloc), gres_cnt: 200, flags: InternalFlags(0), current: &none };
        let change = set_env(SharedKind::Mps, &STEPD, &TestHost, EnvTarget::Step, &req);
        assert!(change.ops.contains(&EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "1".into())));
        assert!(change.ops.contains(&EnvOp::Set("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "16".into())));

        // A truncated message leaves no device behind.
        let mut w = MemWire::default();
        send_stepd(SharedKind::Mps, &SLURMD, &mut w);
        w.bytes.truncate(w.bytes.len() - 3);
        assert!(recv_stepd(SharedKind::Mps, &STEPD, &mut w).is_err());
        assert!(super::devices(&STEPD).is_empty());
    }

    /// A task's call never waits for the state lock: in slurmstepd's
    /// forked task a lock held at fork() is never released.  (Held here by
    /// another thread; the call must return at once, setting nothing.)
    #[test]
    fn task_set_env_never_waits_for_the_state_lock() {
        static STATE: Mutex<SharedState> = Mutex::new(SharedState::new());
        lock(&STATE).replace(nvidia(2), vec![SharedDev { id: 0, count: 100 }, SharedDev { id: 1, count: 100 }], ConfFlags(0));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _g = lock(&STATE);
            held_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(std::time::Duration::from_secs(30));
        });
        held_rx.recv().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let alloc = Bitmap::from_indices(2, &[1]);
            let usable = Bitmap::from_indices(2, &[1]);
            let none = |_: &str| None;
            let req = SetEnv { alloc: Some(&alloc), gres_cnt: 50, flags: InternalFlags(0), current: &none };
            let change = set_env(SharedKind::Mps, &STATE, &TestHost, EnvTarget::Task { usable: Some(&usable) }, &req);
            let _ = done_tx.send(change);
        });
        let change = done_rx.recv_timeout(std::time::Duration::from_secs(10));
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(change.expect("task_set_env waited for a lock held by another thread"), EnvChange::default());
    }

    #[test]
    fn epilog_of_a_shard_job() {
        static STATE: Mutex<SharedState> = Mutex::new(SharedState::new());
        lock(&STATE).replace(nvidia(2), Vec::new(), ConfFlags(ConfFlags::ENV_NVML | ConfFlags::ENV_RSMI));
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
