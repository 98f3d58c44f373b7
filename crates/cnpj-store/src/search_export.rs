//! A search's whole result as one file (the API's export jobs, contract §15), written by DuckDB's
//! own writers: `COPY (SELECT … the search's WHERE …) TO '…'` per chunk of `CHUNK` rows (cut at
//! CNPJs read off the search index; their files then made one), the establishments the search's SQL
//! selects (`SearchFilters::sql`, the SQL the search index is proven equal to) in CNPJ order, each
//! row the search item (the API's shape, labelled in the locale from the dataset's `labels`). The
//! dataset is attached read-only to an in-memory DuckDB of the export's own (its threads, its
//! memory limit, spilling to a folder), so that an export never takes the API's connections.
//!
//! - CSV: the people's export's columns (the item flattened, `endereco.uf`, given by the caller),
//!   each cell as its `cell` writes it (a formula's first character led by `'` wherever a
//!   spreadsheet may start a cell, quoted when it holds `,`, `;`, a quote or a line break; lists as
//!   JSON); the lines made in SQL and written unquoted, CRLF.
//! - JSONL: one search item a line, as the API serves it.
//! - Parquet: the CSV's columns typed (dates as DATE, lists as lists of structs), and the company's
//!   nature and capital (DECIMAL(18, 2)), zstd.

use std::path::Path;

use cnpj_model::Locale;

use crate::backend::Dialect;
use crate::{SearchFilters, Source, Store, StoreError};

/// The file format of a search's export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Csv,
    Jsonl,
    Parquet,
}

/// What to write, where, with what.
#[derive(Clone, Debug)]
pub struct SearchExport<'a> {
    pub filters: &'a SearchFilters,
    pub format: FileFormat,
    pub locale: Locale,
    /// The CSV's columns: the search item's fields, nested ones as `endereco.uf` (the Parquet's too).
    pub columns: &'a [String],
    /// The file to write (replaced).
    pub path: &'a Path,
    /// The build the rows were counted on: another one served fails the export.
    pub build_id: &'a str,
    /// DuckDB's memory limit, in bytes (it spills past it).
    pub memory_limit: u64,
    pub threads: usize,
    /// Where DuckDB spills.
    pub spill: &'a Path,
}

/// The fields of a search item that are lists.
const LISTS: [&str; 2] = ["cnaes_secundarios", "socios"];

/// A failed export, named by what it was doing.
fn failed(context: &'static str) -> impl FnOnce(duckdb::Error) -> StoreError {
    move |e| StoreError::Query { context, error: e.to_string() }
}

/// `text` as a SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The spreadsheet's guard of `cell` (crates/cnpj-pages' export): a `'` before `= + - @ TAB CR`
/// first in the cell or after `;`, CR or LF (spaces and quotes passed over); twice, for a CR that
/// both is guarded and starts the next cell. Then the cell quoted as `cell` quotes it.
const MACROS: &str = r#"
CREATE TEMP MACRO guard_once(x) AS regexp_replace(x, '(^|[;\n\r])([ "]*)([=+\-@\t\r])', '\1\2''\3', 'g');
CREATE TEMP MACRO csv_quoted(g) AS CASE WHEN contains(g, ',') OR contains(g, ';') OR contains(g, '"')
    OR contains(g, chr(10)) OR contains(g, chr(13)) THEN '"' || replace(g, '"', '""') || '"' ELSE g END;
CREATE TEMP MACRO csv_cell(x) AS csv_quoted(guard_once(guard_once(coalesce(x, ''))));
"#;

/// The rows a chunk holds at most: each is one `COPY` (its rows sorted and its partners gathered
/// within the job's memory: 50,000 rows of CSV need more than 256 MiB), its file appended to the
/// last (Parquet: merged once all are written).
const CHUNK: u64 = 10_000;

impl Store {
    /// Writes the rows of `job.filters` to `job.path` in `job.format`, in chunks of CNPJs (their
    /// bounds read off the search index), `progress` told the rows written after each; the rows
    /// written. A DuckDB dataset only (a Postgres one is streamed by the caller).
    pub fn export_search(&self, job: &SearchExport<'_>, progress: &dyn Fn(u64)) -> Result<u64, StoreError> {
        let Source::DuckDb(db) = &self.source else {
            return Err(StoreError::Query { context: "export", error: "not a DuckDB dataset".into() });
        };
        let conn = open(db, job)?;
        let build: String = conn
            .query_row("SELECT coalesce(max(value), '') FROM metadata WHERE key = 'build_id'", [], |r| r.get(0))
            .map_err(failed("reading the metadata"))?;
        if build != job.build_id {
            return Err(StoreError::Query { context: "export", error: "another dataset is served now".into() });
        }
        let (from, params) = job.filters.sql(Dialect::DuckDb, |name| self.city_codes(name));
        let starts = self.chunk_starts(job.filters)?;
        let mut parts = Vec::new();
        let mut written = 0;
        for (i, start) in starts.iter().enumerate() {
            let range = [
                start.as_ref().map(|s| format!("e.cnpj >= {}", literal(s))),
                starts.get(i + 1).map(|end| format!("e.cnpj < {}", literal(end.as_deref().unwrap_or_default()))),
            ];
            let range: Vec<String> = range.into_iter().flatten().collect();
            let chunk_from = match (range.is_empty(), from.contains(" WHERE ")) {
                (true, _) => from.clone(),
                (false, true) => format!("{from} AND {}", range.join(" AND ")),
                (false, false) => format!("{from} WHERE {}", range.join(" AND ")),
            };
            let part = job.path.with_extension(format!("part{i}"));
            parts.push(part.clone());
            match copy(&conn, job, &chunk_from, &params, &part, i == 0) {
                Ok(rows) => written += rows,
                Err(e) => return Err(removed(&parts, e)),
            }
            progress(written);
        }
        assemble(&conn, job, &parts).map_err(|e| removed(&parts, e))?;
        Ok(written)
    }

    /// Where each chunk of the matches starts: `None` first (from the start), then the CNPJ of
    /// every `CHUNK`th match, read off the search index; one chunk without an index.
    fn chunk_starts(&self, filters: &SearchFilters) -> Result<Vec<Option<String>>, StoreError> {
        let mut starts = vec![None];
        let Some(index) = &self.search else { return Ok(starts) };
        let conditions = self.conditions(filters)?;
        let Some(matches) = index.matches(&conditions)? else { return Ok(starts) };
        let total = matches.len();
        starts.extend((1..total.div_ceil(CHUNK)).flat_map(|k| index.cnpjs(&matches, total, k * CHUNK, 1)).map(Some));
        Ok(starts)
    }
}

/// `error`, once the parts written so far are deleted.
fn removed(parts: &[std::path::PathBuf], error: StoreError) -> StoreError {
    for part in parts {
        let _ = std::fs::remove_file(part);
    }
    error
}

/// Writes one chunk, the establishments `from` selects, to `part` (a CSV's header in the first);
/// the rows written.
fn copy(
    conn: &duckdb::Connection,
    job: &SearchExport<'_>,
    from: &str,
    params: &[String],
    part: &Path,
    first: bool,
) -> Result<u64, StoreError> {
    let item = item_select(from, job.locale, job.format == FileFormat::Parquet);
    let (select, options) = match job.format {
        FileFormat::Jsonl => (
            format!("SELECT * EXCLUDE (natureza_juridica_code, natureza_juridica, capital_social) FROM ({item})"),
            "FORMAT json",
        ),
        FileFormat::Parquet => (parquet_select(&item, job.columns), "FORMAT parquet, COMPRESSION zstd"),
        FileFormat::Csv => {
            (csv_select(&item, job.columns, first), "FORMAT csv, HEADER false, QUOTE '', ESCAPE '', NEW_LINE '\r\n'")
        }
    };
    // Straight into the part file, not DuckDB's own temporary.
    let copy = format!("COPY ({select}) TO {} ({options}, USE_TMP_FILE false)", literal(&part.to_string_lossy()));
    tracing::debug!(sql = copy, "an export's chunk");
    let written = conn.execute(&copy, duckdb::params_from_iter(params)).map_err(failed("writing the export"))?;
    let header = u64::from(first && job.format == FileFormat::Csv);
    Ok((written as u64).saturating_sub(header))
}

/// The chunks' files made one, `job.path`: appended one to the other (CSV, JSON Lines), or read
/// in order into one Parquet file; the parts deleted.
fn assemble(conn: &duckdb::Connection, job: &SearchExport<'_>, parts: &[std::path::PathBuf]) -> Result<(), StoreError> {
    let io = |e: std::io::Error| StoreError::Query { context: "assembling the export", error: e.to_string() };
    if parts.len() == 1 {
        std::fs::rename(&parts[0], job.path).map_err(io)?;
        return Ok(());
    }
    if job.format == FileFormat::Parquet {
        let list: Vec<String> = parts.iter().map(|p| literal(&p.to_string_lossy())).collect();
        let sql = format!(
            "COPY (SELECT * FROM read_parquet([{}])) TO {} (FORMAT parquet, COMPRESSION zstd, USE_TMP_FILE false)",
            list.join(", "),
            literal(&job.path.to_string_lossy())
        );
        conn.execute(&sql, []).map_err(failed("merging the export's parts"))?;
    } else {
        let mut out = std::io::BufWriter::new(std::fs::File::create(job.path).map_err(io)?);
        for part in parts {
            std::io::copy(&mut std::fs::File::open(part).map_err(io)?, &mut out).map_err(io)?;
        }
        std::io::Write::flush(&mut out).map_err(io)?;
    }
    for part in parts {
        std::fs::remove_file(part).map_err(io)?;
    }
    Ok(())
}

/// An in-memory DuckDB with the dataset attached read-only as its default database, within the
/// job's threads and memory, spilling to its folder; the CSV's macros made.
fn open(db: &Path, job: &SearchExport<'_>) -> Result<duckdb::Connection, StoreError> {
    let conn = duckdb::Connection::open_in_memory().map_err(failed("opening DuckDB"))?;
    conn.execute_batch(&format!(
        "SET threads = {}; SET memory_limit = '{}KiB'; SET temp_directory = {}; SET preserve_insertion_order = true; \
         ATTACH {} AS dataset (READ_ONLY); USE dataset; {MACROS}",
        job.threads.max(1),
        (job.memory_limit >> 10).max(1 << 14),
        literal(&job.spill.to_string_lossy()),
        literal(&db.to_string_lossy()),
    ))
    .map_err(failed("opening the dataset"))?;
    Ok(conn)
}

/// A date column as the file types it (`typed`: a DATE), else as text.
fn date(column: &str, typed: bool) -> String {
    if typed { column.to_owned() } else { format!("CAST({column} AS VARCHAR)") }
}

/// The label joined as `alias` (`''` when none).
fn label(alias: &str) -> String {
    format!("coalesce({alias}.descricao, '')")
}

/// A LEFT JOIN of the locale's labels (`lab`) of `table` as `alias`, on the code `code`.
fn join_label(alias: &str, table: &str, code: &str) -> String {
    format!(" LEFT JOIN lab {alias} ON {alias}.tabela = {} AND {alias}.codigo = {code}", literal(table))
}

/// A text column, `''` for NULL.
fn s(column: &str) -> String {
    format!("coalesce({column}, '')")
}

/// The partners of the selected establishments' companies, each company's as a list of the item's
/// structs in the served order (entry date, unknown last, then name and document).
fn partners(typed: bool) -> String {
    let partner = format!(
        "{{'nome': {}, 'qualificacao': {}, 'tipo': {}, 'documento': {}, 'qualificacao_descricao': {}, \
         'tipo_descricao': {}, 'data_entrada': {}, 'faixa_etaria_code': {}, 'faixa_etaria': {}, 'pais_code': {}, \
         'representante_legal': {}, 'nome_representante': {}, 'qualificacao_representante': {}}}",
        s("p.nome"),
        s("p.qualificacao"),
        s("p.tipo"),
        s("p.documento"),
        label("lq"),
        label("lt"),
        date("p.data_entrada", typed),
        s("p.faixa_etaria"),
        label("lf"),
        s("p.pais"),
        s("p.representante_legal"),
        s("p.nome_representante"),
        s("p.qualificacao_representante"),
    );
    format!(
        "SELECT p.cnpj_basico, list({partner} ORDER BY p.data_entrada ASC NULLS LAST, p.nome ASC NULLS FIRST, \
           p.documento ASC NULLS FIRST) AS socios FROM socios p{}{}{} \
         WHERE p.cnpj_basico IN (SELECT cnpj_basico FROM sel) GROUP BY p.cnpj_basico",
        join_label("lq", "qualificacoes", "p.qualificacao"),
        join_label("lt", "tipo_socio", "p.tipo"),
        join_label("lf", "faixa_etaria", "p.faixa_etaria"),
    )
}

/// The selected establishments' secondary activities, each one's as a list of `{codigo,
/// descricao}` in its order.
const SECONDARY: &str = "SELECT x.cnpj, list({'codigo': x.code, 'descricao': coalesce(l.descricao, '')} \
    ORDER BY x.pos) AS cnaes FROM (SELECT e.cnpj, unnest(e.cnaes_secundarios) AS code, \
    generate_subscripts(e.cnaes_secundarios, 1) AS pos FROM sel e) x \
    LEFT JOIN lab l ON l.tabela = 'cnaes' AND l.codigo = x.code WHERE x.code <> '' GROUP BY x.cnpj";

/// The establishment `e`'s address (`m`: its city) and contact as the item's structs.
fn address_and_contact() -> (String, String) {
    let address = format!(
        "{{'logradouro': {}, 'numero': {}, 'complemento': {}, 'bairro': {}, 'municipio': {}, 'municipio_nome': \
         coalesce(m.name, ''), 'uf': {}, 'cep': {}, 'municipio_ibge': m.ibge, 'nome_cidade_exterior': {}, \
         'pais_code': {}, 'pais': {}}}",
        s("e.logradouro"),
        s("e.numero"),
        s("e.complemento"),
        s("e.bairro"),
        s("e.municipio"),
        s("e.uf"),
        s("e.cep"),
        s("e.nome_cidade_exterior"),
        s("e.pais"),
        label("l_pais"),
    );
    let contact = format!(
        "{{'ddd': {}, 'telefone': {}, 'email': {}, 'ddd_2': {}, 'telefone_2': {}, 'ddd_fax': {}, 'fax': {}}}",
        s("e.ddd_1"),
        s("e.telefone_1"),
        s("e.email"),
        s("e.ddd_2"),
        s("e.telefone_2"),
        s("e.ddd_fax"),
        s("e.fax"),
    );
    (address, contact)
}

/// The labels of an establishment's and its company's codes, joined.
fn label_joins() -> String {
    [
        ("l_sit", "situacao_cadastral", "e.situacao_cadastral"),
        ("l_porte", "porte_empresa", "c.porte_empresa"),
        ("l_cnae", "cnaes", "e.cnae_fiscal"),
        ("l_matriz", "matriz_filial", "e.matriz_filial"),
        ("l_motivo", "motivos", "e.motivo_situacao_cadastral"),
        ("l_pais", "paises", "e.pais"),
        ("l_nat", "naturezas", "c.natureza_juridica"),
    ]
    .iter()
    .map(|(alias, table, code)| join_label(alias, table, code))
    .collect()
}

/// A search item per establishment `from` selects, in CNPJ order: its columns named as the item's
/// fields (`endereco` and `contato` as structs, the lists as lists of structs), then the company's
/// nature and capital; dates typed when `typed`, else as text. Labels by joins on the locale's
/// (a map of them looked up per row costs the map's size in memory per row).
fn item_select(from: &str, locale: Locale, typed: bool) -> String {
    let (address, contact) = address_and_contact();
    format!(
        "WITH lab AS (SELECT tabela, codigo, descricao FROM labels WHERE locale = {locale}), \
         sel AS (SELECT e.* {from}), partners AS ({partners}), secondary AS ({SECONDARY}) \
         SELECT e.cnpj AS id, e.cnpj AS cnpj, coalesce(c.razao_social, '') AS razao_social, \
           {nome_fantasia} AS nome_fantasia, {situacao} AS situacao_cadastral, \
           {situacao_code} AS situacao_cadastral_code, {porte} AS porte_empresa, \
           coalesce(c.porte_empresa, '') AS porte_empresa_code, {cnae} AS cnae_fiscal, \
           {cnae_label} AS cnae_fiscal_descricao, coalesce(sec.cnaes, []) AS cnaes_secundarios, \
           {address} AS endereco, {contact} AS contato, coalesce(ps.socios, []) AS socios, \
           {opening} AS data_inicio_atividades, {matriz} AS matriz_filial_code, \
           {matriz_label} AS matriz_filial, {status_date} AS data_situacao_cadastral, \
           {motivo} AS motivo_situacao_cadastral_code, {motivo_label} AS motivo_situacao_cadastral, \
           {especial} AS situacao_especial, {especial_date} AS data_situacao_especial, \
           coalesce(c.ente_federativo_responsavel, '') AS ente_federativo_responsavel, \
           coalesce(c.natureza_juridica, '') AS natureza_juridica_code, {natureza} AS natureza_juridica, \
           c.capital_social AS capital_social \
         FROM sel e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico \
           LEFT JOIN municipios m ON m.code = e.municipio LEFT JOIN partners ps ON ps.cnpj_basico = e.cnpj_basico \
           LEFT JOIN secondary sec ON sec.cnpj = e.cnpj{joins} \
         ORDER BY e.cnpj",
        locale = literal(locale.code()),
        partners = partners(typed),
        joins = label_joins(),
        nome_fantasia = s("e.nome_fantasia"),
        situacao = label("l_sit"),
        situacao_code = s("e.situacao_cadastral"),
        porte = label("l_porte"),
        cnae = s("e.cnae_fiscal"),
        cnae_label = label("l_cnae"),
        opening = date("e.data_inicio_atividade", typed),
        matriz = s("e.matriz_filial"),
        matriz_label = label("l_matriz"),
        status_date = date("e.data_situacao_cadastral", typed),
        motivo = s("e.motivo_situacao_cadastral"),
        motivo_label = label("l_motivo"),
        especial = s("e.situacao_especial"),
        especial_date = date("e.data_situacao_especial", typed),
        natureza = label("l_nat"),
    )
}

/// A column of the CSV (`endereco.uf`) as an expression on the item `i`.
fn path(column: &str) -> String {
    let parts: Vec<String> = column.split('.').map(|p| format!("\"{}\"", p.replace('"', "\"\""))).collect();
    format!("i.{}", parts.join("."))
}

/// The item as the CSV's lines (the header first when `header`): each cell as the people's export
/// writes it.
fn csv_select(item: &str, columns: &[String], header: bool) -> String {
    let cells: Vec<String> = columns
        .iter()
        .map(|c| {
            let value = path(c);
            if LISTS.contains(&c.as_str()) {
                format!("csv_cell(CAST(to_json({value}) AS VARCHAR))")
            } else {
                format!("csv_cell(CAST({value} AS VARCHAR))")
            }
        })
        .collect();
    let rows =
        format!("SELECT 1 AS part, i.cnpj AS cnpj, concat_ws(',', {}) AS line FROM ({item}) i", cells.join(", "));
    if !header {
        return format!("SELECT line FROM ({rows})");
    }
    let names: Vec<String> = columns.iter().map(|c| format!("csv_cell({})", literal(c))).collect();
    format!(
        "SELECT line FROM (SELECT 0 AS part, '' AS cnpj, concat_ws(',', {}) AS line UNION ALL {rows}) ORDER BY part, cnpj",
        names.join(", ")
    )
}

/// The item as the Parquet's columns: the CSV's, typed, then the company's nature and capital.
fn parquet_select(item: &str, columns: &[String]) -> String {
    let mut out: Vec<String> = columns.iter().map(|c| format!("{} AS {}", path(c), literal_name(c))).collect();
    out.extend(["i.natureza_juridica_code", "i.natureza_juridica", "i.capital_social"].map(str::to_owned));
    format!("SELECT {} FROM ({item}) i", out.join(", "))
}

/// A column's name as a quoted identifier.
fn literal_name(column: &str) -> String {
    format!("\"{}\"", column.replace('"', "\"\""))
}
