//! Finding (or fetching) the Slurm source of a series: Debian's source
//! package of the installed version, else an upstream tarball.

use crate::series::{fmt_version, installed_version, Series, Version, INSTALLED_VERSION_H};
use crate::util::{is_root, repo_root};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const SRC_ENV: &str = "GRES_RS_SLURM_SRC";
const CACHE_DIR: &str = "/var/cache/slurm-gpu-gres/src";
const FALLBACK_SRC_DIR: &str = "/work/slurm-src";
const TARBALL_ENV: &str = "GRES_RS_SLURM_TARBALLS";
const TARBALL_DIR: &str = "/work/shared/slurm-src";
/// Written into an extracted tarball tree: the tarball's SHA-256.
const TARBALL_MARKER: &str = ".gres-rs-tarball-sha256";

/// Upstream version from the source's META file.
pub fn source_version(dir: &Path) -> Option<Version> {
    let meta = fs::read_to_string(dir.join("META")).ok()?;
    let get = |key: &str| -> Option<u32> { meta.lines().find_map(|l| l.trim().strip_prefix(key)).and_then(|v| v.trim().parse().ok()) };
    Some((get("Major:")?, get("Minor:")?, get("Micro:")?))
}

pub fn slurm_version_h(src: &Path) -> String {
    let v = source_version(src).unwrap();
    let tmpl = fs::read_to_string(src.join("slurm/slurm_version.h.in")).unwrap();
    let def = format!("#define SLURM_VERSION_NUMBER 0x{:02x}{:02x}{:02x}", v.0, v.1, v.2);
    assert!(tmpl.contains("#undef SLURM_VERSION_NUMBER"), "unexpected slurm_version.h.in");
    tmpl.replace("#undef SLURM_VERSION_NUMBER", &def)
}

pub enum SourceLookup {
    Found(PathBuf),
    Skip(String),
}

/// The installed series: Debian's source package of the installed version.
/// Any other series: the upstream tarball of the series.
/// Without a local Debian tree of the installed version, an upstream
/// tarball of exactly that version is used before trying `apt-get source`
/// (Debian 13's 24.11.5 source cannot be fetched from the archive).
pub fn find_source(series: &Series) -> SourceLookup {
    match installed_version() {
        Some(v) if series.is(v) => {
            if search_bases(&source_bases(), v, &mut Vec::new()).is_none() {
                if let SourceLookup::Found(tree) = tarball_source(series, Some(v.2)) {
                    println!(
                        "layout: Slurm {}: no Debian source of the installed {} found; using the upstream tarball of that version",
                        series.name,
                        fmt_version(v)
                    );
                    return SourceLookup::Found(tree);
                }
            }
            find_slurm_source(v)
        }
        _ => tarball_source(series, None),
    }
}

/// Where Debian source trees are looked for, in order.
pub fn source_bases() -> Vec<PathBuf> {
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os(SRC_ENV).filter(|v| !v.is_empty()) {
        bases.push(dir.into());
    }
    bases.push(CACHE_DIR.into());
    bases.push(FALLBACK_SRC_DIR.into());
    bases
}

/// `slurm-24-11-5-1.tar.xz` -> Some((5, 1)) for series 24.11.
pub fn tarball_micro(file: &str, series: &Series) -> Option<(u32, u32)> {
    let rest = file.strip_prefix(&format!("slurm-{}-{:02}-", series.major, series.minor))?;
    let rest = rest.strip_suffix(".tar.xz")?;
    let (micro, rel) = rest.split_once('-')?;
    Some((micro.parse().ok()?, rel.parse().ok()?))
}

/// The newest tarball of the series, or the one of release `micro`.
pub fn tarball_source(series: &Series, micro: Option<u32>) -> SourceLookup {
    // `../shared/slurm-src` beside the checkout, as CI has it, else the
    // usual place.
    let beside = repo_root().join("../shared/slurm-src");
    let default = if beside.is_dir() { beside } else { PathBuf::from(TARBALL_DIR) };
    let dir = std::env::var_os(TARBALL_ENV).filter(|v| !v.is_empty()).map_or(default, PathBuf::from);
    let newest = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            tarball_micro(&name, series).map(|v| (v, e.path()))
        })
        .filter(|((m, _), _)| micro.is_none() || micro == Some(*m))
        .max();
    let Some((_, tarball)) = newest else {
        return SourceLookup::Skip(format!("no tarball slurm-{}-{:02}-<micro>-<rel>.tar.xz in {} (${TARBALL_ENV})", series.major, series.minor, dir.display()));
    };
    let sha = sha256(&tarball);
    let file_name = tarball.file_name().unwrap().to_string_lossy().into_owned();
    if let Ok(sums) = fs::read_to_string(dir.join("SHA256SUMS")) {
        let listed = sums.lines().find_map(|l| {
            let (sum, name) = l.split_once(char::is_whitespace)?;
            (name.trim().trim_start_matches('*') == file_name).then(|| sum.to_string())
        });
        match listed {
            Some(sum) if sum == sha => {}
            Some(sum) => panic!("{}: SHA-256 is {sha}, but {}/SHA256SUMS says {sum}", tarball.display(), dir.display()),
            None => println!("layout: WARNING: {file_name} is not listed in {}/SHA256SUMS", dir.display()),
        }
    }
    let stem = file_name.strip_suffix(".tar.xz").unwrap();
    let cache = if fs::create_dir_all(CACHE_DIR).is_ok() && writable(Path::new(CACHE_DIR)) {
        PathBuf::from(CACHE_DIR)
    } else {
        let tmp = std::env::temp_dir().join("gres-rs-slurm-src");
        fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("mkdir {}: {e}", tmp.display()));
        tmp
    };
    let target = cache.join(stem);
    let extracted = |dir: &Path| fs::read_to_string(dir.join(TARBALL_MARKER)).is_ok_and(|m| m.trim() == sha) && dir.join("META").is_file();
    if extracted(&target) {
        return SourceLookup::Found(target);
    }
    println!("layout: extracting {} into {}", tarball.display(), target.display());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = cache.join(format!(".extract-{stem}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(&tmp).output().unwrap_or_else(|e| panic!("cannot run tar: {e}"));
    if !out.status.success() {
        let _ = fs::remove_dir_all(&tmp);
        panic!("tar -xf {} failed:\n{}", tarball.display(), String::from_utf8_lossy(&out.stderr));
    }
    // git archive --prefix=<tag>/: one top directory.
    let tops: Vec<PathBuf> = fs::read_dir(&tmp).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    let [top] = tops.as_slice() else {
        panic!("{} does not hold exactly one top directory: {tops:?}", tarball.display());
    };
    fs::write(top.join(TARBALL_MARKER), format!("{sha}\n")).unwrap();
    if target.exists() {
        let _ = fs::remove_dir_all(&target);
    }
    // A concurrent run may win the rename; its tree is as good.
    if let Err(e) = fs::rename(top, &target) {
        if !extracted(&target) {
            panic!("rename {} to {}: {e}", top.display(), target.display());
        }
    }
    let _ = fs::remove_dir_all(&tmp);
    SourceLookup::Found(target)
}

pub fn sha256(file: &Path) -> String {
    let out = Command::new("sha256sum").arg(file).output().unwrap_or_else(|e| panic!("cannot run sha256sum: {e}"));
    assert!(out.status.success(), "sha256sum {} failed", file.display());
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

pub fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".write-test-{}", std::process::id()));
    let ok = fs::write(&probe, b"").is_ok();
    let _ = fs::remove_file(&probe);
    ok
}

pub fn find_slurm_source(installed: Version) -> SourceLookup {
    let bases = source_bases();

    let mut others: Vec<String> = Vec::new();
    if let Some(found) = search_bases(&bases, installed, &mut others) {
        for other in &others {
            println!("layout: ignoring {other}: not the installed version");
        }
        return SourceLookup::Found(found);
    }
    let wanted = fmt_version(installed);
    if !is_root() {
        if others.is_empty() {
            return SourceLookup::Skip(format!(
                "no Slurm {wanted} source found (looked for slurm-wlm-{wanted} in ${SRC_ENV}, \
                 {CACHE_DIR}, {FALLBACK_SRC_DIR}) and not root, so it cannot be fetched with \
                 `apt-get source slurm-wlm`; run as root once or set {SRC_ENV}"
            ));
        }
        panic!(
            "Slurm source version mismatch: installed slurmd/libslurm-dev is {wanted} \
             ({INSTALLED_VERSION_H}), but only these trees were found: {}",
            others.join(", ")
        );
    }
    println!("layout: no Slurm {wanted} source found; fetching it with apt-get source into {CACHE_DIR}");
    if let Err(e) = apt_get_source(Path::new(CACHE_DIR)) {
        panic!("could not fetch the Slurm {wanted} source into {CACHE_DIR}: {e}");
    }
    others.clear();
    match search_bases(&[PathBuf::from(CACHE_DIR)], installed, &mut others) {
        Some(found) => SourceLookup::Found(found),
        None => panic!(
            "Slurm source version mismatch: installed slurmd/libslurm-dev is {wanted} \
             ({INSTALLED_VERSION_H}), but apt-get source slurm-wlm gave: {}",
            others.join(", ")
        ),
    }
}

pub fn search_bases(bases: &[PathBuf], installed: Version, others: &mut Vec<String>) -> Option<PathBuf> {
    for base in bases {
        let mut candidates = Vec::new();
        if base.join("META").is_file() {
            candidates.push(base.clone());
        }
        if let Ok(entries) = fs::read_dir(base) {
            let mut dirs: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("slurm-wlm-")) && p.join("META").is_file())
                .collect();
            dirs.sort();
            candidates.extend(dirs);
        }
        for dir in candidates {
            match source_version(&dir) {
                Some(v) if v == installed => {
                    warn_debian_revision(&dir);
                    return Some(dir);
                }
                v => others.push(format!("{} (version {})", dir.display(), v.map_or("unknown".into(), fmt_version))),
            }
        }
    }
    None
}

/// The Debian revision (security patches) should match too, but a mismatch
/// there rarely touches these structs, so it only warns.
pub fn warn_debian_revision(dir: &Path) {
    let Some(installed) = installed_deb_version() else {
        return;
    };
    let Ok(changelog) = fs::read_to_string(dir.join("debian/changelog")) else {
        return;
    };
    let Some(src) = changelog.lines().next().and_then(|l| l.split(['(', ')']).nth(1)) else {
        return;
    };
    if src != installed {
        println!("layout: WARNING: source {} is Debian version {src}, installed slurmd is {installed}", dir.display());
    }
}

pub fn installed_deb_version() -> Option<String> {
    for pkg in ["slurmd", "libslurm-dev"] {
        let out = Command::new("dpkg-query").args(["-W", "-f=${Version}", pkg]).output().ok()?;
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !v.is_empty() {
            return Some(v);
        }
    }
    None
}

pub fn apt_get_source(cache: &Path) -> Result<(), String> {
    fs::create_dir_all(cache).map_err(|e| format!("mkdir {}: {e}", cache.display()))?;
    let tmp = cache.join(format!(".fetch-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let result = apt_get_source_in(&tmp).and_then(|()| {
        let entries = fs::read_dir(&tmp).map_err(|e| e.to_string())?;
        let dir = entries
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir() && p.file_name().unwrap().to_string_lossy().starts_with("slurm-wlm-"))
            .ok_or("apt-get source left no slurm-wlm-* directory")?;
        let target = cache.join(dir.file_name().unwrap());
        if !target.join("META").exists() {
            let _ = fs::remove_dir_all(&target);
            // A concurrent fetch may win the rename; either tree will do.
            if let Err(e) = fs::rename(&dir, &target) {
                if !target.join("META").exists() {
                    return Err(format!("rename to {}: {e}", target.display()));
                }
            }
        }
        Ok(())
    });
    let _ = fs::remove_dir_all(&tmp);
    result
}

pub fn apt_get_source_in(dir: &Path) -> Result<(), String> {
    let pinned = installed_deb_version().map(|v| format!("slurm-wlm={v}"));
    let mut specs: Vec<String> = pinned.into_iter().collect();
    specs.push("slurm-wlm".into());
    let run = |spec: &str| -> Result<(), String> {
        let out = Command::new("apt-get")
            .args(["source", "-q", spec])
            .current_dir(dir)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("`apt-get source {spec}` failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        }
    };
    let mut added_deb_src = false;
    let mut errors = Vec::new();
    let mut i = 0;
    while i < specs.len() {
        match run(&specs[i]) {
            Ok(()) => return Ok(()),
            Err(e) if !added_deb_src && e.contains("deb-src") => {
                println!("layout: apt has no deb-src entry; adding one");
                add_deb_src()?;
                added_deb_src = true; // retry the same spec
            }
            Err(e) => {
                errors.push(e);
                i += 1;
            }
        }
    }
    Err(errors.join("\n"))
}

/// Mirrors Debian's own apt sources as `deb-src` entries, then updates.
pub fn add_deb_src() -> Result<(), String> {
    let deb822 = Path::new("/etc/apt/sources.list.d/debian.sources");
    let oneline = Path::new("/etc/apt/sources.list");
    if let Ok(text) = fs::read_to_string(deb822) {
        let src: String = text.lines().map(|l| if l.trim_start().starts_with("Types:") { "Types: deb-src" } else { l }).map(|l| format!("{l}\n")).collect();
        let target = "/etc/apt/sources.list.d/debian-src.sources";
        fs::write(target, src).map_err(|e| format!("write {target}: {e}"))?;
    } else if let Ok(text) = fs::read_to_string(oneline) {
        let src: String = text.lines().filter_map(|l| l.trim_start().strip_prefix("deb ")).map(|rest| format!("deb-src {rest}\n")).collect();
        if src.is_empty() {
            return Err("no deb line in /etc/apt/sources.list to mirror as deb-src".into());
        }
        let target = "/etc/apt/sources.list.d/debian-src.list";
        fs::write(target, src).map_err(|e| format!("write {target}: {e}"))?;
    } else {
        return Err("neither /etc/apt/sources.list.d/debian.sources nor /etc/apt/sources.list exists".into());
    }
    let out = Command::new("apt-get")
        .args(["update", "-q"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .map_err(|e| format!("cannot run apt-get update: {e}"))?;
    if !out.status.success() {
        return Err(format!("apt-get update failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}
