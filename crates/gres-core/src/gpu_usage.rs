//! A process's GPU memory and utilisation for job accounting (the
//! `gres/gpumem` and `gres/gpuutil` TRES), from one poll's view of every
//! GPU: which processes run on it with how much memory, and the driver's
//! utilisation samples.
//!
//! slurmstepd's jobacct_gather asks the gpu plugin once for each process of
//! a step at every poll (`gpu_p_usage_read`, 23.02 on), with a fresh
//! record whose `last_time` is 0.  Stock gpu/nvml queries NVML for every
//! GPU on every such call; ours takes one [`GpuView`] per poll and answers
//! each process from it with [`process_usage`], which gives stock's numbers
//! for the same driver state:
//! - memory: on each GPU, the first compute entry of the process plus its
//!   first graphics entry, summed over the GPUs;
//! - utilisation: on each GPU, the first sample of the process newer than
//!   the running `last_time`, which then becomes that sample's time; the
//!   `smUtil` values are summed over the GPUs.
//!
//! Where stock's releases differ from that (23.02 skips a GPU's memory when
//! it has no utilisation sample and counts only one list's entry; 23.11
//! keeps only the last GPU's values), ours keeps the sum: docs/deviations.md
//! NVML 5.

/// What one GPU reported in one poll.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuView {
    /// Processes with a compute context: `(pid, used memory in bytes)`, in
    /// the driver's order.
    pub compute: Vec<(u32, u64)>,
    /// Processes with a graphics context, likewise.
    pub graphics: Vec<(u32, u64)>,
    /// Utilisation samples: `(pid, time stamp in microseconds, smUtil %)`,
    /// in the driver's order.
    pub samples: Vec<(u32, u64, u32)>,
}

/// Which of the two TRES the cluster accounts (`AccountingStorageTRES`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tracked {
    pub gpumem: bool,
    pub gpuutil: bool,
}

impl Tracked {
    /// Whether the plugin reads anything: 23.02's gpu/nvml only when both
    /// are accounted, from 23.11 when either is
    /// ([`crate::behaviour::Behaviour::usage_tres_independent`]).
    pub fn reads(self, independent: bool) -> bool {
        if independent {
            self.gpumem || self.gpuutil
        } else {
            self.gpumem && self.gpuutil
        }
    }
}

/// What the plugin writes for one process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessUsage {
    /// GPU memory in bytes (`gres/gpumem`), summed over the GPUs.
    pub mem_bytes: u64,
    /// Utilisation in percent of one GPU's SMs (`gres/gpuutil`), summed
    /// over the GPUs.
    pub sm_util: u64,
    /// The time stamp of the last sample used (the record's `last_time`),
    /// or the one the caller gave when none was.
    pub last_time: u64,
}

/// The usage of process `pid` in `gpus` (in NVML index order), starting
/// from the record's `last_time`.
pub fn process_usage(gpus: &[GpuView], pid: u32, last_time: u64) -> ProcessUsage {
    let mut out = ProcessUsage { last_time, ..ProcessUsage::default() };
    for gpu in gpus {
        for list in [&gpu.compute, &gpu.graphics] {
            if let Some((_, bytes)) = list.iter().find(|(p, _)| *p == pid) {
                out.mem_bytes = out.mem_bytes.saturating_add(*bytes);
            }
        }
        if let Some((_, ts, sm)) = gpu.samples.iter().find(|(p, ts, _)| *p == pid && *ts > out.last_time) {
            out.last_time = *ts;
            out.sm_util = out.sm_util.saturating_add(u64::from(*sm));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(compute: &[(u32, u64)], graphics: &[(u32, u64)], samples: &[(u32, u64, u32)]) -> GpuView {
        GpuView { compute: compute.to_vec(), graphics: graphics.to_vec(), samples: samples.to_vec() }
    }

    #[test]
    fn sums_over_gpus_and_lists() {
        let gpus = [gpu(&[(10, 100), (11, 7)], &[(10, 5)], &[(10, 50, 30), (11, 50, 9)]), gpu(&[(10, 200)], &[], &[(10, 60, 40)])];
        assert_eq!(process_usage(&gpus, 10, 0), ProcessUsage { mem_bytes: 305, sm_util: 70, last_time: 60 });
        assert_eq!(process_usage(&gpus, 11, 0), ProcessUsage { mem_bytes: 7, sm_util: 9, last_time: 50 });
        assert_eq!(process_usage(&gpus, 12, 0), ProcessUsage { mem_bytes: 0, sm_util: 0, last_time: 0 });
    }

    #[test]
    fn first_entry_and_first_newer_sample() {
        // A pid listed twice in one list counts once (stock breaks at the
        // first); a sample no newer than the running last_time is skipped,
        // and the next GPU is read from the time of the one used.
        let gpus = [gpu(&[(10, 1), (10, 2)], &[], &[(10, 5, 1), (10, 9, 2)]), gpu(&[], &[], &[(10, 7, 4), (10, 12, 8)])];
        assert_eq!(process_usage(&gpus, 10, 6), ProcessUsage { mem_bytes: 1, sm_util: 2 + 8, last_time: 12 });
        assert_eq!(process_usage(&gpus, 10, 0), ProcessUsage { mem_bytes: 1, sm_util: 1 + 4, last_time: 7 });
    }

    #[test]
    fn which_tres_are_read() {
        let both = Tracked { gpumem: true, gpuutil: true };
        let mem = Tracked { gpumem: true, gpuutil: false };
        assert!(both.reads(false) && both.reads(true));
        assert!(!mem.reads(false) && mem.reads(true));
        assert!(!Tracked::default().reads(true));
    }

    #[test]
    fn no_overflow() {
        let gpus = [gpu(&[(1, u64::MAX)], &[(1, 5)], &[])];
        assert_eq!(process_usage(&gpus, 1, 0).mem_bytes, u64::MAX);
    }
}
