//! The kernel log's XIDs not reported before, as findings, and the cursor
//! that says so: `/dev/kmsg` by its boot and sequence numbers, a replayed
//! file (`--kmsg FILE`) by how far it was read ([`gres_health::replay`]).
//! A log that cannot be read is a note: the NVML readings and the GPU
//! counts are checked whatever the log does.

use gres_health::cursor::{select_new, Cursor};
use gres_health::fault::Finding;
use gres_health::kmsg::{Format, Origin, XidEvent, XidReader};
use gres_health::replay;
use gres_health::report::RunStats;

use super::kmsg_source;
use crate::HealthArgs;

/// A recorded log is `/dev/kmsg` records when its first line is one
/// (`<prio>,<seq>,<usec>,<flags>;text`), else `dmesg` text.
pub fn format_of(text: &[u8]) -> Format {
    let first = text.split(|b| *b == b'\n').find(|l| !l.iter().all(u8::is_ascii_whitespace)).unwrap_or(b"");
    let first = String::from_utf8_lossy(&first[..first.len().min(256)]);
    let head = first.split(';').next().unwrap_or("");
    let fields: Vec<&str> = head.split(',').collect();
    if first.contains(';') && fields.len() >= 4 && fields[..3].iter().all(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit())) {
        Format::Kmsg
    } else {
        Format::Text
    }
}

/// Every XID of `text`, with line numbers counted from `lines_before`.
fn read_events(text: &[u8], lines_before: u64, stats: &mut RunStats) -> Vec<XidEvent> {
    let mut reader = XidReader::new(text, format_of(text));
    // Reading from memory fails on nothing.
    let mut events = reader.read_all().unwrap_or_default();
    stats.long_lines = reader.long_lines();
    for e in &mut events {
        if let Origin::Line { number, hash } = e.origin {
            e.origin = Origin::Line { number: number + lines_before, hash };
        }
    }
    events
}

/// The new XIDs of the kernel's log, pushed to `findings`; the cursor to
/// save.  On the first run (no state yet, nothing damaged) the XIDs
/// already in this boot's `/dev/kmsg` are noted and not acted on: they
/// happened before the check was set up, and a GPU they broke is seen
/// broken by NVML.  After a damaged state file, this boot's XIDs are
/// acted on (nothing older: `/dev/kmsg` holds this boot only).
pub fn findings(
    args: &HealthArgs,
    prev: Option<&Cursor>,
    damaged: bool,
    boot_id: &str,
    findings: &mut Vec<Finding>,
    notes: &mut Vec<String>,
    stats: &mut RunStats,
) -> Cursor {
    let Some(file) = &args.kmsg else {
        return live(prev, damaged, boot_id, findings, notes, stats);
    };
    // A replay moves its own mark only, never the live cursor.
    let (_, mut next) = select_new(prev, boot_id, &[]);
    let source = replay::source_key(file.as_os_str().as_encoded_bytes());
    let mark = next.replays.iter().find(|m| m.source == source).copied();
    let part = match kmsg_source::read_replay(file, mark.as_ref()) {
        Ok(p) => p,
        Err(e) => {
            notes.push(format!("{e}: XIDs not checked"));
            return next;
        }
    };
    if part.skipped > 0 {
        notes.push(format!("{}: {} bytes not read (only the newest {} MiB are read at once)", file.display(), part.skipped, replay::MAX_READ >> 20));
    }
    let events = read_events(&part.text, part.lines_before, stats);
    let new = next.fresh_replayed(&events, part.continues);
    replay::remember(&mut next.replays, part.mark);
    stats.new_xids = new.len() as u64;
    findings.extend(new.iter().map(XidEvent::finding));
    next
}

fn live(prev: Option<&Cursor>, damaged: bool, boot_id: &str, findings: &mut Vec<Finding>, notes: &mut Vec<String>, stats: &mut RunStats) -> Cursor {
    let text = match kmsg_source::read_kmsg_device(std::path::Path::new("/dev/kmsg")) {
        Ok(text) => text,
        // Not root (an admin's dry run, a container without it): the
        // rest is still checked, and it says so.
        Err(e) => {
            notes.push(format!("{e}: XIDs not checked"));
            return select_new(prev, boot_id, &[]).1;
        }
    };
    let events = read_events(text.as_bytes(), 0, stats);
    let (new, next) = select_live(prev, damaged, boot_id, &events, notes);
    stats.new_xids = new.len() as u64;
    findings.extend(new.iter().map(XidEvent::finding));
    next
}

/// The live records' XIDs to act on, and the cursor past them.
fn select_live(prev: Option<&Cursor>, damaged: bool, boot_id: &str, events: &[XidEvent], notes: &mut Vec<String>) -> (Vec<XidEvent>, Cursor) {
    let (new, next) = select_new(prev, boot_id, events);
    if prev.is_none() && !damaged && !new.is_empty() {
        notes.push(format!(
            "first run: {} XID(s) already in this boot's kernel log before the check was set up, not acted on (replay them with --kmsg FILE)",
            new.len()
        ));
        return (Vec::new(), next);
    }
    (new, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_log_says_its_format() {
        assert!(matches!(format_of(b"6,3545,51282211373,-;vn2: left allmulticast mode\n"), Format::Kmsg));
        assert!(matches!(format_of(b"\n[ 1.0] NVRM: Xid (PCI:0000:41:00): 79, pid=1\n"), Format::Text));
        assert!(matches!(format_of(b"Dec  4 20:00:00 node kernel: NVRM: Xid (PCI:0000:41:00): 79;x\n"), Format::Text));
        assert!(matches!(format_of(b""), Format::Text));
    }

    #[test]
    fn the_first_run_skips_the_boots_xids_and_a_damaged_state_does_not() {
        let log = b"4,340,1,-;NVRM: Xid (PCI:0000:41:00): 48, pid=1, name=a, DBE\n";
        let events = read_events(log, 0, &mut RunStats::default());
        assert_eq!(events.len(), 1);
        let boot = "0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d";
        let mut notes = Vec::new();
        let (first, c) = select_live(None, false, boot, &events, &mut notes);
        assert!(first.is_empty() && notes[0].starts_with("first run"), "{notes:?}");
        assert_eq!(c.kmsg_seq, Some(340));
        // A state file that was there and could not be read: this boot's
        // XIDs are acted on, not skipped as on a first run.
        let (after_damage, _) = select_live(None, true, boot, &events, &mut Vec::new());
        assert_eq!(after_damage.len(), 1);
    }
}
