//! NVML calls `nvml-wrapper` 0.11 does not offer: the four for enumerating
//! MIG devices (`nvmlDeviceGetMaxMigDeviceCount`,
//! `nvmlDeviceGetMigDeviceHandleByIndex`, `nvmlDeviceGetGpuInstanceId`,
//! `nvmlDeviceGetComputeInstanceId`), `nvmlErrorString` (for log lines
//! worded like the stock plugin's), `nvmlDeviceGetRemappedRows` (row
//! remapping, for the health check) and `nvmlEventSetWait_v2` with the
//! whole event (the wrapper's drops the GPU and compute instance ids that
//! attribute an XID to a MIG device).  They are looked up in the same NVML
//! library file `nvml-wrapper` loads (the dynamic loader hands back the
//! same loaded copy), and a MIG handle is given back as an
//! `nvml_wrapper::Device`, so every other query goes through the wrapper.
//!
//! With the Slurm ABI layer (`gres_slurm_abi`) the only home of
//! `unsafe` in the workspace (SAFETY.md); it knows nothing of Slurm or of
//! the crates above it.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, EventSet, Nvml};
use std::ffi::{c_char, c_uint, c_ulonglong, c_void, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;

type CountFn = unsafe extern "C" fn(*mut c_void, *mut c_uint) -> c_uint;
type ByIndexFn = unsafe extern "C" fn(*mut c_void, c_uint, *mut *mut c_void) -> c_uint;
type ErrorStringFn = unsafe extern "C" fn(c_uint) -> *const c_char;
type RemappedRowsFn = unsafe extern "C" fn(*mut c_void, *mut c_uint, *mut c_uint, *mut c_uint, *mut c_uint) -> c_uint;
type EventWaitFn = unsafe extern "C" fn(*mut c_void, *mut RawEventData, c_uint) -> c_uint;

/// nvml.h's `nvmlEventData_t`.
#[repr(C)]
struct RawEventData {
    device: *mut c_void,
    event_type: c_ulonglong,
    event_data: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// `nvmlDeviceGetRemappedRows`: rows remapped for corrected and for
/// uncorrected errors, whether a remapping waits for a GPU reset, whether
/// a remapping failed (no spare row left).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemappedRows {
    pub corrected: u32,
    pub uncorrected: u32,
    pub pending: bool,
    pub failure: bool,
}

/// NVML's "no instance" id in an event (`gpuInstanceId`,
/// `computeInstanceId` of an event no MIG device caused).
pub const NO_INSTANCE: u32 = u32::MAX;

/// One event of `nvmlEventSetWait_v2`, whole.
#[derive(Debug)]
pub struct Event<'n> {
    /// The GPU it happened on (the MIG device's parent GPU for MIG).
    pub device: Device<'n>,
    /// `nvmlEventType*` bits.
    pub event_type: u64,
    /// The XID for `nvmlEventTypeXidCriticalError`.
    pub data: u64,
    /// GPU and compute instance of the MIG device it is attributed to, or
    /// [`NO_INSTANCE`].
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// A `dlopen()` reference to the NVML library, closed on drop.
struct LibRef(*mut c_void);

// SAFETY: a dlopen handle is a process-wide token; dlsym and dlclose may be
// called on it from any thread.
unsafe impl Send for LibRef {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for LibRef {}

impl Drop for LibRef {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful dlopen and is closed
        // once; the function pointers taken from it die with `NvmlExtra`,
        // which owns this.
        unsafe { libc::dlclose(self.0) };
    }
}

/// The extra calls of one loaded NVML library.
pub struct NvmlExtra {
    // Declared before `_lib` so the pointers are gone before the library
    // reference is dropped.
    max_count: Option<CountFn>,
    by_index: Option<ByIndexFn>,
    gi_id: Option<CountFn>,
    ci_id: Option<CountFn>,
    error_string: Option<ErrorStringFn>,
    remapped_rows: Option<RemappedRowsFn>,
    event_wait: Option<EventWaitFn>,
    _lib: LibRef,
}

impl NvmlExtra {
    /// Look the calls up in the NVML library at `path` (the same name
    /// `nvml-wrapper` is given).  A missing call is reported as
    /// `FunctionNotFound` when used.  `Err` (the loader's message) when
    /// the library cannot be loaded.
    pub fn load(path: &OsStr) -> Result<NvmlExtra, String> {
        let c = CString::new(path.as_bytes()).map_err(|_| format!("{}: NUL in library path", path.to_string_lossy()))?;
        // SAFETY: a valid NUL-terminated path; loading NVML runs its
        // initializers, which `nvml-wrapper` has already done for this file.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlerror returns NULL or a valid C string owned by libc.
            let err = unsafe { libc::dlerror() };
            let msg = if err.is_null() {
                "dlopen failed".to_string()
            } else {
                // SAFETY: non-NULL C string from dlerror, copied at once.
                unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned()
            };
            return Err(msg);
        }
        let lib = LibRef(handle);
        let sym = |name: &CStr| -> *mut c_void {
            // SAFETY: a live handle and a NUL-terminated symbol name.
            unsafe { libc::dlsym(lib.0, name.as_ptr()) }
        };
        let (max_count, by_index, gi_id, ci_id, error_string) = (
            sym(c"nvmlDeviceGetMaxMigDeviceCount"),
            sym(c"nvmlDeviceGetMigDeviceHandleByIndex"),
            sym(c"nvmlDeviceGetGpuInstanceId"),
            sym(c"nvmlDeviceGetComputeInstanceId"),
            sym(c"nvmlErrorString"),
        );
        let (remapped_rows, event_wait) = (sym(c"nvmlDeviceGetRemappedRows"), sym(c"nvmlEventSetWait_v2"));
        let as_count = |p: *mut c_void| {
            (!p.is_null()).then(|| {
                // SAFETY: NVML declares these symbols with exactly this C
                // signature (`nvmlDevice_t` is a pointer, `unsigned int`
                // and `nvmlReturn_t` are 32-bit); NULL (missing) is `None`.
                unsafe { std::mem::transmute::<*mut c_void, CountFn>(p) }
            })
        };
        Ok(NvmlExtra {
            max_count: as_count(max_count),
            by_index: (!by_index.is_null()).then(|| {
                // SAFETY: as for `as_count`, with NVML's signature of
                // nvmlDeviceGetMigDeviceHandleByIndex.
                unsafe { std::mem::transmute::<*mut c_void, ByIndexFn>(by_index) }
            }),
            gi_id: as_count(gi_id),
            ci_id: as_count(ci_id),
            error_string: (!error_string.is_null()).then(|| {
                // SAFETY: NVML's `const char *nvmlErrorString(nvmlReturn_t)`.
                unsafe { std::mem::transmute::<*mut c_void, ErrorStringFn>(error_string) }
            }),
            remapped_rows: (!remapped_rows.is_null()).then(|| {
                // SAFETY: NVML's `nvmlReturn_t nvmlDeviceGetRemappedRows(
                // nvmlDevice_t, unsigned int *corrRows, unsigned int
                // *uncRows, unsigned int *isPending, unsigned int
                // *failureOccurred)`.
                unsafe { std::mem::transmute::<*mut c_void, RemappedRowsFn>(remapped_rows) }
            }),
            event_wait: (!event_wait.is_null()).then(|| {
                // SAFETY: NVML's `nvmlReturn_t nvmlEventSetWait_v2(
                // nvmlEventSet_t, nvmlEventData_t *, unsigned int)`, with
                // `RawEventData` laid out as nvmlEventData_t.
                unsafe { std::mem::transmute::<*mut c_void, EventWaitFn>(event_wait) }
            }),
            _lib: lib,
        })
    }

    fn count_call(f: Option<CountFn>, dev: &Device<'_>) -> Result<u32, NvmlError> {
        let f = f.ok_or(NvmlError::FunctionNotFound)?;
        let mut out: c_uint = 0;
        // SAFETY: the handle is valid while the `Nvml` the device borrows is
        // alive; `out` is a valid place for the result.
        let rc = unsafe { f(dev.handle().cast(), &mut out) };
        nvml_try(rc)?;
        Ok(out)
    }

    /// `nvmlDeviceGetMaxMigDeviceCount`.
    pub fn max_mig_device_count(&self, dev: &Device<'_>) -> Result<u32, NvmlError> {
        Self::count_call(self.max_count, dev)
    }

    /// `nvmlDeviceGetGpuInstanceId` of a MIG device.
    pub fn gpu_instance_id(&self, mig: &Device<'_>) -> Result<u32, NvmlError> {
        Self::count_call(self.gi_id, mig)
    }

    /// `nvmlDeviceGetComputeInstanceId` of a MIG device.
    pub fn compute_instance_id(&self, mig: &Device<'_>) -> Result<u32, NvmlError> {
        Self::count_call(self.ci_id, mig)
    }

    /// `nvmlDeviceGetMigDeviceHandleByIndex`: the MIG device `index` of a
    /// GPU, usable with every `Device` query NVML allows on MIG devices.
    pub fn mig_device_by_index<'n>(&self, dev: &Device<'n>, index: u32) -> Result<Device<'n>, NvmlError> {
        let f = self.by_index.ok_or(NvmlError::FunctionNotFound)?;
        let mut mig: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid device handle (see `count_call`), valid out pointer.
        let rc = unsafe { f(dev.handle().cast(), index, &mut mig) };
        nvml_try(rc)?;
        if mig.is_null() {
            return Err(NvmlError::Unknown);
        }
        // SAFETY: NVML returned a MIG device handle, valid as long as the
        // library stays initialized, which the `'n` borrow of `Nvml`
        // guarantees.
        Ok(unsafe { Device::new(mig.cast(), dev.nvml()) })
    }

    /// `nvmlDeviceGetRemappedRows` (Ampere and later).
    pub fn remapped_rows(&self, dev: &Device<'_>) -> Result<RemappedRows, NvmlError> {
        let f = self.remapped_rows.ok_or(NvmlError::FunctionNotFound)?;
        let (mut corrected, mut uncorrected, mut pending, mut failure): (c_uint, c_uint, c_uint, c_uint) = (0, 0, 0, 0);
        // SAFETY: valid device handle (see `count_call`), four valid out
        // pointers.
        let rc = unsafe { f(dev.handle().cast(), &mut corrected, &mut uncorrected, &mut pending, &mut failure) };
        nvml_try(rc)?;
        Ok(RemappedRows { corrected, uncorrected, pending: pending != 0, failure: failure != 0 })
    }

    /// `nvmlEventSetWait_v2`: the next event of `set` (created by `nvml`),
    /// waiting up to `timeout_ms` (`Err(Timeout)` when none came).
    pub fn event_wait<'n>(&self, nvml: &'n Nvml, set: &EventSet<'n>, timeout_ms: u32) -> Result<Event<'n>, NvmlError> {
        let f = self.event_wait.ok_or(NvmlError::FunctionNotFound)?;
        let mut raw =
            RawEventData { device: std::ptr::null_mut(), event_type: 0, event_data: 0, gpu_instance_id: NO_INSTANCE, compute_instance_id: NO_INSTANCE };
        // SAFETY: the set handle is valid while `set` lives (it is freed on
        // its drop); `raw` is a valid nvmlEventData_t to fill.
        let rc = unsafe { f(set.handle().cast(), &mut raw, timeout_ms) };
        nvml_try(rc)?;
        if raw.device.is_null() {
            return Err(NvmlError::Unknown);
        }
        Ok(Event {
            // SAFETY: NVML gave a device handle, valid while the library
            // stays initialized, which the `'n` borrow of `Nvml` (the set's)
            // guarantees.
            device: unsafe { Device::new(raw.device.cast(), nvml) },
            event_type: raw.event_type,
            data: raw.event_data,
            gpu_instance_id: raw.gpu_instance_id,
            compute_instance_id: raw.compute_instance_id,
        })
    }

    /// NVML's own text for a return code (`nvmlErrorString`).
    pub fn error_string(&self, code: u32) -> Option<String> {
        let f = self.error_string?;
        // SAFETY: nvmlErrorString accepts any code and returns NULL or a
        // static NUL-terminated string, copied at once.
        let p = unsafe { f(code) };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-NULL, NUL-terminated, static in the library.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// Whether two device handles are the same device (handles are unique
/// per device while NVML is initialized), e.g. an event's and a GPU's.
pub fn same_device(a: &Device<'_>, b: &Device<'_>) -> bool {
    // SAFETY: the handles are only compared, never used.
    unsafe { a.handle() == b.handle() }
}

/// Whether the dynamic loader finds and loads `name` (as `dlopen()` with
/// the loader's search rules: `LD_LIBRARY_PATH`, the cache, default
/// dirs), e.g. whether slurmd's `dlopen("libnvidia-ml.so")` that decides
/// between gpu/nvml and gpu/generic succeeds here.  The library is closed
/// again at once.
pub fn library_loadable(name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else { return false };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // dlopen has no other precondition.  The handle is only compared with
    // null and given back to dlclose once.
    unsafe {
        let handle = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if handle.is_null() {
            return false;
        }
        libc::dlclose(handle);
    }
    true
}
