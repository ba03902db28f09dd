//! The MPS Prolog/Epilog/TaskProlog examples (examples/mps) with the
//! stand-in `nvidia-cuda-mps-control`, which records what it is asked:
//! first run directly with the variables slurmd gives them (no Slurm
//! involved: one test), then as the Prolog, Epilog and TaskProlog of a real
//! slurmd running our plugins, on every release of the test bed
//! (`GRES_RS_SLURM`; in a chroot examples/mps is bound at its host path,
//! [`ClusterConfig::binds`]).

use gres_test_harness as harness;

use harness::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mps")
}

/// A private directory with an mps.conf pointing everything into it.
struct Site {
    dir: PathBuf,
}

impl Site {
    fn new(dir: PathBuf) -> Site {
        fs::create_dir_all(&dir).unwrap();
        let conf = format!(
            "MPS_CONTROL={}\nMPS_STATE_DIR={d}/state\nMPS_PIPE_BASE={d}/pipe\nMPS_LOG_BASE={d}/log\nMPS_QUIT_TIMEOUT=2\n",
            examples().join("standin/nvidia-cuda-mps-control").display(),
            d = dir.display()
        );
        fs::write(dir.join("mps.conf"), conf).unwrap();
        Site { dir }
    }

    fn temp(name: &str) -> Site {
        let dir = std::env::temp_dir().join(format!("gres-rs-mps-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        Site::new(dir)
    }

    /// Runs one of the scripts as slurmd would, with only `vars`.
    fn run(&self, script: &str, vars: &[(&str, &str)]) -> (bool, String) {
        let out = Command::new(examples().join(script))
            .env_clear()
            .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            .env("MPS_CONF", self.dir.join("mps.conf"))
            .env("MPS_STANDIN_DIR", self.dir.join("standin"))
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    }

    fn calls(&self) -> String {
        fs::read_to_string(self.dir.join("standin/calls.log")).unwrap_or_default()
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("state/mps.log")).unwrap_or_default()
    }

    fn stubborn(&self, on: bool) {
        let f = self.dir.join("standin/stubborn");
        if on {
            fs::create_dir_all(f.parent().unwrap()).unwrap();
            fs::write(f, "").unwrap();
        } else {
            let _ = fs::remove_file(f);
        }
    }

    fn pipe(&self, key: &str) -> String {
        format!("{}/pipe_{key}", self.dir.display())
    }

    /// PIDs of stand-in daemons still running for pipe directory `pipe`.
    fn daemons(&self, key: &str) -> Vec<u32> {
        let pid_file = Path::new(&self.pipe(key)).join("standin.pid");
        fs::read_to_string(pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .filter(|p: &u32| {
                // Running, not a zombie.
                let stat = fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z'))
            })
            .into_iter()
            .collect()
    }

    /// Stops whatever daemon is left (stubborn ones too).
    fn cleanup(&self) {
        self.stubborn(false);
        for e in fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let pid_file = e.path().join("standin.pid");
            if let Some(pid) = fs::read_to_string(&pid_file).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The stand-in's record of the calls for one pipe directory.
fn calls_for<'a>(calls: &'a str, pipe: &str) -> Vec<&'a str> {
    calls.lines().filter(|l| l.contains(&format!("CUDA_MPS_PIPE_DIRECTORY={pipe} ")) || l.contains(&format!("for {pipe}"))).collect()
}

#[test]
fn prolog_and_epilog_manage_mps_daemons() {
    let site = Site::temp("direct");
    let result = std::panic::catch_unwind(|| {
        let mps_job = |id: &str, uid: &str, gpu: &str| {
            vec![
                ("SLURM_JOB_ID", id.to_string()),
                ("SLURM_JOB_UID", uid.to_string()),
                ("CUDA_VISIBLE_DEVICES", gpu.to_string()),
                ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "15".to_string()),
            ]
        };
        let run = |script: &str, vars: &[(&str, String)]| {
            let v: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
            site.run(script, &v)
        };

        // Mode 1: an MPS job starts the daemon of its GPU, with that GPU's
        // pipe and log directories, node numbering and PCI order.
        let (ok, out) = run("mps-prolog.sh", &mps_job("11", "1000", "2"));
        assert!(ok, "{out}");
        let calls = site.calls();
        let gpu2 = calls_for(&calls, &site.pipe("gpu2"));
        assert!(gpu2[0].contains("args=[-d] CUDA_VISIBLE_DEVICES=2 CUDA_DEVICE_ORDER=PCI_BUS_ID"), "{calls}");
        assert!(gpu2[0].contains(&format!("CUDA_MPS_LOG_DIRECTORY={}/log_gpu2", site.dir.display())), "{calls}");
        assert!(calls.contains("command [start_server -uid 1000]"), "{calls}");
        assert_eq!(site.daemons("gpu2").len(), 1);
        // Its tasks are pointed at it.
        let (ok, out) = site.run("mps-task-prolog.sh", &[("SLURM_JOB_ID", "11"), ("SLURM_STEP_GPUS", "2")]);
        assert!(ok);
        assert_eq!(out, format!("export CUDA_MPS_PIPE_DIRECTORY={}\nexport CUDA_MPS_LOG_DIRECTORY={}/log_gpu2\n", site.pipe("gpu2"), site.dir.display()));

        // A second MPS job (another user) on the GPU reuses the daemon.
        let (ok, out) = run("mps-prolog.sh", &mps_job("12", "1001", "2"));
        assert!(ok, "{out}");
        let calls = site.calls();
        assert_eq!(calls.matches("args=[-d]").count(), 1, "{calls}");
        assert!(calls.contains("command [start_server -uid 1001]"), "{calls}");
        // The end of an MPS job leaves the daemon for the next ones.
        let (ok, _) = site.run("mps-epilog.sh", &[("SLURM_JOB_ID", "11")]);
        assert!(ok);
        assert_eq!(site.daemons("gpu2").len(), 1);

        // A job given the GPU whole stops it cleanly.
        let (ok, out) = site.run("mps-prolog.sh", &[("SLURM_JOB_ID", "13"), ("SLURM_JOB_UID", "1002"), ("CUDA_VISIBLE_DEVICES", "1,2")]);
        assert!(ok, "{out}");
        assert!(site.calls().contains(&format!("command [quit] for {}", site.pipe("gpu2"))));
        assert!(site.calls().contains(&format!("daemon down for {}", site.pipe("gpu2"))));
        assert!(site.daemons("gpu2").is_empty());
        assert!(site.log().contains("MPS control daemon gpu2 stopped"), "{}", site.log());
        // No daemon on GPU 1: nothing asked.
        assert!(calls_for(&site.calls(), &site.pipe("gpu1")).is_empty());

        // Mode 2: whole GPUs with mps-per-gpu / mps-per-node comments.
        let (ok, out) = site.run(
            "mps-prolog.sh",
            &[("SLURM_JOB_ID", "14"), ("SLURM_JOB_UID", "0"), ("CUDA_VISIBLE_DEVICES", "0,3"), ("SLURM_JOB_COMMENT", "please mps-per-gpu")],
        );
        assert!(ok, "{out}");
        for (key, dev) in [("job14.gpu0", "0"), ("job14.gpu3", "3")] {
            let c = site.calls();
            let mine = calls_for(&c, &site.pipe(key));
            assert!(mine.first().is_some_and(|l| l.contains(&format!("args=[-d] CUDA_VISIBLE_DEVICES={dev} "))), "{key}: {c}");
            assert_eq!(site.daemons(key).len(), 1, "{key}");
        }
        let (_, out) = site.run("mps-task-prolog.sh", &[("SLURM_JOB_ID", "14"), ("SLURM_STEP_GPUS", "3")]);
        assert!(out.starts_with(&format!("export CUDA_MPS_PIPE_DIRECTORY={}\n", site.pipe("job14.gpu3"))), "{out}");
        let (ok, out) = site
            .run("mps-prolog.sh", &[("SLURM_JOB_ID", "15"), ("SLURM_JOB_UID", "0"), ("CUDA_VISIBLE_DEVICES", "1,2"), ("SLURM_JOB_COMMENT", "mps-per-node")]);
        assert!(ok, "{out}");
        assert!(calls_for(&site.calls(), &site.pipe("job15"))[0].contains("args=[-d] CUDA_VISIBLE_DEVICES=1,2 "));
        let (_, out) = site.run("mps-task-prolog.sh", &[("SLURM_JOB_ID", "15"), ("SLURM_STEP_GPUS", "2")]);
        assert!(out.starts_with(&format!("export CUDA_MPS_PIPE_DIRECTORY={}\n", site.pipe("job15"))), "{out}");
        // Their Epilogs stop them.
        for (job, keys) in [("14", vec!["job14.gpu0", "job14.gpu3"]), ("15", vec!["job15"])] {
            let (ok, out) = site.run("mps-epilog.sh", &[("SLURM_JOB_ID", job)]);
            assert!(ok, "{out}");
            for k in keys {
                assert!(site.daemons(k).is_empty(), "{k}");
            }
        }
        // A whole-GPU job without such a comment starts nothing.
        let before = site.calls().matches("args=[-d]").count();
        let (ok, _) = site.run("mps-prolog.sh", &[("SLURM_JOB_ID", "16"), ("SLURM_JOB_UID", "0"), ("CUDA_VISIBLE_DEVICES", "0")]);
        assert!(ok);
        assert_eq!(site.calls().matches("args=[-d]").count(), before);

        // A daemon that will not quit: logged, and the Prolog fails (slurmd
        // then drains the node), unless MPS_ON_REFUSAL=continue.
        let (ok, _) = run("mps-prolog.sh", &mps_job("17", "1000", "1"));
        assert!(ok);
        site.stubborn(true);
        let whole = [("SLURM_JOB_ID", "18"), ("SLURM_JOB_UID", "0"), ("CUDA_VISIBLE_DEVICES", "1")];
        let t = Instant::now();
        let (ok, _) = site.run("mps-prolog.sh", &whole);
        assert!(!ok, "the Prolog must fail while a daemon holds the GPU");
        assert!(t.elapsed() >= Duration::from_secs(2), "it waits MPS_QUIT_TIMEOUT");
        assert!(site.log().contains("MPS control daemon gpu1 refuses to quit (pids "), "{}", site.log());
        assert!(site.calls().contains(&format!("daemon for {} ignores quit", site.pipe("gpu1"))));
        fs::write(site.dir.join("mps.conf"), fs::read_to_string(site.dir.join("mps.conf")).unwrap() + "MPS_ON_REFUSAL=continue\n").unwrap();
        let (ok, _) = site.run("mps-prolog.sh", &whole);
        assert!(ok);
        assert!(site.log().contains("continuing although an MPS daemon would not quit"));
        site.stubborn(false);
        let (ok, _) = site.run("mps-prolog.sh", &whole);
        assert!(ok);
        assert!(site.daemons("gpu1").is_empty());
    });
    site.cleanup();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

per_release! {
    /// The scripts as Prolog, Epilog and TaskProlog of a real slurmd with our
    /// plugins: they get what they need from the plugins' Prolog/Epilog
    /// variables (CUDA_VISIBLE_DEVICES in node numbering, the percentage), and
    /// the tasks find their daemon.
    fn mps_scripts_under_slurmd(bed) {
        let wrapper = |script: &str| {
            format!("#!/bin/sh\nexport MPS_CONF={{DIR}}/site/mps.conf MPS_STANDIN_DIR={{DIR}}/site/standin\nexec {} \"$@\"\n", examples().join(script).display())
        };
        let config = ClusterConfig::gpus(PluginSet::Ours, 2).with_gres("gpu:2,mps:200", &gpu_gres_line(2)).with_binds([examples()]);
        let Some(mut config) = bed.ours_config(config, "mps_scripts_under_slurmd") else { return };
        config.gres_types = "gpu,mps".into();
        config.prolog = Some(wrapper("mps-prolog.sh"));
        config.epilog = Some(wrapper("mps-epilog.sh"));
        config.extra_slurm_conf.push("TaskProlog={DIR}/task-prolog.sh".into());
        let c = Cluster::start(config);
        let site = Site::new(c.layout.root.join("site"));
        let task_prolog = c.layout.subst(&wrapper("mps-task-prolog.sh"), "gpunode");
        fs::write(c.layout.root.join("task-prolog.sh"), task_prolog).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(c.layout.root.join("task-prolog.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        }
        let env_of =
            |out: &str| -> BTreeMap<String, String> { out.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect() };

        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // An MPS job: daemon for GPU 0, task pointed at it.
            let out = c.srun(&["--gres=mps:50", "env"]).expect_ok("srun --gres=mps:50");
            let env = env_of(&out.stdout);
            assert_eq!(env.get("CUDA_MPS_PIPE_DIRECTORY"), Some(&site.pipe("gpu0")), "{out}");
            assert_eq!(env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE").map(String::as_str), Some("50"));
            let calls = site.calls();
            assert!(calls_for(&calls, &site.pipe("gpu0"))[0].contains("args=[-d] CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID"), "{calls}");
            assert!(calls.contains("command [start_server -uid 0]"), "{calls}");
            assert_eq!(site.daemons("gpu0").len(), 1);

            // The GPU whole to the next job: the daemon goes first.
            c.srun(&["--gres=gpu:1", "true"]).expect_ok("srun --gres=gpu:1");
            assert!(site.daemons("gpu0").is_empty(), "{}\n{}", site.log(), site.calls());
            assert!(site.calls().contains(&format!("daemon down for {}", site.pipe("gpu0"))));

            // Whole GPUs with a comment: per-GPU daemons for the job, stopped by
            // the Epilog.
            let out = c.srun(&["--gres=gpu:2", "--comment=mps-per-gpu", "env"]).expect_ok("srun --comment=mps-per-gpu");
            let job = env_of(&out.stdout).get("SLURM_JOB_ID").cloned().unwrap();
            assert_eq!(env_of(&out.stdout).get("CUDA_MPS_PIPE_DIRECTORY"), Some(&site.pipe(&format!("job{job}.gpu0"))), "{out}");
            c.wait_no_jobs(Duration::from_secs(30));
            let calls = site.calls();
            for g in ["0", "1"] {
                let key = format!("job{job}.gpu{g}");
                assert!(calls_for(&calls, &site.pipe(&key))[0].contains(&format!("args=[-d] CUDA_VISIBLE_DEVICES={g} ")), "{calls}");
                assert!(calls.contains(&format!("daemon down for {}", site.pipe(&key))), "{calls}");
            }

            // A daemon that will not quit: the Prolog fails, slurmd drains the
            // node, and the refusal is in the log.
            c.srun(&["--gres=mps:10", "true"]).expect_ok("srun --gres=mps:10");
            site.stubborn(true);
            let out = c.srun(&["--immediate=30", "--gres=gpu:1", "true"]);
            assert!(!out.ok(), "{out}");
            assert!(site.log().contains("MPS control daemon gpu0 refuses to quit"), "{}", site.log());
            let deadline = Instant::now() + Duration::from_secs(20);
            while !c.node_field("State").unwrap_or_default().contains("DRAIN") {
                assert!(Instant::now() < deadline, "node not drained: {:?}", c.node_field("State"));
                std::thread::sleep(Duration::from_millis(200));
            }
        }));
        site.cleanup();
        drop(c);
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }
}
