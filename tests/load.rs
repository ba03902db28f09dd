//! Load on a real slurmd with our plugins: hundreds of concurrent and
//! back-to-back job steps with GPUs, and many concurrent jobs on shared
//! GPUs (gres/shard, gres/mps).
//!
//! What must hold: no GPU is handed to two exclusive steps at once (each
//! task records when it ran and which GPU it got; overlapping tasks must
//! have different GPUs), no shared GPU is given more sharing jobs than its
//! count allows, every step's environment matches its allocation, and
//! slurmd and slurmstepd do not grow from round to round (no leak).
//!
//! `GRES_RS_TEST_STOCK=1` runs the same load on the stock plugins (to
//! compare memory figures).  Needs root, the Debian Slurm packages and
//! `cargo build --workspace` (see crates/test-harness); skipped otherwise.

use gres_test_harness as harness;

use harness::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

fn plugins() -> PluginSet {
    if std::env::var("GRES_RS_TEST_STOCK").is_ok_and(|v| v == "1") {
        PluginSet::Stock
    } else {
        PluginSet::Ours
    }
}

/// One task's record: `<start ns> <end ns> <key=value>...`.
#[derive(Clone, Debug)]
struct Record {
    name: String,
    start: u128,
    end: u128,
    vars: BTreeMap<String, String>,
}

impl Record {
    fn get(&self, k: &str) -> &str {
        self.vars.get(k).map(String::as_str).unwrap_or("")
    }
    fn parse(name: &str, line: &str) -> Option<Record> {
        let mut w = line.split_whitespace();
        let start = w.next()?.parse().ok()?;
        let end = w.next()?.parse().ok()?;
        let vars = w.filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Some(Record { name: name.to_string(), start, end, vars })
    }
}

/// The shell line a task runs: sleeps a little between two timestamps and
/// prints them with the variables `vars` and slurmstepd's VmRSS (KiB).
fn task_line(vars: &[&str], sleep: &str) -> String {
    let fields: Vec<String> = vars.iter().map(|v| format!("{v}=${v}")).collect();
    format!(
        "s=$(date +%s%N); sleep {sleep}; e=$(date +%s%N); rss=$(awk '/^VmRSS/{{print $2}}' /proc/$PPID/status); echo \"$s $e {} stepd_rss=$rss\"",
        fields.join(" ")
    )
}

/// Reads `<dir>/<name>.out` records; every `<name>.rc` must be 0.
fn read_records(dir: &Path) -> (Vec<Record>, Vec<String>) {
    let mut records = Vec::new();
    let mut failures = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".out")).map(str::to_string))
        .collect();
    names.sort();
    for n in names {
        let out = std::fs::read_to_string(dir.join(format!("{n}.out"))).unwrap_or_default();
        let rc = std::fs::read_to_string(dir.join(format!("{n}.rc"))).unwrap_or_else(|_| "0".into());
        let err = std::fs::read_to_string(dir.join(format!("{n}.err"))).unwrap_or_default();
        match (rc.trim(), out.lines().find_map(|l| Record::parse(&n, l))) {
            ("0", Some(r)) => records.push(r),
            (rc, _) => failures.push(format!("{n}: rc {rc}, out {out:?}, err {err:?}")),
        }
    }
    (records, failures)
}

/// Pairs of records that ran at the same time with the same `key` value.
fn overlaps<'a>(records: &'a [Record], key: &str) -> Vec<(&'a Record, &'a Record)> {
    let mut v = Vec::new();
    for (i, a) in records.iter().enumerate() {
        for b in &records[i + 1..] {
            if a.get(key) == b.get(key) && a.start < b.end && b.start < a.end {
                v.push((a, b));
            }
        }
    }
    v
}

/// Most records of one `key` value running at the same instant.
fn max_concurrency(records: &[Record], key: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in records {
        let at = r.start;
        let n = records.iter().filter(|o| o.get(key) == r.get(key) && o.start <= at && at < o.end).count();
        let e = out.entry(r.get(key).to_string()).or_insert(0);
        *e = (*e).max(n);
    }
    out
}

fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

const ROUNDS: usize = 3;
const CONCURRENT: usize = 60;
const SEQUENTIAL: usize = 20;

per_release! {
    /// Rounds of one batch job with 4 GPUs each: `CONCURRENT` steps of one
    /// GPU launched at once (at most 6 sruns in flight, 8 CPUs for 4 GPUs, so
    /// steps wait for GPUs), then `SEQUENTIAL` steps back to back.
    fn exclusive_gpu_steps_under_load(bed) {
        let cfg = ClusterConfig::gpus(plugins(), 4).with_cpus(1, 8, 1);
        let c = Cluster::start(cfg);
        let slurmd = c.pid(Daemon::Slurmd).expect("slurmd");
        let line = task_line(&["SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE"], "0.05");
        let task = c.layout.jobs.join("task.sh");
        std::fs::write(&task, format!("#!/bin/sh\n{line}\n")).expect("task script");
        let mut slurmd_rss = Vec::new();
        let mut stepd_rss = Vec::new();
        let mut all = Vec::new();
        for round in 0..ROUNDS {
            let dir = c.layout.jobs.join(format!("round{round}"));
            std::fs::create_dir_all(&dir).expect("round dir");
            let script = format!(
                r#"#!/bin/bash
    out={dir}
    step() {{
        srun -n1 --exclusive --gres=gpu:1 /bin/sh {task} >"$out/$1.out" 2>"$out/$1.err"
        echo $? >"$out/$1.rc"
    }}
    for i in $(seq -w 1 {CONCURRENT}); do
        while [ "$(jobs -rp | wc -l)" -ge 6 ]; do wait -n; done
        step c$i &
    done
    wait
    for i in $(seq -w 1 {SEQUENTIAL}); do step s$i; done
    "#,
                dir = dir.display(),
                task = task.display()
            );
            let job = c.sbatch_timeout(&["-n8", "--gres=gpu:4"], &script, Duration::from_secs(600));
            assert!(job.ok(), "round {round}: {job:?}\n{}", c.log_tails(40));
            assert!(c.wait_no_jobs(Duration::from_secs(60)), "jobs left after round {round}");
            let (records, failures) = read_records(&dir);
            assert!(failures.is_empty(), "round {round}: failed steps:\n{}\n{}", failures.join("\n"), c.log_tails(40));
            assert_eq!(records.len(), CONCURRENT + SEQUENTIAL, "round {round}");

            // Every step's environment matches its allocation.
            let jobid = records[0].get("SLURM_JOB_ID").to_string();
            let mut steps: Vec<&str> = records.iter().map(|r| r.get("SLURM_STEP_ID")).collect();
            steps.sort_unstable();
            steps.dedup();
            assert_eq!(steps.len(), records.len(), "round {round}: a step id seen twice");
            for r in &records {
                let gpu = r.get("SLURM_STEP_GPUS");
                assert!(["0", "1", "2", "3"].contains(&gpu), "round {round} {}: SLURM_STEP_GPUS={gpu:?} {r:?}", r.name);
                assert_eq!(r.get("CUDA_VISIBLE_DEVICES"), gpu, "{r:?}");
                assert_eq!(r.get("SLURM_JOB_GPUS"), "0,1,2,3", "{r:?}");
                assert_eq!(r.get("SLURM_GPUS_ON_NODE"), "1", "{r:?}");
                assert_eq!(r.get("SLURM_JOB_ID"), jobid, "{r:?}");
            }
            // No GPU in two steps at once.
            let clash = overlaps(&records, "SLURM_STEP_GPUS");
            assert!(clash.is_empty(), "round {round}: GPUs handed to two running steps:\n{clash:#?}");
            let conc = max_concurrency(&records, "SLURM_STEP_GPUS");
            eprintln!("round {round}: per GPU most steps at once {conc:?}; GPUs used {:?}", conc.keys().collect::<Vec<_>>());

            slurmd_rss.push(vm_rss_kib(slurmd));
            stepd_rss.push(median(records.iter().filter_map(|r| r.get("stepd_rss").parse().ok()).collect()));
            all.extend(records);
        }
        assert_eq!(c.pid(Daemon::Slurmd), Some(slurmd), "slurmd must survive the load");
        eprintln!("slurmd VmRSS after each round (KiB): {slurmd_rss:?}; slurmstepd median VmRSS per round (KiB): {stepd_rss:?}");
        // Rounds 2..n repeat round 1: memory must stay flat once warm.
        let growth = slurmd_rss[ROUNDS - 1].saturating_sub(slurmd_rss[0]);
        assert!(growth <= 1024, "slurmd grew by {growth} KiB over {} rounds of {} steps: {slurmd_rss:?}", ROUNDS - 1, CONCURRENT + SEQUENTIAL);
        let growth = stepd_rss[ROUNDS - 1].saturating_sub(stepd_rss[0]);
        assert!(growth <= 256, "slurmstepd grew by {growth} KiB from round to round: {stepd_rss:?}");
        assert!(!c.log(Daemon::Slurmd).contains("internal error (panic)"), "{}", c.log_tails(40));
    }

}

/// Many small jobs on shared GPUs (a job array): no GPU is given more
/// sharing jobs at once than its count, and every job's variables match.
fn shared_jobs(kind: &str, node_gres: &str, request: &str, per_gpu: usize, check: &dyn Fn(&Record)) {
    let mut cfg = ClusterConfig::gpus(plugins(), 2).with_cpus(1, 8, 1).with_gres(node_gres, &gpu_gres_line(2));
    cfg.gres_types = format!("gpu,{kind}");
    let c = Cluster::start(cfg);
    let slurmd = c.pid(Daemon::Slurmd).expect("slurmd");
    let dir = c.layout.jobs.join(format!("{kind}-results"));
    std::fs::create_dir_all(&dir).expect("results dir");
    let line = task_line(
        &["SLURM_JOB_ID", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "SLURM_SHARDS_ON_NODE", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"],
        "0.3",
    );
    let script = format!("#!/bin/bash\n{line} >{dir}/$SLURM_ARRAY_TASK_ID.out\n", dir = dir.display());
    const JOBS: usize = 40;
    let (out, id) = c.sbatch_submit(&[&format!("--array=1-{JOBS}"), "-n1", &format!("--gres={request}")], &script);
    assert!(id.is_some(), "sbatch --array failed:\n{out}");
    assert!(c.wait_no_jobs(Duration::from_secs(300)), "{kind}: the array did not finish\n{}", c.log_tails(40));
    let (records, failures) = read_records(&dir);
    assert!(failures.is_empty(), "{kind}: {failures:#?}");
    assert_eq!(records.len(), JOBS, "{kind}: not every array task ran:\n{}", c.log_tails(40));
    for r in &records {
        check(r);
    }
    let conc = max_concurrency(&records, "SLURM_JOB_GPUS");
    eprintln!("{kind}: most jobs at once per GPU {conc:?}");
    for (gpu, n) in &conc {
        assert!(["0", "1"].contains(&gpu.as_str()), "{kind}: GPU {gpu:?} is not on the node");
        assert!(*n <= per_gpu, "{kind}: GPU {gpu} ran {n} jobs at once, its count allows {per_gpu}");
    }
    assert!(conc.values().any(|&n| n > 1), "{kind}: the load never shared a GPU ({conc:?})");
    assert_eq!(c.pid(Daemon::Slurmd), Some(slurmd), "slurmd must survive the load");
    assert!(!c.log(Daemon::Slurmd).contains("internal error (panic)"), "{}", c.log_tails(40));
}

per_release! {

    /// gres/shard: 2 shards per GPU, 40 one-shard jobs on 8 CPUs.
    fn shard_jobs_under_load(bed) {
        shared_jobs("shard", "gpu:2,shard:4", "shard:1", 2, &|r| {
            let gpu = r.get("SLURM_JOB_GPUS");
            assert_eq!(r.get("CUDA_VISIBLE_DEVICES"), gpu, "{r:?}");
            assert_eq!(r.get("SLURM_SHARDS_ON_NODE"), "1", "{r:?}");
            assert_eq!(r.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "", "{r:?}");
        });
    }

    /// gres/mps: 100 per GPU, 40 jobs of 50 on 8 CPUs (with one_sharing, the
    /// default, all of them on the GPU MPS is running on).
    fn mps_jobs_under_load(bed) {
        shared_jobs("mps", "gpu:2,mps:200", "mps:50", 2, &|r| {
            let gpu = r.get("SLURM_JOB_GPUS");
            assert_eq!(r.get("CUDA_VISIBLE_DEVICES"), gpu, "{r:?}");
            assert_eq!(r.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50", "{r:?}");
            assert_eq!(r.get("SLURM_SHARDS_ON_NODE"), "", "{r:?}");
        });
    }
}
