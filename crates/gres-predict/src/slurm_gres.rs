//! The node's `Gres=` of slurm.conf as slurmd counts it: names missing
//! from `GresTypes` dropped, counts per GRES and type, typed and untyped
//! counts of one GRES refused.

use crate::problem::{Problem, Severity};
use gres_config::counts::suffix_mult;
use gres_config::syntax::Location;
use gres_core::model::gres_build_id;
use gres_core::text::closest_key;

/// Slurm's `gres_name_filter()`: the items of a node's `Gres=` whose name
/// (before any `:`) is exactly one of `gres_types`, and the items dropped.
pub fn gres_name_filter(gres: &str, gres_types: &[String]) -> (Option<String>, Vec<String>) {
    if gres.is_empty() || gres_types.is_empty() {
        return (None, Vec::new());
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut dropped = Vec::new();
    for tok in gres.split(',').filter(|t| !t.is_empty()) {
        let name = tok.split(':').next().unwrap_or(tok);
        if gres_types.iter().any(|t| t == name) {
            kept.push(tok);
        } else {
            dropped.push(tok.to_string());
        }
    }
    ((!kept.is_empty()).then(|| kept.join(",")), dropped)
}

/// One GRES of a node as slurm.conf counts it (Slurm's node state before
/// the node registers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlurmGres {
    /// The GRES (`GresTypes` spelling).
    pub name: String,
    pub plugin_id: u32,
    /// The total count (`gres_cnt_config`).
    pub count: u64,
    /// Counts per type, in order of first mention (types with the same id
    /// are one type).
    pub types: Vec<(String, u64)>,
    pub no_consume: bool,
}

/// `strtoll()` of leading digits (no sign): saturates like it.
fn leading_number(s: &str) -> (u64, usize) {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let n = s[..digits].parse::<u64>().map_or(i64::MAX as u64, |n| n.min(i64::MAX as u64));
    (n, digits)
}

/// Slurm's `_get_gres_cnt()`: what a node's (filtered) `Gres=` says about
/// GRES `name`, and the error lines logged on the way.  Items are `name`
/// (a count of 1, and the end of the count), `name:count`,
/// `name:type[:type...][:count][(binding)]`; a count takes a `K`/`M`/`G`...
/// suffix; a bad suffix ends the count with an error.
pub fn gres_cnt(gres: &str, name: &str) -> (SlurmGres, Vec<String>) {
    let mut out = SlurmGres { name: name.to_string(), plugin_id: gres_build_id(name), ..Default::default() };
    let mut errors = Vec::new();
    let colon = format!("{name}:");
    for tok in gres.split(',').filter(|t| !t.is_empty()) {
        if tok == name {
            out.count = 1;
            break;
        }
        if !tok.starts_with(&colon) {
            continue;
        }
        let tok = tok.rfind('(').map_or(tok, |p| &tok[..p]);
        let Some(num) = tok.rfind(':') else {
            errors.push(format!("Bad GRES configuration: {tok}"));
            break;
        };
        let after = &tok[num + 1..];
        let (count, body) = if after.starts_with(|c: char| c.is_ascii_digit()) {
            let (n, digits) = leading_number(after);
            match suffix_mult(&after[digits..]) {
                Some(mult) => (n.saturating_mul(mult), &tok[..num]),
                None => {
                    errors.push(format!("Bad GRES configuration: {tok}"));
                    break;
                }
            }
        } else {
            (1, tok)
        };
        out.count = out.count.saturating_add(count);
        for sub in body.split(':').filter(|s| !s.is_empty()).skip(1) {
            if sub.eq_ignore_ascii_case("no_consume") {
                out.no_consume = true;
                continue;
            }
            let id = gres_build_id(sub);
            match out.types.iter_mut().find(|(t, _)| gres_build_id(t) == id) {
                Some((_, n)) => *n = n.saturating_add(count),
                None => out.types.push((sub.to_string(), count)),
            }
        }
    }
    (out, errors)
}

/// The node's slurm.conf GRES: one [`SlurmGres`] per name of `gres_types`
/// (a count of 0 when `Gres=` does not mention it), with the problems of
/// the `Gres=` value.  `gres` is the node's `Gres=` as written, with its
/// place for messages.
pub fn node_slurm_gres(node: &str, gres: Option<(&str, &Location)>, gres_types: &[String]) -> (Vec<SlurmGres>, Vec<Problem>) {
    let mut problems = Vec::new();
    let filtered = gres.and_then(|(value, location)| {
        let (kept, dropped) = gres_name_filter(value, gres_types);
        for tok in dropped {
            let name = tok.split(':').next().unwrap_or(&tok).to_string();
            let valid: Vec<&str> = gres_types.iter().map(String::as_str).collect();
            problems.push(
                Problem::new(
                    Severity::Error,
                    Some(location.clone()),
                    format!("Invalid GRES configured on node {node}: {tok} (\"{name}\" is not in GresTypes)"),
                )
                .with_suggestion(closest_key(&name, &valid).map(str::to_string))
                .with_help(format!("add {name} to GresTypes in slurm.conf, or remove it from the node's Gres=")),
            );
        }
        kept.map(|k| (k, location.clone()))
    });
    let mut out = Vec::new();
    for name in gres_types {
        let (g, errors) = match &filtered {
            Some((value, _)) => gres_cnt(value, name),
            None => (SlurmGres { name: name.clone(), plugin_id: gres_build_id(name), ..Default::default() }, Vec::new()),
        };
        for e in errors {
            let location = filtered.as_ref().map(|(_, l)| l.clone());
            problems.push(Problem::new(Severity::Error, location, e));
        }
        out.push(g);
    }
    (out, problems)
}

/// Slurm's `_validate_slurm_conf()`: a GRES whose slurm.conf count is
/// larger than the sum of its typed counts mixes typed and untyped items,
/// which stops slurmd.
pub fn validate_slurm_conf(g: &SlurmGres) -> Result<(), String> {
    if g.types.is_empty() {
        return Ok(());
    }
    let typed: u64 = g.types.iter().map(|(_, n)| *n).fold(0, u64::saturating_add);
    if g.count > typed {
        return Err(format!("Some {} GRES in slurm.conf have a type while others do not (gres_cnt_config ({}) > tmp_count ({typed}))", g.name, g.count));
    }
    Ok(())
}
