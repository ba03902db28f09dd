//! The two orders Slurm's C code sorts GRES records and names by:
//! `strnatcmp()`'s natural order (digit runs as numbers) and glibc
//! `qsort()`'s merge sort (stable, whatever the comparison says), which
//! gres/gpu's merge and `gres-rs check`'s prediction both use.

use std::cmp::Ordering;

use crate::text::is_c_space;

/// Slurm's `strnatcmp()`: compare strings with digit runs compared as
/// numbers (`nvidia2` < `nvidia10`), blanks skipped, and runs starting with
/// `0` compared digit by digit as fractions.  Bytes compare as C `char`.
pub fn strnatcmp(a: &str, b: &str) -> Ordering {
    natural_order(a, b, true)
}

/// [`strnatcmp`]; `short_way` skips runs of the same plain byte on both
/// sides in one tight loop (the tests compare it with the byte-by-byte way).
fn natural_order(a: &str, b: &str, short_way: bool) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let at = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
    let (mut ai, mut bi) = (0, 0);
    loop {
        // The same plain byte on both sides (no blank, digit or end): next.
        while short_way && ai < a.len() && bi < b.len() && a[ai] == b[bi] && !a[ai].is_ascii_digit() && !is_c_space(a[ai]) && a[ai] != 0 {
            ai += 1;
            bi += 1;
        }
        while is_c_space(at(a, ai)) {
            ai += 1;
        }
        while is_c_space(at(b, bi)) {
            bi += 1;
        }
        let (ca, cb) = (at(a, ai), at(b, bi));
        if ca.is_ascii_digit() && cb.is_ascii_digit() {
            let (ra, rb) = (&a[ai..], &b[bi..]);
            let result = if ca == b'0' || cb == b'0' { compare_left(ra, rb) } else { compare_right(ra, rb) };
            if result != Ordering::Equal {
                return result;
            }
        }
        if ca == 0 && cb == 0 {
            return Ordering::Equal;
        }
        let order = (ca as std::ffi::c_char).cmp(&(cb as std::ffi::c_char));
        if order != Ordering::Equal {
            return order;
        }
        ai += 1;
        bi += 1;
    }
}

/// Two digit runs compared as integers: the longer run wins, else the first
/// differing digit.
fn compare_right(a: &[u8], b: &[u8]) -> Ordering {
    let mut bias = Ordering::Equal;
    for i in 0.. {
        let (x, y) = (a.get(i).copied().unwrap_or(0), b.get(i).copied().unwrap_or(0));
        match (x.is_ascii_digit(), y.is_ascii_digit()) {
            (false, false) => return bias,
            (false, true) => return Ordering::Less,
            (true, false) => return Ordering::Greater,
            (true, true) => {
                if bias == Ordering::Equal {
                    bias = x.cmp(&y);
                }
            }
        }
    }
    bias
}

/// Two digit runs compared left-aligned: the first differing digit wins.
fn compare_left(a: &[u8], b: &[u8]) -> Ordering {
    for i in 0.. {
        let (x, y) = (a.get(i).copied().unwrap_or(0), b.get(i).copied().unwrap_or(0));
        match (x.is_ascii_digit(), y.is_ascii_digit()) {
            (false, false) => return Ordering::Equal,
            (false, true) => return Ordering::Less,
            (true, false) => return Ordering::Greater,
            (true, true) if x != y => return x.cmp(&y),
            _ => {}
        }
    }
    Ordering::Equal
}

/// glibc's `qsort()` merge sort: split at half, sort both halves, merge
/// taking from the left unless the right is strictly smaller.  Stable, and
/// it never panics whatever the comparison says.  The items are only moved
/// once, at the end: the sort itself moves their indices.
pub fn merge_sort_by<T>(items: Vec<T>, cmp: &mut impl FnMut(&T, &T) -> Ordering) -> Vec<T> {
    if items.len() <= 1 {
        return items;
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    let mut scratch = order.clone();
    sort_indices(&items, &mut order, &mut scratch, cmp);
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Sort `order` (indices into `items`) in place; `scratch` is as long.
fn sort_indices<T>(items: &[T], order: &mut [usize], scratch: &mut [usize], cmp: &mut impl FnMut(&T, &T) -> Ordering) {
    let n = order.len();
    if n <= 1 {
        return;
    }
    let mid = n / 2;
    sort_indices(items, &mut order[..mid], &mut scratch[..mid], cmp);
    sort_indices(items, &mut order[mid..], &mut scratch[mid..], cmp);
    let (mut l, mut r) = (0, mid);
    for slot in scratch.iter_mut() {
        let take_left = r == n || (l < mid && cmp(&items[order[l]], &items[order[r]]) != Ordering::Greater);
        if take_left {
            *slot = order[l];
            l += 1;
        } else {
            *slot = order[r];
            r += 1;
        }
    }
    order.copy_from_slice(scratch);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_compare() {
        use Ordering::*;
        assert_eq!(strnatcmp("/dev/nvidia2", "/dev/nvidia10"), Less);
        assert_eq!(strnatcmp("/dev/nvidia10", "/dev/nvidia2"), Greater);
        assert_eq!(strnatcmp("a", "a"), Equal);
        assert_eq!(strnatcmp("a 1", "a1"), Equal);
        assert_eq!(strnatcmp("x1.05", "x1.5"), Less);
        assert_eq!(strnatcmp("x012", "x02"), Less);
        assert_eq!(strnatcmp("gpu9", "gpu09"), Greater);
        assert_eq!(strnatcmp("A", "a"), Less);
        assert_eq!(strnatcmp("", "a"), Less);
        assert_eq!(strnatcmp("a", ""), Greater);
        assert_eq!(strnatcmp("card0,renderD128", "card0,renderD129"), Less);
        assert_eq!(strnatcmp("a\u{e9}", "ab"), Less, "bytes compare as signed char");
    }

    #[test]
    fn natural_compare_short_way_changes_nothing() {
        // Every pair of strings of up to 3 symbols from an alphabet of
        // plain bytes, blanks, digits, NUL and a non-ASCII letter.
        let alphabet = ["a", "b", " ", "0", "1", "9", "\0", "\u{e9}", "/"];
        let mut words = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = words.iter().flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}"))).collect();
            words.extend(longer);
        }
        words.sort();
        words.dedup();
        for x in &words {
            for y in &words {
                let (px, py) = (format!("/dev/nvidia{x}"), format!("/dev/nvidia{y}"));
                assert_eq!(strnatcmp(&px, &py), natural_order(&px, &py, false), "{px:?} vs {py:?}");
            }
        }
    }

    #[test]
    fn sort_is_stable_and_total_whatever_the_comparison() {
        let items: Vec<(u8, usize)> = vec![(2, 0), (1, 1), (2, 2), (1, 3), (0, 4)];
        let sorted = merge_sort_by(items, &mut |a: &(u8, usize), b: &(u8, usize)| a.0.cmp(&b.0));
        assert_eq!(sorted, [(0, 4), (1, 1), (1, 3), (2, 0), (2, 2)]);
        // An inconsistent comparison still returns every element.
        let mut flip = false;
        let sorted = merge_sort_by((0..100).collect::<Vec<u32>>(), &mut |_: &u32, _: &u32| {
            flip = !flip;
            if flip {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        });
        let mut check = sorted.clone();
        check.sort();
        assert_eq!(check, (0..100).collect::<Vec<_>>());
    }
}
