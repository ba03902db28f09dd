//! A test cluster's configuration: which plugin files it loads
//! ([`PluginSet`]), its nodes, GRES, daemons' settings and where its
//! Slurm runs ([`ClusterConfig`]).

use crate::builds::{test_build_dir, OurBuild};
use crate::chroot;
use crate::host::{host_version, stock_plugin_dir};
use crate::install::OUR_PLUGINS;
use crate::tools::tool;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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
    /// of the host ([`accounting::Database`](crate::accounting::Database)) and the release's slurmdbd
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
    /// release's build ([`OurBuild`]); required in a chroot.
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
    /// scratch files ([`standin::chroot_binds`](crate::standin::chroot_binds)).  Unused on the host.
    pub binds: Vec<PathBuf>,
    /// Several slurmd nodes instead of the one `node_name` (empty: one
    /// node, on the host's network).  Each runs in network, UTS and mount
    /// namespaces of its own ([`netns`](crate::netns)); slurmctld and the client
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
            chroot: chroot::current(),
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
    pub(crate) fn all_node_gres(&self) -> Vec<String> {
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
            None => host_version().unwrap_or_else(|| chroot::RELEASES[0].slurm.to_string()),
        }
    }

    /// A `Command` for a Slurm (or other) program on the host, or inside
    /// the chroot with the cluster's directory `dir` and [`binds`](Self::binds)
    /// visible.
    pub(crate) fn program(&self, prog: &str, dir: &Path) -> Command {
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

impl OurBuild {
    /// `cfg` taking our files from this build.
    pub fn apply(&self, mut cfg: ClusterConfig) -> ClusterConfig {
        cfg.plugin_build_dir = Some(self.lib_dir.clone());
        cfg.plugin_files_dir = self.plugin_files_dir.clone();
        cfg
    }
}
