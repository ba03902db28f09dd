//! Per-process GPU accounting (`gpu_p_usage_read`) against the NVML
//! stand-in: memory and utilisation summed over a process's GPUs, one view
//! of the GPUs per poll whatever the number of processes, PIDs read as the
//! driver reports them, failing calls logged without losing the other
//! GPUs.  Needs `cc`; no GPU, no Slurm.  (Stock gpu/nvml beside ours, on a
//! real slurmstepd: tests/nvml_accounting.rs.)

use gres_core::gpu_usage::ProcessUsage;
use gres_core::model::LogLevel;
use gres_test_harness::standin::{self, Standin};
use slurm_gpu_gres::nvml::{usage, Log};

const TWO_GPUS: &str = "
gpu
name NVIDIA H100 80GB HBM3
uuid GPU-0
proc compute 1000 1024
proc graphics 1000 16
proc compute 1001 2048
util 1000 40 10
util 1001 7 1

gpu
name NVIDIA H100 80GB HBM3
uuid GPU-1
proc compute 1000 512
proc compute PIDFILE 300
util 1000 25 5
util PIDFILE 99 50
";

fn read(s: &Standin, pid: u32) -> (ProcessUsage, Log) {
    let mut log = Log::new(LogLevel::Debug3);
    let u = usage::process_usage(pid, 0, &s.paths(), &mut log).expect("NVML usable");
    (u, log)
}

const MIB: u64 = 1024 * 1024;

#[test]
fn sums_a_process_over_its_gpus() {
    let pidfile = standin::scratch_dir().join("usage-pidfile");
    std::fs::write(&pidfile, "4242\n").unwrap();
    let s = Standin::from_text(&TWO_GPUS.replace("PIDFILE", &format!("pidfile:{}", pidfile.display())));
    usage::forget();
    let (u, log) = read(&s, 1000);
    assert_eq!(u.mem_bytes, (1024 + 16 + 512) * MIB, "{log:?}");
    assert_eq!(u.sm_util, 40 + 25);
    assert!(u.last_time > 1_600_000_000_000_000, "a sample's time in microseconds: {}", u.last_time);
    assert_eq!(read(&s, 1001).0.mem_bytes, 2048 * MIB);
    assert_eq!(read(&s, 1001).0.sm_util, 7);
    // The PID the driver reports, from the file a task wrote.
    let u = read(&s, 4242).0;
    assert_eq!((u.mem_bytes, u.sm_util), (300 * MIB, 99));
    // A process on no GPU: zeros, and the caller's last_time back.
    let mut log = Log::new(LogLevel::Debug3);
    assert_eq!(usage::process_usage(77, 5, &s.paths(), &mut log), Some(ProcessUsage { mem_bytes: 0, sm_util: 0, last_time: 5 }));
    std::fs::remove_file(&pidfile).unwrap();
}

/// One view per poll: the step's processes are answered from one round
/// of NVML queries per GPU; a process asked again starts the next poll.
#[test]
fn one_round_of_queries_per_poll() {
    let mut text = String::new();
    for g in 0..8 {
        text.push_str(&format!("gpu\nname NVIDIA H100 80GB HBM3\nuuid GPU-{g}\n"));
        for p in 0..64 {
            text.push_str(&format!("proc compute {} {}\nutil {} {} 1\n", 2000 + p, 100 + g, 2000 + p, p % 100));
        }
    }
    let s = Standin::from_text(&text);
    usage::forget();
    for p in 0..64 {
        let (u, _) = read(&s, 2000 + p);
        assert_eq!(u.mem_bytes, (100..108).sum::<u64>() * MIB);
        assert_eq!(u.sm_util, 8 * u64::from(p % 100));
    }
    // Per GPU: a count and a list of compute processes, of graphics
    // processes and of utilisation samples, once for the whole poll.
    for f in ["nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetProcessUtilization"] {
        assert!(s.count(f) <= 16, "{f}: {} calls for one poll of 64 processes on 8 GPUs", s.count(f));
    }
    assert_eq!(s.count("nvmlDeviceGetHandleByIndex_v2"), 8);
    // The next poll asks the first process again: a new round.
    read(&s, 2000);
    assert_eq!(s.count("nvmlDeviceGetHandleByIndex_v2"), 16);
}

/// A GPU whose lists cannot be read is logged as stock logs it and adds
/// nothing; the other GPUs still count.
#[test]
fn a_failing_gpu_loses_only_its_own_numbers() {
    let text = TWO_GPUS.replace("PIDFILE", "3000") + "fail nvmlDeviceGetComputeRunningProcesses_v3 15\nfail nvmlDeviceGetProcessUtilization 15\n";
    let s = Standin::from_text(&text);
    usage::forget();
    let (u, log) = read(&s, 1000);
    assert_eq!(u.mem_bytes, (1024 + 16) * MIB);
    assert_eq!(u.sm_util, 40);
    let errors: Vec<&str> = log.at_most(LogLevel::Error).collect();
    assert!(errors.contains(&"NVML: Failed to get Compute running procs(15): GPU is lost"), "{errors:?}");
    assert!(errors.contains(&"NVML: Failed to get usage(15): GPU is lost"), "{errors:?}");
    // A MIG parent answers NOT_SUPPORTED for utilisation: no error.
    drop(s);
    let s = Standin::from_text(&TWO_GPUS.replace("PIDFILE", "3000").replace("util 1000 25 5", "fail nvmlDeviceGetProcessUtilization 3"));
    usage::forget();
    let (u, log) = read(&s, 1000);
    assert_eq!(u.sm_util, 40);
    assert_eq!(log.at_most(LogLevel::Error).count(), 0, "{log:?}");
}

#[test]
fn no_driver() {
    let s = Standin::with_fixture(None);
    usage::forget();
    let mut log = Log::new(LogLevel::Debug3);
    assert_eq!(usage::process_usage(1, 0, &s.paths(), &mut log), None);
    assert!(log.at_most(LogLevel::Error).any(|l| l.contains("Driver Not Loaded")), "{log:?}");
}
