//! gres.conf cut down to the lines that apply to one node.
//!
//! slurmd reads every line of gres.conf and keeps those for its node.  For
//! thousands of nodes and a file of 100,000 lines, evaluating the whole
//! file once per node is too slow, so the file is indexed once: which
//! logical lines are global (`AutoDetect=`, `Name=`) and which nodes each
//! `NodeName=` line names.  A node's gres.conf is then the text of its
//! lines only, copied verbatim (so columns stay right), evaluated by the
//! library's gres.conf reader, and every place in the result mapped back to
//! the file and line it came from.  Lines of other nodes have no effect on a
//! node in Slurm (they are skipped before their values are looked at), so
//! the outcome is the same.
//!
//! The index only classifies lines: the syntax of the whole file is checked
//! by the library's reader, which the caller runs as well.  The lines are
//! the library's too: it reads the files (within its bounds), cuts them
//! into logical lines (comments, continuations, escapes) and follows the
//! `include`s (see `config::syntax::visit_file`); this module
//! only keeps, for each logical line, where it is and what it is.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use gres_core::hostlist;
use slurm_gpu_gres::config::gres_conf::{GresConf, NodeContext, NodeGresConf};
use slurm_gpu_gres::config::syntax::{visit_file, ConfError, Diagnostic, FsReader, LineVisitor, Location, RawLine};

/// One file read: its path and text.
struct FileText {
    path: PathBuf,
    text: String,
}

/// For each line of a text made of copied lines: the file (index) and
/// line it was copied from.
type LineMap = Vec<(usize, usize)>;

/// What a logical line is.
#[derive(Debug)]
enum Kind {
    /// A `NodeName=` line: its value, and where that is (physical line,
    /// byte range) when on one line.
    Node(String, Option<(usize, usize, usize)>),
    /// A global `AutoDetect=` line: where its value is.
    AutoDetect(Option<(usize, usize, usize)>),
    Global,
}

/// What a logical line (neither blank nor an `include`) is, by its first
/// key.
fn classify(line: &RawLine<'_>) -> Kind {
    let Some(lead) = line.lead_key() else { return Kind::Global };
    if lead.key.eq_ignore_ascii_case("NodeName") {
        Kind::Node(lead.value.into_owned(), lead.value_span)
    } else if lead.key.eq_ignore_ascii_case("AutoDetect") {
        Kind::AutoDetect(lead.value_span)
    } else {
        Kind::Global
    }
}

/// One logical line of gres.conf (includes resolved).
struct Logical {
    file: usize,
    first: usize,
    last: usize,
    /// Its physical lines in the file's text.
    range: Range<usize>,
    /// The last physical line ends in a continuation (at the end of the
    /// file).
    continued: bool,
    /// The `NodeName=` value of a node line; `None` for a global line.
    hosts: Option<String>,
    /// Where that value is written (physical line, byte range).
    hosts_span: Option<(usize, usize, usize)>,
}

/// An indexed gres.conf.
pub struct GresConfIndex {
    main: PathBuf,
    files: Vec<FileText>,
    lines: Vec<Logical>,
    /// Lines for every node: global lines, and node lines whose hostlist
    /// cannot be read (they are reported for every node, as by slurmd).
    always: Vec<usize>,
    /// The value of the last global `AutoDetect=`.
    global_autodetect: Option<Location>,
    /// The file includes others (or could not be read): problems of the
    /// `include` lines themselves are only found by reading the whole file.
    pub has_includes: bool,
}

/// Why a node's gres.conf could not be evaluated.
#[derive(Debug, PartialEq, Eq)]
pub enum IndexError {
    /// Syntax errors of lines (slurmd refuses the file on every node).
    Syntax(Vec<ConfError>),
    /// What stops slurmd on this node.
    Node(ConfError),
}

impl GresConfIndex {
    /// Index `path` and the files it includes.  Files that cannot be read
    /// (or are not regular files, or are too large) and includes that
    /// cannot be followed are left out (the library's reader reports them).
    pub fn load(path: &Path) -> GresConfIndex {
        let mut conf_index = GresConfIndex::empty(path);
        // Errors (of the main file's read, of includes) and remarks (files
        // read as empty) are the whole-file reader's to report.
        if visit_file(&FsReader, path, &mut conf_index).is_err() {
            conf_index.has_includes = true;
        }
        conf_index.always =
            conf_index.lines.iter().enumerate().filter(|(_, l)| l.hosts.as_ref().is_none_or(|h| hostlist::expand(h).is_err())).map(|(i, _)| i).collect();
        conf_index
    }

    /// Nothing indexed yet, for `main`.
    fn empty(main: &Path) -> GresConfIndex {
        GresConfIndex { main: main.to_path_buf(), files: Vec::new(), lines: Vec::new(), always: Vec::new(), global_autodetect: None, has_includes: false }
    }

    /// For each node of `wanted`, the node lines that name it, in order.
    pub fn node_lines(&self, wanted: &HashSet<&str>) -> HashMap<String, Vec<usize>> {
        let mut out: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, l) in self.lines.iter().enumerate() {
            let Some(hosts) = &l.hosts else { continue };
            // Most lines name one node: no need to expand.
            if !hosts.contains(['[', ',']) {
                if wanted.contains(hosts.as_str()) {
                    out.entry(hosts.clone()).or_default().push(i);
                }
                continue;
            }
            let Ok(names) = hostlist::expand(hosts) else { continue };
            for name in &names {
                if wanted.contains(name.as_str()) {
                    let v = out.entry(name.clone()).or_default();
                    if v.last() != Some(&i) {
                        v.push(i);
                    }
                }
            }
        }
        out
    }

    /// The lines a node reads: global ones and its own, in file order.
    pub fn chosen(&self, node_lines: &[usize]) -> Vec<usize> {
        let mut chosen: Vec<usize> = Vec::with_capacity(self.always.len() + node_lines.len());
        chosen.extend_from_slice(&self.always);
        chosen.extend_from_slice(node_lines);
        chosen.sort_unstable();
        chosen.dedup();
        chosen
    }

    /// The text of a node's lines with the `NodeName=` values left out:
    /// nodes whose lines have the same content get the same GRES, so they
    /// are evaluated once.  `None` when a value could not be located.
    pub fn content_key(&self, node_lines: &[usize]) -> Option<String> {
        let mut key = String::new();
        for i in self.chosen(node_lines) {
            let l = &self.lines[i];
            if l.hosts.is_some() && l.hosts_span.is_none() {
                return None;
            }
            key.push_str(&self.line_key(i));
            key.push('\0');
        }
        Some(key)
    }

    /// The text of logical lines `chosen` (verbatim), and for each of its
    /// lines the file and line it comes from.
    fn virtual_text(&self, chosen: &[usize]) -> (String, LineMap) {
        let mut text = String::new();
        let mut map: LineMap = Vec::new();
        for &i in chosen {
            let l = &self.lines[i];
            let f = &self.files[l.file];
            text.push_str(&f.text[l.range.clone()]);
            text.push('\n');
            map.extend((l.first..=l.last).map(|n| (l.file, n)));
            if l.continued {
                // A continuation at the end of an included file must not
                // join the next line copied here.
                text.push('\n');
                map.push((l.file, l.last));
            }
        }
        (text, map)
    }

    /// Put a place in a virtual text back where it comes from.
    fn remap(&self, map: &[(usize, usize)], loc: &mut Location) {
        if loc.line >= 1 {
            if let Some(&(f, n)) = map.get(loc.line - 1) {
                loc.path.clone_from(&self.files[f].path);
                loc.line = n;
            }
        }
    }

    /// Read logical lines `chosen` as gres.conf.
    fn parse(&self, chosen: &[usize]) -> Result<(GresConf, LineMap), Vec<ConfError>> {
        let (text, map) = self.virtual_text(chosen);
        match GresConf::parse_str(&text, &self.main, &FsReader) {
            Ok(conf) => Ok((conf, map)),
            Err(errors) => Err(errors
                .0
                .into_iter()
                .map(|mut e| {
                    self.remap(&map, &mut e.location);
                    e
                })
                .collect()),
        }
    }

    /// Check the syntax of logical lines `chosen` (lines no node reads, for
    /// one): their remarks, or their errors.
    pub fn check_lines(&self, chosen: &[usize]) -> Result<Vec<Diagnostic>, Vec<ConfError>> {
        let (conf, map) = self.parse(chosen)?;
        let mut diagnostics = conf.diagnostics().to_vec();
        for d in &mut diagnostics {
            if let Some(loc) = d.location.as_mut() {
                self.remap(&map, loc);
            }
        }
        Ok(diagnostics)
    }

    /// Logical lines read.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// The text of logical line `i` without its `NodeName=` value: lines
    /// with the same key have the same syntax problems.
    pub fn line_key(&self, i: usize) -> String {
        let l = &self.lines[i];
        let f = &self.files[l.file];
        let mut key = String::new();
        for (n, line) in (l.first..).zip(f.text[l.range.clone()].split('\n')) {
            match l.hosts_span {
                Some((hn, start, end)) if hn == n => {
                    key.push_str(&line[..start]);
                    key.push_str(&line[end..]);
                }
                _ => key.push_str(line),
            }
            key.push('\n');
        }
        key
    }

    /// gres.conf as slurmd reads it for the node of `ctx`, whose own node
    /// lines are `node_lines` (from [`GresConfIndex::node_lines`]).
    pub fn node_config(&self, node_lines: &[usize], ctx: &NodeContext<'_>) -> Result<NodeGresConf, IndexError> {
        let (conf, map) = self.parse(&self.chosen(node_lines)).map_err(IndexError::Syntax)?;
        match conf.node_config(ctx) {
            Ok(mut node) => {
                for r in &mut node.records {
                    self.remap(&map, &mut r.location);
                }
                for d in &mut node.diagnostics {
                    if let Some(loc) = d.location.as_mut() {
                        self.remap(&map, loc);
                    }
                }
                Ok(node)
            }
            Err(mut e) => {
                self.remap(&map, &mut e.location);
                Err(IndexError::Node(e))
            }
        }
    }

    /// Where the global `AutoDetect=` value is, if there is one.
    pub fn global_autodetect(&self) -> Option<&Location> {
        self.global_autodetect.as_ref()
    }
}

impl LineVisitor for GresConfIndex {
    fn file(&mut self, path: &Path, text: &str) {
        self.files.push(FileText { path: path.to_path_buf(), text: text.to_string() });
    }

    fn line(&mut self, line: &RawLine<'_>, _errors: &mut Vec<ConfError>) {
        // The file being read is the last one whose path is the line's:
        // the walk hands each file over before its lines.
        let file = match self.files.last() {
            Some(f) if f.path == line.path => self.files.len() - 1,
            _ => self.files.iter().rposition(|f| f.path == line.path).unwrap_or(0),
        };
        let (hosts, hosts_span) = match classify(line) {
            Kind::Node(hosts, span) => (Some(hosts), span),
            Kind::AutoDetect(span) => {
                self.global_autodetect = span.map(|(n, start, end)| Location { path: line.path.to_path_buf(), line: n, column: start + 1, len: end - start });
                (None, None)
            }
            Kind::Global => (None, None),
        };
        self.lines.push(Logical { file, first: line.first, last: line.last, range: line.range.clone(), continued: line.continued, hosts, hosts_span });
    }

    fn include(&mut self, _line: &RawLine<'_>) {
        self.has_includes = true;
    }

    fn remark(&mut self, _remark: Diagnostic) {
        // A file read as empty: the main one, or an include.
        self.has_includes = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_gpu_gres::config::syntax::{MemReader, Spanned};

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tmp(name: &str) -> Tmp {
        let dir = std::env::temp_dir().join(format!("gres-rs-conf_index-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tmp(dir)
    }

    /// The index of `text` as the file `/x`.
    fn index(text: &str) -> GresConfIndex {
        let mut conf_index = GresConfIndex::empty(Path::new("/x"));
        visit_file(&MemReader::new().with("/x", text), Path::new("/x"), &mut conf_index).unwrap();
        conf_index
    }

    /// Whether the index sees `line` continued on the next one.
    fn continues(line: &str) -> bool {
        index(&format!("{line}\nB=1\n")).lines[0].last == 2
    }

    #[test]
    fn continuation_rules() {
        assert!(continues("Name=gpu \\"));
        assert!(continues("Name=gpu \\  "));
        assert!(!continues("Name=gpu \\\\"));
        assert!(!continues("Name=gpu # \\"));
        assert!(continues("Name=gpu \\# x \\"));
        assert!(!continues("Name=gpu"));
        // Blank lines are not indexed.
        let f = index("a\\\nb\nc\\\n\\\nd\n");
        assert_eq!(f.lines.iter().map(|l| (l.first, l.last)).collect::<Vec<_>>(), vec![(1, 2), (3, 5)]);
        // A continuation cut by the end of the file.
        let f = index("a=1\nb=2 \\");
        assert_eq!(f.lines.iter().map(|l| (l.first, l.last, l.continued)).collect::<Vec<_>>(), vec![(1, 1, false), (2, 2, true)]);
    }

    /// The conf_index evaluation gives what the whole file gives, with the
    /// same places.
    #[test]
    fn same_as_whole_file() {
        let dir = tmp("same");
        let main = dir.0.join("gres.conf");
        let inc = dir.0.join("more.conf");
        let text = "# test\nAutoDetect=off\nNodeName=n[1-2] Name=gpu Type=a File=/dev/nvidia[0-1] \\\n   Cores=0-1\nName=mps Count=100\ninclude more.conf\nNodeName=n3 Name=gpu Type=b File=/dev/nvidia0\nNodeName=n[2-3] Name=gpu Type=a File=/dev/nvidia3\nNodeName=n3 Name=gpu Type=c File=/dev/nvidia4 Flags=amd_gpu_env\n";
        std::fs::write(&main, text).unwrap();
        std::fs::write(&inc, "NodeName=n2 Name=shard Count=8\n  NodeName=n9 Name=gpu File=/dev/x\n").unwrap();
        let conf_index = GresConfIndex::load(&main);
        assert_eq!(conf_index.len(), 8);
        let full = GresConf::load(&main).unwrap();
        let wanted: HashSet<&str> = ["n1", "n2", "n3", "n4"].into_iter().collect();
        let index = conf_index.node_lines(&wanted);
        assert_eq!(index.get("n2").map(Vec::len), Some(3));
        assert!(!index.contains_key("n4"));
        for node in ["n1", "n2", "n3", "n4"] {
            let ctx = NodeContext::new(node, 8);
            let got = conf_index.node_config(index.get(node).map_or(&[][..], Vec::as_slice), &ctx);
            let want = match full.node_config(&ctx) {
                Ok(want) => want,
                Err(e) => {
                    assert_eq!(got, Err(IndexError::Node(e)), "{node}");
                    continue;
                }
            };
            let got = got.unwrap();
            assert_eq!(got.records, want.records, "{node}");
            assert_eq!(got.autodetect, want.autodetect, "{node}");
            // Remarks about other nodes' lines are the only difference.
            let want_diags: Vec<_> = want.diagnostics.iter().filter(|d| !d.message.starts_with("skipping GRES")).collect();
            let got_diags: Vec<_> = got.diagnostics.iter().collect();
            assert_eq!(got_diags, want_diags, "{node}");
        }
        let Err(IndexError::Node(n3)) = conf_index.node_config(&index["n3"], &NodeContext::new("n3", 8)) else { panic!("n3") };
        assert_eq!((n3.location.line, n3.location.column), (9, 53));
        let n2 = conf_index.node_config(&index["n2"], &NodeContext::new("n2", 8)).unwrap();
        let shard = n2.records.iter().find(|r| r.record.name == "shard").unwrap();
        assert_eq!(shard.location.path, inc);
        assert_eq!(shard.location.line, 1);
        let last = n2.records.last().unwrap();
        assert_eq!((last.location.path.clone(), last.location.line), (main.clone(), 8));
    }

    #[test]
    fn errors_keep_their_place() {
        let dir = tmp("errors");
        let main = dir.0.join("gres.conf");
        std::fs::write(&main, "Name=gpu File=/dev/nvidia0\n\n\nNodeName=n1 Name=gpu Type=x File=/dev/nvidia1\n").unwrap();
        let conf_index = GresConfIndex::load(&main);
        let wanted: HashSet<&str> = ["n1"].into_iter().collect();
        let index = conf_index.node_lines(&wanted);
        let e = conf_index.node_config(&index["n1"], &NodeContext::new("n1", 4)).unwrap_err();
        let full = GresConf::load(&main).unwrap().node_config(&NodeContext::new("n1", 4)).unwrap_err();
        let IndexError::Node(e) = e else { panic!("{e:?}") };
        assert_eq!(e, full);
        assert_eq!(e.location.line, 4);
    }

    /// What the first logical line of `text` is.
    #[derive(Debug)]
    enum Seen {
        Blank,
        Include(String),
        Line(Kind),
    }

    fn kind(text: &str) -> Seen {
        struct First(Option<Seen>);
        impl LineVisitor for First {
            fn line(&mut self, line: &RawLine<'_>, _errors: &mut Vec<ConfError>) {
                self.0.get_or_insert_with(|| Seen::Line(classify(line)));
            }
            fn remark(&mut self, _remark: Diagnostic) {}
            fn include_target(&mut self, raw: &Spanned) -> Result<String, ConfError> {
                self.0.get_or_insert_with(|| Seen::Include(raw.value.clone()));
                Ok(raw.value.clone())
            }
        }
        let mut first = First(None);
        let _ = visit_file(&MemReader::new().with("/x", text), Path::new("/x"), &mut first);
        first.0.unwrap_or(Seen::Blank)
    }

    #[test]
    fn line_kinds() {
        assert!(matches!(kind("   # only a comment"), Seen::Blank));
        assert!(matches!(kind("include other.conf"), Seen::Include(t) if t == "other.conf"));
        assert!(matches!(kind("Name=gpu File=/dev/nvidia0"), Seen::Line(Kind::Global)));
        assert!(matches!(kind("AutoDetect=nvml"), Seen::Line(Kind::AutoDetect(Some((1, 11, 15))))));
        assert!(matches!(kind("nodename = n[1-2] Name=gpu"), Seen::Line(Kind::Node(h, Some((1, 11, 17)))) if h == "n[1-2]"));
        assert!(matches!(kind("NodeName=\"n1\" Name=gpu"), Seen::Line(Kind::Node(h, Some((1, 10, 12)))) if h == "n1"));
        // Escapes and continuations: the value is known, its place is not
        // one run of the file.
        assert!(matches!(kind("NodeName=n\\1 Name=gpu"), Seen::Line(Kind::Node(h, None)) if h == "n1"));
        assert!(matches!(kind("NodeName=n1\\\n Name=gpu"), Seen::Line(Kind::Node(h, Some((1, 9, 11)))) if h == "n1"));
        assert!(matches!(kind("NodeName=n1\\\n\\\nName=gpu"), Seen::Line(Kind::Node(h, _)) if h == "n1Name=gpu"));
        // A key with nothing after `=` is still the line's key.
        assert!(matches!(kind("NodeName= "), Seen::Line(Kind::Node(h, None)) if h.is_empty()));
    }

    #[test]
    fn same_content_same_key() {
        let dir = tmp("key");
        let main = dir.0.join("gres.conf");
        std::fs::write(
            &main,
            "Name=mps Count=4\nNodeName=a[1-2] Name=gpu File=/dev/nvidia0\nNodeName=b1 Name=gpu File=/dev/nvidia0\nNodeName=c1 Name=gpu File=/dev/nvidia1\n",
        )
        .unwrap();
        let conf_index = GresConfIndex::load(&main);
        let wanted: HashSet<&str> = ["a1", "a2", "b1", "c1"].into_iter().collect();
        let index = conf_index.node_lines(&wanted);
        let key = |n: &str| conf_index.content_key(&index[n]).unwrap();
        assert_eq!(key("a1"), key("a2"));
        assert_eq!(key("a1"), key("b1"));
        assert_ne!(key("a1"), key("c1"));
        assert!(key("a1").contains("Name=mps Count=4"));
        assert_eq!(conf_index.global_autodetect(), None);
    }

    #[test]
    fn syntax_of_lines_no_node_reads() {
        let dir = tmp("syntax");
        let main = dir.0.join("gres.conf");
        std::fs::write(&main, "NodeName=a1 Name=gpu File=/dev/nvidia0\nNodeName=b[1-9] Name=gpu Fiel=/dev/nvidia0\nNodeName=a1 Name=gpu Count=1 Count=2\n")
            .unwrap();
        let conf_index = GresConfIndex::load(&main);
        assert!(!conf_index.has_includes);
        assert_eq!(conf_index.line_key(1), "NodeName= Name=gpu Fiel=/dev/nvidia0\n");
        let errors = conf_index.check_lines(&[1]).unwrap_err();
        assert_eq!((errors[0].location.line, errors[0].location.column), (2, 26));
        assert_eq!(errors[0].suggestion.as_deref(), Some("File"));
        let remarks = conf_index.check_lines(&[2]).unwrap();
        assert_eq!(remarks[0].location.as_ref().map(|l| (l.line, l.column)), Some((3, 30)));
        let wanted: HashSet<&str> = ["b1"].into_iter().collect();
        let index = conf_index.node_lines(&wanted);
        assert!(matches!(conf_index.node_config(&index["b1"], &NodeContext::new("b1", 4)), Err(IndexError::Syntax(e)) if e[0].location.line == 2));
    }

    /// Files with includes (or that cannot be read) are also read whole.
    #[test]
    fn includes_are_noticed() {
        let dir = tmp("includes");
        let main = dir.0.join("gres.conf");
        std::fs::write(&main, "Name=gpu File=/dev/nvidia0\n").unwrap();
        assert!(!GresConfIndex::load(&main).has_includes);
        assert!(GresConfIndex::load(&dir.0.join("missing.conf")).has_includes);
        assert!(GresConfIndex::load(&dir.0).has_includes);
        std::fs::write(dir.0.join("more.conf"), "NodeName=n1 Name=gpu File=/dev/nvidia1\n").unwrap();
        for include in ["include more.conf", "include missing.conf", "include more.conf junk", "include %c.conf"] {
            std::fs::write(&main, format!("Name=gpu File=/dev/nvidia0\n{include}\nNodeName=n2 Name=gpu File=/dev/nvidia2\n")).unwrap();
            let conf_index = GresConfIndex::load(&main);
            assert!(conf_index.has_includes, "{include}");
            let followed = include == "include more.conf";
            assert_eq!(conf_index.len(), if followed { 3 } else { 2 }, "{include}");
            if followed {
                let l = &conf_index.lines[1];
                assert_eq!((conf_index.files[l.file].path.clone(), l.first, l.hosts.as_deref()), (dir.0.join("more.conf"), 1, Some("n1")));
                let l = &conf_index.lines[2];
                assert_eq!((conf_index.files[l.file].path.clone(), l.first), (main.clone(), 3));
            }
        }
    }

    #[test]
    fn unreadable_hostlists_apply_everywhere() {
        let dir = tmp("bad");
        let main = dir.0.join("gres.conf");
        std::fs::write(&main, "NodeName=n[1-x] Name=gpu File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/dev/nvidia1\n").unwrap();
        let conf_index = GresConfIndex::load(&main);
        let wanted: HashSet<&str> = ["n1"].into_iter().collect();
        let index = conf_index.node_lines(&wanted);
        let got = conf_index.node_config(&index["n1"], &NodeContext::new("n1", 4)).unwrap();
        let want = GresConf::load(&main).unwrap().node_config(&NodeContext::new("n1", 4)).unwrap();
        assert_eq!(got, want);
    }
}
