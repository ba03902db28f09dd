//! Guards on the probe's include set: only the source's Slurm headers, and
//! only config.h macros that were reviewed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Slurm headers the real probe included, from its `-MD` dependency file;
/// flags any header taken from the installed /usr/include/slurm instead of
/// the source tree.
pub fn slurm_headers_used(deps: &Path, src: &Path, included: usize, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let text = fs::read_to_string(deps).unwrap().replace("\\\n", " ");
    let mut used = Vec::new();
    for word in text.split_whitespace().filter(|w| !w.ends_with(':')) {
        let p = Path::new(word);
        if p.starts_with(src) {
            used.push(p.to_path_buf());
        } else if word.starts_with("/usr/include/slurm/") {
            problems.push(format!("the real probe included the installed {word} instead of the source's"));
        }
    }
    assert!(used.len() >= included, "dependency file {} lists too few Slurm headers", deps.display());
    used
}

/// Every config.h.in macro tested by a conditional in an included Slurm
/// header must be reviewed (defined or listed as `#undef`) in config.h.
pub fn check_config_macros(src: &Path, used: &[PathBuf], config_h: &Path, config_rel: &str, problems: &mut Vec<String>) {
    let config_names: BTreeSet<String> =
        fs::read_to_string(src.join("config.h.in")).unwrap().lines().filter_map(|l| l.strip_prefix("#undef ")).map(|n| n.trim().to_string()).collect();
    let reviewed: BTreeSet<String> = fs::read_to_string(config_h)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("#define ").or_else(|| l.strip_prefix("/* #undef "))
        })
        .filter_map(|rest| rest.split_whitespace().next().map(str::to_string))
        .collect();
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in used {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines() {
            let t = line.trim_start();
            let Some(d) = t.strip_prefix('#') else {
                continue;
            };
            let d = d.trim_start();
            if !["if", "ifdef", "ifndef", "elif"].iter().any(|k| d.starts_with(k)) {
                continue;
            }
            for word in d.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if config_names.contains(word) && !reviewed.contains(word) {
                    let rel = file.strip_prefix(src).unwrap_or(file).display().to_string();
                    missing.entry(word.to_string()).or_default().insert(rel);
                }
            }
        }
    }
    for (name, files) in missing {
        problems.push(format!(
            "config macro {name} is tested by {} but not reviewed in {config_rel}: add its value \
             for Debian's amd64 build (or a `/* #undef {name} */` line); if the other series do \
             not test it, put it in a tests/layout/<series>/config.h of its own",
            files.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
}
