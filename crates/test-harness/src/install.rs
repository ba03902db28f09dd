//! Our plugin files and their installation: the names this project
//! replaces, and our library and plugin files written into a plugin
//! directory.

use crate::paths::library_in;
use crate::{fsutil, LIBRARY_FILE, PLUGIN_FILES};
use slurm_gpu_gres::plugin_file_bytes;
use std::path::Path;

/// The plugin files this project replaces (names slurmd loads, minus ".so").
pub const OUR_PLUGINS: [&str; PLUGIN_FILES.len()] = {
    let mut names = [""; PLUGIN_FILES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = PLUGIN_FILES[i].file;
        i += 1;
    }
    names
};

/// Installs our library from `built` and the named plugin files into
/// `dir`, each through a temporary file and rename(2); the library first,
/// so that a plugin file never sits there without it.  A plugin file that
/// `built` holds beside the library (a build for another Slurm release,
/// as `tests/releases.rs` assembles them) is taken from there; otherwise
/// the one built into this crate (for the release of this build).
pub fn install_ours(built: &Path, names: &[&str], dir: &Path) -> Result<(), String> {
    install_ours_from(built, None, names, dir)
}

/// [`install_ours`] with the plugin files taken from `plugin_files`
/// (another release's build, [`testbed::OurBuild`](crate::testbed::OurBuild)) instead of the ones
/// built into this crate.
pub fn install_ours_from(built: &Path, plugin_files: Option<&Path>, names: &[&str], dir: &Path) -> Result<(), String> {
    let src = library_in(built);
    fsutil::install_atomic(&src, &dir.join(LIBRARY_FILE), 0o755).map_err(|e| format!("installing {} in {}: {e}", src.display(), dir.display()))?;
    for n in names {
        let file = PLUGIN_FILES.iter().find(|f| f.file == *n).ok_or_else(|| format!("{n} is not one of our plugin files"))?;
        let to = dir.join(format!("{n}.so"));
        // Another release's files: given, or beside its library; else the
        // files built into this crate.
        let beside = built.join(format!("{n}.so"));
        match plugin_files {
            Some(from) => fsutil::install_atomic(&from.join(format!("{n}.so")), &to, 0o755),
            None if beside.is_file() => fsutil::install_atomic(&beside, &to, 0o755),
            None => fsutil::write_atomic(plugin_file_bytes(file), &to, 0o755),
        }
        .map_err(|e| format!("installing {n}.so in {}: {e}", dir.display()))?;
    }
    Ok(())
}
