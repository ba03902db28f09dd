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

/// n1 two a100 with 4 shards each, n2 three t4 with 2 shards each, n3 no
/// GPU at all; `GresTypes=gpu,shard`; `PrologFlags=Alloc` (Prolog on every
/// node at allocation, also for a job that runs no step).
fn shards_and_more() -> ClusterConfig {
    let mut c = ClusterConfig::multi(
        PluginSet::Stock,
        vec![NodeConfig::new("n1", 2, "gpu:a100:2,shard:8"), NodeConfig::new("n2", 3, "gpu:t4:3,shard:6"), NodeConfig::new("n3", 0, "")],
    );
    c.gres_conf = "NodeName=n1 Name=gpu Type=a100 File={DEV}/n1/nvidia[0-1]\n\
                   NodeName=n1 Name=shard Count=8 File={DEV}/n1/nvidia[0-1]\n\
                   NodeName=n2 Name=gpu Type=t4 File={DEV}/n2/nvidia[0-2]\n\
                   NodeName=n2 Name=shard Count=6 File={DEV}/n2/nvidia[0-2]\n"
        .into();
    c.gres_types = "gpu,shard".into();
    // Heterogeneous jobs are scheduled by the backfill scheduler only.
    c.extra_slurm_conf = vec!["PrologFlags=Alloc".into(), "SchedulerParameters=bf_interval=1".into()];
    c.dump_prolog_epilog_env = true;
    c
}

/// The line prefix of slurmctld's per-node allocation lines in a job's
/// output ([`job`]).
const ALLOC: &str = "ALLOC ";

/// Prints slurmctld's allocation per node of job `$SLURM_JOB_ID` (every
/// component of a heterogeneous job): the `Nodes=... GRES=...(IDX:...)`
/// lines of `scontrol -d show job`, as `ALLOC <job id> <het job id, else
/// the job id> Nodes=...`.
const PRINT_ALLOC: &str = r#"scontrol -d show job "$SLURM_JOB_ID" | awk '{ for (i = 1; i <= NF; i++) { if ($i ~ /^JobId=/) { split($i, a, "="); j = a[2]; h = j } if ($i ~ /^HetJobId=/) { split($i, a, "="); h = a[2] } } } /^ *Nodes=/ { sub(/^ */, ""); print "ALLOC " j " " h " " $0 }'"#;

/// A batch script: prints slurmctld's allocation ([`PRINT_ALLOC`]),
/// records its own environment (tag `batch`), then runs `steps` (`$D` is
/// the dump helper; steps run one after the other, so that their order is
/// the same on both sides).
fn job(steps: &str) -> String {
    format!("#!/bin/bash\n{PRINT_ALLOC}\nD=\"$GRES_RS_DUMP_ENV\"\n\"$D\" batch >/dev/null\n{steps}\n")
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

/// slurmctld's allocations: GPUs per (job, node), and the heterogeneous
/// job each job belongs to (itself when none).
#[derive(Debug, Default)]
struct Allocation {
    gpus: BTreeMap<(i64, String), BTreeSet<u32>>,
    het: BTreeMap<i64, i64>,
}

impl Allocation {
    /// The GPUs of `job` on `node`: its own, or (for the tasks of a
    /// heterogeneous step, whose `SLURM_JOB_ID` is the leader's) those of
    /// the component of het job `job` that holds `node`.
    fn get(&self, job: i64, node: &str) -> Option<&BTreeSet<u32>> {
        self.gpus.get(&(job, node.to_string())).or_else(|| {
            let mut components = self.het.iter().filter(|(_, h)| **h == job).map(|(j, _)| *j);
            components.find_map(|j| self.gpus.get(&(j, node.to_string())))
        })
    }
}

/// slurmctld's allocations from the [`ALLOC`] lines of a run's output
/// (`Nodes=n[1-2]` expanded for the names of this file's nodes).
fn allocation(output: &str) -> Allocation {
    let mut m = Allocation::default();
    for line in output.lines().filter_map(|l| l.strip_prefix(ALLOC)) {
        let mut words = line.splitn(3, ' ');
        let (Some(Ok(job)), Some(Ok(het)), Some(rest)) = (words.next().map(str::parse::<i64>), words.next().map(str::parse::<i64>), words.next()) else {
            continue;
        };
        let Some(nodes) = field(rest, "Nodes") else { continue };
        let gpus = field(rest, "GRES").map(|g| gpu_indices(&g)).unwrap_or_default();
        m.het.insert(job, het);
        for n in expand_nodes(&nodes) {
            m.gpus.insert((job, n), gpus.clone());
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

/// Checks every recorded environment of the runs `labels` of `r` (which
/// print [`PRINT_ALLOC`]) against slurmctld's allocation of its job on
/// its node: the batch script's, Prolog's and Epilog's `SLURM_JOB_GPUS`
/// are that node's GPUs, and a task's `SLURM_STEP_GPUS` and
/// `CUDA_VISIBLE_DEVICES` (no cgroup: global indices) are among them;
/// every node of every job ran Prolog and Epilog.  Returns one line per
/// mismatch.
fn check_against_allocation(r: &ScenarioResult, labels: &[&str]) -> Vec<String> {
    let mut bad = Vec::new();
    for label in labels {
        let run = r.run(label);
        let alloc = allocation(&run.output);
        if alloc.gpus.is_empty() {
            bad.push(format!("{} [{label}]: no allocation lines in the job's output:\n{}", r.plugins.label(), run.output));
            continue;
        }
        for b in &run.blocks {
            let node = b.node();
            let Some(want) = alloc.get(b.job_id(), node) else {
                bad.push(format!("{} [{label}] {}: job {} on {node:?} is not in the allocation {alloc:?}", r.plugins.label(), b.describe(), b.job_id()));
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
        // Every node of every job had its Prolog and Epilog.
        for tag in ["prolog", "epilog"] {
            let seen: BTreeSet<(i64, &str)> = run.blocks.iter().filter(|b| b.tag == tag).map(|b| (b.job_id(), b.node())).collect();
            let want: BTreeSet<(i64, &str)> = alloc.gpus.keys().map(|(j, n)| (*j, n.as_str())).collect();
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
/// allocation on every node; the `--gpu-bind=verbose` lines must agree
/// too, and the runs `verbose_runs` must have printed some.
#[track_caller]
fn check(bed: &TestBed, scn: &Scenario, verbose_runs: &[&str]) {
    let Some((stock, ours)) = bed.differential(scn, &scn.name) else { return };
    // The batch jobs and salloc commands print their allocation.
    let sbatch: Vec<&str> = scn.runs.iter().filter(|r| matches!(r.kind, RunKind::Sbatch { .. } | RunKind::Salloc { .. })).map(|r| r.label.as_str()).collect();
    // `--gpu-bind=verbose` lines, sorted (every task of every node prints
    // its own).
    let verbose: BTreeMap<String, Vec<String>> = gpu::verbose_lines(&stock).into_iter().filter(|(_, v)| !v.is_empty()).collect();
    eprintln!("--gpu-bind=verbose lines (stock): {verbose:#?}");
    let mut bad = gpu::compare_verbose(&stock, &ours);
    for label in verbose_runs {
        if !verbose.contains_key(*label) {
            bad.push(format!("[{label}] stock printed no --gpu-bind=verbose line"));
        }
    }
    for r in &stock.runs {
        if !r.ok {
            bad.push(format!("[{}] stock run ended {}:\n{}", r.label, r.outcome, r.output));
        }
    }
    eprintln!("slurmctld's allocations (stock):\n{}", alloc_lines(&stock));
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
srun --gpu-bind=verbose,map_gpu:1,0 "$D" verbose-map
"#;

/// MPS steps on nodes whose GPUs have different MPS counts.
const MPS_STEPS: &str = r#"srun "$D" all
srun --gres=mps:50 "$D" half
srun -r1 -N1 "$D" second
"#;

/// Shard steps on nodes whose GPUs have different shard counts.
const SHARD_STEPS: &str = r#"srun -l "$D" all
srun --gres=shard:1 "$D" one
srun -r1 -N1 "$D" second
srun --gres=none "$D" none
"#;

/// A second job on the same two nodes while this one holds a GPU of each:
/// its GPUs are offset (GPU 1 of n1 and of n2).
fn offset_steps() -> String {
    format!(
        r#"cat >inner.sh <<'END'
#!/bin/bash
{PRINT_ALLOC}
"$GRES_RS_DUMP_ENV" inner-batch >/dev/null
srun -l "$GRES_RS_DUMP_ENV" inner
END
B=$(sbatch --parsable -N2 -w n1,n2 --gpus-per-node=1 --export=GRES_RS_DUMP_ENV,SLURM_CONF,PATH -o inner-%j.out inner.sh)
# (sbatch --wait polls every few seconds)
while [ -n "$(squeue -h -j "$B" -o %i 2>/dev/null)" ]; do sleep 0.2; done
cat "inner-$B.out"
srun -l "$D" outer
"#
    )
}

/// Steps of a heterogeneous job whose first component has no GPU.
const HET_STEPS: &str = r#"srun --het-group=0,1 -l "$D" both
srun --het-group=1 "$D" gpus
srun --het-group=0 "$D" no-gpu
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
            .run(Run::srun("srun-none", &["-N3"]))
            .run(Run::srun("srun-typed-gpus", &["-N2", "--gpus=a100:3"]))
            .run(Run::srun("srun-verbose-per-task", &["-N3", "-n4", "--gpus-per-task=1", "--gpu-bind=verbose,per_task:1"]));
        check(bed, &scn, &["per-task", "srun-verbose-per-task"]);
    }

    /// Shards with different per-GPU counts per node, a job whose GPUs are
    /// offset by another job's on every node, a heterogeneous job whose
    /// first component (on the node without GPUs) has none, and under
    /// `PrologFlags=Alloc` an allocation that runs no step.
    fn shards_offsets_het_alloc(bed) {
        let scn = Scenario::new("shards-offsets-het-alloc", shards_and_more())
            .run(Run::sbatch("shard", &["-N2", "--gres=shard:2"], &job(SHARD_STEPS)))
            .run(Run::sbatch("offset", &["-N2", "-w", "n1,n2", "--gpus-per-node=1"], &job(&offset_steps())))
            .run(Run::sbatch("het", &["-N1", "-w", "n3", ":", "-N2", "-w", "n1,n2", "--gpus-per-node=1"], &job(HET_STEPS)))
            .run(Run::salloc("alloc-no-step", &["-N2", "-w", "n1,n2", "--gpus-per-node=1"], &["/bin/bash", "-c", PRINT_ALLOC]));
        check(bed, &scn, &[]);
    }
}

#[test]
fn allocation_lines() {
    let out = "x\nALLOC 7 7 Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:0-1),mps:0(0/100)\nALLOC 9 8 Nodes=n3 CPU_IDs=0 Mem=0 GRES=gpu:a100:1(IDX:0)\n";
    let a = allocation(out);
    assert_eq!(a.get(7, "n1"), Some(&BTreeSet::from([0, 1])));
    assert_eq!(a.get(7, "n2"), Some(&BTreeSet::from([0, 1])));
    assert_eq!(a.get(9, "n3"), Some(&BTreeSet::from([0])));
    // A heterogeneous step's task carries the leader's job id.
    assert_eq!(a.get(8, "n3"), Some(&BTreeSet::from([0])));
    assert_eq!(a.get(8, "n1"), None);
    assert_eq!(gpu_indices("gpu:a100:1(IDX:0,2-3)"), BTreeSet::from([0, 2, 3]));
    assert_eq!(gpu_indices("mps:100(IDX:1)"), BTreeSet::from([1]));
    assert_eq!(gpu_indices("mps:150(0/100,100/200,50/100)"), BTreeSet::from([1, 2]));
}
