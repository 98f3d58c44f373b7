//! Query parameter validation: every invalid value is a 400 naming the parameter (the search
//! filters' values by the rules of `cnpj_model::filter`, which `cnpj-etl export` shares).
//!
//! One rule for every parameter: absent means "not given"; a value that is empty (or, for the
//! text filters, only white space) is a value of the wrong length, a 400 like any other. Values
//! are percent-decoded strictly: one that is not UTF-8 is a 400 naming its parameter, never
//! replaced by U+FFFD. Codes and numbers are taken as sent (no trimming), so that the OpenAPI
//! document's patterns say exactly what is accepted.

use std::collections::{HashMap, HashSet};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use cnpj_model::filter::{self, Code, FilterError};
use cnpj_model::{CnpjQuery, Locale};
use cnpj_store::{ChangeFilters, EVENTS, NetworkOptions, PartnerDocument, PartnerFilters, SearchFilters};

use crate::error::ApiError;

/// The query string of a request, decoded; a repeated parameter keeps its last value.
#[derive(Debug, Default)]
pub struct Params {
    values: HashMap<String, String>,
    /// Parameters whose value is not UTF-8 once percent-decoded.
    undecodable: HashSet<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Params, ApiError> {
        Ok(Params::parse(parts.uri.query().unwrap_or("")))
    }
}

impl Params {
    /// `application/x-www-form-urlencoded` decoding (`+` is a space), without loss: a key that is
    /// not UTF-8 names no parameter and is ignored like any unknown one.
    pub fn parse(query: &str) -> Params {
        let mut params = Params::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let Some(key) = decode(key) else { continue };
            match decode(value) {
                Some(value) => {
                    params.undecodable.remove(&key);
                    params.values.insert(key, value);
                }
                None => {
                    params.values.remove(&key);
                    params.undecodable.insert(key);
                }
            }
        }
        params
    }

    /// Values already decoded (an MCP tool's arguments, `crate::mcp`).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Params {
        Params { values: pairs.into_iter().collect(), undecodable: HashSet::new() }
    }

    /// The value of `name` as sent: `None` when absent; a 400 when it is empty or not UTF-8.
    fn get(&self, name: &str) -> Result<Option<&str>, ApiError> {
        if self.undecodable.contains(name) {
            return Err(ApiError::invalid(name, format!("The {name} must be UTF-8 text.")));
        }
        match self.values.get(name) {
            Some(v) if v.is_empty() => Err(ApiError::invalid(name, format!("The {name} must not be empty."))),
            v => Ok(v.map(String::as_str)),
        }
    }

    /// A text filter, trimmed ([`filter::text`]); a 400 when it is only white space.
    fn text(&self, name: &str) -> Result<Option<&str>, ApiError> {
        checked(self, name, filter::text)
    }
}

/// A filter's value by its rule in `cnpj_model::filter`: `None` when absent; a 400 naming the
/// parameter when it breaks the rule.
fn checked<'a, T>(
    params: &'a Params,
    name: &str,
    rule: impl FnOnce(&'a str) -> Result<T, FilterError>,
) -> Result<Option<T>, ApiError> {
    let Some(raw) = params.get(name)? else { return Ok(None) };
    rule(raw).map(Some).map_err(|e| ApiError::invalid(name, format!("The {name} {e}.")))
}

/// Percent-decoding (`+` is a space); `None` when the bytes are not UTF-8. A `%` not followed by
/// two hex digits stands for itself.
fn decode(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let hex = |i: usize| b.get(i).and_then(|&c| char::from(c).to_digit(16));
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).ok()?);
                i += 3;
            }
            (b'+', ..) => {
                out.push(b' ');
                i += 1;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

pub fn locale(params: &Params) -> Result<Locale, ApiError> {
    match params.get("locale")? {
        None => Ok(Locale::PtBr),
        Some(v) => v.parse().map_err(|_| ApiError::invalid("locale", "The locale must be one of pt-br, en, es.")),
    }
}

/// The largest page number (the OpenAPI document's `maximum`).
pub const MAX_PAGE: u64 = u32::MAX as u64;

fn integer(params: &Params, name: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64, ApiError> {
    let Some(raw) = params.get(name)? else { return Ok(default) };
    let digits = !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| raw.parse::<u64>().ok()).flatten().filter(|n| range.contains(n)).ok_or_else(|| {
        ApiError::invalid(name, format!("The {name} must be an integer from {} to {}.", range.start(), range.end()))
    })
}

/// `(page, per_page)`: page 1-`MAX_PAGE` (default 1), per_page 1-50 (default 20).
pub fn pagination(params: &Params) -> Result<(u64, u64), ApiError> {
    Ok((integer(params, "page", 1, 1..=MAX_PAGE)?, integer(params, "per_page", 20, 1..=50)?))
}

/// `days` of GET /api/v1/account/usage: 1-90, 30 by default.
pub fn usage_days(params: &Params) -> Result<u64, ApiError> {
    integer(params, "days", 30, 1..=90)
}

/// A code filter of the form `code` ([`Code::parse`]).
fn code(params: &Params, name: &str, code: Code) -> Result<Option<String>, ApiError> {
    checked(params, name, |raw| code.parse(raw))
}

/// A search's code filter: one code or a list ([`filter::list`]); empty when absent.
fn codes(params: &Params, name: &str, code: Code) -> Result<Vec<String>, ApiError> {
    Ok(checked(params, name, |raw| filter::list(raw, |item| code.parse(item)))?.unwrap_or_default())
}

/// The `state` filter: two letters, upper-cased.
fn state(params: &Params) -> Result<Option<String>, ApiError> {
    checked(params, "state", filter::state)
}

/// The `cnpj` filter: 14 characters with valid check digits, or 8.
fn cnpj(params: &Params) -> Result<Option<CnpjQuery>, ApiError> {
    match params.get("cnpj")? {
        None => Ok(None),
        Some(raw) => {
            Ok(Some(CnpjQuery::parse(raw).map_err(|e| ApiError::invalid("cnpj", format!("Invalid CNPJ: {e}.")))?))
        }
    }
}

/// The search endpoint's filters, text terms first.
pub const SEARCH_FILTERS: [&str; 23] = [
    "trading_name",
    "neighborhood",
    "cnpj",
    "zip_code",
    "porte_empresa_code",
    "company_size",
    "business_sector",
    "city_id",
    "city",
    "state",
    "opening_date_from",
    "opening_date_to",
    "nature_code",
    "situacao_cadastral",
    "any_sector",
    "capital_from",
    "capital_to",
    "has_email",
    "has_phone",
    "simples",
    "mei",
    "head_office",
    "partner_id",
];

/// The filters of a search that ran past its budget to name in its 400: the text terms given
/// (what makes a search slow), else every filter given.
pub fn too_broad(params: &Params) -> ApiError {
    let given = |names: &[&'static str]| -> Vec<&'static str> {
        names.iter().copied().filter(|name| params.values.contains_key(*name)).collect()
    };
    let mut named = given(&SEARCH_FILTERS[..2]);
    if named.is_empty() {
        named = given(&SEARCH_FILTERS[2..]);
    }
    let message = "Too broad to search in time: add letters or digits to the term, or another filter.";
    ApiError::BadRequest(named.into_iter().map(|name| (name.to_owned(), serde_json::json!([message]))).collect())
}

/// Every filter of GET /api/v1/companies/search (and of its count), validated: a code filter
/// takes one value or a comma-separated list ([`filter::list`]).
/// `partners`: whether partners are served (`serve --partners`); without them the `partner_id`
/// filter is gone as their endpoints are (404).
pub fn search_filters(params: &Params, partners: bool) -> Result<SearchFilters, ApiError> {
    if !partners && params.values.contains_key("partner_id") {
        return Err(ApiError::NotFound);
    }
    let cnpj = cnpj(params)?;
    let zip_prefix = checked(params, "zip_code", filter::zip_prefix)?;
    let porte = codes(params, "porte_empresa_code", Code::COMPANY_SIZE)?;
    let size = codes(params, "company_size", Code::COMPANY_SIZE)?;
    if !porte.is_empty() && !size.is_empty() && porte != size {
        return Err(ApiError::invalid("company_size", "company_size and porte_empresa_code disagree."));
    }
    let capital_from = checked(params, "capital_from", filter::money)?;
    let capital_to = checked(params, "capital_to", filter::money)?;
    let flag = |name: &str| checked(params, name, filter::boolean);
    Ok(SearchFilters {
        cnpj,
        business_sector: codes(params, "business_sector", Code::BUSINESS_SECTOR)?,
        city_id: codes(params, "city_id", Code::CITY_ID)?,
        city: params.text("city")?.map(str::to_owned),
        state: checked(params, "state", |raw| filter::list(raw, filter::state))?.unwrap_or_default(),
        porte: if porte.is_empty() { size } else { porte },
        opening_from: checked(params, "opening_date_from", filter::date)?,
        opening_to: checked(params, "opening_date_to", filter::date)?,
        trading_name: params.text("trading_name")?.map(str::to_owned),
        neighborhood: params.text("neighborhood")?.map(str::to_owned),
        zip_prefix,
        nature_code: codes(params, "nature_code", Code::NATURE_CODE)?,
        situacao: codes(params, "situacao_cadastral", Code::SITUACAO_CADASTRAL)?,
        any_sector: codes(params, "any_sector", Code::BUSINESS_SECTOR)?,
        capital_from,
        capital_to,
        has_email: flag("has_email")?,
        has_phone: flag("has_phone")?,
        simples: flag("simples")?,
        mei: flag("mei")?,
        head_office: flag("head_office")?,
        partner_id: checked(params, "partner_id", filter::partner_id)?,
    })
}

/// A month `YYYY-MM` (01 to 12).
fn month(params: &Params, name: &str) -> Result<Option<String>, ApiError> {
    let Some(raw) = params.get(name)? else { return Ok(None) };
    let b = raw.as_bytes();
    let valid = b.len() == 7
        && b.iter().enumerate().all(|(i, c)| if i == 4 { *c == b'-' } else { c.is_ascii_digit() })
        && (1..=12).contains(&((b[5] - b'0') * 10 + (b[6] - b'0')));
    if valid {
        Ok(Some(raw.to_owned()))
    } else {
        Err(ApiError::invalid(name, format!("The {name} must be a month YYYY-MM, not {raw:?}.")))
    }
}

/// The `event` filter: one event name or several, comma-separated (each as sent: no
/// trimming, no case folding); in the order of [`EVENTS`], each once.
fn events(params: &Params) -> Result<Vec<String>, ApiError> {
    let Some(raw) = params.get("event")? else { return Ok(Vec::new()) };
    let given: Vec<&str> = raw.split(',').collect();
    if let Some(unknown) = given.iter().find(|name| !EVENTS.contains(name)) {
        return Err(ApiError::invalid(
            "event",
            format!("Unknown event {unknown:?}: use one or several, comma-separated, of {}.", EVENTS.join(", ")),
        ));
    }
    Ok(EVENTS.iter().filter(|e| given.contains(e)).map(|e| (*e).to_owned()).collect())
}

/// Every filter of GET /api/v1/changes, validated (they combine with AND, `month` and `since`
/// too, as search's filters do: that month if it is not before `since`, else nothing).
pub fn change_filters(params: &Params) -> Result<ChangeFilters, ApiError> {
    Ok(ChangeFilters {
        month: month(params, "month")?,
        since: month(params, "since")?,
        events: events(params)?,
        state: state(params)?,
        city_id: code(params, "city_id", Code::CITY_ID)?,
        business_sector: code(params, "business_sector", Code::BUSINESS_SECTOR)?,
        cnpj: cnpj(params)?,
        watched: None,
    })
}

/// A watchlist's id in a path: a positive integer (`None`: no such list).
pub fn watchlist_id(raw: &str) -> Option<i64> {
    let digits = !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| raw.parse::<i64>().ok()).flatten().filter(|id| *id > 0)
}

/// The filters of a watchlist's events (`month`, `since`); the list gives the rest.
pub fn watchlist_event_filters(params: &Params) -> Result<ChangeFilters, ApiError> {
    Ok(ChangeFilters { month: month(params, "month")?, since: month(params, "since")?, ..Default::default() })
}

/// `(page, per_page)` of a watchlist's entries: page 1-`MAX_PAGE` (default 1), per_page 1-1,000
/// (default 100).
pub fn entries_pagination(params: &Params) -> Result<(u64, u64), ApiError> {
    Ok((integer(params, "page", 1, 1..=MAX_PAGE)?, integer(params, "per_page", 100, 1..=1000)?))
}

/// The `state` filter of the city list (two letters, upper-cased).
pub fn city_state(params: &Params) -> Result<Option<String>, ApiError> {
    state(params)
}

pub fn term(params: &Params) -> Result<Option<&str>, ApiError> {
    params.text("term")
}

/// A `partner_id` in a path ([`filter::partner_id`]; `None`: no such partner).
pub fn partner_id(raw: &str) -> Option<String> {
    filter::partner_id(raw).ok()
}

/// The `document` filter of the partners' search: a person's masked CPF in a served form
/// (`***123456**`, `***.123.456-**`) or its six digits; a CNPJ or a company's base for a legal
/// entity.
fn partner_document(raw: &str) -> Option<PartnerDocument> {
    let kept: String = raw.chars().filter(|c| !matches!(c, '.' | '-' | '/') && !c.is_whitespace()).collect();
    let digits: String = kept.chars().filter(char::is_ascii_digit).collect();
    let masked = kept.len() == 11 && kept.starts_with("***") && kept.ends_with("**") && digits.len() == 6;
    if masked || (kept.len() == 6 && digits.len() == 6) {
        return Some(PartnerDocument::Shown(digits));
    }
    CnpjQuery::parse(raw).ok().map(|q| PartnerDocument::Company(q.basico().to_owned()))
}

/// Every filter of GET /api/v1/partners/search, validated.
pub fn partner_filters(params: &Params) -> Result<PartnerFilters, ApiError> {
    let document = match params.get("document")? {
        None => None,
        Some(raw) => Some(partner_document(raw).ok_or_else(|| {
            ApiError::invalid(
                "document",
                "The document must be a CPF as served (***123456**) or its six digits, or a CNPJ or a company's \
                 base (8 characters).",
            )
        })?),
    };
    let tipo = match params.get("type")? {
        None => None,
        Some(t @ ("1" | "2" | "3")) => Some(t.to_owned()),
        Some(_) => {
            return Err(ApiError::invalid("type", "The type must be 1 (legal entity), 2 (person) or 3 (foreign)."));
        }
    };
    Ok(PartnerFilters { name: params.text("name")?.map(str::to_owned), document, tipo, state: state(params)? })
}

/// `depth` (1-3, default 2), `max_nodes` (1-500, default 200) and `active_only` (`true` or
/// `false`, default false) of a company's network.
pub fn network_options(params: &Params) -> Result<NetworkOptions, ApiError> {
    let active_only = match params.get("active_only")? {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::invalid("active_only", "The active_only must be true or false.")),
    };
    Ok(NetworkOptions {
        depth: integer(params, "depth", 2, 1..=3)? as u8,
        max_nodes: integer(params, "max_nodes", 200, 1..=500)? as usize,
        active_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        let mut params = Params::default();
        for (k, v) in pairs {
            params.values.insert((*k).to_owned(), (*v).to_owned());
        }
        params
    }

    fn named(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(errors) => errors.keys().next().cloned().unwrap_or_default(),
            other => format!("{other:?}"),
        }
    }

    fn check(pairs: &[(&str, &str)], expected: Result<SearchFilters, &str>) {
        let got = search_filters(&params(pairs), true).map_err(named);
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
                business_sector: vec!["4751201".into()],
                city_id: vec!["0107".into()],
                nature_code: vec!["2062".into()],
                situacao: vec!["02".into()],
                ..Default::default()
            }),
        );
        check(
            &[("zip_code", "01310-100"), ("state", "sp")],
            Ok(SearchFilters { zip_prefix: Some("01310100".into()), state: vec!["SP".into()], ..Default::default() }),
        );
        check(&[("company_size", "1")], Ok(SearchFilters { porte: vec!["01".into()], ..Default::default() }));
        check(
            &[("trading_name", " pio xii\u{3000}")],
            Ok(SearchFilters { trading_name: Some("pio xii".into()), ..Default::default() }),
        );
    }

    #[test]
    fn code_filters_take_lists_and_the_new_filters_their_values() {
        check(
            &[
                ("state", "sp,RJ,SP"),
                ("city_id", "107,7107"),
                ("situacao_cadastral", "2,02,8"),
                ("company_size", "5,1"),
                ("porte_empresa_code", "01,05"),
                ("any_sector", "6201-5/01"),
                ("capital_from", "100000"),
                ("capital_to", "1000000.5"),
                ("has_email", "true"),
                ("has_phone", "false"),
                ("simples", "true"),
                ("mei", "false"),
                ("head_office", "true"),
            ],
            Ok(SearchFilters {
                state: vec!["RJ".into(), "SP".into()],
                city_id: vec!["0107".into(), "7107".into()],
                situacao: vec!["02".into(), "08".into()],
                porte: vec!["01".into(), "05".into()],
                any_sector: vec!["6201501".into()],
                capital_from: Some(10_000_000),
                capital_to: Some(100_000_050),
                has_email: Some(true),
                has_phone: Some(false),
                simples: Some(true),
                mei: Some(false),
                head_office: Some(true),
                ..Default::default()
            }),
        );
        let fifty: Vec<String> = (1..=50).map(|n| n.to_string()).collect();
        let mut padded: Vec<String> = fifty.iter().map(|n| format!("{n:0>4}")).collect();
        padded.sort();
        check(&[("city_id", &fifty.join(","))], Ok(SearchFilters { city_id: padded, ..Default::default() }));
        let fifty_one = format!("{},51", fifty.join(","));
        for (name, bad) in [
            ("state", "SP,,RJ"),
            ("state", "SP,"),
            ("state", "SP, RJ"),
            ("city_id", fifty_one.as_str()),
            ("business_sector", "4751201,12"),
            ("nature_code", ",2062"),
            ("any_sector", "x"),
            ("capital_from", "1.000,00"),
            ("capital_to", "-1"),
            ("capital_to", "1e6"),
            ("has_email", "1"),
            ("has_phone", "TRUE"),
            ("simples", "S"),
            ("mei", "no"),
            ("head_office", "yes"),
        ] {
            check(&[(name, bad)], Err(name));
        }
        check(&[("company_size", "01,03"), ("porte_empresa_code", "03")], Err("company_size"));
    }

    #[test]
    fn invalid_values_name_their_parameter() {
        check(&[("business_sector", "12345678")], Err("business_sector"));
        check(&[("state", "SPX")], Err("state"));
        check(&[("state", " SP")], Err("state"));
        check(&[("opening_date_from", "2020-02-30")], Err("opening_date_from"));
        check(&[("opening_date_to", "20200101")], Err("opening_date_to"));
        check(&[("cnpj", "11222333000182")], Err("cnpj"));
        check(&[("zip_code", "ABC")], Err("zip_code"));
        check(&[("company_size", "01"), ("porte_empresa_code", "03")], Err("company_size"));
    }

    #[test]
    fn empty_values_are_invalid_for_every_parameter() {
        for name in SEARCH_FILTERS {
            check(&[(name, "")], Err(name));
        }
        for name in ["trading_name", "neighborhood", "city"] {
            check(&[(name, " \t\u{a0}\u{1f}")], Err(name));
        }
        for name in ["page", "per_page"] {
            assert_eq!(pagination(&params(&[(name, "")])).map_err(named), Err(name.to_owned()));
        }
        assert_eq!(locale(&params(&[("locale", "")])).map_err(named), Err("locale".to_owned()));
        assert_eq!(term(&params(&[("term", "")])).map_err(named), Err("term".to_owned()));
        assert_eq!(city_state(&params(&[("state", "")])).map_err(named), Err("state".to_owned()));
        check(&[("unknown", "")], Ok(SearchFilters::default()));
    }

    #[test]
    fn query_strings_decode_strictly() {
        let p = Params::parse("trading_name=S%C3%A3o+Jo%C3%A3o&state=SP&state=RJ&x=%FF&%FF=1&a=100%&b");
        assert_eq!(p.text("trading_name").ok().flatten(), Some("São João"));
        assert_eq!(p.get("state").ok().flatten(), Some("RJ"), "the last value wins");
        assert_eq!(p.get("x").map_err(named), Err("x".to_owned()));
        assert_eq!(p.get("a").ok().flatten(), Some("100%"));
        assert_eq!(p.get("b").map_err(named), Err("b".to_owned()), "a key without `=` has an empty value");
        let bad = Params::parse("trading_name=%FF");
        assert_eq!(search_filters(&bad, true).map_err(named), Err("trading_name".to_owned()));
        assert!(search_filters(&Params::parse("%FF=1&other=%FE"), true).is_ok(), "unknown parameters are ignored");
    }

    /// The characters of a regex class body as the document writes it (`\t`, `\r`, `\uXXXX`,
    /// literals, `a-b` ranges), as inclusive ranges.
    fn class_ranges(body: &str) -> Vec<(char, char)> {
        let mut atoms: Vec<Option<char>> = Vec::new(); // None: a range dash
        let mut rest = body;
        while let Some(c) = rest.chars().next() {
            let (atom, len) = match (c, rest.get(1..2)) {
                ('\\', Some("t")) => (Some('\t'), 2),
                ('\\', Some("r")) => (Some('\r'), 2),
                ('\\', Some("u")) => (char::from_u32(u32::from_str_radix(&rest[2..6], 16).unwrap()), 6),
                ('-', _) => (None, 1),
                (c, _) => (Some(c), c.len_utf8()),
            };
            atoms.push(atom);
            rest = &rest[len..];
        }
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < atoms.len() {
            let lo = atoms[i].expect("a class opens with a character");
            if atoms.get(i + 1) == Some(&None) {
                ranges.push((lo, atoms[i + 2].expect("a range ends with a character")));
                i += 3;
            } else {
                ranges.push((lo, lo));
                i += 1;
            }
        }
        ranges
    }

    #[test]
    fn blank_is_what_the_document_says() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../../../schemas/openapi.json")).unwrap();
        let operations = [
            ("/api/v1/companies/search", ["trading_name", "neighborhood", "city"].as_slice()),
            ("/api/v1/cities", &["term"]),
        ];
        for (path, names) in operations {
            for name in names {
                let parameters = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
                let parameter = parameters.iter().find(|p| p["name"] == *name).unwrap();
                let pattern = parameter["schema"]["pattern"].as_str().unwrap();
                let body = pattern.strip_prefix("[^").and_then(|p| p.strip_suffix(']')).unwrap();
                let ranges = class_ranges(body);
                for c in (0..=0x10_FFFF).filter_map(char::from_u32) {
                    let listed = ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c));
                    assert_eq!(listed, filter::is_blank(c), "{name}: U+{:04X}", u32::from(c));
                }
            }
        }
    }

    fn check_changes(pairs: &[(&str, &str)], expected: Result<ChangeFilters, &str>) {
        let got = change_filters(&params(pairs)).map_err(named);
        assert_eq!(got, expected.map_err(str::to_owned), "{pairs:?}");
    }

    #[test]
    fn change_filters_are_validated_like_search_filters() {
        check_changes(
            &[
                ("since", "2026-01"),
                ("event", "moved,opened,moved"),
                ("state", "sp"),
                ("city_id", "107"),
                ("business_sector", "6201-5/01"),
                ("cnpj", "11.222.333"),
            ],
            Ok(ChangeFilters {
                since: Some("2026-01".into()),
                events: vec!["opened".into(), "moved".into()],
                state: Some("SP".into()),
                city_id: Some("0107".into()),
                business_sector: Some("6201501".into()),
                cnpj: Some(CnpjQuery::parse("11222333").unwrap()),
                ..Default::default()
            }),
        );
        check_changes(
            &[("month", "2026-12")],
            Ok(ChangeFilters { month: Some("2026-12".into()), ..Default::default() }),
        );
        check_changes(&[("unknown", "1")], Ok(ChangeFilters::default()));
        for (name, bad) in [
            ("month", "2026-13"),
            ("month", "2026-00"),
            ("month", "2026-1"),
            ("month", "202610"),
            ("month", "2026-10-01"),
            ("since", "２０２６-01"),
            ("since", ""),
            ("event", "closed"),
            ("event", "opened,"),
            ("event", "opened, moved"),
            ("event", "Opened"),
            ("event", ""),
            ("state", "S"),
            ("city_id", "12345"),
            ("business_sector", "12"),
            ("cnpj", "11222333000182"),
            ("page", "0"),
        ] {
            let got = change_filters(&params(&[(name, bad)])).and_then(|_| pagination(&params(&[(name, bad)])));
            assert_eq!(got.map(|_| ()).map_err(named), Err(name.to_owned()), "{name}={bad:?}");
        }
        check_changes(
            &[("month", "2026-10"), ("since", "2026-11")],
            Ok(ChangeFilters { month: Some("2026-10".into()), since: Some("2026-11".into()), ..Default::default() }),
        );
    }

    #[test]
    fn the_document_lists_every_event() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../../../schemas/openapi.json")).unwrap();
        let listed: Vec<&str> = doc["components"]["schemas"]["Change"]["properties"]["event"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert_eq!(listed, EVENTS);
        let parameters = doc["paths"]["/api/v1/changes"]["get"]["parameters"].as_array().unwrap();
        let pattern = parameters.iter().find(|p| p["name"] == "event").unwrap()["schema"]["pattern"].as_str().unwrap();
        let names = EVENTS.join("|");
        assert_eq!(pattern, format!("^(?:{names})(?:,(?:{names}))*$"));
    }

    #[test]
    fn pagination_bounds() {
        assert_eq!(pagination(&params(&[])).ok(), Some((1, 20)));
        assert_eq!(pagination(&params(&[("page", "3"), ("per_page", "50")])).ok(), Some((3, 50)));
        assert_eq!(pagination(&params(&[("page", "4294967295")])).ok(), Some((MAX_PAGE, 20)));
        for bad in [
            ("per_page", "51"),
            ("per_page", "0"),
            ("page", "0"),
            ("page", "x"),
            ("per_page", "-1"),
            ("page", "+2"),
            ("page", " 2"),
            ("page", "4294967296"),
        ] {
            assert!(pagination(&params(&[bad])).is_err(), "{bad:?}");
        }
    }
}
