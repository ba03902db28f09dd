//! Where a configuration file's bytes come from: the file system within
//! bounds, or memory (tests, fuzzing).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gres_core::bounded_read::{read_bounded, FileKind, ReadError};

/// Where file contents come from: the file system, or memory in tests and
/// fuzzing.
pub trait ConfReader {
    /// The contents of `path`, at most `limit` bytes of them, as
    /// [`read_bounded`] reads them.
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError>;
}

/// Reads files from the file system ([`read_bounded`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct FsReader;

impl ConfReader for FsReader {
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
        read_bounded(path, limit)
    }
}

/// Files held in memory, by path.
#[derive(Clone, Debug, Default)]
pub struct MemReader {
    files: HashMap<PathBuf, Vec<u8>>,
    special: HashMap<PathBuf, FileKind>,
}

impl MemReader {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn with(mut self, path: impl Into<PathBuf>, contents: impl Into<Vec<u8>>) -> Self {
        self.files.insert(path.into(), contents.into());
        self
    }
    /// `path` as a file that is not a regular one (a device, a directory).
    pub fn with_special(mut self, path: impl Into<PathBuf>, kind: FileKind) -> Self {
        self.special.insert(path.into(), kind);
        self
    }
}

impl ConfReader for MemReader {
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
        if let Some(&kind) = self.special.get(path) {
            return Err(ReadError::NotRegular(kind));
        }
        let bytes = self.files.get(path).ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))?;
        if bytes.len() as u64 > limit {
            return Err(ReadError::TooLarge { size: Some(bytes.len() as u64), limit });
        }
        Ok(bytes.clone())
    }
}
