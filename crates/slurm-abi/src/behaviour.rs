//! The one place that maps Slurm releases to their [`Behaviour`]: the core
//! and the plugins only read the data.  Each boundary below was read in the
//! source of the releases (docs: `slurm-headers/README.md`, "What changed
//! when", and the notes' §7, §9.1 row E, §10.4).

use gres_core::behaviour::{Behaviour, ConfBit14, Feature, UniqueIdInEnv};
use gres_core::model::ConfFlags;
use std::sync::OnceLock;

/// A release as `(major, minor, micro)`, e.g. `(23, 11, 4)`.
pub type Release = (u32, u32, u32);

/// The series this project builds for, oldest first.
pub const SERIES: [(u32, u32); 8] = [(22, 5), (23, 2), (23, 11), (24, 5), (24, 11), (25, 5), (25, 11), (26, 5)];

/// Every release at which a field of [`Behaviour`] changes, oldest first
/// (what [`first_release`] can answer).
const BOUNDARIES: [Release; 9] = [(22, 5, 0), (23, 2, 0), (23, 2, 7), (23, 11, 0), (23, 11, 4), (24, 5, 0), (24, 11, 0), (25, 11, 0), (26, 5, 0)];

/// How release `major.minor.micro` behaves.  `None` for a series this
/// project does not build for.
pub fn for_release(major: u32, minor: u32, micro: u32) -> Option<Behaviour> {
    if !SERIES.contains(&(major, minor)) {
        return None;
    }
    let at_least = |r: Release| (major, minor, micro) >= r;
    let conf_bit14 = if at_least((26, 5, 0)) {
        ConfBit14::Uuid
    } else if at_least((23, 11, 4)) {
        ConfBit14::GlobalIndex
    } else {
        ConfBit14::Unused
    };
    let unique_id_in_env = if at_least((26, 5, 0)) {
        UniqueIdInEnv::UuidFlag
    } else if at_least((25, 11, 0)) {
        UniqueIdInEnv::MigOnly
    } else {
        UniqueIdInEnv::Always
    };
    let merge_copied_flags = if at_least((26, 5, 0)) {
        ConfFlags(ConfFlags::EXPLICIT | ConfFlags::BIT14)
    } else if at_least((25, 11, 0)) {
        ConfFlags(ConfFlags::EXPLICIT)
    } else {
        ConfFlags(0)
    };
    Some(Behaviour {
        conf_bit14,
        unique_id_in_env,
        mig_conf_flag: at_least((25, 11, 0)),
        nvml_whole_gpu_unique_id: at_least((25, 11, 0)),
        core_reads_fake_gpus: at_least((26, 5, 0)),
        merge_copied_flags,
        autodetect_nrt: at_least((23, 11, 0)),
        autodetect_nvidia: at_least((24, 11, 0)),
        autodetect_full: at_least((26, 5, 0)),
        flag_explicit: at_least((23, 2, 0)),
        flag_env_uuid: at_least((26, 5, 0)),
        stateless_env: at_least((23, 2, 0)),
        shared_task_env_order_fixed: at_least((23, 2, 7)),
        device_flags_on_wire: at_least((25, 11, 0)),
        prep_node_index_checked: at_least((25, 11, 0)),
        nvml_versioned_lib: at_least((24, 5, 0)),
        record_line_flags: at_least((23, 2, 0)),
        any_flags_drop_default_env: at_least((23, 2, 0)) && !at_least((26, 5, 0)),
        init_list_line_spelled: at_least((23, 2, 0)),
        usage_tres_independent: at_least((23, 11, 0)),
        mig_type_from_nvml_name: at_least((23, 2, 0)),
        autodetect_conf_flag: at_least((24, 11, 0)),
        mig_unreadable_reports_gpu: at_least((24, 11, 0)),
        gpu_freq_def_builtin: !at_least((23, 2, 0)),
        gpu_locked_clocks: at_least((26, 5, 0)),
        gpu_affinity_enabled_cpus: at_least((23, 2, 0)),
    })
}

/// The release this build is for (`SLURM_VERSION_NUMBER`, `0xMMmmuu`).
pub const BUILD: Release = (crate::SLURM_VERSION_NUMBER >> 16, (crate::SLURM_VERSION_NUMBER >> 8) & 0xff, crate::SLURM_VERSION_NUMBER & 0xff);

/// How the release this build is for behaves.
pub fn build() -> &'static Behaviour {
    static BEHAVIOUR: OnceLock<Behaviour> = OnceLock::new();
    BEHAVIOUR
        .get_or_init(|| for_release(BUILD.0, BUILD.1, BUILD.2).unwrap_or_else(|| panic!("built for {}, a release without a behaviour", crate::SLURM_VERSION)))
}

/// The first release from which `feature` exists, as Slurm writes it
/// (`26.05.0`).
pub fn first_release(feature: Feature) -> Option<String> {
    BOUNDARIES.iter().find(|r| for_release(r.0, r.1, r.2).is_some_and(|b| b.has(feature))).map(|r| format_release(*r))
}

/// `major.minor.micro` as Slurm writes it (`23.02.7`).
pub fn format_release(r: Release) -> String {
    format!("{}.{:02}.{}", r.0, r.1, r.2)
}

/// A release as users write it: `24.11` (its first point release) or
/// `24.11.5`.  `Err` says why it is refused.
pub fn parse_release(text: &str) -> Result<Release, String> {
    let parts: Vec<&str> = text.trim().split('.').collect();
    let numbers: Option<Vec<u32>> = parts.iter().map(|p| if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) { p.parse().ok() } else { None }).collect();
    let release = match numbers.as_deref() {
        Some([major, minor]) => (*major, *minor, 0),
        Some([major, minor, micro]) => (*major, *minor, *micro),
        _ => return Err(format!("'{text}' is not a Slurm release: want MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 24.11 or 24.11.5")),
    };
    if !SERIES.contains(&(release.0, release.1)) {
        let supported: Vec<String> = SERIES.iter().map(|(a, b)| format!("{a}.{b:02}")).collect();
        return Err(format!("Slurm {text} is not supported: supported series are {}", supported.join(", ")));
    }
    Ok(release)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(major: u32, minor: u32, micro: u32) -> Behaviour {
        for_release(major, minor, micro).unwrap()
    }

    #[test]
    fn release_22_05_is_the_baseline() {
        assert_eq!(b(22, 5, 8), Behaviour::BASELINE);
        assert_eq!(b(22, 5, 0), Behaviour::default());
    }

    #[test]
    fn mid_series_boundaries() {
        assert!(!b(23, 2, 6).shared_task_env_order_fixed && b(23, 2, 7).shared_task_env_order_fixed);
        assert!(b(23, 2, 0).stateless_env && b(23, 2, 0).flag_explicit);
        assert!(!b(22, 5, 8).init_list_line_spelled && b(23, 2, 0).init_list_line_spelled && b(26, 5, 3).init_list_line_spelled);
        assert_eq!(b(23, 11, 3).conf_bit14, ConfBit14::Unused);
        assert_eq!(b(23, 11, 4).conf_bit14, ConfBit14::GlobalIndex);
        assert!(b(23, 11, 0).autodetect_nrt && !b(23, 2, 8).autodetect_nrt);
    }

    #[test]
    fn later_series() {
        assert!(b(24, 11, 0).autodetect_nvidia && !b(24, 5, 8).autodetect_nvidia);
        assert!(!b(23, 11, 11).nvml_versioned_lib && b(24, 5, 0).nvml_versioned_lib && b(26, 5, 3).nvml_versioned_lib);
        assert_eq!(b(25, 5, 8).unique_id_in_env, UniqueIdInEnv::Always);
        let b2511 = b(25, 11, 7);
        assert_eq!(
            (b2511.unique_id_in_env, b2511.conf_bit14, b2511.merge_copied_flags),
            (UniqueIdInEnv::MigOnly, ConfBit14::GlobalIndex, ConfFlags(ConfFlags::EXPLICIT))
        );
        assert!(b2511.device_flags_on_wire && !b(25, 5, 8).device_flags_on_wire && b(26, 5, 0).device_flags_on_wire);
        assert!(b2511.mig_conf_flag && b2511.nvml_whole_gpu_unique_id && !b2511.core_reads_fake_gpus && !b2511.flag_env_uuid);
        let b2605 = b(26, 5, 3);
        assert_eq!((b2605.unique_id_in_env, b2605.conf_bit14), (UniqueIdInEnv::UuidFlag, ConfBit14::Uuid));
        assert!(b2605.core_reads_fake_gpus && b2605.autodetect_full && b2605.flag_env_uuid);
        assert_eq!(b2605.merge_copied_flags, ConfFlags(ConfFlags::EXPLICIT | ConfFlags::BIT14));
        assert_eq!(for_release(21, 8, 0), None);
        assert_eq!(for_release(24, 8, 0), None);
    }

    #[test]
    fn first_releases() {
        let first = |f| first_release(f).unwrap();
        assert_eq!(first(Feature::AutoDetectNrt), "23.11.0");
        assert_eq!(first(Feature::AutoDetectNvidia), "24.11.0");
        assert_eq!(first(Feature::AutoDetectFull), "26.05.0");
        assert_eq!(first(Feature::FlagExplicit), "23.02.0");
        assert_eq!(first(Feature::FlagEnvUuid), "26.05.0");
    }

    #[test]
    fn releases_as_users_write_them() {
        assert_eq!(parse_release("24.11"), Ok((24, 11, 0)));
        assert_eq!(parse_release("23.11.4"), Ok((23, 11, 4)));
        assert_eq!(parse_release("26.05.5"), Ok((26, 5, 5)));
        assert_eq!(
            parse_release("21.08"),
            Err("Slurm 21.08 is not supported: supported series are 22.05, 23.02, 23.11, 24.05, 24.11, 25.05, 25.11, 26.05".into())
        );
        assert_eq!(parse_release("24"), Err("'24' is not a Slurm release: want MAJOR.MINOR or MAJOR.MINOR.MICRO, e.g. 24.11 or 24.11.5".into()));
        assert!(parse_release("24.11.x").is_err() && parse_release("24.11.5.1").is_err());
    }

    #[test]
    fn this_build_has_a_behaviour() {
        let _ = build();
    }
}
