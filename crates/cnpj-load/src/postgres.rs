//! Publishes a built DuckDB dataset into Postgres: a fresh `<schema>_building` schema of UNLOGGED
//! tables (`sql/postgres/schema.sql`), filled by parallel binary COPY streams, then made LOGGED,
//! indexed (`sql/postgres/indexes.sql`), analysed and swapped in by renames inside one transaction.
//! The schema it replaces is kept as `<schema>_previous` for one rollback.
//! (Autovacuum stays off on the new tables until the publication has vacuumed them itself.)

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Date32Type, Decimal128Type, Int32Type, Int64Type};
use arrow::record_batch::RecordBatch;
use duckdb::{AccessMode, Config, Connection};
use postgres::{Client, NoTls};

const SCHEMA: &str = include_str!("../../../sql/postgres/schema.sql");
const INDEXES: &str = include_str!("../../../sql/postgres/indexes.sql");

/// The tables copied, biggest first so that the parallel streams finish together.
const TABLES: [&str; 13] = [
    "estabelecimentos",
    "empresas",
    "socios",
    "partner_identities",
    "changes",
    "simples",
    "regimes_tributarios",
    "rejects",
    "duplicates",
    "labels",
    "municipios",
    "source_files",
    "metadata",
];

/// Rows per COPY stream job: big tables are split in rowid ranges of this size.
const PART_ROWS: u64 = 500_000;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{context}: {source}")]
    Postgres { context: String, source: postgres::Error },
    #[error("{context}: {source}")]
    DuckDb { context: String, source: duckdb::Error },
    #[error("invalid schema name {0:?}: use lower-case letters, digits and _, starting with a letter (at most 40)")]
    SchemaName(String),
    #[error("{table}.{column}: cannot copy DuckDB type {from} into Postgres type {to}")]
    Type { table: String, column: String, from: DataType, to: String },
    #[error("{table}: {duckdb} rows in the dataset but {postgres} rows copied")]
    Count { table: String, duckdb: u64, postgres: u64 },
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("nothing to roll back: schema {0} does not exist")]
    NoPrevious(String),
}

fn pg(context: impl Into<String>) -> impl FnOnce(postgres::Error) -> PublishError {
    let context = context.into();
    move |source| PublishError::Postgres { context, source }
}

fn duck(context: impl Into<String>) -> impl FnOnce(duckdb::Error) -> PublishError {
    let context = context.into();
    move |source| PublishError::DuckDb { context, source }
}

/// A published dataset: rows per table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    pub schema: String,
    pub tables: Vec<(String, u64)>,
}

fn check_schema_name(name: &str) -> Result<(), PublishError> {
    let ok = name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok { Ok(()) } else { Err(PublishError::SchemaName(name.to_owned())) }
}

pub fn connect(url: &str) -> Result<Client, PublishError> {
    Client::connect(url, NoTls).map_err(pg("connecting to Postgres"))
}

/// Copies the dataset at `dataset` into Postgres and swaps it in as `schema`. `streams` COPY
/// connections run at once; `progress` is told of the rows of every part copied.
pub fn publish(
    dataset: &Path,
    url: &str,
    schema: &str,
    streams: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Published, PublishError> {
    check_schema_name(schema)?;
    let building = format!("{schema}_building");
    let mut admin = connect(url)?;
    admin
        .batch_execute(&format!(
            "CREATE EXTENSION IF NOT EXISTS pg_trgm; DROP SCHEMA IF EXISTS {building} CASCADE; CREATE SCHEMA {building}"
        ))
        .map_err(pg("creating the building schema"))?;
    let result = fill(dataset, url, &building, streams.max(1), progress, &mut admin).and_then(|tables| {
        swap(&mut admin, schema)?;
        Ok(Published { schema: schema.to_owned(), tables })
    });
    if result.is_err() {
        // A failed build never replaces the served schema; drop what it left behind.
        let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {building} CASCADE"));
    }
    result
}

/// Fills the schema `building` from the dataset: its tables created, their rows copied over
/// `streams` connections at once, the counts checked, the tables finished.
fn fill(
    dataset: &Path,
    url: &str,
    building: &str,
    streams: usize,
    progress: &(dyn Fn(u64) + Sync),
    admin: &mut Client,
) -> Result<Vec<(String, u64)>, PublishError> {
    admin
        .batch_execute(&format!("SET search_path TO {building}, public; {SCHEMA}"))
        .map_err(pg("creating the tables (sql/postgres/schema.sql)"))?;
    let (source, history) = open_dataset(dataset)?;
    let (counts, jobs) = plan(&source, admin, building, history)?;
    let source = Mutex::new(source);
    on_streams(
        streams,
        jobs,
        || {
            let duck_conn = source.lock().unwrap_or_else(PoisonError::into_inner).try_clone();
            Ok((duck_conn.map_err(duck("connecting to the dataset"))?, connect(url)?))
        },
        |(duck_conn, client), job| {
            progress(copy(duck_conn, client, building, &job)?);
            Ok(())
        },
    )?;
    check_counts(admin, building, &counts)?;
    finish_tables(admin, url, building, streams)?;
    Ok(counts)
}

/// The dataset opened read-only, and whether its history file (of its build) is attached.
fn open_dataset(dataset: &Path) -> Result<(Connection, bool), PublishError> {
    let config = Config::default().access_mode(AccessMode::ReadOnly).map_err(duck("opening the dataset"))?;
    let source =
        Connection::open_with_flags(dataset, config).map_err(duck(format!("opening {}", dataset.display())))?;
    // The copy streams read each block once: a small buffer pool keeps the memory flat.
    source.execute_batch("SET memory_limit = '512MB'").map_err(duck("limiting DuckDB's memory"))?;
    // The changes are in the history file beside the dataset, when there is one of its build.
    let history = cnpj_index::history_path(dataset).is_file() && {
        source.execute_batch(&cnpj_index::attach_history_sql(dataset)).map_err(duck("attaching the history"))?;
        let same: i64 =
            source.query_row(cnpj_index::SAME_BUILD, [], |r| r.get(0)).map_err(duck("reading the history"))?;
        if same == 0 {
            tracing::warn!("the dataset's history file is of another build: no changes are published");
            source.execute_batch("DETACH history").map_err(duck("detaching the history"))?;
        }
        same > 0
    };
    Ok((source, history))
}

/// The rows of each table to copy, and the copies: row-id ranges of [`PART_ROWS`].
#[allow(clippy::type_complexity)]
fn plan(
    source: &Connection,
    admin: &mut Client,
    building: &str,
    history: bool,
) -> Result<(Vec<(String, u64)>, Vec<Job>), PublishError> {
    let mut counts = Vec::new();
    let mut jobs = Vec::new();
    for table in TABLES {
        let from = match table {
            "changes" if history => "history.changes",
            "changes" => {
                counts.push((table.to_owned(), 0));
                continue;
            }
            table => table,
        };
        // Row ids run to the last row's, past the count when rows were deleted (the history).
        let (n, end): (i64, i64) = source
            .query_row(&format!("SELECT count(*), coalesce(max(rowid) + 1, 0) FROM {from}"), [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(duck(format!("counting {table}")))?;
        counts.push((table.to_owned(), n as u64));
        let columns = columns(admin, building, table)?;
        let mut start = 0;
        while start < end as u64 {
            jobs.push(Job { table, from, columns: columns.clone(), rows: start..(start + PART_ROWS).min(end as u64) });
            start += PART_ROWS;
        }
    }
    Ok((counts, jobs))
}

/// Every table holds as many rows in Postgres as in DuckDB.
fn check_counts(admin: &mut Client, building: &str, counts: &[(String, u64)]) -> Result<(), PublishError> {
    for (table, n) in counts {
        let copied: i64 = admin
            .query_one(&format!("SELECT count(*) FROM {building}.{table}"), &[])
            .map_err(pg(format!("counting {table}")))?
            .get(0);
        if copied as u64 != *n {
            return Err(PublishError::Count { table: table.clone(), duckdb: *n, postgres: copied as u64 });
        }
    }
    Ok(())
}

/// Once the rows are in: the publication's time, the tables made `LOGGED`, indexed
/// (`sql/postgres/indexes.sql`) and vacuumed, `streams` statements at a time.
fn finish_tables(admin: &mut Client, url: &str, building: &str, streams: usize) -> Result<(), PublishError> {
    admin
        .execute(
            &format!("INSERT INTO {building}.metadata VALUES ('published_at', to_char(clock_timestamp(), 'YYYY-MM-DD\"T\"HH24:MI:SS.USOF'))"),
            &[],
        )
        .map_err(pg("recording the publication"))?;
    let logged: String = TABLES.iter().map(|t| format!("ALTER TABLE {building}.{t} SET LOGGED;")).collect();
    admin.batch_execute(&logged).map_err(pg("making the tables LOGGED"))?;
    let indexes: Vec<Vec<String>> = INDEXES
        .split(';')
        .map(|s| s.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n"))
        .filter(|s| !s.trim().is_empty())
        .map(|s| vec![s])
        .collect();
    run_sql(url, building, streams, indexes)?;
    // A bulk-loaded table is vacuumed once here (visibility map for index-only scans, tuples frozen,
    // statistics), rather than by autovacuum at some later hour.
    let vacuums = TABLES
        .iter()
        .map(|t| {
            vec![
                format!("VACUUM (FREEZE, ANALYZE) {building}.{t}"),
                format!("ALTER TABLE {building}.{t} RESET (autovacuum_enabled)"),
            ]
        })
        .collect();
    run_sql(url, building, streams, vacuums)?;
    admin.batch_execute("RESET search_path").map_err(pg("resetting the search path"))
}

/// Runs `jobs` on `streams` threads, each with its own state from `setup` (its connections); once
/// a job fails no new job starts, and the first error is returned.
fn on_streams<J: Send, S>(
    streams: usize,
    jobs: Vec<J>,
    setup: impl Fn() -> Result<S, PublishError> + Sync,
    work: impl Fn(&mut S, J) -> Result<(), PublishError> + Sync,
) -> Result<(), PublishError> {
    let queue = Mutex::new(jobs.into_iter());
    let failed = AtomicBool::new(false);
    let first_error = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..streams {
            scope.spawn(|| {
                let run = || -> Result<(), PublishError> {
                    let mut state = setup()?;
                    while !failed.load(Ordering::Relaxed) {
                        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
                        let Some(job) = next else { break };
                        work(&mut state, job)?;
                    }
                    Ok(())
                };
                if let Err(e) = run() {
                    failed.store(true, Ordering::Relaxed);
                    first_error.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(e);
                }
            });
        }
    });
    first_error.into_inner().unwrap_or_else(PoisonError::into_inner).map_or(Ok(()), Err)
}

/// Runs groups of SQL statements in the building schema on `streams` connections at once; a
/// group's statements run in order, each on its own (VACUUM cannot share a transaction).
fn run_sql(url: &str, building: &str, streams: usize, groups: Vec<Vec<String>>) -> Result<(), PublishError> {
    on_streams(
        streams,
        groups,
        || {
            let mut client = connect(url)?;
            client
                .batch_execute(&format!("SET search_path TO {building}, public; SET maintenance_work_mem = '256MB'"))
                .map_err(pg("preparing a connection"))?;
            Ok(client)
        },
        |client, group| {
            for statement in group {
                client.batch_execute(&statement).map_err(pg(format!("running {}", statement.trim())))?;
            }
            Ok(())
        },
    )
}

/// Replaces `schema` by `<schema>_building`, keeping the replaced one as `<schema>_previous`
/// (dropping the one kept before), in one transaction.
fn swap(admin: &mut Client, schema: &str) -> Result<(), PublishError> {
    let mut tx = admin.transaction().map_err(pg("starting the swap"))?;
    let exists = schema_exists(&mut tx, schema)?;
    tx.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema}_previous CASCADE"))
        .map_err(pg("dropping the schema kept for rollback"))?;
    if exists {
        tx.batch_execute(&format!("ALTER SCHEMA {schema} RENAME TO {schema}_previous"))
            .map_err(pg("keeping the served schema for rollback"))?;
    }
    tx.batch_execute(&format!("ALTER SCHEMA {schema}_building RENAME TO {schema}"))
        .map_err(pg("swapping in the new schema"))?;
    tx.commit().map_err(pg("committing the swap"))
}

fn schema_exists(tx: &mut postgres::Transaction<'_>, name: &str) -> Result<bool, PublishError> {
    Ok(tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&name])
        .map_err(pg("looking up a schema"))?
        .is_some())
}

/// The `build_id` of the dataset `schema` serves, `None` when there is no such schema (nothing
/// published yet).
pub fn published_build(url: &str, schema: &str) -> Result<Option<String>, PublishError> {
    check_schema_name(schema)?;
    let mut client = connect(url)?;
    let mut tx = client.transaction().map_err(pg("reading the published build"))?;
    if !schema_exists(&mut tx, schema)? {
        return Ok(None);
    }
    let row = tx
        .query_opt(&format!("SELECT value FROM {schema}.metadata WHERE key = 'build_id'"), &[])
        .map_err(pg(format!("reading {schema}.metadata")))?;
    Ok(row.map(|r| r.get(0)))
}

/// Serves `<schema>_previous` again as `schema`, dropping the dataset it replaces.
pub fn rollback(url: &str, schema: &str) -> Result<(), PublishError> {
    check_schema_name(schema)?;
    let mut admin = connect(url)?;
    let mut tx = admin.transaction().map_err(pg("starting the rollback"))?;
    let previous = format!("{schema}_previous");
    if !schema_exists(&mut tx, &previous)? {
        return Err(PublishError::NoPrevious(previous));
    }
    tx.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema}_rolled_back CASCADE; \
         ALTER SCHEMA {schema} RENAME TO {schema}_rolled_back; \
         ALTER SCHEMA {previous} RENAME TO {schema}; \
         DROP SCHEMA {schema}_rolled_back CASCADE"
    ))
    .map_err(pg("rolling back"))?;
    tx.commit().map_err(pg("committing the rollback"))
}

/// One COPY stream's work: a rowid range of one table.
struct Job {
    table: &'static str,
    /// Where its rows are read: the table, or `history.changes`.
    from: &'static str,
    columns: Vec<(String, String)>,
    rows: std::ops::Range<u64>,
}

/// The columns of a Postgres table, in order, with their type names (`udt_name`).
fn columns(client: &mut Client, schema: &str, table: &str) -> Result<Vec<(String, String)>, PublishError> {
    let rows = client
        .query(
            "SELECT column_name::text, udt_name::text FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
            &[&schema, &table],
        )
        .map_err(pg(format!("listing the columns of {table}")))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

fn copy(source: &Connection, client: &mut Client, schema: &str, job: &Job) -> Result<u64, PublishError> {
    let names: Vec<&str> = job.columns.iter().map(|(n, _)| n.as_str()).collect();
    let list = names.join(", ");
    let sql = format!("SELECT {list} FROM {} WHERE rowid >= {} AND rowid < {}", job.from, job.rows.start, job.rows.end);
    let context = format!("reading {} rows {}..{}", job.table, job.rows.start, job.rows.end);
    let mut stmt = source.prepare(&sql).map_err(duck(context.clone()))?;
    let batches = stmt.stream_arrow([]).map_err(duck(context))?;
    let copy_context = || format!("copying {} rows {}..{}", job.table, job.rows.start, job.rows.end);
    let mut writer = client
        .copy_in(&format!("COPY {schema}.{} ({list}) FROM STDIN (FORMAT binary)", job.table))
        .map_err(pg(copy_context()))?;
    use std::io::Write;
    let io = |source| PublishError::Io { context: copy_context(), source };
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
    buf.extend_from_slice(&0i32.to_be_bytes());
    buf.extend_from_slice(&0i32.to_be_bytes());
    let mut rows = 0u64;
    for batch in batches {
        encode_batch(&batch, job, &mut buf)?;
        rows += batch.num_rows() as u64;
        if buf.len() >= 1 << 20 {
            writer.write_all(&buf).map_err(io)?;
            buf.clear();
        }
    }
    buf.extend_from_slice(&(-1i16).to_be_bytes());
    writer.write_all(&buf).map_err(io)?;
    writer.finish().map_err(pg(copy_context()))?;
    Ok(rows)
}

/// One column of a record batch, as the binary COPY format writes it.
enum Cells<'a> {
    Text(&'a arrow::array::StringArray),
    Date(&'a arrow::array::PrimitiveArray<Date32Type>),
    Int4(&'a arrow::array::PrimitiveArray<Int32Type>),
    Int8(&'a arrow::array::PrimitiveArray<Int64Type>),
    Bool(&'a arrow::array::BooleanArray),
    Numeric(&'a arrow::array::PrimitiveArray<Decimal128Type>, u32),
    TextArray(&'a arrow::array::ListArray),
}

/// Days from 1970-01-01 (Arrow) to 2000-01-01 (Postgres).
const PG_EPOCH_DAYS: i32 = 10_957;

fn encode_batch(batch: &RecordBatch, job: &Job, out: &mut Vec<u8>) -> Result<(), PublishError> {
    // Normalise the Arrow types DuckDB may choose (string views, narrow integers, decimals).
    let mut arrays = Vec::with_capacity(job.columns.len());
    for ((name, udt), array) in job.columns.iter().zip(batch.columns()) {
        let want = match udt.as_str() {
            "text" => DataType::Utf8,
            "date" => DataType::Date32,
            "int4" => DataType::Int32,
            "int8" => DataType::Int64,
            "bool" => DataType::Boolean,
            "numeric" => match array.data_type() {
                DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s)
                    if (0..=4).contains(s) =>
                {
                    DataType::Decimal128(*p, *s)
                }
                _ => DataType::Null,
            },
            "_text" => {
                DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new_list_field(DataType::Utf8, true)))
            }
            _ => DataType::Null,
        };
        let type_error = || PublishError::Type {
            table: job.table.to_owned(),
            column: name.clone(),
            from: array.data_type().clone(),
            to: udt.clone(),
        };
        if want == DataType::Null {
            return Err(type_error());
        }
        let array = if array.data_type() == &want {
            array.clone()
        } else {
            arrow::compute::cast(array, &want).map_err(|_| type_error())?
        };
        arrays.push(array);
    }
    let cells: Vec<Cells<'_>> = arrays
        .iter()
        .map(|a| match a.data_type() {
            DataType::Utf8 => Cells::Text(a.as_string::<i32>()),
            DataType::Date32 => Cells::Date(a.as_primitive()),
            DataType::Int32 => Cells::Int4(a.as_primitive()),
            DataType::Int64 => Cells::Int8(a.as_primitive()),
            DataType::Boolean => Cells::Bool(a.as_boolean()),
            DataType::Decimal128(_, s) => Cells::Numeric(a.as_primitive(), *s as u32),
            _ => Cells::TextArray(a.as_list::<i32>()),
        })
        .collect();
    let fields = cells.len() as i16;
    for row in 0..batch.num_rows() {
        out.extend_from_slice(&fields.to_be_bytes());
        for cell in &cells {
            encode_cell(cell, row, out);
        }
    }
    Ok(())
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&(len as i32).to_be_bytes());
}

fn encode_cell(cells: &Cells<'_>, row: usize, out: &mut Vec<u8>) {
    let null = match cells {
        Cells::Text(a) => a.is_null(row),
        Cells::Date(a) => a.is_null(row),
        Cells::Int4(a) => a.is_null(row),
        Cells::Int8(a) => a.is_null(row),
        Cells::Bool(a) => a.is_null(row),
        Cells::Numeric(a, _) => a.is_null(row),
        Cells::TextArray(a) => a.is_null(row),
    };
    if null {
        out.extend_from_slice(&(-1i32).to_be_bytes());
        return;
    }
    match cells {
        Cells::Text(a) => {
            let v = a.value(row).as_bytes();
            put_len(out, v.len());
            out.extend_from_slice(v);
        }
        Cells::Date(a) => {
            put_len(out, 4);
            out.extend_from_slice(&(a.value(row) - PG_EPOCH_DAYS).to_be_bytes());
        }
        Cells::Int4(a) => {
            put_len(out, 4);
            out.extend_from_slice(&a.value(row).to_be_bytes());
        }
        Cells::Int8(a) => {
            put_len(out, 8);
            out.extend_from_slice(&a.value(row).to_be_bytes());
        }
        Cells::Bool(a) => {
            put_len(out, 1);
            out.push(u8::from(a.value(row)));
        }
        Cells::Numeric(a, scale) => put_numeric(out, a.value(row), *scale),
        Cells::TextArray(a) => {
            let list = a.value(row);
            let items = list.as_string::<i32>();
            let mut body = Vec::new();
            let has_null = items.null_count() > 0;
            body.extend_from_slice(&i32::from(!items.is_empty()).to_be_bytes());
            body.extend_from_slice(&i32::from(has_null).to_be_bytes());
            body.extend_from_slice(&25u32.to_be_bytes()); // text
            if !items.is_empty() {
                put_len(&mut body, items.len());
                body.extend_from_slice(&1i32.to_be_bytes());
                for i in 0..items.len() {
                    if items.is_null(i) {
                        body.extend_from_slice(&(-1i32).to_be_bytes());
                    } else {
                        let v = items.value(i).as_bytes();
                        put_len(&mut body, v.len());
                        body.extend_from_slice(v);
                    }
                }
            }
            put_len(out, body.len());
            out.extend_from_slice(&body);
        }
    }
}

/// A decimal of `scale` ≤ 4 fractional digits in Postgres' binary NUMERIC form (base-10000 digits).
fn put_numeric(out: &mut Vec<u8>, value: i128, scale: u32) {
    let abs = value.unsigned_abs();
    let pow = 10u128.pow(scale);
    let mut int = abs / pow;
    let frac = (abs % pow) * 10u128.pow(4 - scale);
    let mut digits: Vec<i16> = Vec::new();
    while int > 0 {
        digits.push((int % 10_000) as i16);
        int /= 10_000;
    }
    let weight = digits.len() as i16 - 1;
    digits.reverse();
    digits.push(frac as i16);
    while digits.last() == Some(&0) {
        digits.pop();
    }
    let (weight, sign) = if digits.is_empty() { (0i16, 0u16) } else { (weight, if value < 0 { 0x4000 } else { 0 }) };
    put_len(out, 8 + 2 * digits.len());
    out.extend_from_slice(&(digits.len() as i16).to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&(scale as u16).to_be_bytes());
    for d in digits {
        out.extend_from_slice(&d.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (ndigits, weight, sign, dscale, digits) of the encoded numeric.
    fn check(value: i128, scale: u32, expected: (i16, i16, u16, u16, &[i16])) {
        let mut out = Vec::new();
        put_numeric(&mut out, value, scale);
        let be16 = |i: usize| i16::from_be_bytes([out[i], out[i + 1]]);
        let len = i32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        assert_eq!(len, out.len() - 4, "{value}");
        let digits: Vec<i16> = (0..be16(4) as usize).map(|k| be16(12 + 2 * k)).collect();
        assert_eq!((be16(4), be16(6), be16(8) as u16, be16(10) as u16, digits.as_slice()), expected, "{value}");
    }

    #[test]
    fn numerics_in_base_10000() {
        check(0, 2, (0, 0, 0, 2, &[]));
        check(100, 2, (1, 0, 0, 2, &[1])); // 1.00
        check(123_456_789, 2, (3, 1, 0, 2, &[123, 4567, 8900])); // 1234567.89
        check(1_000_000, 2, (1, 1, 0, 2, &[1])); // 10000.00
        check(5, 2, (1, -1, 0, 2, &[500])); // 0.05
        check(-250, 2, (2, 0, 0x4000, 2, &[2, 5000])); // -2.50
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema_name("cnpj").is_ok());
        assert!(check_schema_name("cnpj_2026").is_ok());
        for bad in ["", "2026", "Cnpj", "cnpj; drop", "a-b", &"x".repeat(41)] {
            assert!(check_schema_name(bad).is_err(), "{bad:?}");
        }
    }
}
