//! The cluster guard's second look.  slurmctld runs the health check on
//! every node at once, so the count read before draining
//! (`gres_health::decide::decide`'s pre-check) is stale by the time the
//! drain lands: ten nodes that each saw one drain under a limit of two
//! would all drain.  So a node that drained itself looks again, once
//! slurmctld's clock is past the second its reason was set in, and undoes
//! its own drain when `limit` drains of gres-rs come before it
//! (`gres_health::decide::after_drain`, which says why exactly `limit`
//! stay).

use std::path::Path;
use std::time::{Duration, Instant};

use gres_health::decide::{after_drain, AfterDrain, OurDrain};
use gres_health::reason;

use super::slurm_node::{self, NodeState};
use crate::installed::program;

/// The longest the second look may take, every command and wait included:
/// slurmd kills the whole check at 60 s.
const LOOK_BUDGET: Duration = Duration::from_secs(15);

/// The wait after `scontrol` drained the node, before the first look:
/// slurmctld stamped the reason before `scontrol` returned, so a second
/// later its clock is past that second (the look reads that clock to be
/// sure).
const FIRST_WAIT: Duration = Duration::from_millis(1000);

/// The wait between looks while slurmctld's clock is not yet past it.
const NEXT_WAIT: Duration = Duration::from_millis(250);

/// What the second look found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// Within the limit: the drain stays.
    Kept {
        /// gres-rs's drains that come before this one.
        before: usize,
    },
    /// Over the limit: the drain was undone (`scontrol` as run).
    Undone {
        /// gres-rs's drains that come before this one.
        before: usize,
        /// The command that undid it.
        command: String,
    },
    /// The guard could not settle it (a failed command, the node's state
    /// changed by someone else meanwhile): what happened, in words.
    Unsettled(String),
}

/// The second look for `node`, drained just now with reason `ours`, under
/// the guard's `limit`, ending by `by` at the latest (the run's budget).
pub fn second_look(node: &str, ours: &str, limit: usize, by: Instant) -> Look {
    let failed = |why: String| Look::Unsettled(format!("{why}: the node stays drained, and gres-rs may hold more than {limit} nodes drained"));
    let deadline = (Instant::now() + LOOK_BUDGET).min(by);
    let (Some(sinfo), Some(scontrol)) = (program("sinfo"), program("scontrol")) else {
        return failed("no sinfo or scontrol found".into());
    };
    std::thread::sleep(FIRST_WAIT);
    let mut blind = None;
    let (me, all) = loop {
        // slurmctld's clock first, then the nodes: a drain stamped at or
        // before that clock's second has been applied when sinfo reads.
        let clock = run(&scontrol, &["show", "config"], deadline)
            .and_then(|t| slurm_node::parse_config_time(&t).ok_or_else(|| "no time in scontrol show config".into()));
        let all = match run(&sinfo, &["-h", "-N", "-o", slurm_node::SINFO_FORMAT], deadline) {
            Ok(text) => nodes(&text),
            Err(e) => return failed(e),
        };
        let Some(me) = all.iter().find(|(n, _)| n == node).map(|(_, s)| s.clone()) else {
            return failed(format!("sinfo no longer lists node {node}"));
        };
        match (clock, me.reason_time) {
            (Ok(now), Some(mine)) if now > mine => break (me, all),
            (Ok(_), Some(_)) if Instant::now() + NEXT_WAIT < deadline => std::thread::sleep(NEXT_WAIT),
            (Ok(now), Some(mine)) => return failed(format!("slurmctld's clock ({now}) did not pass the drain's second ({mine}) in time")),
            // Without either time the order is not known: this drain
            // counts itself last (every other drain comes before it).
            (Err(e), _) => {
                blind = Some(format!("slurmctld's clock not read ({e})"));
                break (me, all);
            }
            (Ok(_), None) => {
                blind = Some("sinfo shows no time for the drain".into());
                break (me, all);
            }
        }
    };
    if !me.state.contains("drain") || me.reason != ours {
        return Look::Unsettled(format!("the node changed meanwhile (now {}: {:?}): the guard leaves it as it is", me.state, me.reason));
    }
    let drains: Vec<OurDrain<'_>> = all
        .iter()
        .filter(|(_, s)| s.state.contains("drain") && reason::parse(&s.reason).is_some())
        .map(|(n, s)| OurDrain { node: n, since: s.reason_time })
        .collect();
    let mine = OurDrain { node, since: if blind.is_some() { None } else { me.reason_time } };
    match after_drain(limit, &mine, &drains) {
        AfterDrain::Keep { before } => Look::Kept { before },
        AfterDrain::Undo { before } => {
            // The reason was ours at the look; a change between the look
            // and the resume is not seen (scontrol has no compare-and-set).
            let node_arg = format!("NodeName={node}");
            let argv = ["update", node_arg.as_str(), "State=RESUME"];
            let how = blind.map(|b| format!(" ({b}: counted last)")).unwrap_or_default();
            match run(&scontrol, &argv, deadline) {
                Ok(_) => Look::Undone { before, command: format!("scontrol {}{how}", argv.join(" ")) },
                Err(e) => failed(format!("{before} drains of gres-rs come before this one (limit {limit}){how}, but undoing it failed: {e}")),
            }
        }
    }
}

/// Every node once (a node in several partitions is listed once a
/// partition), sorted by name.
pub fn nodes(sinfo: &str) -> Vec<(String, NodeState)> {
    let mut all: Vec<(String, NodeState)> = sinfo.lines().filter_map(slurm_node::parse_sinfo_line).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.dedup_by(|a, b| a.0 == b.0);
    all
}

/// `program args` within what is left of the look's budget.
fn run(program: &Path, args: &[&str], deadline: Instant) -> Result<String, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(format!("no time left for {} {}", program.display(), args.join(" ")));
    }
    slurm_node::run_limited(program, args, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_once() {
        let text = "n2|drained|2026-12-06T10:00:00|gres-rs: x\nn1|idle|Unknown|none\nn2|drained|2026-12-06T10:00:00|gres-rs: x\n\n";
        let all = nodes(text);
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["n1", "n2"]);
        assert_eq!(all[1].1.reason_time, Some(1_796_551_200));
    }
}
