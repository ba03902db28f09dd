//! The plugin files (`gres_gpu.so` ...) as built into this crate: each
//! offers slurmd every entry point that Debian's file of the same interface
//! offers, jumps only to functions our `libgres_rs.so` defines, and stays
//! thin (the code is in the library, once per daemon).  And the files that
//! ship hold none of the test hooks.  No Slurm daemon is needed; `nm`
//! (binutils) reads the files.

use gres_test_harness as harness;

use gres_core::plugin_files::Interface;
use harness::{library_in, locate_our_library, stock_plugin_dir, target_dir, test_build_dir, BUILT_LIBRARY_FILE, PLUGIN_FILES};
use slurm_gpu_gres::plugin_file_bytes;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Dynamic symbols of a shared object: (defined, undefined non-weak).
fn dynamic_symbols(file: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut defined, mut undefined) = (BTreeSet::new(), BTreeSet::new());
    for s in harness::dynamic_symbols(file) {
        if s.defined() {
            defined.insert(s.name);
        } else if s.kind == "U" {
            undefined.insert(s.name);
        }
    }
    (defined, undefined)
}

/// What slurmd resolves in a plugin file: the data symbols, init/fini and
/// the interface's functions.
fn is_entry_point(name: &str) -> bool {
    ["plugin_name", "plugin_type", "plugin_version", "init", "fini"].contains(&name) || name.starts_with("gres_p_") || name.starts_with("gpu_p_")
}

#[test]
fn plugin_files_offer_the_stock_entry_points_and_jump_into_our_library() {
    let dir = std::env::temp_dir().join(format!("gres-rs-plugin-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let library = library_in(&locate_our_library().unwrap_or_else(|e| panic!("{e}")));
    let (offered, _) = dynamic_symbols(&library);
    let stock = stock_plugin_dir();
    for file in &PLUGIN_FILES {
        let bytes = plugin_file_bytes(file);
        assert!(bytes.len() < 32 * 1024, "{}.so is {} bytes: the plugin files hold jumps, not code", file.file, bytes.len());
        let path = dir.join(format!("{}.so", file.file));
        std::fs::write(&path, bytes).unwrap();
        let (defined, needed) = dynamic_symbols(&path);
        // Debian ships no gpu_nvml.so; gpu_generic.so has the same interface.
        let reference = stock.join(match file.interface {
            Interface::Gres => format!("{}.so", file.file),
            Interface::Gpu => "gpu_generic.so".to_string(),
        });
        if reference.is_file() {
            let (theirs, _) = dynamic_symbols(&reference);
            let missing: Vec<&String> = theirs.iter().filter(|s| is_entry_point(s) && !defined.contains(*s)).collect();
            assert!(missing.is_empty(), "{}.so lacks entry points that {} has: {missing:?}", file.file, reference.display());
        } else {
            eprintln!("{}: not installed, entry points not compared", reference.display());
        }
        let extra: Vec<&String> = defined.iter().filter(|s| !is_entry_point(s)).collect();
        assert!(extra.is_empty(), "{}.so defines symbols slurmd does not look for: {extra:?}", file.file);
        assert!(!needed.is_empty());
        let unresolved: Vec<&String> = needed.iter().filter(|s| !offered.contains(*s)).collect();
        assert!(unresolved.is_empty(), "{}.so needs {unresolved:?}, which {} does not define", file.file, library.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The environment variables only test builds read (features
/// `fault-injection` and `test-hooks`): a daemon of a release must not
/// change its devices or its NVML library by a stray variable.
const TEST_HOOKS: [&str; 6] = ["GRES_RS_NVML_LIB", "GRES_RS_DEV_DIR", "GRES_RS_MIG_MINORS", "GRES_RS_PANIC_IN", "GRES_RS_HEALTH_CONF", "GRES_RS_STATE_DIR"];

/// The test hooks whose names occur in `file`'s bytes.
fn hooks_in(file: &Path) -> Vec<&'static str> {
    let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    TEST_HOOKS.into_iter().filter(|h| bytes.windows(h.len()).any(|w| w == h.as_bytes())).collect()
}

/// The built files of a normal build (`cargo build --workspace`, and
/// `--release` where built): the library, the plugin files' and `gres-rs`.
fn shipped_files() -> Vec<PathBuf> {
    let target = target_dir();
    let debug = target.join("debug").join(BUILT_LIBRARY_FILE);
    assert!(debug.is_file(), "{} is not built; run `cargo build --workspace` first", debug.display());
    let mut files = vec![debug];
    let mut optional = vec![target.join("release").join(BUILT_LIBRARY_FILE), target.join("release").join("gres-rs")];
    // The library the other tests load, where GRES_RS_PLUGIN_DIR names another.
    if let Ok(dir) = locate_our_library() {
        optional.push(library_in(&dir));
    }
    files.extend(optional.into_iter().filter(|f| f.is_file()));
    #[cfg(feature = "cli")]
    files.push(PathBuf::from(env!("CARGO_BIN_EXE_gres-rs")));
    files.dedup();
    files
}

#[test]
fn test_hooks_stay_out_of_the_shipped_files() {
    for file in shipped_files() {
        let found = hooks_in(&file);
        assert!(found.is_empty(), "{} holds the test hooks {found:?}: they belong in test builds only (features test-hooks, fault-injection)", file.display());
    }
    for file in &PLUGIN_FILES {
        let bytes = plugin_file_bytes(file);
        for h in TEST_HOOKS {
            assert!(!bytes.windows(h.len()).any(|w| w == h.as_bytes()), "{}.so holds {h}", file.file);
        }
    }
    // The scan finds them where they are: in the test build.
    let test_lib = test_build_dir(false).join(BUILT_LIBRARY_FILE);
    assert_eq!(hooks_in(&test_lib), TEST_HOOKS.to_vec(), "{}", test_lib.display());
}

/// `readelf -d` and `readelf -r` of a shared object: (the dynamic
/// section, the relocations).
fn readelf(file: &Path) -> (String, String) {
    let run = |flag: &str| {
        let out = std::process::Command::new("readelf").args(["-W", flag]).arg(file).output().expect("readelf (binutils)");
        assert!(out.status.success(), "readelf {flag} {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    (run("-d"), run("-r"))
}

/// How each object binds: the plugin files their one symbol, the library's
/// table, at load (`BIND_NOW`: a missing or mismatched library fails
/// `dlopen()` cleanly and slurmd tries the next `PluginDir` entry); the
/// library the Slurm functions it calls at their first call, through its
/// PLT (`.cargo/config.toml`: a step's slurmstepd loads it for every step
/// and calls few of them), and the C library functions of Rust's standard
/// library likewise, with its relocated data read-only all the same.
#[test]
fn plugin_files_bind_at_load_and_the_library_at_first_call() {
    let dir = std::env::temp_dir().join(format!("gres-rs-binding-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in &PLUGIN_FILES {
        let path = dir.join(format!("{}.so", file.file));
        std::fs::write(&path, plugin_file_bytes(file)).unwrap();
        let (dynamic, _) = readelf(&path);
        assert!(dynamic.contains("BIND_NOW"), "{}.so does not bind at load:\n{dynamic}", file.file);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let library = library_in(&locate_our_library().unwrap_or_else(|e| panic!("{e}")));
    let (dynamic, relocations) = readelf(&library);
    assert!(!dynamic.contains("BIND_NOW") && !dynamic.contains("Flags: NOW"), "{} binds everything at load:\n{dynamic}", library.display());
    let lazy: Vec<&str> = relocations.lines().filter(|l| l.contains("R_X86_64_JUMP_SLOT") && l.contains("slurm_xfree")).collect();
    assert!(!lazy.is_empty() || !cfg!(target_arch = "x86_64"), "{} calls slurm_xfree other than through its PLT:\n{relocations}", library.display());
    // Nor the C library functions of Rust's standard library
    // (crates/gres_rs/build.rs): only the weak references std tests for,
    // and those of the C runtime's start files, are bound at load.
    let at_load: Vec<&str> = relocations
        .lines()
        .filter(|l| l.contains("R_X86_64_GLOB_DAT") && l.contains("@GLIBC"))
        // pthread_create cannot be wrapped: libgcc's split-stack support
        // (generic-morestack-thread.o, linked by some toolchains) defines
        // __wrap_pthread_create itself; it stays bound at load.
        .filter(|l| !["__cxa_finalize@", "__cxa_thread_atexit_impl@", "__pthread_key_create@", "pthread_create@"].iter().any(|weak| l.contains(weak)))
        .collect();
    assert!(
        at_load.is_empty(),
        "{} binds C library functions at load (add them to STD_IMPORTS in crates/gres_rs/build.rs):\n{}",
        library.display(),
        at_load.join("\n")
    );
    let headers = std::process::Command::new("readelf").args(["-W", "-l"]).arg(&library).output().expect("readelf");
    assert!(String::from_utf8_lossy(&headers.stdout).contains("GNU_RELRO"), "{} has no read-only-after-relocation segment", library.display());
}
