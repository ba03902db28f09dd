//! The files a process has mapped, from the text of `/proc/<pid>/maps`
//! (`address perms offset dev inode path`): what `gres-rs status`, the
//! plugins' init line and the test bed read to tell which plugin file a
//! daemon loaded.

/// One mapped file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// As the kernel shows it, without a ` (deleted)` suffix.
    pub path: String,
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
/// anonymous and special mappings (`[heap]`) are left out.
pub fn mapped_files(maps: &str) -> Vec<Mapped> {
    let mut out: Vec<Mapped> = Vec::new();
    for line in maps.lines() {
        let mut rest = line;
        let mut fields = [""; 5];
        for f in fields.iter_mut() {
            rest = rest.trim_start_matches(' ');
            let end = rest.find(' ').unwrap_or(rest.len());
            *f = &rest[..end];
            rest = &rest[end..];
        }
        let [range, _perms, _offset, dev, inode] = fields;
        let path = rest.trim_start_matches(' ');
        if !path.starts_with('/') {
            continue;
        }
        let (Ok(inode), Some((major, minor))) = (inode.parse::<u64>(), dev.split_once(':')) else { continue };
        let (Ok(major), Ok(minor)) = (u32::from_str_radix(major, 16), u32::from_str_radix(minor, 16)) else { continue };
        let (path, deleted) = match path.strip_suffix(" (deleted)") {
            Some(p) => (p, true),
            None => (path, false),
        };
        if out.iter().any(|m| m.path == path && m.inode == inode && m.dev == (major, minor)) {
            continue;
        }
        out.push(Mapped { path: path.to_string(), dev: (major, minor), inode, deleted, range: range.to_string() });
    }
    out
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
    fn dev_numbers_split_as_glibc_does() {
        assert_eq!(split_dev(0xfd01), (0xfd, 1));
        assert_eq!(split_dev((259 << 8) | 3), (259, 3));
    }
}
