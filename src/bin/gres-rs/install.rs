//! `gres-rs install`: put the plugin files where slurmd loads them, without
//! ever writing into a file a running daemon has mapped.

use std::collections::BTreeSet;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use gres_core::plugin_files::PLUGIN_FILES;
use slurm_gpu_gres::ffi::entry_points::LIBRARY_SYMBOL_PREFIX;
use slurm_gpu_gres::plugin_file_bytes;
use slurm_gpu_gres::predict::slurm_conf::SlurmConf;
use slurm_gpu_gres::{is_library_file, BUILT_LIBRARY_FILE, LIBRARY_FILE};

use crate::elf::{u32_at, Elf};
use crate::installed::{installed_version, package_owner, stock_dir, version_ok, version_text, DirStat};
use crate::{default_slurm_conf, tool_error, InstallArgs, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};

// ---------------------------------------------------------------------------
// ELF: the plugin's exported `plugin_version` and `plugin_type`
// ---------------------------------------------------------------------------

/// What a plugin file says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginInfo {
    pub version: u32,
    /// Where the version is in the file.
    pub version_offset: usize,
    pub plugin_type: Option<String>,
    /// The functions it calls in our library (none for another
    /// plugin).
    pub needs: Vec<String>,
    /// The file name of our library it loads from its own directory
    /// (`DT_NEEDED` `$ORIGIN/<name>`), for one of ours.
    pub library: Option<String>,
}

/// Read `plugin_version` (and `plugin_type`, when it is a string in the
/// file) from the dynamic symbols of a plugin file, and what it needs from
/// our library.  `Err` says why not.
pub fn plugin_info(elf: &[u8]) -> Result<PluginInfo, String> {
    let mut version = None;
    let mut plugin_type = None;
    let mut needs = Vec::new();
    let file = Elf::parse(elf)?;
    for sym in file.dynamic_symbols()? {
        match (sym.name, sym.object) {
            (name, _) if sym.undefined && name.starts_with(LIBRARY_SYMBOL_PREFIX.as_bytes()) => needs.push(String::from_utf8_lossy(name).into_owned()),
            _ if sym.undefined => {}
            (b"plugin_version", Some((bytes, at))) => version = u32_at(bytes, 0).map(|v| (v, at)),
            (b"plugin_type", Some((bytes, _))) => {
                plugin_type = bytes
                    .iter()
                    .position(|&c| c == 0)
                    .map(|end| &bytes[..end])
                    .and_then(|s| (!s.is_empty() && s.iter().all(|c| c.is_ascii_graphic())).then(|| String::from_utf8_lossy(s).into_owned()));
            }
            _ => {}
        }
    }
    let library = file.needed()?.into_iter().find_map(|n| n.strip_prefix("$ORIGIN/").filter(|n| is_library_file(n)).map(str::to_string));
    match version {
        Some((version, version_offset)) => Ok(PluginInfo { version, version_offset, plugin_type, needs, library }),
        None => Err("no plugin_version symbol: not a Slurm plugin".into()),
    }
}

/// The symbols our library offers the plugin files (their tables of
/// functions).
pub fn library_exports(elf: &[u8]) -> Result<BTreeSet<String>, String> {
    let exports: BTreeSet<String> = Elf::parse(elf)?
        .dynamic_symbols()?
        .into_iter()
        .filter(|s| !s.undefined && s.name.starts_with(LIBRARY_SYMBOL_PREFIX.as_bytes()))
        .map(|s| String::from_utf8_lossy(s.name).into_owned())
        .collect();
    if exports.is_empty() {
        return Err(format!("exports no {LIBRARY_SYMBOL_PREFIX}* symbol: not the plugins' shared library"));
    }
    Ok(exports)
}

// ---------------------------------------------------------------------------
// The target directory: who may change it, and writing into it
// ---------------------------------------------------------------------------

/// Why a directory that others may write to is refused.
const WHY_OWNER: &str = "anyone who can write to a PluginDir entry can make root's daemons load their code";

/// The name of user `uid` in /etc/passwd, else the number.
fn user_name(uid: u32) -> String {
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2].parse() == Ok(uid))
        .map_or_else(|| uid.to_string(), |f| f[0].to_string())
}

/// Why `dir`, with owner and mode `stat`, may not hold (or be above) the
/// plugin files slurmd loads as root: not owned by root, or writable by
/// group or others (a sticky bit, as on /tmp, does not help: whoever may
/// add a name there may add the whole path below it).  `None`: fine.
pub fn dir_problem(dir: &Path, stat: DirStat, owner_name: impl Fn(u32) -> String) -> Option<String> {
    let mode = stat.mode & 0o7777;
    if stat.uid != 0 {
        return Some(format!("{} is owned by {} (uid {}), not root (mode {mode:04o}): {WHY_OWNER}", dir.display(), owner_name(stat.uid), stat.uid));
    }
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => "group and others",
        (true, false) => "group",
        (false, true) => "others",
        (false, false) => return None,
    };
    let sticky = if mode & 0o1000 != 0 && mode & 0o002 != 0 { "; the sticky bit does not help: anyone may still add a name there" } else { "" };
    Some(format!("{} is writable by {who} (mode {mode:04o}{sticky}): {WHY_OWNER}", dir.display()))
}

/// The directories whose owner and mode decide what slurmd finds in `dir`
/// (absolute): `dir` and each one above it up to /, both as the path is
/// written (a symlink's directory decides where it points) and after
/// symlinks are resolved ([`dirs_problems`] skips those that do not
/// exist).
fn dirs_deciding(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = dir.ancestors().filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf).collect();
    if let Some(real) = dir.ancestors().find_map(|d| fs::canonicalize(d).ok()) {
        dirs.extend(real.ancestors().map(Path::to_path_buf));
    }
    let mut seen = BTreeSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// [`dir_problem`] for each of `dirs` that `stat` (following symlinks)
/// finds.
pub fn dirs_problems(dirs: &[PathBuf], stat: impl Fn(&Path) -> std::io::Result<DirStat>, owner_name: impl Fn(u32) -> String) -> Vec<String> {
    dirs.iter().filter_map(|d| stat(d).ok().and_then(|s| dir_problem(d, s, &owner_name))).collect()
}

fn dir_stat(dir: &Path) -> std::io::Result<DirStat> {
    fs::metadata(dir).map(|m| DirStat::of(&m))
}

/// Why the package manager's directory `dir`, or its files among `files`
/// (those that exist), may not be installed into: `owner` names the package
/// of a path.  --force does not change this: the next upgrade or removal
/// of the package overwrites or deletes what was installed, and the
/// package's own plugins cannot be brought back by reinstalling ours.
pub fn package_problems(dir: &Path, files: &[PathBuf], owner: impl Fn(&Path) -> Option<String>) -> Vec<String> {
    let why = "installing there breaks rollback, and the package's next upgrade or removal overwrites or deletes the files: \
               install into a directory of your own (e.g. /usr/local/lib/slurm-gpu-gres) and put it first in PluginDir (--force does not change this)";
    if let Some(p) = owner(dir) {
        return vec![format!("{} belongs to the package {p}: {why}", dir.display())];
    }
    files.iter().filter_map(|f| owner(f).map(|p| format!("{} belongs to the package {p}: {why}", f.display()))).collect()
}

/// Make `dir` and the directories above it that are missing, each with
/// mode 0755 whatever the umask (`create_dir_all` would leave them as the
/// umask says: writable by everyone under umask 000).
pub fn create_dirs(dir: &Path) -> std::io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().filter(|d| !d.as_os_str().is_empty()).take_while(|d| fs::symlink_metadata(d).is_err()).collect();
    for d in missing.into_iter().rev() {
        match fs::DirBuilder::new().mode(0o755).create(d) {
            Ok(()) => {}
            // Made meanwhile by someone else: checked with the others.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        // The umask may have taken bits away; through the directory opened
        // (not its name), in case the name was replaced meanwhile.
        open_dir(d)?.set_permissions(fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// `dir` opened as a directory, not through a symlink (O_NOFOLLOW on the
/// last name; std adds O_CLOEXEC).
fn open_dir(dir: &Path) -> std::io::Result<fs::File> {
    fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(dir)
}

/// An unpredictable name part: 16 hex digits from /dev/urandom.
fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The directory the files are installed into, opened once: each file is
/// created in it and renamed into place in it, whatever happens to the
/// path meanwhile.
///
/// Names in it are reached through `/proc/self/fd/N/NAME`, which the
/// kernel resolves from the open directory just as `openat(N, NAME)` or
/// `renameat(N, ..)` would: the same protection without `unsafe` FFI in
/// this tool (the crate keeps all of it in its FFI layer) and without a
/// new dependency.  [`TargetDir::open`] checks that /proc shows this very
/// directory.
pub struct TargetDir {
    dir: fs::File,
    path: PathBuf,
    fd_path: PathBuf,
}

/// How many random temporary names to try before giving up.
const TEMPORARY_TRIES: usize = 16;

impl TargetDir {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let dir = open_dir(path)?;
        let fd_path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        let (opened, seen) = (dir.metadata()?, fs::metadata(&fd_path));
        if !seen.as_ref().is_ok_and(|s| (s.dev(), s.ino()) == (opened.dev(), opened.ino())) {
            return Err(std::io::Error::other(format!("{} does not show the directory opened (is /proc mounted?)", fd_path.display())));
        }
        Ok(TargetDir { dir, path: path.to_path_buf(), fd_path })
    }

    /// Owner and mode of the directory opened.
    pub fn stat(&self) -> std::io::Result<DirStat> {
        self.dir.metadata().map(|m| DirStat::of(&m))
    }

    fn at(&self, name: &str) -> PathBuf {
        self.fd_path.join(name)
    }

    /// A new temporary file for `name`: a random name, created with
    /// O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, so that nothing someone
    /// else put in the directory (a symlink, a file) is ever opened.
    fn create_temporary(&self, name: &str) -> std::io::Result<(String, fs::File)> {
        for _ in 0..TEMPORARY_TRIES {
            let tmp = format!(".{name}.gres-rs-{}.tmp", random_hex()?);
            let open = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(self.at(&tmp));
            match open {
                Ok(f) => return Ok((tmp, f)),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(ErrorKind::AlreadyExists, format!("{TEMPORARY_TRIES} random temporary names in {} were all taken", self.path.display())))
    }

    /// Write `bytes` as `name` in the directory: into a new temporary file
    /// there, made 0755 once written, synced, then `rename(2)`d over
    /// `name`, so that whoever has the old file open or mapped keeps the
    /// old contents.  A symlink at `name` is replaced, never followed; a
    /// directory there is left alone (EISDIR).  The temporary file is
    /// removed on failure.
    pub fn install(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(std::io::Error::new(ErrorKind::InvalidInput, format!("not a file name: {name:?}")));
        }
        if fs::symlink_metadata(self.at(name)).is_ok_and(|m| m.is_dir()) {
            return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
        }
        let (tmp, mut file) = self.create_temporary(name)?;
        let mut renamed = false;
        let result = (|| {
            file.write_all(bytes)?;
            file.set_permissions(fs::Permissions::from_mode(0o755))?;
            file.sync_all()?;
            fs::rename(self.at(&tmp), self.at(name))?;
            renamed = true;
            self.dir.sync_all()
        })();
        if result.is_err() && !renamed {
            let _ = fs::remove_file(self.at(&tmp));
        }
        result
    }

    /// The names of the regular files in the directory that are our
    /// library of another version than this build's: what an earlier
    /// install left, which the plugin files installed now no longer name.
    pub fn other_libraries(&self) -> std::io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.fd_path)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
            if name != LIBRARY_FILE && is_library_file(&name) && entry.file_type()?.is_file() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Remove file `name` from the directory (a daemon that has it mapped
    /// keeps its copy).
    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        fs::remove_file(self.at(name))?;
        self.dir.sync_all()
    }
}

/// [`TargetDir::install`] of `dest` in its directory.
#[cfg(test)]
pub fn install_file(bytes: &[u8], dest: &Path) -> std::io::Result<()> {
    let dir = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    TargetDir::open(dir)?.install(&name, bytes)
}

/// The `PluginDir=` value to use: `dir` first, then the directories slurmd
/// already searches (slurm.conf's PluginDir, else where Slurm's own plugins
/// are).
pub fn plugin_dir_line(dir: &Path, configured: &[&str], stock: Option<&Path>) -> String {
    let dir_text = dir.display().to_string();
    let mut parts = vec![dir_text.clone()];
    let rest: Vec<String> =
        if configured.is_empty() { stock.map(|s| s.display().to_string()).into_iter().collect() } else { configured.iter().map(|s| s.to_string()).collect() };
    parts.extend(rest.into_iter().filter(|p| p.trim_end_matches('/') != dir_text.trim_end_matches('/')));
    format!("PluginDir={}", parts.join(":"))
}

/// Print `problems` of the directories: errors, or warnings with --force.
/// Whether they refuse the install.
fn report_dir_problems(problems: &[String], force: bool) -> bool {
    for p in problems {
        if force {
            eprintln!("gres-rs: warning: {p} (installing anyway: --force)");
        } else {
            tool_error(format!("{p} (--force installs anyway)"));
        }
    }
    !problems.is_empty() && !force
}

/// The plugin directory of `args`, made if missing and opened, for the
/// files `names`: `None` (the reasons printed) when it is refused: a
/// directory others may change (unless --force), or the package manager's
/// (even with --force); `Err` when it cannot be made or opened.
fn target_dir(args: &InstallArgs, names: &[String]) -> Option<Result<TargetDir, String>> {
    let dir = match std::path::absolute(&args.plugin_dir) {
        Ok(d) => d,
        Err(e) => return Some(Err(format!("cannot tell where {} is: {e}", args.plugin_dir.display()))),
    };
    let refuse = || {
        tool_error("nothing installed");
        None
    };
    let problems = dirs_problems(&dirs_deciding(&dir), dir_stat, user_name);
    if dir.is_dir() {
        let owner = |p: &Path| package_owner(p).or_else(|| fs::canonicalize(p).ok().filter(|c| c != p).and_then(|c| package_owner(&c)));
        let earlier = TargetDir::open(&dir).and_then(|t| t.other_libraries()).unwrap_or_default();
        let files: Vec<PathBuf> = std::iter::once(LIBRARY_FILE.to_string())
            .chain(earlier)
            .chain(names.iter().cloned())
            .map(|n| dir.join(n))
            .filter(|f| fs::symlink_metadata(f).is_ok())
            .collect();
        let packaged = package_problems(&dir, &files, owner);
        for p in &packaged {
            tool_error(p);
        }
        if !packaged.is_empty() {
            report_dir_problems(&problems, args.force);
            return refuse();
        }
    }
    if report_dir_problems(&problems, args.force) {
        return refuse();
    }
    if let Err(e) = create_dirs(&dir) {
        return Some(Err(format!("cannot create {}: {e}", args.plugin_dir.display())));
    }
    let target = match fs::canonicalize(&dir).and_then(|real| TargetDir::open(&real)) {
        Ok(t) => t,
        Err(e) => return Some(Err(format!("cannot open {}: {e}", args.plugin_dir.display()))),
    };
    // Again now that every directory exists (made here, or by someone else
    // meanwhile), the one opened included.
    let mut again = dirs_problems(&dirs_deciding(&dir), dir_stat, user_name);
    again.extend(target.stat().ok().and_then(|s| dir_problem(&target.path, s, user_name)));
    let mut seen: BTreeSet<String> = problems.iter().cloned().collect();
    again.retain(|p| seen.insert(p.clone()));
    if report_dir_problems(&again, args.force) {
        return refuse();
    }
    Some(Ok(target))
}

pub fn run(args: &InstallArgs) -> u8 {
    let from = match &args.from {
        Some(d) => d.clone(),
        None => match std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
            Some(d) => d,
            None => {
                tool_error("cannot tell where this executable is: use --from DIR");
                return EXIT_USAGE;
            }
        },
    };
    let read = |path: &Path| fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()));
    // A build directory holds it under cargo's name, an installed plugin
    // directory under this version's.
    let Some(library_path) = [LIBRARY_FILE, BUILT_LIBRARY_FILE].iter().map(|n| from.join(n)).find(|p| p.is_file()) else {
        tool_error(format!(
            "no {BUILT_LIBRARY_FILE} or {LIBRARY_FILE} in {}: build the plugins (cargo build --release --workspace) or use --from DIR",
            from.display()
        ));
        return EXIT_USAGE;
    };
    let library = match read(&library_path) {
        Ok(b) => b,
        Err(e) => {
            tool_error(e);
            return EXIT_USAGE;
        }
    };
    let mut refused = false;
    let offered = library_exports(&library).unwrap_or_else(|e| {
        tool_error(format!("{}: {e}", library_path.display()));
        refused = true;
        BTreeSet::new()
    });
    let expected = installed_version();
    match &expected {
        Some((v, whence)) => eprintln!("gres-rs: installed Slurm is {} ({whence})", version_text(*v)),
        None => eprintln!("gres-rs: warning: cannot tell the installed Slurm version (no slurmd, no slurm_version.h): versions not checked"),
    }
    let mut files = Vec::new();
    for file in &PLUGIN_FILES {
        let (name, bytes) = (file.file, plugin_file_bytes(file));
        let path = format!("{name}.so (built into gres-rs)");
        let info = match plugin_info(bytes) {
            Ok(i) => i,
            Err(e) => {
                tool_error(format!("{path}: {e}"));
                refused = true;
                continue;
            }
        };
        if let Some((v, _)) = expected {
            if !version_ok(info.version, Some(v)) {
                let what = if args.force { "warning" } else { "error" };
                eprintln!(
                    "gres-rs: {what}: {path} is for Slurm {}, the installed slurmd is {}: slurmd would not load it{}",
                    version_text(info.version),
                    version_text(v),
                    if args.force { " (installing anyway: --force)" } else { " (rebuild against this Slurm, or --force)" }
                );
                refused |= !args.force;
            }
        }
        // slurmd could not load this pair at all (--force does not help).
        if !offered.is_empty() {
            if let Some(missing) = info.needs.iter().find(|f| !offered.contains(*f)) {
                tool_error(format!(
                    "{path} needs {missing}, which {} lacks: the two are from different builds (install with the gres-rs of the same build)",
                    library_path.display()
                ));
                refused = true;
            }
        }
        files.push((name, bytes, info));
    }
    if refused {
        tool_error("nothing installed");
        return EXIT_PROBLEMS;
    }
    let Some(target) = target_dir(args, &files.iter().map(|(name, _, _)| format!("{name}.so")).collect::<Vec<_>>()) else {
        return EXIT_PROBLEMS;
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => {
            tool_error(e);
            return EXIT_USAGE;
        }
    };
    // The library first: every plugin file installed finds what it needs.
    let dest = args.plugin_dir.join(LIBRARY_FILE);
    if let Err(e) = target.install(LIBRARY_FILE, &library) {
        tool_error(format!("cannot install {}: {e}", dest.display()));
        return EXIT_USAGE;
    }
    eprintln!("gres-rs: installed {} (the plugins' code) from {}", dest.display(), library_path.display());
    for (name, bytes, info) in &files {
        let dest = args.plugin_dir.join(format!("{name}.so"));
        if let Err(e) = target.install(&format!("{name}.so"), bytes) {
            tool_error(format!("cannot install {}: {e}", dest.display()));
            return EXIT_USAGE;
        }
        eprintln!("gres-rs: installed {} ({}, Slurm {})", dest.display(), info.plugin_type.as_deref().unwrap_or(name), version_text(info.version));
    }
    // Last, the libraries of earlier versions, which only the plugin files
    // replaced above named: until now a daemon starting found either the
    // old pair or the new one complete.
    match target.other_libraries() {
        Ok(earlier) => {
            for name in earlier {
                let path = args.plugin_dir.join(&name);
                match target.remove(&name) {
                    Ok(()) => eprintln!("gres-rs: removed {} (an earlier version's library; running daemons keep their copy)", path.display()),
                    Err(e) => eprintln!("gres-rs: warning: cannot remove {}, an earlier version's library: {e}", path.display()),
                }
            }
        }
        Err(e) => eprintln!("gres-rs: warning: cannot list {} for earlier versions' libraries: {e}", args.plugin_dir.display()),
    }
    let conf_path = args.slurm_conf.clone().unwrap_or_else(default_slurm_conf);
    let conf = SlurmConf::load(&conf_path).ok();
    let configured: Vec<&str> = conf.as_ref().map(SlurmConf::plugin_dirs).unwrap_or_default();
    let line = plugin_dir_line(&args.plugin_dir, &configured, stock_dir().as_deref());
    eprintln!("gres-rs: use this line in slurm.conf (and restart slurmd and slurmctld):");
    println!("{line}");
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::installed::dpkg_owner;
    use std::process::Command;

    /// An empty directory of this test process, `gres-rs-install-<tag>-<pid>`
    /// in the temporary directory.
    fn fresh_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gres-rs-install-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn plugin_dir_lines() {
        let dir = Path::new("/opt/gres");
        assert_eq!(plugin_dir_line(dir, &[], Some(Path::new("/usr/lib/slurm"))), "PluginDir=/opt/gres:/usr/lib/slurm");
        assert_eq!(plugin_dir_line(dir, &["/opt/gres", "/usr/lib64/slurm"], None), "PluginDir=/opt/gres:/usr/lib64/slurm");
        assert_eq!(plugin_dir_line(dir, &[], None), "PluginDir=/opt/gres");
    }

    #[test]
    fn elf_of_real_plugins() {
        // Slurm's own plugin, when installed.
        let stock_dir = || stock_dir().filter(|d| d.join("gres_gpu.so").is_file());
        if let Some(stock) = stock_dir() {
            let info = plugin_info(&fs::read(stock.join("gres_gpu.so")).unwrap()).unwrap();
            assert_eq!(info.plugin_type.as_deref(), Some("gres/gpu"));
            if let Some((v, _)) = installed_version() {
                assert_eq!(info.version, v);
            }
        }
        if let Some(stock) = stock_dir() {
            // The same file for another release.
            let mut bytes = fs::read(stock.join("gres_gpu.so")).unwrap();
            let info = plugin_info(&bytes).unwrap();
            bytes[info.version_offset..info.version_offset + 4].copy_from_slice(&0x170201u32.to_le_bytes());
            let other = plugin_info(&bytes).unwrap();
            assert_eq!(version_text(other.version), "23.02.1");
            assert!(!version_ok(other.version, Some(info.version)));
            assert!(version_ok(info.version, Some(info.version)));
            assert!(version_ok(other.version, None));
        }
        assert!(plugin_info(b"not elf").is_err());
        assert!(plugin_info(b"\x7fELF\x02\x01").is_err());
        let libc = fs::read("/lib/x86_64-linux-gnu/libc.so.6").or_else(|_| fs::read("/lib64/libc.so.6"));
        if let Ok(libc) = libc {
            assert_eq!(plugin_info(&libc).unwrap_err(), "no plugin_version symbol: not a Slurm plugin");
        }
    }

    #[test]
    fn atomic_install_keeps_old_mappings() {
        let dir = fresh_dir("atomic");
        let dest = dir.join("gres_gpu.so");
        install_file(b"old", &dest).unwrap();
        let held = fs::File::open(&dest).unwrap();
        install_file(b"new", &dest).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"new");
        // The open file is the old inode, untouched.
        let mut old = String::new();
        std::io::Read::read_to_string(&mut &held, &mut old).unwrap();
        assert_eq!(old, "old");
        assert_eq!(fs::metadata(&dest).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A local user who may write to the directory plants a symlink where
    /// the temporary file of this process would be (its name was the
    /// process id): root must neither write through it nor rename the
    /// symlink into place.
    #[test]
    fn planted_symlink_at_temporary_name() {
        use std::os::unix::fs::symlink;
        let dir = fresh_dir("symlink");
        let victim = dir.join("victim");
        fs::write(&victim, "secret").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
        let dest = dir.join("gres_gpu.so");
        let planted = dir.join(format!(".gres_gpu.so.gres-rs-{}.tmp", std::process::id()));
        symlink(&victim, &planted).unwrap();
        install_file(b"plugin", &dest).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"secret", "the victim is untouched");
        assert_eq!(fs::metadata(&victim).unwrap().permissions().mode() & 0o7777, 0o600);
        let meta = fs::symlink_metadata(&dest).unwrap();
        assert!(meta.file_type().is_file(), "{} is a regular file, not a symlink", dest.display());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o755);
        assert_eq!(fs::read(&dest).unwrap(), b"plugin");
        // The planted link is not ours to remove; nothing else is left.
        assert!(fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 3, "victim, planted link, gres_gpu.so");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A symlink at the final name is replaced, not written through; a
    /// directory there is left alone; names with a slash are refused.
    #[test]
    fn final_name_symlink_or_directory() {
        use std::os::unix::fs::symlink;
        let dir = fresh_dir("final");
        let victim = dir.join("victim");
        fs::write(&victim, "secret").unwrap();
        symlink(&victim, dir.join("gres_gpu.so")).unwrap();
        let target = TargetDir::open(&dir).unwrap();
        target.install("gres_gpu.so", b"plugin").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"secret");
        assert!(fs::symlink_metadata(dir.join("gres_gpu.so")).unwrap().file_type().is_file());
        fs::create_dir(dir.join("gres_mps.so")).unwrap();
        let e = target.install("gres_mps.so", b"plugin").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EISDIR), "{e}");
        assert!(dir.join("gres_mps.so").is_dir());
        for bad in ["", ".", "..", "../x", "a/b"] {
            assert_eq!(target.install(bad, b"x").unwrap_err().kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
        let mut left: Vec<String> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["gres_gpu.so", "gres_mps.so", "victim"], "no temporary file left");
        // Not a directory, or a symlink to one: not opened.
        assert_eq!(TargetDir::open(&victim).err().and_then(|e| e.raw_os_error()), Some(libc::ENOTDIR));
        symlink(&dir, dir.join("link")).unwrap();
        let e = TargetDir::open(&dir.join("link")).err().and_then(|e| e.raw_os_error());
        assert!(matches!(e, Some(libc::ENOTDIR | libc::ELOOP)), "{e:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn directory_owners_and_modes() {
        let name = |uid: u32| if uid == 65534 { "nobody".to_string() } else { uid.to_string() };
        let d = Path::new("/opt/p");
        let stat = |uid: u32, mode: u32| DirStat { uid, mode: 0o040000 | mode };
        assert_eq!(dir_problem(d, stat(0, 0o755), name), None);
        assert_eq!(dir_problem(d, stat(0, 0o1755), name), None);
        assert_eq!(dir_problem(d, stat(0, 0o700), name), None);
        let why = "anyone who can write to a PluginDir entry can make root's daemons load their code";
        assert_eq!(dir_problem(d, stat(0, 0o775), name).unwrap(), format!("/opt/p is writable by group (mode 0775): {why}"));
        assert_eq!(dir_problem(d, stat(0, 0o757), name).unwrap(), format!("/opt/p is writable by others (mode 0757): {why}"));
        assert_eq!(
            dir_problem(d, stat(0, 0o1777), name).unwrap(),
            format!("/opt/p is writable by group and others (mode 1777; the sticky bit does not help: anyone may still add a name there): {why}")
        );
        assert_eq!(dir_problem(d, stat(65534, 0o755), name).unwrap(), format!("/opt/p is owned by nobody (uid 65534), not root (mode 0755): {why}"));
        assert_eq!(dir_problem(d, stat(1000, 0o700), name).unwrap(), format!("/opt/p is owned by 1000 (uid 1000), not root (mode 0700): {why}"));
        // Each directory up to /, those that exist.
        let dirs: Vec<PathBuf> = ["/opt/p/new", "/opt/p", "/opt", "/"].iter().map(PathBuf::from).collect();
        let fake = |p: &Path| match p.to_str().unwrap() {
            "/opt/p" => Ok(stat(0, 0o755)),
            "/opt" => Ok(stat(0, 0o1777)),
            "/" => Ok(stat(1000, 0o755)),
            _ => Err(std::io::Error::from(ErrorKind::NotFound)),
        };
        let problems = dirs_problems(&dirs, fake, name);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("/opt is writable by group and others (mode 1777;"), "{problems:?}");
        assert!(problems[1].starts_with("/ is owned by 1000 (uid 1000), not root"), "{problems:?}");
    }

    #[test]
    fn dirs_deciding_include_symlinked_ones() {
        let dir = fresh_dir("deciding");
        fs::create_dir_all(dir.join("real/plugins")).unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        let dirs = dirs_deciding(&dir.join("link/plugins/new"));
        for d in ["link/plugins/new", "link/plugins", "link", "real/plugins", "real", ""] {
            assert!(dirs.contains(&dir.join(d).components().collect()), "{d} in {dirs:?}");
        }
        assert!(dirs.contains(&PathBuf::from("/")));
        assert_eq!(dirs.iter().filter(|d| *d == Path::new("/")).count(), 1, "each once: {dirs:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn package_owners() {
        let stock = Path::new("/usr/lib/x86_64-linux-gnu/slurm-wlm");
        assert_eq!(dpkg_owner("slurm-wlm-basic-plugins: /usr/lib/x86_64-linux-gnu/slurm-wlm\n", stock).as_deref(), Some("slurm-wlm-basic-plugins"));
        assert_eq!(
            dpkg_owner("libslurm38, slurm-wlm-basic-plugins: /usr/lib/x86_64-linux-gnu/slurm-wlm\n", stock).as_deref(),
            Some("libslurm38, slurm-wlm-basic-plugins")
        );
        // Only the path itself, not one that merely contains it (dpkg -S
        // matches patterns), and not a diversion line.
        assert_eq!(dpkg_owner("slurm-wlm-basic-plugins: /usr/lib/x86_64-linux-gnu/slurm-wlm/gres_gpu.so\n", stock), None);
        assert_eq!(dpkg_owner("diversion by foo from: /usr/lib/x86_64-linux-gnu/slurm-wlm\n", stock), None);
        assert_eq!(dpkg_owner("", stock), None);
        // Injected: the directory, else each file.
        let owner = |p: &Path| (p.starts_with(stock) || p == Path::new("/opt/p/gres_gpu.so")).then(|| "slurm-wlm-basic-plugins".to_string());
        let files = [stock.join("gres_gpu.so")];
        let problems = package_problems(stock, &files, owner);
        assert_eq!(problems.len(), 1, "the directory only: {problems:?}");
        assert!(problems[0].starts_with("/usr/lib/x86_64-linux-gnu/slurm-wlm belongs to the package slurm-wlm-basic-plugins: installing there breaks rollback"));
        assert!(problems[0].ends_with("(--force does not change this)"), "{}", problems[0]);
        let opt = Path::new("/opt/p");
        let problems = package_problems(opt, &[opt.join("libgres_rs.so"), opt.join("gres_gpu.so")], owner);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("/opt/p/gres_gpu.so belongs to the package slurm-wlm-basic-plugins"), "{problems:?}");
        assert!(package_problems(opt, &[opt.join("libgres_rs.so")], owner).is_empty());
        // The real dpkg, where this host has both.
        let dpkg = Command::new("dpkg").arg("--version").output().is_ok_and(|o| o.status.success());
        if dpkg && stock.join("gres_gpu.so").is_file() {
            assert!(package_owner(stock).is_some_and(|p| p.contains("slurm-wlm-basic-plugins")), "{:?}", package_owner(stock));
            let ours = std::env::temp_dir().join(format!("gres-rs-install-unpackaged-{}", std::process::id()));
            fs::create_dir_all(&ours).unwrap();
            assert_eq!(package_owner(&ours), None);
            fs::remove_dir(&ours).unwrap();
        }
    }
}
