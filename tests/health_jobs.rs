//! The job a fault hit, for every step, on real slurmd of every release of
//! the test bed (`GRES_RS_SLURM`): with `step_xids = on` in the site's
//! health file, our GRES plugins write each step's GPU window from
//! slurmstepd's `job_set_env` / `step_set_env` (no `--gpu-freq`, no NVML
//! in the step), and `gres-rs health` names the steps whose windows held
//! a kernel XID's GPU at the kernel's time of it.
//!
//! One cluster a release, two GPUs from gres.conf `File=` lines (the NVML
//! stand-in, `h100x2.conf`, plays them for `gres-rs health`: index 0 is
//! `0000:18:00.0`, index 1 `0000:2a:00.0`), and `shard:4`.  The jobs run
//! one after the other: an srun step without `--gpu-freq` on both GPUs, a
//! batch step on both, an interactive step (`salloc`, slurm.conf
//! `LaunchParameters=use_interactive_step`) on both, two `--overlap` steps
//! of a one-GPU job on GPU 0, and a shard job.  Then, all of them ended,
//! one check reads a kernel log with an XID in the middle of each window,
//! one on GPU 1 while only GPU 0 was held, and one after the last job.
//! A copy of the windows with another boot id names no job.
//!
//! The health file and the state directory come from the test build's
//! hooks (`GRES_RS_HEALTH_CONF`, `GRES_RS_STATE_DIR`).  Needs root, the
//! Debian Slurm packages and `cc` (see crates/test-harness); skipped
//! otherwise.

use gres_health::step_windows::{self, Window, WINDOWS_FILE};
use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const PCI: [&str; 2] = ["0000:18:00", "0000:2a:00"];

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id").trim().to_string()
}

fn btime() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    stat.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok()).expect("btime")
}

fn job_of(out: &str) -> u32 {
    out.split_whitespace().find_map(|w| w.strip_prefix("JOB=")?.parse().ok()).unwrap_or_else(|| panic!("no job id in {out}"))
}

/// The job salloc was granted (its stderr).
fn granted(err: &str) -> u32 {
    err.lines().find_map(|l| l.split("Granted job allocation ").nth(1)?.trim().parse().ok()).unwrap_or_else(|| panic!("no allocation in {err}"))
}

/// `gres-rs health` on the state directory and a kernel log, with the
/// stand-in as NVML; its JSON.  With a cluster, as slurmd runs it, beside
/// slurmd (in its chroot) and asking Slurm; else `--no-slurm`.
fn check(cluster: Option<&Cluster>, state: &Path, kmsg: &Path) -> serde_json::Value {
    // The node's two GPUs as device files and on the PCI bus.
    let node = state.parent().expect("parent").join("node");
    std::fs::create_dir_all(node.join("dev")).expect("dev dir");
    for (i, pci) in PCI.iter().enumerate() {
        std::fs::write(node.join(format!("dev/nvidia{i}")), "").expect("dev file");
        let p = node.join(format!("sys/bus/pci/devices/{pci}.0"));
        std::fs::create_dir_all(&p).expect("pci dir");
        std::fs::write(p.join("vendor"), "0x10de\n").expect("vendor");
        std::fs::write(p.join("class"), "0x030200\n").expect("class");
    }
    let mut cmd = match cluster {
        Some(c) => {
            // A copy the chroot sees, at the same path.
            let bin = node.join("gres-rs");
            std::fs::copy(env!("CARGO_BIN_EXE_gres-rs"), &bin).expect("copy gres-rs");
            let mut cmd = c.command_beside(Daemon::Slurmd, "/usr/bin/env").unwrap_or_else(|e| panic!("{e}"));
            cmd.arg("-i")
                .arg(format!("SLURMD_NODENAME={}", c.config.node_name))
                .arg(format!("SLURM_CONF={}", c.layout.slurm_conf().display()))
                .arg(format!("GRES_RS_NVML_FIXTURE={}", standin::fixture("h100x2.conf").display()))
                .arg(bin)
                .arg("health");
            cmd
        }
        None => {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_gres-rs"));
            cmd.env("GRES_RS_NVML_FIXTURE", standin::fixture("h100x2.conf")).args(["health", "--no-slurm"]);
            cmd
        }
    };
    let out = cmd
        .args(["--format", "json", "--nvml-timeout", "1000", "--nvml-lib"])
        .arg(standin::library())
        .arg("--state-dir")
        .arg(state)
        .arg("--kmsg")
        .arg(kmsg)
        .arg("--dev-dir")
        .arg(node.join("dev"))
        .arg("--sys-dir")
        .arg(node.join("sys"))
        .output()
        .expect("gres-rs");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)))
}

/// The jobs the check named for the XID finding on `pci` with `xid`.
fn jobs_of(doc: &serde_json::Value, pci: &str, xid: &str) -> Vec<String> {
    let findings = doc["findings"].as_array().expect("findings");
    let f = findings
        .iter()
        .find(|f| f["kind"] == "xid" && f["detail"] == xid && f["pci"].as_str().is_some_and(|p| p.starts_with(pci)))
        .unwrap_or_else(|| panic!("no xid {xid} on {pci}: {doc:#}"));
    f["jobs"].as_array().expect("jobs").iter().map(|j| j.as_str().expect("str").to_string()).collect()
}

fn window<'a>(ws: &'a [Window], id: &str) -> &'a Window {
    ws.iter().find(|w| w.step.map(|s| s.to_string()).as_deref() == Some(id)).unwrap_or_else(|| panic!("no window of {id}: {ws:#?}"))
}

fn mid(w: &Window) -> u64 {
    let end = w.end.expect("the window ended");
    (w.start + end) / 2
}

per_release! {
    fn every_step_that_held_the_gpu_is_named(bed) {
        let test = "every_step_that_held_the_gpu_is_named";
        let scratch = standin::scratch_dir().join(format!("health-jobs-{}", bed.series));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).expect("scratch");
        std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let conf = scratch.join("gres-rs-health.conf");
        std::fs::write(&conf, "step_xids = on\n").expect("health conf");
        let state: PathBuf = scratch.join("state");

        let mut c = ClusterConfig::gpus(PluginSet::Ours, 2).with_gres("gpu:2,shard:4", &gpu_gres_line(2)).with_test_build();
        c.extra_slurm_conf.push("LaunchParameters=use_interactive_step".into());
        c.extra_slurm_conf.push("InteractiveStepOptions=\"--interactive --preserve-env sleep 3\"".into());
        let Some(mut cfg) = bed.ours_config(c.with_binds(standin::chroot_binds()), test) else { return };
        cfg.slurmd_env.push(("GRES_RS_HEALTH_CONF".into(), conf.to_string_lossy().into_owned()));
        cfg.slurmd_env.push(("GRES_RS_STATE_DIR".into(), state.to_string_lossy().into_owned()));
        let c = Cluster::start(cfg);
        c.assert_ours_loaded(&["gres_gpu", "gres_shard"]);
        c.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:1"]);
        // That proof ran a step too: its window is first; the rest follow.

        let sleepy = "echo JOB=$SLURM_JOB_ID; sleep 3";
        let out = c.srun(&["--gres=gpu:2", "sh", "-c", sleepy]);
        assert!(out.ok(), "{out}\n{}", c.log_tails(40));
        let srun_job = job_of(&out.stdout);
        let batch = c.sbatch(&["--gres=gpu:2"], "#!/bin/sh\nsleep 3\n");
        assert!(batch.state.contains("COMPLETED"), "{batch:?}\n{}", c.log_tails(40));
        let out = c.salloc(&["--gres=gpu:2"], &[]);
        assert!(out.ok(), "{out}\n{}", c.log_tails(40));
        let interactive_job = granted(&out.stderr);
        let out = c.salloc(&["--gres=gpu:1"], &["sh", "-c", "echo JOB=$SLURM_JOB_ID; srun --overlap --gres=gpu:1 sleep 3 & sleep 1; srun --overlap --gres=gpu:1 sleep 1; wait"]);
        assert!(out.ok(), "{out}\n{}", c.log_tails(40));
        let overlap_job = granted(&out.stderr);
        let out = c.srun(&["--gres=shard:1", "sh", "-c", sleepy]);
        assert!(out.ok(), "{out}\n{}", c.log_tails(40));
        let shard_job = job_of(&out.stdout);
        assert!(c.wait_no_jobs(std::time::Duration::from_secs(30)), "jobs left");
        // After the last job, a second apart from its end.
        std::thread::sleep(std::time::Duration::from_secs(2));

        // The records: root's, 0600 in a 0700 directory.
        let dir_mode = std::fs::metadata(&state).expect("state dir").permissions().mode() & 0o7777;
        assert_eq!(dir_mode, 0o700);
        let file = state.join(WINDOWS_FILE);
        assert_eq!(std::fs::metadata(&file).expect("windows").permissions().mode() & 0o7777, 0o600);
        let text = std::fs::read_to_string(&file).expect("windows");
        assert!(text.lines().all(|l| l.len() < 512), "{text}");
        let (ws, other) = step_windows::windows(&text, &boot_id());
        assert_eq!(other, 0, "{text}");
        let srun_w = window(&ws, &format!("{srun_job}.0"));
        let batch_w = window(&ws, &format!("{}.batch", batch.job_id));
        let inter_w = window(&ws, &format!("{interactive_job}.interactive"));
        let overlap: Vec<&Window> = ws.iter().filter(|w| w.step.is_some_and(|s| s.job == overlap_job && s.step < 100)).collect();
        let shard_w = window(&ws, &format!("{shard_job}.0"));
        assert_eq!((srun_w.gpus.as_slice(), batch_w.gpus.as_slice(), inter_w.gpus.as_slice()), (&[0, 1][..], &[0, 1][..], &[0, 1][..]), "{text}");
        assert_eq!(overlap.len(), 2, "{text}");
        assert!(overlap.iter().all(|w| w.gpus == [0]), "{text}");
        assert_eq!(shard_w.gpus.len(), 1, "{text}");
        let shard_gpu = shard_w.gpus[0] as usize;
        let last_end = ws.iter().filter_map(|w| w.end).max().expect("ends");
        let overlap_t = overlap.iter().map(|w| w.start).max().expect("start") + 1;

        // One kernel log: an XID in each window, one on the GPU the
        // overlap job did not hold, one after every job.
        let boot = btime();
        let usec = |t: u64| (t - boot) * 1_000_000 + 500_000;
        let xids = [
            (srun_w, mid(srun_w), PCI[1], 79),
            (batch_w, mid(batch_w), PCI[1], 48),
            (inter_w, mid(inter_w), PCI[1], 63),
            (overlap[0], overlap_t, PCI[0], 64),
            (overlap[0], overlap_t, PCI[1], 92),
            (shard_w, mid(shard_w), PCI[shard_gpu], 94),
            (srun_w, last_end + 1, PCI[0], 95),
        ];
        let mut kmsg = String::new();
        for (i, (_, t, pci, xid)) in xids.iter().enumerate() {
            kmsg.push_str(&format!("4,{},{},-;NVRM: Xid (PCI:{pci}): {xid}, pid=999999, name=a.out, Ch 00000008\n", 100 + i, usec(*t)));
        }
        let kmsg_path = scratch.join("kmsg.log");
        std::fs::write(&kmsg_path, &kmsg).expect("kmsg");
        let before = scratch.join("state-other-boot");
        std::fs::create_dir_all(&before).expect("dir");
        std::fs::set_permissions(&before, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::write(before.join(WINDOWS_FILE), text.replace(&format!("boot={}", boot_id()), "boot=11111111-2222-3333-4444-555555555555")).expect("copy");

        // The check as slurmd runs it, every job ended, Slurm asked.
        let doc = check(Some(&c), &state, &kmsg_path);
        drop(c);
        assert_eq!(jobs_of(&doc, PCI[1], "79"), [format!("{srun_job}.0")], "srun without --gpu-freq");
        assert_eq!(jobs_of(&doc, PCI[1], "48"), [format!("{}.batch", batch.job_id)], "the batch step");
        assert_eq!(jobs_of(&doc, PCI[1], "63"), [format!("{interactive_job}.interactive")], "the interactive step");
        let mut both = jobs_of(&doc, PCI[0], "64");
        both.sort();
        assert_eq!(both, [format!("{overlap_job}.0"), format!("{overlap_job}.1")], "both --overlap steps");
        assert!(jobs_of(&doc, PCI[1], "92").is_empty(), "a GPU no step held");
        assert_eq!(jobs_of(&doc, PCI[shard_gpu], "94"), [format!("{shard_job}.0")], "the shard step");
        assert!(jobs_of(&doc, PCI[0], "95").is_empty(), "after every job");
        let reason = doc["reason"].as_str().unwrap_or_default();
        // The worst, XID 48 (reset GPU, by hand), hit the batch step.
        assert!(reason.contains(&format!(" job {}.batch -> ", batch.job_id)), "the drain reason names the job: {doc:#}");

        // --jobs lists them, text and JSON.
        let out = Command::new(env!("CARGO_BIN_EXE_gres-rs")).args(["health", "--jobs", "--state-dir"]).arg(&state).output().expect("gres-rs");
        let table = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{table}");
        assert!(table.lines().any(|l| l.starts_with(&format!("{srun_job} ")) && l.contains(" kernel ") && l.ends_with("fallen off the bus")), "{table}");
        let out = Command::new(env!("CARGO_BIN_EXE_gres-rs")).args(["health", "--jobs", "--format", "json", "--state-dir"]).arg(&state).output().expect("gres-rs");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let rows = json["kernel"].as_array().expect("kernel rows");
        assert_eq!(rows.len(), 6, "{json:#}");
        // The user, from slurmctld (the test's jobs run as root).
        assert!(rows.iter().all(|r| r["uid"] == 0), "{json:#}");

        // After a reboot (the windows of another boot): no job.
        let doc = check(None, &before, &kmsg_path);
        assert!(jobs_of(&doc, PCI[1], "79").is_empty() && jobs_of(&doc, PCI[0], "64").is_empty(), "{doc:#}");
    }

    fn step_xids_off_writes_no_window(bed) {
        let test = "step_xids_off_writes_no_window";
        let scratch = standin::scratch_dir().join(format!("health-jobs-off-{}", bed.series));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).expect("scratch");
        let conf = scratch.join("gres-rs-health.conf");
        std::fs::write(&conf, "step_xids = off\n").expect("health conf");
        let state = scratch.join("state");
        let c = ClusterConfig::gpus(PluginSet::Ours, 2).with_gres("gpu:2", &gpu_gres_line(2)).with_test_build();
        let Some(mut cfg) = bed.ours_config(c.with_binds(standin::chroot_binds()), test) else { return };
        cfg.slurmd_env.push(("GRES_RS_HEALTH_CONF".into(), conf.to_string_lossy().into_owned()));
        cfg.slurmd_env.push(("GRES_RS_STATE_DIR".into(), state.to_string_lossy().into_owned()));
        let c = Cluster::start(cfg);
        c.assert_stepd_ours_loaded(&["gres_gpu"], &["--gres=gpu:1"]);
        let out = c.srun(&["--gres=gpu:2", "true"]);
        assert!(out.ok(), "{out}");
        drop(c);
        assert!(!state.exists(), "nothing written");
    }
}
