//! `gres-rs health`'s inputs: the kernel-log reader (`XidReader`, both
//! formats) and the state file (`Cursor::parse`).
//!
//! Three checks on each input:
//! - the whole input as a log, in both formats, read whole and in small
//!   chunks: no panic, the same XIDs either way, each with a GPU;
//! - the input placed only where a local user controls a kernel message
//!   (a record written to `/dev/kmsg` from user space, a program's name
//!   and file name in a segfault record, as kmsg, dmesg and syslog lines)
//!   gives no XID, and placed in the driver's own line only in `name=`
//!   and the message it gives exactly the driver's XID and GPU.  Input:
//!   `<selector byte><comm: up to 15 bytes, to the first NUL><rest>`;
//!   newlines become spaces, as the kernel escapes them, so that each
//!   record stays one line;
//! - the whole input as a state file: no panic.
#![no_main]

use std::io::BufReader;

use gres_health::cursor::Cursor;
use gres_health::kmsg::{Format, XidEvent, XidReader, MAX_LINE};
use libfuzzer_sys::fuzz_target;

/// Every XID of `log`, read through a buffer of `chunk` bytes.
fn xids(log: &[u8], format: Format, chunk: usize) -> Vec<XidEvent> {
    let mut reader = XidReader::new(BufReader::with_capacity(chunk, log), format);
    reader.read_all().expect("reading memory does not fail")
}

/// `bytes` as the kernel would keep them in one record: no newline.
fn one_line(bytes: &[u8]) -> Vec<u8> {
    bytes.iter().map(|&b| if b == b'\n' { b' ' } else { b }).collect()
}

/// Build a log of one record from its pieces.
fn record(parts: &[&[u8]]) -> Vec<u8> {
    let mut out: Vec<u8> = parts.concat();
    out.push(b'\n');
    out
}

fuzz_target!(|data: &[u8]| {
    // The input as a log.
    let chunk = 1 + usize::from(data.first().copied().unwrap_or(0) % 64);
    for format in [Format::Kmsg, Format::Text] {
        let whole = xids(data, format, 8192);
        assert_eq!(whole, xids(data, format, chunk), "{format:?}: chunked reads differ");
        for e in &whole {
            assert!(e.xid.pci.is_some(), "an XID without a GPU: {e:?}");
            assert!(e.xid.code <= 99_999, "{e:?}");
        }
    }

    // The input only where a user controls a kernel message.
    let selector = data.first().copied().unwrap_or(0);
    let body = data.get(1..).unwrap_or_default();
    let comm_len = body.iter().take(15).position(|&b| b == 0).unwrap_or(body.len().min(15));
    let comm = one_line(&body[..comm_len]);
    let rest_start = (comm_len + 1).min(body.len());
    let rest = one_line(&body[rest_start..body.len().min(rest_start + MAX_LINE / 2)]);
    let any = one_line(&body[..body.len().min(MAX_LINE / 2)]);

    // Written to /dev/kmsg from user space: a facility other than the kernel's.
    let prio = [12u8, 13, 14, 8 + selector % 184][usize::from(selector % 4)];
    let user = record(&[format!("{prio},5,1000,-;").as_bytes(), &any]);
    assert_eq!(xids(&user, Format::Kmsg, 8192), [], "a user's /dev/kmsg record gave an XID");

    // Kernel messages that start with a program's name (comm, 15 bytes at
    // most) and may end with its file's name.
    let tails: [&[u8]; 4] = [
        b"[1234]: segfault at 0 ip 0000000000401000 sp 00007ffd00000000 error 6 in ",
        b"[1234] general protection fault ip:401000 sp:7ffd00000000 error:0 in ",
        b" (1234): drop_caches: 3 ",
        b": 13, pid=1, name=x, ",
    ];
    let tail = tails[usize::from(selector / 4 % 4)];
    let kernel_msg = [&comm[..], tail, &rest[..], &b"[400000+1000]"[..]].concat();
    let logs = [
        (Format::Kmsg, record(&[b"6,7,1000,-;", &kernel_msg])),
        (Format::Kmsg, record(&[b"4,7,1000,c,caller=T1234;", &kernel_msg])),
        (Format::Text, record(&[b"[  12.345678] ", &kernel_msg])),
        (Format::Text, record(&[b"<6>[  12.345678] ", &kernel_msg])),
        (Format::Text, record(&[b"[Mon May 18 19:02:39 2024] ", &kernel_msg])),
        (Format::Text, record(&[b"May 18 19:02:39 node17 kernel: ", &kernel_msg])),
        (Format::Text, record(&[b"2024-05-18T19:02:39.123456+02:00 node17 kernel: [   12.345678] ", &kernel_msg])),
        (Format::Text, record(&[&kernel_msg])),
    ];
    for (format, log) in &logs {
        let found = xids(log, *format, 8192);
        assert_eq!(found, [], "{format:?} {:?} gave an XID", String::from_utf8_lossy(log));
    }

    // The driver's own line: the user's name and text in `name=` and the
    // message only.
    let driver = [&b"NVRM: Xid (PCI:0000:41:00): 13, pid=1, name="[..], &comm[..], &b", "[..], &rest[..]].concat();
    let logs = [
        (Format::Kmsg, record(&[b"4,9,1000,-;", &driver])),
        (Format::Text, record(&[b"[  12.345678] ", &driver])),
        (Format::Text, record(&[b"May 18 19:02:39 node17 kernel: ", &driver])),
    ];
    for (format, log) in &logs {
        let found = xids(log, *format, 8192);
        assert_eq!(found.len(), 1, "{format:?} {:?}: {found:?}", String::from_utf8_lossy(log));
        assert_eq!((found[0].xid.code, found[0].xid.pci.as_deref()), (13, Some("0000:41:00.0")), "{found:?}");
        assert_eq!(found[0].xid.pid, Some(1));
    }

    // The input as a state file.
    let _ = Cursor::parse(&String::from_utf8_lossy(data));
});
