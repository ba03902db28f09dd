//! `gres-rs check`: slurmd's GRES table for nodes, and the problems slurmd
//! and slurmctld would have with their configuration.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use gres_core::behaviour::Behaviour;
use gres_core::hostlist;
use slurm_gpu_gres::config::gres_conf::GresConf;
use slurm_gpu_gres::config::syntax::{ConfErrors, ErrorKind, Location};
use slurm_gpu_gres::ffi::behaviour as abi;
use slurm_gpu_gres::predict::slurm_conf::SlurmConf;
use slurm_gpu_gres::predict::{Prediction, Problem, Severity};

use crate::gres_conf_index::GresConfIndex;
use crate::host;
use crate::{default_slurm_conf, tool_error, CheckArgs, EXIT_USAGE};

mod evaluate;
mod report;

use evaluate::EvalContext;
use report::output;

/// One node of slurm.conf.
#[derive(Clone, Debug)]
struct NodeEntry {
    name: String,
    /// Index of its `NodeName` line in slurm.conf.
    line: usize,
    hostname: String,
}

/// The nodes of slurm.conf, each once, in order.
struct Nodes {
    entries: Vec<NodeEntry>,
    by_name: HashMap<String, usize>,
}

impl Nodes {
    fn new(conf: &SlurmConf, problems: &mut Vec<Problem>) -> Nodes {
        let mut nodes = Nodes { entries: Vec::new(), by_name: HashMap::new() };
        for (i, line) in conf.nodes().iter().enumerate() {
            let names = match hostlist::expand(&line.names.value) {
                Ok(n) => n,
                Err(e) => {
                    problems.push(Problem::new(
                        Severity::Fatal,
                        Some(line.names.location.clone()),
                        format!("Unable to create NodeName list from {}: {e}", line.names.value),
                    ));
                    continue;
                }
            };
            let hostnames = line.get("NodeHostname").and_then(|h| hostlist::expand(&h.value).ok()).unwrap_or_else(|| names.clone());
            for (j, name) in names.iter().enumerate() {
                if nodes.by_name.contains_key(name) {
                    continue;
                }
                let hostname = hostnames.get(j).or(hostnames.first()).unwrap_or(name);
                nodes.by_name.insert(name.clone(), nodes.entries.len());
                nodes.entries.push(NodeEntry { name: name.clone(), line: i, hostname: host::short_name(hostname).to_string() });
            }
        }
        nodes
    }
}

/// What was found for a group of nodes that read the same lines.
struct Outcome {
    cpus: u32,
    local: bool,
    /// Where the records come from, for people: "from gres.conf", "2 GPUs
    /// detected by NVML here, merged with gres.conf", ...
    origin: String,
    prediction: Prediction,
    problems: Vec<Problem>,
}

impl Outcome {
    fn fatal(&self) -> bool {
        self.problems.iter().any(|p| p.severity == Severity::Fatal)
    }
}

struct Group {
    nodes: Vec<usize>,
    outcome: Outcome,
}

/// Everything a check run found.
#[derive(Default)]
struct Report {
    slurm_conf: PathBuf,
    gres_conf: Option<PathBuf>,
    /// Problems of the files as a whole.
    file_problems: Vec<Problem>,
    groups: Vec<Group>,
    entries: Vec<NodeEntry>,
    /// The release checked for, as the messages name it.
    release: String,
}

pub fn run(args: &CheckArgs) -> u8 {
    let mut report = Report { slurm_conf: args.slurm_conf.clone().unwrap_or_else(default_slurm_conf), ..Default::default() };
    let code = match check(args, &mut report) {
        Ok(()) => output(args, &report),
        Err(code) => code,
    };
    // The process ends now: freeing a large configuration piece by piece
    // would only take time.
    std::mem::forget(report);
    code
}

/// Read an unreadable-file error as a usage error (`Err`), other errors as
/// what stops slurmd.
fn conf_errors(errors: &ConfErrors, path: &Path, report: &mut Report) -> Result<(), u8> {
    if let Some(e) = errors.0.iter().find(|e| e.kind == ErrorKind::Io && e.location.line == 0 && e.location.path == path) {
        tool_error(&e.message);
        return Err(EXIT_USAGE);
    }
    report.file_problems.extend(errors.0.iter().map(Problem::from_conf_error));
    Ok(())
}

/// The release gres.conf is read as: `--slurm-release`, else the build's;
/// with its name as the messages give it.
fn target_release(args: &CheckArgs) -> Result<(Behaviour, String), u8> {
    let (release, label) = match &args.slurm_release {
        None => (abi::BUILD, abi::format_release(abi::BUILD)),
        Some(text) => match abi::parse_release(text) {
            Ok(r) => (r, if text.trim().matches('.').count() == 1 { format!("{}.{:02}", r.0, r.1) } else { abi::format_release(r) }),
            Err(e) => {
                tool_error(format!("--slurm-release: {e}"));
                return Err(EXIT_USAGE);
            }
        },
    };
    match abi::for_release(release.0, release.1, release.2) {
        Some(b) => Ok((b, label)),
        None => {
            tool_error(format!("--slurm-release: Slurm {label} is not supported"));
            Err(EXIT_USAGE)
        }
    }
}

/// Say in the message of each problem about a value of a later release
/// which release that is.
fn name_releases(problems: &mut [Problem], target: &str) {
    for p in problems {
        if let Some(feature) = p.feature {
            match abi::first_release(feature) {
                Some(first) => p.message.push_str(&format!(" ({} exists from Slurm {first}; checked for Slurm {target})", feature.as_str())),
                None => p.message.push_str(&format!(" (checked for Slurm {target})")),
            }
        }
    }
}

fn check(args: &CheckArgs, report: &mut Report) -> Result<(), u8> {
    let (behaviour, release) = target_release(args)?;
    report.release = release.clone();
    let result = check_as(args, &behaviour, report);
    name_releases(&mut report.file_problems, &release);
    for g in &mut report.groups {
        name_releases(&mut g.outcome.problems, &release);
    }
    result
}

/// This host's `PluginDir` as slurmd searches it.
struct PluginDirs {
    dirs: Vec<PathBuf>,
    /// As slurm.conf would write it (`a:b`).
    text: String,
    /// The installed slurmd's release (`None`: unknown).
    slurmd: Option<u32>,
}

impl PluginDirs {
    /// slurm.conf's `PluginDir`, else slurmd's compiled-in default
    /// (`installed::stock_dir`): the directory, searched even when its
    /// plugin files are dangling links, as slurmd searches it.
    fn of(slurm: &SlurmConf) -> Option<PluginDirs> {
        let configured = slurm.plugin_dirs();
        let dirs: Vec<PathBuf> =
            if configured.is_empty() { crate::installed::stock_dir().into_iter().collect() } else { configured.iter().map(PathBuf::from).collect() };
        if dirs.is_empty() {
            return None;
        }
        let text = dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":");
        Some(PluginDirs { dirs, text, slurmd: crate::installed::installed_version().map(|(v, _)| v) })
    }

    fn predict(&self, names: &[&str]) -> Vec<crate::plugin_dir::Choice> {
        let read = |p: &Path| gres_core::bounded_read::read_bounded(p, crate::elf::MAX_PLUGIN_FILE_LEN).ok();
        crate::plugin_dir::predict(&self.dirs, names, self.slurmd, &read)
    }
}

/// Which file of each GRES plugin slurmd will load from this host's
/// `PluginDir`, and whether it accepts it.
/// Also whether the gres/gpu that slurmd loads is ours (`None`: unknown).
fn plugin_dir_problems(slurm: &SlurmConf, dirs: &PluginDirs, types: &[String]) -> (Vec<Problem>, Option<bool>) {
    let choices = dirs.predict(&crate::plugin_dir::plugin_names(types));
    let ours_gpu = choices.iter().find(|c| c.name == "gres_gpu").and_then(|c| c.loaded.as_ref()).map(|(_, ours, _)| *ours);
    (crate::plugin_dir::problems(&choices, &dirs.text, slurm), ours_gpu)
}

fn check_as(args: &CheckArgs, behaviour: &Behaviour, report: &mut Report) -> Result<(), u8> {
    let slurm_path = report.slurm_conf.clone();
    let slurm = match SlurmConf::load(&slurm_path) {
        Ok(c) => c,
        Err(errors) => return conf_errors(&errors, &slurm_path, report),
    };
    report.file_problems.extend(slurm.diagnostics().iter().map(Problem::from_diagnostic));
    let types = match slurm.gres_types() {
        Ok(t) => {
            report.file_problems.extend(t.diagnostics.iter().map(Problem::from_diagnostic));
            t.names
        }
        Err(e) => {
            report.file_problems.push(Problem::from_conf_error(&e));
            return Ok(());
        }
    };
    let mut ours_gpu = None;
    let plugin_dirs = if args.no_device_check { None } else { PluginDirs::of(&slurm) };
    if let Some(dirs) = &plugin_dirs {
        let (problems, ours) = plugin_dir_problems(&slurm, dirs, &types);
        report.file_problems.extend(problems);
        ours_gpu = ours;
    }
    let nodes = Nodes::new(&slurm, &mut report.file_problems);
    let this_host = host::short_hostname();
    let is_local = |e: &NodeEntry| e.name == this_host || e.hostname == this_host;
    let selected: Vec<usize> = if args.all_nodes {
        (0..nodes.entries.len()).collect()
    } else if let Some(expr) = &args.node {
        let names = match gres_core::hostlist::expand(expr) {
            Ok(n) => n,
            Err(e) => {
                tool_error(format!("--node {expr}: {e}"));
                return Err(EXIT_USAGE);
            }
        };
        let mut selected = Vec::with_capacity(names.len());
        for name in &names {
            match nodes.by_name.get(name) {
                Some(&i) if !selected.contains(&i) => selected.push(i),
                Some(_) => {}
                None => {
                    let known: Vec<&str> = nodes.entries.iter().map(|e| e.name.as_str()).collect();
                    let hint = gres_core::text::closest_key(name, &known).map(|k| format!(" (did you mean {k}?)")).unwrap_or_default();
                    tool_error(format!("node {name} is not in {}{hint}", slurm_path.display()));
                    return Err(EXIT_USAGE);
                }
            }
        }
        selected
    } else {
        let found = nodes.entries.iter().position(|e| e.name == this_host).or_else(|| nodes.entries.iter().position(|e| e.hostname == this_host));
        match found {
            Some(i) => vec![i],
            None => {
                tool_error(format!("this host ({this_host}) is no node of {}: use --node NAME or --all-nodes", slurm_path.display()));
                return Err(EXIT_USAGE);
            }
        }
    };

    // gres.conf: missing is fine (slurmd then uses slurm.conf alone),
    // unless it was named.
    let gres_path = args.gres_conf.clone().unwrap_or_else(|| slurm_path.with_file_name("gres.conf"));
    let gres_exists = std::fs::metadata(&gres_path).is_ok();
    if !gres_exists && args.gres_conf.is_some() {
        tool_error(format!("cannot read {}: no such file", gres_path.display()));
        return Err(EXIT_USAGE);
    }
    if !gres_exists {
        report.file_problems.push(Problem::new(Severity::Note, None, format!("Can not stat gres.conf file ({}), using slurm.conf data", gres_path.display())));
    } else {
        report.gres_conf = Some(gres_path.clone());
    }
    if report.file_problems.iter().any(|p| p.severity == Severity::Fatal) {
        return Ok(());
    }

    let fake_path = slurm_path.with_file_name("fake_gpus.conf");
    let fake_exists = std::fs::metadata(&fake_path).is_ok();
    let config_overrides = slurm.get("SlurmdParameters").is_some_and(|v| v.to_ascii_lowercase().contains("config_overrides"));

    // gres.conf is read per node from an index of its lines (see
    // gres_conf_index.rs); the lines no checked node reads are read as well, for
    // their syntax.  With `include` lines, the whole file is also read the
    // ordinary way (on another thread), for the errors of the includes.
    let index = gres_exists.then(|| GresConfIndex::load(&gres_path));
    let env = EvalContext {
        slurm: &slurm,
        types: &types,
        index: index.as_ref(),
        fake_path: fake_exists.then_some(fake_path.as_path()),
        local_cpus: host::local_cpus(),
        config_overrides,
        global_autodetect: index.as_ref().and_then(|s| s.global_autodetect().cloned()),
        args,
        behaviour,
        ours_gpu,
        plugin_dirs: plugin_dirs.as_ref(),
    };
    let whole_file = index.as_ref().is_some_and(|s| s.has_includes);
    let (full, mut evaluated) = std::thread::scope(|scope| {
        let full = scope.spawn(|| whole_file.then(|| GresConf::load(&gres_path)));
        let evaluated = env.evaluate_all(&nodes, &selected, &is_local);
        (full.join(), evaluated)
    });
    match full {
        Ok(None) => {}
        Ok(Some(Ok(full))) => {
            // Files slurmd reads as empty: said once, whatever the node.
            report.file_problems.extend(full.file_remarks().iter().map(Problem::from_diagnostic));
            std::mem::forget(full)
        }
        Ok(Some(Err(errors))) => return conf_errors(&errors, &gres_path, report),
        Err(_) => {
            tool_error("reading gres.conf failed");
            return Err(EXIT_USAGE);
        }
    }
    if let Some(s) = &index {
        // Lines of the same text but for NodeName= have the same syntax:
        // each text is read once.
        let mut texts = HashSet::new();
        let unread: Vec<usize> = (0..s.len()).filter(|i| !evaluated.read.contains(i) && texts.insert(s.line_key(*i))).collect();
        if !unread.is_empty() {
            match s.check_lines(&unread) {
                Ok(diagnostics) => report.file_problems.extend(diagnostics.iter().map(Problem::from_diagnostic)),
                Err(errors) => evaluated.syntax.extend(errors),
            }
        }
    }
    if !evaluated.syntax.is_empty() {
        // slurmd refuses the whole file, on every node.
        let mut errors = std::mem::take(&mut evaluated.syntax);
        errors.sort_by(|a, b| (&a.location.path, a.location.line, a.location.column).cmp(&(&b.location.path, b.location.line, b.location.column)));
        errors.dedup();
        report.file_problems.extend(errors.iter().map(Problem::from_conf_error));
        std::mem::forget(evaluated);
        return Ok(());
    }
    // A remark that several sets of nodes share is reported once.
    let mut seen: HashMap<(Option<Location>, String), usize> = HashMap::new();
    for p in evaluated.groups.iter().flat_map(|g| g.outcome.problems.iter()) {
        *seen.entry((p.location.clone(), p.message.clone())).or_default() += 1;
    }
    let mut file_level: HashSet<(Option<Location>, String)> = report.file_problems.iter().map(|p| (p.location.clone(), p.message.clone())).collect();
    if evaluated.groups.len() > 1 {
        for g in &evaluated.groups {
            for p in &g.outcome.problems {
                let key = (p.location.clone(), p.message.clone());
                if seen.get(&key).copied().unwrap_or(0) > 1 && p.location.is_some() && file_level.insert(key) {
                    report.file_problems.push(p.clone());
                }
            }
        }
    }
    report.groups = std::mem::take(&mut evaluated.groups);
    for g in &mut report.groups {
        g.outcome.problems.retain(|p| !file_level.contains(&(p.location.clone(), p.message.clone())));
    }
    std::mem::forget(index);
    std::mem::forget(evaluated);
    report.entries = nodes.entries;
    std::mem::forget(nodes.by_name);
    std::mem::forget(slurm);
    Ok(())
}
