//! Reading the files a configuration names, with a bound.
//!
//! slurmd runs as root and reads files that a path in a configuration, or a
//! symbolic link where a configuration file should be, may point anywhere:
//! `/dev/zero` never ends, a FIFO blocks whoever opens it until a writer
//! comes, a sparse file claims gigabytes it does not hold.  [`read_bounded`]
//! reads only regular files, never blocks, and reads at most a given number
//! of bytes; what it refuses it says why, for the caller to report with the
//! file's name.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use thiserror::Error;

/// The most read of one configuration-like file: no real gres.conf,
/// slurm.conf, fake_gpus.conf or mig-minors comes near it.
pub const MAX_FILE_LEN: u64 = 16 << 20;

/// What a path is when it is not a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
    /// Anything else that is not a regular file.
    Other,
}

impl FileKind {
    /// The kind of a file type; `None` for a regular file.
    pub fn of(t: FileType) -> Option<FileKind> {
        let kind = if t.is_file() {
            return None;
        } else if t.is_dir() {
            FileKind::Directory
        } else if t.is_char_device() {
            FileKind::CharDevice
        } else if t.is_block_device() {
            FileKind::BlockDevice
        } else if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_socket() {
            FileKind::Socket
        } else {
            FileKind::Other
        };
        Some(kind)
    }

    /// "a directory", "a character device", ...
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Directory => "a directory",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Fifo => "a FIFO",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a regular file",
        }
    }
}

/// Why [`read_bounded`] read nothing.  The message is the reason alone;
/// the caller names the file.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The file could not be looked at, opened or read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a regular file (after following symbolic links): not opened,
    /// or opened without blocking and not read.
    #[error("{}, not a regular file", .0.describe())]
    NotRegular(FileKind),
    /// More than `limit` bytes: `size` is the size the file claims, when
    /// that is already too large (else it grew, or claims less than it
    /// holds, as files of /proc do).
    #[error("{}", too_large(*.size, *.limit))]
    TooLarge { size: Option<u64>, limit: u64 },
}

fn too_large(size: Option<u64>, limit: u64) -> String {
    match size {
        Some(size) => format!("{size} bytes, more than the {limit} read"),
        None => format!("more than the {limit} bytes read"),
    }
}

impl ReadError {
    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// The contents of the regular file `path` (symbolic links followed), at
/// most `limit` bytes of it.
///
/// A path that is not a regular file is refused before it is opened (a
/// device's `open()` may do something); the file is then opened with
/// `O_NONBLOCK | O_NOCTTY` and looked at again, so that one replaced by a
/// FIFO in between does not block either.  A file that claims more than
/// `limit` bytes is not read; one that holds more than it claims is read
/// up to `limit + 1` bytes, then refused.  Files of size 0 are read (those
/// of /proc claim 0 and hold text).
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let meta = std::fs::metadata(path)?;
    if let Some(kind) = FileKind::of(meta.file_type()) {
        return Err(ReadError::NotRegular(kind));
    }
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
    let meta = file.metadata()?;
    if let Some(kind) = FileKind::of(meta.file_type()) {
        return Err(ReadError::NotRegular(kind));
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { size: Some(meta.len()), limit });
    }
    read_at_most(file, meta.len(), limit)
}

fn read_at_most(file: File, claimed: u64, limit: u64) -> Result<Vec<u8>, ReadError> {
    // The claimed size is at most `limit`, so this reserve is bounded too.
    let mut bytes = Vec::with_capacity(usize::try_from(claimed).unwrap_or(0).saturating_add(1));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { size: None, limit });
    }
    Ok(bytes)
}

/// Files for the tests of the readers: every kind a hostile path can name.
#[cfg(test)]
pub(crate) mod special {
    use std::path::PathBuf;

    /// A new empty directory for one test (removed when dropped).
    pub struct Scratch(pub PathBuf);

    impl Scratch {
        pub fn new(name: &str) -> Scratch {
            let d = std::env::temp_dir().join(format!("gres-rs-files-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
        pub fn join(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
        /// `name` as a symbolic link to /dev/zero.
        pub fn dev_zero(&self, name: &str) -> PathBuf {
            let p = self.join(name);
            std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
            p
        }
        /// `name` as a FIFO nobody writes to.
        pub fn fifo(&self, name: &str) -> PathBuf {
            let p = self.join(name);
            let st = std::process::Command::new("mkfifo").arg(&p).status().unwrap();
            assert!(st.success(), "mkfifo {}", p.display());
            p
        }
        /// `name` as a directory.
        pub fn dir(&self, name: &str) -> PathBuf {
            let p = self.join(name);
            std::fs::create_dir(&p).unwrap();
            p
        }
        /// `name` as a sparse file of `len` bytes (no disk space used).
        pub fn sparse(&self, name: &str, len: u64) -> PathBuf {
            let p = self.join(name);
            std::fs::File::create(&p).unwrap().set_len(len).unwrap();
            p
        }
        pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
            let p = self.join(name);
            std::fs::write(&p, contents).unwrap();
            p
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::special::Scratch;
    use super::*;

    #[test]
    fn regular_file_is_read_whole() {
        let s = Scratch::new("regular");
        let p = s.file("a.conf", "Name=gpu\n");
        assert_eq!(read_bounded(&p, MAX_FILE_LEN).unwrap(), b"Name=gpu\n");
        let empty = s.file("empty.conf", "");
        assert_eq!(read_bounded(&empty, MAX_FILE_LEN).unwrap(), b"");
    }

    #[test]
    fn file_at_the_limit_is_read_one_byte_more_is_refused() {
        let s = Scratch::new("limit");
        let p = s.file("a.conf", vec![b'x'; 100]);
        assert_eq!(read_bounded(&p, 100).unwrap().len(), 100);
        assert!(matches!(read_bounded(&p, 99), Err(ReadError::TooLarge { size: Some(100), limit: 99 })));
        let over = s.sparse("over.conf", MAX_FILE_LEN + 1);
        let e = read_bounded(&over, MAX_FILE_LEN).unwrap_err();
        assert_eq!(e.to_string(), "16777217 bytes, more than the 16777216 read");
    }

    #[test]
    fn ten_gb_sparse_file_is_refused_unread() {
        let s = Scratch::new("sparse");
        let p = s.sparse("big.conf", 10 << 30);
        assert!(matches!(read_bounded(&p, MAX_FILE_LEN), Err(ReadError::TooLarge { size: Some(0x2_8000_0000), .. })));
    }

    #[test]
    fn dev_zero_is_refused() {
        let s = Scratch::new("zero");
        for p in [Path::new("/dev/zero").to_path_buf(), s.dev_zero("zero.conf")] {
            let e = read_bounded(&p, MAX_FILE_LEN).unwrap_err();
            assert!(matches!(e, ReadError::NotRegular(FileKind::CharDevice)), "{e:?}");
            assert_eq!(e.to_string(), "a character device, not a regular file");
        }
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let s = Scratch::new("fifo");
        let p = s.fifo("pipe.conf");
        let start = std::time::Instant::now();
        assert!(matches!(read_bounded(&p, MAX_FILE_LEN), Err(ReadError::NotRegular(FileKind::Fifo))));
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn directory_is_refused() {
        let s = Scratch::new("dir");
        let p = s.dir("sub");
        let e = read_bounded(&p, MAX_FILE_LEN).unwrap_err();
        assert!(matches!(e, ReadError::NotRegular(FileKind::Directory)));
        assert_eq!(e.to_string(), "a directory, not a regular file");
    }

    #[test]
    fn proc_files_claiming_size_0_are_read() {
        let text = read_bounded(Path::new("/proc/self/status"), MAX_FILE_LEN).unwrap();
        assert!(String::from_utf8_lossy(&text).contains("VmRSS"));
        // One that holds more than the bound is refused after bound + 1 bytes.
        assert!(matches!(read_bounded(Path::new("/proc/self/status"), 16), Err(ReadError::TooLarge { size: None, limit: 16 })));
    }

    #[test]
    fn missing_file_is_not_found() {
        let e = read_bounded(Path::new("/nonexistent/x.conf"), MAX_FILE_LEN).unwrap_err();
        assert!(e.is_not_found());
        assert!(e.to_string().contains("No such file"), "{e}");
    }
}
