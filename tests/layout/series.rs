//! A release series: its header, reviewed config.h and libslurmfull, and
//! the installed Slurm's version.

use crate::util::repo_root;
use gres_test_harness as harness;
use std::fs;
use std::path::{Path, PathBuf};

pub const HEADERS_DIR: &str = "crates/slurm-abi/slurm-headers";
pub const HEADER_FILE: &str = "slurm_gres_abi.h";
const CONFIG_H: &str = "tests/layout/config.h";
const LIBSLURMFULL: &str = "/usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so";
const LIBSLURMFULL_ENV: &str = "GRES_RS_LIBSLURMFULL_";
pub const INSTALLED_VERSION_H: &str = "/usr/include/slurm/slurm_version.h";

/// One release series: its header, reviewed config.h and libslurmfull.
pub struct Series {
    /// `24.11`
    pub name: &'static str,
    pub major: u32,
    pub minor: u32,
    /// Relative to the repository root, for messages.
    pub header: String,
    pub config_h: String,
}

impl Series {
    /// None (after printing why) when the series has no header.
    pub fn new(name: &'static str) -> Option<Series> {
        let (major, minor) = name.split_once('.').map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap())).expect("series is MAJOR.MINOR");
        let header = format!("{HEADERS_DIR}/{name}/{HEADER_FILE}");
        if !repo_root().join(&header).is_file() {
            println!("layout: SKIP: Slurm {name}: {header} does not exist");
            return None;
        }
        let own = format!("tests/layout/{name}/config.h");
        let config_h = if repo_root().join(&own).is_file() { own } else { CONFIG_H.to_string() };
        Some(Series { name, major, minor, header, config_h })
    }

    pub fn header_path(&self) -> PathBuf {
        repo_root().join(&self.header)
    }

    pub fn is(&self, v: Version) -> bool {
        (v.0, v.1) == (self.major, self.minor)
    }

    /// `GRES_RS_LIBSLURMFULL_24_11`
    pub fn lib_env(&self) -> String {
        format!("{LIBSLURMFULL_ENV}{}", self.name.replace('.', "_"))
    }

    /// The libslurmfull.so of this series: the env override, else the
    /// installed one if the installed Slurm is of this series.
    pub fn libslurmfull(&self) -> Result<PathBuf, String> {
        let env = self.lib_env();
        if let Some(p) = std::env::var_os(&env).filter(|v| !v.is_empty()) {
            let p = PathBuf::from(p);
            assert!(p.is_file(), "Slurm {}: ${env} is {}, which is not a file", self.name, p.display());
            return Ok(p);
        }
        // A test-bed chroot of this series (tests/testbed/debian-chroot.sh).
        for rel in harness::chroot::chroot_releases() {
            let Ok(root) = rel.open() else { continue };
            let Ok((major, minor, _)) = root.slurm_version_triple() else { continue };
            if (major, minor) == (self.major, self.minor) {
                if let Some(lib) = root.resolve(root.libslurmfull()) {
                    return Ok(lib);
                }
            }
        }
        match installed_version() {
            Some(v) if self.is(v) && Path::new(LIBSLURMFULL).exists() => Ok(LIBSLURMFULL.into()),
            Some(v) if self.is(v) => Err(format!("{LIBSLURMFULL} not found (is slurmd installed?) and ${env} is not set")),
            installed => Err(format!(
                "no Slurm {} libslurmfull.so: set ${env} to one (the installed Slurm is {})",
                self.name,
                installed.map_or("none".into(), fmt_version)
            )),
        }
    }
}

pub type Version = (u32, u32, u32);

pub fn fmt_version(v: Version) -> String {
    format!("{}.{:02}.{}", v.0, v.1, v.2)
}

/// `SLURM_VERSION_NUMBER` of the installed libslurm-dev.
pub fn installed_version() -> Option<Version> {
    let text = fs::read_to_string(INSTALLED_VERSION_H).ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("#define SLURM_VERSION_NUMBER"))?;
    let hex = line.split_whitespace().nth(2)?;
    let n = u32::from_str_radix(hex.trim_start_matches("0x"), 16).ok()?;
    Some(((n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff))
}
