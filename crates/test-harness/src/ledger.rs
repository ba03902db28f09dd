//! What the tests that need a real Slurm (or a particular host) did, for
//! the test runner's last line: `tests/run.sh` names a file in
//! [`LEDGER_ENV`], every such test that runs or is skipped adds a line to
//! it, and the runner counts them at the end, with the reasons for the
//! skips.  Without the variable nothing is written (a plain `cargo test`);
//! the skip is printed either way.

use std::io::Write;

/// The file the lines go to (`<outcome>\t<test>\t<why>`), appended to by
/// every test process at once: one `write` a line, shorter than a pipe
/// buffer.
pub const LEDGER_ENV: &str = "GRES_RS_TEST_LEDGER";

/// `test` is skipped because of `why` (not a failure: outside CI, or a
/// host that cannot show what it is about).
pub fn skipped(test: &str, why: &str) {
    eprintln!("{test}: skipped ({why})");
    append("skipped", test, why);
}

/// `test`, which needs a real Slurm, ran to its end.
pub fn ran(test: &str) {
    append("ran", test, "");
}

fn append(outcome: &str, test: &str, why: &str) {
    let Some(path) = std::env::var_os(LEDGER_ENV) else { return };
    let one_line = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!("{outcome}\t{}\t{}\n", one_line(test), one_line(why));
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_per_outcome() {
        let dir = std::env::temp_dir().join(format!("gres-rs-ledger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.tsv");
        // The variable is this process's; no other test of the harness reads it.
        std::env::set_var(super::LEDGER_ENV, &path);
        super::skipped("a [Slurm 24.11]", "no test bed\nfor it\t(x)");
        super::ran("b");
        std::env::remove_var(super::LEDGER_ENV);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "skipped\ta [Slurm 24.11]\tno test bed for it (x)\nran\tb\t\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
