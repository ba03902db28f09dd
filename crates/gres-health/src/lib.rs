#![deny(unsafe_code)]
//! The pure core of `gres-rs health`, the program an admin sets as Slurm's
//! `HealthCheckProgram`: what a GPU fault is ([`fault`]), the one table that
//! says what each fault means ([`catalog`]) and the site's changes to it
//! ([`overrides`]), the kernel log's XID lines ([`kmsg`]), the cursor that
//! reports each XID once ([`cursor`]), the drain reason ([`reason`]), the
//! verdict ([`decide`]), what a run reports besides Slurm ([`report`]), and
//! the records of the XIDs that hit a job step ([`steps`], with the
//! step's ids: [`step_id`]), the windows in which steps held GPUs and
//! the jobs a kernel XID hit ([`step_windows`]); how far a replayed log was read
//! ([`replay`]); the events kept for a run that can act ([`pending`]);
//! files replaced whole: [`atomic_file`].
//! No NVML, no Slurm, no process, no unsafe: the tool gathers the facts and
//! runs `scontrol`, our gpu/nvml writes the step records; everything here is
//! unit-tested.

pub mod atomic_file;
pub mod catalog;
pub mod cursor;
pub mod decide;
pub mod fault;
pub mod kmsg;
pub mod overrides;
pub mod pending;
pub mod reason;
pub mod replay;
pub mod report;
pub mod step_id;
pub mod step_windows;
pub mod steps;
