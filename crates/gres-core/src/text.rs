//! Small text rules of Slurm's C code that parsers, the merge and the
//! tool share: C's whitespace, `xstrcasestr()`, count suffixes
//! (`suffix_mult()`), and the closest valid key to a misspelt one.  A leaf: it imports nothing of
//! the crate.

/// C's `isspace()` in the C locale.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The valid key closest to an unknown one, when close enough to be a typo
/// (at most a third of the word, and at least 2, edits away).
pub fn closest_key<'a>(unknown: &str, valid: &[&'a str]) -> Option<&'a str> {
    let limit = (unknown.len() / 3).max(2);
    valid.iter().map(|k| (edit_distance(unknown, k), *k)).filter(|(d, _)| *d <= limit).min_by_key(|(d, _)| *d).map(|(_, k)| k)
}

/// Levenshtein distance of two ASCII-case-folded strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<u8> = a.bytes().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<u8> = b.bytes().map(|c| c.to_ascii_lowercase()).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Slurm's `suffix_mult()`: the multiplier of a count suffix (`k`/`kib`
/// 1024, `kb` 1000, up to `p`/`pib`/`pb`), any case; `None` if unknown.
pub fn suffix_mult(suffix: &str) -> Option<u64> {
    const K: u64 = 1024;
    const KB: u64 = 1000;
    let s = suffix.to_ascii_lowercase();
    Some(match s.as_str() {
        "" => 1,
        "k" | "kib" => K,
        "kb" => KB,
        "m" | "mib" => K.pow(2),
        "mb" => KB.pow(2),
        "g" | "gib" => K.pow(3),
        "gb" => KB.pow(3),
        "t" | "tib" => K.pow(4),
        "tb" => KB.pow(4),
        "p" | "pib" => K.pow(5),
        "pb" => KB.pow(5),
        _ => return None,
    })
}

/// A count with an optional suffix (`4`, `10G`, `2kb`): digits (an optional
/// leading `+`), then a [`suffix_mult`] suffix.  `None` for anything else,
/// including negative numbers and products past `u64`.
pub fn parse_count(text: &str) -> Option<u64> {
    let body = text.strip_prefix('+').unwrap_or(text);
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let number: u64 = body[..digits].parse().ok()?;
    number.checked_mul(suffix_mult(&body[digits..])?)
}

/// Slurm's `xstrcasestr()`: whether `needle` occurs in `haystack`, ignoring
/// ASCII case.  Either one missing never matches, and an empty needle only
/// matches a non-empty haystack.
pub fn contains_ignore_case(haystack: Option<&str>, needle: Option<&str>) -> bool {
    let (Some(hay), Some(needle)) = (haystack, needle) else {
        return false;
    };
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    let Some(first) = needle.first().map(u8::to_ascii_lowercase) else {
        return !hay.is_empty();
    };
    needle.len() <= hay.len() && hay.windows(needle.len()).any(|w| w[0].to_ascii_lowercase() == first && w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(closest_key("Fils", &["File", "Files", "Flags"]), Some("File"));
        assert_eq!(closest_key("nodname", &["Name", "NodeName"]), Some("NodeName"));
        assert_eq!(closest_key("xyz", &["Name", "Type"]), None);
        assert_eq!(closest_key("COUNT", &["Count"]), Some("Count"));
    }

    #[test]
    fn counts_and_suffixes() {
        assert_eq!(parse_count("4"), Some(4));
        assert_eq!(parse_count("+4"), Some(4));
        assert_eq!(parse_count("10G"), Some(10 << 30));
        assert_eq!(parse_count("2kb"), Some(2000));
        assert_eq!(parse_count("1PiB"), Some(1 << 50));
        assert_eq!(parse_count("-1"), None);
        assert_eq!(parse_count("K"), None);
        assert_eq!(parse_count("4x"), None);
        assert_eq!(parse_count("99999999999P"), None);
        assert_eq!(parse_count("99999999999999999999"), None);
        assert_eq!(suffix_mult("MB"), Some(1_000_000));
        assert_eq!(suffix_mult("q"), None);
    }

    #[test]
    fn strcasestr_semantics() {
        assert!(contains_ignore_case(Some("tesla_V100-pcie"), Some("v100")));
        assert!(contains_ignore_case(Some("abc"), Some("")));
        assert!(!contains_ignore_case(Some(""), Some("")));
        assert!(!contains_ignore_case(None, Some("a")));
        assert!(!contains_ignore_case(Some("a"), None));
        assert!(!contains_ignore_case(Some("k20"), Some("k20m")));
    }
}
