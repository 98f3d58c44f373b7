//! Sizes as operators write them on a command line (`500MB`, `2GB`, `1.5GiB`).

/// The bytes of a size: a number with an optional unit (B, KB, MB, GB, TB: powers of 1,000;
/// KiB, MiB, GiB, TiB: powers of 1,024), the unit in any case.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("{text:?} is not a size such as 500MB or 2GB"))?;
    let scale = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1u64,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KIB" => 1 << 10,
        "MIB" => 1 << 20,
        "GIB" => 1 << 30,
        "TIB" => 1 << 40,
        other => return Err(format!("unknown unit {other:?} (use KB, MB, GB, KiB, MiB or GiB)")),
    };
    Ok((number * scale as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<u64, ()>) {
        assert_eq!(parse_size(text).map_err(|_| ()), expected, "{text:?}");
    }

    #[test]
    fn sizes_read_with_their_units() {
        check("500MB", Ok(500_000_000));
        check("2GB", Ok(2_000_000_000));
        check("1.5GiB", Ok(3 << 29));
        check(" 64 kib ", Ok(65_536));
        check("123", Ok(123));
        check("2 gb", Ok(2_000_000_000));
        check("2XB", Err(()));
        check("1 parsec", Err(()));
        check("MB", Err(()));
    }
}
