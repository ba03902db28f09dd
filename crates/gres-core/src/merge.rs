//! gres/gpu's merge of the configured GRES records (slurm.conf and
//! gres.conf, already combined by slurmd) with the GPUs detected on the node
//! (AutoDetect or fake_gpus.conf), as the stock plugin does it:
//!
//! 1. Configured GPU records are cut into one record per GPU (per file of
//!    `File`, or `Count` copies without `File`); records of other GRES are
//!    set aside unchanged and come back after the GPUs; records with a
//!    count of 0 are dropped.
//! 2. Each detected GPU's type is cut down to the configured type it
//!    contains (any case): `tesla_v100-pcie-16gb` becomes `v100` when
//!    `v100` is configured.  Longer configured types are tried first, so
//!    `k20m1` is not taken for `k20m`.  When no configured record has a
//!    type, detected types that match none are dropped.
//! 3. Configured GPUs with a `File` are matched first, then those without:
//!    a detected GPU matches when the configured type and file (if given)
//!    are equal.  A match whose `Cores` or `Links` differ from the detected
//!    ones drops both (with an error).  A match keeps the detected record,
//!    with the configured env flags if they were set explicitly.
//! 4. Configured GPUs that match nothing are kept if they have a `File`,
//!    else dropped with an error; detected GPUs that match nothing are
//!    ignored with a warning.
//! 5. The GPUs are ordered by device file (natural order), then by their
//!    position in `Links` (the PCI bus order).
//!
//! Sorting uses the same top-down merge sort as glibc's `qsort()`, so the
//! order matches the stock plugin's even for ties and odd comparisons.

use std::cmp::Ordering;
use thiserror::Error;

use super::fake_gpus::to_log_line;
use super::hostlist;
use super::model::{ConfFlags, GresRecord, Log, LogLevel, LogLine};
use super::record_rules::{add_gres_record, links_validate, AffinityError};
use super::sort::{merge_sort_by, strnatcmp};
use super::text::contains_ignore_case;

/// Most single-GPU records one configured record may be cut into (a
/// `Count` without `File`); Slurm has no limit and would try to allocate
/// any count.
pub const MAX_SPLIT_COUNT: u64 = 1 << 16;

/// The merged records (GPUs first, then the other GRES) and what the stock
/// plugin would have logged on the way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeOutcome {
    pub records: Vec<GresRecord>,
    pub log: Vec<LogLine>,
}

/// What stops the merge (a `fatal()` in Slurm, or an input it cannot
/// handle).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MergeError {
    #[error(transparent)]
    Affinity(#[from] AffinityError),
    #[error("GRES {name} record with Count={count} cannot be split into more than {MAX_SPLIT_COUNT} single-GPU records")]
    TooManyDevices { name: String, count: u64 },
}

/// Natural order with missing strings last.
fn cmp_null_last(x: Option<&str>, y: Option<&str>) -> Ordering {
    match (x, y) {
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (None, None) => Ordering::Equal,
        (Some(x), Some(y)) => strnatcmp(x, y),
    }
}

fn by_file(x: &GresRecord, y: &GresRecord) -> Ordering {
    cmp_null_last(x.file.as_deref(), y.file.as_deref())
}

/// Untyped first, then longest type first, then type, then file.
fn by_type_name(x: &GresRecord, y: &GresRecord) -> Ordering {
    match (x.type_name.as_deref(), y.type_name.as_deref()) {
        (None, None) => Ordering::Equal,
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (Some(a), Some(b)) => b.len().cmp(&a.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())).then_with(|| by_file(x, y)),
    }
}

/// Cut the GPU records into one record per GPU; set the others aside.
fn split_conf(conf: Vec<GresRecord>, log: &mut Log) -> Result<(Vec<GresRecord>, Vec<GresRecord>), MergeError> {
    let mut single = Vec::new();
    let mut non_gpu = Vec::new();
    for rec in conf {
        if rec.count == 0 {
            continue;
        }
        if !rec.name.eq_ignore_ascii_case("gpu") {
            log.push_with(LogLevel::Debug2, || format!("preserving original `{}` GRES record", rec.name));
            non_gpu.push(rec);
            continue;
        }
        if rec.count == 1 {
            single.push(rec);
            continue;
        }
        match rec.file.as_deref() {
            None => {
                if rec.count > MAX_SPLIT_COUNT {
                    return Err(MergeError::TooManyDevices { name: rec.name, count: rec.count });
                }
                for _ in 0..rec.count {
                    single.push(add_gres_record(GresRecord { count: 1, ..rec.clone() })?);
                }
            }
            Some(file) => match hostlist::expand(file) {
                Ok(files) => {
                    for one in files {
                        single.push(add_gres_record(GresRecord { count: 1, file: Some(one), ..rec.clone() })?);
                    }
                }
                Err(e) => log.push_with(LogLevel::Error, || format!("Ignoring GPU record with invalid File={file}: {e}")),
            },
        }
    }
    Ok((single, non_gpu))
}

/// Cut each detected GPU's type down to the configured type it contains.
fn normalize_sys_types(system: Vec<GresRecord>, single: Vec<GresRecord>, log: &mut Log) -> (Vec<GresRecord>, Vec<GresRecord>) {
    if single.is_empty() {
        return (system, single);
    }
    let strip_type = !single.iter().any(|c| c.type_name.as_deref().is_some_and(|t| !t.is_empty()));
    let single = merge_sort_by(single, &mut by_type_name);
    let mut system = merge_sort_by(system, &mut by_type_name);
    let mut used = vec![false; single.len()];
    for sys in &mut system {
        let found =
            single.iter().enumerate().find(|(i, conf)| !used[*i] && contains_ignore_case(sys.type_name.as_deref(), conf.type_name.as_deref())).map(|(i, _)| i);
        match found {
            Some(i) => {
                used[i] = true;
                sys.type_name = single[i].type_name.clone();
            }
            None if strip_type => {
                log.push_with(LogLevel::Info, || {
                    format!(
                        "Could not find an unused configuration record with a GRES type that is a substring of system device `{}`. Setting system GRES type to NULL",
                        sys.type_name.as_deref().unwrap_or("(null)")
                    )
                });
                sys.type_name = None;
                sys.flags.clear(ConfFlags::HAS_TYPE);
            }
            None => {}
        }
    }
    (system, single)
}

/// Whether a configured GPU is this detected one (type and file, when
/// configured, are equal).
fn matches(conf: &GresRecord, sys: &GresRecord) -> bool {
    if sys.count == 0 {
        return false;
    }
    if conf.type_name.is_some() && conf.type_name != sys.type_name {
        return false;
    }
    if conf.file.is_some() && conf.file != sys.file {
        return false;
    }
    true
}

/// Whether configured `Cores` and `Links`, where both sides have them, agree
/// with the detected ones (Cores that could not be converted never agree).
fn same_cpus_and_links(conf: &GresRecord, sys: &GresRecord) -> bool {
    if conf.cpus.is_some() && conf.cpus_bitmap.is_none() {
        return false;
    }
    if let (Some(a), Some(b)) = (&conf.cpus_bitmap, &sys.cpus_bitmap) {
        if a != b {
            return false;
        }
    }
    if let (Some(a), Some(b)) = (&conf.links, &sys.links) {
        if a != b {
            return false;
        }
    }
    true
}

/// Order GPUs by their own position in `Links` (missing links last; an
/// invalid one sorts as -2 and is logged).
fn sort_by_links(gpus: Vec<GresRecord>, log: &mut Log) -> Vec<GresRecord> {
    let keyed: Vec<(Option<i64>, GresRecord)> = gpus
        .into_iter()
        .map(|r| {
            let index = r.links.as_deref().map(|links| match links_validate(links) {
                Ok(i) => i as i64,
                Err(e) => {
                    log.push_with(LogLevel::Error, || e.to_string());
                    log.push(LogLevel::Error, "_sort_gpu_by_links_order: invalid links value found");
                    -2
                }
            });
            (index, r)
        })
        .collect();
    let mut cmp = |x: &(Option<i64>, GresRecord), y: &(Option<i64>, GresRecord)| match (x.0, y.0) {
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (None, None) => Ordering::Equal,
        (Some(a), Some(b)) => a.cmp(&b),
    };
    merge_sort_by(keyed, &mut cmp).into_iter().map(|(_, r)| r).collect()
}

/// The stock gres/gpu merge (`_merge_system_gres_conf`): `conf` holds the
/// node's records of every GRES as slurmd passes them to the plugin,
/// `system` the detected GPUs (one per record).  Lines more verbose than
/// `log_max` are left out of the outcome's log.
pub fn merge_system_gres_conf(conf: Vec<GresRecord>, system: Vec<GresRecord>, log_max: LogLevel) -> Result<MergeOutcome, MergeError> {
    merge_system_gres_conf_copying(conf, system, log_max, ConfFlags(0))
}

/// [`merge_system_gres_conf`] of a release whose merge also copies the
/// `copied` flags of a configured record onto the detected record it
/// matches ([`crate::behaviour::Behaviour::merge_copied_flags`]).
pub fn merge_system_gres_conf_copying(
    conf: Vec<GresRecord>,
    system: Vec<GresRecord>,
    log_max: LogLevel,
    copied: ConfFlags,
) -> Result<MergeOutcome, MergeError> {
    let mut log = Log::new(log_max);
    log.push(LogLevel::Debug2, "gres_list_conf:");
    log.push_each(LogLevel::Debug2, &conf, to_log_line);

    let (single, non_gpu) = split_conf(conf, &mut log)?;
    let (system, single) = normalize_sys_types(system, single, &mut log);
    // Configured GPUs with a File are matched first; the others fill in.
    let single = merge_sort_by(single, &mut by_file);
    let mut system = merge_sort_by(system, &mut by_file);

    let mut gpus = Vec::new();
    for conf in single {
        let found = system.iter().position(|sys| matches(&conf, sys));
        let Some(j) = found else {
            if conf.file.is_some() {
                log.push(LogLevel::Debug, "Including the following config-only GPU:");
                log.push_with(LogLevel::Debug, || to_log_line(&conf));
                gpus.push(conf);
            } else {
                log.push(LogLevel::Error, "Discarding the following config-only GPU due to lack of File specification:");
                log.push_with(LogLevel::Error, || to_log_line(&conf));
            }
            continue;
        };
        if !same_cpus_and_links(&conf, &system[j]) {
            log.push(
                LogLevel::Error,
                "This GPU specified in [slurm|gres].conf has mismatching Cores or Links from the device found on the system. Ignoring it.",
            );
            log.push(LogLevel::Error, "[slurm|gres].conf:");
            log.push_with(LogLevel::Error, || to_log_line(&conf));
            log.push(LogLevel::Error, "system:");
            log.push_with(LogLevel::Error, || to_log_line(&system[j]));
            // The detected GPU is used up, but stays among the ignored ones.
            system[j].count = 0;
            continue;
        }
        let mut sys = system.remove(j);
        log.push(LogLevel::Debug, "Including the following GPU matched between system and configuration:");
        log.push_with(LogLevel::Debug, || to_log_line(&sys));
        if !conf.flags.has(ConfFlags::ENV_DEF) {
            sys.flags.clear(ConfFlags::ENV_SET);
            sys.flags.set(conf.flags.0 & ConfFlags::ENV_SET);
        }
        sys.flags.set(conf.flags.0 & copied.0);
        gpus.push(sys);
    }

    for sys in &mut system {
        if sys.count == 0 {
            sys.count = 1;
        }
    }
    if !system.is_empty() {
        log.push(LogLevel::Info, "WARNING: The following autodetected GPUs are being ignored:");
        log.push_each(LogLevel::Info, &system, to_log_line);
    }

    let mut records = Vec::new();
    if !gpus.is_empty() {
        let gpus = merge_sort_by(gpus, &mut by_file);
        let gpus = sort_by_links(gpus, &mut log);
        log.push(LogLevel::Debug2, "gres_list_gpu");
        log.push_each(LogLevel::Debug2, &gpus, to_log_line);
        records = gpus;
    }
    records.extend(non_gpu);
    Ok(MergeOutcome { records, log: log.into_lines() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_gpus::{parse_fake_gpus, to_parsable, CpuConv};
    use crate::model::{gres_build_id, Bitmap};
    use std::path::Path;

    /// Keep every log line.
    const ALL: LogLevel = LogLevel::Debug3;

    const ENV_DEFAULT: u32 = ConfFlags::ENV_SET | ConfFlags::ENV_DEF;

    fn system(text: &str) -> Vec<GresRecord> {
        parse_fake_gpus(text, Path::new("fake_gpus.conf"), CpuConv::Nvml).unwrap().records
    }

    /// A record slurmd makes from a slurm.conf `Gres=gpu[:type]:count`.
    fn slurm_conf_gpu(type_name: Option<&str>, count: u64) -> GresRecord {
        add_gres_record(GresRecord {
            name: "gpu".into(),
            count,
            cpu_cnt: 4,
            type_name: type_name.map(Into::into),
            flags: ConfFlags(ENV_DEFAULT),
            ..Default::default()
        })
        .unwrap()
    }

    /// A gres.conf GPU line with a File.
    fn gres_conf_gpu(file: &str, count: u64) -> GresRecord {
        add_gres_record(GresRecord { name: "gpu".into(), count, cpu_cnt: 4, file: Some(file.into()), flags: ConfFlags(ENV_DEFAULT), ..Default::default() })
            .unwrap()
    }

    fn parsable(out: &MergeOutcome) -> Vec<String> {
        out.records.iter().map(to_parsable).collect()
    }

    fn logged(out: &MergeOutcome, level: LogLevel, text: &str) -> usize {
        out.log.iter().filter(|l| l.level == level && l.message.contains(text)).count()
    }

    #[test]
    fn untyped_config_takes_detected_gpus_in_file_order() {
        let sys =
            system("tesla|4|0-1|(null)|/dev/nvidia1\ntesla|4|2-3|(null)|/dev/nvidia3\ntesla|4|2-3|(null)|/dev/nvidia4\ntesla|4|0-1|(null)|/dev/nvidia2\n");
        let out = merge_system_gres_conf(vec![slurm_conf_gpu(None, 4)], sys, ALL).unwrap();
        assert_eq!(
            parsable(&out),
            [
                "GRES_PARSABLE[gpu](1):(null)|4|0-1|(null)|/dev/nvidia1|HAS_FILE",
                "GRES_PARSABLE[gpu](1):(null)|4|0-1|(null)|/dev/nvidia2|HAS_FILE",
                "GRES_PARSABLE[gpu](1):(null)|4|2-3|(null)|/dev/nvidia3|HAS_FILE",
                "GRES_PARSABLE[gpu](1):(null)|4|2-3|(null)|/dev/nvidia4|HAS_FILE",
            ]
        );
        assert_eq!(logged(&out, LogLevel::Info, "Setting system GRES type to NULL"), 4);
        assert_eq!(logged(&out, LogLevel::Debug, "Including the following GPU matched"), 4);
        assert_eq!(logged(&out, LogLevel::Info, "being ignored"), 0);
    }

    #[test]
    fn fileless_and_linkless_gpus_order_like_slurms_test_suite() {
        let sys = system(
            "tesla|4|(null)|(null)|(null)\n\
             tesla|4|(null)|(null)|/dev/nvidia1\n\
             tesla|4|(null)|-1,0|(null)\n\
             tesla|4|(null)|-1,0|/dev/nvidia3\n\
             tesla|4|0-1|(null)|(null)\n\
             tesla|4|0-1|(null)|/dev/nvidia2\n\
             tesla|4|0-1|-1,0|(null)\n\
             tesla|4|0-1|-1,0|/dev/nvidia4\n",
        );
        let out = merge_system_gres_conf(vec![slurm_conf_gpu(None, 8)], sys, ALL).unwrap();
        assert_eq!(
            parsable(&out),
            [
                "GRES_PARSABLE[gpu](1):(null)|4|(null)|-1,0|/dev/nvidia3|HAS_FILE",
                "GRES_PARSABLE[gpu](1):(null)|4|0-1|-1,0|/dev/nvidia4|HAS_FILE",
                "GRES_PARSABLE[gpu](1):(null)|4|(null)|-1,0|(null)|",
                "GRES_PARSABLE[gpu](1):(null)|4|0-1|-1,0|(null)|",
                "GRES_PARSABLE[gpu](1):(null)|4|(null)|(null)|/dev/nvidia1|HAS_FILE",
                "GRES_PARSABLE[gpu](1):(null)|4|0-1|(null)|/dev/nvidia2|HAS_FILE",
                "GRES_PARSABLE[gpu](1):(null)|4|(null)|(null)|(null)|",
                "GRES_PARSABLE[gpu](1):(null)|4|0-1|(null)|(null)|",
            ]
        );
    }

    #[test]
    fn configured_type_is_cut_out_of_the_detected_one_in_any_case() {
        let sys = system("tesla_v100-pcie-16gb|4|0-1|(null)|/dev/nvidia1\ntesla_v100-pcie-16gb|4|2-3|(null)|/dev/nvidia0\n");
        for t in ["v100", "TESLA_V100", "pcie-16gb", "tesla_v100-pcie-16gb"] {
            let out = merge_system_gres_conf(vec![slurm_conf_gpu(Some(t), 2)], sys.clone(), ALL).unwrap();
            assert_eq!(
                parsable(&out),
                [
                    format!("GRES_PARSABLE[gpu](1):{t}|4|2-3|(null)|/dev/nvidia0|HAS_FILE,HAS_TYPE"),
                    format!("GRES_PARSABLE[gpu](1):{t}|4|0-1|(null)|/dev/nvidia1|HAS_FILE,HAS_TYPE"),
                ]
            );
        }
    }

    #[test]
    fn longer_types_are_matched_first() {
        let sys = system("tesla_k20m1|4|0-1|(null)|/dev/nvidia1\ntesla_k20m|4|0-1|(null)|/dev/nvidia2\ntesla_v100-sxm2-32gb|4|0-1|(null)|/dev/nvidia3\n");
        let conf = vec![slurm_conf_gpu(Some("k20m"), 1), slurm_conf_gpu(Some("k20m1"), 1), slurm_conf_gpu(Some("v100"), 1)];
        let out = merge_system_gres_conf(conf, sys, ALL).unwrap();
        let types: Vec<_> = out.records.iter().map(|r| (r.type_name.clone().unwrap(), r.file.clone().unwrap())).collect();
        assert_eq!(types, [("k20m1".into(), "/dev/nvidia1".into()), ("k20m".into(), "/dev/nvidia2".into()), ("v100".into(), "/dev/nvidia3".into())]);
        let sys = system("aa|4|0-1|(null)|/dev/nvidia2\naaa|4|0-1|(null)|/dev/nvidia1\na|4|0-1|(null)|/dev/nvidia3\naaaa|4|0-1|(null)|/dev/nvidia4\n");
        let conf = ["aaaa", "a", "aa", "aaa"].iter().map(|t| slurm_conf_gpu(Some(t), 1)).collect();
        let out = merge_system_gres_conf(conf, sys, ALL).unwrap();
        let types: Vec<_> = out.records.iter().map(|r| r.type_name.clone().unwrap()).collect();
        assert_eq!(types, ["aaa", "aa", "a", "aaaa"]);
    }

    #[test]
    fn extra_detected_gpus_are_ignored_with_a_warning() {
        let sys = system(
            "nvidia-p100|4|0-1|(null)|/dev/nvidia2\nnvidia-p100|4|0-1|(null)|/dev/nvidia6\nnvidia-p100|4|0-1|(null)|/dev/nvidia1\nnvidia-p100|4|0-1|(null)|/dev/nvidia10\n",
        );
        let out = merge_system_gres_conf(vec![slurm_conf_gpu(Some("p100"), 1)], sys, ALL).unwrap();
        assert_eq!(parsable(&out), ["GRES_PARSABLE[gpu](1):p100|4|0-1|(null)|/dev/nvidia1|HAS_FILE,HAS_TYPE"]);
        let warn = out.log.iter().position(|l| l.message == "WARNING: The following autodetected GPUs are being ignored:").unwrap();
        assert_eq!(out.log[warn].level, LogLevel::Info);
        // Natural order: nvidia2 before nvidia6 before nvidia10; the
        // unmatched ones keep the type they were detected with.
        let ignored: Vec<_> = out.log[warn + 1..warn + 4].iter().map(|l| l.message.clone()).collect();
        assert!(ignored[0].contains("Type:nvidia-p100") && ignored[0].contains("File:/dev/nvidia2"));
        assert!(ignored[1].contains("File:/dev/nvidia6"));
        assert!(ignored[2].contains("File:/dev/nvidia10"));
    }

    #[test]
    fn mismatching_cores_drop_the_gpu() {
        let sys = system("a|4|2-3|(null)|/dev/nvidia0\na|4|0-1|(null)|/dev/nvidia1\n");
        let mut c0 = gres_conf_gpu("/dev/nvidia0", 1);
        c0.cpus = Some("0-1".into());
        c0.cpus_bitmap = Some(Bitmap::from_indices(4, &[0, 1]));
        let mut c1 = gres_conf_gpu("/dev/nvidia1", 1);
        c1.cpus = Some("0-1".into());
        c1.cpus_bitmap = Some(Bitmap::from_indices(4, &[0, 1]));
        let out = merge_system_gres_conf(vec![c0, c1], sys, ALL).unwrap();
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.records[0].file.as_deref(), Some("/dev/nvidia1"));
        assert_eq!(logged(&out, LogLevel::Error, "has mismatching Cores or Links"), 1);
        assert_eq!(
            logged(&out, LogLevel::Error, "Cores(4):0-1  Links:(null) Flags:HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT File:/dev/nvidia0"),
            1
        );
        assert_eq!(logged(&out, LogLevel::Error, "Type:(null) Count:1 Cores(4):2-3  Links:(null) Flags:HAS_FILE File:/dev/nvidia0"), 1);
        // The detected GPU shows among the ignored ones, with count 1 again.
        assert_eq!(logged(&out, LogLevel::Info, "GRES[gpu] Type:(null) Count:1 Cores(4):2-3"), 1);
    }

    #[test]
    fn unconvertible_cores_never_match() {
        let sys = system("a|4|0-1|(null)|/dev/nvidia0\n");
        let mut conf = gres_conf_gpu("/dev/nvidia0", 1);
        conf.cpus = Some("0-1".into());
        let out = merge_system_gres_conf(vec![conf], sys, ALL).unwrap();
        assert!(out.records.is_empty());
    }

    #[test]
    fn mismatching_links_drop_the_gpu() {
        let sys = system("a|4|0-1|-1,0|/dev/nvidia0\n");
        let mut conf = gres_conf_gpu("/dev/nvidia0", 1);
        conf.links = Some("0,-1".into());
        let out = merge_system_gres_conf(vec![conf.clone()], sys.clone(), ALL).unwrap();
        assert!(out.records.is_empty());
        conf.links = Some("-1,0".into());
        assert_eq!(merge_system_gres_conf(vec![conf], sys, ALL).unwrap().records.len(), 1);
    }

    #[test]
    fn config_only_gpus_need_a_file() {
        let conf = vec![gres_conf_gpu("/dev/nvidia5", 1), slurm_conf_gpu(Some("x"), 1)];
        let out = merge_system_gres_conf(conf, Vec::new(), ALL).unwrap();
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.records[0].file.as_deref(), Some("/dev/nvidia5"));
        assert_eq!(logged(&out, LogLevel::Debug, "Including the following config-only GPU:"), 1);
        assert_eq!(logged(&out, LogLevel::Error, "Discarding the following config-only GPU due to lack of File specification:"), 1);
    }

    #[test]
    fn other_gres_come_after_the_gpus_and_zero_counts_go() {
        let mps = GresRecord { name: "mps".into(), count: 200, file: Some("/dev/nvidia0".into()), ..Default::default() };
        let nic0 = GresRecord { name: "nic".into(), count: 0, ..Default::default() };
        let nic1 = GresRecord { name: "nic".into(), count: 1, ..Default::default() };
        let gpu0 = GresRecord { count: 0, ..slurm_conf_gpu(None, 0) };
        let conf = vec![mps.clone(), gres_conf_gpu("/dev/nvidia[0-1]", 2), nic0, gpu0, nic1.clone()];
        let out = merge_system_gres_conf(conf, Vec::new(), ALL).unwrap();
        let names: Vec<_> = out.records.iter().map(|r| (r.name.as_str(), r.count, r.file.clone())).collect();
        assert_eq!(
            names,
            [
                ("gpu", 1, Some("/dev/nvidia0".to_string())),
                ("gpu", 1, Some("/dev/nvidia1".to_string())),
                ("mps", 200, Some("/dev/nvidia0".to_string())),
                ("nic", 1, None),
            ]
        );
        assert_eq!(out.records[2], mps);
        assert_eq!(out.records[3], nic1);
        assert_eq!(logged(&out, LogLevel::Debug2, "preserving original `mps` GRES record"), 1);
    }

    #[test]
    fn records_with_files_are_cut_per_file() {
        let sys = system("a_long|4|0|(null)|/dev/nvidia0\na_long|4|1|(null)|/dev/nvidia1\n");
        let mut conf = gres_conf_gpu("/dev/nvidia[0-1]", 2);
        conf.type_name = Some("a".into());
        conf.flags.set(ConfFlags::HAS_TYPE);
        let out = merge_system_gres_conf(vec![conf], sys, ALL).unwrap();
        assert_eq!(
            parsable(&out),
            ["GRES_PARSABLE[gpu](1):a|4|0|(null)|/dev/nvidia0|HAS_FILE,HAS_TYPE", "GRES_PARSABLE[gpu](1):a|4|1|(null)|/dev/nvidia1|HAS_FILE,HAS_TYPE"]
        );
    }

    #[test]
    fn multiple_files_and_unique_ids() {
        let sys = system("a100_1g.5gb|4|0|(null)|/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21|MIG-aaa\na100_1g.5gb|4|0|(null)|/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30|MIG-bbb\n");
        let mut conf = gres_conf_gpu("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30", 1);
        conf.flags.set(ConfFlags::HAS_MULT);
        let out = merge_system_gres_conf(vec![conf], sys, ALL).unwrap();
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.records[0].unique_id.as_deref(), Some("MIG-bbb"));
        assert_eq!(to_parsable(&out.records[0]), "GRES_PARSABLE[gpu](1):(null)|4|0|(null)|/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30|MIG-bbb|HAS_FILE");
        assert!(out.records[0].flags.has(ConfFlags::HAS_MULT));
    }

    #[test]
    fn gpus_are_ordered_by_links_then_file() {
        let sys = system("a|4|0|0,0,-1|/dev/nvidia0\na|4|0|(null)|/dev/nvidia1\na|4|0|-1,0,0|/dev/nvidia2\na|4|0|0,-1,0|/dev/nvidia3\n");
        let out = merge_system_gres_conf(vec![slurm_conf_gpu(None, 4)], sys, ALL).unwrap();
        let files: Vec<_> = out.records.iter().map(|r| r.file.clone().unwrap()).collect();
        assert_eq!(files, ["/dev/nvidia2", "/dev/nvidia3", "/dev/nvidia0", "/dev/nvidia1"]);
    }

    #[test]
    fn invalid_links_sort_first_and_are_logged() {
        let sys = system("a|4|0|-1,0|/dev/nvidia0\na|4|0|0,0|/dev/nvidia1\n");
        let out = merge_system_gres_conf(vec![slurm_conf_gpu(None, 2)], sys, ALL).unwrap();
        let files: Vec<_> = out.records.iter().map(|r| r.file.clone().unwrap()).collect();
        assert_eq!(files, ["/dev/nvidia1", "/dev/nvidia0"]);
        assert_eq!(logged(&out, LogLevel::Error, "invalid links value found"), 1);
    }

    /// The flags a release's merge copies from the configured record
    /// (`Behaviour::merge_copied_flags`: none, EXPLICIT, EXPLICIT|UUID).
    #[test]
    fn copied_flags_follow_the_behaviour() {
        let sys = system("a|4|0|(null)|/dev/nvidia0|(null)|nvidia_gpu_env\n");
        let mut conf = gres_conf_gpu("/dev/nvidia0", 1);
        conf.flags = ConfFlags(ConfFlags::HAS_FILE | ConfFlags::ENV_DEF | ConfFlags::EXPLICIT | ConfFlags::BIT14);
        let flags = |copied: u32| merge_system_gres_conf_copying(vec![conf.clone()], sys.clone(), ALL, ConfFlags(copied)).unwrap().records[0].flags.0;
        assert_eq!(flags(0), ConfFlags::HAS_FILE | ConfFlags::ENV_NVML);
        assert_eq!(flags(ConfFlags::EXPLICIT), ConfFlags::HAS_FILE | ConfFlags::ENV_NVML | ConfFlags::EXPLICIT);
        assert_eq!(flags(ConfFlags::EXPLICIT | ConfFlags::BIT14), ConfFlags::HAS_FILE | ConfFlags::ENV_NVML | ConfFlags::EXPLICIT | ConfFlags::BIT14);
        // The baseline merge is the one that copies nothing.
        assert_eq!(merge_system_gres_conf(vec![conf.clone()], sys.clone(), ALL).unwrap().records[0].flags.0, flags(0));
    }

    #[test]
    fn explicit_env_flags_of_the_config_win() {
        let sys = system("a|4|0|(null)|/dev/nvidia0|(null)|nvidia_gpu_env\n");
        let mut conf = gres_conf_gpu("/dev/nvidia0", 1);
        let out = merge_system_gres_conf(vec![conf.clone()], sys.clone(), ALL).unwrap();
        assert_eq!(out.records[0].flags.0, ConfFlags::HAS_FILE | ConfFlags::ENV_NVML);
        conf.flags = ConfFlags(ConfFlags::HAS_FILE | ConfFlags::ENV_RSMI);
        let out = merge_system_gres_conf(vec![conf.clone()], sys.clone(), ALL).unwrap();
        assert_eq!(out.records[0].flags.0, ConfFlags::HAS_FILE | ConfFlags::ENV_RSMI);
        conf.flags = ConfFlags(ConfFlags::HAS_FILE);
        let out = merge_system_gres_conf(vec![conf], sys, ALL).unwrap();
        assert_eq!(out.records[0].flags.0, ConfFlags::HAS_FILE);
    }

    #[test]
    fn typed_config_keeps_unmatched_detected_types() {
        let sys = system("a100|4|0|(null)|/dev/nvidia0\n");
        let out = merge_system_gres_conf(vec![slurm_conf_gpu(Some("h100"), 1)], sys, ALL).unwrap();
        assert!(out.records.is_empty());
        assert_eq!(logged(&out, LogLevel::Info, "Setting system GRES type to NULL"), 0);
        assert_eq!(logged(&out, LogLevel::Error, "Discarding the following config-only GPU"), 1);
        assert_eq!(logged(&out, LogLevel::Info, "Type:a100"), 1);
    }

    #[test]
    fn no_configured_gpu_ignores_every_detected_one() {
        let sys = system("a|4|0|(null)|/dev/nvidia0\n");
        let nic = GresRecord { name: "nic".into(), count: 1, ..Default::default() };
        let out = merge_system_gres_conf(vec![nic.clone()], sys, ALL).unwrap();
        assert_eq!(out.records, [nic]);
        assert_eq!(logged(&out, LogLevel::Info, "being ignored"), 1);
    }

    #[test]
    fn split_records_keep_their_fields() {
        let mut conf = slurm_conf_gpu(Some("t"), 3);
        conf.cpus = Some("1".into());
        conf.cpus_bitmap = Some(Bitmap::from_indices(4, &[1]));
        conf.links = Some("-1".into());
        let sys = system("t|4|1|-1|/dev/nvidia0\nt|4|1|-1|/dev/nvidia1\n");
        let out = merge_system_gres_conf(vec![conf], sys, ALL).unwrap();
        assert_eq!(out.records.len(), 2);
        assert_eq!(logged(&out, LogLevel::Error, "Discarding the following config-only GPU"), 1);
        assert!(out.records.iter().all(|r| r.plugin_id == gres_build_id("gpu")));
    }

    #[test]
    fn unworkable_inputs_are_errors() {
        let huge = slurm_conf_gpu(None, 1 << 40);
        assert_eq!(merge_system_gres_conf(vec![huge], Vec::new(), ALL), Err(MergeError::TooManyDevices { name: "gpu".into(), count: 1 << 40 }));
        let mut wide = slurm_conf_gpu(None, 2);
        wide.cpus_bitmap = Some(Bitmap::from_indices(64, &[40]));
        assert!(matches!(merge_system_gres_conf(vec![wide], Vec::new(), ALL), Err(MergeError::Affinity(_))));
        let mut bad_file = gres_conf_gpu("/dev/nvidia[0-1]", 2);
        bad_file.file = Some("/dev/nvidia[1-0]".into());
        let out = merge_system_gres_conf(vec![bad_file], Vec::new(), ALL).unwrap();
        assert!(out.records.is_empty());
        assert_eq!(logged(&out, LogLevel::Error, "Ignoring GPU record with invalid File=/dev/nvidia[1-0]"), 1);
    }
}
