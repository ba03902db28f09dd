//! Checks of the bench's own rules (run by `cargo test --bench bench`).

use crate::nvml_node::{fake_gpus_of, read_fixture, stock_nvml_calls};
use crate::report::json;
use crate::row::Row;
use gres_test_harness::standin;

/// What the bench derives without Slurm: the stock side's `fake_gpus.conf`
/// and `Gres=` for the NVML nodes, stock's NVML call count, and the JSON.
/// (A `harness = false` target runs no `#[test]`s: `main` calls this when
/// not started by `cargo bench`.)
pub fn self_test() {
    let minors = standin::fixture("mig-minors");
    let node = |name: &str, cpus: u32| fake_gpus_of(&read_fixture(&standin::fixture(name)), cpus, &minors);

    // Type names, NVLink strings and device files of an NVLink node.
    let (lines, gres) = node("h100x2.conf", 2);
    assert_eq!(gres, "gpu:nvidia_h100_80gb_hbm3:2");
    assert_eq!(lines, "nvidia_h100_80gb_hbm3|2|0|-1,2|/dev/nvidia0|(null)|nvidia_gpu_env\nnvidia_h100_80gb_hbm3|2|1|2,-1|/dev/nvidia1|(null)|nvidia_gpu_env\n");
    assert_eq!(node("h100x8.conf", 2).1, "gpu:nvidia_h100_80gb_hbm3:8");
    // MIG devices: profile type names, capability files from mig-minors.
    let (lines, gres) = node("a100x8_mig.conf", 2);
    assert_eq!(gres, "gpu:nvidia_a100_1g.10gb:56");
    assert_eq!(lines.lines().count(), 56);
    assert_eq!(
        lines.lines().next(),
        Some(
            "nvidia_a100_1g.10gb|2|0-31|-1,0,0,0,0,0,0|/dev/nvidia0,/dev/nvidia-caps/nvidia-cap66,/dev/nvidia-caps/nvidia-cap67\
             |MIG-d23f0824-128b-2f33-0c5c-7fd0a6a3a450|nvidia_gpu_env"
        )
    );
    // Stock's NVML calls as derived from gpu_nvml.c; both agree with the
    // counts the stand-in measured of the stock build (docs/benchmarks.md).
    assert_eq!(stock_nvml_calls(&read_fixture(&standin::fixture("h100x8.conf"))), 381);
    assert_eq!(stock_nvml_calls(&read_fixture(&standin::fixture("a100x8_mig.conf"))), 582);

    // JSON: the fields in order, numbers that are not finite as null,
    // strings escaped.
    let machine = vec![("cpu".to_string(), "x \"y\"".to_string()), ("os".to_string(), "a\\b\tc".to_string())];
    let rows = vec![
        Row {
            group: "steps",
            release: "24.11.5".into(),
            what: "w\nx".into(),
            unit: "ms".into(),
            stock: Some(2.0),
            ours: Some(1.5),
            n: 3,
            goal: "<= 1.02".into(),
            ..Default::default()
        },
        Row { group: "check", stock: Some(f64::NAN), ours: None, note: "pending".into(), ..Default::default() },
    ];
    let text = json(&machine, &rows, "2026-01-01T00:00:00Z", 12.34);
    let v: serde_json::Value = serde_json::from_str(&text).expect("bench JSON parses");
    assert_eq!(v["started"], "2026-01-01T00:00:00Z");
    assert_eq!(v["duration_s"], 12.3);
    assert_eq!(v["machine"]["cpu"], "x \"y\"");
    assert_eq!(v["machine"]["os"], "a\\b\tc");
    let keys = |o: &serde_json::Value| o.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert!(text.find("\"cpu\"") < text.find("\"os\""), "machine facts in order:\n{text}");
    let r0 = &v["rows"][0];
    assert_eq!(
        (r0["group"].as_str(), r0["release"].as_str(), r0["what"].as_str(), r0["stock"].as_f64(), r0["ours"].as_f64(), r0["ratio"].as_f64(), r0["n"].as_u64()),
        (Some("steps"), Some("24.11.5"), Some("w\nx"), Some(2.0), Some(1.5), Some(0.75), Some(3))
    );
    let r1 = &v["rows"][1];
    assert!(r1["stock"].is_null() && r1["ours"].is_null() && r1["ratio"].is_null(), "{text}");
    let mut want = ["goal", "group", "metric", "n", "note", "ours", "ratio", "release", "stock", "unit", "what"].map(String::from).to_vec();
    let mut got = keys(r1);
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let order = ["group", "release", "what", "metric", "unit", "stock", "ours", "ratio", "n", "goal", "note"].map(|k| text.rfind(&format!("\"{k}\"")));
    assert!(order.windows(2).all(|w| w[0] < w[1]), "row fields in order:\n{text}");
}
