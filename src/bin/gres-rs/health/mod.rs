//! `gres-rs health`: one health check of this node's GPUs, as Slurm's
//! `HealthCheckProgram` runs it (as root, every `HealthCheckInterval`,
//! killed after 60 s, with only `SLURMD_NODENAME` in its environment).
//!
//! The facts come from here ([`inventory`], [`kmsg_source`], NVML through
//! `gres-nvml`, [`slurm_node`]); what they mean and what to do is
//! `gres-health`'s: the fault table, the XID cursor, the drain reason, the
//! verdict.  This module runs the sequence and writes what it did.

pub mod guard;
pub mod inventory;
pub mod kmsg_source;
pub mod nvml_findings;
pub mod slurm_node;
pub mod state_lock;
pub mod step_records;
pub mod xid_log;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use gres_health::atomic_file::write_atomically;
use gres_health::catalog::{Action, Rule, XIDS};
use gres_health::cursor::Cursor;
use gres_health::decide::{decide, Cluster, Inputs, NodeState as HealthNode, Verdict};
use gres_health::fault::{Fault, FaultKind, Finding, GpuRef, Source};
use gres_health::overrides::{self, SiteConfig};
use gres_health::report::{render_metrics, summarize, RunStats, Summary};

use slurm_gpu_gres::predict::slurm_conf::SlurmConf;
use slurm_gpu_gres::predict::slurm_gres::gres_cnt;

use crate::installed::program;
use crate::render::JsonHeader;
use crate::{tool_error, HealthArgs, HealthFormat};

/// The tool's own failure (it could not check): distinct from the
/// verdicts' statuses (0 healthy, 1 warnings, 3 unhealthy, 4 guard).
const EXIT_CANNOT_CHECK: u8 = 2;

/// The site's file of rules, read when it exists.
pub const DEFAULT_CONFIG: &str = "/etc/slurm/gres-rs-health.conf";

/// Where the XID cursor lives by default.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/gres-rs";

/// The longest `sinfo` or `scontrol` may take (less when the run's budget
/// has less left): slurmd kills the whole check at 60 s.
const SLURM_COMMAND_LIMIT: Duration = Duration::from_secs(15);

/// The least a Slurm command is given, however late the run is: a check
/// that read the GPUs tells Slurm what it found.
const SLURM_COMMAND_FLOOR: Duration = Duration::from_secs(2);

/// What a Slurm command may take when the run must end by `end`.
fn slurm_limit(end: Instant) -> Duration {
    end.saturating_duration_since(Instant::now()).clamp(SLURM_COMMAND_FLOOR, SLURM_COMMAND_LIMIT)
}

/// The longest a run waits for another run's lock on the state directory
/// (a quarter of the budget at most).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// What the run keeps for Slurm's commands at the end of its budget
/// (`--budget`): reading the node's state, draining, and the guard's
/// second look.
const SLURM_RESERVE: Duration = Duration::from_secs(15);

/// What one run found and did.
struct Run {
    /// When the run began: its budget counts from here.
    started: Instant,
    findings: Vec<Finding>,
    notes: Vec<String>,
    summary: Option<Summary>,
    acted: Option<String>,
    stats: RunStats,
}

pub fn run(args: &HealthArgs) -> u8 {
    let site = match site_config(args) {
        Ok(s) => s,
        Err(e) => {
            tool_error(e);
            return EXIT_CANNOT_CHECK;
        }
    };
    if args.list_faults {
        print!("{}", fault_table(&site));
        return 0;
    }
    let state_dir = args.state_dir.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
    if args.jobs {
        return match step_records::list_jobs(&state_dir, args.format) {
            Ok(text) => {
                print!("{text}");
                if args.format == HealthFormat::Json {
                    println!();
                }
                0
            }
            Err(e) => {
                tool_error(e);
                EXIT_CANNOT_CHECK
            }
        };
    }
    let boot_id = read_boot_id();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut run = Run { started: Instant::now(), findings: Vec::new(), notes: Vec::new(), summary: None, acted: None, stats: RunStats::default() };
    let budget = Duration::from_secs(args.budget);

    // One run at a time on a state directory (a dry run changes nothing
    // and takes no lock).
    let _lock = if args.dry_run {
        None
    } else {
        match state_lock::acquire(&state_dir, (budget / 4).min(LOCK_WAIT)) {
            Ok(l) => Some(l),
            Err(e) => {
                tool_error(e);
                return EXIT_CANNOT_CHECK;
            }
        }
    };
    let loaded = Cursor::load(&state_dir, now, args.dry_run);
    if let Some(w) = &loaded.warning {
        run.notes.push(w.clone());
    }
    let damaged = loaded.damaged;

    // 1. The kernel's log: XIDs since the last run.  Whatever the log
    // does (unreadable, huge, garbage), the rest is still checked.
    let mut next_cursor = xid_log::findings(args, loaded.cursor.as_ref(), damaged, &boot_id, &mut run.findings, &mut run.notes, &mut run.stats);
    // The XIDs our gpu/nvml saw hit a job step (`step_xids = on`), this
    // boot's only: a reboot cleared what they hit.
    let boot_time = kmsg_source::boot_time();
    let steps = step_records::new_records(&state_dir, &mut next_cursor, boot_time, &mut run.notes);
    run.stats.new_xids += steps.len() as u64;
    run.findings.extend(steps.iter().map(|r| r.finding()));
    // Events an earlier run saw and could not act on.
    let (kept, cleared) = gres_health::pending::after_boot(std::mem::take(&mut next_cursor.pending), &site.table, &boot_id);
    if cleared > 0 {
        run.notes.push(format!("{cleared} fault(s) kept from before the reboot dropped: the reboot cleared them"));
    }
    if !kept.is_empty() {
        run.notes.push(format!("{} fault(s) kept from an earlier run that could not act on them", kept.len()));
    }
    run.findings.extend(kept.iter().map(|e| e.finding()));
    // 2. NVML's readings, and what the machine shows outside NVML.
    let dev = inventory::device_minors(&args.dev_dir.clone().unwrap_or_else(|| PathBuf::from("/dev")));
    let pci = inventory::pci_gpus(&args.sys_dir.clone().unwrap_or_else(|| PathBuf::from("/sys")).join("bus/pci/devices"));
    let nvml = if args.no_nvml { None } else { nvml_checks(args, &site, &state_dir, !pci.is_empty() || !dev.is_empty(), &mut run) };
    let nvml_count = nvml.map(|(n, _)| n);
    let node_name = args.node.clone().or_else(|| std::env::var("SLURMD_NODENAME").ok()).unwrap_or_else(crate::host::short_hostname);
    // What slurm.conf configures for the node: fewer GPUs found than that
    // is what slurmctld drains a registering node for; more is the
    // admin's choice.  MIG devices count as GPUs there, not here: the
    // configured count is compared only when NVML counted the GPUs and
    // said MIG is off on every one (a count that could not be taken is
    // no mismatch).
    let configured = match nvml {
        Some((_, Some(false))) => configured_gpus(&node_name),
        _ => None,
    };
    run.notes.push(format!(
        "{} GPUs in NVML, {} GPU device files, {} NVIDIA GPUs on the PCI bus, {} configured",
        nvml_count.map_or("-".to_string(), |n| n.to_string()),
        dev.len(),
        pci.len(),
        configured.map_or("-".to_string(), |n| n.to_string()),
    ));
    let found = [Some(dev.len() as u32), Some(pci.len() as u32), nvml_count];
    let disagree = found.iter().flatten().any(|n| Some(*n) != found[1]);
    let too_few = configured.is_some_and(|c| found.iter().flatten().any(|n| *n < c));
    if disagree || too_few {
        let fault = Fault::CountMismatch { nvml: nvml_count.unwrap_or(0), dev_files: dev.len() as u32, pci: pci.len() as u32, configured };
        run.findings.push(Finding::new(fault, GpuRef::default(), Source::Pci));
    }

    // 3. The node as Slurm sees it, the verdict, and the action.
    // Without the node's state the check cannot know whose drain is on it:
    // it decides, says so, and changes nothing.
    let view = if args.no_slurm { Err("--no-slurm: Slurm not asked".to_string()) } else { slurm_view(&node_name, run.end(args)) };
    let (node, cluster, can_act) = match view {
        Ok((node, cluster)) => (node, cluster, true),
        Err(e) => {
            run.notes.push(format!("{e}; the node is left as it is"));
            (slurm_node::NodeState::default(), Vec::new(), false)
        }
    };
    // The guard counts the nodes held out now: a resumed node's reason may
    // linger in sinfo for a while.
    let reasons: Vec<&str> = cluster.iter().filter(|(_, s)| s.state.contains("drain")).map(|(_, s)| s.reason.as_str()).filter(|r| !r.is_empty()).collect();
    // The jobs each kernel XID hit: the steps that held its GPU then.
    let mut attributed = step_records::attribute(&state_dir, &boot_id, boot_time, now, &mut run.findings, &mut run.notes);
    if can_act && !attributed.is_empty() {
        if let Err(e) = job_users(&mut attributed, run.end(args)) {
            run.notes.push(format!("the users of the jobs an XID hit are not known: {e}"));
        }
    }
    // An XID both in the kernel's log and in a step's record is one fault
    // (the record's, naming also the steps the kernel's line was matched to).
    gres_health::steps::fold_kernel_duplicates(&mut run.findings);
    let decide_on = |findings: &[Finding]| {
        decide(&Inputs {
            node: HealthNode { state: &node.state, reason: Some(node.reason.as_str()).filter(|r| !r.is_empty()), reason_user: None },
            findings,
            table: &site.table,
            guard: site.guard,
            cluster: Cluster { total_nodes: cluster.len().max(1), reasons: &reasons },
            boot_id: &boot_id,
            our_user: None,
        })
    };
    let mut decision = decide_on(&run.findings);

    // 4. Save first, act after: the events this run must act on are kept
    // in the state (pending) before anything is done about them, so that
    // an outage or a failing scontrol loses none; and when the state
    // cannot be saved, no event is acted on (it would be acted on again
    // at every run: an admin's resume would be undone each time).
    let mut must_act: Vec<gres_health::pending::PendingEvent> = Vec::new();
    gres_health::pending::keep(&mut must_act, &site.table, &run.findings, &boot_id, now);
    let changes_node = matches!(decision.verdict, Verdict::Drain(_) | Verdict::Resume { .. });
    // Settled now: Slurm was asked and nothing needs doing, or it was
    // not to be asked (--no-slurm).
    let settled = (can_act && !changes_node) || args.no_slurm;
    next_cursor.pending = if settled { Vec::new() } else { must_act.clone() };
    let mut saved = args.dry_run;
    if !args.dry_run {
        match next_cursor.save(&state_dir) {
            Ok(()) => saved = true,
            Err(e) => {
                let events = run.findings.iter().filter(|f| f.fault.is_event()).count();
                run.notes.push(format!(
                    "cannot save the state in {}: {e}; the {events} XID(s) of this run are not acted on until it can be saved (they stay in the log)",
                    state_dir.display()
                ));
                if events > 0 {
                    decision = decide_on(&run.findings.iter().filter(|f| !f.fault.is_event()).cloned().collect::<Vec<_>>());
                }
                let warning = format!("the state directory {} cannot be written: XIDs are not acted on", state_dir.display());
                decision.warnings.push(warning);
                if decision.verdict == Verdict::Nothing {
                    decision.verdict = Verdict::Warn(decision.warnings.clone());
                }
            }
        }
    }
    // Kept for `--jobs` once this run's XIDs are this run's (saved).
    if saved && !args.dry_run && !attributed.is_empty() {
        if let Err(e) = step_records::keep_attributed(&state_dir, &attributed) {
            run.notes.push(format!("the jobs of this run's XIDs were not kept in {} for --jobs: {e}", state_dir.display()));
        }
    }
    run.acted = if can_act && saved { act(args, &node_name, &mut decision, &node, site.guard, cluster.len().max(1), run.end(args)) } else { None };
    run.summary = Some(summarize(&site.table, &run.findings, &decision));
    // Acted: nothing is pending any more.
    let acted_ok = run.acted.as_deref().is_some_and(|a| a.starts_with("ran:"));
    if !args.dry_run && saved && !next_cursor.pending.is_empty() && acted_ok {
        next_cursor.pending.clear();
        if let Err(e) = next_cursor.save(&state_dir) {
            run.notes.push(format!("cannot save the state in {} after acting: {e}; the next run may act on this run's XIDs again", state_dir.display()));
        }
    } else if !next_cursor.pending.is_empty() && !args.dry_run {
        run.notes.push(format!("{} fault(s) kept for the next run that can act on them", next_cursor.pending.len()));
    }
    run.stats.timestamp = now;
    output(args, &node_name, &run)
}

impl Run {
    /// When the whole run must end (`--budget`).
    fn end(&self, args: &HealthArgs) -> Instant {
        self.started + Duration::from_secs(args.budget)
    }

    /// When NVML's reading must end: the budget less what Slurm's
    /// commands need ([`SLURM_RESERVE`]), at least a third of the budget.
    fn nvml_deadline(&self, args: &HealthArgs) -> Instant {
        let budget = Duration::from_secs(args.budget);
        self.started + budget.saturating_sub(SLURM_RESERVE).max(budget / 3)
    }
}

fn site_config(args: &HealthArgs) -> Result<SiteConfig, String> {
    match &args.config {
        Some(path) => overrides::load(path).map_err(|e| e.to_string()),
        None if Path::new(DEFAULT_CONFIG).exists() => overrides::load(Path::new(DEFAULT_CONFIG)).map_err(|e| e.to_string()),
        None => Ok(SiteConfig::default()),
    }
}

/// The GPUs slurm.conf's `Gres=` gives `node` (every type counted, as
/// slurmctld counts them); `None` where slurm.conf cannot be read or does
/// not list the node.
fn configured_gpus(node: &str) -> Option<u32> {
    let conf = SlurmConf::load(&crate::default_slurm_conf()).ok()?;
    let gres = conf.node(node)?.gres().map(|g| g.value.clone()).unwrap_or_default();
    u32::try_from(gres_cnt(&gres, "gpu").0.count).ok()
}

/// NVML's readings as findings and notes; the XIDs' GPUs named by NVML's
/// index and UUID where their PCI bus id matches.  NVML's GPU count, when
/// it could count.  Where NVML cannot be used on a machine without NVIDIA
/// GPUs (`gpus_here` false) there is nothing to find.  An NVML answer that
/// may pass is a warning until `site.transient_runs` checks in a row saw
/// it (counted in the state directory, not saved with `--dry-run`).  The
/// reading ends by [`Run::nvml_deadline`], with what it read by then.
/// With the count, whether MIG is on (`None`: not known for every GPU).
fn nvml_checks(args: &HealthArgs, site: &SiteConfig, state_dir: &Path, gpus_here: bool, run: &mut Run) -> Option<(u32, Option<bool>)> {
    use slurm_gpu_gres::nvml::health::{read_health_within, Limits, Reading};
    let mut paths = slurm_gpu_gres::nvml::Paths::default();
    if let Some(lib) = &args.nvml_lib {
        paths.library = lib.clone().into_os_string();
    }
    let limits = Limits {
        per_call: Duration::from_millis(args.nvml_timeout),
        init: Duration::from_millis(args.nvml_init_timeout),
        until: Some(run.nvml_deadline(args)),
    };
    let reading = read_health_within(&paths, &limits);
    run.stats.nvml_calls = reading.nvml_calls;
    if let (Some(why), false) = (&reading.unusable, gpus_here) {
        run.notes.push(format!("NVML not used: {why} (no NVIDIA GPU here)"));
        return None;
    }
    for f in run.findings.iter_mut().filter(|f| f.gpu.index.is_none()) {
        if let Some(g) = reading.gpus.iter().map(nvml_findings::gpu_ref).find(|g| g.pci.is_some() && g.pci == f.gpu.pci) {
            f.gpu = g;
        }
    }
    let mut links = nvml_findings::load_links(state_dir);
    let read = nvml_findings::findings(&reading, &mut links);
    let mut streaks = nvml_findings::Streaks::load(state_dir);
    run.findings.extend(read.findings);
    run.findings.extend(streaks.advance(&read.transients, site.transient_runs));
    run.notes.extend(read.notes);
    if !args.dry_run {
        if let Err(e) = nvml_findings::save_links(state_dir, &links) {
            run.notes.push(format!("cannot save the NVLinks seen up in {}: {e}", state_dir.display()));
        }
        if let Err(e) = streaks.save(state_dir) {
            run.notes.push(format!("cannot save the NVML answers that may pass in {}: {e}", state_dir.display()));
        }
    }
    // MIG on (any GPU), off (every GPU said so), or not known (a GPU not
    // read, a call that failed).
    let mig = if reading.gpus.iter().any(|g| matches!(g.mig_mode, Reading::Value(true))) {
        Some(true)
    } else {
        let all_read = reading.device_count.is_some_and(|n| reading.gpus.len() == n as usize);
        (all_read && reading.gpus.iter().all(|g| matches!(g.mig_mode, Reading::Value(false) | Reading::NotSupported))).then_some(false)
    };
    reading.device_count.map(|n| (n, mig))
}

/// `--list-faults`: what each fault gets, as this build and the site's
/// file make it: every kind but XIDs, then every XID of NVIDIA's catalog.
fn fault_table(site: &SiteConfig) -> String {
    let row = |what: String, name: &str, rule: Rule| {
        let remedy = rule.remedy.map_or("-", |r| r.text());
        let resume = if rule.action != Action::Drain {
            "-"
        } else if rule.recoverable {
            "when clear"
        } else {
            "by hand"
        };
        format!("{what:<16} {:<7} {remedy:<26} {resume:<11} {name}\n", rule.action.word())
    };
    let mut out = format!("{:<16} {:<7} {:<26} {:<11} {}\n", "FAULT", "ACTION", "REMEDY", "RESUME", "WHAT");
    for (kind, word) in FaultKind::NAMED {
        out.push_str(&row(word.to_string(), "", site.table.rule_of_kind(kind)));
    }
    for x in XIDS {
        out.push_str(&row(format!("xid {}", x.code), x.name, site.table.rule_of_kind(FaultKind::Xid(x.code))));
    }
    out.push_str(&row("xid (other)".into(), "an XID the catalog does not list", site.table.unknown_xid_rule()));
    out
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`); empty where the
/// kernel does not say.
fn read_boot_id() -> String {
    gres_core::bounded_read::read_bounded(Path::new("/proc/sys/kernel/random/boot_id"), 64)
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default()
}

/// The user of each job in `rows`, from slurmctld (`squeue -t all`: the
/// jobs it still knows, running or ended within its `MinJobAge`); the
/// step's own environment is the user's and is not trusted for it.
fn job_users(rows: &mut [gres_health::step_windows::Attributed], end: Instant) -> Result<(), String> {
    let mut ids: Vec<String> = rows.iter().map(|r| r.step.job.to_string()).collect();
    ids.sort();
    ids.dedup();
    let squeue = program("squeue").ok_or("no squeue found")?;
    let text = slurm_node::run_limited(&squeue, &["-h", "-t", "all", "-j", &ids.join(","), "-o", "%i|%U"], slurm_limit(end))?;
    for line in text.lines() {
        let Some((job, uid)) = line.trim().split_once('|') else { continue };
        let (Ok(job), Ok(uid)) = (job.trim().parse::<u32>(), uid.trim().parse::<u32>()) else { continue };
        for r in rows.iter_mut().filter(|r| r.step.job == job) {
            r.uid = Some(uid);
        }
    }
    Ok(())
}

/// This node's state and reason, and every node's (for the guard).
fn slurm_view(node: &str, end: Instant) -> Result<(slurm_node::NodeState, Vec<(String, slurm_node::NodeState)>), String> {
    let sinfo = program("sinfo").ok_or("no sinfo found")?;
    let text = slurm_node::run_limited(&sinfo, &["-h", "-N", "-o", slurm_node::SINFO_FORMAT], slurm_limit(end))?;
    let all = guard::nodes(&text);
    let this = all.iter().find(|(n, _)| n == node).map(|(_, s)| s.clone()).ok_or_else(|| format!("sinfo does not list node {node}"))?;
    Ok((this, all))
}

/// Drain or resume through `scontrol` (not with `--dry-run`); what was
/// done, in words.  A drain that takes `state` (the node as it was read)
/// out of service is checked by the cluster guard's second look
/// ([`guard::second_look`]) under `guard`'s limit for `total_nodes`: over
/// the limit the drain is undone and `decision` becomes the guard's
/// refusal.
fn act(
    args: &HealthArgs,
    node: &str,
    decision: &mut gres_health::decide::Decision,
    state: &slurm_node::NodeState,
    guard: gres_health::overrides::Guard,
    total_nodes: usize,
    end: Instant,
) -> Option<String> {
    let (verb, reason) = match &decision.verdict {
        Verdict::Drain(r) => ("DRAIN", Some(r.clone())),
        Verdict::Resume { .. } => ("RESUME", None),
        _ => return None,
    };
    let node_arg = format!("NodeName={node}");
    let state_arg = format!("State={verb}");
    let reason_arg = reason.as_ref().map(|r| format!("Reason={}", r.text));
    let mut argv: Vec<&str> = vec!["update", &node_arg, &state_arg];
    if let Some(r) = &reason_arg {
        argv.push(r);
    }
    if args.dry_run {
        return Some(format!("would run: scontrol {}", argv.join(" ")));
    }
    let Some(scontrol) = program("scontrol") else { return Some("no scontrol found: the node was not changed".into()) };
    let ran = match slurm_node::run_limited(&scontrol, &argv, slurm_limit(end)) {
        Ok(_) => format!("ran: scontrol {}", argv.join(" ")),
        Err(e) => return Some(format!("the node was not changed: {e}")),
    };
    let before = HealthNode { state: &state.state, reason: None, reason_user: None };
    let limit = gres_health::decide::second_look_limit(guard, total_nodes, before, &decision.verdict);
    let (Some(reason), Some(limit)) = (reason, limit) else { return Some(ran) };
    Some(match guard::second_look(node, &reason.text, limit, end.max(Instant::now() + SLURM_COMMAND_FLOOR)) {
        guard::Look::Kept { .. } => ran,
        guard::Look::Undone { before, command } => {
            decision.verdict = Verdict::GuardRefused { reason, drained: before, limit };
            format!("{ran}; then the guard found {before} nodes drained by gres-rs before this one (limit {limit}): drained and undone: ran: {command}")
        }
        guard::Look::Unsettled(why) => format!("{ran}; the guard's second look: {why}"),
    })
}

fn output(args: &HealthArgs, node: &str, run: &Run) -> u8 {
    let Some(summary) = &run.summary else { return EXIT_CANNOT_CHECK };
    if let Some(path) = &args.textfile {
        // Replaced whole: the collector never reads half a file.
        if let Err(e) = write_atomically(path, render_metrics(summary, run.stats).as_bytes()) {
            tool_error(format!("cannot write {}: {e}", path.display()));
        }
    }
    match args.format {
        HealthFormat::Json => println!("{}", json(node, run, summary)),
        HealthFormat::Text => {
            for n in &run.notes {
                println!("note: {n}");
            }
            for f in &summary.findings {
                let gpu = f.gpu.map_or_else(|| "node".to_string(), |g| format!("gpu {g}"));
                let remedy = f.remedy.map(|r| format!(" -> {r}")).unwrap_or_default();
                let jobs = if f.jobs.is_empty() { String::new() } else { format!(" job {}", f.jobs.join(" ")) };
                println!("{}: {gpu}: {} [{}]{remedy} ({}){jobs}", f.action, f.text, f.kind, f.source);
            }
            let reason = summary.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            println!("verdict: {}{reason}", summary.verdict);
            if let Some(a) = &run.acted {
                println!("{a}");
            }
        }
    }
    u8::try_from(summary.exit_status).unwrap_or(EXIT_CANNOT_CHECK)
}

/// `--format json`: the tool's header, then the run.
#[derive(Serialize)]
struct JsonHealth<'a> {
    #[serde(flatten)]
    header: JsonHeader,
    node: &'a str,
    verdict: &'a str,
    reason: Option<&'a str>,
    waiting: Option<&'a str>,
    /// When the guard refused: gres-rs's drained nodes and the limit.
    guard: Option<JsonGuard>,
    /// The scontrol command run (or, with --dry-run, that would run).
    action: Option<&'a str>,
    exit_status: i32,
    findings: Vec<JsonFinding<'a>>,
    warnings: &'a [String],
    notes: &'a [String],
    new_xids: u64,
    /// NVML calls made (0: NVML not asked).
    nvml_calls: u32,
}

#[derive(Serialize)]
struct JsonGuard {
    drained_by_gres_rs: usize,
    limit: usize,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    gpu: Option<u32>,
    uuid: Option<&'a str>,
    pci: Option<&'a str>,
    kind: &'a str,
    detail: &'a str,
    text: &'a str,
    action: &'a str,
    remedy: Option<&'a str>,
    recoverable: bool,
    source: &'a str,
    /// The job steps it hit (`12.0`): a step's record, or the steps whose
    /// GPUs it was on when the kernel logged it.
    jobs: &'a [String],
}

fn json(node: &str, run: &Run, s: &Summary) -> String {
    let findings = s
        .findings
        .iter()
        .map(|f| JsonFinding {
            gpu: f.gpu,
            uuid: f.uuid.as_deref(),
            pci: f.pci.as_deref(),
            kind: f.kind,
            detail: &f.detail,
            text: &f.text,
            action: f.action,
            remedy: f.remedy,
            recoverable: f.recoverable,
            source: &f.source,
            jobs: &f.jobs,
        })
        .collect();
    let doc = JsonHealth {
        header: JsonHeader::new(),
        node,
        verdict: s.verdict,
        reason: s.reason.as_deref(),
        waiting: s.waiting.as_deref(),
        guard: s.guard.map(|(drained_by_gres_rs, limit)| JsonGuard { drained_by_gres_rs, limit }),
        action: run.acted.as_deref(),
        exit_status: s.exit_status,
        findings,
        warnings: &s.warnings,
        notes: &run.notes,
        new_xids: run.stats.new_xids,
        nvml_calls: run.stats.nvml_calls,
    };
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
