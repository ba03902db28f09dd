//! Running external commands with timeouts, and stopping processes by PID.
//!
//! Everything here is std-only. Output is captured through files (not pipes)
//! so a grandchild that keeps a descriptor open can never hang the harness.

use std::fmt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

static CAPTURE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// What a finished (or timed-out) command produced.
#[derive(Clone, Debug)]
pub struct CmdOutput {
    /// The command line, for messages.
    pub cmdline: String,
    /// Exit code, `None` when killed by a signal or timed out.
    pub status: Option<i32>,
    /// Terminating signal, if any.
    pub signal: Option<i32>,
    /// True when the harness killed it after the timeout.
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl CmdOutput {
    /// How it ended, as a word: `exit N`, `signal N` or `timeout`.
    pub fn outcome(&self) -> String {
        if self.timed_out {
            "timeout".into()
        } else if let Some(c) = self.status {
            format!("exit {c}")
        } else {
            format!("signal {:?}", self.signal)
        }
    }

    /// Exit status 0 and not timed out.
    pub fn ok(&self) -> bool {
        !self.timed_out && self.status == Some(0)
    }

    /// stdout followed by stderr.
    pub fn combined(&self) -> String {
        let mut s = self.stdout.clone();
        if !s.is_empty() && !s.ends_with('\n') {
            s.push('\n');
        }
        s.push_str(&self.stderr);
        s
    }

    /// Panics with the full command output unless it succeeded.
    #[track_caller]
    pub fn expect_ok(self, what: &str) -> Self {
        if !self.ok() {
            panic!("{what} failed:\n{self}");
        }
        self
    }
}

impl fmt::Display for CmdOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "$ {}", self.cmdline)?;
        if self.timed_out {
            writeln!(f, "  -> TIMED OUT after {:.1?}", self.elapsed)?;
        } else if let Some(c) = self.status {
            writeln!(f, "  -> exit status {c} ({:.1?})", self.elapsed)?;
        } else {
            writeln!(f, "  -> killed by signal {:?} ({:.1?})", self.signal, self.elapsed)?;
        }
        writeln!(f, "---- stdout ----\n{}", self.stdout.trim_end())?;
        write!(f, "---- stderr ----\n{}", self.stderr.trim_end())
    }
}

/// Human-readable rendering of a `Command` (program + args + notable env).
pub fn describe(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        let k = k.to_string_lossy();
        if k.starts_with("LD_") || k == "SLURM_CONF" {
            if let Some(v) = v {
                s.push_str(&format!("{k}={} ", v.to_string_lossy()));
            }
        }
    }
    s.push_str(&cmd.get_program().to_string_lossy());
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$;&|<>()*?".contains(c)) {
            s.push_str(&format!(" '{}'", a.replace('\'', "'\\''")));
        } else {
            s.push(' ');
            s.push_str(&a);
        }
    }
    s
}

/// Runs `cmd` to completion or until `timeout`, capturing stdout/stderr in
/// files under `capture_dir` (which must exist). stdin is /dev/null.
/// On timeout the child is killed with SIGTERM, then SIGKILL.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration, capture_dir: &Path) -> CmdOutput {
    let seq = CAPTURE_SEQ.fetch_add(1, Ordering::SeqCst);
    let out_path = capture_dir.join(format!("cmd-{}-{seq}.out", std::process::id()));
    let err_path = capture_dir.join(format!("cmd-{}-{seq}.err", std::process::id()));
    let cmdline = describe(&cmd);
    let start = Instant::now();
    let spawn = (|| -> std::io::Result<Child> {
        let out = File::create(&out_path)?;
        let err = File::create(&err_path)?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn()
    })();
    let mut child = match spawn {
        Ok(c) => c,
        Err(e) => {
            return CmdOutput {
                cmdline,
                status: None,
                signal: None,
                timed_out: false,
                stdout: String::new(),
                stderr: format!("harness: failed to spawn: {e}"),
                elapsed: start.elapsed(),
            }
        }
    };
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(_) => break None,
        }
        if start.elapsed() >= timeout {
            timed_out = true;
            break terminate_child(&mut child, "command", Duration::from_secs(3));
        }
        thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &PathBuf| {
        let s = fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let _ = fs::remove_file(p);
        s
    };
    let (code, signal) = split_status(status);
    CmdOutput {
        cmdline,
        status: if timed_out { None } else { code },
        signal,
        timed_out,
        stdout: read(&out_path),
        stderr: read(&err_path),
        elapsed: start.elapsed(),
    }
}

fn split_status(st: Option<ExitStatus>) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match st {
        Some(st) => (st.code(), st.signal()),
        None => (None, None),
    }
}

/// Sends `sig` (e.g. "TERM") to exactly one PID using kill(1).
pub fn send_signal(pid: u32, sig: &str) -> bool {
    if pid == 0 || pid == std::process::id() {
        return false;
    }
    Command::new(super::tool("kill"))
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// SIGTERM a child we spawned, wait up to `grace`, then SIGKILL; reaps it.
pub fn terminate_child(child: &mut Child, _what: &str, grace: Duration) -> Option<ExitStatus> {
    if let Ok(Some(st)) = child.try_wait() {
        return Some(st);
    }
    send_signal(child.id(), "TERM");
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill(); // SIGKILL, by PID
    child.wait().ok()
}

/// True when `/proc/<pid>` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            // state is the first field after the ")" closing comm
            let state = s.rsplit_once(')').map(|(_, r)| r.trim_start()).and_then(|r| r.chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// A process that is not our child, as its PID and its start time (field
/// 22 of `/proc/<pid>/stat`, in clock ticks since boot): once it has
/// exited its PID may name another process (`pid_max` is 32,768 on many
/// machines, and a test run starts thousands), which the start time tells
/// apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessRef {
    pub pid: u32,
    start: u64,
}

impl ProcessRef {
    /// The process `pid` names now; `None` when there is none (or a zombie).
    pub fn of(pid: u32) -> Option<ProcessRef> {
        if !pid_alive(pid) {
            return None;
        }
        start_time(pid).map(|start| ProcessRef { pid, start })
    }

    /// Whether `pid` still names this process and it has not ended.
    pub fn alive(&self) -> bool {
        pid_alive(self.pid) && start_time(self.pid) == Some(self.start)
    }
}

/// Field 22 of `/proc/<pid>/stat`.
fn start_time(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the ")" that closes comm start with field 3.
    s.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// [`ProcessRef::of`] of each PID, taken at once after a scan found them.
pub fn process_refs(pids: &[u32]) -> Vec<ProcessRef> {
    pids.iter().filter_map(|p| ProcessRef::of(*p)).collect()
}

/// SIGTERM a process that is not our child (e.g. a stray slurmstepd of our
/// own cluster), wait up to `grace`, then SIGKILL it; each signal only
/// while its PID still names that process.
pub fn terminate_process(p: ProcessRef, grace: Duration) {
    if !p.alive() {
        return;
    }
    send_signal(p.pid, "TERM");
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !p.alive() {
            return;
        }
        thread::sleep(Duration::from_millis(25));
    }
    if p.alive() {
        send_signal(p.pid, "KILL");
    }
}

/// PIDs of processes (other than this one) that have a file descriptor, cwd,
/// or mapped file inside `dir` -- i.e. processes belonging to one test
/// cluster, whose unique temp dir nobody else uses.
pub fn pids_using_dir(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let prefix = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me || !pid_alive(pid) {
            continue;
        }
        let base = e.path();
        let mut hit = fs::read_link(base.join("cwd")).map(|p| p.starts_with(dir)).unwrap_or(false);
        if !hit {
            if let Ok(fds) = fs::read_dir(base.join("fd")) {
                hit = fds.flatten().any(|fd| fs::read_link(fd.path()).map(|p| p.starts_with(dir)).unwrap_or(false));
            }
        }
        if !hit {
            hit = fs::read_to_string(base.join("maps")).map(|m| m.contains(&prefix)).unwrap_or(false);
        }
        if hit {
            out.push(pid);
        }
    }
    out
}

/// Paths of all files mapped into a process (from `/proc/<pid>/maps`).
pub fn mapped_files(pid: u32) -> Result<Vec<String>, String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| format!("cannot read /proc/{pid}/maps: {e}"))?;
    Ok(paths_in_maps(&maps))
}

/// Paths of all files named in a maps text (deduplicated, in order).
pub fn paths_in_maps(maps: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for m in slurm_gpu_gres::proc_maps::mapped_files(maps) {
        // The path as the kernel shows it, ` (deleted)` included.
        let p = if m.deleted { format!("{} (deleted)", m.path) } else { m.path };
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_ref_outlives_its_process_only_as_dead() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let p = super::ProcessRef::of(child.id()).expect("sleep runs");
        assert!(p.alive());
        super::terminate_process(p, std::time::Duration::from_secs(5));
        child.wait().unwrap();
        assert!(!p.alive());
        // Another start time under the same PID is another process.
        let me = super::ProcessRef::of(std::process::id()).unwrap();
        assert!(me.alive());
        assert!(!super::ProcessRef { start: me.start + 1, ..me }.alive());
    }
}
