//! Scenarios and the stock-vs-ours differential.
//!
//! A [`Scenario`] is a cluster configuration plus a list of [`Run`]s (srun,
//! sbatch, salloc, `slurmd -G`). Every task/prolog/epilog that calls the
//! env-dump helper (`$GRES_RS_DUMP_ENV <tag>`, done automatically for
//! `Run::srun`) leaves an [`EnvBlock`]. [`differential`] runs a scenario on
//! the stock plugins and on ours and compares all GPU-related variables
//! field by field ([`compare_envs`]).
//!
//! ```ignore
//! let scn = Scenario::new("two-gpus", ClusterConfig::gpus(PluginSet::Stock, 4))
//!     .run(Run::srun("one", &["--gres=gpu:2"]))
//!     .run(Run::sbatch("batch", &["--gres=gpu:4", "-n3"],
//!          "\"$GRES_RS_DUMP_ENV\" batch\nsrun -n1 --exclusive --gres=gpu:1 \"$GRES_RS_DUMP_ENV\" step").unordered());
//! differential(&scn);
//! ```

pub use crate::envdump::{collect_dumps, dump_env_script_text, is_gpu_var, EnvBlock, PLUGIN_ENV_VARS, REQUEST_ENV_VARS};
use crate::{Cluster, ClusterConfig, PluginSet};
use std::collections::BTreeSet;
use std::time::Duration;

/// A batch script (`sbatch --gres=gpu:4 -n3`) that records its own
/// environment and starts three concurrent `srun --exclusive -n1
/// --gres=gpu:1` steps that record theirs (tags `batch` and `step`).
pub const CONCURRENT_STEPS: &str = r#"#!/bin/bash
"$GRES_RS_DUMP_ENV" batch
for i in 1 2 3; do
  srun --exclusive -n1 --gres=gpu:1 "$GRES_RS_DUMP_ENV" step &
done
wait
"#;

/// What one run does.
#[derive(Clone, Debug)]
pub enum RunKind {
    /// `srun <args> <dump-env> <label>`
    Srun { args: Vec<String> },
    /// `sbatch <args> script`; the script calls `"$GRES_RS_DUMP_ENV" <tag>`
    /// (directly and/or through srun) to record environments.
    Sbatch { args: Vec<String>, script: String },
    /// `salloc <args> <command...>` (use `$GRES_RS_DUMP_ENV` via
    /// `sh -c` / srun inside the command).
    Salloc { args: Vec<String>, command: Vec<String> },
    /// `slurmd -G` with the scenario's config; its "Gres Name=" lines are
    /// compared (temp dir normalized). Runs without the cluster.
    SlurmdG,
}

#[derive(Clone, Debug)]
pub struct Run {
    pub label: String,
    pub kind: RunKind,
    /// Compare blocks as a multiset (for concurrent steps whose order, and
    /// hence step-to-GPU mapping, is not deterministic).
    pub unordered: bool,
    pub timeout: Duration,
}

impl Run {
    pub fn srun(label: &str, args: &[&str]) -> Run {
        Run { label: label.into(), kind: RunKind::Srun { args: strs(args) }, unordered: false, timeout: Duration::from_secs(60) }
    }
    pub fn sbatch(label: &str, args: &[&str], script: &str) -> Run {
        Run { label: label.into(), kind: RunKind::Sbatch { args: strs(args), script: script.into() }, unordered: false, timeout: Duration::from_secs(120) }
    }
    pub fn salloc(label: &str, args: &[&str], command: &[&str]) -> Run {
        Run { label: label.into(), kind: RunKind::Salloc { args: strs(args), command: strs(command) }, unordered: false, timeout: Duration::from_secs(60) }
    }
    pub fn slurmd_g(label: &str) -> Run {
        Run { label: label.into(), kind: RunKind::SlurmdG, unordered: false, timeout: Duration::from_secs(60) }
    }
    pub fn unordered(mut self) -> Run {
        self.unordered = true;
        self
    }
}

fn strs(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    /// Cluster config; its `plugins` is replaced by each side's set.
    pub config: ClusterConfig,
    pub runs: Vec<Run>,
    /// After the runs on a non-stock set, prove slurmstepd mapped our gres
    /// plugins with one extra `srun <these args>` (None: skip).
    pub stepd_proof_args: Option<Vec<String>>,
}

impl Scenario {
    pub fn new(name: &str, config: ClusterConfig) -> Scenario {
        // Several nodes: one task on every node, without GPUs (not every
        // node need have one).
        let proof = if config.is_multi() {
            Some(Vec::new())
        } else if config.fake_gpus > 0 && config.node_gres.as_deref().map(|g| g.contains("gpu")).unwrap_or(false) {
            Some(vec!["--gres=gpu:1".to_string()])
        } else {
            None
        };
        Scenario { name: name.into(), config, runs: vec![], stepd_proof_args: proof }
    }
    pub fn run(mut self, r: Run) -> Scenario {
        self.runs.push(r);
        self
    }
}

/// Result of one run.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub label: String,
    /// "exit 0", "exit 1", "timeout", "COMPLETED 0:0", "FAILED 1:0", ...
    pub outcome: String,
    pub ok: bool,
    /// Full command/job output (for messages).
    pub output: String,
    /// Environments recorded during the run (tasks, batch, prolog, epilog).
    pub blocks: Vec<EnvBlock>,
    /// For SlurmdG: normalized "Gres Name=" lines.
    pub gres_lines: Vec<String>,
    pub unordered: bool,
}

#[derive(Clone, Debug)]
pub struct ScenarioResult {
    pub scenario: String,
    pub plugins: PluginSet,
    pub runs: Vec<RunResult>,
}

impl ScenarioResult {
    pub fn run(&self, label: &str) -> &RunResult {
        self.runs.iter().find(|r| r.label == label).unwrap_or_else(|| panic!("no run {label}"))
    }
    /// Human-readable dump of all GPU variables per run.
    pub fn report(&self) -> String {
        let mut s = format!("### scenario {} on {}\n", self.scenario, self.plugins.label());
        for r in &self.runs {
            s.push_str(&format!("-- {} : {}\n", r.label, r.outcome));
            for l in &r.gres_lines {
                s.push_str(&format!("   {l}\n"));
            }
            for b in sorted_blocks(r) {
                s.push_str(&format!("   [{}]", b.describe()));
                for (k, v) in b.gpu_vars() {
                    s.push_str(&format!(" {k}={v}"));
                }
                s.push('\n');
            }
        }
        s
    }
}

/// Runs every run of `scn` on one cluster with `plugins` (and `slurmd -G`
/// for SlurmdG runs). Panics if the cluster cannot start.
#[track_caller]
pub fn run_scenario(scn: &Scenario, plugins: PluginSet) -> ScenarioResult {
    let mut config = scn.config.clone();
    config.plugins = plugins.clone();
    // Slurm 24.11 and later need munged for `slurmd -G`: there it runs on
    // the scenario's cluster (`Cluster::slurmd_g_in`).
    let g_on_cluster = crate::quirks::behaviour_of(&config.slurm_version()).slurmd_g_needs_munged;
    let needs_cluster = g_on_cluster || scn.runs.iter().any(|r| !matches!(r.kind, RunKind::SlurmdG));
    let cluster = if needs_cluster { Some(Cluster::start(config.clone())) } else { None };
    let mut results = Vec::new();
    for r in &scn.runs {
        let t0 = std::time::Instant::now();
        let res = match &r.kind {
            RunKind::SlurmdG => {
                let g = match (&cluster, g_on_cluster) {
                    (Some(c), true) => c.slurmd_g_in(),
                    _ => Cluster::slurmd_g(&config),
                };
                if !plugins.ours().is_empty() {
                    let names: Vec<String> =
                        config.gres_types.split(',').map(|t| format!("gres_{}", t.trim())).filter(|n| plugins.ours().contains(n)).collect();
                    let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
                    g.assert_ours_loaded(&names);
                }
                RunResult {
                    label: r.label.clone(),
                    outcome: g.output.outcome(),
                    ok: g.output.ok(),
                    output: g.output.to_string(),
                    blocks: vec![],
                    gres_lines: g.gres_lines(),
                    unordered: r.unordered,
                }
            }
            kind => {
                let c = cluster.as_ref().unwrap();
                let _ = c.collect_dumps(); // discard leftovers
                let (outcome, ok, output) = match kind {
                    RunKind::Srun { args } => {
                        let dump = c.layout.dump_env_script().to_string_lossy().into_owned();
                        let mut a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                        a.push(&dump);
                        a.push(&r.label);
                        let o = c.srun_timeout(&a, r.timeout);
                        (o.outcome(), o.ok(), o.to_string())
                    }
                    RunKind::Salloc { args, command } => {
                        let mut a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                        a.extend(command.iter().map(|s| s.as_str()));
                        let o = c.run("salloc", &a, r.timeout);
                        (o.outcome(), o.ok(), o.to_string())
                    }
                    RunKind::Sbatch { args, script } => {
                        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                        let (sub, id) = c.sbatch_submit(&a, script);
                        match id {
                            None => (format!("sbatch {}", sub.outcome()), false, sub.to_string()),
                            Some(id) => {
                                let j = c.wait_job(id, r.timeout);
                                (format!("{} {}", j.state, j.exit_code), j.ok(), format!("{}\n{}", j.output, j.info))
                            }
                        }
                    }
                    RunKind::SlurmdG => unreachable!(),
                };
                c.wait_no_jobs(Duration::from_secs(30));
                let blocks = c.collect_dumps();
                RunResult { label: r.label.clone(), outcome, ok, output, blocks, gres_lines: vec![], unordered: r.unordered }
            }
        };
        eprintln!("harness: [{}] {} on {}: {} in {:.1?}", scn.name, r.label, plugins.label(), res.outcome, t0.elapsed());
        results.push(res);
    }
    if let (Some(c), Some(args)) = (cluster.as_ref(), scn.stepd_proof_args.as_ref()) {
        let names = c.expected_gres_plugins();
        if !names.is_empty() {
            let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            if c.config.is_multi() {
                c.assert_stepd_ours_loaded_on_every_node(&names, &a);
            } else {
                c.assert_stepd_ours_loaded(&names, &a);
            }
        }
    }
    drop(cluster);
    ScenarioResult { scenario: scn.name.clone(), plugins, runs: results }
}

fn sorted_blocks(r: &RunResult) -> Vec<EnvBlock> {
    let mut b = r.blocks.clone();
    if r.unordered {
        b.sort_by_key(|x| (x.tag.clone(), format!("{:?}", x.gpu_vars())));
    } else {
        // The node last: Prolog and Epilog of every node of a job have no
        // step or task.
        b.sort_by_key(|x| (x.tag.clone(), x.job_id(), x.step_id(), x.proc_id(), x.node().to_string()));
    }
    b
}

/// A difference docs/deviations.md documents (ours follows Slurm's
/// documentation where the stock plugins do not), which [`compare_envs`]
/// accepts, in the environment `block` (stock's):
/// - `CUDA_DEVICE_ORDER=PCI_BUS_ID` set by ours where stock sets nothing
///   (MPS/shard 3; gres.shtml: for NVML's numbering to match CUDA's,
///   "CUDA_DEVICE_ORDER=PCI_BUS_ID" must be set);
/// - a task of a `--gpu-bind=none` step (`SLURMD_TRES_BIND=gpu:none`), or
///   of a typed `--gpus-per-task` step (`gpu:per_task:<type>:<count>`,
///   whose count 22.05 and 23.02 read as 0), whose device lists stock
///   removes where slurmd gives it no usable set (22.05, 23.02) and ours
///   keeps its step's GPUs (GPU 6; srun(1): every task may use every GPU
///   of its step).
pub fn documented_deviation(block: &EnvBlock, var: &str, stock: Option<&str>, ours: Option<&str>) -> bool {
    let unbound_task = block.get("SLURMD_TRES_BIND").is_some_and(|b| {
        b.trim_start_matches("gpu:").split(',').any(|w| w == "none" || w.strip_prefix("per_task:").is_some_and(|n| n.parse::<u32>().is_err()))
    });
    let device_list = matches!(var, "CUDA_VISIBLE_DEVICES" | "SLURM_STEP_GPUS" | "GPU_DEVICE_ORDINAL" | "ROCR_VISIBLE_DEVICES" | "ZE_AFFINITY_MASK");
    (var == "CUDA_DEVICE_ORDER" && stock.is_none() && ours == Some("PCI_BUS_ID")) || (unbound_task && device_list && stock.is_none() && ours.is_some())
}

/// Compares two results of the same scenario run by run, block by block,
/// GPU variable by GPU variable. Returns one line per difference (empty:
/// identical), except the [`documented_deviation`]s.
pub fn compare_envs(stock: &ScenarioResult, ours: &ScenarioResult) -> Vec<String> {
    let mut d = Vec::new();
    if stock.runs.len() != ours.runs.len() {
        d.push(format!("number of runs: {} vs {}", stock.runs.len(), ours.runs.len()));
    }
    for (a, b) in stock.runs.iter().zip(ours.runs.iter()) {
        let l = &a.label;
        if a.outcome != b.outcome {
            d.push(format!("[{l}] outcome: {} = {:?}, {} = {:?}", stock.plugins.label(), a.outcome, ours.plugins.label(), b.outcome));
        }
        if a.gres_lines != b.gres_lines {
            let sa: BTreeSet<_> = a.gres_lines.iter().collect();
            let sb: BTreeSet<_> = b.gres_lines.iter().collect();
            for x in sa.difference(&sb) {
                d.push(format!("[{l}] slurmd -G line only with {}: {x}", stock.plugins.label()));
            }
            for x in sb.difference(&sa) {
                d.push(format!("[{l}] slurmd -G line only with {}: {x}", ours.plugins.label()));
            }
            if sa == sb {
                d.push(format!("[{l}] slurmd -G lines in a different order:\n  {:?}\n  {:?}", a.gres_lines, b.gres_lines));
            }
        }
        let ba = sorted_blocks(a);
        let bb = sorted_blocks(b);
        let tags = |v: &[EnvBlock]| v.iter().map(|x| x.tag.clone()).collect::<Vec<_>>();
        if tags(&ba) != tags(&bb) {
            d.push(format!("[{l}] recorded environments differ: {:?} vs {:?}", tags(&ba), tags(&bb)));
            continue;
        }
        for (i, (x, y)) in ba.iter().zip(bb.iter()).enumerate() {
            let gx = x.gpu_vars();
            let gy = y.gpu_vars();
            let keys: BTreeSet<&String> = gx.keys().chain(gy.keys()).collect();
            for k in keys {
                let vx = gx.get(k);
                let vy = gy.get(k);
                if vx != vy && !documented_deviation(x, k, vx.map(|s| s.as_str()), vy.map(|s| s.as_str())) {
                    d.push(format!(
                        "[{l}] #{i} {} {k}: {}={} {}={}",
                        x.describe(),
                        stock.plugins.label(),
                        vx.map(|s| format!("{s:?}")).unwrap_or_else(|| "unset".into()),
                        ours.plugins.label(),
                        vy.map(|s| format!("{s:?}")).unwrap_or_else(|| "unset".into())
                    ));
                }
            }
        }
    }
    d
}

/// Runs `scn` on the stock plugins and on ours, prints both reports, and
/// panics listing every difference. Returns (stock, ours).
#[track_caller]
pub fn differential(scn: &Scenario) -> (ScenarioResult, ScenarioResult) {
    differential_with(scn, PluginSet::Ours)
}

/// Like [`differential`] with any non-stock plugin set.
#[track_caller]
pub fn differential_with(scn: &Scenario, ours_set: PluginSet) -> (ScenarioResult, ScenarioResult) {
    let stock = run_scenario(scn, PluginSet::Stock);
    let ours = run_scenario(scn, ours_set);
    assert_no_differences(scn, &stock, &ours);
    (stock, ours)
}

/// Prints both reports and panics listing every difference
/// ([`compare_envs`]) between the two sides of `scn`.
#[track_caller]
pub fn assert_no_differences(scn: &Scenario, stock: &ScenarioResult, ours: &ScenarioResult) {
    eprintln!("{}{}", stock.report(), ours.report());
    let diffs = compare_envs(stock, ours);
    if !diffs.is_empty() {
        let mut outs = String::new();
        for (a, b) in stock.runs.iter().zip(ours.runs.iter()) {
            if a.outcome != b.outcome {
                outs.push_str(&format!(
                    "==== [{}] {} output ====\n{}\n==== [{}] {} output ====\n{}\n",
                    a.label,
                    stock.plugins.label(),
                    a.output,
                    b.label,
                    ours.plugins.label(),
                    b.output
                ));
            }
        }
        panic!("scenario {}: {} difference(s) between stock and ours:\n  {}\n{outs}", scn.name, diffs.len(), diffs.join("\n  "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn task(bind: &str) -> EnvBlock {
        EnvBlock { tag: "t".into(), vars: BTreeMap::from([("SLURMD_TRES_BIND".to_string(), bind.to_string())]) }
    }

    #[test]
    fn device_lists_of_tasks_slurmd_gives_no_binding_are_the_documented_difference() {
        let lists = |bind: &str| documented_deviation(&task(bind), "CUDA_VISIBLE_DEVICES", None, Some("0,1"));
        assert!(lists("gpu:none"));
        assert!(lists("gpu:verbose,none"));
        assert!(lists("gpu:per_task:tesla:1"));
        assert!(lists("gpu:verbose,per_task:a100:2"));
        // A count slurmd reads binds the task: any difference is one.
        assert!(!lists("gpu:per_task:1"));
        assert!(!lists("gpu:single:1"));
        assert!(!lists("gpu:map_gpu:0,1"));
        // Only ours keeping a list stock removed, and only device lists.
        assert!(!documented_deviation(&task("gpu:none"), "CUDA_VISIBLE_DEVICES", Some("0"), Some("0,1")));
        assert!(!documented_deviation(&task("gpu:none"), "SLURM_GPUS_ON_NODE", None, Some("2")));
        assert!(documented_deviation(&task("gpu:per_task:1"), "CUDA_DEVICE_ORDER", None, Some("PCI_BUS_ID")));
    }
}
