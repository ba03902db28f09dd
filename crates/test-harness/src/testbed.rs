//! The test bed's Slurm releases as tests iterate them: which releases a
//! run selects (`GRES_RS_SLURM`), where each one's Slurm lives (the host
//! or a [`chroot`]), what stock does differently there
//! ([`Behaviour`], an explicit table), and our build for it
//! ([`TestBed::our_build`]).
//!
//! ```ignore
//! use gres_test_harness::*;
//! per_release! {
//!     /// Doc of the test (on the module).
//!     fn srun_env(bed) {
//!         let stock = Cluster::start(bed.config(PluginSet::Stock, 4));
//!         let Some(cfg) = bed.ours_config(bed.config(PluginSet::Ours, 4), "srun_env") else { return };
//!         let ours = Cluster::start(cfg);
//!     }
//! }
//! // tests srun_env::slurm_22_05, srun_env::slurm_24_11, srun_env::slurm_26_05
//! ```

use crate::chroot::{self, Chroot, Release};
use crate::scenario::{assert_no_differences, run_scenario, Scenario, ScenarioResult};
use crate::{locate_our_library, target_dir, test_build_dir, workspace_root, ClusterConfig, PluginSet, TEST_FEATURES};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

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
pub struct Behaviour {
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
    /// slurmd ([`Behaviour::reconfigure_reexecs`]) has no TRES list until a
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

impl Behaviour {
    /// The slurmd log line that shows a reconfigure request was taken.
    pub fn reconfigure_marker(&self) -> &'static str {
        if self.reconfigure_logs_sighup {
            "Caught SIGHUP. Triggering reconfigure."
        } else {
            "got reconfigure request"
        }
    }
}

/// The table of [`Behaviour`]s, one per series of the test bed, oldest
/// first.  The rows of the series built from source (23.02, 23.11, 24.05,
/// 25.05, 25.11) were read in their source as the fields' docs say.
pub const BEHAVIOURS: [Behaviour; 8] = [
    Behaviour {
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
    },
    Behaviour {
        series: "23.02",
        log_prefix: LogPrefix::Program,
        slurmd_g_needs_munged: false,
        slurmd_keeps_gpu_plugin: true,
        sharing_env_order_fixed: true,
        reconfigure_reexecs: false,
        reconfigure_logs_sighup: false,
        nvml_flags_mig: false,
        nvml_flags_mig_uuid: false,
        gpu_env_uuid_node_wide: false,
        refused_registration_blocks_steps: false,
        pending_jobs_wait_for_backfill: true,
        usage_last_gpu_only: false,
        nvml_mig_links: false,
    },
    Behaviour {
        series: "23.11",
        log_prefix: LogPrefix::Program,
        slurmd_g_needs_munged: true,
        slurmd_keeps_gpu_plugin: true,
        sharing_env_order_fixed: true,
        reconfigure_reexecs: true,
        reconfigure_logs_sighup: false,
        nvml_flags_mig: false,
        nvml_flags_mig_uuid: false,
        gpu_env_uuid_node_wide: false,
        refused_registration_blocks_steps: true,
        pending_jobs_wait_for_backfill: true,
        usage_last_gpu_only: true,
        nvml_mig_links: false,
    },
    Behaviour {
        series: "24.05",
        log_prefix: LogPrefix::Program,
        slurmd_g_needs_munged: true,
        slurmd_keeps_gpu_plugin: true,
        sharing_env_order_fixed: true,
        reconfigure_reexecs: true,
        reconfigure_logs_sighup: false,
        nvml_flags_mig: false,
        nvml_flags_mig_uuid: false,
        gpu_env_uuid_node_wide: false,
        refused_registration_blocks_steps: true,
        pending_jobs_wait_for_backfill: true,
        usage_last_gpu_only: false,
        nvml_mig_links: false,
    },
    Behaviour {
        series: "24.11",
        log_prefix: LogPrefix::Program,
        slurmd_g_needs_munged: true,
        slurmd_keeps_gpu_plugin: true,
        sharing_env_order_fixed: true,
        reconfigure_reexecs: true,
        reconfigure_logs_sighup: true,
        nvml_flags_mig: false,
        nvml_flags_mig_uuid: false,
        gpu_env_uuid_node_wide: false,
        refused_registration_blocks_steps: true,
        pending_jobs_wait_for_backfill: false,
        usage_last_gpu_only: false,
        nvml_mig_links: false,
    },
    Behaviour {
        series: "25.05",
        log_prefix: LogPrefix::Timestamp,
        slurmd_g_needs_munged: true,
        slurmd_keeps_gpu_plugin: true,
        sharing_env_order_fixed: true,
        reconfigure_reexecs: true,
        reconfigure_logs_sighup: true,
        nvml_flags_mig: false,
        nvml_flags_mig_uuid: false,
        gpu_env_uuid_node_wide: false,
        refused_registration_blocks_steps: true,
        pending_jobs_wait_for_backfill: false,
        usage_last_gpu_only: false,
        nvml_mig_links: false,
    },
    Behaviour {
        series: "25.11",
        log_prefix: LogPrefix::Timestamp,
        slurmd_g_needs_munged: true,
        slurmd_keeps_gpu_plugin: false,
        sharing_env_order_fixed: true,
        reconfigure_reexecs: true,
        reconfigure_logs_sighup: true,
        nvml_flags_mig: true,
        nvml_flags_mig_uuid: false,
        gpu_env_uuid_node_wide: false,
        refused_registration_blocks_steps: true,
        pending_jobs_wait_for_backfill: false,
        usage_last_gpu_only: false,
        nvml_mig_links: false,
    },
    Behaviour {
        series: "26.05",
        log_prefix: LogPrefix::Timestamp,
        slurmd_g_needs_munged: true,
        slurmd_keeps_gpu_plugin: false,
        sharing_env_order_fixed: true,
        reconfigure_reexecs: true,
        reconfigure_logs_sighup: true,
        nvml_flags_mig: true,
        nvml_flags_mig_uuid: true,
        gpu_env_uuid_node_wide: true,
        refused_registration_blocks_steps: true,
        pending_jobs_wait_for_backfill: false,
        usage_last_gpu_only: false,
        nvml_mig_links: false,
    },
];

/// "24.11" of "24.11.5".
pub fn series_of(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// The behaviour of the series of `version` (the oldest, 22.05's, for a
/// version the table lacks).
pub fn behaviour_of(version: &str) -> &'static Behaviour {
    let s = series_of(version);
    BEHAVIOURS.iter().find(|b| b.series == s).unwrap_or(&BEHAVIOURS[0])
}

/// "24.11" of a release.
fn release_series(r: &Release) -> &'static str {
    r.slurm.rsplit_once('.').map(|x| x.0).unwrap_or(r.slurm)
}

/// The series the test bed has, Debian's and those built from source,
/// oldest first.
pub fn all_series() -> Vec<&'static str> {
    chroot::all_releases().iter().map(release_series).collect()
}

/// The series of the releases of one origin (Debian's: host and chroots;
/// or built from source).
pub fn series_from(source: bool) -> Vec<&'static str> {
    chroot::all_releases().iter().filter(|r| (r.origin == chroot::Origin::Source) == source).map(release_series).collect()
}

/// What `GRES_RS_SLURM` selects: `all` (also when unset or empty: every
/// release of the test bed that exists, a chroot not built being skipped
/// with a message) or a comma-separated list, each then required (a
/// missing chroot fails under `GRES_RS_REQUIRE_SLURM=1`) of series
/// (`22.05,26.05`; `source:23.11` is `23.11`), `debian` (22.05, 24.11,
/// 26.05) and `source` (the five built from source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    All,
    Only(Vec<String>),
}

impl Selection {
    pub fn from_env() -> Result<Selection, String> {
        Selection::parse(&std::env::var("GRES_RS_SLURM").unwrap_or_default())
    }
    pub fn parse(text: &str) -> Result<Selection, String> {
        let t = text.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("all") {
            return Ok(Selection::All);
        }
        let known = all_series();
        let mut v: Vec<String> = Vec::new();
        for item in t.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let add: Vec<String> = match item.to_ascii_lowercase().as_str() {
                "all" => known.iter().map(|s| s.to_string()).collect(),
                "debian" => series_from(false).into_iter().map(String::from).collect(),
                "source" => series_from(true).into_iter().map(String::from).collect(),
                _ => {
                    let s = series_of(item.strip_prefix("source:").unwrap_or(item));
                    if !known.contains(&s.as_str()) {
                        return Err(format!("GRES_RS_SLURM={text}: {s} is not a release of the test bed ({}; or all, debian, source)", known.join(", ")));
                    }
                    vec![s]
                }
            };
            for s in add {
                if !v.contains(&s) {
                    v.push(s);
                }
            }
        }
        Ok(Selection::Only(v))
    }
    pub fn selects(&self, series: &str) -> bool {
        match self {
            Selection::All => true,
            Selection::Only(v) => v.iter().any(|s| s == series),
        }
    }
}

/// One release of the test bed, opened: where its Slurm lives, its
/// version and stock behaviour, and (on demand) our build for it.
#[derive(Clone, Debug)]
pub struct TestBed {
    pub release: Release,
    /// "22.05".
    pub series: String,
    /// The real version: the chroot's slurm_version.h, or the host's
    /// (`/usr/include/slurm/slurm_version.h`, else the release's).
    pub version: String,
    /// `None`: the host's Slurm.
    pub chroot: Option<Chroot>,
    pub behaviour: &'static Behaviour,
}

impl TestBed {
    /// The release of `series` ("24.11"), opened; Err when its chroot is
    /// not built or cannot run clusters.
    pub fn open(series: &str) -> Result<TestBed, String> {
        let release = chroot::all_releases()
            .into_iter()
            .find(|r| series_of(r.slurm) == series)
            .ok_or_else(|| format!("no test-bed release {series} ({})", all_series().join(", ")))?;
        let (chroot, version) = if release.host {
            (None, host_version().unwrap_or_else(|| release.slurm.to_string()))
        } else {
            let root = release.open()?;
            if let Some(p) = root.problems().first() {
                return Err(p.clone());
            }
            let v = root.slurm_version()?;
            (Some(root), v)
        };
        Ok(TestBed { release, series: series.to_string(), behaviour: behaviour_of(&version), version, chroot })
    }

    /// e.g. "Slurm 24.11.5 (trixie chroot)".
    pub fn label(&self) -> String {
        match &self.chroot {
            None => format!("Slurm {} (host, {})", self.version, self.release.suite),
            Some(_) if self.release.origin == chroot::Origin::Source => format!("Slurm {} (built from source, {} chroot)", self.version, self.release.suite),
            Some(_) => format!("Slurm {} ({} chroot)", self.version, self.release.suite),
        }
    }

    /// The stock plugin dir, as the daemons see it (a path inside the chroot).
    pub fn stock_plugin_dir(&self) -> PathBuf {
        match &self.chroot {
            None => crate::stock_plugin_dir(),
            Some(r) => r.stock_plugin_dir(),
        }
    }

    /// The stock gpu/nvml plugin of this release, as a host path, which
    /// Debian does not ship: for a release built from source, the one its
    /// build set aside (`tests/testbed/slurm-source.sh`); for the host's
    /// (bookworm), trixie and sid, the one `tests/testbed/stock-gpu-nvml.sh`
    /// built (bookworm's from Debian's source package of the host's
    /// slurmd, the others from SchedMD's tarball of the series).  Err says
    /// why there is none.
    pub fn stock_gpu_nvml(&self) -> Result<PathBuf, String> {
        let path = match (&self.chroot, self.release.origin) {
            (Some(root), chroot::Origin::Source) => root.host_path(format!("/usr/lib/{}/slurm-stock-gpu-nvml/gpu_nvml.so", chroot::triplet())),
            _ => chroot::chroot_base().join(format!("stock-gpu-nvml-{}", self.release.suite)).join(&self.version).join("gpu_nvml.so"),
        };
        if path.is_file() {
            Ok(path)
        } else {
            let how = if self.release.origin == chroot::Origin::Source {
                format!("tests/testbed/slurm-source.sh {}", self.series)
            } else {
                format!("tests/testbed/stock-gpu-nvml.sh {}", self.release.suite)
            };
            Err(format!("no stock gpu_nvml.so for Slurm {} at {} (build it with {how})", self.version, path.display()))
        }
    }

    /// [`TestBed::stock_gpu_nvml`] for a test that compares with it; `None`
    /// (the test has nothing to compare with) where there is none, after
    /// [`skip_or_fail`] (a failure under `GRES_RS_REQUIRE_SLURM`/CI).
    #[track_caller]
    pub fn stock_gpu_nvml_for(&self, test: &str) -> Option<PathBuf> {
        let name = format!("{test} [Slurm {}]", self.version);
        match self.stock_gpu_nvml() {
            Ok(p) => Some(p),
            Err(e) => {
                skip_or_fail(&name, &e);
                None
            }
        }
    }

    /// `cfg` on this release (its chroot, if any).
    pub fn on(&self, mut cfg: ClusterConfig) -> ClusterConfig {
        cfg.chroot = self.chroot.clone();
        cfg
    }

    /// [`ClusterConfig::gpus`] on this release.
    pub fn config(&self, plugins: PluginSet, n: u32) -> ClusterConfig {
        self.on(ClusterConfig::gpus(plugins, n))
    }

    /// Our build for this release (the shipping features): on the host the
    /// workspace's own build ([`locate_our_library`], plugin files built
    /// into this crate); for a chroot's release `cargo build -p gres_rs`
    /// with `SLURM_INCLUDE_DIR=<chroot>/usr/include` into
    /// `<target>/slurm-<version>/`, once per test process (cargo's lock on
    /// that target dir keeps parallel test binaries from building it
    /// twice: the second finds it fresh).  Err: why there is none, with
    /// the build's first error lines.
    pub fn our_build(&self) -> Result<OurBuild, String> {
        self.build(false)
    }

    /// The same with [`TEST_FEATURES`] (`<target>/slurm-<version>/test-build/`
    /// for a chroot, [`test_build_dir`] on the host).
    pub fn our_test_build(&self) -> Result<OurBuild, String> {
        self.build(true)
    }

    fn build(&self, test_hooks: bool) -> Result<OurBuild, String> {
        let release_profile = !cfg!(debug_assertions);
        let Some(root) = &self.chroot else {
            let lib_dir = if test_hooks { test_build_dir(release_profile) } else { locate_our_library()? };
            return Ok(OurBuild { version: self.version.clone(), lib_dir, plugin_files_dir: None, test_hooks });
        };
        static CACHE: Mutex<BTreeMap<(String, bool), Result<OurBuild, String>>> = Mutex::new(BTreeMap::new());
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let key = (self.version.clone(), test_hooks);
        if let Some(r) = cache.get(&key) {
            return r.clone();
        }
        let mut target = target_dir().join(format!("slurm-{}", self.version));
        if test_hooks {
            target = target.join("test-build");
        }
        let r = cargo_build(&self.version, &root.host_path("/usr/include"), &target, test_hooks, release_profile);
        cache.insert(key, r.clone());
        r
    }

    /// How our plugins behave on this release: the product's own table
    /// (`ffi::behaviour::for_release`, the data a build for this version
    /// compiles in), for a test whose expectation depends on what ours
    /// does there (e.g. `core_reads_fake_gpus`: 26.05's slurmd reads
    /// fake_gpus.conf itself and ours does not read it again).
    pub fn ours_behaviour(&self) -> slurm_gpu_gres::core::behaviour::Behaviour {
        let n: Vec<u32> = self.version.split('.').map(|x| x.parse().unwrap_or(0)).collect();
        let (a, b, c) = (n.first().copied().unwrap_or(0), n.get(1).copied().unwrap_or(0), n.get(2).copied().unwrap_or(0));
        slurm_gpu_gres::ffi::behaviour::for_release(a, b, c).unwrap_or_else(|| panic!("no Behaviour of ours for Slurm {}", self.version))
    }

    /// `cfg` (plugins Ours or OursOnly) with our build for this release
    /// ([`TestBed::our_build`], or [`TestBed::our_test_build`] when `cfg`
    /// asked for the test build); `None` when there is none and the test
    /// is skipped (printed); panics instead under `GRES_RS_REQUIRE_SLURM=1`
    /// / `CI=true`: "our build for 24.11.5 failed: ...".
    #[track_caller]
    pub fn ours_config(&self, cfg: ClusterConfig, test: &str) -> Option<ClusterConfig> {
        let test_hooks = cfg.plugin_build_dir.is_some();
        match if test_hooks { self.our_test_build() } else { self.our_build() } {
            Ok(b) => Some(self.on(b.apply(cfg))),
            Err(e) => {
                skip_or_fail(test, &format!("our build for {} failed: {e}", self.version));
                None
            }
        }
    }
}

impl TestBed {
    /// The stock-vs-ours differential of `scn` on this release: stock
    /// first (which validates the release's test bed), then ours from
    /// [`TestBed::ours_config`]; `None` when ours is skipped (no build,
    /// printed).  Panics on any difference, like [`crate::differential`].
    #[track_caller]
    pub fn differential(&self, scn: &Scenario, test: &str) -> Option<(ScenarioResult, ScenarioResult)> {
        self.differential_with(scn, PluginSet::Ours, test)
    }

    /// [`TestBed::differential`] with any non-stock set.
    #[track_caller]
    pub fn differential_with(&self, scn: &Scenario, set: PluginSet, test: &str) -> Option<(ScenarioResult, ScenarioResult)> {
        let mut s = scn.clone();
        s.config = self.on(s.config);
        let stock = run_scenario(&s, PluginSet::Stock);
        let mut cfg = s.config.clone();
        cfg.plugins = set.clone();
        let Some(cfg) = self.ours_config(cfg, test) else {
            eprintln!("{}", stock.report());
            return None;
        };
        s.config = cfg;
        let ours = run_scenario(&s, set);
        assert_no_differences(&s, &stock, &ours);
        Some((stock, ours))
    }
}

thread_local! {
    /// The release a [`per_release!`](crate::per_release) test is running on.
    static CURRENT: std::cell::RefCell<Option<TestBed>> = const { std::cell::RefCell::new(None) };
}

/// The release the calling thread's [`run_test`] runs on (`None` outside
/// one): [`ClusterConfig::gpus`] puts its configs in its chroot.
pub fn current() -> Option<TestBed> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The panic payload of "our build for this release is missing" raised
/// where a cluster with our plugins is prepared in a chroot without one
/// ([`our_build_for_chroot`]); [`run_test`] turns it into a skip, or under
/// strict mode into a failure with its message.
#[derive(Clone, Debug)]
pub struct OursUnavailable(pub String);

/// Our build for the release of chroot `root` (the test-hooks one when
/// `test_hooks`), for a config that asked for ours without naming it.
/// Panics with [`OursUnavailable`] when there is none.
pub fn our_build_for_chroot(root: &Chroot, test_hooks: bool) -> OurBuild {
    let v = root.slurm_version().unwrap_or_default();
    let bed = TestBed {
        release: chroot::all_releases().into_iter().find(|r| series_of(r.slurm) == series_of(&v)).unwrap_or(chroot::RELEASES[1]),
        series: series_of(&v),
        version: v.clone(),
        chroot: Some(root.clone()),
        behaviour: behaviour_of(&v),
    };
    match bed.build(test_hooks) {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("our build for {v} failed: {e}");
            eprintln!("{msg}");
            std::panic::panic_any(OursUnavailable(msg))
        }
    }
}

/// Prints why `test` is skipped, or panics with it under strict mode.
#[track_caller]
pub fn skip_or_fail(test: &str, why: &str) {
    if crate::strict_mode() {
        panic!("{test}: {why}\n(GRES_RS_REQUIRE_SLURM/CI is set, so this is a failure)");
    }
    crate::ledger::skipped(test, why);
}

/// Our files for one release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OurBuild {
    pub version: String,
    /// The directory of `libgres_rs.so`.
    pub lib_dir: PathBuf,
    /// The directory of the four plugin files built for this release
    /// (`gres-slurm-abi`'s `OUT_DIR/plugin-files`); `None`: the ones built
    /// into this crate (the host's release).
    pub plugin_files_dir: Option<PathBuf>,
    pub test_hooks: bool,
}

impl OurBuild {
    /// `cfg` taking our files from this build.
    pub fn apply(&self, mut cfg: ClusterConfig) -> ClusterConfig {
        cfg.plugin_build_dir = Some(self.lib_dir.clone());
        cfg.plugin_files_dir = self.plugin_files_dir.clone();
        cfg
    }
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

/// `cargo build -p gres_rs` for the Slurm headers in `include`, into
/// `target`; the library's dir and the plugin files' dir (from the build
/// script's `out_dir` in cargo's JSON messages).
pub(crate) fn cargo_build(version: &str, include: &Path, target: &Path, test_hooks: bool, release: bool) -> Result<OurBuild, String> {
    let t0 = Instant::now();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args(["build", "-p", "gres_rs", "--message-format=json-render-diagnostics", "--target-dir"]).arg(target);
    if test_hooks {
        cmd.args(["--features", TEST_FEATURES]);
    }
    if release {
        cmd.arg("--release");
    }
    cmd.env("SLURM_INCLUDE_DIR", include).env_remove("SLURM_VERSION");
    eprintln!("testbed: building ours for Slurm {version} ({}) in {}", if test_hooks { "test hooks" } else { "shipping features" }, target.display());
    let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(first_error_lines(&stderr, 12));
    }
    let lib_dir = target.join(if release { "release" } else { "debug" });
    if !lib_dir.join(crate::BUILT_LIBRARY_FILE).is_file() {
        return Err(format!("cargo built no {}", lib_dir.join(crate::BUILT_LIBRARY_FILE).display()));
    }
    let out_dir = stdout
        .lines()
        .filter(|l| l.contains("\"reason\":\"build-script-executed\"") && l.contains("slurm-abi"))
        .filter_map(|l| l.split("\"out_dir\":\"").nth(1).and_then(|r| r.split('"').next()))
        .next_back()
        .ok_or_else(|| "cargo reported no build script run of gres-slurm-abi (its out_dir holds the plugin files)".to_string())?;
    let files = PathBuf::from(out_dir).join("plugin-files");
    for f in crate::PLUGIN_FILES {
        if !files.join(format!("{}.so", f.file)).is_file() {
            return Err(format!("{} lacks {}.so", files.display(), f.file));
        }
    }
    eprintln!("testbed: ours for Slurm {version} built in {:.1?}", t0.elapsed());
    Ok(OurBuild { version: version.to_string(), lib_dir, plugin_files_dir: Some(files), test_hooks })
}

/// The lines of a failed cargo build that say why: from the first
/// `error`/`panicked` line on, at most `n`.
fn first_error_lines(stderr: &str, n: usize) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines.iter().position(|l| l.contains("error") || l.contains("panicked")).unwrap_or(lines.len().saturating_sub(n));
    lines[start..].iter().filter(|l| !l.trim().is_empty()).take(n).copied().collect::<Vec<_>>().join("\n")
}

/// Runs `body` on the release of `series` when `GRES_RS_SLURM` selects it
/// and it exists (else prints why it is skipped, or fails when the
/// release was named explicitly under strict mode), and prints how long
/// it took.  What [`per_release!`](crate::per_release) calls.
#[track_caller]
pub fn run_test(test: &str, series: &str, body: impl FnOnce(&TestBed)) {
    let name = format!("{test} [Slurm {series}]");
    let sel = Selection::from_env().unwrap_or_else(|e| panic!("{e}"));
    if !sel.selects(series) {
        crate::ledger::skipped(&name, "not selected by GRES_RS_SLURM");
        return;
    }
    if series == series_of(chroot::RELEASES[0].slurm) && !crate::require_slurm(&name) {
        return;
    }
    let bed = match TestBed::open(series) {
        Ok(b) => b,
        Err(e) => {
            let setup = chroot::all_releases().into_iter().find(|r| series_of(r.slurm) == series).map(|r| r.setup_command()).unwrap_or_default();
            let why = format!("no test bed for Slurm {series}: {e} (build it with {setup})");
            // Under GRES_RS_REQUIRE_SLURM / CI (tests/run.sh) every release
            // of the test bed must be there; otherwise `all` means the ones
            // that exist.
            if sel == Selection::All && !crate::strict_mode() {
                crate::ledger::skipped(&name, &format!("{why}; GRES_RS_SLURM=all runs the releases that exist"));
            } else {
                skip_or_fail(&name, &why);
            }
            return;
        }
    };
    let t0 = Instant::now();
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| c.borrow_mut().take());
        }
    }
    CURRENT.with(|c| *c.borrow_mut() = Some(bed.clone()));
    let _reset = Reset;
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&bed))) {
        match p.downcast_ref::<OursUnavailable>() {
            Some(OursUnavailable(msg)) => {
                skip_or_fail(&name, msg);
                return;
            }
            None => std::panic::resume_unwind(p),
        }
    }
    eprintln!("testbed: {name} on {} passed in {:.1?}", bed.label(), t0.elapsed());
    crate::ledger::ran(&name);
    record_time(test, &bed.version, t0.elapsed());
}

/// Appends `<test binary>\t<test>\t<version>\t<seconds>` to
/// `<target>/tmp/testbed-times.tsv` (the per-release run times, without
/// `--nocapture`).
fn record_time(test: &str, version: &str, took: std::time::Duration) {
    use std::io::Write;
    let bin =
        std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().split('-').next().unwrap_or("").to_string())).unwrap_or_default();
    let dir = crate::target_tmp_dir();
    let _ = std::fs::create_dir_all(&dir);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("testbed-times.tsv")) {
        let _ = writeln!(f, "{bin}\t{test}\t{version}\t{:.1}", took.as_secs_f64());
    }
}

/// Defines each test once per release series of the test bed, as a module
/// of eight `#[test]`s: `<name>::slurm_22_05`, `slurm_23_02`, ...,
/// `slurm_26_05` (filter one with `cargo test slurm_24_11`); each runs
/// [`run_test`], which skips a series `GRES_RS_SLURM` does not select.
/// Attributes (doc comments) go on the module.
#[macro_export]
macro_rules! per_release {
    ($( $(#[$m:meta])* fn $name:ident($bed:ident) $body:block )*) => {$(
        $(#[$m])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn body($bed: &$crate::testbed::TestBed) $body
            #[test]
            fn slurm_22_05() { $crate::testbed::run_test(stringify!($name), "22.05", body) }
            #[test]
            fn slurm_23_02() { $crate::testbed::run_test(stringify!($name), "23.02", body) }
            #[test]
            fn slurm_23_11() { $crate::testbed::run_test(stringify!($name), "23.11", body) }
            #[test]
            fn slurm_24_05() { $crate::testbed::run_test(stringify!($name), "24.05", body) }
            #[test]
            fn slurm_24_11() { $crate::testbed::run_test(stringify!($name), "24.11", body) }
            #[test]
            fn slurm_25_05() { $crate::testbed::run_test(stringify!($name), "25.05", body) }
            #[test]
            fn slurm_25_11() { $crate::testbed::run_test(stringify!($name), "25.11", body) }
            #[test]
            fn slurm_26_05() { $crate::testbed::run_test(stringify!($name), "26.05", body) }
        }
    )*};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection() {
        assert_eq!(Selection::parse("").unwrap(), Selection::All);
        assert_eq!(Selection::parse("ALL").unwrap(), Selection::All);
        assert_eq!(Selection::parse("24.11").unwrap(), Selection::Only(vec!["24.11".into()]));
        assert_eq!(Selection::parse("22.05.8, 26.05").unwrap(), Selection::Only(vec!["22.05".into(), "26.05".into()]));
        assert!(Selection::parse("21.08").is_err());
        assert!(!Selection::parse("24.11").unwrap().selects("22.05"));
        assert_eq!(Selection::parse("debian, source:23.11").unwrap(), Selection::Only(vec!["22.05".into(), "24.11".into(), "26.05".into(), "23.11".into()]));
        assert_eq!(Selection::parse("source").unwrap(), Selection::Only(["23.02", "23.11", "24.05", "25.05", "25.11"].map(String::from).to_vec()));
    }

    #[test]
    fn table_covers_the_test_bed() {
        assert_eq!(all_series(), ["22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05"]);
        assert_eq!(BEHAVIOURS.iter().map(|b| b.series).collect::<Vec<_>>(), all_series());
        for s in all_series() {
            assert_eq!(behaviour_of(&format!("{s}.1")).series, s);
        }
    }

    #[test]
    fn prefixes() {
        assert_eq!(LogPrefix::Program.strip("slurmd: Gres Name=gpu", "slurmd"), "Gres Name=gpu");
        assert_eq!(LogPrefix::Timestamp.strip("[2026-12-01T12:00:00.123] Gres Name=gpu", "slurmd"), "Gres Name=gpu");
        assert_eq!(LogPrefix::Timestamp.strip("Gres Name=gpu", "slurmd"), "Gres Name=gpu");
    }
}

#[cfg(test)]
mod build_tests {
    /// The build path of a chroot release, exercised with the host's own
    /// headers (`<target>/slurm-<host version>-selftest`): the library and
    /// the four plugin files are found.  Slow (a full build): `--ignored`.
    #[test]
    #[ignore]
    fn cargo_build_finds_library_and_plugin_files() {
        let v = super::host_version().unwrap_or_else(|| "22.05.8".into());
        // The directory the release tests build into (tests/releases.rs).
        let target = crate::target_dir().join(format!("slurm-{v}"));
        let b = super::cargo_build(&v, std::path::Path::new("/usr/include"), &target, false, false).unwrap_or_else(|e| panic!("{e}"));
        assert!(b.lib_dir.join(crate::BUILT_LIBRARY_FILE).is_file());
        let files = b.plugin_files_dir.expect("plugin files dir");
        for f in crate::PLUGIN_FILES {
            assert!(files.join(format!("{}.so", f.file)).is_file(), "{}", f.file);
        }
    }
}
