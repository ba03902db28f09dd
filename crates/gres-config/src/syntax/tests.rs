use super::include::slurmd_reading;
use super::*;
use gres_core::bounded_read::FileKind;
use gres_core::model::LogLevel;
use std::path::{Path, PathBuf};

#[derive(Default)]
struct Collect {
    lines: Vec<ParsedLine>,
    remarks: Vec<Diagnostic>,
}

impl LineSink for Collect {
    fn line(&mut self, line: ParsedLine, _errors: &mut Vec<ConfError>) {
        self.lines.push(line);
    }
    fn remark(&mut self, remark: Diagnostic) {
        self.remarks.push(remark);
    }
}

fn parse(text: &str) -> Vec<ParsedLine> {
    let mut sink = Collect::default();
    parse_text(&MemReader::new(), Path::new("/etc/x.conf"), text, &mut sink).unwrap();
    sink.lines
}

fn kv(line: &ParsedLine) -> Vec<(&str, &str)> {
    line.pairs.iter().map(|p| (p.key.as_str(), p.value.value.as_str())).collect()
}

#[test]
fn pairs_comments_and_quotes() {
    let lines = parse("# header\n\nName=gpu  File = /dev/nvidia0 # trailing\n  Reason=\"two words\" X=\"a\"b\n");
    assert_eq!(lines.len(), 2);
    assert_eq!(kv(&lines[0]), vec![("Name", "gpu"), ("File", "/dev/nvidia0")]);
    assert_eq!(lines[0].rest, None);
    assert_eq!(kv(&lines[1]), vec![("Reason", "two words"), ("X", "\"a\"b")]);
    assert_eq!(lines[1].location.line, 4);
    assert_eq!(lines[1].location.column, 3);
}

#[test]
fn locations_point_at_keys_and_values() {
    let lines = parse("Name=gpu Type=a100\n");
    let p = &lines[0].pairs[1];
    assert_eq!((p.key_location.line, p.key_location.column, p.key_location.len), (1, 10, 4));
    assert_eq!((p.value.location.column, p.value.location.len), (15, 4));
}

#[test]
fn continuation_joins_lines_and_keeps_origin() {
    let lines = parse("Name=gpu \\\n  File=/dev/nvidia0 \\  \nType=x\nCount=1\n");
    assert_eq!(lines.len(), 2);
    assert_eq!(kv(&lines[0]), vec![("Name", "gpu"), ("File", "/dev/nvidia0"), ("Type", "x")]);
    assert_eq!(lines[0].pairs[1].key_location.line, 2);
    assert_eq!(lines[0].pairs[1].key_location.column, 3);
    assert_eq!(lines[0].pairs[2].key_location.line, 3);
    assert_eq!(lines[1].location.line, 4);
}

#[test]
fn even_backslashes_do_not_continue_and_unescape() {
    let lines = parse("A=x\\\\\nB=y\\#z # c\n");
    assert_eq!(kv(&lines[0]), vec![("A", "x\\")]);
    assert_eq!(kv(&lines[1]), vec![("B", "y#z")]);
}

#[test]
fn comment_hides_continuation_and_crlf_is_blank() {
    let lines = parse("A=1 # not continued \\\r\nB=2\r\n");
    assert_eq!(lines.len(), 2);
    assert_eq!(kv(&lines[1]), vec![("B", "2")]);
    assert_eq!(lines[1].rest, None);
}

#[test]
fn operators_and_leftovers() {
    let lines = parse("Count+=4 junk here\nName=\nfoo\n");
    assert_eq!(lines[0].pairs[0].operator, Some('+'));
    assert_eq!(lines[0].rest.as_ref().unwrap().value, "junk here");
    assert_eq!(lines[0].rest.as_ref().unwrap().location.column, 10);
    assert!(lines[1].pairs.is_empty());
    assert_eq!(lines[1].rest.as_ref().unwrap().value, "Name=");
    assert_eq!(lines[2].rest.as_ref().unwrap().value, "foo");
}

#[test]
fn nul_truncates_a_line() {
    let lines = parse("A=1\0B=2\nC=3\n");
    assert_eq!(kv(&lines[0]), vec![("A", "1")]);
    assert_eq!(kv(&lines[1]), vec![("C", "3")]);
}

#[test]
fn includes_are_followed_relative_to_the_includer() {
    let reader = MemReader::new().with("/etc/slurm/main.conf", "A=1\nInclude sub.conf\nB=2\n").with("/etc/slurm/sub.conf", "C=3\n");
    let mut sink = Collect::default();
    parse_file(&reader, Path::new("/etc/slurm/main.conf"), &mut sink).unwrap();
    let keys: Vec<_> = sink.lines.iter().map(|l| l.pairs[0].key.clone()).collect();
    assert_eq!(keys, ["A", "C", "B"]);
    assert_eq!(sink.lines[1].location.path, Path::new("/etc/slurm/sub.conf"));
}

#[test]
fn include_errors() {
    let reader = MemReader::new()
        .with("/a.conf", "include /b.conf\nINCLUDE missing.conf\ninclude /a.conf\ninclude x y\ninclude %c.conf\n")
        .with("/b.conf", "include /a.conf\n");
    let mut sink = Collect::default();
    let errs = parse_file(&reader, Path::new("/a.conf"), &mut sink).unwrap_err().0;
    let kinds: Vec<_> = errs.iter().map(|e| (e.kind, e.location.path.clone(), e.location.line)).collect();
    assert_eq!(
        kinds,
        vec![
            (ErrorKind::Include, PathBuf::from("/b.conf"), 1),
            (ErrorKind::Io, PathBuf::from("/a.conf"), 2),
            (ErrorKind::Include, PathBuf::from("/a.conf"), 3),
            (ErrorKind::Syntax, PathBuf::from("/a.conf"), 4),
            (ErrorKind::Include, PathBuf::from("/a.conf"), 5),
        ]
    );
    assert!(errs[1].message.contains("/missing.conf"));
}

#[test]
fn unreadable_file_is_an_io_error() {
    let mut sink = Collect::default();
    let e = parse_file(&MemReader::new(), Path::new("/nope"), &mut sink).unwrap_err();
    assert_eq!(e.0[0].kind, ErrorKind::Io);
    assert_eq!(e.0[0].location.line, 0);
    assert!(e.to_string().starts_with("/nope: unable to read"));
}

#[test]
fn includes_slurmd_reads_as_empty_are_warnings() {
    let reader = MemReader::new()
        .with("/etc/a.conf", "A=1\ninclude /dev/zero\ninclude sub\ninclude pipe\nB=2\n")
        .with_special("/dev/zero", FileKind::CharDevice)
        .with_special("/etc/sub", FileKind::Directory)
        .with_special("/etc/pipe", FileKind::Fifo);
    let mut sink = Collect::default();
    parse_file(&reader, Path::new("/etc/a.conf"), &mut sink).unwrap();
    assert_eq!(sink.lines.len(), 2);
    let remarks: Vec<_> = sink.remarks.iter().map(|d| (d.level, d.location.as_ref().unwrap().line, d.message.as_str())).collect();
    assert_eq!(
        remarks,
        [
            (LogLevel::Info, 2, "WARNING: Include /dev/zero: a character device; slurmd reads it as an empty file"),
            (LogLevel::Info, 3, "WARNING: Include /etc/sub: a directory; slurmd reads it as an empty file"),
            (LogLevel::Info, 4, "WARNING: Include /etc/pipe: a FIFO; slurmd reads it as an empty file"),
        ]
    );
    // The file itself.
    let mut sink = Collect::default();
    parse_file(&MemReader::new().with_special("/etc/a.conf", FileKind::CharDevice), Path::new("/etc/a.conf"), &mut sink).unwrap();
    assert_eq!(sink.remarks[0].message, "WARNING: /etc/a.conf: a character device; slurmd reads it as an empty file");
    assert_eq!(sink.remarks[0].location, Some(Location::file(Path::new("/etc/a.conf"))));
}

#[test]
fn include_over_the_bound_is_an_error_naming_it() {
    let big = vec![b'#'; MAX_FILE_LEN as usize + 1];
    let reader = MemReader::new().with("/a.conf", "include /big.conf\nA=1\n").with("/big.conf", big.clone());
    let mut sink = Collect::default();
    // slurmd reads it, so the parse goes on; the file is not checked.
    parse_file(&reader, Path::new("/a.conf"), &mut sink).unwrap();
    assert_eq!(sink.lines.len(), 1);
    assert_eq!(sink.remarks.len(), 1);
    assert_eq!((sink.remarks[0].level, sink.remarks[0].location.as_ref().unwrap().line), (LogLevel::Error, 1));
    assert_eq!(
        sink.remarks[0].message,
        "Include /big.conf not checked: 16777217 bytes, more than the 16777216 read (slurmd allocates a 16777218-byte line buffer and reads it)"
    );
    // The file itself: nothing to check.
    let e = parse_file(&MemReader::new().with("/big.conf", big), Path::new("/big.conf"), &mut Collect::default()).unwrap_err();
    assert_eq!((e.0[0].kind, e.0[0].location.line), (ErrorKind::Io, 0));
    assert!(e.0[0].message.starts_with("\"/big.conf\" not read: 16777217 bytes"), "{}", e.0[0].message);
}

#[test]
fn how_slurmd_reads_a_large_file() {
    assert_eq!(slurmd_reading(100), "slurmd allocates a 101-byte line buffer and reads it");
    assert_eq!(
        slurmd_reading(10 << 30),
        "slurmd allocates a 10737418241-byte line buffer, whose size wraps to -2147483647 as an int: it reads the file as empty"
    );
    assert_eq!(
        slurmd_reading((4 << 30) + 99),
        "slurmd allocates a 4294967396-byte line buffer, whose size wraps to 100 as an int: it reads lines of at most 99 bytes"
    );
}

#[test]
fn all_files_together_are_bounded() {
    // Five includes of a file just under the bound: the fifth would
    // take the whole past MAX_TOTAL_LEN.
    let part = vec![b'#'; MAX_FILE_LEN as usize - 1024];
    let main = "include /p.conf\n".repeat(5);
    let reader = MemReader::new().with("/a.conf", main).with("/p.conf", part);
    let mut sink = Collect::default();
    parse_file(&reader, Path::new("/a.conf"), &mut sink).unwrap();
    assert_eq!(sink.remarks.len(), 1, "{:?}", sink.remarks);
    assert_eq!((sink.remarks[0].level, sink.remarks[0].location.as_ref().unwrap().line), (LogLevel::Error, 5));
    assert_eq!(
        sink.remarks[0].message,
        format!("Include /p.conf not checked: reading it would take the files of this configuration past {MAX_TOTAL_LEN} bytes in all")
    );
}

/// `/c0.conf` including `/c1.conf` ... including `/c<depth>.conf`.
fn chain(depth: usize) -> MemReader {
    (0..=depth).fold(MemReader::new(), |r, i| {
        let text = if i < depth { format!("A{i}=1\ninclude /c{}.conf\n", i + 1) } else { format!("A{i}=1\n") };
        r.with(format!("/c{i}.conf"), text)
    })
}

#[test]
fn include_chains_as_deep_as_slurmd_follows() {
    for depth in [100, MAX_INCLUDE_DEPTH] {
        let mut sink = Collect::default();
        parse_file(&chain(depth), Path::new("/c0.conf"), &mut sink).unwrap();
        assert_eq!(sink.lines.len(), depth + 1);
    }
    let mut sink = Collect::default();
    let errs = parse_file(&chain(MAX_INCLUDE_DEPTH + 1), Path::new("/c0.conf"), &mut sink).unwrap_err().0;
    assert_eq!(sink.lines.len(), MAX_INCLUDE_DEPTH + 1);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].kind, ErrorKind::Include);
    assert_eq!(
        errs[0].message,
        "Include of \"/c1001.conf\" nests deeper than 1000 files; slurmd keeps every file of the chain open and fails once it cannot \
         open more (1,020 deep with 1,024 open files)"
    );
}

/// What a [`LineVisitor`] sees: files, lines with their physical
/// lines, includes.
#[derive(Default)]
struct Raw {
    events: Vec<String>,
    texts: Vec<(PathBuf, String)>,
}

impl LineVisitor for Raw {
    fn file(&mut self, path: &Path, text: &str) {
        self.events.push(format!("file {}", path.display()));
        self.texts.push((path.to_path_buf(), text.to_string()));
    }
    fn line(&mut self, line: &RawLine<'_>, _errors: &mut Vec<ConfError>) {
        let text = &self.texts.iter().rev().find(|(p, _)| p == line.path).unwrap().1[line.range.clone()];
        let lead = line.lead_key().map(|k| format!("{}{}={} {:?}", k.key, k.operator.map(String::from).unwrap_or_default(), k.value, k.value_span));
        self.events.push(format!("{}:{}-{}{} {text:?} {lead:?}", line.path.display(), line.first, line.last, if line.continued { " cut" } else { "" }));
    }
    fn include(&mut self, line: &RawLine<'_>) {
        self.events.push(format!("include {}:{}", line.path.display(), line.first));
    }
    fn remark(&mut self, remark: Diagnostic) {
        self.events.push(format!("remark {}", remark.message));
    }
}

#[test]
fn raw_lines_as_written() {
    let reader = MemReader::new()
        .with("/etc/a.conf", "# c\n\nNodeName=\"n1\" X=1\\\n  Y=2\ninclude b.conf\nK+= v\\w\nEmpty= \ninclude x y\nLast=1 \\")
        .with("/etc/b.conf", "  B=\\\n2\n");
    let mut raw = Raw::default();
    let errors = visit_file(&reader, Path::new("/etc/a.conf"), &mut raw).unwrap_err();
    assert_eq!(
        raw.events,
        [
            "file /etc/a.conf",
            "/etc/a.conf:3-4 \"NodeName=\\\"n1\\\" X=1\\\\\\n  Y=2\" Some(\"NodeName=n1 Some((3, 10, 12))\")",
            "include /etc/a.conf:5",
            "file /etc/b.conf",
            "/etc/b.conf:1-2 \"  B=\\\\\\n2\" Some(\"B=2 Some((2, 0, 1))\")",
            "/etc/a.conf:6-6 \"K+= v\\\\w\" Some(\"K+=vw None\")",
            "/etc/a.conf:7-7 \"Empty= \" Some(\"Empty= None\")",
            "include /etc/a.conf:8",
            "/etc/a.conf:9-9 cut \"Last=1 \\\\\" Some(\"Last=1 Some((9, 5, 6))\")",
        ]
    );
    // The walk's errors are those of parse_file.
    assert_eq!(errors, parse_file(&reader, Path::new("/etc/a.conf"), &mut Collect::default()).unwrap_err());
    assert_eq!(errors.0.len(), 1);
    // A file read as empty is a remark, as for parse_file.
    let reader = MemReader::new().with_special("/etc/a.conf", FileKind::Fifo);
    let mut raw = Raw::default();
    visit_file(&reader, Path::new("/etc/a.conf"), &mut raw).unwrap();
    assert_eq!(raw.events, ["remark WARNING: /etc/a.conf: a FIFO; slurmd reads it as an empty file"]);
}

#[test]
fn garbage_never_panics() {
    for text in ["\\", "\"", "=\"", "a=\"", "a=\"\"", "\\\n\\\n", "include", "include ", "include\t", "a\u{e9}=b", "x=\u{e9}\\\u{e9}"] {
        let mut sink = Collect::default();
        let _ = parse_text(&MemReader::new(), Path::new("x"), text, &mut sink);
    }
}
