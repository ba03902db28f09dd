//! A running test cluster: its daemons, where each runs, the commands in
//! its environment and its logs.  Its start, proof of loading, client
//! commands, `slurmd -G` and teardown are in the child modules.

mod boot;
mod client;
mod lock;
mod proof;
mod slurmd_g;
mod teardown;
mod wrap;

pub use client::{field, JobResult};
pub use slurmd_g::SlurmdG;
pub use wrap::MIG_MINORS_ENV;

use crate::config::ClusterConfig;
use crate::layout::Layout;
use crate::tools::tool;
use crate::{accounting, envdump, fsutil, netns, process};
use lock::ClusterLock;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command};

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

    /// PID of a daemon we started (None if not running / stopped).
    pub fn pid(&self, d: Daemon) -> Option<u32> {
        self.child(d).map(|c| c.id()).filter(|p| process::pid_alive(*p))
    }

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
}

/// Removes inherited Slurm/GPU variables and sets SLURM_CONF etc.
fn clean_env(cmd: &mut Command, l: &Layout) {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("SLURM_") || k.starts_with("SALLOC_") || k.starts_with("SBATCH_") || k.starts_with("SRUN_") || envdump::is_gpu_var(&k) {
            cmd.env_remove(&k);
        }
    }
    cmd.env("SLURM_CONF", l.slurm_conf());
    cmd.env("GRES_RS_DUMP_ENV", l.dump_env_script());
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:{path}"));
    cmd.env("LC_ALL", "C");
}
