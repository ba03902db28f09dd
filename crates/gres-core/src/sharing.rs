//! Shared GRES on top of the GPUs (`gres/mps`, `gres/shard`): a count per
//! GPU that jobs take parts of.  Everything the two plugins compute lives
//! here, in pure Rust:
//!
//! - the node's gres.conf records rewritten the way the stock plugins
//!   rewrite them (each GPU record split per device file, one shared record
//!   per GPU, counts spread or taken per `File`), the device list and the
//!   per-GPU counts, by [`load`];
//! - `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, by [`mps_thread_percentage`];
//! - the job, step, task, Prolog and Epilog variables, on top of the GPU
//!   rules of [`super::env`], by [`shared_env`] and [`shared_epilog_env`];
//! - what slurmd hands to slurmstepd, by [`write_stepd`] and [`read_stepd`].

use super::behaviour::UniqueIdInEnv;
use super::devices::{self, DevStat};
use super::env::{self, EnvChange, EnvOp, EnvState, GpuEnvRequest, Scope, GPUS_ON_NODE_VAR};
use super::fake_gpus::{to_log_line, to_parsable};
use super::hostlist;
use super::model::{gres_build_id, Bitmap, ConfFlags, EpilogInfo, GresDevice, GresRecord, InternalFlags, Log, LogLevel, LogLine};
use super::wire::{self, WireError, WireReader, WireWriter};

/// The GRES whose devices the shared GRES divide.
pub const SHARING_NAME: &str = "gpu";

/// The variable an MPS job's share of its GPU is given in.
pub const MPS_PERCENTAGE_VAR: &str = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
/// The variable a step's shard count is given in.
pub const SHARDS_ON_NODE_VAR: &str = "SLURM_SHARDS_ON_NODE";

/// Which shared GRES.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedKind {
    Mps,
    Shard,
}

impl SharedKind {
    pub fn name(self) -> &'static str {
        match self {
            SharedKind::Mps => "mps",
            SharedKind::Shard => "shard",
        }
    }

    /// MPS is served by one GPU of a node at a time unless configured
    /// otherwise (`one_sharing` is the default for mps, gres.conf(5)).
    fn one_sharing_by_default(self) -> bool {
        self == SharedKind::Mps
    }

    /// The vendor variables this GRES sets: MPS is CUDA only; shards set
    /// the variables the node's records ask for, like GPUs.
    pub fn env_flags(self, node_flags: ConfFlags) -> ConfFlags {
        match self {
            SharedKind::Mps => ConfFlags(ConfFlags::ENV_NVML),
            SharedKind::Shard => node_flags,
        }
    }
}

/// One GPU's count of the shared GRES (Slurm's `shared_dev_info_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedDev {
    /// The number at the end of the GPU's device file (`/dev/nvidia2` -> 2),
    /// -1 when it has none: the same number as the device's `dev_num`.
    pub id: i32,
    pub count: u64,
}

// ---------------------------------------------------------------------------
// node_config_load
// ---------------------------------------------------------------------------

/// What [`load`] works on.
pub struct LoadInput<'a> {
    /// The node's records as slurmd passes them (every GRES).
    pub records: &'a [GresRecord],
    pub kind: SharedKind,
    /// Build the device list (only slurmd looks at device files).
    pub in_slurmd: bool,
    /// `DebugFlags=Gres`: the record lists are logged at verbose, else debug.
    pub debug_gres: bool,
    /// The release spells the line before the first list `Initialized`
    /// (22.05: `Initalized`; [`Behaviour::init_list_line_spelled`]).
    ///
    /// [`Behaviour::init_list_line_spelled`]: super::behaviour::Behaviour::init_list_line_spelled
    pub init_list_line_spelled: bool,
    /// `fake_gpus.conf` exists: also log the final list in the parsable form
    /// that Slurm's own tests read.
    pub fake_gpus: bool,
    pub stat: &'a dyn Fn(&str) -> Result<DevStat, String>,
    /// The most verbose level the daemon logs: lines above it are not built.
    pub log_max: LogLevel,
}

/// What [`load`] produces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The node's records, rewritten: this replaces slurmd's list.
    pub records: Vec<GresRecord>,
    pub devices: Vec<GresDevice>,
    /// Per GPU: this GRES's count.
    pub counts: Vec<SharedDev>,
    /// The `ENV_*` flags of the node's records.
    pub node_flags: ConfFlags,
}

/// Rewrite the node's records for one shared GRES and build its device list
/// and per-GPU counts (the stock plugins' `gres_c_s_init_share_devices`).
/// Log lines come back whatever the outcome; `Err` carries the message of
/// the stock plugin's `fatal()`.
pub fn load(input: &LoadInput<'_>) -> (Result<Loaded, String>, Vec<LogLine>) {
    let mut logs = Log::new(input.log_max);
    let result = load_inner(input, &mut logs);
    (result, logs.into_lines())
}

fn load_inner(input: &LoadInput<'_>, logs: &mut Log) -> Result<Loaded, String> {
    let name = input.kind.name();
    let list_level = if input.debug_gres { LogLevel::Verbose } else { LogLevel::Debug };
    if input.debug_gres {
        logs.push(LogLevel::Verbose, if input.init_list_line_spelled { "GRES: Initialized gres.conf list" } else { "GRES: Initalized gres.conf list" });
    }
    logs.push_each(list_level, input.records, to_log_line);

    let mut records = share_records(input.records, input.kind, logs)?;

    let list = devices::build_device_list(&records, name, input.in_slurmd, input.stat);
    for p in &list.problems {
        logs.push(LogLevel::Error, p.message.clone());
    }
    if list.has_fatal() {
        return Err("failed to load configuration".into());
    }
    if input.debug_gres {
        for d in &list.devices {
            logs.push_with(LogLevel::Verbose, || format!("GRES: {name} device number {}({}):{}", d.dev_num, d.path, devices::device_id_string(d)));
        }
    }

    // Every record marked SHARED counts towards the total, whatever its
    // GRES (as the stock plugins count it); with nothing to share, this
    // GRES's records leave the list slurmd reports.
    let total: u64 = records.iter().filter(|r| r.flags.has(ConfFlags::SHARED)).map(|r| r.count).fold(0, u64::saturating_add);
    if total == 0 {
        records.retain(|r| r.name != name);
    }
    let counts = per_gpu_counts(&records, name);

    logs.push(list_level, "Final gres.conf list:");
    logs.push_each(list_level, &records, to_log_line);
    if input.fake_gpus {
        logs.push(LogLevel::Info, "Final normalized gres.conf list (parsable):");
        logs.push_each(LogLevel::Info, &records, to_parsable);
    }

    let node_flags = devices::node_env_flags(&records);
    Ok(Loaded { records, devices: list.devices, counts, node_flags })
}

/// The per-GPU counts of GRES `name` in a final record list.  Only this
/// GRES's own records: the stock plugins also take the other shared GRES's
/// records, so that with `GresTypes=gpu,shard,mps` an MPS job's percentage
/// was computed from the GPU's shard count (docs/deviations.md).
pub fn per_gpu_counts(records: &[GresRecord], name: &str) -> Vec<SharedDev> {
    records
        .iter()
        .filter(|r| r.name == name && r.flags.has(ConfFlags::SHARED))
        .map(|r| SharedDev { id: r.file.as_deref().and_then(devices::trailing_number).unwrap_or(-1), count: r.count })
        .collect()
}

fn expand_file(file: &str) -> Result<Vec<String>, String> {
    match hostlist::expand(file) {
        Ok(files) if !files.is_empty() => Ok(files),
        Ok(_) => Err(format!("can't parse gres.conf file record ({file}): no file")),
        Err(e) => Err(format!("can't parse gres.conf file record ({file}): {e}")),
    }
}

/// The records with every GPU record split into one record per device file
/// and one record of the shared GRES per GPU, each just before its GPU, at
/// the end of the list (the other records keep their places).
pub fn share_records(records: &[GresRecord], kind: SharedKind, logs: &mut Log) -> Result<Vec<GresRecord>, String> {
    let shared_name = kind.name();
    let mut rest = Vec::new();
    let mut sharing = Vec::new();
    let mut shared = Vec::new();
    let mut fileless_gpu_reported = false;
    let (mut without_file, mut with_file) = (0u32, 0u32);

    for r in records {
        if r.name == SHARING_NAME {
            let Some(file) = r.file.as_deref() else {
                if !fileless_gpu_reported {
                    logs.push(LogLevel::Error, "SHARING configuration lacks \"File\" specification");
                    fileless_gpu_reported = true;
                }
                rest.push(r.clone());
                continue;
            };
            if r.flags.has(ConfFlags::HAS_MULT) {
                // The files of one GPU (a MIG device: its GPU's file and
                // capability files) stay one GPU; the stock plugin made a
                // GPU of each file (docs/deviations.md, MPS/shard 6).
                sharing.push(split_sharing(r, file.to_string()));
                continue;
            }
            for f in expand_file(file)? {
                sharing.push(split_sharing(r, f));
            }
        } else if r.name == shared_name {
            match r.file.as_deref() {
                None => {
                    if without_file > 0 {
                        return Err("_build_shared_list: bad configuration, multiple configurations without \"File\"".into());
                    }
                    if with_file > 0 {
                        return Err("_build_shared_list: multiple configurations with and without \"File\"".into());
                    }
                    without_file += 1;
                    shared.push(GresRecord { file: None, links: None, ..split_shared(r) });
                }
                Some(file) => {
                    with_file += 1;
                    if without_file > 0 {
                        return Err("gres/shared: multiple configurations with and without \"File\"".into());
                    }
                    let files = expand_file(file)?;
                    let per_file = r.count / files.len() as u64;
                    for f in files {
                        shared.push(GresRecord { file: Some(f), count: per_file, ..split_shared(r) });
                    }
                }
            }
        } else {
            rest.push(r.clone());
        }
    }

    if sharing.is_empty() && !shared.is_empty() {
        logs.push(LogLevel::Error, "SHARED specified without any SHARING found");
        return Err("failed to merge SHARED and SHARING configuration".into());
    }

    // A Count without File: spread over the GPUs, the remainder going to
    // the last ones (10 over 4 GPUs: 2, 2, 3, 3).
    if let [only] = shared.as_slice() {
        if only.file.is_none() {
            let mut left = only.count;
            let mut gpus_left = sharing.len() as u64;
            for gpu in sharing {
                let mut rec = new_shared_record(&gpu, kind, Some(only));
                rec.count = left / gpus_left;
                left -= rec.count;
                gpus_left -= 1;
                rest.push(rec);
                rest.push(gpu);
            }
            return Ok(rest);
        }
    }

    // Count per File: each GPU gets the record of its file, or one with a
    // zero count; Type and Cores always come from the GPU.
    for gpu in sharing {
        let rec = match shared.iter().position(|s| s.file == gpu.file) {
            Some(i) => {
                let mut rec = shared.remove(i);
                if gpu.type_name.is_some() {
                    rec.flags.set(ConfFlags::HAS_TYPE);
                }
                if gpu.cpus.is_some() {
                    rec.cpus = gpu.cpus.clone();
                }
                if gpu.cpus_bitmap.is_some() {
                    rec.cpu_cnt = gpu.cpu_cnt;
                    rec.cpus_bitmap = gpu.cpus_bitmap.clone();
                }
                rec.type_name = gpu.type_name.clone();
                rec.unique_id = gpu.unique_id.clone();
                rec
            }
            None => GresRecord { count: 0, ..new_shared_record(&gpu, kind, None) },
        };
        rest.push(rec);
        rest.push(gpu);
    }
    for left in shared {
        logs.push_with(LogLevel::Error, || {
            format!("Discarding gres/'shared' configuration (File={}) without matching gres/'sharing' record", left.file.as_deref().unwrap_or("(null)"))
        });
    }
    Ok(rest)
}

/// One device file of a GPU record, as a record of its own.
fn split_sharing(r: &GresRecord, file: String) -> GresRecord {
    let mut flags = r.flags;
    if r.type_name.is_some() {
        flags.set(ConfFlags::HAS_TYPE);
    }
    GresRecord { flags, count: 1, file: Some(file), ..r.clone() }
}

/// A copy of a shared record as the split keeps it (no `Links`).
fn split_shared(r: &GresRecord) -> GresRecord {
    let mut flags = r.flags;
    if r.type_name.is_some() {
        flags.set(ConfFlags::HAS_TYPE);
    }
    GresRecord { flags, links: None, ..r.clone() }
}

/// A new shared record for `gpu`, with the flags of the configured shared
/// record `configured` when it is marked shared, else the defaults.
fn new_shared_record(gpu: &GresRecord, kind: SharedKind, configured: Option<&GresRecord>) -> GresRecord {
    let mut flags = gpu.flags;
    match configured {
        Some(c) if c.flags.has(ConfFlags::SHARED) => flags.set(c.flags.0),
        _ => {
            flags.set(ConfFlags::SHARED);
            if kind.one_sharing_by_default() {
                flags.set(ConfFlags::ONE_SHARING);
            }
        }
    }
    GresRecord {
        flags,
        count: 0,
        cpu_cnt: gpu.cpu_cnt,
        cpus: gpu.cpus.clone(),
        cpus_bitmap: gpu.cpus_bitmap.clone(),
        file: gpu.file.clone(),
        links: None,
        name: kind.name().to_string(),
        type_name: gpu.type_name.clone(),
        unique_id: None,
        plugin_id: gres_build_id(kind.name()),
    }
}

// ---------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------

/// A job's share of a GPU under MPS, in percent: the job's count times 100
/// over the GPU's configured count, rounded down but at least 1 (0 for a
/// GPU configured with no count).  Counts 1300, 1200, 1100, 1000 and a job
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

// ---------------------------------------------------------------------------
// slurmd -> slurmstepd
// ---------------------------------------------------------------------------

/// What slurmd hands to slurmstepd for a shared GRES.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepdInfo {
    pub devices: Vec<GresDevice>,
    /// Sent by gres/shard only (gres/mps sets CUDA variables only).
    pub node_flags: ConfFlags,
    pub counts: Vec<SharedDev>,
}

/// Packed size of one per-GPU count: two 64-bit numbers.
const SHARED_DEV_BYTES: usize = 16;

fn write_u64(w: &mut dyn WireWriter, v: u64) {
    // Slurm's pack64 is big-endian: the high half, then the low half.
    w.u32((v >> 32) as u32);
    w.u32(v as u32);
}

fn read_u64(r: &mut dyn WireReader, what: &'static str) -> Result<u64, WireError> {
    let hi = r.u32(what)? as u64;
    let lo = r.u32(what)? as u64;
    Ok((hi << 32) | lo)
}

/// The stock plugins' message: the devices, the node's flags (shard only),
/// then the count and the device number of each GPU.
pub fn write_stepd(w: &mut dyn WireWriter, kind: SharedKind, info: &StepdInfo) {
    write_stepd_as(w, kind, info, &crate::behaviour::Behaviour::BASELINE)
}

/// [`write_stepd`] in the layout of the release that behaves as `behaviour`.
pub fn write_stepd_as(w: &mut dyn WireWriter, kind: SharedKind, info: &StepdInfo, behaviour: &crate::behaviour::Behaviour) {
    wire::write_devices_as(w, &info.devices, behaviour);
    if kind == SharedKind::Shard {
        w.u32(info.node_flags.0);
    }
    w.u32(info.counts.len() as u32);
    for c in &info.counts {
        write_u64(w, c.count);
        // A C int widened to 64 bits: -1 travels as all ones.
        write_u64(w, c.id as i64 as u64);
    }
}

pub fn read_stepd(r: &mut dyn WireReader, kind: SharedKind) -> Result<StepdInfo, WireError> {
    read_stepd_as(r, kind, &crate::behaviour::Behaviour::BASELINE)
}

/// [`read_stepd`] in the layout of the release that behaves as `behaviour`.
pub fn read_stepd_as(r: &mut dyn WireReader, kind: SharedKind, behaviour: &crate::behaviour::Behaviour) -> Result<StepdInfo, WireError> {
    let devices = wire::read_devices_as(r, behaviour)?;
    let node_flags = if kind == SharedKind::Shard { ConfFlags(r.u32("node flags")?) } else { ConfFlags(0) };
    let n = r.u32("shared device count")?;
    if (n as usize).saturating_mul(SHARED_DEV_BYTES) > r.remaining() {
        return Err(WireError::TooMany(n));
    }
    let mut counts = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let count = read_u64(r, "shared device count value")?;
        let raw = read_u64(r, "shared device id")?;
        let id = i32::try_from(raw as i64).map_err(|_| WireError::Invalid { what: "shared device id", value: raw })?;
        counts.push(SharedDev { id, count });
    }
    Ok(StepdInfo { devices, node_flags, counts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{device_order_op, DEVICE_ORDER_VAR};
    use crate::model::DevType;
    use crate::wire::MemWire;
    use std::collections::HashMap;

    const ENV_ALL: u32 = ConfFlags::ENV_SET | ConfFlags::ENV_DEF;

    fn gpu(file: &str) -> GresRecord {
        GresRecord {
            name: "gpu".into(),
            file: Some(file.into()),
            count: hostlist::expand(file).unwrap().len() as u64,
            cpu_cnt: 4,
            flags: ConfFlags(ConfFlags::HAS_FILE | ENV_ALL),
            plugin_id: gres_build_id("gpu"),
            ..Default::default()
        }
    }

    /// A shared record as slurmd's gres.conf parser makes it.
    fn conf(kind: SharedKind, count: u64, file: Option<&str>) -> GresRecord {
        let mut flags = ConfFlags(ConfFlags::SHARED);
        if kind == SharedKind::Mps {
            flags.set(ConfFlags::ONE_SHARING);
        }
        if file.is_some() {
            flags.set(ConfFlags::HAS_FILE);
        }
        GresRecord {
            name: kind.name().into(),
            count,
            cpu_cnt: 4,
            file: file.map(str::to_string),
            flags,
            plugin_id: gres_build_id(kind.name()),
            ..Default::default()
        }
    }

    /// A shared record made from slurm.conf's `Gres=` alone (no flags).
    fn from_slurm_conf(kind: SharedKind, count: u64) -> GresRecord {
        GresRecord { flags: ConfFlags(0), ..conf(kind, count, None) }
    }

    fn names_counts(records: &[GresRecord]) -> Vec<(String, u64, Option<String>)> {
        records.iter().map(|r| (r.name.clone(), r.count, r.file.clone())).collect()
    }

    fn fake_stat(path: &str) -> Result<DevStat, String> {
        Ok(DevStat::device(DevType::Char, 195, devices::trailing_number(path).unwrap_or(0) as u32))
    }

    fn load_ok(records: &[GresRecord], kind: SharedKind) -> (Loaded, Vec<LogLine>) {
        let input = LoadInput {
            records,
            kind,
            in_slurmd: true,
            debug_gres: false,
            init_list_line_spelled: true,
            fake_gpus: false,
            stat: &fake_stat,
            log_max: LogLevel::Debug3,
        };
        let (r, logs) = load(&input);
        (r.unwrap_or_else(|e| panic!("{e}: {logs:?}")), logs)
    }

    #[test]
    fn gpu_records_are_split_per_file_and_each_gets_a_shared_record() {
        let recs = vec![gpu("/dev/nvidia[0-3]"), from_slurm_conf(SharedKind::Mps, 400)];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        let got = names_counts(&l.records);
        let want: Vec<_> = (0..4)
            .flat_map(|i| {
                let f = Some(format!("/dev/nvidia{i}"));
                [("mps".to_string(), 100, f.clone()), ("gpu".to_string(), 1, f)]
            })
            .collect();
        assert_eq!(got, want);
        for r in l.records.iter().filter(|r| r.name == "mps") {
            // Default flags of a shared record: the GPU's plus SHARED and,
            // for mps, ONE_SHARING.
            assert_eq!(r.flags.0, ConfFlags::HAS_FILE | ENV_ALL | ConfFlags::SHARED | ConfFlags::ONE_SHARING);
            assert_eq!(r.plugin_id, gres_build_id("mps"));
        }
        assert_eq!(l.counts, (0..4).map(|i| SharedDev { id: i, count: 100 }).collect::<Vec<_>>());
        assert_eq!(l.devices.len(), 4);
        assert_eq!(l.devices[3].path, "/dev/nvidia3");
    }

    #[test]
    fn multiple_files_of_one_gpu_stay_one_gpu() {
        // Two MIG devices of GPU 0, each its GPU file plus two cap files.
        let mig = |gi: u32| GresRecord {
            count: 1,
            flags: ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_MULT | ENV_ALL),
            unique_id: Some(format!("MIG-{gi}")),
            ..gpu(&format!("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap{gi},/dev/nvidia-caps/nvidia-cap{}", gi + 1))
        };
        let recs = vec![mig(10), mig(20)];
        let mut logs = Log::default();
        let out = share_records(&recs, SharedKind::Shard, &mut logs).unwrap();
        let gpus: Vec<_> = out.iter().filter(|r| r.name == "gpu").collect();
        assert_eq!(gpus.len(), 2, "{out:?}");
        assert_eq!(gpus[0].file, recs[0].file);
        assert_eq!(gpus[1].unique_id.as_deref(), Some("MIG-20"));
    }

    #[test]
    fn shard_is_not_one_sharing_by_default() {
        let recs = vec![gpu("/dev/nvidia[0-1]"), from_slurm_conf(SharedKind::Shard, 64)];
        let (l, _) = load_ok(&recs, SharedKind::Shard);
        let shard: Vec<_> = l.records.iter().filter(|r| r.name == "shard").collect();
        assert_eq!(shard.len(), 2);
        assert!(shard.iter().all(|r| r.count == 32 && r.flags.has(ConfFlags::SHARED) && !r.flags.has(ConfFlags::ONE_SHARING)));
        assert_eq!(l.node_flags.0, ConfFlags::ENV_SET);
    }

    #[test]
    fn configured_flags_are_kept() {
        // Name=mps Count=200 Flags=all_sharing: SHARED without ONE_SHARING.
        let mut m = conf(SharedKind::Mps, 200, None);
        m.flags.clear(ConfFlags::ONE_SHARING);
        let (l, _) = load_ok(&[gpu("/dev/nvidia[0-1]"), m], SharedKind::Mps);
        assert!(l.records.iter().filter(|r| r.name == "mps").all(|r| !r.flags.has(ConfFlags::ONE_SHARING)));
    }

    #[test]
    fn remainder_goes_to_the_last_gpus() {
        let (l, _) = load_ok(&[gpu("/dev/nvidia[0-3]"), conf(SharedKind::Shard, 10, None)], SharedKind::Shard);
        let counts: Vec<u64> = l.counts.iter().map(|c| c.count).collect();
        assert_eq!(counts, vec![2, 2, 3, 3]);
    }

    #[test]
    fn per_file_counts_type_and_cores_from_the_gpu() {
        let mut recs = Vec::new();
        for (i, t) in ["gtx1080", "gtx1070", "gtx1060", "gtx1050"].iter().enumerate() {
            let mut g = gpu(&format!("/dev/nvidia{i}"));
            g.type_name = Some(t.to_string());
            g.flags.set(ConfFlags::HAS_TYPE);
            g.cpus = Some(if i < 2 { "0-1" } else { "2-3" }.into());
            g.cpus_bitmap = Some(Bitmap::from_ranges(4, g.cpus.as_deref().unwrap()).unwrap());
            g.unique_id = Some(format!("GPU-{i}"));
            recs.push(g);
        }
        // Listed in another order, with Type and Cores of their own (ignored).
        for (i, c) in [(3, 1000), (1, 1200), (0, 1300), (2, 1100)] {
            let mut m = conf(SharedKind::Mps, c, Some(&format!("/dev/nvidia{i}")));
            m.type_name = Some("ignored".into());
            m.cpus = Some("3".into());
            recs.push(m);
        }
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        let mps: Vec<&GresRecord> = l.records.iter().filter(|r| r.name == "mps").collect();
        assert_eq!(mps.iter().map(|r| r.count).collect::<Vec<_>>(), vec![1300, 1200, 1100, 1000]);
        assert_eq!(mps[0].type_name.as_deref(), Some("gtx1080"));
        assert_eq!(mps[3].type_name.as_deref(), Some("gtx1050"));
        assert_eq!(mps[2].cpus.as_deref(), Some("2-3"));
        assert_eq!(mps[2].cpus_bitmap, Some(Bitmap::from_indices(4, &[2, 3])));
        assert_eq!(mps[1].unique_id.as_deref(), Some("GPU-1"));
        assert!(mps.iter().all(|r| r.flags.has(ConfFlags::HAS_TYPE)));
        assert_eq!(
            l.counts,
            vec![SharedDev { id: 0, count: 1300 }, SharedDev { id: 1, count: 1200 }, SharedDev { id: 2, count: 1100 }, SharedDev { id: 3, count: 1000 }]
        );
    }

    #[test]
    fn gpus_without_a_count_get_zero_and_unmatched_files_are_dropped() {
        let recs = vec![gpu("/dev/nvidia[0-2]"), conf(SharedKind::Mps, 300, Some("/dev/nvidia[1-2]")), conf(SharedKind::Mps, 50, Some("/dev/nvidia7"))];
        let mut logs = Log::default();
        let out = share_records(&recs, SharedKind::Mps, &mut logs).unwrap();
        let mps: Vec<u64> = out.iter().filter(|r| r.name == "mps").map(|r| r.count).collect();
        assert_eq!(mps, vec![0, 150, 150]);
        let zero = out.iter().find(|r| r.name == "mps" && r.count == 0).unwrap();
        assert!(zero.flags.has(ConfFlags::SHARED) && zero.flags.has(ConfFlags::ONE_SHARING));
        assert!(logs.lines().iter().any(|l| l.level == LogLevel::Error && l.message.contains("File=/dev/nvidia7")), "{logs:?}");
    }

    #[test]
    fn file_count_is_divided_rounding_down() {
        let recs = vec![gpu("/dev/nvidia[0-1]"), conf(SharedKind::Mps, 301, Some("/dev/nvidia[0-1]"))];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        assert_eq!(l.counts.iter().map(|c| c.count).collect::<Vec<_>>(), vec![150, 150]);
    }

    #[test]
    fn other_records_keep_their_place() {
        let nic = GresRecord { name: "nic".into(), count: 2, ..Default::default() };
        let recs = vec![gpu("/dev/nvidia[0-1]"), nic.clone(), from_slurm_conf(SharedKind::Mps, 2)];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        assert_eq!(l.records[0], nic);
        assert_eq!(l.records.len(), 5);
    }

    #[test]
    fn nothing_to_share_removes_the_records() {
        // GresTypes lists mps, but no count anywhere: slurmd passes an
        // empty mps record; the GPUs are still split.
        let recs = vec![gpu("/dev/nvidia[0-3]"), from_slurm_conf(SharedKind::Mps, 0)];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        assert_eq!(l.records.len(), 4);
        assert!(l.records.iter().all(|r| r.name == "gpu" && r.count == 1));
        assert!(l.counts.is_empty());
    }

    #[test]
    fn other_shared_records_count_towards_the_total_as_in_stock() {
        // The records of gres/shard (already split) keep zero-count mps
        // records in the list, but do not enter mps's per-GPU counts.
        let (after_shard, _) = load_ok(&[gpu("/dev/nvidia[0-1]"), conf(SharedKind::Shard, 8, None), from_slurm_conf(SharedKind::Mps, 0)], SharedKind::Shard);
        let (l, _) = load_ok(&after_shard.records, SharedKind::Mps);
        assert_eq!(l.records.iter().filter(|r| r.name == "mps").count(), 2);
        assert_eq!(l.counts, vec![SharedDev { id: 0, count: 0 }, SharedDev { id: 1, count: 0 }]);
        // Splitting again changes nothing for the GPUs.
        assert_eq!(l.records.iter().filter(|r| r.name == "gpu").count(), 2);
        assert_eq!(l.records.iter().filter(|r| r.name == "shard").map(|r| r.count).sum::<u64>(), 8);
    }

    #[test]
    fn configuration_errors() {
        let g = gpu("/dev/nvidia[0-1]");
        let fails = |recs: Vec<GresRecord>| {
            let mut logs = Log::default();
            share_records(&recs, SharedKind::Mps, &mut logs).unwrap_err()
        };
        let e = fails(vec![g.clone(), conf(SharedKind::Mps, 1, None), conf(SharedKind::Mps, 2, None)]);
        assert!(e.contains("multiple configurations without \"File\""), "{e}");
        let e = fails(vec![g.clone(), conf(SharedKind::Mps, 1, Some("/dev/nvidia0")), conf(SharedKind::Mps, 2, None)]);
        assert!(e.contains("_build_shared_list: multiple configurations with and without \"File\""), "{e}");
        let e = fails(vec![g.clone(), conf(SharedKind::Mps, 2, None), conf(SharedKind::Mps, 1, Some("/dev/nvidia0"))]);
        assert_eq!(e, "gres/shared: multiple configurations with and without \"File\"");
        let mut logs = Log::default();
        let e = share_records(&[conf(SharedKind::Mps, 100, None)], SharedKind::Mps, &mut logs).unwrap_err();
        assert_eq!(e, "failed to merge SHARED and SHARING configuration");
        assert_eq!(logs.lines().last().unwrap().message, "SHARED specified without any SHARING found");
    }

    #[test]
    fn gpu_without_file_is_reported_once_and_kept() {
        let fileless = GresRecord { file: None, flags: ConfFlags(ENV_ALL), ..gpu("/dev/nvidia0") };
        let recs = vec![fileless.clone(), fileless.clone(), gpu("/dev/nvidia0")];
        let mut logs = Log::default();
        let out = share_records(&recs, SharedKind::Shard, &mut logs).unwrap();
        assert_eq!(logs.lines().iter().filter(|l| l.message.contains("lacks \"File\"")).count(), 1);
        assert_eq!(&out[..2], &[fileless.clone(), fileless]);
    }

    #[test]
    fn duplicate_files_fail_the_load() {
        let recs = vec![gpu("/dev/nvidia[0-1]"), gpu("/dev/nvidia1"), from_slurm_conf(SharedKind::Mps, 100)];
        let input = LoadInput {
            records: &recs,
            kind: SharedKind::Mps,
            in_slurmd: true,
            debug_gres: false,
            init_list_line_spelled: true,
            fake_gpus: false,
            stat: &fake_stat,
            log_max: LogLevel::Debug3,
        };
        let (r, logs) = load(&input);
        assert_eq!(r.unwrap_err(), "failed to load configuration");
        assert!(logs.iter().any(|l| l.message.contains("duplicate device file name")));
    }

    #[test]
    fn final_list_logging() {
        let recs = vec![gpu("/dev/nvidia0"), from_slurm_conf(SharedKind::Mps, 100)];
        let input = LoadInput {
            records: &recs,
            kind: SharedKind::Mps,
            in_slurmd: false,
            debug_gres: true,
            init_list_line_spelled: false,
            fake_gpus: true,
            stat: &fake_stat,
            log_max: LogLevel::Debug3,
        };
        let (r, logs) = load(&input);
        let l = r.unwrap();
        assert!(l.devices.is_empty(), "no device files outside slurmd");
        let text: Vec<&str> = logs.iter().map(|l| l.message.as_str()).collect();
        // As 22.05 spells it; later releases as their gres_c_s.c does.
        assert_eq!((text[0], logs[0].level), ("GRES: Initalized gres.conf list", LogLevel::Verbose));
        let (_, later) = load(&LoadInput { init_list_line_spelled: true, ..input });
        assert_eq!(later[0].message, "GRES: Initialized gres.conf list");
        let fin = text.iter().position(|m| *m == "Final gres.conf list:").unwrap();
        assert_eq!(logs[fin].level, LogLevel::Verbose);
        assert_eq!(
            text[fin + 1],
            "    GRES[mps] Type:(null) Count:100 Cores(4):(null)  Links:(null) Flags:HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT,SHARED,ONE_SHARING File:/dev/nvidia0 UniqueId:(null)"
        );
        let p = text.iter().position(|m| *m == "Final normalized gres.conf list (parsable):").unwrap();
        assert_eq!(logs[p].level, LogLevel::Info);
        assert_eq!(
            text[p + 1],
            "GRES_PARSABLE[mps](100):(null)|4|(null)|(null)|/dev/nvidia0|HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT,SHARED,ONE_SHARING"
        );
        // Without DebugFlags=Gres the lists go to debug, and no parsable
        // list without fake_gpus.conf.
        let input = LoadInput { debug_gres: false, fake_gpus: false, ..input };
        let (_, logs) = load(&input);
        assert!(logs.iter().all(|l| l.level == LogLevel::Debug), "{logs:?}");
        // At info (slurmd -G) only the parsable list is left.
        let input = LoadInput { fake_gpus: true, log_max: LogLevel::Info, ..input };
        let (_, logs) = load(&input);
        assert!(!logs.is_empty() && logs.iter().all(|l| l.level == LogLevel::Info), "{logs:?}");
    }

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

    // -- wire ---------------------------------------------------------------

    fn sample() -> StepdInfo {
        let mut devices = devs(2);
        devices[1].unique_id = Some("MIG-1".into());
        StepdInfo { devices, node_flags: ConfFlags(ConfFlags::ENV_NVML), counts: vec![SharedDev { id: 0, count: 1300 }, SharedDev { id: -1, count: u64::MAX }] }
    }

    #[test]
    fn stepd_round_trip() {
        for kind in [SharedKind::Mps, SharedKind::Shard] {
            let mut w = MemWire::default();
            write_stepd(&mut w, kind, &sample());
            let got = read_stepd(&mut w, kind).unwrap();
            let mut want = sample();
            if kind == SharedKind::Mps {
                want.node_flags = ConfFlags(0);
            }
            assert_eq!(got, want);
            assert_eq!(w.remaining(), 0);
        }
    }

    #[test]
    fn stepd_layout_is_slurms() {
        // Devices (none), then the count, then pack64 count and id.
        let mut w = MemWire::default();
        write_stepd(&mut w, SharedKind::Mps, &StepdInfo { counts: vec![SharedDev { id: -1, count: 0x1_0000_0002 }], ..Default::default() });
        assert_eq!(w.bytes, [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 2], [0xff; 4], [0xff; 4]].concat());
    }

    #[test]
    fn every_truncation_is_an_error() {
        for kind in [SharedKind::Mps, SharedKind::Shard] {
            let mut w = MemWire::default();
            write_stepd(&mut w, kind, &sample());
            for cut in 0..w.bytes.len() {
                let mut r = MemWire { bytes: w.bytes[..cut].to_vec(), pos: 0 };
                assert!(read_stepd(&mut r, kind).is_err(), "{kind:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn bad_counts_and_ids_are_rejected() {
        let mut w = MemWire::default();
        wire::write_devices(&mut w, &[]);
        WireWriter::u32(&mut w, u32::MAX);
        assert_eq!(read_stepd(&mut w, SharedKind::Mps), Err(WireError::TooMany(u32::MAX)));
        let mut w = MemWire::default();
        wire::write_devices(&mut w, &[]);
        WireWriter::u32(&mut w, 1);
        write_u64(&mut w, 5);
        write_u64(&mut w, 1 << 40);
        assert!(matches!(read_stepd(&mut w, SharedKind::Mps), Err(WireError::Invalid { what: "shared device id", .. })));
    }
}
