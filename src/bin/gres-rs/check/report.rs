//! What a check run found, as text or JSON, and the exit status.

use std::io::Write;

use gres_core::hostlist::ranged_string;
use serde::Serialize;
use slurm_gpu_gres::predict::{Problem, Severity};

use super::{Group, Outcome, Report};
use crate::render::{self, JsonHeader, JsonProblem, JsonRecord, Sources};
use crate::{tool_error, CheckArgs, CheckFormat, FailOn, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};

#[derive(Serialize)]
struct JsonNodes {
    names: Vec<String>,
    hostlist: String,
    local: bool,
    cpus: u32,
    autodetect: &'static str,
    /// slurmd starts (no fatal problem).
    starts: bool,
    gres: Vec<JsonRecord>,
    lines: Vec<String>,
    problems: Vec<JsonProblem>,
}

#[derive(Serialize, Default)]
struct Summary {
    nodes: usize,
    fatal: usize,
    errors: usize,
    warnings: usize,
}

#[derive(Serialize)]
struct JsonReport {
    #[serde(flatten)]
    header: JsonHeader,
    /// The Slurm release gres.conf was read as.
    slurm_release: String,
    slurm_conf: String,
    gres_conf: Option<String>,
    nodes: Vec<JsonNodes>,
    problems: Vec<JsonProblem>,
    summary: Summary,
}

impl Summary {
    fn count(&mut self, p: &Problem) {
        match p.severity {
            Severity::Fatal => self.fatal += 1,
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Note => {}
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub(super) fn output(args: &CheckArgs, report: &Report) -> u8 {
    let mut summary = Summary { nodes: report.groups.iter().map(|g| g.nodes.len()).sum(), ..Default::default() };
    report.file_problems.iter().for_each(|p| summary.count(p));
    report.groups.iter().flat_map(|g| g.outcome.problems.iter()).for_each(|p| summary.count(p));
    let shown = |p: &&Problem| args.verbose || p.severity != Severity::Note;
    let mut sources = Sources::default();
    let names = |g: &Group| -> Vec<String> { g.nodes.iter().map(|&i| report.entries[i].name.clone()).collect() };
    let several = summary.nodes > 1;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = match args.format {
        CheckFormat::Json => {
            let json = JsonReport {
                header: JsonHeader::new(),
                slurm_release: report.release.clone(),
                slurm_conf: report.slurm_conf.display().to_string(),
                gres_conf: report.gres_conf.as_ref().map(|p| p.display().to_string()),
                nodes: report
                    .groups
                    .iter()
                    .map(|g| {
                        let names = names(g);
                        let hostlist = ranged_string(&names);
                        let o = &g.outcome;
                        JsonNodes {
                            hostlist: hostlist.clone(),
                            names,
                            local: o.local,
                            cpus: o.cpus,
                            autodetect: o.prediction.autodetect.as_str(),
                            starts: !o.fatal(),
                            gres: o.prediction.records.iter().map(JsonRecord::new).collect(),
                            lines: o.prediction.lines.clone(),
                            problems: o.problems.iter().filter(shown).map(|p| render::json_problem(p, Some(&hostlist), &mut sources)).collect(),
                        }
                    })
                    .collect(),
                problems: report.file_problems.iter().filter(shown).map(|p| render::json_problem(p, None, &mut sources)).collect(),
                summary,
            };
            let r = serde_json::to_writer_pretty(&mut out, &json).map_err(std::io::Error::from).and_then(|()| writeln!(out));
            let code = exit_code(&json.summary, args.fail_on);
            return finish(r.and_then(|()| out.flush()), code);
        }
        CheckFormat::Text | CheckFormat::Slurmd => {
            let styled = render::styled_stderr();
            let mut err = String::new();
            for p in report.file_problems.iter().filter(shown) {
                err.push_str(&render::render_text(p, None, &mut sources, styled));
                err.push_str("\n\n");
            }
            let mut r = Ok(());
            for g in &report.groups {
                let names = names(g);
                let hostlist = ranged_string(&names);
                let o = &g.outcome;
                if !args.quiet {
                    // People's tables: a blank line between two nodes.
                    let gap = if args.format == CheckFormat::Text && !std::ptr::eq(g, &report.groups[0]) { "\n" } else { "" };
                    r = r.and_then(|()| write!(out, "{gap}{}", node_text(args.format, &hostlist, o)));
                }
                for p in o.problems.iter().filter(shown) {
                    let label = several.then_some(hostlist.as_str());
                    err.push_str(&render::render_text(p, label, &mut sources, styled));
                    err.push_str("\n\n");
                }
            }
            r = r.and_then(|()| out.flush());
            eprint!("{err}");
            eprintln!(
                "gres-rs: check: {}: {} fatal, {}, {}",
                plural(summary.nodes, "node", "nodes"),
                summary.fatal,
                plural(summary.errors, "error", "errors"),
                plural(summary.warnings, "warning", "warnings")
            );
            (r, exit_code(&summary, args.fail_on))
        }
    };
    finish(written.0, written.1)
}

/// A group of nodes on standard output: for people (`text`: a header line
/// and an aligned table), or the lines `slurmd -G` prints (`slurmd`).
fn node_text(format: CheckFormat, hostlist: &str, o: &Outcome) -> String {
    let autodetect = o.prediction.autodetect.as_str();
    let mut s = String::new();
    if format == CheckFormat::Slurmd {
        let state = if o.fatal() { " (slurmd stops, see below)" } else { "" };
        s.push_str(&format!("NodeName={hostlist} CPUs={} AutoDetect={autodetect}{state}\n", o.cpus));
        for l in &o.prediction.lines {
            s.push_str(l);
            s.push('\n');
        }
        return s;
    }
    s.push_str(&format!("{hostlist}: {} CPU{}, AutoDetect={autodetect}", o.cpus, if o.cpus == 1 { "" } else { "s" }));
    if o.fatal() {
        s.push_str(": slurmd stops (see below), no GRES\n");
    } else if o.prediction.records.is_empty() {
        s.push_str(&format!(", {}: no GRES\n", o.origin));
    } else {
        s.push_str(&format!(", {}\n", o.origin));
        s.push_str(&render::gres_table(&o.prediction.records));
    }
    s
}

/// 1 when a problem of at least the `--fail-on` severity was found.
fn exit_code(s: &Summary, fail_on: FailOn) -> u8 {
    let failing = match fail_on {
        FailOn::Fatal => s.fatal,
        FailOn::Error => s.fatal + s.errors,
        FailOn::Warning => s.fatal + s.errors + s.warnings,
    };
    if failing > 0 {
        EXIT_PROBLEMS
    } else {
        EXIT_OK
    }
}

fn finish(written: std::io::Result<()>, code: u8) -> u8 {
    match written {
        Ok(()) => code,
        // A closed pipe (`| head`) is not an error of the check.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Err(e) => {
            tool_error(format!("writing the report: {e}"));
            EXIT_USAGE
        }
    }
}
