//! Build script: finds the Slurm release this build is for, and turns the
//! matching `slurm-headers/<major>.<minor>/` ABI description into Rust with
//! bindgen.  The release comes from the installed `slurm/slurm_version.h`
//! (Debian's libslurm-dev) or from an explicit `SLURM_VERSION=22.05.8`
//! setting, never from a literal in the code.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_VERSION");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-changed=slurm-headers");
    println!("cargo:rerun-if-changed=src/ffi/shim.c");
    println!("cargo:rerun-if-changed=include/gres_rs_shim.h");

    let include_dir = PathBuf::from(env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into()));
    let (major, minor, micro) = slurm_version(&include_dir);
    let number = (major << 16) | (minor << 8) | micro;
    println!("cargo:rustc-env=SLURM_VERSION_NUMBER={number}");
    println!("cargo:rustc-env=SLURM_VERSION_STRING={major}.{minor:02}.{micro}");

    // One cfg per supported release, for the version-specific parts.
    let supported = ["22.05"];
    for s in supported {
        println!("cargo::rustc-check-cfg=cfg(slurm_{})", s.replace('.', "_"));
    }
    let release = format!("{major}.{minor:02}");
    let abi_dir = Path::new("slurm-headers").join(&release);
    let header = abi_dir.join("slurm_gres_abi.h");
    if !header.exists() {
        panic!(
            "this build is for Slurm {release}.{micro} (from {}), but slurm-headers/{release}/ \
             does not exist: supported releases are {supported:?}. Set SLURM_VERSION to build \
             for another release.",
            version_source(&include_dir)
        );
    }
    println!("cargo:rustc-cfg=slurm_{}", release.replace('.', "_"));

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_file(".*slurm_gres_abi.h")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_debug(true)
        .derive_default(true)
        .layout_tests(true)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("bindgen could not translate slurm-headers")
        .write_to_file(out.join("sys.rs"))
        .expect("write sys.rs");

    // The C shim bridges what Slurm only offers as macros or through the
    // public slurm.h layout (slurm_conf.debug_flags).
    let mut build = cc::Build::new();
    build.file("src/ffi/shim.c").include("include").include(&include_dir).warnings(true).flag_if_supported("-Wno-unused-parameter");
    build.compile("gres_rs_shim");
}

fn version_source(include_dir: &Path) -> String {
    if env::var("SLURM_VERSION").is_ok() {
        "the SLURM_VERSION setting".into()
    } else {
        include_dir.join("slurm/slurm_version.h").display().to_string()
    }
}

fn slurm_version(include_dir: &Path) -> (u32, u32, u32) {
    if let Ok(v) = env::var("SLURM_VERSION") {
        let parts: Vec<u32> = v.trim().split('.').map(|p| p.parse().unwrap_or_else(|_| panic!("SLURM_VERSION={v}: want e.g. 22.05.8"))).collect();
        if parts.len() != 3 {
            panic!("SLURM_VERSION={v}: want major.minor.micro, e.g. 22.05.8");
        }
        return (parts[0], parts[1], parts[2]);
    }
    let path = include_dir.join("slurm/slurm_version.h");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}. Install the Slurm development headers of the slurmd you build \
             for (Debian: `apt-get install libslurm-dev`), or set SLURM_VERSION=22.05.8 and \
             SLURM_INCLUDE_DIR.",
            path.display()
        )
    });
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some("#define") && words.next() == Some("SLURM_VERSION_NUMBER") {
            let value = words.next().unwrap_or("");
            let n = u32::from_str_radix(value.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("{}: bad SLURM_VERSION_NUMBER {value}", path.display()));
            return ((n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
        }
    }
    panic!("{}: no SLURM_VERSION_NUMBER", path.display());
}
