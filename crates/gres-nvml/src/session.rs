//! The process-wide NVML handle: loaded and initialized on first use,
//! shared by every thread (`Nvml` is `Send + Sync`), given up with
//! [`release`].
//!
//! The stock plugin initializes NVML for each detection and each step and
//! shuts it down afterwards, so slurmd holds no NVML client between uses;
//! GPU resets and MIG reconfiguration want no clients.  Callers that
//! follow that pattern (detection in slurmd, the step clock reset) call
//! [`release`] when done; periodic users (energy) keep the handle.

use nvml_extra::NvmlExtra;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::ffi::OsString;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Why there is no GPU list at all.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum DetectError {
    /// The NVML library could not be loaded (no NVIDIA driver installed).
    #[error("Cannot load the NVML library {path}: {reason}")]
    Library { path: String, reason: String },
    /// `nvmlInit` failed (driver not loaded, no permission, ...).
    #[error("Failed to initialize NVML: {0}")]
    Init(String),
    /// NVML could not count the GPUs.
    #[error("Failed to get device count: {0}")]
    DeviceCount(String),
}

/// An initialized NVML library.
pub struct Session {
    pub nvml: Nvml,
    /// The calls `nvml-wrapper` lacks (MIG enumeration, error strings).
    pub extra: NvmlExtra,
    /// The library file that was loaded.
    pub lib_path: OsString,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("lib_path", &self.lib_path).finish()
    }
}

static HOLDER: Mutex<Option<Arc<Session>>> = Mutex::new(None);

/// The NVML session of `paths.library`, initializing NVML if there is
/// none.  A session held for another library is given up first (as by
/// [`release`]; a daemon asks for one library all its life).  Failures are
/// not remembered: the next call tries again (the driver may have loaded).
pub fn session(paths: &super::Paths) -> Result<Arc<Session>, DetectError> {
    session_with_code(paths).map_err(|(e, _)| e)
}

/// [`session`], and with its error the `nvmlReturn_t` nvmlInit answered
/// (`None`: the library or a symbol could not be loaded, or no code).
pub(crate) fn session_with_code(paths: &super::Paths) -> Result<Arc<Session>, (DetectError, Option<u32>)> {
    // A poisoned lock only means a panic elsewhere while holding it; the
    // Option inside is always whole.
    let mut held = HOLDER.lock().unwrap_or_else(PoisonError::into_inner);
    match held.take() {
        Some(s) if s.lib_path == paths.library => {
            *held = Some(Arc::clone(&s));
            return Ok(s);
        }
        Some(other) => shut_down(other),
        None => {}
    }
    let path = paths.library.clone();
    let extra = NvmlExtra::load(&path).map_err(|reason| (DetectError::Library { path: path.to_string_lossy().into_owned(), reason }, None))?;
    let start = Instant::now();
    let result = Nvml::builder().lib_path(&path).init();
    tracing::trace!(target: gres_log::DEBUG3, "nvmlInit() took {} microseconds", start.elapsed().as_micros());
    let nvml = result.map_err(|e| {
        let code = return_code(&e);
        (classify(e, &path, &extra), code)
    })?;
    tracing::trace!("Successfully initialized NVML");
    let s = Arc::new(Session { nvml, extra, lib_path: path });
    *held = Some(Arc::clone(&s));
    Ok(s)
}

/// Give up the process's NVML session; NVML is shut down once the last
/// user of it is done.  The next [`session`] initializes NVML again.
pub fn release() {
    let taken = HOLDER.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(s) = taken {
        shut_down(s);
    }
}

/// Shut NVML down if `s` was its last user.
fn shut_down(s: Arc<Session>) {
    if let Ok(s) = Arc::try_unwrap(s) {
        let start = Instant::now();
        match s.nvml.shutdown() {
            Ok(()) => tracing::trace!("Successfully shut down NVML"),
            Err(e) => tracing::error!("Failed to shut down NVML: {e}"),
        }
        tracing::trace!(target: gres_log::DEBUG3, "nvmlShutdown() took {} microseconds", start.elapsed().as_micros());
    }
    // Otherwise another thread still uses it; dropping its last Arc
    // shuts NVML down.
}

fn classify(e: NvmlError, path: &OsString, extra: &NvmlExtra) -> DetectError {
    let path = path.to_string_lossy().into_owned();
    match e {
        NvmlError::LibloadingError(e) => DetectError::Library { path, reason: e.to_string() },
        NvmlError::FailedToLoadSymbol(e) => DetectError::Library { path, reason: e },
        e => DetectError::Init(error_text(&e, extra)),
    }
}

impl Session {
    /// NVML's own wording of an error (what the stock plugin logs), or
    /// `nvml-wrapper`'s for errors that are not NVML return codes.
    pub fn text(&self, e: &NvmlError) -> String {
        error_text(e, &self.extra)
    }
}

fn error_text(e: &NvmlError, extra: &NvmlExtra) -> String {
    return_code(e).and_then(|c| extra.error_string(c)).unwrap_or_else(|| e.to_string())
}

/// The `nvmlReturn_t` behind an error, where there is one.
#[allow(deprecated)] // AlreadyInitialized: still a code NVML can return.
pub fn return_code(e: &NvmlError) -> Option<u32> {
    use NvmlError::*;
    Some(match e {
        Uninitialized => 1,
        InvalidArg => 2,
        NotSupported => 3,
        NoPermission => 4,
        AlreadyInitialized => 5,
        NotFound => 6,
        InsufficientSize(_) => 7,
        InsufficientPower => 8,
        DriverNotLoaded => 9,
        Timeout => 10,
        IrqIssue => 11,
        LibraryNotFound => 12,
        FunctionNotFound => 13,
        CorruptedInfoROM => 14,
        GpuLost => 15,
        ResetRequired => 16,
        OperatingSystem => 17,
        LibRmVersionMismatch => 18,
        InUse => 19,
        InsufficientMemory => 20,
        NoData => 21,
        VgpuEccNotSupported => 22,
        Unknown => 999,
        UnexpectedVariant(c) => *c,
        _ => return None,
    })
}
