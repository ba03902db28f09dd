//! Events a run saw but could not act on: an XID read while `sinfo` or
//! `scontrol` failed (slurmctld down or restarting) is consumed from the
//! log by the cursor, so it must be kept somewhere until a run can act on
//! it, or it is lost.  They are kept in the state file
//! ([`crate::cursor`]), one line each:
//!
//! ```text
//! pending=xid=48 boot=0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d time=1733340000 gpu=3 uuid=GPU-5c1b2e3f pci=0000:41:00.0 src=kmsg:1022
//! pending=xid=79 boot=... time=... gpu=- uuid=- pci=0000:41:00.0 src=step:12.0:4567
//! ```
//!
//! Only events whose rule drains are kept (a warning needs no action), at
//! most [`MAX_PENDING`], the same XID of the same GPU once.  After a
//! reboot an event a reboot clears (the table's recoverable drains) is
//! dropped; one a person must clear is kept.  State faults (ECC counts, a
//! lost GPU) need no keeping: the next run reads them again.

use crate::catalog::{Action, Table};
use crate::fault::{Fault, Finding, GpuRef, Source};
use crate::step_id::StepId;

/// The most events kept.
pub const MAX_PENDING: usize = 64;

/// One event kept for a later run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    /// The XID.
    pub xid: u32,
    /// The boot it was seen in (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// When it was first kept, seconds since the epoch.
    pub time: u64,
    /// Its GPU.
    pub gpu: GpuRef,
    /// Where it was seen.
    pub source: Source,
}

/// Keep only the characters an id, a UUID or a bus id has.
fn clean(s: &str, max: usize) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.')).take(max).collect()
}

impl PendingEvent {
    /// The event of `finding`, when it is an XID.
    pub fn of(finding: &Finding, boot_id: &str, time: u64) -> Option<PendingEvent> {
        let Fault::Xid { code, .. } = finding.fault else { return None };
        Some(PendingEvent { xid: code, boot_id: clean(boot_id, 64), time, gpu: finding.gpu.clone(), source: finding.source })
    }

    /// The event as a finding again.
    pub fn finding(&self) -> Finding {
        let fault = Fault::Xid { code: self.xid, pid: None, process: None, message: format!("kept from a run that could not act ({})", self.time) };
        Finding::new(fault, self.gpu.clone(), self.source)
    }

    /// The value of its `pending=` line.
    pub fn render(&self) -> String {
        let opt = |v: Option<String>| v.filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into());
        let src = match self.source {
            Source::Kmsg { seq } => format!("kmsg:{seq}"),
            Source::LogFile { line } => format!("log:{line}"),
            Source::Step { step, pid } => format!("step:{}:{pid}", step.map_or_else(|| "-".to_string(), |s| s.to_string())),
            _ => "other".to_string(),
        };
        format!(
            "xid={} boot={} time={} gpu={} uuid={} pci={} src={src}",
            self.xid,
            opt(Some(clean(&self.boot_id, 64))),
            self.time,
            opt(self.gpu.index.map(|i| i.to_string())),
            opt(self.gpu.uuid.as_deref().map(|u| clean(u, 96))),
            opt(self.gpu.pci.as_deref().map(|p| clean(p, 32))),
        )
    }

    /// Parse a `pending=` line's value.
    pub fn parse(value: &str) -> Result<PendingEvent, String> {
        let mut e = PendingEvent { xid: 0, boot_id: String::new(), time: 0, gpu: GpuRef::default(), source: Source::Nvml };
        let (mut xid, mut src) = (None, None);
        for field in value.split(' ').filter(|f| !f.is_empty()) {
            let (key, v) = field.split_once('=').ok_or_else(|| format!("`{field}` is not key=value"))?;
            let bad = || format!("bad {key} `{v}`");
            let some = (v != "-").then_some(v);
            match key {
                "xid" => xid = Some(v.parse::<u32>().map_err(|_| bad())?),
                "boot" => e.boot_id = clean(v, 64),
                "time" => e.time = v.parse().map_err(|_| bad())?,
                "gpu" => e.gpu.index = some.map(|v| v.parse().map_err(|_| bad())).transpose()?,
                "uuid" => e.gpu.uuid = some.map(|v| clean(v, 96)),
                "pci" => e.gpu.pci = some.map(|v| clean(v, 32)),
                "src" => src = Some(parse_source(v).ok_or_else(bad)?),
                // A later version's field.
                _ => {}
            }
        }
        e.xid = xid.ok_or("no xid")?;
        e.source = src.ok_or("no src")?;
        Ok(e)
    }
}

fn parse_source(v: &str) -> Option<Source> {
    let (kind, rest) = v.split_once(':')?;
    Some(match kind {
        "kmsg" => Source::Kmsg { seq: rest.parse().ok()? },
        "log" => Source::LogFile { line: rest.parse().ok()? },
        "step" => {
            let (step, pid) = rest.rsplit_once(':')?;
            let step = if step == "-" { None } else { Some(StepId::parse(step)?) };
            Source::Step { step, pid: pid.parse().ok()? }
        }
        _ => return None,
    })
}

/// The events among `findings` a run must act on (XIDs whose rule
/// drains), added to `kept` without repeating the same XID of the same
/// GPU, at most [`MAX_PENDING`] (the oldest stay: they came first).
pub fn keep(kept: &mut Vec<PendingEvent>, table: &Table, findings: &[Finding], boot_id: &str, now: u64) {
    for f in findings.iter().filter(|f| table.rule(&f.fault).action == Action::Drain) {
        let Some(e) = PendingEvent::of(f, boot_id, now) else { continue };
        if kept.len() >= MAX_PENDING || kept.iter().any(|k| k.xid == e.xid && k.gpu == e.gpu) {
            continue;
        }
        kept.push(e);
    }
}

/// The events of `kept` still to act on in boot `boot_id`: after a
/// reboot, an event whose drain the table resumes after a reset or a
/// reboot is cleared by that reboot; one a person must clear stays.
pub fn after_boot(kept: Vec<PendingEvent>, table: &Table, boot_id: &str) -> (Vec<PendingEvent>, usize) {
    let before = kept.len();
    let left: Vec<PendingEvent> = kept.into_iter().filter(|e| e.boot_id == boot_id.trim() || !table.rule(&e.finding().fault).recoverable).collect();
    let dropped = before - left.len();
    (left, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT_A: &str = "0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d";
    const BOOT_B: &str = "9a8b7c6d-1111-4222-8333-444455556666";

    fn xid(code: u32, source: Source) -> Finding {
        let gpu = GpuRef { index: Some(3), uuid: Some("GPU-5c1b2e3f".into()), pci: Some("0000:41:00.0".into()) };
        Finding::new(Fault::Xid { code, pid: Some(1), process: Some("x y".into()), message: "m".into() }, gpu, source)
    }

    #[test]
    fn an_event_round_trips_through_its_line() {
        for source in [
            Source::Kmsg { seq: 1022 },
            Source::LogFile { line: 7 },
            Source::Step { step: Some(StepId { job: 12, step: 0, het_comp: None }), pid: 4567 },
            Source::Step { step: None, pid: 9 },
        ] {
            let e = PendingEvent::of(&xid(48, source), BOOT_A, 1_733_340_000).unwrap();
            let back = PendingEvent::parse(&e.render()).unwrap();
            assert_eq!(back, e);
            assert_eq!(back.finding().gpu, xid(48, source).gpu);
            assert_eq!(back.finding().source, source);
        }
        assert!(PendingEvent::parse("time=1").is_err());
        assert!(PendingEvent::parse("xid=1 src=disk:3").is_err());
        assert_eq!(PendingEvent::parse("xid=1 src=kmsg:3 later=yes").unwrap().xid, 1);
    }

    #[test]
    fn only_drains_are_kept_once_and_bounded() {
        let table = Table::new();
        let mut kept = Vec::new();
        let findings = [xid(13, Source::Kmsg { seq: 1 }), xid(48, Source::Kmsg { seq: 2 }), xid(48, Source::Kmsg { seq: 3 }), xid(63, Source::Kmsg { seq: 4 })];
        keep(&mut kept, &table, &findings, BOOT_A, 5);
        assert_eq!(kept.iter().map(|e| e.xid).collect::<Vec<_>>(), [48]);
        for i in 0..200 {
            let mut f = xid(79, Source::Kmsg { seq: 10 + i });
            f.gpu.index = Some(i as u32);
            keep(&mut kept, &table, &[f], BOOT_A, 5);
        }
        assert_eq!(kept.len(), MAX_PENDING);
    }

    #[test]
    fn a_reboot_clears_what_a_reboot_fixes_and_keeps_the_rest() {
        let table = Table::new();
        let mut kept = Vec::new();
        keep(&mut kept, &table, &[xid(79, Source::Kmsg { seq: 1 }), xid(48, Source::Kmsg { seq: 2 })], BOOT_A, 5);
        let (same, dropped) = after_boot(kept.clone(), &table, BOOT_A);
        assert_eq!((same.len(), dropped), (2, 0));
        let (left, dropped) = after_boot(kept, &table, BOOT_B);
        assert_eq!((left.iter().map(|e| e.xid).collect::<Vec<_>>(), dropped), (vec![48], 1));
    }
}
