//! Where in a configuration file something is, and a remark about it that
//! does not stop the daemon: what the plugins' own readers (fake_gpus.conf)
//! and `gres-rs check`'s parsers report.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::model::{LogLevel, LogLine};

/// A place in a configuration file: 1-based line and byte column, and the
/// number of bytes of that line the fault covers.  `line == 0` means the
/// whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Location {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub len: usize,
}

impl Location {
    /// The file as a whole (an unreadable file, for one).
    pub fn file(path: &Path) -> Self {
        Location { path: path.to_path_buf(), line: 0, column: 0, len: 0 }
    }
    /// A whole line, without column information.
    pub fn line(path: &Path, line: usize) -> Self {
        Location { path: path.to_path_buf(), line, column: 1, len: 0 }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.path.display())
        } else {
            write!(f, "{}:{}:{}", self.path.display(), self.line, self.column)
        }
    }
}

/// A remark that does not stop the daemon (Slurm logs it and goes on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub level: LogLevel,
    pub location: Option<Location>,
    pub message: String,
    /// The feature of a later release the remark is about (a value this
    /// release does not know).
    pub feature: Option<crate::behaviour::Feature>,
    /// A replacement for the word at `location` ("did you mean").
    pub suggestion: Option<String>,
}

impl Diagnostic {
    pub fn new(level: LogLevel, location: Option<Location>, message: impl Into<String>) -> Self {
        Diagnostic { level, location, message: message.into(), feature: None, suggestion: None }
    }
    /// The message as the plugin logs it: the stock wording, prefixed with
    /// the place when known.
    pub fn to_log_line(&self) -> LogLine {
        match &self.location {
            Some(loc) => LogLine::new(self.level, format!("{loc}: {}", self.message)),
            None => LogLine::new(self.level, self.message.clone()),
        }
    }
}
