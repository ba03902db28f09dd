//! Running `gres-rs` on a configuration written into a new directory.

use gres_test_harness::TempDir as Dir;
use std::fs;
use std::process::{Command, Output};

pub const GRES_RS: &str = env!("CARGO_BIN_EXE_gres-rs");

pub fn temp_dir(name: &str) -> Dir {
    Dir::new(&format!("gres-rs-cli-{}-{name}", std::process::id()))
}

/// A configuration in a new directory: slurm.conf and (if given) gres.conf.
pub fn conf(name: &str, slurm: &str, gres: Option<&str>) -> Dir {
    let d = temp_dir(name);
    fs::write(d.0.join("slurm.conf"), slurm).unwrap();
    if let Some(g) = gres {
        fs::write(d.0.join("gres.conf"), g).unwrap();
    }
    d
}

pub fn gres_rs(args: &[&str]) -> Output {
    Command::new(GRES_RS).args(args).env_remove("SLURM_CONF").env("NO_COLOR", "1").output().unwrap()
}

pub fn check(dir: &Dir, extra: &[&str]) -> Output {
    let slurm = dir.0.join("slurm.conf");
    let mut args = vec!["check", "--slurm-conf", slurm.to_str().unwrap()];
    args.extend_from_slice(extra);
    gres_rs(&args)
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub const SLURM: &str = "GresTypes=gpu,mps\nNodeName=n[1-4] CPUs=8 Gres=gpu:2\n";

/// This host's name, as `check` matches it (device files are only looked
/// at on the node the check runs on).
pub fn this_host() -> String {
    let full = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    full.trim().split('.').next().unwrap().to_string()
}
