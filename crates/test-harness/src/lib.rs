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
//! (`tests/nvml-standin/nvml_standin.c`); [`gpu`] holds the helpers of the
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

pub use fsutil::{make_fake_gpu_nodes, TempDir};
pub use process::CmdOutput;
pub use scenario::*;

use slurm_gpu_gres::plugin_file_bytes;
pub use slurm_gpu_gres::plugins::files::{is_library_file, BUILT_LIBRARY_FILE, LIBRARY_FILE, PLUGIN_FILES};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// The plugin files this project replaces (names slurmd loads, minus ".so").
pub const OUR_PLUGINS: [&str; PLUGIN_FILES.len()] = {
    let mut names = [""; PLUGIN_FILES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = PLUGIN_FILES[i].file;
        i += 1;
    }
    names
};

/// Serializes clusters inside one test binary (2 cores; parallel daemon
/// start-ups are slow and flaky). Held for a cluster's whole lifetime.
static CLUSTER_LOCK: Mutex<()> = Mutex::new(());

thread_local! {
    /// Clusters alive on this thread: a thread that already holds the lock
    /// may start more clusters (e.g. stock and ours side by side) without
    /// deadlocking on itself.
    static HELD_BY_THIS_THREAD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One cluster's share of [`CLUSTER_LOCK`].
struct ClusterLock {
    guard: Option<MutexGuard<'static, ()>>,
}

impl Drop for ClusterLock {
    fn drop(&mut self) {
        HELD_BY_THIS_THREAD.with(|h| h.set(h.get().saturating_sub(1)));
        self.guard.take();
    }
}

fn lock_clusters() -> ClusterLock {
    let held = HELD_BY_THIS_THREAD.with(|h| h.get());
    let guard = if held > 0 { None } else { Some(CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner())) };
    HELD_BY_THIS_THREAD.with(|h| h.set(h.get() + 1));
    ClusterLock { guard }
}

// ---------------------------------------------------------------------------
// Tools and prerequisites
// ---------------------------------------------------------------------------

/// Absolute path of a system tool, searching PATH and the sbin dirs (cargo
/// may run tests with a PATH lacking /usr/sbin). Falls back to the bare name.
pub fn tool(name: &str) -> PathBuf {
    find_tool(name).unwrap_or_else(|| PathBuf::from(name))
}

fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    for d in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"] {
        dirs.push(PathBuf::from(d));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

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

// ---------------------------------------------------------------------------
// Our plugin files
// ---------------------------------------------------------------------------

/// Finds the directory holding our built `libgres_rs.so` (the code of all
/// our plugins; the plugin files themselves are built into this crate):
/// `$GRES_RS_PLUGIN_DIR`, else `$CARGO_TARGET_DIR` (or
/// `<workspace>/target`) `/debug` or `/release` (the one matching this
/// build's profile first).
pub fn locate_our_library() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("GRES_RS_PLUGIN_DIR") {
        let d = PathBuf::from(d);
        return if library_in(&d).is_file() {
            Ok(d)
        } else {
            Err(format!("GRES_RS_PLUGIN_DIR={} lacks {LIBRARY_FILE}; run `cargo build --workspace` first", d.display()))
        };
    }
    let target = target_dir();
    // This crate is built in the profile of the test, benchmark or example
    // that links it (cargo builds a target's dependencies in its profile,
    // and Cargo.toml overrides no package's debug-assertions), so this is
    // the caller's profile: debug for tests, release for `cargo bench`.
    let profiles = if cfg!(debug_assertions) { ["debug", "release"] } else { ["release", "debug"] };
    let tried: Vec<PathBuf> = profiles.iter().map(|p| target.join(p)).collect();
    tried.iter().find(|d| d.join(BUILT_LIBRARY_FILE).is_file()).cloned().ok_or_else(|| {
        let looked: Vec<String> = tried.iter().map(|d| d.display().to_string()).collect();
        format!("{BUILT_LIBRARY_FILE} is not built; run `cargo build --workspace` first (or set GRES_RS_PLUGIN_DIR). Looked in: {}", looked.join("; "))
    })
}

/// Our library in `dir`: [`LIBRARY_FILE`] where the directory is laid out
/// as installed (a plugin directory, [`build_for_release`]'s), else
/// [`BUILT_LIBRARY_FILE`], the name cargo gives it in a target directory.
pub fn library_in(dir: &Path) -> PathBuf {
    let installed = dir.join(LIBRARY_FILE);
    if installed.is_file() {
        installed
    } else {
        dir.join(BUILT_LIBRARY_FILE)
    }
}

/// The workspace's root directory (the slurm-gpu-gres checkout: `tests/`,
/// `examples/`, `Cargo.toml` of the workspace), two levels above this
/// crate's `crates/test-harness`.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_else(|| manifest.join("../.."))
}

/// cargo's target directory: `$CARGO_TARGET_DIR` (relative: to the
/// workspace root), else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    let root = workspace_root();
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) if Path::new(&t).is_absolute() => PathBuf::from(t),
        Some(t) => root.join(t),
        None => root.join("target"),
    }
}

/// A directory for the test processes' own files: `<target>/tmp`, what
/// cargo gives integration tests and benchmarks as `CARGO_TARGET_TMPDIR`
/// (which a library crate such as this one does not get).
pub fn target_tmp_dir() -> PathBuf {
    target_dir().join("tmp")
}

/// The cargo features of [`test_build_dir`]'s build: the test hooks that
/// never reach a release build (`GRES_RS_PANIC_IN`; `GRES_RS_NVML_LIB`,
/// `GRES_RS_DEV_DIR`, `GRES_RS_MIG_MINORS` read from the daemon's
/// environment).
pub const TEST_FEATURES: &str = "fault-injection,test-hooks";

/// Our plugins built with [`TEST_FEATURES`] in a target dir of their own
/// (`<target>/test-build`), so that the normal build, which is what ships,
/// is left alone: the directory holding that `libgres_rs.so` (`debug/`, or
/// `release/` when `release`).  Built at the first call in a test process
/// (cargo finds it up to date after the first test binary).  For
/// [`ClusterConfig::plugin_build_dir`] of tests that put those variables
/// into slurmd's environment.
pub fn test_build_dir(release: bool) -> PathBuf {
    static BUILT: [std::sync::OnceLock<PathBuf>; 2] = [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    BUILT[usize::from(release)]
        .get_or_init(|| {
            let target = target_dir().join("test-build");
            // The cargo running the tests (`$CARGO`), else the one that
            // built this crate.
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
            let mut cmd = Command::new(cargo);
            cmd.current_dir(workspace_root()).args(["build", "--workspace", "--features", TEST_FEATURES, "--target-dir"]).arg(&target);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().unwrap_or_else(|e| panic!("cannot run cargo build for the test build: {e}"));
            assert!(status.success(), "cargo build --features {TEST_FEATURES} (the test build in {}) failed", target.display());
            target.join(if release { "release" } else { "debug" })
        })
        .clone()
}

/// Our plugins built for another Slurm release: `SLURM_INCLUDE_DIR=include
/// cargo build -p gres_rs --target-dir <target>/slurm-<version>` (the
/// test bed's own build of that release, [`testbed::TestBed::our_build`];
/// up to date after the first time), then `<that dir>/plugins/` holding
/// its library and the four plugin files its build.rs made, which
/// [`install_ours`] takes (set it as [`ClusterConfig::plugin_build_dir`]).
/// One build at a time per test process.  Returns the `plugins` dir.
pub fn build_for_release(version: &str, include: &Path) -> Result<PathBuf, String> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = target_dir().join(format!("slurm-{version}"));
    let built = testbed::cargo_build(version, include, &dir, false, false)?;
    let files = built.plugin_files_dir.ok_or_else(|| format!("the build for Slurm {version} names no plugin files"))?;
    let plugins = dir.join("plugins");
    fs::create_dir_all(&plugins).map_err(|e| format!("{}: {e}", plugins.display()))?;
    let copy = |src: &Path, name: &str| fsutil::install_atomic(src, &plugins.join(name), 0o755).map_err(|e| format!("installing {}: {e}", src.display()));
    copy(&built.lib_dir.join(BUILT_LIBRARY_FILE), LIBRARY_FILE)?;
    for f in &PLUGIN_FILES {
        copy(&files.join(format!("{}.so", f.file)), &format!("{}.so", f.file))?;
    }
    Ok(plugins)
}

/// One dynamic symbol of a shared object, as `nm -D` lists it.
pub struct DynSymbol {
    /// Without its `@VERSION`.
    pub name: String,
    /// nm's type letter: `T` code, `D`/`R`/`B` data, `U` undefined, `w`
    /// weak undefined, ...
    pub kind: String,
    /// `None` for undefined symbols.
    pub address: Option<String>,
}

impl DynSymbol {
    /// Defined in this object (not `U`, `w` or `v` without an address).
    pub fn defined(&self) -> bool {
        self.address.is_some()
    }
}

/// The dynamic symbols of `lib` (`nm -D`, binutils).
pub fn dynamic_symbols(lib: &Path) -> Vec<DynSymbol> {
    let out = Command::new("nm").arg("-D").arg(lib).output().unwrap_or_else(|e| panic!("cannot run nm (binutils): {e}"));
    assert!(out.status.success(), "nm -D {} failed: {}", lib.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (address, kind, name) = match line.split_whitespace().collect::<Vec<_>>()[..] {
                [address, kind, name] => (Some(address.to_string()), kind, name),
                [kind, name] => (None, kind, name),
                _ => return None,
            };
            Some(DynSymbol { name: name.split('@').next().unwrap_or(name).to_string(), kind: kind.to_string(), address })
        })
        .collect()
}

/// Installs our library from `built` and the named plugin files into
/// `dir`, each through a temporary file and rename(2); the library first,
/// so that a plugin file never sits there without it.  A plugin file that
/// `built` holds beside the library (a build for another Slurm release,
/// as `tests/releases.rs` assembles them) is taken from there; otherwise
/// the one built into this crate (for the release of this build).
pub fn install_ours(built: &Path, names: &[&str], dir: &Path) -> Result<(), String> {
    install_ours_from(built, None, names, dir)
}

/// [`install_ours`] with the plugin files taken from `plugin_files`
/// (another release's build, [`testbed::OurBuild`]) instead of the ones
/// built into this crate.
pub fn install_ours_from(built: &Path, plugin_files: Option<&Path>, names: &[&str], dir: &Path) -> Result<(), String> {
    let src = library_in(built);
    fsutil::install_atomic(&src, &dir.join(LIBRARY_FILE), 0o755).map_err(|e| format!("installing {} in {}: {e}", src.display(), dir.display()))?;
    for n in names {
        let file = PLUGIN_FILES.iter().find(|f| f.file == *n).ok_or_else(|| format!("{n} is not one of our plugin files"))?;
        let to = dir.join(format!("{n}.so"));
        // Another release's files: given, or beside its library; else the
        // files built into this crate.
        let beside = built.join(format!("{n}.so"));
        match plugin_files {
            Some(from) => fsutil::install_atomic(&from.join(format!("{n}.so")), &to, 0o755),
            None if beside.is_file() => fsutil::install_atomic(&beside, &to, 0o755),
            None => fsutil::write_atomic(plugin_file_bytes(file), &to, 0o755),
        }
        .map_err(|e| format!("installing {n}.so in {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// A symbolic link in `dir` to each file of the stock plugin directory
/// that `dir` lacks (by its path as the daemons see it: in a chroot the
/// chroot's).
fn link_stock_files(c: &ClusterConfig, dir: &Path) -> Result<(), String> {
    let stock = c.stock_plugin_dir();
    let listed = c.chroot.as_ref().map(|r| r.host_path(&stock)).unwrap_or_else(|| stock.clone());
    let entries = fs::read_dir(&listed).map_err(|e| format!("listing {}: {e}", listed.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if dir.join(&name).symlink_metadata().is_err() {
            std::os::unix::fs::symlink(stock.join(&name), dir.join(&name))
                .map_err(|e| format!("linking {} in {}: {e}", name.to_string_lossy(), dir.display()))?;
        }
    }
    Ok(())
}

/// Which plugin files slurmd/slurmctld/slurmstepd should load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginSet {
    /// PluginDir = Debian's dir only.
    Stock,
    /// `PluginDir=<cluster>/plugins:<Debian's dir>` (all four of ours).
    Ours,
    /// Like `Ours` but only the named plugins (e.g. `["gres_gpu"]`) are
    /// installed; the rest come from Debian's dir. Useful to bisect.
    OursOnly(Vec<String>),
    /// All four of ours, already installed in this directory (by the
    /// Debian package): `PluginDir=<dir>:<Debian's dir>`, nothing copied.
    Installed(PathBuf),
    /// All four of ours installed in this directory and reached through
    /// links in the stock directory (the divert package):
    /// `PluginDir=<Debian's dir>` only, the daemons map ours from `<dir>`.
    Diverted(PathBuf),
}

impl PluginSet {
    /// Names of our plugins installed by this set.
    pub fn ours(&self) -> Vec<String> {
        match self {
            PluginSet::Stock => vec![],
            PluginSet::Ours => OUR_PLUGINS.iter().map(|s| s.to_string()).collect(),
            PluginSet::OursOnly(v) => v.clone(),
            PluginSet::Installed(_) | PluginSet::Diverted(_) => OUR_PLUGINS.iter().map(|s| s.to_string()).collect(),
        }
    }
    pub fn label(&self) -> String {
        match self {
            PluginSet::Stock => "stock".into(),
            PluginSet::Ours => "ours".into(),
            PluginSet::OursOnly(v) => format!("ours[{}]", v.join(",")),
            PluginSet::Installed(d) => format!("ours in {}", d.display()),
            PluginSet::Diverted(d) => format!("ours in {} through the stock directory", d.display()),
        }
    }
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// Everything configurable about a test cluster. Text fields may use the
/// placeholders `{DIR}` (cluster root), `{DEV}` (fake device dir),
/// `{ETC}` (dir of slurm.conf), `{NODE}` (node name).
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub plugins: PluginSet,
    pub node_name: String,
    pub cpus: u32,
    pub boards: u32,
    pub sockets_per_board: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub real_memory_mb: u64,
    /// `GresTypes=`
    pub gres_types: String,
    /// Node's `Gres=` (None: no Gres= on the node line).
    pub node_gres: Option<String>,
    /// gres.conf contents (placeholders allowed).
    pub gres_conf: String,
    /// fake_gpus.conf next to slurm.conf (placeholders allowed).
    pub fake_gpus_conf: Option<String>,
    /// fake_gpus.conf next to slurm.conf as a symbolic link to this path
    /// (placeholders allowed; instead of `fake_gpus_conf`).
    pub fake_gpus_link: Option<String>,
    /// Number of fake device nodes `{DEV}/nvidia0..N-1` to create.
    pub fake_gpus: u32,
    /// Prolog/Epilog script bodies (written to {ETC}/prolog.sh etc.).
    pub prolog: Option<String>,
    pub epilog: Option<String>,
    /// When set (and prolog/epilog are None), Prolog/Epilog dump their
    /// environment (tags "prolog"/"epilog") for the scenario machinery.
    pub dump_prolog_epilog_env: bool,
    /// `DebugFlags=Gres`
    pub debug_gres: bool,
    pub slurmd_debug: String,
    pub slurmctld_debug: String,
    pub select_type_parameters: String,
    /// Extra slurm.conf lines (before the node/partition lines).
    pub extra_slurm_conf: Vec<String>,
    /// Job accounting in a database: the cluster starts a MariaDB server
    /// of the host ([`accounting::Database`]) and the release's slurmdbd
    /// over it before slurmctld, and slurm.conf says
    /// `AccountingStorageType=accounting_storage/slurmdbd`; both are
    /// stopped by PID with the cluster.  `sacct` then shows the jobs.
    pub accounting: bool,
    /// Extra words for the NodeName= line.
    pub extra_node_conf: String,
    /// cgroup.conf contents next to slurm.conf (None: no file, slurmd
    /// autodetects cgroup v1/v2; slurmd 22.05 always initializes a cgroup
    /// plugin even with proctrack/linuxproc + task/none).
    pub cgroup_conf: Option<String>,
    /// Extra environment for slurmd (and `slurmd -G`).
    pub slurmd_env: Vec<(String, String)>,
    /// `ProctrackType=` (default `proctrack/linuxproc`; the bench's
    /// instruction counts use `proctrack/pgid`, whose work does not grow
    /// with the number of processes on the machine as linuxproc's walk of
    /// `/proc` does).
    pub proctrack: String,
    /// Ours installed among the stock files, as a package that diverts
    /// the stock files or a site that copies ours into Slurm's directory
    /// would: `PluginDir=<cluster>/plugins` only, holding ours and a
    /// symbolic link to every other file of the stock directory (slurmd
    /// then looks in one directory for every plugin, as with the stock
    /// set).  Default: `PluginDir=<cluster>/plugins:<stock dir>`.
    pub single_plugin_dir: bool,
    /// Extra arguments of the daemon slurmd (not of `slurmd -G`), after
    /// `-D -N <node>`: e.g. `-d <wrapper>`, which makes slurmd start each
    /// slurmstepd through that program (a path the chroot sees).
    pub slurmd_args: Vec<String>,
    /// `slurmd -G` runs as the last argument of this command (e.g.
    /// `/usr/bin/time -f ... prlimit --as=...`, host programs) when not
    /// empty; in a chroot the wrapper runs on the host around the
    /// `unshare ... chroot ... slurmd` line (an rlimit it sets is
    /// inherited across those `exec`s, and slurmd keeps the PID).  On its
    /// timeout the harness kills the command only: one that forks must
    /// end slurmd itself (`timeout -s KILL N`).
    pub slurmd_g_wrapper: Vec<String>,
    /// Build a stub libnvidia-ml.so (nvmlInit fails with "driver not
    /// loaded") and put it on slurmd's LD_LIBRARY_PATH, so that
    /// `AutoDetect=nvml` makes slurmd load gpu_nvml.so.
    pub nvml_stub: bool,
    /// Wait for the node to be IDLE in `start` (else only for slurmd to be up).
    pub wait_idle: bool,
    /// For Ours: check `/proc/<pid>/maps` of slurmd+slurmctld in `start`.
    pub verify_ours_loaded: bool,
    pub start_timeout: Duration,
    /// Take our built `lib*.so` from this directory instead of the default
    /// build (e.g. [`test_build_dir`], with the test hooks).
    pub plugin_build_dir: Option<PathBuf>,
    /// Take our four plugin files from this directory instead of the ones
    /// built into this crate (which are the host release's): another
    /// release's build ([`testbed::OurBuild`]); required in a chroot.
    pub plugin_files_dir: Option<PathBuf>,
    /// Stock plugin files Debian does not ship (the bench's gpu_nvml.so
    /// built from Debian's source), copied into a directory that PluginDir
    /// names just before Debian's.
    pub extra_stock_plugins: Vec<PathBuf>,
    /// Run every daemon and client inside this Debian chroot (another
    /// Slurm release, [`chroot`]) instead of on the host; `None`: the host.
    /// The cluster's directory is bind-mounted at the same path inside.
    pub chroot: Option<chroot::Chroot>,
    /// More host paths (directories or files) that the daemons, `slurmd
    /// -G` and the clients need to see at the same path inside the chroot
    /// (each bind-mounted there by [`chroot::Chroot::command`], besides the
    /// cluster's directory): e.g. the NVML stand-in's library, fixtures and
    /// scratch files ([`standin::chroot_binds`]).  Unused on the host.
    pub binds: Vec<PathBuf>,
    /// Several slurmd nodes instead of the one `node_name` (empty: one
    /// node, on the host's network).  Each runs in network, UTS and mount
    /// namespaces of its own ([`netns`]); slurmctld and the client
    /// commands run in the hub namespace.  The node fields `node_name`,
    /// `node_gres` and `fake_gpus` are then unused; the CPU layout and
    /// `extra_node_conf` are every node's; `gres_conf` should hold
    /// `NodeName=` lines, each node's fake devices being
    /// `{DEV}/<node>/nvidia<i>`.
    pub nodes: Vec<NodeConfig>,
}

/// One slurmd node of a multi-node cluster ([`ClusterConfig::nodes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// NodeName (also its host name, in its own UTS namespace).
    pub name: String,
    /// Fake device nodes `{DEV}/<name>/nvidia0..N-1`.
    pub fake_gpus: u32,
    /// The node's `Gres=` (None: none).
    pub gres: Option<String>,
}

impl NodeConfig {
    /// Node `name` with `fake_gpus` devices and `Gres=<gres>` ("" for none).
    pub fn new(name: &str, fake_gpus: u32, gres: &str) -> NodeConfig {
        NodeConfig { name: name.into(), fake_gpus, gres: (!gres.is_empty()).then(|| gres.to_string()) }
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig::gpus(PluginSet::Stock, 4)
    }
}

impl ClusterConfig {
    /// One node with `n` fake GPUs: `Gres=gpu:n`, gres.conf
    /// `Name=gpu File={DEV}/nvidia[0-(n-1)]`, 4 CPUs, GresTypes=gpu,mps,shard.
    pub fn gpus(plugins: PluginSet, n: u32) -> Self {
        ClusterConfig {
            plugins,
            node_name: "gpunode".into(),
            cpus: 4,
            boards: 1,
            sockets_per_board: 1,
            cores_per_socket: 4,
            threads_per_core: 1,
            real_memory_mb: 1000,
            gres_types: "gpu,mps,shard".into(),
            node_gres: if n > 0 { Some(format!("gpu:{n}")) } else { None },
            gres_conf: gpu_gres_line(n),
            fake_gpus_conf: None,
            fake_gpus_link: None,
            fake_gpus: n,
            prolog: None,
            epilog: None,
            dump_prolog_epilog_env: false,
            debug_gres: true,
            slurmd_debug: "debug".into(),
            slurmctld_debug: "info".into(),
            select_type_parameters: "CR_Core".into(),
            extra_slurm_conf: vec![],
            accounting: false,
            extra_node_conf: String::new(),
            cgroup_conf: None,
            slurmd_env: vec![],
            slurmd_args: vec![],
            single_plugin_dir: false,
            proctrack: "proctrack/linuxproc".into(),
            slurmd_g_wrapper: vec![],
            nvml_stub: false,
            wait_idle: true,
            verify_ours_loaded: true,
            start_timeout: Duration::from_secs(60),
            plugin_build_dir: None,
            plugin_files_dir: None,
            extra_stock_plugins: Vec::new(),
            chroot: testbed::current().and_then(|b| b.chroot),
            binds: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// A cluster of the `nodes` (see [`ClusterConfig::nodes`]); gres.conf
    /// is left empty for the caller.
    pub fn multi(plugins: PluginSet, nodes: Vec<NodeConfig>) -> Self {
        let mut c = ClusterConfig::gpus(plugins, 0);
        c.nodes = nodes;
        c
    }

    /// True for a cluster of several nodes ([`ClusterConfig::nodes`]).
    pub fn is_multi(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// The NodeNames of the cluster, in order.
    pub fn node_names(&self) -> Vec<String> {
        if self.is_multi() {
            self.nodes.iter().map(|n| n.name.clone()).collect()
        } else {
            vec![self.node_name.clone()]
        }
    }

    /// Every node's `Gres=` (the GRES names slurmctld learns).
    fn all_node_gres(&self) -> Vec<String> {
        if self.is_multi() {
            self.nodes.iter().filter_map(|n| n.gres.clone()).collect()
        } else {
            self.node_gres.iter().cloned().collect()
        }
    }

    /// Runs the cluster inside `root` (its Slurm release and stock plugins).
    pub fn in_chroot(mut self, root: chroot::Chroot) -> Self {
        self.chroot = Some(root);
        self
    }

    /// The stock plugin directory of the daemons: Debian's on the host,
    /// or the chroot's (a path inside it).
    pub fn stock_plugin_dir(&self) -> PathBuf {
        self.chroot.as_ref().map(|r| r.stock_plugin_dir()).unwrap_or_else(stock_plugin_dir)
    }

    /// The Slurm version the daemons run: the chroot's, or the host's.
    pub fn slurm_version(&self) -> String {
        match &self.chroot {
            Some(r) => r.slurm_version().unwrap_or_default(),
            None => testbed::host_version().unwrap_or_else(|| chroot::RELEASES[0].slurm.to_string()),
        }
    }

    /// A `Command` for a Slurm (or other) program on the host, or inside
    /// the chroot with the cluster's directory `dir` and [`binds`](Self::binds)
    /// visible.
    fn program(&self, prog: &str, dir: &Path) -> Command {
        match &self.chroot {
            None => Command::new(tool(prog)),
            Some(r) => {
                let mut binds = vec![dir.to_path_buf()];
                binds.extend(self.binds.iter().filter(|b| !b.starts_with(dir)).cloned());
                r.command(r.tool(prog).unwrap_or_else(|| PathBuf::from(prog)), &binds)
            }
        }
    }

    /// Adds host paths to [`binds`](Self::binds) (once each).
    pub fn with_binds(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        for p in paths {
            if !self.binds.contains(&p) {
                self.binds.push(p);
            }
        }
        self
    }

    /// Sets the CPU layout (sockets x cores x threads, 1 board).
    pub fn with_cpus(mut self, sockets: u32, cores_per_socket: u32, threads_per_core: u32) -> Self {
        self.boards = 1;
        self.sockets_per_board = sockets;
        self.cores_per_socket = cores_per_socket;
        self.threads_per_core = threads_per_core;
        self.cpus = sockets * cores_per_socket * threads_per_core;
        self
    }
    pub fn with_gres(mut self, node_gres: &str, gres_conf: &str) -> Self {
        self.node_gres = if node_gres.is_empty() { None } else { Some(node_gres.to_string()) };
        self.gres_conf = gres_conf.to_string();
        self
    }
    pub fn with_plugins(mut self, p: PluginSet) -> Self {
        self.plugins = p;
        self
    }
    /// Our plugins from the test build ([`test_build_dir`], debug), which
    /// reads the test hooks from slurmd's environment.
    pub fn with_test_build(mut self) -> Self {
        self.plugin_build_dir = Some(test_build_dir(false));
        self
    }
}

/// `Name=gpu File={DEV}/nvidia[0-(n-1)]\n` ("" for n = 0).
pub fn gpu_gres_line(n: u32) -> String {
    match n {
        0 => String::new(),
        1 => "Name=gpu File={DEV}/nvidia0\n".into(),
        n => format!("Name=gpu File={{DEV}}/nvidia[0-{}]\n", n - 1),
    }
}

// ---------------------------------------------------------------------------
// The cluster's directory and files
// ---------------------------------------------------------------------------

/// Directory layout of one cluster (or one `slurmd -G` run).
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
    pub etc: PathBuf,
    pub log: PathBuf,
    pub run: PathBuf,
    pub spool: PathBuf,
    pub state: PathBuf,
    pub munge: PathBuf,
    pub dev: PathBuf,
    pub plugins: PathBuf,
    pub jobs: PathBuf,
    pub dumps: PathBuf,
    pub bin: PathBuf,
    pub capture: PathBuf,
}

impl Layout {
    fn create(prefix: &str) -> io::Result<Layout> {
        let root = fsutil::make_unique_dir(prefix)?;
        let l = Layout {
            etc: root.join("etc"),
            log: root.join("log"),
            run: root.join("run"),
            spool: root.join("spool"),
            state: root.join("state"),
            munge: root.join("munge"),
            dev: root.join("dev"),
            plugins: root.join("plugins"),
            jobs: root.join("jobs"),
            dumps: root.join("dumps"),
            bin: root.join("bin"),
            capture: root.join("capture"),
            root,
        };
        for d in [&l.etc, &l.log, &l.run, &l.spool, &l.state, &l.dev, &l.plugins, &l.jobs, &l.dumps, &l.bin, &l.capture] {
            fs::create_dir_all(d)?;
        }
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&l.jobs, fs::Permissions::from_mode(0o1777))?;
        fs::set_permissions(&l.dumps, fs::Permissions::from_mode(0o1777))?;
        Ok(l)
    }

    /// Replaces the placeholders {DIR} {DEV} {ETC} {NODE}.
    pub fn subst(&self, s: &str, node: &str) -> String {
        s.replace("{DIR}", &self.root.to_string_lossy())
            .replace("{DEV}", &self.dev.to_string_lossy())
            .replace("{ETC}", &self.etc.to_string_lossy())
            .replace("{NODE}", node)
    }

    pub fn slurm_conf(&self) -> PathBuf {
        self.etc.join("slurm.conf")
    }
    pub fn munge_socket(&self) -> PathBuf {
        self.munge.join("munge.sock")
    }
    pub fn dump_env_script(&self) -> PathBuf {
        self.bin.join("dump-env")
    }
}

/// Files prepared for a cluster: config written, fake GPUs made, our
/// plugins installed. Shared by `Cluster::start` and `Cluster::slurmd_g`.
struct Prepared {
    layout: Layout,
    fake_gpus: Vec<PathBuf>,
    plugin_dir_setting: String,
    our_dir: Option<PathBuf>,
    ld_library_path: Option<PathBuf>,
}

fn prepare(config: &ClusterConfig, prefix: &str, name: &str, ctld_port: u16, slurmd_port: u16) -> Result<Prepared, String> {
    let layout = Layout::create(prefix).map_err(|e| format!("creating temp dir: {e}"))?;
    let r = prepare_in(&layout, config, name, ctld_port, slurmd_port);
    match r {
        Ok((fake_gpus, plugin_dir_setting, our_dir, ld)) => Ok(Prepared { layout, fake_gpus, plugin_dir_setting, our_dir, ld_library_path: ld }),
        Err(e) => {
            if keep_dirs() {
                let _ = fs::remove_file(layout.root.join(fsutil::IN_USE_MARKER));
            } else {
                let _ = fs::remove_dir_all(&layout.root);
            }
            Err(e)
        }
    }
}

type PrepParts = (Vec<PathBuf>, String, Option<PathBuf>, Option<PathBuf>);

fn prepare_in(l: &Layout, c: &ClusterConfig, name: &str, ctld_port: u16, slurmd_port: u16) -> Result<PrepParts, String> {
    let e = |what: &str| {
        let what = what.to_string();
        move |err: io::Error| format!("{what}: {err}")
    };
    let mut fake_gpus = Vec::new();
    if c.is_multi() {
        for n in &c.nodes {
            fake_gpus.extend(fsutil::make_fake_gpu_nodes(&l.dev.join(&n.name), n.fake_gpus).map_err(e("creating fake GPU device nodes"))?);
            fs::create_dir_all(l.spool.join(&n.name)).map_err(e("creating a node's spool dir"))?;
        }
    } else {
        fake_gpus = fsutil::make_fake_gpu_nodes(&l.dev, c.fake_gpus).map_err(e("creating fake GPU device nodes"))?;
    }

    // Our plugins, installed under the names slurmd loads (temp + rename).
    let mut stock = c.stock_plugin_dir().to_string_lossy().into_owned();
    if !c.extra_stock_plugins.is_empty() {
        let extra = l.root.join("stock-extra");
        fs::create_dir_all(&extra).map_err(e("creating stock-extra"))?;
        for f in &c.extra_stock_plugins {
            let name = f.file_name().ok_or_else(|| format!("{}: not a file", f.display()))?;
            fs::copy(f, extra.join(name)).map_err(e(&format!("copying {}", f.display())))?;
        }
        stock = format!("{}:{stock}", extra.display());
    }
    let ours = c.plugins.ours();
    let (plugin_dir_setting, our_dir) = if ours.is_empty() {
        (stock, None)
    } else if let PluginSet::Installed(dir) = &c.plugins {
        (format!("{}:{stock}", dir.display()), Some(dir.clone()))
    } else if let PluginSet::Diverted(dir) = &c.plugins {
        (stock, Some(dir.clone()))
    } else {
        let names: Vec<&str> = ours.iter().map(|s| s.as_str()).collect();
        // In a chroot, the default build and the plugin files built into
        // the harness are the host release's: our build for the chroot's
        // release instead (the test-hooks one when the config asked for a
        // build of its own), or the OursUnavailable panic.
        let release_build = match &c.chroot {
            Some(root) if c.plugin_files_dir.is_none() => Some(testbed::our_build_for_chroot(root, c.plugin_build_dir.is_some())),
            _ => None,
        };
        let c = &match release_build {
            Some(b) => b.apply(c.clone()),
            None => c.clone(),
        };
        let built = match &c.plugin_build_dir {
            Some(d) => d.clone(),
            None => locate_our_library()?,
        };
        install_ours_from(&built, c.plugin_files_dir.as_deref(), &names, &l.plugins)?;
        if c.single_plugin_dir {
            if !c.extra_stock_plugins.is_empty() {
                return Err("single_plugin_dir with extra_stock_plugins: not supported".into());
            }
            link_stock_files(c, &l.plugins)?;
            (l.plugins.display().to_string(), Some(l.plugins.clone()))
        } else {
            (format!("{}:{stock}", l.plugins.display()), Some(l.plugins.clone()))
        }
    };

    let ld = if c.nvml_stub { Some(nvml_stub::build(&l.root.join("nvml-stub"))?) } else { None };

    // dump-env helper used by jobs, prolog and epilog.
    fsutil::write_file(&l.dump_env_script(), &scenario::dump_env_script_text(&l.dumps), 0o755).map_err(e("writing dump-env"))?;

    let node = &c.node_name;
    let mut prolog = c.prolog.clone();
    let mut epilog = c.epilog.clone();
    if c.dump_prolog_epilog_env {
        let d = l.dump_env_script();
        prolog.get_or_insert_with(|| format!("#!/bin/sh\n{} prolog >/dev/null 2>&1\nexit 0\n", d.display()));
        epilog.get_or_insert_with(|| format!("#!/bin/sh\n{} epilog >/dev/null 2>&1\nexit 0\n", d.display()));
    }
    let mut extra = Vec::new();
    if let Some(p) = &prolog {
        let path = l.etc.join("prolog.sh");
        fsutil::write_file(&path, &l.subst(p, node), 0o755).map_err(e("writing prolog"))?;
        extra.push(format!("Prolog={}", path.display()));
    }
    if let Some(p) = &epilog {
        let path = l.etc.join("epilog.sh");
        fsutil::write_file(&path, &l.subst(p, node), 0o755).map_err(e("writing epilog"))?;
        extra.push(format!("Epilog={}", path.display()));
    }

    let host = fsutil::short_hostname();
    let mut conf = String::new();
    let mut line = |s: String| {
        conf.push_str(&s);
        conf.push('\n');
    };
    line("# written by the slurm-gpu-gres test harness".into());
    line(format!("ClusterName={name}"));
    let ctld_addr = if c.is_multi() { netns::HUB_ADDR } else { "127.0.0.1" };
    line(format!("SlurmctldHost={host}({ctld_addr})"));
    line(format!("SlurmctldPort={ctld_port}"));
    line(format!("SlurmdPort={slurmd_port}"));
    line("AuthType=auth/munge".into());
    line("CredType=cred/munge".into());
    line(format!("AuthInfo=socket={}", l.munge_socket().display()));
    if c.accounting {
        // The munged socket of the connections to slurmdbd (they do not
        // take AuthInfo's).
        line(format!("AccountingStoragePass={}", l.munge_socket().display()));
    }
    line("SlurmUser=root".into());
    line("SlurmdUser=root".into());
    line(format!("StateSaveLocation={}", l.state.display()));
    // Several nodes: each its own spool dir, pid file and log (`%n`: the
    // node's name).
    let per_node = |dir: &Path, file: &str| if c.is_multi() { dir.join(file.replace('*', "-%n")) } else { dir.join(file.replace('*', "")) };
    line(format!("SlurmdSpoolDir={}", if c.is_multi() { l.spool.join("%n") } else { l.spool.clone() }.display()));
    line(format!("SlurmctldPidFile={}", l.run.join("slurmctld.pid").display()));
    line(format!("SlurmdPidFile={}", per_node(&l.run, "slurmd*.pid").display()));
    line(format!("SlurmctldLogFile={}", l.log.join("slurmctld.log").display()));
    line(format!("SlurmdLogFile={}", per_node(&l.log, "slurmd*.log").display()));
    line(format!("SlurmctldDebug={}", c.slurmctld_debug));
    line(format!("SlurmdDebug={}", c.slurmd_debug));
    if c.debug_gres {
        line("DebugFlags=Gres".into());
    }
    line(format!("PluginDir={plugin_dir_setting}"));
    line(format!("ProctrackType={}", c.proctrack));
    line("TaskPlugin=task/none".into());
    line("SelectType=select/cons_tres".into());
    line(format!("SelectTypeParameters={}", c.select_type_parameters));
    line(format!("GresTypes={}", c.gres_types));
    line("MpiDefault=none".into());
    line("SwitchType=switch/none".into());
    // Defaults a test may set otherwise in `extra_slurm_conf` (so that
    // each key is written once).
    let sets = |key: &str| extra.iter().chain(c.extra_slurm_conf.iter()).any(|x| x.split_once('=').is_some_and(|(k, _)| k.eq_ignore_ascii_case(key)));
    if !sets("JobAcctGatherType") {
        line("JobAcctGatherType=jobacct_gather/none".into());
    }
    if !sets("AccountingStorageType") {
        line("AccountingStorageType=accounting_storage/none".into());
    }
    line("JobCompType=jobcomp/none".into());
    line("SchedulerType=sched/backfill".into());
    let release = c.chroot.as_ref().and_then(|r| r.slurm_version().ok()).or_else(testbed::host_version).unwrap_or_default();
    if testbed::behaviour_of(&release).pending_jobs_wait_for_backfill && !sets("SchedulerParameters") {
        // Pending jobs start only when backfill runs (Behaviour field):
        // run it every second, not every 30.
        line("SchedulerParameters=bf_interval=1".into());
    }
    line("ReturnToService=2".into());
    if !sets("SlurmdParameters") {
        line("SlurmdParameters=config_overrides".into());
    }
    line("MailProg=/bin/true".into());
    line("InactiveLimit=0".into());
    line("KillWait=3".into());
    line("MinJobAge=300".into());
    line("SlurmdTimeout=60".into());
    for x in extra.iter().chain(c.extra_slurm_conf.iter()) {
        line(l.subst(x, node));
    }
    let node_line = |name: &str, hostname: &str, addr: &str, gres: Option<&String>| {
        let gres = gres.map(|g| format!(" Gres={g}")).unwrap_or_default();
        format!(
            "NodeName={name} NodeHostname={hostname} NodeAddr={addr} CPUs={} Boards={} SocketsPerBoard={} CoresPerSocket={} ThreadsPerCore={} RealMemory={}{gres} State=UNKNOWN {}",
            c.cpus,
            c.boards,
            c.sockets_per_board,
            c.cores_per_socket,
            c.threads_per_core,
            c.real_memory_mb,
            l.subst(&c.extra_node_conf, name)
        )
    };
    if c.is_multi() {
        for (i, n) in c.nodes.iter().enumerate() {
            line(node_line(&n.name, &n.name, &netns::node_addr(i), n.gres.as_ref()));
        }
    } else {
        line(node_line(node, &host, "127.0.0.1", c.node_gres.as_ref()));
    }
    line("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP".into());
    fsutil::write_file(&l.slurm_conf(), &conf, 0o644).map_err(e("writing slurm.conf"))?;
    fsutil::write_file(&l.etc.join("gres.conf"), &l.subst(&c.gres_conf, node), 0o644).map_err(e("writing gres.conf"))?;
    if let Some(cg) = &c.cgroup_conf {
        fsutil::write_file(&l.etc.join("cgroup.conf"), &l.subst(cg, node), 0o644).map_err(e("writing cgroup.conf"))?;
    }
    if let Some(f) = &c.fake_gpus_conf {
        fsutil::write_file(&l.etc.join("fake_gpus.conf"), &l.subst(f, node), 0o644).map_err(e("writing fake_gpus.conf"))?;
    }
    if let Some(target) = &c.fake_gpus_link {
        std::os::unix::fs::symlink(l.subst(target, node), l.etc.join("fake_gpus.conf")).map_err(e("linking fake_gpus.conf"))?;
    }
    Ok((fake_gpus, plugin_dir_setting, our_dir, ld))
}

fn keep_dirs() -> bool {
    std::env::var("GRES_RS_KEEP").map(|v| v == "1" || v.eq_ignore_ascii_case("true")).unwrap_or(false)
}

/// Removes inherited Slurm/GPU variables and sets SLURM_CONF etc.
fn clean_env(cmd: &mut Command, l: &Layout) {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("SLURM_") || k.starts_with("SALLOC_") || k.starts_with("SBATCH_") || k.starts_with("SRUN_") || scenario::is_gpu_var(&k) {
            cmd.env_remove(&k);
        }
    }
    cmd.env("SLURM_CONF", l.slurm_conf());
    cmd.env("GRES_RS_DUMP_ENV", l.dump_env_script());
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:{path}"));
    cmd.env("LC_ALL", "C");
}

/// Where a daemon of a cluster runs: on the host's network (munged), in
/// the hub (slurmctld, the clients; the host's network for one node), or
/// as node `i` of several ([`netns::Network`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Host,
    Hub,
    Node(usize),
}

/// Which daemon to inspect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Daemon {
    Munged,
    Slurmctld,
    Slurmd,
}

/// Final state/output of a batch job.
#[derive(Clone, Debug)]
pub struct JobResult {
    pub job_id: u32,
    /// JobState (e.g. COMPLETED, FAILED), or "UNKNOWN"/"TIMEOUT_WAITING".
    pub state: String,
    /// ExitCode field, e.g. "0:0".
    pub exit_code: String,
    /// Contents of the job's output file (stdout+stderr).
    pub output: String,
    /// `scontrol -o show job` line at the end.
    pub info: String,
}

impl JobResult {
    pub fn ok(&self) -> bool {
        self.state == "COMPLETED" && self.exit_code == "0:0"
    }
    #[track_caller]
    pub fn expect_ok(self, what: &str) -> Self {
        if !self.ok() {
            panic!(
                "{what}: job {} ended {} exit {}\n---- output ----\n{}\n---- info ----\n{}",
                self.job_id, self.state, self.exit_code, self.output, self.info
            );
        }
        self
    }
}

/// Result of `slurmd -G`.
#[derive(Clone, Debug)]
pub struct SlurmdG {
    pub output: CmdOutput,
    /// The run's temp dir path (already removed unless GRES_RS_KEEP=1).
    pub dir: PathBuf,
    /// Plugin dir of ours used (if any).
    pub our_dir: Option<PathBuf>,
    /// Every file the dynamic loader opened (from LD_DEBUG=files).
    pub loaded_files: Vec<String>,
    /// The stock plugin dir as slurmd saw it (inside its chroot, if any).
    pub stock_dir: PathBuf,
    /// How its release prefixes log lines ([`testbed::Behaviour`]).
    pub log_prefix: testbed::LogPrefix,
}

impl SlurmdG {
    /// stdout+stderr with the temp dir replaced by `$DIR` (comparable
    /// across runs).
    pub fn normalized(&self) -> String {
        self.output.combined().replace(&*self.dir.to_string_lossy(), "$DIR")
    }
    /// The "Gres Name=..." lines, normalized.
    pub fn gres_lines(&self) -> Vec<String> {
        self.normalized().lines().filter(|l| l.contains("Gres Name=")).map(|l| self.log_prefix.strip(l, "slurmd").to_string()).collect()
    }
    /// Asserts each named plugin was loaded from our dir, not Debian's.
    #[track_caller]
    pub fn assert_ours_loaded(&self, names: &[&str]) {
        let our = self.our_dir.as_ref().unwrap_or_else(|| panic!("slurmd -G ran without our plugins"));
        if let Err(e) = check_loaded_with(&self.loaded_files, our, &self.stock_dir, names) {
            panic!("slurmd -G: {e}\nfiles loaded:\n  {}\n{}", self.loaded_files.join("\n  "), self.output);
        }
    }
}

/// Checks a list of mapped/loaded paths: each `<name>.so` must come from
/// `our_dir` and must not come from the stock dir, and our library
/// ([`LIBRARY_FILE`]) must come from `our_dir` too.
pub fn check_loaded(paths: &[String], our_dir: &Path, names: &[&str]) -> Result<(), String> {
    check_loaded_with(paths, our_dir, &stock_plugin_dir(), names)
}

/// [`check_loaded`] against the stock dir `stock` (as the process saw it:
/// a chroot's processes see its own dir at the host's path).
pub fn check_loaded_with(paths: &[String], our_dir: &Path, stock: &Path, names: &[&str]) -> Result<(), String> {
    let mut errs = Vec::new();
    let library = our_dir.join(LIBRARY_FILE).to_string_lossy().into_owned();
    if !names.is_empty() && !paths.iter().any(|x| x == &library || x.starts_with(&format!("{library} "))) {
        errs.push(format!("{library} is NOT loaded"));
    }
    for n in names {
        let ours = our_dir.join(format!("{n}.so")).to_string_lossy().into_owned();
        let theirs = stock.join(format!("{n}.so")).to_string_lossy().into_owned();
        let has = |p: &str| paths.iter().any(|x| x == p || x.starts_with(&format!("{p} ")));
        if !has(&ours) {
            errs.push(format!("{ours} is NOT loaded"));
        }
        if has(&theirs) {
            errs.push(format!("stock {theirs} IS loaded"));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// The proof of loading for a process in chroot `root` (whose paths the
/// host cannot read as paths): by device and inode, our `<name>.so` and
/// library in `our_dir` are mapped, and the chroot's stock file of each
/// name (`stock`, a path inside) is not.  `our_dir` is a path inside the
/// chroot: a directory of the chroot itself (a package installed in an
/// [`chroot::Overlay`]), else a host dir bound at its own path inside.
pub fn check_mapped_in_chroot(pid: u32, root: &chroot::Chroot, our_dir: &Path, stock: &Path, names: &[&str]) -> Result<(), String> {
    let mut errs = Vec::new();
    let mapped = |f: &Path| chroot::mapping_of(pid, f).map(|m| m.is_some());
    // The chroot's file of that path, or the host's (bound there).
    let ours_mapped = |f: &Path| -> Result<bool, String> {
        if let Some(inside) = root.resolve(f).filter(|p| p.is_file()) {
            if mapped(&inside)? {
                return Ok(true);
            }
        }
        Ok(f.is_file() && mapped(f)?)
    };
    let lib = our_dir.join(LIBRARY_FILE);
    if !names.is_empty() && !ours_mapped(&lib)? {
        errs.push(format!("{} is NOT mapped (by device+inode)", lib.display()));
    }
    for n in names {
        let ours = our_dir.join(format!("{n}.so"));
        if !ours_mapped(&ours)? {
            errs.push(format!("{} is NOT mapped (by device+inode)", ours.display()));
        }
        // Where the stock name is a link to ours (the divert package:
        // PluginSet::Diverted), the stock file is the diverted one,
        // `<name>.so.stock`.
        let mut stock_file = stock.join(format!("{n}.so"));
        if root.resolve(&stock_file).is_some() && root.resolve(&stock_file) == root.resolve(&ours) {
            stock_file = stock.join(format!("{n}.so.stock"));
        }
        if let Some(theirs) = root.resolve(&stock_file).filter(|p| p.is_file()) {
            if mapped(&theirs)? {
                errs.push(format!("stock {} (the chroot's {}) IS mapped", theirs.display(), stock_file.display()));
            }
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

// ---------------------------------------------------------------------------
// The cluster
// ---------------------------------------------------------------------------

/// A running single-node test cluster. Dropping it stops everything it
/// started (by PID) and removes its temp dir (unless GRES_RS_KEEP=1).
pub struct Cluster {
    pub config: ClusterConfig,
    pub layout: Layout,
    pub name: String,
    pub ctld_port: u16,
    pub slurmd_port: u16,
    /// Fake GPU device nodes created for this cluster.
    pub fake_gpus: Vec<PathBuf>,
    /// Where our plugins were installed (None for Stock).
    pub our_dir: Option<PathBuf>,
    /// The PluginDir= value.
    pub plugin_dir_setting: String,
    ld_library_path: Option<PathBuf>,
    munged: Option<Child>,
    /// The accounting database and slurmdbd ([`ClusterConfig::accounting`])
    /// and slurmdbd's port.
    database: Option<accounting::Database>,
    slurmdbd: Option<Child>,
    dbd_port: u16,
    slurmctld: Option<Child>,
    slurmd: Option<Child>,
    /// The slurmd of each node of a multi-node cluster, in config order.
    node_daemons: Vec<(String, Child)>,
    /// The private network of a multi-node cluster.
    net: Option<netns::Network>,
    stopped: bool,
    /// Open `/proc/<daemon>/ns/mnt` of the chroot-run daemons, taken once
    /// they are up: an open namespace file keeps the namespace, and so its
    /// inode number, from being freed and reused by another cluster's new
    /// namespace before `stop` has ended its strays (dropped there).
    ns_pins: Vec<fs::File>,
    _guard: Option<ClusterLock>,
}

impl Cluster {
    /// Starts a cluster; panics (with log tails) when it cannot.
    #[track_caller]
    pub fn start(config: ClusterConfig) -> Cluster {
        match Cluster::try_start(config) {
            Ok(c) => c,
            Err(e) => panic!("cluster failed to start:\n{e}"),
        }
    }

    /// Starts a cluster: munged, slurmctld, slurmd; waits for the node to be
    /// IDLE; for Ours verifies the daemons mapped our files. Retries with
    /// new ports if one was taken meanwhile.
    pub fn try_start(config: ClusterConfig) -> Result<Cluster, String> {
        Cluster::try_start_daemons(config, false)
    }

    /// Only munged, with the cluster's files written (slurm.conf, gres.conf,
    /// fake GPUs, our plugins): what `slurmd -G` of Slurm 24.11 and later
    /// needs (auth/munge's `init()` creates a credential in every daemon,
    /// src/plugins/auth/munge/auth_munge.c), without a slurmctld or a
    /// slurmd daemon, so that a configuration slurmd refuses can be shown
    /// too.  No proof of loading here (no daemon maps ours):
    /// [`Cluster::slurmd_g_in`]'s file list is that proof.
    pub fn try_start_munged(config: ClusterConfig) -> Result<Cluster, String> {
        Cluster::try_start_daemons(config, true)
    }

    fn try_start_daemons(config: ClusterConfig, munged_only: bool) -> Result<Cluster, String> {
        let problems = match &config.chroot {
            Some(r) => r.problems(),
            None => prereq_problems(),
        };
        if let Some(p) = problems.first() {
            return Err(format!("prerequisite missing: {p}"));
        }
        if config.is_multi() {
            if let Some(t) = netns::TOOLS.iter().find(|t| find_tool(t).is_none()) {
                return Err(format!("prerequisite missing: `{t}` (several nodes need iproute2's ip and util-linux's nsenter and unshare)"));
            }
        }
        let guard = lock_clusters();
        let mut guard = Some(guard);
        let mut last_err = String::new();
        for attempt in 0..3 {
            match Cluster::start_once(&config, &mut guard, munged_only) {
                Ok(c) => return Ok(c),
                Err((e, port_clash)) => {
                    last_err = e;
                    if !port_clash {
                        break;
                    }
                    eprintln!("harness: port clash on attempt {}, retrying", attempt + 1);
                }
            }
        }
        Err(last_err)
    }

    fn start_once(config: &ClusterConfig, guard: &mut Option<ClusterLock>, munged_only: bool) -> Result<Cluster, (String, bool)> {
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("grs{}x{seq}", std::process::id());
        let ctld_port = fsutil::free_port(&[]).map_err(|e| (format!("free port: {e}"), false))?;
        let slurmd_port = fsutil::free_port(&[ctld_port]).map_err(|e| (format!("free port: {e}"), false))?;
        let (dbd_port, config) = if config.accounting {
            let dbd_port = fsutil::free_port(&[ctld_port, slurmd_port]).map_err(|e| (format!("free port: {e}"), false))?;
            let mut c = config.clone();
            c.extra_slurm_conf.extend([
                "AccountingStorageType=accounting_storage/slurmdbd".to_string(),
                "AccountingStorageHost=127.0.0.1".to_string(),
                format!("AccountingStoragePort={dbd_port}"),
            ]);
            (dbd_port, std::borrow::Cow::Owned(c))
        } else {
            (0, std::borrow::Cow::Borrowed(config))
        };
        let config = config.as_ref();
        let p = prepare(config, "gres-rs", &name, ctld_port, slurmd_port).map_err(|e| (e, false))?;
        let mut c = Cluster {
            config: config.clone(),
            layout: p.layout,
            name,
            ctld_port,
            slurmd_port,
            fake_gpus: p.fake_gpus,
            our_dir: p.our_dir,
            plugin_dir_setting: p.plugin_dir_setting,
            ld_library_path: p.ld_library_path,
            munged: None,
            database: None,
            slurmdbd: None,
            dbd_port,
            slurmctld: None,
            slurmd: None,
            node_daemons: Vec::new(),
            net: None,
            stopped: false,
            ns_pins: Vec::new(),
            _guard: None,
        };
        let booted = if munged_only { c.boot_munged(Instant::now() + config.start_timeout) } else { c.boot() };
        match booted {
            Ok(()) => {
                c._guard = guard.take();
                Ok(c)
            }
            Err(e) => {
                let logs = c.log_tails(40);
                let clash = logs.contains("Address already in use");
                let keep = keep_dirs();
                let msg = format!("{e}\ncluster dir: {}{}\n{logs}", c.layout.root.display(), if keep { " (kept)" } else { "" });
                c.stop();
                Err((msg, clash))
            }
        }
    }

    fn spawn_daemon(&self, what: &str, mut cmd: Command) -> Result<Child, String> {
        let out = fs::File::create(self.layout.log.join(format!("{what}.stdout"))).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        cmd.spawn().map_err(|e| format!("spawning {what} ({}): {e}", process::describe(&cmd)))
    }

    /// Wraps a daemon in `setpriv --pdeathsig TERM` so it also dies if
    /// the test process is killed outright (setpriv execs: same PID).
    fn daemon_cmd(&self, prog: &str, user: Option<&str>) -> Command {
        self.daemon_cmd_at(prog, user, Place::Hub)
    }

    /// [`Cluster::daemon_cmd`] where `place` says (the hub is the host's
    /// network for a one-node cluster).
    fn daemon_cmd_at(&self, prog: &str, user: Option<&str>, place: Place) -> Command {
        let base = self.config.program("setpriv", &self.layout.root);
        let mut cmd = match (&self.net, place) {
            (None, _) | (Some(_), Place::Host) => base,
            (Some(net), Place::Hub) => net.in_hub(&base),
            // In a chroot the command unshares a mount namespace itself.
            (Some(net), Place::Node(i)) => net.on_node(i, &self.config.nodes[i].name, self.config.chroot.is_none(), &base),
        };
        cmd.arg("--pdeathsig").arg("TERM");
        if let Some(u) = user {
            cmd.arg(format!("--reuid={u}")).arg(format!("--regid={u}")).arg("--init-groups");
        }
        cmd.arg(self.config.chroot.as_ref().and_then(|r| r.tool(prog)).unwrap_or_else(|| tool(prog)));
        clean_env(&mut cmd, &self.layout);
        cmd.current_dir(&self.layout.root);
        cmd
    }

    /// A daemon's command as the cluster starts it (`setpriv --pdeathsig
    /// TERM`, the cluster's environment, in its chroot if any), for a test
    /// that restarts one itself.
    pub fn daemon_command(&self, prog: &str) -> Command {
        self.daemon_cmd(prog, None)
    }

    fn boot(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let deadline = start + self.config.start_timeout;
        self.boot_munged(deadline)?;
        self.boot_slurm(start, deadline)
    }

    /// munged, up to its socket answering.
    fn boot_munged(&mut self, deadline: Instant) -> Result<(), String> {
        // --- munged, as the munge user, own key + socket
        let munge_ids = match &self.config.chroot {
            Some(r) => r.user_ids("munge"),
            None => fsutil::user_ids("munge"),
        };
        let (muid, mgid) = munge_ids.ok_or("no munge user")?;
        let m = &self.layout.munge;
        fs::create_dir_all(m).map_err(|e| e.to_string())?;
        let key = m.join("munge.key");
        fs::write(&key, fsutil::random_bytes(1024).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
            fs::set_permissions(m, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
            std::os::unix::fs::chown(&key, Some(muid), Some(mgid)).map_err(|e| e.to_string())?;
            std::os::unix::fs::chown(m, Some(muid), Some(mgid)).map_err(|e| e.to_string())?;
        }
        let mut cmd = self.daemon_cmd_at("munged", Some("munge"), Place::Host);
        cmd.arg("--foreground")
            .arg(format!("--socket={}", self.layout.munge_socket().display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", m.join("munged.pid").display()))
            .arg(format!("--log-file={}", m.join("munged.log").display()))
            .arg(format!("--seed-file={}", m.join("munged.seed").display()))
            .arg("--num-threads=2");
        self.munged = Some(self.spawn_daemon("munged", cmd)?);
        loop {
            if UnixStream::connect(self.layout.munge_socket()).is_ok() {
                break;
            }
            self.check_alive(Daemon::Munged)?;
            if Instant::now() > deadline {
                return Err("munged did not create its socket in time".into());
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The accounting database, then slurmdbd up to its port answering.
    fn boot_slurmdbd(&mut self, deadline: Instant) -> Result<(), String> {
        let db_port = fsutil::free_port(&[self.ctld_port, self.slurmd_port, self.dbd_port]).map_err(|e| format!("free port: {e}"))?;
        self.database = Some(accounting::Database::start(&self.layout.root.join("db"), db_port, deadline)?);
        let client_lib = accounting::client_library_dir(&self.layout.root)?;
        let conf = self.layout.etc.join("slurmdbd.conf");
        let text = accounting::slurmdbd_conf(self.dbd_port, db_port, &self.layout.munge_socket(), &self.layout.log, &self.layout.run);
        // slurmdbd wants its file the SlurmUser's (root) and private.
        fsutil::write_file(&conf, &text, 0o600).map_err(|e| format!("writing {}: {e}", conf.display()))?;
        let mut cmd = self.daemon_cmd("slurmdbd", None);
        cmd.arg("-D").env("LD_LIBRARY_PATH", &client_lib);
        self.slurmdbd = Some(self.spawn_daemon("slurmdbd", cmd)?);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.dbd_port)).is_ok() {
                return Ok(());
            }
            if let Some(Ok(Some(st))) = self.slurmdbd.as_mut().map(|c| c.try_wait()) {
                return Err(format!("slurmdbd exited early: {st}"));
            }
            if Instant::now() > deadline {
                return Err("slurmdbd did not open its port in time".into());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// slurmctld and slurmd, up to the node's state (and the proof of
    /// loading).
    fn boot_slurm(&mut self, start: Instant, deadline: Instant) -> Result<(), String> {
        // --- the private network of several nodes
        if self.config.is_multi() {
            self.net = Some(netns::Network::create(self.config.nodes.len())?);
        }

        // --- the accounting database and slurmdbd
        if self.config.accounting {
            self.boot_slurmdbd(deadline)?;
        }

        // --- slurmctld
        let mut cmd = self.daemon_cmd("slurmctld", None);
        cmd.arg("-D").arg("-i");
        self.slurmctld = Some(self.spawn_daemon("slurmctld", cmd)?);

        // --- slurmd (one per node)
        let places: Vec<(String, Place)> = if self.config.is_multi() {
            self.config.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), Place::Node(i))).collect()
        } else {
            vec![(self.config.node_name.clone(), Place::Hub)]
        };
        for (name, place) in places {
            let mut cmd = self.daemon_cmd_at("slurmd", None, place);
            cmd.arg("-D").arg("-N").arg(&name).args(&self.config.slurmd_args);
            for (k, v) in &self.config.slurmd_env {
                cmd.env(k, v);
            }
            if let Some(ld) = &self.ld_library_path {
                cmd.env("LD_LIBRARY_PATH", ld);
            }
            cmd = with_mig_minors(cmd, &self.config);
            if self.config.is_multi() {
                let child = self.spawn_daemon(&format!("slurmd-{name}"), cmd)?;
                self.node_daemons.push((name, child));
            } else {
                self.slurmd = Some(self.spawn_daemon("slurmd", cmd)?);
            }
        }

        // --- wait for the nodes
        let names = self.config.node_names();
        let mut last_state = String::new();
        loop {
            self.check_alive(Daemon::Slurmctld)?;
            self.check_alive(Daemon::Slurmd)?;
            let out = self.scontrol(&["-o", "show", "node", &names.join(",")]);
            if !out.ok() {
                last_state = format!("scontrol failed: {out}");
            }
            if out.ok() {
                last_state = out.stdout.trim().to_string();
                let states: Vec<String> = out.stdout.lines().filter_map(|l| field(l, "State")).collect();
                let up = |state: &String| state == "IDLE" || (!self.config.wait_idle && !state.contains("NOT_RESPONDING") && !state.starts_with("UNKNOWN"));
                if states.len() == names.len() && states.iter().all(up) {
                    break;
                }
                if let Some(state) = states
                    .iter()
                    .find(|state| state.contains("DRAIN") || state.contains("INVALID") || state.starts_with("DOWN") && !state.contains("NOT_RESPONDING"))
                {
                    if self.config.wait_idle {
                        return Err(format!("node went {state}: {last_state}"));
                    }
                    break;
                }
            }
            if Instant::now() > deadline {
                return Err(format!("nodes not IDLE after {:?}; last: {last_state}", self.config.start_timeout));
            }
            thread::sleep(Duration::from_millis(100));
        }
        if self.config.chroot.is_some() {
            self.pin_namespaces();
        }
        if self.config.verify_ours_loaded && self.our_dir.is_some() {
            let names = self.expected_gres_plugins();
            let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            for node in self.node_names_running() {
                self.check_ours_loaded_on(&node, &names)?;
            }
            let names = self.ctld_expected_gres_plugins();
            let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            self.check_ours_loaded_in(Daemon::Slurmctld, &names)?;
        }
        eprintln!(
            "harness: cluster {} up in {:.1?} ({}; ports {}/{}; dir {})",
            self.name,
            start.elapsed(),
            self.config.plugins.label(),
            self.ctld_port,
            self.slurmd_port,
            self.layout.root.display()
        );
        Ok(())
    }

    /// gres_* plugins of ours that GresTypes makes slurmd load.
    pub fn expected_gres_plugins(&self) -> Vec<String> {
        let ours = self.config.plugins.ours();
        self.config.gres_types.split(',').map(|t| format!("gres_{}", t.trim())).filter(|n| ours.contains(n)).collect()
    }

    /// gres_* plugins of ours that slurmctld loads: slurmctld loads a GRES
    /// plugin only once a node reports that GRES, i.e. for the names in the
    /// node's `Gres=` (e.g. "gpu:4,mps:400" -> gres_gpu, gres_mps).
    pub fn ctld_expected_gres_plugins(&self) -> Vec<String> {
        let on_node: Vec<String> = self
            .config
            .all_node_gres()
            .join(",")
            .split(',')
            .filter_map(|g| g.split(':').next())
            .filter(|n| !n.is_empty())
            .map(|n| format!("gres_{}", n.trim()))
            .collect();
        self.expected_gres_plugins().into_iter().filter(|n| on_node.contains(n)).collect()
    }

    fn child(&self, d: Daemon) -> Option<&Child> {
        match d {
            Daemon::Munged => self.munged.as_ref(),
            Daemon::Slurmctld => self.slurmctld.as_ref(),
            Daemon::Slurmd => self.slurmd.as_ref().or(self.node_daemons.first().map(|(_, c)| c)),
        }
    }

    /// The names of the nodes whose slurmd this cluster started.
    pub fn node_names_running(&self) -> Vec<String> {
        if self.config.is_multi() {
            self.node_daemons.iter().map(|(n, _)| n.clone()).collect()
        } else {
            vec![self.config.node_name.clone()]
        }
    }

    /// PID of node `node`'s slurmd (None if not running / stopped).
    pub fn node_pid(&self, node: &str) -> Option<u32> {
        if !self.config.is_multi() {
            return (node == self.config.node_name).then(|| self.pid(Daemon::Slurmd)).flatten();
        }
        self.node_daemons.iter().find(|(n, _)| n == node).map(|(_, c)| c.id()).filter(|p| process::pid_alive(*p))
    }

    /// The slurmd log of node `node` (the one slurmd log of a one-node
    /// cluster).
    pub fn node_log_path(&self, node: &str) -> PathBuf {
        if self.config.is_multi() {
            self.layout.log.join(format!("slurmd-{node}.log"))
        } else {
            self.layout.log.join("slurmd.log")
        }
    }

    /// The proof of loading on node `node`: its slurmd mapped our files
    /// for `names` and not the stock ones.
    pub fn check_ours_loaded_on(&self, node: &str, names: &[&str]) -> Result<(), String> {
        let pid = self.node_pid(node).ok_or_else(|| format!("slurmd of {node} is not running"))?;
        self.check_ours_loaded_pid(pid, &format!("slurmd of {node}"), names)
    }

    /// Asserts [`Cluster::check_ours_loaded_on`] for every node.
    #[track_caller]
    pub fn assert_ours_loaded_on_every_node(&self, names: &[&str]) {
        for node in self.node_names_running() {
            if let Err(e) = self.check_ours_loaded_on(&node, names) {
                panic!("proof of loading failed: {e}\n{}", self.log_tails(30));
            }
        }
    }

    /// PID of a daemon we started (None if not running / stopped).
    pub fn pid(&self, d: Daemon) -> Option<u32> {
        self.child(d).map(|c| c.id()).filter(|p| process::pid_alive(*p))
    }

    fn check_alive(&mut self, d: Daemon) -> Result<(), String> {
        let c = match d {
            Daemon::Munged => self.munged.as_mut(),
            Daemon::Slurmctld => self.slurmctld.as_mut(),
            Daemon::Slurmd => self.slurmd.as_mut(),
        };
        if let Some(Ok(Some(st))) = c.map(|c| c.try_wait()) {
            return Err(format!("{d:?} exited early: {st}"));
        }
        if d == Daemon::Slurmd {
            for (n, c) in self.node_daemons.iter_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    return Err(format!("slurmd of {n} exited early: {st}"));
                }
            }
        }
        Ok(())
    }

    /// Files mapped by a daemon (from `/proc/<pid>/maps`).
    pub fn mapped_files(&self, d: Daemon) -> Result<Vec<String>, String> {
        let pid = self.pid(d).ok_or_else(|| format!("{d:?} is not running"))?;
        Ok(self.inside_paths(process::mapped_files(pid)?))
    }

    /// Mapped paths as the daemons see them: in a chroot the kernel shows
    /// a daemon's files from the host with the chroot's directory in front
    /// (its binds too), which is taken off, so that the paths compare with
    /// `PluginDir=` (our dir, bound at the same path, and the stock dir).
    fn inside_paths(&self, paths: Vec<String>) -> Vec<String> {
        let Some(root) = &self.config.chroot else { return paths };
        let prefix = root.root().to_string_lossy().trim_end_matches('/').to_string();
        paths.into_iter().map(|p| p.strip_prefix(&prefix).filter(|r| r.starts_with('/')).map(str::to_string).unwrap_or(p)).collect()
    }

    fn check_ours_loaded_in(&self, d: Daemon, names: &[&str]) -> Result<(), String> {
        let pid = self.pid(d).ok_or_else(|| format!("{d:?} is not running"))?;
        self.check_ours_loaded_pid(pid, &format!("{d:?}"), names)
    }

    /// The proof of loading for daemon `pid` (`what`, for messages).
    fn check_ours_loaded_pid(&self, pid: u32, what: &str, names: &[&str]) -> Result<(), String> {
        let our = self.our_dir.as_ref().ok_or("cluster runs the stock plugins")?;
        if let Some(root) = &self.config.chroot {
            return check_mapped_in_chroot(pid, root, our, &self.config.stock_plugin_dir(), names).map_err(|e| {
                let m: Vec<String> =
                    chroot::mappings(pid).unwrap_or_default().into_iter().map(|m| m.path).filter(|p| p.contains("slurm") || p.contains("gres")).collect();
                format!("{what} (pid {pid}, in chroot {}): {e}\nslurm-related mappings (paths as the host shows them): {m:#?}", root.root().display())
            });
        }
        let files = self.inside_paths(process::mapped_files(pid)?);
        check_loaded(&files, our, names).map_err(|e| {
            let slurm: Vec<&String> = files.iter().filter(|f| f.contains("slurm") || f.contains("gres") || f.contains(&*our.to_string_lossy())).collect();
            format!("{what} (pid {pid}): {e}\nslurm-related mappings: {slurm:#?}")
        })
    }

    /// Asserts slurmd mapped our `<name>.so` from the cluster's plugin dir
    /// and not Debian's file of the same name.
    #[track_caller]
    pub fn assert_ours_loaded(&self, names: &[&str]) {
        self.assert_ours_loaded_in(Daemon::Slurmd, names)
    }

    /// Same as `assert_ours_loaded` for any of our daemons.
    #[track_caller]
    pub fn assert_ours_loaded_in(&self, d: Daemon, names: &[&str]) {
        if let Err(e) = self.check_ours_loaded_in(d, names) {
            panic!("proof of loading failed: {e}\n{}", self.log_tails(30));
        }
    }

    /// Runs `srun <srun_args> sh -c '...'` whose task prints the maps of its
    /// parent (the slurmstepd). Returns the paths slurmstepd mapped.
    pub fn stepd_mapped_files(&self, srun_args: &[&str]) -> Result<Vec<String>, String> {
        let script = "echo \"PARENT_COMM=$(cat /proc/$PPID/comm)\"; cat /proc/$PPID/maps";
        let mut args: Vec<&str> = srun_args.to_vec();
        args.extend_from_slice(&["-n1", "/bin/sh", "-c", script]);
        let out = self.srun(&args);
        if !out.ok() {
            return Err(format!("srun for stepd maps failed:\n{out}"));
        }
        let comm = out.stdout.lines().find_map(|l| l.strip_prefix("PARENT_COMM=")).unwrap_or("").trim().to_string();
        // Under valgrind (a bench's `slurmd -d <wrapper>`) the parent is
        // valgrind's tool running slurmstepd: its maps show the program.
        let stepd_under_valgrind = comm.starts_with("callgrind-")
            && process::paths_in_maps(&out.stdout).iter().any(|p| p.rsplit('/').next().is_some_and(|f| f.starts_with("slurmstepd")));
        if !comm.starts_with("slurmstepd") && !stepd_under_valgrind {
            return Err(format!("task's parent is {comm:?}, not slurmstepd:\n{out}"));
        }
        Ok(self.inside_paths(process::paths_in_maps(&out.stdout)))
    }

    /// Asserts a job step's slurmstepd mapped ours (and not stock) for each
    /// name; `srun_args` e.g. `["--gres=gpu:1"]`.
    #[track_caller]
    pub fn assert_stepd_ours_loaded(&self, names: &[&str], srun_args: &[&str]) {
        let our = self.our_dir.as_ref().expect("cluster runs the stock plugins");
        let files = self.stepd_mapped_files(srun_args).unwrap_or_else(|e| panic!("{e}"));
        // The task reads its slurmstepd's maps from inside the chroot (if
        // any): the paths are the chroot's, our dir bound at its own path.
        if let Err(e) = check_loaded_with(&files, our, &self.config.stock_plugin_dir(), names) {
            panic!("slurmstepd proof of loading failed: {e}\nmapped: {files:#?}");
        }
    }

    /// Proof that slurmd loaded our gpu plugin `name` (`gpu_nvml`) and not
    /// a stock file of that name: where slurmd keeps the gpu plugin mapped
    /// ([`testbed::Behaviour::slurmd_keeps_gpu_plugin`]) its maps, as
    /// [`Cluster::assert_ours_loaded`]; where it unloads it after loading
    /// its config (26.05) the line our `init` writes to slurmd's log from
    /// slurmd's own `/proc/self/maps`, `..., loaded from <our dir>/<name>.so`
    /// (for a node whose jobs can run, [`Cluster::assert_stepd_ours_loaded`]
    /// proves it by maps as well).
    #[track_caller]
    pub fn assert_ours_gpu_plugin_loaded(&self, name: &str) {
        if testbed::behaviour_of(&self.config.slurm_version()).slurmd_keeps_gpu_plugin {
            return self.assert_ours_loaded(&[name]);
        }
        let our = self.our_dir.as_ref().expect("cluster runs the stock plugins");
        let want = format!("loaded from {}", our.join(format!("{name}.so")).display());
        let log = self.log(Daemon::Slurmd);
        let line = log.lines().find(|l| l.contains("slurm-gpu-gres") && l.ends_with(&want));
        assert!(line.is_some(), "slurmd's log has no {want:?} (our {name}.so's init line):\n{}", self.log_tails(40));
    }

    /// One task per node (`srun -N<nodes> --ntasks-per-node=1 -l
    /// <srun_args>`) prints the maps of its slurmstepd: the paths each
    /// node's slurmstepd mapped, by node name.
    pub fn stepd_mapped_files_per_node(&self, srun_args: &[&str]) -> Result<BTreeMap<String, Vec<String>>, String> {
        let nodes = self.node_names_running();
        let script = "echo \"NODE=$SLURMD_NODENAME\"; echo \"PARENT_COMM=$(cat /proc/$PPID/comm)\"; cat /proc/$PPID/maps";
        let n = format!("-N{}", nodes.len());
        let mut args: Vec<&str> = vec![&n, "--ntasks-per-node=1", "-l"];
        args.extend_from_slice(srun_args);
        args.extend_from_slice(&["/bin/sh", "-c", script]);
        let out = self.srun(&args);
        if !out.ok() {
            return Err(format!("srun for the slurmstepd maps of every node failed:\n{out}"));
        }
        // `-l`: every line begins with its task's number.
        let mut by_task: BTreeMap<String, String> = BTreeMap::new();
        for line in out.stdout.lines() {
            if let Some((task, rest)) = line.split_once(": ") {
                let t = by_task.entry(task.trim().to_string()).or_default();
                t.push_str(rest);
                t.push('\n');
            }
        }
        let mut v = BTreeMap::new();
        for (task, text) in by_task {
            let node = text.lines().find_map(|l| l.strip_prefix("NODE=")).unwrap_or("").trim().to_string();
            let comm = text.lines().find_map(|l| l.strip_prefix("PARENT_COMM=")).unwrap_or("").trim().to_string();
            if !comm.starts_with("slurmstepd") {
                return Err(format!("task {task} on {node:?}: its parent is {comm:?}, not slurmstepd:\n{out}"));
            }
            v.insert(node, self.inside_paths(process::paths_in_maps(&text)));
        }
        let missing: Vec<&String> = nodes.iter().filter(|n| !v.contains_key(*n)).collect();
        if !missing.is_empty() {
            return Err(format!("no task reported from {missing:?}:\n{out}"));
        }
        Ok(v)
    }

    /// Asserts the slurmstepd of a step on every node mapped ours (and
    /// not stock) for each name.
    #[track_caller]
    pub fn assert_stepd_ours_loaded_on_every_node(&self, names: &[&str], srun_args: &[&str]) {
        let our = self.our_dir.as_ref().expect("cluster runs the stock plugins");
        let per_node = self.stepd_mapped_files_per_node(srun_args).unwrap_or_else(|e| panic!("{e}"));
        for (node, files) in per_node {
            if let Err(e) = check_loaded_with(&files, our, &self.config.stock_plugin_dir(), names) {
                panic!("slurmstepd proof of loading on {node} failed: {e}\nmapped: {files:#?}");
            }
        }
    }

    // ----- commands --------------------------------------------------------

    /// A `Command` for a Slurm client tool with this cluster's environment.
    pub fn command(&self, prog: &str) -> Command {
        let base = self.config.program(prog, &self.layout.root);
        // Several nodes: from the hub, where slurmctld runs and every
        // node's address is reachable.
        let mut cmd = match &self.net {
            Some(net) => net.in_hub(&base),
            None => base,
        };
        clean_env(&mut cmd, &self.layout);
        cmd.current_dir(&self.layout.jobs);
        cmd
    }

    /// A `Command` for `prog` (a path as the daemon sees it) that sees the
    /// files as daemon `d` does: on the host the host's; in a chroot
    /// `nsenter --target <pid> --mount --root --wd` into the daemon's own
    /// mount namespace, root and working directory (each chroot command has
    /// a mount namespace of its own, and a program in another one sees the
    /// daemon's mapped files under paths it cannot open, as `gres-rs status`
    /// would then report).  The cluster's environment, as [`Cluster::command`].
    pub fn command_beside(&self, d: Daemon, prog: &str) -> Result<Command, String> {
        if self.config.chroot.is_none() {
            return Ok(self.command(prog));
        }
        let pid = self.pid(d).ok_or_else(|| format!("{d:?} is not running"))?;
        let mut cmd = Command::new(tool("nsenter"));
        cmd.arg(format!("--target={pid}")).args(["--mount", "--root", "--wd", "--"]).arg(prog);
        clean_env(&mut cmd, &self.layout);
        Ok(cmd)
    }

    /// Runs any program with this cluster's environment and a timeout.
    pub fn run(&self, prog: &str, args: &[&str], timeout: Duration) -> CmdOutput {
        let mut cmd = self.command(prog);
        cmd.args(args);
        process::run_with_timeout(cmd, timeout, &self.layout.capture)
    }

    /// `srun <args>` (60 s timeout). Include the command in `args`.
    pub fn srun(&self, args: &[&str]) -> CmdOutput {
        self.srun_timeout(args, Duration::from_secs(60))
    }
    pub fn srun_timeout(&self, args: &[&str], t: Duration) -> CmdOutput {
        self.run("srun", args, t)
    }
    /// `salloc <args> <command...>` (60 s timeout).
    pub fn salloc(&self, args: &[&str], command: &[&str]) -> CmdOutput {
        let mut a = args.to_vec();
        a.extend_from_slice(command);
        self.run("salloc", &a, Duration::from_secs(60))
    }
    pub fn scontrol(&self, args: &[&str]) -> CmdOutput {
        self.run("scontrol", args, Duration::from_secs(20))
    }
    pub fn squeue(&self, args: &[&str]) -> CmdOutput {
        self.run("squeue", args, Duration::from_secs(20))
    }
    pub fn sinfo(&self, args: &[&str]) -> CmdOutput {
        self.run("sinfo", args, Duration::from_secs(20))
    }
    pub fn scancel(&self, args: &[&str]) -> CmdOutput {
        self.run("scancel", args, Duration::from_secs(20))
    }

    /// Writes `script` to a file and runs `sbatch --parsable` on it (output
    /// to `<dir>/jobs/slurm-<id>.out`). Returns the raw sbatch output.
    pub fn sbatch_submit(&self, args: &[&str], script: &str) -> (CmdOutput, Option<u32>) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = self.layout.jobs.join(format!("job-{n}.sh"));
        let body = if script.starts_with("#!") { script.to_string() } else { format!("#!/bin/bash\n{script}") };
        if let Err(e) = fsutil::write_file(&path, &body, 0o755) {
            panic!("writing {}: {e}", path.display());
        }
        let outpat = self.layout.jobs.join("slurm-%j.out");
        let mut a: Vec<String> = vec!["--parsable".into(), format!("--output={}", outpat.display()), format!("--chdir={}", self.layout.jobs.display())];
        a.extend(args.iter().map(|s| s.to_string()));
        a.push(path.to_string_lossy().into_owned());
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        let out = self.run("sbatch", &a, Duration::from_secs(30));
        let id = if out.ok() { out.stdout.trim().split(';').next().and_then(|s| s.parse().ok()) } else { None };
        (out, id)
    }

    /// Submits with sbatch and waits (120 s) for the job to finish; panics
    /// if the submission fails.
    #[track_caller]
    pub fn sbatch(&self, args: &[&str], script: &str) -> JobResult {
        self.sbatch_timeout(args, script, Duration::from_secs(120))
    }
    #[track_caller]
    pub fn sbatch_timeout(&self, args: &[&str], script: &str, t: Duration) -> JobResult {
        let (out, id) = self.sbatch_submit(args, script);
        let Some(id) = id else { panic!("sbatch failed:\n{out}") };
        self.wait_job(id, t)
    }

    /// Waits until job `id` is in a final state, then reads its output file.
    pub fn wait_job(&self, id: u32, t: Duration) -> JobResult {
        const FINAL: &[&str] = &["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"];
        let deadline = Instant::now() + t;
        let (state, info) = loop {
            let out = self.scontrol(&["-o", "show", "job", &id.to_string()]);
            if out.ok() {
                let st = field(&out.stdout, "JobState").unwrap_or_default();
                if FINAL.contains(&st.as_str()) {
                    break (st, out.stdout.trim().to_string());
                }
            } else if out.combined().contains("Invalid job id") {
                break ("UNKNOWN".to_string(), out.combined());
            }
            if Instant::now() > deadline {
                let _ = self.scancel(&[&id.to_string()]);
                break ("TIMEOUT_WAITING".to_string(), out.combined());
            }
            thread::sleep(Duration::from_millis(200));
        };
        let exit_code = field(&info, "ExitCode").unwrap_or_default();
        let output = fsutil::read_lossy(&self.layout.jobs.join(format!("slurm-{id}.out")));
        JobResult { job_id: id, state, exit_code, output, info }
    }

    /// Waits until squeue lists no job (pending/running/completing), i.e.
    /// epilogs have finished. Returns false on timeout.
    pub fn wait_no_jobs(&self, t: Duration) -> bool {
        let deadline = Instant::now() + t;
        loop {
            let out = self.squeue(&["-h", "-o", "%i %T"]);
            if out.ok() && out.stdout.trim().is_empty() {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    /// `scontrol show node` fields, e.g. node_field("Gres") -> "gpu:4".
    pub fn node_field(&self, key: &str) -> Option<String> {
        let out = self.scontrol(&["-o", "show", "node", &self.config.node_name]);
        field(&out.stdout, key)
    }

    /// Env-dump blocks written by `$GRES_RS_DUMP_ENV` since the last call
    /// (they are moved aside once collected).
    pub fn collect_dumps(&self) -> Vec<EnvBlock> {
        scenario::collect_dumps(&self.layout.dumps)
    }

    // ----- logs ------------------------------------------------------------

    pub fn log_path(&self, d: Daemon) -> PathBuf {
        match d {
            Daemon::Munged => self.layout.log.join("munged.stdout"),
            Daemon::Slurmctld => self.layout.log.join("slurmctld.log"),
            // Several nodes: the first node's.
            Daemon::Slurmd => self.node_log_path(&self.config.node_names()[0]),
        }
    }
    pub fn log(&self, d: Daemon) -> String {
        fsutil::read_lossy(&self.log_path(d))
    }
    /// Last `n` lines of every daemon log (for failure messages).
    pub fn log_tails(&self, n: usize) -> String {
        let mut s = String::new();
        let mut files: Vec<String> =
            ["munged.stdout", "slurmdbd.stdout", "slurmdbd.log", "slurmctld.stdout", "slurmctld.log", "slurmd.stdout", "slurmd.log"].map(String::from).to_vec();
        for n in self.config.nodes.iter().map(|n| &n.name) {
            files.push(format!("slurmd-{n}.stdout"));
            files.push(format!("slurmd-{n}.log"));
        }
        for f in &files {
            let p = self.layout.log.join(f);
            // the daemons' stdout repeats their log once the log file is
            // open; its start matters (errors before the log file opens)
            let t = if f.ends_with(".stdout") { fsutil::head(&p, n.min(15)) } else { fsutil::tail(&p, n) };
            if !t.trim().is_empty() {
                s.push_str(&format!("==== {} {} ====\n{t}\n", if f.ends_with(".stdout") { "head" } else { "tail" }, p.display()));
            }
        }
        s
    }

    // ----- teardown --------------------------------------------------------

    /// SIGTERMs slurmd alone, by PID, and waits for it (SIGKILL after 10 s):
    /// its shutdown is in its log, which stays readable until [`Cluster::stop`].
    pub fn terminate_slurmd(&mut self) -> Option<std::process::ExitStatus> {
        let c = self.slurmd.as_mut()?;
        process::terminate_child(c, "Slurmd", Duration::from_secs(10))
    }

    /// Stops everything this cluster started: cancels jobs, SIGTERMs
    /// slurmd, slurmctld, munged by PID (SIGKILL after a grace period),
    /// then any process still using the cluster's private dir (stray
    /// slurmstepd/tasks), and removes the dir unless GRES_RS_KEEP=1.
    /// Idempotent; also run by Drop.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let panicking = thread::panicking();
        if panicking {
            eprintln!("harness: test failed; logs of cluster {}:\n{}", self.name, self.log_tails(40));
        }
        if self.slurmctld.is_some() && self.pid(Daemon::Slurmctld).is_some() && self.pid(Daemon::Slurmd).is_some() {
            let _ = self.scancel(&["--full", "-u", "root"]);
            self.wait_no_jobs(Duration::from_secs(10));
        }
        // In a chroot each daemon has a mount namespace of its own, which
        // its slurmstepds and job tasks inherit: the strays' other mark.
        let namespaces = if self.config.chroot.is_some() { self.chroot_namespaces() } else { Vec::new() };
        for d in [Daemon::Slurmd, Daemon::Slurmctld] {
            let c = match d {
                Daemon::Slurmd => self.slurmd.as_mut(),
                _ => self.slurmctld.as_mut(),
            };
            if let Some(c) = c {
                process::terminate_child(c, &format!("{d:?}"), Duration::from_secs(10));
            }
            if d == Daemon::Slurmd {
                for (n, c) in self.node_daemons.iter_mut() {
                    process::terminate_child(c, &format!("slurmd of {n}"), Duration::from_secs(10));
                }
            }
        }
        // slurmdbd once slurmctld has sent it what it had, then its
        // database.
        if let Some(c) = self.slurmdbd.as_mut() {
            process::terminate_child(c, "slurmdbd", Duration::from_secs(10));
        }
        if let Some(mut db) = self.database.take() {
            db.stop();
        }
        // Several nodes: whatever is left in their network namespaces
        // (slurmstepd, tasks), then the namespaces themselves.
        if let Some(mut net) = self.net.take() {
            net.stop();
        }
        // Stray slurmstepd / job tasks of this cluster (identified by their
        // use of our private dir), deepest first not needed: TERM then KILL.
        for _ in 0..3 {
            let mut pids = process::pids_using_dir(&self.layout.root);
            pids.extend(namespaces.iter().flat_map(|ns| chroot::pids_in_mount_namespace(*ns)).filter(|p| !pids.contains(p)).collect::<Vec<_>>());
            let pids: Vec<u32> = pids.into_iter().filter(|p| Some(*p) != self.munged.as_ref().map(|c| c.id())).collect();
            if pids.is_empty() {
                break;
            }
            eprintln!("harness: stopping leftover processes of cluster {}: {pids:?}", self.name);
            for p in process::process_refs(&pids) {
                process::terminate_process(p, Duration::from_secs(3));
            }
        }
        // The strays are gone: the namespaces may go (and their inodes be
        // reused).
        self.ns_pins.clear();
        if let Some(c) = self.munged.as_mut() {
            process::terminate_child(c, "munged", Duration::from_secs(5));
        }
        if keep_dirs() {
            let _ = fs::remove_file(self.layout.root.join(fsutil::IN_USE_MARKER));
            eprintln!("harness: GRES_RS_KEEP=1: kept cluster dir {}", self.layout.root.display());
        } else if let Err(e) = fs::remove_dir_all(&self.layout.root) {
            eprintln!("harness: could not remove {}: {e}", self.layout.root.display());
        }
        self._guard = None;
    }

    /// The mount namespaces of the chroot-run slurmd and slurmctld (none
    /// shared with this process).
    fn chroot_namespaces(&self) -> Vec<u64> {
        use std::os::unix::fs::MetadataExt;
        let own = chroot::mount_namespace(std::process::id());
        let pinned = self.ns_pins.iter().filter_map(|f| f.metadata().ok()).map(|m| m.ino());
        let live = [Daemon::Slurmd, Daemon::Slurmctld].iter().filter_map(|d| self.pid(*d)).filter_map(chroot::mount_namespace);
        let mut v: Vec<u64> = pinned.chain(live).filter(|ns| Some(*ns) != own).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Opens the mount namespaces of the running chroot daemons (see
    /// `ns_pins`); those still in this process's namespace (not yet past
    /// `unshare`) are not pinned.
    fn pin_namespaces(&mut self) {
        let own = chroot::mount_namespace(std::process::id());
        for d in [Daemon::Slurmd, Daemon::Slurmctld] {
            let Some(pid) = self.pid(d) else { continue };
            if chroot::mount_namespace(pid).is_some_and(|ns| Some(ns) != own) {
                if let Ok(f) = fs::File::open(format!("/proc/{pid}/ns/mnt")) {
                    self.ns_pins.push(f);
                }
            }
        }
    }

    // ----- slurmd -G -------------------------------------------------------

    /// Runs `slurmd -G -N <node>` (prints the node's GRES config and exits)
    /// with `config` in a temp dir; needs no slurmctld, and munged only
    /// where its release authenticates first (24.11+,
    /// [`testbed::Behaviour::slurmd_g_needs_munged`]: then a munged of
    /// its own, [`Cluster::try_start_munged`]). The dynamic
    /// loader's file list (LD_DEBUG=files) is captured separately so the
    /// caller can prove which plugin files were loaded.
    pub fn slurmd_g(config: &ClusterConfig) -> SlurmdG {
        if testbed::behaviour_of(&config.slurm_version()).slurmd_g_needs_munged {
            // 24.11 and later authenticate before `-G`: with a munged of
            // the cluster's own (no slurmctld, no slurmd daemon: `-G` is
            // what is tested, also of a configuration slurmd refuses).
            let c = Cluster::try_start_munged(config.clone()).unwrap_or_else(|e| panic!("slurmd -G setup (munged) failed: {e}"));
            return c.slurmd_g_in();
        }
        let p = match prepare(config, "gres-rs-g", "grsg", 6817, 6818) {
            Ok(p) => p,
            Err(e) => panic!("slurmd -G setup failed: {e}"),
        };
        let l = &p.layout;
        let mut cmd = config.program("slurmd", &l.root);
        clean_env(&mut cmd, l);
        cmd.current_dir(&l.root);
        cmd.arg("-G").arg("-N").arg(&config.node_name);
        for (k, v) in &config.slurmd_env {
            cmd.env(k, v);
        }
        if let Some(ld) = &p.ld_library_path {
            cmd.env("LD_LIBRARY_PATH", ld);
        }
        // LD_DEBUG goes to stderr: slurmd closes all other descriptors at
        // start, so LD_DEBUG_OUTPUT would lose the plugin dlopen()s.
        cmd.env("LD_DEBUG", "files");
        let cmd = with_mig_minors(wrapped(cmd, &config.slurmd_g_wrapper), config);
        let (output, loaded_files) = split_ld_debug(process::run_with_timeout(cmd, Duration::from_secs(60), &l.capture));
        let r = SlurmdG {
            output,
            dir: l.root.clone(),
            our_dir: p.our_dir.clone(),
            loaded_files,
            stock_dir: config.stock_plugin_dir(),
            log_prefix: testbed::behaviour_of(&config.slurm_version()).log_prefix,
        };
        if keep_dirs() {
            let _ = fs::remove_file(l.root.join(fsutil::IN_USE_MARKER));
            eprintln!("harness: GRES_RS_KEEP=1: kept slurmd -G dir {}", l.root.display());
        } else {
            let _ = fs::remove_dir_all(&l.root);
        }
        r
    }
}

impl Cluster {
    /// `slurmd -G -N <node>` on this started cluster (with munged: what
    /// Slurm 24.11 and later need), in a chroot if the cluster is in one;
    /// the dynamic loader's file list as in [`Cluster::slurmd_g`].
    pub fn slurmd_g_in(&self) -> SlurmdG {
        let mut cmd = self.command("slurmd");
        cmd.current_dir(&self.layout.root);
        cmd.arg("-G").arg("-N").arg(&self.config.node_name);
        for (k, v) in &self.config.slurmd_env {
            cmd.env(k, v);
        }
        if let Some(ld) = &self.ld_library_path {
            cmd.env("LD_LIBRARY_PATH", ld);
        }
        cmd.env("LD_DEBUG", "files");
        let cmd = with_mig_minors(wrapped(cmd, &self.config.slurmd_g_wrapper), &self.config);
        let (output, loaded_files) = split_ld_debug(process::run_with_timeout(cmd, Duration::from_secs(60), &self.layout.capture));
        SlurmdG {
            output,
            dir: self.layout.root.clone(),
            our_dir: self.our_dir.clone(),
            loaded_files,
            stock_dir: self.config.stock_plugin_dir(),
            log_prefix: testbed::behaviour_of(&self.config.slurm_version()).log_prefix,
        }
    }
}

/// `cmd` run by `wrapper` (host programs, e.g. `timeout 20 prlimit
/// --as=N --`; empty: `cmd` itself): the wrapper's words, then `cmd`'s
/// program and arguments (for a chroot's program its `unshare ...
/// chroot` line: what the wrapper sets, an rlimit, is inherited across
/// those `exec`s), with `cmd`'s environment and directory.
fn wrapped(cmd: Command, wrapper: &[String]) -> Command {
    let Some((program, args)) = wrapper.split_first() else { return cmd };
    let mut w = Command::new(program);
    w.args(args).arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => w.env(k, v),
            None => w.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        w.current_dir(d);
    }
    w
}

/// The environment variable that gives a daemon's slurmd the driver's
/// `mig-minors` file (a host path): a chroot's commands mount it where the
/// driver has it ([`chroot::Chroot::command`]), and so does the host's
/// slurmd's own mount namespace the harness makes.
pub const MIG_MINORS_ENV: &str = "GRES_RS_TEST_MIG_MINORS";

/// Run by the host's `/bin/sh` in a mount namespace of its own: a tmpfs
/// over `/proc/driver` with `$GRES_RS_TEST_MIG_MINORS` bound at
/// `nvidia-caps/mig-minors`, then `exec` of the rest (same PID).
const HOST_MIG_MINORS_SCRIPT: &str = r#"set -e
mount -t tmpfs -o mode=755 gres-rs-test /proc/driver
mkdir -p /proc/driver/nvidia-caps
: >/proc/driver/nvidia-caps/mig-minors
mount --bind "$GRES_RS_TEST_MIG_MINORS" /proc/driver/nvidia-caps/mig-minors
exec "$@"
"#;

/// `cmd` (a slurmd of `config`) on the host in a mount namespace of
/// its own where `/proc/driver/nvidia-caps/mig-minors`, the one place the
/// stock gpu/nvml reads MIG minors from (and ours in a release build), is
/// the file its [`MIG_MINORS_ENV`] names, as the NVIDIA driver makes it;
/// `cmd` itself in a chroot (whose commands mount the file themselves),
/// where it has no such variable, or where the file is there already (a
/// caller in such a namespace).  `unshare` without `--fork` and
/// `exec`: the PID is the program's; the namespace and its mounts end with
/// its last process (slurmd's slurmstepds inherit it).
fn with_mig_minors(cmd: Command, config: &ClusterConfig) -> Command {
    if config.chroot.is_some() {
        return cmd;
    }
    let Some(file) = cmd.get_envs().find(|(k, _)| *k == MIG_MINORS_ENV).and_then(|(_, v)| v.map(PathBuf::from)) else { return cmd };
    let driver = Path::new(slurm_gpu_gres::core::nvml_model::MIG_MINORS_PATH);
    if fs::read(driver).ok().is_some_and(|have| fs::read(&file).ok() == Some(have)) {
        return cmd;
    }
    let wrapper = [
        tool("unshare").to_string_lossy().into_owned(),
        "--mount".into(),
        "--propagation".into(),
        "private".into(),
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        HOST_MIG_MINORS_SCRIPT.into(),
        "host-mig-minors".into(),
    ];
    wrapped(cmd, &wrapper)
}

/// Splits the dynamic loader's LD_DEBUG=files lines off stderr: (the
/// output without them, every file they name as loaded).
fn split_ld_debug(mut output: CmdOutput) -> (CmdOutput, Vec<String>) {
    let mut loaded: BTreeSet<String> = BTreeSet::new();
    let mut stderr = String::new();
    for line in output.stderr.lines() {
        if is_ld_debug_line(line) {
            // "    123:\tfile=/path/x.so [0];  dynamically loaded by ...",
            // "    123:\tfile=/path/libgres_rs.so [0];  needed by ..."
            if let Some(rest) = line.split("file=").nth(1) {
                if let Some(path) = rest.split_whitespace().next() {
                    loaded.insert(path.to_string());
                }
            }
        } else {
            stderr.push_str(line);
            stderr.push('\n');
        }
    }
    output.stderr = stderr;
    (output, loaded.into_iter().collect())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A line of the dynamic loader's LD_DEBUG output ("  1234:\t...").
fn is_ld_debug_line(line: &str) -> bool {
    let t = line.trim_start();
    match t.split_once(':') {
        Some((pid, rest)) => !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && rest.starts_with('\t'),
        None => false,
    }
}

/// Value of `Key=` in `scontrol -o` output (first occurrence).
pub fn field(text: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    text.split_whitespace().find_map(|w| w.strip_prefix(&pat).map(|v| v.to_string()))
}
