//! gres.conf(5) as Slurm 22.05's slurmd reads it.
//!
//! Reading is in two steps, as in Slurm, where a line's meaning depends on
//! the node reading it and on the lines before it:
//!
//! 1. [`GresConf::load`] reads the file (and its `Include`s) and checks the
//!    syntax of every line: a line starts with `AutoDetect=` (alone on its
//!    line: the global default), `Name=` (applies to every node) or
//!    `NodeName=<hostlist>` (applies to those nodes only; there are no
//!    blocks, each line stands alone), followed by any of `AutoDetect`,
//!    `Count`, `Cores`, `CPUs`, `File`, `Files`, `Flags`, `Link`, `Links`,
//!    `MultipleFiles`, `Name`, `Type` (any case).  All syntax errors are
//!    reported, each with its place and, for an unknown key, the closest
//!    valid one.
//! 2. [`GresConf::node_config`] evaluates the lines for one node, in file
//!    order, into the records slurmd builds (`gres_slurmd_conf_t`): flags,
//!    counts from `File`, CPU bitmaps, env-flag defaults and inheritance,
//!    the node's AutoDetect mode, and Slurm's consistency checks.  What stops
//!    the stock slurmd (`fatal()`) is an `Err`; what it only logs is a
//!    [`Diagnostic`].
//!
//! As in Slurm, the records of `Name=` lines come first, then those of
//! `NodeName=` lines, each group in file order.

use std::path::{Path, PathBuf};

pub use crate::autodetect::AutoDetect;
use crate::counts::parse_count;
use crate::flag_remarks::{later_flag_words, unknown_flag_words};
use crate::syntax::{
    leftover_error, unknown_key, ConfError, ConfErrors, ConfReader, Diagnostic, ErrorKind, FsReader, LineSink, Location, Pair, ParsedLine, Spanned,
};
use gres_core::behaviour::Behaviour;
use gres_core::flags::parse_flags_for;
use gres_core::hostlist;
use gres_core::model::{gres_build_id, Bitmap, ConfFlags, GresRecord, LogLevel};
use gres_core::record_rules::{is_shared_name, links_validate};
use gres_core::text::closest_key;

/// `NO_VAL64`: counts must stay below it.
const NO_VAL64: u64 = 0xffff_ffff_ffff_fffe;

/// The keys a record line may hold after its first key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    AutoDetect,
    Count,
    Cpus,
    Cores,
    File,
    Files,
    Flags,
    Link,
    Links,
    MultipleFiles,
    Name,
    Type,
}

/// Each record key and its spelling in Slurm.
const RECORD_KEYS: [(Key, &str); 12] = [
    (Key::AutoDetect, "AutoDetect"),
    (Key::Count, "Count"),
    (Key::Cpus, "CPUs"),
    (Key::Cores, "Cores"),
    (Key::File, "File"),
    (Key::Files, "Files"),
    (Key::Flags, "Flags"),
    (Key::Link, "Link"),
    (Key::Links, "Links"),
    (Key::MultipleFiles, "MultipleFiles"),
    (Key::Name, "Name"),
    (Key::Type, "Type"),
];

/// The keys a line may start with.
const LINE_KEYS: [&str; 3] = ["AutoDetect", "Name", "NodeName"];

fn record_key(key: &str) -> Option<Key> {
    RECORD_KEYS.iter().find(|(_, name)| name.eq_ignore_ascii_case(key)).map(|(k, _)| *k)
}

fn key_name(key: Key) -> &'static str {
    RECORD_KEYS.iter().find(|(k, _)| *k == key).map(|(_, name)| *name).unwrap_or("?")
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum LineKind {
    /// `Name=...`: every node.
    Name(Spanned),
    /// `NodeName=<hostlist>`: the nodes listed.
    NodeName(Spanned),
}

/// One record line, checked for syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    kind: LineKind,
    /// The keys after the first one, in order (a repeated key: the last
    /// one counts).
    fields: Vec<(Key, Pair)>,
    location: Location,
    text: String,
}

impl Entry {
    fn get(&self, key: Key) -> Option<&Spanned> {
        self.fields.iter().rev().find(|(k, _)| *k == key).map(|(_, p)| &p.value)
    }
}

/// A parsed gres.conf: every line, not yet evaluated for a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GresConf {
    path: PathBuf,
    entries: Vec<Entry>,
    global_autodetect: Option<Spanned>,
    diagnostics: Vec<Diagnostic>,
    file_remarks: Vec<Diagnostic>,
}

/// What to evaluate gres.conf for.
#[derive(Clone, Copy)]
pub struct NodeContext<'a> {
    /// This node's name, as matched against `NodeName=` hostlists.
    pub node_name: &'a str,
    /// CPUs of the node: the size of every record's CPU bitmap.
    pub cpu_cnt: u32,
    /// `GresTypes` of slurm.conf, in Slurm's order; records of other names
    /// are dropped with an error, as slurmd does.  `None` accepts any name.
    pub gres_types: Option<&'a [String]>,
    /// slurmd's conversion of abstract core numbers into the machine's
    /// (`xcpuinfo_abs_to_mac`); without one, `Cores` are used as written,
    /// as Slurm does outside slurmd.
    pub abs_to_mac: Option<&'a AbsToMac>,
    /// The release gres.conf is read as: which `AutoDetect=` values and
    /// `Flags=` words exist.
    pub behaviour: &'a Behaviour,
}

/// slurmd's core-number conversion: abstract cores in, machine cores out
/// (or why not).
pub type AbsToMac = dyn Fn(&str) -> Result<String, String>;

impl<'a> NodeContext<'a> {
    pub fn new(node_name: &'a str, cpu_cnt: u32) -> Self {
        NodeContext { node_name, cpu_cnt, gres_types: None, abs_to_mac: None, behaviour: &Behaviour::BASELINE }
    }
}

/// One record for the node, with the line it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRecord {
    pub record: GresRecord,
    pub location: Location,
}

/// gres.conf as it applies to one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeGresConf {
    /// The node's AutoDetect: its own lines' if any, else the global one.
    pub autodetect: AutoDetect,
    pub records: Vec<NodeRecord>,
    /// What slurmd would log while reading (parse-time remarks included).
    pub diagnostics: Vec<Diagnostic>,
}

impl NodeGresConf {
    pub fn records(&self) -> Vec<GresRecord> {
        self.records.iter().map(|r| r.record.clone()).collect()
    }
}

/// Collects lines while the file is read.
#[derive(Default)]
struct Collector {
    entries: Vec<Entry>,
    global_autodetect: Option<Spanned>,
    diagnostics: Vec<Diagnostic>,
    file_remarks: Vec<Diagnostic>,
}

impl LineSink for Collector {
    fn line(&mut self, line: ParsedLine, errors: &mut Vec<ConfError>) {
        match self.check_line(line) {
            Ok(Some(entry)) => self.entries.push(entry),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }

    fn remark(&mut self, remark: Diagnostic) {
        self.file_remarks.push(remark);
    }
}

impl Collector {
    fn check_line(&mut self, line: ParsedLine) -> Result<Option<Entry>, ConfError> {
        let first = line.first_pair()?;
        let kind = if first.key.eq_ignore_ascii_case("AutoDetect") {
            if let Some(extra) = line.pairs.get(1) {
                return Err(ConfError::new(
                    ErrorKind::Syntax,
                    extra.key_location.clone(),
                    format!(
                        "Parse error: \"{}\" after a global AutoDetect, which must be alone on its line (for one node, write NodeName=... AutoDetect=...)",
                        extra.key
                    ),
                ));
            }
            if let Some(rest) = &line.rest {
                return Err(leftover_error(rest));
            }
            if self.global_autodetect.is_some() {
                self.diagnostics.push(Diagnostic::new(
                    LogLevel::Error,
                    Some(first.key_location.clone()),
                    "AutoDetect specified more than once, latest value used",
                ));
            }
            self.global_autodetect = Some(first.value.clone());
            return Ok(None);
        } else if first.key.eq_ignore_ascii_case("Name") {
            LineKind::Name(first.value.clone())
        } else if first.key.eq_ignore_ascii_case("NodeName") {
            LineKind::NodeName(first.value.clone())
        } else if let Some(key) = record_key(&first.key) {
            return Err(ConfError::new(
                ErrorKind::UnknownKey,
                first.key_location.clone(),
                format!("Parsing error at unrecognized key: {}: a line must start with Name= or NodeName= before {}", first.key, key_name(key)),
            ));
        } else {
            return Err(unknown_key(first, &LINE_KEYS, " (a line starts with AutoDetect=, Name= or NodeName=)"));
        };
        let mut fields: Vec<(Key, Pair)> = Vec::new();
        for pair in &line.pairs[1..] {
            let Some(key) = record_key(&pair.key) else {
                if pair.key.eq_ignore_ascii_case("NodeName") {
                    return Err(ConfError::new(
                        ErrorKind::UnknownKey,
                        pair.key_location.clone(),
                        "Parsing error at unrecognized key: NodeName: NodeName must be the first key of its line",
                    ));
                }
                let valid: Vec<&str> = RECORD_KEYS.iter().map(|(_, n)| *n).collect();
                return Err(unknown_key(pair, &valid, ""));
            };
            if fields.iter().any(|(k, _)| *k == key) {
                self.diagnostics.push(Diagnostic::new(
                    LogLevel::Error,
                    Some(pair.key_location.clone()),
                    format!("{} specified more than once, latest value used", key_name(key)),
                ));
            }
            fields.push((key, pair.clone()));
        }
        if let Some(rest) = &line.rest {
            return Err(leftover_error(rest));
        }
        Ok(Some(Entry { kind, fields, location: line.location, text: line.text }))
    }
}

impl GresConf {
    /// Read and check `path` (and what it includes) from the file system.
    pub fn load(path: &Path) -> Result<GresConf, ConfErrors> {
        Self::load_with(&FsReader, path)
    }

    /// Read and check `path` through `reader`.
    pub fn load_with(reader: &dyn ConfReader, path: &Path) -> Result<GresConf, ConfErrors> {
        let mut collector = Collector::default();
        crate::syntax::parse_file(reader, path, &mut collector)?;
        Ok(Self::from_collector(path, collector))
    }

    /// Check `text` as the contents of `path` (includes are read through
    /// `reader`).
    pub fn parse_str(text: &str, path: &Path, reader: &dyn ConfReader) -> Result<GresConf, ConfErrors> {
        let mut collector = Collector::default();
        crate::syntax::parse_text(reader, path, text, &mut collector)?;
        Ok(Self::from_collector(path, collector))
    }

    fn from_collector(path: &Path, c: Collector) -> GresConf {
        GresConf {
            path: path.to_path_buf(),
            entries: c.entries,
            global_autodetect: c.global_autodetect,
            diagnostics: c.diagnostics,
            file_remarks: c.file_remarks,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remarks made while reading (repeated keys).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Remarks on the files read, whatever the node: those slurmd reads as
    /// empty (a device, a FIFO, a directory).
    pub fn file_remarks(&self) -> &[Diagnostic] {
        &self.file_remarks
    }

    /// The global `AutoDetect=` value as written, if any.
    pub fn global_autodetect(&self) -> Option<&Spanned> {
        self.global_autodetect.as_ref()
    }

    /// Every node name or hostlist of `NodeName=` lines, in file order.
    pub fn node_names(&self) -> Vec<&Spanned> {
        self.entries
            .iter()
            .filter_map(|e| match &e.kind {
                LineKind::NodeName(n) => Some(n),
                LineKind::Name(_) => None,
            })
            .collect()
    }

    /// The records for `node` with a CPU count and no other context (any
    /// GRES name accepted, `Cores` used as written).
    pub fn records_for_node(&self, node: &str, cpu_cnt: u32) -> Result<Vec<GresRecord>, ConfError> {
        Ok(self.node_config(&NodeContext::new(node, cpu_cnt))?.records())
    }

    /// The AutoDetect mode of `node` alone (a conflict between the node's
    /// own lines is an error, as in Slurm).
    pub fn autodetect_for_node(&self, node: &str) -> Result<AutoDetect, ConfError> {
        let mut eval = Eval::new(NodeContext::new(node, 0));
        for entry in &self.entries {
            if let LineKind::NodeName(hosts) = &entry.kind {
                if eval.applies(hosts, entry) {
                    if let Some(value) = entry.get(Key::AutoDetect) {
                        eval.local_autodetect(value)?;
                    }
                }
            }
        }
        Ok(eval.finish_autodetect(self.global_autodetect.as_ref()))
    }

    /// gres.conf as slurmd reads it on the node of `ctx`.
    pub fn node_config(&self, ctx: &NodeContext<'_>) -> Result<NodeGresConf, ConfError> {
        let mut eval = Eval::new(*ctx);
        eval.diagnostics.extend(self.diagnostics.iter().cloned());
        let mut by_name = Vec::new();
        let mut by_node = Vec::new();
        for entry in &self.entries {
            let value_given = match &entry.kind {
                LineKind::Name(name) => Some(name),
                LineKind::NodeName(hosts) => {
                    if !eval.applies(hosts, entry) {
                        continue;
                    }
                    None
                }
            };
            if let Some(record) = eval.record(entry, value_given)? {
                let target = if value_given.is_some() { &mut by_name } else { &mut by_node };
                target.push(NodeRecord { record, location: entry.location.clone() });
            }
        }
        let autodetect = eval.finish_autodetect(self.global_autodetect.as_ref());
        let mut records = by_name;
        records.extend(by_node);
        validate_records(&records, ctx.gres_types)?;
        Ok(NodeGresConf { autodetect, records, diagnostics: eval.diagnostics })
    }
}

/// Env flags of the last line that set them (Slurm keeps them across lines
/// so that a line may inherit them from the one before).
#[derive(Clone, Copy, Debug, Default)]
struct PrevEnv {
    flags: u32,
    name_id: u32,
    no_gpu_env: bool,
}

struct Eval<'a> {
    ctx: NodeContext<'a>,
    prev_env: PrevEnv,
    local: AutoDetect,
    diagnostics: Vec<Diagnostic>,
}

fn display_opt(s: Option<&str>) -> &str {
    s.unwrap_or("(null)")
}

impl<'a> Eval<'a> {
    fn new(ctx: NodeContext<'a>) -> Self {
        Eval { ctx, prev_env: PrevEnv::default(), local: AutoDetect::Unset, diagnostics: Vec::new() }
    }

    fn diag(&mut self, level: LogLevel, location: &Location, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(level, Some(location.clone()), message));
    }

    /// Whether a `NodeName=` line is for this node.
    fn applies(&mut self, hosts: &Spanned, entry: &Entry) -> bool {
        match hostlist::expand(&hosts.value) {
            Ok(names) if names.iter().any(|n| n == self.ctx.node_name) => true,
            Ok(_) => {
                self.diag(LogLevel::Debug, &entry.location, format!("skipping GRES for NodeName={} {}", hosts.value, entry.text));
                false
            }
            Err(e) => {
                self.diag(LogLevel::Error, &hosts.location, format!("skipping GRES for NodeName={}: {e}", hosts.value));
                false
            }
        }
    }

    /// A node-local `AutoDetect=`.
    fn local_autodetect(&mut self, value: &Spanned) -> Result<(), ConfError> {
        let mode = AutoDetect::parse_for(&value.value, self.ctx.behaviour).unwrap_or_else(|| {
            self.unknown_autodetect(value);
            AutoDetect::Unset
        });
        if self.local != AutoDetect::Unset && self.local != mode {
            return Err(ConfError::new(
                ErrorKind::Invalid,
                value.location.clone(),
                "gres.conf: duplicate node-local AutoDetect specification does not match the first",
            ));
        }
        if self.local == AutoDetect::Unset {
            self.local = mode;
        }
        self.diag(LogLevel::Debug, &value.location, format!("Using node-local AutoDetect={}", self.local.as_str()));
        Ok(())
    }

    fn finish_autodetect(&mut self, global: Option<&Spanned>) -> AutoDetect {
        let Some(global) = global else {
            return self.local;
        };
        if self.local != AutoDetect::Unset {
            self.diag(LogLevel::Debug2, &global.location, "gres.conf: AutoDetect GPU flags were locally set, so ignoring global flags");
            return self.local;
        }
        match AutoDetect::parse_for(&global.value, self.ctx.behaviour) {
            Some(mode) => {
                self.diag(LogLevel::Debug, &global.location, format!("Global AutoDetect={}", mode.as_str()));
                mode
            }
            None => {
                self.unknown_autodetect(global);
                AutoDetect::Unset
            }
        }
    }

    /// slurmd's error for an `AutoDetect=` value it does not know, with
    /// the feature of a later release that knows it.
    fn unknown_autodetect(&mut self, value: &Spanned) {
        let mut d = Diagnostic::new(LogLevel::Error, Some(value.location.clone()), format!("unknown autodetect flag '{}'", value.value));
        d.feature = AutoDetect::later_feature(&value.value, self.ctx.behaviour);
        self.diagnostics.push(d);
    }

    /// The record of one line that applies to the node (`name_value` is the
    /// value of a `Name=` line's first key; `None` for `NodeName=` lines).
    fn record(&mut self, entry: &Entry, name_value: Option<&Spanned>) -> Result<Option<GresRecord>, ConfError> {
        let fatal = |location: &Location, message: String| ConfError::new(ErrorKind::Invalid, location.clone(), message);
        let mut autodetect_given = false;
        if let Some(value) = entry.get(Key::AutoDetect) {
            if name_value.is_some() {
                self.diag(LogLevel::Error, &value.location, "gres.conf: In-line AutoDetect requires NodeName to take effect");
            } else {
                self.local_autodetect(value)?;
                autodetect_given = true;
            }
        }
        let Some(name) = name_value.or_else(|| entry.get(Key::Name)) else {
            if !autodetect_given {
                self.diag(LogLevel::Error, &entry.location, format!("Invalid GRES data, no type name ({})", entry.text));
            }
            return Ok(None);
        };
        let mut rec = GresRecord { name: name.value.clone(), cpu_cnt: self.ctx.cpu_cnt, ..Default::default() };
        let mut flags = ConfFlags::default();

        if let Some(t) = entry.get(Key::Type) {
            rec.type_name = Some(t.value.clone());
            flags.set(ConfFlags::HAS_TYPE);
        }

        let cores = entry.get(Key::Cores).map(|v| ("Cores", v)).or_else(|| entry.get(Key::Cpus).map(|v| ("CPUs", v)));
        if let Some((key, cpus)) = cores {
            rec.cpus = Some(cpus.value.clone());
            let local = match self.ctx.abs_to_mac {
                Some(convert) => match convert(&cpus.value) {
                    Ok(local) => Some(local),
                    Err(_) => {
                        self.diag(LogLevel::Error, &cpus.location, format!("Invalid GRES data for {}, {key}={}", rec.name, cpus.value));
                        None
                    }
                },
                None => {
                    self.diag(
                        LogLevel::Debug,
                        &cpus.location,
                        format!("_parse_gres_config: {key}={} is not being converted to machine-local format", cpus.value),
                    );
                    Some(cpus.value.clone())
                }
            };
            if let Some(local) = local {
                let bitmap = (self.ctx.cpu_cnt > 0).then(|| Bitmap::from_ranges(self.ctx.cpu_cnt as usize, &local).ok()).flatten();
                let Some(bitmap) = bitmap else {
                    return Err(fatal(
                        &cpus.location,
                        format!("Invalid GRES data for {}, {key}={} (only {} CPUs are available)", rec.name, cpus.value, self.ctx.cpu_cnt),
                    ));
                };
                rec.cpus_bitmap = Some(bitmap);
            }
        }

        if let Some(file) = entry.get(Key::File).or_else(|| entry.get(Key::Files)) {
            let files = hostlist::expand(&file.value).map_err(|e| fatal(&file.location, format!("can't parse File={}: {e}", file.value)))?;
            rec.count = files.len() as u64;
            rec.file = Some(file.value.clone());
            flags.set(ConfFlags::HAS_FILE);
        }
        if let Some(multiple) = entry.get(Key::MultipleFiles) {
            if flags.has(ConfFlags::HAS_FILE) {
                return Err(fatal(&multiple.location, "File and MultipleFiles options are mutually exclusive".into()));
            }
            rec.count = 1;
            let files = hostlist::expand(&multiple.value).map_err(|e| fatal(&multiple.location, format!("can't parse File={}: {e}", multiple.value)))?;
            if files.len() < 2 {
                return Err(fatal(&multiple.location, "MultipleFiles does not contain multiple files. Use File instead".into()));
            }
            rec.file = Some(multiple.value.clone());
            flags.set(ConfFlags::HAS_FILE | ConfFlags::HAS_MULT);
        }

        self.env_flags(entry, &rec, &mut flags)?;

        if let Some(links) = entry.get(Key::Link).or_else(|| entry.get(Key::Links)) {
            match links_validate(&links.value) {
                Ok(_) => rec.links = Some(links.value.clone()),
                Err(e) => {
                    self.diag(LogLevel::Error, &links.location, e.to_string());
                    self.diag(LogLevel::Error, &links.location, format!("gres.conf: Ignoring invalid Links={} for Name={}", links.value, rec.name));
                }
            }
        }

        if is_shared_name(&rec.name) {
            flags.set(ConfFlags::SHARED);
        }

        if let Some(count) = entry.get(Key::Count) {
            let invalid = || fatal(&count.location, format!("Invalid GRES record for {}, invalid count {}", rec.name, count.value));
            let value = parse_count(&count.value).ok_or_else(invalid)?;
            if rec.count != 0 && rec.count != value && !flags.has(ConfFlags::SHARED) {
                return Err(fatal(&count.location, format!("Invalid GRES record for {}, count does not match File value", rec.name)));
            }
            if value >= NO_VAL64 {
                return Err(fatal(&count.location, format!("GRES {} has invalid count value {value}", rec.name)));
            }
            rec.count = value;
        } else if rec.count == 0 {
            rec.count = 1;
        }

        let plugin_name = match self.ctx.gres_types {
            None => rec.name.clone(),
            Some(types) => match types.iter().find(|t| t.eq_ignore_ascii_case(&rec.name)) {
                Some(t) => t.clone(),
                None => {
                    self.diag(LogLevel::Error, &name.location, format!("Ignoring gres.conf record, invalid name: {}", rec.name));
                    return Ok(None);
                }
            },
        };
        rec.flags = flags;
        rec.plugin_id = gres_build_id(&plugin_name);
        Ok(Some(rec))
    }

    /// `Flags=` and the env-flag defaults and inheritance.
    fn env_flags(&mut self, entry: &Entry, rec: &GresRecord, flags: &mut ConfFlags) -> Result<(), ConfError> {
        let name_id = gres_build_id(&rec.name);
        let same_name_as_prev = name_id == self.prev_env.name_id;
        let is_mps = rec.name.eq_ignore_ascii_case("mps");
        let mut set_default_envs = true;
        if let Some(value) = entry.get(Key::Flags) {
            let parsed = parse_flags_for(&value.value, self.ctx.behaviour);
            for (at, word, feature) in later_flag_words(&value.value, self.ctx.behaviour) {
                // Slurm looks for its words only, and ignores the others.
                let location = Location { column: value.location.column + at, len: word.len(), ..value.location.clone() };
                let mut d = Diagnostic::new(
                    LogLevel::Info,
                    Some(location),
                    format!("WARNING: Flags word \"{word}\" is unknown to this Slurm release, which ignores it"),
                );
                d.feature = Some(feature);
                self.diagnostics.push(d);
            }
            for (at, word, close) in unknown_flag_words(&value.value) {
                let location = Location { column: value.location.column + at, len: word.len(), ..value.location.clone() };
                let mut d = Diagnostic::new(
                    LogLevel::Info,
                    Some(location),
                    format!("WARNING: Flags word \"{word}\" is not a flag Slurm knows: slurmd ignores it without a word"),
                );
                d.suggestion = close.map(str::to_string);
                self.diagnostics.push(d);
            }
            let mut parsed_flags = parsed.flags;
            if !parsed.sharing_mentioned && is_mps {
                parsed_flags.set(ConfFlags::ONE_SHARING);
            }
            let env = parsed_flags.0 & ConfFlags::ENV_SET;
            flags.set(parsed_flags.0 & !ConfFlags::ENV_SET);
            let type_name = display_opt(rec.type_name.as_deref());
            if env != 0 && parsed.no_gpu_env {
                return Err(ConfError::new(
                    ErrorKind::Invalid,
                    value.location.clone(),
                    format!(
                        "Invalid GRES record name={} type={type_name}: Flags ({}) contains \"no_gpu_env\", which must be mutually exclusive to all other GRES env flags of same node and name",
                        rec.name, value.value
                    ),
                ));
            }
            if env != 0 || parsed.no_gpu_env {
                set_default_envs = false;
                if self.prev_env.name_id != 0 && same_name_as_prev && (self.prev_env.flags != env || self.prev_env.no_gpu_env != parsed.no_gpu_env) {
                    return Err(ConfError::new(
                        ErrorKind::Invalid,
                        value.location.clone(),
                        format!(
                            "Invalid GRES record name={} type={type_name}: Flags ({}) does not match env flags for previous GRES of same node and name",
                            rec.name, value.value
                        ),
                    ));
                }
                flags.set(env);
                self.prev_env = PrevEnv { flags: env, name_id, no_gpu_env: parsed.no_gpu_env };
            } else if self.ctx.behaviour.any_flags_drop_default_env {
                // 23.02 - 25.11: any Flags= word drops the defaults.
                set_default_envs = false;
            }
        } else if (self.prev_env.flags != 0 || self.prev_env.no_gpu_env) && same_name_as_prev {
            // Inherit the env flags of the previous line of the same name.
            set_default_envs = false;
            if !self.prev_env.no_gpu_env {
                flags.set(self.prev_env.flags);
            }
        } else if is_mps {
            flags.set(ConfFlags::ONE_SHARING);
        }
        if set_default_envs && rec.name.eq_ignore_ascii_case("gpu") {
            let env = ConfFlags::ENV_SET | ConfFlags::ENV_DEF;
            flags.set(env);
            self.prev_env = PrevEnv { flags: env, name_id, no_gpu_env: false };
        }
        Ok(())
    }
}

/// Slurm's checks of the records of each GRES (`_validate_gres_conf`): all
/// with `File` or none, all with `Type` or none, and at most one record of a
/// name that has neither.  GRES are taken in `gres_types` order (else in
/// order of first record).
fn validate_records(records: &[NodeRecord], gres_types: Option<&[String]>) -> Result<(), ConfError> {
    let names: Vec<String> = match gres_types {
        Some(types) => types.to_vec(),
        None => {
            let mut names: Vec<String> = Vec::new();
            for r in records {
                if !names.iter().any(|n| gres_build_id(n) == r.record.plugin_id) {
                    names.push(r.record.name.clone());
                }
            }
            names
        }
    };
    for name in names {
        let id = gres_build_id(&name);
        let mut first: Option<(bool, bool)> = None;
        let mut count = 0;
        for r in records.iter().filter(|r| r.record.plugin_id == id) {
            count += 1;
            let has_file = r.record.flags.has(ConfFlags::HAS_FILE);
            let has_type = r.record.flags.has(ConfFlags::HAS_TYPE);
            let (first_file, first_type) = *first.get_or_insert((has_file, has_type));
            let fatal = |message: String| Err(ConfError::new(ErrorKind::Invalid, r.location.clone(), message));
            if first_file != has_file {
                return fatal(format!("gres.conf for {name}, some records have \"File\" specification while others do not"));
            }
            if first_type != has_type {
                return fatal(format!("gres.conf for {name}, some records have \"Type=\" specification while others do not"));
            }
            if !first_file && !first_type && count > 1 {
                return fatal(format!("gres.conf duplicate records for {name}"));
            }
        }
    }
    Ok(())
}

/// The closest gres.conf key to `key` (for tools that check keys alone).
pub fn suggest_key(key: &str) -> Option<&'static str> {
    let mut valid: Vec<&'static str> = RECORD_KEYS.iter().map(|(_, n)| *n).collect();
    valid.push("NodeName");
    closest_key(key, &valid)
}

#[cfg(test)]
mod merged;
#[cfg(test)]
mod tests;
