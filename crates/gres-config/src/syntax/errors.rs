//! The errors and remarks of a configuration file, each with the file,
//! line and byte column it concerns.

use thiserror::Error;

use super::{Pair, Spanned};
pub use gres_core::diagnostic::{Diagnostic, Location};
use gres_core::text::closest_key;

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
