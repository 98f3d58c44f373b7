//! CNPJ identity: check digits (numeric and alphanumeric) and the accepted input forms.

use std::fmt;

/// A valid 14-character CNPJ: 12 characters of `[0-9A-Z]` and two numeric check digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cnpj([u8; 14]);

/// What a user may ask for: one establishment, or a company by its 8-character base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CnpjQuery {
    Full(Cnpj),
    Basico([u8; 8]),
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidCnpj {
    #[error("a CNPJ has 14 characters (or 8 for cnpj_basico), found {0}")]
    Length(usize),
    #[error("character {0:?} is not allowed in a CNPJ")]
    Character(char),
    #[error("the check digits must be numeric")]
    NonNumericCheckDigits,
    #[error("wrong check digits: expected {expected}")]
    CheckDigits { expected: String },
}

const W1: [u32; 12] = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
const W2: [u32; 13] = [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];

/// The two check digits of a 12-character base (`[0-9A-Z]`), or `None` if a character is not allowed.
/// The value of a character is its ASCII code − 48, so one routine serves numeric and alphanumeric CNPJs.
pub fn check_digits(base: &[u8; 12]) -> Option<[u8; 2]> {
    let mut v = [0u32; 13];
    for (slot, &c) in v.iter_mut().zip(base) {
        if !is_cnpj_char(c) {
            return None;
        }
        *slot = u32::from(c - b'0');
    }
    let dv = |values: &[u32], weights: &[u32]| {
        let r = values.iter().zip(weights).map(|(v, w)| v * w).sum::<u32>() % 11;
        if r < 2 { 0 } else { 11 - r }
    };
    let d1 = dv(&v[..12], &W1);
    v[12] = d1;
    let d2 = dv(&v, &W2);
    Some([b'0' + d1 as u8, b'0' + d2 as u8])
}

fn is_cnpj_char(c: u8) -> bool {
    c.is_ascii_digit() || c.is_ascii_uppercase()
}

impl Cnpj {
    /// Validates 14 characters exactly as given (no mask removal, no case change).
    pub fn from_bytes(bytes: &[u8]) -> Result<Cnpj, InvalidCnpj> {
        let arr: [u8; 14] = bytes.try_into().map_err(|_| InvalidCnpj::Length(bytes.len()))?;
        if let Some(&c) = arr[..12].iter().find(|&&c| !is_cnpj_char(c)) {
            return Err(InvalidCnpj::Character(char::from(c)));
        }
        if !arr[12..].iter().all(u8::is_ascii_digit) {
            return Err(InvalidCnpj::NonNumericCheckDigits);
        }
        let base: [u8; 12] = arr[..12].try_into().expect("12 bytes");
        let expected = check_digits(&base).expect("characters checked above");
        if arr[12..] != expected {
            return Err(InvalidCnpj::CheckDigits { expected: String::from_utf8_lossy(&expected).into_owned() });
        }
        Ok(Cnpj(arr))
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("a CNPJ is ASCII")
    }

    /// The first 8 characters (`cnpj_basico`).
    pub fn basico(&self) -> &str {
        &self.as_str()[..8]
    }
}

impl fmt::Display for Cnpj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Cnpj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cnpj({})", self.as_str())
    }
}

impl CnpjQuery {
    /// Parses user input: mask characters `.`, `/`, `-` and white space are removed
    /// wherever they stand, letters are upper-cased; 14 characters must carry valid check digits.
    pub fn parse(input: &str) -> Result<CnpjQuery, InvalidCnpj> {
        let mut clean = Vec::with_capacity(14);
        for c in input.chars() {
            if matches!(c, '.' | '/' | '-') || c.is_whitespace() {
                continue;
            }
            let c = c.to_ascii_uppercase();
            if !c.is_ascii() || !is_cnpj_char(c as u8) {
                return Err(InvalidCnpj::Character(c));
            }
            clean.push(c as u8);
        }
        match clean.len() {
            14 => Cnpj::from_bytes(&clean).map(CnpjQuery::Full),
            8 => Ok(CnpjQuery::Basico(clean.try_into().expect("8 bytes"))),
            n => Err(InvalidCnpj::Length(n)),
        }
    }

    /// The `cnpj_basico` this query belongs to.
    pub fn basico(&self) -> &str {
        match self {
            CnpjQuery::Full(cnpj) => cnpj.basico(),
            CnpjQuery::Basico(b) => std::str::from_utf8(b).expect("ASCII"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: &str, expected: Result<&str, InvalidCnpj>) {
        let got = CnpjQuery::parse(input).map(|q| match q {
            CnpjQuery::Full(c) => c.as_str().to_owned(),
            CnpjQuery::Basico(_) => q.basico().to_owned(),
        });
        assert_eq!(got, expected.map(str::to_owned), "input {input:?}");
    }

    #[test]
    fn contract_examples_are_valid() {
        check("00000000000191", Ok("00000000000191"));
        check("33683111000280", Ok("33683111000280"));
        check("12ABC34501DE35", Ok("12ABC34501DE35"));
        check("12.abc.345/01de-35", Ok("12ABC34501DE35"));
        check(" 11.222.333/0001-81 ", Ok("11222333000181"));
        check("AB.12C.D34/0001-84", Ok("AB12CD34000184"));
    }

    #[test]
    fn basico_forms() {
        check("11222333", Ok("11222333"));
        check("11.222.333", Ok("11222333"));
        check("ab12cd34", Ok("AB12CD34"));
    }

    #[test]
    fn invalid_forms() {
        check("11222333000182", Err(InvalidCnpj::CheckDigits { expected: "81".into() }));
        check("1122233300018", Err(InvalidCnpj::Length(13)));
        check("", Err(InvalidCnpj::Length(0)));
        check("11_222_333", Err(InvalidCnpj::Character('_')));
        check("12ABC34501DEA5", Err(InvalidCnpj::NonNumericCheckDigits));
        check("1122233300018é", Err(InvalidCnpj::Character('é')));
    }

    #[test]
    fn documented_check_digits() {
        for (base, dv) in [
            ("000000000001", "91"),
            ("191312430001", "97"),
            ("112223330001", "81"),
            ("AB12CD340001", "84"),
            ("12ABC34501DE", "35"),
            ("336831110002", "80"),
        ] {
            let got = check_digits(base.as_bytes().try_into().unwrap()).unwrap();
            assert_eq!(&got, dv.as_bytes(), "{base}");
        }
    }

    proptest! {
        #[test]
        fn assembled_cnpjs_always_validate(base in "[0-9A-Z]{12}") {
            let b: [u8; 12] = base.as_bytes().try_into().unwrap();
            let dv = check_digits(&b).unwrap();
            let full = format!("{base}{}", std::str::from_utf8(&dv).unwrap());
            prop_assert_eq!(Cnpj::from_bytes(full.as_bytes()).unwrap().to_string(), full);
        }

        #[test]
        fn any_single_digit_change_in_the_check_digits_is_caught(base in "[0-9A-Z]{12}", pos in 12usize..14, delta in 1u8..10) {
            let b: [u8; 12] = base.as_bytes().try_into().unwrap();
            let mut full = [0u8; 14];
            full[..12].copy_from_slice(&b);
            full[12..].copy_from_slice(&check_digits(&b).unwrap());
            full[pos] = b'0' + (full[pos] - b'0' + delta) % 10;
            prop_assert!(Cnpj::from_bytes(&full).is_err());
        }

        #[test]
        fn masking_and_case_never_change_the_result(base in "[0-9A-Z]{12}") {
            let b: [u8; 12] = base.as_bytes().try_into().unwrap();
            let full = format!("{base}{}", std::str::from_utf8(&check_digits(&b).unwrap()).unwrap());
            let masked = format!("{}.{}.{}/{}-{}", &full[..2], &full[2..5], &full[5..8], &full[8..12], &full[12..]);
            prop_assert_eq!(CnpjQuery::parse(&masked.to_lowercase()), CnpjQuery::parse(&full));
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,30}") {
            let _ = CnpjQuery::parse(&s);
        }
    }
}
