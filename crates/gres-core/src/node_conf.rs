//! What slurmd 22.05 does with a node's GRES configuration around the
//! plugins' `node_config_load`, so that a tool can predict the GRES lines
//! `slurmd -G` prints and the problems slurmd (or slurmctld, when the node
//! registers) would have with it.
//!
//! In slurmd's order:
//!
//! 1. The node's `Gres=` of slurm.conf, with names missing from `GresTypes`
//!    dropped ([`gres_name_filter`]), is counted per GRES and type
//!    ([`gres_cnt`], [`node_slurm_gres`]); mixing typed and untyped counts
//!    of one GRES stops slurmd ([`validate_slurm_conf`]).
//! 2. gres.conf, already evaluated for the node ([`crate::gres_conf`]),
//!    is compared with those counts: records slurm.conf does not account
//!    for are logged ([`check_conf_mismatch`]).
//! 3. Both are merged ([`merge_config`]): gres.conf works only within what
//!    slurm.conf says.  For each GRES, in `GresTypes` order, and each of its
//!    slurm.conf types, gres.conf records of that type are taken until the
//!    count is reached (a record with more is cut down, its `File` list
//!    too); an untyped slurm.conf count takes any record and drops its type;
//!    what gres.conf does not cover becomes a record without `File`.
//!    gres.conf records slurm.conf does not count are dropped.
//! 4. Each GRES plugin rewrites the list: gres/gpu merges in detected GPUs
//!    ([`crate::merge`]) and checks its device files, gres/mps and
//!    gres/shard give each GPU its share ([`crate::sharing`]),
//!    gres/nic checks its device files.
//! 5. GPUs without `File` are removed ([`remove_fileless_gpus`]) and every
//!    record is logged ([`slurmd_line`]): what `slurmd -G` prints.
//!
//! [`predict`] runs the whole sequence on already-read inputs (device files
//! are looked at through a callback), and [`registration_problems`] adds
//! what slurmctld makes of the counts the node then reports.

use std::collections::HashMap;

use super::devices::{self, DevStat};
use super::gres_conf::syntax::{closest_key, suffix_mult, ConfError, Diagnostic, Location};
use super::gres_conf::{AutoDetect, NodeGresConf, NodeRecord};
use super::hostlist;
use super::merge::{self, strnatcmp};
use super::model::{gres_build_id, ConfFlags, GresRecord, LogLevel, LogLine};
use super::sharing::{self, LoadInput, SharedKind};
use super::slurm_conf::NodeLine;

/// The GRES plugins Debian's Slurm 22.05 ships (`gres_<name>.so`); a GRES
/// of another name is counted only (slurmd loads no plugin for it).
pub const GRES_PLUGINS: [&str; 4] = ["gpu", "mps", "shard", "nic"];

/// How serious a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// slurmd stops (`fatal()`): the node never comes up.
    Fatal,
    /// slurmd logs an error and goes on without part of the configuration,
    /// or slurmctld drains the node when it registers.
    Error,
    /// Works, but probably not as meant.
    Warning,
    /// For information (what slurmd logs at info or debug level).
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Fatal => "fatal",
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// A problem with a node's configuration, with the place it comes from when
/// known.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    pub severity: Severity,
    pub location: Option<Location>,
    pub message: String,
    /// A replacement for the faulty word ("did you mean").
    pub suggestion: Option<String>,
    /// How to fix it.
    pub help: Option<String>,
    /// Another place the problem is about (the first of two).
    pub related: Option<Related>,
    /// The feature of a later release it is about (a gres.conf value the
    /// release checked for does not know).
    pub feature: Option<crate::behaviour::Feature>,
}

/// A second place of a [`Problem`], with what it is there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Related {
    pub location: Location,
    pub label: String,
}

impl Problem {
    pub fn new(severity: Severity, location: Option<Location>, message: impl Into<String>) -> Self {
        Problem { severity, location, message: message.into(), suggestion: None, help: None, related: None, feature: None }
    }

    pub fn with_related(mut self, location: Location, label: impl Into<String>) -> Self {
        self.related = Some(Related { location, label: label.into() });
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_suggestion(mut self, suggestion: Option<String>) -> Self {
        self.suggestion = suggestion;
        self
    }

    /// What stops slurmd in a configuration file.
    pub fn from_conf_error(e: &ConfError) -> Self {
        Problem {
            severity: Severity::Fatal,
            location: (e.location.line > 0 || !e.location.path.as_os_str().is_empty()).then(|| e.location.clone()),
            message: e.message.clone(),
            suggestion: e.suggestion.clone(),
            help: None,
            related: None,
            feature: None,
        }
    }

    /// A line slurmd logs: errors stay errors, info lines that start with
    /// `WARNING` become warnings, the rest notes.
    pub fn from_log(level: LogLevel, location: Option<Location>, message: &str) -> Self {
        let (severity, message) = match level {
            LogLevel::Error => (Severity::Error, message),
            LogLevel::Info => match message.strip_prefix("WARNING: ") {
                Some(rest) => (Severity::Warning, rest),
                None => (Severity::Note, message),
            },
            _ => (Severity::Note, message),
        };
        Problem::new(severity, location, message)
    }

    pub fn from_diagnostic(d: &Diagnostic) -> Self {
        Problem { feature: d.feature, suggestion: d.suggestion.clone(), ..Self::from_log(d.level, d.location.clone(), &d.message) }
    }
}

// ---------------------------------------------------------------------------
// slurm.conf: the node's CPUs and Gres=
// ---------------------------------------------------------------------------

/// A node's CPU layout as slurm.conf gives it (after Slurm's defaults and
/// corrections).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeHw {
    pub cpus: u32,
    pub boards: u32,
    /// Sockets of the whole node.
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
}

impl NodeHw {
    /// Cores of the whole node.
    pub fn cores(&self) -> u32 {
        self.sockets.saturating_mul(self.cores_per_socket)
    }
}

impl Default for NodeHw {
    fn default() -> Self {
        NodeHw { cpus: 1, boards: 1, sockets: 1, cores_per_socket: 1, threads_per_core: 1 }
    }
}

/// The CPU layout of a slurm.conf `NodeName` line, as Slurm's reader
/// completes it: `CPUs` (or `Procs`) defaults to sockets x cores x threads,
/// `Sockets` to `Boards` x `SocketsPerBoard` or `CPUs` / (cores x threads),
/// zero values become 1, and a `CPUs` that fits no layout is replaced.
pub fn node_hw(line: &NodeLine) -> (NodeHw, Vec<Problem>) {
    let mut problems = Vec::new();
    let nodes = &line.names.value;
    let mut get = |key: &str| -> Option<u32> {
        let v = line.get(key)?;
        match v.value.parse::<u16>() {
            Ok(n) => Some(u32::from(n)),
            Err(_) => {
                problems.push(Problem::new(Severity::Fatal, Some(v.location.clone()), format!("{key}={} is not a number from 0 to 65535", v.value)));
                None
            }
        }
    };
    let mut hw = NodeHw::default();
    let cpus = get("CPUs").or_else(|| get("Procs"));
    let sockets = get("Sockets");
    let sockets_per_board = get("SocketsPerBoard");
    if let Some(b) = get("Boards") {
        hw.boards = b;
    }
    if let Some(c) = get("CoresPerSocket") {
        hw.cores_per_socket = c;
    }
    if let Some(t) = get("ThreadsPerCore") {
        hw.threads_per_core = t;
    }
    if let Some(c) = cpus {
        hw.cpus = c;
    }
    if let Some(s) = sockets {
        hw.sockets = s;
    }
    let fix = |problems: &mut Vec<Problem>, what: &str, value: &mut u32| {
        if *value == 0 {
            problems.push(Problem::new(Severity::Error, Some(line.location.clone()), format!("NodeNames={nodes} {what}=0 is invalid, reset to 1")));
            *value = 1;
        }
    };
    fix(&mut problems, "CoresPerSocket", &mut hw.cores_per_socket);
    fix(&mut problems, "CPUs", &mut hw.cpus);
    fix(&mut problems, "ThreadsPerCore", &mut hw.threads_per_core);
    let mut spb = sockets_per_board.unwrap_or(1);
    fix(&mut problems, "SocketsPerBoards", &mut spb);
    fix(&mut problems, "Sockets", &mut hw.sockets);
    let mut no_sockets = sockets.is_none();
    if sockets_per_board.is_some() && sockets.is_some() {
        problems.push(Problem::new(
            Severity::Error,
            Some(line.location.clone()),
            format!("NodeNames={nodes} Sockets=# and SocketsPerBoard=# is invalid , using SocketsPerBoard"),
        ));
        no_sockets = true;
    }
    fix(&mut problems, "Boards", &mut hw.boards);
    let per_socket = hw.cores_per_socket * hw.threads_per_core;
    if no_sockets {
        if sockets_per_board.is_some() {
            hw.sockets = hw.boards * spb;
        } else if cpus.is_some() && hw.cpus / per_socket > 0 && hw.cpus % per_socket == 0 {
            hw.sockets = hw.cpus / per_socket;
        } else {
            hw.sockets = hw.boards;
        }
    }
    if cpus.is_none() {
        hw.cpus = hw.sockets * per_socket;
    }
    if hw.sockets < hw.boards {
        hw.boards = 1;
    }
    if hw.cpus != hw.sockets && hw.cpus != hw.sockets * hw.cores_per_socket && hw.cpus != hw.sockets * per_socket {
        problems.push(Problem::new(
            Severity::Error,
            Some(line.location.clone()),
            format!("NodeNames={nodes} CPUs={} match no Sockets, Sockets*CoresPerSocket or Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs.", hw.cpus),
        ));
        hw.cpus = hw.sockets * per_socket;
    }
    (hw, problems)
}

/// slurmd's conversion of gres.conf `Cores` (abstract core ids) into
/// machine CPU ids (`xcpuinfo_abs_to_mac()`), for a machine whose CPUs are
/// numbered in Slurm's abstract order (an identity block map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMap {
    /// Cores slurmd believes the node has (sockets x cores per socket).
    pub cores: usize,
    pub threads_per_core: usize,
    /// CPUs of the machine (`block_map_size`).
    pub cpus: usize,
}

impl CpuMap {
    /// The map slurmd uses for a node configured as `conf`, running on a
    /// machine with `actual` (CPUs, cores) when known: the configured
    /// layout, unless the machine has fewer CPUs than configured and
    /// `SlurmdParameters=config_overrides` is not set.
    pub fn for_node(conf: &NodeHw, actual: Option<(u32, u32)>, config_overrides: bool) -> CpuMap {
        let (cores, threads) = match actual {
            Some((cpus, cores)) if !config_overrides && cpus < conf.cpus => {
                let cores = cores.max(1);
                (cores, (cpus / cores).max(1))
            }
            _ => (conf.cores(), conf.threads_per_core),
        };
        CpuMap { cores: cores as usize, threads_per_core: threads.max(1) as usize, cpus: actual.map_or(conf.cpus, |(cpus, _)| cpus).max(1) as usize }
    }

    /// The machine CPUs of the abstract cores in `range` (`0-3`); an error
    /// when the range names a core the node does not have.
    pub fn abs_to_mac(&self, range: &str) -> Result<String, String> {
        let abs = super::model::Bitmap::from_ranges(self.cores, range).map_err(|e| e.to_string())?;
        let mut mac = super::model::Bitmap::new(self.cpus);
        for core in abs.ones() {
            for thread in 0..self.threads_per_core {
                mac.set((core * self.threads_per_core + thread) % self.cpus);
            }
        }
        Ok(mac.to_ranges())
    }
}

/// Slurm's `gres_name_filter()`: the items of a node's `Gres=` whose name
/// (before any `:`) is exactly one of `gres_types`, and the items dropped.
pub fn gres_name_filter(gres: &str, gres_types: &[String]) -> (Option<String>, Vec<String>) {
    if gres.is_empty() || gres_types.is_empty() {
        return (None, Vec::new());
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut dropped = Vec::new();
    for tok in gres.split(',').filter(|t| !t.is_empty()) {
        let name = tok.split(':').next().unwrap_or(tok);
        if gres_types.iter().any(|t| t == name) {
            kept.push(tok);
        } else {
            dropped.push(tok.to_string());
        }
    }
    ((!kept.is_empty()).then(|| kept.join(",")), dropped)
}

/// One GRES of a node as slurm.conf counts it (Slurm's node state before
/// the node registers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlurmGres {
    /// The GRES (`GresTypes` spelling).
    pub name: String,
    pub plugin_id: u32,
    /// The total count (`gres_cnt_config`).
    pub count: u64,
    /// Counts per type, in order of first mention (types with the same id
    /// are one type).
    pub types: Vec<(String, u64)>,
    pub no_consume: bool,
}

/// `strtoll()` of leading digits (no sign): saturates like it.
fn leading_number(s: &str) -> (u64, usize) {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let n = s[..digits].parse::<u64>().map_or(i64::MAX as u64, |n| n.min(i64::MAX as u64));
    (n, digits)
}

/// Slurm's `_get_gres_cnt()`: what a node's (filtered) `Gres=` says about
/// GRES `name`, and the error lines logged on the way.  Items are `name`
/// (a count of 1, and the end of the count), `name:count`,
/// `name:type[:type...][:count][(binding)]`; a count takes a `K`/`M`/`G`...
/// suffix; a bad suffix ends the count with an error.
pub fn gres_cnt(gres: &str, name: &str) -> (SlurmGres, Vec<String>) {
    let mut out = SlurmGres { name: name.to_string(), plugin_id: gres_build_id(name), ..Default::default() };
    let mut errors = Vec::new();
    let colon = format!("{name}:");
    for tok in gres.split(',').filter(|t| !t.is_empty()) {
        if tok == name {
            out.count = 1;
            break;
        }
        if !tok.starts_with(&colon) {
            continue;
        }
        let tok = tok.rfind('(').map_or(tok, |p| &tok[..p]);
        let Some(num) = tok.rfind(':') else {
            errors.push(format!("Bad GRES configuration: {tok}"));
            break;
        };
        let after = &tok[num + 1..];
        let (count, body) = if after.starts_with(|c: char| c.is_ascii_digit()) {
            let (n, digits) = leading_number(after);
            match suffix_mult(&after[digits..]) {
                Some(mult) => (n.saturating_mul(mult), &tok[..num]),
                None => {
                    errors.push(format!("Bad GRES configuration: {tok}"));
                    break;
                }
            }
        } else {
            (1, tok)
        };
        out.count = out.count.saturating_add(count);
        for sub in body.split(':').filter(|s| !s.is_empty()).skip(1) {
            if sub.eq_ignore_ascii_case("no_consume") {
                out.no_consume = true;
                continue;
            }
            let id = gres_build_id(sub);
            match out.types.iter_mut().find(|(t, _)| gres_build_id(t) == id) {
                Some((_, n)) => *n = n.saturating_add(count),
                None => out.types.push((sub.to_string(), count)),
            }
        }
    }
    (out, errors)
}

/// The node's slurm.conf GRES: one [`SlurmGres`] per name of `gres_types`
/// (a count of 0 when `Gres=` does not mention it), with the problems of
/// the `Gres=` value.  `gres` is the node's `Gres=` as written, with its
/// place for messages.
pub fn node_slurm_gres(node: &str, gres: Option<(&str, &Location)>, gres_types: &[String]) -> (Vec<SlurmGres>, Vec<Problem>) {
    let mut problems = Vec::new();
    let filtered = gres.and_then(|(value, location)| {
        let (kept, dropped) = gres_name_filter(value, gres_types);
        for tok in dropped {
            let name = tok.split(':').next().unwrap_or(&tok).to_string();
            let valid: Vec<&str> = gres_types.iter().map(String::as_str).collect();
            problems.push(
                Problem::new(
                    Severity::Error,
                    Some(location.clone()),
                    format!("Invalid GRES configured on node {node}: {tok} (\"{name}\" is not in GresTypes)"),
                )
                .with_suggestion(closest_key(&name, &valid).map(str::to_string))
                .with_help(format!("add {name} to GresTypes in slurm.conf, or remove it from the node's Gres=")),
            );
        }
        kept.map(|k| (k, location.clone()))
    });
    let mut out = Vec::new();
    for name in gres_types {
        let (g, errors) = match &filtered {
            Some((value, _)) => gres_cnt(value, name),
            None => (SlurmGres { name: name.clone(), plugin_id: gres_build_id(name), ..Default::default() }, Vec::new()),
        };
        for e in errors {
            let location = filtered.as_ref().map(|(_, l)| l.clone());
            problems.push(Problem::new(Severity::Error, location, e));
        }
        out.push(g);
    }
    (out, problems)
}

/// Slurm's `_validate_slurm_conf()`: a GRES whose slurm.conf count is
/// larger than the sum of its typed counts mixes typed and untyped items,
/// which stops slurmd.
pub fn validate_slurm_conf(g: &SlurmGres) -> Result<(), String> {
    if g.types.is_empty() {
        return Ok(());
    }
    let typed: u64 = g.types.iter().map(|(_, n)| *n).fold(0, u64::saturating_add);
    if g.count > typed {
        return Err(format!("Some {} GRES in slurm.conf have a type while others do not (gres_cnt_config ({}) > tmp_count ({typed}))", g.name, g.count));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// slurm.conf and gres.conf together
// ---------------------------------------------------------------------------

/// One GRES of `GresTypes` as slurmd handles it (`slurm_gres_context_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GresContext {
    pub name: String,
    pub plugin_id: u32,
    /// slurmd loads a plugin for it (see [`GRES_PLUGINS`]).
    pub has_plugin: bool,
    /// Counted only: a record asks for `CountOnly`, or there is no plugin.
    pub count_only: bool,
}

/// The contexts of `gres_types`, with the flags gres.conf's records give
/// them (`_validate_gres_conf()`).
pub fn contexts(gres_types: &[String], records: &[GresRecord]) -> Vec<GresContext> {
    gres_types
        .iter()
        .map(|name| {
            let plugin_id = gres_build_id(name);
            let has_plugin = GRES_PLUGINS.contains(&name.as_str());
            let count_only = !has_plugin || records.iter().any(|r| r.plugin_id == plugin_id && r.flags.has(ConfFlags::COUNT_ONLY));
            GresContext { name: name.clone(), plugin_id, has_plugin, count_only }
        })
        .collect()
}

fn same_type(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => false,
    }
}

/// Slurm's `_check_conf_mismatch()` for one GRES: gres.conf records (index
/// into `records`, and by how much) with more than slurm.conf accounts for.
/// slurm.conf counts are taken from the records of the same type (an
/// untyped count only from untyped records), in order.
pub fn check_conf_mismatch(records: &[GresRecord], slurm: &SlurmGres) -> Vec<(usize, u64)> {
    let mut left: Vec<(usize, u64)> = records.iter().enumerate().filter(|(_, r)| r.plugin_id == slurm.plugin_id).map(|(i, r)| (i, r.count)).collect();
    let mut take = |count: u64, type_name: Option<&str>| {
        let mut count = count;
        for (i, n) in left.iter_mut() {
            if !same_type(records[*i].type_name.as_deref(), type_name) {
                continue;
            }
            if *n > count {
                *n -= count;
                return;
            }
            count -= *n;
            *n = 0;
        }
    };
    if slurm.types.is_empty() {
        take(slurm.count, None);
    } else {
        for (t, n) in &slurm.types {
            take(*n, Some(t));
        }
    }
    left.into_iter().filter(|(_, n)| *n > 0).collect()
}

/// A record as Slurm's `add_gres_to_list()` makes it from scratch.
fn new_record(name: &str, count: u64, cpu_cnt: u32, type_name: Option<&str>, flags: u32) -> GresRecord {
    let mut flags = ConfFlags(flags);
    if type_name.is_some() {
        flags.set(ConfFlags::HAS_TYPE);
    }
    GresRecord { flags, count, cpu_cnt, name: name.to_string(), type_name: type_name.map(str::to_string), plugin_id: gres_build_id(name), ..Default::default() }
}

/// `add_gres_to_list()` without a file: appended, except that a first
/// record with a count of 0 (a placeholder) is overwritten in place (its CPU
/// bitmap stays).
fn add_to_list(list: &mut Vec<GresRecord>, rec: GresRecord) {
    match list.first_mut() {
        Some(first) if first.count == 0 => {
            let bitmap = first.cpus_bitmap.take();
            *first = GresRecord { cpus_bitmap: bitmap, ..rec };
        }
        _ => list.push(rec),
    }
}

/// The first record of `pool` for this GRES with `type_name` (any record
/// when `None`, whose type is then dropped), taken out of `pool`.
fn match_type(pool: &mut Vec<GresRecord>, plugin_id: u32, type_name: Option<&str>) -> Option<GresRecord> {
    let i = pool.iter().position(|r| {
        r.plugin_id == plugin_id
            && match type_name {
                None => true,
                Some(t) => r.type_name.as_deref().is_some_and(|rt| rt.eq_ignore_ascii_case(t)),
            }
    })?;
    let mut rec = pool.remove(i);
    if type_name.is_none() {
        rec.type_name = None;
        rec.flags.clear(ConfFlags::HAS_TYPE);
    }
    Some(rec)
}

/// Slurm's `_set_file_subset()`: keep the first `count` files of a record.
fn set_file_subset(rec: &mut GresRecord, count: u64, log: &mut Vec<LogLine>) {
    let Some(file) = rec.file.as_deref() else { return };
    let Ok(mut names) = hostlist::expand(file) else { return };
    if count >= names.len() as u64 {
        return;
    }
    let old_count = names.len();
    names.truncate(count as usize);
    let subset = ranged_string(&names);
    log.push(LogLine::new(
        LogLevel::Debug3,
        format!(
            "_set_file_subset: Truncating {}:{} File from ({old_count}) {file} to ({count}) {subset}",
            rec.name,
            rec.type_name.as_deref().unwrap_or("(null)"),
        ),
    ));
    rec.file = Some(subset);
}

/// `_merge_gres2()`: one slurm.conf count (of one type, or untyped).
fn merge_one(
    pool: &mut Vec<GresRecord>,
    out: &mut Vec<GresRecord>,
    mut count: u64,
    type_name: Option<&str>,
    ctx: &GresContext,
    cpu_cnt: u32,
    log: &mut Vec<LogLine>,
) {
    if count == 0 {
        return;
    }
    while let Some(mut rec) = match_type(pool, ctx.plugin_id, type_name) {
        if rec.count > count {
            rec.count = count;
            set_file_subset(&mut rec, count, log);
            count = 0;
        } else {
            count -= rec.count;
        }
        out.push(rec);
        if count == 0 {
            return;
        }
    }
    let mut flags = 0;
    if ctx.name.eq_ignore_ascii_case("gpu") {
        flags |= ConfFlags::ENV_SET | ConfFlags::ENV_DEF;
    }
    if ctx.count_only {
        flags |= ConfFlags::COUNT_ONLY;
    }
    add_to_list(out, new_record(&ctx.name, count, cpu_cnt, type_name, flags));
}

/// Slurm's `_merge_config()`: the node's gres.conf `records` within what
/// slurm.conf counts (`slurm`, one entry per context; `None` when slurmd
/// has no slurm.conf GRES for the node, which gives every GRES an empty
/// record).
pub fn merge_config(records: Vec<GresRecord>, slurm: Option<&[SlurmGres]>, ctxs: &[GresContext], cpu_cnt: u32, log: &mut Vec<LogLine>) -> Vec<GresRecord> {
    let mut pool = records;
    let mut out = Vec::new();
    for ctx in ctxs {
        let mut found = false;
        for g in slurm.unwrap_or_default().iter().filter(|g| g.plugin_id == ctx.plugin_id) {
            found = true;
            if g.types.is_empty() {
                merge_one(&mut pool, &mut out, g.count, None, ctx, cpu_cnt, log);
            } else {
                for (t, n) in &g.types {
                    merge_one(&mut pool, &mut out, *n, Some(t), ctx, cpu_cnt, log);
                }
            }
        }
        if !found {
            out.push(GresRecord { cpu_cnt, name: ctx.name.clone(), plugin_id: ctx.plugin_id, ..Default::default() });
        }
    }
    out
}

/// Slurm's last step before logging: GPUs (records of `gpu_plugin_id`)
/// without a `File` are removed; their descriptions are returned.
pub fn remove_fileless_gpus(records: &mut Vec<GresRecord>, gpu_plugin_id: Option<u32>) -> Vec<String> {
    let Some(id) = gpu_plugin_id else { return Vec::new() };
    let mut removed = Vec::new();
    records.retain(|r| {
        let drop = r.plugin_id == id && r.file.is_none();
        if drop {
            removed.push(format!("{}:{}", r.name, r.type_name.as_deref().unwrap_or("(null)")));
        }
        !drop
    });
    removed
}

/// The number at the end of a file name, as Slurm's log line computes it
/// (0 when the name ends in no digit, -1 without a file).
pub fn line_index(file: Option<&str>) -> i32 {
    let Some(file) = file else { return -1 };
    let mut index: i32 = 0;
    let mut mult: i32 = 1;
    for b in file.bytes().rev() {
        if !b.is_ascii_digit() {
            break;
        }
        index = index.wrapping_add(i32::from(b - b'0').wrapping_mul(mult));
        mult = mult.wrapping_mul(10);
    }
    index
}

/// The line slurmd logs for a final record with `DebugFlags=Gres` (as
/// `slurmd -G` does): `Gres Name=gpu Type=a100 Count=1 Index=0 ID=7696487
/// File=/dev/nvidia0 Cores=0-7 CoreCnt=64 Links=-1,0` (missing values print
/// as `(null)`).
pub fn slurmd_line(r: &GresRecord) -> String {
    let null = |s: &Option<String>| s.clone().unwrap_or_else(|| "(null)".into());
    let type_name = null(&r.type_name);
    let links = r.links.as_ref().map_or_else(|| "(null)".to_string(), |l| format!("Links={l}"));
    let index = line_index(r.file.as_deref());
    let head = format!("Gres Name={} Type={type_name} Count={}", r.name, r.count);
    match (&r.cpus, &r.file) {
        (Some(cpus), Some(file)) => format!("{head} Index={index} ID={} File={file} Cores={cpus} CoreCnt={} {links}", r.plugin_id, r.cpu_cnt),
        (None, Some(file)) => format!("{head} Index={index} ID={} File={file} {links}", r.plugin_id),
        (_, None) => format!("{head} ID={} {links}", r.plugin_id),
    }
}

/// [`slurmd_line`] as release `b` writes it: from 23.02
/// ([`Behaviour::record_line_flags`]) `... Links=<links or (null)>
/// Flags=<flags>`, the flags spelt as that release's `gres_flags2str()`
/// ([`flags_to_string_as`](crate::model::flags_to_string_as)).
///
/// [`Behaviour::record_line_flags`]: crate::behaviour::Behaviour::record_line_flags
pub fn slurmd_line_as(r: &GresRecord, b: &crate::behaviour::Behaviour) -> String {
    if !b.record_line_flags {
        return slurmd_line(r);
    }
    let null = |s: &Option<String>| s.clone().unwrap_or_else(|| "(null)".into());
    let type_name = null(&r.type_name);
    let tail = format!("Links={} Flags={}", null(&r.links), crate::model::flags_to_string_as(r.flags, b));
    let index = line_index(r.file.as_deref());
    let head = format!("Gres Name={} Type={type_name} Count={}", r.name, r.count);
    match (&r.cpus, &r.file) {
        (Some(cpus), Some(file)) => format!("{head} Index={index} ID={} File={file} Cores={cpus} CoreCnt={} {tail}", r.plugin_id, r.cpu_cnt),
        (None, Some(file)) => format!("{head} Index={index} ID={} File={file} {tail}", r.plugin_id),
        (_, None) => format!("{head} ID={} {tail}", r.plugin_id),
    }
}

// ---------------------------------------------------------------------------
// Hostlist compression
// ---------------------------------------------------------------------------

/// A run of names `prefix<lo>..prefix<hi>` (Slurm's `hostrange`); `width`
/// is the number of digits written, `single` a name without a number.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostRange {
    prefix: String,
    lo: u64,
    hi: u64,
    width: usize,
    single: bool,
}

fn host_range(name: &str) -> HostRange {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (prefix, number) = name.split_at(name.len() - digits);
    match number.parse::<u64>() {
        Ok(n) if digits > 0 => HostRange { prefix: prefix.to_string(), lo: n, hi: n, width: digits, single: false },
        _ => HostRange { prefix: name.to_string(), lo: 0, hi: 0, width: 0, single: true },
    }
}

fn same_prefix(a: &HostRange, b: &HostRange) -> bool {
    strnatcmp(&a.prefix, &b.prefix).is_eq() && a.single == b.single
}

/// Leading zeros of `n` written `width` wide.
fn zero_padded(n: u64, width: usize) -> usize {
    let digits = n.checked_ilog10().map_or(1, |l| l as usize + 1);
    width.saturating_sub(digits)
}

/// Slurm's `_width_equiv()`: whether numbers `n` (written `wn` wide) and
/// `m` (`wm` wide) can share a range, adjusting one width when they can.
fn width_equiv(n: u64, wn: &mut usize, m: u64, wm: &mut usize) -> bool {
    if *wn == *wm {
        return true;
    }
    let (npad, nmpad) = (zero_padded(n, *wn), zero_padded(n, *wm));
    let (mpad, mnpad) = (zero_padded(m, *wm), zero_padded(m, *wn));
    if npad != nmpad && mpad != mnpad {
        return false;
    }
    if npad != nmpad {
        *wm = *wn;
    } else {
        *wn = *wm;
    }
    true
}

fn number(n: u64, width: usize) -> String {
    format!("{n:0width$}")
}

/// Slurm's ranged hostlist string of `names`, in order: consecutive numbers
/// with the same prefix become ranges, and ranges of the same prefix next
/// to each other share one bracket (`nvidia[0-1,3]`, `a,b`, `n[01-02]`).
pub fn ranged_string(names: &[String]) -> String {
    let mut ranges: Vec<HostRange> = Vec::new();
    for name in names {
        let mut r = host_range(name);
        if let Some(tail) = ranges.last_mut() {
            if !tail.single
                && !r.single
                && tail.hi.checked_add(1) == Some(r.lo)
                && same_prefix(tail, &r)
                && width_equiv(tail.lo, &mut tail.width, r.lo, &mut r.width)
            {
                tail.hi = r.hi;
                continue;
            }
        }
        ranges.push(r);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < ranges.len() {
        let first = &ranges[i];
        if first.single {
            out.push(first.prefix.clone());
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < ranges.len() && !ranges[j].single && same_prefix(&ranges[j], &ranges[j - 1]) {
            j += 1;
        }
        let items: Vec<String> = ranges[i..j]
            .iter()
            .map(|r| if r.lo == r.hi { number(r.lo, r.width) } else { format!("{}-{}", number(r.lo, r.width), number(r.hi, r.width)) })
            .collect();
        if j - i == 1 && first.lo == first.hi {
            out.push(format!("{}{}", first.prefix, items[0]));
        } else {
            out.push(format!("{}[{}]", first.prefix, items.join(",")));
        }
        i = j;
    }
    out.join(",")
}

// ---------------------------------------------------------------------------
// The whole sequence
// ---------------------------------------------------------------------------

/// What [`predict`] works on.
pub struct NodeInput<'a> {
    /// `GresTypes`, in the order slurmd loads the plugins.
    pub gres_types: &'a [String],
    /// The node's slurm.conf GRES ([`node_slurm_gres`]); `None` when slurmd
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
fn is_gpu_device(d: &crate::model::GresDevice) -> bool {
    d.major == 195 || d.major == 226 || d.path.starts_with("/dev/nvidia") || d.path.starts_with("/dev/dri/") || d.path == "/dev/kfd"
}

/// `File=` of a GPU naming a character device that is not a GPU's
/// (`/dev/tty1`): slurmd takes it, and jobs get that device as their GPU.
fn not_gpu_problems(list: &devices::DeviceList, places: &Places, p: &mut Prediction) {
    for d in list.devices.iter().filter(|d| d.dev_type == crate::model::DevType::Char && !is_gpu_device(d)) {
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

#[cfg(test)]
mod tests;
