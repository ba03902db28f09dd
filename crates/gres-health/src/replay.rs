//! Where a replayed kernel log (`--kmsg FILE`: `dmesg` output, a saved
//! copy of `/dev/kmsg`, syslog's `kern.log`) was read to, so that each of
//! its lines is reported once however large it grows.
//!
//! A line of a file is identified by where it stands in it: the check
//! keeps, per file (by a hash of its path), how many bytes it read and
//! two fingerprints of what it read, the first [`WINDOW`] bytes and the
//! [`WINDOW`] bytes before the end of what it read.  When the file is at
//! least that long again and both fingerprints match, it grew at its end
//! (a log being appended) and only the bytes past the mark are new: no
//! number of later lines brings an old one back, and the check reads only
//! the new part.  When they do not match the file was rotated, truncated
//! or replaced: it is read again whole (its last [`crate::replay::MAX_READ`]
//! bytes at most), and its XID lines are checked against the hashes of the
//! lines already reported ([`crate::cursor::Cursor::reported`]).
//!
//! A replay's marks are its own: replaying a saved `/dev/kmsg` file of
//! another boot never moves the live cursor of `/dev/kmsg`
//! ([`crate::cursor::Cursor::kmsg_seq`]).

use crate::kmsg::fnv1a;

/// The bytes each fingerprint covers.
pub const WINDOW: u64 = 4096;

/// The most read of one file in one run: a larger remainder is read from
/// its end back (the newest lines), and the part skipped is said.
pub const MAX_READ: u64 = 64 << 20;

/// The most files whose marks are kept (the least recently read go).
pub const MAX_SOURCES: usize = 16;

/// How far one file was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayMark {
    /// [`source_key`] of the file's path.
    pub source: u64,
    /// Bytes read, up to the end of the last whole line.
    pub len: u64,
    /// Lines in those bytes.
    pub lines: u64,
    /// [`fnv1a`] of the first `min(len, WINDOW)` bytes.
    pub head: u64,
    /// [`fnv1a`] of the `min(len, WINDOW)` bytes before `len`.
    pub tail: u64,
}

/// The key of a file: the FNV-1a hash of its path's bytes.
pub fn source_key(path: &[u8]) -> u64 {
    fnv1a(path)
}

/// The byte ranges whose fingerprints say whether a file of `file_len`
/// bytes is the one `mark` was taken of, grown at its end: `None` when it
/// is shorter than the mark.
pub fn windows(mark: &ReplayMark, file_len: u64) -> Option<[(u64, u64); 2]> {
    if file_len < mark.len {
        return None;
    }
    let n = mark.len.min(WINDOW);
    Some([(0, n), (mark.len - n, mark.len)])
}

impl ReplayMark {
    /// Whether the fingerprints of the [`windows`] read now match.
    pub fn matches(&self, head: &[u8], tail: &[u8]) -> bool {
        fnv1a(head) == self.head && fnv1a(tail) == self.tail
    }

    /// The value of its `replay=` line.
    pub fn render(&self) -> String {
        format!("{:016x} len={} lines={} head={:016x} tail={:016x}", self.source, self.len, self.lines, self.head, self.tail)
    }

    /// Parse a `replay=` line's value.
    pub fn parse(value: &str) -> Result<ReplayMark, String> {
        let mut parts = value.split(' ').filter(|p| !p.is_empty());
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| format!("bad hash `{s}`"));
        let source = hex(parts.next().ok_or("no source")?)?;
        let mut m = ReplayMark { source, len: 0, lines: 0, head: 0, tail: 0 };
        for p in parts {
            let (k, v) = p.split_once('=').ok_or_else(|| format!("`{p}` is not key=value"))?;
            let num = |s: &str| s.parse::<u64>().map_err(|_| format!("bad {k} `{s}`"));
            match k {
                "len" => m.len = num(v)?,
                "lines" => m.lines = num(v)?,
                "head" => m.head = hex(v)?,
                "tail" => m.tail = hex(v)?,
                _ => {}
            }
        }
        Ok(m)
    }
}

/// The mark after reading `text` (whole lines) of a file whose bytes
/// before `start` (`lines_before` lines) were read before: `head` is the
/// file's first `min(end, WINDOW)` bytes, which the caller has when
/// `start` is 0 and reads otherwise.
pub fn mark_after(source: u64, start: u64, lines_before: u64, head: &[u8], text: &[u8], tail_before: &[u8]) -> ReplayMark {
    let len = start + text.len() as u64;
    let lines = lines_before + text.iter().filter(|b| **b == b'\n').count() as u64;
    let n = len.min(WINDOW) as usize;
    let tail: Vec<u8> = if text.len() >= n {
        text[text.len() - n..].to_vec()
    } else {
        // The window reaches back before what was read now.
        let need = n - text.len();
        let mut t = tail_before[tail_before.len().saturating_sub(need)..].to_vec();
        t.extend_from_slice(text);
        t
    };
    ReplayMark { source, len, lines, head: fnv1a(&head[..head.len().min(n)]), tail: fnv1a(&tail) }
}

/// `marks` with `mark` in place of its file's earlier one, most recent
/// last, at most [`MAX_SOURCES`].
pub fn remember(marks: &mut Vec<ReplayMark>, mark: ReplayMark) {
    marks.retain(|m| m.source != mark.source);
    marks.push(mark);
    while marks.len() > MAX_SOURCES {
        marks.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_round_trips_and_matches_its_windows() {
        let text = b"[ 1.0] one\n[ 2.0] two\n";
        let m = mark_after(source_key(b"/var/log/kern.log"), 0, 0, text, text, b"");
        assert_eq!((m.len, m.lines), (text.len() as u64, 2));
        assert_eq!(ReplayMark::parse(&m.render()).unwrap(), m);
        let [(h0, h1), (t0, t1)] = windows(&m, 100).unwrap();
        let grown = b"[ 1.0] one\n[ 2.0] two\n[ 3.0] three\n";
        assert!(m.matches(&grown[h0 as usize..h1 as usize], &grown[t0 as usize..t1 as usize]));
        let replaced = b"[ 9.0] new\n[ 9.1] file and more\n";
        assert!(!m.matches(&replaced[h0 as usize..h1 as usize], &replaced[t0 as usize..t1 as usize]));
        assert!(windows(&m, 3).is_none(), "shorter than the mark");
    }

    #[test]
    fn a_mark_after_a_short_read_takes_its_tail_from_before() {
        let first = vec![b'a'; 5000];
        let m1 = mark_after(7, 0, 0, &first[..4096], &first, b"");
        let more = b"b\n";
        let m2 = mark_after(7, m1.len, m1.lines, &first[..4096], more, &first);
        let mut all = first.clone();
        all.extend_from_slice(more);
        let whole = mark_after(7, 0, 0, &all[..4096], &all, b"");
        assert_eq!(m2, whole);
    }

    #[test]
    fn marks_are_bounded_and_replaced() {
        let mut marks = Vec::new();
        for i in 0..40 {
            remember(&mut marks, ReplayMark { source: i, len: 1, lines: 1, head: 0, tail: 0 });
        }
        assert_eq!(marks.len(), MAX_SOURCES);
        remember(&mut marks, ReplayMark { source: 39, len: 9, lines: 1, head: 0, tail: 0 });
        assert_eq!(marks.len(), MAX_SOURCES);
        assert_eq!(marks.last().unwrap().len, 9);
    }
}
