//! Query parameter validation (contract §5): every invalid value is a 400 naming the parameter.

use std::collections::HashMap;

use cnpj_model::{CnpjQuery, Locale};
use cnpj_store::SearchFilters;

use crate::error::ApiError;

pub type Params = HashMap<String, String>;

fn get<'a>(params: &'a Params, name: &str) -> Option<&'a str> {
    params.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

pub fn locale(params: &Params) -> Result<Locale, ApiError> {
    match params.get("locale") {
        None => Ok(Locale::PtBr),
        Some(v) => v.parse().map_err(|_| ApiError::invalid("locale", "The locale must be one of pt-br, en, es.")),
    }
}

fn integer(params: &Params, name: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64, ApiError> {
    let Some(raw) = params.get(name) else { return Ok(default) };
    raw.trim().parse::<u64>().ok().filter(|n| range.contains(n)).ok_or_else(|| {
        ApiError::invalid(name, format!("The {name} must be an integer from {} to {}.", range.start(), range.end()))
    })
}

/// `(page, per_page)`: page ≥ 1 (default 1), per_page 1-50 (default 20).
pub fn pagination(params: &Params) -> Result<(u64, u64), ApiError> {
    Ok((integer(params, "page", 1, 1..=u64::from(u32::MAX))?, integer(params, "per_page", 20, 1..=50)?))
}

/// A numeric code of `min..=width` digits (mask characters `.`, `-`, `/` removed), left-padded to
/// `width` (leading zeros are often lost by spreadsheets).
fn code(params: &Params, name: &str, min: usize, width: usize) -> Result<Option<String>, ApiError> {
    let Some(raw) = get(params, name) else { return Ok(None) };
    let digits: String = raw.chars().filter(|c| !matches!(c, '.' | '-' | '/')).collect();
    if !(min..=width).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::invalid(name, format!("The {name} must be a code of {min} to {width} digits.")));
    }
    Ok(Some(format!("{digits:0>width$}")))
}

fn date(params: &Params, name: &str) -> Result<Option<String>, ApiError> {
    let Some(raw) = get(params, name) else { return Ok(None) };
    let b = raw.as_bytes();
    let valid = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && cnpj_normalize::date(&format!("{}{}{}", &raw[0..4], &raw[5..7], &raw[8..10])).is_some();
    if valid {
        Ok(Some(raw.to_owned()))
    } else {
        Err(ApiError::invalid(name, format!("The {name} must be a date YYYY-MM-DD.")))
    }
}

/// Every filter of GET /api/v1/companies/search, validated.
pub fn search_filters(params: &Params) -> Result<SearchFilters, ApiError> {
    let cnpj = match get(params, "cnpj") {
        None => None,
        Some(raw) => Some(CnpjQuery::parse(raw).map_err(|e| ApiError::invalid("cnpj", format!("Invalid CNPJ: {e}.")))?),
    };
    let state = match get(params, "state") {
        None => None,
        Some(s) if s.len() == 2 && s.bytes().all(|b| b.is_ascii_alphabetic()) => Some(s.to_ascii_uppercase()),
        Some(_) => return Err(ApiError::invalid("state", "The state must be a two-letter code.")),
    };
    let zip_prefix = match get(params, "zip_code") {
        None => None,
        Some(raw) => {
            let digits: String = raw.chars().filter(|c| !matches!(c, '.' | '-' | ' ')).collect();
            if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ApiError::invalid("zip_code", "The zip_code must be up to 8 digits."));
            }
            Some(digits)
        }
    };
    let porte = code(params, "porte_empresa_code", 1, 2)?;
    let size = code(params, "company_size", 1, 2)?;
    if let (Some(a), Some(b)) = (&porte, &size)
        && a != b
    {
        return Err(ApiError::invalid("company_size", "company_size and porte_empresa_code disagree."));
    }
    Ok(SearchFilters {
        cnpj,
        business_sector: code(params, "business_sector", 6, 7)?,
        city_id: code(params, "city_id", 1, 4)?,
        city: get(params, "city").map(str::to_owned),
        state,
        porte: porte.or(size),
        opening_from: date(params, "opening_date_from")?,
        opening_to: date(params, "opening_date_to")?,
        trading_name: get(params, "trading_name").map(str::to_owned),
        neighborhood: get(params, "neighborhood").map(str::to_owned),
        zip_prefix,
        nature_code: code(params, "nature_code", 3, 4)?,
        situacao: code(params, "situacao_cadastral", 1, 2)?,
    })
}

/// The `state` filter of the city list (two letters, upper-cased).
pub fn city_state(params: &Params) -> Result<Option<String>, ApiError> {
    match get(params, "state") {
        None => Ok(None),
        Some(s) if s.len() == 2 && s.bytes().all(|b| b.is_ascii_alphabetic()) => Ok(Some(s.to_ascii_uppercase())),
        Some(_) => Err(ApiError::invalid("state", "The state must be a two-letter code.")),
    }
}

pub fn term(params: &Params) -> Option<&str> {
    get(params, "term")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn check(pairs: &[(&str, &str)], expected: Result<SearchFilters, &str>) {
        let got = search_filters(&params(pairs)).map_err(|e| match e {
            ApiError::BadRequest(errors) => errors.keys().next().cloned().unwrap_or_default(),
            other => format!("{other:?}"),
        });
        assert_eq!(got, expected.map_err(str::to_owned), "{pairs:?}");
    }

    #[test]
    fn codes_are_padded_and_masks_removed() {
        check(
            &[
                ("business_sector", "4751-2/01"),
                ("city_id", "107"),
                ("nature_code", "2062"),
                ("situacao_cadastral", "2"),
            ],
            Ok(SearchFilters {
                business_sector: Some("4751201".into()),
                city_id: Some("0107".into()),
                nature_code: Some("2062".into()),
                situacao: Some("02".into()),
                ..Default::default()
            }),
        );
        check(
            &[("zip_code", "01310-100"), ("state", "sp")],
            Ok(SearchFilters { zip_prefix: Some("01310100".into()), state: Some("SP".into()), ..Default::default() }),
        );
        check(&[("company_size", "1")], Ok(SearchFilters { porte: Some("01".into()), ..Default::default() }));
    }

    #[test]
    fn invalid_values_name_their_parameter() {
        check(&[("business_sector", "12345678")], Err("business_sector"));
        check(&[("state", "SPX")], Err("state"));
        check(&[("opening_date_from", "2020-02-30")], Err("opening_date_from"));
        check(&[("opening_date_to", "20200101")], Err("opening_date_to"));
        check(&[("cnpj", "11222333000182")], Err("cnpj"));
        check(&[("zip_code", "ABC")], Err("zip_code"));
        check(&[("company_size", "01"), ("porte_empresa_code", "03")], Err("company_size"));
    }

    #[test]
    fn pagination_bounds() {
        assert_eq!(pagination(&params(&[])).ok(), Some((1, 20)));
        assert_eq!(pagination(&params(&[("page", "3"), ("per_page", "50")])).ok(), Some((3, 50)));
        for bad in [("per_page", "51"), ("per_page", "0"), ("page", "0"), ("page", "x"), ("per_page", "-1")] {
            assert!(pagination(&params(&[bad])).is_err(), "{bad:?}");
        }
    }
}
