//! `slurmd -G` (the node's GRES configuration printed), on its own or on
//! a started cluster, with the dynamic loader's list of the files loaded.

use super::wrap::{with_mig_minors, wrapped};
use super::{clean_env, Cluster};
use crate::cluster_files::prepare;
use crate::config::ClusterConfig;
use crate::layout::keep_dirs;
use crate::proof::check_loaded_with;
use crate::{fsutil, process, quirks, CmdOutput};
use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;

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
    /// How its release prefixes log lines ([`quirks::StockQuirks`]).
    pub log_prefix: quirks::LogPrefix,
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

impl Cluster {
    /// Runs `slurmd -G -N <node>` (prints the node's GRES config and exits)
    /// with `config` in a temp dir; needs no slurmctld, and munged only
    /// where its release authenticates first (24.11+,
    /// [`quirks::StockQuirks::slurmd_g_needs_munged`]: then a munged of
    /// its own, [`Cluster::try_start_munged`]). The dynamic
    /// loader's file list (LD_DEBUG=files) is captured separately so the
    /// caller can prove which plugin files were loaded.
    pub fn slurmd_g(config: &ClusterConfig) -> SlurmdG {
        if quirks::behaviour_of(&config.slurm_version()).slurmd_g_needs_munged {
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
            log_prefix: quirks::behaviour_of(&config.slurm_version()).log_prefix,
        };
        if keep_dirs() {
            let _ = fs::remove_file(l.root.join(fsutil::IN_USE_MARKER));
            eprintln!("harness: GRES_RS_KEEP=1: kept slurmd -G dir {}", l.root.display());
        } else {
            let _ = fs::remove_dir_all(&l.root);
        }
        r
    }

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
            log_prefix: quirks::behaviour_of(&self.config.slurm_version()).log_prefix,
        }
    }
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

/// A line of the dynamic loader's LD_DEBUG output ("  1234:\t...").
fn is_ld_debug_line(line: &str) -> bool {
    let t = line.trim_start();
    match t.split_once(':') {
        Some((pid, rest)) => !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && rest.starts_with('\t'),
        None => false,
    }
}
