//! A job step's GPUs watched for XID critical errors, for our gpu/nvml in
//! slurmstepd: [`start`] when the step starts (`gpu_p_step_hardware_init`)
//! registers the GPUs in an NVML event set and reads their UUIDs and PCI
//! bus ids; [`StepWatch::collect`] when it ends (`gpu_p_step_hardware_fini`)
//! takes the events NVML queued meanwhile, without waiting (each
//! `nvmlEventSetWait_v2` with a timeout of 0 ms, at most [`MAX_EVENTS`]),
//! and frees the set.
//!
//! Every call is bounded ([`crate::bounded`]): the event set lives on the
//! stack of a worker thread that pauses between the two
//! ([`crate::bounded::Tracker::pause`]), so no NVML object outlives the
//! session it came from and none is kept in a static.  A worker whose
//! handle is dropped without [`StepWatch::collect`] ends, freeing its set.

use crate::bounded::{self, Paused, Tracker};
use crate::health::{error, open, register, short_bus_id, GpuIds, XidEvent, XidWatch};
use crate::Paths;
use nvml_extra::NO_INSTANCE;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;
use std::time::{Duration, Instant, SystemTime};

/// The most events one collection takes (a GPU in an XID storm must not
/// keep slurmstepd at the step's end).
pub const MAX_EVENTS: usize = 64;

/// The step's watch between its start and its end.
pub struct StepWatch {
    paused: Paused<XidWatch>,
    ids: Vec<GpuIds>,
    registered: Vec<u32>,
}

/// Register the GPUs `gpus` (NVML indexes) for XID critical errors, each
/// call allowed `deadline`: what was registered (and what failed), and
/// the watch to collect from at the step's end, `None` when nothing could
/// be registered.
pub fn start(paths: &Paths, gpus: &[u32], deadline: Duration) -> (XidWatch, Option<StepWatch>) {
    let paths = paths.clone();
    let gpus = gpus.to_vec();
    match bounded::start(deadline, move |t: &Tracker<XidWatch>| {
        watch(t, &paths, &gpus);
    }) {
        Ok((b, paused)) => {
            let first = XidWatch { hang: b.hang, nvml_calls: b.calls, ..b.out };
            let handle = paused.map(|paused| StepWatch { paused, ids: first.ids.clone(), registered: first.registered.clone() });
            (first, handle)
        }
        Err(e) => (XidWatch { unusable: Some(e), ..Default::default() }, None),
    }
}

impl StepWatch {
    /// The events NVML queued for the step's GPUs since [`start`], with
    /// the GPUs' ids; no waiting.
    pub fn collect(self) -> XidWatch {
        let StepWatch { paused, ids, registered } = self;
        let (b, _) = paused.resume();
        XidWatch { hang: b.hang, nvml_calls: b.calls, ids, registered, ..b.out }
    }

    /// The GPUs registered.
    pub fn registered(&self) -> &[u32] {
        &self.registered
    }
}

fn watch(t: &Tracker<XidWatch>, paths: &Paths, gpus: &[u32]) -> Option<()> {
    let s = match open(t, paths)? {
        Ok(s) => s,
        Err(e) => {
            t.update(|w| w.unusable = Some(e));
            return Some(());
        }
    };
    let nvml = &s.nvml;
    let fail = |gpu: Option<u32>, call, e: &NvmlError| {
        let e = error(&s, call, e);
        t.update(|w| w.errors.push((gpu, e)));
    };
    let mut registered: Vec<(u32, Device<'_>)> = Vec::new();
    for &i in gpus {
        let dev = match t.call("nvmlDeviceGetHandleByIndex_v2", Some(i), 1, Duration::ZERO, || nvml.device_by_index(i))? {
            Ok(d) => d,
            Err(e) => {
                fail(Some(i), "nvmlDeviceGetHandleByIndex_v2", &e);
                continue;
            }
        };
        match t.call("nvmlDeviceGetSupportedEventTypes", Some(i), 1, Duration::ZERO, || dev.supported_event_types())? {
            Ok(types) if types.contains(EventTypes::CRITICAL_XID_ERROR) => {}
            Ok(_) => {
                fail(Some(i), "nvmlDeviceGetSupportedEventTypes", &NvmlError::NotSupported);
                continue;
            }
            Err(e) => {
                fail(Some(i), "nvmlDeviceGetSupportedEventTypes", &e);
                continue;
            }
        }
        // Read now, while the GPU answers: after an XID such as 79 (fallen
        // off the bus) NVML may no longer give them.
        let uuid = t.call("nvmlDeviceGetUUID", Some(i), 1, Duration::ZERO, || dev.uuid())?.ok();
        let pci = t.call("nvmlDeviceGetPciInfo_v3", Some(i), 1, Duration::ZERO, || dev.pci_info())?.ok().map(|p| short_bus_id(&p));
        t.update(|w| w.ids.push(GpuIds { index: i, uuid, pci }));
        registered.push((i, dev));
    }
    if registered.is_empty() {
        return Some(());
    }
    let set = register(t, &s, &mut registered, &fail)?;
    let set = match set {
        Ok(set) => set,
        Err(e) => {
            t.update(|w| w.unusable = Some(e));
            return Some(());
        }
    };
    let kept: Vec<u32> = registered.iter().map(|(i, _)| *i).collect();
    t.update(|w| {
        w.registered = kept.clone();
        w.ids.retain(|g| kept.contains(&g.index));
    });
    // The step runs; the caller resumes the worker at its end.
    if !t.pause() {
        // Never collected: the set is freed as it drops.
        return Some(());
    }
    let start = Instant::now();
    for _ in 0..MAX_EVENTS {
        match t.call("nvmlEventSetWait_v2", None, 1, Duration::ZERO, || s.extra.event_wait(nvml, &set, 0))? {
            Ok(ev) => {
                let gpu = registered.iter().find(|(_, d)| nvml_extra::same_device(d, &ev.device)).map(|(i, _)| *i);
                let instance = |id: u32| (id != NO_INSTANCE).then_some(id);
                let x = XidEvent {
                    gpu,
                    xid: ev.data,
                    gpu_instance: instance(ev.gpu_instance_id),
                    compute_instance: instance(ev.compute_instance_id),
                    after: start.elapsed(),
                    at: SystemTime::now(),
                };
                if ev.event_type & EventTypes::CRITICAL_XID_ERROR.bits() != 0 {
                    t.update(|w| w.events.push(x));
                }
            }
            // Nothing (more) queued.
            Err(NvmlError::Timeout) => break,
            Err(e) => {
                fail(None, "nvmlEventSetWait_v2", &e);
                break;
            }
        }
    }
    if let Some(Err(e)) = t.call("nvmlEventSetFree", None, 1, Duration::ZERO, || set.release_events()) {
        fail(None, "nvmlEventSetFree", &e);
    }
    Some(())
}
