//! What slurmd 22.05 does with a node's GRES configuration around the
//! plugins' `node_config_load`, so that a tool can predict the GRES lines
//! `slurmd -G` prints and the problems slurmd (or slurmctld, when the node
//! registers) would have with it.
//!
//! In slurmd's order:
//!
//! 1. The node's `Gres=` of slurm.conf, with names missing from `GresTypes`
//!    dropped ([`gres_name_filter`]), is counted per GRES and type
//!    ([`gres_cnt`], [`node_slurm_gres`]); mixing typed and untyped counts
//!    of one GRES stops slurmd ([`validate_slurm_conf`]).
//! 2. gres.conf, already evaluated for the node ([`gres_config::gres_conf`]),
//!    is compared with those counts: records slurm.conf does not account
//!    for are logged ([`check_conf_mismatch`]).
//! 3. Both are merged ([`merge_config`]): gres.conf works only within what
//!    slurm.conf says.  For each GRES, in `GresTypes` order, and each of its
//!    slurm.conf types, gres.conf records of that type are taken until the
//!    count is reached (a record with more is cut down, its `File` list
//!    too); an untyped slurm.conf count takes any record and drops its type;
//!    what gres.conf does not cover becomes a record without `File`.
//!    gres.conf records slurm.conf does not count are dropped.
//! 4. Each GRES plugin rewrites the list: gres/gpu merges in detected GPUs
//!    ([`gres_core::merge`]) and checks its device files, gres/mps and
//!    gres/shard give each GPU its share ([`gres_core::sharing`]),
//!    gres/nic checks its device files.
//! 5. GPUs without `File` are removed ([`remove_fileless_gpus`]) and every
//!    record is logged ([`slurmd_line`]): what `slurmd -G` prints.
//!
//! [`predict`] runs the whole sequence on already-read inputs (device files
//! are looked at through a callback), and [`registration_problems`] adds
//! what slurmctld makes of the counts the node then reports.
//!
//! This crate is `gres-rs check`'s prediction of slurmd and slurmctld: the
//! plugins never run it (they get slurmd's own parse and merge).  It sits
//! between the core (`gres-core`), whose gres.conf evaluation, device
//! checks, gres/gpu merge and sharing rules it runs as the plugins do, and
//! the admin tool.  One concept a module: [`problem`] (what is reported),
//! [`slurm_conf`] (the file, its nodes), [`node_hw`](mod@node_hw) (a node's CPUs),
//! [`slurm_gres`] (its `Gres=` counts), [`slurmd_merge`] (slurmd's merge
//! and its log lines), [`pipeline`] (the whole sequence).

#![deny(unsafe_code)]

pub mod node_hw;
pub mod pipeline;
pub mod problem;
pub mod slurm_conf;
pub mod slurm_gres;
pub mod slurmd_merge;

pub use node_hw::*;
pub use pipeline::*;
pub use problem::*;
pub use slurm_gres::*;
pub use slurmd_merge::*;

#[cfg(test)]
mod tests;
