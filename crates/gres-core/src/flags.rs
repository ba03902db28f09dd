//! The `Flags=` words of gres.conf and fake_gpus.conf, per release: which
//! words a release knows and their bits, how Slurm finds them in a value
//! (`gres_flags_parse()`), the words only later releases know or none
//! does, and how a release spells the flags back (`gres_flags2str()`).

use crate::behaviour::{Behaviour, ConfBit14, Feature};
use crate::model::ConfFlags;
use crate::text::contains_ignore_case;

/// What a `Flags=` value says (`gres_flags_parse()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParsedFlags {
    /// `CountOnly`, the `*_env` words and `one_sharing`.
    pub flags: ConfFlags,
    /// `no_gpu_env`: no GPU environment variable at all.
    pub no_gpu_env: bool,
    /// `one_sharing` or `all_sharing` was written.
    pub sharing_mentioned: bool,
}

/// The flag words and their bits.  Like Slurm, each word is looked for
/// anywhere in the value, in any case, so `Flags=nvidia_gpu_env,CountOnly`,
/// `flags=COUNTONLY` and even `Flags=xCountOnlyx` all count.
pub const FLAG_WORDS: [(&str, u32); 6] = [
    ("CountOnly", ConfFlags::COUNT_ONLY),
    ("nvidia_gpu_env", ConfFlags::ENV_NVML),
    ("amd_gpu_env", ConfFlags::ENV_RSMI),
    ("intel_gpu_env", ConfFlags::ENV_ONEAPI),
    ("opencl_env", ConfFlags::ENV_OPENCL),
    ("one_sharing", ConfFlags::ONE_SHARING),
];

/// The flag words of later releases, with their bits and what says
/// whether a release has them ([`flag_words`]).
pub const LATER_FLAG_WORDS: [(&str, u32, Feature); 2] =
    [("explicit", ConfFlags::EXPLICIT, Feature::FlagExplicit), ("env_uuid", ConfFlags::BIT14, Feature::FlagEnvUuid)];

/// Slurm's `gres_flags_parse()` (of the baseline release).
pub fn parse_flags(input: &str) -> ParsedFlags {
    parse_flags_for(input, &Behaviour::BASELINE)
}

/// `gres_flags_parse()` of the release that behaves as `behaviour`.
pub fn parse_flags_for(input: &str, behaviour: &Behaviour) -> ParsedFlags {
    let has = |word: &str| contains_ignore_case(Some(input), Some(word));
    let mut flags = ConfFlags::default();
    for (word, bit) in flag_words(behaviour) {
        if has(word) {
            flags.set(bit);
        }
    }
    ParsedFlags { flags, no_gpu_env: has("no_gpu_env"), sharing_mentioned: flags.has(ConfFlags::ONE_SHARING) || has("all_sharing") }
}

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
            let close = crate::text::closest_key(&lower, &candidates).and_then(|c| known.iter().find(|k| k.eq_ignore_ascii_case(c)).copied());
            out.push((at + lead, trimmed, close));
        }
        at += word.len() + 1;
    }
    out
}

/// The `Flags=` words of the release that behaves as `behaviour` and
/// their bits, in the order `gres_flags_parse()` tests them (each word
/// anywhere in the value, in any case).
pub fn flag_words(behaviour: &Behaviour) -> Vec<(&'static str, u32)> {
    let mut words = FLAG_WORDS.to_vec();
    words.extend(LATER_FLAG_WORDS.iter().filter(|(_, _, f)| behaviour.has(*f)).map(|(w, bit, _)| (*w, *bit)));
    words
}

/// [`flags_to_string`](crate::model::flags_to_string) as release `b`'s `gres_flags2str()` spells them
/// (`src/interfaces/gres.c`): `Explicit` after `CountOnly` where the
/// release has the flag (23.02+), `UUID` after `ENV_NVML` where bit 14 is
/// `GRES_CONF_UUID` (26.05+), `MIG` last where the release has it
/// (25.11+).
pub fn flags_to_string_as(flags: ConfFlags, b: &Behaviour) -> String {
    let explicit = b.flag_explicit && flags.has(ConfFlags::EXPLICIT);
    let uuid = b.conf_bit14 == ConfBit14::Uuid && flags.has(ConfFlags::BIT14);
    let mig = b.mig_conf_flag && flags.has(ConfFlags::MIG);
    let names: Vec<&str> = [
        (flags.has(ConfFlags::COUNT_ONLY), "CountOnly"),
        (explicit, "Explicit"),
        (flags.has(ConfFlags::HAS_FILE), "HAS_FILE"),
        (flags.has(ConfFlags::LOADED), "LOADED"),
        (flags.has(ConfFlags::HAS_TYPE), "HAS_TYPE"),
        (flags.has(ConfFlags::ENV_NVML), "ENV_NVML"),
        (uuid, "UUID"),
        (flags.has(ConfFlags::ENV_RSMI), "ENV_RSMI"),
        (flags.has(ConfFlags::ENV_ONEAPI), "ENV_ONEAPI"),
        (flags.has(ConfFlags::ENV_OPENCL), "ENV_OPENCL"),
        (flags.has(ConfFlags::ENV_DEF), "ENV_DEFAULT"),
        (flags.has(ConfFlags::SHARED), "SHARED"),
        (flags.has(ConfFlags::ONE_SHARING), "ONE_SHARING"),
        (mig, "MIG"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, n)| n)
    .collect();
    names.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_words_any_case_anywhere() {
        let f = parse_flags("NVIDIA_GPU_ENV,countonly");
        assert_eq!(f.flags, ConfFlags(ConfFlags::ENV_NVML | ConfFlags::COUNT_ONLY));
        assert!(!f.no_gpu_env && !f.sharing_mentioned);
        let f = parse_flags("no_gpu_env");
        assert_eq!(f.flags, ConfFlags(0));
        assert!(f.no_gpu_env);
        assert!(parse_flags("All_Sharing").sharing_mentioned);
        let f = parse_flags("one_sharing,amd_gpu_env,intel_gpu_env,opencl_env");
        assert!(f.sharing_mentioned);
        assert_eq!(f.flags, ConfFlags(ConfFlags::ONE_SHARING | ConfFlags::ENV_RSMI | ConfFlags::ENV_ONEAPI | ConfFlags::ENV_OPENCL));
        assert_eq!(parse_flags("").flags, ConfFlags(0));
    }

    #[test]
    fn baseline_has_six_words() {
        assert_eq!(flag_words(&Behaviour::default()).len(), 6);
    }

    #[test]
    fn flag_words_follow_the_behaviour() {
        let b = Behaviour { flag_explicit: true, flag_env_uuid: true, ..Default::default() };
        let words: Vec<&str> = flag_words(&b).iter().map(|(w, _)| *w).collect();
        assert_eq!(words, ["CountOnly", "nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env", "one_sharing", "explicit", "env_uuid"]);
        assert!(b.has(Feature::FlagEnvUuid) && !b.has(Feature::AutoDetectFull));
    }
}
