//! Where the kernel's log comes from: `/dev/kmsg` read to its end without
//! waiting, or a recorded log an admin replays (`--kmsg FILE`: `dmesg`
//! output or a copy of `/dev/kmsg` records), both bounded.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use gres_core::bounded_read::read_bounded;

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

/// A recorded log (`dmesg` output or saved `/dev/kmsg` records), a regular
/// file of at most [`MAX_LOG_BYTES`].
pub fn read_log_file(path: &Path) -> Result<String, String> {
    let bytes = read_bounded(path, MAX_LOG_BYTES).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
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
        // A FIFO is no recorded log.
        assert!(read_log_file(&fifo).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_recorded_log_is_read_whole() {
        let d = std::env::temp_dir().join(format!("gres-rs-kmsg-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("dmesg.txt");
        std::fs::write(&f, "[    1.0] one\n[    2.0] two\n").unwrap();
        assert_eq!(read_log_file(&f).unwrap().lines().count(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
