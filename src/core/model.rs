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
/// lines and in the `GRES_PARSABLE` form.
pub fn flags_to_string(flags: ConfFlags) -> String {
    let mut out: Vec<&str> = Vec::new();
    if flags.has(ConfFlags::COUNT_ONLY) {
        out.push("CountOnly");
    }
    if flags.has(ConfFlags::ENV_NVML) {
        out.push("nvidia_gpu_env");
    }
    if flags.has(ConfFlags::ENV_RSMI) {
        out.push("amd_gpu_env");
    }
    if flags.has(ConfFlags::ENV_ONEAPI) {
        out.push("intel_gpu_env");
    }
    if flags.has(ConfFlags::ENV_OPENCL) {
        out.push("opencl_env");
    }
    if flags.has(ConfFlags::ONE_SHARING) {
        out.push("one_sharing");
    }
    out.join(",")
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
