//! Where the kernel's log comes from: `/dev/kmsg` read to its end without
//! waiting, or a recorded log an admin replays (`--kmsg FILE`: `dmesg`
//! output, syslog's `kern.log` or a copy of `/dev/kmsg` records), read
//! from where the last run stopped ([`gres_health::replay`]), both
//! bounded.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use gres_health::replay::{self, ReplayMark, MAX_READ, WINDOW};

/// The most read of the kernel's log: the kernel's own buffer is at most
/// a few MiB (`log_buf_len`, 32 MiB at the very most).
pub const MAX_LOG_BYTES: u64 = 64 << 20;

/// One `/dev/kmsg` record is at most this long (the kernel's limit is 1 KiB
/// of text plus the header and dictionary).
const RECORD_BUF: usize = 8192;

/// The records of a `/dev/kmsg`-like device, oldest first, each on its own
/// line(s) as the kernel hands it over, read until there is no more
/// (never waiting: `O_NONBLOCK`).  A record the kernel overwrote while
/// being read (`EPIPE`) is skipped, as `dmesg` does.
pub fn read_kmsg_device(path: &Path) -> Result<String, String> {
    let mut f: File = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut out = String::new();
    let mut buf = vec![0u8; RECORD_BUF];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.push_str(&String::from_utf8_lossy(&buf[..n]));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                if out.len() as u64 >= MAX_LOG_BYTES {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        }
    }
    Ok(out)
}

/// The part of a replayed log to read now.
#[derive(Debug, Default)]
pub struct ReplayPart {
    /// Whole lines from `start` to the last newline (a line still being
    /// written is left for the next run).
    pub text: Vec<u8>,
    /// Lines before `start`, where known (for line numbers).
    pub lines_before: u64,
    /// The part continues what the last run read (the file grew at its
    /// end): every line of it is new.
    pub continues: bool,
    /// Bytes skipped because the new part was over [`MAX_READ`]: the
    /// newest [`MAX_READ`] bytes are read.
    pub skipped: u64,
    /// The file's mark after this part ([`replay::mark_after`]).
    pub mark: ReplayMark,
}

/// Read `len` bytes at `at`.
fn read_at(f: &mut File, at: u64, len: u64) -> std::io::Result<Vec<u8>> {
    f.seek(SeekFrom::Start(at))?;
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    f.by_ref().take(len).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Lines in `f`'s first `end` bytes, counted a block at a time; `None`
/// past a GiB (line numbers are then counted from the part read).
fn count_lines(f: &mut File, end: u64) -> Option<u64> {
    if end > 1 << 30 {
        return None;
    }
    f.seek(SeekFrom::Start(0)).ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut left, mut lines) = (end, 0u64);
    while left > 0 {
        let n = f.read(&mut buf[..usize::try_from(left.min(1 << 20)).ok()?]).ok()?;
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        left -= n as u64;
    }
    Some(lines)
}

/// The new part of the replayed log at `path` since `mark` (its last
/// run's), at most [`MAX_READ`] bytes: past the mark when the file only
/// grew, else the whole file.  Only a regular file is read, never a FIFO
/// or a device (`O_NONBLOCK`, then its type).
pub fn read_replay(path: &Path, mark: Option<&ReplayMark>) -> Result<ReplayPart, String> {
    let what = path.display();
    let mut f = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(|e| format!("cannot open {what}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("cannot read {what}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{what} is not a regular file"));
    }
    let len = meta.len();
    let source = replay::source_key(path.as_os_str().as_encoded_bytes());
    let io = |e: std::io::Error| format!("cannot read {what}: {e}");
    // Did the file only grow since the mark?
    let mut continued = None;
    if let Some(m) = mark.filter(|m| m.source == source) {
        if let Some([(h0, h1), (t0, t1)]) = replay::windows(m, len) {
            let head = read_at(&mut f, h0, h1 - h0).map_err(io)?;
            let tail = read_at(&mut f, t0, t1 - t0).map_err(io)?;
            if m.matches(&head, &tail) {
                continued = Some((m.len, m.lines, head, tail));
            }
        }
    }
    let continues = continued.is_some();
    let (mut start, mut lines_before, mut head, tail_before) = continued.unwrap_or((0, 0, Vec::new(), Vec::new()));
    let mut skipped = 0;
    if len - start > MAX_READ {
        skipped = len - MAX_READ - start;
        start = len - MAX_READ;
        lines_before = count_lines(&mut f, start).unwrap_or(0);
    }
    let mut text = read_at(&mut f, start, len - start).map_err(io)?;
    if skipped > 0 {
        // Begin at a whole line.
        let cut = text.iter().position(|b| *b == b'\n').map_or(text.len(), |i| i + 1);
        text.drain(..cut);
        start += cut as u64;
        skipped += cut as u64;
        lines_before += 1;
    }
    // Whole lines only.
    let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    text.truncate(whole);
    if head.is_empty() {
        head = if start == 0 { text[..text.len().min(WINDOW as usize)].to_vec() } else { read_at(&mut f, 0, WINDOW).map_err(io)? };
    }
    let tail_before = if continues || start == 0 { tail_before } else { read_at(&mut f, start.saturating_sub(WINDOW), start.min(WINDOW)).map_err(io)? };
    let mark = replay::mark_after(source, start, lines_before, &head, &text, &tail_before);
    Ok(ReplayPart { text, lines_before, continues, skipped, mark })
}

/// The boot's time, seconds since the epoch (`btime` of `/proc/stat`);
/// `None` where the kernel does not say.
pub fn boot_time() -> Option<u64> {
    let bytes = gres_core::bounded_read::read_bounded(Path::new("/proc/stat"), 1 << 20).ok()?;
    String::from_utf8_lossy(&bytes).lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_with_no_writer_is_read_without_waiting() {
        // A FIFO opened O_NONBLOCK with no writer reads as at its end at
        // once: the reader never waits, as on a quiet /dev/kmsg.
        let d = std::env::temp_dir().join(format!("gres-rs-kmsg-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fifo = d.join("kmsg");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(read_kmsg_device(&fifo), Ok(String::new()));
        assert!(read_kmsg_device(&d.join("missing")).unwrap_err().starts_with("cannot open"));
        // A FIFO is no recorded log, and is not waited on.
        assert!(read_replay(&fifo, None).unwrap_err().contains("not a regular file"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_replayed_log_is_read_from_its_mark_while_it_only_grows() {
        let d = std::env::temp_dir().join(format!("gres-rs-kmsg-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("dmesg.txt");
        std::fs::write(&f, "[    1.0] one\n[    2.0] two\n[    3.0] half").unwrap();
        let first = read_replay(&f, None).unwrap();
        assert_eq!((first.text.as_slice(), first.continues), (&b"[    1.0] one\n[    2.0] two\n"[..], false));
        assert_eq!(first.mark.lines, 2);
        // It grows: only the new whole lines, numbered after the old.
        std::fs::write(&f, "[    1.0] one\n[    2.0] two\n[    3.0] half done\n").unwrap();
        let second = read_replay(&f, Some(&first.mark)).unwrap();
        assert_eq!((second.text.as_slice(), second.continues, second.lines_before), (&b"[    3.0] half done\n"[..], true, 2));
        // Replaced (rotated): read whole again.
        std::fs::write(&f, "[    9.0] new boot\n").unwrap();
        let third = read_replay(&f, Some(&second.mark)).unwrap();
        assert_eq!((third.text.as_slice(), third.continues), (&b"[    9.0] new boot\n"[..], false));
        // Same length, other text: not a continuation.
        std::fs::write(&f, "[    9.0] new boat\n").unwrap();
        assert!(!read_replay(&f, Some(&third.mark)).unwrap().continues);
        assert!(read_replay(&d, None).unwrap_err().contains("not a regular file"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_new_part_over_the_limit_is_read_from_its_end() {
        let d = std::env::temp_dir().join(format!("gres-rs-kmsg-big-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("kern.log");
        let line = "[ 1.0] filler line of a big log\n";
        let n = (MAX_READ as usize / line.len()) + 1000;
        let mut text = line.repeat(n);
        text.push_str("[ 2.0] NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus.\n");
        std::fs::write(&f, &text).unwrap();
        let part = read_replay(&f, None).unwrap();
        assert!(part.skipped > 0 && part.text.len() as u64 <= MAX_READ, "{} {}", part.skipped, part.text.len());
        assert!(part.text.starts_with(b"[ 1.0] filler") && part.text.ends_with(b"off the bus.\n"));
        assert_eq!(part.mark.len, text.len() as u64);
        assert_eq!(part.lines_before + part.text.iter().filter(|b| **b == b'\n').count() as u64, n as u64 + 1);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
