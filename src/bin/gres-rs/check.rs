//! `gres-rs check`: slurmd's GRES table for nodes, and the problems slurmd
//! and slurmctld would have with their configuration.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use slurm_gpu_gres::config::gres_conf::{AutoDetect, GresConf, NodeContext};
use slurm_gpu_gres::config::syntax::{ConfError, ConfErrors, ErrorKind, Location};
use slurm_gpu_gres::core::behaviour::Behaviour;
use slurm_gpu_gres::core::devices::{stat_device, DevStat};
use slurm_gpu_gres::core::fake_gpus::{self, CpuConv};
use slurm_gpu_gres::core::host::NodeConfig;
use slurm_gpu_gres::core::host::StandaloneHost;
use slurm_gpu_gres::core::hostlist;
use slurm_gpu_gres::core::hostlist::ranged_string;
use slurm_gpu_gres::ffi::behaviour as abi;
use slurm_gpu_gres::predict::slurm_conf::SlurmConf;
use slurm_gpu_gres::predict::{self, CpuMap, NodeInput, Prediction, Problem, Severity};

use crate::host::{self, LocalCpus};
use crate::plugin_dir::GpuPick;
use crate::render::{self, JsonProblem, JsonRecord, Sources};
use crate::sliced::{SliceError, Sliced};
use crate::{default_slurm_conf, tool_error, CheckArgs, CheckFormat, FailOn, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};

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
        let read = |p: &Path| slurm_gpu_gres::core::files::read_bounded(p, crate::elf::MAX_PLUGIN_FILE_LEN).ok();
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
        let names = match slurm_gpu_gres::core::hostlist::expand(expr) {
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
                    let hint = slurm_gpu_gres::core::text::closest_key(name, &known).map(|k| format!(" (did you mean {k}?)")).unwrap_or_default();
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
    // sliced.rs); the lines no checked node reads are read as well, for
    // their syntax.  With `include` lines, the whole file is also read the
    // ordinary way (on another thread), for the errors of the includes.
    let sliced = gres_exists.then(|| Sliced::load(&gres_path));
    let env = Env {
        slurm: &slurm,
        types: &types,
        sliced: sliced.as_ref(),
        fake_path: fake_exists.then_some(fake_path.as_path()),
        local_cpus: host::local_cpus(),
        config_overrides,
        global_autodetect: sliced.as_ref().and_then(|s| s.global_autodetect().cloned()),
        args,
        behaviour,
        ours_gpu,
        plugin_dirs: plugin_dirs.as_ref(),
    };
    let whole_file = sliced.as_ref().is_some_and(|s| s.has_includes);
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
    if let Some(s) = &sliced {
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
    std::mem::forget(sliced);
    std::mem::forget(evaluated);
    report.entries = nodes.entries;
    std::mem::forget(nodes.by_name);
    std::mem::forget(slurm);
    Ok(())
}

/// The groups of nodes evaluated, and what was read on the way.
struct Evaluated {
    groups: Vec<Group>,
    /// Syntax errors of gres.conf lines.
    syntax: Vec<ConfError>,
    /// The logical lines of gres.conf read for some node.
    read: HashSet<usize>,
}

/// What every node's evaluation shares.
struct Env<'a> {
    slurm: &'a SlurmConf,
    types: &'a [String],
    sliced: Option<&'a Sliced>,
    fake_path: Option<&'a Path>,
    local_cpus: Option<LocalCpus>,
    config_overrides: bool,
    global_autodetect: Option<Location>,
    args: &'a CheckArgs,
    /// How the release checked for reads gres.conf.
    behaviour: &'a Behaviour,
    /// The gres/gpu slurmd loads from PluginDir is ours (None: unknown).
    ours_gpu: Option<bool>,
    /// This host's PluginDir (None: not looked at).
    plugin_dirs: Option<&'a PluginDirs>,
}

impl Env<'_> {
    /// Evaluate the `selected` nodes, once for each set of nodes that read
    /// lines of the same content from both files.
    fn evaluate_all(&self, nodes: &Nodes, selected: &[usize], is_local: &dyn Fn(&NodeEntry) -> bool) -> Evaluated {
        let wanted: HashSet<&str> = selected.iter().map(|&i| nodes.entries[i].name.as_str()).collect();
        let node_lines = self.sliced.map(|s| s.node_lines(&wanted)).unwrap_or_default();
        let no_lines = Vec::new();
        let mut keys: HashMap<(String, usize, bool), usize> = HashMap::new();
        let mut members: Vec<(Vec<usize>, &Vec<usize>)> = Vec::new();
        for &i in selected {
            let e = &nodes.entries[i];
            let lines = node_lines.get(&e.name).unwrap_or(&no_lines);
            let content = match self.sliced {
                Some(s) => s.content_key(lines).unwrap_or_else(|| format!("{lines:?}")),
                None => String::new(),
            };
            let g = *keys.entry((content, e.line, is_local(e))).or_insert_with(|| {
                members.push((Vec::new(), lines));
                members.len() - 1
            });
            members[g].0.push(i);
        }
        let mut out = Evaluated { groups: Vec::new(), syntax: Vec::new(), read: HashSet::new() };
        if let Some(s) = self.sliced {
            // Lines of nodes evaluated through another node with the same
            // content count as read: their text is the same.
            out.read.extend(s.chosen(&[]));
            out.read.extend(node_lines.values().flatten().copied());
        }
        for (nodes_of, lines) in members {
            let first = &nodes.entries[nodes_of[0]];
            let (outcome, syntax) = self.evaluate(first, lines, is_local(first));
            out.syntax.extend(syntax);
            out.groups.push(Group { outcome, nodes: nodes_of });
        }
        out
    }

    fn evaluate(&self, entry: &NodeEntry, lines: &[usize], local: bool) -> (Outcome, Vec<ConfError>) {
        let line = &self.slurm.nodes()[entry.line];
        let (hw, mut problems) = predict::node_hw(line);
        let actual = if local { self.local_cpus.map(|c| (c.cpus, c.cores)) } else { None };
        let cpus = hw.cpus.max(actual.map_or(0, |(c, _)| c));
        let map = CpuMap::for_node(&hw, actual, self.config_overrides);
        let abs_to_mac = move |r: &str| map.abs_to_mac(r);
        let ctx = NodeContext { node_name: &entry.name, cpu_cnt: cpus, gres_types: Some(self.types), abs_to_mac: Some(&abs_to_mac), behaviour: self.behaviour };
        let mut outcome = Outcome { cpus, local, origin: String::new(), prediction: Prediction::default(), problems: Vec::new() };
        let gres_node = match self.sliced.map(|s| s.node_config(lines, &ctx)) {
            None => None,
            Some(Ok(g)) => Some(g),
            Some(Err(SliceError::Node(e))) => {
                problems.push(Problem::from_conf_error(&e));
                outcome.problems = problems;
                return (outcome, Vec::new());
            }
            Some(Err(SliceError::Syntax(errors))) => return (outcome, errors),
        };
        let gres_value = line.gres();
        let (slurm_gres, gres_problems) = predict::node_slurm_gres(&entry.name, gres_value.map(|g| (g.value.as_str(), &g.location)), self.types);
        problems.extend(gres_problems);
        let autodetect = gres_node.as_ref().map_or(AutoDetect::Unset, |g| g.autodetect);
        let mut system = None;
        if let Some(path) = self.fake_path {
            let conv = if autodetect == AutoDetect::Nvml { CpuConv::Nvml } else { CpuConv::Unsupported };
            match fake_gpus::load_fake_gpus(path, conv) {
                Ok(Some(fake)) => {
                    problems.extend(fake.diagnostics.iter().map(Problem::from_diagnostic));
                    system = Some(fake.records);
                }
                Ok(None) => {}
                Err(e) => {
                    problems.push(Problem::new(Severity::Fatal, None, e.to_string()));
                    outcome.problems = problems;
                    return (outcome, Vec::new());
                }
            }
        } else if local && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Full) && !self.args.no_detect {
            // AutoDetect=full probes gpu/nvml first.
            system = slurm_gpu_gres::nvml::system_gpu_list(
                &StandaloneHost::new(*self.behaviour),
                NodeConfig { cpu_cnt: cpus, in_slurmd: true },
                &Default::default(),
            );
        }
        // The gpu plugin slurmd picks on this host, and the file it loads.
        let gpu_pick = if local { crate::plugin_dir::gpu_plugin(autodetect, self.behaviour, &host::library_loadable) } else { None };
        let mut gpu_loads = None;
        let gres_gpu = self.types.iter().any(|t| t.eq_ignore_ascii_case("gpu"));
        if let (Some(pick), Some(dirs), true) = (&gpu_pick, self.plugin_dirs, gres_gpu) {
            let choice = dirs.predict(&[pick.name]).remove(0);
            gpu_loads = Some(choice.loaded.is_some());
            problems.extend(crate::plugin_dir::gpu_problems(pick, &choice, &dirs.text, self.slurm));
        }
        if self.fake_path.is_none() {
            problems.extend(self.autodetect_problems(autodetect, local, system.is_some(), gpu_pick.as_ref(), gpu_loads));
        }
        let detection_pending = !local
            && system.is_none()
            && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Rsmi | AutoDetect::OneApi | AutoDetect::Nrt | AutoDetect::Nvidia | AutoDetect::Full);
        let configured = if gres_node.is_some() { "gres.conf" } else { "slurm.conf (no gres.conf)" };
        let gpus = |n: usize| if n == 1 { "1 GPU".to_string() } else { format!("{n} GPUs") };
        outcome.origin = match &system {
            Some(s) if self.fake_path.is_some() => format!("{} from fake_gpus.conf, merged with {configured}", gpus(s.len())),
            Some(s) => format!("{} detected by NVML on this host, merged with {configured}", gpus(s.len())),
            None if detection_pending => format!("from {configured}; detection (AutoDetect={}) runs on the node, not here", autodetect.as_str()),
            None if local && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Full) && self.args.no_detect => {
                format!("from {configured}; NVML not asked (--no-detect)")
            }
            None if local && matches!(autodetect, AutoDetect::Nvml | AutoDetect::Full) => format!("from {configured}; NVML detected nothing"),
            None => format!("from {configured}"),
        };
        let stat = |p: &str| -> Result<DevStat, String> { stat_device(p) };
        let device_check = local && !self.args.no_device_check;
        let mut prediction = predict::predict(NodeInput {
            gres_types: self.types,
            slurm: Some(&slurm_gres),
            cpu_cnt: cpus,
            gres_conf: gres_node.as_ref(),
            system_gpus: system,
            fake_gpus: self.fake_path.is_some(),
            stat: device_check.then_some(&stat as &dyn Fn(&str) -> Result<DevStat, String>),
        });
        // The GRES lines as the release checked for writes them (23.02+:
        // `Links=... Flags=...`).
        prediction.lines = prediction.records.iter().map(|r| predict::slurmd_line_as(r, self.behaviour)).collect();
        // slurmd's log lines are not shown (problems are); with many nodes
        // they would only take memory.
        prediction.log = Vec::new();
        problems.extend(std::mem::take(&mut prediction.problems));
        if problems.iter().all(|p| p.severity != Severity::Fatal) {
            problems.extend(predict::registration_problems(&slurm_gres, &prediction.records, gres_value.map(|g| &g.location), detection_pending));
        }
        if let Some((mut mismatch, name)) = gres_node.as_ref().and_then(|g| predict::type_mismatch(&slurm_gres, g, gres_value.map(|v| &v.location))) {
            if problems.iter().any(|p| predict::follows_from_type_mismatch(p, &name) && p.message.contains("drains the node")) {
                mismatch.message.push_str(", and slurmctld drains it");
            }
            problems.retain(|p| !predict::follows_from_type_mismatch(p, &name));
            problems.push(mismatch);
        }
        if !local && !self.args.no_device_check && prediction.records.iter().any(|r| r.file.is_some()) {
            problems.push(Problem::new(Severity::Note, None, format!("device files not checked: {} is not this host", entry.name)));
        }
        outcome.prediction = prediction;
        outcome.problems = problems;
        (outcome, Vec::new())
    }

    /// `pick`: the gpu plugin slurmd picks here (None: not predicted);
    /// `gpu_loads`: whether a file of it is accepted (None: not looked at).
    fn autodetect_problems(&self, autodetect: AutoDetect, local: bool, detected: bool, pick: Option<&GpuPick>, gpu_loads: Option<bool>) -> Vec<Problem> {
        let mut out = Vec::new();
        let energy_gpu = self.slurm.get("AcctGatherEnergyType").is_some_and(|v| v.trim().eq_ignore_ascii_case("acct_gather_energy/gpu"));
        // gpu/generic: what slurmd falls back to, which reads no energy.
        let generic = pick.is_some_and(|p| !p.is_nvml());
        let nvml_libs = if self.behaviour.nvml_versioned_lib { "libnvidia-ml.so.1" } else { "libnvidia-ml.so (unversioned)" };
        let no_energy = generic || pick.is_some_and(|p| p.is_nvml() && !p.required && gpu_loads == Some(false));
        if local && energy_gpu && no_energy {
            let energy = self.slurm.get_spanned("AcctGatherEnergyType").map(|s| s.location.clone());
            out.push(
                Problem::new(
                    Severity::Warning,
                    energy,
                    "AcctGatherEnergyType=acct_gather_energy/gpu, but slurmd will use gpu/generic, which reads no energy: jobs' GPU energy stays 0",
                )
                .with_help(format!("energy needs gpu/nvml: AutoDetect=nvml in gres.conf and the driver's {nvml_libs} loadable")),
            );
        }
        match autodetect {
            AutoDetect::Nvml if local && !host::library_loadable(slurm_gpu_gres::nvml::DEFAULT_LIB) => out.push(
                Problem::new(
                    Severity::Warning,
                    self.global_autodetect.clone(),
                    format!("AutoDetect=nvml, but there is no NVIDIA driver here ({} missing): NVML detects no GPU", slurm_gpu_gres::nvml::DEFAULT_LIB),
                )
                .with_help("install the NVIDIA driver, or list the GPUs with File= in gres.conf"),
            ),
            AutoDetect::Nvml if local && generic && self.ours_gpu == Some(true) => out.push(
                Problem::new(
                    Severity::Warning,
                    self.global_autodetect.clone(),
                    "AutoDetect=nvml: our gres/gpu detects the GPUs through libnvidia-ml.so.1, but slurmd picks gpu/generic (libnvidia-ml.so, unversioned, cannot be loaded), so --gpu-freq and acct_gather_energy/gpu have no gpu/nvml",
                )
                .with_help("install the driver's development link (Debian: apt install libnvidia-ml-dev, or ln -s libnvidia-ml.so.1 libnvidia-ml.so next to it)"),
            ),
            AutoDetect::Nvml if local && generic => out.push(
                Problem::new(
                    Severity::Warning,
                    self.global_autodetect.clone(),
                    "AutoDetect=nvml, but libnvidia-ml.so (unversioned) cannot be loaded here: the stock slurmd falls back to gpu/generic and detects no GPU",
                )
                .with_help("install the driver's development link (Debian: apt install libnvidia-ml-dev, or ln -s libnvidia-ml.so.1 libnvidia-ml.so next to it); gres-rs's gres_gpu.so asks NVML through libnvidia-ml.so.1 itself"),
            ),
            AutoDetect::Nvml if local && !detected && !self.args.no_detect => out.push(Problem::new(
                Severity::Warning,
                self.global_autodetect.clone(),
                "AutoDetect=nvml, but NVML reports no GPU on this host (see `gres-rs detect`)",
            )),
            AutoDetect::OneApi => out.push(Problem::new(
                Severity::Warning,
                self.global_autodetect.clone(),
                "AutoDetect=oneapi: this Slurm build has no gpu/oneapi plugin, slurmd uses gpu/generic and detects no GPU",
            )),
            _ => {}
        }
        out
    }
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

#[derive(Serialize)]
struct JsonNodes {
    names: Vec<String>,
    hostlist: String,
    local: bool,
    cpus: u32,
    autodetect: &'static str,
    /// slurmd starts (no fatal problem).
    starts: bool,
    gres: Vec<JsonRecord>,
    lines: Vec<String>,
    problems: Vec<JsonProblem>,
}

#[derive(Serialize, Default)]
struct Summary {
    nodes: usize,
    fatal: usize,
    errors: usize,
    warnings: usize,
}

#[derive(Serialize)]
struct JsonReport {
    /// The version of this document's layout: raised when a field changes
    /// meaning or goes (new fields may come without it).
    schema: u32,
    tool: &'static str,
    tool_version: &'static str,
    /// The Slurm release the plugins of this build are for.
    plugins_for_slurm: &'static str,
    /// The Slurm release gres.conf was read as.
    slurm_release: String,
    slurm_conf: String,
    gres_conf: Option<String>,
    nodes: Vec<JsonNodes>,
    problems: Vec<JsonProblem>,
    summary: Summary,
}

impl Summary {
    fn count(&mut self, p: &Problem) {
        match p.severity {
            Severity::Fatal => self.fatal += 1,
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Note => {}
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn output(args: &CheckArgs, report: &Report) -> u8 {
    let mut summary = Summary { nodes: report.groups.iter().map(|g| g.nodes.len()).sum(), ..Default::default() };
    report.file_problems.iter().for_each(|p| summary.count(p));
    report.groups.iter().flat_map(|g| g.outcome.problems.iter()).for_each(|p| summary.count(p));
    let shown = |p: &&Problem| args.verbose || p.severity != Severity::Note;
    let mut sources = Sources::default();
    let names = |g: &Group| -> Vec<String> { g.nodes.iter().map(|&i| report.entries[i].name.clone()).collect() };
    let several = summary.nodes > 1;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = match args.format {
        CheckFormat::Json => {
            let json = JsonReport {
                schema: 1,
                tool: "gres-rs",
                tool_version: env!("CARGO_PKG_VERSION"),
                plugins_for_slurm: slurm_gpu_gres::SLURM_VERSION,
                slurm_release: report.release.clone(),
                slurm_conf: report.slurm_conf.display().to_string(),
                gres_conf: report.gres_conf.as_ref().map(|p| p.display().to_string()),
                nodes: report
                    .groups
                    .iter()
                    .map(|g| {
                        let names = names(g);
                        let hostlist = ranged_string(&names);
                        let o = &g.outcome;
                        JsonNodes {
                            hostlist: hostlist.clone(),
                            names,
                            local: o.local,
                            cpus: o.cpus,
                            autodetect: o.prediction.autodetect.as_str(),
                            starts: !o.fatal(),
                            gres: o.prediction.records.iter().map(JsonRecord::new).collect(),
                            lines: o.prediction.lines.clone(),
                            problems: o.problems.iter().filter(shown).map(|p| render::json_problem(p, Some(&hostlist), &mut sources)).collect(),
                        }
                    })
                    .collect(),
                problems: report.file_problems.iter().filter(shown).map(|p| render::json_problem(p, None, &mut sources)).collect(),
                summary,
            };
            let r = serde_json::to_writer_pretty(&mut out, &json).map_err(std::io::Error::from).and_then(|()| writeln!(out));
            let code = exit_code(&json.summary, args.fail_on);
            return finish(r.and_then(|()| out.flush()), code);
        }
        CheckFormat::Text | CheckFormat::Slurmd => {
            let styled = render::styled_stderr();
            let mut err = String::new();
            for p in report.file_problems.iter().filter(shown) {
                err.push_str(&render::render_text(p, None, &mut sources, styled));
                err.push_str("\n\n");
            }
            let mut r = Ok(());
            for g in &report.groups {
                let names = names(g);
                let hostlist = ranged_string(&names);
                let o = &g.outcome;
                if !args.quiet {
                    // People's tables: a blank line between two nodes.
                    let gap = if args.format == CheckFormat::Text && !std::ptr::eq(g, &report.groups[0]) { "\n" } else { "" };
                    r = r.and_then(|()| write!(out, "{gap}{}", node_text(args.format, &hostlist, o)));
                }
                for p in o.problems.iter().filter(shown) {
                    let label = several.then_some(hostlist.as_str());
                    err.push_str(&render::render_text(p, label, &mut sources, styled));
                    err.push_str("\n\n");
                }
            }
            r = r.and_then(|()| out.flush());
            eprint!("{err}");
            eprintln!(
                "gres-rs: check: {}: {} fatal, {}, {}",
                plural(summary.nodes, "node", "nodes"),
                summary.fatal,
                plural(summary.errors, "error", "errors"),
                plural(summary.warnings, "warning", "warnings")
            );
            (r, exit_code(&summary, args.fail_on))
        }
    };
    finish(written.0, written.1)
}

/// A group of nodes on standard output: for people (`text`: a header line
/// and an aligned table), or the lines `slurmd -G` prints (`slurmd`).
fn node_text(format: CheckFormat, hostlist: &str, o: &Outcome) -> String {
    let autodetect = o.prediction.autodetect.as_str();
    let mut s = String::new();
    if format == CheckFormat::Slurmd {
        let state = if o.fatal() { " (slurmd stops, see below)" } else { "" };
        s.push_str(&format!("NodeName={hostlist} CPUs={} AutoDetect={autodetect}{state}\n", o.cpus));
        for l in &o.prediction.lines {
            s.push_str(l);
            s.push('\n');
        }
        return s;
    }
    s.push_str(&format!("{hostlist}: {} CPU{}, AutoDetect={autodetect}", o.cpus, if o.cpus == 1 { "" } else { "s" }));
    if o.fatal() {
        s.push_str(": slurmd stops (see below), no GRES\n");
    } else if o.prediction.records.is_empty() {
        s.push_str(&format!(", {}: no GRES\n", o.origin));
    } else {
        s.push_str(&format!(", {}\n", o.origin));
        s.push_str(&render::gres_table(&o.prediction.records));
    }
    s
}

/// 1 when a problem of at least the `--fail-on` severity was found.
fn exit_code(s: &Summary, fail_on: FailOn) -> u8 {
    let failing = match fail_on {
        FailOn::Fatal => s.fatal,
        FailOn::Error => s.fatal + s.errors,
        FailOn::Warning => s.fatal + s.errors + s.warnings,
    };
    if failing > 0 {
        EXIT_PROBLEMS
    } else {
        EXIT_OK
    }
}

fn finish(written: std::io::Result<()>, code: u8) -> u8 {
    match written {
        Ok(()) => code,
        // A closed pipe (`| head`) is not an error of the check.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Err(e) => {
            tool_error(format!("writing the report: {e}"));
            EXIT_USAGE
        }
    }
}
