//! Slurm's environment arrays (`char **` of `NAME=value` strings) changed
//! the way its `env_array_overwrite` and `unsetenvp` change them
//! (`src/common/env.c`, the same from 22.05 to 26.05), for a whole list of
//! [`EnvOp`]s at once.  The ABI layer reads a job's, step's or task's array
//! once, asks [`plan`] what the array becomes, and writes it once: one
//! pass instead of one scan of the array and one formatted string per
//! variable through Slurm (the seven variables of a GPU step cost a step's
//! slurmstepd about 31,000 instructions that way).
//!
//! What each operation does, as Slurm does it:
//! * `Set(name, value)`: the first entry named `name` is replaced in its
//!   place; without one, `name=value` is appended after the last entry.
//! * `Unset(name)`: entries named `name` are removed, the ones after them
//!   moving up, and the search goes on after the removed one's place: of
//!   two such entries in a row only the first is removed (`unsetenvp`
//!   steps over the entry that moved into the removed one's place).
//!
//! An entry is named `name` when it starts with `name` followed by `=`.

use super::env::EnvOp;

/// What applying a list of operations makes of an array: the old entries
/// stay in their order, some replaced in place and some removed, and new
/// ones follow them (every sequence of `Set` and `Unset` leaves an array
/// of that shape).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan<'a> {
    /// Old entries replaced in their place: (index, name, value).
    pub replaced: Vec<(usize, &'a str, &'a str)>,
    /// Old entries removed, in ascending order.
    pub removed: Vec<usize>,
    /// New entries after the old ones, in order: (name, value).
    pub appended: Vec<(&'a str, &'a str)>,
}

impl Plan<'_> {
    /// Whether the array stays as it was.
    pub fn is_unchanged(&self) -> bool {
        self.replaced.is_empty() && self.removed.is_empty() && self.appended.is_empty()
    }

    /// The old entries no longer in the array (replaced or removed), for
    /// the caller to free.
    pub fn dropped(&self) -> impl Iterator<Item = usize> + '_ {
        self.replaced.iter().map(|r| r.0).chain(self.removed.iter().copied())
    }
}

/// The distinct names a list of operations acts on, grouped by their first
/// byte: [`Names::find`] tells which one an entry has by reading it as far
/// as it must (an entry of another first byte: one byte; a `SLURM_...`
/// entry when two names start with `SLURM_`: the shared prefix once, then
/// a byte or so per name).
#[derive(Clone, Debug)]
pub struct Names<'a> {
    list: Vec<&'a str>,
    /// By first byte: the names (bit `i`: `list[i]`, for the first 64).
    group: [u64; 256],
    /// By first byte: how many bytes all names of the group share.
    shared: [u8; 256],
    /// Names past the first 64, compared one by one.
    more: Vec<usize>,
}

impl<'a> Names<'a> {
    pub fn of(ops: &'a [EnvOp]) -> Names<'a> {
        let mut names = Names { list: Vec::new(), group: [0; 256], shared: [0; 256], more: Vec::new() };
        for op in ops {
            let (EnvOp::Set(name, _) | EnvOp::Unset(name)) = op;
            if names.list.contains(&name.as_str()) {
                continue;
            }
            let id = names.list.len();
            names.list.push(name);
            if id >= 64 {
                names.more.push(id);
                continue;
            }
            // An empty name is that of an entry starting with `=`.
            let b = name.as_bytes().first().copied().unwrap_or(b'=') as usize;
            let shared = match names.group[b] {
                0 => name.len(),
                g => {
                    let other = names.list[g.trailing_zeros() as usize].as_bytes();
                    (names.shared[b] as usize).min(other.iter().zip(name.as_bytes()).take_while(|(x, y)| x == y).count())
                }
            };
            names.group[b] |= 1 << id;
            names.shared[b] = shared.min(u8::MAX as usize) as u8;
        }
        names
    }

    /// The names, each once, in the order the operations first name them.
    pub fn list(&self) -> &[&'a str] {
        &self.list
    }

    /// The index in [`Names::list`] of the name of an entry (see
    /// [`named_from`]), whose bytes `byte(i)` returns (its NUL where it
    /// ends).  `byte(i)` is
    /// asked for only when the bytes before `i` have been read and none was
    /// a NUL, so a caller holding a C string never reads past its end.
    pub fn find(&self, byte: impl Fn(usize) -> u8) -> Option<usize> {
        let named = |name: &str, from: usize| named_from(name, from, &byte);
        let first = byte(0);
        let mut group = self.group[first as usize];
        if group != 0 {
            let shared = (self.shared[first as usize] as usize).max(1);
            let any = self.list[group.trailing_zeros() as usize].as_bytes();
            if (1..shared.min(any.len())).all(|i| byte(i) == any[i]) {
                while group != 0 {
                    let id = group.trailing_zeros() as usize;
                    group &= group - 1;
                    if named(self.list[id], shared.min(self.list[id].len())) {
                        return Some(id);
                    }
                }
            }
        }
        self.more.iter().copied().find(|&id| named(self.list[id], 0))
    }

    fn id(&self, name: &str) -> usize {
        self.list.iter().position(|n| *n == name).expect("Names::of lists every name of its operations")
    }
}

/// Whether the entry whose bytes `byte(i)` returns (its NUL where it ends)
/// is named `name`: it starts with `name` and `=` follows (Slurm's
/// `_find_name_in_env`; a name holds no `=` and no NUL), its first `from`
/// bytes being known to equal the name's.  The bytes are compared in order
/// as far as the first that differs, so `byte(i)` is asked for only when
/// the bytes before `i` equal the name's, none of which is a NUL.
pub fn named_from(name: &str, from: usize, byte: impl Fn(usize) -> u8) -> bool {
    let name = name.as_bytes();
    (from..name.len()).all(|i| byte(i) == name[i]) && byte(name.len()) == b'='
}

/// Where an entry of the array being changed is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pos {
    /// The old entry of this index.
    Old(usize),
    /// The new entry appended as this one (0 first).
    Appended(usize),
}

/// An entry named one of the names, in the array being changed.
struct Named<'a> {
    pos: Pos,
    id: usize,
    /// Its new `(name, value)`; `None` for an old entry not replaced.
    new: Option<(&'a str, &'a str)>,
}

/// What an array of `old_len` entries becomes when `ops` are applied one
/// after the other, as Slurm would apply them (see the module's
/// documentation).  `matches` lists, by ascending index, the old entries
/// named one of `names` (made by [`Names::of`] from the same `ops`) with
/// that name's index: the caller finds them in one pass over the array.
/// Only the named entries are followed, so the work is that of the
/// operations, not of the array's length.
pub fn plan<'a>(old_len: usize, matches: &[(usize, usize)], names: &Names<'a>, ops: &'a [EnvOp]) -> Plan<'a> {
    // The named entries in the array's order, and the removed old ones
    // (ascending).
    let mut named: Vec<Named<'a>> = matches.iter().map(|&(i, id)| Named { pos: Pos::Old(i), id, new: None }).collect();
    let mut removed: Vec<usize> = Vec::new();
    let mut appended = 0;
    for op in ops {
        match op {
            EnvOp::Set(name, value) => {
                let id = names.id(name);
                match named.iter_mut().find(|e| e.id == id) {
                    Some(e) => e.new = Some((name, value)),
                    None => {
                        named.push(Named { pos: Pos::Appended(appended), id, new: Some((name, value)) });
                        appended += 1;
                    }
                }
            }
            EnvOp::Unset(name) => {
                let id = names.id(name);
                let mut p = 0;
                while p < named.len() {
                    if named[p].id != id {
                        p += 1;
                        continue;
                    }
                    let gone = named.remove(p).pos;
                    if let Pos::Old(i) = gone {
                        let at = removed.partition_point(|&r| r < i);
                        removed.insert(at, i);
                    }
                    // unsetenvp goes on after the entry that moved into the
                    // removed one's place: when that is the next named one,
                    // it is passed over.
                    if p < named.len() && nothing_between(gone, named[p].pos, &removed, old_len) {
                        p += 1;
                    }
                }
            }
        }
    }
    let mut plan = Plan { removed, ..Plan::default() };
    for e in named {
        match (e.pos, e.new) {
            (Pos::Old(i), Some((name, value))) => plan.replaced.push((i, name, value)),
            (Pos::Appended(_), Some(new)) => plan.appended.push(new),
            _ => {}
        }
    }
    plan
}

/// Whether no entry is left between the entries at `a` and `b` (`a`
/// before `b`, no named entry between them): the old entries between them
/// are all removed ones (only named entries are removed, and new entries
/// are all named).
fn nothing_between(a: Pos, b: Pos, removed: &[usize], old_len: usize) -> bool {
    let removed_in = |from: usize, to: usize| removed.partition_point(|&r| r < to) - removed.partition_point(|&r| r < from);
    match (a, b) {
        (Pos::Old(i), Pos::Old(k)) => removed_in(i + 1, k) == k - i - 1,
        (Pos::Old(i), Pos::Appended(_)) => removed_in(i + 1, old_len) == old_len - i - 1,
        (Pos::Appended(_), _) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule as written in Slurm's `_find_name_in_env`, on the bytes of
    /// a whole entry: what [`named_from`] and [`Names::find`] are checked
    /// against.
    fn is_named(entry: &[u8], name: &str) -> bool {
        let name = name.as_bytes();
        entry.len() > name.len() && entry[name.len()] == b'=' && entry.starts_with(name)
    }

    fn set(k: &str, v: &str) -> EnvOp {
        EnvOp::Set(k.into(), v.into())
    }
    fn unset(k: &str) -> EnvOp {
        EnvOp::Unset(k.into())
    }

    fn plan_of<'a>(entries: &[&str], ops: &'a [EnvOp]) -> Plan<'a> {
        let names = Names::of(ops);
        let matches: Vec<(usize, usize)> = entries.iter().enumerate().filter_map(|(i, e)| find(&names, e).map(|id| (i, id))).collect();
        plan(entries.len(), &matches, &names, ops)
    }

    /// [`Names::find`] on a string, as on a C string: its end reads as a
    /// NUL, and reading past that fails the test.
    fn find(names: &Names, entry: &str) -> Option<usize> {
        let bytes = entry.as_bytes();
        let past_end = std::cell::Cell::new(false);
        let found = names.find(|i| {
            assert!(!bytes[..i.min(bytes.len())].contains(&0) && i <= bytes.len(), "read byte {i} of {entry:?}");
            past_end.set(past_end.get() || i > bytes.len());
            bytes.get(i).copied().unwrap_or(0)
        });
        assert!(!past_end.get());
        assert_eq!(found, names.list().iter().position(|n| is_named(bytes, n)), "{entry:?} in {:?}", names.list());
        found
    }

    /// The array after the plan, as strings, and the old entries dropped.
    fn applied(entries: &[&str], ops: &[EnvOp]) -> (Vec<String>, Vec<usize>) {
        let p = plan_of(entries, ops);
        let mut out: Vec<Option<String>> = entries.iter().map(|e| Some(e.to_string())).collect();
        for &(i, k, v) in &p.replaced {
            out[i] = Some(format!("{k}={v}"));
        }
        for &i in &p.removed {
            out[i] = None;
        }
        let mut out: Vec<String> = out.into_iter().flatten().collect();
        out.extend(p.appended.iter().map(|(k, v)| format!("{k}={v}")));
        let mut dropped: Vec<usize> = p.dropped().collect();
        dropped.sort_unstable();
        (out, dropped)
    }

    /// Slurm's functions as written: one operation at a time on the whole
    /// array (`env_array_overwrite`: the first entry named is replaced,
    /// else one is appended; `unsetenvp`: remove, step over the entry that
    /// moved up, search on), tracking which old entries were freed.
    fn reference(entries: &[&str], ops: &[EnvOp]) -> (Vec<String>, Vec<usize>) {
        let mut arr: Vec<(String, Option<usize>)> = entries.iter().enumerate().map(|(i, e)| (e.to_string(), Some(i))).collect();
        let mut dropped = Vec::new();
        for op in ops {
            match op {
                EnvOp::Set(k, v) => match arr.iter().position(|e| is_named(e.0.as_bytes(), k)) {
                    Some(i) => {
                        dropped.extend(arr[i].1);
                        arr[i] = (format!("{k}={v}"), None);
                    }
                    None => arr.push((format!("{k}={v}"), None)),
                },
                EnvOp::Unset(k) => {
                    let mut ep = 0;
                    while let Some(i) = (ep..arr.len()).find(|&i| is_named(arr[i].0.as_bytes(), k)) {
                        dropped.extend(arr.remove(i).1);
                        ep = i + 1;
                    }
                }
            }
        }
        dropped.sort_unstable();
        (arr.into_iter().map(|e| e.0).collect(), dropped)
    }

    #[test]
    fn the_plan_is_what_slurms_functions_make_one_by_one() {
        // Small arrays of a few names (and entries of other names), and
        // every kind of sequence of operations on them, against the
        // reference: 50,000 cases of a fixed pseudo-random sequence.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        };
        let pool = ["A=1", "A=2", "B=1", "B=", "C=3", "X=9", "AB=0", "A", "=A", "ABC=1", "AC=2", "ABD"];
        let names = ["A", "B", "C", "AB", "", "ABC", "AC"];
        for case in 0..50_000 {
            let entries: Vec<&str> = (0..next(8)).map(|_| pool[next(pool.len() as u64)]).collect();
            let ops: Vec<EnvOp> = (0..next(6))
                .map(|_| {
                    let k = names[next(names.len() as u64)];
                    if next(2) == 0 {
                        unset(k)
                    } else {
                        set(k, ["v", "w"][next(2)])
                    }
                })
                .collect();
            assert_eq!(applied(&entries, &ops), reference(&entries, &ops), "case {case}: {entries:?} {ops:?}");
        }
    }

    #[test]
    fn set_replaces_the_first_entry_in_place_and_appends_otherwise() {
        let env = ["A=1", "CUDA_VISIBLE_DEVICES=0", "B=2", "CUDA_VISIBLE_DEVICES=9"];
        let (out, dropped) = applied(&env, &[set("CUDA_VISIBLE_DEVICES", "1,2"), set("NEW", "x"), set("ALSO", "y")]);
        assert_eq!(out, ["A=1", "CUDA_VISIBLE_DEVICES=1,2", "B=2", "CUDA_VISIBLE_DEVICES=9", "NEW=x", "ALSO=y"]);
        assert_eq!(dropped, [1]);
    }

    #[test]
    fn a_name_is_matched_up_to_its_equals_sign_only() {
        let env = ["CUDA_VISIBLE_DEVICES_X=1", "CUDA_VISIBLE=2", "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES="];
        let (out, dropped) = applied(&env, &[set("CUDA_VISIBLE_DEVICES", "0")]);
        assert_eq!(out, ["CUDA_VISIBLE_DEVICES_X=1", "CUDA_VISIBLE=2", "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES=0"]);
        assert_eq!(dropped, [3]);
        assert!(is_named(b"CUDA_VISIBLE_DEVICES=", "CUDA_VISIBLE_DEVICES"));
        assert!(!is_named(b"CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"));
        assert!(!is_named(b"CUDA_VISIBLE=2", "CUDA_VISIBLE_DEVICES"));
        assert!(!is_named(b"CUDA_VISIBLE_DEVICES_X=1", "CUDA_VISIBLE_DEVICES"));
        for e in ["CUDA_VISIBLE_DEVICES=", "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE=2", "CUDA_VISIBLE_DEVICES_X=1", "", "=", "C"] {
            let b = e.as_bytes();
            for name in ["CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE", ""] {
                assert_eq!(named_from(name, 0, |i| b.get(i).copied().unwrap_or(0)), is_named(b, name), "{e:?} {name:?}");
            }
        }
    }

    #[test]
    fn unset_skips_the_entry_that_moves_into_a_removed_ones_place() {
        // unsetenvp: of two in a row the second stays; a later one goes.
        let env = ["X=1", "X=2", "A=0", "X=3"];
        let (out, dropped) = applied(&env, &[unset("X")]);
        assert_eq!(out, ["X=2", "A=0"]);
        assert_eq!(dropped, [0, 3]);
        let (out, _) = applied(&["X=1", "X=2", "X=3"], &[unset("X")]);
        assert_eq!(out, ["X=2"]);
        let (out, _) = applied(&["A=1", "X=1"], &[unset("X"), unset("Y")]);
        assert_eq!(out, ["A=1"]);
    }

    #[test]
    fn operations_apply_in_order_to_what_earlier_ones_made() {
        let env = ["A=1", "B=2"];
        // A new entry replaced again, then removed: nothing of it is left,
        // and the old entry it replaced is dropped once.
        let (out, dropped) = applied(&env, &[set("A", "x"), set("A", "y"), set("C", "3"), unset("A"), set("B", "z"), unset("C")]);
        assert_eq!(out, ["B=z"]);
        assert_eq!(dropped, [0, 1]);
        // Removed, then set again: appended at the end.
        let (out, _) = applied(&env, &[unset("A"), set("A", "new")]);
        assert_eq!(out, ["B=2", "A=new"]);
    }

    #[test]
    fn names_are_listed_once_and_found_by_reading_no_further_than_needed() {
        let ops = [set("CUDA_VISIBLE_DEVICES", "0"), unset("ZE_AFFINITY_MASK"), set("CUDA_VISIBLE_DEVICES", "1"), unset(""), set("CUDA_DEVICE_ORDER", "x")];
        let names = Names::of(&ops);
        assert_eq!(names.list(), ["CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "", "CUDA_DEVICE_ORDER"]);
        for e in [
            "=odd",
            "SLURM_JOB_ID=1",
            "ZE_AFFINITY_MASK=0",
            "CUDA_DEVICE_ORDER=1",
            "CUDA_VISIBLE_DEVICES",
            "CUDA_",
            "CUDA_DEVICE_ORDERS=1",
            "",
            "C",
            "CUDA_VISIBLE_DEVICES=",
        ] {
            find(&names, e);
        }
        let (out, _) = applied(&["=odd", "SLURM_JOB_ID=1", "ZE_AFFINITY_MASK=0"], &ops);
        assert_eq!(out, ["SLURM_JOB_ID=1", "CUDA_VISIBLE_DEVICES=1", "CUDA_DEVICE_ORDER=x"]);
        // Names past the first 64 are found too.
        let many: Vec<EnvOp> = (0..70).map(|i| unset(&format!("V{i}"))).collect();
        let names = Names::of(&many);
        assert_eq!(find(&names, "V69=1"), Some(69));
        assert_eq!(find(&names, "V6=1"), Some(6));
        assert_eq!(find(&names, "V70=1"), None);
    }

    #[test]
    fn an_empty_array_and_no_operations() {
        let (out, dropped) = applied(&[], &[unset("A"), set("A", "1")]);
        assert_eq!((out, dropped), (vec!["A=1".to_string()], vec![]));
        assert!(plan_of(&["A=1"], &[]).is_unchanged());
        assert!(plan_of(&["A=1"], &[unset("B")]).is_unchanged());
        assert!(!plan_of(&["A=1"], &[set("A", "1")]).is_unchanged());
    }
}
