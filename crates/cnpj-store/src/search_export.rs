//! A search's whole result, for the API's export jobs (contract §15): [`Store::each_match`] hands
//! every match, in CNPJ order, a chunk at a time, rendered by the caller's function on the
//! threads that read them: off the search index (the matches reckoned once) and the lookup file
//! (read in key order, each block inflated once however many of the rows it holds); else by SQL,
//! in pages cut after the last CNPJ read. The caller renders CSV and JSON Lines from the records;
//! [`ParquetColumns`] makes them typed Arrow batches, which a [`ParquetWriter`] writes, a row
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
    /// Hands every establishment `filters` match to `each`, in CNPJ order, a chunk at a time:
    /// the chunk's records in `locale` made into what `render` makes of them (a file's bytes, a
    /// Parquet row group's batch) on the threads that read them, and handed with the chunk's
    /// rows; the rows handed. `each`'s error stops the walk and is returned.
    pub fn each_match<T: Send>(
        &self,
        filters: &SearchFilters,
        locale: Locale,
        render: &(dyn Fn(&[DetailRecord]) -> Result<T, StoreError> + Sync),
        each: &mut dyn FnMut(usize, T) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        if let Some(index) = &self.search {
            let conditions = self.conditions(filters)?;
            if let Some(matches) = index.matches(&conditions)? {
                return self.each_indexed(index, &matches, locale, render, each);
            }
        }
        self.each_by_sql(filters, locale, render, each)
    }

    /// [`Store::each_match`] off the search index's matches: the chunks read and rendered by
    /// [`READERS`] threads in turn (chunk `k` by thread `k % READERS`, each with its own lookup
    /// reader), and handed to `each` in order on this thread. Reading a row (its blocks
    /// inflated, its record labelled) and rendering it cost several times what writing it does,
    /// so the caller's thread is left only the writing (BENCHMARKS.md, "Export jobs at 1.0,
    /// third pass").
    fn each_indexed<T: Send>(
        &self,
        index: &SearchIndex,
        matches: &Matches,
        locale: Locale,
        render: &(dyn Fn(&[DetailRecord]) -> Result<T, StoreError> + Sync),
        each: &mut dyn FnMut(usize, T) -> Result<(), StoreError>,
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
                        let rendered = self
                            .records_in_order(lookup.as_mut(), &cnpjs, locale)
                            .and_then(|records| Ok((records.len(), render(&records)?)));
                        if queue.send(rendered).is_err() {
                            return;
                        }
                    }
                });
            }
            let mut handed = 0;
            for k in 0..chunks {
                let (rows, rendered) = queues[k as usize % READERS].recv().map_err(|_| StoreError::Query {
                    context: "export",
                    error: "a reader of the rows stopped".into(),
                })??;
                handed += rows as u64;
                each(rows, rendered)?;
            }
            Ok(handed)
        })
    }

    /// [`Store::each_match`] by SQL: pages of the search's CNPJs, each after the last one read.
    fn each_by_sql<T>(
        &self,
        filters: &SearchFilters,
        locale: Locale,
        render: &(dyn Fn(&[DetailRecord]) -> Result<T, StoreError> + Sync),
        each: &mut dyn FnMut(usize, T) -> Result<(), StoreError>,
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
                each(records.len(), render(&records)?)?;
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

/// An export's Parquet columns: the CSV's columns typed (dates as DATE, the lists as lists of
/// structs, the partners' entry date a DATE), then the company's nature and capital
/// (DECIMAL(18, 2)). [`ParquetColumns::batch`] makes records into a batch of them on any thread
/// (an export's readers'), a [`ParquetWriter`] writes the batches.
pub struct ParquetColumns {
    /// Each column's name, JSON pointer into a search item (`None`: the company's field) and type.
    columns: Vec<(String, Option<String>, Kind)>,
    schema: arrow::datatypes::SchemaRef,
}

fn parquet_failed(error: impl std::fmt::Display) -> StoreError {
    StoreError::Query { context: "writing the Parquet file", error: error.to_string() }
}

impl ParquetColumns {
    /// The columns of the CSV's `columns` (the search item's fields, nested ones as
    /// `endereco.uf`), and the company's.
    pub fn new(columns: &[String]) -> ParquetColumns {
        let mut all: Vec<(String, Option<String>, Kind)> =
            columns.iter().map(|c| (c.clone(), Some(format!("/{}", c.replace('.', "/"))), Kind::of(c))).collect();
        all.extend(COMPANY.map(|c| (c.to_owned(), None, Kind::of(c))));
        let fields: Vec<arrow::datatypes::Field> =
            all.iter().map(|(name, _, kind)| arrow::datatypes::Field::new(name, kind.data_type(), true)).collect();
        ParquetColumns { columns: all, schema: std::sync::Arc::new(arrow::datatypes::Schema::new(fields)) }
    }

    /// `records` as a batch of these columns.
    pub fn batch(&self, records: &[DetailRecord]) -> Result<arrow::record_batch::RecordBatch, StoreError> {
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
        arrow::record_batch::RecordBatch::try_new(std::sync::Arc::clone(&self.schema), arrays).map_err(parquet_failed)
    }
}

/// An export's Parquet file, written a batch at a time (arrow-rs' writer, a row group of
/// [`ROW_GROUP`] rows at a time: memory bounded whatever the export's size), zstd. DuckDB's own
/// writer was tried first: it needs the rows in a table, and appending them there (compressed as
/// DuckDB stores a table) took three times the job's reading, where arrow-rs' writer takes a
/// fraction of it (BENCHMARKS.md, "Export jobs at 1.0").
pub struct ParquetWriter<W: std::io::Write + Send> {
    writer: parquet::arrow::ArrowWriter<W>,
}

impl<W: std::io::Write + Send> ParquetWriter<W> {
    /// A writer of `columns` to `out`.
    pub fn create(out: W, columns: &ParquetColumns) -> Result<ParquetWriter<W>, StoreError> {
        let properties = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(parquet::basic::ZstdLevel::default()))
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .build();
        let schema = std::sync::Arc::clone(&columns.schema);
        let writer = parquet::arrow::ArrowWriter::try_new(out, schema, Some(properties)).map_err(parquet_failed)?;
        Ok(ParquetWriter { writer })
    }

    /// Appends `batch` (a [`ParquetColumns::batch`] of these columns).
    pub fn write(&mut self, batch: &arrow::record_batch::RecordBatch) -> Result<(), StoreError> {
        self.writer.write(batch).map_err(parquet_failed)
    }

    /// Writes the file's last row group and footer, and flushes the output; the rows written.
    pub fn finish(mut self) -> Result<u64, StoreError> {
        let metadata = self.writer.finish().map_err(parquet_failed)?;
        self.writer.inner_mut().flush().map_err(parquet_failed)?;
        Ok(metadata.file_metadata().num_rows() as u64)
    }
}
