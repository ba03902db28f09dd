//! Small text rules of Slurm's C code that parsers, the merge and the
//! tool share: C's whitespace, `xstrcasestr()`, and the closest valid key
//! to a misspelt one.  A leaf: it imports nothing of
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
    fn strcasestr_semantics() {
        assert!(contains_ignore_case(Some("tesla_V100-pcie"), Some("v100")));
        assert!(contains_ignore_case(Some("abc"), Some("")));
        assert!(!contains_ignore_case(Some(""), Some("")));
        assert!(!contains_ignore_case(None, Some("a")));
        assert!(!contains_ignore_case(Some("a"), None));
        assert!(!contains_ignore_case(Some("k20"), Some("k20m")));
    }
}
