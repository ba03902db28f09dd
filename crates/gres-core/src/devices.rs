//! The node's device list: each `File` of the plugin's gres.conf records,
//! expanded, `stat()`ed and numbered, as slurmd's cgroup code and the
//! environment functions see it.

use super::hostlist;
use super::model::{ConfFlags, DevType, GresDevice, GresRecord, NO_VAL};
use std::collections::HashSet;

/// What `stat()` tells about a device file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevStat {
    pub dev_type: DevType,
    pub major: u32,
    pub minor: u32,
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

/// An OS error as C's `%m` prints it ("No such file or directory"), without
/// std's " (os error 2)".
fn os_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// `stat()` a device file through std, the real-machine implementation of
/// the `stat` argument of [`build_device_list`].
pub fn stat_device(path: &str) -> Result<DevStat, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).map_err(|e| format!("stat({path}): {}", os_error_text(&e)))?;
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
    Ok(DevStat { dev_type, major, minor })
}

/// Build the device list of GRES `name` from the node's records, in record
/// order.  Each file of a record takes the next bitmap index, except that all
/// files of a `MultipleFiles` record share one index.  Files that cannot be
/// `stat()`ed or are not device nodes are left out with a problem; a file
/// named twice is a fatal problem.  Outside slurmd (`in_slurmd == false`)
/// no file is touched and the list stays empty, as the stock plugin does.
pub fn build_device_list(records: &[GresRecord], name: &str, in_slurmd: bool, stat: &dyn Fn(&str) -> Result<DevStat, String>) -> DeviceList {
    let mut out = DeviceList::default();
    let mut seen: HashSet<String> = HashSet::new();
    let mut index: u32 = 0;
    let mut max_dev_num: i32 = -1;
    let mut duplicate_reported = false;

    for rec in records {
        if rec.name != name || !rec.flags.has(ConfFlags::HAS_FILE) {
            continue;
        }
        let Some(file) = rec.file.as_deref() else { continue };
        let files = match hostlist::expand(file) {
            Ok(f) => f,
            Err(e) => {
                out.problems.push(DeviceProblem { fatal: false, message: format!("can't parse gres.conf file record ({file}): {e}") });
                continue;
            }
        };
        let multiple = rec.flags.has(ConfFlags::HAS_MULT);
        for one in files {
            if in_slurmd {
                match stat(&one) {
                    Err(msg) => out.problems.push(DeviceProblem { fatal: false, message: msg }),
                    Ok(st) if st.dev_type == DevType::None => out
                        .problems
                        .push(DeviceProblem { fatal: false, message: format!("{one} is not a valid character or block device, fix your gres.conf") }),
                    Ok(st) => {
                        let dev_num = trailing_number(&one).unwrap_or(-1);
                        max_dev_num = max_dev_num.max(dev_num);
                        out.devices.push(GresDevice {
                            index,
                            dev_num,
                            dev_type: st.dev_type,
                            major: st.major,
                            minor: st.minor,
                            path: one.clone(),
                            unique_id: rec.unique_id.clone(),
                        });
                    }
                }
            }
            if multiple {
                continue;
            }
            if !seen.insert(one.clone()) && !duplicate_reported {
                out.problems.push(DeviceProblem { fatal: true, message: format!("{name} duplicate device file name ({one})") });
                duplicate_reported = true;
            }
            index += 1;
        }
        if multiple {
            index += 1;
        }
    }
    // Files without a number get numbers past the largest one.
    for dev in out.devices.iter_mut() {
        if dev.dev_num == -1 {
            max_dev_num += 1;
            dev.dev_num = max_dev_num;
        }
    }
    out
}

/// The env flags of the node: the union of the `ENV_*` bits of every
/// record (if one record wants a variable, every record on the node does).
pub fn node_env_flags(records: &[GresRecord]) -> ConfFlags {
    let mut flags = ConfFlags(0);
    for r in records {
        flags.set(r.flags.0 & ConfFlags::ENV_SET);
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

    fn rec(name: &str, file: &str, flags: u32) -> GresRecord {
        GresRecord { name: name.into(), file: Some(file.into()), flags: ConfFlags(flags | ConfFlags::HAS_FILE), count: 1, ..Default::default() }
    }

    fn fake_stat(path: &str) -> Result<DevStat, String> {
        if path.contains("missing") {
            return Err(format!("stat({path}): No such file or directory"));
        }
        if path.contains("regular") {
            return Ok(DevStat { dev_type: DevType::None, major: 8, minor: 1 });
        }
        Ok(DevStat { dev_type: DevType::Char, major: 195, minor: trailing_number(path).unwrap_or(255) as u32 })
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

    #[test]
    fn env_flags_union() {
        let mut a = rec("gpu", "/dev/nvidia0", ConfFlags::ENV_NVML);
        a.flags.set(ConfFlags::HAS_TYPE);
        let b = rec("gpu", "/dev/nvidia1", ConfFlags::ENV_OPENCL);
        assert_eq!(node_env_flags(&[a, b]).0, ConfFlags::ENV_NVML | ConfFlags::ENV_OPENCL);
    }
}
