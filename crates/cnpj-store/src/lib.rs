//! Reads a built registry dataset (a DuckDB file opened read-only, or a Postgres schema): detail
//! and batch records by CNPJ, search, month-over-month changes and history, reference data and
//! cities, in any locale; and exports it for other engines (`export`: Parquet or CSV). The CLI's
//! `show` and `export`, and the API, read the dataset through this crate. A
//! record's rows come from the DuckDB file's lookup file or from SQL, the same for both backends
//! (dialect differences are confined to `search.rs` and `changes.rs`); one builder makes records
//! of them, so every path answers byte for byte alike.
//! A search runs on the build's search index when there is one (and answers as SQL would), else
//! by SQL. Safe to share between threads.

mod backend;
mod changes;
mod export;
mod partners;
mod search;
mod search_export;

use std::collections::HashMap;

use cnpj_model::{
    Address, BatchRecord, City, CnpjQuery, CodeLabel, Contact, DetailRecord, Locale, Partner, ReferenceData,
    SecondaryActivity, endereco_completo, fold, telefone_formatado,
};

pub use backend::Source;
use backend::{Backend, Dialect, TextRow};
pub use changes::{Change, ChangeFilters, EVENTS, Following, Watched};
use cnpj_index::{Lookup, LookupTable, Reader, SearchIndex};
pub use cnpj_index::{LookupError, SearchIndexError, history_path, lookup_path, search_index_path};
pub use export::{
    Column, ExportError, ExportFormat, ExportOptions, ExportedFile, ExportedTable, MANIFEST_FILE, Manifest, export,
};
pub use partners::{
    Network, NetworkEdge, NetworkNode, NetworkOptions, NodeDetail, OwnCompany, PartnerCompany, PartnerDocument,
    PartnerFilters, PartnerItem, PartnerRecord,
};
pub use search::SearchFilters;
pub use search_export::{ParquetColumns, ParquetWriter};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the dataset {dataset}: {error}")]
    Open { dataset: String, error: String },
    #[error("{dataset} is not a registry dataset (no metadata table)")]
    NotADataset { dataset: String },
    #[error("query failed ({context}): {error}")]
    Query { context: &'static str, error: String },
    #[error(transparent)]
    Lookup(#[from] LookupError),
    #[error(transparent)]
    Search(#[from] SearchIndexError),
    /// A search by SQL ran past its budget ([`Limits::search_budget`]).
    #[error("the search ran past its budget")]
    OverBudget,
}

/// What a store may spend serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The memory DuckDB (three quarters) and the search index's cache of big bitmaps (a
    /// quarter) share.
    pub memory: u64,
    /// The time a search by SQL may take (what the search index cannot answer: a term without a
    /// word character, or a dataset served without an index); past it, [`StoreError::OverBudget`].
    pub search_budget: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { memory: 1 << 30, search_budget: std::time::Duration::from_secs(2) }
    }
}

/// Which search index a store searches with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SearchIndexFile {
    /// A DuckDB file's own (`<file>.search`); none for a Postgres schema.
    #[default]
    Beside,
    /// The index at this path (for Postgres: the index file of the build it publishes).
    At(std::path::PathBuf),
    /// None: every search by SQL.
    None,
}

/// An open dataset with its labels and cities in memory.
pub struct Store {
    source: Source,
    search_index: SearchIndexFile,
    limits: Limits,
    backend: Backend,
    /// A DuckDB dataset's lookup file, when it belongs to the same build.
    lookup: Option<Lookup>,
    /// The search index of the same build, when there is one.
    search: Option<SearchIndex>,
    /// Labels by locale, table and code: looked up by `&str` without a key made per lookup (a
    /// record takes some ten, an export job a million records).
    labels: HashMap<Locale, HashMap<String, HashMap<String, String>>>,
    municipios: HashMap<String, (String, Option<String>)>,
    /// Cities in the served order (folded name, then name, then id), with their folded names.
    cities: Vec<(String, City)>,
    source_month: String,
    /// The build's id, and when it was built (`YYYY-MM-DDTHH:MM:SSZ`), from the metadata.
    build_id: String,
    built_at: String,
    /// When the dataset was published (Postgres; empty for a DuckDB file): a swap changes it.
    published_at: String,
    /// The number of changes per month, event and state, read on first use (`changes.rs`).
    tally: std::sync::OnceLock<Vec<changes::Tally>>,
    tables: changes::ChangeTables,
    /// The rows the last watchlists asked for follow (`changes/watching.rs`).
    matches: changes::MatchCache,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store(source month {})", self.source_month)
    }
}

/// `$1, $2, …, $n` after `from` placeholders.
fn placeholders(from: usize, n: usize) -> String {
    (from + 1..=from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// The establishment columns of a detail row (`e`: `estabelecimentos`). Positions are those of
/// [`Store::record`]; the lookup file stores exactly these.
const ESTABLISHMENT: &str = "e.cnpj, e.nome_fantasia, e.situacao_cadastral, e.cnae_fiscal,
    array_to_string(e.cnaes_secundarios, ','), e.logradouro, e.numero, e.complemento, e.bairro, e.municipio,
    e.uf, e.cep, e.ddd_1, e.telefone_1, e.email,
    CAST(e.data_inicio_atividade AS VARCHAR), e.matriz_filial, CAST(e.data_situacao_cadastral AS VARCHAR),
    e.motivo_situacao_cadastral, e.situacao_especial, CAST(e.data_situacao_especial AS VARCHAR),
    e.nome_cidade_exterior, e.pais, e.ddd_2, e.telefone_2, e.ddd_fax, e.fax, e.cnpj_basico";
const ESTABLISHMENT_COLUMNS: usize = 28;

/// The company columns that follow them (`c`: `empresas`, left-joined), and their values when the
/// company is missing from Empresas.
const COMPANY: &str = "coalesce(c.razao_social, ''), coalesce(c.natureza_juridica, ''), coalesce(c.porte_empresa, ''),
    CAST(c.capital_social AS VARCHAR), coalesce(c.ente_federativo_responsavel, '')";
const NO_COMPANY: [Option<&str>; 5] = [Some(""), Some(""), Some(""), None, Some("")];

/// A partner's columns (`socios`), the lookup file's partner cells: the served ones, then the
/// company a legal-entity partner is (for its `partner_id`, see `partners.rs`).
pub(crate) const PARTNER: &str =
    "nome, qualificacao, tipo, documento, CAST(data_entrada AS VARCHAR), faixa_etaria, pais,
    representante_legal, nome_representante, qualificacao_representante, partner_basico";
pub(crate) const PARTNER_COLUMNS: usize = 11;

/// The tax-regime inputs of one company: its latest year's regime (first read wins a tie), and
/// Simples' `opcao_simples` and `opcao_mei`.
const REGIME: &str = "
SELECT (SELECT regime FROM regimes_tributarios WHERE cnpj_basico = $1 ORDER BY ano DESC, source_file, seq LIMIT 1),
       s.opcao_simples, s.opcao_mei
FROM (SELECT 1) AS one LEFT JOIN simples s ON s.cnpj_basico = $1";

/// Partners in the served order: entry date (unknown last), name, document.
fn sort_partners(partners: &mut [TextRow]) {
    fn key(r: &TextRow) -> (bool, &Option<String>, &Option<String>, &Option<String>) {
        (r[4].is_none(), &r[4], &r[0], &r[3])
    }
    partners.sort_by(|a, b| key(a).cmp(&key(b)));
}

/// The served regime and `simples_nacional`: the latest year's tax regime; else
/// MEI, Simples Nacional or "não informado" from Simples.
fn served_regime(inputs: &[Option<String>]) -> (String, u8) {
    let is_s = |i: usize| inputs.get(i).cloned().flatten().as_deref() == Some("S");
    let regime = match inputs.first().cloned().flatten() {
        Some(regime) => regime,
        None if is_s(2) => "mei".to_owned(),
        None if is_s(1) => "simples_nacional".to_owned(),
        None => "nao_informado".to_owned(),
    };
    (regime, u8::from(is_s(1)))
}

/// A CNPJ (14 characters) or a company's base (8, meaning its head office).
#[derive(Clone, Copy)]
enum Key<'a> {
    Cnpj(&'a str),
    Basico(&'a str),
}

/// What one record is built from: the detail row (`ESTABLISHMENT` then `COMPANY` columns), the
/// partners (`PARTNER` columns, in the served order) and the regime inputs (see `REGIME`).
struct Found {
    detail: TextRow,
    partners: Vec<TextRow>,
    regime: TextRow,
}

/// Column `i` of a text row (`""` for NULL).
fn text(row: &TextRow, i: usize) -> String {
    row.get(i).cloned().flatten().unwrap_or_default()
}

fn opt(row: &TextRow, i: usize) -> Option<String> {
    row.get(i).cloned().flatten()
}

impl Store {
    /// Opens a dataset; a DuckDB file with its lookup file and search index beside it.
    pub fn open(source: &Source) -> Result<Store, StoreError> {
        Store::open_with(source, &SearchIndexFile::Beside, Limits::default())
    }

    /// Opens a dataset, searching with the search index `search_index` says, within `limits`.
    /// An index of another build than the dataset's is not used (searches run by SQL), and a
    /// warning says so.
    pub fn open_with(source: &Source, search_index: &SearchIndexFile, limits: Limits) -> Result<Store, StoreError> {
        let cache = limits.memory / 4;
        let backend = Backend::open(source, limits.memory - cache)?;
        let metadata = backend
            .rows("metadata", "SELECT key, value FROM metadata", &[])
            .map_err(|_| StoreError::NotADataset { dataset: source.to_string() })?;
        let meta = |key: &str| metadata.iter().find(|r| text(r, 0) == key).map(|r| text(r, 1)).unwrap_or_default();
        let (source_month, published_at) = (meta("source_month"), meta("published_at"));
        let (build_id, built_at) = (meta("build_id"), meta("built_at"));
        let lookup = match source {
            Source::DuckDb(path) => {
                open_serving("lookup file", &lookup_path(path), &build_id, Lookup::open, Lookup::build_id)
            }
            Source::Postgres { .. } => None,
        };
        let search_path = match (search_index, source) {
            (SearchIndexFile::At(path), _) => Some(path.to_owned()),
            (SearchIndexFile::Beside, Source::DuckDb(path)) => Some(search_index_path(path)),
            (SearchIndexFile::Beside, Source::Postgres { .. }) | (SearchIndexFile::None, _) => None,
        };
        let open_index = |path: &std::path::Path| SearchIndex::open(path, cache as usize);
        let search = search_path
            .and_then(|path| open_serving("search index", &path, &build_id, open_index, SearchIndex::build_id));
        let mut labels: HashMap<Locale, HashMap<String, HashMap<String, String>>> = HashMap::new();
        for row in backend.rows("labels", "SELECT locale, tabela, codigo, descricao FROM labels", &[])? {
            if let Ok(locale) = text(&row, 0).parse::<Locale>() {
                let table = labels.entry(locale).or_default().entry(text(&row, 1)).or_default();
                table.insert(text(&row, 2), text(&row, 3));
            }
        }
        let mut municipios = HashMap::new();
        let mut cities = Vec::new();
        for row in backend.rows("municipios", "SELECT code, name, uf, ibge FROM municipios", &[])? {
            let city = City { id: text(&row, 0), name: text(&row, 1), state: text(&row, 2), ibge_code: opt(&row, 3) };
            municipios.insert(city.id.clone(), (city.name.clone(), city.ibge_code.clone()));
            cities.push((fold(&city.name), city));
        }
        cities.sort_by(|(fa, a), (fb, b)| (fa, &a.name, &a.id).cmp(&(fb, &b.name, &b.id)));
        let tables = changes::ChangeTables::of(&backend)?;
        Ok(Store {
            source: source.clone(),
            search_index: search_index.clone(),
            limits,
            backend,
            lookup,
            search,
            labels,
            municipios,
            cities,
            source_month,
            build_id,
            built_at,
            published_at,
            tally: std::sync::OnceLock::new(),
            tables,
            matches: changes::MatchCache::default(),
        })
    }

    /// Opens the same dataset again, with the same choice of search index (a swapped file or a
    /// new publication is then served).
    pub fn reopen(&self) -> Result<Store, StoreError> {
        Store::open_with(&self.source, &self.search_index, self.limits)
    }

    /// Whether the dataset behind this store is still the one it opened: false once a newer
    /// Postgres publication was swapped in (a DuckDB file is swapped by reopening it).
    pub fn is_current(&self) -> Result<bool, StoreError> {
        if self.backend.dialect() == Dialect::DuckDb {
            return Ok(true);
        }
        let rows = self.backend.rows("metadata", "SELECT value FROM metadata WHERE key = 'published_at'", &[])?;
        Ok(rows.first().map(|r| text(r, 0)).unwrap_or_default() == self.published_at)
    }

    /// The `YYYY-MM` of the dump this dataset was built from (empty when unknown).
    pub fn source_month(&self) -> &str {
        &self.source_month
    }

    /// The id of the build that made this dataset (empty when unknown).
    pub fn build_id(&self) -> &str {
        &self.build_id
    }

    /// When the dataset was built, `YYYY-MM-DDTHH:MM:SSZ` (empty when unknown).
    pub fn built_at(&self) -> &str {
        &self.built_at
    }

    /// Whether the database answers a trivial query (for a readiness probe).
    pub fn ping(&self) -> Result<(), StoreError> {
        self.backend.rows("ping", "SELECT CAST('ok' AS VARCHAR)", &[]).map(drop)
    }

    /// The label of `code` in `table`, `""` for an unknown or empty code.
    pub fn label(&self, locale: Locale, table: &str, code: &str) -> String {
        self.labels.get(&locale).and_then(|t| t.get(table)).and_then(|c| c.get(code)).cloned().unwrap_or_default()
    }

    /// The detail record of one establishment, or of a company's head office for an 8-character query.
    pub fn detail(&self, query_: &CnpjQuery, locale: Locale) -> Result<Option<DetailRecord>, StoreError> {
        let found = self.find(&[key_of(query_)], false)?.pop().flatten();
        Ok(found.map(|f| self.record(&f, locale)))
    }

    /// The batch record (detail plus regime and Simples fields) of one CNPJ or company.
    pub fn batch(&self, query_: &CnpjQuery, locale: Locale) -> Result<Option<BatchRecord>, StoreError> {
        let Some(found) = self.find(&[key_of(query_)], true)?.pop().flatten() else { return Ok(None) };
        let (regime, simples_nacional) = served_regime(&found.regime);
        Ok(Some(BatchRecord {
            detail: self.record(&found, locale),
            regime_tributario: self.label(locale, "regime_tributario", &regime),
            regime_tributario_code: regime,
            simples_nacional,
            employees_count: None,
            employees_year: None,
            employees_source: None,
            faturamento_estimado: None,
        }))
    }

    /// Whether point lookups read the lookup file (a DuckDB dataset with its file) rather than SQL.
    pub fn has_lookup_file(&self) -> bool {
        self.lookup.is_some()
    }

    /// Whether searches run on a search index rather than SQL.
    pub fn has_search_index(&self) -> bool {
        self.search.is_some()
    }

    /// What the records of `keys` are built from, in order (`None`: no such establishment). A
    /// lookup file that fails (a damaged block) is logged and the records are read by SQL.
    fn find(&self, keys: &[Key<'_>], regime: bool) -> Result<Vec<Option<Found>>, StoreError> {
        if let Some(lookup) = &self.lookup {
            let mut reader = lookup.reader();
            match keys.iter().map(|k| Self::find_in(&mut reader, *k, regime)).collect() {
                Ok(found) => return Ok(found),
                Err(error) => tracing::error!(%error, "the lookup file failed: reading the records by SQL"),
            }
        }
        self.find_by_sql(keys, regime)
    }

    fn find_in(lookup: &mut Reader<'_>, key: Key<'_>, regime: bool) -> Result<Option<Found>, LookupError> {
        let mut detail = match key {
            Key::Cnpj(cnpj) => match lookup.get(LookupTable::Establishments, cnpj)? {
                Some(e) => e,
                None => return Ok(None),
            },
            // The head office: the first establishment marked as such, else the first.
            Key::Basico(basico) => {
                let mut all = lookup.lookup().establishments_of(basico)?;
                match all.iter().position(|e| opt(e, 16).as_deref() == Some("1")) {
                    Some(head) => all.swap_remove(head),
                    None if all.is_empty() => return Ok(None),
                    None => all.swap_remove(0),
                }
            }
        };
        let basico = text(&detail, ESTABLISHMENT_COLUMNS - 1);
        match lookup.get(LookupTable::Companies, &basico)? {
            Some(company) => detail.extend(company),
            None => detail.extend(NO_COMPANY.map(|c| c.map(str::to_owned))),
        }
        let mut partners: Vec<TextRow> = match lookup.get(LookupTable::Partners, &basico)? {
            Some(cells) => cells.chunks(PARTNER_COLUMNS).map(<[_]>::to_vec).collect(),
            None => Vec::new(),
        };
        sort_partners(&mut partners);
        let regime = if regime {
            let latest = lookup.get(LookupTable::Regimes, &basico)?.and_then(|r| r.into_iter().next().flatten());
            let simples = lookup.get(LookupTable::Simples, &basico)?.unwrap_or_default();
            vec![latest, opt(&simples, 0), opt(&simples, 1)]
        } else {
            Vec::new()
        };
        Ok(Some(Found { detail, partners, regime }))
    }

    /// `find` with SQL: one query for the establishments asked by CNPJ, one per head office, one
    /// for all their partners, and one per company for the regime.
    fn find_by_sql(&self, keys: &[Key<'_>], regime: bool) -> Result<Vec<Option<Found>>, StoreError> {
        let from = format!(
            "SELECT {ESTABLISHMENT}, {COMPANY} FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico"
        );
        let cnpjs: Vec<String> =
            keys.iter().filter_map(|k| if let Key::Cnpj(c) = k { Some((*c).to_owned()) } else { None }).collect();
        let mut rows: HashMap<String, TextRow> = HashMap::new();
        if !cnpjs.is_empty() {
            let sql = format!("{from} WHERE e.cnpj IN ({})", placeholders(0, cnpjs.len()));
            rows.extend(self.backend.rows("detail", &sql, &cnpjs)?.into_iter().map(|r| (text(&r, 0), r)));
        }
        let mut details = Vec::with_capacity(keys.len());
        for key in keys {
            details.push(match key {
                Key::Cnpj(cnpj) => rows.get(*cnpj).cloned(),
                Key::Basico(basico) => {
                    let sql = format!(
                        "{from} WHERE e.cnpj_basico = $1 ORDER BY (e.matriz_filial = '1') DESC, e.cnpj LIMIT 1"
                    );
                    self.backend.rows("head office", &sql, &[(*basico).to_owned()])?.pop()
                }
            });
        }
        let mut basicos: Vec<String> = details.iter().flatten().map(|d| text(d, ESTABLISHMENT_COLUMNS - 1)).collect();
        basicos.sort();
        basicos.dedup();
        let mut partners: HashMap<String, Vec<TextRow>> = HashMap::new();
        if !basicos.is_empty() {
            let sql = format!(
                "SELECT {PARTNER}, cnpj_basico FROM socios WHERE cnpj_basico IN ({})",
                placeholders(0, basicos.len())
            );
            for mut r in self.backend.rows("partners", &sql, &basicos)? {
                let basico = r.pop().flatten().unwrap_or_default();
                partners.entry(basico).or_default().push(r);
            }
        }
        details
            .into_iter()
            .map(|detail| {
                let Some(detail) = detail else { return Ok(None) };
                let basico = text(&detail, ESTABLISHMENT_COLUMNS - 1);
                let mut partners = partners.get(&basico).cloned().unwrap_or_default();
                sort_partners(&mut partners);
                let regime = if regime {
                    self.backend.rows("regime", REGIME, &[basico])?.pop().unwrap_or_default()
                } else {
                    Vec::new()
                };
                Ok(Some(Found { detail, partners, regime }))
            })
            .collect()
    }

    /// One page of search results (ordered by CNPJ) and the total number of matches: from the
    /// search index when there is one (a failing index is logged and SQL answers), else by SQL.
    /// Counted in the `metrics` facade (a no-op without a recorder): `cnpj_searches_total` by
    /// `answered_by` (`index`, `sql`), and `cnpj_searches_over_budget_total`.
    pub fn search(
        &self,
        filters: &SearchFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<(u64, Vec<DetailRecord>), StoreError> {
        match self.search_by_index(filters, page, per_page, locale) {
            Ok(Some(found)) => {
                metrics::counter!("cnpj_searches_total", "answered_by" => "index").increment(1);
                return Ok(found);
            }
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "the search index failed: searching by SQL"),
        }
        let found = self.search_by_sql(filters, page, per_page, locale);
        match &found {
            Ok(_) => metrics::counter!("cnpj_searches_total", "answered_by" => "sql").increment(1),
            Err(StoreError::OverBudget) => metrics::counter!("cnpj_searches_over_budget_total").increment(1),
            Err(_) => {}
        }
        found
    }

    /// How many establishments match `filters` (the total of [`Store::search`], without a page):
    /// from the search index when it can answer, else by SQL within the search budget. Counted
    /// as searches are.
    pub fn search_count(&self, filters: &SearchFilters) -> Result<u64, StoreError> {
        if let Some(index) = &self.search {
            let conditions = self.conditions(filters)?;
            match index.matches(&conditions) {
                Ok(Some(matches)) => {
                    metrics::counter!("cnpj_searches_total", "answered_by" => "index").increment(1);
                    return Ok(matches.len());
                }
                Ok(None) => {}
                Err(error) => tracing::error!(%error, "the search index failed: counting by SQL"),
            }
        }
        let deadline = std::time::Instant::now() + self.limits.search_budget;
        let counted = self.count_by_sql(filters, deadline);
        match &counted {
            Ok(_) => metrics::counter!("cnpj_searches_total", "answered_by" => "sql").increment(1),
            Err(StoreError::OverBudget) => metrics::counter!("cnpj_searches_over_budget_total").increment(1),
            Err(_) => {}
        }
        counted
    }

    /// The number of matches by SQL, stopped at `deadline`.
    fn count_by_sql(&self, filters: &SearchFilters, deadline: std::time::Instant) -> Result<u64, StoreError> {
        let (from, params) = filters.sql(self.backend.dialect(), |name| self.city_codes(name));
        let count = format!("SELECT CAST(count(*) AS VARCHAR) {from}");
        let count = self.backend.rows_within("search count", &count, &params, deadline)?;
        Ok(count.first().map(|r| text(r, 0)).unwrap_or_default().parse().unwrap_or(0))
    }

    /// [`Store::search`] on the search index alone: `None` without an index or when the index
    /// cannot answer (see `search_indexed`).
    pub fn search_by_index(
        &self,
        filters: &SearchFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<Option<(u64, Vec<DetailRecord>)>, StoreError> {
        let Some(index) = &self.search else { return Ok(None) };
        let Some((total, cnpjs)) = self.search_indexed(index, filters, page, per_page)? else { return Ok(None) };
        Ok(Some((total, self.records(&cnpjs, locale)?)))
    }

    /// The total and the page's CNPJs from the search index; `None` when the index cannot answer
    /// (a term without a word character).
    fn search_indexed(
        &self,
        index: &SearchIndex,
        filters: &SearchFilters,
        page: u64,
        per_page: u64,
    ) -> Result<Option<(u64, Vec<String>)>, StoreError> {
        let conditions = self.conditions(filters)?;
        let Some(matches) = index.matches(&conditions)? else { return Ok(None) };
        let offset = page.saturating_sub(1).saturating_mul(per_page);
        let total = matches.len();
        Ok(Some((total, index.cnpjs(&matches, total, offset, per_page))))
    }

    /// The filters as the search index's conditions (a partner's companies read as a partner
    /// is, see `partners.rs`).
    fn conditions(&self, filters: &SearchFilters) -> Result<Vec<cnpj_index::Condition>, StoreError> {
        let mut conditions = filters.conditions(|name| self.city_codes(name));
        if let Some(id) = &filters.partner_id {
            conditions.push(cnpj_index::Condition::Companies(self.partner_companies(id)?));
        }
        Ok(conditions)
    }

    /// The codes of the cities named `name` (folded equality).
    fn city_codes(&self, name: &str) -> Vec<String> {
        let folded = fold(name);
        self.cities.iter().filter(|(f, _)| *f == folded).map(|(_, c)| c.id.clone()).collect()
    }

    fn records(&self, cnpjs: &[String], locale: Locale) -> Result<Vec<DetailRecord>, StoreError> {
        let keys: Vec<Key<'_>> = cnpjs.iter().map(|c| Key::Cnpj(c)).collect();
        Ok(self.find(&keys, false)?.into_iter().flatten().map(|f| self.record(&f, locale)).collect())
    }

    /// [`Store::search`] by SQL alone, whatever index there is: the reference the index is
    /// compared with (parity tests, benchmark).
    pub fn search_by_sql(
        &self,
        filters: &SearchFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<(u64, Vec<DetailRecord>), StoreError> {
        let deadline = std::time::Instant::now() + self.limits.search_budget;
        let total = self.count_by_sql(filters, deadline)?;
        let (from, params) = filters.sql(self.backend.dialect(), |name| self.city_codes(name));
        let offset = page.saturating_sub(1).saturating_mul(per_page);
        if offset >= total {
            return Ok((total, Vec::new()));
        }
        let sql = format!("SELECT e.cnpj {from} ORDER BY e.cnpj LIMIT {per_page} OFFSET {offset}");
        let cnpjs = self.backend.rows_within("search page", &sql, &params, deadline)?;
        let cnpjs: Vec<String> = cnpjs.iter().map(|r| text(r, 0)).collect();
        self.records(&cnpjs, locale).map(|records| (total, records))
    }

    fn labels_of(&self, locale: Locale, table: &str) -> Vec<CodeLabel> {
        let codes = self.labels.get(&locale).and_then(|t| t.get(table));
        let mut list: Vec<CodeLabel> = codes
            .into_iter()
            .flatten()
            .map(|(code, label)| CodeLabel { code: code.clone(), description: label.clone() })
            .collect();
        list.sort_by(|a, b| a.code.cmp(&b.code));
        list
    }

    /// Reference data (`GET /api/v1/reference-data`) in `locale`.
    pub fn reference_data(&self, locale: Locale) -> ReferenceData {
        let mut states: Vec<String> =
            self.cities.iter().map(|(_, c)| c.state.clone()).filter(|s| s.len() == 2 && s != "EX").collect();
        states.sort();
        states.dedup();
        ReferenceData {
            business_sectors: self.labels_of(locale, "cnaes"),
            states,
            company_sizes: ["01", "03", "05"].map(String::from).to_vec(),
            legal_natures: self.labels_of(locale, "naturezas"),
            registration_statuses: self
                .labels_of(locale, "situacao_cadastral")
                .into_iter()
                .map(|c| (c.code, c.description.into()))
                .collect(),
            locale: locale.code().to_owned(),
            available_locales: Locale::ALL.iter().map(|l| (l.code().to_owned(), l.language().into())).collect(),
        }
    }

    /// Cities filtered by state (exact) and term (folded substring of the name), ordered by
    /// folded name, then name, then id; one page and the total.
    pub fn cities(&self, state: Option<&str>, term: Option<&str>, page: u64, per_page: u64) -> (u64, Vec<City>) {
        let term = term.map(fold);
        let matching: Vec<&City> = self
            .cities
            .iter()
            .filter(|(folded, c)| {
                state.is_none_or(|s| c.state == s) && term.as_deref().is_none_or(|t| folded.contains(t))
            })
            .map(|(_, c)| c)
            .collect();
        let offset = page.saturating_sub(1).saturating_mul(per_page) as usize;
        let items = matching.iter().skip(offset).take(per_page as usize).map(|c| (*c).clone()).collect();
        (matching.len() as u64, items)
    }

    fn record(&self, found: &Found, locale: Locale) -> DetailRecord {
        let r = &found.detail;
        let s = |i: usize| text(r, i);
        let label = |table: &str, code: &str| self.label(locale, table, code);
        let cnpj = s(0);
        let situacao = s(2);
        let cnae = s(3);
        let secundarios = s(4);
        let municipio = s(9);
        let (municipio_nome, municipio_ibge) = self.municipios.get(&municipio).cloned().unwrap_or_default();
        let (logradouro, numero, complemento, bairro, uf, cep) = (s(5), s(6), s(7), s(8), s(10), s(11));
        let endereco_completo =
            endereco_completo(&logradouro, &numero, &complemento, &bairro, &municipio_nome, &uf, &cep);
        let (ddd, telefone) = (s(12), s(13));
        let matriz = s(16);
        let motivo = s(18);
        let pais = s(22);
        let natureza = s(29);
        let porte = s(30);
        DetailRecord {
            id: cnpj.clone(),
            cnpj,
            razao_social: s(28),
            nome_fantasia: s(1),
            situacao_cadastral: label("situacao_cadastral", &situacao),
            situacao_cadastral_code: situacao,
            natureza_juridica: label("naturezas", &natureza),
            natureza_juridica_code: natureza,
            porte_empresa: label("porte_empresa", &porte),
            porte_empresa_code: porte,
            cnae_fiscal_descricao: label("cnaes", &cnae),
            cnae_fiscal: cnae,
            cnaes_secundarios: secundarios
                .split(',')
                .filter(|c| !c.is_empty())
                .map(|codigo| SecondaryActivity { descricao: label("cnaes", codigo), codigo: codigo.to_owned() })
                .collect(),
            endereco: Address {
                logradouro,
                numero,
                complemento,
                bairro,
                municipio,
                municipio_nome,
                uf,
                cep,
                endereco_completo,
                municipio_ibge,
                nome_cidade_exterior: s(21),
                pais: label("paises", &pais),
                pais_code: pais,
            },
            contato: Contact {
                telefone_formatado: telefone_formatado(&ddd, &telefone),
                ddd,
                telefone,
                email: s(14),
                ddd_2: s(23),
                telefone_2: s(24),
                ddd_fax: s(25),
                fax: s(26),
            },
            socios: found.partners.iter().map(|p| self.record_partner(p, locale)).collect(),
            data_inicio_atividades: opt(r, 15),
            capital_social: opt(r, 31),
            matriz_filial: label("matriz_filial", &matriz),
            matriz_filial_code: matriz,
            data_situacao_cadastral: opt(r, 17),
            motivo_situacao_cadastral: label("motivos", &motivo),
            motivo_situacao_cadastral_code: motivo,
            situacao_especial: s(19),
            data_situacao_especial: opt(r, 20),
            ente_federativo_responsavel: s(32),
        }
    }

    fn record_partner(&self, r: &TextRow, locale: Locale) -> Partner {
        let s = |i: usize| text(r, i);
        let (qualificacao, tipo, faixa) = (s(1), s(2), s(5));
        Partner {
            nome: s(0),
            qualificacao_descricao: self.label(locale, "qualificacoes", &qualificacao),
            qualificacao,
            tipo_descricao: self.label(locale, "tipo_socio", &tipo),
            tipo,
            documento: s(3),
            data_entrada: opt(r, 4),
            faixa_etaria: self.label(locale, "faixa_etaria", &faixa),
            faixa_etaria_code: faixa,
            pais_code: s(6),
            representante_legal: s(7),
            nome_representante: s(8),
            qualificacao_representante: s(9),
        }
    }
}

/// The serving file (`what`) at `path` if it was written for the build `build_id`; without it,
/// the store answers by SQL (correct, slower), and the reason is logged.
fn open_serving<T, E: std::fmt::Display>(
    what: &str,
    path: &std::path::Path,
    build_id: &str,
    open: impl FnOnce(&std::path::Path) -> Result<T, E>,
    id: impl Fn(&T) -> &str,
) -> Option<T> {
    match open(path) {
        Ok(file) if id(&file) == build_id && !build_id.is_empty() => Some(file),
        Ok(file) => {
            tracing::warn!(
                file = %path.display(), file_build = id(&file), dataset_build = build_id,
                "the {what} belongs to another build: it is not used, SQL answers instead"
            );
            None
        }
        Err(error) => {
            tracing::warn!(%error, "no usable {what}: SQL answers instead");
            None
        }
    }
}

fn key_of(query_: &CnpjQuery) -> Key<'_> {
    match query_ {
        CnpjQuery::Full(cnpj) => Key::Cnpj(cnpj.as_str()),
        CnpjQuery::Basico(_) => Key::Basico(query_.basico()),
    }
}
