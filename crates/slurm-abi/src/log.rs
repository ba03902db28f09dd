//! The log bridge: `tracing` events go to slurmd's own log through
//! `slurm_log_var(level, "%s", message)` (the message is never used as a
//! format string), prefixed with the plugin type like Slurm's plugins
//! (`gres/gpu: ...`), and only formatted when slurmd's log level wants them.
//!
//! Levels and the special targets are described in [`gres_log`].

use super::sys;
use gres_log as targets;
use std::cell::Cell;
use std::ffi::CStr;
use std::fmt::Write as _;
use std::sync::OnceLock;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

thread_local! {
    /// The plugin whose exported function this thread is running (the
    /// innermost one: gres/gpu's detection calls into gpu/nvml).
    static CURRENT: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Marks the current thread as running inside an exported function of
/// `plugin_type`, whose name prefixes the lines it logs.
pub struct GuardScope {
    outer: Option<&'static str>,
}

impl GuardScope {
    pub fn enter(plugin_type: &'static str) -> GuardScope {
        GuardScope { outer: CURRENT.replace(Some(plugin_type)) }
    }
}

impl Drop for GuardScope {
    fn drop(&mut self) {
        CURRENT.set(self.outer);
    }
}

pub fn in_guard() -> bool {
    CURRENT.get().is_some()
}

/// Lines logged outside any exported function (none are expected).
const NO_PLUGIN: &str = "gres-rs";

fn slurm_level(meta: &Metadata<'_>) -> sys::log_level_t {
    match meta.target() {
        t if t == targets::FATAL => return sys::LOG_LEVEL_FATAL,
        t if t == targets::UNPREFIXED || t == targets::STOCK_WARNING => return sys::LOG_LEVEL_INFO,
        t if t == targets::VERBOSE => return sys::LOG_LEVEL_VERBOSE,
        t if t == targets::DEBUG3 => return sys::LOG_LEVEL_DEBUG3,
        _ => {}
    }
    match *meta.level() {
        Level::ERROR => sys::LOG_LEVEL_ERROR,
        Level::WARN | Level::INFO => sys::LOG_LEVEL_INFO,
        Level::DEBUG => sys::LOG_LEVEL_DEBUG,
        Level::TRACE => sys::LOG_LEVEL_DEBUG2,
    }
}

fn level_enabled(level: sys::log_level_t) -> bool {
    // SAFETY: slurm_get_log_level() takes no arguments and only reads the
    // daemon's log configuration.
    let current = unsafe { sys::slurm_get_log_level() };
    current >= level as i32
}

/// Send one finished line to slurmd's log.  The line's own buffer takes the
/// terminating NUL (no copy, no shrink as `CString::new` does: one line of
/// each record and device file in `slurmd -G`).
fn emit(level: sys::log_level_t, line: String) {
    with_c_line(line, |c| {
        // SAFETY: the format is a constant "%s" and the single argument is
        // a valid NUL-terminated string that outlives the call.
        unsafe { sys::slurm_log_var(level, c"%s".as_ptr(), c.as_ptr()) };
    });
}

/// `line` as a C string for `f`; interior NULs, which would truncate it,
/// replaced.
fn with_c_line(line: String, f: impl FnOnce(&CStr)) {
    let line = if line.contains('\0') { line.replace('\0', "\\0") } else { line };
    let mut bytes = line.into_bytes();
    bytes.push(0);
    f(CStr::from_bytes_with_nul(&bytes).unwrap_or_default());
}

/// A stock plugin's warning ([`targets::STOCK_WARNING`]): Slurm's own
/// `warning()` from 23.02, so the line carries the daemon's `warning: `
/// level word exactly where stock's does (a log file; `slurmd -G` from
/// 24.11, where stderr lines have level words too).
#[cfg(slurm_log_warning)]
fn emit_warning(line: String) {
    with_c_line(line, |c| {
        // SAFETY: warning(const char *fmt, ...) of libslurmfull (23.02+,
        // src/common/log.c); the format is a constant "%s" and the single
        // argument a valid NUL-terminated string that outlives the call.
        unsafe { sys::warning(c"%s".as_ptr(), c.as_ptr()) };
    });
}

/// 22.05 has no `warning()`; its plugins wrote `info("WARNING: ...")`.
#[cfg(not(slurm_log_warning))]
fn emit_warning(mut line: String) {
    line.insert_str(0, targets::WARNING_WORD);
    emit(sys::LOG_LEVEL_INFO, line);
}

/// Log an error line directly (used by the panic guard, which must not
/// depend on a subscriber being installed).
pub fn log_error_line(line: &str) {
    emit(sys::LOG_LEVEL_ERROR, line.to_string());
}

/// Builds the line: the prefix, the message, then ` name=value` for any
/// other field.
struct MessageVisitor {
    line: String,
    fields: String,
}

impl Visit for MessageVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.line.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.line, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}

/// The subscriber, installed by the first plugin's `init()`.
struct SlurmLog;

impl Subscriber for SlurmLog {
    fn register_callsite(&self, _meta: &'static Metadata<'static>) -> Interest {
        // The daemon's level can change (scontrol setdebug): ask each time.
        Interest::sometimes()
    }
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.is_event() && level_enabled(slurm_level(meta))
    }
    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _span: &Id, _values: &Record<'_>) {}
    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let mut v = MessageVisitor { line: String::with_capacity(160), fields: String::new() };
        // Lines other tools parse (Slurm's testsuite reads GRES_PARSABLE
        // lines) are logged exactly as the stock plugins log them.
        if meta.target() != targets::UNPREFIXED && meta.target() != targets::STOCK_WARNING {
            v.line.push_str(CURRENT.get().unwrap_or(NO_PLUGIN));
            v.line.push_str(": ");
        }
        event.record(&mut v);
        v.line.push_str(&v.fields);
        if meta.target() == targets::STOCK_WARNING {
            // Unprefixed (above): the message is the whole line.
            emit_warning(v.line);
        } else {
            emit(slurm_level(meta), v.line);
        }
    }
    fn enter(&self, _span: &Id) {}
    fn exit(&self, _span: &Id) {}
}

static INSTALLED: OnceLock<()> = OnceLock::new();

/// Route `tracing` events to slurmd's log, each line prefixed with the
/// plugin whose function logged it (all plugins share `libgres_rs.so`,
/// hence one subscriber).
pub fn install() {
    INSTALLED.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(SlurmLog);
    });
}
