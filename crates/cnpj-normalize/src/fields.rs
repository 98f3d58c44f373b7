//! The served fields' rules: codes, dates, capital, CEP, phones, e-mail, addresses,
//! partner documents. Each takes cleaned text (see [`crate::clean`]) unless it says otherwise.

/// Left-pads a numeric code with `0` to `width` (`"2"` → `"02"`), in place. Empty stays empty;
/// anything else (letters, too long) is kept as it is, so that an unknown code still shows.
pub fn pad_code(code: &mut String, width: usize) {
    if !code.is_empty() && code.len() < width && code.bytes().all(|b| b.is_ascii_digit()) {
        code.insert_str(0, &"0".repeat(width - code.len()));
    }
}

/// A valid calendar date `YYYYMMDD` with year 1800-2100, as days since 1970-01-01; anything else
/// (`""`, `"0"`, `"00000000"`, 7 digits, month 13, 31 April) is `None`.
pub fn date(text: &str) -> Option<i32> {
    let b = text.as_bytes();
    if b.len() != 8 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text[r].parse::<i32>().ok();
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    if !cnpj_model::is_dataset_date(y, m, d) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i32, m: i32, d: i32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Why a non-empty `capital_social` is not loaded (the row is, with a null capital, and the
/// build report counts it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapitalIssue {
    /// More than 16 digits before the comma: too big for the dataset's DECIMAL(18, 2).
    TooBig,
    /// Not a decimal number with a comma, two places at most and well-formed thousands groups.
    Malformed,
}

impl CapitalIssue {
    pub fn reason(self) -> &'static str {
        match self {
            CapitalIssue::TooBig => "more than 16 digits before the comma",
            CapitalIssue::Malformed => "not a decimal number",
        }
    }
}

/// `capital_social`: decimal comma, two places, exact. `"1061004829,23"` → `"1061004829.23"`,
/// `"000000010000,00"` → `"10000.00"`, `"5"` → `"5.00"`, and with well-formed thousands groups
/// `"1.000,00"` → `"1000.00"`; empty → `Ok(None)`. A value too big for the dataset's
/// DECIMAL(18, 2) (more than 16 digits before the comma) or malformed is an error, never a
/// silent null.
pub fn capital(text: &str) -> Result<Option<String>, CapitalIssue> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if text.is_empty() {
        return Ok(None);
    }
    let (int, frac) = body.split_once(',').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(CapitalIssue::Malformed);
    }
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let int: std::borrow::Cow<'_, str> = if int.contains('.') {
        // Thousands groups: 1 to 3 digits, then groups of exactly 3.
        let mut groups = int.split('.');
        let head = groups.next().unwrap_or_default();
        let well_formed =
            (1..=3).contains(&head.len()) && all_digits(head) && groups.all(|g| g.len() == 3 && all_digits(g));
        if !well_formed {
            return Err(CapitalIssue::Malformed);
        }
        int.replace('.', "").into()
    } else {
        int.into()
    };
    if !all_digits(&int) || !all_digits(frac) || frac.len() > 2 {
        return Err(CapitalIssue::Malformed);
    }
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    if int.len() > 16 {
        return Err(CapitalIssue::TooBig);
    }
    let frac = format!("{frac:0<2}");
    let zero = int == "0" && frac == "00";
    Ok(Some(format!("{}{int}.{frac}", if negative && !zero { "-" } else { "" })))
}

/// CEP: 8 digits; 7 digits are left-padded with `0`; `00000000` and anything else → `""`.
pub fn cep(text: &str) -> String {
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return String::new();
    }
    let padded = match text.len() {
        8 => text.to_owned(),
        7 => format!("0{text}"),
        _ => return String::new(),
    };
    if padded.bytes().all(|b| b == b'0') { String::new() } else { padded }
}

fn digits(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

/// Area code: digits, leading zeros dropped (`"011"` → `"11"`); `"0"` or empty → `""`.
pub fn ddd(text: &str) -> String {
    digits(text).trim_start_matches('0').to_owned()
}

/// Telephone number: its digits; all zeros (`"0"`) or none → `""`.
pub fn telefone(text: &str) -> String {
    let d = digits(text);
    if d.bytes().all(|b| b == b'0') { String::new() } else { d }
}

/// E-mail: lower case (the text is already cleaned and trimmed).
pub fn email(text: &str) -> String {
    text.to_lowercase()
}

/// `tipo_logradouro` + " " + `logradouro`, or just the one that is not empty.
pub fn logradouro(tipo: &str, logradouro: &str) -> String {
    match (tipo.is_empty(), logradouro.is_empty()) {
        (true, _) => logradouro.to_owned(),
        (false, true) => tipo.to_owned(),
        (false, false) => format!("{tipo} {logradouro}"),
    }
}

/// A person's document as the dump gives it (`***123456**`, digits 4-9 visible) → `***.123.456-**`.
/// A full 11-digit CPF is masked the same way. Anything else → `""`: a document is never returned
/// in full.
pub fn mask_person_document(text: &str) -> String {
    let b = text.as_bytes();
    if b.len() == 11 && b[3..9].iter().all(u8::is_ascii_digit) {
        format!("***.{}.{}-**", &text[3..6], &text[6..9])
    } else {
        String::new()
    }
}

/// A legal entity's CNPJ (14 characters) → `**.345.678/0001-**`; anything else → `""`.
pub fn mask_company_document(text: &str) -> String {
    let b = text.as_bytes();
    if b.len() == 14 && b.iter().all(u8::is_ascii_alphanumeric) {
        format!("**.{}.{}/{}-**", &text[2..5], &text[5..8], &text[8..12])
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check<T: PartialEq + std::fmt::Debug>(f: impl Fn(&str) -> T, cases: &[(&str, T)]) {
        for (input, expected) in cases {
            assert_eq!(&f(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn codes_pad_to_width() {
        let code = |width| {
            move |s: &str| {
                let mut code = s.to_owned();
                pad_code(&mut code, width);
                code
            }
        };
        check(code(2), &[("2", "02".into()), ("02", "02".into()), ("", String::new()), ("8", "08".into())]);
        check(code(7), &[("111301", "0111301".into()), ("6204000", "6204000".into())]);
        check(code(4), &[("1", "0001".into()), ("12345", "12345".into()), ("X1", "X1".into())]);
    }

    #[test]
    fn dates() {
        check(
            date,
            &[
                ("19700101", Some(0)),
                ("20200101", Some(18262)),
                ("20240229", Some(19782)),
                ("18000101", Some(-62091)),
                ("21001231", Some(47846)),
                ("", None),
                ("0", None),
                ("00000000", None),
                ("2021221", None),
                ("4100813", None),
                ("41000813", None),
                ("17991231", None),
                ("20230229", None),
                ("20230431", None),
                ("20231301", None),
                ("2023 101", None),
            ],
        );
    }

    #[test]
    fn capital_is_exact() {
        check(
            capital,
            &[
                ("1061004829,23", Ok(Some("1061004829.23".into()))),
                ("000000010000,00", Ok(Some("10000.00".into()))),
                ("0,00", Ok(Some("0.00".into()))),
                ("120000000000,00", Ok(Some("120000000000.00".into()))),
                ("999999999999,00", Ok(Some("999999999999.00".into()))),
                ("1000", Ok(Some("1000.00".into()))),
                ("10,5", Ok(Some("10.50".into()))),
                ("-10,00", Ok(Some("-10.00".into()))),
                ("-0,00", Ok(Some("0.00".into()))),
                ("", Ok(None)),
                ("9999999999999999,99", Ok(Some("9999999999999999.99".into()))),
            ],
        );
    }

    #[test]
    fn capital_with_thousands_separators_is_exact() {
        check(
            capital,
            &[
                ("1.000,00", Ok(Some("1000.00".into()))),
                ("12.345.678,90", Ok(Some("12345678.90".into()))),
                ("1.000", Ok(Some("1000.00".into()))),
                ("-1.000,5", Ok(Some("-1000.50".into()))),
                ("1.00,00", Err(CapitalIssue::Malformed)),
                ("1000.000,00", Err(CapitalIssue::Malformed)),
                ("1..000,00", Err(CapitalIssue::Malformed)),
                (".000,00", Err(CapitalIssue::Malformed)),
                ("10.5", Err(CapitalIssue::Malformed)),
            ],
        );
    }

    #[test]
    fn capital_too_big_or_malformed_is_an_issue_not_a_silent_null() {
        check(
            capital,
            &[
                ("12345678901234567,00", Err(CapitalIssue::TooBig)),
                ("00099999999999999999,00", Err(CapitalIssue::TooBig)),
                ("12.345.678.901.234.567,00", Err(CapitalIssue::TooBig)),
                ("1,234", Err(CapitalIssue::Malformed)),
                ("abc", Err(CapitalIssue::Malformed)),
                ("-", Err(CapitalIssue::Malformed)),
                // Found by the property below: a lone comma was read as an empty capital.
                (",", Err(CapitalIssue::Malformed)),
                ("-,", Err(CapitalIssue::Malformed)),
            ],
        );
    }

    #[test]
    fn ceps() {
        check(
            cep,
            &[
                ("01310100", "01310100".into()),
                ("1005010", "01005010".into()),
                ("00000000", String::new()),
                ("0", String::new()),
                ("", String::new()),
                ("0000000", String::new()),
                ("01310-100", String::new()),
                ("ABC", String::new()),
                ("123456789", String::new()),
            ],
        );
    }

    #[test]
    fn phones() {
        check(
            ddd,
            &[
                ("011", "11".into()),
                ("0021", "21".into()),
                ("0", String::new()),
                ("", String::new()),
                ("61", "61".into()),
            ],
        );
        check(
            telefone,
            &[
                ("12345678", "12345678".into()),
                ("0", String::new()),
                ("", String::new()),
                ("3333-4444", "33334444".into()),
            ],
        );
    }

    #[test]
    fn email_and_street() {
        assert_eq!(email("CONTATO@EXEMPLO.COM.BR"), "contato@exemplo.com.br");
        assert_eq!(logradouro("RUA", "DAS FLORES"), "RUA DAS FLORES");
        assert_eq!(logradouro("", "DAS FLORES"), "DAS FLORES");
        assert_eq!(logradouro("RUA", ""), "RUA");
        assert_eq!(logradouro("", ""), "");
    }

    #[test]
    fn documents_are_never_whole() {
        check(
            mask_person_document,
            &[
                ("***456789**", "***.456.789-**".into()),
                ("12345678909", "***.456.789-**".into()),
                ("***000000**", "***.000.000-**".into()),
                ("", String::new()),
                ("44555666000181", String::new()),
            ],
        );
        check(
            mask_company_document,
            &[
                ("12345678000195", "**.345.678/0001-**".into()),
                ("AB12CD34000184", "**.12C.D34/0001-**".into()),
                ("***456789**", String::new()),
                ("", String::new()),
            ],
        );
    }

    // Fuzz targets of the field rules, on stable: a few hundred cases by default,
    // PROPTEST_CASES=100000 for a long run.

    fn field_text() -> impl Strategy<Value = String> {
        prop_oneof!["[0-9]{0,20}", "-?[0-9.]{0,22}(,[0-9]{0,3})?", "[0-9 .,/*A-Z-]{0,16}", any::<String>(),]
    }

    /// `YYYYMMDD` of a count of days since 1970-01-01 (an independent walk over the calendar).
    fn civil(days: i32) -> String {
        let (mut y, mut m, mut d, mut left) = (1970, 1, 1, days);
        let month_days = |y: i32, m: i32| match m {
            2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        while left < 0 {
            d -= 1;
            if d == 0 {
                m -= 1;
                if m == 0 {
                    (y, m) = (y - 1, 12);
                }
                d = month_days(y, m);
            }
            left += 1;
        }
        while left > 0 {
            let to_month_end = month_days(y, m) - d;
            if left > to_month_end {
                left -= to_month_end + 1;
                d = 1;
                m += 1;
                if m == 13 {
                    (y, m) = (y + 1, 1);
                }
            } else {
                d += left;
                left = 0;
            }
        }
        format!("{y:04}{m:02}{d:02}")
    }

    proptest! {
        #[test]
        fn a_padded_code_has_its_width_or_stays_as_it_was(code in field_text(), width in 1usize..8) {
            let mut padded = code.clone();
            pad_code(&mut padded, width);
            if !code.is_empty() && code.len() < width && code.bytes().all(|b| b.is_ascii_digit()) {
                prop_assert_eq!(padded.len(), width);
                prop_assert_eq!(padded.trim_start_matches('0'), code.trim_start_matches('0'));
            } else {
                prop_assert_eq!(padded, code);
            }
        }

        #[test]
        fn a_date_is_valid_and_in_range_or_none(text in prop_oneof!["[0-9]{8}", "(1[7-9]|2[01])[0-9]{2}[01][0-9][0-3][0-9]", field_text()]) {
            if let Some(days) = date(&text) {
                prop_assert_eq!(civil(days), text.clone());
                prop_assert!((-62091..=47846).contains(&days), "{} → {}", text, days);
            }
        }

        #[test]
        fn every_day_from_1800_to_2100_is_a_date_one_after_the_other(days in -62091i32..47846) {
            prop_assert_eq!(date(&civil(days)), Some(days));
            prop_assert_eq!(date(&civil(days + 1)), Some(days + 1));
        }

        #[test]
        fn capital_is_exact_or_an_issue(text in field_text()) {
            match capital(&text) {
                Ok(Some(value)) => {
                    let (int, frac) = value.trim_start_matches('-').split_once('.').unwrap();
                    prop_assert!((1..=16).contains(&int.len()) && int.bytes().all(|b| b.is_ascii_digit()), "{}", value);
                    prop_assert!(frac.len() == 2 && frac.bytes().all(|b| b.is_ascii_digit()), "{}", value);
                    // The same digits as the input, less thousands dots and leading zeros.
                    let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
                    let (given_int, given_frac) = text.trim_start_matches('-').split_once(',').unwrap_or((&text, ""));
                    let given_int = digits(given_int);
                    prop_assert_eq!(given_int.trim_start_matches('0'), int.trim_start_matches('0'));
                    prop_assert_eq!(format!("{given_frac:0<2}"), frac);
                }
                Ok(None) => prop_assert_eq!(text, ""),
                Err(_) => prop_assert!(!text.is_empty()),
            }
        }

        #[test]
        fn capital_of_any_cents_reads_back(cents in 0u64..10_000_000_000_000_000, negative in any::<bool>()) {
            let text = format!("{}{},{:02}", if negative { "-" } else { "" }, cents / 100, cents % 100);
            let sign = if negative && cents > 0 { "-" } else { "" };
            prop_assert_eq!(capital(&text), Ok(Some(format!("{sign}{}.{:02}", cents / 100, cents % 100))));
        }

        #[test]
        fn ceps_phones_and_documents_keep_their_shape(text in field_text()) {
            let c = cep(&text);
            prop_assert!(c.is_empty() || (c.len() == 8 && c.bytes().all(|b| b.is_ascii_digit()) && c != "00000000"), "{}", c);
            prop_assert!(ddd(&text).bytes().all(|b| b.is_ascii_digit()) && !ddd(&text).starts_with('0'));
            prop_assert!(telefone(&text).bytes().all(|b| b.is_ascii_digit()));
            let person = mask_person_document(&text);
            prop_assert!(person.is_empty() || (person.len() == 14 && person.starts_with("***.") && person.ends_with("-**")), "{}", person);
            let company = mask_company_document(&text);
            prop_assert!(company.is_empty() || (company.len() == 18 && company.starts_with("**.") && company.ends_with("-**")), "{}", company);
        }
    }
}
