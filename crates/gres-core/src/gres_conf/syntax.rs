//! The line syntax Slurm's configuration files share (slurm.conf, gres.conf),
//! as Slurm's generic configuration parser reads it:
//!
//! - a `#` starts a comment unless escaped as `\#`;
//! - an odd number of backslashes at the end of a line (trailing blanks
//!   allowed) continues the line on the next one;
//! - after that, every backslash escapes the next character (`\\` is one
//!   backslash);
//! - a line starting with `include` (any case) and a blank includes a file,
//!   relative to the including file's directory;
//! - otherwise a line is `key=value` pairs separated by blanks: keys are made
//!   of letters, digits, `_` and `.`, blanks may surround `=`, a value is
//!   either `"quoted, with blanks"` or a run of non-blank characters, and an
//!   operator character (`+ - * /`) may stand right before `=`.
//!
//! Which keys exist and which keys may share a line is the business of each
//! file's own module; this one only cuts lines into located pairs.  Every
//! error carries the file, line and byte column of the fault.
//!
//! Files are read as slurmd's `s_p_parse_file()` reads them, within bounds
//! (see [`crate::files`]): what is not a regular file (a device, a
//! FIFO: size 0 for `stat()`; a directory: `fgets()` fails) slurmd reads as
//! an empty file, and so does this reader, with a warning that names it.
//! A regular file is read up to [`MAX_FILE_LEN`] bytes, and all the files
//! of one configuration up to [`MAX_TOTAL_LEN`].  slurmd reads a larger
//! one (into a line buffer of the file's size, whose size wraps as an
//! `int` from 2 GiB on): an include past the bound is an error remark
//! (not checked, the parse goes on), the main file past it an error.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use thiserror::Error;

use crate::files::{read_bounded, FileKind, ReadError, MAX_FILE_LEN};
use crate::model::{LogLevel, LogLine};
use crate::text::{closest_key, is_c_space};

/// Deepest chain of `include`s followed.  slurmd has no limit: each level
/// keeps its file open, so a chain fails at the limit of open files
/// (`slurmd -G` with 1,024: 1,019 includes deep is read, 1,020 fails), and
/// a cycle recurses until then.  (Debian's slurmd.service sets
/// `LimitNOFILE=131072`, which lets slurmd go deeper than this.)
pub const MAX_INCLUDE_DEPTH: usize = 1000;

/// The most read of all the files of one configuration (the file and what
/// it includes, each include counted each time it is read).
pub const MAX_TOTAL_LEN: u64 = 4 * MAX_FILE_LEN;

/// A place in a configuration file: 1-based line and byte column, and the
/// number of bytes of that line the fault covers.  `line == 0` means the
/// whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Location {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub len: usize,
}

impl Location {
    /// The file as a whole (an unreadable file, for one).
    pub fn file(path: &Path) -> Self {
        Location { path: path.to_path_buf(), line: 0, column: 0, len: 0 }
    }
    /// A whole line, without column information.
    pub fn line(path: &Path, line: usize) -> Self {
        Location { path: path.to_path_buf(), line, column: 1, len: 0 }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.path.display())
        } else {
            write!(f, "{}:{}:{}", self.path.display(), self.line, self.column)
        }
    }
}

/// What kind of fault a [`ConfError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file (or an included one) could not be read.
    Io,
    /// Text that is not `key=value` pairs, or left over after them.
    Syntax,
    /// A key the file does not know, or one not allowed where it stands.
    UnknownKey,
    /// An `include` that cannot be followed (cycle, depth, bad name).
    Include,
    /// A value the file's rules reject: what the stock daemon stops on.
    Invalid,
}

/// One error in a configuration file.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{location}: {message}{}", suggestion_suffix(.suggestion))]
pub struct ConfError {
    pub kind: ErrorKind,
    pub location: Location,
    pub message: String,
    /// For an unknown key, the closest valid one.
    pub suggestion: Option<String>,
}

fn suggestion_suffix(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean \"{s}\"?)"),
        None => String::new(),
    }
}

impl ConfError {
    pub fn new(kind: ErrorKind, location: Location, message: impl Into<String>) -> Self {
        ConfError { kind, location, message: message.into(), suggestion: None }
    }
}

/// Every error found in a file (parsing goes on after an error, like
/// Slurm's, so that all of them are reported at once).  Never empty.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{}", join_errors(.0))]
pub struct ConfErrors(pub Vec<ConfError>);

fn join_errors(errors: &[ConfError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

impl ConfErrors {
    pub fn first(&self) -> Option<&ConfError> {
        self.0.first()
    }
}

impl From<ConfError> for ConfErrors {
    fn from(e: ConfError) -> Self {
        ConfErrors(vec![e])
    }
}

/// A remark that does not stop the daemon (Slurm logs it and goes on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub level: LogLevel,
    pub location: Option<Location>,
    pub message: String,
    /// The feature of a later release the remark is about (a value this
    /// release does not know).
    pub feature: Option<crate::behaviour::Feature>,
    /// A replacement for the word at `location` ("did you mean").
    pub suggestion: Option<String>,
}

impl Diagnostic {
    pub fn new(level: LogLevel, location: Option<Location>, message: impl Into<String>) -> Self {
        Diagnostic { level, location, message: message.into(), feature: None, suggestion: None }
    }
    /// The message as the plugin logs it: the stock wording, prefixed with
    /// the place when known.
    pub fn to_log_line(&self) -> LogLine {
        match &self.location {
            Some(loc) => LogLine::new(self.level, format!("{loc}: {}", self.message)),
            None => LogLine::new(self.level, self.message.clone()),
        }
    }
}

/// A value with the place it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spanned {
    pub value: String,
    pub location: Location,
}

/// One `key=value` of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub key: String,
    pub key_location: Location,
    /// `+`, `-`, `*` or `/` written right before `=`.
    pub operator: Option<char>,
    pub value: Spanned,
}

/// A logical line (continuations joined, comment and escapes removed) cut
/// into pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedLine {
    /// The line's first non-blank character.
    pub location: Location,
    /// The logical line's text, trimmed (for messages).
    pub text: String,
    pub pairs: Vec<Pair>,
    /// Text after the last pair that is not a pair, if any.
    pub rest: Option<Spanned>,
}

impl ParsedLine {
    /// The line's first pair, or the error for a line that has none (its
    /// leftover text, or "not a key=value line").
    pub fn first_pair(&self) -> Result<&Pair, ConfError> {
        self.pairs.first().ok_or_else(|| {
            self.rest
                .as_ref()
                .map(leftover_error)
                .unwrap_or_else(|| ConfError::new(ErrorKind::Syntax, self.location.clone(), "Parse error: not a key=value line"))
        })
    }
}

/// Where file contents come from: the file system, or memory in tests and
/// fuzzing.
pub trait ConfReader {
    /// The contents of `path`, at most `limit` bytes of them, as
    /// [`read_bounded`] reads them.
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError>;
}

/// Reads files from the file system ([`read_bounded`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct FsReader;

impl ConfReader for FsReader {
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
        read_bounded(path, limit)
    }
}

/// Files held in memory, by path.
#[derive(Clone, Debug, Default)]
pub struct MemReader {
    files: HashMap<PathBuf, Vec<u8>>,
    special: HashMap<PathBuf, FileKind>,
}

impl MemReader {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn with(mut self, path: impl Into<PathBuf>, contents: impl Into<Vec<u8>>) -> Self {
        self.files.insert(path.into(), contents.into());
        self
    }
    /// `path` as a file that is not a regular one (a device, a directory).
    pub fn with_special(mut self, path: impl Into<PathBuf>, kind: FileKind) -> Self {
        self.special.insert(path.into(), kind);
        self
    }
}

impl ConfReader for MemReader {
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
        if let Some(&kind) = self.special.get(path) {
            return Err(ReadError::NotRegular(kind));
        }
        let bytes = self.files.get(path).ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))?;
        if bytes.len() as u64 > limit {
            return Err(ReadError::TooLarge { size: Some(bytes.len() as u64), limit });
        }
        Ok(bytes.clone())
    }
}

/// What a file's module does with each line.
pub trait LineSink {
    /// One logical line that is not an `include`.  Errors go to `errors`;
    /// parsing continues with the next line.
    fn line(&mut self, line: ParsedLine, errors: &mut Vec<ConfError>);

    /// A remark on a file read (one slurmd reads as empty): a warning that
    /// does not stop the reading.
    fn remark(&mut self, remark: Diagnostic);

    /// The file name an `include` line names, after any expansion the file
    /// supports (`%c` in slurm.conf).  The default refuses `%c`, as
    /// Slurm does where no ClusterName is known.
    fn include_target(&mut self, raw: &Spanned) -> Result<String, ConfError> {
        default_include_target(raw)
    }
}

/// What a reader of raw lines does with each: the lower level that
/// [`LineSink`] is built on, for a caller that needs the lines as written
/// (their physical lines and text) rather than cut into pairs.  The files
/// are read and the `include`s followed as for [`parse_file`], with the
/// same bounds, and the same errors and remarks.
pub trait LineVisitor {
    /// The text of a file about to be read (the main one, or an included
    /// one), as its lines' [`RawLine::range`] index it.
    fn file(&mut self, _path: &Path, _text: &str) {}

    /// One logical line that is neither blank nor an `include`.  Errors go
    /// to `errors`; reading continues with the next line.
    fn line(&mut self, line: &RawLine<'_>, errors: &mut Vec<ConfError>);

    /// An `include` line, before it is followed (if it can be: its faults
    /// are errors of the walk).
    fn include(&mut self, _line: &RawLine<'_>) {}

    /// See [`LineSink::remark`].
    fn remark(&mut self, remark: Diagnostic);

    /// See [`LineSink::include_target`].
    fn include_target(&mut self, raw: &Spanned) -> Result<String, ConfError> {
        default_include_target(raw)
    }
}

/// [`LineSink::include_target`]'s default: `%c` is refused.
fn default_include_target(raw: &Spanned) -> Result<String, ConfError> {
    if raw.value.contains("%c") {
        return Err(ConfError::new(
            ErrorKind::Include,
            raw.location.clone(),
            format!("Include path \"{}\" uses %c, but no ClusterName is known here", raw.value),
        ));
    }
    Ok(raw.value.clone())
}

/// A [`LineSink`] as a [`LineVisitor`]: each line cut into pairs.
struct Parsing<'s>(&'s mut dyn LineSink);

impl LineVisitor for Parsing<'_> {
    fn line(&mut self, line: &RawLine<'_>, errors: &mut Vec<ConfError>) {
        self.0.line(line.parse(), errors);
    }
    fn remark(&mut self, remark: Diagnostic) {
        self.0.remark(remark);
    }
    fn include_target(&mut self, raw: &Spanned) -> Result<String, ConfError> {
        self.0.include_target(raw)
    }
}

/// One logical line as written: where its physical lines are, and their
/// text, before it is cut into pairs.
pub struct RawLine<'a> {
    /// The file it is in.
    pub path: &'a Path,
    /// Its first and last physical line (1-based; equal unless continued).
    pub first: usize,
    pub last: usize,
    /// The byte range of those physical lines in the file's text (as
    /// handed to [`LineVisitor::file`]), without the last one's newline.
    pub range: Range<usize>,
    /// The last physical line ends in a continuation: the line was cut by
    /// the end of the file.
    pub continued: bool,
    logical: &'a LogicalLine,
}

/// The key a line starts with, when `=` follows it (see
/// [`RawLine::lead_key`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadKey<'l> {
    pub key: Cow<'l, str>,
    /// `+`, `-`, `*` or `/` written right before `=`.
    pub operator: Option<char>,
    /// The value (unquoted), as a [`Pair`]'s; empty when nothing follows
    /// `=` (a line [`ParsedLine`] has no pair for).
    pub value: Cow<'l, str>,
    /// Where the value is written, when it is one unescaped run of one
    /// physical line: that line and the byte range (0-based, end excluded)
    /// in it.
    pub value_span: Option<(usize, usize, usize)>,
}

impl RawLine<'_> {
    /// The line cut into pairs, as a [`LineSink`] gets it.
    pub fn parse(&self) -> ParsedLine {
        self.logical.parse(self.path)
    }

    /// The line's first key and its value, read as [`RawLine::parse`]
    /// reads them, without cutting the rest of the line.
    pub fn lead_key(&self) -> Option<LeadKey<'_>> {
        let l = self.logical;
        let scan = l.scan_pair(0)?;
        Some(LeadKey {
            key: String::from_utf8_lossy(&l.bytes[scan.key]),
            operator: scan.operator,
            value_span: l.verbatim_span(scan.value.clone()),
            value: String::from_utf8_lossy(&l.bytes[scan.value]),
        })
    }
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// A logical line with, for every byte, the physical line and column it came
/// from.
struct LogicalLine {
    bytes: Vec<u8>,
    origin: Vec<(usize, usize)>,
    first_line: usize,
    last_line: usize,
    /// The byte range of its physical lines in the file's text.
    range: Range<usize>,
    /// Its last physical line ends in a continuation (at the end of the
    /// file).
    continued: bool,
}

/// A `key=value` found by [`LogicalLine::scan_pair`]: byte ranges in the
/// logical line.
struct PairScan {
    key: Range<usize>,
    operator: Option<char>,
    /// The value, without its quotes; empty (at the end) when nothing
    /// follows `=`.
    value: Range<usize>,
    /// The value as written, quotes included.
    written: Range<usize>,
}

/// Where reading a file's text into logical lines is: the next physical
/// line's byte offset (`None` after the last one) and number.
struct Cursor {
    pos: Option<usize>,
    line_no: usize,
}

impl Cursor {
    fn new() -> Self {
        Cursor { pos: Some(0), line_no: 0 }
    }
}

/// The next logical line of `contents` after `cursor` (one at a time, so
/// that a file's lines are never all held at once).
fn next_logical(contents: &str, cursor: &mut Cursor) -> Option<LogicalLine> {
    let mut current: Option<LogicalLine> = None;
    while let Some(pos) = cursor.pos {
        let (raw, next) = match contents[pos..].find('\n') {
            Some(i) => (&contents[pos..pos + i], Some(pos + i + 1)),
            None => (&contents[pos..], None),
        };
        cursor.pos = next;
        cursor.line_no += 1;
        let end = pos + raw.len();
        let line_no = cursor.line_no;
        let mut phys = raw.as_bytes();
        // A NUL ends the line for C's string functions.
        if let Some(nul) = phys.iter().position(|&b| b == 0) {
            phys = &phys[..nul];
        }
        // Comment: the first `#` after an even run of backslashes.
        let mut escaped = false;
        for (i, &b) in phys.iter().enumerate() {
            if b == b'#' && !escaped {
                phys = &phys[..i];
                break;
            }
            escaped = b == b'\\' && !escaped;
        }
        // Continuation: an odd run of backslashes before trailing blanks.
        let trimmed = phys.len() - phys.iter().rev().take_while(|&&b| is_c_space(b)).count();
        let run = phys[..trimmed].iter().rev().take_while(|&&b| b == b'\\').count();
        let continued = run % 2 == 1;
        let kept = if continued { &phys[..trimmed - 1] } else { phys };

        let logical = current.get_or_insert_with(|| LogicalLine {
            bytes: Vec::new(),
            origin: Vec::new(),
            first_line: line_no,
            last_line: line_no,
            range: pos..end,
            continued: false,
        });
        logical.bytes.extend_from_slice(kept);
        logical.origin.extend((1..=kept.len()).map(|column| (line_no, column)));
        logical.last_line = line_no;
        logical.range.end = end;
        logical.continued = continued;
        if !continued {
            break;
        }
    }
    current.map(unescape)
}

/// Escapes: a backslash keeps the next byte whatever it is.
fn unescape(mut line: LogicalLine) -> LogicalLine {
    if !line.bytes.contains(&b'\\') {
        return line;
    }
    let mut bytes = Vec::with_capacity(line.bytes.len());
    let mut origin = Vec::with_capacity(line.origin.len());
    let mut i = 0;
    while i < line.bytes.len() {
        if line.bytes[i] == b'\\' {
            i += 1;
            if i >= line.bytes.len() {
                break;
            }
        }
        bytes.push(line.bytes[i]);
        origin.push(line.origin[i]);
        i += 1;
    }
    line.bytes = bytes;
    line.origin = origin;
    line
}

impl LogicalLine {
    /// The location of bytes `start..end` (clipped to the physical line of
    /// `start`).
    fn location(&self, path: &Path, start: usize, end: usize) -> Location {
        let Some(&(line, column)) = self.origin.get(start) else {
            let (line, column) = self.origin.last().map(|&(l, c)| (l, c + 1)).unwrap_or((self.first_line, 1));
            return Location { path: path.to_path_buf(), line, column, len: 0 };
        };
        let last = (start..end.min(self.origin.len())).take_while(|&i| self.origin[i].0 == line).last().unwrap_or(start);
        let len = if end > start { self.origin[last].1 - column + 1 } else { 0 };
        Location { path: path.to_path_buf(), line, column, len }
    }

    fn text(&self, start: usize, end: usize) -> String {
        String::from_utf8_lossy(&self.bytes[start..end]).into_owned()
    }

    fn skip_space(&self, mut i: usize) -> usize {
        while i < self.bytes.len() && is_c_space(self.bytes[i]) {
            i += 1;
        }
        i
    }

    /// One `key=value` starting at `i` (after optional blanks), a value
    /// being a quoted string when a blank or the end follows its closing
    /// quote, else a run of non-blanks.  `None` when no key and `=` are
    /// there.
    fn scan_pair(&self, i: usize) -> Option<PairScan> {
        let b = &self.bytes;
        let key_start = self.skip_space(i);
        let mut key_end = key_start;
        while key_end < b.len() && is_key_byte(b[key_end]) {
            key_end += 1;
        }
        if key_end == key_start {
            return None;
        }
        let mut at = self.skip_space(key_end);
        let mut operator = None;
        if at + 1 < b.len() && matches!(b[at], b'+' | b'-' | b'*' | b'/') && b[at + 1] == b'=' {
            operator = Some(b[at] as char);
            at += 1;
        }
        if at >= b.len() || b[at] != b'=' {
            return None;
        }
        let value_start = self.skip_space(at + 1);
        let key = key_start..key_end;
        // A quoted value counts only when a blank or the end follows it.
        if b.get(value_start) == Some(&b'"') {
            if let Some(close) = b[value_start + 1..].iter().position(|&c| c == b'"').map(|p| p + value_start + 1) {
                if close + 1 == b.len() || is_c_space(b[close + 1]) {
                    return Some(PairScan { key, operator, value: value_start + 1..close, written: value_start..close + 1 });
                }
            }
        }
        let mut value_end = value_start;
        while value_end < b.len() && !is_c_space(b[value_end]) {
            value_end += 1;
        }
        Some(PairScan { key, operator, value: value_start..value_end, written: value_start..value_end })
    }

    /// One `key=value` starting at `i` (after optional blanks); the pair and
    /// the offset after it.
    fn pair_at(&self, path: &Path, i: usize) -> Option<(Pair, usize)> {
        let scan = self.scan_pair(i)?;
        if scan.written.is_empty() {
            return None;
        }
        let pair = Pair {
            key: self.text(scan.key.start, scan.key.end),
            key_location: self.location(path, scan.key.start, scan.key.end),
            operator: scan.operator,
            value: Spanned { value: self.text(scan.value.start, scan.value.end), location: self.location(path, scan.written.start, scan.written.end) },
        };
        Some((pair, scan.written.end))
    }

    /// Where bytes `range` are written, when they are one unescaped run of
    /// one physical line: the line and the byte range (0-based) in it.
    fn verbatim_span(&self, range: Range<usize>) -> Option<(usize, usize, usize)> {
        if range.is_empty() {
            return None;
        }
        let (&(line, first), &(last_line, last)) = (self.origin.get(range.start)?, self.origin.get(range.end - 1)?);
        (line == last_line && last + 1 - first == range.len()).then_some((line, first - 1, last))
    }

    fn parse(&self, path: &Path) -> ParsedLine {
        let mut pairs = Vec::new();
        let mut at = 0;
        while let Some((pair, next)) = self.pair_at(path, at) {
            pairs.push(pair);
            at = next;
        }
        let rest_start = self.skip_space(at);
        let rest = (rest_start < self.bytes.len()).then(|| {
            let end = self.bytes.len() - self.bytes.iter().rev().take_while(|&&b| is_c_space(b)).count();
            Spanned { value: self.text(rest_start, end), location: self.location(path, rest_start, end) }
        });
        let start = self.skip_space(0);
        let end = self.bytes.len() - self.bytes.iter().rev().take_while(|&&b| is_c_space(b)).count();
        ParsedLine { location: self.location(path, start, start.max(end).min(start + 1)), text: self.text(start, end.max(start)), pairs, rest }
    }

    /// `include FILE`: the file name, if this line is an include.
    fn include(&self, path: &Path) -> Option<Result<Spanned, ConfError>> {
        const WORD: &[u8] = b"include";
        let b = &self.bytes;
        if b.len() <= WORD.len() || !b[..WORD.len()].eq_ignore_ascii_case(WORD) || !is_c_space(b[WORD.len()]) {
            return None;
        }
        let start = self.skip_space(WORD.len());
        let mut end = start;
        while end < b.len() && !is_c_space(b[end]) {
            end += 1;
        }
        if end == start {
            return Some(Err(ConfError::new(ErrorKind::Include, self.location(path, 0, WORD.len()), "Include without a file name")));
        }
        let after = self.skip_space(end);
        if after < b.len() {
            let tail_end = b.len() - b.iter().rev().take_while(|&&c| is_c_space(c)).count();
            return Some(Err(ConfError::new(
                ErrorKind::Syntax,
                self.location(path, after, tail_end),
                format!("Parse error: \"{}\" after the Include file name", self.text(after, tail_end)),
            )));
        }
        Some(Ok(Spanned { value: self.text(start, end), location: self.location(path, start, end) }))
    }
}

/// Where an included file is: as written when absolute, else next to the
/// including file.
pub fn include_path(including: &Path, target: &str) -> PathBuf {
    let target = Path::new(target);
    if target.is_absolute() {
        return target.to_path_buf();
    }
    match including.parent() {
        Some(dir) => dir.join(target),
        None => target.to_path_buf(),
    }
}

/// Parse `path` and the files it includes, handing each line to `sink`.
pub fn parse_file(reader: &dyn ConfReader, path: &Path, sink: &mut dyn LineSink) -> Result<(), ConfErrors> {
    visit_file(reader, path, &mut Parsing(sink))
}

/// Read `path` and the files it includes, handing each raw line to
/// `visitor` (what [`parse_file`] does, one level down).
pub fn visit_file(reader: &dyn ConfReader, path: &Path, visitor: &mut dyn LineVisitor) -> Result<(), ConfErrors> {
    let mut walk = Walk { reader, sink: visitor, errors: Vec::new(), left: MAX_TOTAL_LEN };
    if let Some(bytes) = walk.read(path, None) {
        walk.walk(path, String::from_utf8_lossy(&bytes));
    }
    walk.finish()
}

/// Parse already-read `text` as if it were the file `path` (includes are
/// read through `reader`).
pub fn parse_text(reader: &dyn ConfReader, path: &Path, text: &str, sink: &mut dyn LineSink) -> Result<(), ConfErrors> {
    let mut walk = Walk { reader, sink: &mut Parsing(sink), errors: Vec::new(), left: MAX_TOTAL_LEN };
    walk.walk(path, Cow::Borrowed(text));
    walk.finish()
}

/// One parse: its errors and what may still be read.
struct Walk<'a> {
    reader: &'a dyn ConfReader,
    sink: &'a mut dyn LineVisitor,
    errors: Vec<ConfError>,
    /// Bytes left of [`MAX_TOTAL_LEN`].
    left: u64,
}

/// A file being read: it, or a file it includes, is being parsed.
struct Open<'t> {
    path: PathBuf,
    text: Cow<'t, str>,
    cursor: Cursor,
}

impl Walk<'_> {
    fn finish(self) -> Result<(), ConfErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ConfErrors(self.errors))
        }
    }

    /// The contents of `path` (the main file, or the one `include` names);
    /// `None` when there is nothing to parse: an error, or a file slurmd
    /// reads as empty (a remark).
    fn read(&mut self, path: &Path, include: Option<&Spanned>) -> Option<Vec<u8>> {
        let (location, failed) = match include {
            Some(target) => (target.location.clone(), "\"Include\" failed: "),
            None => (Location::file(path), ""),
        };
        let what = if include.is_some() { "Include " } else { "" };
        let error = |message: String| ConfError::new(ErrorKind::Io, location.clone(), format!("{failed}{message}"));
        let limit = MAX_FILE_LEN.min(self.left);
        match self.reader.read(path, limit) {
            Ok(bytes) => {
                self.left -= bytes.len() as u64;
                Some(bytes)
            }
            Err(ReadError::NotRegular(kind)) => {
                let message = format!("WARNING: {what}{}: {}; slurmd reads it as an empty file", path.display(), kind.describe());
                self.sink.remark(Diagnostic::new(LogLevel::Info, Some(location.clone()), message));
                None
            }
            Err(ReadError::TooLarge { size, .. }) => {
                let why = match size {
                    Some(size) if limit == MAX_FILE_LEN || size > MAX_FILE_LEN => {
                        format!("{size} bytes, more than the {MAX_FILE_LEN} read ({})", slurmd_reading(size))
                    }
                    None if limit == MAX_FILE_LEN => format!("it holds more than the {MAX_FILE_LEN} bytes read"),
                    _ => format!("reading it would take the files of this configuration past {MAX_TOTAL_LEN} bytes in all"),
                };
                match include {
                    // slurmd reads it: not a reason to stop, but what it
                    // holds is not checked.
                    Some(_) => {
                        let message = format!("Include {} not checked: {why}", path.display());
                        self.sink.remark(Diagnostic::new(LogLevel::Error, Some(location.clone()), message));
                    }
                    None => self.errors.push(error(format!("\"{}\" not read: {why}", path.display()))),
                }
                None
            }
            Err(e) => {
                self.errors.push(error(format!("unable to read \"{}\": {e}", path.display())));
                None
            }
        }
    }

    /// Parse `text` as the file `path`, and what it includes in place of
    /// each `include` line.  The chain of open files is a list, not the
    /// call stack: a chain as deep as slurmd follows fits any thread.
    fn walk(&mut self, path: &Path, text: Cow<'_, str>) {
        self.sink.file(path, &text);
        let mut open = vec![Open { path: path.to_path_buf(), text, cursor: Cursor::new() }];
        while let Some(file) = open.last_mut() {
            let Some(logical) = next_logical(&file.text, &mut file.cursor) else {
                open.pop();
                continue;
            };
            if logical.bytes.iter().all(|&b| is_c_space(b)) {
                continue;
            }
            let path = &open[open.len() - 1].path;
            let include = logical.include(path);
            let raw = RawLine {
                path,
                first: logical.first_line,
                last: logical.last_line,
                range: logical.range.clone(),
                continued: logical.continued,
                logical: &logical,
            };
            match include {
                None => self.sink.line(&raw, &mut self.errors),
                Some(Err(e)) => {
                    self.sink.include(&raw);
                    self.errors.push(e);
                }
                Some(Ok(target)) => {
                    self.sink.include(&raw);
                    if let Some((included, text)) = self.include(path, &target, &open) {
                        self.sink.file(&included, &text);
                        open.push(Open { path: included, text: Cow::Owned(text), cursor: Cursor::new() });
                    }
                }
            }
        }
    }

    /// The file an `include` line of `path` names, and its text, when it is
    /// to be parsed.
    fn include(&mut self, path: &Path, target: &Spanned, open: &[Open]) -> Option<(PathBuf, String)> {
        let name = match self.sink.include_target(target) {
            Ok(name) => name,
            Err(e) => {
                self.errors.push(e);
                return None;
            }
        };
        let included = include_path(path, &name);
        if open.iter().any(|f| f.path == included) {
            let message = format!("Include of \"{}\" is a cycle", included.display());
            self.errors.push(ConfError::new(ErrorKind::Include, target.location.clone(), message));
            return None;
        }
        if open.len() > MAX_INCLUDE_DEPTH {
            let message = format!(
                "Include of \"{}\" nests deeper than {MAX_INCLUDE_DEPTH} files; slurmd keeps every file of the chain open and fails once it \
                 cannot open more (1,020 deep with 1,024 open files)",
                included.display()
            );
            self.errors.push(ConfError::new(ErrorKind::Include, target.location.clone(), message));
            return None;
        }
        let bytes = self.read(&included, Some(target))?;
        // Valid UTF-8 (the usual case) is kept as read, not copied.
        let text = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Some((included, text))
    }
}

/// What slurmd's `s_p_parse_file()` does with a regular file of `size`
/// bytes: it allocates a line buffer of `size + 1` bytes and hands that
/// size to `fgets()` as an `int`, which from 2 GiB on wraps.
fn slurmd_reading(size: u64) -> String {
    let buffer = size.saturating_add(1);
    // The low 32 bits, read as a C int.
    let as_int = buffer as u32 as i32;
    if i64::from(as_int) == buffer as i64 {
        format!("slurmd allocates a {buffer}-byte line buffer and reads it")
    } else if as_int <= 0 {
        format!("slurmd allocates a {buffer}-byte line buffer, whose size wraps to {as_int} as an int: it reads the file as empty")
    } else {
        format!("slurmd allocates a {buffer}-byte line buffer, whose size wraps to {as_int} as an int: it reads lines of at most {} bytes", as_int - 1)
    }
}

/// An "unknown key" error with a suggestion.
pub fn unknown_key(pair: &Pair, valid: &[&str], context: &str) -> ConfError {
    ConfError {
        kind: ErrorKind::UnknownKey,
        location: pair.key_location.clone(),
        message: format!("Parsing error at unrecognized key: {}{context}", pair.key),
        suggestion: closest_key(&pair.key, valid).map(str::to_string),
    }
}

/// The error for text left on a line that is not a pair.
pub fn leftover_error(rest: &Spanned) -> ConfError {
    ConfError::new(ErrorKind::Syntax, rest.location.clone(), format!("Parse error: \"{}\"", rest.value))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
