//! The whole sequence for one node ([`predict`]): the inputs, already
//! read, through slurmd's steps and each GRES plugin's load, to the lines
//! `slurmd -G` would print and every problem on the way; and what
//! slurmctld makes of the counts the node then registers
//! ([`registration_problems`]).

use std::collections::HashMap;

use crate::problem::{Problem, Severity};
use crate::slurm_gres::{validate_slurm_conf, SlurmGres};
use crate::slurmd_merge::{check_conf_mismatch, contexts, merge_config, remove_fileless_gpus, slurmd_line};
use gres_config::gres_conf::{AutoDetect, NodeGresConf, NodeRecord};
use gres_config::syntax::{Diagnostic, Location};
use gres_core::devices::{self, DevStat};
use gres_core::hostlist;
use gres_core::merge;
use gres_core::model::{gres_build_id, ConfFlags, GresRecord, LogLevel, LogLine};
use gres_core::sharing::{self, LoadInput, SharedKind};
use gres_core::text::closest_key;

/// What [`predict`] works on.
pub struct NodeInput<'a> {
    /// `GresTypes`, in the order slurmd loads the plugins.
    pub gres_types: &'a [String],
    /// The node's slurm.conf GRES ([`node_slurm_gres`](crate::node_slurm_gres)); `None` when slurmd
    /// would have none (node unknown).
    pub slurm: Option<&'a [SlurmGres]>,
    /// CPUs slurmd sizes the records for.
    pub cpu_cnt: u32,
    /// gres.conf evaluated for the node; `None` without a gres.conf.
    pub gres_conf: Option<&'a NodeGresConf>,
    /// GPUs gres/gpu merges with (fake_gpus.conf or detection); `None`:
    /// no merge.
    pub system_gpus: Option<Vec<GresRecord>>,
    /// fake_gpus.conf is in use.
    pub fake_gpus: bool,
    /// Look at device files through this (`None`: device files are not
    /// looked at, as outside slurmd).
    pub stat: Option<&'a StatFn>,
}

/// How device files are looked at: `stat()` in slurmd.
pub type StatFn = devices::StatFn;

/// What [`predict`] finds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prediction {
    /// The final records, in slurmd's order (empty when slurmd stops).
    pub records: Vec<GresRecord>,
    /// The `Gres Name=...` lines of `slurmd -G`.
    pub lines: Vec<String>,
    /// Every problem found, the fatal one included (slurmd stops at the
    /// first fatal one).
    pub problems: Vec<Problem>,
    /// The AutoDetect mode of the node.
    pub autodetect: AutoDetect,
    /// What slurmd logs on the way (all levels).
    pub log: Vec<LogLine>,
}

impl Prediction {
    pub fn fatal(&self) -> Option<&Problem> {
        self.problems.iter().find(|p| p.severity == Severity::Fatal)
    }
}

/// Places of gres.conf values, for problems found after the records have
/// been merged and split.
#[derive(Default)]
struct Places<'a> {
    files: Vec<(String, Location)>,
    /// The gres.conf records, in order.
    records: &'a [NodeRecord],
    types: HashMap<String, Location>,
    names: HashMap<u32, Location>,
}

impl<'a> Places<'a> {
    fn new(records: &'a [NodeRecord]) -> Self {
        let mut p = Places::default();
        for r in records {
            if let Some(file) = &r.record.file {
                for f in hostlist::expand(file).unwrap_or_default() {
                    p.files.push((f, r.location.clone()));
                }
            }
            if let Some(t) = &r.record.type_name {
                p.types.entry(t.to_ascii_lowercase()).or_insert_with(|| r.location.clone());
            }
            p.names.entry(r.record.plugin_id).or_insert_with(|| r.location.clone());
        }
        p.records = records;
        // Longest first, so that `/dev/nvidia1` is not taken for `/dev/nvidia10`.
        p.files.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        p
    }

    /// The gres.conf line of record `i` of `records` (merged records), the
    /// one that names `path`: the n-th gres.conf record with the same `File`
    /// value for the n-th such record, else the first that names `path`.
    fn of_record(&self, records: &[GresRecord], i: usize, path: &str) -> Option<Location> {
        let rec = records.get(i)?;
        let file = rec.file.as_deref()?;
        let alike = |r: &GresRecord| r.name == rec.name && r.file.as_deref() == Some(file);
        let nth = records[..i].iter().filter(|r| alike(r)).count();
        let same_file = self.records.iter().filter(|r| alike(&r.record)).nth(nth);
        let naming = || {
            self.records
                .iter()
                .find(|r| r.record.name == rec.name && hostlist::expand(r.record.file.as_deref().unwrap_or("")).is_ok_and(|f| f.iter().any(|f| f == path)))
        };
        same_file.or_else(naming).map(|r| r.location.clone())
    }

    /// The gres.conf line of the file a message names.
    fn of_message(&self, message: &str) -> Option<Location> {
        self.files
            .iter()
            .find(|(f, _)| message.match_indices(f.as_str()).any(|(at, _)| !message[at + f.len()..].starts_with(|c: char| c.is_ascii_digit())))
            .map(|(_, l)| l.clone())
    }
}

/// Run slurmd's handling of a node's GRES configuration on `input`.
pub fn predict(input: NodeInput<'_>) -> Prediction {
    let mut p = predict_inner(input);
    dedup(&mut p.problems);
    p
}

fn predict_inner(input: NodeInput<'_>) -> Prediction {
    let mut p = Prediction::default();
    let node_records: &[NodeRecord] = input.gres_conf.map_or(&[], |g| g.records.as_slice());
    let places = Places::new(node_records);
    if let Some(g) = input.gres_conf {
        p.autodetect = g.autodetect;
        p.problems.extend(g.diagnostics.iter().map(|d| gres_conf_problem(d, input.gres_types)));
    }
    let records: Vec<GresRecord> = node_records.iter().map(|r| r.record.clone()).collect();
    if input.gres_types.is_empty() {
        return p;
    }
    if let Some(stat) = input.stat {
        if let Some(problem) = missing_file(node_records, stat) {
            p.problems.push(problem);
            return p;
        }
    }
    if let Some(slurm) = input.slurm {
        for g in slurm {
            if let Err(message) = validate_slurm_conf(g) {
                p.problems.push(Problem::new(Severity::Fatal, None, message).with_help(format!("give every {} item of Gres= a type, or none", g.name)));
                return p;
            }
        }
    }
    let ctxs = contexts(input.gres_types, &records);
    if let Some(slurm) = input.slurm {
        for ctx in &ctxs {
            for g in slurm.iter().filter(|g| g.plugin_id == ctx.plugin_id) {
                for (i, extra) in check_conf_mismatch(&records, g) {
                    let r = &records[i];
                    let what = match &r.type_name {
                        Some(t) => format!("{}:{t}", r.name),
                        None => r.name.clone(),
                    };
                    let help = if g.types.is_empty() && r.type_name.is_some() {
                        format!("the node's Gres= counts {} without a type, so slurmd drops the types of gres.conf (and warns about each typed line): write Gres={}:<type>:<count>", r.name, r.name)
                    } else {
                        format!("make the node's Gres= in slurm.conf count {what} as gres.conf does")
                    };
                    p.problems.push(
                        Problem::new(
                            Severity::Warning,
                            Some(node_records[i].location.clone()),
                            format!("A line in gres.conf for GRES {what} has {extra} more configured than expected in slurm.conf. Ignoring extra GRES."),
                        )
                        .with_help(help),
                    );
                }
            }
        }
    }
    let mut records = merge_config(records, input.slurm, &ctxs, input.cpu_cnt, &mut p.log);
    let configured = records.clone();

    for ctx in ctxs.iter().filter(|c| c.has_plugin) {
        let step = match ctx.name.as_str() {
            "gpu" => gpu_load(&mut records, &input, &places, &mut p),
            "mps" => shared_load(&mut records, SharedKind::Mps, &input, &places, &mut p),
            "shard" => shared_load(&mut records, SharedKind::Shard, &input, &places, &mut p),
            name => device_load(&records, name, &format!("gres/{name}"), &input, &places, &mut p),
        };
        if step.is_err() {
            p.records.clear();
            return p;
        }
    }
    let gpu_id = input.gres_types.iter().any(|t| t == "gpu").then(|| gres_build_id("gpu"));
    for removed in remove_fileless_gpus(&mut records, gpu_id) {
        p.log.push(LogLine::new(LogLevel::Debug, format!("Removing file-less GPU {removed} from final GRES list")));
    }
    p.lines = records.iter().map(slurmd_line).collect();
    shared_count_problems(&configured, &records, &places, &mut p);
    sharing_kind_problems(&configured, &places, &mut p);
    env_flag_problems(&records, &places, &mut p);
    p.records = records;
    p
}

/// slurmd reads each file of gres.conf's `File=` lines when it reads the
/// line, and stops when one does not exist (after waiting 20 seconds for
/// it to appear).
fn missing_file(records: &[NodeRecord], stat: &StatFn) -> Option<Problem> {
    for r in records {
        let Some(file) = &r.record.file else { continue };
        for f in hostlist::expand(file).unwrap_or_default() {
            if let Err(reason) = stat(&f) {
                return Some(Problem::new(Severity::Fatal, Some(r.location.clone()), format!("can't stat gres.conf file {f}: {reason}")).with_help(
                    "slurmd waits 20 seconds for every file of File= to exist, then stops: name existing device files, or create them before slurmd starts",
                ));
            }
        }
    }
    None
}

/// The problems without repeats (the GRES plugins look at the same device
/// files each, and slurmd logs each time).
fn dedup(problems: &mut Vec<Problem>) {
    let mut seen = std::collections::HashSet::new();
    problems.retain(|p| seen.insert((p.severity, p.location.clone(), p.message.clone())));
}

/// A gres.conf remark as a problem, with advice for the common ones.
fn gres_conf_problem(d: &Diagnostic, gres_types: &[String]) -> Problem {
    let problem = Problem::from_diagnostic(d);
    if let Some(name) = d.message.strip_prefix("Ignoring gres.conf record, invalid name: ") {
        let valid: Vec<&str> = gres_types.iter().map(String::as_str).collect();
        return problem
            .with_suggestion(closest_key(name, &valid).map(str::to_string))
            .with_help(format!("GresTypes in slurm.conf does not name \"{name}\": add it there, or fix the name"));
    }
    problem
}

/// Whether a log line continues the one before (the records a message
/// ending in `:` lists).
fn continues_message(message: &str) -> bool {
    message.starts_with(char::is_whitespace) || message == "[slurm|gres].conf:" || message == "system:"
}

fn log_problems(lines: &[LogLine], places: &Places, p: &mut Prediction) {
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        let mut message = l.message.clone();
        let mut j = i + 1;
        while j < lines.len() && continues_message(&lines[j].message) {
            message.push_str("\n  ");
            message.push_str(lines[j].message.trim());
            j += 1;
        }
        let mut problem = Problem::from_log(l.level, places.of_message(&message), &message);
        if message.contains("SHARING configuration lacks") {
            let sharing_here = [gres_build_id("mps"), gres_build_id("shard")].iter().any(|id| places.names.contains_key(id));
            problem = problem.with_help(if sharing_here {
                "gres/mps and gres/shard need the GPUs' device files: every GPU the node's Gres= counts needs File= in gres.conf (or AutoDetect)"
            } else {
                "the cause is the node's GPUs, not mps or shard (this node has none; GresTypes loads their plugins on every node): the GPUs have no File= in gres.conf: give them File= (or AutoDetect)"
            });
        }
        if problem.severity != Severity::Note {
            p.problems.push(problem);
        }
        i = j;
    }
    p.log.extend(lines.iter().cloned());
}

/// Device-list problems of GRES `name`; `Err` when fatal.
fn device_problems(list: &devices::DeviceList, plugin: &str, places: &Places, p: &mut Prediction) -> Result<(), ()> {
    for problem in &list.problems {
        let severity = if problem.fatal { Severity::Fatal } else { Severity::Error };
        let help = if problem.fatal {
            "name each device file once in gres.conf"
        } else {
            "File= must name the device nodes of this host (pass --no-device-check to check a configuration for another host)"
        };
        // A file named twice: the second use, with the first as a note.
        let twice = problem.message.strip_suffix(')').and_then(|m| m.split_once("duplicate device file name (")).map(|(_, f)| f);
        let uses: Vec<&Location> = twice.map(|f| places.files.iter().filter(|(g, _)| g == f).map(|(_, l)| l).collect()).unwrap_or_default();
        let mut found = match uses.as_slice() {
            [first, second, ..] => Problem::new(severity, Some((*second).clone()), problem.message.clone()).with_related((*first).clone(), "first named here"),
            _ => Problem::new(severity, places.of_message(&problem.message), problem.message.clone()),
        };
        found = found.with_help(help);
        p.problems.push(found);
    }
    if list.has_fatal() {
        p.problems.push(Problem::new(Severity::Fatal, None, format!("{plugin} failed to load configuration")));
        return Err(());
    }
    Ok(())
}

/// The device list of GRES `name` as slurmd builds it (files looked at
/// only when `input.stat` is given).
fn device_list(records: &[GresRecord], name: &str, input: &NodeInput<'_>) -> devices::DeviceList {
    let no_stat = |_: &str| -> Result<DevStat, String> { Err(String::new()) };
    devices::build_device_list_with_files(records, name, input.stat.is_some(), input.stat.unwrap_or(&no_stat))
}

fn device_load(records: &[GresRecord], name: &str, plugin: &str, input: &NodeInput<'_>, places: &Places, p: &mut Prediction) -> Result<(), ()> {
    device_problems(&device_list(records, name, input), plugin, places, p)
}

fn gpu_load(records: &mut Vec<GresRecord>, input: &NodeInput<'_>, places: &Places, p: &mut Prediction) -> Result<(), ()> {
    if let Some(system) = input.system_gpus.clone() {
        type_problems(records, &system, places, p);
        match merge::merge_system_gres_conf(std::mem::take(records), system, LogLevel::Debug3) {
            Ok(outcome) => {
                log_problems(&outcome.log, places, p);
                *records = outcome.records;
            }
            Err(e) => {
                p.problems.push(Problem::new(Severity::Fatal, None, e.to_string()));
                return Err(());
            }
        }
    }
    let list = device_list(records, "gpu", input);
    same_device_problems(records, &list.files, places, p);
    not_gpu_problems(&list, places, p);
    device_problems(&list, "Gres GPU plugin", places, p)
}

/// Character devices of GPUs: NVIDIA's (major 195, and the driver's
/// `nvidia-caps`/`nvidia-uvm` nodes, whose majors the kernel picks), DRM's
/// (226: AMD and Intel render nodes) and AMD's `/dev/kfd`.
fn is_gpu_device(d: &gres_core::model::GresDevice) -> bool {
    d.major == 195 || d.major == 226 || d.path.starts_with("/dev/nvidia") || d.path.starts_with("/dev/dri/") || d.path == "/dev/kfd"
}

/// `File=` of a GPU naming a character device that is not a GPU's
/// (`/dev/tty1`): slurmd takes it, and jobs get that device as their GPU.
fn not_gpu_problems(list: &devices::DeviceList, places: &Places, p: &mut Prediction) {
    for d in list.devices.iter().filter(|d| d.dev_type == gres_core::model::DevType::Char && !is_gpu_device(d)) {
        p.problems.push(
            Problem::new(
                Severity::Warning,
                places.of_message(&d.path),
                format!(
                    "{} is a character device with major {}, not a GPU's (NVIDIA 195 or nvidia-caps, DRM 226): slurmd takes it, and jobs get it as their GPU",
                    d.path, d.major
                ),
            )
            .with_help("File= must name the GPUs' device nodes, e.g. /dev/nvidia0"),
        );
    }
}

/// GPUs that are one device under two names (stock slurmd says nothing):
/// a warning at the second, with the first as its related place.  Without
/// `stat` the device list has compared the files by name.
fn same_device_problems(records: &[GresRecord], files: &[devices::FileUse], places: &Places, p: &mut Prediction) {
    for same in devices::same_devices(files) {
        let first = places.of_record(records, same.first.record, &same.first.path);
        let second = places.of_record(records, same.second.record, &same.second.path);
        let line = first.as_ref().map_or_else(String::new, |l| format!(", line {}", l.line));
        let (a, b) = (&same.first, &same.second);
        let mut problem = Problem::new(
            Severity::Warning,
            second,
            format!("{} is the same device as {} (GPU {}{line}): two jobs could be given one GPU", b.path, a.path, a.gpu),
        )
        .with_help("name each GPU's device files once in gres.conf (symbolic links and other names of a device count as the device)");
        if let Some(l) = first {
            problem = problem.with_related(l, format!("GPU {} uses {}", a.gpu, a.path));
        }
        p.problems.push(problem);
    }
}

fn shared_load(records: &mut Vec<GresRecord>, kind: SharedKind, input: &NodeInput<'_>, places: &Places, p: &mut Prediction) -> Result<(), ()> {
    let no_stat = |_: &str| -> Result<DevStat, String> { Err(String::new()) };
    let load = LoadInput {
        records,
        kind,
        in_slurmd: input.stat.is_some(),
        debug_gres: true,
        init_list_line_spelled: true,
        fake_gpus: input.fake_gpus,
        stat: input.stat.unwrap_or(&no_stat),
        log_max: LogLevel::Debug3,
    };
    let (result, logs) = sharing::load(&load);
    // The device-list lines are reported as device problems below.
    let (device_lines, other): (Vec<LogLine>, Vec<LogLine>) = logs.into_iter().partition(|l| {
        l.level == LogLevel::Error
            && (l.message.contains("is not a valid character or block device")
                || l.message.starts_with("stat(")
                || l.message.contains("duplicate device file name"))
    });
    log_problems(&other, places, p);
    match result {
        Ok(loaded) => {
            for l in &device_lines {
                p.problems.push(Problem::new(Severity::Error, places.of_message(&l.message), l.message.clone()));
            }
            *records = loaded.records;
            Ok(())
        }
        Err(e) => {
            for l in &device_lines {
                let severity = if l.message.contains("duplicate") { Severity::Fatal } else { Severity::Error };
                p.problems.push(Problem::new(severity, places.of_message(&l.message), l.message.clone()));
            }
            p.problems.push(Problem::new(Severity::Fatal, places.names.get(&gres_build_id(kind.name())).cloned(), format!("gres/{}: {e}", kind.name())));
            Err(())
        }
    }
}

/// Configured GPU types that no detected GPU's type contains: the merge
/// drops such GPUs (or keeps them without detected properties).
fn type_problems(records: &[GresRecord], system: &[GresRecord], places: &Places, p: &mut Prediction) {
    let gpu_id = gres_build_id("gpu");
    let detected: Vec<&str> = system.iter().filter_map(|s| s.type_name.as_deref()).collect();
    let mut seen: Vec<String> = Vec::new();
    for r in records.iter().filter(|r| r.plugin_id == gpu_id) {
        let Some(t) = r.type_name.as_deref() else { continue };
        let key = t.to_ascii_lowercase();
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        if detected.iter().any(|d| d.to_ascii_lowercase().contains(&key)) {
            continue;
        }
        let mut unique: Vec<&str> = Vec::new();
        for d in &detected {
            if !unique.contains(d) {
                unique.push(d);
            }
        }
        let list = if unique.is_empty() { "none".to_string() } else { unique.join(", ") };
        // A model word of a detected name (`a100` of `nvidia_a100-sxm4`)
        // close to the configured one.
        let words: Vec<&str> = unique.iter().flat_map(|d| d.split(['_', '-'])).filter(|w| w.len() > 1 && w.chars().any(|c| c.is_ascii_digit())).collect();
        let suggestion = closest_key(t, &words).map(str::to_string);
        p.problems.push(
            Problem::new(Severity::Error, places.types.get(&key).cloned(), format!("Type={t} matches no detected GPU (detected types: {list})"))
                .with_suggestion(suggestion)
                .with_help("a configured Type must be part of the detected type name (any case), e.g. Type=a100 for nvidia_a100-sxm4-80gb"),
        );
    }
}

/// gres.conf's `Type`s of a GRES that match none of the node's `Gres=`
/// types in slurm.conf (types are compared by id, so case counts): one
/// diagnosis naming both, instead of the extra lines, the missing types and
/// the drain that follow from it.  The problem,
/// and the GRES name whose downstream messages it replaces.
pub fn type_mismatch(slurm: &[SlurmGres], gres_conf: &NodeGresConf, gres_location: Option<&Location>) -> Option<(Problem, String)> {
    for g in slurm.iter().filter(|g| !g.types.is_empty()) {
        let typed: Vec<&NodeRecord> = gres_conf.records.iter().filter(|r| r.record.plugin_id == g.plugin_id && r.record.type_name.is_some()).collect();
        if typed.is_empty() {
            continue;
        }
        // Types are told apart as slurmctld does, by their id (case counts).
        let same = |a: &str, b: &str| gres_build_id(a) == gres_build_id(b);
        let conf_types: Vec<&str> = typed.iter().filter_map(|r| r.record.type_name.as_deref()).collect();
        let any_match = conf_types.iter().any(|t| g.types.iter().any(|(s, _)| same(t, s)));
        if any_match {
            continue;
        }
        let mut conf_list: Vec<&str> = Vec::new();
        for t in &conf_types {
            if !conf_list.contains(t) {
                conf_list.push(t);
            }
        }
        let node_list: Vec<&str> = g.types.iter().map(|(t, _)| t.as_str()).collect();
        let mut problem = Problem::new(
            Severity::Error,
            Some(typed[0].location.clone()),
            format!(
                "gres.conf's {} Type={} matches none of the node's Gres= types in slurm.conf ({}): jobs asking for {} cannot run on this node",
                g.name,
                conf_list.join(","),
                node_list.join(","),
                node_list.iter().map(|t| format!("{}:{t}", g.name)).collect::<Vec<_>>().join(" or ")
            ),
        )
        .with_help(format!("use the same Type in both files (Type={} in gres.conf, or {}:{}:<count> in Gres=)", node_list[0], g.name, conf_list[0]));
        if let Some(loc) = gres_location {
            problem = problem.with_related(loc.clone(), "the node's types");
        }
        return Some((problem, g.name.clone()));
    }
    None
}

/// Whether `p` is one of the messages [`type_mismatch`] replaces for GRES
/// `name`.
pub fn follows_from_type_mismatch(p: &Problem, name: &str) -> bool {
    p.message.starts_with(&format!("A line in gres.conf for GRES {name}:"))
        || p.message.starts_with(&format!("gres/{name} count reported lower than configured"))
        || (p.message.starts_with(&format!("gres/{name}:")) && p.message.contains(" count too low "))
}

/// Shared counts that do not divide evenly over their GPUs.
fn shared_count_problems(configured: &[GresRecord], final_records: &[GresRecord], places: &Places, p: &mut Prediction) {
    let gpu_id = gres_build_id("gpu");
    let gpus = final_records.iter().filter(|r| r.plugin_id == gpu_id && r.file.is_some()).count() as u64;
    for r in configured.iter().filter(|r| r.flags.has(ConfFlags::SHARED) && r.count > 0) {
        let parts = match r.file.as_deref() {
            Some(file) => hostlist::expand(file).map_or(0, |f| f.len() as u64),
            None => gpus,
        };
        if parts == 0 || r.count % parts == 0 {
            continue;
        }
        let location = places.names.get(&r.plugin_id).cloned();
        let message = if r.file.is_some() {
            format!(
                "{} Count={} does not divide over the {parts} files of its File=: each gets {}, the other {} of the count are lost",
                r.name,
                r.count,
                r.count / parts,
                r.count % parts
            )
        } else {
            format!("{} Count={} does not divide over the node's {parts} GPUs: some get {}, others {}", r.name, r.count, r.count / parts, r.count / parts + 1)
        };
        p.problems.push(
            Problem::new(Severity::Warning, location, message).with_help(format!("use a Count that is a multiple of {parts}, or one line per GPU with File=")),
        );
    }
}

/// What slurmctld makes of sharing GRES it cannot place: gres/mps and
/// gres/shard on one node (each GPU links to one sharing GRES only, one
/// `alt_gres` per GPU in every release up to 26.05, so the jobs of the
/// other get no device), and per-GPU counts that differ on GPUs slurmctld
/// cannot tell apart (no `Type`, no `Cores`: it spreads the node's count
/// evenly instead).
fn sharing_kind_problems(configured: &[GresRecord], places: &Places, p: &mut Prediction) {
    let (mps_id, shard_id, gpu_id) = (gres_build_id("mps"), gres_build_id("shard"), gres_build_id("gpu"));
    let has = |id: u32| configured.iter().any(|r| r.plugin_id == id && r.count > 0);
    if has(mps_id) && has(shard_id) {
        let mut problem = Problem::new(
            Severity::Warning,
            places.names.get(&shard_id).cloned(),
            "gres/mps and gres/shard are both configured on this node: slurmctld links each GPU to one sharing GRES only, so the jobs of the other get no GPU device",
        )
        .with_help("configure either mps or shard on a node, not both");
        if let Some(mps) = places.names.get(&mps_id) {
            problem = problem.with_related(mps.clone(), "mps is configured here");
        }
        p.problems.push(problem);
    }
    let gpus_told_apart = configured.iter().filter(|r| r.plugin_id == gpu_id).any(|r| r.type_name.is_some() || r.cpus.is_some());
    for id in [mps_id, shard_id] {
        let per_gpu: Vec<&GresRecord> = configured.iter().filter(|r| r.plugin_id == id && r.count > 0 && r.file.is_some()).collect();
        let mut counts: Vec<u64> = per_gpu.iter().map(|r| r.count).collect();
        counts.sort_unstable();
        counts.dedup();
        if counts.len() > 1 && !gpus_told_apart {
            let name = &per_gpu[0].name;
            p.problems.push(
                Problem::new(
                    Severity::Warning,
                    places.names.get(&id).cloned(),
                    format!("{name} counts differ per GPU ({}) on GPUs without Type or Cores: slurmctld cannot tell the GPUs apart and spreads the node's {name} count evenly over them", counts.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
                )
                .with_help("give the GPUs Type= (or Cores=) so that slurmctld can match each count to its GPU, or the same count on every GPU"),
            );
        }
    }
}

/// Records that ask for different environment variables explicitly
/// (`Flags=*_env` on lines of different GRES): every job on the node gets
/// the variables of all of them.
fn env_flag_problems(records: &[GresRecord], places: &Places, p: &mut Prediction) {
    let mut sets: Vec<(u32, u32)> = Vec::new();
    for r in records {
        let env = r.flags.0 & ConfFlags::ENV_SET;
        if env != 0 && !r.flags.has(ConfFlags::ENV_DEF) && !sets.iter().any(|(e, _)| *e == env) {
            sets.push((env, r.plugin_id));
        }
    }
    if sets.len() > 1 {
        p.problems.push(
            Problem::new(
                Severity::Warning,
                places.names.get(&sets[1].1).cloned(),
                "records of this node ask for different environment variables (Flags=*_env): every GPU job of the node gets all of them",
            )
            .with_help("give the gpu, mps and shard lines of a node the same Flags= env words"),
        );
    }
}

/// What slurmctld makes of the counts the node reports when it registers:
/// a GRES with fewer than slurm.conf counts drains the node; fewer of a
/// type than slurm.conf counts leaves jobs asking for that type waiting.
/// `gres_location` is the node's `Gres=` in slurm.conf.
pub fn registration_problems(slurm: &[SlurmGres], records: &[GresRecord], gres_location: Option<&Location>, detection_pending: bool) -> Vec<Problem> {
    let mut out = Vec::new();
    for g in slurm.iter().filter(|g| g.count > 0) {
        let found: u64 = records.iter().filter(|r| r.plugin_id == g.plugin_id).map(|r| r.count).fold(0, u64::saturating_add);
        if found < g.count {
            let gpu = g.name == "gpu";
            if gpu && detection_pending {
                out.push(Problem::new(
                    Severity::Note,
                    gres_location.cloned(),
                    format!("gres/gpu: {found} of {} GPUs configured without detection; AutoDetect runs on the node itself", g.count),
                ));
                continue;
            }
            let help = if gpu {
                "slurmd keeps only GPUs with a device file: give them File= in gres.conf (or AutoDetect), or lower the count in Gres="
            } else {
                "make gres.conf and the node's Gres= in slurm.conf agree"
            };
            out.push(
                Problem::new(
                    Severity::Error,
                    gres_location.cloned(),
                    format!("gres/{} count reported lower than configured ({found} < {}): slurmctld drains the node", g.name, g.count),
                )
                .with_help(help),
            );
        }
        if g.name == "gpu" && detection_pending {
            continue;
        }
        for (t, n) in &g.types {
            let id = gres_build_id(t);
            let found: u64 = records
                .iter()
                .filter(|r| r.plugin_id == g.plugin_id && r.type_name.as_deref().map(gres_build_id) == Some(id))
                .map(|r| r.count)
                .fold(0, u64::saturating_add);
            if found < *n {
                out.push(
                    Problem::new(
                        Severity::Error,
                        gres_location.cloned(),
                        format!("gres/{}:{t} count too low ({found} < {n}): jobs asking for {}:{t}:{n} cannot run here", g.name, g.name),
                    )
                    .with_help(format!("the node needs {n} {} of Type={t} in gres.conf (with a File=), or detected", g.name)),
                );
            }
        }
    }
    out
}
