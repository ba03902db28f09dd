//! Build script: finds the Slurm release this build is for, and turns the
//! matching `slurm-headers/<major>.<minor>/` ABI description into Rust with
//! bindgen.  The release comes from the installed `slurm/slurm_version.h`
//! (Debian's libslurm-dev) or from an explicit `SLURM_VERSION=22.05.8`
//! setting, never from a literal in the code.  Then it makes the plugin
//! files (`gres_gpu.so` ...): their data symbols, and a jump into
//! `libgres_rs.so` for each entry point (through the plugin's table there).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

// The entry-point list, shared with the library.
#[allow(dead_code, unused_macros)]
#[macro_use]
#[path = "src/entry_points.rs"]
mod entry_points;
// What changed when, shared with the library.
#[allow(dead_code)]
#[path = "src/releases.rs"]
mod releases;
// The shape of the plugin files (a build dependency: plain constants).
use gres_core::plugin_files::{Interface, PluginFile, LIBRARY_FILE, PLUGIN_FILES};

/// With `gres_plugin_functions!` or `gpu_plugin_functions!`: the entry
/// points, each as (name, since, until).
#[macro_export]
macro_rules! names {
    ($tag:ident; $(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $(, since $since:tt)? $(, until $until:tt)? => $body:expr;)*) => {
        &[$((stringify!($name), None $(.or(Some($since)))?, None $(.or(Some($until)))?)),*]
    };
}

type Entry = (&'static str, Option<&'static str>, Option<&'static str>);

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_VERSION");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-changed=slurm-headers");
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=include/gres_rs_shim.h");
    println!("cargo:rerun-if-changed=src/entry_points.rs");

    let include_dir = PathBuf::from(env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into()));
    let (major, minor, micro) = slurm_version(&include_dir);
    let number = (major << 16) | (minor << 8) | micro;
    println!("cargo:rustc-env=SLURM_VERSION_NUMBER={number}");
    println!("cargo:rustc-env=SLURM_VERSION_STRING={major}.{minor:02}.{micro}");

    // One cfg per change of releases.rs, set while it is in force.
    let supported = releases::SERIES;
    for c in &releases::CHANGES {
        println!("cargo::rustc-check-cfg=cfg({})", c.cfg);
    }
    println!("cargo:rerun-if-changed=src/releases.rs");
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
    assert!(supported.contains(&release.as_str()), "slurm-headers/{release}/ exists but src/releases.rs SERIES lacks {release}: add it there");
    // Changes and entry points by the full release: a change may begin
    // inside a series (releases.rs).
    let full = format!("{major}.{minor:02}.{micro}");
    for c in releases::changes_in(&full) {
        println!("cargo:rustc-cfg={}", c.cfg);
    }
    println!("cargo:rustc-env=SLURM_SERIES={release}");

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
    build.file("src/shim.c").include("include").include(&include_dir).warnings(true).flag_if_supported("-Wno-unused-parameter");
    build.compile("gres_rs_shim");

    check_entry_ranges();
    write_release_gate(&out, &full);
    write_entry_tables(&out, &full);
    make_plugin_files(&out, number, &full);
}

/// Every entry point with a `since`/`until` has its row in releases.rs
/// (naming it, with the same range; no bound is the first series / none),
/// so the two lists cannot drift apart.
fn check_entry_ranges() {
    let gres: &[Entry] = gres_plugin_functions!(names!(any));
    let gpu: &[Entry] = gpu_plugin_functions!(names!(any));
    let first = releases::SERIES[0];
    for (name, since, until) in gres.iter().chain(gpu) {
        if since.is_none() && until.is_none() {
            continue;
        }
        let ok = releases::CHANGES.iter().any(|c| c.what.contains(name) && c.since == since.unwrap_or(first) && c.until == *until);
        assert!(ok, "entry_points.rs: {name} (since {since:?}, until {until:?}) has no row in releases.rs CHANGES naming it with that range");
    }
}

/// `OUT_DIR/release_gate.rs`: the macro `__in_release!{[since] [until]
/// items}` that keeps `items` when the release being built is in the
/// range (`[]`: open), for the export macros, which are expanded in other
/// crates (where this crate's cfgs do not exist).  One arm per pair of
/// series (or none), each keeping or dropping its items.
fn write_release_gate(out: &Path, release: &str) {
    let mut bounds: Vec<Option<&str>> = vec![None];
    bounds.extend(releases::SERIES.iter().map(|s| Some(*s)));
    let mut s = String::from(
        "/// Keeps its items when the release this build is for is in\n/// `[since] [until]` (made by build.rs from releases.rs).\n#[doc(hidden)]\n#[macro_export]\nmacro_rules! __in_release {\n",
    );
    let lit = |b: Option<&str>| b.map(|b| format!("{b:?}")).unwrap_or_default();
    for since in &bounds {
        for until in &bounds {
            let keep = if releases::present(*since, *until, release) { "$($item)*" } else { "" };
            let _ = writeln!(s, "    ([{}] [{}] $($item:item)*) => {{ {keep} }};", lit(*since), lit(*until));
        }
    }
    s.push_str("}\n");
    fs::write(out.join("release_gate.rs"), s).expect("write release_gate.rs");
}

/// The entry points of a plugin file that `release` resolves, in table
/// order.
fn forwards(file: &PluginFile, release: &str) -> Vec<&'static str> {
    let entries: &[Entry] = match file.interface {
        Interface::Gres => gres_plugin_functions!(names!(any)),
        Interface::Gpu => gpu_plugin_functions!(names!(any)),
    };
    entries.iter().filter(|(_, since, until)| releases::present(*since, *until, release)).map(|(name, _, _)| *name).collect()
}

/// `OUT_DIR/entry_tables.rs`: the macro `__entry_table!(<file>)` that, in
/// the export macros' scope (where the plugin's functions are defined),
/// makes and exports the file's table: each function's address in the
/// order of the plugin file's jumps, under [`entry_points::table_symbol`].
fn write_entry_tables(out: &Path, release: &str) {
    let mut s = String::from(
        "/// The table of a plugin file's functions in the library (made by\n/// build.rs from entry_points.rs for this release).\n#[doc(hidden)]\n#[macro_export]\nmacro_rules! __entry_table {\n",
    );
    for file in &PLUGIN_FILES {
        let names = forwards(file, release);
        let symbol = entry_points::table_symbol(file.file, release, &names);
        let slots: Vec<String> = names.iter().map(|n| format!("{n} as *const ()")).collect();
        let _ = writeln!(
            s,
            "    ({f}) => {{\n        #[export_name = \"{symbol}\"]\n        static ENTRIES: $crate::entry_points::EntryTable<{n}> = $crate::entry_points::EntryTable([{slots}]);\n    }};",
            f = file.file,
            n = names.len(),
            slots = slots.join(", ")
        );
    }
    s.push_str("}\n");
    fs::write(out.join("entry_tables.rs"), s).expect("write entry_tables.rs");
}

/// Assembly of one plugin file: `plugin_name`, `plugin_type`,
/// `plugin_version`, and each entry point as a jump through its slot of
/// the plugin's table in `libgres_rs.so` (the table's address from the
/// GOT, which the loader fills at load: `-z now`), so the library's
/// function receives slurmd's arguments and returns to slurmd unchanged
/// (no signature to keep in step here).  The scratch register is one the
/// calling convention leaves to such veneers: r11, x16 (IP0), t1.
fn plugin_file_assembly(file: &PluginFile, version: u32, release: &str, arch: &str) -> String {
    let names = forwards(file, release);
    let table = entry_points::table_symbol(file.file, release, &names);
    // endbr64 / bti c: valid targets of indirect calls where the CPU
    // checks them (no-ops elsewhere).
    let jump = |offset: usize| match arch {
        "x86_64" => format!("\tendbr64\n\tmovq {table}@GOTPCREL(%rip), %r11\n\tjmpq *{offset}(%r11)\n"),
        "aarch64" => format!("\thint #34\n\tadrp x16, :got:{table}\n\tldr x16, [x16, :got_lo12:{table}]\n\tldr x16, [x16, #{offset}]\n\tbr x16\n"),
        "riscv64" => format!("1:\tauipc t1, %got_pcrel_hi({table})\n\tld t1, %pcrel_lo(1b)(t1)\n\tld t1, {offset}(t1)\n\tjr t1\n"),
        other => panic!("no plugin file entry code for the {other} architecture (supported: x86_64, aarch64, riscv64)"),
    };
    let mut s = format!("/* {}.so, generated by build.rs */\n\t.section .rodata\n", file.file);
    for (symbol, text) in [("plugin_name", file.name), ("plugin_type", file.plugin_type)] {
        assert!(text.chars().all(|c| c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' '), "{symbol} {text:?}");
        let _ = write!(s, "\t.globl {symbol}\n\t.type {symbol}, %object\n{symbol}:\n\t.asciz \"{text}\"\n\t.size {symbol}, . - {symbol}\n");
    }
    let _ = write!(s, "\t.globl plugin_version\n\t.type plugin_version, %object\n\t.balign 4\nplugin_version:\n\t.long {version}\n\t.size plugin_version, 4\n");
    s.push_str("\t.text\n");
    for (i, name) in names.iter().enumerate() {
        let _ = write!(s, "\t.globl {name}\n\t.type {name}, %function\n\t.balign 16\n{name}:\n{}\t.size {name}, . - {name}\n", jump(8 * i));
    }
    s.push_str("\t.section .note.GNU-stack,\"\",%progbits\n");
    s
}

fn run(mut cmd: Command, what: &str) {
    let status = cmd.status().unwrap_or_else(|e| panic!("{what}: cannot run the C compiler: {e}"));
    assert!(status.success(), "{what} failed: {cmd:?}");
}

/// Make `OUT_DIR/plugin-files/<file>.so` for each plugin file, and
/// `OUT_DIR/plugin_files.rs` that embeds them in the library (for
/// `gres-rs install` and the tests).
///
/// Each file names `$ORIGIN/libgres_rs.so` in `DT_NEEDED`: the loader
/// opens the library beside the plugin file by path, with no search (no
/// library path, no `LD_LIBRARY_PATH`: a plugin file never gets another
/// build's library from a daemon's environment, and no failed `open()`s),
/// and binds its one symbol, the table, at load time (`-z now`): without
/// the library, or with one whose table is for another release or list,
/// `dlopen()` fails cleanly and slurmd tries the next directory of
/// `PluginDir`.
fn make_plugin_files(out: &Path, version: u32, release: &str) {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("CARGO_CFG_TARGET_ARCH");
    let dir = out.join("plugin-files");
    fs::create_dir_all(&dir).expect("create OUT_DIR/plugin-files");
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    // The library is built by another crate, maybe later: link against a
    // stand-in whose SONAME is what DT_NEEDED must say (the table is
    // found when slurmd loads the file).
    let stub_dir = out.join("plugin-files-link");
    fs::create_dir_all(&stub_dir).expect("create OUT_DIR/plugin-files-link");
    let mut stub = compiler.to_command();
    stub.args(["-shared", "-nostdlib", "-x", "assembler", "/dev/null", "-o"])
        .arg(stub_dir.join(LIBRARY_FILE))
        .arg(format!("-Wl,-soname,$ORIGIN/{LIBRARY_FILE}"));
    run(stub, "linking the stand-in libgres_rs.so");
    let lib_name = LIBRARY_FILE.strip_prefix("lib").and_then(|n| n.strip_suffix(".so")).expect("lib<name>.so");
    let mut embed = String::from("/// The plugin files made by build.rs: (file, bytes of `<file>.so`).\npub const BUILT: [(&str, &[u8]); ");
    let _ = writeln!(embed, "{}] = [", PLUGIN_FILES.len());
    for file in &PLUGIN_FILES {
        let source = dir.join(format!("{}.S", file.file));
        fs::write(&source, plugin_file_assembly(file, version, release, &arch)).expect("write plugin file assembly");
        let object = dir.join(format!("{}.so", file.file));
        let mut link = compiler.to_command();
        link.args(["-shared", "-nostdlib", "-o"])
            .arg(&object)
            .arg(&source)
            .arg("-L")
            .arg(&stub_dir)
            .args(["-Wl,--no-as-needed", &format!("-l{lib_name}")])
            .args(["-Wl,-z,now", "-Wl,-z,relro", "-Wl,-z,noexecstack"])
            // A page of names and jumps: one read+execute segment rather
            // than three (header, code, read-only data), so fewer mappings
            // and page faults in every daemon that loads it.
            .arg("-Wl,-z,noseparate-code");
        run(link, &format!("making {}.so", file.file));
        let _ = writeln!(embed, "    ({:?}, include_bytes!({:?})),", file.file, object.display().to_string());
    }
    embed.push_str("];\n");
    fs::write(out.join("plugin_files.rs"), embed).expect("write plugin_files.rs");
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
