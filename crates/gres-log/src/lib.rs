#![deny(unsafe_code)]
//! Log lines of the core and the plugins as `tracing` events.  `ffi::log`
//! routes them to slurmd's log: the event's level picks Slurm's level
//! (ERROR -> error, WARN/INFO -> info, DEBUG -> debug, TRACE -> debug2),
//! except for the targets below.

use gres_core::model::{LogLevel, LogLine};
use tracing::metadata::Kind;
use tracing::Level;

/// Slurm's `verbose` level (e.g. `DebugFlags=Gres` lines).
pub const VERBOSE: &str = "slurm::verbose";
/// Slurm's `debug3` level.
pub const DEBUG3: &str = "slurm::debug3";
/// Slurm's `fatal` level (just before the process exits).
pub const FATAL: &str = "slurm::fatal";
/// Info, without the plugin prefix: lines other tools parse.
pub const UNPREFIXED: &str = "slurm::unprefixed";
/// A warning as the stock plugins log it: through Slurm's `warning()`
/// where the release has one (23.02+: the daemon adds its `warning: `
/// level word where it prefixes levels), as `info("WARNING: ...")` in
/// 22.05; without the plugin prefix, as stock writes them (so that
/// where the daemon shows no level word, 23.02-24.05's `slurmd -G`, the
/// line is stock's exactly).  The core words such lines as 22.05 does
/// (`WARNING: ` first); [`emit`] hands them on without that word.
pub const STOCK_WARNING: &str = "slurm::warning";
/// How the core begins a line that is a stock warning.
pub const WARNING_WORD: &str = "WARNING: ";

/// Log a core line at its level.  `GRES_PARSABLE[...]` lines, which Slurm's
/// own testsuite reads, are logged exactly as the stock plugins log them.
pub fn emit(line: &LogLine) {
    // The text as a `str` field: the subscriber takes it as it is, with no
    // formatting pass over it.
    let m = line.message.as_str();
    match line.level {
        LogLevel::Error => tracing::error!(message = m),
        LogLevel::Info if m.starts_with("GRES_PARSABLE[") => tracing::info!(target: UNPREFIXED, message = m),
        LogLevel::Info if m.starts_with(WARNING_WORD) => tracing::warn!(target: STOCK_WARNING, message = &m[WARNING_WORD.len()..]),
        LogLevel::Info => tracing::info!(message = m),
        LogLevel::Verbose => tracing::info!(target: VERBOSE, message = m),
        LogLevel::Debug => tracing::debug!(message = m),
        LogLevel::Debug2 => tracing::trace!(message = m),
        LogLevel::Debug3 => tracing::trace!(target: DEBUG3, message = m),
    }
}

/// Whether a line at `level` would reach the log: the same targets and
/// levels as [`emit`], asked of the installed subscriber.
fn enabled(level: LogLevel) -> bool {
    match level {
        LogLevel::Error => tracing::enabled!(kind: Kind::EVENT, Level::ERROR),
        LogLevel::Info => tracing::enabled!(kind: Kind::EVENT, Level::INFO),
        LogLevel::Verbose => tracing::enabled!(kind: Kind::EVENT, target: VERBOSE, Level::INFO),
        LogLevel::Debug => tracing::enabled!(kind: Kind::EVENT, Level::DEBUG),
        LogLevel::Debug2 => tracing::enabled!(kind: Kind::EVENT, Level::TRACE),
        LogLevel::Debug3 => tracing::enabled!(kind: Kind::EVENT, target: DEBUG3, Level::TRACE),
    }
}

/// The most verbose level that reaches the log now (slurmd's log level can
/// change while it runs); every level where no subscriber is installed.
pub fn max_level() -> LogLevel {
    if !tracing::dispatcher::has_been_set() {
        return LogLevel::Debug3;
    }
    use LogLevel::*;
    [Debug3, Debug2, Debug, Verbose, Info].into_iter().find(|l| enabled(*l)).unwrap_or(Error)
}
