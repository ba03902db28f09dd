//! Slurm hostlist expressions as used for node names and device files:
//! `tux[0-7,10]`, `/dev/nvidia[0-3]`, `/dev/nvidia0,/dev/nvidia2`.
//! Ranges keep their zero padding (`gpu[00-02]` -> `gpu00`, `gpu01`, `gpu02`);
//! several bracket groups in one name expand as a cartesian product.

use thiserror::Error;

use crate::sort::strnatcmp;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HostlistError {
    #[error("unbalanced brackets in \"{0}\"")]
    Unbalanced(String),
    #[error("invalid range \"{range}\" in \"{expr}\"")]
    BadRange { expr: String, range: String },
    #[error("range \"{range}\" in \"{expr}\" expands to more than {max} names")]
    TooLarge { expr: String, range: String, max: usize },
    #[error("\"{expr}\" expands to more than {max} bytes of names")]
    TooLong { expr: String, max: usize },
}

/// Most names one bracket range may hold: Slurm's `MAX_RANGE` (64K hosts);
/// a larger range is an error ("Too many hosts in range"), as in Slurm.
pub const MAX_RANGE: u64 = 64 * 1024;

/// Upper bound on the names a whole expression may expand to (ranges,
/// lists and cartesian products together), so that no expression can
/// exhaust memory.
pub const MAX_EXPANSION: usize = 1 << 20;

/// Upper bound on the bytes of all the names of an expression together
/// (long names times large ranges).
pub const MAX_EXPANSION_BYTES: usize = 1 << 24;

/// Split at commas that are outside brackets.
fn split_top_level(expr: &str) -> Result<Vec<&str>, HostlistError> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(HostlistError::Unbalanced(expr.to_string()));
                }
            }
            ',' if depth == 0 => {
                parts.push(&expr[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::Unbalanced(expr.to_string()));
    }
    parts.push(&expr[start..]);
    Ok(parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect())
}

/// Expand one bracket body (`0-3,6,08-10`) into its members as strings.
fn expand_ranges(expr: &str, body: &str) -> Result<Vec<String>, HostlistError> {
    let bad = |r: &str| HostlistError::BadRange { expr: expr.to_string(), range: r.to_string() };
    let mut out = Vec::new();
    for range in body.split(',') {
        let range = range.trim();
        if range.is_empty() {
            return Err(bad(range));
        }
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (range, range),
        };
        if lo.is_empty() || hi.is_empty() || !lo.bytes().all(|b| b.is_ascii_digit()) || !hi.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(range));
        }
        let width = if lo.len() > 1 && lo.starts_with('0') { lo.len() } else { 0 };
        let a: u64 = lo.parse().map_err(|_| bad(range))?;
        let b: u64 = hi.parse().map_err(|_| bad(range))?;
        if b < a {
            return Err(bad(range));
        }
        if b - a >= MAX_RANGE {
            return Err(HostlistError::TooLarge { expr: expr.to_string(), range: range.to_string(), max: MAX_RANGE as usize });
        }
        if out.len() + ((b - a) as usize) >= MAX_EXPANSION {
            return Err(HostlistError::TooLarge { expr: expr.to_string(), range: range.to_string(), max: MAX_EXPANSION });
        }
        for n in a..=b {
            out.push(format!("{n:0width$}"));
        }
    }
    Ok(out)
}

/// Expand a name with any number of bracket groups.
fn expand_one(expr: &str, name: &str) -> Result<Vec<String>, HostlistError> {
    let Some(open) = name.find('[') else {
        if name.contains(']') {
            return Err(HostlistError::Unbalanced(expr.to_string()));
        }
        return Ok(vec![name.to_string()]);
    };
    let close = name[open..].find(']').map(|c| c + open).ok_or_else(|| HostlistError::Unbalanced(expr.to_string()))?;
    let prefix = &name[..open];
    let body = &name[open + 1..close];
    if body.contains('[') {
        return Err(HostlistError::Unbalanced(expr.to_string()));
    }
    let rest = expand_one(expr, &name[close + 1..])?;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for member in expand_ranges(expr, body)? {
        for tail in &rest {
            if out.len() >= MAX_EXPANSION {
                return Err(HostlistError::TooLarge { expr: expr.to_string(), range: body.to_string(), max: MAX_EXPANSION });
            }
            bytes += prefix.len() + member.len() + tail.len();
            if bytes > MAX_EXPANSION_BYTES {
                return Err(HostlistError::TooLong { expr: expr.to_string(), max: MAX_EXPANSION_BYTES });
            }
            out.push(format!("{prefix}{member}{tail}"));
        }
    }
    Ok(out)
}

/// Expand a whole hostlist expression into its names, in order.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    // One plain name (the usual `File=/dev/nvidia0`): itself.
    if !expr.bytes().any(|b| matches!(b, b'[' | b']' | b',')) {
        let name = expr.trim();
        if name.len() > MAX_EXPANSION_BYTES {
            return Err(HostlistError::TooLong { expr: expr.to_string(), max: MAX_EXPANSION_BYTES });
        }
        return Ok(if name.is_empty() { Vec::new() } else { vec![name.to_string()] });
    }
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for part in split_top_level(expr)? {
        let names = expand_one(expr, part)?;
        if out.len() + names.len() > MAX_EXPANSION {
            return Err(HostlistError::TooLarge { expr: expr.to_string(), range: part.to_string(), max: MAX_EXPANSION });
        }
        bytes += names.iter().map(String::len).sum::<usize>();
        if bytes > MAX_EXPANSION_BYTES {
            return Err(HostlistError::TooLong { expr: expr.to_string(), max: MAX_EXPANSION_BYTES });
        }
        out.extend(names);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Compression: names back to a hostlist expression
// ---------------------------------------------------------------------------

/// A run of names `prefix<lo>..prefix<hi>` (Slurm's `hostrange`); `width`
/// is the number of digits written, `single` a name without a number.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostRange {
    prefix: String,
    lo: u64,
    hi: u64,
    width: usize,
    single: bool,
}

fn host_range(name: &str) -> HostRange {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (prefix, number) = name.split_at(name.len() - digits);
    match number.parse::<u64>() {
        Ok(n) if digits > 0 => HostRange { prefix: prefix.to_string(), lo: n, hi: n, width: digits, single: false },
        _ => HostRange { prefix: name.to_string(), lo: 0, hi: 0, width: 0, single: true },
    }
}

fn same_prefix(a: &HostRange, b: &HostRange) -> bool {
    strnatcmp(&a.prefix, &b.prefix).is_eq() && a.single == b.single
}

/// Leading zeros of `n` written `width` wide.
fn zero_padded(n: u64, width: usize) -> usize {
    let digits = n.checked_ilog10().map_or(1, |l| l as usize + 1);
    width.saturating_sub(digits)
}

/// Slurm's `_width_equiv()`: whether numbers `n` (written `wn` wide) and
/// `m` (`wm` wide) can share a range, adjusting one width when they can.
fn width_equiv(n: u64, wn: &mut usize, m: u64, wm: &mut usize) -> bool {
    if *wn == *wm {
        return true;
    }
    let (npad, nmpad) = (zero_padded(n, *wn), zero_padded(n, *wm));
    let (mpad, mnpad) = (zero_padded(m, *wm), zero_padded(m, *wn));
    if npad != nmpad && mpad != mnpad {
        return false;
    }
    if npad != nmpad {
        *wm = *wn;
    } else {
        *wn = *wm;
    }
    true
}

fn number(n: u64, width: usize) -> String {
    format!("{n:0width$}")
}

/// Slurm's ranged hostlist string of `names`, in order: consecutive numbers
/// with the same prefix become ranges, and ranges of the same prefix next
/// to each other share one bracket (`nvidia[0-1,3]`, `a,b`, `n[01-02]`).
pub fn ranged_string(names: &[String]) -> String {
    let mut ranges: Vec<HostRange> = Vec::new();
    for name in names {
        let mut r = host_range(name);
        if let Some(tail) = ranges.last_mut() {
            if !tail.single
                && !r.single
                && tail.hi.checked_add(1) == Some(r.lo)
                && same_prefix(tail, &r)
                && width_equiv(tail.lo, &mut tail.width, r.lo, &mut r.width)
            {
                tail.hi = r.hi;
                continue;
            }
        }
        ranges.push(r);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < ranges.len() {
        let first = &ranges[i];
        if first.single {
            out.push(first.prefix.clone());
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < ranges.len() && !ranges[j].single && same_prefix(&ranges[j], &ranges[j - 1]) {
            j += 1;
        }
        let items: Vec<String> = ranges[i..j]
            .iter()
            .map(|r| if r.lo == r.hi { number(r.lo, r.width) } else { format!("{}-{}", number(r.lo, r.width), number(r.hi, r.width)) })
            .collect();
        if j - i == 1 && first.lo == first.hi {
            out.push(format!("{}{}", first.prefix, items[0]));
        } else {
            out.push(format!("{}[{}]", first.prefix, items.join(",")));
        }
        i = j;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_lists() {
        assert_eq!(expand("/dev/nvidia0").unwrap(), vec!["/dev/nvidia0"]);
        assert_eq!(expand("/dev/nvidia0,/dev/nvidia2").unwrap(), vec!["/dev/nvidia0", "/dev/nvidia2"]);
        // A plain name takes the short way; it must agree with the long one.
        assert_eq!(expand(" /dev/nvidia0 ").unwrap(), expand(" /dev/nvidia0 ,").unwrap());
        assert_eq!(expand("").unwrap(), Vec::<String>::new());
        assert_eq!(expand("  ").unwrap(), expand("  ,").unwrap());
    }

    #[test]
    fn ranges_and_padding() {
        assert_eq!(expand("/dev/nvidia[0-2,6]").unwrap(), vec!["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia6"]);
        assert_eq!(expand("gpu[08-10]").unwrap(), vec!["gpu08", "gpu09", "gpu10"]);
        assert_eq!(expand("tux[0-1],db").unwrap(), vec!["tux0", "tux1", "db"]);
    }

    #[test]
    fn cartesian() {
        assert_eq!(expand("r[1-2]n[0-1]").unwrap(), vec!["r1n0", "r1n1", "r2n0", "r2n1"]);
    }

    #[test]
    fn errors() {
        assert!(matches!(expand("a[0-3"), Err(HostlistError::Unbalanced(_))));
        assert!(matches!(expand("a[3-1]"), Err(HostlistError::BadRange { .. })));
        assert!(matches!(expand("a[x]"), Err(HostlistError::BadRange { .. })));
        assert!(matches!(expand("a[0-99999999]"), Err(HostlistError::TooLarge { .. })));
    }

    #[test]
    fn limits_as_in_slurm() {
        // Slurm's MAX_RANGE: at most 64K names per bracket range.
        assert_eq!(expand("a[0-65535]").unwrap().len(), 65536);
        assert!(matches!(expand("a[0-65536]"), Err(HostlistError::TooLarge { max: 65536, .. })));
        assert!(matches!(expand("a[1-999999]"), Err(HostlistError::TooLarge { .. })));
        // The total, across a list and products, stays bounded.
        let list = vec!["x[0-65535]"; 17].join(",");
        assert!(matches!(expand(&list), Err(HostlistError::TooLarge { .. })));
        assert!(matches!(expand("a[0-2047]b[0-1023]"), Err(HostlistError::TooLarge { .. })));
        assert_eq!(expand(&vec!["x[0-65535]"; 16].join(",")).unwrap().len(), MAX_EXPANSION);
        // Long names times large ranges: bounded in bytes too.
        let long = format!("{}[0-65535]", "n".repeat(600));
        assert!(matches!(expand(&long), Err(HostlistError::TooLong { .. })));
        let product = format!("{}[0-1023]x[0-1023]", "n".repeat(40));
        assert!(matches!(expand(&product), Err(HostlistError::TooLong { .. })));
    }

    #[test]
    fn ranged_strings() {
        let s = |names: &[&str]| ranged_string(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["/dev/nvidia0"]), "/dev/nvidia0");
        assert_eq!(s(&["/dev/nvidia0", "/dev/nvidia1"]), "/dev/nvidia[0-1]");
        assert_eq!(s(&["n0", "n1", "n3", "m1"]), "n[0-1,3],m1");
        assert_eq!(s(&["gpu08", "gpu09", "gpu10"]), "gpu[08-10]");
        assert_eq!(s(&["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(s(&["n09", "n9"]), "n[09,9]");
        assert_eq!(s(&["a", "b", "a"]), "a,b,a");
        assert_eq!(s(&["x1", "y", "x2"]), "x1,y,x2");
        assert_eq!(s(&["n3", "n1"]), "n[3,1]");
        assert_eq!(s(&[]), "");
    }
}
