//! What a run tells the world besides Slurm: a summary the tool serializes
//! as JSON (plain structs, no serde here) and a node_exporter textfile in
//! Prometheus' text format.
//!
//! ```text
//! # HELP gres_rs_health_fault Findings of the last health check, by GPU and kind.
//! # TYPE gres_rs_health_fault gauge
//! gres_rs_health_fault{gpu="3",uuid="GPU-5c1b...",pci="0000:41:00.0",kind="xid",detail="79",action="drain"} 1
//! # HELP gres_rs_health_verdict The last health check's verdict (1 for the verdict reached).
//! # TYPE gres_rs_health_verdict gauge
//! gres_rs_health_verdict{verdict="drain"} 1
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::catalog::Table;
use crate::decide::{Decision, Verdict};
use crate::fault::{Fault, Finding};
use crate::reason::fault_words;

/// One finding, flattened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingSummary {
    /// NVML index.
    pub gpu: Option<u32>,
    /// UUID.
    pub uuid: Option<String>,
    /// PCI bus id.
    pub pci: Option<String>,
    /// `xid`, `dbe`, `remap_pending`...
    pub kind: &'static str,
    /// The kind's detail: the XID number, the link, the NVML call.
    pub detail: String,
    /// The fault in words (`xid 79 (fallen off the bus)`).
    pub text: String,
    /// `ignore`, `warn` or `drain`.
    pub action: &'static str,
    /// What a person should do.
    pub remedy: Option<&'static str>,
    /// Whether the tool may resume by itself.
    pub recoverable: bool,
    /// Where it was seen.
    pub source: String,
    /// The job steps it hit (`12.0`), where known.
    pub jobs: Vec<String>,
}

/// A run, ready to serialize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The verdict's word.
    pub verdict: &'static str,
    /// The reason set, refused, kept or found (foreign).
    pub reason: Option<String>,
    /// What a kept drain waits for.
    pub waiting: Option<String>,
    /// Guard numbers, when it refused: (drained by gres-rs, limit).
    pub guard: Option<(usize, usize)>,
    /// The exit status.
    pub exit_status: i32,
    /// Every finding.
    pub findings: Vec<FindingSummary>,
    /// Every warning line.
    pub warnings: Vec<String>,
}

/// The label that refines a kind: the XID number, the link, the call.
fn detail_label(fault: &Fault) -> String {
    match fault {
        Fault::Xid { code, .. } => code.to_string(),
        Fault::RecoveryAction(k) => k.word().to_owned(),
        Fault::Throttle(k) => k.word().to_owned(),
        Fault::NvlinkDown(link) => link.to_string(),
        Fault::NvmlError { call, .. } | Fault::NvmlHang { call, .. } | Fault::NvmlTransient { call, .. } => call.clone(),
        Fault::DbeVolatile(n) | Fault::RetirePending(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Flatten a run for JSON.
pub fn summarize(table: &Table, findings: &[Finding], decision: &Decision) -> Summary {
    let findings = findings
        .iter()
        .map(|f| {
            let rule = table.rule(&f.fault);
            FindingSummary {
                gpu: f.gpu.index,
                uuid: f.gpu.uuid.clone(),
                pci: f.gpu.pci.clone(),
                kind: f.fault.kind().word(),
                detail: detail_label(&f.fault),
                text: fault_words(&f.fault),
                action: rule.action.word(),
                remedy: rule.remedy.map(|r| r.text()),
                recoverable: rule.recoverable,
                source: f.source.to_string(),
                jobs: f.all_jobs().iter().map(|s| s.to_string()).collect(),
            }
        })
        .collect();
    let (reason, waiting, guard) = match &decision.verdict {
        Verdict::Drain(r) => (Some(r.text.clone()), None, None),
        Verdict::GuardRefused { reason, drained, limit } => (Some(reason.text.clone()), None, Some((*drained, *limit))),
        Verdict::Resume { previous } => (Some(previous.clone()), None, None),
        Verdict::Foreign { reason } => (Some(reason.clone()), None, None),
        Verdict::Hold { reason, waiting } => (Some(reason.clone()), Some(waiting.clone()), None),
        Verdict::Nothing | Verdict::Warn(_) => (None, None, None),
    };
    Summary { verdict: decision.verdict.word(), reason, waiting, guard, exit_status: decision.exit_status(), findings, warnings: decision.warnings.clone() }
}

/// Escape a label value: backslash, double quote, newline.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Counters the run kept besides its findings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// When the run ended, in seconds since the epoch.
    pub timestamp: u64,
    /// Kernel log lines skipped for length.
    pub long_lines: u64,
    /// XIDs new in this run.
    pub new_xids: u64,
    /// NVML calls the run made (0: NVML not asked).
    pub nvml_calls: u32,
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

/// The node_exporter textfile: one series per distinct (GPU, kind, detail,
/// action), valued by how many findings share it, so no series repeats.
pub fn render_metrics(summary: &Summary, stats: RunStats) -> String {
    let mut series: BTreeMap<String, u64> = BTreeMap::new();
    for f in &summary.findings {
        let labels = format!(
            "gpu=\"{}\",uuid=\"{}\",pci=\"{}\",kind=\"{}\",detail=\"{}\",action=\"{}\"",
            f.gpu.map_or_else(String::new, |g| g.to_string()),
            escape_label(f.uuid.as_deref().unwrap_or("")),
            escape_label(f.pci.as_deref().unwrap_or("")),
            f.kind,
            escape_label(&f.detail),
            f.action,
        );
        *series.entry(labels).or_default() += 1;
    }
    let mut out = String::new();
    family(&mut out, "gres_rs_health_fault", "Findings of the last health check, by GPU and kind.");
    for (labels, n) in &series {
        let _ = writeln!(out, "gres_rs_health_fault{{{labels}}} {n}");
    }
    family(&mut out, "gres_rs_health_verdict", "The last health check's verdict (1 for the verdict reached).");
    let _ = writeln!(out, "gres_rs_health_verdict{{verdict=\"{}\"}} 1", summary.verdict);
    family(&mut out, "gres_rs_health_exit_status", "The last health check's exit status.");
    let _ = writeln!(out, "gres_rs_health_exit_status {}", summary.exit_status);
    family(&mut out, "gres_rs_health_new_xids", "XIDs first reported by the last health check.");
    let _ = writeln!(out, "gres_rs_health_new_xids {}", stats.new_xids);
    family(&mut out, "gres_rs_health_kmsg_long_lines", "Kernel log lines the last health check skipped for length.");
    let _ = writeln!(out, "gres_rs_health_kmsg_long_lines {}", stats.long_lines);
    family(&mut out, "gres_rs_health_nvml_calls", "NVML calls the last health check made.");
    let _ = writeln!(out, "gres_rs_health_nvml_calls {}", stats.nvml_calls);
    family(&mut out, "gres_rs_health_last_run_timestamp_seconds", "When the last health check ended.");
    let _ = writeln!(out, "gres_rs_health_last_run_timestamp_seconds {}", stats.timestamp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::{decide, Cluster, Inputs, NodeState};
    use crate::fault::{GpuRef, Source, ThrottleKind};
    use crate::overrides::Guard;

    fn run(findings: &[Finding]) -> (Summary, Decision) {
        let table = Table::new();
        let d = decide(&Inputs {
            node: NodeState { state: "idle", reason: None, reason_user: None },
            findings,
            table: &table,
            guard: Guard::default(),
            cluster: Cluster { total_nodes: 10, reasons: &[] },
            boot_id: "0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d",
            our_user: None,
        });
        (summarize(&table, findings, &d), d)
    }

    fn findings() -> Vec<Finding> {
        let gpu = GpuRef { index: Some(3), uuid: Some("GPU-5c1b\"x".into()), pci: Some("0000:41:00.0".into()) };
        let x = |seq| Finding::new(Fault::Xid { code: 13, pid: None, process: None, message: String::new() }, gpu.clone(), Source::Kmsg { seq });
        vec![
            Finding::new(Fault::Xid { code: 79, pid: None, process: None, message: String::new() }, gpu.clone(), Source::Kmsg { seq: 1 }),
            x(2),
            x(3),
            Finding::new(Fault::Throttle(ThrottleKind::Power), GpuRef::default(), Source::Nvml),
        ]
    }

    #[test]
    fn the_summary_flattens_the_run() {
        let (s, d) = run(&findings());
        assert_eq!(s.verdict, "drain");
        assert_eq!(s.exit_status, d.exit_status());
        assert!(s.reason.as_deref().unwrap().contains("xid 79"));
        let f = &s.findings[0];
        assert_eq!((f.kind, f.detail.as_str(), f.action, f.remedy), ("xid", "79", "drain", Some("reboot node")));
        assert_eq!(f.source, "kmsg seq 1");
        assert_eq!(s.findings[1].action, "ignore");
        assert_eq!(s.warnings, ["node: throttle power (nvml)"]);
    }

    #[test]
    fn the_textfile_is_valid_prometheus_text() {
        let (s, _) = run(&findings());
        let text = render_metrics(&s, RunStats { timestamp: 1_700_000_000, long_lines: 2, new_xids: 3, nvml_calls: 231 });
        assert!(text.contains("gres_rs_health_fault{gpu=\"3\",uuid=\"GPU-5c1b\\\"x\",pci=\"0000:41:00.0\",kind=\"xid\",detail=\"13\",action=\"ignore\"} 2\n"));
        assert!(text.contains("kind=\"throttle\",detail=\"power\",action=\"warn\"} 1\n"));
        assert!(text.contains("gres_rs_health_verdict{verdict=\"drain\"} 1\n"));
        assert!(text.contains("gres_rs_health_kmsg_long_lines 2\n"));
        // Every sample line: a metric name, optional labels, a number; no
        // series twice; every family typed before its samples.
        let mut seen = std::collections::HashSet::new();
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_owned());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            let name = series.split('{').next().unwrap();
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{name}");
            assert!(typed.contains(name), "{name} untyped");
            assert!(seen.insert(series.to_owned()), "duplicate {series}");
        }
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }
}
