//! The proof of loading on a running cluster: which files its daemons
//! and a job step's slurmstepd mapped.

use super::{Cluster, Daemon};
use crate::proof::{check_loaded, check_loaded_with, check_mapped_in_chroot};
use crate::{chroot, process, quirks};
use std::collections::BTreeMap;

impl Cluster {
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

    /// Files mapped by a daemon (from `/proc/<pid>/maps`).
    pub fn mapped_files(&self, d: Daemon) -> Result<Vec<String>, String> {
        let pid = self.pid(d).ok_or_else(|| format!("{d:?} is not running"))?;
        Ok(self.inside_paths(process::mapped_files(pid)?))
    }

    /// Mapped paths as the daemons see them: in a chroot the kernel shows
    /// a daemon's files from the host with the chroot's directory in front
    /// (its binds too), which is taken off, so that the paths compare with
    /// `PluginDir=` (our dir, bound at the same path, and the stock dir).
    pub(super) fn inside_paths(&self, paths: Vec<String>) -> Vec<String> {
        let Some(root) = &self.config.chroot else { return paths };
        let prefix = root.root().to_string_lossy().trim_end_matches('/').to_string();
        paths.into_iter().map(|p| p.strip_prefix(&prefix).filter(|r| r.starts_with('/')).map(str::to_string).unwrap_or(p)).collect()
    }

    pub(super) fn check_ours_loaded_in(&self, d: Daemon, names: &[&str]) -> Result<(), String> {
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
    /// ([`quirks::StockQuirks::slurmd_keeps_gpu_plugin`]) its maps, as
    /// [`Cluster::assert_ours_loaded`]; where it unloads it after loading
    /// its config (26.05) the line our `init` writes to slurmd's log from
    /// slurmd's own `/proc/self/maps`, `..., loaded from <our dir>/<name>.so`
    /// (for a node whose jobs can run, [`Cluster::assert_stepd_ours_loaded`]
    /// proves it by maps as well).
    #[track_caller]
    pub fn assert_ours_gpu_plugin_loaded(&self, name: &str) {
        if quirks::behaviour_of(&self.config.slurm_version()).slurmd_keeps_gpu_plugin {
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
}
