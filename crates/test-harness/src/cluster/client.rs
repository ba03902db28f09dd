//! Slurm's client commands on a cluster (srun, sbatch, salloc, scontrol,
//! ...), the jobs' results and the environments they dumped.

use super::Cluster;
use crate::envdump::{self, EnvBlock};
use crate::{fsutil, process, CmdOutput};
use std::thread;
use std::time::{Duration, Instant};

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

impl Cluster {
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
        envdump::collect_dumps(&self.layout.dumps)
    }
}

/// Value of `Key=` in `scontrol -o` output (first occurrence).
pub fn field(text: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    text.split_whitespace().find_map(|w| w.strip_prefix(&pat).map(|v| v.to_string()))
}
