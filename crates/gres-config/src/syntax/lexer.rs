//! One file's text cut into logical lines (comments, continuations,
//! escapes) and each line into located `key=value` pairs.

use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

use super::{leftover_error, ConfError, ErrorKind, Location};
use gres_core::text::is_c_space;

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

/// One logical line as written: where its physical lines are, and their
/// text, before it is cut into pairs.
pub struct RawLine<'a> {
    /// The file it is in.
    pub path: &'a Path,
    /// Its first and last physical line (1-based; equal unless continued).
    pub first: usize,
    pub last: usize,
    /// The byte range of those physical lines in the file's text (as
    /// handed to [`LineVisitor::file`](super::LineVisitor::file)), without the last one's newline.
    pub range: Range<usize>,
    /// The last physical line ends in a continuation: the line was cut by
    /// the end of the file.
    pub continued: bool,
    pub(super) logical: &'a LogicalLine,
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
    /// The line cut into pairs, as a [`LineSink`](super::LineSink) gets it.
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
pub(super) struct LogicalLine {
    pub(super) bytes: Vec<u8>,
    origin: Vec<(usize, usize)>,
    pub(super) first_line: usize,
    pub(super) last_line: usize,
    /// The byte range of its physical lines in the file's text.
    pub(super) range: Range<usize>,
    /// Its last physical line ends in a continuation (at the end of the
    /// file).
    pub(super) continued: bool,
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
pub(super) struct Cursor {
    pos: Option<usize>,
    line_no: usize,
}

impl Cursor {
    pub(super) fn new() -> Self {
        Cursor { pos: Some(0), line_no: 0 }
    }
}

/// The next logical line of `contents` after `cursor` (one at a time, so
/// that a file's lines are never all held at once).
pub(super) fn next_logical(contents: &str, cursor: &mut Cursor) -> Option<LogicalLine> {
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
    pub(super) fn include(&self, path: &Path) -> Option<Result<Spanned, ConfError>> {
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
