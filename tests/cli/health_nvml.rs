//! `gres-rs health` on the NVML stand-in when NVML's answers say nothing
//! about the GPU: a driver that cannot tell (a function it lacks, a field
//! it does not know, no permission) is a note and drains nothing; an
//! answer that may pass (a timeout, a slow init, a check out of time) is
//! a warning until it lasts `transient_runs` checks in a row; a broken
//! GPU still drains at once.

use crate::health::{kinds, on_standin};
use crate::run::temp_dir;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every GPU of the healthy 8-GPU node (`health_h100x8.conf`) with
/// `setting` added, as a fixture file in `dir`; its path.
fn every_gpu(dir: &Path, name: &str, setting: &str) -> String {
    let body: String = (0..8).map(|i| format!("select {i}\n{setting}\n")).collect();
    with(dir, name, &body)
}

/// The healthy node with `text` after it, as a fixture file in `dir`.
fn with(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    let healthy = gres_test_harness::standin::fixture("health_h100x8.conf");
    fs::write(&path, format!("include {}\n{text}", healthy.display())).unwrap();
    path.to_str().unwrap().to_string()
}

fn notes(doc: &serde_json::Value) -> Vec<String> {
    doc["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

fn one(kind: &str, action: &str) -> Vec<(String, String)> {
    vec![(kind.to_string(), action.to_string())]
}

/// The note that says `call` was not checked on every GPU, with NVML's
/// `text`.
fn assert_noted(doc: &serde_json::Value, call: &str, text: &str) {
    let want = format!("gpus 0-7: {call}: {text}");
    assert!(notes(doc).iter().any(|n| n.starts_with(&want) && n.ends_with("(this driver cannot tell; not checked)")), "{want}\n{doc:#}");
}

#[test]
fn what_the_driver_cannot_tell_is_a_note_not_a_drain() {
    for (setting, call, text) in [
        ("fail nvmlDeviceGetRemappedRows 13", "nvmlDeviceGetRemappedRows", "Function Not Found"),
        ("fail nvmlDeviceGetEccMode 4", "nvmlDeviceGetEccMode", "Insufficient Permissions"),
        // The call answers SUCCESS; the field value's own return says the
        // driver does not know NVML_FI_DEV_GET_GPU_RECOVERY_ACTION.
        ("field_fail 230 2", "nvmlDeviceGetFieldValues", "Invalid Argument"),
    ] {
        let d = temp_dir(&format!("health-nvml-cannot-{call}"));
        let fixture = every_gpu(&d.0, "node.conf", setting);
        let (code, doc) = on_standin(&d.0, &fixture, &[]);
        assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "{setting}: {doc:#}");
        assert!(kinds(&doc).is_empty(), "{setting}: {doc:#}");
        assert_noted(&doc, call, text);
        // One note for the 8 GPUs.
        assert_eq!(notes(&doc).iter().filter(|n| n.contains(call)).count(), 1, "{doc:#}");
    }
}

/// `gres-rs health` as `on_standin` runs it, with the NVML library `lib`.
fn on_library(dir: &Path, lib: &Path, fixture: &str) -> (Option<i32>, serde_json::Value) {
    crate::health::on_library_with(dir, lib, fixture, &[], &[])
}

/// A driver whose library lacks functions (an older one, or a newer one
/// that dropped a deprecated name).
#[test]
fn functions_the_library_lacks_are_a_note_not_a_drain() {
    let lib = gres_test_harness::standin::library_without(&["nvmlDeviceGetRemappedRows", "nvmlDeviceGetCurrentClocksThrottleReasons"]);
    let d = temp_dir("health-nvml-symbols");
    let (code, doc) = on_library(&d.0, &lib, "health_h100x8.conf");
    assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
    assert!(kinds(&doc).is_empty(), "{doc:#}");
    // nvml-extra's own lookup says FUNCTION_NOT_FOUND; nvml-wrapper's, that
    // the symbol failed to load.
    assert_noted(&doc, "nvmlDeviceGetRemappedRows", "Function Not Found");
    let throttle = notes(&doc).into_iter().find(|n| n.contains("nvmlDeviceGetCurrentClocksThrottleReasons")).unwrap_or_else(|| panic!("{doc:#}"));
    assert!(
        throttle.starts_with("gpus 0-7: nvmlDeviceGetCurrentClocksThrottleReasons: ") && throttle.ends_with("(this driver cannot tell; not checked)"),
        "{throttle}"
    );
}

#[test]
fn a_timeout_drains_only_when_it_lasts_three_checks_in_a_row() {
    let d = temp_dir("health-nvml-timeout");
    let timeout = with(&d.0, "timeout.conf", "select 3\nfail nvmlDeviceGetTotalEccErrors 10\n");
    let transient = |doc: &serde_json::Value, runs: u32| {
        assert_eq!(kinds(doc), one("nvml_transient", "warn"), "{doc:#}");
        let f = &doc["findings"][0];
        assert_eq!((f["gpu"].as_u64(), f["detail"].as_str()), (Some(3), Some("nvmlDeviceGetTotalEccErrors")), "{doc:#}");
        assert!(f["text"].as_str().unwrap().contains(&format!("Timeout ({runs} of 3 checks)")), "{doc:#}");
    };
    for runs in 1..=2 {
        let (code, doc) = on_standin(&d.0, &timeout, &[]);
        assert_eq!(code, Some(1), "{doc:#}");
        transient(&doc, runs);
    }
    // A clean check breaks the streak.
    let (code, doc) = on_standin(&d.0, "health_h100x8.conf", &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    for runs in 1..=2 {
        let (code, doc) = on_standin(&d.0, &timeout, &[]);
        assert_eq!(code, Some(1), "{doc:#}");
        transient(&doc, runs);
    }
    // A dry run says what the third check makes of it, and saves nothing.
    let (code, doc) = on_standin(&d.0, &timeout, &["--dry-run"]);
    assert_eq!((code, kinds(&doc)), (Some(3), one("nvml_error", "drain")), "{doc:#}");
    let (code, doc) = on_standin(&d.0, &timeout, &[]);
    assert_eq!((code, kinds(&doc)), (Some(3), one("nvml_error", "drain")), "{doc:#}");
    assert!(doc["reason"].as_str().unwrap().starts_with("gres-rs: gpu "), "{doc:#}");
    assert!(fs::read_to_string(d.0.join("state/nvml-transient.state")).unwrap().starts_with("gres-rs-nvml-transient 1\n3 GPU-"));
}

/// nvmlInit on a node without persistence mode takes seconds: it has a
/// deadline of its own (20 s by default), and past it is a transient.
#[test]
fn a_slow_init_is_healthy_and_past_its_deadline_only_a_warning() {
    let d = temp_dir("health-nvml-init");
    let slow = d.0.join("slow.conf");
    let healthy = gres_test_harness::standin::fixture("health_h100x8.conf");
    fs::write(&slow, format!("init_delay_ms 6000\ninclude {}\n", healthy.display())).unwrap();
    let slow = slow.to_str().unwrap();
    let (code, doc) = on_standin(&d.0, slow, &[]);
    assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
    let (code, doc) = on_standin(&d.0, slow, &["--nvml-init-timeout", "1000"]);
    assert_eq!((code, kinds(&doc)), (Some(1), one("nvml_transient", "warn")), "{doc:#}");
    assert_eq!(doc["findings"][0]["detail"], "nvmlInit_v2", "{doc:#}");
}

/// NVML calls that each take 0.5 s on 8 GPUs: the reading ends by the
/// run's budget (`--budget 10`: NVML gets a third of it), with a warning
/// and a note of where it stopped.
#[test]
fn a_slow_driver_is_stopped_at_the_checks_budget() {
    let d = temp_dir("health-nvml-budget");
    let slow = d.0.join("slow.conf");
    let healthy = gres_test_harness::standin::fixture("health_h100x8.conf");
    fs::write(&slow, format!("delay_us 500000\ninclude {}\n", healthy.display())).unwrap();
    let start = Instant::now();
    let (code, doc) = on_standin(&d.0, slow.to_str().unwrap(), &["--budget", "10"]);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!((code, kinds(&doc)), (Some(1), one("nvml_transient", "warn")), "{doc:#}");
    assert_eq!(doc["findings"][0]["detail"], "(run budget)", "{doc:#}");
    let note = notes(&doc).into_iter().find(|n| n.starts_with("the NVML reading ran out of the check's time in ")).unwrap_or_else(|| panic!("{doc:#}"));
    assert!(note.contains(" NVML calls") && note.contains("not read to the end (not faults)"), "{note}");
}

/// What says the GPU is broken drains at once, whatever the call.
#[test]
fn a_broken_gpu_still_drains_at_once() {
    for (setting, want) in [
        ("select 2\nfail nvmlDeviceGetEccMode 15", ("gpu_lost", "drain")),
        ("select 4\nfail nvmlDeviceGetRemappedRows 16", ("nvml_error", "drain")),
        ("select 6\nfail nvmlDeviceGetTotalEccErrors 999", ("nvml_error", "drain")),
    ] {
        let d = temp_dir("health-nvml-broken");
        let fixture = with(&d.0, "broken.conf", &format!("{setting}\n"));
        let (code, doc) = on_standin(&d.0, &fixture, &[]);
        assert_eq!((code, kinds(&doc)), (Some(3), one(want.0, want.1)), "{setting}: {doc:#}");
    }
}
