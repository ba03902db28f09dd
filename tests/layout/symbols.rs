//! Functions: the real declarations (`cc -aux-info`), the `slurm_X` alias
//! of `X`, and libslurmfull's dynamic symbols.

use crate::header::Function;
use crate::util::s;
use gres_test_harness as harness;
use std::collections::HashMap;
use std::fs;
use std::path::Path;

/// Functions declared by Slurm's headers, from `cc -aux-info`:
/// `/* path:line:NC */ extern void *list_append (List, void *);`
/// Returns name -> the declaration line (for messages).
pub fn aux_info_functions(aux: &Path, src: &Path) -> HashMap<String, String> {
    let text = fs::read_to_string(aux).unwrap();
    let src = s(src);
    let mut map = HashMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("/* ") else {
            continue;
        };
        let Some((loc, decl)) = rest.split_once(" */ ") else {
            continue;
        };
        if !loc.starts_with(&src) {
            continue;
        }
        let Some(paren) = decl.find(" (") else {
            continue;
        };
        let before = &decl[..paren];
        let name: String = before.chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<Vec<_>>().into_iter().rev().collect();
        if !name.is_empty() {
            let file = loc.strip_prefix(&src).unwrap_or(loc).trim_start_matches('/');
            map.insert(name, format!("{} [{}]", decl.trim(), file.rsplit_once(':').map_or(file, |x| x.0)));
        }
    }
    map
}

/// `slurm_X` is libslurmfull's alias of `X`; Slurm's headers declare one of
/// the two spellings.
pub fn resolve_real_name(f: &Function, declared: &HashMap<String, String>) -> Option<String> {
    let mut candidates = vec![f.name.clone()];
    if let Some(u) = f.name.strip_prefix("slurm_") {
        candidates.push(u.to_string());
    }
    candidates.into_iter().find(|c| declared.contains_key(c))
}

/// When our `slurm_X` was checked against the real `X`, both symbols must be
/// the same function in libslurmfull.so.
pub fn check_alias(ours: &str, real: &str, lib: &Path, symbols: &HashMap<String, String>, problems: &mut Vec<String>) {
    match (symbols.get(ours), symbols.get(real)) {
        (Some(a), Some(b)) if a == b => {}
        (Some(_), Some(_)) => problems.push(format!(
            "{ours} and {real} are different functions in {}; the prototype \
             check compared {ours} with {real}'s declaration",
            lib.display()
        )),
        // A missing symbol is reported by exports_<series>.
        _ => {}
    }
}

/// Looks for a declaration `NAME (` or `slurm_NAME (`-less spelling in any
/// header of the source tree (for the "add it to REAL_HEADERS" message).
pub fn grep_declaration(src: &Path, name: &str) -> Option<String> {
    let mut names = vec![name.to_string()];
    if let Some(u) = name.strip_prefix("slurm_") {
        names.push(u.to_string());
    }
    let mut stack = vec![src.join("src"), src.join("slurm")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "h") {
                let Ok(text) = fs::read_to_string(&p) else {
                    continue;
                };
                let tokens_hit = names.iter().any(|n| {
                    text.match_indices(n.as_str()).any(|(i, _)| {
                        let pre = text[..i].chars().next_back();
                        let post = text[i + n.len()..].trim_start().starts_with('(');
                        post && !pre.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') && !text[..i].trim_end().ends_with("define")
                    })
                });
                if tokens_hit {
                    return Some(p.strip_prefix(src).unwrap_or(&p).display().to_string());
                }
            }
        }
    }
    None
}

/// Defined dynamic function symbols: name -> address.
pub fn dynamic_function_symbols(lib: &Path) -> HashMap<String, String> {
    harness::dynamic_symbols(lib)
        .into_iter()
        .filter(|s| matches!(s.kind.as_str(), "T" | "t" | "W" | "w" | "i"))
        .filter_map(|s| Some((s.name, s.address?)))
        .collect()
}
