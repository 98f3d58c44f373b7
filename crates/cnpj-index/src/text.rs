//! Words and dates as both sides of the search index see them: the words of a folded text (its
//! runs of alphanumeric characters), and days since 1970-01-01 as `YYYY-MM-DD`.

/// Calls `each` with every word of `folded`: a maximal run of alphanumeric characters.
pub(crate) fn words(folded: &str, mut each: impl FnMut(&str)) {
    folded.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).for_each(&mut each);
}

/// A folded text as its separators (maximal runs of characters that are not alphanumeric) and
/// words, alternating: `s_0 w_1 s_1 … w_n s_n`, where only `s_0` and `s_n` may be empty
/// (`seps.len() == words.len() + 1`; a text without a word is one separator).
pub(crate) fn pieces(folded: &str) -> (Vec<&str>, Vec<&str>) {
    let (mut seps, mut words) = (Vec::new(), Vec::new());
    let mut rest = folded;
    loop {
        let sep_end = rest.find(|c: char| c.is_alphanumeric()).unwrap_or(rest.len());
        seps.push(&rest[..sep_end]);
        rest = &rest[sep_end..];
        if rest.is_empty() {
            return (seps, words);
        }
        let word_end = rest.find(|c: char| !c.is_alphanumeric()).unwrap_or(rest.len());
        words.push(&rest[..word_end]);
        rest = &rest[word_end..];
    }
}

/// Calls `each` with the phrase keys of a folded text: every two adjacent words with the
/// separator between them (`w_i s_i w_i+1`), and, when the text starts or ends with a separator,
/// that separator with the first word (`s_0 w_1`) or the last word with it (`w_n s_n`). Returns
/// whether a word stands in the text more than once (then a term's keys may stand apart in it).
/// `key` is the buffer the keys are written in.
pub(crate) fn phrase_keys(folded: &str, key: &mut String, mut each: impl FnMut(&str)) -> bool {
    let (seps, words) = pieces(folded);
    let Some(last) = words.len().checked_sub(1) else { return false };
    let mut put = |parts: &[&str]| {
        key.clear();
        parts.iter().for_each(|p| key.push_str(p));
        each(key);
    };
    if !seps[0].is_empty() {
        put(&[seps[0], words[0]]);
    }
    for i in 0..last {
        put(&[words[i], seps[i + 1], words[i + 1]]);
    }
    if !seps[last + 1].is_empty() {
        put(&[words[last], seps[last + 1]]);
    }
    // Names hold a handful of words: comparing each pair is cheaper than hashing them.
    (1..words.len()).any(|i| words[..i].contains(&words[i]))
}

/// How the search index answers a folded search term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TermPlan<'a> {
    /// Not at all: the term holds no word character.
    Beyond,
    /// One word and nothing else: the union of the words that contain it.
    Word(&'a str),
    /// The phrase keys ("links") every text that contains the term holds, as needles to find in
    /// the `\n`-separated keys of a phrase table: a `\n` at a needle's end pins that end to the
    /// key's (the word there is whole). A text holds the term exactly when it holds every link
    /// in a row; with one link, or when none of the words the links share (each a whole word)
    /// stands twice in the text, holding them all is enough.
    Links(Vec<Vec<u8>>),
}

/// The plan of a folded term: its pieces `s_0 w_1 s_1 … w_k s_k` become the links `s_0 w_1`
/// (when `s_0` is not empty), each `w_j s_j w_j+1`, and `w_k s_k` (when `s_k` is not empty). A
/// word's start is pinned when a separator stands before it in the term, its end when one
/// stands after it.
pub(crate) fn term_plan(folded: &str) -> TermPlan<'_> {
    let (seps, words) = pieces(folded);
    let k = words.len();
    if k == 0 {
        return TermPlan::Beyond;
    }
    let (lead, trail) = (!seps[0].is_empty(), !seps[k].is_empty());
    if k == 1 && !lead && !trail {
        return TermPlan::Word(words[0]);
    }
    let start_pinned = |j: usize| j > 0 || lead;
    let end_pinned = |j: usize| j + 1 < k || trail;
    let needle = |start: bool, parts: &[&str], end: bool| {
        let mut n = Vec::with_capacity(parts.iter().map(|p| p.len()).sum::<usize>() + 2);
        if start {
            n.push(b'\n');
        }
        parts.iter().for_each(|p| n.extend_from_slice(p.as_bytes()));
        if end {
            n.push(b'\n');
        }
        n
    };
    let mut links = Vec::with_capacity(k + 1);
    if lead {
        links.push(needle(false, &[seps[0], words[0]], end_pinned(0)));
    }
    for j in 0..k - 1 {
        links.push(needle(start_pinned(j), &[words[j], seps[j + 1], words[j + 1]], end_pinned(j + 1)));
    }
    if trail {
        links.push(needle(start_pinned(k - 1), &[words[k - 1], seps[k]], false));
    }
    TermPlan::Links(links)
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

    fn check(term: &str, expected: TermPlan<'_>) {
        assert_eq!(term_plan(term), expected, "{term:?}");
    }

    fn links(needles: &[&str]) -> TermPlan<'static> {
        TermPlan::Links(needles.iter().map(|n| n.as_bytes().to_vec()).collect())
    }

    #[test]
    fn a_term_becomes_a_word_or_its_links() {
        check("padaria", TermPlan::Word("padaria"));
        check("1a", TermPlan::Word("1a"));
        check("ia ribeir", links(&["ia ribeir"]));
        check("a b c", links(&["a b\n", "\nb c"]));
        check("ria sa ltda", links(&["ria sa\n", "\nsa ltda"]));
        check(" sao", links(&[" sao"]));
        check(" sao ", links(&[" sao\n", "\nsao "]));
        check("joao-", links(&["joao-"]));
        check("100%", links(&["100%"]));
        check("***.456", links(&["***.456"]));
        check("%_", TermPlan::Beyond);
        check("", TermPlan::Beyond);
    }

    fn keys_of(text: &str) -> (Vec<String>, bool) {
        let mut keys = Vec::new();
        let repeated = phrase_keys(text, &mut String::new(), |k| keys.push(k.to_owned()));
        (keys, repeated)
    }

    #[test]
    fn a_text_has_its_pairs_and_its_ends_as_keys() {
        assert_eq!(
            keys_of("maria ribeiro da silva"),
            (vec!["maria ribeiro".into(), "ribeiro da".into(), "da silva".into()], false)
        );
        assert_eq!(keys_of("(sao) joao"), (vec!["(sao".into(), "sao) joao".into()], false));
        assert_eq!(keys_of("***.456.789-**"), (vec!["***.456".into(), "456.789".into(), "789-**".into()], false));
        assert_eq!(keys_of("silva silva"), (vec!["silva silva".into()], true));
        assert_eq!(keys_of("padaria"), (vec![], false));
        assert_eq!(keys_of("***"), (vec![], false));
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

        /// A text holds every link of a term it contains; and a text that holds every link
        /// contains the term when the term has one link or no word stands twice in the text.
        #[test]
        fn the_links_decide_where_no_word_repeats(
            text in "[ab .-]{0,14}",
            start in 0usize..14,
            len in 1usize..8,
            other in "[ab .-]{1,6}",
        ) {
            let start = start.min(text.len());
            let cut = &text[start..(start + len).min(text.len())];
            let (keys, repeated) = keys_of(&text);
            for term in [cut, other.as_str()] {
                let TermPlan::Links(links) = term_plan(term) else { continue };
                let holds = links.iter().all(|link| {
                    keys.iter().any(|key| memchr::memmem::find(format!("\n{key}\n").as_bytes(), link).is_some())
                });
                let contains = text.contains(term);
                prop_assert!(holds || !contains, "{term:?} in {text:?}: a link is missing");
                if links.len() == 1 || !repeated {
                    prop_assert_eq!(holds, contains, "{:?} in {:?}", term, text);
                }
            }
        }
    }
}
