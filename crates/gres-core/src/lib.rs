#![deny(unsafe_code)]
//! The pure Rust core: no Slurm symbol, no raw pointer.  Everything here is
//! unit-tested with plain `cargo test`.

pub mod behaviour;
pub mod bounded_read;
pub mod devices;
pub mod diagnostic;
pub mod env;
pub mod env_array;
pub mod fake_gpus;
pub mod flags;
pub mod gpu_freq;
pub mod gpu_usage;
pub mod host;
pub mod hostlist;
pub mod merge;
pub mod model;
pub mod nvml_model;
pub mod plugin_files;
pub mod record_rules;
pub mod sharing;
pub mod sort;
pub mod text;
pub mod wire;
