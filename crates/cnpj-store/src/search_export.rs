//! A search's whole result, for the API's export jobs (contract §15): [`Store::each_match`] hands
//! every match, in CNPJ order, as records a chunk at a time: off the search index (the matches
//! reckoned once) and the lookup file (read in key order, each block inflated once however many
//! of the rows it holds); else by SQL, in pages cut after the last CNPJ read. The caller writes
//! CSV and JSON Lines from the records; a [`ParquetWriter`] writes them as typed Parquet, a row
//! group at a time.
//!
//! The first version built each row in SQL (labels joined, partners and secondary activities
//! gathered as ordered lists, the CSV's guard as regular expressions) and wrote 20,650 rows a
//! second at 1.0 (BENCHMARKS.md, "Partners and analysts' filters at 1.0").

use cnpj_index::{Matches, Reader, SearchIndex};
use cnpj_model::{DetailRecord, Locale};

use crate::{Key, SearchFilters, Store, StoreError, text};

/// The records handed at once at most.
const CHUNK: usize = 1_000;

/// Threads that read the records of a search off the index and the lookup file.
const READERS: usize = 2;

impl Store {
    /// Hands every establishment `filters` match to `each` as records in `locale`, in CNPJ order,
    /// a chunk at a time; the records handed. `each`'s error stops the walk and is returned.
    pub fn each_match(
        &self,
        filters: &SearchFilters,
        locale: Locale,
        each: &mut dyn FnMut(Vec<DetailRecord>) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        if let Some(index) = &self.search {
            let conditions = self.conditions(filters)?;
            if let Some(matches) = index.matches(&conditions)? {
                return self.each_indexed(index, &matches, locale, each);
            }
        }
        self.each_by_sql(filters, locale, each)
    }

    /// [`Store::each_match`] off the search index's matches: the chunks read by [`READERS`]
    /// threads in turn (chunk `k` by thread `k % READERS`, each with its own lookup reader), and
    /// handed to `each` in order on this thread. Reading a row (its blocks inflated, its record
    /// labelled) costs about twice what writing it does.
    fn each_indexed(
        &self,
        index: &SearchIndex,
        matches: &Matches,
        locale: Locale,
        each: &mut dyn FnMut(Vec<DetailRecord>) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        let ordinals = matches.ordinals();
        let chunks = ordinals.len().div_ceil(CHUNK as u64);
        std::thread::scope(|scope| {
            let mut queues = Vec::with_capacity(READERS);
            for reader in 0..READERS {
                let (queue, chunks_read) = std::sync::mpsc::sync_channel(2);
                queues.push(chunks_read);
                let ordinals = &ordinals;
                scope.spawn(move || {
                    let mut lookup = self.lookup.as_ref().map(|lookup| lookup.reader());
                    for k in (reader as u64..chunks).step_by(READERS) {
                        let Some(first) = u32::try_from(k * CHUNK as u64).ok().and_then(|r| ordinals.select(r)) else {
                            return;
                        };
                        let cnpjs: Vec<String> =
                            ordinals.range(first..).take(CHUNK).map(|o| index.cnpj_of(o)).collect();
                        let records = self.records_in_order(lookup.as_mut(), &cnpjs, locale);
                        if queue.send(records).is_err() {
                            return;
                        }
                    }
                });
            }
            let mut handed = 0;
            for k in 0..chunks {
                let records = queues[k as usize % READERS].recv().map_err(|_| StoreError::Query {
                    context: "export",
                    error: "a reader of the rows stopped".into(),
                })??;
                handed += records.len() as u64;
                each(records)?;
            }
            Ok(handed)
        })
    }

    /// [`Store::each_match`] by SQL: pages of the search's CNPJs, each after the last one read.
    fn each_by_sql(
        &self,
        filters: &SearchFilters,
        locale: Locale,
        each: &mut dyn FnMut(Vec<DetailRecord>) -> Result<(), StoreError>,
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
                each(records)?;
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

/// The fields of the structs of a search item's lists, in their order.
const SECONDARY: [&str; 2] = ["codigo", "descricao"];
const PARTNERS: [&str; 13] = [
    "nome",
    "qualificacao",
    "tipo",
    "documento",
    "qualificacao_descricao",
    "tipo_descricao",
    "data_entrada",
    "faixa_etaria_code",
    "faixa_etaria",
    "pais_code",
    "representante_legal",
    "nome_representante",
    "qualificacao_representante",
];

/// The company's fields the Parquet file adds to the CSV's columns.
const COMPANY: [&str; 3] = ["natureza_juridica_code", "natureza_juridica", "capital_social"];

/// Rows of a row group: what the writer holds before it writes (a few tens of MB).
const ROW_GROUP: usize = 50_000;

/// A column's type in the Parquet file.
#[derive(Clone, Debug)]
enum Kind {
    Text,
    /// `YYYY-MM-DD`.
    Date,
    /// DECIMAL(18, 2).
    Amount,
    /// A list of structs of these fields.
    List(Vec<(String, Kind)>),
}

impl Kind {
    /// The type of the field or column `name` (its last part: `endereco.uf` is `uf`).
    fn of(name: &str) -> Kind {
        let fields = |names: &[&str]| names.iter().map(|n| (n.to_string(), Kind::of(n))).collect();
        match name.rsplit('.').next().unwrap_or(name) {
            "cnaes_secundarios" => Kind::List(fields(&SECONDARY)),
            "socios" => Kind::List(fields(&PARTNERS)),
            "capital_social" => Kind::Amount,
            last if last.starts_with("data_") => Kind::Date,
            _ => Kind::Text,
        }
    }

    fn data_type(&self) -> arrow::datatypes::DataType {
        use arrow::datatypes::DataType;
        match self {
            Kind::Text => DataType::Utf8,
            Kind::Date => DataType::Date32,
            Kind::Amount => DataType::Decimal128(18, 2),
            Kind::List(fields) => DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new(
                "element",
                DataType::Struct(Kind::fields(fields)),
                true,
            ))),
        }
    }

    /// A list's struct fields (its item is named `element`, as DuckDB names it).
    fn fields(fields: &[(String, Kind)]) -> arrow::datatypes::Fields {
        fields.iter().map(|(n, k)| arrow::datatypes::Field::new(n, k.data_type(), true)).collect()
    }

    /// The column of `values` (a search item's, `None` when absent), in this type.
    fn array(&self, values: &[Option<&serde_json::Value>]) -> Result<arrow::array::ArrayRef, arrow::error::ArrowError> {
        use arrow::array::{Array, ArrayRef, ListArray, StringArray, StructArray};
        use serde_json::Value;
        let text = |v: &Option<&Value>| match v {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        };
        match self {
            Kind::Text => Ok(std::sync::Arc::new(values.iter().map(text).collect::<StringArray>())),
            Kind::Date | Kind::Amount => {
                let texts: ArrayRef = std::sync::Arc::new(values.iter().map(text).collect::<StringArray>());
                arrow::compute::cast(&texts, &self.data_type())
            }
            Kind::List(fields) => {
                let mut offsets = vec![0i32];
                let mut elements = Vec::new();
                for value in values {
                    if let Some(Value::Array(list)) = value {
                        elements.extend(list);
                    }
                    offsets.push(elements.len() as i32);
                }
                let mut children = Vec::with_capacity(fields.len());
                for (name, kind) in fields {
                    let of: Vec<Option<&Value>> = elements.iter().map(|e| e.get(name)).collect();
                    children.push(kind.array(&of)?);
                }
                let structs = StructArray::try_new(Kind::fields(fields), children, None)?;
                let item =
                    std::sync::Arc::new(arrow::datatypes::Field::new("element", structs.data_type().clone(), true));
                let offsets = arrow::buffer::OffsetBuffer::new(offsets.into());
                Ok(std::sync::Arc::new(ListArray::try_new(item, offsets, std::sync::Arc::new(structs), None)?))
            }
        }
    }
}

/// An export's Parquet file, written as records come (arrow-rs' writer, a row group at a time:
/// memory bounded by [`ROW_GROUP`] rows, whatever the export's size): the CSV's columns typed
/// (dates as DATE, the lists as lists of structs, the partners' entry date a DATE), then the
/// company's nature and capital (DECIMAL(18, 2)), zstd. DuckDB's own writer was tried first: it
/// needs the rows in a table, and appending them there (compressed as DuckDB stores a table)
/// took three times the job's reading, where arrow-rs' writer takes a fraction of it
/// (BENCHMARKS.md, "Export jobs at 1.0").
pub struct ParquetWriter<W: std::io::Write + Send> {
    /// Each column's name, JSON pointer into a search item (`None`: the company's field) and type.
    columns: Vec<(String, Option<String>, Kind)>,
    schema: arrow::datatypes::SchemaRef,
    writer: parquet::arrow::ArrowWriter<W>,
}

fn parquet_failed(error: impl std::fmt::Display) -> StoreError {
    StoreError::Query { context: "writing the Parquet file", error: error.to_string() }
}

impl<W: std::io::Write + Send> ParquetWriter<W> {
    /// A writer to `out` with the CSV's `columns` (the search item's fields, nested ones as
    /// `endereco.uf`).
    pub fn create(out: W, columns: &[String]) -> Result<ParquetWriter<W>, StoreError> {
        let mut all: Vec<(String, Option<String>, Kind)> =
            columns.iter().map(|c| (c.clone(), Some(format!("/{}", c.replace('.', "/"))), Kind::of(c))).collect();
        all.extend(COMPANY.map(|c| (c.to_owned(), None, Kind::of(c))));
        let fields: Vec<arrow::datatypes::Field> =
            all.iter().map(|(name, _, kind)| arrow::datatypes::Field::new(name, kind.data_type(), true)).collect();
        let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(fields));
        let properties = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(parquet::basic::ZstdLevel::default()))
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .build();
        let writer = parquet::arrow::ArrowWriter::try_new(out, std::sync::Arc::clone(&schema), Some(properties))
            .map_err(parquet_failed)?;
        Ok(ParquetWriter { columns: all, schema, writer })
    }

    /// Appends `records` (in the file's order).
    pub fn append(&mut self, records: &[DetailRecord]) -> Result<(), StoreError> {
        let items: Vec<serde_json::Value> = records.iter().map(DetailRecord::search_item).collect();
        let company: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "natureza_juridica_code": r.natureza_juridica_code,
                    "natureza_juridica": r.natureza_juridica,
                    "capital_social": r.capital_social,
                })
            })
            .collect();
        let mut arrays = Vec::with_capacity(self.columns.len());
        for (name, pointer, kind) in &self.columns {
            let values: Vec<Option<&serde_json::Value>> = match pointer {
                Some(pointer) => items.iter().map(|i| i.pointer(pointer)).collect(),
                None => company.iter().map(|c| c.get(name)).collect(),
            };
            arrays.push(kind.array(&values).map_err(parquet_failed)?);
        }
        let batch = arrow::record_batch::RecordBatch::try_new(std::sync::Arc::clone(&self.schema), arrays)
            .map_err(parquet_failed)?;
        self.writer.write(&batch).map_err(parquet_failed)
    }

    /// Writes the file's last row group and footer, and flushes the output; the rows written.
    pub fn finish(mut self) -> Result<u64, StoreError> {
        let metadata = self.writer.finish().map_err(parquet_failed)?;
        self.writer.inner_mut().flush().map_err(parquet_failed)?;
        Ok(metadata.file_metadata().num_rows() as u64)
    }
}
