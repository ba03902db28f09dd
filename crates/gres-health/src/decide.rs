//! The verdict: from the node's Slurm state, the findings and the table,
//! what the tool does to the node.  The rules:
//!
//! - a node drained (or down) with a reason that is not ours is never
//!   touched, whatever the findings ([`Verdict::Foreign`]);
//! - a node we drained is resumed only if its reason's resume condition
//!   holds ([`crate::reason::Resume`]) and no drain-class finding remains;
//!   otherwise it stays drained ([`Verdict::Hold`]), its reason replaced
//!   only by a stricter one;
//! - a healthy node is drained for a drain-class finding unless the
//!   cluster guard refuses: as many nodes as the site allows are already
//!   drained by gres-rs ([`Verdict::GuardRefused`]; a driver bug that
//!   makes every node look bad must not drain the cluster).  Checks that
//!   run at once all pass that count; each looks again after its drain
//!   and undoes it when over the limit ([`after_drain`]), so that exactly
//!   the limit stays drained.

use crate::catalog::{Action, Table};
use crate::fault::Finding;
use crate::overrides::Guard;
use crate::reason::{self, fault_words, DrainReason, Resume};

/// The node as Slurm shows it; strings as `sinfo`/`scontrol` print them.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeState<'a> {
    /// The state: `idle`, `mixed`, `drained`, `draining`, `IDLE+DRAIN`,
    /// `down*`...
    pub state: &'a str,
    /// The reason, if any.
    pub reason: Option<&'a str>,
    /// Who set the reason (`sinfo %u`), if known.
    pub reason_user: Option<&'a str>,
}

impl NodeState<'_> {
    /// Whether Slurm drains the node (drained or draining).
    pub fn is_drained(&self) -> bool {
        self.state.to_ascii_lowercase().contains("drain")
    }

    /// Whether Slurm holds the node out of service (drained, down, failed).
    pub fn is_out(&self) -> bool {
        let s = self.state.to_ascii_lowercase();
        s.contains("drain") || s.contains("down") || s.contains("fail")
    }
}

/// The cluster as the caller read it from `sinfo`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cluster<'a> {
    /// How many nodes the cluster has.
    pub total_nodes: usize,
    /// The reason of every node that has one (other nodes may be left out).
    pub reasons: &'a [&'a str],
}

impl Cluster<'_> {
    /// How many nodes gres-rs holds drained.
    pub fn drained_by_us(&self) -> usize {
        self.reasons.iter().filter(|r| reason::parse(r).is_some()).count()
    }
}

/// Everything the verdict depends on.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// This node.
    pub node: NodeState<'a>,
    /// What this run found.
    pub findings: &'a [Finding],
    /// The table (catalog and overrides).
    pub table: &'a Table,
    /// The cluster guard.
    pub guard: Guard,
    /// The cluster.
    pub cluster: Cluster<'a>,
    /// This boot's id.
    pub boot_id: &'a str,
    /// The user the tool's drains show as (`root`, or the SlurmUser): a
    /// `gres-rs:` reason set by another user is not ours.  `None`: do not
    /// check.
    pub our_user: Option<&'a str>,
}

/// What to do to the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Drain (or re-drain with a stricter reason).
    Drain(DrainReason),
    /// Resume: the node was drained by us and is clean now.
    Resume {
        /// The reason it was drained with.
        previous: String,
    },
    /// Nothing to do and nothing to say.
    Nothing,
    /// Nothing to do to the node; warnings to log.
    Warn(Vec<String>),
    /// A drain the guard refused.
    GuardRefused {
        /// The reason the node would have been drained with.
        reason: DrainReason,
        /// Nodes drained by gres-rs now.
        drained: usize,
        /// The guard's limit.
        limit: usize,
    },
    /// The node is out of service for someone else's reason: untouched.
    Foreign {
        /// That reason.
        reason: String,
    },
    /// Our drain stays.
    Hold {
        /// Our reason.
        reason: String,
        /// What it waits for.
        waiting: String,
    },
}

impl Verdict {
    /// A word for logs and metrics.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Drain(_) => "drain",
            Verdict::Resume { .. } => "resume",
            Verdict::Nothing => "nothing",
            Verdict::Warn(_) => "warn",
            Verdict::GuardRefused { .. } => "guard_refused",
            Verdict::Foreign { .. } => "foreign",
            Verdict::Hold { .. } => "hold",
        }
    }
}

/// The verdict and every warning line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub verdict: Verdict,
    /// One line per warn-class finding (whatever the verdict).
    pub warnings: Vec<String>,
    /// Whether any finding is drain-class.
    pub unhealthy: bool,
}

/// Exit status: nothing wrong (or resumed).
pub const EXIT_OK: i32 = 0;
/// Exit status: warnings only.
pub const EXIT_WARN: i32 = 1;
/// Exit status: the node is unhealthy (drained now, kept drained, or
/// drained by someone else).  (2 is the tool's own: a usage error or a
/// check that could not run.)
pub const EXIT_UNHEALTHY: i32 = 3;
/// Exit status: the node is unhealthy and the guard refused to drain it.
pub const EXIT_GUARD: i32 = 4;

impl Decision {
    /// The tool's exit status.
    pub fn exit_status(&self) -> i32 {
        match self.verdict {
            Verdict::GuardRefused { .. } => EXIT_GUARD,
            Verdict::Drain(_) | Verdict::Hold { .. } => EXIT_UNHEALTHY,
            _ if self.unhealthy => EXIT_UNHEALTHY,
            _ if !self.warnings.is_empty() => EXIT_WARN,
            _ => EXIT_OK,
        }
    }
}

fn boot8(boot_id: &str) -> String {
    boot_id.trim().chars().filter(|c| *c != '-').take(8).collect()
}

/// Decide.
pub fn decide(inp: &Inputs<'_>) -> Decision {
    let warnings: Vec<String> = inp
        .findings
        .iter()
        .filter(|f| inp.table.rule(&f.fault).action == Action::Warn)
        .map(|f| {
            let gpu = f.gpu.index.map_or_else(|| "node".to_owned(), |i| format!("gpu {i}"));
            format!("{gpu}: {} ({})", fault_words(&f.fault), f.source)
        })
        .collect();
    let drain = reason::drain_reason(inp.table, inp.findings, inp.boot_id);
    let unhealthy = drain.is_some();
    let verdict = verdict(inp, drain, &warnings);
    Decision { verdict, warnings, unhealthy }
}

fn verdict(inp: &Inputs<'_>, drain: Option<DrainReason>, warnings: &[String]) -> Verdict {
    let node = inp.node;
    let current = node.reason.map(str::trim).filter(|r| !r.is_empty());
    let user_ok = match (inp.our_user, node.reason_user) {
        (Some(ours), Some(theirs)) => ours == theirs,
        _ => true,
    };
    let ours = current.and_then(reason::parse).filter(|_| user_ok);
    match (current, ours) {
        // Someone else's reason, or out of service with none: hands off.
        (Some(r), None) => return Verdict::Foreign { reason: r.to_owned() },
        (None, None) if node.is_out() => return Verdict::Foreign { reason: String::new() },
        (Some(r), Some(our)) if node.is_out() => return ours_verdict(inp, r, our.resume, drain),
        _ => {}
    }
    match drain {
        Some(reason) => {
            let drained = inp.cluster.drained_by_us();
            match inp.guard.limit(inp.cluster.total_nodes) {
                Some(limit) if drained >= limit => Verdict::GuardRefused { reason, drained, limit },
                _ => Verdict::Drain(reason),
            }
        }
        None if warnings.is_empty() => Verdict::Nothing,
        None => Verdict::Warn(warnings.to_vec()),
    }
}

/// The limit the guard's second look ([`after_drain`]) holds a drain to:
/// `Some` when `verdict` takes `node` (as read before acting) out of
/// service and `guard` leaves fewer than all `total_nodes` to drain.  Our
/// own drain replaced by a stricter reason takes no node out; with the
/// guard off, or a limit of the whole cluster, no drain can pass it.
pub fn second_look_limit(guard: Guard, total_nodes: usize, node: NodeState<'_>, verdict: &Verdict) -> Option<usize> {
    let new = matches!(verdict, Verdict::Drain(_)) && !node.is_out();
    guard.limit(total_nodes).filter(|limit| new && *limit < total_nodes)
}

/// A node gres-rs holds drained, as the guard's second look reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OurDrain<'a> {
    /// The node's name.
    pub node: &'a str,
    /// When slurmctld set the node's reason, in seconds (`sinfo %H`);
    /// `None` where it does not say.
    pub since: Option<u64>,
}

/// What the guard's second look decides for a node that has just drained
/// itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDrain {
    /// Within the limit: the drain stays.
    Keep {
        /// gres-rs's drains that come before this one.
        before: usize,
    },
    /// Over the limit: the node undoes its own drain.
    Undo {
        /// gres-rs's drains that come before this one.
        before: usize,
    },
}

/// Whether `other` comes before `me` in the guard's order: by the time
/// slurmctld set the reason, then by node name.  A drain whose time is not
/// known comes before every other (an old one); where this node's own
/// time is not known, every other drain comes before it (it counts itself
/// last, the safe side).
pub fn drained_before(other: &OurDrain<'_>, me: &OurDrain<'_>) -> bool {
    match (other.since, me.since) {
        (_, None) | (None, Some(_)) => true,
        (Some(a), Some(b)) => (a, other.node) < (b, me.node),
    }
}

/// The guard's second look (`gres-rs health`, after `scontrol` drained
/// `me`): `drains` is every node gres-rs holds drained as `sinfo` shows
/// them (`me` among them or not; pre-existing drains too).  The drain
/// stays when fewer than `limit` drains come before it
/// ([`drained_before`]), else it is undone.
///
/// Why exactly `limit` drains stay when N nodes check at once, `already`
/// of them drained before (`already < limit`, or the pre-check in
/// [`decide`] refuses without draining): order every drain gres-rs sets
/// or holds by (time slurmctld set the reason, node name).  The caller
/// looks only once slurmctld's clock is past the second of its own
/// reason (`t_me`), so every drain that comes before it, stamped at or
/// before `t_me`, was applied before the look (slurmctld stamps and
/// applies a drain under its node write lock; `sinfo` reads under the read
/// lock) and shows in it, unless it was undone.  A drain among the first
/// `limit` is never undone: by induction along the order, the drains
/// before the k-th (k < limit) are the k kept before it, and drains that
/// come after it are not counted, so it sees k < limit.  The k-th drain
/// with k >= limit sees at least the first `limit`, all kept, and undoes
/// itself.  So the first `limit` stay, `limit - already` of them new
/// (all N when N is fewer), and the rest undo.  A drain resumed meanwhile
/// (an admin, a clean check) only lowers what later drains count: never
/// more than `limit` stay.
pub fn after_drain(limit: usize, me: &OurDrain<'_>, drains: &[OurDrain<'_>]) -> AfterDrain {
    let before = drains.iter().filter(|d| d.node != me.node && drained_before(d, me)).count();
    if before >= limit {
        AfterDrain::Undo { before }
    } else {
        AfterDrain::Keep { before }
    }
}

/// The node is out of service for a reason of ours.
fn ours_verdict(inp: &Inputs<'_>, current: &str, old: Resume, drain: Option<DrainReason>) -> Verdict {
    let hold = |waiting: &str| Verdict::Hold { reason: current.to_owned(), waiting: waiting.to_owned() };
    if let Some(new) = drain {
        // Replace the reason only by a stricter one: never loosen a drain.
        return if new.resume.rank() > old.rank() { Verdict::Drain(new) } else { hold("drain-class faults still present") };
    }
    let now = boot8(inp.boot_id);
    let resume = Verdict::Resume { previous: current.to_owned() };
    match old {
        Resume::Clear => resume,
        // A GPU reset leaves nothing the tool can rely on (NVML and the
        // driver report none), so a reset-class drain waits for a reboot
        // like a reboot-class one; after `nvidia-smi -r`, a person resumes.
        Resume::AfterReset(b) | Resume::AfterReboot(b) if b != now => resume,
        Resume::AfterReset(_) => hold("a reboot, or a person after a GPU reset: scontrol update nodename=<node> state=resume"),
        Resume::AfterReboot(_) => hold("a reboot"),
        Resume::Manual => hold("a person: scontrol update nodename=<node> state=resume"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{Fault, GpuRef, Source, ThrottleKind};

    const BOOT_A: &str = "0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d";
    const BOOT_B: &str = "9a8b7c6d-1111-4222-8333-444455556666";

    fn gpu(i: u32) -> GpuRef {
        GpuRef { index: Some(i), uuid: Some(format!("GPU-{i:08x}-0000-0000-0000-000000000000")), pci: Some(format!("0000:{:02x}:00.0", 0x41 + i)) }
    }

    fn xid(code: u32) -> Finding {
        let fault = Fault::Xid { code, pid: None, process: None, message: String::new() };
        Finding::new(fault, gpu(3), Source::Kmsg { seq: 5 })
    }

    fn nvml(fault: Fault) -> Finding {
        Finding::new(fault, gpu(1), Source::Nvml)
    }

    struct Case<'a> {
        state: &'a str,
        reason: Option<&'a str>,
        findings: Vec<Finding>,
        boot: &'a str,
        reasons: Vec<&'a str>,
        guard: Guard,
    }

    impl<'a> Case<'a> {
        fn new(state: &'a str, reason: Option<&'a str>, findings: Vec<Finding>) -> Self {
            Case { state, reason, findings, boot: BOOT_A, reasons: Vec::new(), guard: Guard::Nodes(3) }
        }

        fn run(&self) -> Decision {
            let table = Table::new();
            decide(&Inputs {
                node: NodeState { state: self.state, reason: self.reason, reason_user: None },
                findings: &self.findings,
                table: &table,
                guard: self.guard,
                cluster: Cluster { total_nodes: 40, reasons: &self.reasons },
                boot_id: self.boot,
                our_user: None,
            })
        }
    }

    fn drained_reason(findings: Vec<Finding>, boot: &str) -> String {
        let mut c = Case::new("idle", None, findings);
        c.boot = boot;
        match c.run().verdict {
            Verdict::Drain(r) => r.text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_healthy_node_with_a_bad_gpu_is_drained() {
        let d = Case::new("mixed", None, vec![xid(79)]).run();
        let Verdict::Drain(r) = &d.verdict else { panic!("{d:?}") };
        assert!(r.text.contains("xid 79 (fallen off the bus) -> reboot node"));
        assert_eq!(d.exit_status(), EXIT_UNHEALTHY);
    }

    #[test]
    fn an_admin_drain_is_never_touched() {
        let c = Case::new("drained", Some("bad cable, ticket 4711"), vec![xid(79)]);
        let d = c.run();
        assert_eq!(d.verdict, Verdict::Foreign { reason: "bad cable, ticket 4711".into() });
        assert_eq!(d.exit_status(), EXIT_UNHEALTHY);
        let clean = Case::new("IDLE+DRAIN", Some("maintenance"), vec![]).run();
        assert_eq!(clean.verdict, Verdict::Foreign { reason: "maintenance".into() });
        assert_eq!(clean.exit_status(), EXIT_OK);
        // A gres-rs reason set by another user is not ours either.
        let table = Table::new();
        let ours = drained_reason(vec![nvml(Fault::RemapPending)], BOOT_A);
        let d = decide(&Inputs {
            node: NodeState { state: "drained", reason: Some(&ours), reason_user: Some("alice") },
            findings: &[],
            table: &table,
            guard: Guard::Off,
            cluster: Cluster::default(),
            boot_id: BOOT_A,
            our_user: Some("root"),
        });
        assert!(matches!(d.verdict, Verdict::Foreign { .. }), "{d:?}");
    }

    #[test]
    fn a_recoverable_drain_is_resumed_only_when_clean() {
        let ours = drained_reason(vec![nvml(Fault::RemapPending)], BOOT_A);
        let still = Case::new("drained", Some(&ours), vec![nvml(Fault::RemapPending)]).run();
        assert!(matches!(still.verdict, Verdict::Hold { .. }), "{still:?}");
        let clean = Case::new("drained", Some(&ours), vec![]).run();
        assert_eq!(clean.verdict, Verdict::Resume { previous: ours.clone() });
        assert_eq!(clean.exit_status(), EXIT_OK);
        // A warn-class finding does not keep it drained.
        let warm = Case::new("drained", Some(&ours), vec![nvml(Fault::Throttle(ThrottleKind::Power))]).run();
        assert!(matches!(warm.verdict, Verdict::Resume { .. }));
        assert_eq!(warm.exit_status(), EXIT_WARN);
    }

    #[test]
    fn an_xid_drain_waits_for_a_reboot_then_resumes() {
        let ours = drained_reason(vec![xid(79)], BOOT_A);
        let same_boot = Case::new("drained", Some(&ours), vec![]).run();
        let Verdict::Hold { waiting, .. } = &same_boot.verdict else { panic!("{same_boot:?}") };
        assert_eq!(waiting, "a reboot");
        let mut rebooted = Case::new("drained", Some(&ours), vec![]);
        rebooted.boot = BOOT_B;
        assert!(matches!(rebooted.run().verdict, Verdict::Resume { .. }));
    }

    #[test]
    fn a_reset_class_drain_waits_for_a_reboot_or_a_person() {
        let ours = drained_reason(vec![xid(95)], BOOT_A);
        assert!(ours.contains("[resume:reset@"), "{ours}");
        let same_boot = Case::new("drained", Some(&ours), vec![]).run();
        let Verdict::Hold { waiting, .. } = &same_boot.verdict else { panic!("{same_boot:?}") };
        assert!(waiting.starts_with("a reboot, or a person after a GPU reset"), "{waiting}");
        let mut rebooted = Case::new("drained", Some(&ours), vec![]);
        rebooted.boot = BOOT_B;
        assert!(matches!(rebooted.run().verdict, Verdict::Resume { .. }));
    }

    #[test]
    fn a_manual_drain_is_never_resumed() {
        let ours = drained_reason(vec![nvml(Fault::RemapFailure)], BOOT_A);
        let mut c = Case::new("drained", Some(&ours), vec![]);
        c.boot = BOOT_B;
        assert!(matches!(c.run().verdict, Verdict::Hold { .. }));
    }

    #[test]
    fn our_drain_is_replaced_only_by_a_stricter_reason() {
        let loose = drained_reason(vec![nvml(Fault::NvlinkDown(2))], BOOT_A);
        let d = Case::new("drained", Some(&loose), vec![nvml(Fault::DbeVolatile(4))]).run();
        let Verdict::Drain(r) = &d.verdict else { panic!("{d:?}") };
        assert!(r.text.ends_with("[manual]"));
        let strict = drained_reason(vec![nvml(Fault::DbeVolatile(4))], BOOT_A);
        let d = Case::new("drained", Some(&strict), vec![nvml(Fault::NvlinkDown(2))]).run();
        assert!(matches!(d.verdict, Verdict::Hold { .. }), "{d:?}");
    }

    #[test]
    fn the_guard_refuses_at_the_threshold() {
        let other = drained_reason(vec![xid(79)], BOOT_A);
        let admin = "hardware swap";
        let mut c = Case::new("idle", None, vec![xid(48)]);
        c.reasons = vec![&other, &other, admin];
        c.guard = Guard::Nodes(3);
        assert!(matches!(c.run().verdict, Verdict::Drain(_)), "2 of 3: still allowed");
        c.reasons = vec![&other, &other, &other, admin];
        let d = c.run();
        let Verdict::GuardRefused { drained, limit, .. } = d.verdict else { panic!("{d:?}") };
        assert_eq!((drained, limit, d.exit_status()), (3, 3, EXIT_GUARD));
        // 10% of 40 nodes is 4.
        c.guard = Guard::Percent(10);
        assert!(matches!(c.run().verdict, Verdict::Drain(_)));
        c.guard = Guard::Off;
        assert!(matches!(c.run().verdict, Verdict::Drain(_)));
    }

    #[test]
    fn the_guard_looks_again_only_at_a_new_drain() {
        let d = Case::new("idle", None, vec![xid(79)]).run();
        let node = |state| NodeState { state, reason: None, reason_user: None };
        assert_eq!(second_look_limit(Guard::Nodes(2), 10, node("idle"), &d.verdict), Some(2));
        assert_eq!(second_look_limit(Guard::Nodes(2), 10, node("mixed"), &d.verdict), Some(2));
        assert_eq!(second_look_limit(Guard::Percent(10), 40, node("idle"), &d.verdict), Some(4));
        assert_eq!(second_look_limit(Guard::Off, 10, node("idle"), &d.verdict), None);
        // The limit is the whole cluster (one node: at least one): no look.
        assert_eq!(second_look_limit(Guard::Percent(10), 1, node("idle"), &d.verdict), None);
        assert_eq!(second_look_limit(Guard::Nodes(3), 3, node("idle"), &d.verdict), None);
        // Our drain replaced by a stricter one takes no node out.
        let loose = drained_reason(vec![nvml(Fault::NvlinkDown(2))], BOOT_A);
        let again = Case::new("drained", Some(&loose), vec![nvml(Fault::DbeVolatile(4))]).run();
        assert!(matches!(again.verdict, Verdict::Drain(_)), "{again:?}");
        assert_eq!(second_look_limit(Guard::Nodes(2), 10, node("drained"), &again.verdict), None);
        assert_eq!(second_look_limit(Guard::Nodes(2), 10, node("idle"), &Verdict::Nothing), None);
    }

    fn drain(node: &str, since: Option<u64>) -> OurDrain<'_> {
        OurDrain { node, since }
    }

    #[test]
    fn the_second_look_orders_by_time_then_name() {
        // Ten nodes drained in the same second, limit 2: n01 and n02 stay.
        let names: Vec<String> = (1..=10).map(|i| format!("n{i:02}")).collect();
        let all: Vec<OurDrain<'_>> = names.iter().map(|n| drain(n, Some(100))).collect();
        let kept: Vec<&str> = all.iter().filter(|me| matches!(after_drain(2, me, &all), AfterDrain::Keep { .. })).map(|d| d.node).collect();
        assert_eq!(kept, ["n01", "n02"]);
        assert_eq!(after_drain(2, &all[9], &all), AfterDrain::Undo { before: 9 });
        assert_eq!(after_drain(2, &all[1], &all), AfterDrain::Keep { before: 1 });
        // An earlier second wins over a smaller name.
        let mixed = [drain("n09", Some(99)), drain("n01", Some(100)), drain("n02", Some(100))];
        assert_eq!(after_drain(2, &mixed[0], &mixed), AfterDrain::Keep { before: 0 });
        assert_eq!(after_drain(2, &mixed[1], &mixed), AfterDrain::Keep { before: 1 });
        assert_eq!(after_drain(2, &mixed[2], &mixed), AfterDrain::Undo { before: 2 });
        // The node itself need not be in the list; the same one counts once.
        assert_eq!(after_drain(1, &drain("n05", Some(100)), &[drain("n05", Some(100))]), AfterDrain::Keep { before: 0 });
    }

    #[test]
    fn the_second_look_counts_earlier_drains() {
        // One drain from last week (its time unknown or old) and limit 2:
        // one new drain stays, whatever the names.
        for old in [drain("z99", None), drain("z99", Some(5))] {
            let now = [old, drain("n01", Some(100)), drain("n02", Some(100)), drain("n03", Some(101))];
            let kept: Vec<&str> = now[1..].iter().filter(|me| matches!(after_drain(2, me, &now), AfterDrain::Keep { .. })).map(|d| d.node).collect();
            assert_eq!(kept, ["n01"], "{old:?}");
        }
        // The limit already reached: every new drain is undone.
        let full = [drain("a", Some(1)), drain("b", Some(2)), drain("n01", Some(100))];
        assert_eq!(after_drain(2, &full[2], &full), AfterDrain::Undo { before: 2 });
        // A node that cannot read its own time counts itself last.
        let blind = [drain("a", Some(100)), drain("b", Some(200))];
        assert_eq!(after_drain(2, &drain("0", None), &blind), AfterDrain::Undo { before: 2 });
        assert_eq!(after_drain(3, &drain("0", None), &blind), AfterDrain::Keep { before: 2 });
        assert!(drained_before(&drain("x", None), &drain("a", Some(1))));
        assert!(!drained_before(&drain("b", Some(1)), &drain("a", Some(1))));
    }

    /// Every order in which N simultaneous checks can make their second
    /// look leaves exactly min(limit - already, N) new drains, as long as
    /// each looks after every drain stamped before its own second: the
    /// proof's claim, replayed on the ways a look can see the drains.
    #[test]
    fn simultaneous_checks_keep_exactly_the_limit() {
        for (n, limit, already) in [(10, 2, 0), (10, 2, 1), (3, 5, 0), (6, 3, 2), (1, 1, 0)] {
            let names: Vec<String> = (0..n).map(|i| format!("n{:02}", (i * 7) % n)).collect();
            let olds: Vec<String> = (0..already).map(|i| format!("old{i}")).collect();
            // Each node's second: some share one, later ones draw later.
            let since = |i: usize| Some(100 + (i as u64) / 3);
            let mut drains: Vec<OurDrain<'_>> = olds.iter().map(|o| drain(o, Some(10))).collect();
            drains.extend(names.iter().enumerate().map(|(i, name)| drain(name, since(i))));
            // The looks in the drains' order and in the reverse one (a
            // look may come before an earlier node's undo): each sees
            // every drain not undone yet, later ones included.
            let forward: Vec<usize> = (already..drains.len()).collect();
            for looks in [forward.clone(), forward.into_iter().rev().collect()] {
                let mut undone = vec![false; drains.len()];
                for &i in &looks {
                    let seen: Vec<OurDrain<'_>> = drains.iter().zip(&undone).filter(|(_, u)| !**u).map(|(d, _)| *d).collect();
                    if let AfterDrain::Undo { .. } = after_drain(limit, &drains[i], &seen) {
                        undone[i] = true;
                    }
                }
                let kept = undone[already..].iter().filter(|u| !**u).count();
                assert_eq!(kept, (limit - already).min(n), "n {n}, limit {limit}, already {already}");
            }
        }
    }

    #[test]
    fn warnings_and_application_faults_never_drain() {
        let d = Case::new("idle", None, vec![xid(13), xid(43), nvml(Fault::Throttle(ThrottleKind::Thermal))]).run();
        assert_eq!(d.verdict, Verdict::Warn(vec!["gpu 1: throttle thermal (nvml)".into()]));
        assert_eq!(d.exit_status(), EXIT_WARN);
        let d = Case::new("idle", None, vec![xid(13)]).run();
        assert_eq!(d.exit_status(), EXIT_OK);
        assert_eq!(d.verdict, Verdict::Nothing);
    }

    #[test]
    fn a_down_node_without_a_reason_is_left_alone() {
        let d = Case::new("down*", None, vec![xid(79)]).run();
        assert!(matches!(d.verdict, Verdict::Foreign { .. }));
        assert!(NodeState { state: "draining", ..NodeState::default() }.is_drained());
    }
}
