//! `scontrol reconfigure` and slurmd restarts while jobs run, with our
//! plugins in a real slurmd: every running job keeps its GPUs (its steps
//! see the same GPUs before and after, and a step that spans the event
//! runs on), and new jobs are given only the GPUs nobody holds.
//!
//! `GRES_RS_TEST_STOCK=1` runs the same on the stock plugins (the
//! expectations are Slurm's own).  Needs root, the Debian Slurm packages
//! and `cargo build --workspace` (see crates/test-harness); skipped otherwise.

use gres_test_harness as harness;

use harness::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn plugins() -> PluginSet {
    if std::env::var("GRES_RS_TEST_STOCK").is_ok_and(|v| v == "1") {
        PluginSet::Stock
    } else {
        PluginSet::Ours
    }
}

/// A slurmd started by the test in place of the harness's (after a
/// restart); stopped by PID when dropped.
struct Restarted(Option<Child>);

impl Drop for Restarted {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            harness::process::terminate_child(c, "slurmd", Duration::from_secs(10));
        }
    }
}

fn count(text: &str, what: &str) -> usize {
    text.matches(what).count()
}

/// Waits until slurmd's log holds `n` lines containing `what`.
#[track_caller]
fn wait_log(c: &Cluster, what: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&c.log(Daemon::Slurmd), what) < n {
        assert!(Instant::now() < deadline, "slurmd never logged {what:?} ({n} times)\n{}", c.log_tails(40));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops slurmd (SIGTERM: running steps live on in their slurmstepd) and
/// starts a new one with the same configuration and environment.
fn restart_slurmd(c: &Cluster, previous: &mut Restarted) -> Restarted {
    let started = count(&c.log(Daemon::Slurmd), "slurmd started on");
    match previous.0.take() {
        Some(mut child) => {
            harness::process::terminate_child(&mut child, "slurmd", Duration::from_secs(10));
        }
        None => {
            let pid = c.pid(Daemon::Slurmd).expect("slurmd running");
            let slurmd = harness::process::ProcessRef::of(pid).expect("slurmd running");
            harness::process::terminate_process(slurmd, Duration::from_secs(10));
        }
    }
    let mut cmd = c.daemon_command("slurmd");
    cmd.arg("-D").arg("-N").arg(&c.config.node_name);
    for (k, v) in &c.config.slurmd_env {
        cmd.env(k, v);
    }
    let log = std::fs::File::create(c.layout.log.join("slurmd-restarted.stdout")).expect("log file");
    cmd.current_dir(&c.layout.root).stdin(Stdio::null()).stdout(log.try_clone().expect("log")).stderr(log);
    let child = cmd.spawn().unwrap_or_else(|e| panic!("starting slurmd again: {e}"));
    wait_log(c, "slurmd started on", started + 1);
    let restarted = Restarted(Some(child));
    wait_responding(c);
    restarted
}

/// Waits until the node answers and is neither drained nor down.
#[track_caller]
fn wait_responding(c: &Cluster) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = c.node_field("State").unwrap_or_default();
        if !state.is_empty() && !state.contains("NOT_RESPONDING") && !state.contains("DOWN") {
            assert!(!state.contains("DRAIN"), "node drained: {:?}\n{}", c.node_field("Reason"), c.log_tails(40));
            return state;
        }
        assert!(Instant::now() < deadline, "node not responding: {state}\n{}", c.log_tails(40));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A GPU list like "0,1" as a set.
fn gpu_set(list: &str) -> BTreeSet<String> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// Waits for a file the job writes; returns its contents.
#[track_caller]
fn wait_file(c: &Cluster, path: &Path, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.ends_with('\n') {
                return s;
            }
        }
        assert!(Instant::now() < deadline, "{what}: {} never written\n{}", path.display(), c.log_tails(40));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `KEY=value` of a one-line record.
fn value_of(line: &str, key: &str) -> String {
    line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}="))).unwrap_or("").to_string()
}

/// A new job of two GPUs must get GPUs `held` does not hold, and a job of
/// three (more than are free) must not start.
#[track_caller]
fn check_new_jobs(c: &Cluster, held: &BTreeSet<String>, when: &str) {
    let out = c.srun(&["-n1", "--gres=gpu:2", "printenv", "SLURM_STEP_GPUS"]).expect_ok(&format!("new job {when}"));
    let got = gpu_set(out.stdout.trim());
    assert_eq!(got.len(), 2, "{when}: {out}");
    assert!(got.is_disjoint(held), "{when}: a new job got GPUs {got:?} of the running job's {held:?}");
    let out = c.srun_timeout(&["--immediate=3", "-n1", "--gres=gpu:3", "true"], Duration::from_secs(30));
    assert!(!out.ok(), "{when}: a job of 3 GPUs started while only 2 are free:\n{out}");
}

per_release! {
    fn reconfigure_and_restart_keep_running_jobs_gpus(bed) {
        let c = Cluster::start(ClusterConfig::gpus(plugins(), 4).with_cpus(1, 8, 1));
        let dir: PathBuf = c.layout.jobs.join("reconf");
        std::fs::create_dir_all(&dir).expect("dir");
        let (flag1, flag2) = (dir.join("flag1"), dir.join("flag2"));
        let rec = "echo \"STEP=$SLURM_STEP_GPUS CVD=$CUDA_VISIBLE_DEVICES JOB=$SLURM_JOB_GPUS\"";
        let long = dir.join("long.sh");
        // The long step ends once the last short step is done, so that the
        // short steps always find the job's other GPU free.
        std::fs::write(&long, format!("#!/bin/sh\n{rec} >{d}/l0\nwhile [ ! -e {d}/s2.done ]; do sleep 0.2; done\n{rec} >{d}/l1\n", d = dir.display()))
            .expect("long.sh");
        let script = format!(
            "#!/bin/bash\n{rec} >{d}/batch\n\
             srun -n1 --exclusive --gres=gpu:1 /bin/sh {long} &\n\
             while [ ! -e {d}/l0 ]; do sleep 0.2; done\n\
             srun -n1 --exclusive --gres=gpu:1 /bin/sh -c '{rec}' >{d}/s0\n\
             while [ ! -e {f1} ]; do sleep 0.2; done\n\
             srun -n1 --exclusive --gres=gpu:1 /bin/sh -c '{rec}' >{d}/s1\n\
             while [ ! -e {f2} ]; do sleep 0.2; done\n\
             srun -n1 --exclusive --gres=gpu:1 /bin/sh -c '{rec}' >{d}/s2\n\
             touch {d}/s2.done\n\
             wait\n",
            d = dir.display(),
            long = long.display(),
            f1 = flag1.display(),
            f2 = flag2.display()
        );
        let (out, id) = c.sbatch_submit(&["-n2", "--gres=gpu:2"], &script);
        let id = id.unwrap_or_else(|| panic!("sbatch failed:\n{out}"));
        let batch = wait_file(&c, &dir.join("batch"), "batch script");
        let held = gpu_set(&value_of(&batch, "JOB"));
        assert_eq!(held.len(), 2, "job's GPUs: {batch}");
        let l0 = wait_file(&c, &dir.join("l0"), "long step");
        let s0 = wait_file(&c, &dir.join("s0"), "step before");
        let (long_gpu, other_gpu) = (value_of(&l0, "STEP"), value_of(&s0, "STEP"));
        assert!(held.contains(&long_gpu) && held.contains(&other_gpu) && long_gpu != other_gpu, "steps' GPUs {l0} {s0} of the job's {held:?}");
        assert_eq!(value_of(&l0, "CVD"), long_gpu, "{l0}");

        // scontrol reconfigure: slurmd reloads its configuration and the GRES
        // plugins load gres.conf again.
        // From 23.11 slurmd executes itself again (in place: it runs with
        // -D), so the same PID starts anew and loads our plugins again.
        let slurmd = c.pid(Daemon::Slurmd).expect("slurmd");
        let marker = bed.behaviour.reconfigure_marker();
        let log = c.log(Daemon::Slurmd);
        let (seen, started) = (count(&log, marker), count(&log, "slurmd started on"));
        c.scontrol(&["reconfigure"]).expect_ok("scontrol reconfigure");
        wait_log(&c, marker, seen + 1);
        if bed.behaviour.reconfigure_reexecs {
            wait_log(&c, "slurmd started on", started + 1);
        }
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(c.pid(Daemon::Slurmd), Some(slurmd), "slurmd died in reconfigure\n{}", c.log_tails(40));
        wait_responding(&c);
        if c.our_dir.is_some() {
            c.assert_ours_loaded(&["gres_gpu"]);
        }
        assert_eq!(c.node_field("Gres").as_deref(), Some("gpu:4"));
        check_new_jobs(&c, &held, "after reconfigure");
        std::fs::write(&flag1, "").expect("flag1");
        let s1 = wait_file(&c, &dir.join("s1"), "step after reconfigure");
        assert_eq!(s1, s0, "a step of the running job sees other GPUs after reconfigure");

        // slurmd restart.
        let mut none = Restarted(None);
        let restarted = restart_slurmd(&c, &mut none);
        if let (Some(pid), Some(our_dir)) = (restarted.0.as_ref().map(Child::id), &c.our_dir) {
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            let ours = our_dir.join("gres_gpu.so");
            assert!(maps.contains(&*ours.to_string_lossy()), "the restarted slurmd did not load our gres_gpu.so");
        }
        assert_eq!(c.node_field("Gres").as_deref(), Some("gpu:4"));
        check_new_jobs(&c, &held, "after slurmd restart");
        std::fs::write(&flag2, "").expect("flag2");
        let job = c.wait_job(id, Duration::from_secs(120));
        assert!(job.ok(), "the job that ran through reconfigure and restart failed: {job:?}\n{}", c.log_tails(40));
        let s2 = std::fs::read_to_string(dir.join("s2")).unwrap_or_default();
        let l1 = std::fs::read_to_string(dir.join("l1")).unwrap_or_default();
        assert_eq!(s2, s0, "a step of the running job sees other GPUs after a slurmd restart");
        assert_eq!(l1, l0, "the step that spanned reconfigure and restart");
        // Afterwards all four GPUs are free again.
        let out = c.srun(&["-n1", "--gres=gpu:4", "printenv", "SLURM_STEP_GPUS"]).expect_ok("all GPUs free again");
        assert_eq!(out.stdout.trim(), "0,1,2,3", "{out}");
        let log = c.log(Daemon::Slurmd);
        assert!(!log.contains("internal error (panic)"), "{}", c.log_tails(40));
        drop(restarted);
    }
}
