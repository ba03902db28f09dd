//! GPU health as NVML tells it, for `gres-rs health` (a Slurm
//! `HealthCheckProgram`): per GPU its identity, uncorrected ECC error
//! counts, retired pages, remapped rows, clock event (throttle) reasons, the
//! driver's recovery action and NVLink lanes ([`read_health`]), and the XID critical errors NVML
//! delivers while a step runs ([`crate::step_watch`]).  Plain readings only:
//! which of them drain a node is decided elsewhere (the classification
//! core).
//!
//! Every NVML call is bounded by a deadline ([`crate::bounded`]): a driver
//! that hangs on a failing GPU gives a reading that names the call
//! ([`NvmlHang`]) instead of a health check that never returns.  `nvmlInit`
//! and the device count have a longer deadline of their own (a node
//! without persistence mode loads the driver's state then), and the whole
//! reading may be given an end ([`Limits::until`]): what was read by then
//! is kept, and where it stopped is said ([`HealthReading::out_of_time`]).
//! MIG devices are not read: the counts and states are their GPU's.
//!
//! `NVML_ERROR_NOT_SUPPORTED` is [`Reading::NotSupported`] (a GPU without
//! ECC, page retirement or row remapping is not unhealthy for it);
//! `NVML_ERROR_GPU_IS_LOST` makes the GPU [`GpuHealth::lost`] and ends its
//! reading; any other error is kept with the call's name, NVML's text and
//! what the answer means ([`CallError`], [`Answer`]).

use crate::bounded::{self, Tracker};
use crate::session::return_code;
use crate::{DetectError, Paths, Session};
use nvml_extra::RemappedRows;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, EventSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub use crate::bounded::{workers_running, NvmlHang};

/// NVML's field id `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (230 in nvml.h),
/// read with `nvmlDeviceGetFieldValues`.  NVML's change log lists it among
/// the changes between v560 and v565 (drivers from R565; the CUDA 12.6
/// header, R560, ends its field ids at 229).  A driver that does not know
/// the field still answers the call with `NVML_SUCCESS` and puts its
/// answer in the value's own `nvmlReturn`: `NOT_SUPPORTED` or
/// `INVALID_ARGUMENT`, both read as "this driver cannot tell" ([`Answer`]).
pub const FI_GPU_RECOVERY_ACTION: u32 = nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;

/// What an NVML answer that is not a value says of the GPU: the one table
/// ([`Answer::of_code`]) by which a health check turns errors into
/// findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// This driver or GPU cannot tell (the call or the field is unknown to
    /// it, not allowed, no data): nothing is known of the GPU, it is not
    /// checked for this.
    CannotTell,
    /// May pass (a timeout, a busy or not yet ready driver, a failing
    /// init): a fault only when it lasts.
    Transient,
    /// The GPU is broken (lost, needs a reset, an internal error on a GPU
    /// NVML had a handle for).
    Fault,
}

impl Answer {
    /// What NVML's `nvmlReturn_t` `code` means, for a call made after the
    /// GPU's handle was read (`handle_read`) or before (nvmlInit, the
    /// device count, the handle itself):
    ///
    /// | code | meaning |
    /// |---|---|
    /// | 3 NOT_SUPPORTED, 4 NO_PERMISSION, 13 FUNCTION_NOT_FOUND, 21 NO_DATA, 25 ARGUMENT_VERSION_MISMATCH, 26 DEPRECATED | cannot tell |
    /// | 2 INVALID_ARGUMENT, with a handle (a field or lane the driver does not know) | cannot tell |
    /// | 15 GPU_IS_LOST, 16 RESET_REQUIRED | fault |
    /// | 999 UNKNOWN, 28 GPU_NOT_FOUND, with a handle | fault |
    /// | any other (10 TIMEOUT, 9 DRIVER_NOT_LOADED, 18 LIB_RM_VERSION_MISMATCH, 19 IN_USE, ...) | transient |
    pub fn of_code(code: u32, handle_read: bool) -> Answer {
        match code {
            3 | 4 | 13 | 21 | 25 | 26 => Answer::CannotTell,
            2 if handle_read => Answer::CannotTell,
            15 | 16 => Answer::Fault,
            999 | 28 if handle_read => Answer::Fault,
            _ => Answer::Transient,
        }
    }

    /// [`Answer::of_code`] for an error of `nvml-wrapper`: a function the
    /// library does not export (an older driver, or a newer one that
    /// dropped a deprecated name) cannot tell; an error that is no NVML
    /// code (text that is not UTF-8, ...) is transient.
    pub fn of(e: &NvmlError, handle_read: bool) -> Answer {
        match e {
            NvmlError::FailedToLoadSymbol(_) => Answer::CannotTell,
            e => return_code(e).map_or(Answer::Transient, |c| Answer::of_code(c, handle_read)),
        }
    }
}

/// One value read from NVML, or why there is none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Reading<T> {
    Value(T),
    /// `NVML_ERROR_NOT_SUPPORTED`: the GPU does not have or keep this.
    NotSupported,
    /// `NVML_ERROR_GPU_IS_LOST` (the GPU is [`GpuHealth::lost`]).
    Lost,
    /// Any other error (what it means: [`CallError::answer`]).
    Failed(CallError),
    /// Not asked: the GPU was lost, or the reading stopped (a hang).
    #[default]
    NotRead,
}

impl<T> Reading<T> {
    /// The value, if one was read.
    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            _ => None,
        }
    }
}

/// An NVML call that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    /// NVML's name of the function.
    pub call: &'static str,
    /// The `nvmlReturn_t`, where the error is one.
    pub code: Option<u32>,
    /// NVML's text for it (`nvmlErrorString`).
    pub text: String,
    /// What it says of the GPU.
    pub answer: Answer,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.call, self.text)
    }
}

/// Pages retired (Kepler to Volta; NVML answers NOT_SUPPORTED from Ampere,
/// which remaps rows instead).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetiredPages {
    /// Retired for repeated single-bit (corrected) errors.
    pub single_bit: u32,
    /// Retired for a double-bit (uncorrected) error.
    pub double_bit: u32,
    /// Some page waits for a reboot (or driver reload) to be retired.
    pub pending: bool,
}

impl RetiredPages {
    pub fn count(&self) -> u32 {
        self.single_bit.saturating_add(self.double_bit)
    }
}

/// The clock event (throttle) reasons that tell of trouble, and the raw
/// `nvmlClocksEventReason*` bits (idle, application clocks, sync boost and
/// display clocks are normal and have no flag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Throttle {
    pub raw: u64,
    /// Software thermal slowdown (GPU or memory over its max temperature).
    pub sw_thermal: bool,
    /// Hardware thermal slowdown (the GPU is far too hot).
    pub hw_thermal: bool,
    /// Software power cap (at its power limit).
    pub sw_power_cap: bool,
    /// Hardware power brake (the power supply or system asserted it).
    pub hw_power_brake: bool,
    /// Hardware slowdown (thermal, power brake, or a failing power supply).
    pub hw_slowdown: bool,
}

impl Throttle {
    pub fn from_bits(raw: u64) -> Throttle {
        let has = |r: ThrottleReasons| raw & r.bits() != 0;
        Throttle {
            raw,
            sw_thermal: has(ThrottleReasons::SW_THERMAL_SLOWDOWN),
            hw_thermal: has(ThrottleReasons::HW_THERMAL_SLOWDOWN),
            sw_power_cap: has(ThrottleReasons::SW_POWER_CAP),
            hw_power_brake: has(ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN),
            hw_slowdown: has(ThrottleReasons::HW_SLOWDOWN),
        }
    }
}

/// NVLink lanes by state (lanes the GPU does not have are in neither).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvLinks {
    pub up: Vec<u32>,
    pub down: Vec<u32>,
}

/// One GPU's health.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuHealth {
    /// NVML index.
    pub index: u32,
    /// The GPU fell off the bus (`GPU_IS_LOST`; XID 79): its handle or a
    /// query said so, and it was read no further.
    pub lost: bool,
    /// Its handle could not be had (for another reason than lost): it was
    /// read no further.
    pub handle_error: Option<CallError>,
    pub uuid: Reading<String>,
    /// `dddd:bb:dd.f`, lower case, as sysfs and the kernel's messages
    /// write it (`0000:41:00.0`).
    pub pci_bus_id: Reading<String>,
    pub minor: Reading<u32>,
    pub mig_mode: Reading<bool>,
    /// ECC on now (the counts are kept only then: NotSupported otherwise).
    pub ecc_enabled: Reading<bool>,
    /// Uncorrected (double-bit) ECC errors since the driver loaded.
    pub dbe_volatile: Reading<u64>,
    /// Uncorrected ECC errors over the GPU's life.
    pub dbe_aggregate: Reading<u64>,
    pub retired_pages: Reading<RetiredPages>,
    pub remapped_rows: Reading<RemappedRows>,
    pub throttle: Reading<Throttle>,
    /// The driver's recovery action (`nvmlDeviceGpuRecoveryAction_t`: 0
    /// none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset);
    /// NotSupported from a driver before R565 (see [`FI_GPU_RECOVERY_ACTION`]).
    pub recovery_action: Reading<u32>,
    pub nvlinks: Reading<NvLinks>,
}

impl GpuHealth {
    /// The calls that failed (not NOT_SUPPORTED, not lost).
    pub fn errors(&self) -> Vec<&CallError> {
        fn e<T>(r: &Reading<T>) -> Option<&CallError> {
            match r {
                Reading::Failed(c) => Some(c),
                _ => None,
            }
        }
        let all = [
            self.handle_error.as_ref(),
            e(&self.uuid),
            e(&self.pci_bus_id),
            e(&self.minor),
            e(&self.mig_mode),
            e(&self.ecc_enabled),
            e(&self.dbe_volatile),
            e(&self.dbe_aggregate),
            e(&self.retired_pages),
            e(&self.remapped_rows),
            e(&self.throttle),
            e(&self.recovery_action),
            e(&self.nvlinks),
        ];
        all.into_iter().flatten().collect()
    }
}

/// The node's GPUs' health.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthReading {
    /// NVML unusable (no library, init failed, no device count), or no
    /// worker thread: no GPU was read.
    pub unusable: Option<String>,
    pub device_count: Option<u32>,
    /// In NVML index order; on a hang, those read so far (the last one
    /// partly).
    pub gpus: Vec<GpuHealth>,
    /// Why NVML was unusable: the failing `nvmlInit_v2` or
    /// `nvmlDeviceGetCount_v2` (code `None`: the library or a function of
    /// it could not be loaded).
    pub init_error: Option<CallError>,
    /// The call that did not return within the deadline; the reading
    /// stopped there.
    pub hang: Option<NvmlHang>,
    /// The reading's end ([`Limits::until`]) came first: the call in
    /// progress then; the reading stopped there.
    pub out_of_time: Option<NvmlHang>,
    /// NVML calls made (nvmlInit and the process's session excluded).
    pub nvml_calls: u32,
}

/// How long a reading may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Each NVML call.
    pub per_call: Duration,
    /// `nvmlInit` and the device count, each.
    pub init: Duration,
    /// When the whole reading must end (`None`: no end but the calls').
    pub until: Option<Instant>,
}

/// Read every GPU's health with NVML at `paths`, each NVML call (init
/// included) allowed `deadline_per_call`.  Never panics; returns within
/// about `deadline_per_call` of the slowest call (a call past it ends the
/// reading, see [`crate::bounded`]).
pub fn read_health(paths: &Paths, deadline_per_call: Duration) -> HealthReading {
    read_health_within(paths, &Limits { per_call: deadline_per_call, init: deadline_per_call, until: None })
}

/// [`read_health`] within `limits`: returns by `limits.until` at the
/// latest (and a little time to hand over), with what was read by then.
pub fn read_health_within(paths: &Paths, limits: &Limits) -> HealthReading {
    let paths = paths.clone();
    let init = limits.init;
    match bounded::run_until(limits.per_call, limits.until, move |t: &Tracker<HealthReading>| read_all(t, &paths, init)) {
        Ok(b) => HealthReading { hang: b.hang, out_of_time: b.out_of_time, nvml_calls: b.calls, ..b.out },
        Err(e) => HealthReading { unusable: Some(e), ..Default::default() },
    }
}

/// The process's NVML session, in the worker (nvmlInit may hang too).
pub(crate) fn open<R>(t: &Tracker<R>, paths: &Paths) -> Option<Result<Arc<Session>, String>> {
    t.call("nvmlInit_v2", None, 0, Duration::ZERO, || crate::session(paths).map_err(|e| e.to_string()))
}

fn read_all(t: &Tracker<HealthReading>, paths: &Paths, init: Duration) {
    let s = match t.call_within("nvmlInit_v2", None, 0, init, || crate::session::session_with_code(paths)) {
        Some(Ok(s)) => s,
        Some(Err((e, code))) => {
            let text = match &e {
                DetectError::Init(text) => text.clone(),
                other => other.to_string(),
            };
            // No code: no library, or a function of it missing.
            let answer = code.map_or(Answer::CannotTell, |c| Answer::of_code(c, false));
            let call = CallError { call: "nvmlInit_v2", code, text, answer };
            return t.update(|r| {
                r.unusable = Some(e.to_string());
                r.init_error = Some(call);
            });
        }
        None => return,
    };
    let count = match t.call_within("nvmlDeviceGetCount_v2", None, 1, init, || s.nvml.device_count()) {
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            let call = CallError { call: "nvmlDeviceGetCount_v2", code: return_code(&e), text: s.text(&e), answer: Answer::of(&e, false) };
            return t.update(|r| {
                r.unusable = Some(format!("Failed to get device count: {}", call.text));
                r.init_error = Some(call);
            });
        }
        None => return,
    };
    t.update(|r| r.device_count = Some(count));
    for i in 0..count {
        let mut g = GpuReader { t, s: &s, h: GpuHealth { index: i, ..Default::default() }, pos: i as usize, handle_read: false };
        if g.read().is_none() {
            return;
        }
    }
}

/// One GPU's reading, published to the caller after each call.
struct GpuReader<'a> {
    t: &'a Tracker<HealthReading>,
    s: &'a Session,
    h: GpuHealth,
    pos: usize,
    /// Its handle was had: the calls after it are about the GPU.
    handle_read: bool,
}

impl GpuReader<'_> {
    /// [`GpuReader::publish`], then on.
    fn published(&self) -> Option<()> {
        self.publish();
        Some(())
    }

    fn publish(&self) {
        let h = self.h.clone();
        let pos = self.pos;
        self.t.update(move |r| {
            r.gpus.truncate(pos);
            r.gpus.push(h);
        });
    }

    /// Make one call (counted as `n`) for this GPU (none once it is lost:
    /// `NotRead`); `None` when the reading stopped.  The caller publishes
    /// the field it fills.
    fn get<T>(&mut self, call: &'static str, n: u32, f: impl FnOnce() -> Result<T, NvmlError>) -> Option<Reading<T>> {
        if self.h.lost {
            return Some(Reading::NotRead);
        }
        let r = match self.t.call(call, Some(self.h.index), n, Duration::ZERO, f)? {
            Ok(v) => Reading::Value(v),
            Err(NvmlError::NotSupported) => Reading::NotSupported,
            Err(NvmlError::GpuLost) => {
                self.h.lost = true;
                Reading::Lost
            }
            Err(e) => Reading::Failed(CallError { call, code: return_code(&e), text: self.s.text(&e), answer: Answer::of(&e, self.handle_read) }),
        };
        Some(r)
    }

    fn read(&mut self) -> Option<()> {
        let nvml = &self.s.nvml;
        let i = self.h.index;
        self.publish();
        let dev = match self.get("nvmlDeviceGetHandleByIndex_v2", 1, || nvml.device_by_index(i))? {
            Reading::Value(d) => d,
            Reading::Failed(e) => {
                self.h.handle_error = Some(e);
                return self.published();
            }
            Reading::NotSupported => {
                let text = self.s.extra.error_string(3).unwrap_or_else(|| "Not Supported".into());
                self.h.handle_error = Some(CallError { call: "nvmlDeviceGetHandleByIndex_v2", code: Some(3), text, answer: Answer::of_code(3, false) });
                return self.published();
            }
            Reading::Lost | Reading::NotRead => return self.published(),
        };
        self.handle_read = true;
        self.h.uuid = self.get("nvmlDeviceGetUUID", 1, || dev.uuid())?;
        self.publish();
        self.h.pci_bus_id = self.get("nvmlDeviceGetPciInfo_v3", 1, || dev.pci_info().map(|p| short_bus_id(&p)))?;
        self.publish();
        self.h.minor = self.get("nvmlDeviceGetMinorNumber", 1, || dev.minor_number())?;
        self.publish();
        self.h.mig_mode = self.get("nvmlDeviceGetMigMode", 1, || dev.mig_mode().map(|m| m.current == 1))?;
        self.publish();
        self.ecc(&dev)?;
        self.retired_pages(&dev)?;
        self.h.remapped_rows = self.get("nvmlDeviceGetRemappedRows", 1, || self.s.extra.remapped_rows(&dev))?;
        self.publish();
        self.h.throttle = self.get("nvmlDeviceGetCurrentClocksThrottleReasons", 1, || dev.current_throttle_reasons().map(|r| Throttle::from_bits(r.bits())))?;
        self.publish();
        self.h.recovery_action = self.get("nvmlDeviceGetFieldValues", 1, || recovery_action(&dev))?;
        self.publish();
        self.nvlinks(&dev)?;
        self.publish();
        Some(())
    }

    fn ecc(&mut self, dev: &Device<'_>) -> Option<()> {
        self.h.ecc_enabled = self.get("nvmlDeviceGetEccMode", 1, || dev.is_ecc_enabled().map(|m| m.currently_enabled))?;
        self.publish();
        match self.h.ecc_enabled {
            Reading::Value(true) => {
                let total = |counter| move || dev.total_ecc_errors(MemoryError::Uncorrected, counter);
                self.h.dbe_volatile = self.get("nvmlDeviceGetTotalEccErrors", 1, total(EccCounter::Volatile))?;
                self.publish();
                self.h.dbe_aggregate = self.get("nvmlDeviceGetTotalEccErrors", 1, total(EccCounter::Aggregate))?;
            }
            Reading::Value(false) | Reading::NotSupported => {
                self.h.dbe_volatile = Reading::NotSupported;
                self.h.dbe_aggregate = Reading::NotSupported;
            }
            _ => {}
        }
        self.publish();
        Some(())
    }

    fn retired_pages(&mut self, dev: &Device<'_>) -> Option<()> {
        let mut pages = RetiredPages::default();
        for cause in [RetirementCause::MultipleSingleBitEccErrors, RetirementCause::DoubleBitEccError] {
            let double = matches!(cause, RetirementCause::DoubleBitEccError);
            // nvml-wrapper asks for the count, then (if any) the pages.
            let r = self.get("nvmlDeviceGetRetiredPages", 1, || dev.retired_pages(cause))?;
            let n = match r {
                Reading::Value(list) => u32::try_from(list.len()).unwrap_or(u32::MAX),
                other => {
                    self.h.retired_pages = map_none(other);
                    return self.published();
                }
            };
            if n > 0 {
                self.t.add_calls(1);
            }
            if double {
                pages.double_bit = n;
            } else {
                pages.single_bit = n;
            }
        }
        self.h.retired_pages = match self.get("nvmlDeviceGetRetiredPagesPendingStatus", 1, || dev.are_pages_pending_retired())? {
            Reading::Value(pending) => Reading::Value(RetiredPages { pending, ..pages }),
            other => map_none(other),
        };
        self.publish();
        Some(())
    }

    /// The lanes' states, as detection reads them: an invalid lane does
    /// not exist, NOT_SUPPORTED means no NVLink at all.
    fn nvlinks(&mut self, dev: &Device<'_>) -> Option<()> {
        let mut links = NvLinks::default();
        for lane in 0..crate::detect::NVLINK_MAX_LINKS {
            match self.get("nvmlDeviceGetNvLinkState", 1, || dev.link_wrapper_for(lane).is_active())? {
                Reading::Value(true) => links.up.push(lane),
                Reading::Value(false) => links.down.push(lane),
                Reading::Failed(CallError { code: Some(2), .. }) => {}
                Reading::NotSupported if lane == 0 => {
                    self.h.nvlinks = Reading::NotSupported;
                    return Some(());
                }
                Reading::NotSupported => break,
                other => {
                    self.h.nvlinks = map_none(other);
                    return Some(());
                }
            }
        }
        self.h.nvlinks = Reading::Value(links);
        Some(())
    }
}

/// The recovery action field, in one `nvmlDeviceGetFieldValues` call: the
/// call's error, else the value's own (`NOT_SUPPORTED` or
/// `INVALID_ARGUMENT` from a driver that lacks the field), else the value
/// as an unsigned integer.  A value of a type nvml.h does not give the
/// field (or none at all) is read as NOT_SUPPORTED: not one this build can
/// read, so nothing is known.
fn recovery_action(dev: &Device<'_>) -> Result<u32, NvmlError> {
    let sample = match dev.field_values_for(&[FieldId(FI_GPU_RECOVERY_ACTION)])?.into_iter().next() {
        Some(Ok(sample)) => sample,
        // The value's type is not one nvml-wrapper knows.
        Some(Err(_)) | None => return Err(NvmlError::NotSupported),
    };
    match sample.value? {
        SampleValue::U32(v) => Ok(v),
        SampleValue::U64(v) => u32::try_from(v).map_err(|_| NvmlError::NotSupported),
        SampleValue::I64(v) => u32::try_from(v).map_err(|_| NvmlError::NotSupported),
        SampleValue::F64(_) => Err(NvmlError::NotSupported),
    }
}

/// A reading without a value as a reading of another type.
fn map_none<T, U>(r: Reading<T>) -> Reading<U> {
    match r {
        Reading::Value(_) | Reading::NotRead => Reading::NotRead,
        Reading::NotSupported => Reading::NotSupported,
        Reading::Lost => Reading::Lost,
        Reading::Failed(e) => Reading::Failed(e),
    }
}

/// `dddd:bb:dd.f` from NVML's PCI info (whose bus id has an 8-digit domain
/// and upper-case hex).
pub fn short_bus_id(p: &nvml_wrapper::struct_wrappers::device::PciInfo) -> String {
    let function = p.bus_id.rsplit('.').next().and_then(|f| u32::from_str_radix(f, 16).ok()).unwrap_or(0);
    format!("{:04x}:{:02x}:{:02x}.{:x}", p.domain & 0xffff, p.bus & 0xff, p.device & 0x1f, function & 0x7)
}

/// One XID critical error NVML delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XidEvent {
    /// NVML index of its GPU (`None`: a device that was not asked for).
    pub gpu: Option<u32>,
    pub xid: u64,
    /// The MIG device's GPU and compute instance it is attributed to.
    pub gpu_instance: Option<u32>,
    pub compute_instance: Option<u32>,
    /// When it was received (after the watch started / wall clock).
    pub after: Duration,
    pub at: SystemTime,
}

/// What a step's watch ([`crate::step_watch`]) saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XidWatch {
    /// As for [`HealthReading::unusable`] (or no event set).
    pub unusable: Option<String>,
    /// The GPUs registered for XID events.
    pub registered: Vec<u32>,
    /// Per GPU (`None`: the set), calls that failed; lost GPUs included.
    pub errors: Vec<(Option<u32>, CallError)>,
    /// In the order NVML delivered them.
    pub events: Vec<XidEvent>,
    pub hang: Option<NvmlHang>,
    pub nvml_calls: u32,
    /// The registered GPUs' UUIDs and PCI bus ids, where read (only
    /// [`crate::step_watch`] reads them).
    pub ids: Vec<GpuIds>,
}

/// A GPU's NVML index, UUID and PCI bus id (`dddd:bb:dd.f`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuIds {
    pub index: u32,
    pub uuid: Option<String>,
    pub pci: Option<String>,
}

pub(crate) fn error(s: &Session, call: &'static str, e: &NvmlError) -> CallError {
    CallError { call, code: return_code(e), text: s.text(e), answer: Answer::of(e, call != "nvmlDeviceGetHandleByIndex_v2") }
}

/// An event set with the XID critical errors of `devs` registered.  A
/// device NVML refuses is dropped from `devs`, and as nvml-wrapper then
/// frees the set, a new one is made for the others.
pub(crate) fn register<'n>(
    t: &Tracker<XidWatch>,
    s: &'n Session,
    devs: &mut Vec<(u32, Device<'n>)>,
    fail: &dyn Fn(Option<u32>, &'static str, &NvmlError),
) -> Option<Result<EventSet<'n>, String>> {
    'again: loop {
        let mut set = match t.call("nvmlEventSetCreate", None, 1, Duration::ZERO, || s.nvml.create_event_set())? {
            Ok(set) => set,
            Err(e) => return Some(Err(format!("Failed to create an NVML event set: {}", s.text(&e)))),
        };
        for k in 0..devs.len() {
            let (i, dev) = (devs[k].0, &devs[k].1);
            match t.call("nvmlDeviceRegisterEvents", Some(i), 1, Duration::ZERO, || dev.register_events(EventTypes::CRITICAL_XID_ERROR, set))? {
                Ok(back) => set = back,
                Err(e) => {
                    fail(Some(i), "nvmlDeviceRegisterEvents", &e.error);
                    devs.remove(k);
                    continue 'again;
                }
            }
        }
        return Some(Ok(set));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_means_what_the_table_says() {
        use Answer::*;
        for (code, before, after) in [
            (2, Transient, CannotTell),
            (3, CannotTell, CannotTell),
            (4, CannotTell, CannotTell),
            (9, Transient, Transient),
            (10, Transient, Transient),
            (13, CannotTell, CannotTell),
            (15, Fault, Fault),
            (16, Fault, Fault),
            (18, Transient, Transient),
            (21, CannotTell, CannotTell),
            (23, Transient, Transient),
            (25, CannotTell, CannotTell),
            (26, CannotTell, CannotTell),
            (27, Transient, Transient),
            (28, Transient, Fault),
            (29, Transient, Transient),
            (999, Transient, Fault),
            (12345, Transient, Transient),
        ] {
            assert_eq!((Answer::of_code(code, false), Answer::of_code(code, true)), (before, after), "code {code}");
        }
        assert_eq!(Answer::of(&NvmlError::FailedToLoadSymbol("x".into()), true), CannotTell);
        assert_eq!(Answer::of(&NvmlError::UnexpectedVariant(27), true), Transient);
        assert_eq!(Answer::of(&NvmlError::Timeout, true), Transient);
        assert_eq!(Answer::of(&NvmlError::Unknown, true), Fault);
        assert_eq!(Answer::of(&NvmlError::IncorrectBits(nvml_wrapper::error::Bits::U32(1)), true), Transient);
    }
}
