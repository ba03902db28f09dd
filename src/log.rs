//! Log lines of the core and the plugins as `tracing` events.  `ffi::log`
//! routes them to slurmd's log: the event's level picks Slurm's level
//! (ERROR -> error, WARN/INFO -> info, DEBUG -> debug, TRACE -> debug2),
//! except for the targets below.

use crate::core::model::{LogLevel, LogLine};

/// Slurm's `verbose` level (e.g. `DebugFlags=Gres` lines).
pub const VERBOSE: &str = "slurm::verbose";
/// Slurm's `debug3` level.
pub const DEBUG3: &str = "slurm::debug3";
/// Slurm's `fatal` level (just before the process exits).
pub const FATAL: &str = "slurm::fatal";
/// Info, without the plugin prefix: lines other tools parse.
pub const UNPREFIXED: &str = "slurm::unprefixed";

/// Log a core line at its level.  `GRES_PARSABLE[...]` lines, which Slurm's
/// own testsuite reads, are logged exactly as the stock plugins log them.
pub fn emit(line: &LogLine) {
    let m = &line.message;
    match line.level {
        LogLevel::Error => tracing::error!("{m}"),
        LogLevel::Info if m.starts_with("GRES_PARSABLE[") => tracing::info!(target: UNPREFIXED, "{m}"),
        LogLevel::Info => tracing::info!("{m}"),
        LogLevel::Verbose => tracing::info!(target: VERBOSE, "{m}"),
        LogLevel::Debug => tracing::debug!("{m}"),
        LogLevel::Debug2 => tracing::trace!("{m}"),
        LogLevel::Debug3 => tracing::trace!(target: DEBUG3, "{m}"),
    }
}
