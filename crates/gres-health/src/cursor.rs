//! The state file that makes each XID reported once, across runs and
//! reboots: the boot it was written in, the last `/dev/kmsg` sequence number
//! consumed, and the hashes of the log-file lines already reported.
//!
//! The file is plain text, one key per line, versioned by its first line:
//!
//! ```text
//! gres-rs-health-state 1
//! boot_id=0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d
//! kmsg_seq=1031
//! step_records=512
//! line=9a3f0c1d2e4b5a69
//! ```
//!
//! `step_records` is how many bytes of the step XID records
//! ([`crate::steps`]) were reported.
//!
//! A file that is not this (corrupt, foreign, a newer version) is "no
//! cursor" plus a warning, never an error: the worst it costs is reporting
//! this boot's XIDs again.  Saving is atomic: a temporary file in the same
//! directory, fsync, rename(2), fsync of the directory.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

use crate::atomic_file::write_atomically;
use crate::kmsg::{Origin, XidEvent};
use gres_core::bounded_read::read_bounded;

/// The file's name in the state directory.
pub const STATE_FILE: &str = "health.state";

/// The first line of every state file this version writes.
pub const HEADER: &str = "gres-rs-health-state 1";

/// At most this many line hashes are kept (the oldest go first).
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
    /// Hashes of the log-file lines already reported, oldest first.
    pub reported: VecDeque<u64>,
    /// The bytes of the step XID records' file already reported.
    pub step_records: Option<u64>,
}

/// What loading found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The cursor, if there was a valid one.
    pub cursor: Option<Cursor>,
    /// Why a file that was there was not used.
    pub warning: Option<String>,
}

impl Cursor {
    /// A cursor for a boot with nothing consumed.
    pub fn new(boot_id: &str) -> Self {
        Cursor { boot_id: boot_id.trim().to_owned(), kmsg_seq: None, reported: VecDeque::new(), step_records: None }
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
        for h in &self.reported {
            out.push_str(&format!("line={h:016x}\n"));
        }
        out
    }

    /// Parse a state file's text; the error says why it is not one.
    pub fn parse(text: &str) -> Result<Cursor, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, HEADER)) => {}
            Some((_, first)) if first.starts_with("gres-rs-health-state ") => {
                return Err(format!("unsupported version `{first}`"));
            }
            _ => return Err("not a gres-rs health state file".to_owned()),
        }
        let mut boot_id = None;
        let mut kmsg_seq = None;
        let mut step_records = None;
        let mut reported = VecDeque::new();
        for (i, line) in lines {
            let n = i + 1;
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("line {n}: no `=`"));
            };
            match key {
                "boot_id" if valid_boot_id(value) => boot_id = Some(value.to_owned()),
                "kmsg_seq" => {
                    let seq = value.parse().map_err(|_| format!("line {n}: bad kmsg_seq"))?;
                    kmsg_seq = Some(seq);
                }
                "step_records" => step_records = Some(value.parse().map_err(|_| format!("line {n}: bad step_records"))?),
                "line" => {
                    let h = u64::from_str_radix(value, 16).map_err(|_| format!("line {n}: bad line hash"))?;
                    reported.push_back(h);
                }
                _ => return Err(format!("line {n}: unexpected `{key}`")),
            }
        }
        while reported.len() > MAX_REPORTED {
            reported.pop_front();
        }
        let boot_id = boot_id.ok_or("no valid boot_id")?;
        Ok(Cursor { boot_id, kmsg_seq, reported, step_records })
    }

    /// The state file's path in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_FILE)
    }

    /// Load the state file from `dir`.  No file: no cursor, no warning.
    pub fn load(dir: &Path) -> Loaded {
        let path = Cursor::path(dir);
        let problem = match read_bounded(&path, MAX_FILE) {
            Err(e) if e.is_not_found() => return Loaded { cursor: None, warning: None },
            Err(e) => e.to_string(),
            Ok(bytes) => match std::str::from_utf8(&bytes).map_err(|_| "not UTF-8 text".to_string()).and_then(Cursor::parse) {
                Ok(c) => return Loaded { cursor: Some(c), warning: None },
                Err(why) => why,
            },
        };
        Loaded { cursor: None, warning: Some(format!("{}: {problem}; starting without a cursor (this boot's XIDs may be reported again)", path.display())) }
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
}

fn valid_boot_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// Which of `events` are new since `prev`, and the cursor to save after
/// reporting them.  kmsg events of the same boot are new past the last
/// sequence number; on a new boot (or with no cursor) all of this boot's
/// are (`/dev/kmsg` holds only the current boot).  A log-file line is new
/// if its hash was never reported, whatever the boot: a replayed file may
/// mix boots.
pub fn select_new(prev: Option<&Cursor>, boot_id: &str, events: &[XidEvent]) -> (Vec<XidEvent>, Cursor) {
    let mut next = Cursor::new(boot_id);
    if let Some(p) = prev {
        next.reported = p.reported.clone();
        next.step_records = p.step_records;
        if p.boot_id == next.boot_id {
            next.kmsg_seq = p.kmsg_seq;
        }
    }
    let last = next.kmsg_seq;
    let mut new = Vec::new();
    for e in events {
        let fresh = match e.origin {
            Origin::Seq(seq) => {
                next.consumed(seq);
                last.is_none_or(|l| seq > l)
            }
            Origin::Line { hash, .. } => {
                let fresh = !next.reported.contains(&hash) && !new_has(&new, hash);
                if fresh {
                    next.remember(hash);
                }
                fresh
            }
        };
        if fresh {
            new.push(e.clone());
        }
    }
    (new, next)
}

fn new_has(new: &[XidEvent], hash: u64) -> bool {
    new.iter().any(|e| matches!(e.origin, Origin::Line { hash: h, .. } if h == hash))
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
    fn a_replayed_file_reports_each_line_once_whatever_the_boot() {
        let text = "\
[ 1.0] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=a, GPU has fallen off the bus.
[ 1.0] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=a, GPU has fallen off the bus.
[ 2.0] NVRM: Xid (PCI:0000:42:00): 95, pid=2, name=b, Uncontained
";
        let events = XidReader::new(Input::new(text), Format::Text).read_all().unwrap();
        let (new, c) = select_new(None, BOOT_A, &events);
        assert_eq!(codes(&new), [79, 95]);
        let (new, _) = select_new(Some(&c), BOOT_B, &events);
        assert!(new.is_empty());
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_no_cursor() {
        assert!(Cursor::parse("").is_err());
        assert!(Cursor::parse("{\"json\": true}").is_err());
        assert!(Cursor::parse("gres-rs-health-state 9\nboot_id=ab\n").unwrap_err().contains("version"));
        assert!(Cursor::parse(&format!("{HEADER}\nboot_id={BOOT_A}\nkmsg_seq=x\n")).is_err());
        assert!(Cursor::parse(&format!("{HEADER}\nkmsg_seq=3\n")).is_err());
        assert!(Cursor::parse(&format!("{HEADER}\nboot_id=../etc\n")).is_err());
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
        assert_eq!(Cursor::load(&dir), Loaded { cursor: None, warning: None });
        let mut c = Cursor::new(BOOT_A);
        c.consumed(42);
        c.remember(0xdead_beef);
        c.step_records = Some(512);
        c.save(&dir).unwrap();
        c.consumed(43);
        c.save(&dir).unwrap();
        let loaded = Cursor::load(&dir);
        assert_eq!(loaded.cursor, Some(c));
        assert_eq!(loaded.warning, None);
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [STATE_FILE]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_file_on_disk_warns_and_starts_over() {
        let dir = temp_dir("corrupt");
        fs::write(Cursor::path(&dir), "gres-rs-health-state 1\nboot_id=\u{0}\u{1}garbage").unwrap();
        let loaded = Cursor::load(&dir);
        assert_eq!(loaded.cursor, None);
        let w = loaded.warning.unwrap();
        assert!(w.contains("health.state") && w.contains("without a cursor"), "{w}");
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
