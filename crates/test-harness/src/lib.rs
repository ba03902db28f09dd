//! Real-Slurm test bed for the slurm-gpu-gres plugins (crate
//! `gres-test-harness`, a dev-dependency of the root crate: its tests,
//! benchmarks and examples; never published).
//!
//! A [`Cluster`] is a throwaway single-node Slurm 22.05 cluster (its own
//! munged, slurmctld and slurmd, run as child processes from a private temp
//! dir with private ports) on fake GPUs (character device nodes). It can run
//! the stock Debian plugins ([`PluginSet::Stock`]) or ours
//! ([`PluginSet::Ours`]), and proves which files the daemons really mapped.
//! [`standin`] builds and drives the NVML stand-in
//! (the C files of `tests/nvml-standin/`); [`gpu`] holds the helpers of the
//! gres/gpu proof tests (`slurmd -G` on stock and ours, compared).
//!
//! Use from an integration test:
//! ```ignore
//! use gres_test_harness::*;
//! #[test]
//! fn t() {
//!     if !require_slurm("t") { return; }
//!     let c = Cluster::start(ClusterConfig::gpus(PluginSet::Ours, 4));
//!     c.assert_ours_loaded(&["gres_gpu"]);
//!     let out = c.srun(&["--gres=gpu:1", "env"]).expect_ok("srun");
//! }
//! ```
//! Paths: the workspace's files (`tests/`, `examples/`, the fixtures) are
//! found from [`workspace_root`], cargo's target directory from
//! [`target_dir`] (both from where this crate lies in the workspace, not
//! from the calling test's environment).
//!
//! Environment knobs: `GRES_RS_KEEP=1` keeps the temp dir (path printed),
//! `GRES_RS_PLUGIN_DIR` points at a dir with our built `lib*.so`,
//! `GRES_RS_TMPDIR` moves the temp dirs (default /tmp), `CI=true` or
//! `GRES_RS_REQUIRE_SLURM=1` turn "skipped" into failures.

mod builds;
mod cluster;
mod cluster_files;
mod config;
mod envdump;
mod host;
mod install;
mod layout;
mod nm;
mod paths;
mod proof;
mod quirks;
mod tools;

pub mod accounting;
pub mod chroot;

pub mod fsutil;
pub mod gpu;
pub mod ledger;
pub mod netns;
pub mod nvml_stub;
pub mod process;
pub mod scenario;
pub mod standin;
pub mod testbed;

pub use builds::{build_for_release, test_build_dir, TEST_FEATURES};
pub use cluster::{field, Cluster, Daemon, JobResult, SlurmdG, MIG_MINORS_ENV};
pub use config::{gpu_gres_line, ClusterConfig, NodeConfig, PluginSet};
pub use fsutil::{make_fake_gpu_nodes, TempDir};
pub use gres_core::plugin_files::{is_library_file, BUILT_LIBRARY_FILE, LIBRARY_FILE, PLUGIN_FILES};
pub use host::{prereq_problems, require_slurm, stock_plugin_dir, strict_mode};
pub use install::{install_ours, install_ours_from, OUR_PLUGINS};
pub use layout::Layout;
pub use nm::{dynamic_symbols, DynSymbol};
pub use paths::{library_in, locate_our_library, target_dir, target_tmp_dir, workspace_root};
pub use process::CmdOutput;
pub use proof::{check_loaded, check_loaded_with, check_mapped_in_chroot};
pub use scenario::*;
pub use tools::tool;
