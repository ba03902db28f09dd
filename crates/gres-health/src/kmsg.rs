//! The kernel log's XID lines.  Two forms: `/dev/kmsg` records
//! (`<prio>,<seq>,<usec>,<flags>[,...];<text>`, followed by continuation
//! lines that start with a space: `key=value` dictionary lines to skip) and
//! text lines as dmesg or syslog print them
//! (`[  123.456789] NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python,
//! GPU has fallen off the bus.`).  The driver writes the XID line as
//! `NVRM: Xid (PCI:<bus id>): <xid>, pid=<pid>, name=<name>, <message>`;
//! older drivers omit `PCI:` or `pid=`/`name=`, newer ones write
//! `pid='<unknown>'`.  [`XidReader`] reads any `BufRead`, bounds each line to
//! [`MAX_LINE`] bytes and yields each XID with its origin.
//!
//! The check runs as root and drains nodes on what it reads here, and a
//! local user controls parts of many kernel messages (a program's name in
//! `comm[pid]: segfault ... in <file>`, text written to `/dev/kmsg` from
//! user space).  So an XID counts only where the driver writes one: the
//! kernel's text of a record starts with `NVRM: Xid (`, a `/dev/kmsg`
//! record has the kernel's facility, and the bus id and XID number are
//! parsed strictly.  The process name and the message are only described,
//! never acted on.

use std::io::{self, BufRead};

use crate::fault::{Fault, Finding, GpuRef, Source};

/// The longest line read; a longer one is skipped and counted.
pub const MAX_LINE: usize = 8 * 1024;

/// One `/dev/kmsg` record's header and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsgRecord<'a> {
    /// Syslog priority and facility (`prio & 7` is the level).
    pub prio: u32,
    /// The kernel's sequence number.
    pub seq: u64,
    /// Microseconds since boot.
    pub usec: u64,
    /// The message.
    pub text: &'a str,
}

/// Parse one `/dev/kmsg` record; `None` for a continuation line or anything
/// that is not a record.
pub fn parse_kmsg_record(line: &str) -> Option<KmsgRecord<'_>> {
    if line.starts_with(' ') {
        return None;
    }
    let (header, text) = line.split_once(';')?;
    let mut fields = header.split(',');
    let prio = fields.next()?.parse().ok()?;
    let seq = fields.next()?.parse().ok()?;
    let usec = fields.next()?.parse().ok()?;
    Some(KmsgRecord { prio, seq, usec, text: text.trim_end_matches(['\n', '\r']) })
}

impl KmsgRecord<'_> {
    /// Whether the kernel itself logged this record: facility 0
    /// (`prio >> 3`).  The kernel gives a record written to `/dev/kmsg`
    /// from user space a non-zero facility (printk.c `devkmsg_write`:
    /// `LOG_USER` by default, and a `<N>` prefix with facility 0 keeps it).
    pub fn is_kernel(&self) -> bool {
        self.prio >> 3 == 0
    }
}

/// One XID line, as the driver wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidLine {
    /// The GPU's PCI bus id in the 13-character form (`0000:41:00.0`).
    /// Always set by [`parse_xid_text`]: a line without a valid one is no
    /// XID.
    pub pci: Option<String>,
    /// The XID number.
    pub code: u32,
    /// The process id, when the driver knew it.
    pub pid: Option<u32>,
    /// The process name, when the driver knew it.
    pub process: Option<String>,
    /// The rest of the line.
    pub message: String,
}

impl XidLine {
    /// This XID as a fault.
    pub fn fault(&self) -> Fault {
        Fault::Xid { code: self.code, pid: self.pid, process: self.process.clone(), message: self.message.clone() }
    }
}

/// Normalize a PCI bus id to `dddd:bb:dd.f`, lower case: `0000:41:00` and
/// `41:00` become `0000:41:00.0`.  `None` if it is not one.
pub fn normalize_pci(id: &str) -> Option<String> {
    let id = id.trim().to_ascii_lowercase();
    let (body, func) = match id.rsplit_once('.') {
        Some((b, f)) => (b, f),
        None => (id.as_str(), "0"),
    };
    let parts: Vec<&str> = body.split(':').collect();
    let (domain, bus, dev) = match parts.as_slice() {
        [d, b, v] => (*d, *b, *v),
        [b, v] => ("0000", *b, *v),
        _ => return None,
    };
    let hex = |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.bytes().all(|c| c.is_ascii_hexdigit());
    if !hex(domain, 8) || !hex(bus, 2) || !hex(dev, 2) || !hex(func, 1) {
        return None;
    }
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let dev = u8::from_str_radix(dev, 16).ok()?;
    let func = u8::from_str_radix(func, 16).ok()?;
    if dev > 0x1f || func > 7 {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// What starts the driver's XID line.
pub const MARK: &str = "NVRM: Xid (";

/// The longest bus id between `(` and `):` (`PCI:` and an id with an
/// 8-digit domain and a function fit).
const MAX_ID: usize = 24;

/// The most digits of an XID number.
const MAX_CODE_DIGITS: usize = 5;

/// The longest syslog prefix before ` kernel: ` (timestamp and host).
const MAX_SYSLOG_PREFIX: usize = 80;

/// The longest `dmesg -T` date between the brackets.
const MAX_DMESG_DATE: usize = 64;

/// The kernel's text of one replayed log line, without the one prefix
/// that dmesg or syslog put before it; `None` if the line has no prefix
/// we know and does not start with [`MARK`] either.  The prefixes:
///
/// - `[  123.456789] ` (dmesg), also after `<N>` with facility 0
///   (`dmesg -r`);
/// - `[Mon May 18 19:02:39 2024] ` (`dmesg -T`): letters, digits, spaces,
///   `:.,-` and a time between the brackets;
/// - `<timestamp> <host> kernel: ` (syslog, `journalctl`), optionally
///   followed by `[ 123.456789] `: the part before ` kernel: ` is at most
///   80 bytes, has no `": "`, a host of letters, digits and `._-`, and a
///   timestamp of letters, digits, spaces and `:.,+-` that holds a time
///   (`May 18 19:02:39`, `2024-05-18T19:02:39.123456+02:00`).
///
/// Each form ends exactly where the kernel's text begins.  The rules are
/// narrow so that no kernel message can pass for a prefix with text a user
/// controls after it: the kernel's words before such text have `": "`,
/// brackets, quotes or slashes in them (`comm[pid]: segfault ...`,
/// `process '/path' started ...`).  A syslog line only says which program
/// logged it: a user's `logger -t kernel` looks the same.  Replay
/// `journalctl -k` (the kernel's transport only) or dmesg, not a whole
/// syslog file, where local users may log.
pub fn kernel_text(line: &str) -> Option<&str> {
    if line.starts_with(MARK) {
        return Some(line);
    }
    if line.starts_with(['[', '<']) {
        return dmesg_text(line);
    }
    let at = line.find(" kernel: ")?;
    let (prefix, text) = (&line[..at], &line[at + " kernel: ".len()..]);
    if !syslog_prefix(prefix) {
        return None;
    }
    Some(strip_uptime(text).unwrap_or(text))
}

/// A dmesg line's text: after `[ sec.usec] ` (with an optional `<N>` of
/// facility 0 before it) or `[<date>] `.
fn dmesg_text(line: &str) -> Option<&str> {
    if let Some(rest) = line.strip_prefix('<') {
        let (prio, rest) = rest.split_once('>')?;
        let kernel = (1..=3).contains(&prio.len()) && prio.bytes().all(|b| b.is_ascii_digit()) && prio.parse::<u32>().ok()? >> 3 == 0;
        return if kernel { strip_uptime(rest) } else { None };
    }
    if let Some(text) = strip_uptime(line) {
        return Some(text);
    }
    let (date, text) = line.strip_prefix('[')?.split_once("] ")?;
    let date_ok = date.len() <= MAX_DMESG_DATE && date.chars().all(|c| c.is_alphanumeric() || matches!(c, ' ' | ':' | '.' | ',' | '-')) && has_time(date);
    date_ok.then_some(text)
}

/// The text after a kernel timestamp `[  123.456789] `; `None` if the
/// line does not start with one.
fn strip_uptime(line: &str) -> Option<&str> {
    let (stamp, text) = line.strip_prefix('[')?.split_once("] ")?;
    let (secs, usecs) = stamp.trim_start_matches(' ').split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(secs) && digits(usecs)).then_some(text)
}

/// Whether `prefix` is a syslog line's `<timestamp> <host>`.
fn syslog_prefix(prefix: &str) -> bool {
    if prefix.len() > MAX_SYSLOG_PREFIX || prefix.contains(": ") {
        return false;
    }
    let Some((stamp, host)) = prefix.rsplit_once(' ') else {
        return false;
    };
    let host_ok = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let stamp_ok = stamp.starts_with(|c: char| c.is_ascii_alphanumeric())
        && stamp.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b' ' | b':' | b'.' | b',' | b'+' | b'-'))
        && has_time(stamp);
    host_ok && stamp_ok
}

/// Whether `s` holds a time of day, `h:mm:ss`.
fn has_time(s: &str) -> bool {
    s.as_bytes().windows(7).any(|w| {
        let d = |i: usize| w[i].is_ascii_digit();
        d(0) && w[1] == b':' && d(2) && d(3) && w[4] == b':' && d(5) && d(6)
    })
}

/// Parse the driver's XID line.  `text` is the kernel's text of one record
/// (a `/dev/kmsg` record's text, or [`kernel_text`] of a replayed line)
/// and must start with `NVRM: Xid (`.  Then, strictly: the driver's PCI
/// bus id (`PCI:0000:41:00` or `0000:41:00`), `):`, spaces, the XID number
/// (at most 5 digits), then `,` or the end; anything else is no XID.  The
/// code and the GPU are read before any text a process controls.  What
/// follows is only described, never acted on: `pid=`, `name=` (the
/// process's comm, up to 15 bytes of anything, split at its first `", "`)
/// and the message.
pub fn parse_xid_text(text: &str) -> Option<XidLine> {
    let rest = text.strip_prefix(MARK)?;
    let close = rest.bytes().take(MAX_ID + 1).position(|b| b == b')')?;
    let id = &rest[..close];
    let rest = rest[close + 1..].strip_prefix(':')?;
    let pci = Some(driver_bus_id(id)?);
    let rest = rest.trim_start_matches(' ');
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > MAX_CODE_DIGITS {
        return None;
    }
    let code: u32 = rest[..digits].parse().ok()?;
    let rest = &rest[digits..];
    let mut rest = match rest.strip_prefix(',') {
        Some(after) => after.trim_start(),
        None if rest.trim_end().is_empty() => "",
        None => return None,
    };
    let mut pid = None;
    let mut process = None;
    if let Some(after) = rest.strip_prefix("pid=") {
        let (value, tail) = split_field(after);
        pid = value.trim_matches('\'').parse().ok();
        rest = tail;
        if let Some(after) = rest.strip_prefix("name=") {
            let (value, tail) = split_field(after);
            let value = value.trim_matches('\'');
            if !value.is_empty() && value != "<unknown>" {
                process = Some(value.to_owned());
            }
            rest = tail;
        }
    }
    Some(XidLine { pci, code, pid, process, message: rest.trim_end().to_owned() })
}

/// The bus id as the driver prints it (`PCI:%04x:%02x:%02x`, older drivers
/// without `PCI:`), normalized.  The whole form, not any id that
/// [`normalize_pci`] takes: a shorter one (`0:0`) would let a process
/// name of 15 bytes (`NVRM: Xid (0:0)`) start a kernel message
/// `<comm>: <number>` that reads as an XID.
fn driver_bus_id(id: &str) -> Option<String> {
    let id = id.strip_prefix("PCI:").unwrap_or(id);
    let (body, func) = match id.split_once('.') {
        Some((b, f)) => (b, Some(f)),
        None => (id, None),
    };
    let mut parts = body.split(':');
    let (domain, bus, dev) = (parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let shape = parts.next().is_none()
        && (4..=8).contains(&domain.len())
        && bus.len() == 2
        && dev.len() == 2
        && func.is_none_or(|f| f.len() == 1)
        && hex(domain)
        && hex(bus)
        && hex(dev)
        && func.is_none_or(hex);
    if !shape {
        return None;
    }
    normalize_pci(id)
}

/// Split `value, rest` at the first `", "`; a value with no comma after it
/// is the whole line.
fn split_field(s: &str) -> (&str, &str) {
    match s.split_once(", ") {
        Some((v, rest)) => (v, rest.trim_start()),
        None => (s.trim_end_matches(','), ""),
    }
}

/// Which form the reader expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `/dev/kmsg` records.
    Kmsg,
    /// dmesg or syslog text lines.
    Text,
}

/// Where an XID was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A `/dev/kmsg` record's sequence number.
    Seq(u64),
    /// A text line: its number and the FNV-1a hash of its bytes (the same
    /// line in a replayed file hashes the same).
    Line {
        /// 1-based line number.
        number: u64,
        /// FNV-1a 64 of the line.
        hash: u64,
    },
}

/// One XID read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidEvent {
    /// Where it was read.
    pub origin: Origin,
    /// What the line said.
    pub xid: XidLine,
    /// Microseconds since the boot, where the record (`/dev/kmsg`) or
    /// the line (dmesg's `[ sec.usec]`) says.
    pub usec: Option<u64>,
}

impl XidEvent {
    /// This event as a finding (the GPU known by its PCI bus id only; the
    /// tool fills in index and UUID from NVML).
    pub fn finding(&self) -> Finding {
        let gpu = self.xid.pci.clone().map(GpuRef::pci).unwrap_or_default();
        let source = match self.origin {
            Origin::Seq(seq) => Source::Kmsg { seq },
            Origin::Line { number, .. } => Source::LogFile { line: number },
        };
        let mut f = Finding::new(self.xid.fault(), gpu, source);
        f.uptime_usec = self.usec;
        f
    }
}

/// The microseconds since boot of a dmesg line's `[ sec.usec]` stamp.
pub fn dmesg_usec(line: &str) -> Option<u64> {
    let line = match line.strip_prefix('<') {
        Some(r) => r.split_once('>')?.1,
        None => line,
    };
    let (stamp, _) = line.strip_prefix('[')?.split_once(']')?;
    let (secs, frac) = stamp.trim_start_matches(' ').split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 12 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || !digits(frac) {
        return None;
    }
    let frac6: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
    secs.parse::<u64>().ok()?.checked_mul(1_000_000)?.checked_add(frac6.parse().ok()?)
}

/// FNV-1a, 64 bits: stable across runs and builds (std's hasher is not).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Reads XIDs from a kernel log, one bounded line at a time.
#[derive(Debug)]
pub struct XidReader<R> {
    input: R,
    format: Format,
    line_no: u64,
    long_lines: u64,
    lost_records: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> XidReader<R> {
    /// A reader of `format` over `input`.
    pub fn new(input: R, format: Format) -> Self {
        XidReader { input, format, line_no: 0, long_lines: 0, lost_records: 0, buf: Vec::with_capacity(1024) }
    }

    /// Lines skipped for being over [`MAX_LINE`].
    pub fn long_lines(&self) -> u64 {
        self.long_lines
    }

    /// Times `/dev/kmsg` said records were overwritten before we read them
    /// (`EPIPE`).
    pub fn lost_records(&self) -> u64 {
        self.lost_records
    }

    /// Read one line into `buf`, at most [`MAX_LINE`] bytes kept.
    /// `Ok(None)` at the end; `Ok(Some(false))` for a line too long.
    fn read_line(&mut self) -> io::Result<Option<bool>> {
        self.buf.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => &[],
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                    self.lost_records += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(any.then_some(!too_long));
            }
            any = true;
            let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if !too_long {
                let room = MAX_LINE + 1 - self.buf.len().min(MAX_LINE + 1);
                self.buf.extend_from_slice(&chunk[..take.min(room)]);
                let len = self.buf.len() - usize::from(self.buf.last() == Some(&b'\n'));
                if len > MAX_LINE {
                    too_long = true;
                    self.buf.clear();
                }
            }
            self.input.consume(take);
            if done {
                return Ok(Some(!too_long));
            }
        }
    }

    /// The next XID, skipping every other line.
    pub fn next_xid(&mut self) -> io::Result<Option<XidEvent>> {
        while let Some(fits) = self.read_line()? {
            self.line_no += 1;
            if !fits {
                self.long_lines += 1;
                continue;
            }
            let text = String::from_utf8_lossy(&self.buf);
            let text = text.trim_end_matches(['\n', '\r']);
            let event = match self.format {
                Format::Kmsg => parse_kmsg_record(text)
                    .filter(KmsgRecord::is_kernel)
                    .and_then(|r| parse_xid_text(r.text).map(|xid| XidEvent { origin: Origin::Seq(r.seq), xid, usec: Some(r.usec) })),
                Format::Text => kernel_text(text).and_then(parse_xid_text).map(|xid| XidEvent {
                    origin: Origin::Line { number: self.line_no, hash: fnv1a(text.as_bytes()) },
                    xid,
                    usec: dmesg_usec(text),
                }),
            };
            if event.is_some() {
                return Ok(event);
            }
        }
        Ok(None)
    }

    /// Every XID to the end of the input.
    pub fn read_all(&mut self) -> io::Result<Vec<XidEvent>> {
        let mut all = Vec::new();
        while let Some(e) = self.next_xid()? {
            all.push(e);
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    const KMSG: &str = "\
6,1021,5123456789,-;nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver
4,1022,5234567890,-;NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python, GPU has fallen off the bus.
 SUBSYSTEM=pci
 DEVICE=+pci:0000:41:00.0
4,1023,5234567999,-;NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.
4,1030,6000000000,-;NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 0, SM 1): Out Of Range Address
4,1031,6000000100,c;NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
";

    #[test]
    fn kmsg_records_yield_xids_with_their_seq() {
        let mut r = XidReader::new(Cursor::new(KMSG), Format::Kmsg);
        let all = r.read_all().unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].origin, Origin::Seq(1022));
        assert_eq!(all[0].xid.code, 79);
        assert_eq!(all[0].xid.pci.as_deref(), Some("0000:41:00.0"));
        assert_eq!(all[0].xid.pid, Some(1234));
        assert_eq!(all[0].xid.process.as_deref(), Some("python"));
        assert_eq!(all[0].xid.message, "GPU has fallen off the bus.");
        // pid='<unknown>': neither pid nor name, the message intact.
        assert_eq!(all[1].xid.code, 13);
        assert_eq!(all[1].xid.pid, None);
        assert_eq!(all[1].xid.process, None);
        assert!(all[1].xid.message.starts_with("Graphics SM Warp Exception on (GPC 7, TPC 0"));
        assert_eq!(all[1].xid.pci.as_deref(), Some("0000:cb:00.0"));
        // The newer form without pid= or name=.
        assert_eq!(all[2].xid.code, 79);
        assert_eq!(all[2].xid.pid, None);
        assert_eq!(all[2].xid.message, "GPU has fallen off the bus.");
        assert_eq!(r.long_lines(), 0);
    }

    #[test]
    fn continuation_lines_are_not_records() {
        assert!(parse_kmsg_record(" SUBSYSTEM=pci").is_none());
        let rec = parse_kmsg_record("4,77,123,-,caller=T12;hello").unwrap();
        assert_eq!((rec.prio, rec.seq, rec.usec, rec.text), (4, 77, 123, "hello"));
        assert!(parse_kmsg_record("no header here").is_none());
    }

    #[test]
    fn dmesg_and_syslog_lines_yield_xids_with_their_line() {
        let text = "\
[  123.456789] NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python, GPU has fallen off the bus.
[  124.000001] usb 1-1: new high-speed USB device
May 18 19:02:39 node17 kernel: NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.
[ 5107.644336] NVRM: Xid (0000:03:00): 3, C 00000005 SC 00000007
";
        let mut r = XidReader::new(Cursor::new(text), Format::Text);
        let all = r.read_all().unwrap();
        assert_eq!(all.len(), 3);
        assert!(matches!(all[0].origin, Origin::Line { number: 1, .. }));
        assert!(matches!(all[1].origin, Origin::Line { number: 3, .. }));
        assert_eq!(all[1].xid.code, 63);
        assert_eq!(all[1].xid.pid, Some(1896));
        assert_eq!(all[1].xid.process, None);
        assert_eq!(all[1].xid.message, "Row Remapper: New row marked for remapping, reset gpu to activate.");
        assert_eq!(all[1].xid.pci.as_deref(), Some("0000:10:1c.0"));
        // Old drivers: no "PCI:" prefix.
        assert_eq!(all[2].xid.pci.as_deref(), Some("0000:03:00.0"));
        assert_eq!(all[2].xid.code, 3);
        let f = all[0].finding();
        assert_eq!(f.source, Source::LogFile { line: 1 });
        assert_eq!(f.gpu.pci.as_deref(), Some("0000:41:00.0"));
    }

    #[test]
    fn quoted_na_pid_is_no_pid() {
        let x = parse_xid_text("NVRM: Xid (PCI:0000:65:00): 119, pid='N/A', Timeout waiting for RPC from GSP").unwrap();
        assert_eq!((x.code, x.pid), (119, None));
        assert_eq!(x.message, "Timeout waiting for RPC from GSP");
        let x = parse_xid_text("NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.").unwrap();
        assert_eq!(x.process.as_deref(), Some("nvc:[driver]"));
    }

    #[test]
    fn pci_ids_are_normalized_or_refused() {
        assert_eq!(normalize_pci("0000:41:00").as_deref(), Some("0000:41:00.0"));
        assert_eq!(normalize_pci("41:00").as_deref(), Some("0000:41:00.0"));
        assert_eq!(normalize_pci("00000000:41:00.0").as_deref(), Some("0000:41:00.0"));
        assert_eq!(normalize_pci("0000:CB:00.1").as_deref(), Some("0000:cb:00.1"));
        assert_eq!(normalize_pci("GPU-abc"), None);
        assert_eq!(normalize_pci("0000:41:40.0"), None);
        assert_eq!(normalize_pci("0000:41:00.9"), None);
    }

    #[test]
    fn not_an_xid_line() {
        assert!(parse_xid_text("NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.").is_none());
        assert!(parse_xid_text("NVRM: Xid (PCI:0000:41:00): , nothing").is_none());
    }

    #[test]
    fn a_line_over_8_kib_is_skipped_and_counted() {
        let long = format!("[ 1.0] NVRM: Xid (PCI:0000:41:00): 79, {}\n", "x".repeat(MAX_LINE));
        let text = format!("{long}[ 2.0] NVRM: Xid (PCI:0000:42:00): 48, pid=7, name=a, DBE\n");
        // A tiny buffer makes the reader assemble lines from many chunks.
        let input = io::BufReader::with_capacity(16, Cursor::new(text));
        let mut r = XidReader::new(input, Format::Text);
        let all = r.read_all().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].xid.code, 48);
        assert!(matches!(all[0].origin, Origin::Line { number: 2, .. }));
        assert_eq!(r.long_lines(), 1);
    }

    /// The kernel's record for a program named like an XID line that
    /// segfaults (`%s[%d]: segfault at ... in %s[...]`, the file's name
    /// last); reproduced on a node, it drained GPU 0 for a DBE.
    const SEGFAULT: &str =
        "job[30268]: segfault at 0 ip 00007f0000001000 sp 00007ffd00000000 error 6 in NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=x, DBE[400000+1000]";

    fn text_xids(text: &str) -> Vec<XidEvent> {
        XidReader::new(Cursor::new(text), Format::Text).read_all().unwrap()
    }

    fn kmsg_xids(text: &str) -> Vec<XidEvent> {
        XidReader::new(Cursor::new(text), Format::Kmsg).read_all().unwrap()
    }

    #[test]
    fn a_file_name_in_a_segfault_record_is_no_xid() {
        assert_eq!(kmsg_xids(&format!("6,5,100,-;{SEGFAULT}\n")), []);
        assert_eq!(text_xids(&format!("[  12.345678] {SEGFAULT}\n")), []);
        assert_eq!(text_xids(&format!("May 18 19:02:39 node17 kernel: {SEGFAULT}\n")), []);
        assert_eq!(parse_xid_text(SEGFAULT), None);
    }

    #[test]
    fn a_record_written_from_user_space_is_no_xid() {
        // prio 12: facility 1 (user), level 4; 14 and 13 too.
        for prio in [12, 13, 14, 8, 191] {
            let rec = format!("{prio},5,100,-;NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, GPU has fallen off the bus.\n");
            assert_eq!(kmsg_xids(&rec), [], "{rec}");
        }
        assert_eq!(kmsg_xids("4,5,100,-;NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, GPU has fallen off the bus.\n").len(), 1);
        // dmesg -r prints the record's prio before the time.
        assert_eq!(text_xids("<12>[  12.345678] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y\n"), []);
        let all = text_xids("<4>[  12.345678] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y\n");
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].xid.code, 79);
    }

    #[test]
    fn a_process_name_that_starts_a_kernel_message_is_no_xid() {
        // comm is at most 15 bytes, then the kernel's own words.
        let lines = [
            "NVRM: Xid (0:0)[30268]: segfault at 0 ip 0000000000401000 sp 00007ffd00000000 error 6 in x): 79, y[400000+1000]",
            // A message `%s: %d` after a 15-byte comm with a short bus id.
            "NVRM: Xid (0:0): 13",
            "NVRM: Xid (0:0): 13, pid=1, name=x, y",
        ];
        for line in lines {
            assert_eq!(kmsg_xids(&format!("6,5,100,-;{line}\n")), [], "{line}");
            assert_eq!(text_xids(&format!("[  1.000000] {line}\n")), [], "{line}");
        }
    }

    #[test]
    fn the_bus_id_and_number_are_parsed_strictly() {
        for text in [
            "NVRM: Xid (GPU-abc): 79, x",
            "NVRM: Xid (): 79",
            "NVRM: Xid (PCI:0000:41:00) : 79",
            "NVRM: Xid (PCI:0000:41:00): 79x, y",
            "NVRM: Xid (PCI:0000:41:00): 123456, y",
            "NVRM: Xid (PCI:0000:41:00): -1, y",
            "NVRM: Xid (PCI:0000:41:0): 79, y",
            "NVRM: Xid (PCI:41:00): 79, y",
            "NVRM: Xid (PCI:0000:41:00:00): 79, y",
            " NVRM: Xid (PCI:0000:41:00): 79, y",
            "x NVRM: Xid (PCI:0000:41:00): 79, y",
        ] {
            assert_eq!(parse_xid_text(text), None, "{text}");
        }
        let x = parse_xid_text("NVRM: Xid (PCI:0000:41:00): 79").unwrap();
        assert_eq!((x.code, x.pci.as_deref(), x.message.as_str()), (79, Some("0000:41:00.0"), ""));
        let x = parse_xid_text("NVRM: Xid (PCI:10000:01:00.1):  31, y").unwrap();
        assert_eq!((x.code, x.pci.as_deref()), (31, Some("10000:01:00.1")));
    }

    #[test]
    fn a_name_with_commas_changes_neither_code_nor_gpu() {
        let x = parse_xid_text("NVRM: Xid (PCI:0000:41:00): 13, pid=1, name=a, pid=2, name=y, Graphics Exception").unwrap();
        assert_eq!((x.code, x.pci.as_deref(), x.pid), (13, Some("0000:41:00.0"), Some(1)));
        assert_eq!(x.process.as_deref(), Some("a"));
        assert_eq!(x.message, "pid=2, name=y, Graphics Exception");
        let x = parse_xid_text("NVRM: Xid (PCI:0000:41:00): 13, pid=1, name=NVRM: Xid (PCI:0000:18:00): 48, DBE").unwrap();
        assert_eq!((x.code, x.pci.as_deref()), (13, Some("0000:41:00.0")));
    }

    #[test]
    fn syslog_and_journal_lines_yield_xids_after_kernel() {
        let lines = [
            "May 18 19:02:39 node17 kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, GPU has fallen off the bus.",
            "Dec  4 20:00:00 node17 kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "May 18 19:02:39 node17 kernel: [  123.456789] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "2024-05-18T19:02:39.123456+02:00 node17 kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "2024-05-18T19:02:39+0200 node-17.example.org kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "Sat 2024-05-18 19:02:39 CEST node17 kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "[Mon May 18 19:02:39 2024] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
        ];
        for line in lines {
            let all = text_xids(&format!("{line}\n"));
            assert_eq!(all.len(), 1, "{line}");
            assert_eq!((all[0].xid.code, all[0].xid.pci.as_deref()), (79, Some("0000:41:00.0")), "{line}");
        }
    }

    #[test]
    fn the_mark_after_other_text_is_no_xid() {
        let lines = [
            "May 18 19:02:39 node17 kernel: audit: type=1400 NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "May 18 19:02:39 node17 kernel:  NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "May 18 19:02:39 node17 kernel: [  1.0] x NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            // A program's own syslog tag before "kernel:".
            "May 18 19:02:39 node17 job[12]: kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            // A file name with no ": " before it (`process '%s' started with executable stack`).
            "[  1.000000] process '/tmp/a kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y' started with executable stack",
            "process '/tmp/a kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y' started with executable stack",
            "job 12 kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y",
            "[  1.000000] NVRM: GPU at PCI:0000:41:00: NVRM: Xid (PCI:0000:41:00): 79, y",
            "[  1.000000]NVRM: Xid (PCI:0000:41:00): 79, y",
            "[ab 12:00:00 <x>] NVRM: Xid (PCI:0000:41:00): 79, y",
            "<4>NVRM: Xid (PCI:0000:41:00): 79, y",
        ];
        for line in lines {
            assert_eq!(text_xids(&format!("{line}\n")), [], "{line}");
        }
        let long = format!("May 18 19:02:39 {} kernel: NVRM: Xid (PCI:0000:41:00): 79, y\n", "n".repeat(70));
        assert_eq!(text_xids(&long), []);
    }

    #[test]
    fn the_line_hash_is_stable() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
