//! What can be wrong with a GPU, and a [`Finding`]: one fault, the GPU it
//! concerns and where the tool saw it.  Plain data; what a fault *means*
//! (ignore, warn, drain) is the table's business ([`crate::catalog`]).

use std::fmt;

/// The driver's GPU recovery action (NVML `nvmlDeviceGpuRecoveryAction_t`:
/// NONE 0, GPU_RESET 1, NODE_REBOOT 2, DRAIN_P2P 3, DRAIN_AND_RESET 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecoveryKind {
    /// No action needed (the tool should not report it).
    None,
    /// Reset the GPU.
    GpuReset,
    /// Reboot the node.
    NodeReboot,
    /// Stop peer-to-peer (NVLink, P2P) traffic to the GPU, then ask again:
    /// the driver then says which action it needs.
    DrainP2p,
    /// The GPU runs at reduced capacity: let its work drain, then reset it.
    DrainAndReset,
}

impl RecoveryKind {
    /// The NVML value, if it is one NVML documents.
    pub fn from_nvml(value: u32) -> Option<Self> {
        Some(match value {
            0 => Self::None,
            1 => Self::GpuReset,
            2 => Self::NodeReboot,
            3 => Self::DrainP2p,
            4 => Self::DrainAndReset,
            _ => return None,
        })
    }

    /// A short word for reasons and metrics.
    pub fn word(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::GpuReset => "gpu_reset",
            Self::NodeReboot => "node_reboot",
            Self::DrainP2p => "drain_p2p",
            Self::DrainAndReset => "drain_and_reset",
        }
    }
}

/// Why the GPU slows itself down (NVML clock event reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThrottleKind {
    /// Software or hardware thermal slowdown.
    Thermal,
    /// Software power cap or hardware power brake.
    Power,
    /// Hardware slowdown (`HW_SLOWDOWN`): thermal or power, as the board
    /// decided.
    HwSlowdown,
}

impl ThrottleKind {
    /// A short word for reasons and metrics.
    pub fn word(self) -> &'static str {
        match self {
            Self::Thermal => "thermal",
            Self::Power => "power",
            Self::HwSlowdown => "hw_slowdown",
        }
    }
}

/// One thing wrong with a GPU (or with the node's view of its GPUs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// An XID the driver wrote to the kernel log.
    Xid {
        /// The XID number.
        code: u32,
        /// The process the driver named, when it named one.
        pid: Option<u32>,
        /// The process name, when the driver gave one.
        process: Option<String>,
        /// The rest of the driver's line.
        message: String,
    },
    /// Volatile (since the driver loaded) double-bit ECC errors.
    DbeVolatile(u64),
    /// Pages waiting to be retired (pre-Ampere page retirement).
    RetirePending(u64),
    /// Rows waiting to be remapped at the next GPU reset.
    RemapPending,
    /// A row remapping failed: the bank has no spare rows left.
    RemapFailure,
    /// The driver asks for a recovery action.
    RecoveryAction(RecoveryKind),
    /// NVML says the GPU is lost (`NVML_ERROR_GPU_IS_LOST`).
    GpuLost,
    /// An NVML call failed.
    NvmlError {
        /// The call, e.g. `nvmlDeviceGetHandleByIndex`.
        call: String,
        /// NVML's error string.
        text: String,
    },
    /// An NVML answer that may pass (a timeout, a slow call, a busy
    /// driver), seen in `runs` checks in a row: a warning until it has
    /// lasted `needed` checks, when the tool reports the fault it stands
    /// for ([`Fault::NvmlError`] or [`Fault::NvmlHang`]) instead.
    NvmlTransient {
        /// The call, e.g. `nvmlDeviceGetTotalEccErrors`.
        call: String,
        /// NVML's error string, or how long the call ran.
        text: String,
        /// Checks in a row that saw it, this one included.
        runs: u32,
        /// Checks in a row after which it is a fault.
        needed: u32,
    },
    /// An NVML call did not return in time.
    NvmlHang {
        /// The call.
        call: String,
        /// How long the tool waited, in milliseconds.
        ms: u64,
    },
    /// The ways of counting GPUs disagree.
    CountMismatch {
        /// GPUs NVML lists.
        nvml: u32,
        /// `/dev/nvidiaN` files.
        dev_files: u32,
        /// NVIDIA display/3D controllers on the PCI bus.
        pci: u32,
        /// GPUs the node's configuration declares, when known.
        configured: Option<u32>,
    },
    /// An NVLink that was up is down.
    NvlinkDown(u32),
    /// The GPU throttles itself.
    Throttle(ThrottleKind),
}

/// A fault's kind without its data: the key of the table and of the site's
/// overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// An XID, by number.
    Xid(u32),
    /// [`Fault::DbeVolatile`].
    DbeVolatile,
    /// [`Fault::RetirePending`].
    RetirePending,
    /// [`Fault::RemapPending`].
    RemapPending,
    /// [`Fault::RemapFailure`].
    RemapFailure,
    /// [`Fault::RecoveryAction`].
    RecoveryAction,
    /// [`Fault::GpuLost`].
    GpuLost,
    /// [`Fault::NvmlError`].
    NvmlError,
    /// [`Fault::NvmlTransient`].
    NvmlTransient,
    /// [`Fault::NvmlHang`].
    NvmlHang,
    /// [`Fault::CountMismatch`].
    CountMismatch,
    /// [`Fault::NvlinkDown`].
    NvlinkDown,
    /// [`Fault::Throttle`].
    Throttle,
}

impl FaultKind {
    /// Every kind that is not an XID, with the word the override file and
    /// the metrics use for it.
    pub const NAMED: [(FaultKind, &'static str); 12] = [
        (FaultKind::DbeVolatile, "dbe"),
        (FaultKind::RetirePending, "retire_pending"),
        (FaultKind::RemapPending, "remap_pending"),
        (FaultKind::RemapFailure, "remap_failure"),
        (FaultKind::RecoveryAction, "recovery_action"),
        (FaultKind::GpuLost, "gpu_lost"),
        (FaultKind::NvmlError, "nvml_error"),
        (FaultKind::NvmlTransient, "nvml_transient"),
        (FaultKind::NvmlHang, "nvml_hang"),
        (FaultKind::CountMismatch, "count_mismatch"),
        (FaultKind::NvlinkDown, "nvlink_down"),
        (FaultKind::Throttle, "throttle"),
    ];

    /// The word for this kind (`xid` for every XID).
    pub fn word(self) -> &'static str {
        match self {
            FaultKind::Xid(_) => "xid",
            other => FaultKind::NAMED.iter().find(|(k, _)| *k == other).map_or("unknown", |(_, w)| w),
        }
    }

    /// The kind a word names (not `xid`, which needs a number).
    pub fn from_word(word: &str) -> Option<Self> {
        FaultKind::NAMED.iter().find(|(_, w)| *w == word).map(|(k, _)| *k)
    }
}

impl Fault {
    /// This fault's kind.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Xid { code, .. } => FaultKind::Xid(*code),
            Fault::DbeVolatile(_) => FaultKind::DbeVolatile,
            Fault::RetirePending(_) => FaultKind::RetirePending,
            Fault::RemapPending => FaultKind::RemapPending,
            Fault::RemapFailure => FaultKind::RemapFailure,
            Fault::RecoveryAction(_) => FaultKind::RecoveryAction,
            Fault::GpuLost => FaultKind::GpuLost,
            Fault::NvmlError { .. } => FaultKind::NvmlError,
            Fault::NvmlTransient { .. } => FaultKind::NvmlTransient,
            Fault::NvmlHang { .. } => FaultKind::NvmlHang,
            Fault::CountMismatch { .. } => FaultKind::CountMismatch,
            Fault::NvlinkDown(_) => FaultKind::NvlinkDown,
            Fault::Throttle(_) => FaultKind::Throttle,
        }
    }

    /// Whether the fault is an event (seen once, in the log) rather than a
    /// state the next check reads again.  An event cannot "clear": a drain
    /// for one is resumed only after the GPU reset or the node rebooted.
    pub fn is_event(&self) -> bool {
        matches!(self, Fault::Xid { .. })
    }

    /// The fault's own words, without the table's short name: `dbe 2`,
    /// `nvlink 3 down`, `nvml hang nvmlDeviceGetUUID 5000ms`.
    pub fn detail(&self) -> String {
        match self {
            Fault::Xid { code, .. } => format!("xid {code}"),
            Fault::DbeVolatile(n) => format!("dbe {n}"),
            Fault::RetirePending(n) => format!("retire pending {n}"),
            Fault::RemapPending => "remap pending".to_owned(),
            Fault::RemapFailure => "remap failure".to_owned(),
            Fault::RecoveryAction(k) => format!("recovery action {}", k.word()),
            Fault::GpuLost => "gpu lost".to_owned(),
            Fault::NvmlError { call, text } => format!("nvml {call}: {text}"),
            Fault::NvmlTransient { call, text, runs, needed } => format!("nvml {call}: {text} ({runs} of {needed} checks)"),
            Fault::NvmlHang { call, ms } => format!("nvml hang {call} {ms}ms"),
            Fault::CountMismatch { nvml, dev_files, pci, configured } => {
                let conf = configured.map_or_else(|| "?".to_owned(), |c| c.to_string());
                format!("gpu count nvml {nvml} dev {dev_files} pci {pci} conf {conf}")
            }
            Fault::NvlinkDown(link) => format!("nvlink {link} down"),
            Fault::Throttle(k) => format!("throttle {}", k.word()),
        }
    }
}

/// The GPU a finding concerns; every part is optional (a count mismatch
/// concerns no one GPU, an XID names only a PCI bus id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuRef {
    /// NVML's index.
    pub index: Option<u32>,
    /// `GPU-xxxxxxxx-...`.
    pub uuid: Option<String>,
    /// `0000:41:00.0`, the 13-character form.
    pub pci: Option<String>,
}

impl GpuRef {
    /// A GPU known only by its PCI bus id.
    pub fn pci(pci: impl Into<String>) -> Self {
        GpuRef { pci: Some(pci.into()), ..GpuRef::default() }
    }

    /// Whether nothing identifies a GPU (a node-wide finding).
    pub fn is_node(&self) -> bool {
        self.index.is_none() && self.uuid.is_none() && self.pci.is_none()
    }
}

/// Where the tool saw a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `/dev/kmsg`, with the record's sequence number.
    Kmsg {
        /// The kernel's sequence number.
        seq: u64,
    },
    /// A kernel log file (dmesg or syslog text), with the line number.
    LogFile {
        /// 1-based line number.
        line: u64,
    },
    /// An NVML query.
    Nvml,
    /// `/dev/nvidia*`.
    DevFiles,
    /// The PCI bus (sysfs).
    Pci,
    /// The node's configuration.
    Config,
    /// Our gpu/nvml in a step's slurmstepd, which NVML told of the XID
    /// ([`crate::steps`]).
    Step {
        /// The step, when slurmstepd could say.
        step: Option<crate::step_id::StepId>,
        /// The slurmstepd's process id.
        pid: u32,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Kmsg { seq } => write!(f, "kmsg seq {seq}"),
            Source::LogFile { line } => write!(f, "log line {line}"),
            Source::Nvml => f.write_str("nvml"),
            Source::DevFiles => f.write_str("/dev/nvidia*"),
            Source::Pci => f.write_str("pci"),
            Source::Config => f.write_str("config"),
            Source::Step { step: Some(s), .. } => write!(f, "step {s}"),
            Source::Step { step: None, pid } => write!(f, "slurmstepd pid {pid}"),
        }
    }
}

/// One fault on one GPU, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What is wrong.
    pub fault: Fault,
    /// Which GPU.
    pub gpu: GpuRef,
    /// Where the tool saw it.
    pub source: Source,
    /// When the kernel logged it, in microseconds since the boot (kernel
    /// XIDs whose record or line says).
    pub uptime_usec: Option<u64>,
    /// The job steps that held the GPU then
    /// ([`crate::step_windows`]), first the one the driver's `pid=` ran
    /// in where known.
    pub jobs: Vec<crate::step_id::StepId>,
}

impl Finding {
    /// A finding.
    pub fn new(fault: Fault, gpu: GpuRef, source: Source) -> Self {
        Finding { fault, gpu, source, uptime_usec: None, jobs: Vec::new() }
    }

    /// The jobs it hit as the drain reason and the log say them: `job
    /// 12.0`, with several the first and `+N`; a step's record names its
    /// own step; `None` when no job is known.
    pub fn job_words(&self) -> Option<String> {
        let all = self.all_jobs();
        let first = all.first()?;
        Some(match all.len() {
            1 => format!("job {first}"),
            n => format!("job {first} +{}", n - 1),
        })
    }

    /// Every step it names: a step record's own, then [`Finding::jobs`].
    pub fn all_jobs(&self) -> Vec<crate::step_id::StepId> {
        let mut all = Vec::new();
        if let Source::Step { step: Some(step), .. } = &self.source {
            all.push(*step);
        }
        for j in &self.jobs {
            if !all.contains(j) {
                all.push(*j);
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_words() {
        for (kind, word) in FaultKind::NAMED {
            assert_eq!(kind.word(), word);
            assert_eq!(FaultKind::from_word(word), Some(kind));
        }
        assert_eq!(FaultKind::Xid(79).word(), "xid");
        assert_eq!(FaultKind::from_word("xid"), None);
    }

    #[test]
    fn only_xids_are_events() {
        let xid = Fault::Xid { code: 79, pid: None, process: None, message: "GPU has fallen off the bus.".into() };
        assert!(xid.is_event());
        assert_eq!(xid.kind(), FaultKind::Xid(79));
        assert!(!Fault::RemapPending.is_event());
        assert!(!Fault::DbeVolatile(1).is_event());
    }

    #[test]
    fn recovery_kinds_follow_nvml_values() {
        // nvml.h's nvmlDeviceGpuRecoveryAction_t, value by value.
        let nvml_h = [
            (0, RecoveryKind::None),          // NVML_GPU_RECOVERY_ACTION_NONE
            (1, RecoveryKind::GpuReset),      // NVML_GPU_RECOVERY_ACTION_GPU_RESET
            (2, RecoveryKind::NodeReboot),    // NVML_GPU_RECOVERY_ACTION_NODE_REBOOT
            (3, RecoveryKind::DrainP2p),      // NVML_GPU_RECOVERY_ACTION_DRAIN_P2P
            (4, RecoveryKind::DrainAndReset), // NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET
        ];
        for (value, kind) in nvml_h {
            assert_eq!(RecoveryKind::from_nvml(value), Some(kind), "{value}");
        }
        assert_eq!(RecoveryKind::from_nvml(5), None);
        assert_eq!(RecoveryKind::from_nvml(9), None);
    }

    #[test]
    fn details_are_short_and_plain() {
        let m = Fault::CountMismatch { nvml: 7, dev_files: 8, pci: 8, configured: None };
        assert_eq!(m.detail(), "gpu count nvml 7 dev 8 pci 8 conf ?");
        assert_eq!(Fault::NvlinkDown(3).detail(), "nvlink 3 down");
        assert!(GpuRef::default().is_node());
        assert!(!GpuRef::pci("0000:41:00.0").is_node());
        assert_eq!(Source::Kmsg { seq: 9 }.to_string(), "kmsg seq 9");
    }
}
