//! THE table: what each fault means.  For each XID NVIDIA documents, a
//! mnemonic, a short name for reasons ("fallen off the bus"), a class and
//! the catalog's immediate action ([`Bucket`]); from the bucket, the
//! [`Rule`]: ignore, warn, or drain with what the admin should do and
//! whether the tool may resume the node by itself once the fault cleared.
//! The faults that are not XIDs get their rule here too.  A site changes
//! any rule with an override file ([`crate::overrides`]).
//!
//! Sources.  The buckets are the "Resolution Bucket (Immediate Action)"
//! column of NVIDIA's Xid catalog for Ampere and newer GPUs
//! (<https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>),
//! as NVIDIA ships it machine-readable in NVSentinel's
//! `xiderrorsmapping.csv`, e.g. `79,ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS,
//! RESTART_BM,FATAL`, `48,ROBUST_CHANNEL_GPU_ECC_DBE,WORKFLOW_XID_48,FATAL`,
//! `95,ROBUST_CHANNEL_UNCONTAINED_ERROR,RESET_GPU,FATAL`,
//! `119,GSP_RPC_TIMEOUT,RESET_GPU,FATAL`.  Application faults follow
//! NVIDIA's k8s-device-plugin, whose health check skips "Application errors:
//! the GPU should still be healthy": 13, 31, 43, 45, 68 and 109.
//!
//! Where this table departs from the bucket (see [`Table::catalog_rule`]):
//! 63 and 92 (`IGNORE`) warn, as early signs of failing memory; 94
//! (`RESTART_APP`, "contained ECC error") warns; 109 (`RESET_GPU`) warns,
//! because the device plugin treats it as an application error; 64
//! (`RESET_GPU`, "retirement failure") drains without automatic resume,
//! since a reset cannot give back spare rows that are used up.

use std::collections::BTreeMap;

use crate::fault::{Fault, FaultKind, RecoveryKind};

mod xids;
pub use xids::{xid_entry, xid_name, Bucket, Class, XidEntry, XIDS};

/// What to do about a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Nothing: an application fault, or noise.
    Ignore,
    /// A line in the tool's output and the metrics; no drain.
    Warn,
    /// Drain the node.
    Drain,
}

impl Action {
    /// The word, as the override file and the metrics spell it.
    pub fn word(self) -> &'static str {
        match self {
            Action::Ignore => "ignore",
            Action::Warn => "warn",
            Action::Drain => "drain",
        }
    }
}

/// What a person should do to clear the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Remedy {
    /// Restart the application (nothing wrong with the GPU).
    RestartApp,
    /// Reset the GPU (`nvidia-smi -r`).
    ResetGpu,
    /// Reboot the node.
    RebootNode,
    /// Contact support, or replace the part.
    ContactSupport,
}

impl Remedy {
    /// The words a reason shows: "reset GPU".
    pub fn text(self) -> &'static str {
        match self {
            Remedy::RestartApp => "restart application",
            Remedy::ResetGpu => "reset GPU",
            Remedy::RebootNode => "reboot node",
            Remedy::ContactSupport => "contact support / replace",
        }
    }

    /// The word the override file uses: `reset`.
    pub fn word(self) -> &'static str {
        match self {
            Remedy::RestartApp => "restart",
            Remedy::ResetGpu => "reset",
            Remedy::RebootNode => "reboot",
            Remedy::ContactSupport => "support",
        }
    }

    /// Every remedy.
    pub const ALL: [Remedy; 4] = [Remedy::RestartApp, Remedy::ResetGpu, Remedy::RebootNode, Remedy::ContactSupport];
}

/// What the tool does about a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Ignore, warn or drain.
    pub action: Action,
    /// What a person should do.
    pub remedy: Option<Remedy>,
    /// Whether the tool may resume a node it drained for this, once the
    /// fault cleared (a state fault: the next clean check; an XID: after a
    /// GPU reset or a reboot, then a clean check).
    pub recoverable: bool,
}

impl Rule {
    /// Ignore.
    pub const IGNORE: Rule = Rule { action: Action::Ignore, remedy: None, recoverable: false };

    /// Warn, suggesting `remedy`.
    pub const fn warn(remedy: Option<Remedy>) -> Rule {
        Rule { action: Action::Warn, remedy, recoverable: false }
    }

    /// Drain, suggesting `remedy`.
    pub const fn drain(remedy: Remedy, recoverable: bool) -> Rule {
        Rule { action: Action::Drain, remedy: Some(remedy), recoverable }
    }
}

/// The catalog, with a site's changes applied over it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    overrides: BTreeMap<FaultKind, Rule>,
    unknown_xid: Option<Rule>,
}

impl Table {
    /// The catalog as shipped.
    pub fn new() -> Self {
        Table::default()
    }

    /// Replace the rule of one kind.
    pub fn set(&mut self, kind: FaultKind, rule: Rule) {
        self.overrides.insert(kind, rule);
    }

    /// Replace the rule for XIDs the catalog does not know.
    pub fn set_unknown_xid(&mut self, rule: Rule) {
        self.unknown_xid = Some(rule);
    }

    /// The rule for XIDs the catalog does not know: warn, by default (an
    /// XID no one documented is worth a line, not a drain).
    pub fn unknown_xid_rule(&self) -> Rule {
        self.unknown_xid.unwrap_or(Rule::warn(None))
    }

    /// The shipped rule for a kind (for the recovery action, the one the
    /// driver asks for decides the remedy; see [`Table::rule`]).
    pub fn catalog_rule(kind: FaultKind) -> Option<Rule> {
        Some(match kind {
            FaultKind::Xid(code) => {
                let entry = xid_entry(code)?;
                match code {
                    // Early signs of failing memory: the NVML checks drain
                    // when rows are pending or remapping failed.
                    63 | 92 => Rule::warn(Some(Remedy::ResetGpu)),
                    // Contained: the driver killed the application and
                    // offlined the page; the GPU keeps running.
                    94 => Rule::warn(Some(Remedy::RestartApp)),
                    // The k8s-device-plugin skips it as an application error.
                    109 => Rule::warn(Some(Remedy::RestartApp)),
                    // No spare rows left: a reset does not fix that.
                    64 => Rule::drain(Remedy::ResetGpu, false),
                    _ => bucket_rule(entry.bucket),
                }
            }
            FaultKind::DbeVolatile => Rule::drain(Remedy::ResetGpu, false),
            FaultKind::RetirePending => Rule::drain(Remedy::ResetGpu, false),
            FaultKind::RemapPending => Rule::drain(Remedy::ResetGpu, true),
            FaultKind::RemapFailure => Rule::drain(Remedy::ContactSupport, false),
            FaultKind::RecoveryAction => Rule::drain(Remedy::ResetGpu, true),
            FaultKind::GpuLost => Rule::drain(Remedy::RebootNode, true),
            FaultKind::NvmlError => Rule::drain(Remedy::RebootNode, true),
            // Not a fault yet: a fault once it lasts (`transient_runs`).
            FaultKind::NvmlTransient => Rule::warn(None),
            FaultKind::NvmlHang => Rule::drain(Remedy::RebootNode, true),
            FaultKind::CountMismatch => Rule::drain(Remedy::RebootNode, false),
            FaultKind::NvlinkDown => Rule::drain(Remedy::ResetGpu, true),
            FaultKind::Throttle => Rule::warn(None),
        })
    }

    /// The rule for a kind of fault: the site's, else the catalog's, else
    /// the unknown-XID default (what `gres-rs health --list-faults` prints;
    /// a recovery action's remedy depends on the action, see
    /// [`Table::rule`]).
    pub fn rule_of_kind(&self, kind: FaultKind) -> Rule {
        self.overrides.get(&kind).copied().or_else(|| Table::catalog_rule(kind)).unwrap_or_else(|| self.unknown_xid_rule())
    }

    /// The rule for a fault: the site's, else the catalog's, else the
    /// unknown-XID default.
    pub fn rule(&self, fault: &Fault) -> Rule {
        let kind = fault.kind();
        if let Some(rule) = self.overrides.get(&kind) {
            return *rule;
        }
        let Some(mut rule) = Table::catalog_rule(kind) else {
            return self.unknown_xid_rule();
        };
        if let Fault::RecoveryAction(what) = fault {
            match what {
                RecoveryKind::None => rule = Rule::IGNORE,
                RecoveryKind::NodeReboot => rule.remedy = Some(Remedy::RebootNode),
                _ => {}
            }
        }
        rule
    }
}

fn bucket_rule(bucket: Bucket) -> Rule {
    match bucket {
        Bucket::RestartApp => Rule { remedy: Some(Remedy::RestartApp), ..Rule::IGNORE },
        Bucket::Ignore | Bucket::WorkflowXid45 => Rule::IGNORE,
        Bucket::ResetGpu | Bucket::WorkflowNvlink => Rule::drain(Remedy::ResetGpu, true),
        Bucket::WorkflowXid48 => Rule::drain(Remedy::ResetGpu, false),
        Bucket::RestartBm | Bucket::RestartVm => Rule::drain(Remedy::RebootNode, true),
        Bucket::ReportIssue | Bucket::CheckMechanicals => Rule::drain(Remedy::ContactSupport, false),
        Bucket::UpdateSwfw | Bucket::CheckUvm | Bucket::FollowOther => Rule::warn(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xid(code: u32) -> Fault {
        Fault::Xid { code, pid: None, process: None, message: String::new() }
    }

    #[test]
    fn application_faults_never_drain() {
        let t = Table::new();
        for code in [13, 31, 43, 45, 68, 109] {
            assert_ne!(t.rule(&xid(code)).action, Action::Drain, "xid {code}");
            assert_eq!(xid_entry(code).unwrap().class, Class::Application);
        }
        assert_eq!(t.rule(&xid(13)).action, Action::Ignore);
    }

    #[test]
    fn hardware_xids_get_the_catalogs_action() {
        let t = Table::new();
        let r79 = t.rule(&xid(79));
        assert_eq!(r79, Rule::drain(Remedy::RebootNode, true));
        assert_eq!(xid_name(79), "fallen off the bus");
        assert_eq!(t.rule(&xid(48)), Rule::drain(Remedy::ResetGpu, false));
        assert_eq!(t.rule(&xid(95)), Rule::drain(Remedy::ResetGpu, true));
        assert_eq!(t.rule(&xid(119)), Rule::drain(Remedy::ResetGpu, true));
        assert_eq!(t.rule(&xid(120)), Rule::drain(Remedy::ResetGpu, true));
        assert_eq!(t.rule(&xid(74)).action, Action::Drain);
        assert_eq!(t.rule(&xid(64)), Rule::drain(Remedy::ResetGpu, false));
        assert_eq!(t.rule(&xid(63)).action, Action::Warn);
        assert_eq!(t.rule(&xid(94)).action, Action::Warn);
    }

    #[test]
    fn unknown_xids_warn_unless_the_site_says_otherwise() {
        let mut t = Table::new();
        assert_eq!(t.rule(&xid(999)).action, Action::Warn);
        assert_eq!(xid_name(999), "unknown xid");
        t.set_unknown_xid(Rule::drain(Remedy::ContactSupport, false));
        assert_eq!(t.rule(&xid(999)).action, Action::Drain);
    }

    #[test]
    fn non_xid_faults_share_the_table() {
        let t = Table::new();
        assert_eq!(t.rule(&Fault::DbeVolatile(1)).action, Action::Drain);
        assert!(t.rule(&Fault::RemapPending).recoverable);
        assert!(!t.rule(&Fault::RemapFailure).recoverable);
        assert_eq!(t.rule(&Fault::GpuLost).remedy, Some(Remedy::RebootNode));
        let throttle = t.rule(&Fault::Throttle(crate::fault::ThrottleKind::Power));
        assert_eq!(throttle.action, Action::Warn);
        let reboot = t.rule(&Fault::RecoveryAction(RecoveryKind::NodeReboot));
        assert_eq!(reboot.remedy, Some(Remedy::RebootNode));
        let none = t.rule(&Fault::RecoveryAction(RecoveryKind::None));
        assert_eq!(none.action, Action::Ignore);
    }

    #[test]
    fn a_site_override_wins() {
        let mut t = Table::new();
        t.set(FaultKind::Xid(13), Rule::drain(Remedy::ResetGpu, false));
        t.set(FaultKind::RemapPending, Rule::warn(None));
        assert_eq!(t.rule(&xid(13)).action, Action::Drain);
        assert_eq!(t.rule(&Fault::RemapPending).action, Action::Warn);
    }
}
