//! Usage errors, `--help`, the man pages and completions made from it, and
//! the shipped examples.

use crate::run::{check, conf, gres_rs, temp_dir, text, SLURM};
use std::fs;
use std::path::Path;

#[test]
fn usage_errors() {
    let d = conf("usage", SLURM, Some(""));
    let out = check(&d, &["--node", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("gres-rs: error: node nosuch is not in"), "{}", text(&out.stderr));
    let out = gres_rs(&["check", "--slurm-conf", "/nonexistent/slurm.conf", "--all-nodes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("gres-rs: error: unable to read \"/nonexistent/slurm.conf\""), "{}", text(&out.stderr));
    let out = check(&d, &["--gres-conf", "/nonexistent/gres.conf", "--all-nodes"]);
    assert_eq!(out.status.code(), Some(2));
    let out = check(&d, &["--node", "n1", "--all-nodes"]);
    assert_eq!(out.status.code(), Some(2));
    let out = gres_rs(&["check", "--format", "yaml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_reads_like_a_man_page() {
    let out = gres_rs(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for s in ["DESCRIPTION", "EXAMPLES", "EXIT STATUS", "check", "detect", "install"] {
        assert!(help.contains(s), "{s}:\n{help}");
    }
    let out = gres_rs(&["check", "--help"]);
    let help = text(&out.stdout);
    assert!(help.contains("slurmd -G") && help.contains("--no-device-check") && help.contains("EXIT STATUS"), "{help}");
    assert!(help.contains("- slurmd: The exact lines `slurmd -G` prints") && help.contains("- text:   For people"), "{help}");
    let out = gres_rs(&["install", "--help"]);
    let help = text(&out.stdout);
    assert!(help.contains("anyone who can write to a PluginDir") && help.contains("refused even with --force"), "{help}");
    let out = gres_rs(&["detect", "--help"]);
    let help = text(&out.stdout);
    for s in ["--nvml-lib <FILE>", "--dev-dir <DIR>", "--mig-minors <FILE>", "EXIT STATUS"] {
        assert!(help.contains(s), "{s}:\n{help}");
    }
}

#[test]
fn man_pages_and_completions_from_the_help_definitions() {
    let d = temp_dir("generate");
    let man = d.0.join("man");
    let out = gres_rs(&["generate", "man", man.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut pages: Vec<String> = fs::read_dir(&man).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    pages.sort();
    assert_eq!(pages, ["gres-rs-check.1", "gres-rs-detect.1", "gres-rs-health.1", "gres-rs-install.1", "gres-rs-status.1", "gres-rs.1"]);
    let check = fs::read_to_string(man.join("gres-rs-check.1")).unwrap();
    assert!(check.contains(".TH gres-rs-check 1") && check.contains("no\\-device\\-check") && check.contains("EXIT STATUS"), "{check}");
    assert!(check.contains("slurmd: The exact lines `slurmd \\-G` prints"), "{check}");
    // The hidden command has no page.
    assert!(!fs::read_to_string(man.join("gres-rs.1")).unwrap().contains("gres\\-rs\\-generate"));

    let comp = d.0.join("completions");
    let out = gres_rs(&["generate", "completions", comp.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (file, has) in [("gres-rs.bash", "--no-device-check"), ("_gres-rs", "--no-device-check"), ("gres-rs.fish", "no-device-check")] {
        let body = fs::read_to_string(comp.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(body.contains(has) && body.contains("status"), "{file}:\n{body}");
    }
}

#[test]
fn examples_are_clean() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut checked = 0;
    for entry in fs::read_dir(&examples).unwrap() {
        let dir = entry.unwrap().path();
        let slurm = dir.join("slurm.conf");
        if !slurm.is_file() || !dir.join("gres.conf").is_file() {
            continue;
        }
        assert!(dir.join("README.md").is_file(), "{} has no README.md", dir.display());
        let out = gres_rs(&["check", "--slurm-conf", slurm.to_str().unwrap(), "--all-nodes", "--no-device-check"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}:\n{err}", dir.display());
        assert!(err.contains(" 0 fatal, 0 errors, 0 warnings"), "{}:\n{err}", dir.display());
        assert!(text(&out.stdout).lines().any(|l| l.starts_with("  gpu ")), "{}", dir.display());
        checked += 1;
    }
    assert!(checked >= 5, "{checked} examples");
}
