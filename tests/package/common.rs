//! What every package test uses: the packages' names, running a command,
//! whether the package is installed, and reading what `gres-rs status`, a
//! prerm and `env` print.

use std::path::Path;
use std::process::Command;

pub const PACKAGE: &str = "slurm-gpu-gres";
/// The optional package that diverts the stock plugin files.
pub const DIVERT_PACKAGE: &str = "slurm-gpu-gres-divert";

pub fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

pub fn installed() -> bool {
    run(Command::new("dpkg-query").args(["-W", "-f=${Status}", PACKAGE])).1.contains("install ok installed")
}

pub fn multiarch() -> String {
    let (ok, out) = run(Command::new("dpkg-architecture").arg("-qDEB_HOST_MULTIARCH"));
    assert!(ok, "dpkg-architecture: {out}");
    out.trim().to_string()
}

pub fn gres_rs_status() -> (Option<i32>, String) {
    let out = Command::new("/usr/bin/gres-rs").arg("status").output().expect("run /usr/bin/gres-rs status");
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

pub fn status_lines_of(text: &str, pid: u32) -> String {
    let head = format!("(pid {pid}):");
    let mut lines = text.lines().skip_while(|l| !l.ends_with(&head));
    let mut out = String::new();
    if let Some(h) = lines.next() {
        out.push_str(h);
        out.push('\n');
        for l in lines.take_while(|l| l.starts_with("  ")) {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

pub fn env_value(env_output: &str, key: &str) -> Option<String> {
    env_output.lines().find_map(|l| l.strip_prefix(&format!("{key}=")).map(|v| v.to_string()))
}

pub fn assert_breaks_other_divert_versions(deb: &Path) {
    let (_, v) = run(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg("Version"));
    let (_, breaks) = run(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg("Breaks"));
    let v = v.trim();
    for want in [format!("{DIVERT_PACKAGE} (<< {v})"), format!("{DIVERT_PACKAGE} (>> {v})")] {
        assert!(breaks.contains(&want), "Breaks: {want} not in {}: {breaks}", deb.display());
    }
}

/// A prerm's output, removal leaving slurmd without a gpu_nvml.so while
/// it picks gpu/nvml: the files it loads after, and the warning.
pub fn assert_prerm_warns(out: &str, package: &str) {
    let p = format!("{package}:");
    for want in [
        format!("{p}     gres_gpu.so    /"),
        format!("{p}     gpu_nvml.so    none, and slurmd picks gpu/nvml ("),
        format!("{p} WARNING: slurmd will not start"),
    ] {
        assert!(out.contains(&want), "{want} not in the prerm's output:\n{out}");
    }
}
