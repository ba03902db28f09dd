//! The slurmd drop-in (`slurmd-gres-rs-check.conf`), run exactly as systemd
//! runs its `ExecStartPre=`, and `systemd-analyze verify` of the unit.

use crate::common::run;
use gres_test_harness as harness;
use harness::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The drop-in as the packages ship it.
const DROP_IN: &str = "packaging/debian/slurmd-gres-rs-check.conf";

/// Where an admin installs it (the drop-in's own instructions).
pub const DROP_IN_PATH: &str = "/etc/systemd/system/slurmd.service.d/gres-rs-check.conf";

/// systemd's `PATH` for a system unit's commands.
const UNIT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The `ExecStartPre=` command of a unit file's text, as systemd runs it
/// (systemd.syntax(7), systemd.service(5)): a line ending in a backslash
/// is joined with the next one, the backslash made a space; the value is
/// split into words at whitespace outside single or double quotes, which
/// are removed; `$$` is a `$` (its environment expansion) and `%%` a `%`
/// (its specifiers).  Anything else systemd would rewrite (a backslash
/// escape, another `$` or `%`) fails the test, so the words are exactly
/// systemd's.
pub fn exec_start_pre(unit: &str) -> Vec<String> {
    let mut logical = Vec::new();
    let mut cur = String::new();
    for line in unit.lines() {
        if cur.is_empty() && (line.starts_with('#') || line.starts_with(';')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                cur.push_str(head);
                cur.push(' ');
            }
            None => {
                cur.push_str(line);
                logical.push(std::mem::take(&mut cur));
            }
        }
    }
    let lines: Vec<&String> = logical.iter().filter(|l| l.trim_start().starts_with("ExecStartPre=")).collect();
    assert_eq!(lines.len(), 1, "one ExecStartPre= in the drop-in:\n{unit}");
    let value = lines[0].trim_start().trim_start_matches("ExecStartPre=").trim();
    assert!(!value.contains('\\'), "a backslash escape in ExecStartPre= (systemd rewrites it): {value}");
    assert!(!value.replace("$$", "").contains('$'), "a $ systemd expands (write $$): {value}");
    assert!(!value.replace("%%", "").contains('%'), "a % systemd expands (write %%): {value}");
    assert!(!value.starts_with(['-', '@', ':', '+', '!']), "a prefix on ExecStartPre=: {value}");
    let mut words = Vec::new();
    let (mut word, mut quote, mut in_word) = (String::new(), None::<char>, false);
    for c in value.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "an unclosed quote in ExecStartPre=: {value}");
    if in_word {
        words.push(word);
    }
    words.into_iter().map(|w| w.replace("$$", "$").replace("%%", "%")).collect()
}

/// Runs a unit command's words as systemd does (its `PATH`, no other
/// environment than `env`; `cmd` runs `argv[0]`, here or in a chroot):
/// its exit code, output and time.
pub fn run_unit_command(mut cmd: Command, argv: &[String], env: &[(String, String)]) -> (Option<i32>, String, Duration) {
    cmd.args(&argv[1..]).env_clear().env("PATH", UNIT_PATH).env("LANG", "C.UTF-8").envs(env.iter().map(|(k, v)| (k, v)));
    let t = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {argv:?}: {e}"));
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)), t.elapsed())
}

/// `systemd-analyze verify slurmd.service` with the drop-in `drop_in`
/// beside `unit` (slurmd's unit file text), offline: (passed, output).
/// None without systemd-analyze.
pub fn verify_slurmd_unit(unit: &str, drop_in: &str) -> Option<(bool, String)> {
    if !Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success()) {
        assert!(!strict_mode(), "systemd-analyze missing (package systemd)");
        return None;
    }
    let dir = TempDir::new(&format!("gres-rs-units-{}", std::process::id()));
    std::fs::create_dir_all(dir.0.join("slurmd.service.d")).unwrap();
    std::fs::write(dir.0.join("slurmd.service"), unit).unwrap();
    std::fs::write(dir.0.join("slurmd.service.d/gres-rs-check.conf"), drop_in).unwrap();
    // The trailing colon: then the default unit directories (munge, the
    // targets slurmd.service names).
    Some(run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.0.join("slurmd.service"))
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.0.display()))))
}

/// slurmd's unit file on this machine, or a minimal one.
pub fn slurmd_unit() -> String {
    ["/lib/systemd/system/slurmd.service", "/usr/lib/systemd/system/slurmd.service"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_else(|| "[Unit]\nDescription=Slurm node daemon\n\n[Service]\nType=simple\nExecStart=/usr/sbin/slurmd -D -s\n".into())
}

/// The drop-in, run as systemd runs it, with `gres-rs` replaced by
/// stand-ins (no package, no root): a removed gres-rs lets slurmd start,
/// a check that hangs is killed after 10 seconds and slurmd starts (the
/// journal says so), only the fatal verdict (exit status 1) refuses the
/// start, any other failure lets it start; the real check is run with
/// `--no-detect` and `--fail-on fatal`.  `systemd-analyze verify` takes
/// slurmd's unit with it where this machine has no `/usr/bin/gres-rs`.
#[test]
fn the_slurmd_drop_in_starts_slurmd_unless_the_check_is_fatal() {
    let text = std::fs::read_to_string(workspace_root().join(DROP_IN)).expect("the drop-in");
    let argv = exec_start_pre(&text);
    assert!(argv.len() == 3 && argv[0] == "/bin/sh" && argv[1] == "-c", "ExecStartPre= is not a guarded /bin/sh -c '...': {argv:?}");
    let script = &argv[2];
    for want in ["test -x /usr/bin/gres-rs", "timeout -k ", "/usr/bin/gres-rs check --quiet --no-detect --fail-on fatal"] {
        assert!(script.contains(want), "{want} not in the drop-in's command: {script}");
    }
    let dir = TempDir::new(&format!("gres-rs-drop-in-{}", std::process::id()));
    let n = std::cell::Cell::new(0);
    let with = |stub: Option<&str>| -> (Option<i32>, String, Duration) {
        n.set(n.get() + 1);
        let path = dir.0.join(format!("gres-rs-{}", n.get()));
        if let Some(body) = stub {
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        let argv: Vec<String> = argv.iter().map(|w| w.replace("/usr/bin/gres-rs", &path.display().to_string())).collect();
        run_unit_command(Command::new(&argv[0]), &argv, &[])
    };
    let (code, out, _) = with(None);
    assert!(code == Some(0) && out.contains("is not installed: slurmd starts unchecked"), "without gres-rs: {code:?}\n{out}");
    let (code, out, _) = with(Some("echo \"$*\"; exit 0"));
    assert!(code == Some(0) && out.contains("check --quiet --no-detect --fail-on fatal"), "a passing check: {code:?}\n{out}");
    let (code, out, _) = with(Some("echo 'error[fatal]: slurmd stops' >&2; exit 1"));
    assert!(code == Some(1) && out.contains("error[fatal]") && out.contains("not started"), "a fatal verdict: {code:?}\n{out}");
    let (code, out, _) = with(Some("echo 'gres-rs: check: cannot read slurm.conf' >&2; exit 2"));
    assert!(code == Some(0) && out.contains("exit status 2"), "an unreadable slurm.conf: {code:?}\n{out}");
    let (code, out, took) = with(Some("trap '' TERM; sleep 60"));
    assert!(code == Some(0) && out.contains("did not finish in 10 seconds"), "a hanging check: {code:?}\n{out}");
    assert!(took < Duration::from_secs(20), "the hanging check held slurmd's start {took:?}");

    if !Path::new("/usr/bin/gres-rs").exists() {
        if let Some((ok, out)) = verify_slurmd_unit(&slurmd_unit(), &text) {
            assert!(ok && !out.contains("gres-rs"), "systemd-analyze verify slurmd.service with the drop-in, no /usr/bin/gres-rs:\n{out}");
        }
    }
}
