//! Watchlists over the changes: a list's entries as a filter of `changes` (`Watched`), a list's
//! pages of events from a DuckDB file (`Store::watched_page`), and every list of a month's webhook
//! deliveries matched against that month at once (`Store::watched_month`).
//!
//! A list's pages: the rows it follows under the filters are found once (the watched companies
//! that changed in the months asked for, from `change_companies`; their rows' ids, CNPJ and
//! whether each is a company event, from the history's `change_keys` by integer keys, or, in a
//! history written before them, from the rows' strings; `Watched::follows` applied), kept in
//! `MatchCache`, and each page's rows read by their ids. By the keys, a month's matches for a
//! list of 100,000 entries at 1.0 take 11-17 ms (two queries at once, a half of the companies
//! each), where the strings take ≈ 100 ms; a page then reads 50 rows in two halves at once
//! (BENCHMARKS.md, "A watchlist's rows by their keys").
//!
//! The one-pass matching: the companies of every list are joined (roaring bitmaps) and, on a
//! DuckDB file, cut to the month's companies with changes (`change_companies`, in memory); the
//! month's rows of those companies are read in one query, in the served order, and each row is
//! handed to the lists that watch its company and follow it (`Watched::follows`, the rule of
//! `Watched::clause` in Rust). A list's events come out as `changes` pages them for
//! `month` + `events` + that list: the same rows in the same order, a test checks it on both
//! backends. Cost: one scan of the month's `cnpj_basico` against the candidate companies, and
//! memory for the matched rows only (BENCHMARKS.md, "Watchlists matched against a month at 1.0").

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, LazyLock, Mutex};

use cnpj_index::Companies;
use cnpj_model::Locale;

use crate::backend::Dialect;
use crate::changes::{COLUMNS, Change, ChangeFilters, Narrowed, ORDER_AFTER_MONTH, company_fields_sql};
use crate::{Store, StoreError, opt, text};

/// The CNPJs a watchlist follows, by their normalized keys: 8 characters follow every event of
/// the company, 14 that establishment's events and its company's.
#[derive(Clone, Debug, Default)]
pub struct Watched {
    companies: BTreeSet<String>,
    establishments: BTreeSet<String>,
    /// The companies of both, as keys (matched against each month's companies).
    pub(crate) bases: Companies,
    /// Two hashes of the keys, under this process's random keys: what `MatchCache` knows the list
    /// by. Random keys (not `DefaultHasher::new`'s fixed ones) so that nobody can make a list whose
    /// keys collide with another user's and be answered that list's matches; 128 bits so that no
    /// two lists meet by chance.
    fingerprint: (u64, u64),
}

impl PartialEq for Watched {
    fn eq(&self, other: &Watched) -> bool {
        (&self.companies, &self.establishments) == (&other.companies, &other.establishments)
    }
}

impl Eq for Watched {}

impl Watched {
    /// The set of normalized keys (a key of another length, or not of `[0-9A-Z]`, follows nothing).
    pub fn new<'a>(keys: impl IntoIterator<Item = &'a str>) -> Watched {
        let mut watched = Watched::default();
        for key in keys {
            let set = match key.len() {
                8 => &mut watched.companies,
                14 => &mut watched.establishments,
                _ => continue,
            };
            if key.get(..8).is_some_and(|basico| watched.bases.insert(basico)) {
                set.insert(key.to_owned());
            }
        }
        static KEYS: LazyLock<[RandomState; 2]> = LazyLock::new(|| [RandomState::new(), RandomState::new()]);
        let keys = (&watched.companies, &watched.establishments);
        watched.fingerprint = (KEYS[0].hash_one(keys), KEYS[1].hash_one(keys));
        watched
    }

    /// How many keys it follows.
    pub fn len(&self) -> usize {
        self.companies.len() + self.establishments.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The clause (with `$` for each of `values`) of the changes of these companies (`bases`,
    /// all or some of the watched ones) that the watchlist follows: every event of a watched
    /// company, a watched establishment's events and its company's. Only the entries of `bases`
    /// are named (a list of 100,000 entries passes the few hundred that changed).
    pub(crate) fn clause(&self, bases: &[String]) -> (String, Vec<String>) {
        let of_bases: std::collections::HashSet<&str> = bases.iter().map(String::as_str).collect();
        let companies: Vec<&str> = self.companies.iter().map(String::as_str).filter(|c| of_bases.contains(c)).collect();
        let establishments: Vec<&str> =
            self.establishments.iter().map(String::as_str).filter(|e| of_bases.contains(&e[..8])).collect();
        let set = "(SELECT unnest(string_to_array($, ',')))";
        let mut clause = format!("cnpj_basico IN {set}");
        let mut values = vec![bases.join(",")];
        let mut either = Vec::new();
        if !companies.is_empty() && !establishments.is_empty() {
            either.push(format!("cnpj_basico IN {set}"));
            values.push(companies.join(","));
        }
        if !establishments.is_empty() {
            either.push(format!("cnpj IN {set}"));
            values.push(establishments.join(","));
            either.push(format!("field IN ({})", company_fields_sql()));
            clause.push_str(&format!(" AND ({})", either.join(" OR ")));
        }
        (clause, values)
    }

    /// Whether the list follows a change of `cnpj` (none: a company event of a company without
    /// an establishment) in `basico`, a company event (`of_company`: its field is one of
    /// `COMPANY_FIELDS`) or not: `clause` for one row.
    fn follows(&self, cnpj: Option<&str>, basico: &str, of_company: bool) -> bool {
        self.bases.contains(basico)
            && (self.establishments.is_empty()
                || self.companies.contains(basico)
                || cnpj.is_some_and(|c| self.establishments.contains(c))
                || of_company)
    }
}

/// Whether a change of `field` is a company event (`COMPANY_FIELDS`).
fn of_company(field: Option<&str>) -> bool {
    field.is_some_and(|f| cnpj_index::COMPANY_FIELDS.contains(&f))
}

/// One list of a month's matching: what it follows, and the events it takes (none: every one).
#[derive(Clone, Copy, Debug)]
pub struct Following<'a> {
    pub watched: &'a Watched,
    pub events: &'a [String],
}

/// A row a list follows (DuckDB): its row id, month and CNPJ.
type Match = (i64, String, Option<String>);

/// The rows a list follows under some filters, in the served (stored) order.
type Matches = Arc<Vec<Match>>;

/// The matches of the lists asked for last (and of every list for the month served, found when
/// the month's watchlists are matched), `CACHED_ROWS` rows in all at most (an empty one counts
/// as one): the least recently asked for go first.
#[derive(Debug, Default)]
pub(crate) struct MatchCache(Mutex<Cached>);

#[derive(Debug, Default)]
struct Cached {
    entries: HashMap<String, (u64, Matches)>,
    /// Incremented at each use: an entry's last use.
    clock: u64,
    rows: usize,
}

/// Rows `MatchCache` holds at most (≈ 60 bytes each).
const CACHED_ROWS: usize = 1_000_000;

impl MatchCache {
    fn get(&self, key: &str) -> Option<Matches> {
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        cached.clock += 1;
        let clock = cached.clock;
        let (used, matches) = cached.entries.get_mut(key)?;
        *used = clock;
        Some(Arc::clone(matches))
    }

    fn put(&self, key: String, matches: Matches) {
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        cached.clock += 1;
        cached.rows += matches.len().max(1);
        let clock = cached.clock;
        if let Some((_, old)) = cached.entries.insert(key, (clock, matches)) {
            cached.rows -= old.len().max(1);
        }
        while cached.rows > CACHED_ROWS && cached.entries.len() > 1 {
            let oldest = cached.entries.iter().min_by_key(|(_, (used, _))| *used).map(|(k, _)| k.clone());
            if let Some((_, gone)) = oldest.and_then(|k| cached.entries.remove(&k)) {
                cached.rows -= gone.len().max(1);
            }
        }
    }
}

/// What `MatchCache` knows a list's matches under some filters by.
fn match_key(watched: &Watched, filters: &ChangeFilters) -> String {
    format!(
        "{:x}{:016x} {:?}",
        watched.fingerprint.0,
        watched.fingerprint.1,
        ChangeFilters { watched: None, ..filters.clone() }
    )
}

impl Store {
    /// A page of the changes a list follows under `filters` (`narrowed` to the months and
    /// companies that changed), from a DuckDB file, and the total.
    pub(crate) fn watched_page(
        &self,
        table: &str,
        filters: &ChangeFilters,
        watched: &Watched,
        narrowed: &Narrowed,
        (page, per_page): (u64, u64),
        locale: Locale,
    ) -> Result<(u64, Vec<Change>), StoreError> {
        let key = match_key(watched, filters);
        let matches = match self.matches.get(&key) {
            Some(matches) => matches,
            None => {
                let matches = Arc::new(self.watched_matches(table, filters, watched, narrowed)?);
                self.matches.put(key, Arc::clone(&matches));
                matches
            }
        };
        let offset = page.saturating_sub(1).saturating_mul(per_page).min(matches.len() as u64) as usize;
        let rows = &matches[offset..(offset + per_page as usize).min(matches.len())];
        if rows.is_empty() {
            return Ok((matches.len() as u64, Vec::new()));
        }
        // Each half of the page is read at once by a query of its own, its row-id range, months
        // (and, within one, the CNPJs) narrowing the scan to its row groups: DuckDB narrows by a
        // range of row ids, not by a list of them (BENCHMARKS.md, "A watchlist's rows by their
        // keys").
        let queries = halves(rows).map(|half| watched_rows(table, half)).collect();
        let rows = self.backend.rows_at_once("watchlist page", queries)?;
        Ok((matches.len() as u64, rows.into_iter().map(|r| self.change(r, locale)).collect()))
    }

    /// Every row a list follows under `filters`: the rows of its companies that changed, read
    /// with the other filters (by their keys when `keyed_matches` can), then `Watched::follows`.
    fn watched_matches(
        &self,
        table: &str,
        filters: &ChangeFilters,
        watched: &Watched,
        narrowed: &Narrowed,
    ) -> Result<Vec<Match>, StoreError> {
        if let Some(matches) = self.keyed_matches(filters, watched, narrowed) {
            return matches;
        }
        let others = ChangeFilters { watched: None, ..filters.clone() };
        let months = Narrowed { months: narrowed.months.clone(), bases: None };
        let (clause, mut params) = others.sql(Some(&months));
        params.push(narrowed.bases.as_deref().unwrap_or_default().join(","));
        let and = if clause.is_empty() { " WHERE" } else { " AND" };
        let sql = format!(
            "SELECT CAST(rowid AS VARCHAR), month, cnpj, cnpj_basico, field FROM {table}{clause}{and} \
             cnpj_basico IN (SELECT unnest(string_to_array(${}, ','))) ORDER BY rowid",
            params.len()
        );
        let rows = self.backend.rows("watchlist matches", &sql, &params)?;
        let follows = |r: &Vec<Option<String>>| {
            watched.follows(opt(r, 2).as_deref(), &text(r, 3), of_company(opt(r, 4).as_deref()))
        };
        Ok(rows
            .into_iter()
            .filter(follows)
            .map(|r| (text(&r, 0).parse().unwrap_or(0), text(&r, 1), opt(&r, 2)))
            .collect())
    }

    /// `watched_matches` from `change_keys`, when every month asked for has its keys and the
    /// filters are of month, since and events alone (a list's): the keys of the list's companies
    /// that changed, each made its row id and CNPJ again. A semi-join of integers and no
    /// string of the month read: 10 ms a month for a list of 100,000 entries at 1.0, where
    /// `watched_matches` takes 100 ms (BENCHMARKS.md, "A watchlist's rows by their keys").
    fn keyed_matches(
        &self,
        filters: &ChangeFilters,
        watched: &Watched,
        narrowed: &Narrowed,
    ) -> Option<Result<Vec<Match>, StoreError>> {
        let firsts = &self.tables.keyed;
        let others = ChangeFilters {
            month: filters.month.clone(),
            since: filters.since.clone(),
            events: filters.events.clone(),
            ..Default::default()
        };
        let of_a_list = others == ChangeFilters { watched: None, ..filters.clone() };
        if !of_a_list || !narrowed.months.iter().all(|m| firsts.contains_key(m)) {
            return None;
        }
        let months = Narrowed { months: narrowed.months.clone(), bases: None };
        let (clause, params) = others.sql(Some(&months));
        let and = if clause.is_empty() { " WHERE" } else { " AND" };
        let sql = format!(
            "SELECT month, CAST(position AS VARCHAR), CAST(company AS VARCHAR), CAST(branch AS VARCHAR), \
             CAST(of_company AS VARCHAR) \
             FROM history.change_keys{clause}{and} \
             company IN (SELECT CAST(unnest(string_to_array(${}, ',')) AS UBIGINT))",
            params.len() + 1
        );
        // In ascending order (`Companies` lists them so): each half of them is a query of its own,
        // both at once, and DuckDB's zone maps on `company` (each month's keys are in company
        // order) give each about half the month's keys to scan: 11-15 ms where one query takes
        // 22 ms at 1.0.
        let keys: Vec<u64> = narrowed.bases.iter().flatten().filter_map(|b| cnpj_index::company_key(b)).collect();
        let queries = halves(&keys)
            .map(|half| {
                let mut params = params.clone();
                params.push(half.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
                (sql.clone(), params)
            })
            .collect();
        let rows = match self.backend.rows_at_once("watchlist keys", queries) {
            Ok(rows) => rows,
            Err(e) => return Some(Err(e)),
        };
        let mut matches = Vec::new();
        for r in rows {
            let (month, of_company) = (text(&r, 0), text(&r, 4) == "true");
            let (Some(first), Ok(position), Ok(company)) =
                (firsts.get(&month), text(&r, 1).parse::<i64>(), text(&r, 2).parse::<u64>())
            else {
                continue;
            };
            let cnpj = opt(&r, 3).and_then(|b| b.parse().ok()).map(|b| cnpj_index::cnpj_of(company, b));
            if watched.follows(cnpj.as_deref(), &cnpj_index::company_base(company), of_company) {
                matches.push((first + position, month, cnpj));
            }
        }
        matches.sort_unstable_by_key(|m| m.0);
        Some(Ok(matches))
    }

    /// The changes of `month` each of `lists` follows, in the served order (what `changes`
    /// pages for `month`, `events` and `watched`), all lists in one pass (see the module docs).
    pub fn watched_month(
        &self,
        month: &str,
        lists: &[Following],
        locale: Locale,
    ) -> Result<Vec<Vec<Change>>, StoreError> {
        let mut out = vec![Vec::new(); lists.len()];
        let Some(table) = self.tables.table else { return Ok(out) };
        let mut watched = Companies::default();
        lists.iter().for_each(|l| watched.union_with(&l.watched.bases));
        let candidates = match &self.tables.companies {
            Some(months) => match months.iter().find(|(m, _)| m == month) {
                Some((_, changed)) => watched.intersection(changed),
                None => return Ok(out),
            },
            None => watched,
        };
        if candidates.is_empty() {
            return Ok(out);
        }
        let watchers = watchers(lists, &candidates);
        // In the served order: a DuckDB file stores its rows so, as the events' pages read them.
        let (order, duckdb) = match self.backend.dialect() {
            Dialect::DuckDb => ("rowid".to_owned(), true),
            Dialect::Postgres => (format!("month, {ORDER_AFTER_MONTH}"), false),
        };
        let rowid = if duckdb { ", CAST(rowid AS VARCHAR)" } else { "" };
        let sql = format!(
            "SELECT {COLUMNS}{rowid} FROM {table} WHERE month = $1 AND cnpj_basico IN \
             (SELECT unnest(string_to_array($2, ','))) ORDER BY {order}"
        );
        let bases = candidates.bases().collect::<Vec<_>>().join(",");
        let rows = self.backend.rows("watchlists' month", &sql, &[month.to_owned(), bases])?;
        let mut matches = vec![Vec::new(); lists.len()];
        for row in rows {
            let (cnpj, basico, event, field) = (opt(&row, 1), text(&row, 2), text(&row, 3), opt(&row, 4));
            let follows = |&i: &usize| {
                let list = lists[i];
                (list.events.is_empty() || list.events.contains(&event))
                    && list.watched.follows(cnpj.as_deref(), &basico, of_company(field.as_deref()))
            };
            let takers: Vec<usize> =
                watchers.get(&basico).into_iter().flatten().map(|&i| i as usize).filter(follows).collect();
            if duckdb {
                let at = (text(&row, 7).parse().unwrap_or(0), month.to_owned(), cnpj.clone());
                takers.iter().for_each(|&i| matches[i].push(at.clone()));
            }
            if let Some((&last, rest)) = takers.split_last() {
                let change = self.change(row, locale);
                rest.iter().for_each(|&i| out[i].push(change.clone()));
                out[last].push(change);
            }
        }
        // Every list's pages of the month are ready (`watched_page`).
        if duckdb && self.tables.companies.is_some() {
            for (list, matches) in lists.iter().zip(matches) {
                let filters =
                    ChangeFilters { month: Some(month.to_owned()), events: list.events.to_vec(), ..Default::default() };
                self.matches.put(match_key(list.watched, &filters), Arc::new(matches));
            }
        }
        Ok(out)
    }
}

/// The query of `rows` (matches, in order): by their ids, within the range of them, their
/// months and, within one month, their CNPJs.
fn watched_rows(table: &str, rows: &[Match]) -> (String, Vec<String>) {
    let (first, last) = (&rows[0], &rows[rows.len() - 1]);
    let ids = rows.iter().map(|r| r.0.to_string()).collect::<Vec<_>>().join(",");
    let mut sql = format!(
        "SELECT {COLUMNS} FROM {table} WHERE rowid BETWEEN {} AND {} AND rowid IN ({ids}) \
         AND month BETWEEN $1 AND $2",
        first.0, last.0
    );
    let mut params = vec![first.1.clone(), last.1.clone()];
    if let (true, Some(from), Some(to)) = (first.1 == last.1, &first.2, &last.2) {
        sql.push_str(" AND cnpj BETWEEN $3 AND $4");
        params.extend([from.clone(), to.clone()]);
    }
    sql.push_str(" ORDER BY rowid");
    (sql, params)
}

/// `items` in two halves, in order (one when there are fewer than two).
fn halves<T>(items: &[T]) -> std::slice::Chunks<'_, T> {
    items.chunks(items.len().div_ceil(2).max(1))
}

/// Each candidate company's lists (their indices in `lists`).
fn watchers(lists: &[Following], candidates: &Companies) -> HashMap<String, Vec<u32>> {
    let mut watchers: HashMap<String, Vec<u32>> = HashMap::new();
    for (i, list) in lists.iter().enumerate() {
        for basico in list.watched.bases.intersection(candidates).bases() {
            watchers.entry(basico).or_default().push(i as u32);
        }
    }
    watchers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a list of `keys` follows a change of (`cnpj`, `basico`, `field`).
    fn check(keys: &[&str], change: (Option<&str>, &str, Option<&str>), expected: bool) {
        let watched = Watched::new(keys.iter().copied());
        assert_eq!(watched.follows(change.0, change.1, of_company(change.2)), expected, "{keys:?} {change:?}");
    }

    #[test]
    fn a_list_follows_its_companies_and_its_establishments_with_their_company() {
        let (est, other) = (Some("11222333000181"), Some("11222333000262"));
        // A company: every event of it, and nothing of another.
        check(&["11222333"], (other, "11222333", Some("situacao_cadastral")), true);
        check(&["11222333"], (None, "11222333", None), true);
        check(&["11222333"], (Some("22333444000181"), "22333444", Some("razao_social")), false);
        // An establishment: its own events and its company's, not its siblings'.
        check(&["11222333000181"], (est, "11222333", Some("situacao_cadastral")), true);
        check(&["11222333000181"], (est, "11222333", None), true);
        check(&["11222333000181"], (other, "11222333", Some("razao_social")), true);
        check(&["11222333000181"], (None, "11222333", Some("socios")), true);
        check(&["11222333000181"], (other, "11222333", Some("situacao_cadastral")), false);
        check(&["11222333000181"], (other, "11222333", None), false);
        // Both kinds in one list: a watched company's every event still.
        check(&["11222333000181", "22333444"], (Some("22333444000181"), "22333444", None), true);
        check(&["11222333000181", "22333444"], (other, "11222333", Some("logradouro")), false);
    }

    #[test]
    fn a_clause_names_only_the_entries_of_its_bases() {
        let watched = Watched::new(["11222333000181", "22333444", "33444555000181", "44555666"]);
        let (clause, values) = watched.clause(&["11222333".into(), "44555666".into()]);
        assert_eq!(values, ["11222333,44555666", "44555666", "11222333000181"]);
        assert!(clause.contains("cnpj IN"), "{clause}");
        // Only watched companies among the bases: every event of them.
        let (clause, values) = watched.clause(&["22333444".into()]);
        assert_eq!(
            (clause.as_str(), values.as_slice()),
            ("cnpj_basico IN (SELECT unnest(string_to_array($, ',')))", &["22333444".to_owned()][..])
        );
    }
}
