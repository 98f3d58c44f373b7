//! The accepted forms of the search filters' values, one rule each, shared by the API's query
//! parameters and `cnpj-etl export`'s options: a rule takes the value as given and returns the one
//! the store filters on.

use crate::calendar::is_dataset_date;

/// A filter value that breaks its rule, displayed as the rule without its subject ("must be a
/// two-letter code"): the caller names the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("must be a code of {min} to {width} digits")]
    Code { min: usize, width: usize },
    #[error("must be a date YYYY-MM-DD from 1800 to 2100")]
    Date,
    #[error("must be a two-letter code")]
    State,
    #[error("must be 1 to 8 digits")]
    ZipCode,
    #[error("must not be blank")]
    Blank,
    #[error("must hold no empty value: write values between commas, without spaces")]
    EmptyItem,
    #[error("must hold at most {MAX_VALUES} comma-separated values")]
    TooMany,
    #[error("must be reais with at most two decimals after a point, without thousands separators (1000.50)")]
    Money,
    #[error("must be true or false")]
    Boolean,
    #[error("must be a partner_id: p and 16 of a-z and 2-7")]
    PartnerId,
}

/// The most values a code filter's list holds.
pub const MAX_VALUES: usize = 50;

/// A code filter's value: one value, or up to [`MAX_VALUES`] separated by commas, each by `rule`
/// (so that a space next to a comma breaks the rule as it does alone); the values, sorted, each
/// once (`1,01` is one size code). An empty value (`SP,,RJ`, a trailing comma) is refused rather
/// than skipped, and a value that breaks `rule` is refused with the rule's error.
pub fn list(text: &str, rule: impl Fn(&str) -> Result<String, FilterError>) -> Result<Vec<String>, FilterError> {
    let items: Vec<&str> = text.split(',').collect();
    if items.len() > MAX_VALUES {
        return Err(FilterError::TooMany);
    }
    if items.len() > 1 && items.iter().any(|item| item.is_empty()) {
        return Err(FilterError::EmptyItem);
    }
    let mut values = items.into_iter().map(rule).collect::<Result<Vec<_>, _>>()?;
    values.sort_unstable();
    values.dedup();
    Ok(values)
}

/// An amount of reais, as cents: digits, then optionally a point and one or two decimals
/// (`1000`, `1000.5`, `1000.50`); no sign, no thousands separators (a comma would read as a
/// list, and `1.000` as one real), at most 16 digits before the point (the capital is stored as
/// DECIMAL(18, 2)).
pub fn money(text: &str) -> Result<u64, FilterError> {
    let (units, cents) = text.split_once('.').unwrap_or((text, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let shaped = (1..=16).contains(&units.len()) && digits(units) && digits(cents);
    let shaped = shaped && if text.contains('.') { (1..=2).contains(&cents.len()) } else { true };
    if !shaped {
        return Err(FilterError::Money);
    }
    let cents = format!("{cents:0<2}");
    Ok(units.parse::<u64>().map_err(|_| FilterError::Money)? * 100
        + cents.parse::<u64>().map_err(|_| FilterError::Money)?)
}

/// Cents as the decimal text SQL casts to DECIMAL(18, 2) (`100050` → `1000.50`).
pub fn money_text(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// A `partner_id` (contract §14): `p` and 16 characters of lower-case base32, as written.
pub fn partner_id(text: &str) -> Result<String, FilterError> {
    let b = text.as_bytes();
    let valid = b.len() == 17 && b[0] == b'p' && b[1..].iter().all(|c| matches!(c, b'a'..=b'z' | b'2'..=b'7'));
    if valid { Ok(text.to_owned()) } else { Err(FilterError::PartnerId) }
}

/// A yes-or-no filter: `true` or `false`, as written.
pub fn boolean(text: &str) -> Result<bool, FilterError> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(FilterError::Boolean),
    }
}

/// The form of a code filter: `min` to `width` digits, the mask characters `.`, `-` and `/`
/// allowed anywhere, left-padded with `0` to `width` (spreadsheets often lose leading zeros).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    pub min: usize,
    pub width: usize,
}

impl Code {
    /// The main CNAE (`4751-2/01`).
    pub const BUSINESS_SECTOR: Code = Code { min: 6, width: 7 };
    /// The RFB municipality code.
    pub const CITY_ID: Code = Code { min: 1, width: 4 };
    /// The company size (`00`, `01`, `03`, `05`).
    pub const COMPANY_SIZE: Code = Code { min: 1, width: 2 };
    /// The legal nature.
    pub const NATURE_CODE: Code = Code { min: 3, width: 4 };
    /// The registration status.
    pub const SITUACAO_CADASTRAL: Code = Code { min: 1, width: 2 };

    pub fn parse(self, text: &str) -> Result<String, FilterError> {
        let Code { min, width } = self;
        let digits: String = text.chars().filter(|c| !matches!(c, '.' | '-' | '/')).collect();
        if !(min..=width).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(FilterError::Code { min, width });
        }
        Ok(format!("{digits:0>width$}"))
    }
}

/// A date `YYYY-MM-DD` the dataset can hold ([`is_dataset_date`]), as given.
pub fn date(text: &str) -> Result<String, FilterError> {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let shaped = b.len() == 10 && b[4] == b'-' && b[7] == b'-' && digits(0..4) && digits(5..7) && digits(8..10);
    let number = |r: std::ops::Range<usize>| text[r].parse().unwrap_or(0);
    let valid = shaped && is_dataset_date(number(0..4), number(5..7), number(8..10));
    valid.then(|| text.to_owned()).ok_or(FilterError::Date)
}

/// A state: two letters, upper-cased.
pub fn state(text: &str) -> Result<String, FilterError> {
    let valid = text.len() == 2 && text.bytes().all(|b| b.is_ascii_alphabetic());
    valid.then(|| text.to_ascii_uppercase()).ok_or(FilterError::State)
}

/// A CEP prefix: 1 to 8 digits once the mask characters `.`, `-` and spaces are removed.
pub fn zip_prefix(text: &str) -> Result<String, FilterError> {
    let digits: String = text.chars().filter(|c| !matches!(c, '.' | '-' | ' ')).collect();
    let valid = !digits.is_empty() && digits.len() <= 8 && digits.bytes().all(|b| b.is_ascii_digit());
    valid.then_some(digits).ok_or(FilterError::ZipCode)
}

/// A text filter (a name, a neighbourhood, a city), trimmed of [`is_blank`] characters; one that
/// is nothing else is refused.
pub fn text(text: &str) -> Result<&str, FilterError> {
    match text.trim_matches(is_blank) {
        "" => Err(FilterError::Blank),
        trimmed => Ok(trimmed),
    }
}

/// White space as the OpenAPI document's pattern for text filters lists it (Unicode
/// `White_Space` plus the separators U+001C-U+001F, which Python's and ECMAScript's `\s` disagree
/// on; spelled out so that every regex engine reads the document alike).
pub fn is_blank(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(parsed: Result<String, FilterError>, expected: Result<&str, FilterError>) {
        assert_eq!(parsed.as_deref().map_err(|e| *e), expected);
    }

    #[test]
    fn rules() {
        check(Code::BUSINESS_SECTOR.parse("4751-2/01"), Ok("4751201"));
        check(Code::COMPANY_SIZE.parse("2"), Ok("02"));
        check(Code::CITY_ID.parse("1.07"), Ok("0107"));
        check(Code::BUSINESS_SECTOR.parse("12345678"), Err(FilterError::Code { min: 6, width: 7 }));
        check(Code::COMPANY_SIZE.parse("ab"), Err(FilterError::Code { min: 1, width: 2 }));
        check(Code::NATURE_CODE.parse(""), Err(FilterError::Code { min: 3, width: 4 }));
        check(date("2020-02-29"), Ok("2020-02-29"));
        check(date("2021-02-29"), Err(FilterError::Date));
        check(date("2020-04-31"), Err(FilterError::Date));
        check(date("20200101"), Err(FilterError::Date));
        check(date("1700-01-01"), Err(FilterError::Date));
        check(date("2020-1-012"), Err(FilterError::Date));
        check(date("+020-01-01"), Err(FilterError::Date));
        check(date("２０２０-01-01"), Err(FilterError::Date));
        check(state("sp"), Ok("SP"));
        check(state("S1"), Err(FilterError::State));
        check(state(" SP"), Err(FilterError::State));
        check(zip_prefix("01310-100"), Ok("01310100"));
        check(zip_prefix("013101001"), Err(FilterError::ZipCode));
        check(zip_prefix("-"), Err(FilterError::ZipCode));
        assert_eq!(text(" pio xii\u{3000}"), Ok("pio xii"));
        assert_eq!(text(" \t\u{a0}\u{1f}"), Err(FilterError::Blank));
    }

    fn check_list(text: &str, expected: Result<&[&str], FilterError>) {
        let parsed = list(text, filter_state);
        assert_eq!(parsed, expected.map(|v| v.iter().map(|s| (*s).to_owned()).collect()), "{text:?}");
    }

    fn filter_state(text: &str) -> Result<String, FilterError> {
        state(text)
    }

    #[test]
    fn lists() {
        check_list("SP", Ok(&["SP"]));
        check_list("rj,SP,sp", Ok(&["RJ", "SP"]));
        check_list("SP,,RJ", Err(FilterError::EmptyItem));
        check_list("SP,", Err(FilterError::EmptyItem));
        check_list(",SP", Err(FilterError::EmptyItem));
        check_list("", Err(FilterError::State));
        check_list("SP, RJ", Err(FilterError::State));
        check_list("SP,R1", Err(FilterError::State));
        let fifty = vec!["SP"; 50].join(",");
        check_list(&fifty, Ok(&["SP"]));
        check_list(&format!("{fifty},RJ"), Err(FilterError::TooMany));
        let sizes = list("1,01,5", |t| Code::COMPANY_SIZE.parse(t));
        assert_eq!(sizes, Ok(vec!["01".to_owned(), "05".to_owned()]));
    }

    #[test]
    fn money_and_booleans() {
        let check = |text: &str, expected: Result<u64, FilterError>| assert_eq!(money(text), expected, "{text:?}");
        check("1000", Ok(100_000));
        check("1000.5", Ok(100_050));
        check("1000.50", Ok(100_050));
        check("0", Ok(0));
        check("0.01", Ok(1));
        check("9999999999999999.99", Ok(999_999_999_999_999_999));
        for bad in ["", ".", "1.", ".5", "1.000", "1,000", "1,5", "-5", "+5", " 5", "1e3", "10000000000000000", "１"] {
            check(bad, Err(FilterError::Money));
        }
        assert_eq!(money_text(100_050), "1000.50");
        assert_eq!(money_text(7), "0.07");
        assert_eq!(boolean("true"), Ok(true));
        assert_eq!(boolean("false"), Ok(false));
        for bad in ["True", "1", "yes", " true", ""] {
            assert_eq!(boolean(bad), Err(FilterError::Boolean), "{bad:?}");
        }
    }

    proptest::proptest! {
        /// A list reads as the set of its values: any order, any repeats, the same answer.
        #[test]
        fn a_list_is_the_set_of_its_values(codes in proptest::collection::vec(1u32..100, 1..49), rotate in 0usize..50) {
            let text: Vec<String> = codes.iter().map(|c| c.to_string()).collect();
            let mut shuffled = text.clone();
            shuffled.rotate_left(rotate % text.len());
            shuffled.push(text[0].clone());
            let rule = |t: &str| Code::CITY_ID.parse(t);
            let (a, b) = (list(&text.join(","), rule).unwrap(), list(&shuffled.join(","), rule).unwrap());
            proptest::prop_assert_eq!(&a, &b);
            let mut expected: Vec<String> = codes.iter().map(|c| format!("{c:04}")).collect();
            expected.sort();
            expected.dedup();
            proptest::prop_assert_eq!(a, expected);
        }
    }

    #[test]
    fn errors_say_the_rule() {
        assert_eq!(Code::CITY_ID.parse("x").unwrap_err().to_string(), "must be a code of 1 to 4 digits");
        assert_eq!(state("x").unwrap_err().to_string(), "must be a two-letter code");
    }
}
