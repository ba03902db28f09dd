//! Every link between the project's Markdown files resolves (the file,
//! and the heading an anchor names), and every repository path a document
//! names in backticks (`crates/...`, `tests/...`, `docs/...`, ...) exists:
//! documents that point at moved or removed files are caught here, as
//! `cargo doc -D warnings` catches broken intra-doc links (tests/lint.sh).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Top-level directories whose paths documents name.
const TREE_DIRS: [&str; 9] = ["crates/", "src/", "tests/", "docs/", "packaging/", "benches/", "examples/", "fuzz/", ".ci/"];

/// `src/<dir>` of Slurm's own source tree, which documents cite: not ours.
const SLURM_SRC_DIRS: [&str; 12] =
    ["api", "common", "interfaces", "plugins", "slurmd", "slurmctld", "slurmdbd", "stepmgr", "conmgr", "sacct", "srun", "scontrol"];

/// What runs make, not the tree: named by documents, absent in a checkout.
const MADE_BY_RUNS: [&str; 3] = ["fuzz/logs/", "fuzz/artifacts/", "fuzz/corpus/"];

fn is_ours(path: &str) -> bool {
    let slurm = path.strip_prefix("src/").and_then(|r| r.split('/').next()).is_some_and(|d| SLURM_SRC_DIRS.contains(&d));
    !slurm && !MADE_BY_RUNS.iter().any(|m| path.starts_with(m))
}

fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !(name.starts_with('.') || name == "target") {
                    walk(&p, out);
                }
            } else if name.ends_with(".md") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new(ROOT), &mut out);
    out.sort();
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, blanks
/// as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose_lines(text).into_iter().filter(|l| l.starts_with('#')).map(|l| anchor(l.trim_start_matches('#'))).collect()
}

/// The `(target)` of each `[text](target)` outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            match after.find(')') {
                Some(j) => {
                    out.push(after[..j].to_string());
                    rest = &after[j..];
                }
                None => break,
            }
        }
    }
    out
}

/// Repository paths in backticks: a word that starts with one of
/// [`TREE_DIRS`] and holds no placeholder (`<release>`, `*`, `{a,b}`,
/// `$VAR`).
fn tree_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 0 || span.contains(char::is_whitespace) {
            continue;
        }
        let span = span.trim_end_matches([',', '.', ':', ';']);
        let path = span.split_once(':').map_or(span, |(p, _)| p);
        if TREE_DIRS.iter().any(|d| path.starts_with(d)) && !path.contains(['<', '*', '{', '$', '[', '?', '=']) && is_ours(path) {
            out.push(path.to_string());
        }
    }
    out
}

#[test]
fn every_link_and_path_in_the_docs_resolves() {
    let root = Path::new(ROOT);
    let mut bad = Vec::new();
    let files = markdown_files();
    assert!(files.len() > 10, "found only {} Markdown files under {ROOT}", files.len());
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, frag) = link.split_once('#').map_or((link.as_str(), None), |(p, f)| (p, Some(f)));
            let target = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !target.exists() {
                bad.push(format!("{shown}: link to {link}: no such file"));
                continue;
            }
            if let Some(frag) = frag {
                if target.extension().is_some_and(|e| e == "md") && !anchors(&fs::read_to_string(&target).unwrap()).contains(frag) {
                    bad.push(format!("{shown}: link to {link}: no such heading"));
                }
            }
        }
        for path in tree_paths(&text) {
            if !root.join(&path).exists() {
                bad.push(format!("{shown}: names `{path}`, which does not exist"));
            }
        }
    }
    assert!(bad.is_empty(), "{} broken:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn the_checks_see_what_they_should() {
    assert_eq!(anchor(" Which Slurm release a build is for"), "which-slurm-release-a-build-is-for");
    assert_eq!(anchor(" The admin tool: `gres-rs`"), "the-admin-tool-gres-rs");
    assert_eq!(links("see [a](docs/x.md#y) and [b](c.md)\n```\n[no](z)\n```\n"), ["docs/x.md#y", "c.md"]);
    assert_eq!(tree_paths("`tests/run.sh`, `crates/gres-core/src/x.rs:12`, `slurm-headers/<r>/`, `cargo test`"), ["tests/run.sh", "crates/gres-core/src/x.rs"]);
    assert_eq!(tree_paths("`src/interfaces/gres.c` `src/bin/gres-rs/main.rs` `fuzz/logs/`"), ["src/bin/gres-rs/main.rs"]);
}
