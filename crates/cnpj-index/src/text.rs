//! Words and dates as both sides of the search index see them: the words of a folded text (its
//! runs of alphanumeric characters), and days since 1970-01-01 as `YYYY-MM-DD`.

/// Calls `each` with every word of `folded`: a maximal run of alphanumeric characters.
pub(crate) fn words(folded: &str, mut each: impl FnMut(&str)) {
    folded.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).for_each(&mut each);
}

/// How a word of a search term must stand in a word of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Anywhere inside a word.
    Inside,
    /// At the start of a word (a separator stands before it in the term).
    Start,
    /// At the end of a word (a separator follows it in the term).
    End,
    /// A whole word.
    Whole,
}

/// The words of a folded search term, each with where it must stand in a text word. A text
/// contains the term only if each of these is found so; for a term that is one word and nothing
/// else (`exact`), that is also enough.
pub(crate) fn term_words(folded: &str) -> (Vec<(&str, Place)>, bool) {
    let mut out = Vec::new();
    let mut rest = folded;
    let mut after_separator = false;
    while !rest.is_empty() {
        let start = rest.find(|c: char| c.is_alphanumeric());
        let Some(start) = start else { break };
        after_separator |= start > 0;
        let word_rest = &rest[start..];
        let end = word_rest.find(|c: char| !c.is_alphanumeric()).unwrap_or(word_rest.len());
        let word = &word_rest[..end];
        let before_separator = end < word_rest.len();
        let place = match (after_separator, before_separator) {
            (false, false) => Place::Inside,
            (true, false) => Place::Start,
            (false, true) => Place::End,
            (true, true) => Place::Whole,
        };
        out.push((word, place));
        rest = &word_rest[end..];
        after_separator = true;
    }
    let exact = out.len() == 1 && out[0].0.len() == folded.len();
    (out, exact)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i32, m: u32, d: u32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = m as i32;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of `days` since 1970-01-01: (year, month, day).
pub(crate) fn civil_from_days(days: i32) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i32::from(m <= 2), m, d)
}

/// `YYYY-MM-DD`, as DuckDB casts a DATE to text (years 1800-2100 here).
pub(crate) fn date_text(days: i32) -> String {
    let (y, m, d) = civil_from_days(days);
    let Ok(y @ 0..=9999) = u32::try_from(y) else { return format!("{y:04}-{m:02}-{d:02}") };
    // Digit by digit: `format!` cost about 1 % of the build (three dates per establishment).
    let digit = |n: u32| b'0' + (n % 10) as u8;
    let text = [
        digit(y / 1000),
        digit(y / 100),
        digit(y / 10),
        digit(y),
        b'-',
        digit(m / 10),
        digit(m),
        b'-',
        digit(d / 10),
        digit(d),
    ];
    String::from_utf8(text.to_vec()).expect("ASCII digits")
}

/// Days of a `YYYY-MM-DD` text.
pub(crate) fn parse_date(text: &str) -> Option<i32> {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (text[0..4].parse().ok()?, text[5..7].parse().ok()?, text[8..10].parse().ok()?);
    (1..=12).contains(&m).then_some(())?;
    (1..=31).contains(&d).then_some(())?;
    Some(days_from_civil(y, m, d))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn check(term: &str, expected: &[(&str, Place)], exact: bool) {
        assert_eq!(term_words(term), (expected.to_vec(), exact), "{term:?}");
    }

    #[test]
    fn a_term_splits_into_placed_words() {
        use Place::*;
        check("padaria", &[("padaria", Inside)], true);
        check("ria sa", &[("ria", End), ("sa", Start)], false);
        check("a b c", &[("a", End), ("b", Whole), ("c", Start)], false);
        check(" sao", &[("sao", Start)], false);
        check("100%", &[("100", End)], false);
        check("***.456", &[("456", Start)], false);
        check("%_", &[], false);
        check("", &[], false);
        check("1a", &[("1a", Inside)], true);
    }

    #[test]
    fn words_are_alphanumeric_runs() {
        let mut seen = Vec::new();
        words("padaria sao-joao ***.456.789-** 1a  ", |w| seen.push(w.to_owned()));
        assert_eq!(seen, ["padaria", "sao", "joao", "456", "789", "1a"]);
    }

    proptest! {
        #[test]
        fn dates_round_trip(days in -80_000i32..60_000) {
            let text = date_text(days);
            prop_assert_eq!(parse_date(&text), Some(days));
        }

        #[test]
        fn dates_read_as_duckdb_writes_them(days in -800_000i32..3_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert_eq!(date_text(days), format!("{y:04}-{m:02}-{d:02}"));
        }

        /// Whenever a text contains a term, each of the term's words stands in a word of the
        /// text where its place says (the index's candidates are a superset of the matches).
        #[test]
        fn a_match_has_every_placed_word(text in "[ab .]{0,12}", start in 0usize..12, len in 1usize..6) {
            let start = start.min(text.len());
            let term = &text[start..(start + len).min(text.len())];
            let mut text_words = Vec::new();
            words(&text, |w| text_words.push(w.to_owned()));
            for (word, place) in term_words(term).0 {
                let found = text_words.iter().any(|w| match place {
                    Place::Inside => w.contains(word),
                    Place::Start => w.starts_with(word),
                    Place::End => w.ends_with(word),
                    Place::Whole => w == word,
                });
                prop_assert!(found, "{:?} in {:?} ({:?})", word, text, place);
            }
        }
    }
}
