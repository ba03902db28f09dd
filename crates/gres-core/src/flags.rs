//! The `Flags=` words of gres.conf and fake_gpus.conf, per release: which
//! words a release knows and their bits, and how Slurm finds them in a
//! value (`gres_flags_parse()`).  The remarks on words a release does not
//! know are gres-config's; how slurmd spells flags in its log,
//! gres-predict's.

use crate::behaviour::{Behaviour, Feature};
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

/// The `Flags=` words of the release that behaves as `behaviour` and
/// their bits, in the order `gres_flags_parse()` tests them (each word
/// anywhere in the value, in any case).
pub fn flag_words(behaviour: &Behaviour) -> Vec<(&'static str, u32)> {
    let mut words = FLAG_WORDS.to_vec();
    words.extend(LATER_FLAG_WORDS.iter().filter(|(_, _, f)| behaviour.has(*f)).map(|(w, bit, _)| (*w, *bit)));
    words
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
