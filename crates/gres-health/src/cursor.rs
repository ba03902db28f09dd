//! The state file that makes each XID reported once, across runs, reboots,
//! outages and concurrent runs: the boot it was written in, the last
//! `/dev/kmsg` sequence number consumed, how far the step XID records and
//! each replayed log were read, the hashes of the replayed XID lines
//! reported, and the events a run could not act on yet.
//!
//! The file is plain text, one key per line, versioned by its first line
//! and closed by `end` (a file cut short is no state):
//!
//! ```text
//! gres-rs-health-state 2
//! boot_id=0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d
//! kmsg_seq=1031
//! step_records=512
//! replay=9a3f0c1d2e4b5a69 len=20480 lines=180 head=... tail=...
//! line=9a3f0c1d2e4b5a69
//! pending=xid=48 boot=... time=... gpu=3 uuid=... pci=0000:41:00.0 src=kmsg:1022
//! end
//! ```
//!
//! `step_records` is how many bytes of the step XID records
//! ([`crate::steps`]) were reported; `replay` lines are
//! [`crate::replay::ReplayMark`]s; `pending` lines are
//! [`crate::pending::PendingEvent`]s.
//!
//! A key this version does not know (a later version's) is skipped.  A
//! file that is not a state file (foreign, corrupt, cut short, a value
//! that does not read) is kept aside under another name
//! (`health.state.bad-<seconds>`), said, and the run acts on nothing older
//! than the boot ([`Loaded::damaged`]); it never fails the check.  Saving
//! is atomic: a temporary file in the same directory, fsync, rename(2),
//! fsync of the directory.

use std::collections::{HashSet, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

use crate::atomic_file::write_atomically;
use crate::kmsg::{fnv1a, Origin, XidEvent};
use crate::pending::PendingEvent;
use crate::replay::{self, ReplayMark};
use gres_core::bounded_read::read_bounded;

/// The file's name in the state directory.
pub const STATE_FILE: &str = "health.state";

/// The first word of every state file's first line; the version follows.
pub const MAGIC: &str = "gres-rs-health-state";

/// The version this build writes.
pub const VERSION: u32 = 2;

/// The first line of every state file this version writes.
pub const HEADER: &str = "gres-rs-health-state 2";

/// The last line of every state file from version 2 on.
pub const END: &str = "end";

/// At most this many line hashes are kept (the oldest go first).  Only
/// replayed files that were rotated or replaced consult them: a file that
/// grew is read past its mark ([`crate::replay`]).
pub const MAX_REPORTED: usize = 4096;

/// A state file bigger than this is not ours.
pub const MAX_FILE: u64 = 256 * 1024;

/// Where the last run stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// `/proc/sys/kernel/random/boot_id` when it was written.
    pub boot_id: String,
    /// The last `/dev/kmsg` sequence number consumed in that boot.
    pub kmsg_seq: Option<u64>,
    /// Hashes of the replayed XID lines already reported, oldest first.
    pub reported: VecDeque<u64>,
    /// The bytes of the step XID records' file already reported.
    pub step_records: Option<u64>,
    /// How far each replayed file was read.
    pub replays: Vec<ReplayMark>,
    /// Events a run could not act on yet.
    pub pending: Vec<PendingEvent>,
}

/// What loading found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The cursor, if there was a valid one.
    pub cursor: Option<Cursor>,
    /// Why a file that was there was not used, and where it was put.
    pub warning: Option<String>,
    /// A file was there and was not a state file: the run must act on
    /// nothing older than this boot (its XIDs since the boot are new, step
    /// records of earlier boots are not).
    pub damaged: bool,
}

impl Cursor {
    /// A cursor for a boot with nothing consumed.
    pub fn new(boot_id: &str) -> Self {
        Cursor { boot_id: boot_id.trim().to_owned(), kmsg_seq: None, reported: VecDeque::new(), step_records: None, replays: Vec::new(), pending: Vec::new() }
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = format!("{HEADER}\nboot_id={}\n", self.boot_id);
        if let Some(seq) = self.kmsg_seq {
            out.push_str(&format!("kmsg_seq={seq}\n"));
        }
        if let Some(n) = self.step_records {
            out.push_str(&format!("step_records={n}\n"));
        }
        for m in &self.replays {
            out.push_str(&format!("replay={}\n", m.render()));
        }
        for h in &self.reported {
            out.push_str(&format!("line={h:016x}\n"));
        }
        for p in &self.pending {
            out.push_str(&format!("pending={}\n", p.render()));
        }
        out.push_str(END);
        out.push('\n');
        out
    }

    /// Parse a state file's text; the error says why it is not one.  Any
    /// version is read: keys this version does not know are skipped, and
    /// from version 2 on the file must end with [`END`].
    pub fn parse(text: &str) -> Result<Cursor, String> {
        let mut lines = text.lines().enumerate();
        let version = match lines.next().map(|(_, l)| l.split_once(' ')) {
            Some(Some((MAGIC, v))) => v.trim().parse::<u32>().ok().filter(|v| *v >= 1).ok_or_else(|| format!("unreadable version `{v}`"))?,
            _ => return Err("not a gres-rs health state file".to_owned()),
        };
        let mut c = Cursor::new("");
        let mut boot_id = None;
        let mut ended = false;
        for (i, line) in lines {
            let n = i + 1;
            if ended && !line.trim().is_empty() {
                return Err(format!("line {n}: text after `{END}`"));
            }
            if line == END {
                ended = true;
                continue;
            }
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("line {n}: no `=`"));
            };
            let bad = |what: &str| format!("line {n}: bad {what}");
            match key {
                "boot_id" if valid_boot_id(value) => boot_id = Some(value.to_owned()),
                "boot_id" => return Err(bad("boot_id")),
                "kmsg_seq" => c.kmsg_seq = Some(value.parse().map_err(|_| bad("kmsg_seq"))?),
                "step_records" => c.step_records = Some(value.parse().map_err(|_| bad("step_records"))?),
                "line" => {
                    let h = u64::from_str_radix(value, 16).map_err(|_| bad("line hash"))?;
                    c.reported.push_back(h);
                }
                "replay" => replay::remember(&mut c.replays, ReplayMark::parse(value).map_err(|e| format!("line {n}: {e}"))?),
                "pending" => {
                    let e = PendingEvent::parse(value).map_err(|e| format!("line {n}: {e}"))?;
                    if c.pending.len() < crate::pending::MAX_PENDING {
                        c.pending.push(e);
                    }
                }
                // A later version's key.
                _ => {}
            }
        }
        if version >= 2 && !ended {
            return Err(format!("no `{END}` line: the file was cut short"));
        }
        while c.reported.len() > MAX_REPORTED {
            c.reported.pop_front();
        }
        c.boot_id = boot_id.ok_or("no valid boot_id")?;
        Ok(c)
    }

    /// The state file's path in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_FILE)
    }

    /// Load the state file from `dir`.  No file: no cursor, no warning.
    /// A file that is not a state file is renamed `health.state.bad-<now>`
    /// (kept for a person to read, out of the next run's way), unless
    /// `keep_in_place` (a dry run, which changes nothing).
    pub fn load(dir: &Path, now: u64, keep_in_place: bool) -> Loaded {
        let path = Cursor::path(dir);
        let problem = match read_bounded(&path, MAX_FILE) {
            Err(e) if e.is_not_found() => return Loaded { cursor: None, warning: None, damaged: false },
            Err(e) => e.to_string(),
            Ok(bytes) => match std::str::from_utf8(&bytes).map_err(|_| "not UTF-8 text".to_string()).and_then(Cursor::parse) {
                Ok(c) => return Loaded { cursor: Some(c), warning: None, damaged: false },
                Err(why) => why,
            },
        };
        let aside = dir.join(format!("{STATE_FILE}.bad-{now}"));
        let kept = if keep_in_place {
            "left in place (a dry run changes nothing)".to_string()
        } else {
            match std::fs::rename(&path, &aside) {
                Ok(()) => format!("kept as {}", aside.display()),
                Err(e) => format!("could not be moved aside: {e}"),
            }
        };
        Loaded { cursor: None, warning: Some(format!("{}: {problem}; {kept}; this run acts on nothing older than this boot", path.display())), damaged: true }
    }

    /// Write the state file into `dir` atomically ([`write_atomically`]).
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        write_atomically(&Cursor::path(dir), self.render().as_bytes())
    }

    fn remember(&mut self, hash: u64) {
        if self.reported.len() >= MAX_REPORTED {
            self.reported.pop_front();
        }
        self.reported.push_back(hash);
    }

    /// Record that `/dev/kmsg` was read up to `seq` (the last record read,
    /// XID or not).
    pub fn consumed(&mut self, seq: u64) {
        self.kmsg_seq = Some(self.kmsg_seq.map_or(seq, |s| s.max(seq)));
    }

    /// The events of a replayed file's part read now that are new: all of
    /// them when the part continues what was read before, else (a file
    /// rotated, replaced, or read for the first time) those whose line
    /// was never reported.  Every event returned is remembered.  Linear in
    /// the number of events.
    pub fn fresh_replayed(&mut self, events: &[XidEvent], continues: bool) -> Vec<XidEvent> {
        let known: HashSet<u64> = if continues { HashSet::new() } else { self.reported.iter().copied().collect() };
        let mut seen = HashSet::new();
        let mut new = Vec::new();
        for e in events {
            let h = event_hash(e);
            if known.contains(&h) || !seen.insert(h) {
                continue;
            }
            new.push(e.clone());
        }
        for e in &new {
            self.remember(event_hash(e));
        }
        new
    }
}

/// What identifies a replayed XID line among others: its text's hash (a
/// text line), or its record's sequence number, XID and GPU (a
/// `/dev/kmsg` record; the driver's words only, nothing a user wrote).
pub fn event_hash(e: &XidEvent) -> u64 {
    match e.origin {
        Origin::Line { hash, .. } => hash,
        Origin::Seq(seq) => fnv1a(format!("{seq} {} {:?}", e.xid.code, e.xid.pci).as_bytes()),
    }
}

fn valid_boot_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// Which of the live `/dev/kmsg` `events` are new since `prev`, and the
/// cursor to save after reporting them.  Events of the same boot are new
/// past the last sequence number; on a new boot (or with no cursor) all
/// are (`/dev/kmsg` holds only the current boot).  What else the cursor
/// holds (replay marks, step records, pending events) is carried over.
pub fn select_new(prev: Option<&Cursor>, boot_id: &str, events: &[XidEvent]) -> (Vec<XidEvent>, Cursor) {
    let mut next = Cursor::new(boot_id);
    if let Some(p) = prev {
        next.reported = p.reported.clone();
        next.step_records = p.step_records;
        next.replays = p.replays.clone();
        next.pending = p.pending.clone();
        if p.boot_id == next.boot_id {
            next.kmsg_seq = p.kmsg_seq;
        }
    }
    let last = next.kmsg_seq;
    let mut new = Vec::new();
    for e in events {
        if let Origin::Seq(seq) = e.origin {
            next.consumed(seq);
            if last.is_none_or(|l| seq > l) {
                new.push(e.clone());
            }
        }
    }
    (new, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmsg::{Format, XidReader};
    use std::fs;
    use std::io::Cursor as Input;

    const BOOT_A: &str = "0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d";
    const BOOT_B: &str = "9a8b7c6d-1111-4222-8333-444455556666";

    fn kmsg(text: &str) -> Vec<XidEvent> {
        XidReader::new(Input::new(text), Format::Kmsg).read_all().unwrap()
    }

    fn codes(events: &[XidEvent]) -> Vec<u32> {
        events.iter().map(|e| e.xid.code).collect()
    }

    #[test]
    fn an_xid_is_reported_once_across_runs_and_again_after_a_reboot() {
        let run1 = "4,100,1,-;NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=a, GPU has fallen off the bus.\n";
        let (new, c1) = select_new(None, BOOT_A, &kmsg(run1));
        assert_eq!(codes(&new), [79]);
        assert_eq!(c1.kmsg_seq, Some(100));

        // Run 2, same boot: the ring buffer still holds seq 100, plus 101.
        let run2 = format!("{run1}4,101,2,-;NVRM: Xid (PCI:0000:41:00): 48, pid=2, name=b, DBE\n");
        let c1 = Cursor::parse(&c1.render()).unwrap();
        let (new, c2) = select_new(Some(&c1), BOOT_A, &kmsg(&run2));
        assert_eq!(codes(&new), [48]);
        let (new, _) = select_new(Some(&c2), BOOT_A, &kmsg(&run2));
        assert!(new.is_empty());

        // After a reboot the kernel counts from low numbers again.
        let run3 = "4,7,1,-;NVRM: Xid (PCI:0000:41:00): 119, pid='<unknown>', name=<unknown>, Timeout waiting for RPC from GSP\n";
        let (new, c3) = select_new(Some(&c2), BOOT_B, &kmsg(run3));
        assert_eq!(codes(&new), [119]);
        assert_eq!((c3.boot_id.as_str(), c3.kmsg_seq), (BOOT_B, Some(7)));
    }

    #[test]
    fn a_replaced_file_reports_each_line_once_whatever_the_boot() {
        let text = "\
[ 1.0] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=a, GPU has fallen off the bus.
[ 1.0] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=a, GPU has fallen off the bus.
[ 2.0] NVRM: Xid (PCI:0000:42:00): 95, pid=2, name=b, Uncontained
";
        let events = XidReader::new(Input::new(text), Format::Text).read_all().unwrap();
        let mut c = Cursor::new(BOOT_A);
        assert_eq!(codes(&c.fresh_replayed(&events, false)), [79, 95]);
        let mut c = Cursor::parse(&c.render()).unwrap();
        c.boot_id = BOOT_B.into();
        assert!(c.fresh_replayed(&events, false).is_empty());
        // A part that continues what was read is new whole.
        assert_eq!(codes(&c.fresh_replayed(&events[2..], true)), [95]);
    }

    #[test]
    fn a_hundred_thousand_replayed_lines_take_linear_time() {
        let mut text = String::from("[ 1.0] NVRM: Xid (PCI:0000:41:00): 48, pid=1, name=a, DBE\n");
        for i in 0..100_000 {
            text.push_str(&format!("[ {i}.5] NVRM: Xid (PCI:0000:41:00): 13, pid={i}, name=a, Graphics Exception\n"));
        }
        let events = XidReader::new(Input::new(text), Format::Text).read_all().unwrap();
        let t = std::time::Instant::now();
        let mut c = Cursor::new(BOOT_A);
        assert_eq!(c.fresh_replayed(&events, false).len(), 100_001);
        assert!(c.fresh_replayed(&events, false).len() <= 100_001 - MAX_REPORTED);
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_no_cursor() {
        assert!(Cursor::parse("").is_err());
        assert!(Cursor::parse("{\"json\": true}").is_err());
        assert!(Cursor::parse(&format!("{HEADER}\nboot_id={BOOT_A}\nkmsg_seq=x\n{END}\n")).is_err());
        assert!(Cursor::parse(&format!("{HEADER}\nkmsg_seq=3\n{END}\n")).is_err());
        assert!(Cursor::parse(&format!("{HEADER}\nboot_id=../etc\n{END}\n")).is_err());
        // Cut short: no end line.
        assert!(Cursor::parse(&format!("{HEADER}\nboot_id={BOOT_A}\nkmsg_seq=1")).unwrap_err().contains("cut short"));
    }

    #[test]
    fn a_later_version_and_unknown_keys_are_read_as_far_as_known() {
        let later = format!("gres-rs-health-state 9\nboot_id={BOOT_A}\nkmsg_seq=77\nshiny_new_key=1\n{END}\n");
        let c = Cursor::parse(&later).unwrap();
        assert_eq!((c.boot_id.as_str(), c.kmsg_seq), (BOOT_A, Some(77)));
        // Version 1 files (no end line) still read.
        let v1 = format!("gres-rs-health-state 1\nboot_id={BOOT_A}\nkmsg_seq=5\nstep_records=9\n");
        let c = Cursor::parse(&v1).unwrap();
        assert_eq!((c.kmsg_seq, c.step_records), (Some(5), Some(9)));
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("gres-health-{tag}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn save_then_load_round_trips_and_leaves_no_temp_file() {
        let dir = temp_dir("save");
        assert_eq!(Cursor::load(&dir, 1, false), Loaded { cursor: None, warning: None, damaged: false });
        let mut c = Cursor::new(BOOT_A);
        c.consumed(42);
        c.remember(0xdead_beef);
        c.step_records = Some(512);
        c.replays.push(ReplayMark { source: 1, len: 2, lines: 3, head: 4, tail: 5 });
        c.save(&dir).unwrap();
        c.consumed(43);
        c.save(&dir).unwrap();
        let loaded = Cursor::load(&dir, 1, false);
        assert_eq!(loaded.cursor, Some(c));
        assert_eq!(loaded.warning, None);
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [STATE_FILE]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_file_on_disk_is_kept_aside_and_said() {
        let dir = temp_dir("corrupt");
        fs::write(Cursor::path(&dir), "gres-rs-health-state 1\nboot_id=\u{0}\u{1}garbage").unwrap();
        // A dry run says so and leaves it.
        let dry = Cursor::load(&dir, 1234, true);
        assert!(dry.damaged && dry.warning.unwrap().contains("left in place"));
        assert!(Cursor::path(&dir).exists());
        let loaded = Cursor::load(&dir, 1234, false);
        assert_eq!((loaded.cursor.is_none(), loaded.damaged), (true, true));
        let w = loaded.warning.unwrap();
        assert!(w.contains("health.state") && w.contains("health.state.bad-1234") && w.contains("nothing older than this boot"), "{w}");
        assert!(!Cursor::path(&dir).exists());
        assert!(dir.join("health.state.bad-1234").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_reported_set_is_bounded() {
        let mut c = Cursor::new(BOOT_A);
        for h in 0..(MAX_REPORTED as u64 + 10) {
            c.remember(h);
        }
        assert_eq!(c.reported.len(), MAX_REPORTED);
        assert_eq!(c.reported.front(), Some(&10));
    }
}
