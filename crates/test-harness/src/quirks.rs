//! What the stock daemons of each release series do differently
//! ([`StockQuirks`], an explicit table), and how their log lines begin.

/// How the daemons begin a log line on stderr (what `slurmd -G` prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogPrefix {
    /// `slurmd: ` (the program's name), up to 24.11.
    Program,
    /// `[2026-12-01T12:00:00.123] ` (an ISO timestamp in brackets), from
    /// 25.05: src/common/log.c `_log_msg` prefixes `[%M]` whenever
    /// `running_in_daemon()` (25.05's release notes: "logs and stderr
    /// will always print the same").
    Timestamp,
}

impl LogPrefix {
    /// `line` without its prefix (unchanged when it has none).
    pub fn strip<'a>(&self, line: &'a str, program: &str) -> &'a str {
        match self {
            LogPrefix::Program => line.strip_prefix(program).and_then(|l| l.strip_prefix(": ")).unwrap_or(line),
            LogPrefix::Timestamp => match line.strip_prefix('[').and_then(|l| l.split_once("] ")) {
                Some((ts, rest)) if ts.len() >= 19 && ts.as_bytes()[4] == b'-' && ts.as_bytes()[10] == b'T' => rest,
                _ => line,
            },
        }
    }
}

/// What the STOCK daemons of a release series do differently, where a test
/// depends on it (each fact with where it shows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StockQuirks {
    /// The series, e.g. "24.11".
    pub series: &'static str,
    /// The prefix of stderr log lines (`slurmd -G` output).
    pub log_prefix: LogPrefix,
    /// `slurmd -G` authenticates first (23.11+: src/slurmd/slurmd/slurmd.c
    /// `_slurmd_init` calls `auth_g_init()` before `_print_gres()`, and
    /// auth/munge's `init` encodes and decodes a credential in a daemon):
    /// needs munged, i.e. a started cluster ([`crate::Cluster::slurmd_g_in`]).
    pub slurmd_g_needs_munged: bool,
    /// slurmd keeps the gpu plugin (`gpu_generic.so`, `gpu_nvml.so`) mapped
    /// after loading its config; from 25.11 it unloads it
    /// (src/interfaces/gres.c `gres_g_node_config_load` calls
    /// `gpu_plugin_fini()`; slurmstepd maps it;
    /// tests/testbed/baselines/stock-26.05.5-loaded.tsv).
    pub slurmd_keeps_gpu_plugin: bool,
    /// gres/mps and gres/shard `task_set_env` set the variables in the
    /// fixed order (Slurm 23.02.7, "Fix mps/shard task_set_env order").
    pub sharing_env_order_fixed: bool,
    /// `scontrol reconfigure` makes slurmd execute itself again (23.11+:
    /// slurmd.c `_try_to_reconfig`, in place under `-D`, a forked child
    /// otherwise); it logs "slurmd started on" again, and loads every
    /// plugin afresh.  22.05 and 23.02 reread their configuration in the
    /// running process ("got reconfigure request").
    pub reconfigure_reexecs: bool,
    /// The re-exec is announced "Caught SIGHUP. Triggering reconfigure."
    /// (24.11+, slurmd.c `_on_sighup`); 23.11 and 24.05 re-exec from
    /// `_msg_engine` after logging "got reconfigure request", as 22.05 and
    /// 23.02 log before rereading in place.
    pub reconfigure_logs_sighup: bool,
    /// gpu/nvml marks each MIG device it detects `GRES_CONF_MIG`
    /// (`Flags=...,MIG` in `slurmd -G`; 25.11+:
    /// src/plugins/gpu/nvml/gpu_nvml.c `_get_system_gpu_list_nvml`).  A
    /// fake_gpus.conf line has no word for MIG (src/interfaces/gres.c
    /// `gres_flags_parse`), so an oracle from fake_gpus.conf lacks it.
    pub nvml_flags_mig: bool,
    /// ... and `GRES_CONF_UUID` too (`Flags=...,UUID,MIG`; 26.05, where a
    /// fake_gpus.conf line can ask for UUID: `env_uuid`).
    pub nvml_flags_mig_uuid: bool,
    /// A job's GPU variables name a GPU by its unique id only when the
    /// node's gres/gpu has `GRES_CONF_UUID`, which it gets once one GPU
    /// has it (src/interfaces/gres.c `_post_plugin_gres_conf`): on a node
    /// with MIG devices (gpu/nvml flags them UUID) the whole GPUs, to which
    /// gpu/nvml gives their `GPU-` UUID as unique id too
    /// (gpu_nvml.c `_get_system_gpu_list_nvml`), are named by it as well
    /// (src/plugins/gres/common/gres_common.c `common_gres_set_env`), 26.05.
    /// Up to 24.11 a device with a unique id (only MIG devices have one) is
    /// named by it, every other by its index.
    pub gpu_env_uuid_node_wide: bool,
    /// After `scontrol reconfigure` on a node whose registration slurmctld
    /// then refuses (e.g. "gres/gpu count reported lower than configured":
    /// `_slurm_rpc_node_registration ... Invalid argument`), slurmd launches
    /// no step, not even one of a job already running: the re-executed
    /// slurmd ([`StockQuirks::reconfigure_reexecs`]) has no TRES list until a
    /// registration response brings one (src/slurmd/slurmd/slurmd.c
    /// `_handle_node_reg_resp`), and every step launch waits for it in
    /// src/slurmd/slurmd/req.c `send_slurmd_conf_lite` (on `tres_cond`),
    /// until srun gives up (23.11+).  22.05 and 23.02 reread their config
    /// in the same process and keep the TRES list of the first
    /// registration.
    pub refused_registration_blocks_steps: bool,
    /// Without accounting, slurmctld's main scheduler finds every job that
    /// has to wait ("JobId=2 has invalid account", after
    /// "_refresh_assoc_mgr_qos_list: no new list given back": in
    /// src/slurmctld/job_scheduler.c `_schedule`,
    /// `assoc_mgr_validate_assoc_id` asks for association lists that
    /// accounting_storage/none never gives), and only backfill starts it,
    /// `bf_interval` (30 s) later.  Seen on 23.11.11 and 24.05.8 (an sbatch
    /// right after an srun on the same GPUs; 23.02.8's tests took as long),
    /// not on 22.05.8, 24.11.5, 25.05.8, 25.11.7, 26.05.5.  The harness
    /// runs backfill every second there (`SchedulerParameters=bf_interval=1`).
    pub pending_jobs_wait_for_backfill: bool,
    /// gpu/nvml's `usage_read` keeps only the last GPU's memory and
    /// utilisation of a process: 23.11 zeroes them for each GPU
    /// (src/plugins/gpu/nvml/gpu_nvml.c `_get_gpumem`, `_get_gpuutil`);
    /// 23.02 and 24.05+ sum them over the GPUs.  Ours sums
    /// (docs/deviations.md NVML 5).
    pub usage_last_gpu_only: bool,
    /// gpu/nvml gives each MIG record links (`-1` at its own index among
    /// its GPU's MIG devices, `0` elsewhere): 22.05 only
    /// (`gres_links_create_empty`, gpu_nvml.c); from 23.02 none
    /// (23.02.8, 24.11.5, 26.05.3 read; `slurmd -G` of stock gpu/nvml
    /// 23.11.11, 24.11.5, 26.05.5).  Ours gives them in every release
    /// (docs/deviations.md NVML 6).
    pub nvml_mig_links: bool,
}

impl StockQuirks {
    /// The slurmd log line that shows a reconfigure request was taken.
    pub fn reconfigure_marker(&self) -> &'static str {
        if self.reconfigure_logs_sighup {
            "Caught SIGHUP. Triggering reconfigure."
        } else {
            "got reconfigure request"
        }
    }
}

/// The table of [`StockQuirks`], one row per series of the test bed, oldest
/// first; each row below states only what changed since the series
/// before it.  The rows of the series built from source (23.02, 23.11,
/// 24.05, 25.05, 25.11) were read in their source as the fields' docs say.
pub const BEHAVIOURS: [StockQuirks; 8] = [QUIRKS_22_05, QUIRKS_23_02, QUIRKS_23_11, QUIRKS_24_05, QUIRKS_24_11, QUIRKS_25_05, QUIRKS_25_11, QUIRKS_26_05];

/// 22.05: the oldest series, in full.
const QUIRKS_22_05: StockQuirks = StockQuirks {
    series: "22.05",
    log_prefix: LogPrefix::Program,
    slurmd_g_needs_munged: false,
    slurmd_keeps_gpu_plugin: true,
    sharing_env_order_fixed: false,
    reconfigure_reexecs: false,
    reconfigure_logs_sighup: false,
    nvml_flags_mig: false,
    nvml_flags_mig_uuid: false,
    gpu_env_uuid_node_wide: false,
    refused_registration_blocks_steps: false,
    pending_jobs_wait_for_backfill: false,
    usage_last_gpu_only: false,
    nvml_mig_links: true,
};

/// 23.02: what changed since 22.05.
const QUIRKS_23_02: StockQuirks =
    StockQuirks { series: "23.02", sharing_env_order_fixed: true, pending_jobs_wait_for_backfill: true, nvml_mig_links: false, ..QUIRKS_22_05 };

/// 23.11: what changed since 23.02.
const QUIRKS_23_11: StockQuirks = StockQuirks {
    series: "23.11",
    slurmd_g_needs_munged: true,
    reconfigure_reexecs: true,
    refused_registration_blocks_steps: true,
    usage_last_gpu_only: true,
    ..QUIRKS_23_02
};

/// 24.05: what changed since 23.11.
const QUIRKS_24_05: StockQuirks = StockQuirks { series: "24.05", usage_last_gpu_only: false, ..QUIRKS_23_11 };

/// 24.11: what changed since 24.05.
const QUIRKS_24_11: StockQuirks = StockQuirks { series: "24.11", reconfigure_logs_sighup: true, pending_jobs_wait_for_backfill: false, ..QUIRKS_24_05 };

/// 25.05: what changed since 24.11.
const QUIRKS_25_05: StockQuirks = StockQuirks { series: "25.05", log_prefix: LogPrefix::Timestamp, ..QUIRKS_24_11 };

/// 25.11: what changed since 25.05.
const QUIRKS_25_11: StockQuirks = StockQuirks { series: "25.11", slurmd_keeps_gpu_plugin: false, nvml_flags_mig: true, ..QUIRKS_25_05 };

/// 26.05: what changed since 25.11.
const QUIRKS_26_05: StockQuirks = StockQuirks { series: "26.05", nvml_flags_mig_uuid: true, gpu_env_uuid_node_wide: true, ..QUIRKS_25_11 };

/// "24.11" of "24.11.5".
pub fn series_of(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// The behaviour of the series of `version` (the oldest, 22.05's, for a
/// version the table lacks).
pub fn behaviour_of(version: &str) -> &'static StockQuirks {
    let s = series_of(version);
    BEHAVIOURS.iter().find(|b| b.series == s).unwrap_or(&BEHAVIOURS[0])
}
