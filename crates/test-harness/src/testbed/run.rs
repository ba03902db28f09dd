//! Running a test on each release: the per-release test, its skips, its
//! time record, and the release the running test is on.

use super::{series_of, OursUnavailable, Selection, TestBed};
use crate::{chroot, host, ledger, paths};
use std::time::Instant;

thread_local! {
    /// The release a [`per_release!`](crate::per_release) test is running on.
    static CURRENT: std::cell::RefCell<Option<TestBed>> = const { std::cell::RefCell::new(None) };
}

/// The release the calling thread's [`run_test`] runs on (`None` outside
/// one); its chroot is [`chroot::current`].
pub fn current() -> Option<TestBed> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Prints why `test` is skipped, or panics with it under strict mode.
#[track_caller]
pub fn skip_or_fail(test: &str, why: &str) {
    if host::strict_mode() {
        panic!("{test}: {why}\n(GRES_RS_REQUIRE_SLURM/CI is set, so this is a failure)");
    }
    ledger::skipped(test, why);
}

/// Runs `body` on the release of `series` when `GRES_RS_SLURM` selects it
/// and it exists (else prints why it is skipped, or fails when the
/// release was named explicitly under strict mode), and prints how long
/// it took.  What [`per_release!`](crate::per_release) calls.
#[track_caller]
pub fn run_test(test: &str, series: &str, body: impl FnOnce(&TestBed)) {
    let name = format!("{test} [Slurm {series}]");
    let sel = Selection::from_env().unwrap_or_else(|e| panic!("{e}"));
    if !sel.selects(series) {
        ledger::skipped(&name, "not selected by GRES_RS_SLURM");
        return;
    }
    if series == series_of(chroot::RELEASES[0].slurm) && !host::require_slurm(&name) {
        return;
    }
    let bed = match TestBed::open(series) {
        Ok(b) => b,
        Err(e) => {
            let setup = chroot::all_releases().into_iter().find(|r| series_of(r.slurm) == series).map(|r| r.setup_command()).unwrap_or_default();
            let why = format!("no test bed for Slurm {series}: {e} (build it with {setup})");
            // Under GRES_RS_REQUIRE_SLURM / CI (tests/run.sh) every release
            // of the test bed must be there; otherwise `all` means the ones
            // that exist.
            if sel == Selection::All && !host::strict_mode() {
                ledger::skipped(&name, &format!("{why}; GRES_RS_SLURM=all runs the releases that exist"));
            } else {
                skip_or_fail(&name, &why);
            }
            return;
        }
    };
    let t0 = Instant::now();
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| c.borrow_mut().take());
            chroot::set_current(None);
        }
    }
    CURRENT.with(|c| *c.borrow_mut() = Some(bed.clone()));
    chroot::set_current(bed.chroot.clone());
    let _reset = Reset;
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&bed))) {
        match p.downcast_ref::<OursUnavailable>() {
            Some(OursUnavailable(msg)) => {
                skip_or_fail(&name, msg);
                return;
            }
            None => std::panic::resume_unwind(p),
        }
    }
    eprintln!("testbed: {name} on {} passed in {:.1?}", bed.label(), t0.elapsed());
    ledger::ran(&name);
    record_time(test, &bed.version, t0.elapsed());
}

/// Appends `<test binary>\t<test>\t<version>\t<seconds>` to
/// `<target>/tmp/testbed-times.tsv` (the per-release run times, without
/// `--nocapture`).
fn record_time(test: &str, version: &str, took: std::time::Duration) {
    use std::io::Write;
    let bin =
        std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().split('-').next().unwrap_or("").to_string())).unwrap_or_default();
    let dir = paths::target_tmp_dir();
    let _ = std::fs::create_dir_all(&dir);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("testbed-times.tsv")) {
        let _ = writeln!(f, "{bin}\t{test}\t{version}\t{:.1}", took.as_secs_f64());
    }
}

/// Defines each test once per release series of the test bed, as a module
/// of eight `#[test]`s: `<name>::slurm_22_05`, `slurm_23_02`, ...,
/// `slurm_26_05` (filter one with `cargo test slurm_24_11`); each runs
/// [`run_test`], which skips a series `GRES_RS_SLURM` does not select.
/// Attributes (doc comments) go on the module.
#[macro_export]
macro_rules! per_release {
    ($( $(#[$m:meta])* fn $name:ident($bed:ident) $body:block )*) => {$(
        $(#[$m])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn body($bed: &$crate::testbed::TestBed) $body
            #[test]
            fn slurm_22_05() { $crate::testbed::run_test(stringify!($name), "22.05", body) }
            #[test]
            fn slurm_23_02() { $crate::testbed::run_test(stringify!($name), "23.02", body) }
            #[test]
            fn slurm_23_11() { $crate::testbed::run_test(stringify!($name), "23.11", body) }
            #[test]
            fn slurm_24_05() { $crate::testbed::run_test(stringify!($name), "24.05", body) }
            #[test]
            fn slurm_24_11() { $crate::testbed::run_test(stringify!($name), "24.11", body) }
            #[test]
            fn slurm_25_05() { $crate::testbed::run_test(stringify!($name), "25.05", body) }
            #[test]
            fn slurm_25_11() { $crate::testbed::run_test(stringify!($name), "25.11", body) }
            #[test]
            fn slurm_26_05() { $crate::testbed::run_test(stringify!($name), "26.05", body) }
        }
    )*};
}
