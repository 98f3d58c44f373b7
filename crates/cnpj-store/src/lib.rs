//! Reads a built registry dataset (DuckDB file, opened read-only): detail and batch records by
//! CNPJ, search, reference data and cities, in any locale. The CLI's `show` and the API serve
//! records through this crate. Safe to share between threads: each call borrows one connection of
//! a small pool.

mod search;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cnpj_model::{
    Address, BatchRecord, City, CnpjQuery, CodeLabel, Contact, DetailRecord, Locale, Partner, ReferenceData,
    SecondaryActivity, fold,
};
use duckdb::{AccessMode, Config, Connection, OptionalExt, Row};

pub use search::SearchFilters;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the dataset {path}: {source}")]
    Open { path: PathBuf, source: duckdb::Error },
    #[error("{path} is not a registry dataset (no metadata table)")]
    NotADataset { path: PathBuf },
    #[error("query failed ({context}): {source}")]
    Query { context: &'static str, source: duckdb::Error },
}

fn query(context: &'static str) -> impl FnOnce(duckdb::Error) -> StoreError {
    move |source| StoreError::Query { context, source }
}

/// An open dataset with its labels and cities in memory.
pub struct Store {
    primary: Mutex<Connection>,
    pool: Mutex<Vec<Connection>>,
    labels: HashMap<(Locale, String, String), String>,
    municipios: HashMap<String, (String, Option<String>)>,
    /// Cities in the order of contract §5b, with their folded names.
    cities: Vec<(String, City)>,
    source_month: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store(source month {})", self.source_month)
    }
}

const DETAIL: &str = "
SELECT e.cnpj, coalesce(c.razao_social, ''), e.nome_fantasia, e.situacao_cadastral,
       coalesce(c.natureza_juridica, ''), coalesce(c.porte_empresa, ''), e.cnae_fiscal,
       e.cnaes_secundarios, e.logradouro, e.numero, e.complemento, e.bairro, e.municipio, e.uf, e.cep,
       e.endereco_completo, e.ddd_1, e.telefone_1, e.telefone_formatado, e.email,
       CAST(e.data_inicio_atividade AS VARCHAR), CAST(c.capital_social AS VARCHAR), e.matriz_filial,
       CAST(e.data_situacao_cadastral AS VARCHAR), e.motivo_situacao_cadastral, e.situacao_especial,
       CAST(e.data_situacao_especial AS VARCHAR), coalesce(c.ente_federativo_responsavel, ''),
       e.nome_cidade_exterior, e.pais, e.ddd_2, e.telefone_2, e.ddd_fax, e.fax, e.cnpj_basico
FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico";

/// Partners of the companies `$1`, … in contract §2 order; the caller appends `IN (…)` and the order.
const SOCIOS: &str = "
SELECT nome, qualificacao, tipo, documento, CAST(data_entrada AS VARCHAR), faixa_etaria, pais,
       representante_legal, nome_representante, qualificacao_representante, cnpj_basico
FROM socios WHERE cnpj_basico";

/// The served regime (contract §2): the latest year's tax regime; else MEI, Simples Nacional or
/// "não informado" from Simples. And `simples_nacional` (1 when `opcao_simples = S`).
const REGIME: &str = "
SELECT coalesce(
           (SELECT regime FROM regimes_tributarios WHERE cnpj_basico = $1 ORDER BY ano DESC, seq LIMIT 1),
           CASE WHEN s.opcao_mei = 'S' THEN 'mei' WHEN s.opcao_simples = 'S' THEN 'simples_nacional' END,
           'nao_informado'),
       CAST(coalesce(s.opcao_simples = 'S', FALSE) AS UTINYINT)
FROM (SELECT 1) LEFT JOIN simples s ON s.cnpj_basico = $2";

impl Store {
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open { path: path.to_owned(), source };
        if !path.is_file() {
            return Err(open_err(duckdb::Error::InvalidPath(path.to_owned())));
        }
        let config = Config::default().access_mode(AccessMode::ReadOnly).map_err(open_err)?;
        let conn = Connection::open_with_flags(path, config).map_err(open_err)?;
        // Point lookups and small scans: one thread per query; concurrency comes from the pool.
        conn.execute_batch("SET threads = 1").map_err(open_err)?;
        let source_month: String = conn
            .query_row("SELECT value FROM metadata WHERE key = 'source_month'", [], |r| r.get(0))
            .map_err(|_| StoreError::NotADataset { path: path.to_owned() })?;
        let mut labels = HashMap::new();
        {
            let mut stmt =
                conn.prepare("SELECT locale, tabela, codigo, descricao FROM labels").map_err(query("labels"))?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .map_err(query("labels"))?;
            for row in rows {
                let (locale, table, code, label) = row.map_err(query("labels"))?;
                if let Ok(locale) = locale.parse::<Locale>() {
                    labels.insert((locale, table, code), label);
                }
            }
        }
        let mut municipios = HashMap::new();
        let mut cities = Vec::new();
        {
            let mut stmt = conn.prepare("SELECT code, name, uf, ibge FROM municipios").map_err(query("municipios"))?;
            let rows = stmt
                .query_map([], |r| Ok(City { id: r.get(0)?, name: r.get(1)?, state: r.get(2)?, ibge_code: r.get(3)? }))
                .map_err(query("municipios"))?;
            for row in rows {
                let city = row.map_err(query("municipios"))?;
                municipios.insert(city.id.clone(), (city.name.clone(), city.ibge_code.clone()));
                cities.push((fold(&city.name), city));
            }
        }
        cities.sort_by(|(fa, a), (fb, b)| (fa, &a.name, &a.id).cmp(&(fb, &b.name, &b.id)));
        Ok(Store { primary: Mutex::new(conn), pool: Mutex::new(Vec::new()), labels, municipios, cities, source_month })
    }

    /// Runs `f` on a pooled connection (a new one is cloned from the primary when none is free).
    fn with_conn<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let pooled = self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match pooled {
            Some(c) => c,
            None => self
                .primary
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .try_clone()
                .map_err(query("connecting"))?,
        };
        let result = f(&conn);
        self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(conn);
        result
    }

    /// The `YYYY-MM` of the dump this dataset was built from (empty when unknown).
    pub fn source_month(&self) -> &str {
        &self.source_month
    }

    /// The label of `code` in `table`, `""` for an unknown or empty code.
    pub fn label(&self, locale: Locale, table: &str, code: &str) -> String {
        self.labels.get(&(locale, table.to_owned(), code.to_owned())).cloned().unwrap_or_default()
    }

    /// The detail record of one establishment, or of a company's head office for an 8-character query.
    pub fn detail(&self, query_: &CnpjQuery, locale: Locale) -> Result<Option<DetailRecord>, StoreError> {
        self.with_conn(|conn| Ok(self.detail_on(conn, query_, locale)?.map(|(record, _)| record)))
    }

    /// The batch record (detail plus regime and Simples fields) of one CNPJ or company.
    pub fn batch(&self, query_: &CnpjQuery, locale: Locale) -> Result<Option<BatchRecord>, StoreError> {
        self.with_conn(|conn| {
            let Some((detail, basico)) = self.detail_on(conn, query_, locale)? else { return Ok(None) };
            let mut stmt = conn.prepare_cached(REGIME).map_err(query("regime"))?;
            let (regime, simples): (String, u8) =
                stmt.query_row([&basico, &basico], |r| Ok((r.get(0)?, r.get(1)?))).map_err(query("regime"))?;
            Ok(Some(BatchRecord {
                detail,
                regime_tributario: self.label(locale, "regime_tributario", &regime),
                regime_tributario_code: regime,
                simples_nacional: simples,
                employees_count: None,
                employees_year: None,
                employees_source: None,
                faturamento_estimado: None,
            }))
        })
    }

    fn detail_on(
        &self,
        conn: &Connection,
        query_: &CnpjQuery,
        locale: Locale,
    ) -> Result<Option<(DetailRecord, String)>, StoreError> {
        let record = match query_ {
            CnpjQuery::Full(cnpj) => {
                let sql = format!("{DETAIL} WHERE e.cnpj = ?");
                let mut stmt = conn.prepare_cached(&sql).map_err(query("detail"))?;
                stmt.query_row([cnpj.as_str()], |r| self.record(r, locale)).optional()
            }
            CnpjQuery::Basico(_) => {
                let sql = format!(
                    "{DETAIL} WHERE e.cnpj_basico = ? ORDER BY (e.matriz_filial = '1') DESC, e.cnpj_ordem LIMIT 1"
                );
                let mut stmt = conn.prepare_cached(&sql).map_err(query("detail"))?;
                stmt.query_row([query_.basico()], |r| self.record(r, locale)).optional()
            }
        }
        .map_err(query("detail"))?;
        let Some((mut record, basico)) = record else { return Ok(None) };
        record.socios = self.partners(conn, std::slice::from_ref(&basico), locale)?.remove(&basico).unwrap_or_default();
        Ok(Some((record, basico)))
    }

    /// The detail records of `cnpjs` (those that exist), in the order given: two queries in all.
    fn records_on(&self, conn: &Connection, cnpjs: &[String], locale: Locale) -> Result<Vec<DetailRecord>, StoreError> {
        if cnpjs.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("{DETAIL} WHERE e.cnpj IN ({})", vec!["?"; cnpjs.len()].join(", "));
        let mut stmt = conn.prepare_cached(&sql).map_err(query("records"))?;
        let mut found: HashMap<String, (DetailRecord, String)> = stmt
            .query_map(duckdb::params_from_iter(cnpjs), |r| self.record(r, locale))
            .and_then(|rows| rows.map(|r| r.map(|(d, b)| (d.cnpj.clone(), (d, b)))).collect())
            .map_err(query("records"))?;
        let mut basicos: Vec<String> = found.values().map(|(_, b)| b.clone()).collect();
        basicos.sort();
        basicos.dedup();
        let partners = self.partners(conn, &basicos, locale)?;
        Ok(cnpjs
            .iter()
            .filter_map(|c| found.remove(c))
            .map(|(mut d, b)| {
                d.socios = partners.get(&b).cloned().unwrap_or_default();
                d
            })
            .collect())
    }

    /// One page of search results (ordered by CNPJ) and the total number of matches.
    pub fn search(
        &self,
        filters: &SearchFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<(u64, Vec<DetailRecord>), StoreError> {
        let (clause, params) = filters.sql(|name| {
            let folded = fold(name);
            self.cities.iter().filter(|(f, _)| *f == folded).map(|(_, c)| c.id.clone()).collect()
        });
        let from = format!("FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico{clause}");
        self.with_conn(|conn| {
            let total: i64 = conn
                .prepare(&format!("SELECT count(*) {from}"))
                .and_then(|mut s| s.query_row(duckdb::params_from_iter(&params), |r| r.get(0)))
                .map_err(query("search count"))?;
            let offset = page.saturating_sub(1).saturating_mul(per_page);
            if total <= 0 || offset >= total as u64 {
                return Ok((total.max(0) as u64, Vec::new()));
            }
            let sql = format!("SELECT e.cnpj {from} ORDER BY e.cnpj LIMIT {per_page} OFFSET {offset}");
            let cnpjs: Vec<String> = conn
                .prepare(&sql)
                .and_then(|mut s| {
                    s.query_map(duckdb::params_from_iter(&params), |r| r.get(0))?.collect::<Result<_, _>>()
                })
                .map_err(query("search page"))?;
            Ok((total as u64, self.records_on(conn, &cnpjs, locale)?))
        })
    }

    fn labels_of(&self, locale: Locale, table: &str) -> Vec<CodeLabel> {
        let mut list: Vec<CodeLabel> = self
            .labels
            .iter()
            .filter(|((l, t, _), _)| *l == locale && t == table)
            .map(|((_, _, code), label)| CodeLabel { code: code.clone(), description: label.clone() })
            .collect();
        list.sort_by(|a, b| a.code.cmp(&b.code));
        list
    }

    /// Reference data (spec §2.5) in `locale`.
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

    /// Cities filtered by state (exact) and term (folded substring of the name), ordered per
    /// contract §5b; one page and the total.
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

    fn record(&self, r: &Row<'_>, locale: Locale) -> duckdb::Result<(DetailRecord, String)> {
        let s = |i: usize| -> duckdb::Result<String> { r.get(i) };
        let label = |table: &str, code: &str| self.label(locale, table, code);
        let cnpj = s(0)?;
        let situacao = s(3)?;
        let natureza = s(4)?;
        let porte = s(5)?;
        let cnae = s(6)?;
        let secundarios: Vec<String> = match r.get_ref(7)?.to_owned() {
            duckdb::types::Value::List(items) => items
                .into_iter()
                .filter_map(|v| if let duckdb::types::Value::Text(t) = v { Some(t) } else { None })
                .collect(),
            _ => Vec::new(),
        };
        let municipio = s(12)?;
        let (municipio_nome, municipio_ibge) = self.municipios.get(&municipio).cloned().unwrap_or_default();
        let matriz = s(22)?;
        let motivo = s(24)?;
        let pais = s(29)?;
        let record = DetailRecord {
            id: cnpj.clone(),
            cnpj,
            razao_social: s(1)?,
            nome_fantasia: s(2)?,
            situacao_cadastral: label("situacao_cadastral", &situacao),
            situacao_cadastral_code: situacao,
            natureza_juridica: label("naturezas", &natureza),
            natureza_juridica_code: natureza,
            porte_empresa: label("porte_empresa", &porte),
            porte_empresa_code: porte,
            cnae_fiscal_descricao: label("cnaes", &cnae),
            cnae_fiscal: cnae,
            cnaes_secundarios: secundarios
                .into_iter()
                .map(|codigo| SecondaryActivity { descricao: label("cnaes", &codigo), codigo })
                .collect(),
            endereco: Address {
                logradouro: s(8)?,
                numero: s(9)?,
                complemento: s(10)?,
                bairro: s(11)?,
                municipio,
                municipio_nome,
                uf: s(13)?,
                cep: s(14)?,
                endereco_completo: s(15)?,
                municipio_ibge,
                nome_cidade_exterior: s(28)?,
                pais: label("paises", &pais),
                pais_code: pais,
            },
            contato: Contact {
                ddd: s(16)?,
                telefone: s(17)?,
                telefone_formatado: s(18)?,
                email: s(19)?,
                ddd_2: s(30)?,
                telefone_2: s(31)?,
                ddd_fax: s(32)?,
                fax: s(33)?,
            },
            socios: Vec::new(),
            data_inicio_atividades: r.get(20)?,
            capital_social: r.get(21)?,
            matriz_filial: label("matriz_filial", &matriz),
            matriz_filial_code: matriz,
            data_situacao_cadastral: r.get(23)?,
            motivo_situacao_cadastral: label("motivos", &motivo),
            motivo_situacao_cadastral_code: motivo,
            situacao_especial: s(25)?,
            data_situacao_especial: r.get(26)?,
            ente_federativo_responsavel: s(27)?,
        };
        Ok((record, s(34)?))
    }

    /// The partners of each company of `basicos`.
    fn partners(
        &self,
        conn: &Connection,
        basicos: &[String],
        locale: Locale,
    ) -> Result<HashMap<String, Vec<Partner>>, StoreError> {
        let mut by_company: HashMap<String, Vec<Partner>> = HashMap::new();
        if basicos.is_empty() {
            return Ok(by_company);
        }
        let sql = format!(
            "{SOCIOS} IN ({}) ORDER BY cnpj_basico, data_entrada NULLS LAST, nome, documento",
            vec!["?"; basicos.len()].join(", ")
        );
        let mut stmt = conn.prepare_cached(&sql).map_err(query("socios"))?;
        let rows = stmt
            .query_map(duckdb::params_from_iter(basicos), |r| {
                let s = |i: usize| -> duckdb::Result<String> { r.get(i) };
                let (qualificacao, tipo, faixa) = (s(1)?, s(2)?, s(5)?);
                let partner = Partner {
                    nome: s(0)?,
                    qualificacao_descricao: self.label(locale, "qualificacoes", &qualificacao),
                    qualificacao,
                    tipo_descricao: self.label(locale, "tipo_socio", &tipo),
                    tipo,
                    documento: s(3)?,
                    data_entrada: r.get(4)?,
                    faixa_etaria: self.label(locale, "faixa_etaria", &faixa),
                    faixa_etaria_code: faixa,
                    pais_code: s(6)?,
                    representante_legal: s(7)?,
                    nome_representante: s(8)?,
                    qualificacao_representante: s(9)?,
                };
                Ok((s(10)?, partner))
            })
            .map_err(query("socios"))?;
        for row in rows {
            let (basico, partner) = row.map_err(query("socios"))?;
            by_company.entry(basico).or_default().push(partner);
        }
        Ok(by_company)
    }
}
