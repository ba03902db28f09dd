//! slurm-gpu-gres: Slurm's GPU generic-resource plugins (`gres/gpu`,
//! `gres/mps`, `gres/shard`) and GPU detection plugin (`gpu/nvml`) in Rust.
//! This package is the admin tool `gres-rs`; its library re-exports every
//! layer under one name for the tool, the tests and the benches.
//!
//! The layers, each a crate of its own, are mapped in CONTRIBUTING.md ("How
//! the tree is laid out").  The core is used by its own name, `gres_core`
//! (a dependency of this package); the layers above it are re-exported
//! here under a short name (`config`, `predict`, `log`, `nvml`, `plugins`,
//! `ffi`).  [`proc_maps`] (which files a daemon has mapped) is the tool's
//! own: `gres-rs status` and the test bed use it, the plugins never do.

#![deny(unsafe_code)]

pub use gres_config as config;
pub use gres_log as log;
pub use gres_nvml as nvml;
pub use gres_plugins as plugins;
pub use gres_predict as predict;
pub use gres_slurm_abi as ffi;

pub mod proc_maps;

pub use ffi::{plugin_file_bytes, SLURM_VERSION, SLURM_VERSION_NUMBER};
pub use gres_core::plugin_files::{is_library_file, BUILT_LIBRARY_FILE, LIBRARY_FILE};
