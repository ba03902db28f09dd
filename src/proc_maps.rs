//! The files a process has mapped, from the text of `/proc/<pid>/maps`
//! (`address perms offset dev inode path`): what `gres-rs status`, the
//! plugins' init line and the test bed read to tell which plugin file a
//! daemon loaded.

use std::collections::HashSet;

/// The longest path kept (`PATH_MAX`, with its NUL): a longer one is no
/// file `open()` or `dlopen()` could have been given, and is left out.
pub const MAX_PATH_LEN: usize = 4096;

/// The most of a `maps` text a reader should take (`gres-rs status`): a
/// daemon maps a few hundred files, a few hundred KiB of text.
pub const MAX_MAPS_LEN: u64 = 16 << 20;

/// One mapped file; its path a `String` ([`mapped_files`]) or the bytes
/// the kernel wrote ([`mapped_files_bytes`]: a path need not be UTF-8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped<P = String> {
    /// As the kernel shows it, without a ` (deleted)` suffix.
    pub path: P,
    /// `major:minor` of the file system (hex in the text).
    pub dev: (u32, u32),
    pub inode: u64,
    /// The kernel says ` (deleted)`: the file was removed or replaced.
    pub deleted: bool,
    /// The address range of its first mapping, the name of its entry in
    /// `/proc/<pid>/map_files/`.
    pub range: String,
}

/// The files of `maps`, each once, in the order of their first mapping;
/// anonymous and special mappings (`[heap]`) are left out, and so is a
/// path longer than [`MAX_PATH_LEN`].
pub fn mapped_files(maps: &str) -> Vec<Mapped> {
    mapped_files_bytes(maps.as_bytes())
        .into_iter()
        // Cut at ASCII spaces and newlines only: still UTF-8.
        .map(|m| Mapped { path: String::from_utf8(m.path).unwrap_or_default(), dev: m.dev, inode: m.inode, deleted: m.deleted, range: m.range })
        .collect()
}

/// [`mapped_files`] of the bytes of `maps` as read: paths are bytes, as
/// the kernel wrote them (it writes a newline of a path as `\012`).
pub fn mapped_files_bytes(maps: &[u8]) -> Vec<Mapped<Vec<u8>>> {
    let mut out: Vec<Mapped<Vec<u8>>> = Vec::new();
    let mut seen: HashSet<((u32, u32), u64, &[u8])> = HashSet::new();
    for line in maps.split(|&b| b == b'\n') {
        let mut rest = line;
        let mut fields: [&[u8]; 5] = [b""; 5];
        for f in fields.iter_mut() {
            rest = trim_spaces(rest);
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            *f = &rest[..end];
            rest = &rest[end..];
        }
        let [range, _perms, _offset, dev, inode] = fields;
        let path = trim_spaces(rest);
        if !path.starts_with(b"/") {
            continue;
        }
        let (path, deleted) = match path.strip_suffix(b" (deleted)") {
            Some(p) => (p, true),
            None => (path, false),
        };
        if path.len() > MAX_PATH_LEN {
            continue;
        }
        let (Ok(range), Some(inode), Some((major, minor))) =
            (std::str::from_utf8(range), number(inode, 10), dev.iter().position(|&b| b == b':').map(|i| dev.split_at(i)))
        else {
            continue;
        };
        let (Some(major), Some(minor)) = (number(major, 16), number(&minor[1..], 16)) else { continue };
        let (Ok(major), Ok(minor)) = (u32::try_from(major), u32::try_from(minor)) else { continue };
        if !seen.insert(((major, minor), inode, path)) {
            continue;
        }
        out.push(Mapped { path: path.to_vec(), dev: (major, minor), inode, deleted, range: range.to_string() });
    }
    out
}

fn trim_spaces(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ').unwrap_or(s.len());
    &s[start..]
}

/// A number of `radix` digits only (no sign, no space).
fn number(digits: &[u8], radix: u32) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(|b| (*b as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, radix).ok()
}

/// `major:minor` of a `st_dev`, as glibc's `gnu_dev_major`/`minor` split
/// it (what maps lines show).
pub fn split_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0000000-55d0c0010000 r--p 00000000 fd:01 100                        /usr/sbin/slurmd
7f0000000000-7f0000001000 r-xp 00000000 fd:01 200                        /opt/ours/gres_gpu.so
7f0000001000-7f0000002000 r--p 00001000 fd:01 200                        /opt/ours/gres_gpu.so
7f0000010000-7f0000020000 r-xp 00000000 fd:01 300                        /opt/ours/libgres_rs.so (deleted)
7f0000030000-7f0000031000 r-xp 00000000 fd:01 400                        /opt/with space/gres_mps.so
7f0000050000-7f0000051000 rw-p 00000000 00:00 0                          [heap]
7f0000060000-7f0000061000 rw-p 00000000 00:00 0 
";

    #[test]
    fn each_file_once_with_its_place() {
        let files = mapped_files(MAPS);
        let got: Vec<(&str, u64, bool)> = files.iter().map(|m| (m.path.as_str(), m.inode, m.deleted)).collect();
        assert_eq!(
            got,
            [
                ("/usr/sbin/slurmd", 100, false),
                ("/opt/ours/gres_gpu.so", 200, false),
                ("/opt/ours/libgres_rs.so", 300, true),
                ("/opt/with space/gres_mps.so", 400, false)
            ]
        );
        assert_eq!(files[1].dev, (0xfd, 1));
        assert_eq!(files[1].range, "7f0000000000-7f0000001000");
    }

    #[test]
    fn bytes_as_the_kernel_wrote_them() {
        let mut maps = b"7f00-7f01 r-xp 00000000 fd:01 7 /opt/\x1b[31mevil\xff/gres_gpu.so\n".to_vec();
        let long = format!("/{}", "a".repeat(MAX_PATH_LEN));
        maps.extend_from_slice(format!("7f02-7f03 r-xp 00000000 fd:01 8 {long}\n").as_bytes());
        maps.extend_from_slice(format!("7f04-7f05 r-xp 00000000 fd:01 9 {} (deleted)\n", &long[..MAX_PATH_LEN]).as_bytes());
        maps.extend_from_slice(b"7f06-7f07 r-xp 00000000 zz:01 10 /bad/dev\n7f08-7f09 r-xp 00000000 fd:01 -1 /bad/inode\n");
        let files = mapped_files_bytes(&maps);
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(files[0].path, b"/opt/\x1b[31mevil\xff/gres_gpu.so");
        assert_eq!((files[0].dev, files[0].inode, files[0].deleted), ((0xfd, 1), 7, false));
        // At PATH_MAX kept, one byte more left out.
        assert_eq!(files[1].path.len(), MAX_PATH_LEN);
        assert!(files[1].deleted);
    }

    #[test]
    fn many_distinct_files() {
        // Each file once through a set: a quadratic search over 200000
        // files would not end.
        let maps: String = (0..200_000).map(|i| format!("{i:x}-{:x} r--p 00000000 fd:01 {i} /lib/f{i}.so\n", i + 1)).collect();
        assert!(maps.len() as u64 <= MAX_MAPS_LEN);
        assert_eq!(mapped_files(&maps).len(), 200_000);
    }

    #[test]
    fn dev_numbers_split_as_glibc_does() {
        assert_eq!(split_dev(0xfd01), (0xfd, 1));
        assert_eq!(split_dev((259 << 8) | 3), (259, 3));
    }

    /// The plugin file a daemon loaded, from the files of its maps
    /// (`gres_core::plugin_files::loaded_from`), as `gres-rs status` reads it.
    #[test]
    fn plugin_loaded_from_maps() {
        use gres_core::plugin_files::loaded_from;
        let maps = "\
7f00-7f01 r-xp 00000000 fd:01 1 /usr/lib/x86_64-linux-gnu/slurm-wlm/gres_gpu.so
7f02-7f03 r-xp 00000000 fd:01 2 /opt/ours/gres_gpu.so
7f04-7f05 r-xp 00000000 fd:01 3 /opt/ours/libgres_rs.so
7f06-7f07 rw-p 00000000 00:00 0 [heap]
";
        let files = mapped_files(maps);
        assert_eq!(loaded_from(files.iter().map(|m| m.path.as_str()), "gres_gpu").as_deref(), Some("/opt/ours/gres_gpu.so"));
    }
}
