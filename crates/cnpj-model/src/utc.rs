//! UTC instants as the project writes them (`YYYY-MM-DDTHH:MM:SSZ`: a build's `built_at`, the time
//! a dataset is served since), from and to seconds since the Unix epoch, and dates from days since
//! it (H. Hinnant's civil-date algorithms, proleptic Gregorian).

/// `unix_seconds` as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_text(unix_seconds: i64) -> String {
    let (days, rem) = (unix_seconds.div_euclid(86_400), unix_seconds.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A day counted from 1970-01-01 as `YYYY-MM-DD`, as SQL writes a date.
pub fn date_text(days: i64) -> String {
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Year, month and day of a day counted from 1970-01-01 (`civil_from_days`).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The seconds since the Unix epoch of a `YYYY-MM-DDTHH:MM:SSZ` text (`None` for anything else,
/// an impossible date included).
pub fn utc_seconds(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let shape = b.len() == 20 && [4, 7, 10, 13, 16, 19].map(|i| b[i]) == *b"--T::Z";
    if !shape {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = &text[from..to];
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&m) || d < 1 || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let seconds = (era * 146_097 + doe - 719_468) * 86_400 + hh * 3600 + mm * 60 + ss;
    // A day past its month's end (2026-02-30) comes back as another date.
    (utc_text(seconds) == text).then_some(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Option<i64>) {
        assert_eq!(utc_seconds(text), expected, "{text:?}");
        if let Some(seconds) = expected {
            assert_eq!(utc_text(seconds), text);
        }
    }

    #[test]
    fn instants_both_ways() {
        check("1970-01-01T00:00:00Z", Some(0));
        check("2000-02-29T12:34:56Z", Some(951_827_696));
        check("2026-09-15T08:00:00Z", Some(1_789_459_200));
        check("1969-12-31T23:59:59Z", Some(-1));
        check("2026-02-29T00:00:00Z", None);
        check("2026-13-01T00:00:00Z", None);
        check("2026-09-15 08:00:00Z", None);
        check("2026-09-15T08:00:00", None);
        check("2026-09-15T24:00:00Z", None);
        check("+026-09-15T08:00:00Z", None);
    }
}
