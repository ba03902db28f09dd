//! slurmd's merge of slurm.conf's counts with gres.conf's records
//! (`_merge_config`), the check of one against the other, and the GRES
//! lines `slurmd -G` prints.

use crate::problem::GRES_PLUGINS;
use crate::slurm_gres::SlurmGres;
use gres_core::behaviour::{Behaviour, ConfBit14};
use gres_core::hostlist;
use gres_core::model::{gres_build_id, ConfFlags, GresRecord, LogLevel, LogLine};

/// One GRES of `GresTypes` as slurmd handles it (`slurm_gres_context_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GresContext {
    pub name: String,
    pub plugin_id: u32,
    /// slurmd loads a plugin for it (see [`GRES_PLUGINS`]).
    pub has_plugin: bool,
    /// Counted only: a record asks for `CountOnly`, or there is no plugin.
    pub count_only: bool,
}

/// The contexts of `gres_types`, with the flags gres.conf's records give
/// them (`_validate_gres_conf()`).
pub fn contexts(gres_types: &[String], records: &[GresRecord]) -> Vec<GresContext> {
    gres_types
        .iter()
        .map(|name| {
            let plugin_id = gres_build_id(name);
            let has_plugin = GRES_PLUGINS.contains(&name.as_str());
            let count_only = !has_plugin || records.iter().any(|r| r.plugin_id == plugin_id && r.flags.has(ConfFlags::COUNT_ONLY));
            GresContext { name: name.clone(), plugin_id, has_plugin, count_only }
        })
        .collect()
}

fn same_type(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => false,
    }
}

/// Slurm's `_check_conf_mismatch()` for one GRES: gres.conf records (index
/// into `records`, and by how much) with more than slurm.conf accounts for.
/// slurm.conf counts are taken from the records of the same type (an
/// untyped count only from untyped records), in order.
pub fn check_conf_mismatch(records: &[GresRecord], slurm: &SlurmGres) -> Vec<(usize, u64)> {
    let mut left: Vec<(usize, u64)> = records.iter().enumerate().filter(|(_, r)| r.plugin_id == slurm.plugin_id).map(|(i, r)| (i, r.count)).collect();
    let mut take = |count: u64, type_name: Option<&str>| {
        let mut count = count;
        for (i, n) in left.iter_mut() {
            if !same_type(records[*i].type_name.as_deref(), type_name) {
                continue;
            }
            if *n > count {
                *n -= count;
                return;
            }
            count -= *n;
            *n = 0;
        }
    };
    if slurm.types.is_empty() {
        take(slurm.count, None);
    } else {
        for (t, n) in &slurm.types {
            take(*n, Some(t));
        }
    }
    left.into_iter().filter(|(_, n)| *n > 0).collect()
}

/// A record as Slurm's `add_gres_to_list()` makes it from scratch.
fn new_record(name: &str, count: u64, cpu_cnt: u32, type_name: Option<&str>, flags: u32) -> GresRecord {
    let mut flags = ConfFlags(flags);
    if type_name.is_some() {
        flags.set(ConfFlags::HAS_TYPE);
    }
    GresRecord { flags, count, cpu_cnt, name: name.to_string(), type_name: type_name.map(str::to_string), plugin_id: gres_build_id(name), ..Default::default() }
}

/// `add_gres_to_list()` without a file: appended, except that a first
/// record with a count of 0 (a placeholder) is overwritten in place (its CPU
/// bitmap stays).
fn add_to_list(list: &mut Vec<GresRecord>, rec: GresRecord) {
    match list.first_mut() {
        Some(first) if first.count == 0 => {
            let bitmap = first.cpus_bitmap.take();
            *first = GresRecord { cpus_bitmap: bitmap, ..rec };
        }
        _ => list.push(rec),
    }
}

/// The first record of `pool` for this GRES with `type_name` (any record
/// when `None`, whose type is then dropped), taken out of `pool`.
fn match_type(pool: &mut Vec<GresRecord>, plugin_id: u32, type_name: Option<&str>) -> Option<GresRecord> {
    let i = pool.iter().position(|r| {
        r.plugin_id == plugin_id
            && match type_name {
                None => true,
                Some(t) => r.type_name.as_deref().is_some_and(|rt| rt.eq_ignore_ascii_case(t)),
            }
    })?;
    let mut rec = pool.remove(i);
    if type_name.is_none() {
        rec.type_name = None;
        rec.flags.clear(ConfFlags::HAS_TYPE);
    }
    Some(rec)
}

/// Slurm's `_set_file_subset()`: keep the first `count` files of a record.
fn set_file_subset(rec: &mut GresRecord, count: u64, log: &mut Vec<LogLine>) {
    let Some(file) = rec.file.as_deref() else { return };
    let Ok(mut names) = hostlist::expand(file) else { return };
    if count >= names.len() as u64 {
        return;
    }
    let old_count = names.len();
    names.truncate(count as usize);
    let subset = hostlist::ranged_string(&names);
    log.push(LogLine::new(
        LogLevel::Debug3,
        format!(
            "_set_file_subset: Truncating {}:{} File from ({old_count}) {file} to ({count}) {subset}",
            rec.name,
            rec.type_name.as_deref().unwrap_or("(null)"),
        ),
    ));
    rec.file = Some(subset);
}

/// `_merge_gres2()`: one slurm.conf count (of one type, or untyped).
fn merge_one(
    pool: &mut Vec<GresRecord>,
    out: &mut Vec<GresRecord>,
    mut count: u64,
    type_name: Option<&str>,
    ctx: &GresContext,
    cpu_cnt: u32,
    log: &mut Vec<LogLine>,
) {
    if count == 0 {
        return;
    }
    while let Some(mut rec) = match_type(pool, ctx.plugin_id, type_name) {
        if rec.count > count {
            rec.count = count;
            set_file_subset(&mut rec, count, log);
            count = 0;
        } else {
            count -= rec.count;
        }
        out.push(rec);
        if count == 0 {
            return;
        }
    }
    let mut flags = 0;
    if ctx.name.eq_ignore_ascii_case("gpu") {
        flags |= ConfFlags::ENV_SET | ConfFlags::ENV_DEF;
    }
    if ctx.count_only {
        flags |= ConfFlags::COUNT_ONLY;
    }
    add_to_list(out, new_record(&ctx.name, count, cpu_cnt, type_name, flags));
}

/// Slurm's `_merge_config()`: the node's gres.conf `records` within what
/// slurm.conf counts (`slurm`, one entry per context; `None` when slurmd
/// has no slurm.conf GRES for the node, which gives every GRES an empty
/// record).
pub fn merge_config(records: Vec<GresRecord>, slurm: Option<&[SlurmGres]>, ctxs: &[GresContext], cpu_cnt: u32, log: &mut Vec<LogLine>) -> Vec<GresRecord> {
    let mut pool = records;
    let mut out = Vec::new();
    for ctx in ctxs {
        let mut found = false;
        for g in slurm.unwrap_or_default().iter().filter(|g| g.plugin_id == ctx.plugin_id) {
            found = true;
            if g.types.is_empty() {
                merge_one(&mut pool, &mut out, g.count, None, ctx, cpu_cnt, log);
            } else {
                for (t, n) in &g.types {
                    merge_one(&mut pool, &mut out, *n, Some(t), ctx, cpu_cnt, log);
                }
            }
        }
        if !found {
            out.push(GresRecord { cpu_cnt, name: ctx.name.clone(), plugin_id: ctx.plugin_id, ..Default::default() });
        }
    }
    out
}

/// Slurm's last step before logging: GPUs (records of `gpu_plugin_id`)
/// without a `File` are removed; their descriptions are returned.
pub fn remove_fileless_gpus(records: &mut Vec<GresRecord>, gpu_plugin_id: Option<u32>) -> Vec<String> {
    let Some(id) = gpu_plugin_id else { return Vec::new() };
    let mut removed = Vec::new();
    records.retain(|r| {
        let drop = r.plugin_id == id && r.file.is_none();
        if drop {
            removed.push(format!("{}:{}", r.name, r.type_name.as_deref().unwrap_or("(null)")));
        }
        !drop
    });
    removed
}

/// The number at the end of a file name, as Slurm's log line computes it
/// (0 when the name ends in no digit, -1 without a file).
pub fn line_index(file: Option<&str>) -> i32 {
    let Some(file) = file else { return -1 };
    let mut index: i32 = 0;
    let mut mult: i32 = 1;
    for b in file.bytes().rev() {
        if !b.is_ascii_digit() {
            break;
        }
        index = index.wrapping_add(i32::from(b - b'0').wrapping_mul(mult));
        mult = mult.wrapping_mul(10);
    }
    index
}

/// The line slurmd logs for a final record with `DebugFlags=Gres` (as
/// `slurmd -G` does): `Gres Name=gpu Type=a100 Count=1 Index=0 ID=7696487
/// File=/dev/nvidia0 Cores=0-7 CoreCnt=64 Links=-1,0` (missing values print
/// as `(null)`).
pub fn slurmd_line(r: &GresRecord) -> String {
    let null = |s: &Option<String>| s.clone().unwrap_or_else(|| "(null)".into());
    let type_name = null(&r.type_name);
    let links = r.links.as_ref().map_or_else(|| "(null)".to_string(), |l| format!("Links={l}"));
    let index = line_index(r.file.as_deref());
    let head = format!("Gres Name={} Type={type_name} Count={}", r.name, r.count);
    match (&r.cpus, &r.file) {
        (Some(cpus), Some(file)) => format!("{head} Index={index} ID={} File={file} Cores={cpus} CoreCnt={} {links}", r.plugin_id, r.cpu_cnt),
        (None, Some(file)) => format!("{head} Index={index} ID={} File={file} {links}", r.plugin_id),
        (_, None) => format!("{head} ID={} {links}", r.plugin_id),
    }
}

/// [`slurmd_line`] as release `b` writes it: from 23.02
/// ([`Behaviour::record_line_flags`]) `... Links=<links or (null)>
/// Flags=<flags>`, the flags spelt as that release's `gres_flags2str()`
/// ([`flags_to_string_as`]).
///
/// [`Behaviour::record_line_flags`]: gres_core::behaviour::Behaviour::record_line_flags
pub fn slurmd_line_as(r: &GresRecord, b: &gres_core::behaviour::Behaviour) -> String {
    if !b.record_line_flags {
        return slurmd_line(r);
    }
    let null = |s: &Option<String>| s.clone().unwrap_or_else(|| "(null)".into());
    let type_name = null(&r.type_name);
    let tail = format!("Links={} Flags={}", null(&r.links), flags_to_string_as(r.flags, b));
    let index = line_index(r.file.as_deref());
    let head = format!("Gres Name={} Type={type_name} Count={}", r.name, r.count);
    match (&r.cpus, &r.file) {
        (Some(cpus), Some(file)) => format!("{head} Index={index} ID={} File={file} Cores={cpus} CoreCnt={} {tail}", r.plugin_id, r.cpu_cnt),
        (None, Some(file)) => format!("{head} Index={index} ID={} File={file} {tail}", r.plugin_id),
        (_, None) => format!("{head} ID={} {tail}", r.plugin_id),
    }
}

/// [`flags_to_string`](gres_core::model::flags_to_string) as release `b`'s `gres_flags2str()` spells them
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
