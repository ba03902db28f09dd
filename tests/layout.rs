//! ABI layout test: every `crates/slurm-abi/slurm-headers/<series>/slurm_gres_abi.h` against
//! the real internal headers of that Slurm release series and against its
//! `libslurmfull.so`.
//!
//! Our headers re-declare the part of Slurm's *internal* ABI that the GRES
//! plugins touch.  Nothing links those declarations to Slurm's, so this test
//! compares them mechanically, series by series: `layout_<series>` checks a
//! header against the real source of its release, `exports_<series>` checks
//! it against that release's `libslurmfull.so` (e.g. `layout_24_11`,
//! `exports_24_11`).  Every failure names the series and the header.
//!
//! * **One source of truth.**  The list of structs, fields, typedefs,
//!   constants and functions to check is parsed out of our header itself
//!   (`parse_header`; a small tokenizer for the plain C subset the header
//!   uses, which panics on anything it does not understand rather than
//!   skipping it).  Adding a field, constant or function to the header is
//!   therefore the only edit needed for it to be checked.  If a newly used
//!   function is declared in a Slurm header not yet included by the probe,
//!   the test says which header to add to [`REAL_HEADERS`].
//!
//! * **Layouts and constants** (`layout_<series>`).  Two C programs are
//!   generated from the parsed header and compiled with `cc` in a temporary
//!   directory: one against the real internal headers (include path: a
//!   generated dir holding `config.h` — a copy of the series' reviewed
//!   config.h, see below — and `slurm/slurm_version.h` made from the
//!   source's META; the source root; the source's `slurm/`), one against our
//!   header.  Both print the same `key = value` lines: `sizeof`/`_Alignof` of
//!   every struct, enum and typedef; `offsetof`/`sizeof`/`_Alignof` of every
//!   field and whether the field's type is compatible
//!   (`__builtin_types_compatible_p`) with the type written in our header;
//!   the value of every `#define` and enumerator.  The outputs are compared
//!   line by line and every difference is listed with both values.  A field
//!   of the real struct that ours leaves out changes no offset when it fits
//!   in padding (23.11's `buf_t.shadow`), so the real struct's member names
//!   are also read from the preprocessed probe (`cc -E`) and every one must
//!   be in ours.
//!
//! * **Our own names.**  A header may keep a typedef name that the release
//!   no longer has (24.11 dropped `List`), so that the Rust code stays the
//!   same for every series: such names are listed in
//!   `#define GRES_ABI_OWN_TYPEDEFS name ...`.  The probe then checks that
//!   the real headers do *not* declare them, and declares them itself (with
//!   our header's definition, in terms of the real types) after the real
//!   headers, so that everything using them is checked against the real
//!   types.
//!
//! * **Prototypes.**  `-aux-info` on the real-headers compile lists every
//!   function the real headers declare.  For each function of our header the
//!   real declaration is looked up under the same name, or, for `slurm_X`,
//!   under `X` (libslurmfull exports `slurm_X` as an alias of `X`; when a
//!   libslurmfull of the series is at hand, the alias is verified by
//!   comparing the two symbols' addresses in `nm` output).  A third C file
//!   includes the real headers and, for each such function, does
//!   `typedef RET proto_F(PARAMS);` with *our* prototype text (our typedef
//!   names — List, buf_t, bitstr_t, ... — resolve to the real ones there;
//!   they are checked separately above) followed by
//!   `_Static_assert(__builtin_types_compatible_p(__typeof__(real_name),
//!   proto_F), "proto:F")`.  The same assertions against our own header are
//!   compiled into the our-header program as a check of the parser.
//!
//! * **Exports** (`exports_<series>`).  Every function our header declares
//!   must be a defined dynamic function symbol of the series'
//!   `libslurmfull.so` (`nm -D --defined-only`), or `dlopen()` of our plugins
//!   would fail.  The library is `$GRES_RS_LIBSLURMFULL_<series>` (e.g.
//!   `GRES_RS_LIBSLURMFULL_24_11=/srv/trixie/usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so`),
//!   else that of a test-bed chroot of that series when one is built
//!   (`harness::chroot`: trixie 24.11, sid 26.05), else the installed one
//!   when the installed Slurm is of that series.
//!   Without either the check prints `SKIP` and passes (also under
//!   `CI=true`: no such library exists on the build hosts yet).  A library
//!   that does not carry the series' version string fails the check.
//!
//! * **Guards.**  The Slurm source must be of the series (META), and for the
//!   installed series the version installed (`SLURM_VERSION_NUMBER` of
//!   `/usr/include/slurm/slurm_version.h` against the source's META; the
//!   Debian revision of `slurmd` against `debian/changelog` is a warning).
//!   The probe must not pick up any `/usr/include/slurm` header.  Every
//!   `config.h.in` macro that an included Slurm header tests in a
//!   conditional must be reviewed in the series' config.h:
//!   `tests/layout/<series>/config.h` if it exists, else the shared
//!   `tests/layout/config.h`.
//!
//! Finding the source:
//!
//! * The installed series (Debian 12: 22.05) uses Debian's source package:
//!   `$GRES_RS_SLURM_SRC` (a directory containing `slurm-wlm-22.05.*`, or
//!   such a directory itself), else `/var/cache/slurm-gpu-gres/src`, else
//!   `/work/slurm-src`.  If no tree of the installed version is found, the
//!   upstream tarball of exactly that version (below) is used if there is
//!   one; else, if we are root, `apt-get source slurm-wlm` fetches the tree
//!   into the cache directory (adding a `deb-src` entry and running
//!   `apt-get update` if apt has none).
//! * Every other series uses the newest upstream tarball of the series,
//!   `slurm-<MM>-<mm>-<micro>-<rel>.tar.xz`, in `$GRES_RS_SLURM_TARBALLS`,
//!   else `../shared/slurm-src` beside the checkout, else
//!   `/work/shared/slurm-src`.  Its SHA-256 must match the directory's
//!   `SHA256SUMS` when that lists it.  It is extracted once into
//!   `/var/cache/slurm-gpu-gres/src/<tarball stem>` (or, if that cannot be
//!   written, the same name under the temporary directory), with a marker
//!   file holding the checksum; later runs reuse the tree while the marker
//!   matches.  `configure` is not run: the reviewed config.h stands in for
//!   the generated one, and `slurm_version.h` is made from META.
//!
//! No source for a series: the test prints `SKIP` and passes, unless
//! `CI=true`, where it fails.
//!
//! Run: `cargo test --test layout -- --nocapture` (one series:
//! `cargo test --test layout 24_11`).  Set `GRES_RS_LAYOUT_KEEP=1` to keep
//! the generated C files (the path is printed); they are also kept when a
//! check fails.

use gres_test_harness as harness;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEADERS_DIR: &str = "crates/slurm-abi/slurm-headers";
const HEADER_FILE: &str = "slurm_gres_abi.h";
const CONFIG_H: &str = "tests/layout/config.h";
const LIBSLURMFULL: &str = "/usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so";
const LIBSLURMFULL_ENV: &str = "GRES_RS_LIBSLURMFULL_";
const INSTALLED_VERSION_H: &str = "/usr/include/slurm/slurm_version.h";
const SRC_ENV: &str = "GRES_RS_SLURM_SRC";
const CACHE_DIR: &str = "/var/cache/slurm-gpu-gres/src";
const FALLBACK_SRC_DIR: &str = "/work/slurm-src";
const TARBALL_ENV: &str = "GRES_RS_SLURM_TARBALLS";
const TARBALL_DIR: &str = "/work/shared/slurm-src";
/// Written into an extracted tarball tree: the tarball's SHA-256.
const TARBALL_MARKER: &str = ".gres-rs-tarball-sha256";
/// The `#define` of our headers that lists our own typedef names.
const OWN_TYPEDEFS: &str = "GRES_ABI_OWN_TYPEDEFS";

/// Real Slurm headers (relative to the source root) that declare what our
/// header re-declares.  gres.h pulls in most of the others already.  Each
/// entry lists where the file lives in successive releases (gres.h and gpu.h
/// moved from src/common/ to src/interfaces/ in 23.02); the first that
/// exists is used.
const REAL_HEADERS: &[&[&str]] = &[
    &["src/common/gres.h", "src/interfaces/gres.h"],
    &["src/common/gpu.h", "src/interfaces/gpu.h"],
    &["src/common/list.h"],
    &["src/common/bitstring.h"],
    &["src/common/pack.h"],
    &["src/common/env.h"],
    &["src/common/log.h"],
    &["src/common/hostlist.h"],
    &["src/common/xmalloc.h"],
    &["src/common/xstring.h"],
];

// ---------------------------------------------------------------------------
// Tests: one pair per release series
// ---------------------------------------------------------------------------

macro_rules! series_tests {
    ($($series:literal => $layout:ident, $exports:ident;)*) => {
        /// Every series with a test pair, oldest first.
        const SERIES: &[&str] = &[$($series),*];
        $(
            #[test]
            fn $layout() {
                check_layout($series);
            }

            #[test]
            fn $exports() {
                check_exports($series);
            }
        )*
    };
}

series_tests! {
    "22.05" => layout_22_05, exports_22_05;
    "23.02" => layout_23_02, exports_23_02;
    "23.11" => layout_23_11, exports_23_11;
    "24.05" => layout_24_05, exports_24_05;
    "24.11" => layout_24_11, exports_24_11;
    "25.05" => layout_25_05, exports_25_05;
    "25.11" => layout_25_11, exports_25_11;
    "26.05" => layout_26_05, exports_26_05;
}

/// A header without a test pair would never be checked.
#[test]
fn every_header_has_a_test() {
    let dir = repo_root().join(HEADERS_DIR);
    let mut untested = Vec::new();
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())).flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().join(HEADER_FILE).is_file() && !SERIES.contains(&name.as_str()) {
            untested.push(name);
        }
    }
    assert!(untested.is_empty(), "{HEADERS_DIR}/<series>/{HEADER_FILE} without a test in tests/layout.rs (add it to series_tests!): {untested:?}");
}

/// One release series: its header, reviewed config.h and libslurmfull.
struct Series {
    /// `24.11`
    name: &'static str,
    major: u32,
    minor: u32,
    /// Relative to the repository root, for messages.
    header: String,
    config_h: String,
}

impl Series {
    /// None (after printing why) when the series has no header.
    fn new(name: &'static str) -> Option<Series> {
        let (major, minor) = name.split_once('.').map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap())).expect("series is MAJOR.MINOR");
        let header = format!("{HEADERS_DIR}/{name}/{HEADER_FILE}");
        if !repo_root().join(&header).is_file() {
            println!("layout: SKIP: Slurm {name}: {header} does not exist");
            return None;
        }
        let own = format!("tests/layout/{name}/config.h");
        let config_h = if repo_root().join(&own).is_file() { own } else { CONFIG_H.to_string() };
        Some(Series { name, major, minor, header, config_h })
    }

    fn header_path(&self) -> PathBuf {
        repo_root().join(&self.header)
    }

    fn is(&self, v: Version) -> bool {
        (v.0, v.1) == (self.major, self.minor)
    }

    /// `GRES_RS_LIBSLURMFULL_24_11`
    fn lib_env(&self) -> String {
        format!("{LIBSLURMFULL_ENV}{}", self.name.replace('.', "_"))
    }

    /// The libslurmfull.so of this series: the env override, else the
    /// installed one if the installed Slurm is of this series.
    fn libslurmfull(&self) -> Result<PathBuf, String> {
        let env = self.lib_env();
        if let Some(p) = std::env::var_os(&env).filter(|v| !v.is_empty()) {
            let p = PathBuf::from(p);
            assert!(p.is_file(), "Slurm {}: ${env} is {}, which is not a file", self.name, p.display());
            return Ok(p);
        }
        // A test-bed chroot of this series (tests/testbed/debian-chroot.sh).
        for rel in harness::chroot::chroot_releases() {
            let Ok(root) = rel.open() else { continue };
            let Ok((major, minor, _)) = root.slurm_version_triple() else { continue };
            if (major, minor) == (self.major, self.minor) {
                if let Some(lib) = root.resolve(root.libslurmfull()) {
                    return Ok(lib);
                }
            }
        }
        match installed_version() {
            Some(v) if self.is(v) && Path::new(LIBSLURMFULL).exists() => Ok(LIBSLURMFULL.into()),
            Some(v) if self.is(v) => Err(format!("{LIBSLURMFULL} not found (is slurmd installed?) and ${env} is not set")),
            installed => Err(format!(
                "no Slurm {} libslurmfull.so: set ${env} to one (the installed Slurm is {})",
                self.name,
                installed.map_or("none".into(), fmt_version)
            )),
        }
    }
}

fn check_exports(series: &'static str) {
    let Some(series) = Series::new(series) else { return };
    let header = parse_header(&series.header_path());
    let name = series.name;
    let hdr = &series.header;
    assert!(!header.functions.is_empty(), "Slurm {name}: parsed no function from {hdr}");
    let lib = match series.libslurmfull() {
        Ok(lib) => lib,
        Err(why) => {
            // Not even CI has a libslurmfull of every series yet.
            println!("layout: SKIP: Slurm {name}: {why}; cannot check that the functions of {hdr} are exported");
            return;
        }
    };
    assert!(
        library_has_version(&lib, name),
        "Slurm {name}: {} does not contain a {name}.<micro> version string: not a libslurmfull.so of Slurm {name}?",
        lib.display()
    );
    let symbols = dynamic_function_symbols(&lib);
    let missing: Vec<&str> = header.functions.iter().map(|f| f.name.as_str()).filter(|name| !symbols.contains_key(*name)).collect();
    println!("layout: Slurm {name}: {} functions of {hdr} checked against the dynamic symbols of {}", header.functions.len(), lib.display());
    assert!(
        missing.is_empty(),
        "Slurm {name}: functions declared in {hdr} but not defined (nm -D --defined-only) in \
         {}:\n  {}",
        lib.display(),
        missing.join("\n  ")
    );
}

/// Whether `lib` holds a string `SERIES.N` (Slurm's version string, e.g.
/// `24.11.5`), not preceded by a digit.
fn library_has_version(lib: &Path, series: &str) -> bool {
    let bytes = fs::read(lib).unwrap_or_else(|e| panic!("read {}: {e}", lib.display()));
    let pat = format!("{series}.");
    let pat = pat.as_bytes();
    bytes.windows(pat.len() + 1).enumerate().any(|(i, w)| w.starts_with(pat) && w[pat.len()].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()))
}

fn check_layout(series: &'static str) {
    let started = std::time::Instant::now();
    let Some(series) = Series::new(series) else { return };
    let name = series.name;
    let hdr = series.header.as_str();
    let root = repo_root();
    let header_path = series.header_path();
    let header = parse_header(&header_path);
    header.assert_plausible(hdr);

    let src = match find_source(&series) {
        SourceLookup::Found(src) => src,
        SourceLookup::Skip(why) => {
            skip_or_fail(&format!("Slurm {name}: {why}"));
            return;
        }
    };
    match source_version(&src) {
        Some(v) if series.is(v) => println!("layout: Slurm {name}: source {} ({})", src.display(), fmt_version(v)),
        v => panic!("Slurm {name}: source {} is version {}, not {name}", src.display(), v.map_or("unknown".into(), fmt_version)),
    }
    let real_headers = real_headers(&src);

    let work = TempDir::new(&format!("gres-layout-{}", name.replace('.', "_")));
    let gen = work.path.join("gen");
    fs::create_dir_all(gen.join("slurm")).unwrap();
    fs::copy(root.join(&series.config_h), gen.join("config.h")).unwrap();
    fs::write(gen.join("slurm/slurm_version.h"), slurm_version_h(&src)).unwrap();
    let real_includes = [gen.clone(), src.clone(), src.join("slurm")];
    let our_includes = [header_path.parent().unwrap().to_path_buf()];

    let mut problems: Vec<String> = Vec::new();

    // 0. our own typedef names must not be the release's.
    if !header.own_typedefs.is_empty() {
        let own_c = work.path.join("own_real.c");
        fs::write(&own_c, gen_own_names_check(&header, &real_headers)).unwrap();
        let out = cc_output(&real_includes, &["-w".into(), "-fsyntax-only".into()], &own_c, None);
        if !out.status.success() {
            problems.push(format!(
                "{OWN_TYPEDEFS} lists {}, but the real headers declare (some of) them: drop them from \
                 {OWN_TYPEDEFS} (the real declaration is then checked as usual):\n{}",
                header.own_typedefs.join(", "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }

    // 1. layouts and constants, real headers vs ours.
    let real_c = work.path.join("real.c");
    let ours_c = work.path.join("ours.c");
    fs::write(&real_c, gen_layout_program(&header, Side::Real(&real_headers))).unwrap();
    fs::write(&ours_c, gen_layout_program(&header, Side::Ours)).unwrap();
    let deps = work.path.join("real.d");
    let aux = work.path.join("real.aux");
    let real_exe = work.path.join("real");
    let ours_exe = work.path.join("ours");
    let mut args = vec!["-w".to_string(), "-MD".into(), "-MF".into(), s(&deps)];
    args.extend(["-aux-info".into(), s(&aux)]);
    cc(&work, hdr, &real_includes, &args, &real_c, Some(&real_exe), &format!("probe against the real Slurm {name} headers"));
    cc(
        &work,
        hdr,
        &our_includes,
        &["-Wall".into(), "-Wextra".into(), "-Werror".into()],
        &ours_c,
        Some(&ours_exe),
        "probe against our header (a failure here is a parser or header bug)",
    );
    let real_out = run_probe(&work, &real_exe);
    let ours_out = run_probe(&work, &ours_exe);
    let compared = compare_outputs(&real_out, &ours_out, &mut problems);
    // 1b. no real field left out of ours (a left-out field that fits in
    // padding changes no size or offset).
    let pre = cc_output(&real_includes, &["-w".into(), "-E".into(), "-P".into()], &real_c, None);
    assert!(pre.status.success(), "Slurm {name}: cc -E {} failed:\n{}", real_c.display(), String::from_utf8_lossy(&pre.stderr));
    check_fields_complete(&header, &String::from_utf8_lossy(&pre.stdout), &mut problems);

    // 2. only Slurm's own headers, and only reviewed config.h macros.
    let slurm_headers = slurm_headers_used(&deps, &src, real_headers.len(), &mut problems);
    check_config_macros(&src, &slurm_headers, &root.join(&series.config_h), &series.config_h, &mut problems);

    // 3. prototypes.
    let declared = aux_info_functions(&aux, &src);
    let lib = series.libslurmfull().ok();
    let symbols = lib.as_ref().map(|l| dynamic_function_symbols(l));
    let mut checks: Vec<(&Function, String)> = Vec::new();
    let mut unchecked: Vec<String> = Vec::new();
    let mut aliases_unverified = 0;
    for f in &header.functions {
        match resolve_real_name(f, &declared) {
            Some(real) => {
                if real != f.name {
                    match (&lib, &symbols) {
                        (Some(lib), Some(symbols)) => check_alias(&f.name, &real, lib, symbols, &mut problems),
                        _ => aliases_unverified += 1,
                    }
                }
                checks.push((f, real));
            }
            None => match grep_declaration(&src, &f.name) {
                Some(file) => problems.push(format!(
                    "{}: declared in {file}, which the probe does not include: add it to \
                     REAL_HEADERS in tests/layout.rs",
                    f.name
                )),
                None => unchecked.push(f.name.clone()),
            },
        }
    }
    let protos_c = work.path.join("protos_real.c");
    fs::write(&protos_c, gen_proto_check(&header, &checks, &real_headers)).unwrap();
    let out = cc_output(&real_includes, &["-w".into(), "-fsyntax-only".into()], &protos_c, None);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut named = 0;
        for line in stderr.lines() {
            if let Some(rest) = line.split("static assertion failed: \"proto:").nth(1) {
                let fname = rest.trim_end_matches('"');
                let f = header.functions.iter().find(|f| f.name == fname).unwrap();
                let real = &checks.iter().find(|(g, _)| g.name == fname).unwrap().1;
                let decl = declared.get(real).map(String::as_str).unwrap_or("?");
                problems.push(format!("prototype of {fname} differs from the real one:\n      ours: {}\n      real: {decl}", f.prototype()));
                named += 1;
            }
        }
        if named == 0 {
            problems.push(format!("prototype check {} does not compile:\n{stderr}", protos_c.display()));
        }
    }

    println!(
        "layout: Slurm {name}: {} structs, {} typedefs ({} our own), {} enums, {} defines; {compared} values compared",
        header.structs.len(),
        header.aliases.len(),
        header.own_typedefs.len(),
        header.enums.len(),
        header.defines.len()
    );
    println!(
        "layout: Slurm {name}: {} prototypes compared with the real declarations{}{}",
        checks.len(),
        if unchecked.is_empty() { String::new() } else { format!("; not declared in any Slurm header, existence only: {}", unchecked.join(", ")) },
        if aliases_unverified == 0 {
            String::new()
        } else {
            format!("; {aliases_unverified} slurm_X = X aliases not verified (no libslurmfull.so of {name}: ${})", series.lib_env())
        }
    );
    println!("layout: Slurm {name}: checked in {:.1} s", started.elapsed().as_secs_f64());
    if !problems.is_empty() {
        work.keep();
        panic!(
            "Slurm {name}: {hdr} does not match Slurm {} ({} problem(s); generated files kept in {}):\n  - {}",
            src.display(),
            problems.len(),
            work.path.display(),
            problems.join("\n  - ")
        );
    }
}

/// The first existing path of each [`REAL_HEADERS`] entry.
fn real_headers(src: &Path) -> Vec<&'static str> {
    REAL_HEADERS
        .iter()
        .map(|alts| *alts.iter().find(|p| src.join(p).is_file()).unwrap_or_else(|| panic!("none of {alts:?} exists in {}", src.display())))
        .collect()
}

// ---------------------------------------------------------------------------
// Header parser
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Header {
    structs: Vec<Struct>,
    enums: Vec<Enum>,
    aliases: Vec<Alias>,
    defines: Vec<String>,
    functions: Vec<Function>,
    /// Typedef names of ours that the release does not have
    /// (`#define GRES_ABI_OWN_TYPEDEFS List ...`).
    own_typedefs: Vec<String>,
}

/// A struct or union definition.  `name` is how C code names the type: the
/// typedef name, or `struct tag` when there is no typedef.
#[derive(Debug)]
struct Struct {
    name: String,
    /// `struct tag` when a typedef also gives the tag.
    tagged: Option<String>,
    fields: Vec<Field>,
}

#[derive(Debug)]
struct Field {
    name: String,
    /// The declaration with the name removed: a C type name.
    ty: String,
}

#[derive(Debug)]
struct Enum {
    name: String,
    enumerators: Vec<String>,
}

/// `typedef TYPE NAME;` without a body.
#[derive(Debug)]
struct Alias {
    name: String,
    ty: String,
    /// Alias of an incomplete `struct X` (a handle used only by pointer): no
    /// size, and the real type may have another tag or none.
    opaque: bool,
}

#[derive(Debug)]
struct Function {
    name: String,
    ret: String,
    params: String,
}

impl Function {
    fn prototype(&self) -> String {
        format!("{} {}({})", self.ret, self.name, self.params)
    }
}

impl Header {
    /// Guards against a parser regression silently checking nothing.
    fn assert_plausible(&self, hdr: &str) {
        for must in ["gres_slurmd_conf_t", "gres_device_t", "gres_job_state_t", "gres_step_state_t"] {
            assert!(self.structs.iter().any(|s| s.name == must), "parser found no struct {must} in {hdr}: {self:#?}");
        }
        assert!(self.structs.iter().all(|s| !s.fields.is_empty()), "struct without fields: {self:#?}");
        assert!(self.defines.iter().any(|d| d.starts_with("GRES_CONF_")), "no GRES_CONF_*: {self:#?}");
        assert!(!self.enums.is_empty() && !self.functions.is_empty(), "{self:#?}");
        for own in &self.own_typedefs {
            assert!(self.aliases.iter().any(|a| &a.name == own), "{hdr}: {OWN_TYPEDEFS} names {own}, which is no typedef of the header");
        }
    }
}

thread_local! {
    /// The header being parsed, for the parser's messages.
    static PARSING: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn parsing() -> String {
    PARSING.with(|p| p.borrow().clone())
}

fn parse_header(path: &Path) -> Header {
    PARSING.with(|p| *p.borrow_mut() = path.strip_prefix(repo_root()).unwrap_or(path).display().to_string());
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let text = strip_comments(&text).replace("\\\n", " ");
    let mut header = Header::default();
    let mut code = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(directive) = t.strip_prefix('#') {
            parse_directive(directive.trim_start(), &mut header);
        } else {
            code.push_str(line);
            code.push('\n');
        }
    }
    let tokens = tokenize(&code);
    for stmt in split_top(&tokens, ";") {
        if stmt.is_empty() {
            continue;
        }
        parse_statement(stmt, &mut header);
    }
    // Resolve opaque aliases: `typedef struct X Y;` with no definition of X here.
    let defined: BTreeSet<String> = header.structs.iter().filter_map(|s| s.tagged.clone()).collect();
    for a in &mut header.aliases {
        let t: Vec<&str> = a.ty.split(' ').collect();
        a.opaque = t.len() == 2 && (t[0] == "struct" || t[0] == "union") && !defined.contains(&a.ty);
    }
    header
}

fn parse_directive(d: &str, header: &mut Header) {
    let Some(rest) = d.strip_prefix("define") else {
        return;
    };
    let rest = rest.trim_start();
    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let after = &rest[name.len()..];
    if after.starts_with('(') || after.trim().is_empty() {
        return; // function-like macro or include guard: no value to compare
    }
    if name == OWN_TYPEDEFS {
        header.own_typedefs.extend(after.split_whitespace().map(str::to_string));
        return;
    }
    header.defines.push(name);
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/").expect("unterminated comment") + i + 4;
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            out.push(' ');
            i = end;
        } else if b[i..].starts_with(b"//") {
            i += text[i..].find('\n').unwrap_or(text.len() - i);
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn tokenize(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if chars[i..].starts_with(&['.', '.', '.']) {
            tokens.push("...".into());
            i += 3;
        } else if c == '<' && chars.get(i + 1) == Some(&'<') {
            tokens.push("<<".into());
            i += 2;
        } else if "{}()[]*,;=|&+-~!:<>?".contains(c) {
            tokens.push(c.to_string());
            i += 1;
        } else {
            panic!("{}: tokenizer does not handle {c:?} (extend tests/layout.rs)", parsing());
        }
    }
    tokens
}

/// Splits at `sep` tokens that are outside any (), [] or {}.
fn split_top<'a>(tokens: &'a [String], sep: &str) -> Vec<&'a [String]> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ if t == sep && depth == 0 => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

fn is_ident(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

fn matching(tokens: &[String], open: usize) -> usize {
    let (o, c) = match tokens[open].as_str() {
        "(" => ("(", ")"),
        "{" => ("{", "}"),
        "[" => ("[", "]"),
        t => panic!("no bracket at {t}"),
    };
    let mut depth = 0;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        if t == o {
            depth += 1;
        } else if t == c {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    panic!("{}: unbalanced {o}", parsing());
}

fn join(tokens: &[String]) -> String {
    tokens.join(" ")
}

fn parse_statement(stmt: &[String], header: &mut Header) {
    let unsupported = || -> ! { panic!("{}: unsupported declaration (extend tests/layout.rs): {}", parsing(), join(stmt)) };
    let is_typedef = stmt[0] == "typedef";
    let body = if is_typedef { &stmt[1..] } else { stmt };
    if let Some(open) = body.iter().position(|t| t == "{") {
        // struct/union/enum definition: KW [tag] { ... } [NAME]
        let kw = body[0].as_str();
        if !matches!(kw, "struct" | "union" | "enum") || open > 2 {
            unsupported();
        }
        let tag = (open == 2).then(|| format!("{kw} {}", body[1]));
        let close = matching(body, open);
        let inner = &body[open + 1..close];
        let name = match (&body[close + 1..], is_typedef) {
            ([n], true) if is_ident(n) => n.clone(),
            ([], false) => tag.clone().unwrap_or_else(|| unsupported()),
            _ => unsupported(),
        };
        if kw == "enum" {
            let enumerators = split_top(inner, ",")
                .into_iter()
                .filter(|e| !e.is_empty())
                .map(|e| {
                    assert!(is_ident(&e[0]), "{}: bad enumerator {}", parsing(), join(e));
                    e[0].clone()
                })
                .collect();
            header.enums.push(Enum { name, enumerators });
        } else {
            let fields = split_top(inner, ";")
                .into_iter()
                .filter(|f| !f.is_empty())
                .map(|f| {
                    let (name, ty) = parse_declarator(f);
                    Field { name, ty }
                })
                .collect();
            let tagged = if is_typedef { tag } else { None };
            header.structs.push(Struct { name, tagged, fields });
        }
    } else if is_typedef {
        let (name, ty) = parse_declarator(body);
        header.aliases.push(Alias { name, ty, opaque: false });
    } else {
        // function prototype: [extern] RET NAME ( PARAMS ) [__attribute__((...))]
        let body = if stmt[0] == "extern" { &stmt[1..] } else { stmt };
        let Some(open) = body.iter().position(|t| t == "(") else { unsupported() };
        if open < 2 || !is_ident(&body[open - 1]) {
            unsupported();
        }
        let close = matching(body, open);
        if !(close + 1 == body.len() || body[close + 1] == "__attribute__") {
            unsupported();
        }
        header.functions.push(Function { name: body[open - 1].clone(), ret: join(&body[..open - 1]), params: join(&body[open + 1..close]) });
    }
}

/// Splits one declaration (`char *path`, `int (*f)(char *a)`, `int a[4]`)
/// into the declared name and the type name left when the name is removed.
fn parse_declarator(decl: &[String]) -> (String, String) {
    let bad = |why: &str| -> ! { panic!("{}: {why} in `{}` (extend tests/layout.rs)", parsing(), join(decl)) };
    if split_top(decl, ",").len() > 1 {
        bad("several declarators");
    }
    if decl.iter().any(|t| t == ":") {
        bad("bit-field");
    }
    if decl.iter().any(|t| t == "{") {
        bad("nested definition");
    }
    let idx = if let Some(p) = decl.windows(2).position(|w| w[0] == "(" && w[1] == "*") {
        // pointer to function (or to array): the name follows `(*` and qualifiers
        (p + 2..decl.len()).find(|&i| is_ident(&decl[i]) && !matches!(decl[i].as_str(), "const" | "volatile" | "restrict")).unwrap_or_else(|| bad("no name"))
    } else {
        let mut end = decl.len();
        while end > 0 && decl[end - 1] == "]" {
            end = decl[..end].iter().rposition(|t| t == "[").unwrap_or_else(|| bad("bad array"));
        }
        end - 1
    };
    if !is_ident(&decl[idx]) || idx == 0 {
        bad("no name");
    }
    let mut ty: Vec<String> = decl.to_vec();
    let name = ty.remove(idx);
    (name, join(&ty))
}

// ---------------------------------------------------------------------------
// C generation
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Side<'a> {
    /// Against the real headers (the paths of [`real_headers`]).
    Real(&'a [&'a str]),
    Ours,
}

/// `#include`s of the real headers, then our own typedef names, defined as
/// our header defines them (in terms of the real types).
fn real_prelude(h: &Header, real_headers: &[&str]) -> String {
    let mut c = String::from("#include \"config.h\"\n");
    for hdr in real_headers {
        writeln!(c, "#include \"{hdr}\"").unwrap();
    }
    for own in &h.own_typedefs {
        let a = h.aliases.iter().find(|a| &a.name == own).unwrap();
        writeln!(c, "typedef {} {own}; /* ours: {OWN_TYPEDEFS} */", a.ty).unwrap();
    }
    c
}

/// Compiles only if the real headers declare none of our own typedef names
/// (a file-scope variable of the same name clashes with a typedef).
fn gen_own_names_check(h: &Header, real_headers: &[&str]) -> String {
    let mut c = String::from("/* generated by tests/layout.rs; do not edit */\n#include \"config.h\"\n");
    for hdr in real_headers {
        writeln!(c, "#include \"{hdr}\"").unwrap();
    }
    for own in &h.own_typedefs {
        writeln!(c, "static int {own} __attribute__((unused));").unwrap();
    }
    c
}

/// The layout probe.  Both sides print the same keys in the same order; only
/// the includes differ.
fn gen_layout_program(h: &Header, side: Side<'_>) -> String {
    let mut c = String::new();
    c.push_str("/* generated by tests/layout.rs; do not edit */\n");
    c.push_str("#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdbool.h>\n");
    match side {
        Side::Real(real_headers) => c.push_str(&real_prelude(h, real_headers)),
        Side::Ours => c.push_str("#include \"slurm_gres_abi.h\"\n"),
    }
    c.push_str("\n#define P(key, value) printf(\"%s = %lld\\n\", key, (long long)(value))\n");
    c.push_str("#define COMPAT(a, ...) __builtin_types_compatible_p(a, __VA_ARGS__)\n\n");
    // The our-header program also proves that the parser read our prototypes
    // right; protos_real.c does the same against the real declarations.
    if side == Side::Ours {
        for f in &h.functions {
            writeln!(c, "{}", proto_assert(f, &f.name)).unwrap();
        }
    }
    c.push_str("\nint main(void)\n{\n");
    for st in &h.structs {
        let t = &st.name;
        writeln!(c, "\tP(\"sizeof({t})\", sizeof({t}));").unwrap();
        writeln!(c, "\tP(\"_Alignof({t})\", _Alignof({t}));").unwrap();
        if let Some(tag) = &st.tagged {
            writeln!(c, "\tP(\"{t} is {tag}\", COMPAT({t}, {tag}));").unwrap();
        }
        for f in &st.fields {
            let m = format!("((({t} *)0)->{})", f.name);
            let k = format!("{t}.{}", f.name);
            writeln!(c, "\tP(\"offsetof({k})\", offsetof({t}, {}));", f.name).unwrap();
            writeln!(c, "\tP(\"sizeof({k})\", sizeof {m});").unwrap();
            writeln!(c, "\tP(\"_Alignof({k})\", _Alignof(__typeof__{m}));").unwrap();
            writeln!(c, "\tP(\"{k} has type '{}'\", COMPAT(__typeof__{m}, {}));", f.ty, f.ty).unwrap();
        }
    }
    for a in &h.aliases {
        let n = &a.name;
        if a.opaque {
            // Used only through pointers; the real type may carry another tag
            // (22.05's buf_t is an untagged struct), so only its existence as
            // a type is checked here.  Prototypes using it are checked below.
            writeln!(c, "\tP(\"sizeof({n} *)\", sizeof({n} *));").unwrap();
        } else {
            writeln!(c, "\tP(\"sizeof({n})\", sizeof({n}));").unwrap();
            writeln!(c, "\tP(\"_Alignof({n})\", _Alignof({n}));").unwrap();
            writeln!(c, "\tP(\"{n} is '{}'\", COMPAT({n}, {}));", a.ty, a.ty).unwrap();
        }
    }
    for e in &h.enums {
        let n = &e.name;
        writeln!(c, "\tP(\"sizeof({n})\", sizeof({n}));").unwrap();
        for v in &e.enumerators {
            writeln!(c, "\tP(\"{v}\", {v});").unwrap();
        }
    }
    for d in &h.defines {
        writeln!(c, "\tP(\"{d}\", {d});").unwrap();
    }
    c.push_str("\treturn 0;\n}\n");
    c
}

fn proto_assert(f: &Function, real_name: &str) -> String {
    format!("typedef {} proto_{}({});\n_Static_assert(COMPAT(__typeof__({real_name}), proto_{}), \"proto:{}\");", f.ret, f.name, f.params, f.name, f.name)
}

fn gen_proto_check(h: &Header, checks: &[(&Function, String)], real_headers: &[&str]) -> String {
    let mut c = String::from("/* generated by tests/layout.rs; do not edit */\n");
    c.push_str(&real_prelude(h, real_headers));
    c.push_str("#define COMPAT(a, ...) __builtin_types_compatible_p(a, __VA_ARGS__)\n\n");
    for (f, real) in checks {
        writeln!(c, "{}", proto_assert(f, real)).unwrap();
    }
    c
}

// ---------------------------------------------------------------------------
// Compiling, running, comparing
// ---------------------------------------------------------------------------

fn cc_output(includes: &[PathBuf], extra: &[String], src: &Path, exe: Option<&Path>) -> Output {
    let mut cmd = Command::new("cc");
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    cmd.args(extra).arg(src);
    if let Some(exe) = exe {
        cmd.arg("-o").arg(exe);
    }
    cmd.output().unwrap_or_else(|e| panic!("cannot run cc: {e}"))
}

fn cc(work: &TempDir, hdr: &str, includes: &[PathBuf], extra: &[String], src: &Path, exe: Option<&Path>, what: &str) {
    let out = cc_output(includes, extra, src, exe);
    if !out.status.success() {
        work.keep();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
        errors.dedup();
        panic!(
            "cc failed on the {what}: {}\n\
             (a struct, field, typedef or constant of {hdr} that the real headers lack \
             shows up here as an error)\n{}\n\nfull compiler output:\n{stderr}",
            src.display(),
            errors.join("\n"),
        );
    }
}

fn run_probe(work: &TempDir, exe: &Path) -> String {
    let out = Command::new(exe).output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    if !out.status.success() {
        work.keep();
        panic!("{} failed: {:?}", exe.display(), out.status);
    }
    String::from_utf8(out.stdout).unwrap()
}

/// Every field of each real struct must be in ours (ours having a field the
/// real one lacks fails the probe's compile already).  The real fields come
/// from the preprocessed probe: the last `} NAME;` definition's body.
fn check_fields_complete(h: &Header, preprocessed: &str, problems: &mut Vec<String>) {
    let tokens = tokenize_loose(preprocessed);
    for st in &h.structs {
        if st.name.starts_with("struct ") {
            continue;
        }
        let Some(real) = struct_fields(&tokens, &st.name) else {
            problems.push(format!("{}: no `}} {};` definition found in the preprocessed real headers", st.name, st.name));
            continue;
        };
        let ours: BTreeSet<&str> = st.fields.iter().map(|f| f.name.as_str()).collect();
        let missing: Vec<&str> = real.iter().map(String::as_str).filter(|f| !ours.contains(f)).collect();
        if !missing.is_empty() {
            problems.push(format!("{}: the real struct has field(s) ours lacks: {} (real fields: {})", st.name, missing.join(", "), real.join(", ")));
        }
    }
}

/// Like [`tokenize`], but any other character is a token of its own.
fn tokenize_loose(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// The member names of the last `{ ... } NAME ;` in `tokens`.
fn struct_fields(tokens: &[String], name: &str) -> Option<Vec<String>> {
    let end = (2..tokens.len()).rev().find(|&i| tokens[i] == ";" && tokens[i - 1] == name && tokens[i - 2] == "}")? - 2;
    let mut depth = 0;
    let open = (0..=end).rev().find(|&i| {
        match tokens[i].as_str() {
            "}" => depth += 1,
            "{" => depth -= 1,
            _ => {}
        }
        depth == 0
    })?;
    let mut names = Vec::new();
    member_names(&tokens[open + 1..end], &mut names);
    Some(names)
}

fn member_names(body: &[String], names: &mut Vec<String>) {
    for decl in split_top(body, ";") {
        if decl.is_empty() {
            continue;
        }
        if let Some(open) = decl.iter().position(|t| t == "{") {
            // nested struct/union: its declarators follow the `}`; an
            // anonymous one contributes its own members.
            let close = matching(decl, open);
            let after = &decl[close + 1..];
            if after.is_empty() {
                member_names(&decl[open + 1..close], names);
            } else {
                declarator_names(after, names);
            }
            continue;
        }
        let decl = match decl.iter().position(|t| t == "__attribute__") {
            Some(a) => &decl[..a],
            None => decl,
        };
        // Drop the type: declarator names are in the comma-separated parts.
        declarator_names(decl, names);
    }
}

fn declarator_names(decl: &[String], names: &mut Vec<String>) {
    for part in split_top(decl, ",") {
        if let Some(p) = part.windows(2).position(|w| w[0] == "(" && w[1] == "*") {
            if let Some(n) = part[p + 2..].iter().find(|t| is_ident(t) && !matches!(t.as_str(), "const" | "volatile" | "restrict")) {
                names.push(n.clone());
            }
            continue;
        }
        // the last identifier before any `[`, `:` (bit-field) or `=`
        let cut = part.iter().position(|t| t == "[" || t == ":" || t == "=").unwrap_or(part.len());
        if let Some(n) = part[..cut].iter().rev().find(|t| is_ident(t)) {
            names.push(n.clone());
        }
    }
}

fn compare_outputs(real: &str, ours: &str, problems: &mut Vec<String>) -> usize {
    let parse = |s: &str| -> Vec<(String, String)> {
        s.lines()
            .map(|l| {
                let (k, v) = l.rsplit_once(" = ").expect("probe line");
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let (real, ours) = (parse(real), parse(ours));
    assert_eq!(real.len(), ours.len(), "the two probes printed different line counts");
    for ((rk, rv), (ok, ov)) in real.iter().zip(&ours) {
        assert_eq!(rk, ok, "the two probes printed different keys");
        let is_compat = ok.contains(" has type '") || ok.contains(" is ");
        if is_compat && ov != "1" {
            panic!("parser bug: our own header says `{ok}` is false");
        }
        if rv != ov {
            let what = if is_compat { "real type differs" } else { "" };
            problems.push(format!("{ok}: ours = {ov}, real = {rv} {what}").trim_end().to_string());
        }
    }
    real.len()
}

// ---------------------------------------------------------------------------
// Prototype resolution, symbols
// ---------------------------------------------------------------------------

/// Functions declared by Slurm's headers, from `cc -aux-info`:
/// `/* path:line:NC */ extern void *list_append (List, void *);`
/// Returns name -> the declaration line (for messages).
fn aux_info_functions(aux: &Path, src: &Path) -> HashMap<String, String> {
    let text = fs::read_to_string(aux).unwrap();
    let src = s(src);
    let mut map = HashMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("/* ") else {
            continue;
        };
        let Some((loc, decl)) = rest.split_once(" */ ") else {
            continue;
        };
        if !loc.starts_with(&src) {
            continue;
        }
        let Some(paren) = decl.find(" (") else {
            continue;
        };
        let before = &decl[..paren];
        let name: String = before.chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<Vec<_>>().into_iter().rev().collect();
        if !name.is_empty() {
            let file = loc.strip_prefix(&src).unwrap_or(loc).trim_start_matches('/');
            map.insert(name, format!("{} [{}]", decl.trim(), file.rsplit_once(':').map_or(file, |x| x.0)));
        }
    }
    map
}

/// `slurm_X` is libslurmfull's alias of `X`; Slurm's headers declare one of
/// the two spellings.
fn resolve_real_name(f: &Function, declared: &HashMap<String, String>) -> Option<String> {
    let mut candidates = vec![f.name.clone()];
    if let Some(u) = f.name.strip_prefix("slurm_") {
        candidates.push(u.to_string());
    }
    candidates.into_iter().find(|c| declared.contains_key(c))
}

/// When our `slurm_X` was checked against the real `X`, both symbols must be
/// the same function in libslurmfull.so.
fn check_alias(ours: &str, real: &str, lib: &Path, symbols: &HashMap<String, String>, problems: &mut Vec<String>) {
    match (symbols.get(ours), symbols.get(real)) {
        (Some(a), Some(b)) if a == b => {}
        (Some(_), Some(_)) => problems.push(format!(
            "{ours} and {real} are different functions in {}; the prototype \
             check compared {ours} with {real}'s declaration",
            lib.display()
        )),
        // A missing symbol is reported by exports_<series>.
        _ => {}
    }
}

/// Looks for a declaration `NAME (` or `slurm_NAME (`-less spelling in any
/// header of the source tree (for the "add it to REAL_HEADERS" message).
fn grep_declaration(src: &Path, name: &str) -> Option<String> {
    let mut names = vec![name.to_string()];
    if let Some(u) = name.strip_prefix("slurm_") {
        names.push(u.to_string());
    }
    let mut stack = vec![src.join("src"), src.join("slurm")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "h") {
                let Ok(text) = fs::read_to_string(&p) else {
                    continue;
                };
                let tokens_hit = names.iter().any(|n| {
                    text.match_indices(n.as_str()).any(|(i, _)| {
                        let pre = text[..i].chars().next_back();
                        let post = text[i + n.len()..].trim_start().starts_with('(');
                        post && !pre.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') && !text[..i].trim_end().ends_with("define")
                    })
                });
                if tokens_hit {
                    return Some(p.strip_prefix(src).unwrap_or(&p).display().to_string());
                }
            }
        }
    }
    None
}

/// Defined dynamic function symbols: name -> address.
fn dynamic_function_symbols(lib: &Path) -> HashMap<String, String> {
    harness::dynamic_symbols(lib)
        .into_iter()
        .filter(|s| matches!(s.kind.as_str(), "T" | "t" | "W" | "w" | "i"))
        .filter_map(|s| Some((s.name, s.address?)))
        .collect()
}

// ---------------------------------------------------------------------------
// Guards on the probe's include set
// ---------------------------------------------------------------------------

/// Slurm headers the real probe included, from its `-MD` dependency file;
/// flags any header taken from the installed /usr/include/slurm instead of
/// the source tree.
fn slurm_headers_used(deps: &Path, src: &Path, included: usize, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let text = fs::read_to_string(deps).unwrap().replace("\\\n", " ");
    let mut used = Vec::new();
    for word in text.split_whitespace().filter(|w| !w.ends_with(':')) {
        let p = Path::new(word);
        if p.starts_with(src) {
            used.push(p.to_path_buf());
        } else if word.starts_with("/usr/include/slurm/") {
            problems.push(format!("the real probe included the installed {word} instead of the source's"));
        }
    }
    assert!(used.len() >= included, "dependency file {} lists too few Slurm headers", deps.display());
    used
}

/// Every config.h.in macro tested by a conditional in an included Slurm
/// header must be reviewed (defined or listed as `#undef`) in config.h.
fn check_config_macros(src: &Path, used: &[PathBuf], config_h: &Path, config_rel: &str, problems: &mut Vec<String>) {
    let config_names: BTreeSet<String> =
        fs::read_to_string(src.join("config.h.in")).unwrap().lines().filter_map(|l| l.strip_prefix("#undef ")).map(|n| n.trim().to_string()).collect();
    let reviewed: BTreeSet<String> = fs::read_to_string(config_h)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("#define ").or_else(|| l.strip_prefix("/* #undef "))
        })
        .filter_map(|rest| rest.split_whitespace().next().map(str::to_string))
        .collect();
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in used {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines() {
            let t = line.trim_start();
            let Some(d) = t.strip_prefix('#') else {
                continue;
            };
            let d = d.trim_start();
            if !["if", "ifdef", "ifndef", "elif"].iter().any(|k| d.starts_with(k)) {
                continue;
            }
            for word in d.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if config_names.contains(word) && !reviewed.contains(word) {
                    let rel = file.strip_prefix(src).unwrap_or(file).display().to_string();
                    missing.entry(word.to_string()).or_default().insert(rel);
                }
            }
        }
    }
    for (name, files) in missing {
        problems.push(format!(
            "config macro {name} is tested by {} but not reviewed in {config_rel}: add its value \
             for Debian's amd64 build (or a `/* #undef {name} */` line); if the other series do \
             not test it, put it in a tests/layout/<series>/config.h of its own",
            files.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
}

// ---------------------------------------------------------------------------
// Finding (or fetching) the Slurm source
// ---------------------------------------------------------------------------

type Version = (u32, u32, u32);

fn fmt_version(v: Version) -> String {
    format!("{}.{:02}.{}", v.0, v.1, v.2)
}

/// `SLURM_VERSION_NUMBER` of the installed libslurm-dev.
fn installed_version() -> Option<Version> {
    let text = fs::read_to_string(INSTALLED_VERSION_H).ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("#define SLURM_VERSION_NUMBER"))?;
    let hex = line.split_whitespace().nth(2)?;
    let n = u32::from_str_radix(hex.trim_start_matches("0x"), 16).ok()?;
    Some(((n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff))
}

/// Upstream version from the source's META file.
fn source_version(dir: &Path) -> Option<Version> {
    let meta = fs::read_to_string(dir.join("META")).ok()?;
    let get = |key: &str| -> Option<u32> { meta.lines().find_map(|l| l.trim().strip_prefix(key)).and_then(|v| v.trim().parse().ok()) };
    Some((get("Major:")?, get("Minor:")?, get("Micro:")?))
}

fn slurm_version_h(src: &Path) -> String {
    let v = source_version(src).unwrap();
    let tmpl = fs::read_to_string(src.join("slurm/slurm_version.h.in")).unwrap();
    let def = format!("#define SLURM_VERSION_NUMBER 0x{:02x}{:02x}{:02x}", v.0, v.1, v.2);
    assert!(tmpl.contains("#undef SLURM_VERSION_NUMBER"), "unexpected slurm_version.h.in");
    tmpl.replace("#undef SLURM_VERSION_NUMBER", &def)
}

enum SourceLookup {
    Found(PathBuf),
    Skip(String),
}

/// The installed series: Debian's source package of the installed version.
/// Any other series: the upstream tarball of the series.
/// Without a local Debian tree of the installed version, an upstream
/// tarball of exactly that version is used before trying `apt-get source`
/// (Debian 13's 24.11.5 source cannot be fetched from the archive).
fn find_source(series: &Series) -> SourceLookup {
    match installed_version() {
        Some(v) if series.is(v) => {
            if search_bases(&source_bases(), v, &mut Vec::new()).is_none() {
                if let SourceLookup::Found(tree) = tarball_source(series, Some(v.2)) {
                    println!(
                        "layout: Slurm {}: no Debian source of the installed {} found; using the upstream tarball of that version",
                        series.name,
                        fmt_version(v)
                    );
                    return SourceLookup::Found(tree);
                }
            }
            find_slurm_source(v)
        }
        _ => tarball_source(series, None),
    }
}

/// Where Debian source trees are looked for, in order.
fn source_bases() -> Vec<PathBuf> {
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os(SRC_ENV).filter(|v| !v.is_empty()) {
        bases.push(dir.into());
    }
    bases.push(CACHE_DIR.into());
    bases.push(FALLBACK_SRC_DIR.into());
    bases
}

/// `slurm-24-11-5-1.tar.xz` -> Some((5, 1)) for series 24.11.
fn tarball_micro(file: &str, series: &Series) -> Option<(u32, u32)> {
    let rest = file.strip_prefix(&format!("slurm-{}-{:02}-", series.major, series.minor))?;
    let rest = rest.strip_suffix(".tar.xz")?;
    let (micro, rel) = rest.split_once('-')?;
    Some((micro.parse().ok()?, rel.parse().ok()?))
}

/// The newest tarball of the series, or the one of release `micro`.
fn tarball_source(series: &Series, micro: Option<u32>) -> SourceLookup {
    // `../shared/slurm-src` beside the checkout, as CI has it, else the
    // usual place.
    let beside = repo_root().join("../shared/slurm-src");
    let default = if beside.is_dir() { beside } else { PathBuf::from(TARBALL_DIR) };
    let dir = std::env::var_os(TARBALL_ENV).filter(|v| !v.is_empty()).map_or(default, PathBuf::from);
    let newest = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            tarball_micro(&name, series).map(|v| (v, e.path()))
        })
        .filter(|((m, _), _)| micro.is_none() || micro == Some(*m))
        .max();
    let Some((_, tarball)) = newest else {
        return SourceLookup::Skip(format!("no tarball slurm-{}-{:02}-<micro>-<rel>.tar.xz in {} (${TARBALL_ENV})", series.major, series.minor, dir.display()));
    };
    let sha = sha256(&tarball);
    let file_name = tarball.file_name().unwrap().to_string_lossy().into_owned();
    if let Ok(sums) = fs::read_to_string(dir.join("SHA256SUMS")) {
        let listed = sums.lines().find_map(|l| {
            let (sum, name) = l.split_once(char::is_whitespace)?;
            (name.trim().trim_start_matches('*') == file_name).then(|| sum.to_string())
        });
        match listed {
            Some(sum) if sum == sha => {}
            Some(sum) => panic!("{}: SHA-256 is {sha}, but {}/SHA256SUMS says {sum}", tarball.display(), dir.display()),
            None => println!("layout: WARNING: {file_name} is not listed in {}/SHA256SUMS", dir.display()),
        }
    }
    let stem = file_name.strip_suffix(".tar.xz").unwrap();
    let cache = if fs::create_dir_all(CACHE_DIR).is_ok() && writable(Path::new(CACHE_DIR)) {
        PathBuf::from(CACHE_DIR)
    } else {
        let tmp = std::env::temp_dir().join("gres-rs-slurm-src");
        fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("mkdir {}: {e}", tmp.display()));
        tmp
    };
    let target = cache.join(stem);
    let extracted = |dir: &Path| fs::read_to_string(dir.join(TARBALL_MARKER)).is_ok_and(|m| m.trim() == sha) && dir.join("META").is_file();
    if extracted(&target) {
        return SourceLookup::Found(target);
    }
    println!("layout: extracting {} into {}", tarball.display(), target.display());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = cache.join(format!(".extract-{stem}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(&tmp).output().unwrap_or_else(|e| panic!("cannot run tar: {e}"));
    if !out.status.success() {
        let _ = fs::remove_dir_all(&tmp);
        panic!("tar -xf {} failed:\n{}", tarball.display(), String::from_utf8_lossy(&out.stderr));
    }
    // git archive --prefix=<tag>/: one top directory.
    let tops: Vec<PathBuf> = fs::read_dir(&tmp).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    let [top] = tops.as_slice() else {
        panic!("{} does not hold exactly one top directory: {tops:?}", tarball.display());
    };
    fs::write(top.join(TARBALL_MARKER), format!("{sha}\n")).unwrap();
    if target.exists() {
        let _ = fs::remove_dir_all(&target);
    }
    // A concurrent run may win the rename; its tree is as good.
    if let Err(e) = fs::rename(top, &target) {
        if !extracted(&target) {
            panic!("rename {} to {}: {e}", top.display(), target.display());
        }
    }
    let _ = fs::remove_dir_all(&tmp);
    SourceLookup::Found(target)
}

fn sha256(file: &Path) -> String {
    let out = Command::new("sha256sum").arg(file).output().unwrap_or_else(|e| panic!("cannot run sha256sum: {e}"));
    assert!(out.status.success(), "sha256sum {} failed", file.display());
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".write-test-{}", std::process::id()));
    let ok = fs::write(&probe, b"").is_ok();
    let _ = fs::remove_file(&probe);
    ok
}

fn find_slurm_source(installed: Version) -> SourceLookup {
    let bases = source_bases();

    let mut others: Vec<String> = Vec::new();
    if let Some(found) = search_bases(&bases, installed, &mut others) {
        for other in &others {
            println!("layout: ignoring {other}: not the installed version");
        }
        return SourceLookup::Found(found);
    }
    let wanted = fmt_version(installed);
    if !is_root() {
        if others.is_empty() {
            return SourceLookup::Skip(format!(
                "no Slurm {wanted} source found (looked for slurm-wlm-{wanted} in ${SRC_ENV}, \
                 {CACHE_DIR}, {FALLBACK_SRC_DIR}) and not root, so it cannot be fetched with \
                 `apt-get source slurm-wlm`; run as root once or set {SRC_ENV}"
            ));
        }
        panic!(
            "Slurm source version mismatch: installed slurmd/libslurm-dev is {wanted} \
             ({INSTALLED_VERSION_H}), but only these trees were found: {}",
            others.join(", ")
        );
    }
    println!("layout: no Slurm {wanted} source found; fetching it with apt-get source into {CACHE_DIR}");
    if let Err(e) = apt_get_source(Path::new(CACHE_DIR)) {
        panic!("could not fetch the Slurm {wanted} source into {CACHE_DIR}: {e}");
    }
    others.clear();
    match search_bases(&[PathBuf::from(CACHE_DIR)], installed, &mut others) {
        Some(found) => SourceLookup::Found(found),
        None => panic!(
            "Slurm source version mismatch: installed slurmd/libslurm-dev is {wanted} \
             ({INSTALLED_VERSION_H}), but apt-get source slurm-wlm gave: {}",
            others.join(", ")
        ),
    }
}

fn search_bases(bases: &[PathBuf], installed: Version, others: &mut Vec<String>) -> Option<PathBuf> {
    for base in bases {
        let mut candidates = Vec::new();
        if base.join("META").is_file() {
            candidates.push(base.clone());
        }
        if let Ok(entries) = fs::read_dir(base) {
            let mut dirs: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("slurm-wlm-")) && p.join("META").is_file())
                .collect();
            dirs.sort();
            candidates.extend(dirs);
        }
        for dir in candidates {
            match source_version(&dir) {
                Some(v) if v == installed => {
                    warn_debian_revision(&dir);
                    return Some(dir);
                }
                v => others.push(format!("{} (version {})", dir.display(), v.map_or("unknown".into(), fmt_version))),
            }
        }
    }
    None
}

/// The Debian revision (security patches) should match too, but a mismatch
/// there rarely touches these structs, so it only warns.
fn warn_debian_revision(dir: &Path) {
    let Some(installed) = installed_deb_version() else {
        return;
    };
    let Ok(changelog) = fs::read_to_string(dir.join("debian/changelog")) else {
        return;
    };
    let Some(src) = changelog.lines().next().and_then(|l| l.split(['(', ')']).nth(1)) else {
        return;
    };
    if src != installed {
        println!("layout: WARNING: source {} is Debian version {src}, installed slurmd is {installed}", dir.display());
    }
}

fn installed_deb_version() -> Option<String> {
    for pkg in ["slurmd", "libslurm-dev"] {
        let out = Command::new("dpkg-query").args(["-W", "-f=${Version}", pkg]).output().ok()?;
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !v.is_empty() {
            return Some(v);
        }
    }
    None
}

fn apt_get_source(cache: &Path) -> Result<(), String> {
    fs::create_dir_all(cache).map_err(|e| format!("mkdir {}: {e}", cache.display()))?;
    let tmp = cache.join(format!(".fetch-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let result = apt_get_source_in(&tmp).and_then(|()| {
        let entries = fs::read_dir(&tmp).map_err(|e| e.to_string())?;
        let dir = entries
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir() && p.file_name().unwrap().to_string_lossy().starts_with("slurm-wlm-"))
            .ok_or("apt-get source left no slurm-wlm-* directory")?;
        let target = cache.join(dir.file_name().unwrap());
        if !target.join("META").exists() {
            let _ = fs::remove_dir_all(&target);
            // A concurrent fetch may win the rename; either tree will do.
            if let Err(e) = fs::rename(&dir, &target) {
                if !target.join("META").exists() {
                    return Err(format!("rename to {}: {e}", target.display()));
                }
            }
        }
        Ok(())
    });
    let _ = fs::remove_dir_all(&tmp);
    result
}

fn apt_get_source_in(dir: &Path) -> Result<(), String> {
    let pinned = installed_deb_version().map(|v| format!("slurm-wlm={v}"));
    let mut specs: Vec<String> = pinned.into_iter().collect();
    specs.push("slurm-wlm".into());
    let run = |spec: &str| -> Result<(), String> {
        let out = Command::new("apt-get")
            .args(["source", "-q", spec])
            .current_dir(dir)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("`apt-get source {spec}` failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        }
    };
    let mut added_deb_src = false;
    let mut errors = Vec::new();
    let mut i = 0;
    while i < specs.len() {
        match run(&specs[i]) {
            Ok(()) => return Ok(()),
            Err(e) if !added_deb_src && e.contains("deb-src") => {
                println!("layout: apt has no deb-src entry; adding one");
                add_deb_src()?;
                added_deb_src = true; // retry the same spec
            }
            Err(e) => {
                errors.push(e);
                i += 1;
            }
        }
    }
    Err(errors.join("\n"))
}

/// Mirrors Debian's own apt sources as `deb-src` entries, then updates.
fn add_deb_src() -> Result<(), String> {
    let deb822 = Path::new("/etc/apt/sources.list.d/debian.sources");
    let oneline = Path::new("/etc/apt/sources.list");
    if let Ok(text) = fs::read_to_string(deb822) {
        let src: String = text.lines().map(|l| if l.trim_start().starts_with("Types:") { "Types: deb-src" } else { l }).map(|l| format!("{l}\n")).collect();
        let target = "/etc/apt/sources.list.d/debian-src.sources";
        fs::write(target, src).map_err(|e| format!("write {target}: {e}"))?;
    } else if let Ok(text) = fs::read_to_string(oneline) {
        let src: String = text.lines().filter_map(|l| l.trim_start().strip_prefix("deb ")).map(|rest| format!("deb-src {rest}\n")).collect();
        if src.is_empty() {
            return Err("no deb line in /etc/apt/sources.list to mirror as deb-src".into());
        }
        let target = "/etc/apt/sources.list.d/debian-src.list";
        fs::write(target, src).map_err(|e| format!("write {target}: {e}"))?;
    } else {
        return Err("neither /etc/apt/sources.list.d/debian.sources nor /etc/apt/sources.list exists".into());
    }
    let out = Command::new("apt-get")
        .args(["update", "-q"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .map_err(|e| format!("cannot run apt-get update: {e}"))?;
    if !out.status.success() {
        return Err(format!("apt-get update failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn s(p: &Path) -> String {
    p.to_str().expect("non-UTF-8 path").to_string()
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| st.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0")))
        .unwrap_or(false)
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// Prints a skip notice, or fails when `CI=true`.
fn skip_or_fail(why: &str) {
    if ci() {
        panic!("{why} (CI=true: not skipping)");
    }
    println!("layout: SKIP: {why}");
}

/// A scratch directory removed on drop unless `keep()` was called (or
/// GRES_RS_LAYOUT_KEEP is set).
struct TempDir {
    path: PathBuf,
    keep: std::cell::Cell<bool>,
}

impl TempDir {
    fn new(prefix: &str) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&path).unwrap();
        let keep = std::env::var_os("GRES_RS_LAYOUT_KEEP").is_some_and(|v| !v.is_empty() && v != "0");
        if keep {
            println!("layout: keeping generated files in {}", path.display());
        }
        TempDir { path, keep: keep.into() }
    }

    fn keep(&self) {
        self.keep.set(true);
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.keep.get() {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}
