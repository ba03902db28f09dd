//! The errors and remarks of a configuration file, each with the file,
//! line and byte column it concerns.

use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

use super::{Pair, Spanned};
use crate::model::{LogLevel, LogLine};
use crate::text::closest_key;

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

/// What kind of fault a [`ConfError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file (or an included one) could not be read.
    Io,
    /// Text that is not `key=value` pairs, or left over after them.
    Syntax,
    /// A key the file does not know, or one not allowed where it stands.
    UnknownKey,
    /// An `include` that cannot be followed (cycle, depth, bad name).
    Include,
    /// A value the file's rules reject: what the stock daemon stops on.
    Invalid,
}

/// One error in a configuration file.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{location}: {message}{}", suggestion_suffix(.suggestion))]
pub struct ConfError {
    pub kind: ErrorKind,
    pub location: Location,
    pub message: String,
    /// For an unknown key, the closest valid one.
    pub suggestion: Option<String>,
}

fn suggestion_suffix(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean \"{s}\"?)"),
        None => String::new(),
    }
}

impl ConfError {
    pub fn new(kind: ErrorKind, location: Location, message: impl Into<String>) -> Self {
        ConfError { kind, location, message: message.into(), suggestion: None }
    }
}

/// Every error found in a file (parsing goes on after an error, like
/// Slurm's, so that all of them are reported at once).  Never empty.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{}", join_errors(.0))]
pub struct ConfErrors(pub Vec<ConfError>);

fn join_errors(errors: &[ConfError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

impl ConfErrors {
    pub fn first(&self) -> Option<&ConfError> {
        self.0.first()
    }
}

impl From<ConfError> for ConfErrors {
    fn from(e: ConfError) -> Self {
        ConfErrors(vec![e])
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

/// An "unknown key" error with a suggestion.
pub fn unknown_key(pair: &Pair, valid: &[&str], context: &str) -> ConfError {
    ConfError {
        kind: ErrorKind::UnknownKey,
        location: pair.key_location.clone(),
        message: format!("Parsing error at unrecognized key: {}{context}", pair.key),
        suggestion: closest_key(&pair.key, valid).map(str::to_string),
    }
}

/// The error for text left on a line that is not a pair.
pub fn leftover_error(rest: &Spanned) -> ConfError {
    ConfError::new(ErrorKind::Syntax, rest.location.clone(), format!("Parse error: \"{}\"", rest.value))
}
