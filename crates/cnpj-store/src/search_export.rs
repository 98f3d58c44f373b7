//! A search's whole result, for the API's export jobs (contract §15): [`Store::each_match`] hands
//! every match, in CNPJ order, as records a chunk at a time: off the search index (the matches
//! reckoned once) and the lookup file (read in key order, each block inflated once however many
//! of the rows it holds); else by SQL, in pages cut after the last CNPJ read. The caller writes
//! CSV and JSON Lines from the records; [`parquet_of_records`] turns a JSON Lines file of records
//! into the typed Parquet file with DuckDB's own writer, in an in-memory DuckDB of the job's own
//! (its threads, its memory limit, spilling to a folder), so that an export never takes the API's
//! connections.
//!
//! The first version built each row in SQL (labels joined, partners and secondary activities
//! gathered as ordered lists, the CSV's guard as regular expressions) and wrote 20,650 rows a
//! second at 1.0 (BENCHMARKS.md, "Partners and analysts' filters at 1.0").

use std::path::Path;

use cnpj_index::{Matches, Reader, SearchIndex};
use cnpj_model::{DetailRecord, Locale};

use crate::{Key, SearchFilters, Store, StoreError, text};

/// The records handed at once at most.
const CHUNK: usize = 1_000;

impl Store {
    /// Hands every establishment `filters` match to `each` as records in `locale`, in CNPJ order,
    /// a chunk at a time; the records handed. `each`'s error stops the walk and is returned.
    pub fn each_match(
        &self,
        filters: &SearchFilters,
        locale: Locale,
        each: &mut dyn FnMut(&[DetailRecord]) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        if let Some(index) = &self.search {
            let conditions = self.conditions(filters)?;
            if let Some(matches) = index.matches(&conditions)? {
                return self.each_indexed(index, &matches, locale, each);
            }
        }
        self.each_by_sql(filters, locale, each)
    }

    /// [`Store::each_match`] off the search index's matches.
    fn each_indexed(
        &self,
        index: &SearchIndex,
        matches: &Matches,
        locale: Locale,
        each: &mut dyn FnMut(&[DetailRecord]) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        let ordinals = matches.ordinals();
        let mut ordinals = ordinals.iter();
        let mut reader = self.lookup.as_ref().map(|lookup| lookup.reader());
        let mut handed = 0;
        loop {
            let cnpjs: Vec<String> = ordinals.by_ref().take(CHUNK).map(|o| index.cnpj_of(o)).collect();
            if cnpjs.is_empty() {
                return Ok(handed);
            }
            let records = self.records_in_order(reader.as_mut(), &cnpjs, locale)?;
            handed += records.len() as u64;
            each(&records)?;
        }
    }

    /// [`Store::each_match`] by SQL: pages of the search's CNPJs, each after the last one read.
    fn each_by_sql(
        &self,
        filters: &SearchFilters,
        locale: Locale,
        each: &mut dyn FnMut(&[DetailRecord]) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        let (from, params) = filters.sql(self.backend.dialect(), |name| self.city_codes(name));
        let mut reader = self.lookup.as_ref().map(|lookup| lookup.reader());
        let mut after: Option<String> = None;
        let mut handed = 0;
        loop {
            let mut params = params.clone();
            let cut = match after.take() {
                Some(cnpj) => {
                    params.push(cnpj);
                    format!(" WHERE cnpj > ${}", params.len())
                }
                None => String::new(),
            };
            let sql = format!("SELECT cnpj FROM (SELECT e.cnpj {from}) s{cut} ORDER BY cnpj LIMIT {CHUNK}");
            let cnpjs: Vec<String> =
                self.backend.rows("export page", &sql, &params)?.iter().map(|r| text(r, 0)).collect();
            let records = self.records_in_order(reader.as_mut(), &cnpjs, locale)?;
            handed += records.len() as u64;
            if !records.is_empty() {
                each(&records)?;
            }
            if cnpjs.len() < CHUNK {
                return Ok(handed);
            }
            after = cnpjs.last().cloned();
        }
    }

    /// The records of `cnpjs` (in order), from the lookup file by `reader` when there is one.
    fn records_in_order(
        &self,
        reader: Option<&mut Reader<'_>>,
        cnpjs: &[String],
        locale: Locale,
    ) -> Result<Vec<DetailRecord>, StoreError> {
        let Some(reader) = reader else { return self.records(cnpjs, locale) };
        let mut records = Vec::with_capacity(cnpjs.len());
        for cnpj in cnpjs {
            if let Some(found) = Self::find_in(reader, Key::Cnpj(cnpj), false)? {
                records.push(self.record(&found, locale));
            }
        }
        Ok(records)
    }
}

/// What DuckDB needs to write an export's Parquet file.
#[derive(Clone, Debug)]
pub struct ParquetJob<'a> {
    /// JSON Lines, a [`DetailRecord`] a line, in the file's order.
    pub records: &'a Path,
    /// The CSV's columns (the search item's fields, nested ones as `endereco.uf`).
    pub columns: &'a [String],
    /// The file to write (replaced).
    pub path: &'a Path,
    /// DuckDB's memory limit, in bytes (it spills past it).
    pub memory_limit: u64,
    pub threads: usize,
    /// Where DuckDB spills.
    pub spill: &'a Path,
}

/// A record's fields as DuckDB reads them from JSON: the served ones typed (dates as DATE, the
/// capital as DECIMAL(18, 2), lists of structs); the fields a search item leaves out (the
/// formatted address and phone) are not read.
const RECORD_COLUMNS: &str = "{id: 'VARCHAR', cnpj: 'VARCHAR', razao_social: 'VARCHAR', nome_fantasia: 'VARCHAR', \
    situacao_cadastral: 'VARCHAR', situacao_cadastral_code: 'VARCHAR', natureza_juridica: 'VARCHAR', \
    natureza_juridica_code: 'VARCHAR', porte_empresa: 'VARCHAR', porte_empresa_code: 'VARCHAR', \
    cnae_fiscal: 'VARCHAR', cnae_fiscal_descricao: 'VARCHAR', \
    cnaes_secundarios: 'STRUCT(codigo VARCHAR, descricao VARCHAR)[]', \
    endereco: 'STRUCT(logradouro VARCHAR, numero VARCHAR, complemento VARCHAR, bairro VARCHAR, municipio VARCHAR, \
      municipio_nome VARCHAR, uf VARCHAR, cep VARCHAR, municipio_ibge VARCHAR, nome_cidade_exterior VARCHAR, \
      pais_code VARCHAR, pais VARCHAR)', \
    contato: 'STRUCT(ddd VARCHAR, telefone VARCHAR, email VARCHAR, ddd_2 VARCHAR, telefone_2 VARCHAR, \
      ddd_fax VARCHAR, fax VARCHAR)', \
    socios: 'STRUCT(nome VARCHAR, qualificacao VARCHAR, tipo VARCHAR, documento VARCHAR, \
      qualificacao_descricao VARCHAR, tipo_descricao VARCHAR, data_entrada DATE, faixa_etaria_code VARCHAR, \
      faixa_etaria VARCHAR, pais_code VARCHAR, representante_legal VARCHAR, nome_representante VARCHAR, \
      qualificacao_representante VARCHAR)[]', \
    data_inicio_atividades: 'DATE', capital_social: 'DECIMAL(18, 2)', matriz_filial_code: 'VARCHAR', \
    matriz_filial: 'VARCHAR', data_situacao_cadastral: 'DATE', motivo_situacao_cadastral_code: 'VARCHAR', \
    motivo_situacao_cadastral: 'VARCHAR', situacao_especial: 'VARCHAR', data_situacao_especial: 'DATE', \
    ente_federativo_responsavel: 'VARCHAR'}";

/// Writes `job.records` to `job.path` as Parquet (zstd): the CSV's columns, typed, then the
/// company's nature and capital; the rows written.
pub fn parquet_of_records(job: &ParquetJob<'_>) -> Result<u64, StoreError> {
    let failed = |context: &'static str| move |e: duckdb::Error| StoreError::Query { context, error: e.to_string() };
    let conn = duckdb::Connection::open_in_memory().map_err(failed("opening DuckDB"))?;
    conn.execute_batch(&format!(
        "SET threads = {}; SET memory_limit = '{}KiB'; SET temp_directory = {}; SET preserve_insertion_order = true;",
        job.threads.max(1),
        (job.memory_limit >> 10).max(1 << 14),
        literal(&job.spill.to_string_lossy()),
    ))
    .map_err(failed("opening DuckDB"))?;
    let mut out: Vec<String> = job.columns.iter().map(|c| format!("{} AS {}", path(c), name(c))).collect();
    out.extend(["r.natureza_juridica_code", "r.natureza_juridica", "r.capital_social"].map(str::to_owned));
    let copy = format!(
        "COPY (SELECT {} FROM read_json({}, format = 'newline_delimited', columns = {RECORD_COLUMNS}) r) \
         TO {} (FORMAT parquet, COMPRESSION zstd, USE_TMP_FILE false)",
        out.join(", "),
        literal(&job.records.to_string_lossy()),
        literal(&job.path.to_string_lossy()),
    );
    let written = conn.execute(&copy, []).map_err(failed("writing the Parquet file"))?;
    Ok(written as u64)
}

/// `text` as a SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A column of the CSV (`endereco.uf`) as an expression on the record `r`.
fn path(column: &str) -> String {
    let parts: Vec<String> = column.split('.').map(name).collect();
    format!("r.{}", parts.join("."))
}

/// A name as a quoted identifier.
fn name(column: &str) -> String {
    format!("\"{}\"", column.replace('"', "\"\""))
}
