//! The report: the machine's facts, the table on stdout and the JSON.

use crate::row::Row;
use gres_test_harness::tool;
use std::fmt::Write as _;
use std::process::Command;

pub fn cmd_line(prog: &str, args: &[&str]) -> String {
    Command::new(prog).args(args).output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

pub fn machine() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo.lines().find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())).unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 =
        meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:")).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let os = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    vec![
        ("cpu".into(), format!("{model} ({cpus} CPUs available)")),
        ("memory".into(), format!("{:.1} GiB", mem_kib / 1024.0 / 1024.0)),
        ("os".into(), format!("{os}, kernel {}", cmd_line("uname", &["-r"]))),
        ("slurm".into(), cmd_line(&tool("slurmd").to_string_lossy(), &["-V"])),
        ("rustc".into(), cmd_line("rustc", &["-V"])),
        ("load average at start".into(), load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
    ]
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.is_nan() => "-".into(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

pub fn table(rows: &[Row]) -> String {
    let mut s = String::from("| Slurm | what | metric | stock | ours | ours/stock | goal | n | note |\n|---|---|---|---:|---:|---:|---|---:|---|\n");
    for r in rows {
        let unit = if r.unit.is_empty() { String::new() } else { format!(" {}", r.unit) };
        let val = |v: Option<f64>| if v.is_some() { format!("{}{unit}", fmt_num(v)) } else { "-".into() };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.release,
            r.what,
            r.metric,
            val(r.stock),
            val(r.ours),
            r.ratio().map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into()),
            r.goal,
            r.n,
            r.note
        );
    }
    s
}

/// `target/bench.json`: when, how long, the machine, and each row with its
/// ratio (numbers that are not finite as `null`).
pub fn json(machine: &[(String, String)], rows: &[Row], started: &str, secs: f64) -> String {
    #[derive(serde::Serialize)]
    struct Report<'a> {
        started: &'a str,
        duration_s: f64,
        #[serde(serialize_with = "in_order")]
        machine: &'a [(String, String)],
        rows: Vec<JsonRow<'a>>,
    }
    #[derive(serde::Serialize)]
    struct JsonRow<'a> {
        group: &'a str,
        release: &'a str,
        what: &'a str,
        metric: &'a str,
        unit: &'a str,
        stock: Option<f64>,
        ours: Option<f64>,
        ratio: Option<f64>,
        n: usize,
        goal: &'a str,
        note: &'a str,
    }
    /// The machine's facts as an object, in their order.
    fn in_order<S: serde::Serializer>(m: &&[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k, v)))
    }
    let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
    let report = Report {
        started,
        // In tenths of a second.
        duration_s: format!("{secs:.1}").parse().unwrap_or(secs),
        machine,
        rows: rows
            .iter()
            .map(|r| JsonRow {
                group: r.group,
                release: &r.release,
                what: &r.what,
                metric: &r.metric,
                unit: &r.unit,
                stock: finite(r.stock),
                ours: finite(r.ours),
                ratio: finite(r.ratio()),
                n: r.n,
                goal: &r.goal,
                note: &r.note,
            })
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&report).expect("the report serializes");
    s.push('\n');
    s
}
