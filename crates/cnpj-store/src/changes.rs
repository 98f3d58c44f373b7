//! Month over month: the `changes` table (Postgres; a DuckDB dataset's history
//! file) filtered, counted and paged, and the history of one company or establishment; items with
//! their code fields labelled in a locale.
//!
//! The served order is month, cnpj (NULLs last), cnpj_basico, event, field, old, new. The backends
//! differ in how a page is read. A DuckDB file stores the table in that order (the build appends
//! it so, and the connection preserves insertion order), so a page is the matches' row ids
//! `LIMIT n OFFSET k` (an `ORDER BY` would sort every match: 1.8 M rows for a month), then the
//! rows of that row-id range; Postgres has no stored order and sorts, off the index on (month,
//! cnpj, cnpj_basico).
//!
//! A total costs a scan of the filter's columns (DuckDB: 3 to 20 ms per million rows, by column),
//! so it is avoided where it can be: the totals of filters on month, since, event and state alone
//! are summed from the number of changes per month, event and state, read once on first use (one
//! scan: ≈ 0.5 s for 24 months of a full dataset); DuckDB counts the others in the scan that finds
//! the page's row ids, Postgres reads the first 1,000 matches first (a page among them needs no
//! other query, and fewer matches than that are the total).

use std::collections::HashMap;
use std::sync::Arc;

use cnpj_index::{COMPANY_FIELDS, Companies};
use cnpj_model::{CnpjQuery, Locale};
use serde::Serialize;
use serde_json::Value;

use crate::backend::{Backend, Dialect, TextRow};
use crate::{Store, StoreError, key_of, opt, text};

mod watching;

pub(crate) use watching::MatchCache;
pub use watching::{Following, Watched};

/// The event names (stable, English), the values of the `event` filter.
pub const EVENTS: [&str; 17] = [
    "opened",
    "disappeared",
    "status_changed",
    "moved",
    "renamed",
    "main_activity_changed",
    "secondary_activities_changed",
    "legal_nature_changed",
    "capital_changed",
    "size_changed",
    "partner_entered",
    "partner_left",
    "simples_opted_in",
    "simples_opted_out",
    "mei_opted_in",
    "mei_opted_out",
    "tax_regime_changed",
];

/// `COMPANY_FIELDS` as an SQL list.
pub(crate) fn company_fields_sql() -> String {
    COMPANY_FIELDS.map(|f| format!("'{f}'")).join(", ")
}

pub(crate) const COLUMNS: &str = "month, cnpj, cnpj_basico, event, field, old, new";

/// The served order after the month (NULLs last, as DuckDB stores the table); the base orders
/// the company events without a CNPJ (a company without an establishment now).
pub(crate) const ORDER_AFTER_MONTH: &str =
    "cnpj NULLS LAST, cnpj_basico, event, field NULLS LAST, old NULLS LAST, new NULLS LAST";

/// Validated filters of `GET /api/v1/changes`, combined with AND.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeFilters {
    /// One month, `YYYY-MM`.
    pub month: Option<String>,
    /// This month (`YYYY-MM`) and later.
    pub since: Option<String>,
    /// Any of these event names (none: every event).
    pub events: Vec<String>,
    /// The establishment's state, city (4-digit RFB code) and main CNAE (7 digits): now, or
    /// last seen for one that disappeared.
    pub state: Option<String>,
    pub city_id: Option<String>,
    pub business_sector: Option<String>,
    /// 14 characters: that establishment's events and its company's; 8: the company's, all.
    pub cnpj: Option<CnpjQuery>,
    /// A watchlist's entries: the events of any of them, by the rule of `cnpj`.
    pub watched: Option<Arc<Watched>>,
}

impl ChangeFilters {
    /// The WHERE clause (empty, or ` WHERE …` with `$n` placeholders) and its parameters;
    /// `narrowed`, when given, narrows the scan to months (a company's, or a watchlist's, from
    /// `change_companies`) and a watchlist's companies to those that changed in them.
    pub(crate) fn sql(&self, narrowed: Option<&Narrowed>) -> (String, Vec<String>) {
        let months = narrowed.map(|n| n.months.as_slice());
        let mut clauses = Vec::new();
        let mut params: Vec<String> = Vec::new();
        // `clause` with each `$` standing for the next parameter.
        let mut add = |clause: &str, values: Vec<String>| {
            let mut out = String::new();
            let mut values = values.into_iter();
            for piece in clause.split_inclusive('$') {
                match piece.strip_suffix('$') {
                    Some(head) => {
                        params.push(values.next().expect("a value per placeholder"));
                        out.push_str(&format!("{head}${}", params.len()));
                    }
                    None => out.push_str(piece),
                }
            }
            clauses.push(out);
        };
        if let Some(m) = &self.month {
            add("month = $", vec![m.clone()]);
        }
        if let Some(m) = &self.since {
            add("month >= $", vec![m.clone()]);
        }
        if let Some(months) = months {
            add(&format!("month IN ({})", vec!["$"; months.len()].join(", ")), months.to_vec());
        }
        match self.events.as_slice() {
            [] => {}
            [one] => add("event = $", vec![one.clone()]),
            many => add(&format!("event IN ({})", vec!["$"; many.len()].join(", ")), many.to_vec()),
        }
        for (column, value) in [("uf", &self.state), ("municipio", &self.city_id), ("cnae", &self.business_sector)] {
            if let Some(v) = value {
                add(&format!("{column} = $"), vec![v.clone()]);
            }
        }
        match &self.cnpj {
            Some(CnpjQuery::Full(c)) => add(
                &format!("cnpj_basico = $ AND (cnpj = $ OR field IN ({}))", company_fields_sql()),
                vec![c.basico().to_owned(), c.as_str().to_owned()],
            ),
            Some(q @ CnpjQuery::Basico(_)) => add("cnpj_basico = $", vec![q.basico().to_owned()]),
            None => {}
        }
        if let Some(watched) = &self.watched {
            let all: Vec<String>;
            let bases = match narrowed.and_then(|n| n.bases.as_deref()) {
                Some(bases) => bases,
                None => {
                    all = watched.bases.bases().collect();
                    &all
                }
            };
            let (clause, values) = watched.clause(bases);
            add(&clause, values);
        }
        let clause = if clauses.is_empty() { String::new() } else { format!(" WHERE {}", clauses.join(" AND ")) };
        (clause, params)
    }
}

/// One change event as served.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// `YYYY-MM`.
    pub month: String,
    /// The establishment's CNPJ; for a company event its head office now (`None`: the company
    /// has no establishment now).
    pub cnpj: Option<String>,
    pub cnpj_basico: String,
    pub event: String,
    /// `None` for `opened` and `disappeared`.
    pub field: Option<String>,
    /// Served values: a code or text, a list of codes (`cnaes_secundarios`), a partner
    /// `{nome, documento, qualificacao}`; `null` when absent.
    pub old: Value,
    pub new: Value,
    /// For code fields only: the label of `old`/`new` in the request locale (a list of labels for
    /// `cnaes_secundarios`, the qualification's label for a partner, the municipality's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_description: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_description: Option<Value>,
}

/// How a field's values are described.
enum Described {
    /// A label table of `labels`.
    Label(&'static str),
    /// A list of CNAE codes.
    Cnaes,
    /// A municipality code: its name.
    Municipio,
    /// A partner object: its qualification's label.
    Partner,
}

fn described(field: &str) -> Option<Described> {
    Some(match field {
        "situacao_cadastral" => Described::Label("situacao_cadastral"),
        "cnae_fiscal" => Described::Label("cnaes"),
        "natureza_juridica" => Described::Label("naturezas"),
        "porte_empresa" => Described::Label("porte_empresa"),
        "regime_tributario" => Described::Label("regime_tributario"),
        "cnaes_secundarios" => Described::Cnaes,
        "municipio" => Described::Municipio,
        "socios" => Described::Partner,
        _ => return None,
    })
}

/// A stored value (JSON text) as served; text that is not JSON is served as a string.
fn parse(stored: Option<String>) -> Value {
    match stored {
        None => Value::Null,
        Some(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

/// Where a dataset's changes are: Postgres has `changes` in its schema (and an index on
/// `cnpj_basico` finds a company's rows); a DuckDB file has them in its history file, attached as
/// `history`, with each month's companies (`change_companies`, read into memory here) and each
/// row's keys (`change_keys`, see `keyed`), or has none (built without a previous month, or
/// before month over month).
#[derive(Debug, Default)]
pub(crate) struct ChangeTables {
    /// The table, `None` when there are no changes to serve.
    pub(crate) table: Option<&'static str>,
    /// DuckDB: each month's companies with changes, oldest month first.
    pub(crate) companies: Option<Vec<(String, cnpj_index::Companies)>>,
    /// DuckDB: the months whose rows `change_keys` finds, with the row id of each one's first
    /// row (a key's `position` counts from it).
    pub(crate) keyed: HashMap<String, i64>,
}

impl ChangeTables {
    pub(crate) fn of(backend: &Backend) -> Result<ChangeTables, StoreError> {
        if backend.dialect() == Dialect::Postgres {
            return Ok(ChangeTables { table: Some("changes"), ..Default::default() });
        }
        if !backend.history {
            return Ok(ChangeTables::default());
        }
        let history = ChangeTables { table: Some("history.changes"), ..Default::default() };
        // A history without its companies (none is written so: the load benchmark's baseline)
        // finds a company's changes in every month.
        if !has_table(backend, "change_companies")? {
            return Ok(history);
        }
        let sql = "SELECT month, companies FROM history.change_companies ORDER BY month";
        let mut companies = Vec::new();
        for (month, bytes) in backend.blobs("change companies", sql)? {
            match cnpj_index::Companies::from_bytes(&bytes) {
                Ok(set) => companies.push((month, set)),
                Err(error) => {
                    // Damaged: the changes are still served, each company's found in every month.
                    tracing::warn!(month, %error, "a month's companies in the history cannot be read");
                    return Ok(history);
                }
            }
        }
        Ok(ChangeTables { companies: Some(companies), keyed: keyed(backend)?, ..history })
    }
}

fn has_table(backend: &Backend, table: &str) -> Result<bool, StoreError> {
    let sql = "SELECT CAST(count(*) AS VARCHAR) FROM duckdb_tables() \
               WHERE database_name = 'history' AND table_name = $1";
    Ok(backend.rows("history tables", sql, &[table.to_owned()])?.first().is_some_and(|r| text(r, 0) != "0"))
}

/// The months `change_keys` serves (none without it: a history written before it): those whose
/// rows have consecutive row ids, one key each; the first row id of each. ≈ 150 ms at 1.0.
fn keyed(backend: &Backend) -> Result<HashMap<String, i64>, StoreError> {
    if !has_table(backend, "change_keys")? {
        return Ok(HashMap::new());
    }
    let sql = "SELECT c.month, CAST(c.first AS VARCHAR) FROM \
                 (SELECT month, min(rowid) AS first, max(rowid) AS last, count(*) AS n \
                  FROM history.changes GROUP BY month) c \
               JOIN (SELECT month, count(*) AS n FROM history.change_keys GROUP BY month) k USING (month) \
               WHERE c.last - c.first + 1 = c.n AND k.n = c.n";
    let rows = backend.rows("keyed months", sql, &[])?;
    Ok(rows.iter().filter_map(|r| Some((text(r, 0), text(r, 1).parse().ok()?))).collect())
}

/// What `change_companies` narrows a scan to: the months with changes of the company asked
/// for or of the watchlist's companies, and of those the watched ones that changed in them.
#[derive(Debug, Default)]
pub(crate) struct Narrowed {
    pub(crate) months: Vec<String>,
    pub(crate) bases: Option<Vec<String>>,
}

impl Narrowed {
    fn is_empty(&self) -> bool {
        self.months.is_empty() || self.bases.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Matches Postgres reads before it counts the total (see the module docs).
const FIRST_ROWS: u64 = 1000;

/// The number of changes of one month, event and state (`None`: a company event without an
/// establishment).
#[derive(Debug)]
pub(crate) struct Tally {
    month: String,
    event: String,
    uf: Option<String>,
    count: u64,
}

impl Store {
    /// One page of changes (in the served order: month, cnpj, cnpj_basico, event, field, old,
    /// new) and the total number of matches.
    pub fn changes(
        &self,
        filters: &ChangeFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<(u64, Vec<Change>), StoreError> {
        let narrowed = self.narrowed(filters);
        let Some(table) = self.tables.table.filter(|_| narrowed.as_ref().is_none_or(|n| !n.is_empty())) else {
            return Ok((0, Vec::new()));
        };
        if let (Some(watched), Some(narrowed)) = (&filters.watched, &narrowed) {
            return self.watched_page(table, filters, watched, narrowed, (page, per_page), locale);
        }
        let (clause, params) = filters.sql(narrowed.as_ref());
        let offset = page.saturating_sub(1).saturating_mul(per_page);
        let tallied = self.tallied(table, filters)?;
        let (total, rows) = match (self.backend.dialect(), tallied) {
            (_, Some(total)) if offset >= total => (total, Vec::new()),
            (Dialect::DuckDb, tallied) => self.duckdb_page(table, &clause, &params, tallied, offset, per_page)?,
            (Dialect::Postgres, tallied) => self.postgres_page(table, &clause, &params, tallied, offset, per_page)?,
        };
        Ok((total, rows.into_iter().map(|r| self.change(r, locale)).collect()))
    }

    /// A page from a DuckDB file, where the table is stored in the served order: the page's row
    /// ids first (and the total, unless tallied), read from the filter's columns alone, then its
    /// rows by that row-id range. Reading the rows straight (`LIMIT … OFFSET …`) decompresses
    /// `old` and `new` (FSST-compressed JSON, a vector of 2,048 at a time) wherever a match lies
    /// before the page's end: 25-70 ms for a month filtered by city or CNAE at full scale. DuckDB
    /// does not narrow a scan by row id, so the second query also names the months (and, within
    /// one month, the CNPJs) of the page's first and last rows, which its zone maps do narrow to
    /// the page's row groups (BENCHMARKS.md, "Month over month at 1.0, measured").
    fn duckdb_page(
        &self,
        table: &str,
        clause: &str,
        params: &[String],
        tallied: Option<u64>,
        offset: u64,
        per_page: u64,
    ) -> Result<(u64, Vec<TextRow>), StoreError> {
        // A window (the total) may give its rows in another order than the scan's: then the
        // matches are sorted by row id before the page is cut (a plain filtered scan keeps it).
        let (total_column, order) = match tallied {
            Some(_) => ("", ""),
            None => (", CAST(count(*) OVER () AS VARCHAR)", " ORDER BY rowid"),
        };
        let sql = format!(
            "SELECT CAST(rowid AS VARCHAR), month, cnpj{total_column} FROM {table}{clause}{order} LIMIT {per_page} OFFSET {offset}"
        );
        let ids = self.backend.rows("changes page ids", &sql, params)?;
        let total = match (tallied, ids.first()) {
            (Some(total), _) => total,
            (None, Some(first)) => text(first, 3).parse().unwrap_or(0),
            (None, None) if offset == 0 => 0,
            (None, None) => self.count(table, clause, params)?,
        };
        let (Some(first), Some(last)) = (ids.first(), ids.last()) else { return Ok((total, Vec::new())) };
        let id = |row: &TextRow| text(row, 0).parse::<i64>().unwrap_or(0);
        let mut params = params.to_vec();
        let mut range = format!("rowid BETWEEN {} AND {}", id(first), id(last));
        params.extend([text(first, 1), text(last, 1)]);
        range.push_str(&format!(" AND month BETWEEN ${} AND ${}", params.len() - 1, params.len()));
        if let (true, Some(from), Some(to)) = (text(first, 1) == text(last, 1), opt(first, 2), opt(last, 2)) {
            // Within a month the stored order is by CNPJ, NULLs last: the last row has one, so
            // every row up to it has one, between the two.
            params.extend([from, to]);
            range.push_str(&format!(" AND cnpj BETWEEN ${} AND ${}", params.len() - 1, params.len()));
        }
        let clause = if clause.is_empty() { format!(" WHERE {range}") } else { format!("{clause} AND {range}") };
        let sql = format!("SELECT {COLUMNS} FROM {table}{clause} ORDER BY rowid");
        let rows = self.backend.rows("changes page", &sql, &params)?;
        Ok((total, rows))
    }

    /// A page from Postgres, sorted off the index on (month, cnpj, cnpj_basico): the first 1,000
    /// matches are read first (a page among them needs no other query, and fewer matches than that
    /// are the total).
    fn postgres_page(
        &self,
        table: &str,
        clause: &str,
        params: &[String],
        tallied: Option<u64>,
        offset: u64,
        per_page: u64,
    ) -> Result<(u64, Vec<TextRow>), StoreError> {
        let select = |limit: u64, offset: u64| {
            let sql = format!(
                "SELECT {COLUMNS} FROM {table}{clause} ORDER BY month, {ORDER_AFTER_MONTH} LIMIT {limit} OFFSET {offset}"
            );
            self.backend.rows("changes page", &sql, params)
        };
        if let Some(total) = tallied {
            return Ok((total, select(per_page, offset)?));
        }
        let end = offset.saturating_add(per_page);
        let mut first = select(FIRST_ROWS + 1, 0)?;
        let read = first.len();
        if read as u64 <= FIRST_ROWS {
            let rows = first.drain((offset as usize).min(read)..(end as usize).min(read)).collect();
            return Ok((read as u64, rows));
        }
        let total = self.count(table, clause, params)?;
        let rows = if end <= read as u64 {
            first.drain(offset as usize..end as usize).collect()
        } else if offset >= total {
            Vec::new()
        } else {
            select(per_page, offset)?
        };
        Ok((total, rows))
    }

    /// The number of changes matching `clause`.
    fn count(&self, table: &str, clause: &str, params: &[String]) -> Result<u64, StoreError> {
        let sql = format!("SELECT CAST(count(*) AS VARCHAR) FROM {table}{clause}");
        let count = self.backend.rows("changes count", &sql, params)?;
        Ok(count.first().map(|r| text(r, 0)).unwrap_or_default().parse().unwrap_or(0))
    }

    /// With a CNPJ or a watchlist filter on a DuckDB file: the months with changes of its
    /// companies (of the months the filters ask for), from each month's companies (see
    /// cnpj-index's `history.rs`), and a watchlist's companies that changed in them; `None`
    /// otherwise.
    fn narrowed(&self, filters: &ChangeFilters) -> Option<Narrowed> {
        let companies = self.tables.companies.as_ref()?;
        if filters.cnpj.is_none() && filters.watched.is_none() {
            return None;
        }
        let asked = |month: &String| {
            filters.month.as_ref().is_none_or(|m| m == month) && filters.since.as_ref().is_none_or(|m| month >= m)
        };
        let mut narrowed = Narrowed { months: Vec::new(), bases: None };
        let mut changed = Companies::default();
        for (month, set) in companies.iter().filter(|(month, _)| asked(month)) {
            if filters.cnpj.is_some_and(|q| !set.contains(q.basico())) {
                continue;
            }
            if let Some(watched) = &filters.watched {
                let both = set.intersection(&watched.bases);
                if both.is_empty() {
                    continue;
                }
                changed.union_with(&both);
            }
            narrowed.months.push(month.clone());
        }
        narrowed.bases = filters.watched.as_ref().map(|_| changed.bases().collect());
        Some(narrowed)
    }

    /// The total of `filters` from the tally, when they filter on month, since, event and state
    /// alone.
    fn tallied(&self, table: &str, filters: &ChangeFilters) -> Result<Option<u64>, StoreError> {
        if filters.city_id.is_some()
            || filters.business_sector.is_some()
            || filters.cnpj.is_some()
            || filters.watched.is_some()
        {
            return Ok(None);
        }
        let tally = match self.tally.get() {
            Some(tally) => tally,
            None => {
                let sql = format!(
                    "SELECT month, event, uf, CAST(count(*) AS VARCHAR) FROM {table} GROUP BY month, event, uf"
                );
                let rows = self.backend.rows("changes tally", &sql, &[])?;
                let tally = rows
                    .iter()
                    .map(|r| Tally {
                        month: text(r, 0),
                        event: text(r, 1),
                        uf: opt(r, 2),
                        count: text(r, 3).parse().unwrap_or(0),
                    })
                    .collect();
                self.tally.get_or_init(|| tally)
            }
        };
        let matches = |t: &&Tally| {
            filters.month.as_ref().is_none_or(|m| t.month == *m)
                && filters.since.as_ref().is_none_or(|m| t.month >= *m)
                && (filters.events.is_empty() || filters.events.contains(&t.event))
                && filters.state.as_ref().is_none_or(|s| t.uf.as_ref() == Some(s))
        };
        Ok(Some(tally.iter().filter(matches).map(|t| t.count).sum()))
    }

    /// Every change of an establishment and its company (14 characters) or of a company (8),
    /// newest month first, then in the served order; `None` when there is none and no such
    /// record now.
    pub fn history(&self, query: &CnpjQuery, locale: Locale) -> Result<Option<Vec<Change>>, StoreError> {
        let filters = ChangeFilters { cnpj: Some(*query), ..Default::default() };
        let narrowed = self.narrowed(&filters);
        let rows = match self.tables.table.filter(|_| narrowed.as_ref().is_none_or(|n| !n.is_empty())) {
            None => Vec::new(),
            Some(table) => {
                let (clause, params) = filters.sql(narrowed.as_ref());
                let sql = format!("SELECT {COLUMNS} FROM {table}{clause} ORDER BY month DESC, {ORDER_AFTER_MONTH}");
                self.backend.rows("history", &sql, &params)?
            }
        };
        if rows.is_empty() && self.find(&[key_of(query)], false)?.pop().flatten().is_none() {
            return Ok(None);
        }
        Ok(Some(rows.into_iter().map(|r| self.change(r, locale)).collect()))
    }

    pub(crate) fn change(&self, row: TextRow, locale: Locale) -> Change {
        let field = opt(&row, 4);
        let (old, new) = (parse(opt(&row, 5)), parse(opt(&row, 6)));
        let how = field.as_deref().and_then(described);
        let describe = |value: &Value| how.as_ref().map(|how| self.describe(how, value, locale));
        Change {
            month: text(&row, 0),
            cnpj: opt(&row, 1),
            cnpj_basico: text(&row, 2),
            event: text(&row, 3),
            old_description: describe(&old),
            new_description: describe(&new),
            field,
            old,
            new,
        }
    }

    /// The description of one value of a described field (`null` for `null`).
    fn describe(&self, how: &Described, value: &Value, locale: Locale) -> Value {
        let code = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        match (how, value) {
            (_, Value::Null) => Value::Null,
            (Described::Label(table), v) => self.label(locale, table, &code(v)).into(),
            (Described::Cnaes, Value::Array(codes)) => {
                codes.iter().map(|c| Value::from(self.label(locale, "cnaes", &code(c)))).collect()
            }
            (Described::Cnaes, _) => Value::Null,
            (Described::Municipio, v) => {
                self.municipios.get(&code(v)).map(|(name, _)| name.clone()).unwrap_or_default().into()
            }
            (Described::Partner, v) => self.label(locale, "qualificacoes", &code(&v["qualificacao"])).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(filters: ChangeFilters, expected: (&str, &[&str])) {
        let (clause, params) = filters.sql(None);
        assert_eq!((clause.as_str(), params.iter().map(String::as_str).collect::<Vec<_>>().as_slice()), expected);
    }

    #[test]
    fn filters_number_their_placeholders_in_order() {
        check(ChangeFilters::default(), ("", &[]));
        check(
            ChangeFilters {
                since: Some("2026-01".into()),
                events: vec!["opened".into(), "moved".into()],
                state: Some("SP".into()),
                business_sector: Some("6201501".into()),
                ..Default::default()
            },
            (
                " WHERE month >= $1 AND event IN ($2, $3) AND uf = $4 AND cnae = $5",
                &["2026-01", "opened", "moved", "SP", "6201501"],
            ),
        );
        check(
            ChangeFilters { month: Some("2026-10".into()), events: vec!["moved".into()], ..Default::default() },
            (" WHERE month = $1 AND event = $2", &["2026-10", "moved"]),
        );
    }

    #[test]
    fn a_company_s_months_narrow_the_scan() {
        let filters = ChangeFilters { cnpj: Some(CnpjQuery::parse("11222333").unwrap()), ..Default::default() };
        let months = Narrowed { months: vec!["2026-09".to_owned(), "2026-11".to_owned()], bases: None };
        let (clause, params) = filters.sql(Some(&months));
        assert_eq!(clause, " WHERE month IN ($1, $2) AND cnpj_basico = $3");
        assert_eq!(params, ["2026-09", "2026-11", "11222333"]);
    }

    #[test]
    fn a_cnpj_takes_its_company_events_too() {
        let full = CnpjQuery::parse("11.222.333/0002-62").unwrap();
        let (clause, params) =
            ChangeFilters { city_id: Some("7107".into()), cnpj: Some(full), ..Default::default() }.sql(None);
        assert_eq!(params, ["7107", "11222333", "11222333000262"]);
        assert!(
            clause.starts_with(" WHERE municipio = $1 AND cnpj_basico = $2 AND (cnpj = $3 OR field IN ("),
            "{clause}"
        );
        check(
            ChangeFilters { cnpj: Some(CnpjQuery::parse("11222333").unwrap()), ..Default::default() },
            (" WHERE cnpj_basico = $1", &["11222333"]),
        );
    }

    #[test]
    fn a_watchlist_follows_companies_and_establishments() {
        let watched = |keys: &[&str]| Some(Arc::new(Watched::new(keys.iter().copied())));
        let companies = ChangeFilters { watched: watched(&["22333444", "11222333", "bad"]), ..Default::default() };
        check(companies, (" WHERE cnpj_basico IN (SELECT unnest(string_to_array($1, ',')))", &["11222333,22333444"]));
        let both = ChangeFilters {
            month: Some("2026-10".into()),
            watched: watched(&["11222333000181", "22333444", "11222333000262"]),
            ..Default::default()
        };
        let (clause, params) = both.sql(None);
        assert_eq!(params, ["2026-10", "11222333,22333444", "22333444", "11222333000181,11222333000262"]);
        assert!(
            clause.starts_with(
                " WHERE month = $1 AND cnpj_basico IN (SELECT unnest(string_to_array($2, ','))) AND \
                 (cnpj_basico IN (SELECT unnest(string_to_array($3, ','))) OR cnpj IN (SELECT \
                 unnest(string_to_array($4, ','))) OR field IN ('razao_social'"
            ),
            "{clause}"
        );
        // Narrowed to the companies that changed in the months scanned.
        let narrowed = Narrowed { months: vec!["2026-10".into()], bases: Some(vec!["22333444".into()]) };
        let (_, params) = both.sql(Some(&narrowed));
        assert_eq!(params[..3], ["2026-10", "2026-10", "22333444"]);
    }

    #[test]
    fn stored_values_parse_as_json() {
        assert_eq!(parse(None), Value::Null);
        assert_eq!(parse(Some("\"08\"".into())), Value::from("08"));
        assert_eq!(parse(Some("[\"6201501\"]".into())), serde_json::json!(["6201501"]));
        assert_eq!(parse(Some("not json".into())), Value::from("not json"));
    }
}
