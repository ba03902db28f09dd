//! The `steps-health` rows: what the health work costs a step that
//! reaches the gpu plugin's step hooks (`--gpu-freq`: 22.05's slurmstepd
//! calls them only then), on the NVML stand-in's two-GPU node.
//!
//! Four clusters, their rounds interleaved (each round starts with the
//! next one): stock gpu/nvml; ours as shipped (the release build, no
//! health file: `step_xids` off); ours' test build with `step_xids = off`
//! and with `step_xids = on` in the file its hooks read.  Two rows of
//! wall time: stock against ours as shipped (health off), and off against
//! on (the step attribution's own cost, both the same build); and the same
//! two as the instructions the step's slurmstepd executes (callgrind, as
//! the `steps` rows count them), where wall time is noise at 1%; and the
//! instructions of an ordinary step (no `--gpu-freq`), whose slurmstepd
//! writes the step's GPU window with the switch on.

use super::stepd::{by_layout_k, stepd_instructions, StepdCluster, STEP_ENV_PADS};
use super::steps::time_per_step;
use crate::options::Opts;
use crate::row::Row;
use crate::stats::{mean, median};
use gres_test_harness::testbed::{series_of, TestBed};
use gres_test_harness::{standin, Cluster, ClusterConfig, Daemon, PluginSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const METRIC: &str = "time per step, median of rounds";

/// The clusters, in the order of the samples.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Stock,
    Shipped,
    Off,
    On,
}

const SIDES: [Side; 4] = [Side::Stock, Side::Shipped, Side::Off, Side::On];

impl Side {
    fn label(self) -> &'static str {
        match self {
            Side::Stock => "nvml-stock",
            Side::Shipped => "nvml-ours",
            Side::Off => "nvml-ours-off",
            Side::On => "nvml-ours-on",
        }
    }
}

/// The two comparisons: (left, right, what, goal, note).
const PAIRS: [(Side, Side, &str, &str, &str); 2] = [
    (Side::Stock, Side::Shipped, "stock vs ours with health off", "<= 1.00", "left stock gpu/nvml, right ours as shipped (release build, no health file)"),
    (Side::Off, Side::On, "ours step_xids off vs on", "<= 1.01", "both columns ours (release test build): left step_xids off, right on"),
];

/// The step: reaches the gpu plugin's step hooks on every release.
const REQUEST: [&str; 2] = ["--gres=gpu:1", "--gpu-freq=high"];

/// A "not measured" row for each pair, `what(pair)` naming it.
fn not_measured(rows: &mut Vec<Row>, v: &str, what: &dyn Fn(&str) -> String, metric: &str, why: &str) {
    for (_, _, pair, _, _) in PAIRS {
        rows.push(Row::not_measured("steps-health", v, &what(pair), metric, format!("not measured: {why}")));
    }
}

pub fn rows_steps_health(opts: &Opts, v: &str, rows: &mut Vec<Row>) {
    let steps = opts.n(20, 5);
    let rounds = opts.n(15, 3);
    let request = REQUEST.join(" ");
    let what = format!("{steps} sequential `srun {request} true` steps");
    let what_pair = |pair: &str| format!("{what}, {pair}");
    let bed = match TestBed::open(&series_of(v)) {
        Ok(b) => b,
        Err(e) => return not_measured(rows, v, &what_pair, METRIC, &e),
    };
    let stock_nvml = match bed.stock_gpu_nvml() {
        Ok(p) => p,
        Err(e) => return not_measured(rows, v, &what_pair, METRIC, &format!("no stock gpu/nvml: {e}")),
    };
    let configs: Vec<ClusterConfig> = match SIDES.iter().map(|&side| side_config(&bed, side, &stock_nvml)).collect() {
        Ok(c) => c,
        Err(e) => return not_measured(rows, v, &what_pair, METRIC, &e),
    };
    let mut clusters = Vec::new();
    for (&side, cfg) in SIDES.iter().zip(&configs) {
        match start(side, cfg.clone()) {
            Ok(c) => clusters.push(c),
            Err(e) => return not_measured(rows, v, &what_pair, METRIC, &e),
        }
    }
    let round = |c: &Cluster| time_per_step(c, steps, &request);
    // Warm-up (first allocation, page cache).
    clusters.iter().for_each(|c| {
        round(c);
    });
    let mut samples = vec![Vec::new(); SIDES.len()];
    for r in 0..rounds {
        for k in 0..SIDES.len() {
            let i = (r + k) % SIDES.len();
            samples[i].push(round(&clusters[i]));
        }
    }
    let m = |side: Side| median(&samples[side as usize]);
    let row = |what: String, left: Side, right: Side, goal: &str, note: &str| Row {
        group: "steps-health",
        release: v.into(),
        what,
        metric: METRIC.into(),
        unit: "ms".into(),
        stock: Some(m(left)),
        ours: Some(m(right)),
        n: rounds,
        goal: goal.into(),
        note: note.into(),
    };
    for (left, right, pair, goal, note) in PAIRS {
        rows.push(row(what_pair(pair), left, right, goal, &format!("NVML stand-in h100x2; {note}")));
    }
    drop(clusters);
    rows_instructions(opts, &bed, configs, rows);
}

/// An ordinary step: no `--gpu-freq`, so no gpu plugin step hook; with
/// `step_xids = on` its slurmstepd writes the step's GPU window (gres/gpu's
/// `step_set_env`) and its end at exit.
const PLAIN_REQUEST: [&str; 1] = ["--gres=gpu:1"];

/// The goals of the ordinary step's rows: ours as shipped is stock, the
/// window is at most 0.2% of the step.
const PLAIN_GOALS: [&str; 2] = ["<= 1.00", "<= 1.002"];

/// The same sides' step instructions (callgrind, the `steps` rows' way),
/// `configs` in the order of [`SIDES`]: the `--gpu-freq` step, then an
/// ordinary one.
fn rows_instructions(opts: &Opts, bed: &TestBed, configs: Vec<ClusterConfig>, rows: &mut Vec<Row>) {
    rows_instructions_for(opts, bed, configs.clone(), &REQUEST, None, rows);
    rows_instructions_for(opts, bed, configs, &PLAIN_REQUEST, Some(PLAIN_GOALS), rows);
}

fn rows_instructions_for(opts: &Opts, bed: &TestBed, configs: Vec<ClusterConfig>, request: &[&str], goals: Option<[&str; 2]>, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let metric = "instructions the step's slurmstepd executes (valgrind callgrind), mean over step environment sizes";
    let what = |pair: &str| format!("one `srun {} true` step's slurmstepd, {pair}", request.join(" "));
    let sides = SIDES.iter().zip(configs).map(|(&side, cfg)| StepdCluster { label: side.label(), cfg, ours: side != Side::Stock }).collect();
    // The ordinary step loads no gpu plugin: gres/gpu is ours.
    let plugins: &[&str] = if goals.is_some() { &["gres_gpu"] } else { &["gpu_nvml"] };
    let Some((counts, files)) = stepd_instructions(opts, bed, sides, request, plugins) else {
        return not_measured(rows, v, &what, metric, "no valgrind for this release");
    };
    for (i, (left, right, pair, goal, note)) in PAIRS.into_iter().enumerate() {
        let goal = goals.map_or(goal, |g| g[i]);
        let (l, r) = (&counts[left as usize], &counts[right as usize]);
        rows.push(Row {
            group: "steps-health",
            release: v.into(),
            what: what(pair),
            metric: metric.into(),
            unit: "k".into(),
            stock: Some(mean(l) / 1e3),
            ours: Some(mean(r) / 1e3),
            n: l.len().min(r.len()),
            goal: goal.into(),
            note: format!(
                "NVML stand-in h100x2; {note}; {files} profiles a step; {STEP_ENV_PADS} environment sizes; right - left by size: {}",
                by_layout_k(l, r)
            ),
        });
    }
}

/// One side's cluster: the stand-in's two H100s, detected by NVML.
fn side_config(bed: &TestBed, side: Side, stock_nvml: &Path) -> Result<ClusterConfig, String> {
    let plugins = if matches!(side, Side::Stock) { PluginSet::Stock } else { PluginSet::Ours };
    let cfg = ClusterConfig::gpus(plugins, 0).with_cpus(2, 1, 1).with_gres("gpu:nvidia_h100_80gb_hbm3:2", "AutoDetect=nvml\n");
    let mut cfg = match side {
        Side::Stock => ClusterConfig { extra_stock_plugins: vec![stock_nvml.to_path_buf()], ..bed.on(cfg.with_binds(standin::chroot_binds())) },
        Side::Shipped => bed.ours_config(cfg.with_binds(standin::chroot_binds()), "steps-health").ok_or("no build of ours")?,
        Side::Off | Side::On => bed.ours_config(cfg.with_test_build().with_binds(standin::chroot_binds()), "steps-health").ok_or("no test build of ours")?,
    };
    cfg.slurmd_env = standin::daemon_env(&standin::fixture("h100x2.conf"));
    if let Side::Off | Side::On = side {
        let switch = if matches!(side, Side::On) { "on" } else { "off" };
        let dir = health_dir(switch)?;
        cfg.slurmd_env.push(("GRES_RS_HEALTH_CONF".into(), dir.join("gres-rs-health.conf").to_string_lossy().into_owned()));
        cfg.slurmd_env.push(("GRES_RS_STATE_DIR".into(), dir.join("state").to_string_lossy().into_owned()));
    }
    Ok(cfg)
}

/// The side's cluster, its gpu plugin checked.
fn start(side: Side, cfg: ClusterConfig) -> Result<Cluster, String> {
    let c = Cluster::start(cfg);
    match side {
        Side::Stock => {
            let log = c.log(Daemon::Slurmd);
            if !log.contains("2 GPU system device(s) detected") {
                return Err(format!("stock gpu/nvml did not detect the stand-in's GPUs:\n{}", c.log_tails(30)));
            }
        }
        _ => c.assert_ours_gpu_plugin_loaded("gpu_nvml"),
    }
    Ok(c)
}

/// A directory with the health file that sets `step_xids = <switch>`.
fn health_dir(switch: &str) -> Result<PathBuf, String> {
    let dir = standin::scratch_dir().join(format!("bench-steps-health-{switch}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("gres-rs-health.conf"), format!("step_xids = {switch}\n")).map_err(|e| e.to_string())?;
    Ok(dir)
}
