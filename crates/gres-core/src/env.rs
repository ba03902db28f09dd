//! Environment computation: which variables a job, step, task, Prolog or
//! Epilog gets for its GPUs.  Each variable's rule lives here and only here.

use super::behaviour::UniqueIdInEnv;
use super::model::{Bitmap, ConfFlags, GresDevice, InternalFlags};

/// One change to an environment array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvOp {
    Set(String, String),
    Unset(String),
}

/// The vendor variables and the node flag that selects each, in the order
/// the stock plugin writes them.
pub const VENDOR_VARS: [(u32, &str); 4] = [
    (ConfFlags::ENV_NVML, "CUDA_VISIBLE_DEVICES"),
    (ConfFlags::ENV_RSMI, "ROCR_VISIBLE_DEVICES"),
    (ConfFlags::ENV_ONEAPI, "ZE_AFFINITY_MASK"),
    (ConfFlags::ENV_OPENCL, "GPU_DEVICE_ORDINAL"),
];

/// Set by every GPU, MPS and shard allocation with devices, and cleared by
/// gres/gpu when a job or step has none: how a shared plugin (mps, shard)
/// without an allocation knows that another plugin of the same job or step
/// has already set the device variables (see `gres_core::sharing::shared_env`).
pub const GPUS_ON_NODE_VAR: &str = "SLURM_GPUS_ON_NODE";
/// CUDA's device numbering order, and the value that makes it match NVML's
/// and Slurm's (gres.shtml, "GPU Management").
pub const DEVICE_ORDER_VAR: &str = "CUDA_DEVICE_ORDER";
pub const DEVICE_ORDER_PCI: &str = "PCI_BUS_ID";

/// `CUDA_DEVICE_ORDER=PCI_BUS_ID` when `ops` set `CUDA_VISIBLE_DEVICES`
/// and neither the environment nor `ops` already name an order: CUDA then
/// numbers the GPUs as NVML and Slurm do (gres.shtml, "GPU Management").
pub fn device_order_op(ops: &[EnvOp], current: &dyn Fn(&str) -> Option<String>) -> Option<EnvOp> {
    let sets = |name: &str| ops.iter().any(|op| matches!(op, EnvOp::Set(k, _) if k == name));
    let (_, cuda) = VENDOR_VARS.iter().find(|(bit, _)| *bit == ConfFlags::ENV_NVML)?;
    if !sets(cuda) || sets(DEVICE_ORDER_VAR) || current(DEVICE_ORDER_VAR).is_some() {
        return None;
    }
    Some(EnvOp::Set(DEVICE_ORDER_VAR.into(), DEVICE_ORDER_PCI.into()))
}

/// Apply `ops` to an environment held as a map (a step's environment in
/// tests and tools, where slurmd would change its `char **` array).
pub fn apply_to_map(env: &mut std::collections::HashMap<String, String>, ops: &[EnvOp]) {
    for op in ops {
        match op {
            EnvOp::Set(k, v) => {
                env.insert(k.clone(), v.clone());
            }
            EnvOp::Unset(k) => {
                env.remove(k);
            }
        }
    }
}

/// Whom the environment is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// The batch job, or slurmd preparing a job (Prolog).
    Job,
    /// A job step (all its tasks).
    Step,
    /// One task, with the GPUs it may use (`--gpu-bind`, `--gpus-per-task`);
    /// `None` when slurmd computed no binding: then every GPU of the step.
    Task(Option<&'a Bitmap>),
}

/// State a process keeps between calls for one scope (the stock plugin's
/// `static` locals): whether this process already set the variables, and the
/// next local device index when devices are renumbered inside a cgroup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnvState {
    pub already_seen: bool,
    pub local_inx: i32,
}

/// Everything the computation depends on.
pub struct GpuEnvRequest<'a> {
    pub devices: &'a [GresDevice],
    /// GPUs allocated on this node (job or step), if any.
    pub alloc: Option<&'a Bitmap>,
    pub scope: Scope<'a>,
    pub flags: InternalFlags,
    /// The node's `ENV_*` flags.
    pub node_flags: ConfFlags,
    /// Number devices 0.. within the job (cgroup `ConstrainDevices`).
    pub use_local_dev_index: bool,
    /// When a device's `unique_id` replaces its index in the vendor
    /// variables ([`crate::behaviour::Behaviour::unique_id_in_env`]).
    pub unique_id_in_env: UniqueIdInEnv,
}

/// Result: the changes, plus the `--gpu-bind=verbose` line for stderr.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvChange {
    pub ops: Vec<EnvOp>,
    pub verbose_line: Option<String>,
}

/// Global (`SLURM_*_GPUS`) and local (vendor) lists of the allocated GPUs.
/// Returns `None` for a list that stays as it was.
fn device_lists(req: &GpuEnvRequest<'_>, state: &mut EnvState) -> (Option<String>, Option<String>) {
    let Some(alloc) = req.alloc else { return (None, None) };
    // A task without a usable set (`--gpu-bind=none`, or a binding slurmd
    // could not read, in 22.05 and 23.02) may use every GPU of its step on
    // this node, as srun(1) says ("by default every spawned task can access
    // every GPU allocated to the step") and as slurmd itself gives it from
    // 23.11 on; stock left it no device list at all (docs/deviations.md,
    // GPU 6).
    let usable = match req.scope {
        Scope::Task(u) => u,
        _ => None,
    };
    let mut global: Vec<String> = Vec::new();
    let mut local: Vec<String> = Vec::new();
    let mut current_index: i64 = -1;
    let mut considered = false;
    for dev in req.devices {
        let dev_index = dev.index as i64;
        if !alloc.test(dev.index as usize) {
            continue;
        }
        // Several files of one GPU (MultipleFiles) count once.
        if current_index < dev_index {
            current_index = dev_index;
            considered = false;
        }
        if considered {
            continue;
        }
        let global_index = dev.index as i64;
        let index = if req.use_local_dev_index {
            let i = state.local_inx as i64;
            state.local_inx += 1;
            i
        } else {
            global_index
        };
        if let Some(usable) = usable {
            let bit = if req.use_local_dev_index { index } else { dev_index };
            if bit < 0 || !usable.test(bit as usize) {
                considered = true;
                continue;
            }
        }
        let by_unique_id = match req.unique_id_in_env {
            UniqueIdInEnv::Always => true,
            UniqueIdInEnv::MigOnly => dev.mig,
            UniqueIdInEnv::UuidFlag => req.node_flags.has(ConfFlags::BIT14),
        };
        match &dev.unique_id {
            Some(id) if by_unique_id => local.push(id.clone()),
            _ => local.push(index.to_string()),
        }
        global.push(global_index.to_string());
        considered = true;
    }
    let join = |v: Vec<String>| if v.is_empty() { None } else { Some(v.join(",")) };
    (join(global), join(local))
}

/// The GPU variables for a job, step or task (the stock plugin's
/// `gres_common_gpu_set_env`).  `current` reads the environment as it is.
pub fn gpu_env(req: &GpuEnvRequest<'_>, state: &mut EnvState, current: &dyn Fn(&str) -> Option<String>) -> EnvChange {
    let slurm_var = if req.scope == Scope::Job { "SLURM_JOB_GPUS" } else { "SLURM_STEP_GPUS" };
    let protect = req.flags.has(InternalFlags::PROTECT_ENV);

    // What an earlier call of this process set stays unless replaced.
    let (mut global, mut local) = (None, None);
    if state.already_seen {
        global = current(slurm_var);
        local = VENDOR_VARS.iter().find(|(bit, _)| req.node_flags.has(*bit)).and_then(|(_, var)| current(var));
    }
    let (new_global, new_local) = device_lists(req, state);
    if new_global.is_some() {
        global = new_global;
    }
    if new_local.is_some() {
        local = new_local;
    }

    let mut change = EnvChange::default();
    if req.flags.has(InternalFlags::VERBOSE) && req.alloc.is_some() && !matches!(req.scope, Scope::Task(None)) {
        let usable = match req.scope {
            Scope::Task(Some(u)) => u.hexmask_trim(),
            _ => "NULL".to_string(),
        };
        let alloc = req.alloc.map(Bitmap::hexmask_trim).unwrap_or_default();
        change.verbose_line = Some(format!(
            "gpu-bind: usable_gres={usable}; bit_alloc={alloc}; local_inx={}; global_list={}; local_list={}",
            state.local_inx,
            global.as_deref().unwrap_or("(null)"),
            local.as_deref().unwrap_or("(null)")
        ));
    }

    let ops = &mut change.ops;
    let count = req.alloc.map(Bitmap::count).unwrap_or(0);
    if count > 0 {
        ops.push(EnvOp::Set(GPUS_ON_NODE_VAR.into(), count.to_string()));
    } else if !protect {
        ops.push(EnvOp::Unset(GPUS_ON_NODE_VAR.into()));
    }
    match global {
        Some(g) => ops.push(EnvOp::Set(slurm_var.into(), g)),
        None if !protect => ops.push(EnvOp::Unset(slurm_var.into())),
        None => {}
    }
    match local {
        Some(l) => {
            for (bit, var) in VENDOR_VARS {
                if req.node_flags.has(bit) {
                    ops.push(EnvOp::Set(var.into(), l.clone()));
                }
            }
            state.already_seen = true;
        }
        None if !protect => {
            for (bit, var) in VENDOR_VARS {
                if req.node_flags.has(bit) {
                    ops.push(EnvOp::Unset(var.into()));
                }
            }
        }
        None => {}
    }
    if let Some(op) = device_order_op(&change.ops, current) {
        change.ops.push(op);
    }
    change
}

/// The GPU variables of a job's Prolog and Epilog on one node (the stock
/// plugin's `gres_common_epilog_set_env`).  `alloc` is the job's bitmap on
/// that node.
pub fn epilog_env(devices: &[GresDevice], alloc: Option<&Bitmap>, node_flags: ConfFlags) -> Vec<EnvOp> {
    let Some(alloc) = alloc else { return Vec::new() };
    let mut vendor: Vec<String> = Vec::new();
    let mut slurm: Vec<String> = Vec::new();
    for bit in alloc.ones() {
        if let Some(dev) = devices.iter().find(|d| d.index as usize == bit) {
            vendor.push(dev.unique_id.clone().unwrap_or_else(|| dev.index.to_string()));
            slurm.push(dev.index.to_string());
        }
    }
    let mut ops = Vec::new();
    if !vendor.is_empty() {
        let v = vendor.join(",");
        for (flag, var) in VENDOR_VARS {
            if node_flags.has(flag) {
                ops.push(EnvOp::Set(var.into(), v.clone()));
            }
        }
        ops.push(EnvOp::Set("SLURM_JOB_GPUS".into(), slurm.join(",")));
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn devs(n: u32) -> Vec<GresDevice> {
        crate::model::test_devices(n)
    }

    const ALL: ConfFlags = ConfFlags(ConfFlags::ENV_SET);

    /// A request with the defaults most tests use: no flags, every vendor's
    /// variables, global indices, unique ids as every release has them.
    fn request<'a>(devices: &'a [GresDevice], alloc: Option<&'a Bitmap>, scope: Scope<'a>) -> GpuEnvRequest<'a> {
        GpuEnvRequest { devices, alloc, scope, flags: InternalFlags(0), node_flags: ALL, use_local_dev_index: false, unique_id_in_env: UniqueIdInEnv::Always }
    }

    fn run(req: &GpuEnvRequest<'_>, state: &mut EnvState, env: &mut HashMap<String, String>) -> EnvChange {
        let snapshot = env.clone();
        let c = gpu_env(req, state, &|k| snapshot.get(k).cloned());
        apply_to_map(env, &c.ops);
        c
    }

    #[test]
    fn job_gets_global_and_local_lists() {
        let d = devs(4);
        let alloc = Bitmap::from_indices(4, &[1, 3]);
        let req = request(&d, Some(&alloc), Scope::Job);
        let mut env = HashMap::new();
        run(&req, &mut EnvState::default(), &mut env);
        assert_eq!(env["SLURM_JOB_GPUS"], "1,3");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "1,3");
        assert_eq!(env["ROCR_VISIBLE_DEVICES"], "1,3");
        assert_eq!(env["ZE_AFFINITY_MASK"], "1,3");
        assert_eq!(env["GPU_DEVICE_ORDINAL"], "1,3");
        assert_eq!(env["SLURM_GPUS_ON_NODE"], "2");
    }

    #[test]
    fn local_index_inside_cgroup() {
        let d = devs(4);
        let alloc = Bitmap::from_indices(4, &[2, 3]);
        let req = GpuEnvRequest { node_flags: ConfFlags(ConfFlags::ENV_NVML), use_local_dev_index: true, ..request(&d, Some(&alloc), Scope::Step) };
        let mut env = HashMap::new();
        run(&req, &mut EnvState::default(), &mut env);
        assert_eq!(env["SLURM_STEP_GPUS"], "2,3");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0,1");
        assert!(!env.contains_key("ROCR_VISIBLE_DEVICES"));
    }

    #[test]
    fn none_step_clears_unless_protected() {
        let d = devs(2);
        let mut env: HashMap<String, String> = [("CUDA_VISIBLE_DEVICES", "0"), ("SLURM_STEP_GPUS", "0"), ("SLURM_GPUS_ON_NODE", "1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut protected = env.clone();
        let req = request(&d, None, Scope::Step);
        run(&req, &mut EnvState::default(), &mut env);
        assert!(env.is_empty(), "{env:?}");
        let req = GpuEnvRequest { flags: InternalFlags(InternalFlags::PROTECT_ENV), ..req };
        run(&req, &mut EnvState::default(), &mut protected);
        assert_eq!(protected.len(), 3);
    }

    #[test]
    fn task_binding_and_mig_ids() {
        let mut d = devs(3);
        d[2].unique_id = Some("MIG-abc".into());
        let alloc = Bitmap::from_indices(3, &[0, 2]);
        let usable = Bitmap::from_indices(3, &[2]);
        let req = GpuEnvRequest {
            flags: InternalFlags(InternalFlags::VERBOSE),
            node_flags: ConfFlags(ConfFlags::ENV_NVML),
            ..request(&d, Some(&alloc), Scope::Task(Some(&usable)))
        };
        let mut env = HashMap::new();
        let c = run(&req, &mut EnvState::default(), &mut env);
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "MIG-abc");
        assert_eq!(env["SLURM_STEP_GPUS"], "2");
        assert_eq!(env["SLURM_GPUS_ON_NODE"], "2");
        assert_eq!(c.verbose_line.unwrap(), "gpu-bind: usable_gres=0x4; bit_alloc=0x5; local_inx=0; global_list=2; local_list=MIG-abc");
    }

    #[test]
    fn task_without_binding_keeps_step_lists_once_seen() {
        let d = devs(2);
        let alloc = Bitmap::from_indices(2, &[0, 1]);
        let mut st = EnvState::default();
        let mut env = HashMap::new();
        let step = request(&d, Some(&alloc), Scope::Task(Some(&alloc)));
        run(&step, &mut st, &mut env);
        assert!(st.already_seen);
        let task = GpuEnvRequest { scope: Scope::Task(None), ..step };
        run(&task, &mut st, &mut env);
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0,1");
        assert_eq!(env["SLURM_STEP_GPUS"], "0,1");
    }

    #[test]
    fn a_task_without_a_binding_gets_every_gpu_of_its_step() {
        // `--gpu-bind=none` in 22.05/23.02: slurmd gives the task no usable
        // set; a fresh process (no earlier call) still sets the step's GPUs.
        let d = devs(3);
        let alloc = Bitmap::from_indices(3, &[0, 2]);
        let task = GpuEnvRequest { flags: InternalFlags(InternalFlags::VERBOSE), ..request(&d, Some(&alloc), Scope::Task(None)) };
        let mut env = HashMap::new();
        let change = run(&task, &mut EnvState::default(), &mut env);
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0,2");
        assert_eq!(env["SLURM_STEP_GPUS"], "0,2");
        assert_eq!(env["SLURM_GPUS_ON_NODE"], "2");
        // No binding, so no --gpu-bind=verbose line (as stock prints none).
        assert_eq!(change.verbose_line, None);
    }

    #[test]
    fn multiple_files_count_once() {
        let mut d = devs(2);
        d.insert(1, GresDevice { index: 0, path: "/dev/nvidia-caps/nvidia-cap1".into(), unique_id: None, ..d[0].clone() });
        d[2].index = 1;
        let alloc = Bitmap::from_indices(2, &[0, 1]);
        let req = request(&d, Some(&alloc), Scope::Step);
        let mut env = HashMap::new();
        run(&req, &mut EnvState::default(), &mut env);
        assert_eq!(env["SLURM_STEP_GPUS"], "0,1");
    }

    #[test]
    fn epilog_lists() {
        let mut d = devs(3);
        d[1].unique_id = Some("MIG-x".into());
        let alloc = Bitmap::from_indices(3, &[1, 2]);
        let ops = epilog_env(&d, Some(&alloc), ConfFlags(ConfFlags::ENV_NVML));
        assert_eq!(ops, vec![EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "MIG-x,2".into()), EnvOp::Set("SLURM_JOB_GPUS".into(), "1,2".into())]);
        assert!(epilog_env(&d, None, ALL).is_empty());
    }

    /// The three rules for `unique_id` in the vendor variables, on a node
    /// with a whole GPU (UUID from gres.conf or nvml) and a MIG device.
    #[test]
    fn unique_id_in_env_follows_the_behaviour() {
        let mut d = devs(2);
        d[0].unique_id = Some("GPU-0".into());
        d[1].unique_id = Some("MIG-1".into());
        d[1].mig = true;
        let alloc = Bitmap::from_indices(2, &[0, 1]);
        let vendor = |rule, node_flags: u32| {
            let req = GpuEnvRequest { node_flags: ConfFlags(node_flags), unique_id_in_env: rule, ..request(&d, Some(&alloc), Scope::Step) };
            let mut env = HashMap::new();
            run(&req, &mut EnvState::default(), &mut env);
            (env["CUDA_VISIBLE_DEVICES"].clone(), env["SLURM_STEP_GPUS"].clone())
        };
        let nvml = ConfFlags::ENV_NVML;
        assert_eq!(vendor(UniqueIdInEnv::Always, nvml), ("GPU-0,MIG-1".into(), "0,1".into()));
        assert_eq!(vendor(UniqueIdInEnv::MigOnly, nvml), ("0,MIG-1".into(), "0,1".into()));
        assert_eq!(vendor(UniqueIdInEnv::UuidFlag, nvml), ("0,1".into(), "0,1".into()));
        assert_eq!(vendor(UniqueIdInEnv::UuidFlag, nvml | ConfFlags::BIT14), ("GPU-0,MIG-1".into(), "0,1".into()));
        // Prolog/Epilog use it whenever it is set, in every release.
        assert_eq!(
            epilog_env(&d, Some(&alloc), ConfFlags(nvml)),
            vec![EnvOp::Set("CUDA_VISIBLE_DEVICES".into(), "GPU-0,MIG-1".into()), EnvOp::Set("SLURM_JOB_GPUS".into(), "0,1".into())]
        );
    }
}
