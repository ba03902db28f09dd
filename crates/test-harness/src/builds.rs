//! Our plugins built for the tests: the test build with the test hooks,
//! and builds for other Slurm releases (`cargo build -p gres_rs` against
//! a release's headers).

use crate::chroot::Chroot;
use crate::paths::{locate_our_library, target_dir, workspace_root};
use crate::{fsutil, BUILT_LIBRARY_FILE, LIBRARY_FILE, PLUGIN_FILES};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// The cargo features of [`test_build_dir`]'s build: the test hooks that
/// never reach a release build (`GRES_RS_PANIC_IN`; `GRES_RS_NVML_LIB`,
/// `GRES_RS_DEV_DIR`, `GRES_RS_MIG_MINORS` read from the daemon's
/// environment).
pub const TEST_FEATURES: &str = "fault-injection,test-hooks";

/// Our plugins built with [`TEST_FEATURES`] in a target dir of their own
/// (`<target>/test-build`), so that the normal build, which is what ships,
/// is left alone: the directory holding that `libgres_rs.so` (`debug/`, or
/// `release/` when `release`).  Built at the first call in a test process
/// (cargo finds it up to date after the first test binary).  For
/// [`ClusterConfig::plugin_build_dir`](crate::ClusterConfig::plugin_build_dir) of tests that put those variables
/// into slurmd's environment.
pub fn test_build_dir(release: bool) -> PathBuf {
    static BUILT: [std::sync::OnceLock<PathBuf>; 2] = [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    BUILT[usize::from(release)]
        .get_or_init(|| {
            let target = target_dir().join("test-build");
            // The cargo running the tests (`$CARGO`), else the one that
            // built this crate.
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
            let mut cmd = Command::new(cargo);
            cmd.current_dir(workspace_root()).args(["build", "--workspace", "--features", TEST_FEATURES, "--target-dir"]).arg(&target);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().unwrap_or_else(|e| panic!("cannot run cargo build for the test build: {e}"));
            assert!(status.success(), "cargo build --features {TEST_FEATURES} (the test build in {}) failed", target.display());
            target.join(if release { "release" } else { "debug" })
        })
        .clone()
}

/// Our plugins built for another Slurm release: `SLURM_INCLUDE_DIR=include
/// cargo build -p gres_rs --target-dir <target>/slurm-<version>` (the
/// test bed's own build of that release, [`testbed::TestBed::our_build`](crate::testbed::TestBed::our_build);
/// up to date after the first time), then `<that dir>/plugins/` holding
/// its library and the four plugin files its build.rs made, which
/// [`install_ours`](crate::install_ours) takes (set it as [`ClusterConfig::plugin_build_dir`](crate::ClusterConfig::plugin_build_dir)).
/// One build at a time per test process.  Returns the `plugins` dir.
pub fn build_for_release(version: &str, include: &Path) -> Result<PathBuf, String> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = target_dir().join(format!("slurm-{version}"));
    let built = cargo_build(version, include, &dir, false, false)?;
    let files = built.plugin_files_dir.ok_or_else(|| format!("the build for Slurm {version} names no plugin files"))?;
    let plugins = dir.join("plugins");
    fs::create_dir_all(&plugins).map_err(|e| format!("{}: {e}", plugins.display()))?;
    let copy = |src: &Path, name: &str| fsutil::install_atomic(src, &plugins.join(name), 0o755).map_err(|e| format!("installing {}: {e}", src.display()));
    copy(&built.lib_dir.join(BUILT_LIBRARY_FILE), LIBRARY_FILE)?;
    for f in &PLUGIN_FILES {
        copy(&files.join(format!("{}.so", f.file)), &format!("{}.so", f.file))?;
    }
    Ok(plugins)
}

/// Our files for one release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OurBuild {
    pub version: String,
    /// The directory of `libgres_rs.so`.
    pub lib_dir: PathBuf,
    /// The directory of the four plugin files built for this release
    /// (`gres-slurm-abi`'s `OUT_DIR/plugin-files`); `None`: the ones built
    /// into this crate (the host's release).
    pub plugin_files_dir: Option<PathBuf>,
    pub test_hooks: bool,
}

/// `cargo build -p gres_rs` for the Slurm headers in `include`, into
/// `target`; the library's dir and the plugin files' dir (from the build
/// script's `out_dir` in cargo's JSON messages).
pub(crate) fn cargo_build(version: &str, include: &Path, target: &Path, test_hooks: bool, release: bool) -> Result<OurBuild, String> {
    let t0 = Instant::now();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args(["build", "-p", "gres_rs", "--message-format=json-render-diagnostics", "--target-dir"]).arg(target);
    if test_hooks {
        cmd.args(["--features", TEST_FEATURES]);
    }
    if release {
        cmd.arg("--release");
    }
    cmd.env("SLURM_INCLUDE_DIR", include).env_remove("SLURM_VERSION");
    eprintln!("testbed: building ours for Slurm {version} ({}) in {}", if test_hooks { "test hooks" } else { "shipping features" }, target.display());
    let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(first_error_lines(&stderr, 12));
    }
    let lib_dir = target.join(if release { "release" } else { "debug" });
    if !lib_dir.join(crate::BUILT_LIBRARY_FILE).is_file() {
        return Err(format!("cargo built no {}", lib_dir.join(crate::BUILT_LIBRARY_FILE).display()));
    }
    let out_dir = stdout
        .lines()
        .filter(|l| l.contains("\"reason\":\"build-script-executed\"") && l.contains("slurm-abi"))
        .filter_map(|l| l.split("\"out_dir\":\"").nth(1).and_then(|r| r.split('"').next()))
        .next_back()
        .ok_or_else(|| "cargo reported no build script run of gres-slurm-abi (its out_dir holds the plugin files)".to_string())?;
    let files = PathBuf::from(out_dir).join("plugin-files");
    for f in crate::PLUGIN_FILES {
        if !files.join(format!("{}.so", f.file)).is_file() {
            return Err(format!("{} lacks {}.so", files.display(), f.file));
        }
    }
    eprintln!("testbed: ours for Slurm {version} built in {:.1?}", t0.elapsed());
    Ok(OurBuild { version: version.to_string(), lib_dir, plugin_files_dir: Some(files), test_hooks })
}

/// The lines of a failed cargo build that say why: from the first
/// `error`/`panicked` line on, at most `n`.
fn first_error_lines(stderr: &str, n: usize) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines.iter().position(|l| l.contains("error") || l.contains("panicked")).unwrap_or(lines.len().saturating_sub(n));
    lines[start..].iter().filter(|l| !l.trim().is_empty()).take(n).copied().collect::<Vec<_>>().join("\n")
}

/// Our build for Slurm `version` ([`TestBed::our_build`](crate::testbed::TestBed::our_build) and
/// [`TestBed::our_test_build`](crate::testbed::TestBed::our_test_build)): the host's own build outside a
/// chroot, else `cargo build` against the chroot's headers, once per
/// process.
pub fn build_ours(version: &str, chroot: Option<&Chroot>, test_hooks: bool) -> Result<OurBuild, String> {
    let release_profile = !cfg!(debug_assertions);
    let Some(root) = chroot else {
        let lib_dir = if test_hooks { test_build_dir(release_profile) } else { locate_our_library()? };
        return Ok(OurBuild { version: version.to_string(), lib_dir, plugin_files_dir: None, test_hooks });
    };
    static CACHE: Mutex<BTreeMap<(String, bool), Result<OurBuild, String>>> = Mutex::new(BTreeMap::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let key = (version.to_string(), test_hooks);
    if let Some(r) = cache.get(&key) {
        return r.clone();
    }
    let mut target = target_dir().join(format!("slurm-{version}"));
    if test_hooks {
        target = target.join("test-build");
    }
    let r = cargo_build(version, &root.host_path("/usr/include"), &target, test_hooks, release_profile);
    cache.insert(key, r.clone());
    r
}

/// The panic payload of "our build for this release is missing" raised
/// where a cluster with our plugins is prepared in a chroot without one
/// ([`our_build_for_chroot`]); [`run_test`](crate::testbed::run_test) turns it into a skip, or under
/// strict mode into a failure with its message.
#[derive(Clone, Debug)]
pub struct OursUnavailable(pub String);

/// Our build for the release of chroot `root` (the test-hooks one when
/// `test_hooks`), for a config that asked for ours without naming it.
/// Panics with [`OursUnavailable`] when there is none.
pub fn our_build_for_chroot(root: &Chroot, test_hooks: bool) -> OurBuild {
    let v = root.slurm_version().unwrap_or_default();
    match build_ours(&v, Some(root), test_hooks) {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("our build for {v} failed: {e}");
            eprintln!("{msg}");
            std::panic::panic_any(OursUnavailable(msg))
        }
    }
}

#[cfg(test)]
mod build_tests {
    /// The build path of a chroot release, exercised with the host's own
    /// headers (`<target>/slurm-<host version>-selftest`): the library and
    /// the four plugin files are found.  Slow (a full build): `--ignored`.
    #[test]
    #[ignore]
    fn cargo_build_finds_library_and_plugin_files() {
        let v = crate::host::host_version().unwrap_or_else(|| "22.05.8".into());
        // The directory the release tests build into (tests/releases.rs).
        let target = crate::target_dir().join(format!("slurm-{v}"));
        let b = super::cargo_build(&v, std::path::Path::new("/usr/include"), &target, false, false).unwrap_or_else(|e| panic!("{e}"));
        assert!(b.lib_dir.join(crate::BUILT_LIBRARY_FILE).is_file());
        let files = b.plugin_files_dir.expect("plugin files dir");
        for f in crate::PLUGIN_FILES {
            assert!(files.join(format!("{}.so", f.file)).is_file(), "{}", f.file);
        }
    }
}
