//! gres/mps and gres/shard on real Slurm daemons (every release of the
//! test bed, `GRES_RS_SLURM`), stock and ours side
//! by side (see crates/test-harness).  Each scenario runs on a cluster with the
//! stock plugins and on one with ours; every GPU variable of every task,
//! batch script, Prolog and Epilog is compared, and the only differences
//! allowed are the deliberate deviations of docs/deviations.md, each named
//! where it is allowed.  Our values are also checked against the
//! documentation (gres.shtml, "MPS Management" and "Sharding").
//!
//! Needs root, the Debian slurm packages and `cargo build --workspace`
//! (tests/run.sh does both); without them the tests print "skipped".

use gres_test_harness as harness;

use harness::scenario::{run_scenario, EnvBlock, Run, RunResult, Scenario, ScenarioResult};
use harness::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Comparing stock and ours
// ---------------------------------------------------------------------------

/// One difference between the stock run and ours.
#[derive(Clone, Debug)]
struct Diff {
    run: String,
    /// "tag job.step task" of the environment, or "" for the run itself.
    block: String,
    /// The variable, or "<outcome>" / "<environments>" / "<slurmd -G>".
    var: String,
    stock: Option<String>,
    ours: Option<String>,
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {} {}: stock={:?} ours={:?}", self.run, self.block, self.var, self.stock, self.ours)
    }
}

fn key(b: &EnvBlock) -> (String, i64, i64, i64) {
    (b.tag.clone(), b.job_id(), b.step_id(), b.proc_id())
}

fn sorted(r: &RunResult) -> Vec<&EnvBlock> {
    let mut v: Vec<&EnvBlock> = r.blocks.iter().collect();
    v.sort_by_key(|b| key(b));
    v
}

fn diffs(stock: &ScenarioResult, ours: &ScenarioResult) -> Vec<Diff> {
    let mut out = Vec::new();
    for (a, b) in stock.runs.iter().zip(&ours.runs) {
        let run = a.label.clone();
        let d =
            |block: &str, var: &str, s: Option<String>, o: Option<String>| Diff { run: run.clone(), block: block.into(), var: var.into(), stock: s, ours: o };
        if a.outcome != b.outcome {
            out.push(d("", "<outcome>", Some(a.outcome.clone()), Some(b.outcome.clone())));
        }
        if a.gres_lines != b.gres_lines {
            out.push(d("", "<slurmd -G>", Some(a.gres_lines.join("\n")), Some(b.gres_lines.join("\n"))));
        }
        let (sa, sb) = (sorted(a), sorted(b));
        let keys = |v: &[&EnvBlock]| v.iter().map(|b| key(b)).collect::<Vec<_>>();
        if keys(&sa) != keys(&sb) {
            out.push(d("", "<environments>", Some(format!("{:?}", keys(&sa))), Some(format!("{:?}", keys(&sb)))));
            continue;
        }
        for (x, y) in sa.iter().zip(&sb) {
            let (gx, gy) = (x.gpu_vars(), y.gpu_vars());
            let mut names: Vec<&String> = gx.keys().chain(gy.keys()).collect();
            names.sort();
            names.dedup();
            for n in names {
                if gx.get(n) != gy.get(n) {
                    out.push(d(&x.describe(), n, gx.get(n).cloned(), gy.get(n).cloned()));
                }
            }
        }
    }
    out
}

/// Deviation 3: ours sets `CUDA_DEVICE_ORDER=PCI_BUS_ID` (and a step
/// inherits it from its batch script), stock never does.
fn device_order(d: &Diff) -> bool {
    d.var == "CUDA_DEVICE_ORDER" && d.stock.is_none() && d.ours.as_deref() == Some("PCI_BUS_ID")
}

/// Deviation 2: variables stock's second shared plugin cleared, set in ours.
fn kept_devices(d: &Diff) -> bool {
    const VARS: &[&str] =
        &["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE"];
    VARS.contains(&d.var.as_str()) && d.stock.is_none() && d.ours.is_some()
}

/// Runs `scn` on both plugin sets and asserts that every difference is
/// allowed by `allowed`.
#[track_caller]
fn compare(scn: &Scenario, allowed: &dyn Fn(&Diff) -> bool) -> (ScenarioResult, ScenarioResult) {
    let stock = run_scenario(scn, PluginSet::Stock);
    let ours = run_scenario(scn, PluginSet::Ours);
    eprintln!("{}{}", stock.report(), ours.report());
    let unexpected: Vec<String> = diffs(&stock, &ours).iter().filter(|d| !allowed(d)).map(|d| d.to_string()).collect();
    if !unexpected.is_empty() {
        let mut outs = String::new();
        for (a, b) in stock.runs.iter().zip(&ours.runs) {
            outs.push_str(&format!("==== [{}] stock: {}\n{}\n==== [{}] ours: {}\n{}\n", a.label, a.outcome, a.output, b.label, b.outcome, b.output));
        }
        panic!("scenario {}: unexpected differences between stock and ours:\n  {}\n{outs}", scn.name, unexpected.join("\n  "));
    }
    (stock, ours)
}

/// Runs `flow` on a cluster with each plugin set and asserts that every
/// difference is allowed by `allowed`.  For flows whose jobs must overlap,
/// which the sequential scenario runs cannot do.
#[track_caller]
fn compare_flow(
    name: &str,
    config: &ClusterConfig,
    flow: &dyn Fn(&Cluster) -> Vec<RunResult>,
    allowed: &dyn Fn(&Diff) -> bool,
) -> (ScenarioResult, ScenarioResult) {
    let run = |plugins: PluginSet| {
        let c = Cluster::start(ClusterConfig { plugins: plugins.clone(), ..config.clone() });
        let runs = flow(&c);
        if plugins != PluginSet::Stock {
            let names = c.expected_gres_plugins();
            c.assert_stepd_ours_loaded(&names.iter().map(String::as_str).collect::<Vec<_>>(), &["--gres=gpu:1"]);
        }
        ScenarioResult { scenario: name.into(), plugins, runs }
    };
    let (stock, ours) = (run(PluginSet::Stock), run(PluginSet::Ours));
    eprintln!("{}{}", stock.report(), ours.report());
    let unexpected: Vec<String> = diffs(&stock, &ours).iter().filter(|d| !allowed(d)).map(|d| d.to_string()).collect();
    if !unexpected.is_empty() {
        let outs: String = stock
            .runs
            .iter()
            .zip(&ours.runs)
            .map(|(a, b)| format!("==== [{}] stock:\n{}\n==== [{}] ours:\n{}\n", a.label, a.output, b.label, b.output))
            .collect();
        panic!("flow {name}: unexpected differences between stock and ours:\n  {}\n{outs}", unexpected.join("\n  "));
    }
    (stock, ours)
}

/// `srun <args> dump-env <label>` on `c`, recorded like a scenario run.
fn step(c: &Cluster, label: &str, args: &[&str]) -> RunResult {
    let dump = c.layout.dump_env_script().to_string_lossy().into_owned();
    // A step that cannot start fails at once instead of waiting for the
    // harness's timeout.
    let mut a: Vec<&str> = if args.iter().any(|a| a.starts_with("--immediate")) { vec![] } else { vec!["--immediate=20"] };
    a.extend(args);
    a.extend([dump.as_str(), label]);
    let o = c.srun(&a);
    let outcome = if o.timed_out { "timeout".to_string() } else { format!("exit {:?}", o.status) };
    RunResult { label: label.into(), outcome, ok: o.ok(), output: o.to_string(), blocks: c.collect_dumps(), gres_lines: vec![], unordered: false }
}

/// Jobs started by [`hold`], ended by [`release`].
type Held = Vec<std::process::Child>;

/// Starts a job with `args` that sleeps, and waits until it runs.
#[track_caller]
fn hold(c: &Cluster, held: &mut Held, args: &[&str]) {
    let before = running_jobs(c);
    let child = c
        .command("srun")
        .args(args)
        .args(["sleep", "300"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("srun");
    held.push(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while running_jobs(c) <= before {
        assert!(Instant::now() < deadline, "srun {args:?} did not start:\n{}", c.squeue(&[]));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn running_jobs(c: &Cluster) -> usize {
    c.squeue(&["-h", "-t", "R", "-o", "%i"]).stdout.lines().count()
}

/// Ends every job and forgets their environments.
fn release(c: &Cluster, held: &mut Held) {
    let _ = c.scancel(&["--full", "-u", "root"]);
    c.wait_no_jobs(Duration::from_secs(30));
    for mut h in held.drain(..) {
        let _ = h.kill();
        let _ = h.wait();
    }
    let _ = c.collect_dumps();
}

/// The environments tagged `tag` of run `run`, in task order.
fn blocks<'a>(r: &'a ScenarioResult, run: &str, tag: &str) -> Vec<&'a EnvBlock> {
    let mut v: Vec<&EnvBlock> = r.run(run).blocks.iter().filter(|b| b.tag == tag).collect();
    v.sort_by_key(|b| key(b));
    v
}

/// The only environment tagged `tag` of run `run`.
#[track_caller]
fn block<'a>(r: &'a ScenarioResult, run: &str, tag: &str) -> &'a EnvBlock {
    let v = blocks(r, run, tag);
    assert_eq!(v.len(), 1, "[{run}] expected one {tag} environment:\n{}", r.report());
    v[0]
}

/// Asserts the GPU variables of `b` are exactly `want` (plus the request
/// variables srun and sbatch set themselves).
#[track_caller]
fn assert_vars(b: &EnvBlock, want: &[(&str, &str)]) {
    let got: BTreeMap<&str, &str> = PLUGIN_ENV_VARS.iter().filter_map(|k| b.get(k).map(|v| (*k, v))).collect();
    let want: BTreeMap<&str, &str> = want.iter().copied().collect();
    assert_eq!(got, want, "{}", b.describe());
}

fn mps_config(gres_types: &str, node_gres: &str, gres_conf: &str) -> ClusterConfig {
    let mut c = ClusterConfig::gpus(PluginSet::Stock, 4).with_gres(node_gres, gres_conf);
    c.gres_types = gres_types.into();
    c
}

/// "Name=gpu File=..." for `n` GPUs plus `extra`.
fn gpus_plus(n: u32, extra: &str) -> String {
    format!("{}{extra}", gpu_gres_line(n))
}

/// The variables of an MPS job or step on GPU `gpu` with `pct` percent.
fn mps_vars<'a>(scope: &'a str, gpu: &'a str, pct: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        (scope, gpu),
        ("CUDA_VISIBLE_DEVICES", gpu),
        ("SLURM_GPUS_ON_NODE", "1"),
        ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", pct),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
    ]
}

// ---------------------------------------------------------------------------
// gres/mps
// ---------------------------------------------------------------------------

per_release! {
    /// slurm.conf `mps:400` over four GPUs, no mps line in gres.conf: 100 each
    /// (gres.shtml, MPS configuration 1).  One node, several tasks, a batch
    /// script with steps, `--gres=none` inside the allocation, Prolog/Epilog.
    fn mps_even_counts_jobs_steps_tasks_prolog_epilog(bed) {
        let mut config = mps_config("gpu,mps", "gpu:4,mps:400", &gpus_plus(4, ""));
        config.dump_prolog_epilog_env = true;
        let batch = "#!/bin/sh\n\"$GRES_RS_DUMP_ENV\" batch\nsrun -n1 --gres=mps:20 \"$GRES_RS_DUMP_ENV\" step\nsrun -n1 --gres=none \"$GRES_RS_DUMP_ENV\" none\n";
        let scn = Scenario::new("mps-even", config)
            .run(Run::slurmd_g("conf"))
            .run(Run::srun("one", &["--gres=mps:50"]))
            .run(Run::srun("tasks", &["-n3", "--gres=mps:30"]))
            .run(Run::srun("bind", &["-n2", "--gres=mps:50", "--gpu-bind=verbose,none"]))
            .run(Run::sbatch("batch", &["-n2", "--gres=mps:60"], batch));
        // Deviation 1: stock's task function reads slurmd's arguments in
        // the wrong order; with a task binding request its tasks crash --
        // up to 23.02.6 (`StockQuirks::sharing_env_order_fixed`): later stock
        // gets this run right and must agree with ours.
        // Later stock runs the tasks but they lose their device (deviation
        // 1, later releases): gres/gpu's task function, called without a
        // gpu allocation and unprotected, unsets CUDA_VISIBLE_DEVICES and
        // SLURM_STEP_GPUS; gres/mps sets only its percentage and
        // SLURM_GPUS_ON_NODE again.  Ours keeps the step's device.
        let stock_crashes = !bed.behaviour.sharing_env_order_fixed;
        let lost_device = |d: &Diff| d.run == "bind" && (d.var == "CUDA_VISIBLE_DEVICES" || d.var == "SLURM_STEP_GPUS") && d.stock.is_none();
        let (stock, ours) = compare(&scn, &|d| {
            device_order(d) || (stock_crashes && d.run == "bind" && (d.var == "<outcome>" || d.var == "<environments>")) || (!stock_crashes && lost_device(d))
        });
        let conf = &ours.run("conf").gres_lines;
        assert_eq!(conf.iter().filter(|l| l.contains("Name=mps") && l.contains("Count=100")).count(), 4, "{conf:#?}");
        assert_eq!(conf.iter().filter(|l| l.contains("Name=gpu") && l.contains("Count=1 ")).count(), 4, "{conf:#?}");

        assert_vars(block(&ours, "one", "one"), &mps_vars("SLURM_STEP_GPUS", "0", "50"));
        assert_eq!(block(&stock, "one", "one").get("CUDA_DEVICE_ORDER"), None, "deviation 3: stock never sets it");
        for tag in ["prolog", "epilog"] {
            let b = block(&ours, "one", tag);
            assert_vars(b, &[("SLURM_JOB_GPUS", "0"), ("CUDA_VISIBLE_DEVICES", "0"), ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50")]);
            assert_eq!(b.get("SLURM_JOB_UID"), Some("0"), "the Prolog needs the user for the MPS server");
        }
        let tasks = blocks(&ours, "tasks", "tasks");
        assert_eq!(tasks.len(), 3);
        for t in tasks {
            assert_vars(t, &mps_vars("SLURM_STEP_GPUS", "0", "30"));
        }
        let bind = blocks(&ours, "bind", "bind");
        assert_eq!(bind.len(), 2, "both tasks run:\n{}", ours.run("bind").output);
        for t in bind {
            assert_vars(t, &mps_vars("SLURM_STEP_GPUS", "0", "50"));
        }
        if stock_crashes {
            assert!(!stock.run("bind").ok, "stock tasks are expected to crash here on Slurm {} (deviation 1)", bed.version);
        } else {
            assert!(stock.run("bind").ok, "stock tasks run here on Slurm {} (deviation 1 fixed in 23.02.7):\n{}", bed.version, stock.run("bind").output);
            for t in blocks(&stock, "bind", "bind") {
                assert_vars(t, &[("SLURM_GPUS_ON_NODE", "1"), ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50")]);
            }
        }

        assert!(ours.run("batch").ok, "{}", ours.run("batch").output);
        assert_vars(block(&ours, "batch", "batch"), &mps_vars("SLURM_JOB_GPUS", "0", "60"));
        let mut step = mps_vars("SLURM_STEP_GPUS", "0", "20");
        step.push(("SLURM_JOB_GPUS", "0"));
        assert_vars(block(&ours, "batch", "step"), &step);
        // --gres=none: the device variables go; SLURM_JOB_GPUS is the job's
        // (inherited from the batch script, as with stock) and the order stays.
        assert_vars(block(&ours, "batch", "none"), &[("SLURM_JOB_GPUS", "0"), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID")]);
    }

    /// gres.shtml, MPS configuration example 2: counts 1300, 1200, 1100, 1000
    /// and `--gres=mps:200` give 15, 16, 18 and 20 percent.  Type and Cores of
    /// the mps records come from the GPUs.  Each GPU is reached in turn by
    /// holding, as a whole GPU, the one each MPS step ran on, which also
    /// shows that a GPU allocated as `gpu` is not handed out as mps.
    fn mps_documentation_example_per_gpu_counts(bed) {
        const TYPES: [&str; 4] = ["gtx1080", "gtx1070", "gtx1060", "gtx1050"];
        let mut conf = String::new();
        for (i, t) in TYPES.iter().enumerate() {
            conf.push_str(&format!("Name=gpu Type={t} File={{DEV}}/nvidia{i} Cores={}\n", if i < 2 { "0-1" } else { "2-3" }));
        }
        for (i, c) in [1300, 1200, 1100, 1000].iter().enumerate() {
            conf.push_str(&format!("Name=mps Count={c} File={{DEV}}/nvidia{i}\n"));
        }
        let node_gres = format!("{},mps:4600", TYPES.map(|t| format!("gpu:{t}:1")).join(","));
        // Two sockets of two cores: from 24.11 slurmctld drains a node whose
        // GPU Cores do not cover whole sockets ("doesn't match socket
        // boundaries", gres.c `_check_core_range_matches_sock`), and the
        // example's Cores=0-1 / 2-3 are its sockets.
        let config = mps_config("gpu,mps", &node_gres, &conf).with_cpus(2, 2, 1);
        let g = Cluster::slurmd_g(&ClusterConfig { plugins: PluginSet::Ours, ..config.clone() });
        let stock_g = Cluster::slurmd_g(&config);
        assert_eq!(g.gres_lines(), stock_g.gres_lines());
        for (i, (t, c)) in TYPES.iter().zip([1300, 1200, 1100, 1000]).enumerate() {
            let want = format!("Name=mps Type={t} Count={c} Index={i} ");
            assert!(g.gres_lines().iter().any(|l| l.contains(&want) && l.contains(if i < 2 { "Cores=0-1" } else { "Cores=2-3" })), "{want}: {}", g.normalized());
        }
        // Each MPS step is followed by a job holding the GPU it ran on as a
        // whole GPU (by its Type), so the next step must go to another one
        // and the four steps reach every GPU, in whatever order the
        // scheduler picks them (it prefers another socket from 24.11).
        let (_, ours) = compare_flow(
            "mps-doc",
            &config,
            &|c| {
                let mut held = Held::new();
                let mut runs = Vec::new();
                for i in 0..TYPES.len() {
                    let run = step(c, &format!("mps{i}"), &["--gres=mps:200"]);
                    let gpu = run.blocks.iter().find_map(|b| b.get("SLURM_STEP_GPUS")).and_then(|g| g.parse::<usize>().ok());
                    runs.push(run);
                    match gpu {
                        Some(g) if g < TYPES.len() && i + 1 < TYPES.len() => hold(c, &mut held, &[&format!("--gres=gpu:{}:1", TYPES[g])]),
                        _ => break,
                    }
                }
                release(c, &mut held);
                runs
            },
            &device_order,
        );
        let mut reached = BTreeSet::new();
        for i in 0..TYPES.len() {
            let tag = format!("mps{i}");
            let b = block(&ours, &tag, &tag);
            let gpu: usize = b.get("SLURM_STEP_GPUS").and_then(|g| g.parse().ok()).unwrap_or_else(|| panic!("{}", b.describe()));
            let pct = ["15", "16", "18", "20"][gpu];
            assert_vars(b, &mps_vars("SLURM_STEP_GPUS", &gpu.to_string(), pct));
            reached.insert(gpu);
        }
        assert_eq!(reached.len(), TYPES.len(), "the steps did not reach every GPU: {reached:?}");
    }

    /// Per-GPU counts with zeros: `Name=mps Count=500 File=nvidia[1-2]` gives
    /// 250 to GPUs 1 and 2 and none to GPUs 0 and 3, which never get MPS jobs.
    fn mps_zero_counts(bed) {
        // The GPUs have a Type: without Type or Cores slurmctld 22.05 ignores the
        // node's per-GPU counts and spreads the node's count evenly.
        let config = mps_config("gpu,mps", "gpu:tesla:4,mps:500", "Name=gpu Type=tesla File={DEV}/nvidia[0-3]\nName=mps Count=500 File={DEV}/nvidia[1-2]\n");
        let g = Cluster::slurmd_g(&ClusterConfig { plugins: PluginSet::Ours, ..config.clone() });
        let mps: Vec<String> = g.gres_lines().into_iter().filter(|l| l.contains("Name=mps")).collect();
        assert_eq!(mps.len(), 4, "{}", g.normalized());
        for (l, c) in mps.iter().zip(["Count=0 ", "Count=250 ", "Count=250 ", "Count=0 "]) {
            assert!(l.contains(c), "{l}");
        }
        assert_eq!(g.gres_lines(), Cluster::slurmd_g(&config).gres_lines());
        let (_, ours) = compare_flow(
            "mps-zero",
            &config,
            &|c| {
                let mut held = Held::new();
                let mut runs = vec![step(c, "all", &["--gres=mps:250"])];
                hold(c, &mut held, &["--gres=gpu:1"]); // GPU 0 (no mps there anyway)
                runs.push(step(c, "gpu1", &["--gres=mps:200"]));
                hold(c, &mut held, &["--gres=gpu:1"]); // GPU 1
                runs.push(step(c, "gpu2", &["--gres=mps:200"]));
                hold(c, &mut held, &["--gres=gpu:1"]); // GPU 2: only GPU 3 is left, with no mps
                runs.push(step(c, "none-left", &["--immediate=1", "--gres=mps:10"]));
                release(c, &mut held);
                runs
            },
            &device_order,
        );
        assert_vars(block(&ours, "all", "all"), &mps_vars("SLURM_STEP_GPUS", "1", "100"));
        assert_vars(block(&ours, "gpu1", "gpu1"), &mps_vars("SLURM_STEP_GPUS", "1", "80"));
        assert_vars(block(&ours, "gpu2", "gpu2"), &mps_vars("SLURM_STEP_GPUS", "2", "80"));
        assert!(!ours.run("none-left").ok, "GPU 3 has no mps count");
    }

    /// `one_sharing` (the mps default): while MPS is active on one GPU of a
    /// node, new MPS jobs must share that GPU.  `all_sharing` lets them use
    /// the others (gres.conf(5) Flags).  No job spans GPUs either way.
    fn mps_one_sharing_and_all_sharing(bed) {
        let one = mps_config("gpu,mps", "gpu:2,mps:200", &gpus_plus(2, ""));
        let (_, ours) = compare_flow(
            "mps-one-sharing",
            &one,
            &|c| {
                let mut held = Held::new();
                hold(c, &mut held, &["--gres=mps:50"]);
                let runs = vec![step(c, "elsewhere", &["--immediate=1", "--gres=mps:80"]), step(c, "same", &["--gres=mps:50"])];
                release(c, &mut held);
                runs
            },
            &device_order,
        );
        assert!(!ours.run("elsewhere").ok, "one_sharing: GPU 0 is the node's MPS GPU and has 50 left");
        assert_vars(block(&ours, "same", "same"), &mps_vars("SLURM_STEP_GPUS", "0", "50"));

        let all = mps_config("gpu,mps", "gpu:2,mps:200", &gpus_plus(2, "Name=mps Count=200 Flags=all_sharing\n"));
        let g = Cluster::slurmd_g(&ClusterConfig { plugins: PluginSet::Ours, ..all.clone() });
        assert_eq!(g.gres_lines(), Cluster::slurmd_g(&all).gres_lines());
        let (_, ours) = compare_flow(
            "mps-all-sharing",
            &all,
            &|c| {
                let mut held = Held::new();
                hold(c, &mut held, &["--gres=mps:50"]);
                let runs = vec![step(c, "elsewhere", &["--gres=mps:80"]), step(c, "span", &["--immediate=1", "--gres=mps:150"])];
                release(c, &mut held);
                runs
            },
            &device_order,
        );
        assert_vars(block(&ours, "elsewhere", "elsewhere"), &mps_vars("SLURM_STEP_GPUS", "1", "80"));
        assert!(!ours.run("span").ok, "one GPU per node");
    }

    // ---------------------------------------------------------------------------
    // gres/shard
    // ---------------------------------------------------------------------------

}

fn shard_vars<'a>(scope: &'a str, gpus: &'a str, on_node: &'a str, shards: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        (scope, gpus),
        ("CUDA_VISIBLE_DEVICES", gpus),
        ("ROCR_VISIBLE_DEVICES", gpus),
        ("ZE_AFFINITY_MASK", gpus),
        ("GPU_DEVICE_ORDINAL", gpus),
        ("SLURM_GPUS_ON_NODE", on_node),
        ("SLURM_SHARDS_ON_NODE", shards),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
    ]
}

per_release! {

    /// slurm.conf `shard:8` over four GPUs: 2 each (gres.shtml, Sharding
    /// configuration 1).  One and several tasks, several GPUs, a batch script
    /// with steps, `--gres=none`, Prolog/Epilog.
    fn shard_jobs_steps_tasks_prolog_epilog(bed) {
        let mut config = mps_config("gpu,shard", "gpu:4,shard:8", &gpus_plus(4, ""));
        config.dump_prolog_epilog_env = true;
        let batch = "#!/bin/sh\n\"$GRES_RS_DUMP_ENV\" batch\nsrun -n1 --gres=shard:1 \"$GRES_RS_DUMP_ENV\" step\nsrun -n1 --gres=none \"$GRES_RS_DUMP_ENV\" none\n";
        let scn = Scenario::new("shard", config)
            .run(Run::slurmd_g("conf"))
            .run(Run::srun("one", &["--gres=shard:1"]))
            .run(Run::srun("tasks", &["-n2", "--gres=shard:2"]))
            .run(Run::srun("two-gpus", &["--immediate=1", "--gres=shard:3"]))
            .run(Run::sbatch("batch", &["-n2", "--gres=shard:2"], batch));
        let (_, ours) = compare(&scn, &device_order);
        let conf = &ours.run("conf").gres_lines;
        assert_eq!(conf.iter().filter(|l| l.contains("Name=shard") && l.contains("Count=2 ")).count(), 4, "{conf:#?}");

        assert_vars(block(&ours, "one", "one"), &shard_vars("SLURM_STEP_GPUS", "0", "1", "1"));
        for tag in ["prolog", "epilog"] {
            let want =
                [("SLURM_JOB_GPUS", "0"), ("CUDA_VISIBLE_DEVICES", "0"), ("ROCR_VISIBLE_DEVICES", "0"), ("ZE_AFFINITY_MASK", "0"), ("GPU_DEVICE_ORDINAL", "0")];
            assert_vars(block(&ours, "one", tag), &want);
        }
        let tasks = blocks(&ours, "tasks", "tasks");
        assert_eq!(tasks.len(), 2);
        for t in tasks {
            assert_vars(t, &shard_vars("SLURM_STEP_GPUS", "0", "1", "2"));
        }
        // slurmctld 22.05 does not spread one node's shards over several GPUs.
        assert!(!ours.run("two-gpus").ok);

        assert!(ours.run("batch").ok, "{}", ours.run("batch").output);
        assert_vars(block(&ours, "batch", "batch"), &shard_vars("SLURM_JOB_GPUS", "0", "1", "2"));
        let mut step = shard_vars("SLURM_STEP_GPUS", "0", "1", "1");
        step.push(("SLURM_JOB_GPUS", "0"));
        assert_vars(block(&ours, "batch", "step"), &step);
        assert_vars(block(&ours, "batch", "none"), &[("SLURM_JOB_GPUS", "0"), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID")]);
    }

    // ---------------------------------------------------------------------------
    // GresTypes combinations
    // ---------------------------------------------------------------------------

    /// Every GresTypes order with both shared GRES on the node (the GPUs have a
    /// Type, without which slurmctld 22.05 keeps device bitmaps for only one of
    /// the two).  Stock loses the device variables of whichever shared GRES
    /// comes first in GresTypes (deviation 2), and with shard before mps takes
    /// the MPS percentage from the GPU's shard count (deviation 4).
    fn grestypes_combinations(bed) {
        for types in ["gpu,mps", "gpu,shard", "gpu,mps,shard", "gpu,shard,mps"] {
            let has = |n: &str| types.split(',').any(|t| t == n);
            let mut node = vec!["gpu:tesla:4".to_string()];
            if has("mps") {
                node.push("mps:400".into());
            }
            if has("shard") {
                node.push("shard:8".into());
            }
            let mut config = mps_config(types, &node.join(","), "Name=gpu Type=tesla File={DEV}/nvidia[0-3]\n");
            config.dump_prolog_epilog_env = true;
            let mut scn =
                Scenario::new(&format!("types-{types}"), config).run(Run::slurmd_g("conf")).run(Run::srun("gpu", &["--gres=gpu:1"])).run(Run::srun("nothing", &[]));
            if has("mps") {
                scn = scn.run(Run::srun("mps", &["--gres=mps:50"]));
            }
            if has("shard") {
                scn = scn.run(Run::srun("shard", &["--gres=shard:1"]));
            }
            let first_shared = types.split(',').nth(1).unwrap_or("");
            let both = has("mps") && has("shard");
            let (stock, ours) = compare(&scn, &|d| {
                device_order(d)
                    // Deviation 2: the shared GRES listed first loses its device
                    // variables to the one listed after it (stock).
                    || (both && d.run == first_shared && d.block.starts_with(first_shared) && kept_devices(d))
                    // Deviation 4: shard before mps: stock divides by the shard
                    // count of the GPU (2): 50 x 100 / 2.
                    || (types == "gpu,shard,mps" && d.run == "mps" && d.var == "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" && d.stock.as_deref() == Some("2500"))
            });
            // What stock does instead (the deviations are really exercised).
            if types == "gpu,mps,shard" {
                assert_eq!(block(&stock, "mps", "mps").get("CUDA_VISIBLE_DEVICES"), None, "stock: cleared by gres/shard");
            }
            if types == "gpu,shard,mps" {
                assert_eq!(block(&stock, "shard", "shard").get("CUDA_VISIBLE_DEVICES"), None, "stock: cleared by gres/mps");
                assert_eq!(block(&stock, "mps", "mps").get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), Some("2500"), "stock: the shard count");
            }
            let gpu = block(&ours, "gpu", "gpu");
            assert_eq!(gpu.get("CUDA_VISIBLE_DEVICES"), Some("0"), "{types}");
            assert_eq!(gpu.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), None, "{types}");
            assert_eq!(gpu.get("SLURM_SHARDS_ON_NODE"), None, "{types}");
            assert_vars(block(&ours, "nothing", "nothing"), &[]);
            if has("mps") {
                assert_vars(block(&ours, "mps", "mps"), &mps_vars("SLURM_STEP_GPUS", "0", "50"));
                let p = block(&ours, "mps", "prolog");
                assert_eq!(p.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), Some("50"), "{types}");
            }
            if has("shard") {
                assert_vars(block(&ours, "shard", "shard"), &shard_vars("SLURM_STEP_GPUS", "0", "1", "1"));
            }
        }
    }

    // ---------------------------------------------------------------------------
    // A GPU is either whole or shared
    // ---------------------------------------------------------------------------

    /// gres.shtml: "once a GPU has been allocated as a gres/gpu resource it
    /// will not be available as a gres/mps", nor as gres/shard, and the other
    /// way round, with jobs overlapping.  (With mps and shard both on a node,
    /// slurmctld 22.05 links only one of them to the GPUs and may place an MPS
    /// job on a GPU allocated whole, with either plugin set: not tested here.)
    fn gpu_allocated_whole_is_not_shared_at_the_same_time(bed) {
        for (types, node, shared_req) in [("gpu,mps", "gpu:tesla:2,mps:200", "--gres=mps:50"), ("gpu,shard", "gpu:tesla:2,shard:4", "--gres=shard:1")] {
            let mut config = mps_config(types, node, "Name=gpu Type=tesla File={DEV}/nvidia[0-1]\n");
            config.fake_gpus = 2;
            let (_, ours) = compare_flow(
                &format!("whole-or-shared-{types}"),
                &config,
                &|c| {
                    let (mut runs, mut held) = (Vec::new(), Held::new());
                    hold(c, &mut held, &["--gres=gpu:1"]); // GPU 0 whole
                    runs.push(step(c, "shared", &[shared_req]));
                    hold(c, &mut held, &[shared_req]); // GPU 1 shared
                    runs.push(step(c, "no-whole-gpu", &["--immediate=1", "--gres=gpu:1"]));
                    runs.push(step(c, "shared-again", &[shared_req]));
                    release(c, &mut held);
                    runs.push(step(c, "both", &["--gres=gpu:2"]));
                    runs
                },
                &device_order,
            );
            for run in ["shared", "shared-again"] {
                let b = block(&ours, run, run);
                assert_eq!(b.get("CUDA_VISIBLE_DEVICES"), Some("1"), "{types} {run}: GPU 0 is allocated whole");
                assert_eq!(b.get("SLURM_STEP_GPUS"), Some("1"), "{types} {run}");
            }
            assert!(!ours.run("no-whole-gpu").ok, "{types}: GPU 0 is held whole and GPU 1 shared");
            assert_eq!(block(&ours, "both", "both").get("CUDA_VISIBLE_DEVICES"), Some("0,1"));
        }
    }

    // ---------------------------------------------------------------------------
    // Configuration errors and slurmd -G
    // ---------------------------------------------------------------------------

    /// The final record lists of `slurmd -G` are the stock ones, line for line,
    /// for the configurations of gres.shtml and the edge cases of the split.
    fn slurmd_g_final_lists_match_stock(bed) {
        let cases: &[(&str, &str, &str, &str)] = &[
            // (name, GresTypes, node Gres, gres.conf)
            ("gpu,mps without mps anywhere", "gpu,mps", "gpu:4", ""),
            ("mps Count only", "gpu,mps", "gpu:4,mps:400", "Name=mps Count=400\n"),
            ("shard remainder", "gpu,shard", "gpu:4,shard:10", "Name=shard Count=10\n"),
            ("per-file with a range", "gpu,mps", "gpu:4,mps:301", "Name=mps Count=301 File={DEV}/nvidia[0-1]\n"),
            ("file without a GPU", "gpu,shard", "gpu:2,shard:4", "Name=shard Count=2 File={DEV}/nvidia0\nName=shard Count=2 File={DEV}/nvidia3\n"),
            ("both, shard first", "gpu,shard,mps", "gpu:4,mps:400,shard:8", "Name=mps Count=400\n"),
            ("both, mps first", "gpu,mps,shard", "gpu:4,mps:400,shard:8", "Name=shard Count=8\n"),
            ("shared only in GresTypes", "gpu,mps,shard", "gpu:4", ""),
        ];
        for (name, types, node, extra) in cases {
            let gpus = if name.contains("without a GPU") { 2 } else { 4 };
            let mut config = mps_config(types, node, &gpus_plus(gpus, extra));
            config.fake_gpus = 4;
            let g: Vec<SlurmdG> =
                [PluginSet::Stock, PluginSet::Ours].into_iter().map(|p| Cluster::slurmd_g(&ClusterConfig { plugins: p, ..config.clone() })).collect();
            g[1].assert_ours_loaded(&types.split(',').map(|t| format!("gres_{t}")).collect::<Vec<_>>().iter().map(String::as_str).collect::<Vec<_>>());
            assert!(!g[0].gres_lines().is_empty(), "{name}: {}", g[0].output);
            assert_eq!(g[0].gres_lines(), g[1].gres_lines(), "{name}\nstock:\n{}\nours:\n{}", g[0].normalized(), g[1].normalized());
            if *name == "gpu,mps without mps anywhere" {
                // The GPU record is split per device file, mps or no mps.
                assert_eq!(g[1].gres_lines().iter().filter(|l| l.contains("Name=gpu") && l.contains("Count=1 ")).count(), 4, "{}", g[1].normalized());
            }
        }
    }

    /// With `fake_gpus.conf` (Slurm's test stand-in for detection) each plugin
    /// also logs its final list in the `GRES_PARSABLE` form Slurm's own tests
    /// read: the same lines as stock, in the same order.
    fn fake_gpus_parsable_lists_match_stock(bed) {
        let mut config = mps_config("gpu,mps,shard", "gpu:tesla:2,mps:200,shard:4", "Name=mps Count=200\n");
        config.fake_gpus = 2;
        config.fake_gpus_conf = Some("tesla|4|0-1|(null)|{DEV}/nvidia0\ntesla|4|2-3|(null)|{DEV}/nvidia1\n".into());
        let parsable = |g: &SlurmdG| -> Vec<String> {
            g.normalized().lines().filter_map(|l| l.find("GRES_PARSABLE").or_else(|| l.find("Final normalized")).map(|i| l[i..].to_string())).collect()
        };
        let stock = parsable(&Cluster::slurmd_g(&config));
        let ours = parsable(&Cluster::slurmd_g(&ClusterConfig { plugins: PluginSet::Ours, ..config.clone() }));
        // gres/mps's list, then gres/shard's.
        assert_eq!(stock.iter().filter(|l| l.starts_with("Final normalized")).count(), 2, "{stock:#?}");
        assert!(stock.iter().any(|l| l.starts_with("GRES_PARSABLE[shard](2):tesla|4|2-3|")), "{stock:#?}");
        assert_eq!(stock, ours);
    }

    /// Two mps lines without File: the stock plugin stops slurmd with
    /// `fatal()`; ours fails node_config_load with the same message, and slurmd
    /// does not start either.
    fn bad_shared_configuration_stops_slurmd(bed) {
        for plugins in [PluginSet::Stock, PluginSet::Ours] {
            let mut config = mps_config("gpu,mps", "gpu:4,mps:400", &gpus_plus(4, "Name=mps Type=a Count=200\nName=mps Type=b Count=200\n"));
            config.plugins = plugins.clone();
            config.start_timeout = Duration::from_secs(20);
            config.verify_ours_loaded = false;
            let err = match Cluster::try_start(config) {
                Ok(_) => panic!("{}: slurmd started with a bad mps configuration", plugins.label()),
                Err(e) => e,
            };
            assert!(err.contains("bad configuration, multiple configurations without \"File\""), "{}: {err}", plugins.label());
        }
    }

    /// `scontrol reconfigure` into a broken mps configuration.  What our
    /// plugin refuses (two mps records without `File`) leaves our slurmd
    /// serving with the devices it had, where stock's `fatal()` stops it, up
    /// to 23.02 (from 23.11 slurmd re-executes itself and either plugin stops
    /// the new process, as at a start); what
    /// slurmd's own gres.conf parser refuses before any plugin runs (records
    /// of one GRES with and without `File`) stops slurmd with either plugin,
    /// and this test asserts nothing of ours there beyond that.
    fn broken_mps_reconfigure(bed) {
        let good = gpus_plus(4, "Name=mps Count=400\n");
        let cases = [
            ("ours-refuses", "Name=mps Type=a Count=200\nName=mps Type=b Count=200\n", "bad configuration, multiple configurations without \"File\""),
            ("slurmd-refuses", "Name=mps Count=200 File={DEV}/nvidia0\nName=mps Count=200\n", "some records have \"File\" specification while others do not"),
        ];
        for (case, broken, marker) in cases {
            for plugins in [PluginSet::Stock, PluginSet::Ours] {
                let mut config = mps_config("gpu,mps", "gpu:4,mps:400", &good);
                config.plugins = plugins.clone();
                let c = Cluster::start(config);
                let path = c.layout.etc.join("gres.conf");
                std::fs::write(&path, c.layout.subst(&gpus_plus(4, broken), "gpunode")).expect("rewriting gres.conf");
                c.scontrol(&["reconfigure"]).expect_ok("scontrol reconfigure");
                let deadline = Instant::now() + Duration::from_secs(20);
                while Instant::now() < deadline && !c.log(Daemon::Slurmd).contains(marker) {
                    std::thread::sleep(Duration::from_millis(200));
                }
                std::thread::sleep(Duration::from_secs(1));
                let log = c.log(Daemon::Slurmd);
                let label = format!("{case}, {}", plugins.label());
                assert!(log.contains(marker), "{label}: slurmd did not reread gres.conf:\n{}", c.log_tails(30));
                // From 23.11 slurmd executes itself again to reconfigure: the
                // new process has no previous device list to keep, and under
                // -D (the test bed's) there is no old process to resume.
                let survives = case == "ours-refuses" && plugins == PluginSet::Ours && !bed.behaviour.reconfigure_reexecs;
                if survives {
                    assert!(log.contains("keeping the previous device list"), "{label}: {}", c.log_tails(30));
                    assert!(c.pid(Daemon::Slurmd).is_some(), "{label}: our slurmd died:\n{}", c.log_tails(30));
                    c.assert_ours_loaded(&["gres_gpu", "gres_mps"]);
                    let out = c.srun(&["--gres=mps:50", "printenv", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]).expect_ok("srun after the broken reconfigure");
                    assert_eq!(out.stdout.trim(), "50", "{label}: {out}");
                } else {
                    assert!(log.contains("fatal:"), "{label}: {}", c.log_tails(30));
                    assert!(c.pid(Daemon::Slurmd).is_none(), "{label}: slurmd survived:\n{}", c.log_tails(30));
                }
            }
        }
    }
}
