//! Jobs across nodes, stock plugins and ours side by side, on every
//! release of the test bed: a cluster of one slurmctld and three slurmd
//! nodes on this machine (each slurmd in network, UTS and mount namespaces
//! of its own, `gres_test_harness::netns`), the nodes with different GPU
//! counts, types and MPS counts.  Every task of every step on every node,
//! the batch script, and Prolog and Epilog on every node record their
//! environment, which is compared between stock and ours; on both sides
//! each node's GPUs are checked against slurmctld's allocation for that
//! node (`scontrol -d show job`, printed by the batch script).  The proof
//! of loading covers slurmctld and the slurmd and slurmstepd of every node
//! (the harness, at start and after the runs).
//!
//! Needs root, the Debian Slurm packages, iproute2 and util-linux
//! (`nsenter`, `unshare`), and `cargo build --workspace`.

use gres_test_harness as harness;

use harness::testbed::TestBed;
use harness::*;
use std::collections::{BTreeMap, BTreeSet};

/// Three nodes: n1 four a100 (MPS 100 each), n2 two v100 (MPS 200 each),
/// n3 one a100 and no MPS.  Four cores each; Prolog and Epilog dump their
/// environment on every node.  `GresTypes=gpu,mps`: with shard after mps,
/// stock's gres/shard clears an MPS task's device variables
/// (docs/deviations.md, MPS/shard 2; shards have a cluster of their own).
fn three_nodes() -> ClusterConfig {
    let mut c = ClusterConfig::multi(
        PluginSet::Stock,
        vec![NodeConfig::new("n1", 4, "gpu:a100:4,mps:400"), NodeConfig::new("n2", 2, "gpu:v100:2,mps:400"), NodeConfig::new("n3", 1, "gpu:a100:1")],
    );
    c.gres_conf = "NodeName=n1 Name=gpu Type=a100 File={DEV}/n1/nvidia[0-3]\n\
                   NodeName=n1 Name=mps Count=400 File={DEV}/n1/nvidia[0-3]\n\
                   NodeName=n2 Name=gpu Type=v100 File={DEV}/n2/nvidia[0-1]\n\
                   NodeName=n2 Name=mps Count=400 File={DEV}/n2/nvidia[0-1]\n\
                   NodeName=n3 Name=gpu Type=a100 File={DEV}/n3/nvidia0\n"
        .into();
    c.gres_types = "gpu,mps".into();
    c.dump_prolog_epilog_env = true;
    c
}

/// The line prefix of slurmctld's per-node allocation lines in a job's
/// output ([`job`]).
const ALLOC: &str = "ALLOC ";

/// A batch script: prints slurmctld's allocation per node (`scontrol -d
/// show job`: its `Nodes=... GRES=...(IDX:...)` lines, prefixed
/// [`ALLOC`]), records its own environment (tag `batch`), then runs
/// `steps` (`$D` is the dump helper; steps run one after the other, so
/// that their order is the same on both sides).
fn job(steps: &str) -> String {
    format!(
        "#!/bin/bash\nscontrol -d show job \"$SLURM_JOB_ID\" | sed -n 's/^ *\\(Nodes=.*\\)/{ALLOC}\\1/p'\nD=\"$GRES_RS_DUMP_ENV\"\n\"$D\" batch >/dev/null\n{steps}\n"
    )
}

/// The GPU indices a `GRES=` value of `scontrol -d show job` names for a
/// node: `gpu:a100:2(IDX:0-1)`; MPS and shards on the GPUs they use,
/// `mps:100(IDX:0)` (22.05) or, from 23.11 on, per GPU allocated/available
/// `mps:100(100/100,0/100)` (stepmgr/gres_stepmgr.c `_build_shared_gres_details`).
fn gpu_indices(gres: &str) -> BTreeSet<u32> {
    let mut v = BTreeSet::new();
    // Split at the commas outside parentheses.
    let mut depth = 0;
    let mut items = vec![String::new()];
    for ch in gres.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(String::new());
                continue;
            }
            _ => {}
        }
        items.last_mut().unwrap().push(ch);
    }
    for item in items.iter().filter(|i| ["gpu", "mps", "shard"].iter().any(|g| i.starts_with(g))) {
        if let Some(idx) = item.split("IDX:").nth(1).and_then(|r| r.split(')').next()) {
            v.extend(indices(idx));
        } else if let Some(per_gpu) = item.split_once('(').map(|(_, r)| r.trim_end_matches(')')).filter(|r| r.contains('/')) {
            for (i, share) in per_gpu.split(',').enumerate() {
                if share.split('/').next().and_then(|a| a.parse::<u64>().ok()).is_some_and(|a| a > 0) {
                    v.insert(i as u32);
                }
            }
        }
    }
    v
}

/// `0-1,3` -> {0, 1, 3}.
fn indices(list: &str) -> BTreeSet<u32> {
    let mut v = BTreeSet::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.parse::<u32>().ok()),
        }
    }
    v
}

/// slurmctld's GPUs per node from the [`ALLOC`] lines of a run's output
/// (`Nodes=n[1-2]` expanded for the names of this file's nodes).
fn allocation(output: &str) -> BTreeMap<String, BTreeSet<u32>> {
    let mut m = BTreeMap::new();
    for line in output.lines().filter_map(|l| l.strip_prefix(ALLOC)) {
        let Some(nodes) = field(line, "Nodes") else { continue };
        let gpus = field(line, "GRES").map(|g| gpu_indices(&g)).unwrap_or_default();
        for n in expand_nodes(&nodes) {
            m.insert(n, gpus.clone());
        }
    }
    m
}

/// `n[1-3]`, `n[1,3]`, `n2` -> node names.
fn expand_nodes(list: &str) -> Vec<String> {
    match list.split_once('[') {
        None => list.split(',').map(str::to_string).collect(),
        Some((prefix, rest)) => indices(rest.trim_end_matches(']')).into_iter().map(|i| format!("{prefix}{i}")).collect(),
    }
}

/// Checks every recorded environment of the sbatch runs of `r` against
/// slurmctld's allocation for its node: the batch script's, Prolog's and
/// Epilog's `SLURM_JOB_GPUS` are that node's GPUs, and a task's
/// `SLURM_STEP_GPUS` and `CUDA_VISIBLE_DEVICES` (no cgroup: global
/// indices) are among them.  Returns one line per mismatch.
fn check_against_allocation(r: &ScenarioResult, sbatch_runs: &[&str]) -> Vec<String> {
    let mut bad = Vec::new();
    for label in sbatch_runs {
        let run = r.run(label);
        let alloc = allocation(&run.output);
        if alloc.is_empty() {
            bad.push(format!("{} [{label}]: no allocation lines in the job's output:\n{}", r.plugins.label(), run.output));
            continue;
        }
        for b in &run.blocks {
            let node = b.node();
            let Some(want) = alloc.get(node) else {
                bad.push(format!("{} [{label}] {}: node {node:?} is not in the allocation {alloc:?}", r.plugins.label(), b.describe()));
                continue;
            };
            let set = |k: &str| b.get(k).map(indices);
            let job_level = matches!(b.tag.as_str(), "batch" | "prolog" | "epilog");
            if job_level {
                let got = set("SLURM_JOB_GPUS").unwrap_or_default();
                if &got != want {
                    bad.push(format!("{} [{label}] {}: SLURM_JOB_GPUS {got:?}, slurmctld allocated {want:?}", r.plugins.label(), b.describe()));
                }
            }
            for k in ["SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"] {
                if let Some(got) = set(k) {
                    if !got.is_subset(want) || (job_level && &got != want) {
                        bad.push(format!("{} [{label}] {}: {k} {got:?} outside slurmctld's {want:?} for {node}", r.plugins.label(), b.describe()));
                    }
                }
            }
        }
        // Every node of the allocation had its Prolog and Epilog.
        for tag in ["prolog", "epilog"] {
            let seen: BTreeSet<&str> = run.blocks.iter().filter(|b| b.tag == tag).map(|b| b.node()).collect();
            let want: BTreeSet<&str> = alloc.keys().map(String::as_str).collect();
            if seen != want {
                bad.push(format!("{} [{label}]: {tag} ran on {seen:?}, the job's nodes are {want:?}", r.plugins.label()));
            }
        }
    }
    bad
}

/// The [`ALLOC`] lines of every run (for messages).
fn alloc_lines(r: &ScenarioResult) -> String {
    r.runs.iter().flat_map(|run| run.output.lines().filter(|l| l.starts_with(ALLOC)).map(move |l| format!("  [{}] {l}\n", run.label))).collect()
}

/// Runs `scn` stock and ours, compares them, and checks that every run
/// succeeded on the stock side (a scenario that fails the same way twice
/// proves nothing) and that both sides agree with slurmctld's
/// allocation on every node.
#[track_caller]
fn check(bed: &TestBed, scn: &Scenario) {
    let Some((stock, ours)) = bed.differential(scn, &scn.name) else { return };
    let sbatch: Vec<&str> = scn.runs.iter().filter(|r| matches!(r.kind, RunKind::Sbatch { .. })).map(|r| r.label.as_str()).collect();
    let mut bad = Vec::new();
    for r in &stock.runs {
        if !r.ok {
            bad.push(format!("[{}] stock run ended {}:\n{}", r.label, r.outcome, r.output));
        }
    }
    for side in [&stock, &ours] {
        bad.extend(check_against_allocation(side, &sbatch));
    }
    assert!(bad.is_empty(), "scenario {}:\n  {}\nslurmctld's allocations:\n{}", scn.name, bad.join("\n  "), alloc_lines(&stock));
}

/// Steps of the three-node job: every node, a subset (`-r`), no GRES,
/// fewer GPUs than the job.
const ACROSS_STEPS: &str = r#"srun -l "$D" all
srun -r1 -N2 "$D" subset
srun -r2 -N1 "$D" last
srun --gres=none "$D" none
srun -N3 --gpus-per-node=1 "$D" one-each
"#;

/// `--gpus-per-task` steps, one per `--gpu-bind` form.
const BIND_STEPS: &str = r#"srun "$D" inherit
srun --gpu-bind=none "$D" bind-none
srun --gpu-bind=closest "$D" bind-closest
srun --gpu-bind=single:1 "$D" bind-single
srun --gpu-bind=per_task:1 "$D" bind-per-task
srun --gpu-bind=map_gpu:1,0 "$D" bind-map
srun --gpu-bind=mask_gpu:0x1,0x2 "$D" bind-mask
srun -n2 --ntasks-per-node=1 --gpus-per-task=1 "$D" one-per-node
"#;

/// MPS steps on nodes whose GPUs have different MPS counts.
const MPS_STEPS: &str = r#"srun "$D" all
srun --gres=mps:50 "$D" half
srun -r1 -N1 "$D" second
"#;

per_release! {
    /// Jobs over three nodes with different GPU counts and types:
    /// `--gpus-per-node`, `--gpus`, typed requests, steps on a subset of
    /// the nodes (`-r`), a `--gres=none` step, `--gpus-per-task` with each
    /// `--gpu-bind` form, MPS with different per-GPU counts per node, and
    /// `srun` allocations from outside.
    fn across_nodes(bed) {
        let scn = Scenario::new("across-nodes", three_nodes())
            .run(Run::sbatch("per-node", &["-N3", "--gpus-per-node=1"], &job(ACROSS_STEPS)))
            .run(Run::sbatch("gpus-5", &["-N3", "--gpus=5"], &job(ACROSS_STEPS)))
            .run(Run::sbatch("typed", &["-N2", "--gpus-per-node=a100:1"], &job("srun -l \"$D\" all\nsrun -r1 -N1 \"$D\" second\n")))
            .run(Run::sbatch("per-task", &["-N2", "-n4", "--gpus-per-task=1", "-w", "n1,n2"], &job(BIND_STEPS)))
            .run(Run::sbatch("mps", &["-N2", "--gres=mps:100"], &job(MPS_STEPS)))
            .run(Run::srun("srun-per-node", &["-N3", "--gpus-per-node=1", "-l"]))
            .run(Run::srun("srun-gpus", &["-N2", "-n3", "--gpus=3"]))
            .run(Run::srun("srun-per-task", &["-N2", "-n4", "--gpus-per-task=1", "-w", "n1,n2"]))
            .run(Run::srun("srun-per-task-single", &["-N2", "-n3", "--gpus-per-task=1", "--gpu-bind=single:1", "-w", "n1,n2"]))
            .run(Run::srun("srun-none", &["-N3"]));
        check(bed, &scn);
    }
}

#[test]
fn allocation_lines() {
    let out = "x\nALLOC Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:0-1),mps:0(0/100)\nALLOC Nodes=n3 CPU_IDs=0 Mem=0 GRES=gpu:a100(CNT:1)(IDX:0)\n";
    let a = allocation(out);
    assert_eq!(a["n1"], BTreeSet::from([0, 1]));
    assert_eq!(a["n2"], BTreeSet::from([0, 1]));
    assert_eq!(a["n3"], BTreeSet::from([0]));
    assert_eq!(gpu_indices("gpu:a100:1(IDX:0,2-3)"), BTreeSet::from([0, 2, 3]));
    assert_eq!(gpu_indices("mps:100(IDX:1)"), BTreeSet::from([1]));
    assert_eq!(gpu_indices("mps:150(0/100,100/200,50/100)"), BTreeSet::from([1, 2]));
}
