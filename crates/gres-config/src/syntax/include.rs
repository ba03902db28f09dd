//! A configuration and its `include`s read as slurmd reads them: the walk
//! over files, within depth and size bounds, handing each line to the
//! file's own module.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::lexer::{next_logical, Cursor};
use super::{ConfError, ConfErrors, ConfReader, Diagnostic, ErrorKind, Location, ParsedLine, RawLine, Spanned, MAX_INCLUDE_DEPTH, MAX_TOTAL_LEN};
use gres_core::bounded_read::{ReadError, MAX_FILE_LEN};
use gres_core::model::LogLevel;
use gres_core::text::is_c_space;

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
pub(super) fn slurmd_reading(size: u64) -> String {
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
