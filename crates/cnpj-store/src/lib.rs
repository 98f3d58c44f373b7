//! Reads a built registry dataset (a DuckDB file opened read-only, or a Postgres schema): detail
//! and batch records by CNPJ, search, reference data and cities, in any locale. The CLI's `show`
//! and the API serve records through this crate. Both backends run the same queries (dialect
//! differences are confined to `search.rs` and a few casts) and build records with the same code,
//! so they answer byte for byte alike. Safe to share between threads.

mod backend;
mod search;

use std::collections::HashMap;

use cnpj_model::{
    Address, BatchRecord, City, CnpjQuery, CodeLabel, Contact, DetailRecord, Locale, Partner, ReferenceData,
    SecondaryActivity, fold,
};

pub use backend::Source;
use backend::{Backend, Dialect, TextRow};
pub use search::SearchFilters;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the dataset {dataset}: {error}")]
    Open { dataset: String, error: String },
    #[error("{dataset} is not a registry dataset (no metadata table)")]
    NotADataset { dataset: String },
    #[error("query failed ({context}): {error}")]
    Query { context: &'static str, error: String },
}

/// An open dataset with its labels and cities in memory.
pub struct Store {
    backend: Backend,
    labels: HashMap<(Locale, String, String), String>,
    municipios: HashMap<String, (String, Option<String>)>,
    /// Cities in the order of contract §5b, with their folded names.
    cities: Vec<(String, City)>,
    source_month: String,
    /// When the dataset was published (Postgres; empty for a DuckDB file): a swap changes it.
    published_at: String,
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

const DETAIL: &str = "
SELECT e.cnpj, coalesce(c.razao_social, ''), e.nome_fantasia, e.situacao_cadastral,
       coalesce(c.natureza_juridica, ''), coalesce(c.porte_empresa, ''), e.cnae_fiscal,
       array_to_string(e.cnaes_secundarios, ','), e.logradouro, e.numero, e.complemento, e.bairro, e.municipio,
       e.uf, e.cep, e.endereco_completo, e.ddd_1, e.telefone_1, e.telefone_formatado, e.email,
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
       CASE WHEN s.opcao_simples = 'S' THEN '1' ELSE '0' END
FROM (SELECT 1) AS one LEFT JOIN simples s ON s.cnpj_basico = $1";

/// Column `i` of a text row (`""` for NULL).
fn text(row: &TextRow, i: usize) -> String {
    row.get(i).cloned().flatten().unwrap_or_default()
}

fn opt(row: &TextRow, i: usize) -> Option<String> {
    row.get(i).cloned().flatten()
}

impl Store {
    pub fn open(source: &Source) -> Result<Store, StoreError> {
        let backend = Backend::open(source)?;
        let metadata = backend
            .rows("metadata", "SELECT key, value FROM metadata", &[])
            .map_err(|_| StoreError::NotADataset { dataset: source.to_string() })?;
        let meta = |key: &str| metadata.iter().find(|r| text(r, 0) == key).map(|r| text(r, 1)).unwrap_or_default();
        let (source_month, published_at) = (meta("source_month"), meta("published_at"));
        let mut labels = HashMap::new();
        for row in backend.rows("labels", "SELECT locale, tabela, codigo, descricao FROM labels", &[])? {
            if let Ok(locale) = text(&row, 0).parse::<Locale>() {
                labels.insert((locale, text(&row, 1), text(&row, 2)), text(&row, 3));
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
        Ok(Store { backend, labels, municipios, cities, source_month, published_at })
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

    /// The label of `code` in `table`, `""` for an unknown or empty code.
    pub fn label(&self, locale: Locale, table: &str, code: &str) -> String {
        self.labels.get(&(locale, table.to_owned(), code.to_owned())).cloned().unwrap_or_default()
    }

    /// The detail record of one establishment, or of a company's head office for an 8-character query.
    pub fn detail(&self, query_: &CnpjQuery, locale: Locale) -> Result<Option<DetailRecord>, StoreError> {
        Ok(self.detail_of(query_, locale)?.map(|(record, _)| record))
    }

    /// The batch record (detail plus regime and Simples fields) of one CNPJ or company.
    pub fn batch(&self, query_: &CnpjQuery, locale: Locale) -> Result<Option<BatchRecord>, StoreError> {
        let Some((detail, basico)) = self.detail_of(query_, locale)? else { return Ok(None) };
        let rows = self.backend.rows("regime", REGIME, &[basico])?;
        let row = rows.first().cloned().unwrap_or_default();
        let regime = text(&row, 0);
        Ok(Some(BatchRecord {
            detail,
            regime_tributario: self.label(locale, "regime_tributario", &regime),
            regime_tributario_code: regime,
            simples_nacional: u8::from(text(&row, 1) == "1"),
            employees_count: None,
            employees_year: None,
            employees_source: None,
            faturamento_estimado: None,
        }))
    }

    fn detail_of(&self, query_: &CnpjQuery, locale: Locale) -> Result<Option<(DetailRecord, String)>, StoreError> {
        let rows = match query_ {
            CnpjQuery::Full(cnpj) => {
                self.backend.rows("detail", &format!("{DETAIL} WHERE e.cnpj = $1"), &[cnpj.as_str().to_owned()])?
            }
            CnpjQuery::Basico(_) => self.backend.rows(
                "detail",
                &format!(
                    "{DETAIL} WHERE e.cnpj_basico = $1 ORDER BY (e.matriz_filial = '1') DESC, e.cnpj_ordem LIMIT 1"
                ),
                &[query_.basico().to_owned()],
            )?,
        };
        let Some(row) = rows.first() else { return Ok(None) };
        let (mut record, basico) = self.record(row, locale);
        record.socios = self.partners(std::slice::from_ref(&basico), locale)?.remove(&basico).unwrap_or_default();
        Ok(Some((record, basico)))
    }

    /// The detail records of `cnpjs` (those that exist), in the order given: two queries in all.
    fn records(&self, cnpjs: &[String], locale: Locale) -> Result<Vec<DetailRecord>, StoreError> {
        if cnpjs.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("{DETAIL} WHERE e.cnpj IN ({})", placeholders(0, cnpjs.len()));
        let mut found: HashMap<String, (DetailRecord, String)> = self
            .backend
            .rows("records", &sql, cnpjs)?
            .iter()
            .map(|r| {
                let (d, b) = self.record(r, locale);
                (d.cnpj.clone(), (d, b))
            })
            .collect();
        let mut basicos: Vec<String> = found.values().map(|(_, b)| b.clone()).collect();
        basicos.sort();
        basicos.dedup();
        let partners = self.partners(&basicos, locale)?;
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
        let (clause, params) = filters.sql(self.backend.dialect(), |name| {
            let folded = fold(name);
            self.cities.iter().filter(|(f, _)| *f == folded).map(|(_, c)| c.id.clone()).collect()
        });
        let from = format!("FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico{clause}");
        let count = self.backend.rows("search count", &format!("SELECT CAST(count(*) AS VARCHAR) {from}"), &params)?;
        let total: u64 = count.first().map(|r| text(r, 0)).unwrap_or_default().parse().unwrap_or(0);
        let offset = page.saturating_sub(1).saturating_mul(per_page);
        if offset >= total {
            return Ok((total, Vec::new()));
        }
        let sql = format!("SELECT e.cnpj {from} ORDER BY e.cnpj LIMIT {per_page} OFFSET {offset}");
        let cnpjs: Vec<String> = self.backend.rows("search page", &sql, &params)?.iter().map(|r| text(r, 0)).collect();
        Ok((total, self.records(&cnpjs, locale)?))
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

    fn record(&self, r: &TextRow, locale: Locale) -> (DetailRecord, String) {
        let s = |i: usize| text(r, i);
        let label = |table: &str, code: &str| self.label(locale, table, code);
        let cnpj = s(0);
        let situacao = s(3);
        let natureza = s(4);
        let porte = s(5);
        let cnae = s(6);
        let secundarios = s(7);
        let municipio = s(12);
        let (municipio_nome, municipio_ibge) = self.municipios.get(&municipio).cloned().unwrap_or_default();
        let matriz = s(22);
        let motivo = s(24);
        let pais = s(29);
        let record = DetailRecord {
            id: cnpj.clone(),
            cnpj,
            razao_social: s(1),
            nome_fantasia: s(2),
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
                logradouro: s(8),
                numero: s(9),
                complemento: s(10),
                bairro: s(11),
                municipio,
                municipio_nome,
                uf: s(13),
                cep: s(14),
                endereco_completo: s(15),
                municipio_ibge,
                nome_cidade_exterior: s(28),
                pais: label("paises", &pais),
                pais_code: pais,
            },
            contato: Contact {
                ddd: s(16),
                telefone: s(17),
                telefone_formatado: s(18),
                email: s(19),
                ddd_2: s(30),
                telefone_2: s(31),
                ddd_fax: s(32),
                fax: s(33),
            },
            socios: Vec::new(),
            data_inicio_atividades: opt(r, 20),
            capital_social: opt(r, 21),
            matriz_filial: label("matriz_filial", &matriz),
            matriz_filial_code: matriz,
            data_situacao_cadastral: opt(r, 23),
            motivo_situacao_cadastral: label("motivos", &motivo),
            motivo_situacao_cadastral_code: motivo,
            situacao_especial: s(25),
            data_situacao_especial: opt(r, 26),
            ente_federativo_responsavel: s(27),
        };
        (record, s(34))
    }

    /// The partners of each company of `basicos`.
    fn partners(&self, basicos: &[String], locale: Locale) -> Result<HashMap<String, Vec<Partner>>, StoreError> {
        let mut by_company: HashMap<String, Vec<Partner>> = HashMap::new();
        if basicos.is_empty() {
            return Ok(by_company);
        }
        let sql = format!(
            "{SOCIOS} IN ({}) ORDER BY cnpj_basico, data_entrada NULLS LAST, nome, documento",
            placeholders(0, basicos.len())
        );
        for r in self.backend.rows("socios", &sql, basicos)? {
            let s = |i: usize| text(&r, i);
            let (qualificacao, tipo, faixa) = (s(1), s(2), s(5));
            let partner = Partner {
                nome: s(0),
                qualificacao_descricao: self.label(locale, "qualificacoes", &qualificacao),
                qualificacao,
                tipo_descricao: self.label(locale, "tipo_socio", &tipo),
                tipo,
                documento: s(3),
                data_entrada: opt(&r, 4),
                faixa_etaria: self.label(locale, "faixa_etaria", &faixa),
                faixa_etaria_code: faixa,
                pais_code: s(6),
                representante_legal: s(7),
                nome_representante: s(8),
                qualificacao_representante: s(9),
            };
            by_company.entry(s(10)).or_default().push(partner);
        }
        Ok(by_company)
    }
}
