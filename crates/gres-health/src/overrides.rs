//! The site's override file: changes to the table and the cluster guard.
//!
//! ```text
//! # /etc/slurm/gres-rs-health.conf
//! xid 13 = ignore                  # the catalog already ignores it
//! xid 79 = drain reboot            # drain, remedy "reboot node"
//! xid 144-150 = drain reset recoverable
//! xid 92 = warn
//! unknown_xid = drain support manual
//! remap_pending = warn
//! throttle = ignore
//! guard_max_nodes = 10%            # or a count: 5; or off
//! step_xids = on                   # our gpu/nvml records the job a fault hit
//! transient_runs = 3               # checks an NVML timeout must last to drain
//! ```
//!
//! A rule is `<key> = <action> [<remedy>] [recoverable|manual]`: the key is
//! `xid N`, `xid N-M`, `unknown_xid` or a fault word (`dbe`,
//! `retire_pending`, `remap_pending`, `remap_failure`, `recovery_action`,
//! `gpu_lost`, `nvml_error`, `nvml_transient`, `nvml_hang`, `count_mismatch`, `nvlink_down`,
//! `throttle`); the action `ignore`, `warn` or `drain`; the remedy
//! `restart`, `reset`, `reboot` or `support`.  What is left out is kept
//! from the catalog's rule.  `#` starts a comment.  An error names the
//! file, line and column and suggests the closest valid word; a file over
//! [`MAX_FILE`] bytes is refused.
//!
//! `step_xids = on|off` (default off) is read by our gpu/nvml in each
//! step's slurmstepd, once a process: with it on, the plugin watches the
//! step's GPUs for XIDs and records the job a fault hit
//! ([`crate::steps`]).

use std::path::Path;

use gres_core::bounded_read::{read_bounded, ReadError};
use gres_core::text::closest_key;
use thiserror::Error;

use crate::catalog::{Action, Remedy, Rule, Table};
use crate::fault::FaultKind;

/// The largest override file read.
pub const MAX_FILE: u64 = 64 * 1024;

/// The most nodes gres-rs may hold drained at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// At most this many nodes.
    Nodes(u32),
    /// At most this percentage of the cluster's nodes (at least one node).
    Percent(u8),
    /// No limit.
    Off,
}

impl Default for Guard {
    fn default() -> Self {
        Guard::Percent(10)
    }
}

impl Guard {
    /// The limit for a cluster of `total` nodes; `None` when off.
    pub fn limit(self, total: usize) -> Option<usize> {
        match self {
            Guard::Nodes(n) => Some(n as usize),
            Guard::Percent(p) => Some((total * usize::from(p) / 100).max(1)),
            Guard::Off => None,
        }
    }
}

/// `transient_runs` when the file does not set it.
pub const DEFAULT_TRANSIENT_RUNS: u32 = 3;

/// The table and the guard, as the site set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfig {
    /// The catalog with the site's rules over it.
    pub table: Table,
    /// The cluster guard.
    pub guard: Guard,
    /// `step_xids = on`: our gpu/nvml watches each step's GPUs for XIDs.
    pub step_xids: bool,
    /// `transient_runs = N`: checks in a row an NVML answer that may pass
    /// (a timeout, a slow call) must last before it is a fault
    /// ([`crate::fault::Fault::NvmlTransient`]); 1 makes it one at once.
    pub transient_runs: u32,
}

impl Default for SiteConfig {
    fn default() -> Self {
        SiteConfig { table: Table::default(), guard: Guard::default(), step_xids: false, transient_runs: DEFAULT_TRANSIENT_RUNS }
    }
}

/// Why an override file was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OverrideError {
    /// A line that does not parse.
    #[error("{file}:{line}:{col}: {message}{}", hint(.suggestion))]
    Syntax {
        /// The file's name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (characters).
        col: usize,
        /// What is wrong.
        message: String,
        /// The closest valid word, when one is close.
        suggestion: Option<String>,
    },
    /// The file is over [`MAX_FILE`].
    #[error("{file}: {size} bytes is over the {max}-byte limit for an override file; is it the right file?")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size (or more than the limit, when it grew while read).
        size: u64,
        /// [`MAX_FILE`].
        max: u64,
    },
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The system's words.
        message: String,
    },
}

fn hint(s: &Option<String>) -> String {
    s.as_ref().map_or_else(String::new, |w| format!("; did you mean `{w}`?"))
}

const ACTIONS: [&str; 3] = ["ignore", "warn", "drain"];
const FLAGS: [&str; 2] = ["recoverable", "manual"];
const SETTINGS: [&str; 5] = ["xid", "unknown_xid", "guard_max_nodes", "step_xids", "transient_runs"];
const SWITCH: [&str; 2] = ["on", "off"];

/// A word and its byte offset in the line.
type Tok<'a> = (usize, &'a str);

fn tokens(s: &str, base: usize) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push((base + st, &s[st..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push((base + st, &s[st..]));
    }
    out
}

struct LineCtx<'a> {
    file: &'a str,
    line_no: usize,
    line: &'a str,
}

impl LineCtx<'_> {
    fn err(&self, at: usize, message: impl Into<String>, suggestion: Option<&str>) -> OverrideError {
        OverrideError::Syntax {
            file: self.file.to_owned(),
            line: self.line_no,
            col: self.line[..at.min(self.line.len())].chars().count() + 1,
            message: message.into(),
            suggestion: suggestion.map(str::to_owned),
        }
    }

    fn unknown(&self, (at, word): Tok<'_>, what: &str, valid: &[&str]) -> OverrideError {
        let msg = format!("unknown {what} `{word}` (one of: {})", valid.join(", "));
        self.err(at, msg, closest_key(word, valid))
    }
}

/// What a line's key names.
enum Key {
    Kinds(Vec<FaultKind>),
    UnknownXid,
    Guard,
    StepXids,
    TransientRuns,
}

fn parse_key(cx: &LineCtx<'_>, toks: &[Tok<'_>], eq_at: usize) -> Result<Key, OverrideError> {
    let Some(&first) = toks.first() else {
        return Err(cx.err(eq_at, "expected a key before `=`", None));
    };
    let named: Vec<&str> = FaultKind::NAMED.iter().map(|(_, w)| *w).collect();
    let key = match first.1 {
        "xid" => {
            let Some(&(at, num)) = toks.get(1) else {
                return Err(cx.err(eq_at, "expected an XID number after `xid`", None));
            };
            let bad = || cx.err(at, format!("`{num}` is not an XID number or range (like 79 or 144-150)"), None);
            let (lo, hi) = match num.split_once('-') {
                Some((a, b)) => (a.parse::<u32>().map_err(|_| bad())?, b.parse::<u32>().map_err(|_| bad())?),
                None => {
                    let n = num.parse::<u32>().map_err(|_| bad())?;
                    (n, n)
                }
            };
            if lo > hi || hi - lo > 1000 {
                return Err(bad());
            }
            if let Some(&extra) = toks.get(2) {
                return Err(cx.err(extra.0, format!("unexpected `{}` before `=`", extra.1), None));
            }
            return Ok(Key::Kinds((lo..=hi).map(FaultKind::Xid).collect()));
        }
        "unknown_xid" => Key::UnknownXid,
        "guard_max_nodes" => Key::Guard,
        "step_xids" => Key::StepXids,
        "transient_runs" => Key::TransientRuns,
        word => match FaultKind::from_word(word) {
            Some(kind) => Key::Kinds(vec![kind]),
            None => {
                let valid: Vec<&str> = SETTINGS.iter().chain(named.iter()).copied().collect();
                return Err(cx.unknown(first, "key", &valid));
            }
        },
    };
    if let Some(&extra) = toks.get(1) {
        return Err(cx.err(extra.0, format!("unexpected `{}` before `=`", extra.1), None));
    }
    Ok(key)
}

fn parse_rule(cx: &LineCtx<'_>, toks: &[Tok<'_>], base: Rule, end: usize) -> Result<Rule, OverrideError> {
    let Some(&first) = toks.first() else {
        return Err(cx.err(end, "expected an action after `=`: ignore, warn or drain", None));
    };
    let action = match first.1 {
        "ignore" => Action::Ignore,
        "warn" => Action::Warn,
        "drain" => Action::Drain,
        _ => return Err(cx.unknown(first, "action", &ACTIONS)),
    };
    let mut rule = Rule {
        action,
        remedy: if action == Action::Ignore { None } else { base.remedy },
        recoverable: action == Action::Drain && base.action == Action::Drain && base.recoverable,
    };
    if action == Action::Drain && rule.remedy.is_none() {
        rule.remedy = Some(Remedy::ContactSupport);
    }
    let remedies: Vec<&str> = Remedy::ALL.iter().map(|r| r.word()).collect();
    let mut rest = toks[1..].iter();
    let mut next = rest.next();
    if let Some(&tok) = next {
        if let Some(r) = Remedy::ALL.iter().find(|r| r.word() == tok.1) {
            if action == Action::Ignore {
                return Err(cx.err(tok.0, "`ignore` takes no remedy", None));
            }
            rule.remedy = Some(*r);
            next = rest.next();
        } else if !FLAGS.contains(&tok.1) {
            let valid: Vec<&str> = remedies.iter().chain(FLAGS.iter()).copied().collect();
            return Err(cx.unknown(tok, "remedy", &valid));
        }
    }
    if let Some(&tok) = next {
        match tok.1 {
            "recoverable" | "manual" if action != Action::Drain => {
                return Err(cx.err(tok.0, format!("`{}` applies to `drain` only", tok.1), None));
            }
            "recoverable" => rule.recoverable = true,
            "manual" => rule.recoverable = false,
            _ => return Err(cx.unknown(tok, "word", &FLAGS)),
        }
        next = rest.next();
    }
    if let Some(&tok) = next {
        return Err(cx.err(tok.0, format!("unexpected `{}` at the end of the rule", tok.1), None));
    }
    Ok(rule)
}

fn parse_guard(cx: &LineCtx<'_>, toks: &[Tok<'_>], end: usize) -> Result<Guard, OverrideError> {
    let [(at, value)] = toks else {
        let at = toks.get(1).map_or(end, |t| t.0);
        return Err(cx.err(at, "expected one value: a node count, a percentage like 10%, or off", None));
    };
    let bad = || cx.err(*at, format!("`{value}` is not a node count (1 or more), a percentage (1% to 100%) or off"), closest_key(value, &["off"]));
    if *value == "off" {
        return Ok(Guard::Off);
    }
    if let Some(p) = value.strip_suffix('%') {
        return match p.parse::<u8>() {
            Ok(p @ 1..=100) => Ok(Guard::Percent(p)),
            _ => Err(bad()),
        };
    }
    match value.parse::<u32>() {
        Ok(n @ 1..) => Ok(Guard::Nodes(n)),
        _ => Err(bad()),
    }
}

fn parse_runs(cx: &LineCtx<'_>, toks: &[Tok<'_>], end: usize) -> Result<u32, OverrideError> {
    let [(at, value)] = toks else {
        return Err(cx.err(toks.get(1).map_or(end, |t| t.0), "expected one value: a number of checks from 1 to 100", None));
    };
    match value.parse::<u32>() {
        Ok(n @ 1..=100) => Ok(n),
        _ => Err(cx.err(*at, format!("`{value}` is not a number of checks from 1 to 100"), None)),
    }
}

fn parse_switch(cx: &LineCtx<'_>, toks: &[Tok<'_>], end: usize) -> Result<bool, OverrideError> {
    match toks {
        [(_, "on")] => Ok(true),
        [(_, "off")] => Ok(false),
        [tok] => Err(cx.unknown(*tok, "value", &SWITCH)),
        _ => Err(cx.err(toks.get(1).map_or(end, |t| t.0), "expected one value: on or off", None)),
    }
}

/// Parse an override file's text; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<SiteConfig, OverrideError> {
    if text.len() as u64 > MAX_FILE {
        return Err(OverrideError::TooLarge { file: file.to_owned(), size: text.len() as u64, max: MAX_FILE });
    }
    let mut config = SiteConfig::default();
    for (i, raw) in text.lines().enumerate() {
        let cx = LineCtx { file, line_no: i + 1, line: raw };
        let content = raw.split('#').next().unwrap_or("");
        if content.trim().is_empty() {
            continue;
        }
        let Some(eq) = content.find('=') else {
            let toks = tokens(content, 0);
            let first = toks[0];
            let named = FaultKind::NAMED.iter().map(|(_, w)| *w);
            let valid: Vec<&str> = SETTINGS.iter().copied().chain(named).collect();
            if first.1 != "xid" && !valid.contains(&first.1) {
                return Err(cx.unknown(first, "key", &valid));
            }
            return Err(cx.err(content.trim_end().len(), "expected `=` and a value", None));
        };
        let key = parse_key(&cx, &tokens(&content[..eq], 0), eq)?;
        let value = tokens(&content[eq + 1..], eq + 1);
        let end = content.trim_end().len();
        match key {
            Key::Guard => config.guard = parse_guard(&cx, &value, end)?,
            Key::StepXids => config.step_xids = parse_switch(&cx, &value, end)?,
            Key::TransientRuns => config.transient_runs = parse_runs(&cx, &value, end)?,
            Key::UnknownXid => {
                let base = config.table.unknown_xid_rule();
                config.table.set_unknown_xid(parse_rule(&cx, &value, base, end)?);
            }
            Key::Kinds(kinds) => {
                for kind in kinds {
                    let base = Table::catalog_rule(kind).unwrap_or_else(|| config.table.unknown_xid_rule());
                    config.table.set(kind, parse_rule(&cx, &value, base, end)?);
                }
            }
        }
    }
    Ok(config)
}

/// Read and parse an override file, refusing one over [`MAX_FILE`].
pub fn load(path: &Path) -> Result<SiteConfig, OverrideError> {
    let file = path.display().to_string();
    // Only a regular file, never waiting on a FIFO or a device.
    let bytes = read_bounded(path, MAX_FILE).map_err(|e| match e {
        ReadError::TooLarge { size, .. } => OverrideError::TooLarge { file: file.clone(), size: size.unwrap_or(MAX_FILE + 1), max: MAX_FILE },
        e => OverrideError::Io { file: file.clone(), message: e.to_string() },
    })?;
    let text = String::from_utf8(bytes).map_err(|_| OverrideError::Io { file: file.clone(), message: "not UTF-8 text".into() })?;
    parse(&file, &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::Fault;
    use std::fs;

    fn xid(code: u32) -> Fault {
        Fault::Xid { code, pid: None, process: None, message: String::new() }
    }

    #[test]
    fn a_site_file_changes_the_table_and_the_guard() {
        let text = "\
# site rules
xid 13 = drain reset        # we saw bad SMs
xid 79 = drain reboot manual
xid 144-146 = warn
remap_pending=warn
unknown_xid = drain support
guard_max_nodes = 5
";
        let c = parse("site.conf", text).unwrap();
        let t = &c.table;
        assert_eq!(t.rule(&xid(13)), Rule::drain(Remedy::ResetGpu, false));
        assert_eq!(t.rule(&xid(79)), Rule::drain(Remedy::RebootNode, false));
        assert_eq!(t.rule(&xid(145)).action, Action::Warn);
        assert_eq!(t.rule(&xid(147)).action, Action::Drain);
        assert_eq!(t.rule(&Fault::RemapPending).action, Action::Warn);
        assert_eq!(t.rule(&xid(500)), Rule::drain(Remedy::ContactSupport, false));
        assert_eq!(c.guard, Guard::Nodes(5));
    }

    #[test]
    fn what_is_left_out_is_kept_from_the_catalog() {
        let c = parse("s", "xid 95 = drain\ngpu_lost = drain recoverable\n").unwrap();
        assert_eq!(c.table.rule(&xid(95)), Rule::drain(Remedy::ResetGpu, true));
        assert_eq!(c.table.rule(&Fault::GpuLost), Rule::drain(Remedy::RebootNode, true));
        assert_eq!(parse("s", "").unwrap(), SiteConfig::default());
    }

    #[test]
    fn a_typo_names_file_line_column_and_the_word() {
        let err = parse("/etc/slurm/gres-rs-health.conf", "# ok\nxid 79 = drian reboot\n").unwrap_err();
        assert_eq!(err.to_string(), "/etc/slurm/gres-rs-health.conf:2:10: unknown action `drian` (one of: ignore, warn, drain); did you mean `drain`?");
        let err = parse("f", "remap_pendng = warn").unwrap_err();
        let OverrideError::Syntax { line, col, suggestion, .. } = &err else { panic!("{err}") };
        assert_eq!((*line, *col, suggestion.as_deref()), (1, 1, Some("remap_pending")));
        let err = parse("f", "xid 48 = drain rebot").unwrap_err();
        assert!(err.to_string().ends_with("did you mean `reboot`?"), "{err}");
        let err = parse("f", "xid 48 = drain reset recoverabel").unwrap_err();
        assert!(err.to_string().ends_with("did you mean `recoverable`?"), "{err}");
        let err = parse("f", "guard_max_nodes = of").unwrap_err();
        assert!(err.to_string().ends_with("did you mean `off`?"), "{err}");
    }

    #[test]
    fn malformed_lines_are_refused_with_their_place() {
        for (text, col) in [
            ("xid = ignore", 5),
            ("xid seventy = ignore", 5),
            ("xid 79 = ", 9),
            ("xid 79 = ignore reset", 17),
            ("xid 79 = warn manual", 15),
            ("xid 79 = drain reset manual extra", 29),
            ("dbe warn", 9),
            ("guard_max_nodes = 0", 19),
            ("guard_max_nodes = 150%", 19),
        ] {
            let err = parse("f", text).unwrap_err();
            let OverrideError::Syntax { col: c, .. } = err else { panic!("{text}") };
            assert_eq!(c, col, "{text}");
        }
    }

    #[test]
    fn the_guard_limit() {
        assert_eq!(Guard::Percent(10).limit(200), Some(20));
        assert_eq!(Guard::Percent(10).limit(4), Some(1));
        assert_eq!(Guard::Nodes(3).limit(1000), Some(3));
        assert_eq!(Guard::Off.limit(10), None);
        assert_eq!(parse("f", "guard_max_nodes = 25%").unwrap().guard, Guard::Percent(25));
        assert_eq!(parse("f", "guard_max_nodes = off").unwrap().guard, Guard::Off);
    }

    #[test]
    fn step_xids_is_a_switch_off_by_default() {
        assert!(!parse("f", "").unwrap().step_xids);
        assert!(parse("f", "step_xids = on  # the job a fault hit\n").unwrap().step_xids);
        assert!(!parse("f", "step_xids = on\nstep_xids=off\n").unwrap().step_xids);
        let err = parse("f", "step_xids = yes").unwrap_err();
        assert_eq!(err.to_string(), "f:1:13: unknown value `yes` (one of: on, off)");
        let err = parse("f", "step_xids = offf").unwrap_err();
        assert!(err.to_string().ends_with("did you mean `off`?"), "{err}");
        let err = parse("f", "step_xids = on off").unwrap_err();
        let OverrideError::Syntax { col, .. } = err else { panic!() };
        assert_eq!(col, 16);
        let err = parse("f", "step_xid = on").unwrap_err();
        assert!(err.to_string().ends_with("did you mean `step_xids`?"), "{err}");
    }

    #[test]
    fn a_file_over_64_kib_is_refused() {
        let big = "# padding\n".repeat(7000);
        let err = parse("big.conf", &big).unwrap_err();
        assert!(matches!(err, OverrideError::TooLarge { size: 70000, .. }));
        assert!(err.to_string().contains("over the 65536-byte limit"), "{err}");
        let dir = std::env::temp_dir().join(format!("gres-health-ovr-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.conf");
        fs::write(&path, &big).unwrap();
        assert!(matches!(load(&path), Err(OverrideError::TooLarge { .. })));
        fs::write(&path, "xid 13 = warn\n").unwrap();
        assert_eq!(load(&path).unwrap().table.rule(&xid(13)).action, Action::Warn);
        assert!(matches!(load(&dir.join("none")), Err(OverrideError::Io { .. })));
        fs::remove_dir_all(&dir).unwrap();
    }
}
