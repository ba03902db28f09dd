//! A problem slurmd or slurmctld would have with a node's GRES
//! configuration, as `gres-rs check` reports it: how serious, where, and
//! what follows from it.

use gres_config::syntax::{ConfError, Diagnostic, Location};
use gres_core::model::LogLevel;

/// The GRES plugins Debian's Slurm 22.05 ships (`gres_<name>.so`); a GRES
/// of another name is counted only (slurmd loads no plugin for it).
pub const GRES_PLUGINS: [&str; 4] = ["gpu", "mps", "shard", "nic"];

/// How serious a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// slurmd stops (`fatal()`): the node never comes up.
    Fatal,
    /// slurmd logs an error and goes on without part of the configuration,
    /// or slurmctld drains the node when it registers.
    Error,
    /// Works, but probably not as meant.
    Warning,
    /// For information (what slurmd logs at info or debug level).
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Fatal => "fatal",
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// A problem with a node's configuration, with the place it comes from when
/// known.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    pub severity: Severity,
    pub location: Option<Location>,
    pub message: String,
    /// A replacement for the faulty word ("did you mean").
    pub suggestion: Option<String>,
    /// How to fix it.
    pub help: Option<String>,
    /// Another place the problem is about (the first of two).
    pub related: Option<Related>,
    /// The feature of a later release it is about (a gres.conf value the
    /// release checked for does not know).
    pub feature: Option<gres_core::behaviour::Feature>,
}

/// A second place of a [`Problem`], with what it is there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Related {
    pub location: Location,
    pub label: String,
}

impl Problem {
    pub fn new(severity: Severity, location: Option<Location>, message: impl Into<String>) -> Self {
        Problem { severity, location, message: message.into(), suggestion: None, help: None, related: None, feature: None }
    }

    pub fn with_related(mut self, location: Location, label: impl Into<String>) -> Self {
        self.related = Some(Related { location, label: label.into() });
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_suggestion(mut self, suggestion: Option<String>) -> Self {
        self.suggestion = suggestion;
        self
    }

    /// What stops slurmd in a configuration file.
    pub fn from_conf_error(e: &ConfError) -> Self {
        Problem {
            severity: Severity::Fatal,
            location: (e.location.line > 0 || !e.location.path.as_os_str().is_empty()).then(|| e.location.clone()),
            message: e.message.clone(),
            suggestion: e.suggestion.clone(),
            help: None,
            related: None,
            feature: None,
        }
    }

    /// A line slurmd logs: errors stay errors, info lines that start with
    /// `WARNING` become warnings, the rest notes.
    pub fn from_log(level: LogLevel, location: Option<Location>, message: &str) -> Self {
        let (severity, message) = match level {
            LogLevel::Error => (Severity::Error, message),
            LogLevel::Info => match message.strip_prefix("WARNING: ") {
                Some(rest) => (Severity::Warning, rest),
                None => (Severity::Note, message),
            },
            _ => (Severity::Note, message),
        };
        Problem::new(severity, location, message)
    }

    pub fn from_diagnostic(d: &Diagnostic) -> Self {
        Problem { feature: d.feature, suggestion: d.suggestion.clone(), ..Self::from_log(d.level, d.location.clone(), &d.message) }
    }
}
