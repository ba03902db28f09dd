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
}

/// One line of `sinfo -h -N -o '%N|%T|%E'`: node, long state, reason (the
/// reason last, so that a `|` in it stays in it).
pub fn parse_sinfo_line(line: &str) -> Option<(String, NodeState)> {
    let mut parts = line.splitn(3, '|');
    let node = parts.next()?.trim();
    let state = parts.next()?.trim();
    let reason = parts.next().unwrap_or("").trim();
    if node.is_empty() {
        return None;
    }
    let reason = if reason == "none" { "" } else { reason };
    Some((node.to_string(), NodeState { state: state.to_ascii_lowercase(), reason: reason.to_string() }))
}

/// Runs `program args`, killing it after `limit`; its standard output, or
/// why there is none.
pub fn run_limited(program: &Path, args: &[&str], limit: Duration) -> Result<String, String> {
    let name = program.display();
    let mut child = Command::new(program)
        .args(args)
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
        assert_eq!(parse_sinfo_line("gpu01|idle|none"), Some(("gpu01".into(), NodeState { state: "idle".into(), reason: String::new() })));
        let (n, s) = parse_sinfo_line("gpu02|DRAINED|gres-rs: gpu 3 xid 79 | more").unwrap();
        assert_eq!((n.as_str(), s.state.as_str(), s.reason.as_str()), ("gpu02", "drained", "gres-rs: gpu 3 xid 79 | more"));
        assert_eq!(parse_sinfo_line(""), None);
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
