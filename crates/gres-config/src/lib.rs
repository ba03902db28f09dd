#![deny(unsafe_code)]
//! Slurm's configuration files as `gres-rs check` reads them: [`syntax`],
//! the line syntax slurm.conf and gres.conf share (with `Include`), and
//! [`gres_conf`], gres.conf(5) evaluated for a node as slurmd does.
//!
//! The plugins never run this crate: inside slurmd they are handed
//! slurmd's own parse of gres.conf.  It sits over `gres-core` (records,
//! flags, hostlists) and under `gres-predict` and the CLI.

pub mod autodetect;
pub mod counts;
pub mod flag_remarks;
pub mod gres_conf;
pub mod syntax;
