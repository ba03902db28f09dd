//! Compiling and running the probes, and comparing their outputs.

use crate::util::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn cc_output(includes: &[PathBuf], extra: &[String], src: &Path, exe: Option<&Path>) -> Output {
    let mut cmd = Command::new("cc");
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    cmd.args(extra).arg(src);
    if let Some(exe) = exe {
        cmd.arg("-o").arg(exe);
    }
    cmd.output().unwrap_or_else(|e| panic!("cannot run cc: {e}"))
}

pub fn cc(work: &TempDir, hdr: &str, includes: &[PathBuf], extra: &[String], src: &Path, exe: Option<&Path>, what: &str) {
    let out = cc_output(includes, extra, src, exe);
    if !out.status.success() {
        work.keep();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
        errors.dedup();
        panic!(
            "cc failed on the {what}: {}\n\
             (a struct, field, typedef or constant of {hdr} that the real headers lack \
             shows up here as an error)\n{}\n\nfull compiler output:\n{stderr}",
            src.display(),
            errors.join("\n"),
        );
    }
}

pub fn run_probe(work: &TempDir, exe: &Path) -> String {
    let out = Command::new(exe).output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    if !out.status.success() {
        work.keep();
        panic!("{} failed: {:?}", exe.display(), out.status);
    }
    String::from_utf8(out.stdout).unwrap()
}

pub fn compare_outputs(real: &str, ours: &str, problems: &mut Vec<String>) -> usize {
    let parse = |s: &str| -> Vec<(String, String)> {
        s.lines()
            .map(|l| {
                let (k, v) = l.rsplit_once(" = ").expect("probe line");
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let (real, ours) = (parse(real), parse(ours));
    assert_eq!(real.len(), ours.len(), "the two probes printed different line counts");
    for ((rk, rv), (ok, ov)) in real.iter().zip(&ours) {
        assert_eq!(rk, ok, "the two probes printed different keys");
        let is_compat = ok.contains(" has type '") || ok.contains(" is ");
        if is_compat && ov != "1" {
            panic!("parser bug: our own header says `{ok}` is false");
        }
        if rv != ov {
            let what = if is_compat { "real type differs" } else { "" };
            problems.push(format!("{ok}: ours = {ov}, real = {rv} {what}").trim_end().to_string());
        }
    }
    real.len()
}
