//! A row of the report: one metric of one release, stock against ours.

use crate::stats::median;

#[derive(Clone, Debug, Default)]
pub struct Row {
    pub group: &'static str,
    /// The Slurm release measured, e.g. "24.11.5".
    pub release: String,
    pub what: String,
    pub metric: String,
    pub unit: String,
    pub stock: Option<f64>,
    pub ours: Option<f64>,
    /// Samples per side.
    pub n: usize,
    pub goal: String,
    pub note: String,
}

impl Row {
    /// Instructions of one `slurmd -G` a side (callgrind), in thousands.
    pub fn instructions(release: &str, what: String, stock: f64, ours: f64, note: &str) -> Row {
        Row {
            group: "slurmd-g",
            release: release.into(),
            what,
            metric: "instructions `slurmd -G` executes (valgrind callgrind)".into(),
            unit: "k".into(),
            stock: Some(stock / 1e3),
            ours: Some(ours / 1e3),
            n: 1,
            goal: "<= 1.00".into(),
            note: note.into(),
        }
    }
    /// Medians of memory samples (MiB) a side, against the 1 MiB goal.
    pub fn memory(group: &'static str, release: &str, what: &str, stock: &[f64], ours: &[f64], note: &str) -> Row {
        let (s, o) = (median(stock), median(ours));
        Row {
            group,
            release: release.into(),
            what: what.into(),
            metric: format!("difference ours - stock: {:+.2} MiB", o - s),
            unit: "MiB".into(),
            stock: Some(s),
            ours: Some(o),
            n: stock.len().min(ours.len()),
            goal: "difference < 1 MiB".into(),
            note: note.into(),
        }
    }
    /// A row that a release cannot measure: why, in its note.
    pub fn not_measured(group: &'static str, release: &str, what: &str, metric: &str, note: String) -> Row {
        Row { group, release: release.into(), what: what.into(), metric: metric.into(), goal: "-".into(), note, ..Default::default() }
    }
    pub fn ratio(&self) -> Option<f64> {
        match (self.stock, self.ours) {
            (Some(s), Some(o)) if s > 0.0 => Some(o / s),
            _ => None,
        }
    }
}
