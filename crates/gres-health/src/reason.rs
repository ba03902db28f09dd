//! The drain reason: one line a person and a script can read, and the only
//! record of why and how the tool drained a node.
//!
//! ```text
//! gres-rs: gpu 3 GPU-5c1b2e3f 0000:41:00.0 xid 79 (fallen off the bus) job 12.0 -> reboot node +1 more [resume:reboot@0f5c1b2e]
//! ```
//!
//! The worst finding comes first, with the job step it hit where a step's
//! watch saw it (`job 12.0`); `+N more` counts the other drain-class
//! findings.  The last word says when the tool may resume the node by
//! itself: `[resume:clear]` (the next clean check), `[resume:reset@B]` (an
//! XID a GPU reset clears: after a reboot, `B` being the first 8
//! characters of the boot id when it drained; the tool cannot see a GPU
//! reset, so after one a person resumes), `[resume:reboot@B]` (an XID:
//! after a reboot), `[manual]` (never: a person resumes).  A reason is at most
//! [`MAX_REASON`] bytes of printable ASCII.

use crate::catalog::{xid_name, Action, Remedy, Rule, Table};
use crate::fault::{Fault, Finding, GpuRef};

/// Every reason the tool writes starts with this.
pub const PREFIX: &str = "gres-rs:";

/// The longest reason the tool writes, in bytes.
pub const MAX_REASON: usize = 200;

/// When the tool may resume a node it drained, strictest last.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resume {
    /// When a check finds no drain-class fault.
    Clear,
    /// The remedy is a GPU reset: after a reboot since the drain (the boot
    /// id's first 8 characters then) and a clean check; after a GPU reset
    /// without a reboot a person resumes (NVML and the driver report no
    /// reset the tool could rely on).
    AfterReset(String),
    /// After a reboot since the drain, and a clean check.
    AfterReboot(String),
    /// Never by itself.
    Manual,
}

impl Resume {
    fn marker(&self) -> String {
        match self {
            Resume::Clear => "[resume:clear]".to_owned(),
            Resume::AfterReset(b) => format!("[resume:reset@{b}]"),
            Resume::AfterReboot(b) => format!("[resume:reboot@{b}]"),
            Resume::Manual => "[manual]".to_owned(),
        }
    }

    fn from_marker(m: &str) -> Option<Resume> {
        let inner = m.strip_prefix('[')?.strip_suffix(']')?;
        Some(match inner {
            "resume:clear" => Resume::Clear,
            "manual" => Resume::Manual,
            _ => {
                let (what, boot) = inner.strip_prefix("resume:")?.split_once('@')?;
                if boot.is_empty() || !boot.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                match what {
                    "reset" => Resume::AfterReset(boot.to_owned()),
                    "reboot" => Resume::AfterReboot(boot.to_owned()),
                    _ => return None,
                }
            }
        })
    }

    /// How strict, for comparing without the boot id: clear 0, reset 1,
    /// reboot 2, manual 3.
    pub fn rank(&self) -> u8 {
        match self {
            Resume::Clear => 0,
            Resume::AfterReset(_) => 1,
            Resume::AfterReboot(_) => 2,
            Resume::Manual => 3,
        }
    }
}

/// A reason the tool wrote, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OurReason {
    /// When the node may be resumed.
    pub resume: Resume,
}

/// Read a node's reason back: `Some` only if the tool wrote it.  A reason of
/// ours whose marker is missing or unknown is [`Resume::Manual`].
pub fn parse(reason: &str) -> Option<OurReason> {
    let reason = reason.trim();
    reason.strip_prefix(PREFIX)?;
    let resume = reason.rsplit_once(' ').and_then(|(_, last)| Resume::from_marker(last)).unwrap_or(Resume::Manual);
    Some(OurReason { resume })
}

/// A drain reason and when it may be resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainReason {
    /// The text for `scontrol update reason=`.
    pub text: String,
    /// Its resume condition (also its last word).
    pub resume: Resume,
}

fn remedy_rank(r: Option<Remedy>) -> u8 {
    match r {
        Some(Remedy::ContactSupport) => 3,
        Some(Remedy::RebootNode) => 2,
        Some(Remedy::ResetGpu) => 1,
        _ => 0,
    }
}

/// How a finding alone would be resumed.
fn resume_of(finding: &Finding, rule: Rule, boot8: &str) -> Resume {
    if !rule.recoverable {
        Resume::Manual
    } else if !finding.fault.is_event() {
        Resume::Clear
    } else if rule.remedy == Some(Remedy::RebootNode) {
        Resume::AfterReboot(boot8.to_owned())
    } else {
        Resume::AfterReset(boot8.to_owned())
    }
}

fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect()
}

/// `gpu 3 GPU-5c1b2e3f 0000:41:00.0`, or `node` for a node-wide finding.
fn gpu_words(gpu: &GpuRef) -> String {
    if gpu.is_node() {
        return "node".to_owned();
    }
    let mut out = "gpu".to_owned();
    if let Some(i) = gpu.index {
        out.push_str(&format!(" {i}"));
    }
    if let Some(u) = &gpu.uuid {
        out.push(' ');
        out.extend(u.chars().take(12));
    }
    if let Some(p) = &gpu.pci {
        out.push_str(&format!(" {p}"));
    }
    out
}

/// A finding's words: `xid 79 (fallen off the bus)`, `remap pending`.
pub fn fault_words(fault: &Fault) -> String {
    match fault {
        Fault::Xid { code, .. } => format!("xid {code} ({})", xid_name(*code)),
        other => other.detail(),
    }
}

/// The reason for the drain-class findings among `findings` (worst first),
/// or `None` if there is none.  `boot_id` is the current boot's.
pub fn drain_reason(table: &Table, findings: &[Finding], boot_id: &str) -> Option<DrainReason> {
    let boot8: String = boot_id.trim().chars().filter(|c| *c != '-').take(8).collect();
    let mut drains: Vec<(&Finding, Rule, Resume)> =
        findings.iter().map(|f| (f, table.rule(&f.fault))).filter(|(_, r)| r.action == Action::Drain).map(|(f, r)| (f, r, resume_of(f, r, &boot8))).collect();
    // Worst first: the strictest resume, then the heaviest remedy; stable.
    drains.sort_by_key(|(_, r, res)| std::cmp::Reverse((res.rank(), remedy_rank(r.remedy))));
    let (worst, rule, _) = drains.first()?;
    let resume = drains.iter().map(|(_, _, r)| r.clone()).max()?;
    let head = format!("{PREFIX} {} ", gpu_words(&worst.gpu));
    let mut tail = String::new();
    // The job the fault hit, where a step's watch saw it.
    if let Some(jobs) = worst.job_words() {
        tail.push(' ');
        tail.push_str(&jobs);
    }
    if let Some(r) = rule.remedy {
        tail.push_str(&format!(" -> {}", r.text()));
    }
    if drains.len() > 1 {
        tail.push_str(&format!(" +{} more", drains.len() - 1));
    }
    tail.push(' ');
    tail.push_str(&resume.marker());
    let head = printable(&head);
    let mut middle = printable(&fault_words(&worst.fault));
    let room = MAX_REASON.saturating_sub(head.len() + tail.len());
    if middle.len() > room {
        middle.truncate(room.saturating_sub(3));
        middle.push_str("...");
    }
    let mut text = format!("{head}{middle}{tail}");
    text.truncate(MAX_REASON);
    Some(DrainReason { text, resume })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::Source;

    const BOOT: &str = "0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d";

    fn gpu3() -> GpuRef {
        GpuRef { index: Some(3), uuid: Some("GPU-5c1b2e3f-0a1b-2c3d-4e5f-60718293a4b5".into()), pci: Some("0000:41:00.0".into()) }
    }

    fn xid(code: u32) -> Finding {
        let fault = Fault::Xid { code, pid: Some(1), process: Some("python".into()), message: "x".into() };
        Finding::new(fault, gpu3(), Source::Kmsg { seq: 1 })
    }

    fn state(fault: Fault) -> Finding {
        Finding::new(fault, gpu3(), Source::Nvml)
    }

    #[test]
    fn one_xid_reads_like_the_design() {
        let r = drain_reason(&Table::new(), &[xid(79)], BOOT).unwrap();
        assert_eq!(r.text, "gres-rs: gpu 3 GPU-5c1b2e3f 0000:41:00.0 xid 79 (fallen off the bus) -> reboot node [resume:reboot@0f5c1b2e]");
        assert_eq!(r.resume, Resume::AfterReboot("0f5c1b2e".into()));
        assert_eq!(parse(&r.text), Some(OurReason { resume: r.resume }));
    }

    #[test]
    fn an_xid_a_step_saw_names_its_job() {
        let mut f = xid(79);
        f.source = Source::Step { step: Some(crate::step_id::StepId { job: 12, step: 0, het_comp: None }), pid: 4567 };
        let r = drain_reason(&Table::new(), &[f.clone()], BOOT).unwrap();
        assert_eq!(r.text, "gres-rs: gpu 3 GPU-5c1b2e3f 0000:41:00.0 xid 79 (fallen off the bus) job 12.0 -> reboot node [resume:reboot@0f5c1b2e]");
        assert_eq!(parse(&r.text), Some(OurReason { resume: r.resume }));
        // A step slurmstepd could not name: no job.
        f.source = Source::Step { step: None, pid: 4567 };
        assert!(!drain_reason(&Table::new(), &[f], BOOT).unwrap().text.contains("job"));
    }

    #[test]
    fn the_worst_comes_first_and_the_rest_are_counted() {
        let findings = [state(Fault::RemapPending), xid(13), state(Fault::RemapFailure), xid(95)];
        let r = drain_reason(&Table::new(), &findings, BOOT).unwrap();
        assert!(r.text.starts_with("gres-rs: gpu 3 GPU-5c1b2e3f 0000:41:00.0 remap failure -> contact support / replace +2 more"), "{}", r.text);
        assert_eq!(r.resume, Resume::Manual);
        assert!(r.text.ends_with(" [manual]"));
    }

    #[test]
    fn state_faults_resume_when_clear_and_nothing_to_drain_is_none() {
        let r = drain_reason(&Table::new(), &[state(Fault::RemapPending)], BOOT).unwrap();
        assert_eq!(r.resume, Resume::Clear);
        assert!(r.text.ends_with("remap pending -> reset GPU [resume:clear]"), "{}", r.text);
        assert_eq!(drain_reason(&Table::new(), &[xid(13), xid(31)], BOOT), None);
        let node = Finding::new(Fault::CountMismatch { nvml: 7, dev_files: 8, pci: 8, configured: Some(8) }, GpuRef::default(), Source::Pci);
        let r = drain_reason(&Table::new(), &[node], BOOT).unwrap();
        assert!(r.text.starts_with("gres-rs: node gpu count nvml 7 dev 8 pci 8 conf 8"), "{}", r.text);
    }

    #[test]
    fn a_long_reason_is_cut_to_200_printable_bytes_keeping_the_marker() {
        let fault = Fault::NvmlError { call: "nvmlDeviceGetHandleByIndex_v2".into(), text: "Ünknown \u{7} error ".repeat(30) };
        let r = drain_reason(&Table::new(), &[state(fault)], BOOT).unwrap();
        assert!(r.text.len() <= MAX_REASON, "{}", r.text.len());
        assert!(r.text.bytes().all(|b| b.is_ascii_graphic() || b == b' '));
        assert!(r.text.ends_with("... -> reboot node [resume:clear]"), "{}", r.text);
        assert_eq!(parse(&r.text).unwrap().resume, Resume::Clear);
    }

    #[test]
    fn only_our_prefix_is_ours() {
        assert_eq!(parse("Kill task failed"), None);
        assert_eq!(parse("admin: gres-rs: said so"), None);
        assert_eq!(parse("gres-rs: something old").unwrap().resume, Resume::Manual);
        assert_eq!(parse("gres-rs: x [resume:reset@zz]").unwrap().resume, Resume::Manual);
        assert_eq!(parse("gres-rs: x [resume:reset@0f5c1b2e]").unwrap().resume, Resume::AfterReset("0f5c1b2e".into()));
        assert!(Resume::Clear < Resume::AfterReset(String::new()));
        assert!(Resume::AfterReboot(String::new()) < Resume::Manual);
    }
}
