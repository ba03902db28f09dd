//! Problems as people and programs read them: compiler-style text with the
//! faulty line and a caret under the fault, or JSON.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use annotate_snippets::{Level, Renderer, Snippet};
use gres_core::bounded_read::{read_bounded, MAX_FILE_LEN};
use gres_core::model::{flags_to_string, ConfFlags, GresRecord};
use serde::Serialize;
use slurm_gpu_gres::config::syntax::Location;
use slurm_gpu_gres::predict::{Problem, Severity};

/// The lines of the configuration files, read once each.
#[derive(Default)]
pub struct Sources {
    files: HashMap<PathBuf, Option<Vec<String>>>,
}

impl Sources {
    /// Physical line `n` (1-based) of `path`, without its newline.
    pub fn line(&mut self, path: &Path, n: usize) -> Option<&str> {
        let lines = self.files.entry(path.to_path_buf()).or_insert_with(|| {
            read_bounded(path, MAX_FILE_LEN).ok().map(|b| String::from_utf8_lossy(&b).split('\n').map(|l| l.trim_end_matches('\r').to_string()).collect())
        });
        lines.as_ref()?.get(n.checked_sub(1)?).map(String::as_str)
    }
}

/// Whether standard error gets colors.
pub fn styled_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Byte offset of `needle` in `hay`, ignoring ASCII case.
fn find_ignore_case(hay: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len()).find(|&i| hay.is_char_boundary(i) && hay.as_bytes()[i..i + needle.len()].eq_ignore_ascii_case(needle.as_bytes()))
}

/// The value of `key=` on a line: byte range.
fn key_value(line: &str, key: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(at) = find_ignore_case(&line[from..], &format!("{key}=")) {
        let start = from + at;
        // A whole key: not the end of a longer one (`Files=` for `File=`).
        let whole = start == 0 || !line.as_bytes()[start - 1].is_ascii_alphanumeric();
        let value = start + key.len() + 1;
        if whole {
            let end = line[value..].find(|c: char| c.is_whitespace() || c == '#').map_or(line.len(), |e| value + e);
            if end > value {
                return Some((value, end));
            }
        }
        from = value;
    }
    None
}

/// Put a location that covers a whole line (or its first character) on the
/// word of that line the message is about: a file name, or a `Key=value`
/// the message quotes; else the whole line.
pub fn refine(loc: &Location, message: &str, line: &str) -> Location {
    if loc.line == 0 || loc.len > 1 {
        return loc.clone();
    }
    let at = |start: usize, end: usize| Location { path: loc.path.clone(), line: loc.line, column: start + 1, len: end - start };
    let words = message.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '"' | '\'' | '`'));
    let mut file_mentioned = false;
    for word in words {
        let word = word.trim_end_matches([',', ':', ';', '.']);
        if word.len() < 2 {
            continue;
        }
        if let Some((key, value)) = word.split_once('=') {
            if let Some((s, e)) = key_value(line, key) {
                if line[s..e].eq_ignore_ascii_case(value) || value.is_empty() {
                    return at(s, e);
                }
            }
            continue;
        }
        if word.contains('/') {
            file_mentioned = true;
            if let Some(s) = line.find(word) {
                return at(s, s + word.len());
            }
        }
    }
    if file_mentioned {
        for key in ["MultipleFiles", "Files", "File"] {
            if let Some((s, e)) = key_value(line, key) {
                return at(s, e);
            }
        }
    }
    let start = loc.column.saturating_sub(1).min(line.len());
    let content = line[start..].split('#').next().unwrap_or("").trim_end();
    at(start, start + content.len().max(1).min(line.len() - start))
}

fn level(severity: Severity) -> Level {
    match severity {
        Severity::Fatal | Severity::Error => Level::Error,
        Severity::Warning => Level::Warning,
        Severity::Note => Level::Note,
    }
}

/// A location with the word it points at found (when the source is there).
pub fn place(loc: &Location, message: &str, sources: &mut Sources) -> Location {
    match sources.line(&loc.path, loc.line) {
        Some(line) => refine(loc, message, line),
        None => loc.clone(),
    }
}

/// A problem as text: `error: message`, then `--> file:line:col`, the line
/// and a caret under the fault, then suggestion and help.  `nodes` names the
/// nodes it concerns, when not all of them.
pub fn render_text(p: &Problem, nodes: Option<&str>, sources: &mut Sources, styled: bool) -> String {
    let lvl = level(p.severity);
    let title = match nodes {
        Some(n) => format!("{} [{n}]", p.message),
        None => p.message.clone(),
    };
    let located = p.location.as_ref().map(|l| place(l, &p.message, sources));
    let source = located.as_ref().and_then(|l| sources.line(&l.path, l.line).map(str::to_string));
    let origin = located.as_ref().map(|l| l.path.display().to_string()).unwrap_or_default();
    let where_ = located.as_ref().map(ToString::to_string);
    let suggestion = p.suggestion.as_ref().map(|s| format!("did you mean `{s}`?"));
    let mut msg = lvl.title(&title);
    if p.severity == Severity::Fatal {
        msg = msg.id("fatal");
    }
    // The related place: the word of its line that its label names.
    let related = p.related.as_ref().map(|r| (place(&r.location, &r.label, sources), r.label.as_str()));
    let related_source = related.as_ref().and_then(|(l, _)| sources.line(&l.path, l.line).map(str::to_string));
    let related_origin = related.as_ref().map(|(l, _)| l.path.display().to_string()).unwrap_or_default();
    let span = |l: &Location, src: &str| {
        let start = l.column.saturating_sub(1).min(src.len());
        start..(start + l.len.max(1)).min(src.len()).max(start)
    };
    match (&located, &source) {
        (Some(l), Some(src)) if l.line > 0 => {
            let label = suggestion.as_deref().unwrap_or("");
            msg = msg.snippet(Snippet::source(src).line_start(l.line).origin(&origin).annotation(lvl.span(span(l, src)).label(label)));
        }
        _ => {
            if let Some(w) = &where_ {
                msg = msg.footer(Level::Note.title(w));
            }
            if let Some(s) = &suggestion {
                msg = msg.footer(Level::Help.title(s));
            }
        }
    }
    let related_where = related.as_ref().map(|(l, label)| format!("{label} at {l}"));
    match (&related, &related_source) {
        (Some((l, label)), Some(src)) if l.line > 0 => {
            msg = msg.snippet(Snippet::source(src).line_start(l.line).origin(&related_origin).annotation(Level::Note.span(span(l, src)).label(label)));
        }
        _ => {
            if let Some(w) = &related_where {
                msg = msg.footer(Level::Note.title(w));
            }
        }
    }
    if let Some(h) = &p.help {
        msg = msg.footer(Level::Help.title(h));
    }
    let renderer = if styled { Renderer::styled() } else { Renderer::plain() };
    let text = renderer.render(msg).to_string();
    text
}

/// A problem as JSON.
/// The fields every JSON document of the tool starts with (`check` and
/// `detect --format json`).
#[derive(Serialize)]
pub struct JsonHeader {
    /// The version of the document's layout: raised when a field changes
    /// meaning or goes (new fields may come without it).
    schema: u32,
    tool: &'static str,
    tool_version: &'static str,
    /// The Slurm release the plugins of this build are for.
    plugins_for_slurm: &'static str,
}

impl JsonHeader {
    pub fn new() -> JsonHeader {
        JsonHeader { schema: 1, tool: "gres-rs", tool_version: env!("CARGO_PKG_VERSION"), plugins_for_slurm: slurm_gpu_gres::SLURM_VERSION }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct JsonProblem {
    pub severity: &'static str,
    pub message: String,
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub len: Option<usize>,
    pub suggestion: Option<String>,
    pub help: Option<String>,
    /// The nodes it concerns (a hostlist), when not the whole file.
    pub nodes: Option<String>,
    /// Another place it is about (the first of two).
    pub related: Option<JsonRelated>,
}

/// The related place of a problem.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct JsonRelated {
    pub message: String,
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub len: Option<usize>,
}

pub fn json_problem(p: &Problem, nodes: Option<&str>, sources: &mut Sources) -> JsonProblem {
    let l = p.location.as_ref().map(|l| place(l, &p.message, sources));
    JsonProblem {
        severity: p.severity.as_str(),
        message: p.message.clone(),
        file: l.as_ref().map(|l| l.path.display().to_string()),
        line: l.as_ref().filter(|l| l.line > 0).map(|l| l.line),
        column: l.as_ref().filter(|l| l.line > 0).map(|l| l.column),
        len: l.as_ref().filter(|l| l.line > 0).map(|l| l.len),
        suggestion: p.suggestion.clone(),
        help: p.help.clone(),
        nodes: nodes.map(str::to_string),
        related: p.related.as_ref().map(|r| {
            let l = place(&r.location, &r.label, sources);
            let at = |v: usize| (l.line > 0).then_some(v);
            JsonRelated { message: r.label.clone(), file: l.path.display().to_string(), line: at(l.line), column: at(l.column), len: at(l.len) }
        }),
    }
}

/// The flags of a record an admin sets or needs to know, as gres.conf's
/// `Flags=` words: the vendor variables when they are not the default
/// set, `CountOnly`, `one_sharing`, `explicit`, and `mig` for MIG devices
/// (not `SHARED`, which every mps and shard record has).  Empty when none.
pub fn readable_flags(flags: ConfFlags) -> String {
    let mut words = Vec::new();
    if !flags.has(ConfFlags::ENV_DEF) {
        for (bit, word) in [
            (ConfFlags::ENV_NVML, "nvidia_gpu_env"),
            (ConfFlags::ENV_RSMI, "amd_gpu_env"),
            (ConfFlags::ENV_ONEAPI, "intel_gpu_env"),
            (ConfFlags::ENV_OPENCL, "opencl_env"),
        ] {
            if flags.has(bit) {
                words.push(word);
            }
        }
    }
    for (bit, word) in
        [(ConfFlags::COUNT_ONLY, "CountOnly"), (ConfFlags::ONE_SHARING, "one_sharing"), (ConfFlags::EXPLICIT, "explicit"), (ConfFlags::MIG, "mig")]
    {
        if flags.has(bit) {
            words.push(word);
        }
    }
    words.join(",")
}

/// A node's GRES records as an aligned table for people, one row per
/// record, each line indented by two spaces and ended by a newline:
/// name, type, count, index, file(s) and cores always; links, unique id
/// and flags only when a record has them.  `-` where a record has no
/// value.
pub fn gres_table(records: &[GresRecord]) -> String {
    let dash = |v: Option<&str>| v.filter(|v| !v.is_empty()).unwrap_or("-").to_string();
    let mut head = vec!["NAME", "TYPE", "COUNT", "INDEX", "FILE", "CORES"];
    let links = records.iter().any(|r| r.links.is_some());
    let unique = records.iter().any(|r| r.unique_id.is_some());
    let flags: Vec<String> = records.iter().map(|r| readable_flags(r.flags)).collect();
    let any_flags = flags.iter().any(|f| !f.is_empty());
    if links {
        head.push("LINKS");
    }
    if unique {
        head.push("UNIQUE_ID");
    }
    if any_flags {
        head.push("FLAGS");
    }
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    for (r, f) in records.iter().zip(&flags) {
        let index = r.file.is_some().then(|| slurm_gpu_gres::predict::line_index(r.file.as_deref()).to_string());
        let mut row =
            vec![r.name.clone(), dash(r.type_name.as_deref()), r.count.to_string(), dash(index.as_deref()), dash(r.file.as_deref()), dash(r.cpus.as_deref())];
        if links {
            row.push(dash(r.links.as_deref()));
        }
        if unique {
            row.push(dash(r.unique_id.as_deref()));
        }
        if any_flags {
            row.push(dash(Some(f)));
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::from(" ");
        for (cell, w) in row.iter().zip(&widths) {
            line.push(' ');
            line.push_str(cell);
            line.push_str(&" ".repeat(w - cell.chars().count() + 1));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A GRES record as JSON.
#[derive(Serialize)]
pub struct JsonRecord {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    pub count: u64,
    /// `Index=` of the `slurmd -G` line (from `File`'s number); none
    /// without `File`.
    pub index: Option<i32>,
    pub id: u32,
    pub file: Option<String>,
    pub cores: Option<String>,
    pub core_cnt: u32,
    pub links: Option<String>,
    pub unique_id: Option<String>,
    pub flags: String,
}

impl JsonRecord {
    pub fn new(r: &GresRecord) -> Self {
        JsonRecord {
            name: r.name.clone(),
            type_name: r.type_name.clone(),
            count: r.count,
            index: r.file.is_some().then(|| slurm_gpu_gres::predict::line_index(r.file.as_deref())),
            id: r.plugin_id,
            file: r.file.clone(),
            cores: r.cpus.clone(),
            core_cnt: r.cpu_cnt,
            links: r.links.clone(),
            unique_id: r.unique_id.clone(),
            flags: flags_to_string(r.flags),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_loc(line: usize, column: usize) -> Location {
        Location { path: PathBuf::from("/etc/slurm/gres.conf"), line, column, len: 1 }
    }

    fn record(name: &str, file: Option<&str>, cpus: Option<&str>, flags: u32) -> GresRecord {
        GresRecord {
            name: name.into(),
            file: file.map(Into::into),
            cpus: cpus.map(Into::into),
            cpu_cnt: 8,
            count: 1,
            flags: ConfFlags(flags),
            plugin_id: gres_core::model::gres_build_id(name),
            ..Default::default()
        }
    }

    #[test]
    fn tables_for_people() {
        let default_env = ConfFlags::HAS_FILE | ConfFlags::ENV_SET | ConfFlags::ENV_DEF;
        let mut a = record("gpu", Some("/dev/nvidia0"), Some("0-3"), default_env);
        a.type_name = Some("a100".into());
        let mut b = record("gpu", Some("/dev/nvidia1"), None, ConfFlags::HAS_FILE | ConfFlags::ENV_NVML);
        b.type_name = Some("a100".into());
        b.links = Some("0,-1".into());
        let mut mps = record("mps", Some("/dev/nvidia0"), None, ConfFlags::HAS_FILE | ConfFlags::SHARED | ConfFlags::ENV_DEF);
        mps.count = 100;
        assert_eq!(
            gres_table(&[a.clone(), b, mps]),
            "  NAME  TYPE  COUNT  INDEX  FILE          CORES  LINKS  FLAGS\n  \
             gpu   a100  1      0      /dev/nvidia0  0-3    -      -\n  \
             gpu   a100  1      1      /dev/nvidia1  -      0,-1   nvidia_gpu_env\n  \
             mps   -     100    0      /dev/nvidia0  -      -      -\n"
        );
        // Without links or flags: no such columns; no file: no index.
        assert_eq!(
            gres_table(&[a, record("nic", None, None, 0)]),
            "  NAME  TYPE  COUNT  INDEX  FILE          CORES\n  gpu   a100  1      0      /dev/nvidia0  0-3\n  nic   -     1      -      -             -\n"
        );
        assert_eq!(readable_flags(ConfFlags(ConfFlags::ENV_RSMI | ConfFlags::ONE_SHARING | ConfFlags::COUNT_ONLY)), "amd_gpu_env,CountOnly,one_sharing");
    }

    #[test]
    fn refines_to_the_word() {
        let line = "NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-3";
        let l = refine(&line_loc(3, 1), "/dev/nvidia2 is not a valid character or block device", line);
        assert_eq!((l.column, l.len), (37, 16));
        let l = refine(&line_loc(3, 1), "Type=A100 matches no detected GPU", line);
        assert_eq!(&line[l.column - 1..l.column - 1 + l.len], "a100");
        let l = refine(&line_loc(3, 1), "stat(/dev/nvidia[0-3]): No such file", line);
        assert_eq!(&line[l.column - 1..l.column - 1 + l.len], "/dev/nvidia[0-3]");
        let l = refine(&line_loc(3, 5), "something else", "    Name=mps Count=10 # c");
        assert_eq!((l.column, l.len), (5, 17));
        let wide = Location { len: 4, ..line_loc(3, 2) };
        assert_eq!(refine(&wide, "/dev/x", line), wide);
        assert_eq!(key_value("Files=/a File=/b", "File"), Some((14, 16)));
        assert_eq!(key_value("x=1", "File"), None);
    }

    #[test]
    fn renders_a_caret() {
        let dir = std::env::temp_dir().join(format!("gres-rs-render-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gres.conf");
        std::fs::write(&path, "# x\nName=gpu Tpye=a100 File=/dev/nvidia0\n").unwrap();
        let p = Problem {
            severity: Severity::Fatal,
            location: Some(Location { path: path.clone(), line: 2, column: 10, len: 4 }),
            message: "Parsing error at unrecognized key: Tpye".into(),
            suggestion: Some("Type".into()),
            help: Some("keys are case-insensitive".into()),
            related: None,
            feature: None,
        };
        let mut sources = Sources::default();
        let text = render_text(&p, None, &mut sources, false);
        assert!(text.starts_with("error[fatal]: Parsing error at unrecognized key: Tpye"), "{text}");
        assert!(text.contains(&format!("{}:2:10", path.display())), "{text}");
        assert!(text.contains("2 | Name=gpu Tpye=a100"), "{text}");
        assert!(text.contains("^^^^ did you mean `Type`?"), "{text}");
        assert!(text.contains("help: keys are case-insensitive"), "{text}");
        let j = json_problem(&p, Some("n[1-2]"), &mut sources);
        assert_eq!((j.line, j.column, j.len), (Some(2), Some(10), Some(4)));
        assert_eq!(j.severity, "fatal");
        let elsewhere = Problem::new(Severity::Warning, Some(Location::file(Path::new("/nonexistent"))), "w");
        let text = render_text(&elsewhere, Some("n1"), &mut sources, false);
        assert!(text.starts_with("warning: w [n1]"), "{text}");
        assert!(text.contains("/nonexistent"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn renders_the_related_place() {
        let dir = std::env::temp_dir().join(format!("gres-rs-render-related-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gres.conf");
        std::fs::write(&path, "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/gpu0\n").unwrap();
        let p = Problem::new(Severity::Warning, Some(Location::line(&path, 2)), "/dev/gpu0 is the same device as /dev/nvidia0")
            .with_related(Location::line(&path, 1), "GPU 0 uses /dev/nvidia0");
        let mut sources = Sources::default();
        let text = render_text(&p, None, &mut sources, false);
        let at = path.display();
        assert_eq!(
            text,
            format!(
                "warning: /dev/gpu0 is the same device as /dev/nvidia0\n --> {at}:2:15\n  |\n2 | Name=gpu File=/dev/gpu0\n  |               ---------\n  |\n \
                 ::: {at}:1:15\n  |\n1 | Name=gpu File=/dev/nvidia0\n  |               ------------ note: GPU 0 uses /dev/nvidia0\n  |"
            )
        );
        let j = json_problem(&p, None, &mut sources);
        assert_eq!(
            j.related,
            Some(JsonRelated { message: "GPU 0 uses /dev/nvidia0".into(), file: at.to_string(), line: Some(1), column: Some(15), len: Some(12) })
        );
        // A related place whose line cannot be read: a note with the place.
        let elsewhere = p.clone().with_related(Location::line(Path::new("/nonexistent/gres.conf"), 3), "GPU 0 uses /dev/nvidia0");
        let text = render_text(&elsewhere, None, &mut sources, false);
        assert!(text.ends_with("= note: GPU 0 uses /dev/nvidia0 at /nonexistent/gres.conf:3:1"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
