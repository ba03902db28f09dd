//! `slurmd -G` in a prepared directory: the directory, its wall times
//! and the instructions callgrind counts of it.

use crate::exec::{text, timed};
use crate::stats::{alternating, by_side, Side};
use gres_test_harness::chroot::{Chroot, TimedRun};
use gres_test_harness::testbed::behaviour_of;
use gres_test_harness::{tool, Cluster, ClusterConfig};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A cluster directory prepared by the harness (slurm.conf, gres.conf,
/// fake devices, our plugins installed) in which `slurmd -G` is run
/// directly, so that only slurmd itself is timed.  On a release whose
/// `slurmd -G` authenticates first (24.11 and later:
/// `StockQuirks::slurmd_g_needs_munged`) the harness's cluster stays up
/// for its munged; in a chroot every run is the chroot's slurmd (and
/// valgrind).
pub struct GDir {
    dir: PathBuf,
    node: String,
    env: Vec<(String, String)>,
    /// The release's chroot (`None`: the host).
    chroot: Option<Chroot>,
    /// Host paths the chroot's commands need besides `dir` (the NVML
    /// stand-in).
    binds: Vec<PathBuf>,
    /// The started cluster whose munged `slurmd -G` needs.
    cluster: Option<Cluster>,
}

impl GDir {
    pub fn prepare(cfg: &ClusterConfig) -> GDir {
        if behaviour_of(&cfg.slurm_version()).slurmd_g_needs_munged {
            // As Cluster::slurmd_g does it, keeping the cluster.
            let mut c = cfg.clone();
            c.wait_idle = false;
            c.verify_ours_loaded = false;
            let cluster = Cluster::start(c);
            let g = cluster.slurmd_g_in();
            if !g.output.ok() {
                panic!("slurmd -G failed while preparing {}:\n{}", g.dir.display(), g.output);
            }
            if g.our_dir.is_some() {
                g.assert_ours_loaded(&["gres_gpu"]);
            }
            let dir = cluster.layout.root.clone();
            return GDir {
                dir,
                node: cfg.node_name.clone(),
                env: cfg.slurmd_env.clone(),
                chroot: cfg.chroot.clone(),
                binds: cfg.binds.clone(),
                cluster: Some(cluster),
            };
        }
        let keep = std::env::var_os("GRES_RS_KEEP").is_some();
        std::env::set_var("GRES_RS_KEEP", "1");
        let g = Cluster::slurmd_g(cfg);
        if !keep {
            std::env::remove_var("GRES_RS_KEEP");
        }
        let d = GDir {
            dir: g.dir.clone(),
            node: cfg.node_name.clone(),
            env: cfg.slurmd_env.clone(),
            chroot: cfg.chroot.clone(),
            binds: cfg.binds.clone(),
            cluster: None,
        };
        if !g.output.ok() {
            panic!("slurmd -G failed while preparing {}:\n{}", d.dir.display(), g.output);
        }
        if let Some(our) = &g.our_dir {
            let names: Vec<&str> = ["gres_gpu"].into_iter().filter(|n| our.join(format!("{n}.so")).exists()).collect();
            g.assert_ours_loaded(&names);
        }
        d
    }
    pub fn slurm_conf(&self) -> PathBuf {
        self.dir.join("etc").join("slurm.conf")
    }
    /// `prog` (a host tool, or in the chroot the chroot's, run there) with `args`, the
    /// directory's slurm.conf and nothing of Slurm's or our environment.
    pub fn command(&self, prog: &str, args: &[&str]) -> Command {
        let mut cmd = match (&self.cluster, &self.chroot) {
            (Some(c), _) => c.command(prog),
            // A chroot's release whose `slurmd -G` needs no munged (23.02).
            (None, Some(r)) => {
                let binds: Vec<PathBuf> = std::iter::once(self.dir.clone()).chain(self.binds.iter().cloned()).collect();
                r.command(r.tool(prog).unwrap_or_else(|| PathBuf::from(prog)), &binds)
            }
            (None, None) => Command::new(tool(prog)),
        };
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("SLURM_") || k.starts_with("GRES_RS_") || k == "LD_LIBRARY_PATH" {
                cmd.env_remove(&k);
            }
        }
        cmd.args(args).env("SLURM_CONF", self.slurm_conf()).env("LC_ALL", "C").current_dir(&self.dir);
        cmd.stdin(Stdio::null());
        cmd
    }
    /// A program of the release as `slurmd -G` runs it: the path inside
    /// the chroot, or the host's.
    fn program(&self, name: &str) -> String {
        let p = match &self.chroot {
            Some(r) => r.tool(name).unwrap_or_else(|| panic!("no {name} in chroot {}", r.root().display())),
            None => tool(name),
        };
        p.to_string_lossy().into_owned()
    }
    pub fn slurmd_g(&self, extra_env: &[(&str, &Path)]) -> Command {
        let mut cmd = self.command("slurmd", &["-G", "-N", &self.node]);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd
    }
    /// `slurmd -G` as one command of `Chroot::timed_runs`.
    fn timed_run(&self) -> TimedRun {
        let mut env = vec![("SLURM_CONF".to_string(), self.slurm_conf().to_string_lossy().into_owned())];
        env.extend(self.env.iter().cloned());
        TimedRun { argv: vec![self.program("slurmd"), "-G".into(), "-N".into(), self.node.clone()], dir: self.dir.clone(), env }
    }
}

impl Drop for GDir {
    fn drop(&mut self) {
        // A cluster removes its own directory (and keeps it under
        // GRES_RS_KEEP=1).
        if self.cluster.is_some() {
            return;
        }
        // GRES_RS_KEEP=1 keeps it for a closer look (perf, strace), as the
        // harness keeps its clusters.
        if std::env::var_os("GRES_RS_KEEP").is_some() {
            eprintln!("bench: kept {}", self.dir.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Wall times (seconds) of `runs` `slurmd -G` a side, in [`alternating`]
/// order: on the host each timed from here; in a chroot timed inside it,
/// all in one mount namespace (`Chroot::timed_runs`: entering the chroot
/// costs more than a `slurmd -G`).
pub fn slurmd_g_times(what: &str, stock: &GDir, ours: &GDir, runs: usize) -> (Vec<f64>, Vec<f64>) {
    let order = alternating(runs);
    let times: Vec<f64> = match &stock.chroot {
        Some(root) => root
            .timed_runs(
                &[stock.dir.clone(), ours.dir.clone()].into_iter().chain(stock.binds.iter().cloned()).collect::<Vec<_>>(),
                &[stock.timed_run(), ours.timed_run()],
                &order.iter().map(|s| usize::from(*s == Side::Ours)).collect::<Vec<_>>(),
            )
            .unwrap_or_else(|e| panic!("{what}: {e}")),
        None => order
            .iter()
            .map(|&side| {
                let d = if side == Side::Stock { stock } else { ours };
                let (t, out) = timed(d.slurmd_g(&[]));
                assert!(out.status.success(), "{what} ({side:?}): slurmd -G failed:\n{}", text(&out));
                t
            })
            .collect(),
    };
    by_side(&order, &times)
}

/// The instructions one `slurmd -G` in `d` executes, user space, counted
/// by valgrind's callgrind (the release's: the chroot's valgrind on the
/// chroot's slurmd; `None` without valgrind).  With
/// `GRES_RS_CALLGRIND_DIR=<dir>` the profiles stay there
/// (`<dir>/<label>.<pid>.out`, one per run, for `callgrind_annotate`).
pub fn instructions(d: &GDir, label: &str) -> Option<f64> {
    if d.chroot.as_ref().map_or(!tool("valgrind").is_file(), |r| r.tool("valgrind").is_none()) {
        eprintln!("bench: no valgrind for {label}");
        return None;
    }
    let keep = std::env::var_os("GRES_RS_CALLGRIND_DIR").map(PathBuf::from);
    // In a chroot the profile is written in the (bound) directory first.
    let out_dir = match (&keep, &d.chroot) {
        (Some(k), None) => Some(k.clone()),
        (Some(_), Some(_)) => Some(d.dir.clone()),
        (None, _) => None,
    };
    if let Some(k) = &keep {
        // valgrind does not make the directory (on the host the profile
        // is written there directly).
        let _ = std::fs::create_dir_all(k);
    }
    let out_file = match &out_dir {
        Some(dir) => format!("--callgrind-out-file={}/{label}.%p.out", dir.display()),
        None => "--callgrind-out-file=/dev/null".to_string(),
    };
    let slurmd = d.program("slurmd");
    let mut cmd = d.command("valgrind", &["--tool=callgrind", &out_file, &slurmd, "-G", "-N", &d.node]);
    for (k, v) in &d.env {
        cmd.env(k, v);
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!("bench: valgrind slurmd -G ({label}) failed:\n{}", text(&out));
        return None;
    }
    if let (Some(k), Some(_)) = (&keep, &d.chroot) {
        for e in std::fs::read_dir(&d.dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&format!("{label}.")) && name.ends_with(".out") {
                if let Err(err) = std::fs::copy(e.path(), k.join(&name)) {
                    eprintln!("bench: keeping {}: {err}", e.path().display());
                }
            }
        }
    }
    text(&out).lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().parse::<f64>().ok()))
}
