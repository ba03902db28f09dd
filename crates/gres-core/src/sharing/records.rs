//! gres/mps and gres/shard's `node_config_load`: the node's records
//! rewritten as the stock plugins rewrite them (each GPU record split per
//! device file, one shared record per GPU, counts spread or taken per
//! `File`), the device list and the per-GPU counts.

use super::{SharedDev, SharedKind, SHARING_NAME};
use crate::devices::{self, DevStat};
use crate::fake_gpus::{to_log_line, to_parsable};
use crate::hostlist;
use crate::model::{gres_build_id, ConfFlags, GresDevice, GresRecord, Log, LogLevel, LogLine};

/// What [`load`] works on.
pub struct LoadInput<'a> {
    /// The node's records as slurmd passes them (every GRES).
    pub records: &'a [GresRecord],
    pub kind: SharedKind,
    /// Build the device list (only slurmd looks at device files).
    pub in_slurmd: bool,
    /// `DebugFlags=Gres`: the record lists are logged at verbose, else debug.
    pub debug_gres: bool,
    /// The release spells the line before the first list `Initialized`
    /// (22.05: `Initalized`; [`Behaviour::init_list_line_spelled`]).
    ///
    /// [`Behaviour::init_list_line_spelled`]: crate::behaviour::Behaviour::init_list_line_spelled
    pub init_list_line_spelled: bool,
    /// `fake_gpus.conf` exists: also log the final list in the parsable form
    /// that Slurm's own tests read.
    pub fake_gpus: bool,
    pub stat: &'a dyn Fn(&str) -> Result<DevStat, String>,
    /// The most verbose level the daemon logs: lines above it are not built.
    pub log_max: LogLevel,
}

/// What [`load`] produces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The node's records, rewritten: this replaces slurmd's list.
    pub records: Vec<GresRecord>,
    pub devices: Vec<GresDevice>,
    /// Per GPU: this GRES's count.
    pub counts: Vec<SharedDev>,
    /// The `ENV_*` flags of the node's records.
    pub node_flags: ConfFlags,
}

/// Rewrite the node's records for one shared GRES and build its device list
/// and per-GPU counts (the stock plugins' `gres_c_s_init_share_devices`).
/// Log lines come back whatever the outcome; `Err` carries the message of
/// the stock plugin's `fatal()`.
pub fn load(input: &LoadInput<'_>) -> (Result<Loaded, String>, Vec<LogLine>) {
    let mut logs = Log::new(input.log_max);
    let result = load_inner(input, &mut logs);
    (result, logs.into_lines())
}

fn load_inner(input: &LoadInput<'_>, logs: &mut Log) -> Result<Loaded, String> {
    let name = input.kind.name();
    let list_level = if input.debug_gres { LogLevel::Verbose } else { LogLevel::Debug };
    if input.debug_gres {
        logs.push(LogLevel::Verbose, if input.init_list_line_spelled { "GRES: Initialized gres.conf list" } else { "GRES: Initalized gres.conf list" });
    }
    logs.push_each(list_level, input.records, to_log_line);

    let mut records = share_records(input.records, input.kind, logs)?;

    let list = devices::build_device_list(&records, name, input.in_slurmd, input.stat);
    for p in &list.problems {
        logs.push(LogLevel::Error, p.message.clone());
    }
    if list.has_fatal() {
        return Err("failed to load configuration".into());
    }
    if input.debug_gres {
        for d in &list.devices {
            logs.push_with(LogLevel::Verbose, || format!("GRES: {name} device number {}({}):{}", d.dev_num, d.path, devices::device_id_string(d)));
        }
    }

    // Every record marked SHARED counts towards the total, whatever its
    // GRES (as the stock plugins count it); with nothing to share, this
    // GRES's records leave the list slurmd reports.
    let total: u64 = records.iter().filter(|r| r.flags.has(ConfFlags::SHARED)).map(|r| r.count).fold(0, u64::saturating_add);
    if total == 0 {
        records.retain(|r| r.name != name);
    }
    let counts = per_gpu_counts(&records, name);

    logs.push(list_level, "Final gres.conf list:");
    logs.push_each(list_level, &records, to_log_line);
    if input.fake_gpus {
        logs.push(LogLevel::Info, "Final normalized gres.conf list (parsable):");
        logs.push_each(LogLevel::Info, &records, to_parsable);
    }

    let node_flags = devices::node_env_flags(&records);
    Ok(Loaded { records, devices: list.devices, counts, node_flags })
}

/// The per-GPU counts of GRES `name` in a final record list.  Only this
/// GRES's own records: the stock plugins also take the other shared GRES's
/// records, so that with `GresTypes=gpu,shard,mps` an MPS job's percentage
/// was computed from the GPU's shard count (docs/deviations.md).
pub fn per_gpu_counts(records: &[GresRecord], name: &str) -> Vec<SharedDev> {
    records
        .iter()
        .filter(|r| r.name == name && r.flags.has(ConfFlags::SHARED))
        .map(|r| SharedDev { id: r.file.as_deref().and_then(devices::trailing_number).unwrap_or(-1), count: r.count })
        .collect()
}

fn expand_file(file: &str) -> Result<Vec<String>, String> {
    match hostlist::expand(file) {
        Ok(files) if !files.is_empty() => Ok(files),
        Ok(_) => Err(format!("can't parse gres.conf file record ({file}): no file")),
        Err(e) => Err(format!("can't parse gres.conf file record ({file}): {e}")),
    }
}

/// The records with every GPU record split into one record per device file
/// and one record of the shared GRES per GPU, each just before its GPU, at
/// the end of the list (the other records keep their places).
pub fn share_records(records: &[GresRecord], kind: SharedKind, logs: &mut Log) -> Result<Vec<GresRecord>, String> {
    let shared_name = kind.name();
    let mut rest = Vec::new();
    let mut sharing = Vec::new();
    let mut shared = Vec::new();
    let mut fileless_gpu_reported = false;
    let (mut without_file, mut with_file) = (0u32, 0u32);

    for r in records {
        if r.name == SHARING_NAME {
            let Some(file) = r.file.as_deref() else {
                if !fileless_gpu_reported {
                    logs.push(LogLevel::Error, "SHARING configuration lacks \"File\" specification");
                    fileless_gpu_reported = true;
                }
                rest.push(r.clone());
                continue;
            };
            if r.flags.has(ConfFlags::HAS_MULT) {
                // The files of one GPU (a MIG device: its GPU's file and
                // capability files) stay one GPU; the stock plugin made a
                // GPU of each file (docs/deviations.md, MPS/shard 6).
                sharing.push(split_sharing(r, file.to_string()));
                continue;
            }
            for f in expand_file(file)? {
                sharing.push(split_sharing(r, f));
            }
        } else if r.name == shared_name {
            match r.file.as_deref() {
                None => {
                    if without_file > 0 {
                        return Err("_build_shared_list: bad configuration, multiple configurations without \"File\"".into());
                    }
                    if with_file > 0 {
                        return Err("_build_shared_list: multiple configurations with and without \"File\"".into());
                    }
                    without_file += 1;
                    shared.push(GresRecord { file: None, links: None, ..split_shared(r) });
                }
                Some(file) => {
                    with_file += 1;
                    if without_file > 0 {
                        return Err("gres/shared: multiple configurations with and without \"File\"".into());
                    }
                    let files = expand_file(file)?;
                    let per_file = r.count / files.len() as u64;
                    for f in files {
                        shared.push(GresRecord { file: Some(f), count: per_file, ..split_shared(r) });
                    }
                }
            }
        } else {
            rest.push(r.clone());
        }
    }

    if sharing.is_empty() && !shared.is_empty() {
        logs.push(LogLevel::Error, "SHARED specified without any SHARING found");
        return Err("failed to merge SHARED and SHARING configuration".into());
    }

    // A Count without File: spread over the GPUs, the remainder going to
    // the last ones (10 over 4 GPUs: 2, 2, 3, 3).
    if let [only] = shared.as_slice() {
        if only.file.is_none() {
            let mut left = only.count;
            let mut gpus_left = sharing.len() as u64;
            for gpu in sharing {
                let mut rec = new_shared_record(&gpu, kind, Some(only));
                rec.count = left / gpus_left;
                left -= rec.count;
                gpus_left -= 1;
                rest.push(rec);
                rest.push(gpu);
            }
            return Ok(rest);
        }
    }

    // Count per File: each GPU gets the record of its file, or one with a
    // zero count; Type and Cores always come from the GPU.
    for gpu in sharing {
        let rec = match shared.iter().position(|s| s.file == gpu.file) {
            Some(i) => {
                let mut rec = shared.remove(i);
                if gpu.type_name.is_some() {
                    rec.flags.set(ConfFlags::HAS_TYPE);
                }
                if gpu.cpus.is_some() {
                    rec.cpus = gpu.cpus.clone();
                }
                if gpu.cpus_bitmap.is_some() {
                    rec.cpu_cnt = gpu.cpu_cnt;
                    rec.cpus_bitmap = gpu.cpus_bitmap.clone();
                }
                rec.type_name = gpu.type_name.clone();
                rec.unique_id = gpu.unique_id.clone();
                rec
            }
            None => GresRecord { count: 0, ..new_shared_record(&gpu, kind, None) },
        };
        rest.push(rec);
        rest.push(gpu);
    }
    for left in shared {
        logs.push_with(LogLevel::Error, || {
            format!("Discarding gres/'shared' configuration (File={}) without matching gres/'sharing' record", left.file.as_deref().unwrap_or("(null)"))
        });
    }
    Ok(rest)
}

/// One device file of a GPU record, as a record of its own.
fn split_sharing(r: &GresRecord, file: String) -> GresRecord {
    let mut flags = r.flags;
    if r.type_name.is_some() {
        flags.set(ConfFlags::HAS_TYPE);
    }
    GresRecord { flags, count: 1, file: Some(file), ..r.clone() }
}

/// A copy of a shared record as the split keeps it (no `Links`).
fn split_shared(r: &GresRecord) -> GresRecord {
    let mut flags = r.flags;
    if r.type_name.is_some() {
        flags.set(ConfFlags::HAS_TYPE);
    }
    GresRecord { flags, links: None, ..r.clone() }
}

/// A new shared record for `gpu`, with the flags of the configured shared
/// record `configured` when it is marked shared, else the defaults.
fn new_shared_record(gpu: &GresRecord, kind: SharedKind, configured: Option<&GresRecord>) -> GresRecord {
    let mut flags = gpu.flags;
    match configured {
        Some(c) if c.flags.has(ConfFlags::SHARED) => flags.set(c.flags.0),
        _ => {
            flags.set(ConfFlags::SHARED);
            if kind.one_sharing_by_default() {
                flags.set(ConfFlags::ONE_SHARING);
            }
        }
    }
    GresRecord {
        flags,
        count: 0,
        cpu_cnt: gpu.cpu_cnt,
        cpus: gpu.cpus.clone(),
        cpus_bitmap: gpu.cpus_bitmap.clone(),
        file: gpu.file.clone(),
        links: None,
        name: kind.name().to_string(),
        type_name: gpu.type_name.clone(),
        unique_id: None,
        plugin_id: gres_build_id(kind.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Bitmap, DevType};

    const ENV_ALL: u32 = ConfFlags::ENV_SET | ConfFlags::ENV_DEF;

    fn gpu(file: &str) -> GresRecord {
        GresRecord {
            name: "gpu".into(),
            file: Some(file.into()),
            count: hostlist::expand(file).unwrap().len() as u64,
            cpu_cnt: 4,
            flags: ConfFlags(ConfFlags::HAS_FILE | ENV_ALL),
            plugin_id: gres_build_id("gpu"),
            ..Default::default()
        }
    }

    /// A shared record as slurmd's gres.conf parser makes it.
    fn conf(kind: SharedKind, count: u64, file: Option<&str>) -> GresRecord {
        let mut flags = ConfFlags(ConfFlags::SHARED);
        if kind == SharedKind::Mps {
            flags.set(ConfFlags::ONE_SHARING);
        }
        if file.is_some() {
            flags.set(ConfFlags::HAS_FILE);
        }
        GresRecord {
            name: kind.name().into(),
            count,
            cpu_cnt: 4,
            file: file.map(str::to_string),
            flags,
            plugin_id: gres_build_id(kind.name()),
            ..Default::default()
        }
    }

    /// A shared record made from slurm.conf's `Gres=` alone (no flags).
    fn from_slurm_conf(kind: SharedKind, count: u64) -> GresRecord {
        GresRecord { flags: ConfFlags(0), ..conf(kind, count, None) }
    }

    fn names_counts(records: &[GresRecord]) -> Vec<(String, u64, Option<String>)> {
        records.iter().map(|r| (r.name.clone(), r.count, r.file.clone())).collect()
    }

    fn fake_stat(path: &str) -> Result<DevStat, String> {
        Ok(DevStat::device(DevType::Char, 195, devices::trailing_number(path).unwrap_or(0) as u32))
    }

    /// Load as slurmd does, every line logged, device files from `fake_stat`.
    fn load_in_slurmd(records: &[GresRecord], kind: SharedKind) -> (Result<Loaded, String>, Vec<LogLine>) {
        let input = LoadInput {
            records,
            kind,
            in_slurmd: true,
            debug_gres: false,
            init_list_line_spelled: true,
            fake_gpus: false,
            stat: &fake_stat,
            log_max: LogLevel::Debug3,
        };
        load(&input)
    }

    fn load_ok(records: &[GresRecord], kind: SharedKind) -> (Loaded, Vec<LogLine>) {
        let (r, logs) = load_in_slurmd(records, kind);
        (r.unwrap_or_else(|e| panic!("{e}: {logs:?}")), logs)
    }

    #[test]
    fn gpu_records_are_split_per_file_and_each_gets_a_shared_record() {
        let recs = vec![gpu("/dev/nvidia[0-3]"), from_slurm_conf(SharedKind::Mps, 400)];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        let got = names_counts(&l.records);
        let want: Vec<_> = (0..4)
            .flat_map(|i| {
                let f = Some(format!("/dev/nvidia{i}"));
                [("mps".to_string(), 100, f.clone()), ("gpu".to_string(), 1, f)]
            })
            .collect();
        assert_eq!(got, want);
        for r in l.records.iter().filter(|r| r.name == "mps") {
            // Default flags of a shared record: the GPU's plus SHARED and,
            // for mps, ONE_SHARING.
            assert_eq!(r.flags.0, ConfFlags::HAS_FILE | ENV_ALL | ConfFlags::SHARED | ConfFlags::ONE_SHARING);
            assert_eq!(r.plugin_id, gres_build_id("mps"));
        }
        assert_eq!(l.counts, (0..4).map(|i| SharedDev { id: i, count: 100 }).collect::<Vec<_>>());
        assert_eq!(l.devices.len(), 4);
        assert_eq!(l.devices[3].path, "/dev/nvidia3");
    }

    #[test]
    fn multiple_files_of_one_gpu_stay_one_gpu() {
        // Two MIG devices of GPU 0, each its GPU file plus two cap files.
        let mig = |gi: u32| GresRecord {
            count: 1,
            flags: ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_MULT | ENV_ALL),
            unique_id: Some(format!("MIG-{gi}")),
            ..gpu(&format!("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap{gi},/dev/nvidia-caps/nvidia-cap{}", gi + 1))
        };
        let recs = vec![mig(10), mig(20)];
        let mut logs = Log::default();
        let out = share_records(&recs, SharedKind::Shard, &mut logs).unwrap();
        let gpus: Vec<_> = out.iter().filter(|r| r.name == "gpu").collect();
        assert_eq!(gpus.len(), 2, "{out:?}");
        assert_eq!(gpus[0].file, recs[0].file);
        assert_eq!(gpus[1].unique_id.as_deref(), Some("MIG-20"));
    }

    #[test]
    fn shard_is_not_one_sharing_by_default() {
        let recs = vec![gpu("/dev/nvidia[0-1]"), from_slurm_conf(SharedKind::Shard, 64)];
        let (l, _) = load_ok(&recs, SharedKind::Shard);
        let shard: Vec<_> = l.records.iter().filter(|r| r.name == "shard").collect();
        assert_eq!(shard.len(), 2);
        assert!(shard.iter().all(|r| r.count == 32 && r.flags.has(ConfFlags::SHARED) && !r.flags.has(ConfFlags::ONE_SHARING)));
        assert_eq!(l.node_flags.0, ConfFlags::ENV_SET);
    }

    #[test]
    fn configured_flags_are_kept() {
        // Name=mps Count=200 Flags=all_sharing: SHARED without ONE_SHARING.
        let mut m = conf(SharedKind::Mps, 200, None);
        m.flags.clear(ConfFlags::ONE_SHARING);
        let (l, _) = load_ok(&[gpu("/dev/nvidia[0-1]"), m], SharedKind::Mps);
        assert!(l.records.iter().filter(|r| r.name == "mps").all(|r| !r.flags.has(ConfFlags::ONE_SHARING)));
    }

    #[test]
    fn remainder_goes_to_the_last_gpus() {
        let (l, _) = load_ok(&[gpu("/dev/nvidia[0-3]"), conf(SharedKind::Shard, 10, None)], SharedKind::Shard);
        let counts: Vec<u64> = l.counts.iter().map(|c| c.count).collect();
        assert_eq!(counts, vec![2, 2, 3, 3]);
    }

    #[test]
    fn per_file_counts_type_and_cores_from_the_gpu() {
        let mut recs = Vec::new();
        for (i, t) in ["gtx1080", "gtx1070", "gtx1060", "gtx1050"].iter().enumerate() {
            let mut g = gpu(&format!("/dev/nvidia{i}"));
            g.type_name = Some(t.to_string());
            g.flags.set(ConfFlags::HAS_TYPE);
            g.cpus = Some(if i < 2 { "0-1" } else { "2-3" }.into());
            g.cpus_bitmap = Some(Bitmap::from_ranges(4, g.cpus.as_deref().unwrap()).unwrap());
            g.unique_id = Some(format!("GPU-{i}"));
            recs.push(g);
        }
        // Listed in another order, with Type and Cores of their own (ignored).
        for (i, c) in [(3, 1000), (1, 1200), (0, 1300), (2, 1100)] {
            let mut m = conf(SharedKind::Mps, c, Some(&format!("/dev/nvidia{i}")));
            m.type_name = Some("ignored".into());
            m.cpus = Some("3".into());
            recs.push(m);
        }
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        let mps: Vec<&GresRecord> = l.records.iter().filter(|r| r.name == "mps").collect();
        assert_eq!(mps.iter().map(|r| r.count).collect::<Vec<_>>(), vec![1300, 1200, 1100, 1000]);
        assert_eq!(mps[0].type_name.as_deref(), Some("gtx1080"));
        assert_eq!(mps[3].type_name.as_deref(), Some("gtx1050"));
        assert_eq!(mps[2].cpus.as_deref(), Some("2-3"));
        assert_eq!(mps[2].cpus_bitmap, Some(Bitmap::from_indices(4, &[2, 3])));
        assert_eq!(mps[1].unique_id.as_deref(), Some("GPU-1"));
        assert!(mps.iter().all(|r| r.flags.has(ConfFlags::HAS_TYPE)));
        assert_eq!(
            l.counts,
            vec![SharedDev { id: 0, count: 1300 }, SharedDev { id: 1, count: 1200 }, SharedDev { id: 2, count: 1100 }, SharedDev { id: 3, count: 1000 }]
        );
    }

    #[test]
    fn gpus_without_a_count_get_zero_and_unmatched_files_are_dropped() {
        let recs = vec![gpu("/dev/nvidia[0-2]"), conf(SharedKind::Mps, 300, Some("/dev/nvidia[1-2]")), conf(SharedKind::Mps, 50, Some("/dev/nvidia7"))];
        let mut logs = Log::default();
        let out = share_records(&recs, SharedKind::Mps, &mut logs).unwrap();
        let mps: Vec<u64> = out.iter().filter(|r| r.name == "mps").map(|r| r.count).collect();
        assert_eq!(mps, vec![0, 150, 150]);
        let zero = out.iter().find(|r| r.name == "mps" && r.count == 0).unwrap();
        assert!(zero.flags.has(ConfFlags::SHARED) && zero.flags.has(ConfFlags::ONE_SHARING));
        assert!(logs.lines().iter().any(|l| l.level == LogLevel::Error && l.message.contains("File=/dev/nvidia7")), "{logs:?}");
    }

    #[test]
    fn file_count_is_divided_rounding_down() {
        let recs = vec![gpu("/dev/nvidia[0-1]"), conf(SharedKind::Mps, 301, Some("/dev/nvidia[0-1]"))];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        assert_eq!(l.counts.iter().map(|c| c.count).collect::<Vec<_>>(), vec![150, 150]);
    }

    #[test]
    fn other_records_keep_their_place() {
        let nic = GresRecord { name: "nic".into(), count: 2, ..Default::default() };
        let recs = vec![gpu("/dev/nvidia[0-1]"), nic.clone(), from_slurm_conf(SharedKind::Mps, 2)];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        assert_eq!(l.records[0], nic);
        assert_eq!(l.records.len(), 5);
    }

    #[test]
    fn nothing_to_share_removes_the_records() {
        // GresTypes lists mps, but no count anywhere: slurmd passes an
        // empty mps record; the GPUs are still split.
        let recs = vec![gpu("/dev/nvidia[0-3]"), from_slurm_conf(SharedKind::Mps, 0)];
        let (l, _) = load_ok(&recs, SharedKind::Mps);
        assert_eq!(l.records.len(), 4);
        assert!(l.records.iter().all(|r| r.name == "gpu" && r.count == 1));
        assert!(l.counts.is_empty());
    }

    #[test]
    fn other_shared_records_count_towards_the_total_as_in_stock() {
        // The records of gres/shard (already split) keep zero-count mps
        // records in the list, but do not enter mps's per-GPU counts.
        let (after_shard, _) = load_ok(&[gpu("/dev/nvidia[0-1]"), conf(SharedKind::Shard, 8, None), from_slurm_conf(SharedKind::Mps, 0)], SharedKind::Shard);
        let (l, _) = load_ok(&after_shard.records, SharedKind::Mps);
        assert_eq!(l.records.iter().filter(|r| r.name == "mps").count(), 2);
        assert_eq!(l.counts, vec![SharedDev { id: 0, count: 0 }, SharedDev { id: 1, count: 0 }]);
        // Splitting again changes nothing for the GPUs.
        assert_eq!(l.records.iter().filter(|r| r.name == "gpu").count(), 2);
        assert_eq!(l.records.iter().filter(|r| r.name == "shard").map(|r| r.count).sum::<u64>(), 8);
    }

    #[test]
    fn configuration_errors() {
        let g = gpu("/dev/nvidia[0-1]");
        let fails = |recs: Vec<GresRecord>| {
            let mut logs = Log::default();
            share_records(&recs, SharedKind::Mps, &mut logs).unwrap_err()
        };
        let e = fails(vec![g.clone(), conf(SharedKind::Mps, 1, None), conf(SharedKind::Mps, 2, None)]);
        assert!(e.contains("multiple configurations without \"File\""), "{e}");
        let e = fails(vec![g.clone(), conf(SharedKind::Mps, 1, Some("/dev/nvidia0")), conf(SharedKind::Mps, 2, None)]);
        assert!(e.contains("_build_shared_list: multiple configurations with and without \"File\""), "{e}");
        let e = fails(vec![g.clone(), conf(SharedKind::Mps, 2, None), conf(SharedKind::Mps, 1, Some("/dev/nvidia0"))]);
        assert_eq!(e, "gres/shared: multiple configurations with and without \"File\"");
        let mut logs = Log::default();
        let e = share_records(&[conf(SharedKind::Mps, 100, None)], SharedKind::Mps, &mut logs).unwrap_err();
        assert_eq!(e, "failed to merge SHARED and SHARING configuration");
        assert_eq!(logs.lines().last().unwrap().message, "SHARED specified without any SHARING found");
    }

    #[test]
    fn gpu_without_file_is_reported_once_and_kept() {
        let fileless = GresRecord { file: None, flags: ConfFlags(ENV_ALL), ..gpu("/dev/nvidia0") };
        let recs = vec![fileless.clone(), fileless.clone(), gpu("/dev/nvidia0")];
        let mut logs = Log::default();
        let out = share_records(&recs, SharedKind::Shard, &mut logs).unwrap();
        assert_eq!(logs.lines().iter().filter(|l| l.message.contains("lacks \"File\"")).count(), 1);
        assert_eq!(&out[..2], &[fileless.clone(), fileless]);
    }

    #[test]
    fn duplicate_files_fail_the_load() {
        let recs = vec![gpu("/dev/nvidia[0-1]"), gpu("/dev/nvidia1"), from_slurm_conf(SharedKind::Mps, 100)];
        let (r, logs) = load_in_slurmd(&recs, SharedKind::Mps);
        assert_eq!(r.unwrap_err(), "failed to load configuration");
        assert!(logs.iter().any(|l| l.message.contains("duplicate device file name")));
    }

    #[test]
    fn final_list_logging() {
        let recs = vec![gpu("/dev/nvidia0"), from_slurm_conf(SharedKind::Mps, 100)];
        let input = LoadInput {
            records: &recs,
            kind: SharedKind::Mps,
            in_slurmd: false,
            debug_gres: true,
            init_list_line_spelled: false,
            fake_gpus: true,
            stat: &fake_stat,
            log_max: LogLevel::Debug3,
        };
        let (r, logs) = load(&input);
        let l = r.unwrap();
        assert!(l.devices.is_empty(), "no device files outside slurmd");
        let text: Vec<&str> = logs.iter().map(|l| l.message.as_str()).collect();
        // As 22.05 spells it; later releases as their gres_c_s.c does.
        assert_eq!((text[0], logs[0].level), ("GRES: Initalized gres.conf list", LogLevel::Verbose));
        let (_, later) = load(&LoadInput { init_list_line_spelled: true, ..input });
        assert_eq!(later[0].message, "GRES: Initialized gres.conf list");
        let fin = text.iter().position(|m| *m == "Final gres.conf list:").unwrap();
        assert_eq!(logs[fin].level, LogLevel::Verbose);
        assert_eq!(
            text[fin + 1],
            "    GRES[mps] Type:(null) Count:100 Cores(4):(null)  Links:(null) Flags:HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT,SHARED,ONE_SHARING File:/dev/nvidia0 UniqueId:(null)"
        );
        let p = text.iter().position(|m| *m == "Final normalized gres.conf list (parsable):").unwrap();
        assert_eq!(logs[p].level, LogLevel::Info);
        assert_eq!(
            text[p + 1],
            "GRES_PARSABLE[mps](100):(null)|4|(null)|(null)|/dev/nvidia0|HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT,SHARED,ONE_SHARING"
        );
        // Without DebugFlags=Gres the lists go to debug, and no parsable
        // list without fake_gpus.conf.
        let input = LoadInput { debug_gres: false, fake_gpus: false, ..input };
        let (_, logs) = load(&input);
        assert!(logs.iter().all(|l| l.level == LogLevel::Debug), "{logs:?}");
        // At info (slurmd -G) only the parsable list is left.
        let input = LoadInput { fake_gpus: true, log_max: LogLevel::Info, ..input };
        let (_, logs) = load(&input);
        assert!(!logs.is_empty() && logs.iter().all(|l| l.level == LogLevel::Info), "{logs:?}");
    }
}
