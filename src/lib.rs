//! slurm-gpu-gres: Slurm's GPU generic-resource plugins (`gres/gpu`,
//! `gres/mps`, `gres/shard`) and GPU detection plugin (`gpu/nvml`) in Rust.
//!
//! Layers, from the bottom (CONTRIBUTING.md):
//! - [`core`]: pure Rust, knows nothing of Slurm's memory (model, parsers,
//!   merging, environment rules, wire format): the crate `gres-core`.
//! - [`log`]: the core's log lines as `tracing` events: the crate `gres-log`.
//! - [`nvml`]: GPU detection through `nvml-wrapper`, producing core types:
//!   the crate `gres-nvml` (over `nvml-extra`, four NVML calls the wrapper
//!   lacks).
//! - [`plugins`]: what each plugin file does, in safe Rust.
//! - [`ffi`]: Slurm's ABI and the exported symbols; with `nvml-extra` the
//!   only `unsafe` code.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

/// The pure core, a crate of its own (`crates/gres-core`): it builds and
/// tests without Slurm, libclang or this crate's build script.
pub use gres_core as core;
#[allow(unsafe_code)]
pub mod ffi;
/// The core's log lines as `tracing` events (`crates/gres-log`).
pub use gres_log as log;
/// NVML detection (`crates/gres-nvml`).
pub use gres_nvml as nvml;
pub mod plugins;

/// The Slurm release this build is for (`SLURM_VERSION_NUMBER` of its
/// `slurm_version.h`, found by build.rs); slurmd loads a plugin only when
/// major, minor and micro match its own.
pub const SLURM_VERSION_NUMBER: u32 = parse_decimal(env!("SLURM_VERSION_NUMBER"));
pub use plugins::files::LIBRARY_FILE;

/// The same release as text, e.g. "22.05.8".
pub const SLURM_VERSION: &str = env!("SLURM_VERSION_STRING");

const fn parse_decimal(s: &str) -> u32 {
    // build.rs emits the number in decimal.
    let b = s.as_bytes();
    let mut v: u32 = 0;
    let mut i = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit());
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}
