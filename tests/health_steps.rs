//! The job a fault hit, on real slurmd of every release of the test bed
//! (`GRES_RS_SLURM`) with the NVML stand-in: with `step_xids = on` in the
//! site's health file, our gpu/nvml in a step's slurmstepd registers the
//! step's GPUs for XID events when the step starts and collects them when
//! it ends.  The stand-in queues XID 79 on GPU 1 of two H100s: slurmd's
//! log gets one error line naming the job, the step, the GPU and XID 79,
//! the record is in the state directory, and `gres-rs health --jobs`
//! names the job.  With the switch off nothing is registered and nothing
//! written.  The step asks for `--gpu-freq`: 22.05's slurmstepd calls the
//! gpu plugin's step functions only then (23.02 on also with slurm.conf
//! `GpuFreqDef`).
//!
//! The health file and the state directory come from the test build's
//! hooks (`GRES_RS_HEALTH_CONF`, `GRES_RS_STATE_DIR`).  Needs root, the
//! Debian Slurm packages and `cc` (see crates/test-harness); skipped
//! otherwise.

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// What one run left: slurmd's log, the stand-in's calls, the records'
/// file (if any), the job id, and the state directory.
struct Ran {
    log: String,
    calls: String,
    records: Option<String>,
    job: u32,
    state_dir: PathBuf,
}

fn run(bed: &testbed::TestBed, test: &str, switch: &str) -> Option<Ran> {
    let tag = format!("{}-{switch}", bed.series);
    let scratch = standin::scratch_dir().join(format!("health-steps-{tag}"));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch");
    std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let fixture = scratch.join("fixture.conf");
    std::fs::write(&fixture, format!("include {}\nselect 1\nxid 79\n", standin::fixture("h100x2.conf").display())).expect("fixture");
    let conf = scratch.join("gres-rs-health.conf");
    std::fs::write(&conf, format!("# the job a fault hit\nstep_xids = {switch}\n")).expect("health conf");
    let state_dir = scratch.join("state");
    let calls = scratch.join("calls.log");

    // One core per socket: each GPU's affinity (one CPU) is a whole
    // socket (24.11 drains a node otherwise).
    let c = ClusterConfig::gpus(PluginSet::Ours, 0).with_cpus(2, 1, 1).with_gres("gpu:nvidia_h100_80gb_hbm3:2", "AutoDetect=nvml\n").with_test_build();
    let mut cfg = bed.ours_config(c.with_binds(standin::chroot_binds()), test)?;
    cfg.slurmd_env = standin::daemon_env(&fixture);
    cfg.slurmd_env.push(("GRES_RS_NVML_CALLS".into(), calls.to_string_lossy().into_owned()));
    cfg.slurmd_env.push(("GRES_RS_HEALTH_CONF".into(), conf.to_string_lossy().into_owned()));
    cfg.slurmd_env.push(("GRES_RS_STATE_DIR".into(), state_dir.to_string_lossy().into_owned()));
    let c = Cluster::start(cfg);
    c.assert_ours_loaded(&["gres_gpu"]);
    c.assert_ours_gpu_plugin_loaded("gpu_nvml");

    let out = c.srun(&["--gres=gpu:2", "--gpu-freq=high", "sh", "-c", "echo JOB=$SLURM_JOB_ID STEP=$SLURM_STEP_ID"]);
    assert!(out.ok(), "{out}\n{}", c.log_tails(40));
    let job: u32 = out.stdout.split_whitespace().find_map(|w| w.strip_prefix("JOB=")?.parse().ok()).expect("job id");
    // The step's slurmstepd ran our gpu_nvml.so.
    c.assert_stepd_ours_loaded(&["gpu_nvml"], &["--gres=gpu:1", "--gpu-freq=high"]);
    let log = c.log(Daemon::Slurmd);
    drop(c);
    Some(Ran {
        log,
        calls: std::fs::read_to_string(&calls).unwrap_or_default(),
        records: std::fs::read_to_string(state_dir.join("step-xids")).ok(),
        job,
        state_dir,
    })
}

per_release! {
    fn a_fault_during_a_step_names_the_job(bed) {
        let Some(r) = run(bed, "a_fault_during_a_step_names_the_job", "on") else { return };
        let want = format!("gres-rs: job {} step 0: gpu 1 GPU-1c1d2e3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5 0000:2a:00.0: xid 79 (fallen off the bus)", r.job);
        let lines: Vec<&str> = r.log.lines().filter(|l| l.contains("xid 79")).collect();
        assert_eq!(lines.len(), 1, "one line for the XID:\n{}", r.log);
        assert!(lines[0].contains(&want) && lines[0].contains("error"), "{}\nwant: {want}", lines[0]);
        assert!(r.calls.lines().any(|l| l == "nvmlEventSetCreate"), "{}", r.calls);
        assert!(r.calls.lines().any(|l| l == "nvmlEventSetWait_v2 0"), "collected without waiting: {}", r.calls);

        let records = r.records.expect("the records' file");
        let lines: Vec<&str> = records.lines().collect();
        assert_eq!(lines.len(), 1, "{records}");
        assert!(lines[0].contains(&format!(" job={} step=0 ", r.job)) && lines[0].ends_with(" gpu=1 uuid=GPU-1c1d2e3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5 pci=0000:2a:00.0 xid=79"), "{records}");
        let meta = std::fs::metadata(r.state_dir.join("step-xids")).expect("meta");
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);

        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gres-rs"))
            .args(["health", "--jobs", "--state-dir"])
            .arg(&r.state_dir)
            .output()
            .expect("gres-rs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        let row = text.lines().nth(1).unwrap_or_default();
        assert!(row.starts_with(&format!("{} ", r.job)) && row.contains("0000:2a:00.0") && row.ends_with("fallen off the bus"), "{text}");

        // The check's drain reason names the job the fault hit.
        let empty = r.state_dir.join("empty");
        std::fs::create_dir_all(&empty).expect("empty dir");
        let kmsg = empty.join("kmsg.txt");
        std::fs::write(&kmsg, "").expect("empty log");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gres-rs"))
            .args(["health", "--no-slurm", "--no-nvml", "--format", "json", "--state-dir"])
            .arg(&r.state_dir)
            .arg("--kmsg")
            .arg(&kmsg)
            .args(["--dev-dir", empty.to_str().expect("utf-8"), "--sys-dir", empty.to_str().expect("utf-8")])
            .output()
            .expect("gres-rs");
        let text = String::from_utf8_lossy(&out.stdout);
        let want = format!("gres-rs: gpu 1 GPU-1c1d2e3f 0000:2a:00.0 xid 79 (fallen off the bus) job {}.0 -> ", r.job);
        assert!(text.contains(&want), "{text}{}\nwant: {want}", String::from_utf8_lossy(&out.stderr));
    }

    fn step_xids_off_registers_nothing(bed) {
        let Some(r) = run(bed, "step_xids_off_registers_nothing", "off") else { return };
        assert!(!r.calls.lines().any(|l| l.starts_with("nvmlEventSet") || l.starts_with("nvmlDeviceRegisterEvents")), "{}", r.calls);
        // The clocks were set: the plugin ran the step's functions.
        assert!(r.calls.contains("ApplicationsClocks") || r.calls.contains("LockedClocks"), "{}", r.calls);
        assert!(r.records.is_none() && !r.state_dir.exists(), "nothing written");
        assert!(!r.log.contains("xid 79"), "{}", r.log);
    }
}
