//! The node's device list: each `File` of the plugin's gres.conf records,
//! expanded, `stat()`ed and numbered, as slurmd's cgroup code and the
//! environment functions see it.

use super::hostlist::{self, HostlistError};
use super::model::{ConfFlags, DevType, GresDevice, GresRecord, NO_VAL};
use std::collections::{HashMap, HashSet};

/// What `stat()` tells about a device file (symbolic links followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevStat {
    pub dev_type: DevType,
    pub major: u32,
    pub minor: u32,
    /// `st_dev` and `st_ino`: which file it is, for files that are no
    /// device node.
    pub inode: (u64, u64),
}

impl DevStat {
    /// A device node (`inode` does not tell devices apart).
    pub fn device(dev_type: DevType, major: u32, minor: u32) -> DevStat {
        DevStat { dev_type, major, minor, inode: (0, 0) }
    }

    /// What the file is: the device a character or block device node
    /// stands for (whatever its name), else the file itself.
    pub fn identity(&self) -> FileId {
        match self.dev_type {
            DevType::None => FileId::Inode { dev: self.inode.0, ino: self.inode.1 },
            t => FileId::Device { block: t == DevType::Block, major: self.major, minor: self.minor },
        }
    }
}

/// A problem found while building the list.  `fatal` problems make the
/// plugin refuse the configuration (the stock plugin then stops slurmd).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProblem {
    pub fatal: bool,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceList {
    pub devices: Vec<GresDevice>,
    pub problems: Vec<DeviceProblem>,
    /// Every file of the GRES's records with what it is, for
    /// [`same_devices`]: from the `stat()` made for the list in slurmd,
    /// else by name.
    pub files: Vec<FileUse>,
}

impl DeviceList {
    pub fn has_fatal(&self) -> bool {
        self.problems.iter().any(|p| p.fatal)
    }
}

/// The number at the end of a device file name (`/dev/nvidia12` -> 12).
pub fn trailing_number(path: &str) -> Option<i32> {
    let digits = path.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let tail = &path[path.len() - digits..];
    // atoi() semantics: an overlong number saturates rather than failing.
    Some(tail.parse::<i64>().map(|n| n.min(i32::MAX as i64) as i32).unwrap_or(i32::MAX))
}

/// How device files are looked at: `stat()` in slurmd ([`stat_device`]).
pub type StatFn = dyn Fn(&str) -> Result<DevStat, String>;

/// `stat(<path>): <error>` with the OS error as C's `%m` prints it ("No such
/// file or directory"), without std's " (os error 2)": one string, formatted
/// once (slurmd -G formats one for each missing device file of each GRES).
fn stat_error(path: &str, e: &std::io::Error) -> String {
    use std::fmt::Write as _;
    let mut msg = String::with_capacity(path.len() + 48);
    let _ = write!(msg, "stat({path}): ");
    let text_start = msg.len();
    let _ = write!(msg, "{e}");
    if msg.ends_with(')') {
        if let Some(i) = msg[text_start..].rfind(" (os error ") {
            msg.truncate(text_start + i);
        }
    }
    msg
}

/// `stat()` a device file through std, the real-machine implementation of
/// the `stat` argument of [`build_device_list`].
pub fn stat_device(path: &str) -> Result<DevStat, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).map_err(|e| stat_error(path, &e))?;
    let rdev = meta.rdev();
    // glibc's major()/minor() encoding of dev_t.
    let major = (((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff)) as u32;
    let minor = ((rdev & 0xff) | ((rdev >> 12) & !0xff)) as u32;
    let ft = meta.file_type();
    let dev_type = if ft.is_block_device() {
        DevType::Block
    } else if ft.is_char_device() {
        DevType::Char
    } else {
        DevType::None
    };
    Ok(DevStat { dev_type, major, minor, inode: (meta.dev(), meta.ino()) })
}

/// Build the device list of GRES `name` from the node's records, in record
/// order.  Each file of a record takes the next bitmap index, except that all
/// files of a `MultipleFiles` record share one index.  Files that cannot be
/// `stat()`ed or are not device nodes are left out with a problem; a file
/// named twice is a fatal problem.  Outside slurmd (`in_slurmd == false`)
/// no file is touched and the list stays empty, as the stock plugin does.
/// [`DeviceList::files`] stays empty: see [`build_device_list_with_files`].
pub fn build_device_list(records: &[GresRecord], name: &str, in_slurmd: bool, stat: &dyn Fn(&str) -> Result<DevStat, String>) -> DeviceList {
    build(records, name, in_slurmd, stat, false)
}

/// [`build_device_list`], and every file with what it is in
/// [`DeviceList::files`], for [`same_devices`].
pub fn build_device_list_with_files(records: &[GresRecord], name: &str, in_slurmd: bool, stat: &dyn Fn(&str) -> Result<DevStat, String>) -> DeviceList {
    build(records, name, in_slurmd, stat, true)
}

fn build(records: &[GresRecord], name: &str, in_slurmd: bool, stat: &dyn Fn(&str) -> Result<DevStat, String>, keep_files: bool) -> DeviceList {
    let mut out = DeviceList::default();
    let mut seen: HashSet<String> = HashSet::new();
    let mut max_dev_num: i32 = -1;
    let mut duplicate_reported = false;

    each_record_file(records, name, |slot| {
        let slot = match slot {
            Ok(slot) => slot,
            Err((file, e)) => {
                out.problems.push(DeviceProblem { fatal: false, message: format!("can't parse gres.conf file record ({file}): {e}") });
                return;
            }
        };
        let one = slot.path;
        let mut id = None;
        if in_slurmd {
            match stat(&one) {
                Err(msg) => out.problems.push(DeviceProblem { fatal: false, message: msg }),
                Ok(st) if st.dev_type == DevType::None => {
                    id = Some(st.identity());
                    out.problems.push(DeviceProblem { fatal: false, message: format!("{one} is not a valid character or block device, fix your gres.conf") })
                }
                Ok(st) => {
                    id = Some(st.identity());
                    let dev_num = trailing_number(&one).unwrap_or(-1);
                    max_dev_num = max_dev_num.max(dev_num);
                    out.devices.push(GresDevice {
                        index: slot.gpu,
                        dev_num,
                        dev_type: st.dev_type,
                        major: st.major,
                        minor: st.minor,
                        path: one.clone(),
                        unique_id: records[slot.record].unique_id.clone(),
                        mig: records[slot.record].flags.has(ConfFlags::MIG),
                    });
                }
            }
        }
        if !slot.multiple && !seen.insert(one.clone()) && !duplicate_reported {
            out.problems.push(DeviceProblem { fatal: true, message: format!("{name} duplicate device file name ({one})") });
            duplicate_reported = true;
        }
        if keep_files {
            let id = id.unwrap_or_else(|| FileId::Path(normalize_path(&one)));
            out.files.push(FileUse { record: slot.record, gpu: slot.gpu, path: one, multiple: slot.multiple, id });
        }
    });
    // Files without a number get numbers past the largest one.
    for dev in out.devices.iter_mut() {
        if dev.dev_num == -1 {
            max_dev_num += 1;
            dev.dev_num = max_dev_num;
        }
    }
    out
}

/// What a device file is, to tell whether two names are one device.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileId {
    /// A character or block device node: the device number (`st_rdev`).
    Device { block: bool, major: u32, minor: u32 },
    /// Another file: `st_dev` and `st_ino`.
    Inode { dev: u64, ino: u64 },
    /// A file that was not looked at (or could not be): its name,
    /// normalized ([`normalize_path`]).
    Path(String),
}

/// A path without repeated slashes, `.` components and a trailing slash
/// (`/dev//./nvidia0` -> `/dev/nvidia0`).  `..` is kept: what it leads to
/// depends on symbolic links.
pub fn normalize_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    if path.starts_with('/') {
        out.push('/');
    }
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if !out.is_empty() && !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// One file of one GPU (or other device) of a GRES, numbered as
/// [`build_device_list_with_files`] numbers them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileUse {
    /// Index of the record in the list given.
    pub record: usize,
    /// Bitmap index of the device (the GPU) the file belongs to.
    pub gpu: u32,
    /// The file, as the record names it (hostlist expanded).
    pub path: String,
    /// The record has `MultipleFiles`.
    pub multiple: bool,
    pub id: FileId,
}

/// One file of a record of a GRES, numbered as the device list numbers
/// them: each file of a record takes the next index, all files of a
/// `MultipleFiles` record share one.
struct RecordFile {
    record: usize,
    gpu: u32,
    /// One file of it (hostlist expanded).
    path: String,
    multiple: bool,
}

/// Each file of GRES `name`'s records with `File`, in order, to `f`;
/// `Err` for a record whose `File` does not expand (its value and why).
fn each_record_file<'a>(records: &'a [GresRecord], name: &str, mut f: impl FnMut(Result<RecordFile, (&'a str, HostlistError)>)) {
    let mut gpu: u32 = 0;
    for (record, rec) in records.iter().enumerate() {
        if rec.name != name || !rec.flags.has(ConfFlags::HAS_FILE) {
            continue;
        }
        let Some(record_file) = rec.file.as_deref() else { continue };
        let files = match hostlist::expand(record_file) {
            Ok(files) => files,
            Err(e) => {
                f(Err((record_file, e)));
                continue;
            }
        };
        let multiple = rec.flags.has(ConfFlags::HAS_MULT);
        for path in files {
            f(Ok(RecordFile { record, gpu, path, multiple }));
            if !multiple {
                gpu += 1;
            }
        }
        if multiple {
            gpu += 1;
        }
    }
}

/// Two GPUs that are one device: every file of one of them is a file of
/// the other (`second` comes later in the list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SameDevice {
    /// The earlier GPU's file...
    pub first: FileUse,
    /// ...that is the same device as this file of the later GPU.
    pub second: FileUse,
}

impl SameDevice {
    /// What gres/gpu logs: both files, with their GPUs and records.
    pub fn log_message(&self, records: &[GresRecord]) -> String {
        let place = |u: &FileUse| {
            let key = if u.multiple { "MultipleFiles" } else { "File" };
            format!("GPU {}, {key}={}", u.gpu, records.get(u.record).and_then(|r| r.file.as_deref()).unwrap_or(&u.path))
        };
        format!(
            "{} ({}) is the same device as {} ({}): two jobs could be given one GPU",
            self.second.path,
            place(&self.second),
            self.first.path,
            place(&self.first)
        )
    }
}

/// GPUs that are the same device as an earlier GPU of `uses`
/// ([`DeviceList::files`]): those whose files all are files of the earlier one, or
/// the other way round.  Each later GPU is reported once, with the first
/// earlier GPU it shares files with and the first file they share.  GPUs
/// that share some file but each have files of their own (MIG instances of
/// one GPU share its device node) are not reported, nor is one plain `File`
/// named twice in the same spelling, which stops slurmd already
/// ([`build_device_list`]).
pub fn same_devices(uses: &[FileUse]) -> Vec<SameDevice> {
    // The usual nodes: every GPU has a file no other GPU uses (no file is
    // used twice, or MIG instances sharing their GPU's device node but each
    // with its own capability files), so no GPU's files can all be
    // another's.
    let mut by_file: Vec<(&FileId, u32)> = uses.iter().map(|u| (&u.id, u.gpu)).collect();
    by_file.sort_unstable();
    let mut has_own_file: Vec<u32> = Vec::new();
    for group in by_file.chunk_by(|a, b| a.0 == b.0) {
        if group.iter().all(|&(_, gpu)| gpu == group[0].1) {
            has_own_file.push(group[0].1);
        }
    }
    has_own_file.sort_unstable();
    has_own_file.dedup();
    if uses.iter().all(|u| has_own_file.binary_search(&u.gpu).is_ok()) {
        return Vec::new();
    }
    // The files of each GPU, in order, and the set of their identities.
    let mut gpus: Vec<(u32, Vec<usize>)> = Vec::new();
    for (i, u) in uses.iter().enumerate() {
        match gpus.last_mut() {
            Some((g, files)) if *g == u.gpu => files.push(i),
            _ => gpus.push((u.gpu, vec![i])),
        }
    }
    let sets: Vec<Vec<&FileId>> = gpus
        .iter()
        .map(|(_, files)| {
            let mut ids: Vec<&FileId> = files.iter().map(|&i| &uses[i].id).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        })
        .collect();
    let subset = |small: &[&FileId], big: &[&FileId]| small.iter().all(|id| big.binary_search(id).is_ok());
    // For each file, the GPUs (positions in `gpus`) seen with it so far.
    let mut users: HashMap<&FileId, Vec<usize>> = HashMap::new();
    let mut out = Vec::new();
    for (b, (_, files)) in gpus.iter().enumerate() {
        let mut candidates: Vec<usize> = files.iter().flat_map(|&i| users.get(&uses[i].id).into_iter().flatten().copied()).collect();
        candidates.sort_unstable();
        candidates.dedup();
        for a in candidates {
            if !subset(&sets[b], &sets[a]) && !subset(&sets[a], &sets[b]) {
                continue;
            }
            let Some((first, second)) = files.iter().find_map(|&j| gpus[a].1.iter().find(|&&i| uses[i].id == uses[j].id).map(|&i| (&uses[i], &uses[j]))) else {
                continue;
            };
            if !first.multiple && !second.multiple && first.path == second.path {
                continue;
            }
            out.push(SameDevice { first: first.clone(), second: second.clone() });
            break;
        }
        for &i in files {
            let list = users.entry(&uses[i].id).or_default();
            if list.last() != Some(&b) {
                list.push(b);
            }
        }
    }
    out
}

/// The env flags of the node: the union of the `ENV_*` bits of every
/// record (if one record wants a variable, every record on the node does).
pub fn node_env_flags(records: &[GresRecord]) -> ConfFlags {
    node_env_flags_for(records, &crate::behaviour::Behaviour::BASELINE)
}

/// [`node_env_flags`] of the release that behaves as `behaviour`: where
/// bit 14 means `GRES_CONF_UUID`, a record's bit 14 goes into the node
/// flags too (`gres_common_set_env_types_on_node_flags`).
pub fn node_env_flags_for(records: &[GresRecord], behaviour: &crate::behaviour::Behaviour) -> ConfFlags {
    let mut keep = ConfFlags::ENV_SET;
    if behaviour.conf_bit14 == crate::behaviour::ConfBit14::Uuid {
        keep |= ConfFlags::BIT14;
    }
    let mut flags = ConfFlags(0);
    for r in records {
        flags.set(r.flags.0 & keep);
    }
    flags
}

/// Slurm's `gres_device_id2str()` form: `c 195:0 rwm`.
pub fn device_id_string(dev: &GresDevice) -> String {
    let t = match dev.dev_type {
        DevType::Block => 'b',
        DevType::Char => 'c',
        DevType::None => '?',
    };
    let num = |v: u32| if v == NO_VAL { "*".to_string() } else { v.to_string() };
    format!("{t} {}:{} rwm", num(dev.major), num(dev.minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing file reads as C's `%m` prints it, without std's
    /// " (os error 2)", even where the path itself looks like that suffix.
    #[test]
    fn stat_error_reads_as_slurm_logs_it() {
        assert_eq!(stat_device("/nonexistent-gres-rs/nvidia0"), Err("stat(/nonexistent-gres-rs/nvidia0): No such file or directory".to_string()));
        let odd = "/nonexistent-gres-rs/x (os error 1)";
        assert_eq!(stat_device(odd), Err(format!("stat({odd}): No such file or directory")));
    }

    /// Bit 14 reaches the node flags only where it means UUID.
    #[test]
    fn node_flags_carry_bit_14_only_as_uuid() {
        use crate::behaviour::{Behaviour, ConfBit14};
        let records = [rec("gpu", "/dev/nvidia0", ConfFlags::ENV_NVML | ConfFlags::BIT14), rec("gpu", "/dev/nvidia1", ConfFlags::ENV_RSMI)];
        let both = ConfFlags::ENV_NVML | ConfFlags::ENV_RSMI;
        assert_eq!(node_env_flags(&records).0, both);
        let global_index = Behaviour { conf_bit14: ConfBit14::GlobalIndex, ..Behaviour::BASELINE };
        assert_eq!(node_env_flags_for(&records, &global_index).0, both);
        let uuid = Behaviour { conf_bit14: ConfBit14::Uuid, ..Behaviour::BASELINE };
        assert_eq!(node_env_flags_for(&records, &uuid).0, both | ConfFlags::BIT14);
    }

    #[test]
    fn mig_records_make_mig_devices() {
        let records = [rec("gpu", "/dev/nvidia0", ConfFlags::ENV_NVML | ConfFlags::MIG), rec("gpu", "/dev/nvidia1", ConfFlags::ENV_NVML)];
        let list = build_device_list(&records, "gpu", true, &fake_stat);
        assert_eq!(list.devices.iter().map(|d| d.mig).collect::<Vec<_>>(), [true, false]);
    }

    fn rec(name: &str, file: &str, flags: u32) -> GresRecord {
        GresRecord { name: name.into(), file: Some(file.into()), flags: ConfFlags(flags | ConfFlags::HAS_FILE), count: 1, ..Default::default() }
    }

    fn fake_stat(path: &str) -> Result<DevStat, String> {
        if path.contains("missing") {
            return Err(format!("stat({path}): No such file or directory"));
        }
        if path.contains("regular") {
            return Ok(DevStat { dev_type: DevType::None, major: 8, minor: 1, inode: (8, 1) });
        }
        Ok(DevStat::device(DevType::Char, 195, trailing_number(path).unwrap_or(255) as u32))
    }

    #[test]
    fn ranges_number_in_order() {
        let recs = vec![rec("gpu", "/dev/nvidia[0-1]", 0), rec("mps", "/dev/nvidia0", 0), rec("gpu", "/dev/nvidia3", 0)];
        let l = build_device_list(&recs, "gpu", true, &fake_stat);
        assert!(l.problems.is_empty());
        let got: Vec<_> = l.devices.iter().map(|d| (d.index, d.dev_num, d.minor, d.path.as_str())).collect();
        assert_eq!(got, vec![(0, 0, 0, "/dev/nvidia0"), (1, 1, 1, "/dev/nvidia1"), (2, 3, 3, "/dev/nvidia3")]);
    }

    #[test]
    fn multiple_files_share_an_index() {
        let recs = vec![rec("gpu", "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21", ConfFlags::HAS_MULT), rec("gpu", "/dev/nvidia1", 0)];
        let l = build_device_list(&recs, "gpu", true, &fake_stat);
        let idx: Vec<_> = l.devices.iter().map(|d| d.index).collect();
        assert_eq!(idx, vec![0, 0, 1]);
    }

    #[test]
    fn duplicates_are_fatal_and_bad_files_skipped() {
        let recs = vec![rec("gpu", "/dev/nvidia[0-1]", 0), rec("gpu", "/dev/nvidia1,/dev/missing9,/tmp/regular", 0)];
        let l = build_device_list(&recs, "gpu", true, &fake_stat);
        assert!(l.has_fatal());
        assert_eq!(l.devices.len(), 3);
        assert!(l.problems.iter().any(|p| p.message.contains("duplicate device file name (/dev/nvidia1)")));
        assert!(l.problems.iter().any(|p| p.message.contains("not a valid character or block device")));
        assert!(l.problems.iter().any(|p| p.message.contains("/dev/missing9")));
    }

    #[test]
    fn names_without_numbers_get_fresh_numbers() {
        let recs = vec![rec("gpu", "/dev/nvidia4,/dev/gpuX", 0)];
        let l = build_device_list(&recs, "gpu", true, &fake_stat);
        assert_eq!(l.devices[1].dev_num, 5);
    }

    #[test]
    fn outside_slurmd_no_devices() {
        let recs = vec![rec("gpu", "/dev/nvidia[0-1]", 0)];
        assert!(build_device_list(&recs, "gpu", false, &fake_stat).devices.is_empty());
    }

    /// Device nodes by name: `/dev/nvidiaN` is minor N, `/links/gN` a
    /// symbolic link to `/dev/nvidiaN`, `/data/*` regular files (`hard*`
    /// hard links of one file); `/gone/*` cannot be looked at.
    fn id_stat(path: &str) -> Result<DevStat, String> {
        let n = trailing_number(path).unwrap_or(0) as u32;
        if path.starts_with("/dev/nvidia") || path.starts_with("/links/g") {
            Ok(DevStat::device(DevType::Char, 195, n))
        } else if path.starts_with("/dev/sda") {
            Ok(DevStat::device(DevType::Block, 195, n))
        } else if let Some(name) = path.strip_prefix("/data/") {
            let ino = if name.starts_with("hard") { 7 } else { 100 + u64::from(n) };
            Ok(DevStat { dev_type: DevType::None, major: 0, minor: 0, inode: (2049, ino) })
        } else {
            Err(format!("stat({path}): No such file or directory"))
        }
    }

    /// `(first GPU, first path, second GPU, second path)` of each pair
    /// found in the records `(file, MultipleFiles)`.
    fn pairs(recs: &[(&str, bool)]) -> Vec<(u32, String, u32, String)> {
        let records: Vec<GresRecord> = recs.iter().map(|(f, m)| rec("gpu", f, if *m { ConfFlags::HAS_MULT } else { 0 })).collect();
        let uses = build_device_list_with_files(&records, "gpu", true, &id_stat).files;
        same_devices(&uses).into_iter().map(|s| (s.first.gpu, s.first.path, s.second.gpu, s.second.path)).collect()
    }

    fn pair(a: u32, pa: &str, b: u32, pb: &str) -> (u32, String, u32, String) {
        (a, pa.into(), b, pb.into())
    }

    #[test]
    fn paths_normalized() {
        assert_eq!(normalize_path("/dev//./nvidia0"), "/dev/nvidia0");
        assert_eq!(normalize_path("/dev/nvidia0/"), "/dev/nvidia0");
        assert_eq!(normalize_path("dev/../nvidia0"), "dev/../nvidia0");
        assert_eq!(normalize_path("./x"), "x");
        assert_eq!(normalize_path("//"), "/");
        assert_eq!(normalize_path(""), ".");
    }

    #[test]
    fn device_list_files_are_numbered_like_its_devices() {
        let records = vec![
            rec("gpu", "/dev/nvidia[0-1]", 0),
            rec("mps", "/dev/nvidia0", 0),
            rec("gpu", "/dev/nvidia2,/gone/x", ConfFlags::HAS_MULT),
            rec("gpu", "/dev/nvidia3", 0),
        ];
        let uses = build_device_list_with_files(&records, "gpu", true, &id_stat).files;
        let got: Vec<_> = uses.iter().map(|u| (u.record, u.gpu, u.path.as_str(), u.multiple)).collect();
        assert_eq!(
            got,
            vec![
                (0, 0, "/dev/nvidia0", false),
                (0, 1, "/dev/nvidia1", false),
                (2, 2, "/dev/nvidia2", true),
                (2, 2, "/gone/x", true),
                (3, 3, "/dev/nvidia3", false)
            ]
        );
        assert_eq!(uses[0].id, FileId::Device { block: false, major: 195, minor: 0 });
        assert_eq!(uses[3].id, FileId::Path("/gone/x".into()));
        // Outside slurmd the same files, by name.
        let by_name = build_device_list_with_files(&records, "gpu", false, &id_stat).files;
        assert_eq!(by_name.iter().map(|u| (u.record, u.gpu, u.path.as_str(), u.multiple)).collect::<Vec<_>>(), got);
        let list = build_device_list_with_files(&records, "gpu", true, &id_stat);
        let idx: Vec<_> = list.devices.iter().map(|d| (d.index, d.path.as_str())).collect();
        assert_eq!(idx, vec![(0, "/dev/nvidia0"), (1, "/dev/nvidia1"), (2, "/dev/nvidia2"), (3, "/dev/nvidia3")]);
        // Without stat: names only.
        assert!(build_device_list_with_files(&records, "gpu", false, &id_stat).files.iter().all(|u| matches!(&u.id, FileId::Path(p) if *p == u.path)));
    }

    #[test]
    fn the_list_without_files_is_the_same_list() {
        let records = vec![
            rec("gpu", "/dev/nvidia[0-1]", 0),
            rec("gpu", "/dev/nvidia0", 0),
            rec("gpu", "/dev/nvidia2,/gone/x", ConfFlags::HAS_MULT),
            rec("gpu", "/data/regular", 0),
        ];
        for in_slurmd in [true, false] {
            let with = build_device_list_with_files(&records, "gpu", in_slurmd, &id_stat);
            let without = build_device_list(&records, "gpu", in_slurmd, &id_stat);
            assert!(without.files.is_empty());
            assert_eq!((&with.devices, &with.problems), (&without.devices, &without.problems));
        }
    }

    #[test]
    fn multiple_files_in_another_order() {
        assert_eq!(pairs(&[("/dev/nvidia[0-1]", true), ("/dev/nvidia1,/dev/nvidia0", true)]), vec![pair(0, "/dev/nvidia1", 1, "/dev/nvidia1")]);
    }

    #[test]
    fn symlink_and_its_target() {
        assert_eq!(pairs(&[("/dev/nvidia0", false), ("/links/g0", false)]), vec![pair(0, "/dev/nvidia0", 1, "/links/g0")]);
        // Through a range, on the second GPU of the first record.
        assert_eq!(pairs(&[("/dev/nvidia[0-1]", false), ("/links/g1", false)]), vec![pair(1, "/dev/nvidia1", 2, "/links/g1")]);
    }

    #[test]
    fn names_compared_when_not_looked_at() {
        assert_eq!(pairs(&[("/gone/a,/gone/b", true), ("/gone//b,/gone/./a", true)]), vec![pair(0, "/gone/b", 1, "/gone//b")]);
        assert_eq!(pairs(&[("/gone/nvidia[0-1]", false), ("/gone//nvidia1", false)]), vec![pair(1, "/gone/nvidia1", 2, "/gone//nvidia1")]);
        assert_eq!(pairs(&[("/gone/a", false), ("/gone/b", false)]), vec![]);
    }

    #[test]
    fn other_files_by_inode() {
        assert_eq!(pairs(&[("/data/hard1", false), ("/data/hard2", false)]), vec![pair(0, "/data/hard1", 1, "/data/hard2")]);
        assert_eq!(pairs(&[("/data/f1", false), ("/data/f2", false)]), vec![]);
    }

    #[test]
    fn different_devices_are_not_reported() {
        assert_eq!(pairs(&[("/dev/nvidia[0-3]", false), ("/dev/nvidia[4-5]", true)]), vec![]);
        // Same numbers, but a block device is another device.
        assert_eq!(pairs(&[("/dev/nvidia1", false), ("/dev/sda1", false)]), vec![]);
        // MIG instances of one GPU share its device node.
        let mig = [("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21", true), ("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30", true)];
        assert_eq!(pairs(&mig), vec![]);
        // One file named twice for one GPU is one GPU.
        assert_eq!(pairs(&[("/dev/nvidia0,/links/g0", true)]), vec![]);
    }

    #[test]
    fn a_gpu_within_another() {
        // The whole GPU and a MIG instance of it.
        let got = pairs(&[("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21", true), ("/links/g0", false)]);
        assert_eq!(got, vec![pair(0, "/dev/nvidia0", 1, "/links/g0")]);
        let got = pairs(&[("/dev/nvidia0", false), ("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21", true)]);
        assert_eq!(got, vec![pair(0, "/dev/nvidia0", 1, "/dev/nvidia0")]);
    }

    #[test]
    fn each_later_gpu_once() {
        let got = pairs(&[("/dev/nvidia0", false), ("/links/g0", false), ("/dev/nvidia0,/links/g0", true)]);
        assert_eq!(got, vec![pair(0, "/dev/nvidia0", 1, "/links/g0"), pair(0, "/dev/nvidia0", 2, "/dev/nvidia0")]);
    }

    #[test]
    fn plain_duplicates_are_left_to_the_fatal_error() {
        // Stock's "duplicate device file name" stops slurmd: no warning too.
        assert_eq!(pairs(&[("/dev/nvidia[0-1]", false), ("/dev/nvidia1", false)]), vec![]);
        // But a third spelling of it is reported, against the first GPU.
        assert_eq!(pairs(&[("/dev/nvidia1", false), ("/dev/nvidia1", false), ("/links/g1", false)]), vec![pair(0, "/dev/nvidia1", 2, "/links/g1")]);
        // MultipleFiles are not in stock's check.
        assert_eq!(pairs(&[("/dev/nvidia1", false), ("/dev/nvidia1", true)]), vec![pair(0, "/dev/nvidia1", 1, "/dev/nvidia1")]);
    }

    #[test]
    fn log_message_names_both_records() {
        let records = vec![rec("gpu", "/dev/nvidia[0-1]", ConfFlags::HAS_MULT), rec("gpu", "/dev/nvidia1,/dev/nvidia0", ConfFlags::HAS_MULT)];
        let found = same_devices(&build_device_list_with_files(&records, "gpu", true, &id_stat).files);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].log_message(&records),
            "/dev/nvidia1 (GPU 1, MultipleFiles=/dev/nvidia1,/dev/nvidia0) is the same device as /dev/nvidia1 (GPU 0, MultipleFiles=/dev/nvidia[0-1]): \
             two jobs could be given one GPU"
        );
        let records = vec![rec("gpu", "/dev/nvidia0", 0), rec("gpu", "/links/g0", 0)];
        let found = same_devices(&build_device_list_with_files(&records, "gpu", true, &id_stat).files);
        assert_eq!(
            found[0].log_message(&records),
            "/links/g0 (GPU 1, File=/links/g0) is the same device as /dev/nvidia0 (GPU 0, File=/dev/nvidia0): two jobs could be given one GPU"
        );
    }

    #[test]
    fn env_flags_union() {
        let mut a = rec("gpu", "/dev/nvidia0", ConfFlags::ENV_NVML);
        a.flags.set(ConfFlags::HAS_TYPE);
        let b = rec("gpu", "/dev/nvidia1", ConfFlags::ENV_OPENCL);
        assert_eq!(node_env_flags(&[a, b]).0, ConfFlags::ENV_NVML | ConfFlags::ENV_OPENCL);
    }
}
