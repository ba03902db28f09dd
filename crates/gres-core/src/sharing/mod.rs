//! Shared GRES on top of the GPUs (`gres/mps`, `gres/shard`): a count per
//! GPU that jobs take parts of.  Everything the two plugins compute lives
//! here, in pure Rust:
//!
//! - the node's gres.conf records rewritten the way the stock plugins
//!   rewrite them (each GPU record split per device file, one shared record
//!   per GPU, counts spread or taken per `File`), the device list and the
//!   per-GPU counts, by [`load`];
//! - `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, by [`mps_thread_percentage`];
//! - the job, step, task, Prolog and Epilog variables, on top of the GPU
//!   rules of [`crate::env`], by [`shared_env`] and [`shared_epilog_env`];
//! - what slurmd hands to slurmstepd: [`crate::wire::write_shared_as`] and
//!   [`crate::wire::read_shared_as`], with the other messages.
//!
//! Records in [`records`], the variables in [`vars`] (both re-exported
//! here).

pub mod records;
pub mod vars;

pub use records::*;
pub use vars::*;

use crate::model::ConfFlags;

/// The GRES whose devices the shared GRES divide.
pub const SHARING_NAME: &str = "gpu";

/// The variable an MPS job's share of its GPU is given in.
pub const MPS_PERCENTAGE_VAR: &str = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
/// The variable a step's shard count is given in.
pub const SHARDS_ON_NODE_VAR: &str = "SLURM_SHARDS_ON_NODE";

/// Which shared GRES.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedKind {
    Mps,
    Shard,
}

impl SharedKind {
    pub fn name(self) -> &'static str {
        match self {
            SharedKind::Mps => "mps",
            SharedKind::Shard => "shard",
        }
    }

    /// MPS is served by one GPU of a node at a time unless configured
    /// otherwise (`one_sharing` is the default for mps, gres.conf(5)).
    fn one_sharing_by_default(self) -> bool {
        self == SharedKind::Mps
    }

    /// The vendor variables this GRES sets: MPS is CUDA only; shards set
    /// the variables the node's records ask for, like GPUs.
    pub fn env_flags(self, node_flags: ConfFlags) -> ConfFlags {
        match self {
            SharedKind::Mps => ConfFlags(ConfFlags::ENV_NVML),
            SharedKind::Shard => node_flags,
        }
    }
}

/// One GPU's count of the shared GRES (Slurm's `shared_dev_info_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedDev {
    /// The number at the end of the GPU's device file (`/dev/nvidia2` -> 2),
    /// -1 when it has none: the same number as the device's `dev_num`.
    pub id: i32,
    pub count: u64,
}
