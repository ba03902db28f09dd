//! The Slurm installed on this host, as `gres-rs` finds it without
//! asking a daemon: its release (`slurmd -V`, `slurm_version.h`), the
//! programs this tool runs (slurmd, dpkg, rpm: never through root's
//! `PATH`), slurmd's compiled-in default `PluginDir`, and the package that
//! owns a path.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::elf::{Elf, MAX_PLUGIN_FILE_LEN};

/// Where Slurm's own plugins usually are.
const STOCK_PLUGIN_DIRS: [&str; 5] =
    ["/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib/slurm-wlm", "/usr/lib64/slurm", "/usr/lib/slurm"];

/// Whether a plugin of release `version` may be installed for a slurmd of
/// release `installed` (unknown: not checked): slurmd loads only plugins
/// of its own major, minor and micro release.
pub fn version_ok(version: u32, installed: Option<u32>) -> bool {
    installed.is_none_or(|v| v & 0xff_ffff == version & 0xff_ffff)
}

/// `22.05.8` for 0x160508.
pub fn version_text(v: u32) -> String {
    format!("{}.{:02}.{}", (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff)
}

/// A release number from text like `slurm-wlm 22.05.8` or `slurm 23.02.1-1`.
pub fn parse_version(text: &str) -> Option<u32> {
    let word = text.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut parts = word.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty());
    let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok()).filter(|&n| n <= 0xff);
    let (major, minor, micro) = (next()?, next()?, next().unwrap_or(0));
    Some((major << 16) | (minor << 8) | micro)
}

/// The `SLURM_VERSION_NUMBER` of a `slurm_version.h`.
pub fn header_version(text: &str) -> Option<u32> {
    let line = text.lines().find(|l| l.trim_start().starts_with("#define SLURM_VERSION_NUMBER"))?;
    let value = line.split_whitespace().nth(2)?;
    match value.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => value.parse().ok(),
    }
}

/// Environment variable that names the installed Slurm release instead of
/// asking slurmd (for tests, and hosts without slurmd).
pub const VERSION_ENV: &str = "GRES_RS_SLURMD_VERSION";

/// Where root looks for the programs it runs, in this order: where Slurm's
/// packages (Debian, RPM: /usr/sbin/slurmd) and the package managers
/// (/usr/bin/dpkg, /usr/bin/rpm) put them, and a build from source
/// (prefix /usr/local).  Never `PATH`: a `sudo` or a unit may keep one
/// that names a directory of a user's.
pub const SYSTEM_PROGRAM_DIRS: [&str; 6] = ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"];

/// The program `name` to run, with its directory: as root (`root`), the
/// first of [`SYSTEM_PROGRAM_DIRS`] where it is an executable file owned by
/// root and writable by neither group nor others, in a directory of the
/// same kind (what root runs must not be a file anyone else can change);
/// as anyone else, the first of `path` (the value of `PATH`) where it is an
/// executable file, as `execvp(3)` finds it (relative entries left out).
/// `stat` gives a path's owner and `st_mode` (type bits included),
/// following symlinks.
pub fn find_program(name: &str, root: bool, path: Option<&std::ffi::OsStr>, stat: &dyn Fn(&Path) -> Option<DirStat>) -> Option<PathBuf> {
    const S_IFMT: u32 = 0o170_000;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let executable = |s: &DirStat| s.mode & S_IFMT == 0o100_000 && s.mode & 0o111 != 0;
    let roots = |s: &DirStat| s.uid == 0 && s.mode & 0o022 == 0;
    if root {
        return SYSTEM_PROGRAM_DIRS.iter().map(Path::new).find_map(|dir| {
            let file = dir.join(name);
            let ok = stat(dir).is_some_and(|d| d.mode & S_IFMT == 0o040_000 && roots(&d)) && stat(&file).is_some_and(|f| executable(&f) && roots(&f));
            ok.then_some(file)
        });
    }
    std::env::split_paths(path?).filter(|d| d.is_absolute()).map(|d| d.join(name)).find(|f| stat(f).is_some_and(|s| executable(&s)))
}

/// Whether this process runs as root (its effective user id is 0, as
/// `/proc/self/status` says; unreadable: taken as root, the careful
/// side).
pub fn running_as_root() -> bool {
    let status = gres_core::bounded_read::read_bounded(Path::new("/proc/self/status"), 1 << 16).unwrap_or_default();
    uids_of(&status).is_none_or(|(_, effective)| effective == 0)
}

/// Real and effective uid from the text of `/proc/<pid>/status`.
pub fn uids_of(status: &[u8]) -> Option<(u32, u32)> {
    let line = status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"Uid:"))?;
    let text = std::str::from_utf8(line).ok()?;
    let mut ids = text.split_ascii_whitespace().map(|n| n.parse::<u32>());
    match (ids.next(), ids.next()) {
        (Some(Ok(real)), Some(Ok(effective))) => Some((real, effective)),
        _ => None,
    }
}

/// [`find_program`] for this process: its user, its `PATH`, the file
/// system.  Every program this tool runs is found through it.
pub fn program(name: &str) -> Option<PathBuf> {
    let stat = |p: &Path| fs::metadata(p).ok().map(|m| DirStat::of(&m));
    find_program(name, running_as_root(), std::env::var_os("PATH").as_deref(), &stat)
}

/// The installed slurmd's release, and where it was read.
pub fn installed_version() -> Option<(u32, String)> {
    if let Some(v) = std::env::var(VERSION_ENV).ok().and_then(|v| parse_version(&v)) {
        return Some((v, VERSION_ENV.into()));
    }
    if let Some(out) = program("slurmd").and_then(|slurmd| Command::new(slurmd).arg("-V").output().ok()) {
        if let Some(v) = parse_version(&String::from_utf8_lossy(&out.stdout)) {
            return Some((v, "slurmd -V".into()));
        }
    }
    let header = "/usr/include/slurm/slurm_version.h";
    let v = header_version(&fs::read_to_string(header).ok()?)?;
    Some((v, header.into()))
}

/// The owner and mode (type bits included) of a file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirStat {
    pub uid: u32,
    pub mode: u32,
}

impl DirStat {
    pub fn of(meta: &fs::Metadata) -> Self {
        DirStat { uid: meta.uid(), mode: meta.mode() }
    }
}

/// The installed package `dpkg -S PATH` names as the owner of `path`
/// exactly (several, comma-separated, for a shared directory), from its
/// output.
pub fn dpkg_owner(output: &str, path: &Path) -> Option<String> {
    let suffix = format!(": {}", path.display());
    output.lines().filter(|l| !l.starts_with("diversion by ")).find_map(|l| l.strip_suffix(&suffix)).map(str::to_string).filter(|p| !p.is_empty())
}

/// The installed package that owns `path`, as dpkg or rpm (those of them
/// that exist) say.  `None`: no package, or no package manager.
pub fn package_owner(path: &Path) -> Option<String> {
    let run = |cmd: &str, arg: &str| program(cmd).and_then(|cmd| Command::new(cmd).arg(arg).arg(path).output().ok()).filter(|o| o.status.success());
    if let Some(out) = run("dpkg", "-S") {
        if let Some(p) = dpkg_owner(&String::from_utf8_lossy(&out.stdout), path) {
            return Some(p);
        }
    }
    run("rpm", "-qf").map(|o| String::from_utf8_lossy(&o.stdout).lines().collect::<Vec<_>>().join(", ")).filter(|p| !p.trim().is_empty())
}

/// slurmd's own `PluginDir`, the one it searches when slurm.conf names
/// none: the directory compiled into the installed slurmd's Slurm library
/// ([`default_plugin_dir`]), whatever is in it.  Without a
/// slurmd to read it from, the first of the usual directories that holds
/// Slurm's library or a `gres_gpu.so` (a dangling link too).
pub fn stock_dir() -> Option<PathBuf> {
    let read = |p: &Path| gres_core::bounded_read::read_bounded(p, MAX_PLUGIN_FILE_LEN).ok();
    program("slurmd").and_then(|slurmd| default_plugin_dir(&slurmd, &read)).or_else(|| {
        let holds = |d: &Path, name: &str| fs::symlink_metadata(d.join(name)).is_ok();
        STOCK_PLUGIN_DIRS.iter().map(PathBuf::from).find(|d| d.is_dir() && (holds(d, SLURM_LIBRARY) || holds(d, "gres_gpu.so")))
    })
}

/// The library slurmd is linked with: it holds the code of slurm.conf's
/// reading, the default `PluginDir` included.
pub const SLURM_LIBRARY: &str = "libslurmfull.so";

/// slurmd's `PluginDir` when slurm.conf has none, read from the slurmd
/// at `slurmd` (`read` gives a file's bytes).
///
/// slurmd takes it from `default_plugin_path` (`src/common/read_config.c`:
/// `conf->plugindir = xstrdup(default_plugin_path)`), a string that
/// `src/common/Makefile.am` compiles in as the build's `$(pkglibdir)`
/// (`--libdir`/slurm; Debian's `/usr/lib/<triplet>/slurm-wlm`) and that
/// lives in `libslurmfull.so`, the library slurmd is linked with.  That
/// library is installed into the same `$(pkglibdir)` (`src/api/Makefile.am`:
/// `pkglib_LTLIBRARIES`), which is why slurmd's `RUNPATH` names it.  So:
/// the `libslurmfull.so` slurmd loads (the first directory of its
/// `RUNPATH`, else `RPATH`, that has one), and in it the string
/// `default_plugin_path` points to; where that cannot be read (another
/// layout of the library), the library's directory, which is the same
/// `$(pkglibdir)`.  Neither `slurmd -C` nor a running daemon is asked:
/// the first does not print it, `scontrol show config` shows slurmctld's
/// value, and neither works when the node's daemons are down.  Nothing in
/// the directory needs to be a loadable plugin: that is what `check`
/// finds out.
pub fn default_plugin_dir(slurmd: &Path, read: &dyn Fn(&Path) -> Option<Vec<u8>>) -> Option<PathBuf> {
    let binary = read(slurmd)?;
    // `$ORIGIN`: the directory of the file itself, symlinks resolved
    // (Debian's /usr/sbin/slurmd is an alternatives link).
    let real = std::fs::canonicalize(slurmd).unwrap_or_else(|_| slurmd.to_path_buf());
    let origin = real.parent().unwrap_or(Path::new("/")).to_string_lossy().into_owned();
    let search = Elf::parse(&binary).ok()?.run_path()?;
    search.split(':').filter(|d| !d.is_empty()).map(|d| PathBuf::from(d.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))).find_map(|dir| {
        let library = read(&dir.join(SLURM_LIBRARY))?;
        let compiled_in = Elf::parse(&library).ok().and_then(|l| l.string_pointed_to(b"default_plugin_path"));
        Some(compiled_in.map(PathBuf::from).filter(|p| p.is_absolute()).unwrap_or(dir))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("slurm-wlm 22.05.8\n"), Some(0x160508));
        assert_eq!(parse_version("slurm 23.02.1-1"), Some(0x170201));
        assert_eq!(parse_version("nothing"), None);
        assert_eq!(version_text(0x160508), "22.05.8");
        assert_eq!(header_version("#define X 1\n#define SLURM_VERSION_NUMBER 0x160508\n"), Some(0x160508));
        assert_eq!(header_version("#define SLURM_VERSION_NUMBER 1443080\n"), Some(0x160508));
    }

    #[test]
    fn programs_root_runs() {
        const FILE: u32 = 0o100_000;
        const DIR: u32 = 0o040_000;
        // /usr/sbin/slurmd as packaged; the rest as each case says.
        let system = |extra: &'static [(&'static str, u32, u32)]| {
            move |p: &Path| -> Option<DirStat> {
                let dirs = SYSTEM_PROGRAM_DIRS.iter().map(|d| (*d, 0, DIR | 0o755));
                let files = [("/usr/sbin/slurmd", 0, FILE | 0o755), ("/usr/bin/dpkg", 0, FILE | 0o755), ("/home/u/bin", 1000, DIR | 0o755)];
                let all: Vec<(&str, u32, u32)> = extra.iter().copied().chain(dirs).chain(files).collect();
                all.iter().find(|(q, _, _)| Path::new(q) == p).map(|&(_, uid, mode)| DirStat { uid, mode })
            }
        };
        let path = std::ffi::OsString::from("/home/u/bin:/usr/bin:/usr/sbin");
        let user_slurmd: &[(&str, u32, u32)] = &[("/home/u/bin/slurmd", 1000, FILE | 0o755), ("/home/u/bin/dpkg", 1000, FILE | 0o755)];
        let find = |name: &str, root: bool, extra: &'static [(&'static str, u32, u32)]| find_program(name, root, Some(&path), &system(extra));
        // Anyone else: PATH, as execvp() searches it.
        assert_eq!(find("slurmd", false, user_slurmd), Some(PathBuf::from("/home/u/bin/slurmd")));
        assert_eq!(find("slurmd", false, &[]), Some(PathBuf::from("/usr/sbin/slurmd")));
        // Root: never PATH, only the system's directories.
        assert_eq!(find("slurmd", true, user_slurmd), Some(PathBuf::from("/usr/sbin/slurmd")));
        assert_eq!(find("dpkg", true, user_slurmd), Some(PathBuf::from("/usr/bin/dpkg")));
        assert_eq!(find("rpm", true, &[]), None);
        // ... and there only root's files no one else may change, in root's
        // directories no one else may change.
        assert_eq!(find("slurmd", true, &[("/usr/sbin/slurmd", 1000, FILE | 0o755)]), None);
        assert_eq!(find("slurmd", true, &[("/usr/sbin/slurmd", 0, FILE | 0o775)]), None);
        assert_eq!(find("slurmd", true, &[("/usr/sbin/slurmd", 0, FILE | 0o757)]), None);
        assert_eq!(find("slurmd", true, &[("/usr/sbin", 0, DIR | 0o777)]), None);
        assert_eq!(find("slurmd", true, &[("/usr/sbin", 1000, DIR | 0o755)]), None);
        // The next directory's, when it is fine.
        assert_eq!(
            find("slurmd", true, &[("/usr/sbin/slurmd", 0, FILE | 0o777), ("/usr/local/sbin/slurmd", 0, FILE | 0o755)]),
            Some(PathBuf::from("/usr/local/sbin/slurmd"))
        );
        // Not executable, not a file: passed over, by anyone.
        assert_eq!(find("slurmd", false, &[("/usr/sbin/slurmd", 0, FILE | 0o644)]), None);
        assert_eq!(find("slurmd", true, &[("/usr/sbin/slurmd", 0, DIR | 0o755)]), None);
        // Names only; relative PATH entries are not searched.
        assert_eq!(find("/usr/sbin/slurmd", true, &[]), None);
        assert_eq!(find("../slurmd", false, &[]), None);
        let relative = std::ffi::OsString::from("bin:.");
        assert_eq!(find_program("slurmd", false, Some(&relative), &system(&[("bin/slurmd", 0, FILE | 0o755)])), None);
        assert_eq!(find_program("slurmd", false, None, &system(&[])), None);
        // This process: root or not, what it finds is absolute.
        assert!(program("sh").is_none_or(|p| p.is_absolute()));
    }

    /// A slurmd and a Slurm library made by `cc` in a new directory of
    /// this test: `lib/libslurmfull.so` with `lib_source`, `sbin/slurmd`
    /// linked with it and `link_flags` (its RUNPATH).  `None`: no `cc`.
    fn tiny_slurm(tag: &str, lib_source: &str, link_flags: &[&str]) -> Option<PathBuf> {
        use std::process::Command;
        let dir = std::env::temp_dir().join(format!("gres-rs-default-dir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["lib", "sbin", "src"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("src/lib.c"), lib_source).unwrap();
        std::fs::write(dir.join("src/main.c"), "int slurm_fn(void);\nint main(void) { return slurm_fn(); }\n").unwrap();
        let cc = |args: &[&str]| Command::new("cc").current_dir(&dir).args(args).status().is_ok_and(|s| s.success());
        if !cc(&["--version"]) {
            return None;
        }
        assert!(cc(&["-shared", "-fPIC", "-o", "lib/libslurmfull.so", "src/lib.c"]));
        let mut args = vec!["-o", "sbin/slurmd", "src/main.c", "-Llib", "-lslurmfull"];
        args.extend_from_slice(link_flags);
        assert!(cc(&args));
        Some(dir)
    }

    #[test]
    fn default_plugin_dir_as_slurmd_has_it() {
        let read = |p: &Path| std::fs::read(p).ok();
        let lib = "int slurm_fn(void) { return 0; }\nchar *default_plugin_path = \"/opt/slurm/lib/slurm\";\n";
        // The string compiled into the library slurmd's RUNPATH names
        // ($ORIGIN as the dynamic loader expands it), not the directory
        // the library happens to be in.
        if let Some(dir) = tiny_slurm("runpath", lib, &["-Wl,-rpath,/nonexistent/lib:$ORIGIN/../lib", "-Wl,--enable-new-dtags"]) {
            let slurmd = dir.join("sbin/slurmd");
            assert!(Elf::parse(&std::fs::read(&slurmd).unwrap()).unwrap().run_path().unwrap().ends_with("$ORIGIN/../lib"));
            assert_eq!(default_plugin_dir(&slurmd, &read), Some(PathBuf::from("/opt/slurm/lib/slurm")));
            // Its files do not matter: none is read.
            let only = |p: &Path| (p.starts_with(&dir)).then(|| std::fs::read(p).ok()).flatten();
            assert_eq!(default_plugin_dir(&slurmd, &only), Some(PathBuf::from("/opt/slurm/lib/slurm")));
            // No library where RUNPATH says: none (slurmd would not start).
            std::fs::remove_file(dir.join("lib/libslurmfull.so")).unwrap();
            assert_eq!(default_plugin_dir(&slurmd, &read), None);
            std::fs::remove_dir_all(&dir).unwrap();
        }
        // An old-style RPATH, and a library without the variable: its
        // directory, Slurm's $(pkglibdir) as well.
        if let Some(dir) = tiny_slurm("rpath", "int slurm_fn(void) { return 0; }\n", &["-Wl,-rpath,$ORIGIN/../lib", "-Wl,--disable-new-dtags"]) {
            let slurmd = dir.join("sbin/slurmd");
            let lib_dir = std::fs::canonicalize(dir.join("sbin")).unwrap().join("../lib");
            assert_eq!(default_plugin_dir(&slurmd, &read), Some(lib_dir));
            // A symlink to slurmd (Debian's alternatives): $ORIGIN is the
            // file's own directory.
            let link = dir.join("src/slurmd");
            std::os::unix::fs::symlink(&slurmd, &link).unwrap();
            assert_eq!(default_plugin_dir(&link, &read), default_plugin_dir(&slurmd, &read));
            std::fs::remove_dir_all(&dir).unwrap();
        }
        // Not ELF, or no RUNPATH: none.
        assert_eq!(default_plugin_dir(Path::new("/x/slurmd"), &|_: &Path| Some(b"#!/bin/sh\n".to_vec())), None);
        assert_eq!(default_plugin_dir(Path::new("/x/slurmd"), &|_: &Path| None), None);
        assert!(Elf::parse(b"\x7fELF\x02\x01").is_err());
        // The installed Slurm: the directory of its own plugins.
        let stock = Path::new("/usr/lib/x86_64-linux-gnu/slurm-wlm");
        let slurmd = Path::new("/usr/sbin/slurmd");
        if slurmd.exists() && stock.join(SLURM_LIBRARY).is_file() {
            assert_eq!(default_plugin_dir(slurmd, &read).as_deref(), Some(stock));
            let library = std::fs::read(stock.join(SLURM_LIBRARY)).unwrap();
            assert_eq!(Elf::parse(&library).unwrap().string_pointed_to(b"default_plugin_path").as_deref(), Some(stock.to_str().unwrap()));
        }
    }
}
