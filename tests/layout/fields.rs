//! The real structs' member names, read from the preprocessed probe: every
//! one must be in our struct.

use crate::header::Header;
use crate::tokens::{is_ident, matching, split_top, tokenize, Other};
use std::collections::BTreeSet;

/// Every field of each real struct must be in ours (ours having a field the
/// real one lacks fails the probe's compile already).  The real fields come
/// from the preprocessed probe: the last `} NAME;` definition's body.
pub fn check_fields_complete(h: &Header, preprocessed: &str, problems: &mut Vec<String>) {
    let tokens = tokenize(preprocessed, Other::Token);
    for st in &h.structs {
        if st.name.starts_with("struct ") {
            continue;
        }
        let Some(real) = struct_fields(&tokens, &st.name) else {
            problems.push(format!("{}: no `}} {};` definition found in the preprocessed real headers", st.name, st.name));
            continue;
        };
        let ours: BTreeSet<&str> = st.fields.iter().map(|f| f.name.as_str()).collect();
        let missing: Vec<&str> = real.iter().map(String::as_str).filter(|f| !ours.contains(f)).collect();
        if !missing.is_empty() {
            problems.push(format!("{}: the real struct has field(s) ours lacks: {} (real fields: {})", st.name, missing.join(", "), real.join(", ")));
        }
    }
}

/// The member names of the last `{ ... } NAME ;` in `tokens`.
fn struct_fields(tokens: &[String], name: &str) -> Option<Vec<String>> {
    let end = (2..tokens.len()).rev().find(|&i| tokens[i] == ";" && tokens[i - 1] == name && tokens[i - 2] == "}")? - 2;
    let mut depth = 0;
    let open = (0..=end).rev().find(|&i| {
        match tokens[i].as_str() {
            "}" => depth += 1,
            "{" => depth -= 1,
            _ => {}
        }
        depth == 0
    })?;
    let mut names = Vec::new();
    member_names(&tokens[open + 1..end], &mut names);
    Some(names)
}

fn member_names(body: &[String], names: &mut Vec<String>) {
    for decl in split_top(body, ";") {
        if decl.is_empty() {
            continue;
        }
        if let Some(open) = decl.iter().position(|t| t == "{") {
            // nested struct/union: its declarators follow the `}`; an
            // anonymous one contributes its own members.
            let close = matching(decl, open);
            let after = &decl[close + 1..];
            if after.is_empty() {
                member_names(&decl[open + 1..close], names);
            } else {
                declarator_names(after, names);
            }
            continue;
        }
        let decl = match decl.iter().position(|t| t == "__attribute__") {
            Some(a) => &decl[..a],
            None => decl,
        };
        // Drop the type: declarator names are in the comma-separated parts.
        declarator_names(decl, names);
    }
}

fn declarator_names(decl: &[String], names: &mut Vec<String>) {
    for part in split_top(decl, ",") {
        if let Some(p) = part.windows(2).position(|w| w[0] == "(" && w[1] == "*") {
            if let Some(n) = part[p + 2..].iter().find(|t| is_ident(t) && !matches!(t.as_str(), "const" | "volatile" | "restrict")) {
                names.push(n.clone());
            }
            continue;
        }
        // the last identifier before any `[`, `:` (bit-field) or `=`
        let cut = part.iter().position(|t| t == "[" || t == ":" || t == "=").unwrap_or(part.len());
        if let Some(n) = part[..cut].iter().rev().find(|t| is_ident(t)) {
            names.push(n.clone());
        }
    }
}
