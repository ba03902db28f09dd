//! The `gres-rs` command as users see it: exit statuses, messages with
//! their place and caret, JSON, the examples, `detect` without NVML, and
//! `install`.  No Slurm daemon is needed (`install` uses Slurm's own plugin
//! files when they are installed).
//!
//! Each test lives in the module of its subject (`cargo test --test cli
//! NAME` finds it by name); `run` holds what they share.

#![cfg(feature = "cli")]

mod check;
mod detect;
mod health;
mod health_nvml;
mod health_state;
mod help;
mod install;
mod nvml;
mod plugin_dir;
mod releases;
mod run;
mod same_device;
