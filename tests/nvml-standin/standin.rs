//! Test helpers for the NVML stand-in (`nvml_standin.c` next to this
//! file): build it with `cc` (once per version of the source, under
//! cargo's `target/tmp`), point `GRES_RS_NVML_LIB` / `GRES_RS_NVML_FIXTURE` /
//! `GRES_RS_NVML_CALLS` / `GRES_RS_MIG_MINORS` at it, and read back the
//! calls it received.
//!
//! Use from an integration test with
//! `#[path = "nvml-standin/standin.rs"] mod standin;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The stand-in's source file.
pub fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml-standin/nvml_standin.c")
}

/// A fixture file by name (`h100x8.conf`, `mig-minors`, ...).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml-standin/fixtures").join(name)
}

/// Compile the stand-in into `dir` as `libnvidia-ml.so.1` with a
/// `libnvidia-ml.so` link (the name slurmd probes); returns the `.so.1`.
pub fn build_into(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let lib = dir.join("libnvidia-ml.so.1");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O0", "-g", "-Wall", "-Wextra", "-Werror", "-Wl,-soname,libnvidia-ml.so.1", "-o"])
        .arg(&lib)
        .arg(source())
        .output()
        .map_err(|e| format!("running cc for the NVML stand-in (install gcc): {e}"))?;
    if !out.status.success() {
        return Err(format!("cc failed building the NVML stand-in:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let link = dir.join("libnvidia-ml.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("libnvidia-ml.so.1", &link).map_err(|e| format!("{}: {e}", link.display()))?;
    Ok(lib)
}

struct Built {
    /// Directory of the library (shared by test processes, keyed by the
    /// source's hash).
    dir: PathBuf,
    lib: PathBuf,
    /// This process's call logs and fixture texts.
    scratch: PathBuf,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvml-standin");
        let src = std::fs::read(source()).unwrap_or_else(|e| panic!("{}: {e}", source().display()));
        let mut h = std::collections::hash_map::DefaultHasher::new();
        src.hash(&mut h);
        let dir = base.join(format!("lib-{:016x}", h.finish()));
        if !dir.join("libnvidia-ml.so.1").is_file() {
            // Build aside, then move into place: test processes may race.
            let tmp = base.join(format!("build-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            build_into(&tmp).unwrap_or_else(|e| panic!("{e}"));
            if std::fs::rename(&tmp, &dir).is_err() {
                let _ = std::fs::remove_dir_all(&tmp);
            }
        }
        // Scratch dirs of test processes that are gone.
        if let Ok(entries) = std::fs::read_dir(&base) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("run-") {
                    if !Path::new("/proc").join(pid).exists() {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
        }
        let scratch = base.join(format!("run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).unwrap_or_else(|e| panic!("{}: {e}", scratch.display()));
        let lib = dir.join("libnvidia-ml.so.1");
        Built { dir, lib, scratch }
    })
}

/// The built stand-in library (`.../libnvidia-ml.so.1`).
pub fn library() -> PathBuf {
    built().lib.clone()
}

/// Its directory (for `LD_LIBRARY_PATH`).
pub fn library_dir() -> PathBuf {
    built().dir.clone()
}

/// A directory for this test process's files (removed by a later run once
/// this process is gone).
pub fn scratch_dir() -> PathBuf {
    built().scratch.clone()
}

static LOCK: Mutex<()> = Mutex::new(());

/// One use of the stand-in: holds the process-wide test lock (NVML and the
/// environment are process-wide), with the environment set for a fixture
/// and an empty call log.  NVML is released when it starts and ends.
pub struct Standin {
    _guard: MutexGuard<'static, ()>,
    pub calls_path: PathBuf,
}

impl Standin {
    /// Use the fixture file at `fixture_path` (`None`: no fixture, so
    /// NVML's init fails as without a driver).
    pub fn with_fixture(fixture_path: Option<&Path>) -> Standin {
        let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let lib = library();
        slurm_gpu_gres::nvml::release();
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let calls_path = built().scratch.join(format!("calls-{n}.log"));
        let _ = std::fs::remove_file(&calls_path);
        std::env::set_var("GRES_RS_NVML_LIB", &lib);
        match fixture_path {
            Some(p) => std::env::set_var("GRES_RS_NVML_FIXTURE", p),
            None => std::env::remove_var("GRES_RS_NVML_FIXTURE"),
        }
        std::env::set_var("GRES_RS_NVML_CALLS", &calls_path);
        std::env::set_var("GRES_RS_MIG_MINORS", fixture("mig-minors"));
        Standin { _guard: guard, calls_path }
    }

    /// Use a fixture of `tests/nvml-standin/fixtures`.
    pub fn new(name: &str) -> Standin {
        Standin::with_fixture(Some(&fixture(name)))
    }

    /// Use a fixture given as text (written to a temporary file).
    pub fn from_text(text: &str) -> Standin {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = built().scratch.join(format!("fixture-{n}.conf"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Standin::with_fixture(Some(&path))
    }

    /// Every call the stand-in received so far, one `"<function> <args>"`
    /// string each.
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.calls_path).unwrap_or_default().lines().map(str::to_string).collect()
    }

    /// How many calls of `function` it received.
    pub fn count(&self, function: &str) -> usize {
        self.calls().iter().filter(|c| c.split_whitespace().next() == Some(function)).count()
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        slurm_gpu_gres::nvml::release();
    }
}

static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
