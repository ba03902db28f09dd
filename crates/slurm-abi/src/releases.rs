//! The Slurm releases this crate builds for, and what changed when: the one
//! place of version knowledge.  Plain data and plain functions: `build.rs`
//! includes this file through `#[path]` (so it must hold no `#[cfg]`, which
//! would be evaluated without the build's cfgs, and no dependency), turns
//! every [`Change`] in force for the release being built into a
//! `--cfg <name>` (each declared with `cargo::rustc-check-cfg`, as
//! ngx-rust's nginx-sys does for nginx features), and selects the entry
//! points of the plugin files by their `since`/`until` releases
//! ([`present`]).  The Rust code tests a change by its cfg
//! (`#[cfg(slurm_gres_device_flags)]`), never by a release number.
//!
//! Facts are from the release tarballs (`/work/shared/slurm-src`, tag
//! `slurm-MM-mm-u-1`; 22.05 from Debian 12's source package): the
//! `syms[]` arrays of `src/interfaces/gres.c` / `gpu.c` (`src/common/` in
//! 22.05) for the entry points, the internal headers for the rest.  The
//! struct layouts themselves come from `slurm-headers/<series>/` through
//! bindgen; the rows here only say where code must differ.

/// Every release series with a `slurm-headers/<series>/` header, oldest
/// first.  A build for any other series fails in build.rs.
pub const SERIES: [&str; 8] = ["22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05"];

/// One change of Slurm's plugin ABI: in force from release `since` up to,
/// not including, release `until`.  A bound is a series (`"24.11"`, its
/// first release) or, for a change inside a series, a release
/// (`"26.05.4"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// The cfg set while the change is in force (`slurm_prep_env`).
    pub cfg: &'static str,
    pub since: &'static str,
    pub until: Option<&'static str>,
    /// What it is, and where Slurm says so.
    pub what: &'static str,
}

const fn change(cfg: &'static str, since: &'static str, until: Option<&'static str>, what: &'static str) -> Change {
    Change { cfg, since, until, what }
}

/// What changed when, by release series.
pub const CHANGES: [Change; 17] = [
    // The entry points slurmd resolves (syms[]); the entry-point list
    // (entry_points.rs) carries the same ranges per function.
    change("slurm_epilog_env", "22.05", Some("23.02"), "gres_p_epilog_build_env / gres_p_epilog_set_env (src/common/gres.c syms[])"),
    change("slurm_prep_env", "23.02", None, "gres_p_prep_build_env / gres_p_prep_set_env replace the epilog_* pair (src/interfaces/gres.c syms[])"),
    change(
        "slurm_get_info",
        "22.05",
        Some("24.11"),
        "gres_p_get_job_info / gres_p_get_step_info required (stock returns EINVAL); enum gres_job_data_type removed with them in 24.11",
    ),
    change("slurm_gpu_reconfig", "22.05", Some("24.05"), "gpu_p_reconfig required (src/interfaces/gpu.c syms[]; removed in 24.05)"),
    change("slurm_gpu_usage_read", "23.02", None, "gpu_p_usage_read(pid_t, acct_gather_data_t *) required; acct_gather_data_t gains last_time first"),
    // Structs (offsets from bindgen; these say what exists).
    change("slurm_node_config_gres_name", "23.02", None, "node_config_load_t.gres_name (set by the core to the calling GRES's name)"),
    change("slurm_gres_prep_t", "23.02", None, "gres_epilog_info_t renamed gres_prep_t, same layout (our header keeps the old name as an alias)"),
    change("slurm_gres_per_bit", "23.11", None, "gres_job_state_t / gres_step_state_t gain gres_per_bit_* (node_cnt, gres_bit_alloc move)"),
    change("slurm_res_gpu_cores", "24.05", None, "gres_job_state_t gains res_gpu_cores / res_array_size"),
    change("slurm_gres_device_flags", "25.11", None, "gres_device_t.flags after dev_num (path, unique_id +8), read by the core"),
    change("slurm_gpu_plugin_init_node_conf", "26.05", None, "gpu_plugin_init(node_config_load_t *) (was void)"),
    change(
        "slurm_gres_job_state_plus8",
        "26.05.4",
        None,
        "gres_job_state_t: 8 more bytes before node_cnt (node_cnt 136 -> 144, gres_bit_alloc 144 -> 152), measured in Debian's 26.05.5 \
         gres_gpu.so (gres_p_prep_build_env); the field is not known (no 26.05.4+ source at hand), so slurm-headers/26.05 keeps 26.05.3's layout \
         and the converter adds the 8 bytes",
    ),
    // Functions of libslurmfull the stock plugins import (ours imports
    // none of these; recorded for code that will).
    change("slurm_add_gres_to_list_record", "23.02", None, "add_gres_to_list(list, gres_slurmd_conf_t *) (22.05: 11 arguments)"),
    change("slurm_core_device_helpers", "23.02", None, "gres_node_config_load / gres_send_stepd / gres_recv_stepd in libslurmfull"),
    change(
        "slurm_log_warning",
        "23.02",
        None,
        "warning() exported by libslurmfull (src/common/log.c); the stock plugins warn through it (22.05: info(\"WARNING: ...\")), and so does ours",
    ),
    change("slurm_list_remove_first_alias", "23.11", None, "list_remove_first also exported as slurm_list_remove_first (strong_alias, list.c)"),
    change(
        "slurm_run_in_daemon_mask",
        "25.05",
        None,
        "running_in_slurmstepd() is a macro over run_in_daemon(uint32_t) (was bool (bool *, bool *, char *)); no slurm_running_in_slurmstepd",
    ),
];

/// `(major, minor, micro)` of a release written `"24.11.5"`, or of a
/// series written `"24.11"` (micro 0: its first release).
pub fn release_number(release: &str) -> Option<(u32, u32, u32)> {
    let mut parts = release.split('.').map(|p| p.parse::<u32>().ok());
    let (a, b, c) = (parts.next()??, parts.next()??, parts.next().unwrap_or(Some(0))?);
    parts.next().is_none().then_some((a, b, c))
}

/// Whether something that exists from `since` (None: always) up to, not
/// including, `until` (None: still) exists in `release`; each a series or
/// a release ([`release_number`]).
///
/// ```
/// use gres_slurm_abi::releases::present;
/// assert!(present(Some("23.02"), None, "24.11.5"));
/// assert!(!present(None, Some("24.11"), "24.11"));
/// assert!(present(None, Some("24.11"), "24.05.8"));
/// assert!(!present(Some("26.05.4"), None, "26.05.3"));
/// assert!(present(Some("26.05.4"), None, "26.05.5"));
/// ```
pub fn present(since: Option<&str>, until: Option<&str>, release: &str) -> bool {
    let n = |s: &str| release_number(s).unwrap_or_else(|| panic!("release {s:?} (releases.rs, entry_points.rs or the build): want MAJOR.MINOR[.MICRO]"));
    let r = n(release);
    since.is_none_or(|s| n(s) <= r) && until.is_none_or(|u| r < n(u))
}

/// The changes in force in `release` (a release, `"26.05.5"`).
///
/// ```
/// use gres_slurm_abi::releases::changes_in;
/// let plus8 = |r| changes_in(r).any(|c| c.cfg == "slurm_gres_job_state_plus8");
/// // Debian unstable's 26.05.5: without it, slurmd dies at the first task
/// // launch (gres_p_prep_build_env reads gres_bit_alloc where node_cnt is).
/// assert!(plus8("26.05.5"));
/// assert!(!plus8("26.05.3"));
/// assert!(!plus8("24.11.5"));
/// ```
pub fn changes_in(release: &str) -> impl Iterator<Item = &'static Change> + '_ {
    CHANGES.iter().filter(move |c| present(Some(c.since), c.until, release))
}
