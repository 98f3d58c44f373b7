//! A search's results as a CSV file, for people logged in: `GET /search/export` shows what it
//! costs (the rows, at most 10,000, priced per row found like batch; asking is free) and the
//! balance, and asks to confirm; `POST /search/export` (the confirmed form, with its CSRF token)
//! has the registry read and charge them, and answers the file: UTF-8, a header, one column per
//! field of the search item (nested objects flattened as `endereco.uf`, lists as JSON), written
//! by [`cell`] to be safe in a spreadsheet that splits cells at `,` or at `;`. Rows asked that are
//! not a whole number from 1 to 10,000 (0 and negatives among them) are refused with a 400.

use askama::Template;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use crate::registry::{Pairs, Refusal};
use crate::search::{Activity, MAX_FIELD, chosen_code, filters, label_of, query};
use crate::{Common, Fields, Lang, Pages, Visit, blocking, see_other, show};

/// The most rows of an export.
pub(crate) const MAX_ROWS: u64 = 10_000;

#[derive(Template)]
#[template(path = "export.html")]
pub(crate) struct ExportPage {
    pub common: Common,
    /// The search's filters, carried by both forms.
    pub filters: Pairs,
    pub back: String,
    pub total: String,
    pub rows: u64,
    pub shown_rows: String,
    pub credits: String,
    pub balance: String,
    pub affordable: bool,
    pub invalid: Vec<(String, String)>,
}

/// The search's filters (as its links carry them: the activity by its code) and the rows asked:
/// all of them (up to `MAX_ROWS`) when not given, else plain digits from 1 to `MAX_ROWS`
/// (`None`: anything else).
fn asked(fields: &Fields) -> (Pairs, Option<u64>) {
    let written = fields.get("rows").unwrap_or("").trim();
    let rows = match written.parse::<u64>() {
        _ if written.is_empty() => Some(MAX_ROWS),
        Ok(n) if (1..=MAX_ROWS).contains(&n) && written.bytes().all(|b| b.is_ascii_digit()) => Some(n),
        _ => None,
    };
    (search_filters(fields), rows)
}

/// The search's filters as its links carry them (the activity by its code), as both exports ask
/// them (this one and a whole result's job, `crate::jobs`).
pub(crate) fn search_filters(fields: &Fields) -> Pairs {
    let code = chosen_code(fields);
    let activity = if code.is_empty() { Activity::Any } else { Activity::Code(code) };
    let mut pairs = filters(fields, &activity);
    pairs.retain(|(_, value)| value.chars().count() <= MAX_FIELD);
    pairs
}

/// Why a cost page cannot show a cost: filters that are not valid (labelled in the page's
/// language, shown by the page itself as a 400), or another refusal's page.
pub(crate) enum Unpriced {
    Invalid(Vec<(String, String)>),
    Page(Response),
}

/// What both cost pages (this one and a whole result's job, `crate::jobs`) show beside the
/// registry's answer: the person's balance (their plan's allowance left and their credits).
pub(crate) async fn with_balance<T>(
    pages: &Pages,
    visit: &Visit,
    person: i64,
    answer: Result<T, Refusal>,
) -> Result<(T, i64), Unpriced> {
    let found = match answer {
        Ok(found) => found,
        Err(Refusal::Invalid(invalid)) => {
            let lang = visit.lang;
            return Err(Unpriced::Invalid(
                invalid.into_iter().map(|(param, message)| (label_of(lang, &param), message)).collect(),
            ));
        }
        Err(refusal) => return Err(Unpriced::Page(visit.refused(&refusal))),
    };
    let read = blocking(pages, move |a| Ok(a.person(person)?.map(|p| a.allowance_left(&p) + p.credits))).await;
    match read {
        Ok(balance) => Ok((found, balance.unwrap_or(0))),
        Err(e) => Err(Unpriced::Page(e.into_response())),
    }
}

/// The field of the rows asked, as a refusal names it.
fn rows_label(lang: Lang) -> String {
    lang.t("export_rows_asked").to_owned()
}

/// GET /search/export: the cost of the export and the form that confirms it.
pub(crate) async fn confirm(State(pages): State<Pages>, visit: Visit, RawQuery(raw): RawQuery) -> Response {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    let lang = visit.lang;
    let (filters, rows) = asked(&Fields::parse(raw.as_deref().unwrap_or("").as_bytes()));
    let mut params = filters.clone();
    params.push(("locale".to_owned(), lang.locale().code().to_owned()));
    let mut page = ExportPage {
        common: visit.common("export"),
        back: format!("/search?{}", query(&filters)),
        filters,
        total: String::new(),
        rows: 0,
        shown_rows: String::new(),
        credits: String::new(),
        balance: String::new(),
        affordable: false,
        invalid: Vec::new(),
    };
    let Some(rows) = rows else {
        // No message in English beside it: the page says the value is not valid, in its language.
        page.invalid = vec![(rows_label(lang), String::new())];
        return visit.render(StatusCode::BAD_REQUEST, &page);
    };
    let answer = registry.export_cost(&session.person, params, rows).await;
    let (cost, balance) = match with_balance(&pages, &visit, session.person.id, answer).await {
        Ok(priced) => priced,
        Err(Unpriced::Invalid(invalid)) => {
            page.invalid = invalid;
            return visit.render(StatusCode::BAD_REQUEST, &page);
        }
        Err(Unpriced::Page(response)) => return response,
    };
    page.total = show::count(lang, cost.total);
    page.rows = cost.rows;
    page.shown_rows = show::count(lang, cost.rows);
    page.credits = show::count(lang, cost.credits.max(0) as u64);
    page.balance = show::count(lang, balance.max(0) as u64);
    page.affordable = cost.credits <= balance;
    visit.render(StatusCode::OK, &page)
}

/// POST /search/export: the confirmed export, charged, answered as a CSV file.
pub(crate) async fn run(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    if !visit.post_allowed(form.get("csrf_token"), true) {
        return visit.forbidden();
    }
    let (mut params, rows) = asked(&form);
    let Some(rows) = rows else {
        let message = format!("{}: {}", rows_label(visit.lang), visit.lang.t("invalid"));
        return visit.message(StatusCode::BAD_REQUEST, "export", &message, true, Some(("/search", "search_companies")));
    };
    params.push(("locale".to_owned(), visit.lang.locale().code().to_owned()));
    match registry.export(&session.person, params, rows).await {
        Ok(items) => (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                (header::CONTENT_DISPOSITION, "attachment; filename=\"cnpj-search.csv\""),
            ],
            csv(&items),
        )
            .into_response(),
        Err(refusal) => form_refused(&visit, "export", &refusal),
    }
}

/// A confirmed export's form refused (this one's and a whole result's job, `crate::jobs`): the
/// filters' messages on a page titled `title_key`, with the way back to the search; any other
/// refusal's own page.
pub(crate) fn form_refused(visit: &Visit, title_key: &str, refusal: &Refusal) -> Response {
    let Refusal::Invalid(invalid) = refusal else { return visit.refused(refusal) };
    let message = invalid.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>().join(" ");
    visit.message(StatusCode::BAD_REQUEST, title_key, &message, true, Some(("/search", "search_companies")))
}

/// An item's columns: nested objects flattened (`endereco.uf`).
fn columns(prefix: &str, object: &Map<String, Value>, out: &mut Vec<String>) {
    for (key, value) in object {
        let column = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        match value {
            Value::Object(inner) => columns(&column, inner, out),
            _ => out.push(column),
        }
    }
}

/// Writes an item's cells in its columns' order, each after a `,` but the first (`first`):
/// nested objects flattened, `null` empty, lists as JSON.
fn write_cells(object: &Map<String, Value>, first: &mut bool, out: &mut String) {
    for value in object.values() {
        if let Value::Object(inner) = value {
            write_cells(inner, first, out);
            continue;
        }
        if !std::mem::take(first) {
            out.push(',');
        }
        match value {
            Value::String(s) => write_cell(s, out),
            Value::Null => {}
            other => write_cell(&other.to_string(), out),
        }
    }
}

/// What a spreadsheet reads as the start of a formula, first in a cell.
const FORMULA: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Writes a CSV cell, safe in a spreadsheet that splits cells at `,` and in one that splits them
/// at `;` (pt-BR's, which reads a quote within a line as text): quoted when it holds a `,`, a `;`,
/// a quote or a line break; a `'` before a formula's first character wherever a spreadsheet may
/// start a cell: first in the cell, and after each `;` or line break in it (spaces and quotes
/// before it passed over). Written into `out` with no allocation of its own: an export job
/// writes some sixty cells a row.
pub(crate) fn write_cell(text: &str, out: &mut String) {
    // Most cells: no character that starts a cell again or is doubled, nor a formula first.
    if !text.contains([';', '\n', '\r', '"']) && !text.trim_start_matches(' ').starts_with(FORMULA) {
        let quoted = text.contains(',');
        if quoted {
            out.push('"');
        }
        out.push_str(text);
        if quoted {
            out.push('"');
        }
        return;
    }
    let quoted = text.contains([',', ';', '"', '\n', '\r']);
    if quoted {
        out.push('"');
    }
    let mut starts = true;
    for c in text.chars() {
        if starts && FORMULA.contains(&c) {
            out.push('\'');
        }
        if quoted && c == '"' {
            out.push('"');
        }
        out.push(c);
        starts = matches!(c, ';' | '\n' | '\r') || (starts && matches!(c, ' ' | '"'));
    }
    if quoted {
        out.push('"');
    }
}

/// [`write_cell`] as a string of its own.
pub(crate) fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_cell(text, &mut out);
    out
}

/// The CSV's columns of an item (of any item: every search item has the same fields), in order:
/// nested objects flattened (`endereco.uf`). The API's export jobs write the same columns.
pub fn csv_columns(item: &Value) -> Vec<String> {
    let mut out = Vec::new();
    columns("", item.as_object().unwrap_or(&Map::new()), &mut out);
    out
}

/// The header line of `columns` (CRLF).
pub fn csv_header(columns: &[String]) -> String {
    columns.iter().map(|c| cell(c)).collect::<Vec<_>>().join(",") + "\r\n"
}

/// An item's line (CRLF), as `csv` writes it.
pub fn csv_line(item: &Value) -> String {
    let mut out = String::with_capacity(1024);
    write_csv_line(item, &mut out);
    out
}

/// [`csv_line`], appended to `out`.
pub fn write_csv_line(item: &Value, out: &mut String) {
    write_cells(item.as_object().unwrap_or(&Map::new()), &mut true, out);
    out.push_str("\r\n");
}

/// The items as CSV (lines end in CRLF): a header of the first item's columns, a line per item.
pub(crate) fn csv(items: &[Value]) -> String {
    let mut out = csv_header(&items.first().map(csv_columns).unwrap_or_default());
    for item in items {
        write_csv_line(item, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(items: Value, expected: &str) {
        assert_eq!(csv(items.as_array().unwrap()), expected);
    }

    /// Each cell as written: quoted where it holds what splits cells or lines, a formula's first
    /// character led by `'` wherever a spreadsheet may start a cell.
    #[test]
    fn cells_are_safe_in_a_spreadsheet_split_at_commas_or_semicolons() {
        for (text, expected) in [
            ("a;=1+1", "\"a;'=1+1\""),
            ("a;b", "\"a;b\""),
            ("a; \"=1+1\"", "\"a; \"\"'=1+1\"\"\""),
            ("a,b", "\"a,b\""),
            ("\"q\"", "\"\"\"q\"\"\""),
            ("l\nm", "\"l\nm\""),
            ("l\n@m", "\"l\n'@m\""),
            ("l\r\n-m", "\"l\r\n'-m\""),
            ("=cmd", "'=cmd"),
            ("+1", "'+1"),
            ("-1", "'-1"),
            ("@x", "'@x"),
            ("\tx", "'\tx"),
            ("\rx", "\"'\rx\""),
            (" =1", " '=1"),
            ("a-b=c", "a-b=c"),
            ("ACME LTDA", "ACME LTDA"),
            ("", ""),
        ] {
            assert_eq!(cell(text), expected, "{text:?}");
        }
    }

    /// The rows asked: all (up to 10,000) when not given, else 1 to 10,000 as plain digits.
    #[test]
    fn rows_asked() {
        for (form, expected) in [
            ("", Some(MAX_ROWS)),
            ("rows=", Some(MAX_ROWS)),
            ("rows=4", Some(4)),
            ("rows=+10000", Some(MAX_ROWS)),
            ("rows=10000", Some(MAX_ROWS)),
            ("rows=0", None),
            ("rows=-1", None),
            ("rows=%2B5", None),
            ("rows=10001", None),
            ("rows=99999999999999999999999", None),
            ("rows=ten", None),
        ] {
            assert_eq!(asked(&Fields::parse(form.as_bytes())).1, expected, "{form}");
        }
    }

    #[test]
    fn items_as_csv() {
        check(
            json!([
                {"cnpj": "11222333000181", "razao_social": "ACME, \"A\"", "endereco": {"uf": "SP", "cep": ""},
                 "cnaes_secundarios": [{"codigo": "1"}], "data": null},
                {"cnpj": "44555666000181", "razao_social": "=SUM(A1)", "endereco": {"uf": "EX", "cep": "0"},
                 "cnaes_secundarios": [], "data": "2020-01-01"}
            ]),
            "cnpj,razao_social,endereco.uf,endereco.cep,cnaes_secundarios,data\r\n\
             11222333000181,\"ACME, \"\"A\"\"\",SP,,\"[{\"\"codigo\"\":\"\"1\"\"}]\",\r\n\
             44555666000181,'=SUM(A1),EX,0,[],2020-01-01\r\n",
        );
        check(json!([{"nome": "linha\nquebrada", "x": -1}]), "nome,x\r\n\"linha\nquebrada\",'-1\r\n");
    }
}
