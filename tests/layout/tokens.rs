//! The C tokenizer, for both C texts the test reads: our header (parsed
//! into the list of things to check, `header`) and the preprocessed real
//! headers (searched for the real structs' member names, `fields`).
//!
//! Identifiers and numbers are one token each (`[A-Za-z0-9_]+`), `...` and
//! `<<` are one token, and every other punctuation character is a token of
//! its own.  The one difference between the two users is what a character
//! outside our header's C subset does ([`Other`]).

use std::cell::RefCell;

thread_local! {
    /// The header being parsed, for the parser's messages.
    static PARSING: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Names the header being parsed in the messages of [`parsing`].
pub fn set_parsing(header: String) {
    PARSING.with(|p| *p.borrow_mut() = header);
}

/// The header being parsed, for messages.
pub fn parsing() -> String {
    PARSING.with(|p| p.borrow().clone())
}

/// What [`tokenize`] does with a character outside the C subset of our
/// headers (`{}()[]*,;=|&+-~!:<>?`, identifiers, numbers, `...`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Other {
    /// Panic, naming the header being parsed: our header must stay in the
    /// subset the parser understands, rather than have a part skipped.
    Refuse,
    /// Make it a token of its own: the preprocessed real headers use all of
    /// C, and only identifiers and brackets are looked at there.
    Token,
}

pub fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/").expect("unterminated comment") + i + 4;
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            out.push(' ');
            i = end;
        } else if b[i..].starts_with(b"//") {
            i += text[i..].find('\n').unwrap_or(text.len() - i);
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

pub fn tokenize(code: &str, other: Other) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if chars[i..].starts_with(&['.', '.', '.']) {
            tokens.push("...".into());
            i += 3;
        } else if c == '<' && chars.get(i + 1) == Some(&'<') {
            tokens.push("<<".into());
            i += 2;
        } else if other == Other::Token || "{}()[]*,;=|&+-~!:<>?".contains(c) {
            tokens.push(c.to_string());
            i += 1;
        } else {
            panic!("{}: tokenizer does not handle {c:?} (extend tests/layout/tokens.rs)", parsing());
        }
    }
    tokens
}

/// Splits at `sep` tokens that are outside any (), [] or {}.
pub fn split_top<'a>(tokens: &'a [String], sep: &str) -> Vec<&'a [String]> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ if t == sep && depth == 0 => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

pub fn is_ident(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

pub fn matching(tokens: &[String], open: usize) -> usize {
    let (o, c) = match tokens[open].as_str() {
        "(" => ("(", ")"),
        "{" => ("{", "}"),
        "[" => ("[", "]"),
        t => panic!("no bracket at {t}"),
    };
    let mut depth = 0;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        if t == o {
            depth += 1;
        } else if t == c {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    panic!("{}: unbalanced {o}", parsing());
}

pub fn join(tokens: &[String]) -> String {
    tokens.join(" ")
}
