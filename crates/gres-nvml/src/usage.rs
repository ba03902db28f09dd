//! Per-process GPU accounting (`gpu_p_usage_read`): one view of every GPU
//! per poll of slurmstepd's jobacct_gather, shared by the step's processes.
//!
//! Within one poll jobacct_gather asks for each process of the step in
//! turn, once each; stock gpu/nvml queries NVML for every GPU on every
//! such call (a step of 64 processes on 8 GPUs: some 3,500 NVML calls a
//! poll).  Ours reads each GPU once per poll ([`GpuView`]) and answers the
//! step's processes from that view: a process asked for a second time, or
//! a view older than [`VIEW_TTL`], starts a new poll.  The numbers are the
//! core's rule ([`gres_core::gpu_usage`]).

use crate::{session, Log, Paths, Session};
use gres_core::gpu_usage::{self, GpuView, ProcessUsage};
use nvml_wrapper::error::NvmlError;
use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long one view serves: far less than the shortest poll interval
/// (`JobAcctGatherFrequency` counts whole seconds), far more than one
/// poll's walk over the step's processes.
pub const VIEW_TTL: Duration = Duration::from_millis(500);

/// One poll's view and the processes already answered from it.
struct Poll {
    taken: Instant,
    gpus: Vec<GpuView>,
    served: HashSet<u32>,
}

static POLL: Mutex<Option<Poll>> = Mutex::new(None);

/// The GPU memory and utilisation of process `pid`, starting from the
/// record's `last_time`; `None` when NVML cannot be used at all (logged).
pub fn process_usage(pid: u32, last_time: u64, paths: &Paths, log: &mut Log) -> Option<ProcessUsage> {
    let mut poll = POLL.lock().unwrap_or_else(PoisonError::into_inner);
    let fresh = poll.as_ref().is_some_and(|p| p.taken.elapsed() < VIEW_TTL && !p.served.contains(&pid));
    if !fresh {
        let s = match session(paths) {
            Ok(s) => s,
            Err(e) => {
                log.error(e);
                *poll = None;
                return None;
            }
        };
        *poll = Some(Poll { taken: Instant::now(), gpus: view(&s, log), served: HashSet::new() });
    }
    let p = poll.as_mut()?;
    p.served.insert(pid);
    Some(gpu_usage::process_usage(&p.gpus, pid, last_time))
}

/// Every GPU's processes and utilisation samples now.  A GPU whose handle
/// or lists cannot be read contributes what could be read (logged, as
/// stock logs it).
pub fn view(s: &Session, log: &mut Log) -> Vec<GpuView> {
    let count = match s.nvml.device_count() {
        Ok(n) => n,
        Err(e) => {
            log.error(format_args!("Failed to get device count: {}", s.text(&e)));
            return Vec::new();
        }
    };
    let mut gpus = Vec::with_capacity(count as usize);
    for i in 0..count {
        let mut g = GpuView::default();
        match s.nvml.device_by_index(i) {
            Ok(dev) => {
                g.compute = processes(s, dev.running_compute_processes(), "Compute", log);
                g.graphics = processes(s, dev.running_graphics_processes(), "Graphics", log);
                g.samples = match dev.process_utilization_stats(0) {
                    Ok(samples) => samples.iter().map(|u| (u.pid, u.timestamp, u.sm_util)).collect(),
                    // No sample yet, or a MIG device (NVML cannot tell
                    // utilisation per MIG device): nothing to add.
                    Err(NvmlError::NotFound | NvmlError::NotSupported) => Vec::new(),
                    Err(e) => {
                        log.error(format_args!("NVML: Failed to get usage({}): {}", code(&e), s.text(&e)));
                        Vec::new()
                    }
                };
            }
            Err(e) => log.error(format_args!("Failed to get device handle for GPU {i}: {}", s.text(&e))),
        }
        gpus.push(g);
    }
    gpus
}

fn processes(s: &Session, list: Result<Vec<nvml_wrapper::struct_wrappers::device::ProcessInfo>, NvmlError>, kind: &str, log: &mut Log) -> Vec<(u32, u64)> {
    use nvml_wrapper::enums::device::UsedGpuMemory;
    match list {
        Ok(procs) => procs
            .iter()
            .map(|p| {
                let bytes = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => b,
                    UsedGpuMemory::Unavailable => 0,
                };
                (p.pid, bytes)
            })
            .collect(),
        Err(e) => {
            log.error(format_args!("NVML: Failed to get {kind} running procs({}): {}", code(&e), s.text(&e)));
            Vec::new()
        }
    }
}

fn code(e: &NvmlError) -> String {
    crate::session::return_code(e).map(|c| c.to_string()).unwrap_or_else(|| "?".into())
}

/// Forget the current view (the next call starts a poll): for tests.
pub fn forget() {
    *POLL.lock().unwrap_or_else(PoisonError::into_inner) = None;
}
