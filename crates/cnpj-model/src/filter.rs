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

    #[test]
    fn errors_say_the_rule() {
        assert_eq!(Code::CITY_ID.parse("x").unwrap_err().to_string(), "must be a code of 1 to 4 digits");
        assert_eq!(state("x").unwrap_err().to_string(), "must be a two-letter code");
    }
}
