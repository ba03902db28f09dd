//! Counts as Slurm's configuration files write them: digits and a suffix
//! (`Count=10G` in gres.conf, `Gres=gpu:2k` in slurm.conf).

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
