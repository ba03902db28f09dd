//! One build per Slurm release series, and its symbols against what that
//! release's daemons resolve.
//!
//! For each series (`crates/slurm-abi/src/releases.rs` `SERIES`):
//!
//! 1. `SLURM_INCLUDE_DIR=<dir> cargo build --release -p gres_rs
//!    --target-dir target/slurm-<version>`, where `<dir>` is the installed
//!    `/usr/include` (22.05.8 on Debian 12), the chroot's `/usr/include`
//!    (24.11.5 trixie, 26.05.5 sid) or, for the tarball series, what
//!    `tests/testbed/slurm-include.sh <version>` makes from the unpacked
//!    source.  Then `target/slurm-<version>/plugins/` gets the library and
//!    the four plugin files of that build (what `PluginDir` would hold;
//!    the chroot tests of `tests/testbed_chroot.rs` install from there).
//! 2. `nm -D` of each plugin file: its functions are exactly `init`,
//!    `fini` and the `syms[]` of that release's `src/interfaces/gres.c` or
//!    `gpu.c` (`src/common/` in 22.05), read from its source; it has the
//!    data symbols `plugin_name`, `plugin_type`, `plugin_version`.
//! 3. `nm -D` of `libgres_rs.so`: the functions the plugin files jump to
//!    are exactly those; every symbol it takes from Slurm (undefined and
//!    without a symbol version: glibc's carry one) is exported by that
//!    release's `libslurmfull.so` (`nm -D --defined-only`): the real one
//!    for 22.05.8 (installed), 24.11.5 and 26.05.5 (chroots), and for a
//!    tarball series whose release the test bed has built
//!    (`tests/testbed/slurm-source.sh`); otherwise, where no binary is at
//!    hand, defined in the source of `src/common`, `src/interfaces`,
//!    `src/api` (a function definition or a `strong_alias`), which is
//!    weaker and says so.
//!
//! A series whose headers or source are missing is skipped with a line
//! saying why (a failure under `CI=true` / `GRES_RS_REQUIRE_SLURM=1`).
//! Builds run one at a time.  The first run builds eight target dirs
//! (about 3 minutes each on 2 cores); later runs find them up to date.
//! Run: `cargo test --test releases -- --nocapture` (one:
//! `cargo test --test releases 24_11`).

use gres_test_harness as harness;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const SRC_DIR: &str = "/var/cache/slurm-gpu-gres/src";
const HOST_LIBSLURMFULL: &str = "/usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so";
const LIBRARY: &str = harness::LIBRARY_FILE;
const GRES_FILES: [&str; 3] = ["gres_gpu", "gres_mps", "gres_shard"];
const GPU_FILES: [&str; 1] = ["gpu_nvml"];

/// Where a series' build gets its headers and its facts.
#[derive(Clone, Copy)]
enum Origin {
    /// The host's installed Slurm (Debian 12: 22.05.8).
    Host,
    /// A test-bed chroot (`trixie`, `sid`).
    Chroot(&'static str),
    /// An upstream tarball, unpacked by tests/layout/source.rs.
    Tarball,
}

struct Target {
    series: &'static str,
    version: &'static str,
    origin: Origin,
    /// The source tree whose syms[] the build must match (for 26.05.5,
    /// 26.05.3: 26.05.5's source was not at hand; the series' syms[] are
    /// the same in every point release checked).
    source: &'static str,
}

const TARGETS: [Target; 8] = [
    Target { series: "22.05", version: "22.05.8", origin: Origin::Host, source: "slurm-wlm-22.05.8" },
    Target { series: "23.02", version: "23.02.8", origin: Origin::Tarball, source: "slurm-23-02-8-1" },
    Target { series: "23.11", version: "23.11.11", origin: Origin::Tarball, source: "slurm-23-11-11-1" },
    Target { series: "24.05", version: "24.05.8", origin: Origin::Tarball, source: "slurm-24-05-8-1" },
    Target { series: "24.11", version: "24.11.5", origin: Origin::Chroot("trixie"), source: "slurm-24-11-5-1" },
    Target { series: "25.05", version: "25.05.8", origin: Origin::Tarball, source: "slurm-25-05-8-1" },
    Target { series: "25.11", version: "25.11.7", origin: Origin::Tarball, source: "slurm-25-11-7-1" },
    Target { series: "26.05", version: "26.05.5", origin: Origin::Chroot("sid"), source: "slurm-26-05-3-1" },
];

#[test]
fn every_series_has_a_target() {
    let ours: Vec<&str> = TARGETS.iter().map(|t| t.series).collect();
    assert_eq!(ours, gres_slurm_abi_series(), "tests/releases.rs TARGETS vs. releases.rs SERIES");
}

/// `SERIES` of crates/slurm-abi/src/releases.rs (read as text: this test
/// binary is built for the host's release only).
fn gres_slurm_abi_series() -> Vec<&'static str> {
    let text = fs::read_to_string(harness::workspace_root().join("crates/slurm-abi/src/releases.rs")).expect("releases.rs");
    let line = text.lines().find(|l| l.starts_with("pub const SERIES")).expect("SERIES in releases.rs");
    let list = &line[line.find('[').unwrap() + 1..line.rfind(']').unwrap()];
    let list = &list[list.find('[').unwrap() + 1..];
    list.split(',').map(|s| s.trim().trim_matches('"')).filter(|s| !s.is_empty()).map(|s| &*s.to_string().leak()).collect()
}

#[track_caller]
fn skip(test: &str, why: String) {
    if harness::strict_mode() {
        panic!("{test}: {why} (CI / GRES_RS_REQUIRE_SLURM is set: a failure)");
    }
    eprintln!("{test}: SKIP: {why}");
}

/// The include dir and libslurmfull.so of a target, or why not.
fn inputs(t: &Target) -> Result<(PathBuf, Option<PathBuf>), String> {
    match t.origin {
        Origin::Host => {
            let v = fs::read_to_string("/usr/include/slurm/slurm_version.h").map_err(|e| format!("no installed Slurm headers: {e}"))?;
            // Debian's header has the number only (no version string).
            let n: Vec<u32> = t.version.split('.').map(|p| p.parse().expect("version")).collect();
            let want = format!("0x{:02x}{:02x}{:02x}", n[0], n[1], n[2]);
            let installed = v.lines().find_map(|l| l.strip_prefix("#define SLURM_VERSION_NUMBER")).map(str::trim);
            if installed != Some(want.as_str()) {
                return Err(format!("the installed /usr/include/slurm is not Slurm {}", t.version));
            }
            Ok(("/usr/include".into(), Path::new(HOST_LIBSLURMFULL).is_file().then(|| HOST_LIBSLURMFULL.into())))
        }
        Origin::Chroot(suite) => {
            let rel = harness::chroot::RELEASES.into_iter().find(|r| r.suite == suite).expect("test-bed release");
            let root = rel.open()?;
            let v = root.slurm_version()?;
            if v != t.version {
                return Err(format!("the {suite} chroot holds Slurm {v}, not {}", t.version));
            }
            let inc = root.host_path("/usr/include");
            let lib = root.resolve(root.libslurmfull()).ok_or_else(|| format!("no libslurmfull.so in the {suite} chroot"))?;
            Ok((inc, Some(lib)))
        }
        Origin::Tarball => {
            let script = harness::workspace_root().join("tests/testbed/slurm-include.sh");
            let out = Command::new("bash").arg(&script).arg(t.version).output().map_err(|e| format!("{}: {e}", script.display()))?;
            if !out.status.success() {
                return Err(format!("slurm-include.sh {}: {}", t.version, String::from_utf8_lossy(&out.stderr).trim()));
            }
            // The release built from this source by the test bed
            // (tests/testbed/slurm-source.sh), when it is there: its real
            // libslurmfull.so.
            let lib = harness::chroot::SOURCE_RELEASES
                .into_iter()
                .find(|r| r.slurm == t.version)
                .and_then(|r| r.open().ok())
                .and_then(|root| root.resolve(root.libslurmfull()));
            Ok((PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()), lib))
        }
    }
}

/// The names of `static const char *syms[]` in the release's gres.c or
/// gpu.c.
fn syms(source: &Path, interface: &str) -> BTreeSet<String> {
    let file = ["src/interfaces", "src/common"].iter().map(|d| source.join(d).join(format!("{interface}.c"))).find(|p| p.is_file());
    let file = file.unwrap_or_else(|| panic!("no {interface}.c in {}", source.display()));
    let text = fs::read_to_string(&file).expect("read source");
    let start = text.find("static const char *syms[]").unwrap_or_else(|| panic!("no syms[] in {}", file.display()));
    let body = &text[start..start + text[start..].find("};").expect("end of syms[]")];
    let names: BTreeSet<String> = body.split('"').skip(1).step_by(2).map(str::to_string).collect();
    assert!(!names.is_empty(), "empty syms[] in {}", file.display());
    names
}

/// The defined dynamic symbols of `lib` with nm's type letter and size
/// (`nm -D -S --defined-only`).
fn sized_symbols(lib: &Path) -> std::collections::BTreeMap<String, (String, u64)> {
    let out = Command::new("nm").args(["-D", "-S", "--defined-only"]).arg(lib).output().expect("nm");
    assert!(out.status.success(), "nm -D -S {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [_, size, kind, name] => Some((name.split('@').next().unwrap_or(name).to_string(), (kind.to_string(), u64::from_str_radix(size, 16).ok()?))),
            _ => None,
        })
        .collect()
}

/// Undefined dynamic symbols without a symbol version: what the library
/// takes from Slurm (glibc's and libgcc's carry `@GLIBC_*` / `@GCC_*`).
fn slurm_imports(lib: &Path) -> BTreeSet<String> {
    let out = Command::new("nm").args(["-D", "--undefined-only"]).arg(lib).output().expect("nm");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f[..] {
                [kind, name] if kind == "U" && !name.contains('@') => Some(name.to_string()),
                _ => None,
            }
        })
        .collect()
}

/// The C sources and header `#define`s of what makes libslurmfull
/// (`src/common`, `src/interfaces`, `src/api`) of a release's tree.
struct Source {
    c_files: Vec<String>,
    /// `#define a b` lines of the headers, as (a, b): the xlator and
    /// bitstring renames (`#define bit_test slurm_bit_test`).
    defines: Vec<(String, String)>,
}

impl Source {
    fn read(tree: &Path) -> Source {
        fn visit(dir: &Path, out: &mut Source) {
            let Ok(rd) = fs::read_dir(dir) else { return };
            for e in rd.flatten() {
                let p = e.path();
                let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
                if p.is_dir() {
                    visit(&p, out);
                } else if ext == "c" {
                    out.c_files.extend(fs::read_to_string(&p).ok());
                } else if ext == "h" {
                    for l in fs::read_to_string(&p).unwrap_or_default().lines() {
                        if let [a, b] = l.strip_prefix("#define").map(|r| r.split_whitespace().collect::<Vec<_>>()).unwrap_or_default()[..] {
                            out.defines.push((a.to_string(), b.to_string()));
                        }
                    }
                }
            }
        }
        let mut out = Source { c_files: Vec::new(), defines: Vec::new() };
        for d in ["src/common", "src/interfaces", "src/api"] {
            visit(&tree.join(d), &mut out);
        }
        out
    }

    /// Whether `sym` is defined: a function definition (a line starting
    /// with its declaration, not ending in `;`), a global (`type sym;` or
    /// `type sym = ...`, not `extern`), or a `strong_alias(x, sym)`; under
    /// its own name or one a header `#define`s to it.
    fn defines(&self, sym: &str) -> bool {
        let mut names = vec![sym];
        names.extend(self.defines.iter().filter(|(_, b)| b == sym).map(|(a, _)| a.as_str()));
        let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let line_defines = |line: &str, name: &str| {
            if line.starts_with("strong_alias") {
                return line.split(|c: char| !is_word(c)).any(|w| w == sym);
            }
            if line.starts_with(|c: char| c.is_whitespace() || c == '#' || c == '/' || c == '*' || c == '}') {
                return false;
            }
            let prototype = line.trim_end().ends_with(';') && line.contains('(');
            let mut rest = line;
            while let Some(i) = rest.find(name) {
                let before = rest[..i].chars().next_back();
                let after = rest[i + name.len()..].trim_start().chars().next();
                if before.is_none_or(|c| !is_word(c)) {
                    match after {
                        Some('(') if !prototype => return true,
                        Some(';') | Some('=') if !line.starts_with("extern") && !line.contains('(') => return true,
                        _ => {}
                    }
                }
                rest = &rest[i + name.len()..];
            }
            false
        };
        self.c_files.iter().any(|text| text.lines().any(|line| names.iter().any(|n| line_defines(line, n))))
    }
}

fn check_release(test: &str, series: &str) {
    let t0 = Instant::now();
    let t = TARGETS.iter().find(|t| t.series == series).expect("target");
    let source = Path::new(SRC_DIR).join(t.source);
    if !source.join("META").is_file() {
        return skip(test, format!("no source tree {} (cargo test --test layout unpacks it)", source.display()));
    }
    let (include, libslurmfull) = match inputs(t) {
        Ok(x) => x,
        Err(why) => return skip(test, format!("Slurm {}: {why}", t.version)),
    };
    let plugins = harness::build_for_release(t.version, &include).unwrap_or_else(|e| panic!("Slurm {}: {e}", t.version));
    let library = plugins.join(LIBRARY);
    let lib_symbols = sized_symbols(&library);
    let mut problems = Vec::new();
    let mut tables = BTreeSet::new();
    for (files, interface) in [(&GRES_FILES[..], "gres"), (&GPU_FILES[..], "gpu")] {
        let mut want = syms(&source, interface);
        want.insert("init".into());
        want.insert("fini".into());
        for f in files {
            let path = plugins.join(format!("{f}.so"));
            let symbols = harness::dynamic_symbols(&path);
            let functions: BTreeSet<String> = symbols.iter().filter(|s| s.defined() && s.kind == "T").map(|s| s.name.clone()).collect();
            if functions != want {
                problems.push(format!(
                    "{f}.so exports {:?} beyond {interface}.c's syms[] and lacks {:?}",
                    functions.difference(&want).collect::<Vec<_>>(),
                    want.difference(&functions).collect::<Vec<_>>()
                ));
            }
            for data in ["plugin_name", "plugin_type", "plugin_version"] {
                if !symbols.iter().any(|s| s.defined() && s.name == data && s.kind != "T") {
                    problems.push(format!("{f}.so has no data symbol {data}"));
                }
            }
            // What the plugin file needs from the library: its table, a
            // slot (8 bytes) per function.
            let needs: Vec<&str> = symbols.iter().filter(|s| !s.defined() && s.name.starts_with("gres_rs_")).map(|s| s.name.as_str()).collect();
            match needs[..] {
                [table] if table.starts_with(&format!("gres_rs_{f}_entries_")) => {
                    match lib_symbols.get(table) {
                        Some((kind, size)) if "DdRrBb".contains(kind.as_str()) && *size == 8 * want.len() as u64 => {}
                        other => problems.push(format!("{f}.so needs {table}, which {LIBRARY} has as {other:?}, not a table of {} functions", want.len())),
                    }
                    tables.insert(table.to_string());
                }
                _ => problems.push(format!("{f}.so needs {needs:?} from {LIBRARY}: want one table, gres_rs_{f}_entries_<checksum>")),
            }
        }
    }
    // The library's symbols for the plugin files: their tables only.
    let prefixes: Vec<String> = GRES_FILES.iter().chain(&GPU_FILES).map(|f| format!("gres_rs_{f}_")).collect();
    let extra: Vec<&String> = lib_symbols.keys().filter(|n| prefixes.iter().any(|p| n.starts_with(p.as_str())) && !tables.contains(*n)).collect();
    if !extra.is_empty() {
        problems.push(format!("{LIBRARY} has plugin symbols no plugin file of this release needs: {extra:?}"));
    }
    let imports = slurm_imports(&library);
    let how = match &libslurmfull {
        Some(lib) => {
            let exported: BTreeSet<String> = harness::dynamic_symbols(lib).into_iter().filter(|s| s.defined()).map(|s| s.name).collect();
            let missing: Vec<&String> = imports.difference(&exported).collect();
            if !missing.is_empty() {
                problems.push(format!("{LIBRARY} imports {missing:?}, which {} does not export", lib.display()));
            }
            format!("exported by {}", lib.display())
        }
        None => {
            let src = Source::read(&source);
            let missing: Vec<&String> = imports.iter().filter(|s| !src.defines(s)).collect();
            if !missing.is_empty() {
                problems.push(format!("{LIBRARY} imports {missing:?}, which the source {} does not define", source.display()));
            }
            format!("defined in the source {} (no libslurmfull.so of {} at hand)", source.display(), t.version)
        }
    };
    assert!(problems.is_empty(), "Slurm {} ({}):\n  {}", t.version, plugins.display(), problems.join("\n  "));
    eprintln!(
        "{test}: Slurm {}: plugin files match syms[] of {}; {} Slurm imports of {LIBRARY} {how}; {:.1?}",
        t.version,
        t.source,
        imports.len(),
        t0.elapsed()
    );
}

macro_rules! release_tests {
    ($($series:literal => $name:ident;)*) => {
        $(
            #[test]
            fn $name() {
                check_release(stringify!($name), $series);
            }
        )*
    };
}

release_tests! {
    "22.05" => release_22_05;
    "23.02" => release_23_02;
    "23.11" => release_23_11;
    "24.05" => release_24_05;
    "24.11" => release_24_11;
    "25.05" => release_25_05;
    "25.11" => release_25_11;
    "26.05" => release_26_05;
}

/// The source check of the tarball series, tried where the real library
/// is at hand (24.11.5): it finds every symbol our 24.11.5 build imports,
/// as the real libslurmfull.so exports them, and not a made-up one.
#[test]
fn source_check_agrees_with_a_real_library() {
    let t = TARGETS.iter().find(|t| t.series == "24.11").expect("24.11");
    let source = Path::new(SRC_DIR).join(t.source);
    let lib = harness::workspace_root().join("target/slurm-24.11.5/plugins").join(LIBRARY);
    if !source.join("META").is_file() || !lib.is_file() {
        return skip("source_check_agrees_with_a_real_library", format!("needs {} and {} (run release_24_11 first)", source.display(), lib.display()));
    }
    let src = Source::read(&source);
    let imports = slurm_imports(&lib);
    assert!(imports.len() > 20, "{imports:?}");
    let missed: Vec<&String> = imports.iter().filter(|s| !src.defines(s)).collect();
    assert!(missed.is_empty(), "the source check misses {missed:?}, which the real 24.11.5 libslurmfull.so exports");
    for made_up in ["slurm_no_such_function", "gres_rs_gres_gpu_init", "list_remove_first_slurm"] {
        assert!(!src.defines(made_up), "the source check finds {made_up}");
    }
}
