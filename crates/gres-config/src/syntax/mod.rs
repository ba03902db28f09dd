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
//! (see [`gres_core::bounded_read`]): what is not a regular file (a device, a
//! FIFO: size 0 for `stat()`; a directory: `fgets()` fails) slurmd reads as
//! an empty file, and so does this reader, with a warning that names it.
//! A regular file is read up to [`MAX_FILE_LEN`] bytes, and all the files
//! of one configuration up to [`MAX_TOTAL_LEN`].  slurmd reads a larger
//! one (into a line buffer of the file's size, whose size wraps as an
//! `int` from 2 GiB on): an include past the bound is an error remark
//! (not checked, the parse goes on), the main file past it an error.
//!
//! One concept a module: [`errors`] (located errors and remarks),
//! [`readers`] (where bytes come from), [`lexer`] (lines and pairs),
//! [`include`](mod@include) (the walk over a file and its includes); all re-exported
//! here.

pub mod errors;
pub mod include;
pub mod lexer;
pub mod readers;

pub use errors::*;
pub use include::*;
pub use lexer::*;
pub use readers::*;

use gres_core::bounded_read::MAX_FILE_LEN;

/// Deepest chain of `include`s followed.  slurmd has no limit: each level
/// keeps its file open, so a chain fails at the limit of open files
/// (`slurmd -G` with 1,024: 1,019 includes deep is read, 1,020 fails), and
/// a cycle recurses until then.  (Debian's slurmd.service sets
/// `LimitNOFILE=131072`, which lets slurmd go deeper than this.)
pub const MAX_INCLUDE_DEPTH: usize = 1000;

/// The most read of all the files of one configuration (the file and what
/// it includes, each include counted each time it is read).
pub const MAX_TOTAL_LEN: u64 = 4 * MAX_FILE_LEN;

#[cfg(test)]
mod tests;
