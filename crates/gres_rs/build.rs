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
