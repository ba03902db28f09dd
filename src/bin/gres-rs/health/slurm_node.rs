//! The node as Slurm sees it, and the two changes `health` makes to it,
//! through Slurm's own commands (`sinfo`, `scontrol`), each with a time
//! limit: a slurmctld that does not answer must not hold the health check
//! past slurmd's budget.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a node's state and reason are now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeState {
    /// `sinfo`'s long state, e.g. `idle`, `drained`, `mixed+drain`.
    pub state: String,
    /// The reason a drain or down carries (empty: none).
    pub reason: String,
    /// When slurmctld set the reason, in seconds since the epoch (`sinfo
    /// %H`); `None` where it does not say.
    pub reason_time: Option<u64>,
}

/// `sinfo`'s format for [`parse_sinfo_line`]: node, long state, when the
/// reason was set, reason.
pub const SINFO_FORMAT: &str = "%N|%T|%H|%E";

/// One line of `sinfo -h -N -o '%N|%T|%H|%E'` ([`SINFO_FORMAT`]): node,
/// long state, the reason's time, reason (the reason last, so that a `|`
/// in it stays in it).
pub fn parse_sinfo_line(line: &str) -> Option<(String, NodeState)> {
    let mut parts = line.splitn(4, '|');
    let node = parts.next()?.trim();
    let state = parts.next()?.trim();
    let time = parts.next().unwrap_or("").trim();
    let reason = parts.next().unwrap_or("").trim();
    if node.is_empty() {
        return None;
    }
    let reason = if reason == "none" { "" } else { reason };
    Some((node.to_string(), NodeState { state: state.to_ascii_lowercase(), reason: reason.to_string(), reason_time: parse_time(time) }))
}

/// A time as Slurm's commands print it with `SLURM_TIME_FORMAT=standard`
/// (`2026-12-06T10:00:00`, which [`run_limited`] sets, in UTC), in seconds
/// since the epoch; `None` for `Unknown`, `None`, an empty field or
/// anything else.
pub fn parse_time(text: &str) -> Option<u64> {
    let (date, time) = text.trim().split_once('T')?;
    let num = |s: &str, len: usize| if s.len() == len && s.bytes().all(|b| b.is_ascii_digit()) { s.parse::<u64>().ok() } else { None };
    let d: Vec<&str> = date.split('-').collect();
    let t: Vec<&str> = time.split(':').collect();
    let ([y, mo, da], [h, mi, se]) = (d.as_slice(), t.as_slice()) else { return None };
    let (y, mo, da, h, mi, se) = (num(y, 4)?, num(mo, 2)?, num(da, 2)?, num(h, 2)?, num(mi, 2)?, num(se, 2)?);
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, da) * 86_400 + h * 3600 + mi * 60 + se)
}

/// Days from 1970-01-01 to a date of the Gregorian calendar (from 1970 on;
/// H. Hinnant's `days_from_civil`).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// slurmctld's clock, in seconds since the epoch, from the first line of
/// `scontrol show config` (`Configuration data as of <time>`: slurmctld
/// fills the time in as it answers, `_fill_ctld_conf` in
/// src/slurmctld/proc_req.c, 22.05 to 26.05).
pub fn parse_config_time(text: &str) -> Option<u64> {
    let first = text.lines().find(|l| !l.trim().is_empty())?;
    parse_time(first.trim().strip_prefix("Configuration data as of")?)
}

/// Runs `program args`, killing it after `limit`; its standard output, or
/// why there is none.  Slurm's commands print times in one form
/// (`SLURM_TIME_FORMAT=standard`, `TZ=UTC`): what [`parse_time`] reads,
/// whatever the caller's environment says.
pub fn run_limited(program: &Path, args: &[&str], limit: Duration) -> Result<String, String> {
    let name = program.display();
    let mut child = Command::new(program)
        .args(args)
        .env("SLURM_TIME_FORMAT", "standard")
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {name}: {e}"))?;
    // Read both pipes while it runs: a large cluster's sinfo writes more
    // than a pipe holds, and would wait for a reader forever.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{name} {} did not finish within {} s (killed)", args.join(" "), limit.as_secs_f32()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for {name}: {e}")),
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(format!("{name} {} failed ({status}): {}", args.join(" "), err.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinfo_lines() {
        let idle = NodeState { state: "idle".into(), reason: String::new(), reason_time: None };
        assert_eq!(parse_sinfo_line("gpu01|idle|Unknown|none"), Some(("gpu01".into(), idle.clone())));
        assert_eq!(parse_sinfo_line("gpu01|idle|None|none"), Some(("gpu01".into(), idle)));
        let (n, s) = parse_sinfo_line("gpu02|DRAINED|2026-12-06T10:00:00|gres-rs: gpu 3 xid 79 | more").unwrap();
        assert_eq!((n.as_str(), s.state.as_str(), s.reason.as_str()), ("gpu02", "drained", "gres-rs: gpu 3 xid 79 | more"));
        assert_eq!(s.reason_time, Some(1_796_551_200));
        assert_eq!(parse_sinfo_line("gpu03|idle").map(|(_, s)| s.reason_time), Some(None));
        assert_eq!(parse_sinfo_line(""), None);
    }

    #[test]
    fn times_as_slurm_prints_them() {
        assert_eq!(parse_time("1970-01-01T00:00:00"), Some(0));
        assert_eq!(parse_time("2000-03-01T00:00:01"), Some(951_868_801));
        assert_eq!(parse_time("2024-02-29T23:59:59"), Some(1_709_251_199));
        assert_eq!(parse_time(" 2026-12-06T10:00:00 "), Some(1_796_551_200));
        for bad in ["Unknown", "None", "", "2026-12-06", "2026-13-06T10:00:00", "2026-12-06T24:00:00", "26-12-06T10:00:00", "2026-12-06T10:00", "Dec 06 10:00"]
        {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        let config = "Configuration data as of 2026-12-06T10:00:05\nAccountingStorageBackupHost = (null)\n";
        assert_eq!(parse_config_time(config), Some(1_796_551_205));
        assert_eq!(parse_config_time("AccountingStorageBackupHost = (null)\n"), None);
        assert_eq!(parse_config_time(""), None);
    }

    #[test]
    fn a_command_past_its_limit_is_killed() {
        let t = Instant::now();
        let e = run_limited(Path::new("/bin/sleep"), &["5"], Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("did not finish"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3));
        assert_eq!(run_limited(Path::new("/bin/echo"), &["hi"], Duration::from_secs(5)).unwrap(), "hi\n");
        assert!(run_limited(Path::new("/bin/false"), &[], Duration::from_secs(5)).unwrap_err().contains("failed"));
    }
}
