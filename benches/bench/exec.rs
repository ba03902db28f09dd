//! Running a command: its wall time and its output as text.

use std::process::{Command, Output};
use std::time::Instant;

/// Runs a command to completion; returns its wall time and output.
pub fn timed(mut cmd: Command) -> (f64, Output) {
    let t = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (t.elapsed().as_secs_f64(), out)
}

pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
