//! Faults of the NVML library and of the GPUs under a real slurmd with our
//! plugins, on every release of the test bed (`GRES_RS_SLURM`; our test
//! build for each, [`testbed::TestBed::our_test_build`]) (`AutoDetect=nvml`,
//! the NVML stand-in of tests/nvml-standin as `libnvidia-ml.so` on slurmd's
//! `LD_LIBRARY_PATH`, in a chroot bound at its host path with the device
//! directory, [`standin::chroot_binds`]): the library missing,
//! `nvmlInit` failing, a GPU falling off the bus while jobs run, MIG
//! queries failing, a slow driver.
//!
//! In every case slurmd keeps running; where the hardware no longer
//! matches slurm.conf the node is drained with a `gres/gpu` reason; and no
//! job is given a GPU that is not there.
//!
//! Needs root, the Debian Slurm packages, `cc` and `cargo build
//! --workspace` (see crates/test-harness); skipped otherwise.

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const H100: &str = "nvidia_h100_80gb_hbm3";

/// A fixture written to this test process's scratch dir (tests change it
/// while slurmd runs), one per release (the releases' tests run at once).
fn fixture_file(bed: &testbed::TestBed, name: &str, text: &str) -> PathBuf {
    let p = standin::scratch_dir().join(format!("{}-{name}", bed.series));
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    p
}

fn fixture_text(name: &str) -> String {
    let p = standin::fixture(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The device files NVML names (`nvidia0..3`), made in a directory of the
/// test and given to our plugins (the test build) as `GRES_RS_DEV_DIR`, so that slurmd
/// accepts the GPUs NVML reports and jobs get their GPU variables.
fn dev_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = standin::scratch_dir().join("faults-dev");
        std::fs::create_dir_all(&dir).expect("dev dir");
        for m in 0..4u32 {
            let p = dir.join(format!("nvidia{m}"));
            let _ = std::fs::remove_file(&p);
            let ok = std::process::Command::new(tool("mknod")).arg(&p).args(["c", "195", &m.to_string()]).status().is_ok_and(|s| s.success());
            assert!(ok, "mknod {}", p.display());
        }
        dir
    })
    .clone()
}

/// Our plugins (the release's test build) with `AutoDetect=nvml` on the
/// stand-in with `fixture`: 2 CPUs, `Gres=<gres>`, gres.conf `gres_conf`.
/// One core per socket, so that a GPU's affinity of one CPU (the
/// fixtures') is a whole socket: from 24.11 slurmctld drains a node whose
/// GPU cores are part of a socket (src/interfaces/gres.c
/// `_check_core_range_matches_sock`, not in 24.05).  `None`: no build of
/// ours for the release (skipped, printed).
fn nvml_cluster(bed: &testbed::TestBed, test: &str, fixture: &std::path::Path, gres: &str, gres_conf: &str) -> Option<ClusterConfig> {
    // The test build: it reads GRES_RS_MIG_MINORS and GRES_RS_DEV_DIR.
    let c = ClusterConfig::gpus(PluginSet::Ours, 0).with_cpus(2, 1, 1).with_gres(gres, gres_conf).with_test_build().with_binds(standin::chroot_binds());
    let mut c = bed.ours_config(c, test)?;
    c.fake_gpus = 2;
    c.slurmd_env = vec![
        ("LD_LIBRARY_PATH".into(), standin::library_dir().to_string_lossy().into_owned()),
        ("GRES_RS_NVML_FIXTURE".into(), fixture.to_string_lossy().into_owned()),
        ("GRES_RS_MIG_MINORS".into(), standin::fixture("mig-minors").to_string_lossy().into_owned()),
        ("GRES_RS_DEV_DIR".into(), dev_dir().to_string_lossy().into_owned()),
    ];
    Some(c)
}

/// `scontrol show node` State and Reason.
fn state_reason(c: &Cluster) -> (String, String) {
    let out = c.scontrol(&["show", "node", &c.config.node_name]);
    let text = out.stdout;
    let state = field(&text, "State").unwrap_or_default();
    // Reason= runs to the end of its line (it may contain blanks).
    let reason = text.lines().find_map(|l| l.trim_start().strip_prefix("Reason=")).unwrap_or("").to_string();
    (state, reason)
}

/// Waits until the node's state satisfies `pred`; returns (State, Reason).
#[track_caller]
fn wait_state(c: &Cluster, what: &str, pred: impl Fn(&str) -> bool) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, r) = state_reason(c);
        if pred(&s) {
            return (s, r);
        }
        if Instant::now() > deadline {
            panic!("node never became {what}; last State={s} Reason={r}\n{}", c.log_tails(40));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[track_caller]
fn assert_drained_for_gres(c: &Cluster, detected: usize, configured: usize) -> String {
    let (state, reason) = wait_state(c, "drained", |s| s.contains("DRAIN"));
    let want = format!("gres/gpu count reported lower than configured ({detected} < {configured})");
    assert!(reason.starts_with(&want), "State={state} Reason={reason:?}, want {want:?}\n{}", c.log_tails(40));
    reason
}

#[track_caller]
fn assert_slurmd_alive(c: &Cluster, pid: u32) {
    assert_eq!(c.pid(Daemon::Slurmd), Some(pid), "slurmd died or was replaced\n{}", c.log_tails(40));
    let log = c.log(Daemon::Slurmd);
    assert!(!log.contains("internal error (panic)"), "a panic in our plugins:\n{}", c.log_tails(60));
    assert!(!log.contains("fatal:"), "slurmd logged a fatal error:\n{}", c.log_tails(60));
}

/// A job on a drained node must not start: `srun --immediate` fails.
#[track_caller]
fn assert_no_job_starts(c: &Cluster, gres: &str) {
    let out = c.srun_timeout(&["--immediate=3", &format!("--gres={gres}"), "printenv", "CUDA_VISIBLE_DEVICES"], Duration::from_secs(30));
    assert!(!out.ok(), "a job started on a node whose GPUs are not all there:\n{out}");
}

/// The GPU indexes slurmctld gave a job on the node (`scontrol -d show
/// job`: `GRES=gpu:<type>:1(IDX:0)`).
fn job_gpu_idx(c: &Cluster, id: u32) -> String {
    let out = c.scontrol(&["-d", "show", "job", &id.to_string()]);
    out.stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("GRES=").and_then(|g| g.split("(IDX:").nth(1)).map(|i| i.trim_end_matches(')').to_string()))
        .unwrap_or_else(|| panic!("no GRES IDX for job {id}:\n{out}"))
}

/// `GRES_RS_NVML_CALLS` lines of a function, e.g. the GPUs whose clocks
/// were set.
fn calls_of(log: &std::path::Path, function: &str) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.split_whitespace().next() == Some(function)).map(str::to_string).collect()
}

/// The NVML call that sets a GPU's graphics clock for `--gpu-freq` on this
/// release: locked clocks on 26.05 (`Behaviour::gpu_locked_clocks`),
/// application clocks before.
fn graphics_clock_call(bed: &testbed::TestBed) -> &'static str {
    if bed.ours_behaviour().gpu_locked_clocks {
        "nvmlDeviceSetGpuLockedClocks"
    } else {
        "nvmlDeviceSetApplicationsClocks"
    }
}

fn env_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
}

per_release! {
    /// No libnvidia-ml.so anywhere: slurmd falls back to gpu/generic, our
    /// gres/gpu's own NVML attempt fails quietly, and gres.conf decides, as
    /// with the stock plugins.  Without `File=` lines the node is drained with
    /// the same reason as with the stock plugins.
    fn nvml_library_missing(bed) {
        // gres.conf names the GPUs: usable.
        // The test build: it reads GRES_RS_NVML_LIB.
        let cfg = ClusterConfig::gpus(PluginSet::Ours, 2).with_cpus(1, 2, 1).with_test_build();
        let Some(mut cfg) = bed.ours_config(cfg, "nvml_library_missing") else { return };
        cfg.gres_conf = format!("AutoDetect=nvml\n{}", gpu_gres_line(2));
        cfg.slurmd_env = vec![("GRES_RS_NVML_LIB".into(), "/nonexistent/libnvidia-ml.so.1".into())];
        let c = Cluster::start(cfg.clone());
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");
        let out = c.srun(&["--gres=gpu:2", "env"]).expect_ok("srun --gres=gpu:2");
        assert_eq!(env_value(&out.stdout, "CUDA_VISIBLE_DEVICES").as_deref(), Some("0,1"), "{out}");
        assert_slurmd_alive(&c, pid);
        drop(c);

        // Only AutoDetect: nothing detected, drained like stock.
        let mut reasons = Vec::new();
        for set in [PluginSet::Stock, PluginSet::Ours] {
            let mut cfg = cfg.clone().with_plugins(set.clone());
            cfg.gres_conf = "AutoDetect=nvml\n".into();
            cfg.wait_idle = false;
            // slurmctld loads gres/gpu only for a node that reports GPUs.
            cfg.verify_ours_loaded = false;
            let c = Cluster::start(cfg);
            if set == PluginSet::Ours {
                c.assert_ours_loaded(&["gres_gpu"]);
            }
            let pid = c.pid(Daemon::Slurmd).expect("slurmd");
            reasons.push(assert_drained_for_gres(&c, 0, 2));
            assert_no_job_starts(&c, "gpu:1");
            assert_slurmd_alive(&c, pid);
            eprintln!("{}: Reason={}", set.label(), reasons.last().unwrap());
        }
        assert_eq!(reasons[0].split(" [").next(), reasons[1].split(" [").next(), "stock and ours drain the node differently");
    }

    /// nvmlInit fails (the stand-in's `init_error`): slurmd selects gpu/nvml
    /// (ours), logs NVML's error, detects nothing; gres.conf's GPUs are used,
    /// and a node that relies on detection alone is drained.
    fn nvml_init_failing(bed) {
        let fixture = fixture_file(bed, "init-failing.conf", "init_error 999\n");
        let Some(mut cfg) = nvml_cluster(bed, "nvml_init_failing", &fixture, "gpu:2", &format!("AutoDetect=nvml\n{}", gpu_gres_line(2))) else { return };
        let c = Cluster::start(cfg.clone());
        c.assert_ours_loaded(&["gres_gpu"]);
        c.assert_ours_gpu_plugin_loaded("gpu_nvml");
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");
        let out = c.srun(&["--gres=gpu:2", "env"]).expect_ok("srun --gres=gpu:2");
        assert_eq!(env_value(&out.stdout, "CUDA_VISIBLE_DEVICES").as_deref(), Some("0,1"), "{out}");
        assert!(c.log(Daemon::Slurmd).contains("Failed to initialize NVML: Unknown Error"), "{}", c.log_tails(40));
        assert_slurmd_alive(&c, pid);
        drop(c);

        cfg.gres_conf = "AutoDetect=nvml\n".into();
        cfg.wait_idle = false;
        cfg.verify_ours_loaded = false;
        let c = Cluster::start(cfg);
        c.assert_ours_loaded(&["gres_gpu"]);
        c.assert_ours_gpu_plugin_loaded("gpu_nvml");
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");
        assert_drained_for_gres(&c, 0, 2);
        assert_no_job_starts(&c, "gpu:1");
        assert_slurmd_alive(&c, pid);
    }

    /// GPU 1 falls off the bus (its handle query fails with GPU_IS_LOST)
    /// while a job runs on GPU 0.  At the next detection (`scontrol
    /// reconfigure`) the node is drained; the running job goes on with its
    /// GPU (slurmctld's `IDX` and its steps' `CUDA_VISIBLE_DEVICES`), its new
    /// step with `--gpu-freq` (which asks NVML again) sets the clocks of GPU 0
    /// only, and no new job starts.  Where slurmd launches no step after a
    /// refused registration (`StockQuirks::refused_registration_blocks_steps`,
    /// 24.11 and 26.05, stock gres/gpu alike) the job runs no new step: its
    /// batch step keeps GPU 0 and no clocks are set.
    fn gpu_lost_while_jobs_run(bed) {
        let healthy = fixture_text("h100x2.conf");
        let fixture = fixture_file(bed, "gpu-lost.conf", &healthy);
        let calls = standin::scratch_dir().join(format!("{}-gpu-lost-calls.log", bed.series));
        let _ = std::fs::remove_file(&calls);
        let Some(mut cfg) = nvml_cluster(bed, "gpu_lost_while_jobs_run", &fixture, &format!("gpu:{H100}:2"), "AutoDetect=nvml\n") else { return };
        cfg.slurmd_env.push(("GRES_RS_NVML_CALLS".into(), calls.to_string_lossy().into_owned()));
        let c = Cluster::start(cfg);
        c.assert_ours_loaded(&["gres_gpu"]);
        c.assert_ours_gpu_plugin_loaded("gpu_nvml");
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");

        let flag = c.layout.jobs.join("gpu-lost.flag");
        let step_flag = c.layout.jobs.join("gpu-lost.step");
        let steps = !bed.behaviour.refused_registration_blocks_steps;
        let script = format!(
            "#!/bin/bash\necho \"BEFORE=$CUDA_VISIBLE_DEVICES\"\nwhile [ ! -e {flag} ]; do sleep 0.2; done\n\
             if [ -e {step} ]; then\n\
             srun --gres=gpu:1 --gpu-freq=low sh -c 'echo \"AFTER=$CUDA_VISIBLE_DEVICES STEP=$SLURM_STEP_GPUS\"'\n\
             else echo \"AFTER=$CUDA_VISIBLE_DEVICES STEP=none\"; fi\n",
            flag = flag.display(),
            step = step_flag.display()
        );
        let (out, id) = c.sbatch_submit(&["--gres=gpu:1"], &script);
        let id = id.unwrap_or_else(|| panic!("sbatch failed:\n{out}"));
        wait_state(&c, "allocated", |s| s.starts_with("MIXED") || s.starts_with("ALLOCATED"));
        let idx = job_gpu_idx(&c, id);
        assert_eq!(idx, "0", "the first job gets the first GPU");

        // GPU 1 is the last section of the fixture: it is lost.
        std::fs::write(&fixture, format!("{healthy}fail nvmlDeviceGetHandleByIndex_v2 15\n")).expect("rewrite fixture");
        let _ = std::fs::remove_file(&calls);
        c.scontrol(&["reconfigure"]).expect_ok("scontrol reconfigure");
        let reason = assert_drained_for_gres(&c, 1, 2);
        eprintln!("drained: {reason}");
        assert_no_job_starts(&c, "gpu:1");
        assert_slurmd_alive(&c, pid);
        assert_eq!(job_gpu_idx(&c, id), idx, "the running job's GPUs changed");
        assert!(c.log(Daemon::Slurmd).contains("GPU is lost"), "detection did not report the lost GPU:\n{}", c.log_tails(40));

        if steps {
            std::fs::write(&step_flag, "").expect("step flag");
        }
        std::fs::write(&flag, "").expect("flag");
        let job = c.wait_job(id, Duration::from_secs(120));
        assert!(job.ok(), "the running job failed after its node lost a GPU:\n{job:?}\n{}", c.log_tails(40));
        let after = if steps { "AFTER=0 STEP=0\n" } else { "AFTER=0 STEP=none\n" };
        assert!(job.output.contains("BEFORE=0\n") && job.output.contains(after), "the job's GPU changed (want {after:?}):\n{}", job.output);
        let set = calls_of(&calls, graphics_clock_call(bed));
        if steps {
            assert!(!set.is_empty() && set.iter().all(|l| l.split_whitespace().nth(1) == Some("gpu0")), "clocks must be set on GPU 0 only: {set:?}");
        } else {
            assert!(set.is_empty(), "no step ran, yet clocks were set: {set:?}");
        }
        assert_slurmd_alive(&c, pid);
        let _ = std::fs::remove_file(&calls);
    }

    /// MIG queries failing on the A100 of the stand-in's slurmd node (2 H100 +
    /// an A100 with two MIG devices): MIG device handles fail (the stock
    /// plugin stops slurmd with fatal() here before 24.11; ours logs it and
    /// goes on), MIG attributes fail, the MIG name and attributes both fail,
    /// the MIG mode query fails.  `slurmd -G` still prints the GPUs it could
    /// read (and only those); a node whose slurm.conf counts the MIG devices
    /// is drained.  From 23.02 gpu/nvml reads a MIG device's type from its
    /// NVML name and asks for its attributes only when there is no name
    /// (`Behaviour::mig_type_from_nvml_name`, stock's `_handle_mig`): failing
    /// attributes alone then cost nothing.
    fn mig_queries_failing(bed) {
        let base = fixture_text("slurmd_node.conf");
        let gres = format!("gpu:{H100}:2,gpu:nvidia_a100_1g.10gb:2");
        let named = bed.ours_behaviour().mig_type_from_nvml_name;
        // (case, fixture, GPUs slurmd -G prints, whether they include the MIG devices)
        let cases = [
            ("mig-handles", base.replace("mig_max 7\n", "mig_max 7\nfail nvmlDeviceGetMigDeviceHandleByIndex 999\n"), 2, false),
            ("mig-attributes", base.replace("slices 1\n", "slices 1\nfail nvmlDeviceGetAttributes_v2 999\n"), if named { 4 } else { 2 }, named),
            (
                "mig-attributes-unnamed",
                base.replace("slices 1\n", "slices 1\nfail nvmlDeviceGetAttributes_v2 999\nfail nvmlDeviceGetName 999\n"),
                2,
                false,
            ),
            // The A100 then reads as one whole GPU, whose type slurm.conf does
            // not list: ignored, as the stock merge does.
            ("mig-mode", base.replace("mig_max 7\n", "mig_max 7\nfail nvmlDeviceGetMigMode 999\n"), 2, false),
        ];
        for (name, text, gpus, migs) in &cases {
            assert_ne!(text, &base, "{name}: fixture not changed");
            let fixture = fixture_file(bed, &format!("{name}.conf"), text);
            let Some(cfg) = nvml_cluster(bed, "mig_queries_failing", &fixture, &gres, "AutoDetect=nvml\n") else { return };
            let g = Cluster::slurmd_g(&cfg);
            g.assert_ours_loaded(&["gres_gpu", "gpu_nvml"]);
            assert!(g.output.ok() && g.output.signal.is_none(), "{name}: slurmd -G failed:\n{}", g.output);
            let lines = g.gres_lines();
            assert_eq!(lines.iter().filter(|l| l.contains("Name=gpu")).count(), *gpus, "{name}:\n{}", g.normalized());
            assert!(!g.normalized().contains("panic"), "{name}:\n{}", g.normalized());
            // Only GPUs that are there: the H100s, the MIG devices where they
            // could be read, and the A100 as a whole when its MIG mode cannot
            // be read.
            let mig_lines = lines.iter().filter(|l| l.contains("nvidia-cap")).count();
            if *migs {
                assert_eq!(mig_lines, 2, "{name}: the MIG devices were readable:\n{}", g.normalized());
            } else {
                assert_eq!(mig_lines, 0, "{name}: a MIG device that could not be read was configured:\n{}", g.normalized());
            }
        }
        // The stock-fatal case on a running slurmd.
        let fixture = fixture_file(bed, "mig-handles.conf", &cases[0].1);
        let Some(mut cfg) = nvml_cluster(bed, "mig_queries_failing", &fixture, &gres, "AutoDetect=nvml\n") else { return };
        cfg.wait_idle = false;
        let c = Cluster::start(cfg);
        c.assert_ours_loaded(&["gres_gpu"]);
        c.assert_ours_gpu_plugin_loaded("gpu_nvml");
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");
        assert_drained_for_gres(&c, 2, 4);
        assert!(c.log(Daemon::Slurmd).contains("MIG mode is enabled, but no MIG devices were found"), "{}", c.log_tails(40));
        assert_no_job_starts(&c, "gpu:1");
        assert_slurmd_alive(&c, pid);
    }

    /// A slow driver (the stand-in sleeps in nvmlInit and in every call):
    /// slurmd waits for detection, registers the node with its GPUs, and
    /// steps that ask NVML (`--gpu-freq`) still run, on the right GPUs.
    fn nvml_slow_answers(bed) {
        let fixture = fixture_file(bed, "slow.conf", &format!("init_delay_ms 1500\ndelay_us 10000\n{}", fixture_text("h100x2.conf")));
        let calls = standin::scratch_dir().join(format!("{}-slow-calls.log", bed.series));
        let _ = std::fs::remove_file(&calls);
        let Some(mut cfg) = nvml_cluster(bed, "nvml_slow_answers", &fixture, &format!("gpu:{H100}:2"), "AutoDetect=nvml\n") else { return };
        cfg.slurmd_env.push(("GRES_RS_NVML_CALLS".into(), calls.to_string_lossy().into_owned()));
        cfg.start_timeout = Duration::from_secs(120);
        let c = Cluster::start(cfg);
        c.assert_ours_loaded(&["gres_gpu"]);
        c.assert_ours_gpu_plugin_loaded("gpu_nvml");
        let pid = c.pid(Daemon::Slurmd).expect("slurmd");
        assert!(c.node_field("Gres").unwrap_or_default().contains(&format!("gpu:{H100}:2")), "{:?}", c.node_field("Gres"));
        let _ = std::fs::remove_file(&calls);
        let out = c
            .srun_timeout(&["--gres=gpu:1", "--gpu-freq=high", "printenv", "CUDA_VISIBLE_DEVICES"], Duration::from_secs(120))
            .expect_ok("srun --gpu-freq on a slow driver");
        assert_eq!(out.stdout.trim(), "0", "{out}");
        let set_call = graphics_clock_call(bed);
        let set = calls_of(&calls, set_call);
        assert_eq!(set.len(), 1, "one GPU's clocks set: {set:?}");
        assert!(set[0].starts_with(&format!("{set_call} gpu0 ")), "{set:?}");
        let out = c
            .srun_timeout(&["--gres=gpu:2", "--gpu-freq=low", "printenv", "CUDA_VISIBLE_DEVICES"], Duration::from_secs(120))
            .expect_ok("srun --gres=gpu:2 --gpu-freq");
        assert_eq!(out.stdout.trim(), "0,1", "{out}");
        let set = calls_of(&calls, set_call);
        assert_eq!(set.len(), 3, "then both GPUs' clocks: {set:?}\n{out}");
        assert_slurmd_alive(&c, pid);
        let _ = std::fs::remove_file(&calls);
    }
}
