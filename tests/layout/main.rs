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
//!   (`header::parse_header`; `tokens` is a small tokenizer for the plain C
//!   subset the header uses, which panics on anything it does not
//!   understand rather than skipping it).  Adding a field, constant or function to the header is
//!   therefore the only edit needed for it to be checked.  If a newly used
//!   function is declared in a Slurm header not yet included by the probe,
//!   the test says which header to add to `check::REAL_HEADERS`.
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
//!
//! Modules: `series` (a series' files and versions), `source` (its Slurm
//! source), `header` (our header parsed, with `tokens`, the C tokenizer
//! also used by `fields`), `generate` (the C probes), `compile`, `fields`,
//! `symbols` (prototypes and libslurmfull's symbols), `guards` (the
//! include set), `check` (`layout_<series>`), `exports`
//! (`exports_<series>`), `util`.

mod check;
mod compile;
mod exports;
mod fields;
mod generate;
mod guards;
mod header;
mod series;
mod source;
mod symbols;
mod tokens;
mod util;

use check::check_layout;
use exports::check_exports;
use series::{HEADERS_DIR, HEADER_FILE};
use std::fs;
use util::repo_root;

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
    assert!(untested.is_empty(), "{HEADERS_DIR}/<series>/{HEADER_FILE} without a test in tests/layout/main.rs (add it to series_tests!): {untested:?}");
}
