//! The shape CONTRIBUTING.md promises of the tree, checked: no source file
//! over 800 lines, and no import circle between the top-level modules of
//! any crate (or of a test, bench or the tool, each a crate of its own).
//! Reads the files as text; needs no build and no Slurm.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The longest a source file may be.
const MAX_LINES: usize = 800;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files below `dir` whose name ends with one of `exts`, skipping
/// build output and fetched or generated trees.
fn files_below(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "corpus" | "artifacts" | "work") {
                files_below(&p, exts, out);
            }
        } else if exts.iter().any(|x| name.ends_with(x)) {
            out.push(p);
        }
    }
}

#[test]
fn no_source_file_is_over_800_lines() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches", "examples", "fuzz/fuzz_targets", "packaging"] {
        files_below(&root.join(dir), &[".rs", ".c", ".h", ".sh"], &mut files);
    }
    // Each release's ABI header is bindgen's input, generated from Slurm's.
    let exempt = |p: &Path| p.components().any(|c| c.as_os_str() == "slurm-headers");
    let long: Vec<String> = files
        .iter()
        .filter(|p| !exempt(p))
        .filter_map(|p| {
            let n = fs::read_to_string(p).ok()?.lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", p.strip_prefix(&root).unwrap_or(p).display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines, split by concept (CONTRIBUTING.md): {long:#?}");
}

/// A crate's source: its root file's directory and the top-level modules
/// in it, each with its files (a module's directory counts as the module).
struct CrateSrc {
    modules: BTreeMap<String, Vec<(PathBuf, usize)>>,
}

impl CrateSrc {
    fn read(dir: &Path) -> CrateSrc {
        let mut files = Vec::new();
        files_below(dir, &[".rs"], &mut files);
        let mut modules: BTreeMap<String, Vec<(PathBuf, usize)>> = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(dir).unwrap_or(&f).with_extension("");
            let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            let top = match parts[0].as_str() {
                "lib" | "main" => String::new(),
                t => t.to_string(),
            };
            modules.entry(top).or_default().push((f, parts.len()));
        }
        CrateSrc { modules }
    }

    /// Which top-level module each name the root re-exports comes from
    /// (`pub use config::{ClusterConfig, ...}` in lib.rs).
    fn reexports(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (file, _) in self.modules.get("").into_iter().flatten() {
            let text = code_of(&fs::read_to_string(file).unwrap_or_default());
            for stmt in text.split(';') {
                let Some(rest) = stmt.trim().strip_prefix("pub use ") else { continue };
                let (module, names) = rest.split_once("::").unwrap_or((rest, ""));
                if self.modules.contains_key(module) {
                    for n in words(names) {
                        out.insert(n, module.to_string());
                    }
                }
            }
        }
        out
    }

    /// Top-level module -> the top-level modules it names.
    fn graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let reexports = self.reexports();
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, files) in &self.modules {
            let uses = g.entry(module.clone()).or_default();
            for (file, depth) in files {
                let text = code_of(&fs::read_to_string(file).unwrap_or_default());
                let mut names = paths_after(&text, "crate::");
                // `super::` of a top-level module's own file is the root;
                // of a file one directory down, the module itself.
                if *depth == 1 && !module.is_empty() {
                    names.extend(paths_after(&text, "super::"));
                }
                if *depth == 2 {
                    names.extend(paths_after(&text, "super::super::"));
                }
                for n in names {
                    let target = if self.modules.contains_key(&n) { Some(&n) } else { reexports.get(&n) };
                    if let Some(t) = target.filter(|t| !t.is_empty() && *t != module) {
                        uses.insert(t.clone());
                    }
                }
            }
        }
        g
    }
}

/// The text without comments (line comments, and so doc comments).
fn code_of(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty() && *w != "self").map(str::to_string).collect()
}

/// The first path segment after each `prefix` (`crate::config::X` ->
/// `config`), and every name of a `prefix{a, b::c}` group.
fn paths_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices(prefix) {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$') {
            continue;
        }
        let rest = &text[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            out.extend(words(group.split('}').next().unwrap_or("")));
        } else if let Some(w) = words(rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("")).first() {
            out.insert(w.clone());
        }
    }
    out
}

/// The strongly connected components of more than one module.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in g.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for m in g.keys() {
        let ring: Vec<String> = g.keys().filter(|n| *n == m || (reachable[m].contains(*n) && reachable[*n].contains(m))).cloned().collect();
        if ring.len() > 1 && !out.contains(&ring) {
            out.push(ring);
        }
    }
    out
}

/// Every crate root of the workspace: the crates' `src/`, the tool, and
/// the tests and benches that are directories.
fn crate_dirs() -> Vec<PathBuf> {
    let root = root();
    let mut dirs: Vec<PathBuf> = vec![root.join("src/bin/gres-rs")];
    for parent in ["crates", "tests", "benches"] {
        for e in fs::read_dir(root.join(parent)).into_iter().flatten().flatten() {
            let p = e.path();
            if p.join("src/lib.rs").is_file() {
                dirs.push(p.join("src"));
            } else if p.join("main.rs").is_file() {
                dirs.push(p);
            }
        }
    }
    dirs.sort();
    dirs
}

#[test]
fn no_module_import_circle_in_any_crate() {
    let dirs = crate_dirs();
    assert!(dirs.len() >= 10, "found only {dirs:?}");
    let mut found = Vec::new();
    for dir in &dirs {
        for ring in circles(&CrateSrc::read(dir).graph()) {
            found.push(format!("{}: {}", dir.strip_prefix(root()).unwrap_or(dir).display(), ring.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "modules that import each other (one concept a module, dependencies one way; CONTRIBUTING.md): {found:#?}");
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), ["b".to_string()].into()),
        ("b".to_string(), ["c".to_string()].into()),
        ("c".to_string(), ["a".to_string()].into()),
        ("d".to_string(), ["a".to_string()].into()),
    ]
    .into();
    assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
    let text = "use crate::{config::X, host};\nuse super::testbed;\nlet y = crate::quirks::f();\nfoo::crate::nope";
    assert_eq!(paths_after(text, "crate::"), ["config", "host", "X", "quirks"].iter().map(|s| s.to_string()).collect());
}
