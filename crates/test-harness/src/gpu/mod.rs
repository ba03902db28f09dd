//! Helpers shared by the gres/gpu proof tests (`tests/gpu_*.rs`): running
//! `slurmd -G` on the stock plugins and on ours with one configuration and
//! comparing what they print, and comparing `--gpu-bind=verbose` lines.
//!
//! Used by each of those tests as
//! `use gres_test_harness::gpu as gpu_common;`.

pub mod merge_cases;

use crate::{Cluster, ClusterConfig, PluginSet, ScenarioResult, SlurmdG, OUR_PLUGINS};
use std::collections::BTreeMap;

/// What `slurmd -G` printed that the comparison looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GReport {
    /// "exit 0", "exit 1", "signal 11", "timeout".
    pub outcome: String,
    /// The final node GRES list ("Gres Name=..." lines), in order.
    pub gres_lines: Vec<String>,
    /// `GRES_PARSABLE[...]` lines (printed by gres/mps and gres/shard when
    /// fake GPUs are in use), without the log prefix, in order.
    pub parsable: Vec<String>,
    /// Error, fatal and warning messages, normalized (see
    /// [`normalize_message`]), in order.
    pub problems: Vec<String>,
    /// Info messages of gres/gpu ("Adding fake system GPU data ...",
    /// "Could not find an unused configuration record ...", and the records
    /// it lists, which the stock plugin logs without its prefix),
    /// normalized.
    pub gpu_info: Vec<String>,
    /// Our plugin files' init lines ("slurm-gpu-gres 0.1.0 (Rust) for
    /// Slurm ..., loaded from ..."), kept out of the comparison.
    pub loaded_lines: Vec<String>,
    /// The whole normalized output, for messages.
    pub text: String,
    /// True when the process died of a signal or printed a Rust panic.
    pub crashed: bool,
}

/// A log line without the `slurmd: ` prefix, the level word, the plugin
/// type (`gres/gpu: `), a C function name (`_merge_system_gres_conf: `,
/// which the stock plugins add and ours do not) and a file location
/// (`$DIR/etc/fake_gpus.conf:1:1: `, which ours adds): `(level, message)`.
pub fn normalize_message(line: &str) -> (String, String) {
    let mut s = line.trim();
    s = s.strip_prefix("slurmd: ").unwrap_or(s);
    let mut level = "info".to_string();
    // `warning: ` is the level word of 23.02 and later (src/common/log.c,
    // `pfx = warn ? "warning: "`), where 22.05's warning() wrote
    // `WARNING: ` into the message; ours writes `WARNING: ` on every
    // release (the level is compared, not its spelling).
    for l in ["error: ", "fatal: ", "WARNING: ", "warning: ", "debug: ", "debug2: ", "verbose: "] {
        if let Some(rest) = s.strip_prefix(l) {
            level = l.trim_end_matches(": ").to_ascii_lowercase();
            s = rest;
            break;
        }
    }
    // "gres/gpu: ", "gpu/nvml: "
    if let Some((head, rest)) = s.split_once(": ") {
        if head.len() < 20 && head.contains('/') && !head.contains(' ') {
            s = rest;
        }
    }
    // "_merge_system_gres_conf: ", "gres_c_s_init_share_devices: "
    if let Some((head, rest)) = s.split_once(": ") {
        if head.contains('_') && head.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            s = rest;
        }
    }
    // Ours names the place in a file ("/etc/slurm/fake_gpus.conf:3:1: ").
    if let Some((head, rest)) = s.split_once(": ") {
        let mut parts = head.rsplitn(3, ':');
        let (col, line, path) = (parts.next(), parts.next(), parts.next());
        let num = |x: Option<&str>| x.is_some_and(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()));
        if num(col) && num(line) && path.is_some_and(|p| p.contains('/')) {
            s = rest;
        }
    }
    // The level may also follow the prefixes ("gres/gpu: WARNING: ...").
    if let Some(rest) = s.strip_prefix("WARNING: ") {
        level = "warning".into();
        s = rest;
    }
    (level, s.to_string())
}

/// Whether a normalized message is the init line of one of our plugin
/// files.
pub fn is_our_init_line(msg: &str) -> bool {
    msg.starts_with("slurm-gpu-gres ") && msg.contains(" (Rust) for Slurm ") && msg.contains(", loaded from ")
}

/// Reads what `slurmd -G` printed.
pub fn report(g: &SlurmdG) -> GReport {
    let text = g.normalized();
    let mut parsable = Vec::new();
    let mut problems = Vec::new();
    let mut gpu_info = Vec::new();
    let mut loaded_lines = Vec::new();
    for line in text.lines() {
        // 26.05 begins a line with a timestamp, not `slurmd: `: read it
        // as the older releases write it.
        let stripped = g.log_prefix.strip(line, "slurmd");
        let as_program;
        let line = if stripped.len() == line.len() || line.starts_with("slurmd: ") {
            line
        } else {
            as_program = format!("slurmd: {stripped}");
            &as_program
        };
        if let Some(i) = line.find("GRES_PARSABLE[") {
            parsable.push(line[i..].trim_end().to_string());
            continue;
        }
        let (level, msg) = normalize_message(line);
        // Our plugin files' init line (what each is and where it came
        // from), which the stock files do not log.
        if is_our_init_line(&msg) {
            loaded_lines.push(msg);
            continue;
        }
        if matches!(level.as_str(), "error" | "fatal" | "warning") {
            problems.push(format!("{level}: {msg}"));
        } else if level == "info" && (line.starts_with("slurmd: gres/gpu: ") || line.starts_with("slurmd:     GRES[")) {
            gpu_info.push(msg);
        }
    }
    let crashed = g.output.signal.is_some() || text.contains("panicked at") || text.contains("RUST_BACKTRACE");
    GReport { outcome: g.output.outcome(), gres_lines: g.gres_lines(), parsable, problems, gpu_info, loaded_lines, text, crashed }
}

/// `slurmd -G` with `cfg` on the stock plugins, then on ours, with the
/// proof of loading: every plugin file the stock run loaded from Debian's
/// dir, the run with ours loaded from our dir (and never Debian's).
/// Returns (stock, ours).
#[track_caller]
pub fn slurmd_g_pair(cfg: &ClusterConfig) -> (GReport, GReport) {
    let mut c = cfg.clone();
    c.plugins = PluginSet::Stock;
    let stock = Cluster::slurmd_g(&c);
    c.plugins = PluginSet::Ours;
    let ours = Cluster::slurmd_g(&c);
    // The stock dir as slurmd saw it (a chroot's own, at its path inside).
    let stock_dir = stock.stock_dir.clone();
    let names: Vec<&str> = OUR_PLUGINS
        .iter()
        .copied()
        .filter(|n| {
            let f = stock_dir.join(format!("{n}.so"));
            stock.loaded_files.iter().any(|l| std::path::Path::new(l) == f)
        })
        .collect();
    // Ours must not load Debian's file of a name the stock run did not
    // load either; check_loaded() covers the names it did load.
    for n in OUR_PLUGINS {
        let f = stock_dir.join(format!("{n}.so"));
        assert!(!ours.loaded_files.iter().any(|l| std::path::Path::new(l) == f), "slurmd -G with ours loaded Debian's {}", f.display());
    }
    ours.assert_ours_loaded(&names);
    let (stock, ours) = (report(&stock), report(&ours));
    // The log says it too: each of our files names itself, stock never.
    assert!(stock.loaded_lines.is_empty(), "the stock plugins logged our init line:\n{}", stock.text);
    for n in &names {
        assert!(ours.loaded_lines.iter().any(|l| l.ends_with(&format!("/{n}.so"))), "no init line of our {n}.so in:\n{}", ours.text);
    }
    (stock, ours)
}

/// Differences between two `slurmd -G` reports: outcome, final GRES
/// lines, GRES_PARSABLE lines (all exact), and -- when `messages` -- the
/// normalized error/fatal/warning messages and gres/gpu's info messages.
pub fn compare_g(stock: &GReport, ours: &GReport, messages: bool) -> Vec<String> {
    let mut d = Vec::new();
    if stock.outcome != ours.outcome {
        d.push(format!("outcome: stock={} ours={}", stock.outcome, ours.outcome));
    }
    if ours.crashed {
        d.push("ours crashed".into());
    }
    let lists = [("Gres line", &stock.gres_lines, &ours.gres_lines), ("GRES_PARSABLE line", &stock.parsable, &ours.parsable)];
    let problems = [("message", &stock.problems, &ours.problems), ("gres/gpu info message", &stock.gpu_info, &ours.gpu_info)];
    for (what, a, b) in lists.into_iter().chain(problems.into_iter().filter(|_| messages)) {
        if a != b {
            d.push(format!("{what}s differ:\n    stock: {}\n    ours:  {}", a.join("\n           "), b.join("\n           ")));
        }
    }
    d
}

/// Runs one `slurmd -G` case on both plugin sets and returns the
/// differences (empty: identical), printing both outputs.
#[track_caller]
pub fn g_case(name: &str, cfg: &ClusterConfig, messages: bool) -> Vec<String> {
    let (stock, ours) = slurmd_g_pair(cfg);
    eprintln!("=== case {name}: stock {} / ours {}\n--- stock ---\n{}\n--- ours ---\n{}", stock.outcome, ours.outcome, stock.text, ours.text);
    compare_g(&stock, &ours, messages).into_iter().map(|x| format!("[{name}] {x}")).collect()
}

/// `--gpu-bind=verbose` lines ("gpu-bind: usable_gres=...") of every run,
/// sorted (tasks print them concurrently): label -> lines.
pub fn verbose_lines(r: &ScenarioResult) -> BTreeMap<String, Vec<String>> {
    r.runs
        .iter()
        .map(|run| {
            let mut v: Vec<String> = run.output.lines().filter_map(|l| l.find("gpu-bind:").map(|i| l[i..].trim_end().to_string())).collect();
            v.sort();
            (run.label.clone(), v)
        })
        .collect()
}

/// Differences between the verbose lines of two results.
pub fn compare_verbose(stock: &ScenarioResult, ours: &ScenarioResult) -> Vec<String> {
    let a = verbose_lines(stock);
    let b = verbose_lines(ours);
    let mut d = Vec::new();
    for (label, la) in &a {
        let lb = b.get(label).cloned().unwrap_or_default();
        if *la != lb {
            d.push(format!("[{label}] --gpu-bind=verbose lines: stock={la:?} ours={lb:?}"));
        }
    }
    d
}

/// Panics listing `diffs` unless empty.
#[track_caller]
pub fn assert_no_diffs(what: &str, diffs: &[String]) {
    if !diffs.is_empty() {
        panic!("{what}: {} difference(s) between stock and ours:\n  {}", diffs.len(), diffs.join("\n  "));
    }
}
