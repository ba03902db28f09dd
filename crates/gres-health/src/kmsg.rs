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

/// One XID line, as the driver wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidLine {
    /// The GPU's PCI bus id in the 13-character form (`0000:41:00.0`), when
    /// the line gave a valid one.
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

/// Find and parse the XID in a line of any form (a kmsg record's text, a
/// dmesg line with its `[ time]`, a syslog line with its host and `kernel:`).
pub fn parse_xid_text(line: &str) -> Option<XidLine> {
    const MARK: &str = "NVRM: Xid (";
    let at = line.find(MARK)?;
    let rest = &line[at + MARK.len()..];
    let (id, rest) = rest.split_once("):")?;
    let id = id.strip_prefix("PCI:").unwrap_or(id);
    let pci = normalize_pci(id);
    let rest = rest.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let code: u32 = rest[..digits].parse().ok()?;
    let mut rest = rest[digits..].trim_start_matches(',').trim_start();
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
        Finding::new(self.xid.fault(), gpu, source)
    }
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
                Format::Kmsg => parse_kmsg_record(text).and_then(|r| parse_xid_text(r.text).map(|xid| XidEvent { origin: Origin::Seq(r.seq), xid })),
                Format::Text => parse_xid_text(text).map(|xid| XidEvent { origin: Origin::Line { number: self.line_no, hash: fnv1a(text.as_bytes()) }, xid }),
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

    #[test]
    fn the_line_hash_is_stable() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
