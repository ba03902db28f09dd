//! The host's Slurm installation: Debian's stock plugin directory, its
//! Slurm version, and whether real clusters can run here.

use crate::tools::find_tool;
use crate::{fsutil, ledger};
use std::path::{Path, PathBuf};

/// Directory of Debian's stock Slurm plugins (override: GRES_RS_STOCK_PLUGIN_DIR).
pub fn stock_plugin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GRES_RS_STOCK_PLUGIN_DIR") {
        return PathBuf::from(d);
    }
    let arch = if cfg!(target_arch = "aarch64") { "aarch64-linux-gnu" } else { "x86_64-linux-gnu" };
    let candidates = [format!("/usr/lib/{arch}/slurm-wlm"), "/usr/lib/slurm-wlm".into(), "/usr/lib64/slurm".into(), "/usr/lib/slurm".into()];
    for c in &candidates {
        if Path::new(c).join("gres_gpu.so").is_file() {
            return PathBuf::from(c);
        }
    }
    PathBuf::from(&candidates[0])
}

const NEEDED_TOOLS: &[&str] = &["slurmd", "slurmctld", "srun", "sbatch", "salloc", "scontrol", "squeue", "scancel", "munged", "setpriv", "mknod", "kill"];

/// Everything missing for running real clusters (empty when all is fine).
pub fn prereq_problems() -> Vec<String> {
    let mut v = Vec::new();
    if fsutil::euid() != Some(0) {
        v.push("not running as root (the test clusters need root)".to_string());
    }
    for t in NEEDED_TOOLS {
        if find_tool(t).is_none() {
            v.push(format!("`{t}` not found (install: slurmd slurmctld slurm-client munge; see tests/setup-debian.sh)"));
        }
    }
    if !stock_plugin_dir().join("gres_gpu.so").is_file() {
        v.push(format!("stock plugin {} missing", stock_plugin_dir().join("gres_gpu.so").display()));
    }
    if fsutil::user_ids("munge").is_none() {
        v.push("user `munge` does not exist (install the munge package)".to_string());
    }
    v
}

/// True when missing prerequisites must fail tests instead of skipping them.
pub fn strict_mode() -> bool {
    let on = |k: &str| std::env::var(k).map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes")).unwrap_or(false);
    on("CI") || on("GRES_RS_REQUIRE_SLURM")
}

/// Call first in every cluster test: returns true when clusters can run.
/// Otherwise prints "skipped" and returns false -- or panics in CI
/// (`CI=true` / `GRES_RS_REQUIRE_SLURM=1`).
#[track_caller]
pub fn require_slurm(test: &str) -> bool {
    let p = prereq_problems();
    if p.is_empty() {
        return true;
    }
    if strict_mode() {
        let msg = format!("{test}: cannot run real-Slurm tests:\n  - {}", p.join("\n  - "));
        panic!("{msg}\n(CI/GRES_RS_REQUIRE_SLURM is set, so this is a failure; run tests/setup-debian.sh as root)");
    }
    ledger::skipped(test, &format!("cannot run real-Slurm tests: {}", p.join("; ")));
    false
}

/// The host's Slurm version from its libslurm-dev header.
pub(crate) fn host_version() -> Option<String> {
    let text = std::fs::read_to_string("/usr/include/slurm/slurm_version.h").ok()?;
    let n = text
        .lines()
        .find_map(|l| l.strip_prefix("#define SLURM_VERSION_NUMBER"))
        .and_then(|v| u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())?;
    Some(format!("{}.{:02}.{}", n >> 16 & 0xff, n >> 8 & 0xff, n & 0xff))
}
