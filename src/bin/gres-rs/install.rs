//! `gres-rs install`: put the plugin files where slurmd loads them, without
//! ever writing into a file a running daemon has mapped.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use slurm_gpu_gres::core::slurm_conf::SlurmConf;
use slurm_gpu_gres::ffi::entry_points::SHARED_SYMBOL_PREFIX;
use slurm_gpu_gres::plugins::{files::PLUGIN_FILES, plugin_file_bytes};
use slurm_gpu_gres::SHARED_LIBRARY_FILE;

use crate::{default_slurm_conf, tool_error, InstallArgs, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};

/// Where Slurm's own plugins usually are.
const STOCK_PLUGIN_DIRS: [&str; 5] =
    ["/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib/slurm-wlm", "/usr/lib64/slurm", "/usr/lib/slurm"];

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
    /// The functions it calls in our shared library (none for another
    /// plugin).
    pub needs: Vec<String>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

struct Section {
    kind: u32,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
}

/// One entry of an ELF file's dynamic symbol table.
struct DynSym<'a> {
    name: &'a [u8],
    /// Undefined here: to be found in another object at load time.
    undefined: bool,
    /// The symbol's object in the file (`None` for code outside the file's
    /// sections or zero-filled data), and its offset.
    object: Option<(&'a [u8], usize)>,
}

/// The dynamic symbols of a 64-bit little-endian ELF shared object,
/// without loading it.  `Err` says why not.
fn dynamic_symbols(elf: &[u8]) -> Result<Vec<DynSym<'_>>, String> {
    const SHT_DYNSYM: u32 = 11;
    const SHT_NOBITS: u32 = 8;
    if elf.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    if elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let bad = || "truncated or corrupt ELF file".to_string();
    let shoff = u64_at(elf, 0x28).ok_or_else(bad)? as usize;
    let shentsize = u16_at(elf, 0x3a).ok_or_else(bad)? as usize;
    let shnum = u16_at(elf, 0x3c).ok_or_else(bad)? as usize;
    if shentsize < 64 {
        return Err(bad());
    }
    let sections: Vec<Section> = (0..shnum)
        .map(|i| {
            let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
            Some(Section {
                kind: u32_at(elf, h + 4)?,
                addr: u64_at(elf, h + 16)?,
                offset: u64_at(elf, h + 24)?,
                size: u64_at(elf, h + 32)?,
                link: u32_at(elf, h + 40)?,
            })
        })
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let dynsym = sections.iter().find(|s| s.kind == SHT_DYNSYM).ok_or("no dynamic symbol table: not a shared object")?;
    let strtab = sections.get(dynsym.link as usize).ok_or_else(bad)?;
    let name_at = |off: u32| -> Option<&[u8]> {
        let start = (strtab.offset as usize).checked_add(off as usize)?;
        let rest = elf.get(start..(strtab.offset.checked_add(strtab.size)?) as usize)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    };
    let object = |value: u64, size: u64, shndx: u16| -> Option<(&[u8], usize)> {
        let sec = sections.get(shndx as usize)?;
        if sec.kind == SHT_NOBITS || value < sec.addr || value.checked_add(size)? > sec.addr.checked_add(sec.size)? {
            return None;
        }
        let start = (sec.offset.checked_add(value - sec.addr)?) as usize;
        Some((elf.get(start..start.checked_add(size as usize)?)?, start))
    };
    let mut symbols = Vec::new();
    for i in 0..dynsym.size / 24 {
        let at = (dynsym.offset + i * 24) as usize;
        let (Some(name), Some(shndx), Some(value), Some(size)) = (u32_at(elf, at), u16_at(elf, at + 6), u64_at(elf, at + 8), u64_at(elf, at + 16)) else {
            return Err(bad());
        };
        let name = name_at(name).ok_or_else(bad)?;
        symbols.push(DynSym { name, undefined: shndx == 0, object: if shndx == 0 { None } else { object(value, size, shndx) } });
    }
    Ok(symbols)
}

/// Read `plugin_version` (and `plugin_type`, when it is a string in the
/// file) from the dynamic symbols of a plugin file, and what it needs from
/// our shared library.  `Err` says why not.
pub fn plugin_info(elf: &[u8]) -> Result<PluginInfo, String> {
    let mut version = None;
    let mut plugin_type = None;
    let mut needs = Vec::new();
    for sym in dynamic_symbols(elf)? {
        match (sym.name, sym.object) {
            (name, _) if sym.undefined && name.starts_with(SHARED_SYMBOL_PREFIX.as_bytes()) => needs.push(String::from_utf8_lossy(name).into_owned()),
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
    match version {
        Some((version, version_offset)) => Ok(PluginInfo { version, version_offset, plugin_type, needs }),
        None => Err("no plugin_version symbol: not a Slurm plugin".into()),
    }
}

/// The functions our shared library offers the plugin files.
pub fn shared_exports(elf: &[u8]) -> Result<BTreeSet<String>, String> {
    let exports: BTreeSet<String> = dynamic_symbols(elf)?
        .into_iter()
        .filter(|s| !s.undefined && s.name.starts_with(SHARED_SYMBOL_PREFIX.as_bytes()))
        .map(|s| String::from_utf8_lossy(s.name).into_owned())
        .collect();
    if exports.is_empty() {
        return Err(format!("exports no {SHARED_SYMBOL_PREFIX}* function: not the plugins' shared library"));
    }
    Ok(exports)
}

/// Whether a plugin of release `version` may be installed for a slurmd of
/// release `installed` (unknown: not checked): slurmd loads only plugins
/// of its own major, minor and micro release.
pub fn version_ok(version: u32, installed: Option<u32>) -> bool {
    installed.map_or(true, |v| v & 0xff_ffff == version & 0xff_ffff)
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

/// The installed slurmd's release, and where it was read.
fn installed_version() -> Option<(u32, String)> {
    if let Some(v) = std::env::var(VERSION_ENV).ok().and_then(|v| parse_version(&v)) {
        return Some((v, VERSION_ENV.into()));
    }
    if let Ok(out) = Command::new("slurmd").arg("-V").output() {
        if let Some(v) = parse_version(&String::from_utf8_lossy(&out.stdout)) {
            return Some((v, "slurmd -V".into()));
        }
    }
    let header = "/usr/include/slurm/slurm_version.h";
    let v = header_version(&fs::read_to_string(header).ok()?)?;
    Some((v, header.into()))
}

/// Write `bytes` to `dest` through a temporary file in the same directory
/// and `rename(2)`, so that whoever has the old file open or mapped keeps
/// the old contents.
pub fn install_file(bytes: &[u8], dest: &Path) -> std::io::Result<()> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.gres-rs-{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.set_permissions(fs::Permissions::from_mode(0o755))?;
        f.sync_all()?;
        fs::rename(&tmp, dest)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
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

fn stock_dir() -> Option<PathBuf> {
    STOCK_PLUGIN_DIRS.iter().map(PathBuf::from).find(|d| d.join("gres_gpu.so").is_file())
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
    let library_path = from.join(SHARED_LIBRARY_FILE);
    if !library_path.is_file() {
        tool_error(format!("no {SHARED_LIBRARY_FILE} in {}: build the plugins (cargo build --release --workspace) or use --from DIR", from.display()));
        return EXIT_USAGE;
    }
    let library = match read(&library_path) {
        Ok(b) => b,
        Err(e) => {
            tool_error(e);
            return EXIT_USAGE;
        }
    };
    let mut refused = false;
    let offered = shared_exports(&library).unwrap_or_else(|e| {
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
                    "{path} calls {missing}, which {} lacks: the two are from different builds (install with the gres-rs of the same build)",
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
    if let Err(e) = fs::create_dir_all(&args.plugin_dir) {
        tool_error(format!("cannot create {}: {e}", args.plugin_dir.display()));
        return EXIT_USAGE;
    }
    // The library first: every plugin file installed finds what it needs.
    let dest = args.plugin_dir.join(SHARED_LIBRARY_FILE);
    if let Err(e) = install_file(&library, &dest) {
        tool_error(format!("cannot install {}: {e}", dest.display()));
        return EXIT_USAGE;
    }
    eprintln!("gres-rs: installed {} (the plugins' code) from {}", dest.display(), library_path.display());
    for (name, bytes, info) in &files {
        let dest = args.plugin_dir.join(format!("{name}.so"));
        if let Err(e) = install_file(bytes, &dest) {
            tool_error(format!("cannot install {}: {e}", dest.display()));
            return EXIT_USAGE;
        }
        eprintln!("gres-rs: installed {} ({}, Slurm {})", dest.display(), info.plugin_type.as_deref().unwrap_or(name), version_text(info.version));
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
    fn plugin_dir_lines() {
        let dir = Path::new("/opt/gres");
        assert_eq!(plugin_dir_line(dir, &[], Some(Path::new("/usr/lib/slurm"))), "PluginDir=/opt/gres:/usr/lib/slurm");
        assert_eq!(plugin_dir_line(dir, &["/opt/gres", "/usr/lib64/slurm"], None), "PluginDir=/opt/gres:/usr/lib64/slurm");
        assert_eq!(plugin_dir_line(dir, &[], None), "PluginDir=/opt/gres");
    }

    #[test]
    fn elf_of_real_plugins() {
        // Slurm's own plugin, when installed.
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
        let dir = std::env::temp_dir().join(format!("gres-rs-install-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
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
}
