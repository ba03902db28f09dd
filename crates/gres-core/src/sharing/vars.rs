//! The environment of a job, step, task, Prolog and Epilog with a shared
//! GRES: `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` ([`mps_thread_percentage`]),
//! `SLURM_SHARDS_ON_NODE`, on top of the GPU rules of [`crate::env`]
//! ([`shared_env`], [`shared_epilog_env`]).

use super::{SharedDev, SharedKind, MPS_PERCENTAGE_VAR, SHARDS_ON_NODE_VAR};
use crate::behaviour::UniqueIdInEnv;
use crate::env::{self, EnvChange, EnvOp, EnvState, GpuEnvRequest, Scope, GPUS_ON_NODE_VAR};
use crate::model::{Bitmap, ConfFlags, EpilogInfo, GresDevice, InternalFlags, LogLevel, LogLine};

/// of 200 give 15, 16, 18 and 20 (gres.shtml, "MPS Management").
pub fn mps_thread_percentage(job_count: u64, gpu_count: u64) -> u64 {
    if gpu_count == 0 {
        return 0;
    }
    let p = (job_count as u128 * 100) / gpu_count as u128;
    u64::try_from(p).unwrap_or(u64::MAX).max(1)
}

/// The count to divide by when a GPU's own count is unknown (the stock
/// plugin's fallback, which turns the percentage into the job's count).
const UNKNOWN_GPU_COUNT: u64 = 100;

/// The configured count of the GPU whose device number is `id`.
fn gpu_count(counts: &[SharedDev], id: i32, kind: SharedKind, logs: &mut Vec<LogLine>) -> u64 {
    match counts.iter().find(|c| c.id == id) {
        Some(c) => c.count,
        None => {
            logs.push(LogLine::new(LogLevel::Error, format!("Could not find gres/{} count for device ID {id}", kind.name())));
            UNKNOWN_GPU_COUNT
        }
    }
}

/// Everything [`shared_env`] depends on.
pub struct SharedEnvRequest<'a> {
    pub kind: SharedKind,
    pub devices: &'a [GresDevice],
    pub counts: &'a [SharedDev],
    /// This GRES's devices allocated on this node (job or step), if any.
    pub alloc: Option<&'a Bitmap>,
    /// This GRES's count allocated on this node.
    pub gres_cnt: u64,
    pub scope: Scope<'a>,
    pub flags: InternalFlags,
    /// The node's `ENV_*` flags.
    pub node_flags: ConfFlags,
    pub use_local_dev_index: bool,
    /// When a device's `unique_id` replaces its index in the vendor
    /// variables.
    pub unique_id_in_env: UniqueIdInEnv,
}

/// The environment changes plus lines to log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedEnvChange {
    pub change: EnvChange,
    pub logs: Vec<LogLine>,
}

/// The variables of a job, step or task for a shared GRES: the GPU
/// variables of [`env::gpu_env`] for the shared GPU, `CUDA_DEVICE_ORDER`,
/// and `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` (mps) or `SLURM_SHARDS_ON_NODE`
/// (shard).
///
/// Where this differs from the stock plugins (docs/deviations.md):
/// - Without an allocation of its own, a shared plugin leaves the device
///   variables alone when another shared plugin of the same job or step has
///   set them.  slurmd calls the plugins in turn, gres/gpu always first; it
///   protects the variables only when the job has GPUs, so with
///   `GresTypes=gpu,mps,shard` gres/shard used to clear what gres/mps had
///   just set.  gres/gpu, without GPUs, clears `SLURM_GPUS_ON_NODE`; every
///   allocation with devices sets it: so when it is present here, an earlier
///   shared plugin of this very call set it.  A `--gres=none` step still
///   loses every inherited variable (gres/gpu clears them and none is set).
/// - A task without a binding of its own keeps the step's devices.
/// - `CUDA_DEVICE_ORDER=PCI_BUS_ID` is set with `CUDA_VISIBLE_DEVICES`
///   unless the job has its own.
pub fn shared_env(req: &SharedEnvRequest<'_>, state: &mut EnvState, current: &dyn Fn(&str) -> Option<String>) -> SharedEnvChange {
    let mut out = SharedEnvChange::default();
    let seen_before = state.already_seen;
    let first_local_inx = state.local_inx;

    // slurmd computes task bindings for gres/gpu only: a task of an MPS or
    // shard step without one keeps the step's devices.
    let (scope, mut gpu_flags) = match req.scope {
        Scope::Task(None) => (Scope::Step, InternalFlags(req.flags.0 & !InternalFlags::VERBOSE)),
        s => (s, req.flags),
    };
    let set_by_another = req.alloc.is_none() && !req.flags.has(InternalFlags::PROTECT_ENV) && current(GPUS_ON_NODE_VAR).is_some();
    if set_by_another {
        gpu_flags.0 |= InternalFlags::PROTECT_ENV;
    }
    let gpu_req = GpuEnvRequest {
        devices: req.devices,
        alloc: req.alloc,
        scope,
        flags: gpu_flags,
        node_flags: req.kind.env_flags(req.node_flags),
        use_local_dev_index: req.use_local_dev_index,
        unique_id_in_env: req.unique_id_in_env,
    };
    // gpu_env also sets CUDA_DEVICE_ORDER with the device variables.
    out.change = env::gpu_env(&gpu_req, state, current);

    let ops = &mut out.change.ops;
    match req.kind {
        SharedKind::Mps => {
            let kept = if seen_before { current(MPS_PERCENTAGE_VAR) } else { None };
            if let Some(p) = kept {
                ops.push(EnvOp::Set(MPS_PERCENTAGE_VAR.into(), p));
            } else if req.gres_cnt > 0 {
                let id = first_dev_num(req, scope, first_local_inx).unwrap_or(-1);
                let count = gpu_count(req.counts, id, req.kind, &mut out.logs);
                ops.push(EnvOp::Set(MPS_PERCENTAGE_VAR.into(), mps_thread_percentage(req.gres_cnt, count).to_string()));
            } else {
                ops.push(EnvOp::Unset(MPS_PERCENTAGE_VAR.into()));
            }
        }
        SharedKind::Shard => {
            if req.gres_cnt > 0 {
                ops.push(EnvOp::Set(SHARDS_ON_NODE_VAR.into(), req.gres_cnt.to_string()));
            } else if !req.flags.has(InternalFlags::PROTECT_ENV) {
                ops.push(EnvOp::Unset(SHARDS_ON_NODE_VAR.into()));
            }
        }
    }
    out
}

/// The device number of the first device the job, step or task gets: the
/// GPU whose count the percentage is taken from.
fn first_dev_num(req: &SharedEnvRequest<'_>, scope: Scope<'_>, first_local_inx: i32) -> Option<i32> {
    let alloc = req.alloc?;
    let mut local_inx = first_local_inx as i64;
    let mut last_index: Option<u32> = None;
    for dev in req.devices {
        if !alloc.test(dev.index as usize) || last_index == Some(dev.index) {
            continue;
        }
        last_index = Some(dev.index);
        let local = local_inx;
        local_inx += 1;
        if let Scope::Task(Some(usable)) = scope {
            let bit = if req.use_local_dev_index { local } else { dev.index as i64 };
            if bit < 0 || !usable.test(bit as usize) {
                continue;
            }
        }
        return Some(dev.dev_num);
    }
    None
}

/// The Prolog/Epilog variables of a job on one node: the GPU variables of
/// the shared GPU and, for mps, `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`.
pub fn shared_epilog_env(
    kind: SharedKind,
    devices: &[GresDevice],
    counts: &[SharedDev],
    node_flags: ConfFlags,
    info: &EpilogInfo,
    node_inx: usize,
) -> (Vec<EnvOp>, Vec<LogLine>) {
    let mut logs = Vec::new();
    if info.node_cnt == 0 || devices.is_empty() {
        return (Vec::new(), logs);
    }
    if node_inx >= info.node_cnt as usize {
        logs.push(LogLine::new(LogLevel::Error, format!("bad node index ({node_inx} >= {})", info.node_cnt)));
        return (Vec::new(), logs);
    }
    let alloc = info.bit_alloc.get(node_inx).and_then(Option::as_ref);
    let mut ops = env::epilog_env(devices, alloc, kind.env_flags(node_flags));
    if kind == SharedKind::Mps {
        let dev_num = alloc.and_then(Bitmap::first).and_then(|bit| devices.iter().find(|d| d.index as usize == bit)).map(|d| d.dev_num);
        let job_count = info.cnt_node_alloc.as_ref().and_then(|c| c.get(node_inx).copied()).unwrap_or(0);
        if let Some(id) = dev_num.filter(|id| *id >= 0) {
            if job_count > 0 {
                let count = gpu_count(counts, id, kind, &mut logs);
                ops.push(EnvOp::Set(MPS_PERCENTAGE_VAR.into(), mps_thread_percentage(job_count, count).to_string()));
            }
        }
    }
    (ops, logs)
}

/// The Prolog/Epilog record of a job: its devices and counts per node.
pub fn epilog_info(job: &EpilogInfo) -> EpilogInfo {
    let n = job.node_cnt as usize;
    let bit_alloc: Vec<Option<Bitmap>> = (0..n).map(|i| job.bit_alloc.get(i).cloned().flatten()).collect();
    let cnt = (0..n)
        .map(|i| match (&bit_alloc[i], &job.cnt_node_alloc) {
            (Some(_), Some(c)) => c.get(i).copied().unwrap_or(0),
            _ => 0,
        })
        .collect();
    EpilogInfo { node_cnt: job.node_cnt, bit_alloc, cnt_node_alloc: Some(cnt) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{device_order_op, DEVICE_ORDER_VAR};
    use std::collections::HashMap;

    // -- percentage -------------------------------------------------------

    #[test]
    fn percentage_documentation_example() {
        let got: Vec<u64> = [1300, 1200, 1100, 1000].iter().map(|c| mps_thread_percentage(200, *c)).collect();
        assert_eq!(got, vec![15, 16, 18, 20]);
    }

    #[test]
    fn percentage_edges() {
        assert_eq!(mps_thread_percentage(1, 1000), 1, "at least 1");
        assert_eq!(mps_thread_percentage(50, 100), 50);
        assert_eq!(mps_thread_percentage(100, 100), 100);
        assert_eq!(mps_thread_percentage(7, 0), 0, "a GPU with no count");
        assert_eq!(mps_thread_percentage(u64::MAX, 1), u64::MAX, "no overflow");
        assert_eq!(mps_thread_percentage(u64::MAX, u64::MAX), 100);
    }

    // -- environment --------------------------------------------------------

    type Env = HashMap<String, String>;

    fn apply(env: &mut Env, ops: &[EnvOp]) {
        env::apply_to_map(env, ops);
    }

    fn env_of(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn devs(n: u32) -> Vec<GresDevice> {
        crate::model::test_devices(n)
    }

    fn doc_counts() -> Vec<SharedDev> {
        [1300, 1200, 1100, 1000].iter().enumerate().map(|(i, c)| SharedDev { id: i as i32, count: *c }).collect()
    }

    struct Node {
        devices: Vec<GresDevice>,
        counts: Vec<SharedDev>,
        node_flags: ConfFlags,
        local: bool,
    }

    impl Node {
        fn doc() -> Node {
            Node { devices: devs(4), counts: doc_counts(), node_flags: ConfFlags(ConfFlags::ENV_SET), local: false }
        }

        /// `alloc`: the allocated devices and count.
        fn run(&self, kind: SharedKind, scope: Scope<'_>, alloc: (Option<&Bitmap>, u64), flags: u32, env: &mut Env, st: &mut EnvState) -> SharedEnvChange {
            let (alloc, cnt) = alloc;
            let req = SharedEnvRequest {
                kind,
                devices: &self.devices,
                counts: &self.counts,
                alloc,
                gres_cnt: cnt,
                scope,
                flags: InternalFlags(flags),
                node_flags: self.node_flags,
                use_local_dev_index: self.local,
                unique_id_in_env: UniqueIdInEnv::Always,
            };
            let snapshot = env.clone();
            let out = shared_env(&req, st, &|k| snapshot.get(k).cloned());
            apply(env, &out.change.ops);
            out
        }
    }

    #[test]
    fn mps_job_gets_device_and_percentage_on_every_gpu() {
        let node = Node::doc();
        for (gpu, pct) in [(0, "15"), (1, "16"), (2, "18"), (3, "20")] {
            let alloc = Bitmap::from_indices(4, &[gpu]);
            let mut env = Env::new();
            let out = node.run(SharedKind::Mps, Scope::Job, (Some(&alloc), 200), 0, &mut env, &mut EnvState::default());
            assert!(out.logs.is_empty());
            assert_eq!(env["CUDA_VISIBLE_DEVICES"], gpu.to_string());
            assert_eq!(env["SLURM_JOB_GPUS"], gpu.to_string());
            assert_eq!(env["SLURM_GPUS_ON_NODE"], "1");
            assert_eq!(env[MPS_PERCENTAGE_VAR], pct);
            assert_eq!(env[DEVICE_ORDER_VAR], "PCI_BUS_ID");
            // MPS is CUDA only, whatever the node's flags.
            assert!(!env.contains_key("ROCR_VISIBLE_DEVICES") && !env.contains_key("GPU_DEVICE_ORDINAL"));
        }
    }

    #[test]
    fn mps_step_in_a_cgroup_sees_device_zero() {
        let node = Node { local: true, ..Node::doc() };
        let alloc = Bitmap::from_indices(4, &[2]);
        let mut env = Env::new();
        node.run(SharedKind::Mps, Scope::Step, (Some(&alloc), 550), 0, &mut env, &mut EnvState::default());
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0");
        assert_eq!(env["SLURM_STEP_GPUS"], "2");
        assert_eq!(env[MPS_PERCENTAGE_VAR], "50");
    }

    #[test]
    fn percentage_of_an_unknown_gpu_falls_back_to_the_count() {
        let node = Node { counts: Vec::new(), ..Node::doc() };
        let alloc = Bitmap::from_indices(4, &[1]);
        let mut env = Env::new();
        let out = node.run(SharedKind::Mps, Scope::Step, (Some(&alloc), 30), 0, &mut env, &mut EnvState::default());
        assert_eq!(env[MPS_PERCENTAGE_VAR], "30");
        assert_eq!(out.logs[0].message, "Could not find gres/mps count for device ID 1");
    }

    #[test]
    fn a_job_keeps_its_own_device_order() {
        let node = Node::doc();
        let alloc = Bitmap::from_indices(4, &[0]);
        let mut env = env_of(&[(DEVICE_ORDER_VAR, "FASTEST_FIRST")]);
        node.run(SharedKind::Shard, Scope::Step, (Some(&alloc), 2), 0, &mut env, &mut EnvState::default());
        assert_eq!(env[DEVICE_ORDER_VAR], "FASTEST_FIRST");
        // No CUDA variable, no order.
        let amd = Node { node_flags: ConfFlags(ConfFlags::ENV_RSMI), ..Node::doc() };
        let mut env = Env::new();
        amd.run(SharedKind::Shard, Scope::Step, (Some(&alloc), 2), 0, &mut env, &mut EnvState::default());
        assert_eq!(env.get("ROCR_VISIBLE_DEVICES").map(String::as_str), Some("0"));
        assert!(!env.contains_key(DEVICE_ORDER_VAR));
        assert_eq!(device_order_op(&[EnvOp::Set(DEVICE_ORDER_VAR.into(), "x".into()), EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "0".into())], &|_| None), None);
    }

    #[test]
    fn shard_step_gets_gpu_variables_and_shard_count() {
        let node = Node::doc();
        let alloc = Bitmap::from_indices(4, &[1, 3]);
        let mut env = Env::new();
        node.run(SharedKind::Shard, Scope::Step, (Some(&alloc), 5), 0, &mut env, &mut EnvState::default());
        for v in ["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL", "SLURM_STEP_GPUS"] {
            assert_eq!(env[v], "1,3", "{v}");
        }
        assert_eq!(env[SHARDS_ON_NODE_VAR], "5");
        assert_eq!(env["SLURM_GPUS_ON_NODE"], "2");
        assert!(!env.contains_key(MPS_PERCENTAGE_VAR));
    }

    /// One pass of slurmd over the plugins in GresTypes order (gres/gpu is
    /// always first), as `gres_g_step_set_env` makes it.
    fn slurmd_pass(order: &[&str], step: &[(&str, Option<Bitmap>, u64)], env: &mut Env, scope: Scope<'_>) {
        let node = Node::doc();
        let gpu_devs = devs(4);
        let alloc_of = |name: &str| step.iter().find(|(n, _, _)| *n == name).map(|(_, a, c)| (a.clone(), *c));
        let has_gpu = alloc_of("gpu").is_some();
        for name in order {
            let (alloc, cnt) = alloc_of(name).unwrap_or((None, 0));
            match *name {
                "gpu" => {
                    let req = GpuEnvRequest {
                        devices: &gpu_devs,
                        alloc: alloc.as_ref(),
                        scope,
                        flags: InternalFlags(0),
                        node_flags: node.node_flags,
                        use_local_dev_index: false,
                        unique_id_in_env: UniqueIdInEnv::Always,
                    };
                    let snapshot = env.clone();
                    let c = env::gpu_env(&req, &mut EnvState::default(), &|k| snapshot.get(k).cloned());
                    apply(env, &c.ops);
                }
                other => {
                    let kind = if other == "mps" { SharedKind::Mps } else { SharedKind::Shard };
                    let flags = if has_gpu { InternalFlags::PROTECT_ENV } else { 0 };
                    node.run(kind, scope, (alloc.as_ref(), cnt), flags, env, &mut EnvState::default());
                }
            }
        }
    }

    const ORDERS: [&[&str]; 4] = [&["gpu", "mps"], &["gpu", "shard"], &["gpu", "mps", "shard"], &["gpu", "shard", "mps"]];

    #[test]
    fn every_mps_and_shard_step_keeps_its_devices_whatever_the_order() {
        for order in ORDERS {
            for kind in ["mps", "shard"] {
                if !order.contains(&kind) {
                    continue;
                }
                for scope in [Scope::Job, Scope::Step] {
                    let mut env = Env::new();
                    slurmd_pass(order, &[(kind, Some(Bitmap::from_indices(4, &[3])), 100)], &mut env, scope);
                    assert_eq!(env.get("CUDA_VISIBLE_DEVICES").map(String::as_str), Some("3"), "{order:?} {kind} {scope:?}: {env:?}");
                    assert_eq!(env.get("SLURM_GPUS_ON_NODE").map(String::as_str), Some("1"), "{order:?} {kind}");
                    let var = if scope == Scope::Job { "SLURM_JOB_GPUS" } else { "SLURM_STEP_GPUS" };
                    assert_eq!(env.get(var).map(String::as_str), Some("3"), "{order:?} {kind}");
                    assert_eq!(env.contains_key(MPS_PERCENTAGE_VAR), kind == "mps", "{order:?} {kind}");
                    assert_eq!(env.contains_key(SHARDS_ON_NODE_VAR), kind == "shard", "{order:?} {kind}");
                    if kind == "mps" {
                        assert_eq!(env[MPS_PERCENTAGE_VAR], "10");
                    }
                }
            }
        }
    }

    #[test]
    fn gpu_steps_keep_their_variables() {
        for order in ORDERS {
            let mut env = Env::new();
            slurmd_pass(order, &[("gpu", Some(Bitmap::from_indices(4, &[0, 1])), 2)], &mut env, Scope::Step);
            assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0,1", "{order:?}");
            assert_eq!(env["SLURM_GPUS_ON_NODE"], "2");
            assert!(!env.contains_key(MPS_PERCENTAGE_VAR) && !env.contains_key(SHARDS_ON_NODE_VAR));
        }
    }

    #[test]
    fn gres_none_inside_an_allocation_clears_everything() {
        // What a step inherits from an MPS batch job, and from a shard one.
        let inherited = [
            env_of(&[
                ("CUDA_VISIBLE_DEVICES", "0"),
                ("SLURM_JOB_GPUS", "0"),
                ("SLURM_STEP_GPUS", "0"),
                ("SLURM_GPUS_ON_NODE", "1"),
                (MPS_PERCENTAGE_VAR, "15"),
            ]),
            env_of(&[
                ("CUDA_VISIBLE_DEVICES", "0"),
                ("ROCR_VISIBLE_DEVICES", "0"),
                ("GPU_DEVICE_ORDINAL", "0"),
                ("ZE_AFFINITY_MASK", "0"),
                ("SLURM_STEP_GPUS", "0"),
                ("SLURM_GPUS_ON_NODE", "1"),
                (SHARDS_ON_NODE_VAR, "3"),
            ]),
        ];
        for order in ORDERS {
            for start in &inherited {
                let mut env = start.clone();
                slurmd_pass(order, &[], &mut env, Scope::Step);
                let left: Vec<&String> = env.keys().filter(|k| *k != "SLURM_JOB_GPUS").collect();
                let expect_shards_left = !order.contains(&"shard") && start.contains_key(SHARDS_ON_NODE_VAR);
                let expect_pct_left = !order.contains(&"mps") && start.contains_key(MPS_PERCENTAGE_VAR);
                let expected = usize::from(expect_shards_left) + usize::from(expect_pct_left);
                assert_eq!(left.len(), expected, "{order:?}: {env:?}");
            }
        }
    }

    #[test]
    fn without_gres_gpu_clearing_first_a_lone_shared_plugin_still_clears() {
        // A stale value outside gres/gpu's flags (CUDA for an AMD node) with
        // no SLURM_GPUS_ON_NODE: nothing set it in this pass, so it goes.
        let node = Node::doc();
        let mut env = env_of(&[("CUDA_VISIBLE_DEVICES", "1"), (MPS_PERCENTAGE_VAR, "5")]);
        node.run(SharedKind::Mps, Scope::Step, (None, 0), 0, &mut env, &mut EnvState::default());
        assert!(env.is_empty(), "{env:?}");
    }

    #[test]
    fn protected_env_keeps_gpu_variables_but_mps_percentage_goes() {
        let node = Node::doc();
        let mut env = env_of(&[("CUDA_VISIBLE_DEVICES", "0"), (MPS_PERCENTAGE_VAR, "5"), (SHARDS_ON_NODE_VAR, "2")]);
        node.run(SharedKind::Mps, Scope::Step, (None, 0), InternalFlags::PROTECT_ENV, &mut env, &mut EnvState::default());
        node.run(SharedKind::Shard, Scope::Step, (None, 0), InternalFlags::PROTECT_ENV, &mut env, &mut EnvState::default());
        assert_eq!(env, env_of(&[("CUDA_VISIBLE_DEVICES", "0"), (SHARDS_ON_NODE_VAR, "2")]));
    }

    #[test]
    fn task_without_binding_keeps_the_step_devices() {
        let node = Node::doc();
        let alloc = Bitmap::from_indices(4, &[2]);
        let mut step_env = Env::new();
        node.run(SharedKind::Mps, Scope::Step, (Some(&alloc), 110), 0, &mut step_env, &mut EnvState::default());
        let mut task_env = step_env.clone();
        let out = node.run(SharedKind::Mps, Scope::Task(None), (Some(&alloc), 110), InternalFlags::VERBOSE, &mut task_env, &mut EnvState::default());
        assert_eq!(task_env, step_env);
        assert_eq!(task_env[MPS_PERCENTAGE_VAR], "10");
        assert_eq!(out.change.verbose_line, None);
    }

    #[test]
    fn task_with_binding_uses_usable_devices() {
        let node = Node::doc();
        let alloc = Bitmap::from_indices(4, &[1, 2]);
        let usable = Bitmap::from_indices(4, &[2]);
        let mut env = Env::new();
        node.run(SharedKind::Mps, Scope::Task(Some(&usable)), (Some(&alloc), 110), 0, &mut env, &mut EnvState::default());
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "2");
        assert_eq!(env[MPS_PERCENTAGE_VAR], "10", "percentage of GPU 2 (count 1100)");
    }

    #[test]
    fn second_call_keeps_the_percentage() {
        let node = Node::doc();
        let alloc = Bitmap::from_indices(4, &[0]);
        let mut st = EnvState::default();
        let mut env = Env::new();
        node.run(SharedKind::Mps, Scope::Step, (Some(&alloc), 200), 0, &mut env, &mut st);
        assert!(st.already_seen);
        env.insert(MPS_PERCENTAGE_VAR.into(), "42".into());
        node.run(SharedKind::Mps, Scope::Step, (Some(&alloc), 200), 0, &mut env, &mut st);
        assert_eq!(env[MPS_PERCENTAGE_VAR], "42");
    }

    // -- Prolog / Epilog ------------------------------------------------------

    #[test]
    fn epilog_env_of_mps_and_shard() {
        let d = devs(4);
        let job = EpilogInfo {
            node_cnt: 2,
            bit_alloc: vec![Some(Bitmap::from_indices(4, &[1])), Some(Bitmap::from_indices(4, &[3]))],
            cnt_node_alloc: Some(vec![600, 200]),
        };
        let info = epilog_info(&job);
        assert_eq!(info, job);
        let (ops, logs) = shared_epilog_env(SharedKind::Mps, &d, &doc_counts(), ConfFlags(ConfFlags::ENV_SET), &info, 1);
        assert!(logs.is_empty());
        assert_eq!(
            ops,
            vec![
                EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "3".into()),
                EnvOp::Set("SLURM_JOB_GPUS".into(), "3".into()),
                EnvOp::Set(MPS_PERCENTAGE_VAR.into(), "20".into()),
            ]
        );
        let (ops, _) = shared_epilog_env(SharedKind::Mps, &d, &doc_counts(), ConfFlags(0), &info, 0);
        assert_eq!(ops[2], EnvOp::Set(MPS_PERCENTAGE_VAR.into(), "50".into()));
        let (ops, _) = shared_epilog_env(SharedKind::Shard, &d, &[], ConfFlags(ConfFlags::ENV_NVML | ConfFlags::ENV_OPENCL), &info, 0);
        assert_eq!(
            ops,
            vec![
                EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "1".into()),
                EnvOp::Set("GPU_DEVICE_ORDINAL".into(), "1".into()),
                EnvOp::Set("SLURM_JOB_GPUS".into(), "1".into()),
            ]
        );
        let (ops, logs) = shared_epilog_env(SharedKind::Mps, &d, &doc_counts(), ConfFlags(0), &info, 2);
        assert!(ops.is_empty());
        assert_eq!(logs[0].level, LogLevel::Error);
        let none = EpilogInfo { node_cnt: 0, bit_alloc: Vec::new(), cnt_node_alloc: None };
        assert!(shared_epilog_env(SharedKind::Mps, &d, &doc_counts(), ConfFlags(0), &none, 0).0.is_empty());
        assert!(shared_epilog_env(SharedKind::Mps, &[], &doc_counts(), ConfFlags(0), &info, 0).0.is_empty());
    }

    #[test]
    fn epilog_info_counts_only_nodes_with_devices() {
        let job = EpilogInfo { node_cnt: 3, bit_alloc: vec![None, Some(Bitmap::from_indices(2, &[0]))], cnt_node_alloc: Some(vec![5, 6, 7]) };
        let info = epilog_info(&job);
        assert_eq!(info.bit_alloc.len(), 3);
        assert_eq!(info.cnt_node_alloc, Some(vec![0, 6, 0]));
        let no_counts = EpilogInfo { cnt_node_alloc: None, ..job };
        assert_eq!(epilog_info(&no_counts).cnt_node_alloc, Some(vec![0, 0, 0]));
    }
}
