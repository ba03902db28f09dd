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
//! by the library's reader, which the caller runs as well.  It follows the
//! same rules for comments, continuations, escapes and `include`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use slurm_gpu_gres::core::files::{read_bounded, MAX_FILE_LEN};
use slurm_gpu_gres::core::gres_conf::syntax::{include_path, is_c_space, ConfError, Diagnostic, FsReader, Location, MAX_INCLUDE_DEPTH, MAX_TOTAL_LEN};
use slurm_gpu_gres::core::gres_conf::{GresConf, NodeContext, NodeGresConf};
use slurm_gpu_gres::core::hostlist;

/// One file's physical lines and the logical line each belongs to.
struct FileText {
    path: PathBuf,
    lines: Vec<String>,
    /// For each physical line (index = line - 1): first and last physical
    /// line (1-based) of its logical line.
    groups: Vec<(usize, usize)>,
}

/// A physical line with its comment cut off (at the first `#` after an
/// even run of backslashes) and cut at a NUL, as Slurm's reader does.
fn uncommented(line: &str) -> &[u8] {
    let mut bytes = line.as_bytes();
    if let Some(nul) = bytes.iter().position(|&b| b == 0) {
        bytes = &bytes[..nul];
    }
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && !escaped {
            return &bytes[..i];
        }
        escaped = b == b'\\' && !escaped;
    }
    bytes
}

/// The length of `bytes` without trailing blanks.
fn trimmed_len(bytes: &[u8]) -> usize {
    bytes.len() - bytes.iter().rev().take_while(|&&b| is_c_space(b)).count()
}

/// Whether a physical line continues on the next one: an odd run of
/// backslashes before trailing blanks, after the comment is cut.
fn continues(line: &str) -> bool {
    let bytes = uncommented(line);
    bytes[..trimmed_len(bytes)].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

impl FileText {
    fn new(path: &Path, text: &str) -> Self {
        let lines: Vec<String> = text.split('\n').map(str::to_string).collect();
        let mut groups = Vec::with_capacity(lines.len());
        let mut i = 0;
        while i < lines.len() {
            let first = i;
            while i + 1 < lines.len() && continues(&lines[i]) {
                i += 1;
            }
            for _ in first..=i {
                groups.push((first + 1, i + 1));
            }
            i += 1;
        }
        FileText { path: path.to_path_buf(), lines, groups }
    }

    /// The bytes of the logical line of physical lines `first..=last`
    /// (continuations joined, comments and escapes removed), each with its
    /// physical line and byte offset.
    fn logical(&self, first: usize, last: usize) -> Vec<(u8, usize, usize)> {
        let mut raw = Vec::new();
        for n in first..=last {
            let line = self.lines.get(n - 1).map_or("", String::as_str);
            let bytes = uncommented(line);
            let kept = if continues(line) { &bytes[..trimmed_len(bytes) - 1] } else { bytes };
            raw.extend(kept.iter().enumerate().map(|(i, &b)| (b, n, i)));
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if raw[i].0 == b'\\' {
                i += 1;
                if i >= raw.len() {
                    break;
                }
            }
            out.push(raw[i]);
            i += 1;
        }
        out
    }
}

/// For each line of a text made of copied lines: the file (index) and
/// line it was copied from.
type LineMap = Vec<(usize, usize)>;

/// What a logical line is.
enum Kind {
    Blank,
    Include(String),
    /// A `NodeName=` line: its value, and where that is (physical line,
    /// byte range) when on one line.
    Node(String, Option<(usize, usize, usize)>),
    /// A global `AutoDetect=` line: where its value is.
    AutoDetect(Option<(usize, usize, usize)>),
    Global,
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

fn classify(bytes: &[(u8, usize, usize)]) -> Kind {
    let b: Vec<u8> = bytes.iter().map(|x| x.0).collect();
    if b.iter().all(|&c| is_c_space(c)) {
        return Kind::Blank;
    }
    const WORD: &[u8] = b"include";
    if b.len() > WORD.len() && b[..WORD.len()].eq_ignore_ascii_case(WORD) && is_c_space(b[WORD.len()]) {
        let start = WORD.len() + b[WORD.len()..].iter().take_while(|&&c| is_c_space(c)).count();
        let end = start + b[start..].iter().take_while(|&&c| !is_c_space(c)).count();
        return Kind::Include(String::from_utf8_lossy(&b[start..end]).into_owned());
    }
    let skip = |i: usize| i + b[i.min(b.len())..].iter().take_while(|&&c| is_c_space(c)).count();
    let key_start = skip(0);
    let key_end = key_start + b[key_start..].iter().take_while(|&&c| is_key_byte(c)).count();
    let mut at = skip(key_end);
    if at + 1 < b.len() && matches!(b[at], b'+' | b'-' | b'*' | b'/') && b[at + 1] == b'=' {
        at += 1;
    }
    let key = &b[key_start..key_end];
    let autodetect = key.eq_ignore_ascii_case(b"AutoDetect");
    if !(key.eq_ignore_ascii_case(b"NodeName") || autodetect) || b.get(at) != Some(&b'=') {
        return Kind::Global;
    }
    let value_start = skip(at + 1);
    let (start, end) = match b.get(value_start) {
        Some(b'"') => match b[value_start + 1..].iter().position(|&c| c == b'"') {
            Some(close) if b.get(value_start + close + 2).map_or(true, |&c| is_c_space(c)) => (value_start + 1, value_start + 1 + close),
            _ => (value_start, value_start + b[value_start..].iter().take_while(|&&c| !is_c_space(c)).count()),
        },
        _ => (value_start, value_start + b[value_start..].iter().take_while(|&&c| !is_c_space(c)).count()),
    };
    let value = String::from_utf8_lossy(&b[start..end]).into_owned();
    // Where the value is written, when it is one unescaped run on one line.
    let span = (end > start)
        .then(|| (bytes[start], bytes[end - 1]))
        .and_then(|(first, last)| (first.1 == last.1 && last.2 + 1 - first.2 == end - start).then_some((first.1, first.2, last.2 + 1)));
    if autodetect {
        Kind::AutoDetect(span)
    } else {
        Kind::Node(value, span)
    }
}

/// One logical line of gres.conf (includes resolved).
struct Logical {
    file: usize,
    first: usize,
    last: usize,
    /// The `NodeName=` value of a node line; `None` for a global line.
    hosts: Option<String>,
    /// Where that value is written (physical line, byte range).
    hosts_span: Option<(usize, usize, usize)>,
}

/// An indexed gres.conf.
pub struct Sliced {
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
pub enum SliceError {
    /// Syntax errors of lines (slurmd refuses the file on every node).
    Syntax(Vec<ConfError>),
    /// What stops slurmd on this node.
    Node(ConfError),
}

impl Sliced {
    /// Index `path` and the files it includes.  Files that cannot be read
    /// (or are not regular files, or are too large) and includes that
    /// cannot be followed are left out (the library's reader reports them).
    pub fn load(path: &Path) -> Sliced {
        let mut sliced =
            Sliced { main: path.to_path_buf(), files: Vec::new(), lines: Vec::new(), always: Vec::new(), global_autodetect: None, has_includes: false };
        sliced.scan(path);
        sliced.always =
            sliced.lines.iter().enumerate().filter(|(_, l)| l.hosts.as_ref().map_or(true, |h| hostlist::expand(h).is_err())).map(|(i, _)| i).collect();
        sliced
    }

    /// Read `path` (within what is `left` of [`MAX_TOTAL_LEN`]): its index
    /// in `files`.
    fn read(&mut self, path: &Path, left: &mut u64) -> Option<usize> {
        match read_bounded(path, MAX_FILE_LEN.min(*left)) {
            Ok(bytes) => {
                *left -= bytes.len() as u64;
                self.files.push(FileText::new(path, &String::from_utf8_lossy(&bytes)));
                Some(self.files.len() - 1)
            }
            Err(_) => {
                self.has_includes = true;
                None
            }
        }
    }

    /// Index `path` and, in place of each `include`, the file it names.
    /// The chain of files being read is a list (file, next physical line),
    /// not the call stack: it may be as deep as slurmd follows.
    fn scan(&mut self, path: &Path) {
        let mut left = MAX_TOTAL_LEN;
        let mut open: Vec<(usize, usize)> = self.read(path, &mut left).map(|f| (f, 1)).into_iter().collect();
        while let Some(&(f, n)) = open.last() {
            if n > self.files[f].lines.len() {
                open.pop();
                continue;
            }
            let (first, last) = self.files[f].groups[n - 1];
            let top = open.len() - 1;
            open[top].1 = last + 1;
            let logical = self.files[f].logical(first, last);
            match classify(&logical) {
                Kind::Blank => {}
                Kind::Include(target) => {
                    self.has_includes = true;
                    let included = include_path(&self.files[f].path, &target);
                    let in_chain = open.iter().any(|&(g, _)| self.files[g].path == included);
                    if !target.contains("%c") && !in_chain && open.len() <= MAX_INCLUDE_DEPTH {
                        if let Some(g) = self.read(&included, &mut left) {
                            open.push((g, 1));
                        }
                    }
                }
                Kind::Node(hosts, hosts_span) => self.lines.push(Logical { file: f, first, last, hosts: Some(hosts), hosts_span }),
                Kind::AutoDetect(span) => {
                    self.global_autodetect =
                        span.map(|(line, start, end)| Location { path: self.files[f].path.clone(), line, column: start + 1, len: end - start });
                    self.lines.push(Logical { file: f, first, last, hosts: None, hosts_span: None });
                }
                Kind::Global => self.lines.push(Logical { file: f, first, last, hosts: None, hosts_span: None }),
            }
        }
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
            for n in l.first..=l.last {
                text.push_str(f.lines.get(n - 1).map_or("", String::as_str));
                text.push('\n');
                map.push((l.file, n));
            }
            if continues(f.lines.get(l.last - 1).map_or("", String::as_str)) {
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
        for n in l.first..=l.last {
            let line = f.lines.get(n - 1).map_or("", String::as_str);
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
    /// lines are `node_lines` (from [`Sliced::node_lines`]).
    pub fn node_config(&self, node_lines: &[usize], ctx: &NodeContext<'_>) -> Result<NodeGresConf, SliceError> {
        let (conf, map) = self.parse(&self.chosen(node_lines)).map_err(SliceError::Syntax)?;
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
                Err(SliceError::Node(e))
            }
        }
    }

    /// Where the global `AutoDetect=` value is, if there is one.
    pub fn global_autodetect(&self) -> Option<&Location> {
        self.global_autodetect.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_gpu_gres::core::gres_conf::syntax::MemReader;

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tmp(name: &str) -> Tmp {
        let dir = std::env::temp_dir().join(format!("gres-rs-sliced-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tmp(dir)
    }

    #[test]
    fn continuation_rules() {
        assert!(continues("Name=gpu \\"));
        assert!(continues("Name=gpu \\  "));
        assert!(!continues("Name=gpu \\\\"));
        assert!(!continues("Name=gpu # \\"));
        assert!(continues("Name=gpu \\# x \\"));
        assert!(!continues("Name=gpu"));
        let f = FileText::new(Path::new("/x"), "a\\\nb\nc\\\n\\\nd\n");
        assert_eq!(f.groups, vec![(1, 2), (1, 2), (3, 5), (3, 5), (3, 5), (6, 6)]);
    }

    /// The sliced evaluation gives what the whole file gives, with the
    /// same places.
    #[test]
    fn same_as_whole_file() {
        let dir = tmp("same");
        let main = dir.0.join("gres.conf");
        let inc = dir.0.join("more.conf");
        let text = "# test\nAutoDetect=off\nNodeName=n[1-2] Name=gpu Type=a File=/dev/nvidia[0-1] \\\n   Cores=0-1\nName=mps Count=100\ninclude more.conf\nNodeName=n3 Name=gpu Type=b File=/dev/nvidia0\nNodeName=n[2-3] Name=gpu Type=a File=/dev/nvidia3\nNodeName=n3 Name=gpu Type=c File=/dev/nvidia4 Flags=amd_gpu_env\n";
        std::fs::write(&main, text).unwrap();
        std::fs::write(&inc, "NodeName=n2 Name=shard Count=8\n  NodeName=n9 Name=gpu File=/dev/x\n").unwrap();
        let sliced = Sliced::load(&main);
        assert_eq!(sliced.len(), 8);
        let full = GresConf::load(&main).unwrap();
        let wanted: HashSet<&str> = ["n1", "n2", "n3", "n4"].into_iter().collect();
        let index = sliced.node_lines(&wanted);
        assert_eq!(index.get("n2").map(Vec::len), Some(3));
        assert!(!index.contains_key("n4"));
        for node in ["n1", "n2", "n3", "n4"] {
            let ctx = NodeContext::new(node, 8);
            let got = sliced.node_config(index.get(node).map_or(&[][..], Vec::as_slice), &ctx);
            let want = match full.node_config(&ctx) {
                Ok(want) => want,
                Err(e) => {
                    assert_eq!(got, Err(SliceError::Node(e)), "{node}");
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
        let Err(SliceError::Node(n3)) = sliced.node_config(&index["n3"], &NodeContext::new("n3", 8)) else { panic!("n3") };
        assert_eq!((n3.location.line, n3.location.column), (9, 53));
        let n2 = sliced.node_config(&index["n2"], &NodeContext::new("n2", 8)).unwrap();
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
        let sliced = Sliced::load(&main);
        let wanted: HashSet<&str> = ["n1"].into_iter().collect();
        let index = sliced.node_lines(&wanted);
        let e = sliced.node_config(&index["n1"], &NodeContext::new("n1", 4)).unwrap_err();
        let full = GresConf::load(&main).unwrap().node_config(&NodeContext::new("n1", 4)).unwrap_err();
        let SliceError::Node(e) = e else { panic!("{e:?}") };
        assert_eq!(e, full);
        assert_eq!(e.location.line, 4);
        let _ = MemReader::new();
    }

    fn kind(text: &str) -> Kind {
        let f = FileText::new(Path::new("/x"), text);
        let (first, last) = f.groups[0];
        classify(&f.logical(first, last))
    }

    #[test]
    fn line_kinds() {
        assert!(matches!(kind("   # only a comment"), Kind::Blank));
        assert!(matches!(kind("include other.conf"), Kind::Include(t) if t == "other.conf"));
        assert!(matches!(kind("Name=gpu File=/dev/nvidia0"), Kind::Global));
        assert!(matches!(kind("AutoDetect=nvml"), Kind::AutoDetect(Some((1, 11, 15)))));
        assert!(matches!(kind("nodename = n[1-2] Name=gpu"), Kind::Node(h, Some((1, 11, 17))) if h == "n[1-2]"));
        assert!(matches!(kind("NodeName=\"n1\" Name=gpu"), Kind::Node(h, Some((1, 10, 12))) if h == "n1"));
        // Escapes and continuations: the value is known, its place is not
        // one run of the file.
        assert!(matches!(kind("NodeName=n\\1 Name=gpu"), Kind::Node(h, None) if h == "n1"));
        assert!(matches!(kind("NodeName=n1\\\n Name=gpu"), Kind::Node(h, Some((1, 9, 11))) if h == "n1"));
        assert!(matches!(kind("NodeName=n1\\\n\\\nName=gpu"), Kind::Node(h, _) if h == "n1Name=gpu"));
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
        let sliced = Sliced::load(&main);
        let wanted: HashSet<&str> = ["a1", "a2", "b1", "c1"].into_iter().collect();
        let index = sliced.node_lines(&wanted);
        let key = |n: &str| sliced.content_key(&index[n]).unwrap();
        assert_eq!(key("a1"), key("a2"));
        assert_eq!(key("a1"), key("b1"));
        assert_ne!(key("a1"), key("c1"));
        assert!(key("a1").contains("Name=mps Count=4"));
        assert_eq!(sliced.global_autodetect(), None);
    }

    #[test]
    fn syntax_of_lines_no_node_reads() {
        let dir = tmp("syntax");
        let main = dir.0.join("gres.conf");
        std::fs::write(&main, "NodeName=a1 Name=gpu File=/dev/nvidia0\nNodeName=b[1-9] Name=gpu Fiel=/dev/nvidia0\nNodeName=a1 Name=gpu Count=1 Count=2\n")
            .unwrap();
        let sliced = Sliced::load(&main);
        assert!(!sliced.has_includes);
        assert_eq!(sliced.line_key(1), "NodeName= Name=gpu Fiel=/dev/nvidia0\n");
        let errors = sliced.check_lines(&[1]).unwrap_err();
        assert_eq!((errors[0].location.line, errors[0].location.column), (2, 26));
        assert_eq!(errors[0].suggestion.as_deref(), Some("File"));
        let remarks = sliced.check_lines(&[2]).unwrap();
        assert_eq!(remarks[0].location.as_ref().map(|l| (l.line, l.column)), Some((3, 30)));
        let wanted: HashSet<&str> = ["b1"].into_iter().collect();
        let index = sliced.node_lines(&wanted);
        assert!(matches!(sliced.node_config(&index["b1"], &NodeContext::new("b1", 4)), Err(SliceError::Syntax(e)) if e[0].location.line == 2));
    }

    #[test]
    fn unreadable_hostlists_apply_everywhere() {
        let dir = tmp("bad");
        let main = dir.0.join("gres.conf");
        std::fs::write(&main, "NodeName=n[1-x] Name=gpu File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/dev/nvidia1\n").unwrap();
        let sliced = Sliced::load(&main);
        let wanted: HashSet<&str> = ["n1"].into_iter().collect();
        let index = sliced.node_lines(&wanted);
        let got = sliced.node_config(&index["n1"], &NodeContext::new("n1", 4)).unwrap();
        let want = GresConf::load(&main).unwrap().node_config(&NodeContext::new("n1", 4)).unwrap();
        assert_eq!(got, want);
    }
}
