//! GPU health readings (`nvml::health`) against the NVML stand-in: a
//! healthy node reads clean in a bounded number of NVML calls; each fault
//! the stand-in plays (tests/nvml-standin/fixtures/health_*.conf) shows in
//! the reading; a hanging NVML call ends the reading within its deadline
//! and is named; each error says what it means of the GPU (`Answer`); the
//! reading ends by its own end with what it read; XID events arrive in
//! order with their GPU.  Needs `cc`; no GPU, no Slurm.

use gres_test_harness::standin::{self, Standin};
use slurm_gpu_gres::nvml::health::{self, Answer, GpuHealth, HealthReading, Limits, NvLinks, Reading, RetiredPages, Throttle};
use slurm_gpu_gres::nvml::{step_watch, XidWatch};
use std::time::{Duration, Instant};

/// Generous for a loaded 2-CPU machine: no call of the stand-in takes it
/// unless told to.
const DEADLINE: Duration = Duration::from_secs(5);

fn read(s: &Standin) -> HealthReading {
    health::read_health(&s.paths(), DEADLINE)
}

/// A GPU of health_h100x8.conf as it reads when healthy.
fn assert_healthy(g: &GpuHealth) {
    assert!(!g.lost && g.handle_error.is_none(), "{g:#?}");
    assert!(g.errors().is_empty(), "{g:#?}");
    assert!(matches!(g.uuid, Reading::Value(ref u) if u.starts_with("GPU-")), "{g:#?}");
    assert_eq!(g.mig_mode, Reading::Value(false));
    if g.index == 7 {
        // No ECC on this one: not supported, and so no counts.
        assert_eq!((&g.ecc_enabled, &g.dbe_volatile, &g.dbe_aggregate), (&Reading::NotSupported, &Reading::NotSupported, &Reading::NotSupported));
    } else {
        assert_eq!((&g.ecc_enabled, &g.dbe_volatile, &g.dbe_aggregate), (&Reading::Value(true), &Reading::Value(0), &Reading::Value(0)), "{g:#?}");
    }
    // Hopper remaps rows and retires no pages.
    assert_eq!(g.retired_pages, Reading::NotSupported);
    let rows = g.remapped_rows.value().expect("remapped rows");
    assert!(!rows.pending && !rows.failure && rows.uncorrected == 0, "{rows:?}");
    let t = g.throttle.value().expect("throttle reasons");
    assert!(!(t.sw_thermal || t.hw_thermal || t.sw_power_cap || t.hw_power_brake || t.hw_slowdown), "{t:?}");
    // Its driver predates the recovery action field.
    assert_eq!(g.recovery_action, Reading::NotSupported);
    assert_eq!(g.nvlinks, Reading::Value(NvLinks { up: (0..18).collect(), down: vec![] }));
}

fn gpu(r: &HealthReading, i: usize) -> &GpuHealth {
    &r.gpus[i]
}

/// The healthy node: every GPU clean, ECC not supported on one handled,
/// and the NVML calls made counted exactly (what the bench reports).
#[test]
fn a_healthy_node_reads_clean() {
    let s = Standin::new("health_h100x8.conf");
    let r = read(&s);
    assert_eq!((&r.unusable, &r.hang, r.device_count), (&None, &None, Some(8)));
    assert_eq!(r.gpus.len(), 8);
    for g in &r.gpus {
        assert_healthy(g);
    }
    let g0 = gpu(&r, 0);
    assert_eq!(g0.uuid, Reading::Value("GPU-5bc8fbbc-bde5-c099-4164-d8399f767c45".into()));
    assert_eq!(g0.pci_bus_id, Reading::Value("0000:18:00.0".into()));
    assert_eq!(gpu(&r, 7).pci_bus_id, Reading::Value("0000:db:00.0".into()));
    assert_eq!(gpu(&r, 3).minor, Reading::Value(3));
    assert_eq!(gpu(&r, 1).remapped_rows.value().map(|m| m.corrected), Some(2));
    // Per GPU: handle, UUID, PCI, minor, MIG mode, ECC mode, 2 ECC
    // totals, retired pages (not supported: 1), remapped rows, throttle
    // reasons, recovery action (one field value), 18 NVLink lanes = 30;
    // GPU 7 without ECC totals 28; plus the device count.
    assert_eq!(r.nvml_calls, 7 * 30 + 28 + 1);
    let made = s.calls().iter().filter(|c| !c.starts_with("nvmlInit") && !c.starts_with("nvmlShutdown")).count();
    assert_eq!(r.nvml_calls as usize, made, "{:#?}", s.calls());
    // No MIG device read, no second look.
    assert_eq!(s.count("nvmlDeviceGetHandleByIndex_v2"), 8);
    assert_eq!(s.count("nvmlDeviceGetMigDeviceHandleByIndex"), 0);
}

#[test]
fn double_bit_ecc_errors() {
    let s = Standin::new("health_dbe.conf");
    let r = read(&s);
    let g = gpu(&r, 2);
    assert_eq!((&g.dbe_volatile, &g.dbe_aggregate), (&Reading::Value(1), &Reading::Value(3)));
    for i in [0, 1, 3, 4, 5, 6, 7] {
        assert_healthy(gpu(&r, i));
    }
}

#[test]
fn retired_pages_and_pending_retirement() {
    let s = Standin::new("health_retired.conf");
    let r = read(&s);
    assert_eq!(gpu(&r, 0).retired_pages, Reading::Value(RetiredPages { single_bit: 0, double_bit: 0, pending: false }));
    let pages = Reading::Value(RetiredPages { single_bit: 2, double_bit: 1, pending: true });
    assert_eq!(gpu(&r, 1).retired_pages, pages);
    assert_eq!(pages.value().map(RetiredPages::count), Some(3));
    // GPU 0: two counts and the pending status; GPU 1 also reads the two
    // lists of pages.
    assert_eq!(r.nvml_calls, 7 * 30 + 28 + 1 + 2 + 4);
    assert_eq!(r.nvml_calls as usize, s.calls().iter().filter(|c| !c.starts_with("nvmlInit") && !c.starts_with("nvmlShutdown")).count());
}

#[test]
fn row_remapping_pending_and_failed() {
    let s = Standin::new("health_remap.conf");
    let r = read(&s);
    let pending = gpu(&r, 3).remapped_rows.value().copied().expect("rows");
    assert_eq!((pending.uncorrected, pending.pending, pending.failure), (1, true, false));
    let failed = gpu(&r, 4).remapped_rows.value().copied().expect("rows");
    assert_eq!((failed.corrected, failed.uncorrected, failed.pending, failed.failure), (3, 512, false, true));
    assert_healthy(gpu(&r, 5));
}

/// The driver's recovery action, one field value a GPU: GPU 5's driver
/// asks for a reboot, GPU 0's for nothing, the others lack the field.
#[test]
fn the_drivers_recovery_action() {
    let s = Standin::new("health_recovery.conf");
    let r = read(&s);
    assert_eq!(gpu(&r, 5).recovery_action, Reading::Value(2));
    assert_eq!(gpu(&r, 0).recovery_action, Reading::Value(0));
    assert!(gpu(&r, 5).errors().is_empty());
    for i in [1, 2, 3, 4, 6, 7] {
        assert_healthy(gpu(&r, i));
    }
    assert_eq!(s.count("nvmlDeviceGetFieldValues"), 8);
    // One stand-in at a time (it holds the process-wide test lock).
    drop(s);
    // A failing call is kept with its name, and the reading goes on.
    let text = format!("include {}\nselect 3\nfail nvmlDeviceGetFieldValues 999\n", standin::fixture("health_recovery.conf").display());
    let r = read(&Standin::from_text(&text));
    let e = gpu(&r, 3).errors();
    assert_eq!(e.iter().map(|e| (e.call, e.code)).collect::<Vec<_>>(), [("nvmlDeviceGetFieldValues", Some(999))]);
    assert!(gpu(&r, 3).nvlinks.value().is_some(), "the other readings go on");
}

#[test]
fn a_lost_gpu() {
    let s = Standin::new("health_lost.conf");
    let r = read(&s);
    assert_eq!((r.gpus.len(), &r.hang), (8, &None));
    let g = gpu(&r, 5);
    assert!(g.lost && g.handle_error.is_none(), "{g:#?}");
    assert_eq!((&g.uuid, &g.ecc_enabled, &g.nvlinks), (&Reading::NotRead, &Reading::NotRead, &Reading::NotRead));
    assert!(g.errors().is_empty());
    for i in [0, 1, 2, 3, 4, 6, 7] {
        assert_healthy(gpu(&r, i));
    }
    // Only its handle was asked for.
    assert_eq!(s.calls().iter().filter(|c| c.contains(" gpu5")).count(), 0, "{:?}", s.calls());
    assert!(s.calls().contains(&"nvmlDeviceGetHandleByIndex_v2 5".to_string()));
}

/// A GPU lost after its handle was had: the query that says so ends it.
#[test]
fn a_gpu_lost_while_read_and_other_errors_with_nvml_text() {
    let text = format!(
        "include {}\nselect 2\nfail nvmlDeviceGetEccMode 15\nselect 6\nfail nvmlDeviceGetRemappedRows 999\n",
        standin::fixture("health_h100x8.conf").display()
    );
    let s = Standin::from_text(&text);
    let r = read(&s);
    let g = gpu(&r, 2);
    assert!(g.lost, "{g:#?}");
    assert!(g.uuid.value().is_some(), "read before it was lost");
    assert_eq!((&g.ecc_enabled, &g.throttle), (&Reading::Lost, &Reading::NotRead));
    let e = gpu(&r, 6).errors();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!((e[0].call, e[0].code, e[0].text.as_str()), ("nvmlDeviceGetRemappedRows", Some(999), "Unknown Error"));
    assert_eq!(e[0].to_string(), "nvmlDeviceGetRemappedRows: Unknown Error");
    assert!(gpu(&r, 6).throttle.value().is_some(), "the other readings go on");
}

#[test]
fn nvlink_lanes_down() {
    let s = Standin::new("health_nvlink_down.conf");
    let r = read(&s);
    let links = gpu(&r, 6).nvlinks.value().cloned().expect("links");
    assert_eq!(links.down, vec![3, 9]);
    assert_eq!(links.up.len(), 16);
    assert_healthy(gpu(&r, 5));
}

#[test]
fn throttle_reasons_as_flags() {
    let s = Standin::new("health_throttle.conf");
    let r = read(&s);
    let t = |i| gpu(&r, i).throttle.value().copied().expect("throttle");
    assert_eq!(t(0), Throttle { raw: 0x40, hw_thermal: true, ..Default::default() });
    assert_eq!(t(1), Throttle { raw: 0x80, hw_power_brake: true, ..Default::default() });
    assert_eq!(t(2), Throttle { raw: 0x8, hw_slowdown: true, ..Default::default() });
    assert_eq!(t(3), Throttle { raw: 0x20, sw_thermal: true, ..Default::default() });
    assert_eq!(t(4), Throttle { raw: 0x4, sw_power_cap: true, ..Default::default() });
    // Idle is no trouble.
    assert_eq!(t(5), Throttle { raw: 0x1, ..Default::default() });
}

/// Wait until the abandoned worker is done, so that the next test's
/// fixture is loaded by a fresh nvmlInit (the stand-in reads it at the
/// first init after the last shutdown): before any assertion, so that a
/// failing test does not fail the next ones too.
fn wait_for_workers() {
    let start = Instant::now();
    while health::workers_running() > 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "an NVML worker never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Margin over the deadline for the reading before the hang and the
/// thread hand-over, on a loaded machine.
const MARGIN: Duration = Duration::from_millis(1500);

#[test]
fn a_hanging_call_is_named_within_the_deadline() {
    let s = Standin::new("health_hang.conf");
    let deadline = Duration::from_millis(300);
    let start = Instant::now();
    let r = health::read_health(&s.paths(), deadline);
    let took = start.elapsed();
    wait_for_workers();
    assert!(took < deadline + MARGIN, "took {took:?}");
    let hang = r.hang.clone().expect("a hang");
    assert_eq!((hang.call, hang.gpu), ("nvmlDeviceGetTotalEccErrors", Some(3)));
    assert!(hang.waited_ms >= 300, "{hang:?}");
    assert_eq!(hang.to_string(), format!("nvmlDeviceGetTotalEccErrors on GPU 3 did not return in {} ms", hang.waited_ms));
    // The GPUs before it read whole, the hung one up to its ECC mode.
    assert_eq!(r.gpus.len(), 4);
    for i in 0..3 {
        assert_healthy(gpu(&r, i));
    }
    let g = gpu(&r, 3);
    assert_eq!((&g.ecc_enabled, &g.dbe_volatile, &g.nvlinks), (&Reading::Value(true), &Reading::NotRead, &Reading::NotRead));
    // The worker made no call after the hung one.
    assert_eq!(s.calls().last().map(String::as_str), Some("nvmlDeviceGetTotalEccErrors gpu3 1 0"));
}

#[test]
fn a_hanging_init_is_named() {
    let text = format!("init_delay_ms 3000\ninclude {}\n", standin::fixture("health_h100x8.conf").display());
    let s = Standin::from_text(&text);
    let deadline = Duration::from_millis(300);
    let start = Instant::now();
    let r = health::read_health(&s.paths(), deadline);
    let took = start.elapsed();
    wait_for_workers();
    assert!(took < deadline + MARGIN, "took {took:?}");
    assert_eq!(r.hang.as_ref().map(|h| (h.call, h.gpu)), Some(("nvmlInit_v2", None)));
    assert!(r.gpus.is_empty() && r.device_count.is_none());
}

/// The recovery action field's own return, the call's being SUCCESS: a
/// driver that does not know the field cannot tell.
#[test]
fn a_field_the_driver_does_not_know() {
    let text = format!("include {}\nselect 2\nfield_fail 230 2\nselect 5\nfield_fail 230 999\n", standin::fixture("health_recovery.conf").display());
    let s = Standin::from_text(&text);
    let r = read(&s);
    let e = gpu(&r, 2).errors();
    assert_eq!(
        e.iter().map(|e| (e.call, e.code, e.text.as_str(), e.answer)).collect::<Vec<_>>(),
        [("nvmlDeviceGetFieldValues", Some(2), "Invalid Argument", Answer::CannotTell)]
    );
    // An internal error of the driver on a GPU it has a handle for.
    assert_eq!(gpu(&r, 5).errors().iter().map(|e| (e.code, e.answer)).collect::<Vec<_>>(), [(Some(999), Answer::Fault)]);
    assert_eq!(gpu(&r, 0).recovery_action, Reading::Value(0));
}

/// A library without some functions: the calls that need them fail, as
/// NVML's FUNCTION_NOT_FOUND or nvml-wrapper's missing symbol, and the
/// reading goes on.
#[test]
fn functions_the_library_lacks() {
    let lib = standin::library_without(&["nvmlDeviceGetRemappedRows", "nvmlDeviceGetCurrentClocksThrottleReasons"]);
    let s = Standin::new("health_h100x8.conf");
    let paths = slurm_gpu_gres::nvml::Paths { library: lib.into(), ..s.paths() };
    let r = health::read_health(&paths, DEADLINE);
    assert_eq!((&r.unusable, r.gpus.len()), (&None, 8));
    for g in &r.gpus {
        let e: Vec<(&str, Option<u32>, Answer)> = g.errors().iter().map(|e| (e.call, e.code, e.answer)).collect();
        assert_eq!(
            e,
            [("nvmlDeviceGetRemappedRows", Some(13), Answer::CannotTell), ("nvmlDeviceGetCurrentClocksThrottleReasons", None, Answer::CannotTell)],
            "{g:#?}"
        );
        assert!(g.nvlinks.value().is_some(), "the other readings go on");
    }
    assert_eq!((s.count("nvmlDeviceGetRemappedRows"), s.count("nvmlDeviceGetCurrentClocksThrottleReasons")), (0, 0));
}

/// nvmlInit with a deadline of its own, longer than a call's.
#[test]
fn init_has_its_own_deadline() {
    let text = format!("init_delay_ms 600\ninclude {}\n", standin::fixture("health_h100x8.conf").display());
    let s = Standin::from_text(&text);
    let limits = Limits { per_call: Duration::from_millis(300), init: Duration::from_secs(10), until: None };
    let r = health::read_health_within(&s.paths(), &limits);
    assert_eq!((&r.hang, r.gpus.len()), (&None, 8), "{r:#?}");
}

/// A slow driver and an end to the reading: it stops there with the GPUs
/// read so far, and names the call in progress.
#[test]
fn the_reading_ends_by_its_end() {
    let text = format!("delay_us 100000\ninclude {}\n", standin::fixture("health_h100x8.conf").display());
    let s = Standin::from_text(&text);
    let start = Instant::now();
    let limits = Limits { per_call: DEADLINE, init: DEADLINE, until: Some(start + Duration::from_millis(1500)) };
    let r = health::read_health_within(&s.paths(), &limits);
    let took = start.elapsed();
    wait_for_workers();
    assert!(took < Duration::from_millis(1500) + MARGIN, "took {took:?}");
    assert!(r.hang.is_none(), "{r:#?}");
    let stopped = r.out_of_time.clone().expect("out of time");
    assert_eq!(stopped.gpu, Some(0), "{stopped:?}");
    assert_eq!(r.device_count, Some(8));
    assert_eq!(r.gpus.len(), 1, "GPU 0 partly read");
    assert!((1..=15).contains(&r.nvml_calls), "{}", r.nvml_calls);
}

/// nvmlInit's and the count's failures, with their code and meaning.
#[test]
fn why_nvml_is_unusable() {
    let s = Standin::from_text("init_error 18\n");
    let e = read(&s).init_error.expect("init error");
    assert_eq!((e.call, e.code, e.answer), ("nvmlInit_v2", Some(18), Answer::Transient), "{e:?}");
    drop(s);
    let s = Standin::from_text("init_error 4\n");
    let e = read(&s).init_error.expect("init error");
    assert_eq!((e.code, e.text.as_str(), e.answer), (Some(4), "Insufficient Permissions", Answer::CannotTell), "{e:?}");
    drop(s);
    let s = Standin::from_text(&format!("count_error 9\ninclude {}\n", standin::fixture("health_h100x8.conf").display()));
    let r = read(&s);
    let e = r.init_error.expect("count error");
    assert_eq!((e.call, e.code, e.answer), ("nvmlDeviceGetCount_v2", Some(9), Answer::Transient), "{e:?}");
    drop(s);
    let s = Standin::new("health_h100x8.conf");
    let paths = slurm_gpu_gres::nvml::Paths { library: "/nonexistent/libnvidia-ml.so.1".into(), ..s.paths() };
    let e = health::read_health(&paths, DEADLINE).init_error.expect("no library");
    assert_eq!((e.code, e.answer), (None, Answer::CannotTell), "{e:?}");
}

#[test]
fn no_driver() {
    let s = Standin::with_fixture(None);
    let r = read(&s);
    assert!(r.unusable.as_deref().is_some_and(|e| e.contains("Driver Not Loaded")), "{r:?}");
    assert!(r.gpus.is_empty() && r.hang.is_none());
}

/// A step's watch over `gpus` from its start to its end, `hold` apart:
/// what NVML delivered (the start's errors included).
fn watched(s: &Standin, gpus: &[u32], hold: Duration) -> XidWatch {
    let (first, watch) = step_watch::start(&s.paths(), gpus, DEADLINE);
    std::thread::sleep(hold);
    match watch {
        Some(w) => {
            let mut end = w.collect();
            let mut errors = first.errors;
            errors.append(&mut end.errors);
            XidWatch { errors, nvml_calls: first.nvml_calls + end.nvml_calls, ..end }
        }
        None => first,
    }
}

#[test]
fn xid_events_in_order_with_their_gpu() {
    let s = Standin::new("health_xid.conf");
    let window = Duration::from_millis(400);
    let w = watched(&s, &(0..8).collect::<Vec<_>>(), window);
    assert_eq!((&w.unusable, &w.hang), (&None, &None), "{w:#?}");
    assert!(w.errors.is_empty(), "{w:#?}");
    assert_eq!(w.registered, (0..8).collect::<Vec<_>>());
    let got: Vec<(Option<u32>, u64, Option<u32>)> = w.events.iter().map(|e| (e.gpu, e.xid, e.gpu_instance)).collect();
    assert_eq!(got, vec![(Some(0), 13, None), (Some(4), 48, None), (Some(7), 79, None)]);
    // The set was freed, and the last wait found nothing left.
    assert_eq!(s.count("nvmlEventSetFree"), 1);
    assert!(w.nvml_calls as usize >= 8 * 3 + 2 + 4, "{}", w.nvml_calls);
}

/// Only the GPUs asked for; a GPU that cannot be registered is left out
/// (and the set made again without it); a lost one too.
#[test]
fn xid_events_of_the_gpus_asked_for() {
    let text = format!("include {}\nselect 4\nfail nvmlDeviceRegisterEvents 999\nselect 5\nlost\n", standin::fixture("health_xid.conf").display());
    let s = Standin::from_text(&text);
    let w = watched(&s, &[0, 4, 5, 7], Duration::from_millis(300));
    assert_eq!(w.registered, vec![0, 7]);
    let failed: Vec<(Option<u32>, &str, Option<u32>)> = w.errors.iter().map(|(g, e)| (*g, e.call, e.code)).collect();
    assert_eq!(failed, vec![(Some(5), "nvmlDeviceGetHandleByIndex_v2", Some(15)), (Some(4), "nvmlDeviceRegisterEvents", Some(999))]);
    assert_eq!(w.events.iter().map(|e| (e.gpu, e.xid)).collect::<Vec<_>>(), vec![(Some(0), 13), (Some(7), 79)]);
    assert_eq!(s.count("nvmlEventSetCreate"), 2);
}

/// An XID on a MIG device comes as its GPU's, with its instances.
#[test]
fn xid_event_of_a_mig_device() {
    let text = format!("include {}\nxid 31\n", standin::fixture("a100_mig.conf").display());
    let s = Standin::from_text(&text);
    let w = watched(&s, &[0], Duration::from_millis(200));
    let e = w.events.first().expect("an event");
    assert_eq!((e.gpu, e.xid, e.gpu_instance, e.compute_instance), (Some(0), 31, Some(13), Some(0)));
    assert!(e.after <= Duration::from_millis(200) + MARGIN);
}

/// A step's watch: its GPUs registered when it starts (with their UUIDs
/// and bus ids), no NVML call while it runs, and at its end the queued
/// XIDs of its GPUs taken without waiting (0 ms), the set freed.
#[test]
fn a_step_watch_registers_then_collects_without_waiting() {
    let s = Standin::new("health_xid.conf");
    let (first, watch) = step_watch::start(&s.paths(), &[4, 7], DEADLINE);
    assert_eq!((&first.unusable, &first.hang), (&None, &None), "{first:#?}");
    assert_eq!(first.registered, vec![4, 7]);
    assert!(first.events.is_empty());
    let ids: Vec<(u32, bool, Option<&str>)> =
        first.ids.iter().map(|g| (g.index, g.uuid.as_deref().is_some_and(|u| u.starts_with("GPU-")), g.pci.as_deref())).collect();
    assert_eq!(ids.len(), 2, "{first:#?}");
    assert!(ids.iter().all(|(_, uuid, pci)| *uuid && pci.is_some_and(|p| p.len() == 12)), "{ids:?}");
    assert_eq!((s.count("nvmlEventSetCreate"), s.count("nvmlEventSetWait_v2")), (1, 0));
    let watch = watch.expect("a watch to collect");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(s.count("nvmlEventSetWait_v2"), 0, "no call while the step runs");
    let t0 = Instant::now();
    let end = watch.collect();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!((&end.unusable, &end.hang), (&None, &None), "{end:#?}");
    assert_eq!(end.events.iter().map(|e| (e.gpu, e.xid)).collect::<Vec<_>>(), vec![(Some(4), 48), (Some(7), 79)]);
    assert_eq!(end.ids, first.ids);
    assert_eq!(s.count("nvmlEventSetFree"), 1);
    // Three waits (two events, then nothing), none of them waiting.
    assert_eq!(s.calls().iter().filter(|c| c.as_str() == "nvmlEventSetWait_v2 0").count(), 3, "{:?}", s.calls());
}

/// A step none of whose GPUs can be registered gives no watch.
#[test]
fn a_step_watch_of_unregistrable_gpus_is_none() {
    let text = format!("include {}\nselect 7\nlost\n", standin::fixture("health_xid.conf").display());
    let s = Standin::from_text(&text);
    let (first, watch) = step_watch::start(&s.paths(), &[7], DEADLINE);
    assert!(watch.is_none() && first.registered.is_empty(), "{first:#?}");
    assert_eq!(s.count("nvmlEventSetCreate"), 0);
}
