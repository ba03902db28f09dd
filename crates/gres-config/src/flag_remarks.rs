//! The remarks gres.conf's `Flags=` values get: words only a later release
//! knows (this one ignores them) and words no release knows, with the
//! closest known word.

use gres_core::behaviour::{Behaviour, Feature};
use gres_core::flags::{FLAG_WORDS, LATER_FLAG_WORDS};
use gres_core::text::{closest_key, contains_ignore_case};

/// The words of a `Flags=` value that only later releases than
/// `behaviour`'s know (which ignores them): each with its byte offset in
/// `input` and its feature.
pub fn later_flag_words(input: &str, behaviour: &Behaviour) -> Vec<(usize, &'static str, Feature)> {
    let lower = input.to_ascii_lowercase();
    LATER_FLAG_WORDS.iter().filter(|(_, _, f)| !behaviour.has(*f)).filter_map(|(word, _, f)| lower.find(word).map(|at| (at, *word, *f))).collect()
}

/// The comma-separated words of a `Flags=` value in which Slurm finds no
/// word it knows (of any release: [`later_flag_words`] reports those of
/// later ones), so that it ignores them without a word: each with its byte
/// offset in `input` and the closest known word, if one is close.
pub fn unknown_flag_words(input: &str) -> Vec<(usize, &str, Option<&'static str>)> {
    let known: Vec<&'static str> =
        FLAG_WORDS.iter().map(|(w, _)| *w).chain(LATER_FLAG_WORDS.iter().map(|(w, _, _)| *w)).chain(["no_gpu_env", "all_sharing"]).collect();
    let mut out = Vec::new();
    let mut at = 0;
    for word in input.split(',') {
        let trimmed = word.trim();
        let lead = word.len() - word.trim_start().len();
        if !trimmed.is_empty() && !known.iter().any(|k| contains_ignore_case(Some(trimmed), Some(k))) {
            let lower = trimmed.to_ascii_lowercase();
            let lowered: Vec<String> = known.iter().map(|k| k.to_ascii_lowercase()).collect();
            let candidates: Vec<&str> = lowered.iter().map(String::as_str).collect();
            let close = closest_key(&lower, &candidates).and_then(|c| known.iter().find(|k| k.eq_ignore_ascii_case(c)).copied());
            out.push((at + lead, trimmed, close));
        }
        at += word.len() + 1;
    }
    out
}
