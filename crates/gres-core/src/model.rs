//! The data model shared by every plugin: gres.conf records, device files,
//! bitmaps and the per-node flags.  Pure Rust; the FFI layer converts to and
//! from Slurm's C structures.

use std::fmt;

/// `GRES_CONF_*` bits of a gres.conf record (`config_flags`).  The values are
/// Slurm 22.05's; `ffi::sys` asserts at compile time that they still match.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ConfFlags(pub u32);

impl ConfFlags {
    pub const HAS_MULT: u32 = 1 << 0;
    pub const HAS_FILE: u32 = 1 << 1;
    pub const HAS_TYPE: u32 = 1 << 2;
    pub const COUNT_ONLY: u32 = 1 << 3;
    pub const LOADED: u32 = 1 << 4;
    pub const ENV_NVML: u32 = 1 << 5;
    pub const ENV_RSMI: u32 = 1 << 6;
    pub const ENV_OPENCL: u32 = 1 << 7;
    pub const ENV_DEF: u32 = 1 << 8;
    pub const SHARED: u32 = 1 << 9;
    pub const ONE_SHARING: u32 = 1 << 10;
    pub const ENV_ONEAPI: u32 = 1 << 11;
    /// `GRES_CONF_EXPLICIT` (23.02 on; `Flags=explicit`).
    pub const EXPLICIT: u32 = 1 << 12;
    /// Bit 14: `GRES_CONF_GLOBAL_INDEX` (23.11.4 – 25.11) or
    /// `GRES_CONF_UUID` (26.05; `Flags=env_uuid`); see
    /// [`crate::behaviour::ConfBit14`].
    pub const BIT14: u32 = 1 << 14;
    /// `GRES_CONF_AUTODETECT` (24.11 on): a record a gpu plugin detected
    /// (slurmctld words its drain reason for GPU cores that split a socket
    /// by it).
    pub const AUTODETECT: u32 = 1 << 15;
    /// `GRES_CONF_MIG` (25.11 on): a MIG record of gpu/nvml.
    pub const MIG: u32 = 1 << 17;
    /// Every `ENV_*` bit that selects an environment variable.
    pub const ENV_SET: u32 = Self::ENV_NVML | Self::ENV_RSMI | Self::ENV_OPENCL | Self::ENV_ONEAPI;

    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
    pub fn set(&mut self, bit: u32) {
        self.0 |= bit;
    }
    pub fn clear(&mut self, bit: u32) {
        self.0 &= !bit;
    }
}

impl fmt::Debug for ConfFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConfFlags({})", flags_to_string(*self))
    }
}

/// Slurm's own spelling of a record's flags (`gres_flags2str()`), used in log
/// lines and in the `GRES_PARSABLE` form: the internal names, in Slurm's
/// order (`HAS_MULT` is never printed).
pub fn flags_to_string(flags: ConfFlags) -> String {
    const NAMES: [(u32, &str); 11] = [
        (ConfFlags::COUNT_ONLY, "CountOnly"),
        (ConfFlags::HAS_FILE, "HAS_FILE"),
        (ConfFlags::LOADED, "LOADED"),
        (ConfFlags::HAS_TYPE, "HAS_TYPE"),
        (ConfFlags::ENV_NVML, "ENV_NVML"),
        (ConfFlags::ENV_RSMI, "ENV_RSMI"),
        (ConfFlags::ENV_ONEAPI, "ENV_ONEAPI"),
        (ConfFlags::ENV_OPENCL, "ENV_OPENCL"),
        (ConfFlags::ENV_DEF, "ENV_DEFAULT"),
        (ConfFlags::SHARED, "SHARED"),
        (ConfFlags::ONE_SHARING, "ONE_SHARING"),
    ];
    let names: Vec<&str> = NAMES.iter().filter(|(bit, _)| flags.has(*bit)).map(|(_, name)| *name).collect();
    names.join(",")
}

/// Slurm's `gres_build_id()`: the plugin id of a GRES name (a shifted sum of
/// its bytes, read as C `char`, so the result matches slurmd's on this
/// platform even for non-ASCII names).
pub fn gres_build_id(name: &str) -> u32 {
    let mut id: u32 = 0;
    let mut shift: u32 = 0;
    for byte in name.bytes() {
        let c = byte as std::ffi::c_char as i32;
        id = id.wrapping_add(c.wrapping_shl(shift) as u32);
        shift = (shift + 8) % 32;
    }
    id
}

/// Slurm's log levels, for log lines the core hands back to the plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Error,
    Info,
    Verbose,
    Debug,
    Debug2,
    Debug3,
}

/// One line to log, worded like the stock plugin's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub level: LogLevel,
    pub message: String,
}

impl LogLine {
    pub fn new(level: LogLevel, message: impl Into<String>) -> Self {
        LogLine { level, message: message.into() }
    }
}

/// The lines a core step logs on its way, each worded like the stock
/// plugin's.  Lines more verbose than `max` (what the daemon's log level
/// lets through) are neither formatted nor kept: Slurm drops them with one
/// comparison, and `slurmd -G`, for one, runs at info while the record
/// lists are logged at verbose or debug.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    max: LogLevel,
    lines: Vec<LogLine>,
}

impl Default for Log {
    /// Keeps every line.
    fn default() -> Self {
        Log::new(LogLevel::Debug3)
    }
}

impl Log {
    /// Keeps the lines at `max` and below; errors are always kept.
    pub fn new(max: LogLevel) -> Self {
        Log { max: max.max(LogLevel::Error), lines: Vec::new() }
    }
    pub fn wants(&self, level: LogLevel) -> bool {
        level <= self.max
    }
    /// A line whose text is already at hand.
    pub fn push(&mut self, level: LogLevel, message: impl Into<String>) {
        if self.wants(level) {
            self.lines.push(LogLine::new(level, message));
        }
    }
    /// A line whose text is only built when it is kept.
    pub fn push_with(&mut self, level: LogLevel, message: impl FnOnce() -> String) {
        if self.wants(level) {
            self.lines.push(LogLine { level, message: message() });
        }
    }
    /// One line per item (a record list), built only when kept.
    pub fn push_each<T>(&mut self, level: LogLevel, items: &[T], line: impl Fn(&T) -> String) {
        if self.wants(level) {
            self.lines.extend(items.iter().map(|i| LogLine { level, message: line(i) }));
        }
    }
    pub fn lines(&self) -> &[LogLine] {
        &self.lines
    }
    pub fn into_lines(self) -> Vec<LogLine> {
        self.lines
    }
}

/// Internal flags slurmd passes to the `*_set_env` functions
/// (`gres_internal_flags_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InternalFlags(pub u32);

impl InternalFlags {
    pub const VERBOSE: u32 = 1 << 0;
    pub const PROTECT_ENV: u32 = 1 << 1;
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
}

/// A fixed-size bitmap: a Rust copy of a Slurm `bitstr_t`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Bitmap {
    bits: Vec<bool>,
}

impl Bitmap {
    pub fn new(size: usize) -> Self {
        Bitmap { bits: vec![false; size] }
    }
    pub fn from_indices(size: usize, set: &[usize]) -> Self {
        let mut b = Bitmap::new(size);
        for &i in set {
            b.set(i);
        }
        b
    }
    pub fn size(&self) -> usize {
        self.bits.len()
    }
    /// Out-of-range bits read as clear (a bitmap from slurmd may be shorter
    /// than our device list after a reconfiguration).
    pub fn test(&self, i: usize) -> bool {
        self.bits.get(i).copied().unwrap_or(false)
    }
    /// Setting a bit past the end grows the bitmap.
    pub fn set(&mut self, i: usize) {
        if i >= self.bits.len() {
            self.bits.resize(i + 1, false);
        }
        self.bits[i] = true;
    }
    pub fn count(&self) -> usize {
        self.bits.iter().filter(|b| **b).count()
    }
    /// The bits set in both (Slurm's `bit_and`), as long as `self`.
    pub fn and(&self, other: &Bitmap) -> Bitmap {
        Bitmap { bits: self.bits.iter().enumerate().map(|(i, b)| *b && other.test(i)).collect() }
    }
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| i)
    }
    pub fn first(&self) -> Option<usize> {
        self.ones().next()
    }
    pub fn last(&self) -> Option<usize> {
        self.bits.iter().rposition(|b| *b)
    }
    /// Slurm's `bit_fmt_hexmask_trim()` form (`0x5`), used in verbose logs.
    pub fn hexmask_trim(&self) -> String {
        let last = match self.last() {
            None => return "0x0".to_string(),
            Some(l) => l,
        };
        let mut digits = String::new();
        let nibbles = last / 4 + 1;
        for n in (0..nibbles).rev() {
            let mut v = 0u8;
            for b in 0..4 {
                if self.test(n * 4 + b) {
                    v |= 1 << b;
                }
            }
            digits.push(char::from_digit(v as u32, 16).unwrap_or('0').to_ascii_uppercase());
        }
        format!("0x{digits}")
    }
}

/// Why a range string (`0-3,8`) does not fit a bitmap.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum RangeError {
    #[error("invalid range list \"{0}\"")]
    Syntax(String),
    #[error("index {index} in \"{ranges}\" is past the last of {size} bits")]
    OutOfRange { ranges: String, index: usize, size: usize },
}

impl Bitmap {
    /// Slurm's `bit_unfmt()`: a bitmap of `size` bits with the bits of a
    /// range list (`0-3,8`) set; an empty list sets none.  Stricter than
    /// Slurm, which skips characters it does not know: only digits, `-` and
    /// `,` are accepted, every item must be `N` or `N-M` with `N <= M`, and
    /// the `A-B:step` form is refused.
    pub fn from_ranges(size: usize, ranges: &str) -> Result<Bitmap, RangeError> {
        let syntax = || RangeError::Syntax(ranges.to_string());
        let mut bitmap = Bitmap::new(size);
        if ranges.is_empty() {
            return Ok(bitmap);
        }
        for item in ranges.split(',') {
            let (lo, hi) = item.split_once('-').unwrap_or((item, item));
            let number = |s: &str| -> Result<usize, RangeError> {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(syntax());
                }
                // Anything that does not fit a usize is past the end anyway.
                Ok(s.parse::<usize>().unwrap_or(usize::MAX))
            };
            let (lo, hi) = (number(lo)?, number(hi)?);
            if lo > hi {
                return Err(syntax());
            }
            if hi >= size {
                return Err(RangeError::OutOfRange { ranges: ranges.to_string(), index: hi, size });
            }
            bitmap.bits[lo..=hi].iter_mut().for_each(|b| *b = true);
        }
        Ok(bitmap)
    }

    /// Slurm's `bit_fmt_full()`: the set bits as a range list (`0-3,8`);
    /// empty when no bit is set (where Slurm returns NULL).
    pub fn to_ranges(&self) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < self.bits.len() {
            if !self.bits[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i + 1 < self.bits.len() && self.bits[i + 1] {
                i += 1;
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == i {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{i}"));
            }
            i += 1;
        }
        out
    }

    /// Slurm's `bit_realloc()`: grow (new bits clear) or shrink to `size`.
    pub fn resize(&mut self, size: usize) {
        self.bits.resize(size, false);
    }
}

impl fmt::Debug for Bitmap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bitmap[{}]{:?}", self.size(), self.ones().collect::<Vec<_>>())
    }
}

/// One gres.conf record, detected GPU or configured line: the Rust form of
/// Slurm's `gres_slurmd_conf_t`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GresRecord {
    pub flags: ConfFlags,
    pub count: u64,
    /// Number of CPUs on the node the `cpus`/`cpus_bitmap` refer to.
    pub cpu_cnt: u32,
    /// Abstract core range as written (`0-3,8`), if any.
    pub cpus: Option<String>,
    /// The same cores as a bitmap of `cpu_cnt` bits, if any.
    pub cpus_bitmap: Option<Bitmap>,
    /// Device file expression (`/dev/nvidia[0-3]`), or for MultipleFiles a
    /// comma-separated list.
    pub file: Option<String>,
    pub links: Option<String>,
    pub name: String,
    pub type_name: Option<String>,
    pub unique_id: Option<String>,
    pub plugin_id: u32,
}

/// Kind of a device node (`gres_device_type_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DevType {
    #[default]
    None = 0,
    Block = 1,
    Char = 2,
}

impl DevType {
    pub fn from_u32(v: u32) -> Option<DevType> {
        match v {
            0 => Some(DevType::None),
            1 => Some(DevType::Block),
            2 => Some(DevType::Char),
            _ => None,
        }
    }
}

/// One device file of the node: the Rust form of `gres_device_t`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GresDevice {
    /// Bit of the GRES bitmap this file belongs to (several files share a bit
    /// with `MultipleFiles`).
    pub index: u32,
    /// Number at the end of the file name (`/dev/nvidia3` -> 3), or a number
    /// past the largest one when the name has none.
    pub dev_num: i32,
    pub dev_type: DevType,
    pub major: u32,
    pub minor: u32,
    pub path: String,
    pub unique_id: Option<String>,
    /// A MIG device: its record had `GRES_CONF_MIG` (`GRES_DEV_MIG` of the
    /// releases that have it; see [`crate::behaviour::UniqueIdInEnv`]).
    pub mig: bool,
}

/// Slurm's `NO_VAL`, the major/minor of a device whose `stat()` failed.
pub const NO_VAL: u32 = 0xffff_fffe;

/// A job's allocation of one GRES, as the Prolog/Epilog code sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobAlloc {
    pub node_cnt: u32,
    /// Per node of the job: the allocated GRES bits, if any.
    pub bit_alloc: Vec<Option<Bitmap>>,
    /// Per node of the job: the allocated count, if slurmd keeps one.
    pub cnt_node_alloc: Option<Vec<u64>>,
}

/// What a plugin keeps for its Prolog/Epilog environment (Slurm's
/// `gres_epilog_info_t`, without the fields slurmd fills in itself).
pub type EpilogInfo = JobAlloc;

/// One GPU's energy reading (`gpu_status_t` fields the plugin fills).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuEnergy {
    /// Total energy since the driver loaded, in joules.
    pub consumed_energy_j: u64,
    /// Current power draw, in watts.
    pub current_watts: u32,
}

/// `n` NVIDIA GPUs `/dev/nvidia0..`, character devices 195:i (for the unit
/// tests of this crate and of the crates above it).
#[doc(hidden)]
pub fn test_devices(n: u32) -> Vec<GresDevice> {
    (0..n)
        .map(|i| GresDevice {
            index: i,
            dev_num: i as i32,
            dev_type: DevType::Char,
            major: 195,
            minor: i,
            path: format!("/dev/nvidia{i}"),
            unique_id: None,
            mig: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_builds_only_the_lines_it_keeps() {
        let mut log = Log::new(LogLevel::Info);
        let built = std::cell::Cell::new(0);
        let line = |text: &str| {
            built.set(built.get() + 1);
            text.to_string()
        };
        log.push_with(LogLevel::Debug, || line("debug"));
        log.push_with(LogLevel::Info, || line("info"));
        log.push(LogLevel::Verbose, "verbose");
        log.push_each(LogLevel::Debug2, &["a", "b"], |s| line(s));
        log.push_each(LogLevel::Error, &["c"], |s| line(s));
        assert_eq!(built.get(), 2, "only the kept lines are formatted");
        assert_eq!(log.into_lines(), vec![LogLine::new(LogLevel::Info, "info"), LogLine::new(LogLevel::Error, "c")]);
        // Errors are kept whatever the level; the default keeps everything.
        assert!(Log::new(LogLevel::Error).wants(LogLevel::Error));
        assert!(Log::default().wants(LogLevel::Debug3));
    }

    #[test]
    fn flags_spelled_like_gres_flags2str() {
        assert_eq!(flags_to_string(ConfFlags(0)), "");
        assert_eq!(
            flags_to_string(ConfFlags(u32::MAX)),
            "CountOnly,HAS_FILE,LOADED,HAS_TYPE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT,SHARED,ONE_SHARING"
        );
        assert_eq!(flags_to_string(ConfFlags(ConfFlags::HAS_MULT | ConfFlags::HAS_FILE)), "HAS_FILE");
        assert_eq!(
            flags_to_string(ConfFlags(ConfFlags::HAS_FILE | ConfFlags::ENV_SET | ConfFlags::ENV_DEF)),
            "HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT"
        );
    }

    #[test]
    fn plugin_ids() {
        assert_eq!(gres_build_id("gpu"), 7_696_487);
        assert_eq!(gres_build_id("mps"), 7_565_421);
        assert_eq!(gres_build_id(""), 0);
        assert_eq!(gres_build_id("abcde"), gres_build_id("ebcda"));
    }

    #[test]
    fn range_lists() {
        let b = Bitmap::from_ranges(16, "0-3,8,10-11").unwrap();
        assert_eq!(b, Bitmap::from_indices(16, &[0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(b.to_ranges(), "0-3,8,10-11");
        assert_eq!(Bitmap::from_ranges(4, "").unwrap(), Bitmap::new(4));
        assert_eq!(Bitmap::new(4).to_ranges(), "");
        assert_eq!(Bitmap::from_ranges(4, "3").unwrap().to_ranges(), "3");
        assert_eq!(Bitmap::from_ranges(8, "1-1,1").unwrap().to_ranges(), "1");
        assert_eq!(Bitmap::from_ranges(4, "0-4"), Err(RangeError::OutOfRange { ranges: "0-4".into(), index: 4, size: 4 }));
        assert!(matches!(Bitmap::from_ranges(0, "0"), Err(RangeError::OutOfRange { .. })));
        for bad in ["3-1", "a", "1,", ",1", "1-", "-1", " 1", "1-3:2", "99999999999999999999999"] {
            assert!(Bitmap::from_ranges(4, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resize_keeps_low_bits() {
        let mut b = Bitmap::from_indices(8, &[1, 6]);
        b.resize(4);
        assert_eq!(b, Bitmap::from_indices(4, &[1]));
        b.resize(6);
        assert_eq!(b, Bitmap::from_indices(6, &[1]));
    }
}
