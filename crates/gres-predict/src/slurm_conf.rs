//! The parts of slurm.conf(5) the GRES plugins and their tools need:
//! `GresTypes`, `NodeName=... Gres=...` lines (with `NodeName=DEFAULT`),
//! `AccountingStorageTRES`, `SlurmctldHost`, `PluginDir`, `ClusterName`
//! (for `Include %c`), and the `Gres=` specification syntax
//! (`gpu:tesla:2,mps:400,bandwidth:lustre:no_consume:4G`).
//!
//! The line syntax is Slurm's (see [`gres_config::syntax`]).  As
//! in Slurm, `NodeName`, `PartitionName`, `DownNodes`, `FrontendName`,
//! `NodeSet` and `SlurmctldHost` lines hold several pairs; any other key
//! must be alone on its line.  Keys of `NodeName` lines are checked (with a
//! suggestion for a typo); other top-level keys are kept without checking,
//! since this module does not know all of slurm.conf.

use std::path::{Path, PathBuf};
use thiserror::Error;

use gres_config::counts::suffix_mult;
use gres_config::syntax::{
    self, leftover_error, unknown_key, ConfError, ConfErrors, ConfReader, Diagnostic, ErrorKind, FsReader, LineSink, Location, Pair, ParsedLine, Spanned,
};
use gres_core::hostlist;
use gres_core::model::{gres_build_id, LogLevel};
use gres_core::record_rules::is_shared_name;

/// Top-level keys whose line carries more pairs.
const MULTI_PAIR_KEYS: [&str; 6] = ["DownNodes", "FrontendName", "NodeName", "NodeSet", "PartitionName", "SlurmctldHost"];

/// The keys of a `NodeName` line in Slurm 22.05.
const NODE_KEYS: [&str; 24] = [
    "BcastAddr",
    "Boards",
    "CoreSpecCount",
    "CoresPerSocket",
    "CPUs",
    "CPUSpecList",
    "CpuBind",
    "Feature",
    "Features",
    "Gres",
    "MemSpecLimit",
    "NodeAddr",
    "NodeHostname",
    "Port",
    "Procs",
    "RealMemory",
    "Reason",
    "Sockets",
    "SocketsPerBoard",
    "State",
    "ThreadsPerCore",
    "TmpDisk",
    "TRESWeights",
    "Weight",
];

/// Keys `NodeName=DEFAULT` may not set.
const NOT_DEFAULT_KEYS: [&str; 3] = ["NodeHostname", "BcastAddr", "NodeAddr"];

fn canonical(valid: &[&'static str], key: &str) -> Option<&'static str> {
    valid.iter().find(|k| k.eq_ignore_ascii_case(key)).copied()
}

/// One `NodeName=` line (not `DEFAULT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// The `NodeName` hostlist.
    pub names: Spanned,
    /// The line's options in Slurm's spelling, then those inherited from
    /// the `NodeName=DEFAULT` lines above it; the last of a repeated key
    /// counts.
    pub options: Vec<(&'static str, Spanned)>,
    pub location: Location,
}

impl NodeLine {
    /// The value of an option (any case), the line's own before the default.
    pub fn get(&self, key: &str) -> Option<&Spanned> {
        self.options.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
    }

    /// The `Gres=` value.
    pub fn gres(&self) -> Option<&Spanned> {
        self.get("Gres")
    }

    /// Whether the hostlist names `node`.
    pub fn names_node(&self, node: &str) -> bool {
        hostlist::expand(&self.names.value).map(|names| names.iter().any(|n| n == node)).unwrap_or(false)
    }
}

/// One `SlurmctldHost=name(addr)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmctldHost {
    pub hostname: String,
    /// The address, or the hostname again when none is written.
    pub addr: String,
    pub location: Location,
}

/// GresTypes in the order Slurm loads the plugins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GresTypes {
    pub names: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// A parsed slurm.conf.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlurmConf {
    path: PathBuf,
    /// Single-pair top-level lines, in file order.
    settings: Vec<Pair>,
    nodes: Vec<NodeLine>,
    slurmctld_hosts: Vec<SlurmctldHost>,
    diagnostics: Vec<Diagnostic>,
}

struct Collector {
    conf: SlurmConf,
    /// Options of the `NodeName=DEFAULT` lines so far.
    node_defaults: Vec<(&'static str, Spanned)>,
}

impl LineSink for Collector {
    fn line(&mut self, line: ParsedLine, errors: &mut Vec<ConfError>) {
        if let Err(e) = self.check_line(line) {
            errors.push(e);
        }
    }

    fn remark(&mut self, remark: Diagnostic) {
        self.conf.diagnostics.push(remark);
    }

    /// `%c` is the cluster name, in lower case.
    fn include_target(&mut self, raw: &Spanned) -> Result<String, ConfError> {
        if !raw.value.contains("%c") {
            return Ok(raw.value.clone());
        }
        match self.conf.get("ClusterName") {
            Some(name) => Ok(raw.value.replace("%c", &name.to_ascii_lowercase())),
            None => Err(ConfError::new(ErrorKind::Include, raw.location.clone(), "Did not get ClusterName for include path")),
        }
    }
}

impl Collector {
    fn new(path: &Path) -> Self {
        Collector { conf: SlurmConf { path: path.to_path_buf(), ..Default::default() }, node_defaults: Vec::new() }
    }

    fn check_line(&mut self, line: ParsedLine) -> Result<(), ConfError> {
        let first = line.first_pair()?;
        let Some(kind) = canonical(&MULTI_PAIR_KEYS, &first.key) else {
            if let Some(extra) = line.pairs.get(1) {
                return Err(ConfError::new(
                    ErrorKind::Syntax,
                    extra.key_location.clone(),
                    format!("Parse error: \"{}\" after {}=, which must be alone on its line", extra.key, first.key),
                ));
            }
            if let Some(rest) = &line.rest {
                return Err(leftover_error(rest));
            }
            if self.conf.settings.iter().any(|p| p.key.eq_ignore_ascii_case(&first.key)) {
                self.conf.diagnostics.push(Diagnostic::new(
                    LogLevel::Error,
                    Some(first.key_location.clone()),
                    format!("{} specified more than once, latest value used", first.key),
                ));
            }
            self.conf.settings.push(first.clone());
            return Ok(());
        };
        match kind {
            "NodeName" => self.node_line(&line),
            "SlurmctldHost" => self.slurmctld_host(&line),
            // Lines this module has no use for: their pairs are not checked.
            _ => line.rest.as_ref().map_or(Ok(()), |rest| Err(leftover_error(rest))),
        }
    }

    fn node_line(&mut self, line: &ParsedLine) -> Result<(), ConfError> {
        let names = line.pairs[0].value.clone();
        let mut options = Vec::new();
        for pair in &line.pairs[1..] {
            let Some(key) = canonical(&NODE_KEYS, &pair.key) else {
                return Err(unknown_key(pair, &NODE_KEYS, " (in a NodeName line)"));
            };
            options.push((key, pair.value.clone()));
        }
        if let Some(rest) = &line.rest {
            return Err(leftover_error(rest));
        }
        if names.value.eq_ignore_ascii_case("DEFAULT") {
            if let Some((key, value)) = options.iter().find(|(k, _)| NOT_DEFAULT_KEYS.contains(k)) {
                return Err(ConfError::new(ErrorKind::Invalid, value.location.clone(), format!("{key} not allowed with NodeName=DEFAULT")));
            }
            // A later DEFAULT line overrides the keys it sets.
            self.node_defaults.retain(|(k, _)| !options.iter().any(|(o, _)| o == k));
            self.node_defaults.extend(options);
            return Ok(());
        }
        if names.value.eq_ignore_ascii_case("ALL") {
            return Err(ConfError::new(
                ErrorKind::Invalid,
                names.location.clone(),
                format!("'{}' is a reserved word disallowed for use with NodeName", names.value),
            ));
        }
        let inherited: Vec<_> = self.node_defaults.iter().filter(|(k, _)| !options.iter().any(|(o, _)| o == k)).cloned().collect();
        let mut all = inherited;
        all.extend(options);
        self.conf.nodes.push(NodeLine { names, options: all, location: line.location.clone() });
        Ok(())
    }

    fn slurmctld_host(&mut self, line: &ParsedLine) -> Result<(), ConfError> {
        if let Some(extra) = line.pairs.get(1) {
            return Err(unknown_key(extra, &[], " (SlurmctldHost takes no other key)"));
        }
        if let Some(rest) = &line.rest {
            return Err(leftover_error(rest));
        }
        let value = &line.pairs[0].value;
        let v = value.value.as_str();
        let bad = || ConfError::new(ErrorKind::Invalid, value.location.clone(), format!("Bad value \"{v}\" for SlurmctldHost"));
        let (hostname, addr) = match (v.find('('), v.find(')')) {
            (None, None) => (v.to_string(), v.to_string()),
            (Some(open), Some(close)) if close + 1 == v.len() && v.rfind(')') == Some(close) && open < close => {
                (v[..open].to_string(), v[open + 1..close].to_string())
            }
            _ => return Err(bad()),
        };
        self.conf.slurmctld_hosts.push(SlurmctldHost { hostname, addr, location: value.location.clone() });
        Ok(())
    }
}

impl SlurmConf {
    /// Read and check `path` (and what it includes) from the file system.
    pub fn load(path: &Path) -> Result<SlurmConf, ConfErrors> {
        Self::load_with(&FsReader, path)
    }

    /// Read and check `path` through `reader`.
    pub fn load_with(reader: &dyn ConfReader, path: &Path) -> Result<SlurmConf, ConfErrors> {
        let mut c = Collector::new(path);
        syntax::parse_file(reader, path, &mut c)?;
        Ok(c.conf)
    }

    /// Check `text` as the contents of `path` (includes are read through
    /// `reader`).
    pub fn parse_str(text: &str, path: &Path, reader: &dyn ConfReader) -> Result<SlurmConf, ConfErrors> {
        let mut c = Collector::new(path);
        syntax::parse_text(reader, path, text, &mut c)?;
        Ok(c.conf)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remarks made while reading (repeated keys, files slurmd reads as
    /// empty).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The value of a single-pair top-level key (any case; the last one).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.get_spanned(key).map(|s| s.value.as_str())
    }

    /// The value and place of a single-pair top-level key.
    pub fn get_spanned(&self, key: &str) -> Option<&Spanned> {
        self.settings.iter().rev().find(|p| p.key.eq_ignore_ascii_case(key)).map(|p| &p.value)
    }

    pub fn cluster_name(&self) -> Option<&str> {
        self.get("ClusterName")
    }

    /// `PluginDir` as written (a `:`-separated list), if set.
    pub fn plugin_dir(&self) -> Option<&str> {
        self.get("PluginDir")
    }

    /// The directories of `PluginDir`.
    pub fn plugin_dirs(&self) -> Vec<&str> {
        self.plugin_dir().map(|d| d.split(':').filter(|s| !s.is_empty()).collect()).unwrap_or_default()
    }

    /// The items of `AccountingStorageTRES`.
    pub fn accounting_storage_tres(&self) -> Vec<&str> {
        self.get("AccountingStorageTRES").map(|v| v.split(',').filter(|s| !s.is_empty()).collect()).unwrap_or_default()
    }

    /// Whether `AccountingStorageTRES` names `gres/<name>` (or `gres/<name>:<type>`).
    pub fn tracks_gres(&self, name: &str) -> bool {
        let prefix = format!("gres/{name}").to_ascii_lowercase();
        self.accounting_storage_tres().iter().any(|t| {
            let t = t.to_ascii_lowercase();
            t == prefix || t.strip_prefix(&prefix).is_some_and(|rest| rest.starts_with(':'))
        })
    }

    /// `GresTypes` as written, split at commas.
    pub fn gres_types_raw(&self) -> Vec<&str> {
        self.get("GresTypes").map(|v| v.split(',').filter(|s| !s.is_empty()).collect()).unwrap_or_default()
    }

    /// `GresTypes` in the order Slurm loads the plugins (`gres_init()`): a
    /// shared GRES (`mps`, `shard`) written before `gpu` moves to the end,
    /// duplicates are dropped (with an error line); a shared GRES without
    /// `gpu`, or two names with the same plugin id, is an error.
    pub fn gres_types(&self) -> Result<GresTypes, ConfError> {
        let location = self.get_spanned("GresTypes").map(|s| s.location.clone()).unwrap_or_else(|| Location::file(&self.path));
        let mut sorted: Vec<&str> = Vec::new();
        let mut deferred: Vec<&str> = Vec::new();
        let mut have_gpu = false;
        for name in self.gres_types_raw() {
            if is_shared_name(name) && !have_gpu {
                deferred.push(name);
                continue;
            }
            if name == "gpu" {
                have_gpu = true;
            }
            sorted.push(name);
        }
        if !deferred.is_empty() {
            if !have_gpu {
                return Err(ConfError::new(ErrorKind::Invalid, location, "GresTypes: gres/'shared' requires that gres/gpu also be configured"));
            }
            sorted.extend(deferred);
        }
        let mut out = GresTypes::default();
        for name in sorted {
            if out.names.iter().any(|n| n == name) {
                out.diagnostics.push(Diagnostic::new(LogLevel::Error, Some(location.clone()), format!("Duplicate plugin gres/{name} ignored")));
                continue;
            }
            if let Some(other) = out.names.iter().find(|n| gres_build_id(n) == gres_build_id(name)) {
                return Err(ConfError::new(
                    ErrorKind::Invalid,
                    location,
                    format!("Gres: Duplicate plugin_id {} for gres/{other} and gres/{name}, change gres name for one of them", gres_build_id(name)),
                ));
            }
            out.names.push(name.to_string());
        }
        Ok(out)
    }

    pub fn slurmctld_hosts(&self) -> &[SlurmctldHost] {
        &self.slurmctld_hosts
    }

    pub fn nodes(&self) -> &[NodeLine] {
        &self.nodes
    }

    /// The first `NodeName` line naming `node`.
    pub fn node(&self, node: &str) -> Option<&NodeLine> {
        self.nodes.iter().find(|n| n.names_node(node))
    }

    /// The parsed `Gres=` of `node` (empty when the node has none).
    pub fn node_gres(&self, node: &str) -> Result<Vec<GresSpec>, ConfError> {
        let Some(gres) = self.node(node).and_then(NodeLine::gres) else {
            return Ok(Vec::new());
        };
        parse_gres_spec(&gres.value).map_err(|e| ConfError::new(ErrorKind::Invalid, gres.location.clone(), e.to_string()))
    }
}

/// One item of a `Gres=` specification: `name[:type...][:count[suffix]][(binding)]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GresSpec {
    /// The item as written.
    pub text: String,
    pub name: String,
    /// Types in order (`no_consume` excluded).
    pub types: Vec<String>,
    /// `no_consume` was among the types.
    pub no_consume: bool,
    /// The count (1 when not written).
    pub count: u64,
    /// Socket binding text after the last `(` (ignored by Slurm).
    pub binding: Option<String>,
}

/// A `Gres=` item Slurm rejects.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum GresSpecError {
    #[error("Bad GRES configuration: {0}")]
    Bad(String),
}

fn parse_gres_item(text: &str) -> Result<GresSpec, GresSpecError> {
    let bad = || GresSpecError::Bad(text.to_string());
    let (body, binding) = match text.rfind('(') {
        Some(open) => (&text[..open], Some(text[open..].to_string())),
        None => (text, None),
    };
    let mut parts: Vec<&str> = body.split(':').collect();
    let name = parts.remove(0);
    if name.is_empty() {
        return Err(bad());
    }
    let mut count = 1;
    if let Some(last) = parts.last().copied() {
        if last.starts_with(|c: char| c.is_ascii_digit()) {
            let digits = last.bytes().take_while(u8::is_ascii_digit).count();
            let number: u64 = last[..digits].parse().map_err(|_| bad())?;
            count = suffix_mult(&last[digits..]).and_then(|m| number.checked_mul(m)).ok_or_else(bad)?;
            parts.pop();
        }
    }
    let mut spec = GresSpec { text: text.to_string(), name: name.to_string(), types: Vec::new(), no_consume: false, count, binding };
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        if part.eq_ignore_ascii_case("no_consume") {
            spec.no_consume = true;
        } else {
            spec.types.push(part.to_string());
        }
    }
    Ok(spec)
}

/// Parse a `Gres=` value (`gpu:tesla:2,gpu:kepler:2,mps:400,bandwidth:lustre:no_consume:4G`).
/// Stricter than Slurm, which skips a bad item of another GRES: any bad
/// item is an error.
pub fn parse_gres_spec(text: &str) -> Result<Vec<GresSpec>, GresSpecError> {
    text.split(',').filter(|t| !t.is_empty()).map(parse_gres_item).collect()
}

/// What a node's `Gres=` says about one GRES (`_get_gres_cnt()`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GresCount {
    pub count: u64,
    /// Count per type, in order of first mention (types with the same
    /// Slurm id are merged).
    pub types: Vec<(String, u64)>,
    pub no_consume: bool,
}

/// The count of GRES `name` in `specs`, as Slurm adds it up: items
/// `name:...` are summed (with their counts added to each of their types);
/// an item that is exactly `name` sets the count to 1 and ends the sum.
pub fn gres_count(specs: &[GresSpec], name: &str) -> GresCount {
    let prefix = format!("{name}:");
    let mut out = GresCount::default();
    for spec in specs {
        if spec.text == name {
            out.count = 1;
            break;
        }
        if !spec.text.starts_with(&prefix) {
            continue;
        }
        out.count = out.count.saturating_add(spec.count);
        out.no_consume |= spec.no_consume;
        for t in &spec.types {
            match out.types.iter_mut().find(|(known, _)| gres_build_id(known) == gres_build_id(t)) {
                Some((_, n)) => *n = n.saturating_add(spec.count),
                None => out.types.push((t.clone(), spec.count)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_config::syntax::MemReader;

    fn conf(text: &str) -> SlurmConf {
        SlurmConf::parse_str(text, Path::new("/etc/slurm/slurm.conf"), &MemReader::new()).unwrap()
    }

    fn errors(text: &str) -> Vec<ConfError> {
        SlurmConf::parse_str(text, Path::new("/etc/slurm/slurm.conf"), &MemReader::new()).unwrap_err().0
    }

    #[test]
    fn top_level_keys_any_case_last_wins() {
        let c = conf(
            "ClusterName=tux\n# GPUs\ngrestypes=gpu,mps\nPluginDir=/usr/lib64/slurm:/opt/slurm/lib\nAccountingStorageTRES=gres/gpu,gres/gpu:a100,license/x\nGresTypes=gpu,mps,shard\n",
        );
        assert_eq!(c.get("GRESTYPES"), Some("gpu,mps,shard"));
        assert_eq!(c.cluster_name(), Some("tux"));
        assert_eq!(c.plugin_dirs(), ["/usr/lib64/slurm", "/opt/slurm/lib"]);
        assert_eq!(c.accounting_storage_tres(), ["gres/gpu", "gres/gpu:a100", "license/x"]);
        assert!(c.tracks_gres("gpu"));
        assert!(!c.tracks_gres("mps"));
        assert_eq!(c.diagnostics().len(), 1);
        assert!(c.diagnostics()[0].message.contains("GresTypes specified more than once"));
        assert_eq!(c.get("Unknown"), None);
    }

    #[test]
    fn gres_types_order_and_checks() {
        assert_eq!(conf("GresTypes=mps,gpu,nic\n").gres_types().unwrap().names, ["gpu", "nic", "mps"]);
        assert_eq!(conf("GresTypes=gpu,shard,nic\n").gres_types().unwrap().names, ["gpu", "shard", "nic"]);
        let t = conf("GresTypes=gpu,,gpu,nic\n").gres_types().unwrap();
        assert_eq!(t.names, ["gpu", "nic"]);
        assert_eq!(t.diagnostics[0].message, "Duplicate plugin gres/gpu ignored");
        let e = conf("GresTypes=mps,nic\n").gres_types().unwrap_err();
        assert_eq!(e.message, "GresTypes: gres/'shared' requires that gres/gpu also be configured");
        assert_eq!(e.location.line, 1);
        // Slurm's ids wrap every four bytes: "abcde" and "ebcda" collide.
        assert_eq!(gres_build_id("abcde"), gres_build_id("ebcda"));
        let e = conf("GresTypes=abcde,ebcda\n").gres_types().unwrap_err();
        assert!(e.message.starts_with("Gres: Duplicate plugin_id"), "{e}");
        assert!(conf("ClusterName=x\n").gres_types().unwrap().names.is_empty());
    }

    #[test]
    fn node_lines_with_defaults() {
        let c = conf(
            "NodeName=DEFAULT CPUs=8 Gres=gpu:2\n\
             NodeName=tux[0-3] RealMemory=1000\n\
             NodeName=DEFAULT Gres=gpu:a100:4 State=UNKNOWN\n\
             NodeName=big[0-1] Gres=gpu:h100:8,mps:800 cpus=64\n\
             NodeName=other\n",
        );
        assert_eq!(c.nodes().len(), 3);
        let tux = c.node("tux2").unwrap();
        assert_eq!(tux.gres().unwrap().value, "gpu:2");
        assert_eq!(tux.get("cpus").unwrap().value, "8");
        let big = c.node("big1").unwrap();
        assert_eq!(big.gres().unwrap().value, "gpu:h100:8,mps:800");
        assert_eq!(big.get("CPUs").unwrap().value, "64");
        assert_eq!(big.get("State").unwrap().value, "UNKNOWN");
        let other = c.node("other").unwrap();
        assert_eq!(other.gres().unwrap().value, "gpu:a100:4");
        assert_eq!(other.get("CPUs").unwrap().value, "8");
        assert!(c.node("nope").is_none());
        assert_eq!(c.node_gres("nope").unwrap(), Vec::new());
        let specs = c.node_gres("big0").unwrap();
        assert_eq!(gres_count(&specs, "gpu").count, 8);
        assert_eq!(gres_count(&specs, "mps").count, 800);
        assert_eq!(c.node("tux0").unwrap().location.line, 2);
    }

    #[test]
    fn node_line_errors() {
        let errs = errors("NodeName=a Gress=gpu:1\nNodeName=DEFAULT NodeAddr=x\nNodeName=ALL CPUs=1\nNodeName=b CPUs=1 junk\nGresTypes=gpu ClusterName=x\n");
        assert_eq!(errs.len(), 5);
        assert_eq!(errs[0].kind, ErrorKind::UnknownKey);
        assert_eq!(errs[0].suggestion.as_deref(), Some("Gres"));
        assert_eq!((errs[0].location.line, errs[0].location.column), (1, 12));
        assert_eq!(errs[1].message, "NodeAddr not allowed with NodeName=DEFAULT");
        assert_eq!(errs[2].message, "'ALL' is a reserved word disallowed for use with NodeName");
        assert_eq!(errs[3].message, "Parse error: \"junk\"");
        assert!(errs[4].message.contains("must be alone on its line"));
    }

    #[test]
    fn other_multi_pair_lines_are_accepted() {
        let c = conf("PartitionName=debug Nodes=tux[0-3] Default=YES MaxTime=INFINITE State=UP\nNodeSet=ns Feature=gpu\nDownNodes=x Reason=\"bad fan\"\n");
        assert!(c.nodes().is_empty());
    }

    #[test]
    fn slurmctld_hosts() {
        let c = conf("SlurmctldHost=ctl1(10.0.0.1)\nSlurmctldHost=ctl2\n");
        let hosts: Vec<_> = c.slurmctld_hosts().iter().map(|h| (h.hostname.as_str(), h.addr.as_str())).collect();
        assert_eq!(hosts, [("ctl1", "10.0.0.1"), ("ctl2", "ctl2")]);
        for bad in ["a(b", "a)b", "a(b)c", "a(b))", "a)(b"] {
            let e = &errors(&format!("SlurmctldHost={bad}\n"))[0];
            assert_eq!(e.message, format!("Bad value \"{bad}\" for SlurmctldHost"));
        }
        assert_eq!(errors("SlurmctldHost=a Port=1\n")[0].kind, ErrorKind::UnknownKey);
    }

    #[test]
    fn include_with_cluster_name() {
        let reader = MemReader::new()
            .with("/etc/slurm/slurm.conf", "ClusterName=Tux\ninclude nodes-%c.conf\n")
            .with("/etc/slurm/nodes-tux.conf", "NodeName=n1 Gres=gpu:1\n");
        let c = SlurmConf::load_with(&reader, Path::new("/etc/slurm/slurm.conf")).unwrap();
        assert_eq!(c.node("n1").unwrap().location.path, Path::new("/etc/slurm/nodes-tux.conf"));
        let reader = MemReader::new().with("/s.conf", "include nodes-%c.conf\n");
        let e = SlurmConf::load_with(&reader, Path::new("/s.conf")).unwrap_err();
        assert_eq!(e.0[0].message, "Did not get ClusterName for include path");
    }

    #[test]
    fn gres_spec_items() {
        let specs = parse_gres_spec("gpu:tesla:2,gpu:kepler:2,mps:400,bandwidth:lustre:no_consume:4G,nic,gpu:a100,gpu:4(S:0-1),x:1kb").unwrap();
        let summary: Vec<_> = specs.iter().map(|s| (s.name.as_str(), s.types.clone(), s.no_consume, s.count)).collect();
        assert_eq!(
            summary,
            vec![
                ("gpu", vec!["tesla".to_string()], false, 2),
                ("gpu", vec!["kepler".to_string()], false, 2),
                ("mps", vec![], false, 400),
                ("bandwidth", vec!["lustre".to_string()], true, 4 << 30),
                ("nic", vec![], false, 1),
                ("gpu", vec!["a100".to_string()], false, 1),
                ("gpu", vec![], false, 4),
                ("x", vec![], false, 1000),
            ]
        );
        assert_eq!(specs[6].binding.as_deref(), Some("(S:0-1)"));
        assert_eq!(parse_gres_spec("gpu:2x"), Err(GresSpecError::Bad("gpu:2x".into())));
        assert_eq!(parse_gres_spec(":2").unwrap_err().to_string(), "Bad GRES configuration: :2");
        assert!(parse_gres_spec("gpu:99999999999999999999").is_err());
        assert!(parse_gres_spec("gpu:9999999999P").is_err());
        assert_eq!(parse_gres_spec("").unwrap(), Vec::new());
        assert_eq!(parse_gres_spec("gpu:0").unwrap()[0].count, 0);
    }

    #[test]
    fn gres_counts_like_slurm() {
        let specs = parse_gres_spec("gpu:tesla:2,gpu:kepler:2,gpu:tesla:1,mps:400,gpus:9").unwrap();
        let gpu = gres_count(&specs, "gpu");
        assert_eq!(gpu.count, 5);
        assert_eq!(gpu.types, [("tesla".to_string(), 3), ("kepler".to_string(), 2)]);
        assert!(!gpu.no_consume);
        let bw = gres_count(&parse_gres_spec("bandwidth:lustre:no_consume:4G").unwrap(), "bandwidth");
        assert_eq!(bw, GresCount { count: 4 << 30, types: vec![("lustre".into(), 4 << 30)], no_consume: true });
        // A bare name counts 1 and ends the sum.
        assert_eq!(gres_count(&parse_gres_spec("gpu:2,gpu,gpu:3").unwrap(), "gpu").count, 1);
        // Names compare exactly.
        assert_eq!(gres_count(&parse_gres_spec("GPU:2").unwrap(), "gpu").count, 0);
        assert_eq!(gres_count(&specs, "nic"), GresCount::default());
    }

    #[test]
    fn arbitrary_input_never_panics() {
        for s in ["NodeName=", "NodeName=[ Gres=(", "SlurmctldHost=()", "SlurmctldHost=(", "Gres=gpu:(", "NodeName=x Gres=::::", "include %c"] {
            if let Ok(c) = SlurmConf::parse_str(s, Path::new("s"), &MemReader::new()) {
                let _ = c.gres_types();
                let _ = c.node_gres("x");
                let _ = c.node("x");
            }
        }
        for s in ["(", ":", "a:(", "a:1(", "((", "a:b:c:d:e:1k(x)", "\u{e9}:\u{e9}"] {
            let _ = parse_gres_spec(s).map(|v| gres_count(&v, "a"));
        }
    }
}
