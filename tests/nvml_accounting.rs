//! GPU accounting as a user sees it: `sstat` during a step shows the
//! `gres/gpumem` and `gres/gpuutil` usage that gpu/nvml's `usage_read`
//! gives slurmstepd's jobacct_gather, stock gpu/nvml beside ours, on every
//! release of the test bed that has `usage_read` (23.02 on).  The NVML
//! stand-in reports the step's task (its PID, which the task writes to a
//! file the fixture names) as using memory and SMs on both GPUs of the
//! node, and an unrelated process on one of them.  The stock side is the
//! release's own gpu_nvml.so ([`TestBed::stock_gpu_nvml`]) under stock
//! gres/gpu; ours is all of ours, proven loaded in slurmd and in the step's
//! slurmstepd; sacct reads the step's record from a real slurmdbd over
//! MariaDB.
//!
//! The same run has `AcctGatherEnergyType=acct_gather_energy/gpu`: stock gpu/nvml's `energy_read` is empty, so
//! the step's `ConsumedEnergyRaw` is 0 with stock; ours reads the GPUs'
//! power (docs/deviations.md, NVML 3), so it is not.
//!
//! Needs root, the test bed and `cc` (see crates/test-harness).

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;
use std::time::Duration;

const MIB: u64 = 1024 * 1024;

/// Two H100 (CPU 0 and CPU 1); the step's task (PID from PIDFILE) uses
/// 1024 MiB and 30% of the SMs of GPU 0, 512 MiB and 20% of GPU 1;
/// another process 4096 MiB and 90% of GPU 1.
fn fixture(pidfile: &str) -> String {
    let base = std::fs::read_to_string(standin::fixture("h100x2.conf")).expect("fixture");
    let mut out = String::new();
    let mut gpu = 0;
    for line in base.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("uuid GPU-") {
            if gpu == 0 {
                out.push_str(&format!("proc compute pidfile:{pidfile} 1024\nutil pidfile:{pidfile} 30 4\n"));
            } else {
                out.push_str(&format!("proc compute 999999 4096\nutil 999999 90 40\nproc compute pidfile:{pidfile} 512\nutil pidfile:{pidfile} 20 2\n"));
            }
            gpu += 1;
        }
    }
    out
}

/// `gres/gpumem` and `gres/gpuutil` of an sstat TRES field
/// (`cpu=...,gres/gpumem=1610612736,gres/gpuutil=50,mem=...`).
fn gpu_tres(field: &str) -> (Option<u64>, Option<u64>) {
    let get = |name: &str| field.split(',').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok());
    (get("gres/gpumem"), get("gres/gpuutil"))
}

/// The GPU values a user sees of the step: sstat's TRESUsageInMax and
/// TRESUsageInTot during it, sacct's TRESUsageInMax and TRESUsageInAve
/// after it; the job's output and the cluster's logs for messages.
struct Seen {
    sstat_max: (Option<u64>, Option<u64>),
    sstat_tot: (Option<u64>, Option<u64>),
    sacct_max: (Option<u64>, Option<u64>),
    sacct_ave: (Option<u64>, Option<u64>),
    /// sacct's `ConsumedEnergyRaw` of the step, in joules.
    energy: Option<u64>,
    show: String,
}

fn run(bed: &testbed::TestBed, plugins: PluginSet, stock_nvml: &std::path::Path) -> Option<Seen> {
    let tag = format!("{}-{}", bed.series, if plugins == PluginSet::Stock { "stock" } else { "ours" });
    let pidfile = standin::scratch_dir().join(format!("acct-{tag}.pid"));
    let _ = std::fs::remove_file(&pidfile);
    let fixture_path = standin::scratch_dir().join(format!("acct-{tag}.conf"));
    std::fs::write(&fixture_path, fixture(&pidfile.to_string_lossy())).expect("write fixture");
    // One core per socket, each GPU's affinity a whole socket (24.11+
    // drains a node whose GPU cores split a socket).
    let mut cfg = ClusterConfig::gpus(plugins.clone(), 0).with_cpus(2, 1, 1).with_gres("gpu:nvidia_h100_80gb_hbm3:2", "AutoDetect=nvml\n");
    cfg.accounting = true;
    cfg.extra_slurm_conf = vec![
        "JobAcctGatherType=jobacct_gather/linux".into(),
        "JobAcctGatherFrequency=task=1,energy=1".into(),
        "AccountingStorageTRES=gres/gpumem,gres/gpuutil".into(),
        "AcctGatherEnergyType=acct_gather_energy/gpu".into(),
        "AcctGatherNodeFreq=1".into(),
    ];
    cfg.slurmd_env = vec![
        ("LD_LIBRARY_PATH".into(), standin::library_dir().to_string_lossy().into_owned()),
        ("GRES_RS_NVML_FIXTURE".into(), fixture_path.to_string_lossy().into_owned()),
    ];
    let cfg = bed.on(cfg.with_binds(standin::chroot_binds()));
    let cfg = if plugins == PluginSet::Stock {
        ClusterConfig { extra_stock_plugins: vec![stock_nvml.to_path_buf()], ..cfg }
    } else {
        bed.ours_config(cfg, "usage_shows_in_sstat_and_sacct_as_with_stock")?
    };
    let cluster = Cluster::start(cfg);
    if plugins == PluginSet::Stock {
        // Stock gpu/nvml detected the GPUs (not gpu/generic).
        let log = cluster.log(Daemon::Slurmd);
        assert!(log.contains("2 GPU system device(s) detected"), "stock gpu/nvml did not detect:\n{}", cluster.log_tails(40));
    } else {
        cluster.assert_ours_loaded(&["gres_gpu"]);
        cluster.assert_ours_gpu_plugin_loaded("gpu_nvml");
    }
    // The step's task writes its PID (which the stand-in then reports on
    // the GPUs) and runs until the batch script has read sstat: seconds
    // after the task started, so that jobacct_gather (every second) has
    // polled it, however long the step took to start.
    let done = standin::scratch_dir().join(format!("acct-{tag}.done"));
    let _ = std::fs::remove_file(&done);
    let script = format!(
        "#!/bin/sh\n\
         srun --gres=gpu:2 sh -c 'echo $$ > {pid}; i=0; while [ ! -e {done} ] && [ $i -lt 120 ]; do sleep 0.5; i=$((i+1)); done' &\n\
         i=0; while [ ! -s {pid} ] && [ $i -lt 60 ]; do sleep 0.5; i=$((i+1)); done\n\
         sleep 3\n\
         sstat -a -n -P --noconvert -j $SLURM_JOB_ID.0 -o TRESUsageInMax,TRESUsageInTot\n\
         touch {done}\n\
         wait\n",
        pid = pidfile.display(),
        done = done.display()
    );
    let job = cluster.sbatch_timeout(&["--gres=gpu:2", "-n1"], &script, Duration::from_secs(120));
    assert_eq!(job.state, "COMPLETED", "{}\n{}\n{}", job.info, job.output, cluster.log_tails(60));
    let line = job.output.lines().find(|l| l.contains("gres/gpu")).unwrap_or_default().to_string();
    let mut fields = line.split('|');
    let sstat_max = gpu_tres(fields.next().unwrap_or_default());
    let sstat_tot = gpu_tres(fields.next().unwrap_or_default());
    // The step's record reaches slurmdbd after the job: wait for it.
    let step = format!("{}.0", job.job_id);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let sacct = loop {
        let out = cluster.run(
            "sacct",
            &["-j", &job.job_id.to_string(), "-n", "-P", "--noconvert", "-o", "JobID,TRESUsageInMax,TRESUsageInAve,ConsumedEnergyRaw"],
            Duration::from_secs(20),
        );
        let row = out.stdout.lines().find(|l| l.starts_with(&format!("{step}|")) && l.contains("gres/gpu")).map(str::to_string);
        if let Some(r) = row {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "sacct shows no GPU usage of step {step}:\n{out}\n{}", cluster.log_tails(40));
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut fields = sacct.split('|').skip(1);
    let sacct_max = gpu_tres(fields.next().unwrap_or_default());
    let sacct_ave = gpu_tres(fields.next().unwrap_or_default());
    let energy = fields.next().and_then(|e| e.trim().parse().ok());
    if plugins != PluginSet::Stock {
        cluster.assert_stepd_ours_loaded(&["gpu_nvml"], &["--gres=gpu:1"]);
    }
    let _ = std::fs::remove_file(&pidfile);
    let _ = std::fs::remove_file(&done);
    let show = format!("job output:\n{}\nsacct: {sacct}\n{}", job.output, cluster.log_tails(30));
    Some(Seen { sstat_max, sstat_tot, sacct_max, sacct_ave, energy, show })
}

per_release! {
    fn usage_shows_in_sstat_and_sacct_as_with_stock(bed) {
        let name = format!("usage_shows_in_sstat_and_sacct_as_with_stock [Slurm {}]", bed.version);
        if bed.series == "22.05" {
            // Its acct_gather_energy_gpu.so needs slurmd's `conf`:
            // slurmctld cannot load it ("undefined symbol: conf") and exits.
            eprintln!("{name}: no gpu_p_usage_read before 23.02, and 22.05's acct_gather_energy/gpu cannot load in slurmctld; nothing to compare");
            return;
        }
        let Some(stock_nvml) = bed.stock_gpu_nvml_for("usage_shows_in_sstat_and_sacct_as_with_stock") else { return };
        if let Some(why) = harness::accounting::missing() {
            testbed::skip_or_fail(&name, &why);
            return;
        }
        let stock = run(bed, PluginSet::Stock, &stock_nvml).expect("the stock side always runs");
        let Some(ours) = run(bed, PluginSet::Ours, &stock_nvml) else { return };
        let show = format!("---- stock ----\n{}\n---- ours ----\n{}", stock.show, ours.show);
        for (side, v) in [("stock", &stock), ("ours", &ours)] {
            eprintln!(
                "{name}: {side}: (gres/gpumem, gres/gpuutil) sstat max {:?} tot {:?}, sacct max {:?} ave {:?}; ConsumedEnergyRaw {:?}",
                v.sstat_max, v.sstat_tot, v.sacct_max, v.sacct_ave, v.energy
            );
        }
        // Energy: none from stock's empty energy_read; from ours the two
        // GPUs' power (120 W + 130 W in the fixture) over the seconds the
        // step ran (at least the 3 s of sstat's wait, at most 2 minutes).
        assert_eq!(stock.energy, Some(0), "stock, ConsumedEnergyRaw\n{show}");
        let joules = ours.energy.unwrap_or_default();
        assert!((250..=250 * 120).contains(&joules), "ours, ConsumedEnergyRaw {joules} J: not 250 W over 1 s to 2 min\n{show}");
        // The task's own usage, its two GPUs summed, the other process not:
        // the same in every view (one task, one node).
        let want = (Some(1536 * MIB), Some(30 + 20));
        for (what, got) in [("sstat TRESUsageInMax", ours.sstat_max), ("sstat TRESUsageInTot", ours.sstat_tot), ("sacct TRESUsageInMax", ours.sacct_max), ("sacct TRESUsageInAve", ours.sacct_ave)] {
            assert_eq!(got, want, "ours, {what}\n{show}");
        }
        if bed.behaviour.usage_last_gpu_only {
            // Stock keeps only the last GPU's values (docs/deviations.md NVML 5).
            assert_eq!(stock.sacct_max, (Some(512 * MIB), Some(20)), "stock, sacct TRESUsageInMax\n{show}");
        } else {
            assert_eq!(
                (stock.sstat_max, stock.sstat_tot, stock.sacct_max, stock.sacct_ave),
                (ours.sstat_max, ours.sstat_tot, ours.sacct_max, ours.sacct_ave),
                "stock vs ours: sstat max, tot; sacct max, ave\n{show}"
            );
        }
    }
}
