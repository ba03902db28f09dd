use std::path::PathBuf;
use std::process::Command;

/// The library binds the functions it calls lazily, at their first call,
/// as Slurm's own plugins do (`-C relro-level=partial` in
/// `.cargo/config.toml`: PLT calls, no `-z now`): a step's slurmstepd loads
/// it for every step and calls few of them.  Nothing of it is called before
/// slurmd has checked the plugin file's `plugin_version` against its own
/// release, and a build's imports are those of its release's
/// `libslurmfull.so` (tests/releases.rs checks them), so a function is
/// never missing when it is called.  The plugin files bind the library's
/// table at load (crates/slurm-abi/build.rs): without the library, or with
/// one of another build, their dlopen() still fails cleanly.
fn main() {
    static_unwinder();
    std_imports_at_first_call();
}

/// The C library functions that Rust's standard library calls (those of a
/// release build and the more of a debug build).  std comes
/// compiled, and calls them through the GOT, which the dynamic loader fills
/// when it loads the library (one symbol lookup each, about 400
/// instructions in a slurmstepd), whether or not they are ever called.
/// Each name is wrapped (`--wrap`): std's references go to a local,
/// hidden `__wrap_<name>` that jumps through the PLT to the C library's
/// function, bound when first called.  Weak references (std checks that
/// `__pthread_key_create` and `__cxa_thread_atexit_impl` exist) are left as
/// they are.  tests/plugin_files.rs checks that no import of the C library
/// is bound at load.
const STD_IMPORTS: &[&str] = &[
    "__errno_location",
    "__xpg_strerror_r",
    "abort",
    "bcmp",
    "calloc",
    "clock_gettime",
    "close",
    "dl_iterate_phdr",
    "dlsym",
    "exit",
    "free",
    "fstat64",
    "getauxval",
    "getcwd",
    "getenv",
    "getpid",
    "getrandom",
    "gettid",
    "lseek64",
    "lstat64",
    "malloc",
    "memcmp",
    "memcpy",
    "memmove",
    "memset",
    "mkdir",
    "mmap64",
    "mprotect",
    "munmap",
    "open64",
    "pause",
    "poll",
    "posix_memalign",
    "pthread_attr_destroy",
    "pthread_attr_getguardsize",
    "pthread_attr_getstack",
    "pthread_attr_init",
    "pthread_attr_setstacksize",
    "pthread_detach",
    "pthread_getattr_np",
    "pthread_key_create",
    "pthread_key_delete",
    "pthread_self",
    "pthread_setname_np",
    "pthread_setspecific",
    "read",
    "readlink",
    "realloc",
    "realpath",
    "rename",
    "sigaltstack",
    "stat64",
    "statx",
    "strlen",
    "syscall",
    "sysconf",
    "write",
    "writev",
];

fn std_imports_at_first_call() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_ARCH") != "x86_64" || target("CARGO_CFG_TARGET_OS") != "linux" || target("CARGO_CFG_TARGET_ENV") != "gnu" {
        // The jumps below are x86-64 code; elsewhere std's imports stay
        // bound at load.
        return;
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut asm = String::from(".text\n");
    for name in STD_IMPORTS {
        asm.push_str(&format!(
            ".globl __wrap_{name}\n.hidden __wrap_{name}\n.type __wrap_{name},@function\n__wrap_{name}:\n\tjmp __real_{name}@PLT\n.size __wrap_{name}, .-__wrap_{name}\n"
        ));
    }
    asm.push_str(".section .note.GNU-stack,\"\",@progbits\n");
    let src = out_dir.join("std_imports.s");
    std::fs::write(&src, asm).expect("write std_imports.s");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let obj = out_dir.join("std_imports.o");
    let ok = Command::new(&cc).arg("-c").arg(&src).arg("-o").arg(&obj).status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "{cc} could not assemble {}", src.display());
    // The library only: no other program of the workspace is linked with
    // these names wrapped.
    println!("cargo:rustc-cdylib-link-arg={}", obj.display());
    for name in STD_IMPORTS {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--wrap={name}");
    }
}

/// Link GCC's unwinder (libgcc_eh.a, hidden symbols) into the library, so
/// that daemons loading our plugins do not also have to find, map and
/// relocate libgcc_s.so.1, which slurmd otherwise never loads. Rust's std
/// asks for `-lgcc_s`; with every `_Unwind_*` symbol already defined, the
/// linker's `--as-needed` leaves it out. Where the C compiler has no
/// libgcc_eh.a, the library simply keeps needing libgcc_s.so.1.
fn static_unwinder() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let Ok(out) = Command::new(&cc).arg("-print-file-name=libgcc_eh.a").output() else {
        println!("cargo:warning={cc} not found: libgres_rs.so will need libgcc_s.so.1");
        return;
    };
    let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !archive.is_absolute() || !archive.is_file() {
        println!("cargo:warning={cc} has no libgcc_eh.a: libgres_rs.so will need libgcc_s.so.1");
        return;
    }
    // Our own name for the copy, so that no other library is looked up in
    // the compiler's directory.
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::copy(&archive, out_dir.join("libgres_rs_unwind.a")).expect("copy libgcc_eh.a into OUT_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", archive.display());
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rustc-link-search=native={}", out_dir.display());
    // Whole archive: the unwinder's symbols are needed by std, which the
    // linker reads after this library.
    println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gres_rs_unwind");
}
