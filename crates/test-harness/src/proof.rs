//! The proof of loading: from the files a process mapped or loaded, that
//! it runs our plugin files and library and not the stock files.

use crate::host::stock_plugin_dir;
use crate::{chroot, LIBRARY_FILE};
use std::path::Path;

/// Checks a list of mapped/loaded paths: each `<name>.so` must come from
/// `our_dir` and must not come from the stock dir, and our library
/// ([`LIBRARY_FILE`]) must come from `our_dir` too.
pub fn check_loaded(paths: &[String], our_dir: &Path, names: &[&str]) -> Result<(), String> {
    check_loaded_with(paths, our_dir, &stock_plugin_dir(), names)
}

/// [`check_loaded`] against the stock dir `stock` (as the process saw it:
/// a chroot's processes see its own dir at the host's path).
pub fn check_loaded_with(paths: &[String], our_dir: &Path, stock: &Path, names: &[&str]) -> Result<(), String> {
    let mut errs = Vec::new();
    let library = our_dir.join(LIBRARY_FILE).to_string_lossy().into_owned();
    if !names.is_empty() && !paths.iter().any(|x| x == &library || x.starts_with(&format!("{library} "))) {
        errs.push(format!("{library} is NOT loaded"));
    }
    for n in names {
        let ours = our_dir.join(format!("{n}.so")).to_string_lossy().into_owned();
        let theirs = stock.join(format!("{n}.so")).to_string_lossy().into_owned();
        let has = |p: &str| paths.iter().any(|x| x == p || x.starts_with(&format!("{p} ")));
        if !has(&ours) {
            errs.push(format!("{ours} is NOT loaded"));
        }
        if has(&theirs) {
            errs.push(format!("stock {theirs} IS loaded"));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// The proof of loading for a process in chroot `root` (whose paths the
/// host cannot read as paths): by device and inode, our `<name>.so` and
/// library in `our_dir` are mapped, and the chroot's stock file of each
/// name (`stock`, a path inside) is not.  `our_dir` is a path inside the
/// chroot: a directory of the chroot itself (a package installed in an
/// [`chroot::Overlay`]), else a host dir bound at its own path inside.
pub fn check_mapped_in_chroot(pid: u32, root: &chroot::Chroot, our_dir: &Path, stock: &Path, names: &[&str]) -> Result<(), String> {
    let mut errs = Vec::new();
    let mapped = |f: &Path| chroot::mapping_of(pid, f).map(|m| m.is_some());
    // The chroot's file of that path, or the host's (bound there).
    let ours_mapped = |f: &Path| -> Result<bool, String> {
        if let Some(inside) = root.resolve(f).filter(|p| p.is_file()) {
            if mapped(&inside)? {
                return Ok(true);
            }
        }
        Ok(f.is_file() && mapped(f)?)
    };
    let lib = our_dir.join(LIBRARY_FILE);
    if !names.is_empty() && !ours_mapped(&lib)? {
        errs.push(format!("{} is NOT mapped (by device+inode)", lib.display()));
    }
    for n in names {
        let ours = our_dir.join(format!("{n}.so"));
        if !ours_mapped(&ours)? {
            errs.push(format!("{} is NOT mapped (by device+inode)", ours.display()));
        }
        // Where the stock name is a link to ours (the divert package:
        // PluginSet::Diverted), the stock file is the diverted one,
        // `<name>.so.stock`.
        let mut stock_file = stock.join(format!("{n}.so"));
        if root.resolve(&stock_file).is_some() && root.resolve(&stock_file) == root.resolve(&ours) {
            stock_file = stock.join(format!("{n}.so.stock"));
        }
        if let Some(theirs) = root.resolve(&stock_file).filter(|p| p.is_file()) {
            if mapped(&theirs)? {
                errs.push(format!("stock {} (the chroot's {}) IS mapped", theirs.display(), stock_file.display()));
            }
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}
