//! slurm-gpu-gres: Slurm's GPU generic-resource plugins (`gres/gpu`,
//! `gres/mps`, `gres/shard`) and GPU detection plugin (`gpu/nvml`) in Rust.
//! This package is the admin tool `gres-rs`; its library re-exports every
//! layer under one name for the tool, the tests and the benches.
//!
//! Layers, from the bottom (CONTRIBUTING.md), each a crate of its own:
//! - [`core`] (`gres-core`): pure Rust, knows nothing of Slurm's memory
//!   (model, parsers, merging, environment rules, wire format).
//! - [`log`] (`gres-log`): the core's log lines as `tracing` events.
//! - [`nvml`] (`gres-nvml`): GPU detection through `nvml-wrapper`,
//!   producing core types (over `nvml-extra`, four NVML calls the wrapper
//!   lacks).
//! - [`plugins`] (`gres-plugins`): what each plugin file does, in safe
//!   Rust.
//! - [`ffi`] (`gres-slurm-abi`): Slurm's ABI and the exported symbols;
//!   with `nvml-extra` the only `unsafe` code.
//! - `crates/gres_rs`: the cdylib `libgres_rs.so`.

#![deny(unsafe_code)]

pub use gres_core as core;
pub use gres_log as log;
pub use gres_nvml as nvml;
pub use gres_plugins as plugins;
pub use gres_slurm_abi as ffi;

pub use ffi::{plugin_file_bytes, SLURM_VERSION, SLURM_VERSION_NUMBER};
pub use plugins::files::{is_library_file, BUILT_LIBRARY_FILE, LIBRARY_FILE};
