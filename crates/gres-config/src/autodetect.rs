//! gres.conf's `AutoDetect=`: the detection modes and how each release
//! reads a value.

use gres_core::behaviour::{Behaviour, Feature};

/// A node's GPU detection mode (`AutoDetect=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AutoDetect {
    /// Not configured: the GPU plugin Slurm loads is `gpu/generic`.
    #[default]
    Unset,
    Nvml,
    Rsmi,
    OneApi,
    /// `nrt` ([`Behaviour::autodetect_nrt`]).
    Nrt,
    /// `nvidia` ([`Behaviour::autodetect_nvidia`]).
    Nvidia,
    /// `full` ([`Behaviour::autodetect_full`]): slurmd probes every gpu
    /// plugin.
    Full,
    /// Explicitly off (overrides a global setting for a node).
    Off,
}

/// Every `AutoDetect=` word with what it selects and the feature that says
/// whether a release knows it, in the order Slurm looks for them.
const AUTODETECT_WORDS: [(&str, AutoDetect, Option<Feature>); 6] = [
    ("full", AutoDetect::Full, Some(Feature::AutoDetectFull)),
    ("nvml", AutoDetect::Nvml, None),
    ("rsmi", AutoDetect::Rsmi, None),
    ("oneapi", AutoDetect::OneApi, None),
    ("nrt", AutoDetect::Nrt, Some(Feature::AutoDetectNrt)),
    ("nvidia", AutoDetect::Nvidia, Some(Feature::AutoDetectNvidia)),
];

impl AutoDetect {
    /// The baseline release's reading of a value (see [`AutoDetect::parse_for`]).
    pub fn parse(value: &str) -> Option<AutoDetect> {
        AutoDetect::parse_for(value, &Behaviour::BASELINE)
    }

    /// Slurm's reading of a value in the release that behaves as
    /// `behaviour`: the first of its words (`full`, `nvml`, `rsmi`,
    /// `oneapi`, `nrt`, `nvidia`, those it knows) found anywhere in the
    /// value (any case), else exactly `off` (any case); `None` when unknown.
    pub fn parse_for(value: &str, behaviour: &Behaviour) -> Option<AutoDetect> {
        let has = |word| gres_core::text::contains_ignore_case(Some(value), Some(word));
        let known = |f: &Option<Feature>| f.is_none_or(|f| behaviour.has(f));
        AUTODETECT_WORDS
            .iter()
            .find(|(word, _, f)| known(f) && has(word))
            .map(|(_, mode, _)| *mode)
            .or_else(|| value.eq_ignore_ascii_case("off").then_some(AutoDetect::Off))
    }

    /// The feature a value unknown to `behaviour`'s release would need:
    /// what a later release reads it as.
    pub fn later_feature(value: &str, behaviour: &Behaviour) -> Option<Feature> {
        if AutoDetect::parse_for(value, behaviour).is_some() {
            return None;
        }
        let has = |word| gres_core::text::contains_ignore_case(Some(value), Some(word));
        AUTODETECT_WORDS.iter().filter(|(word, _, _)| has(word)).find_map(|(_, _, f)| *f)
    }

    /// Slurm's name for the mode (`unset` when not configured).
    pub fn as_str(self) -> &'static str {
        match self {
            AutoDetect::Unset => "unset",
            AutoDetect::Nvml => "nvml",
            AutoDetect::Rsmi => "rsmi",
            AutoDetect::OneApi => "oneapi",
            AutoDetect::Nrt => "nrt",
            AutoDetect::Nvidia => "nvidia",
            AutoDetect::Full => "full",
            AutoDetect::Off => "off",
        }
    }
}
