//! A month's `change_keys` in the history (`cnpj_index::CHANGE_KEYS`): the month's rows read once
//! in the stored order, each given its position among them, its company's and establishment's
//! keys, its event and whether it is a company event, and appended in company order (integers
//! bit-packed, the event dictionary-encoded).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, StringArray, UInt32Array, UInt64Array};
use arrow::record_batch::RecordBatch;
use duckdb::Connection;

use crate::{LoadError, attach, db};

/// Rows of `change_keys` appended at a time.
const BATCH: usize = 122_880;

/// One row of `changes`, keyed.
struct Key {
    company: u64,
    position: u32,
    branch: Option<u32>,
    /// Into `Keys::names`.
    event: u16,
    of_company: bool,
}

/// A month's keys, and the event names they point to.
#[derive(Default)]
struct Keys {
    keys: Vec<Key>,
    names: Vec<String>,
    named: HashMap<String, u16>,
}

impl Keys {
    fn name(&mut self, name: &str) -> u16 {
        if let Some(&at) = self.named.get(name) {
            return at;
        }
        let at = u16::try_from(self.names.len()).expect("fewer than 65,536 event names");
        self.names.push(name.to_owned());
        self.named.insert(name.to_owned(), at);
        at
    }

    /// Keys the rows of `batch` (`cnpj_basico`, `cnpj`, `event`, `field`), the month's next ones.
    fn push(&mut self, month: &str, batch: &RecordBatch) -> Result<(), LoadError> {
        let column = |i: usize| batch.column(i).as_any().downcast_ref::<StringArray>().expect("VARCHAR columns");
        let (bases, cnpjs, events, fields) = (column(0), column(1), column(2), column(3));
        for row in 0..batch.num_rows() {
            let basico = bases.value(row);
            let cnpj = cnpjs.is_valid(row).then(|| cnpjs.value(row));
            let unkeyed = || LoadError::ChangeKey {
                month: month.to_owned(),
                basico: basico.to_owned(),
                cnpj: cnpj.map(str::to_owned),
            };
            let company = cnpj_index::company_key(basico).ok_or_else(unkeyed)?;
            let branch = match cnpj {
                Some(cnpj) if cnpj.starts_with(basico) => Some(cnpj_index::branch_key(cnpj).ok_or_else(unkeyed)?),
                Some(_) => return Err(unkeyed()),
                None => None,
            };
            let position = u32::try_from(self.keys.len()).expect("fewer than 4 G changes a month");
            let event = self.name(events.value(row));
            let of_company = fields.is_valid(row) && cnpj_index::COMPANY_FIELDS.contains(&fields.value(row));
            self.keys.push(Key { company, position, branch, event, of_company });
        }
        Ok(())
    }

    /// The keys of `rows` as a record batch of `change_keys`.
    fn batch(&self, month: &str, rows: &[Key]) -> RecordBatch {
        let name = |at: u16| self.names[usize::from(at)].as_str();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| month))),
            Arc::new(rows.iter().map(|k| k.company).collect::<UInt64Array>()),
            Arc::new(rows.iter().map(|k| k.position).collect::<UInt32Array>()),
            Arc::new(rows.iter().map(|k| k.branch).collect::<UInt32Array>()),
            Arc::new(rows.iter().map(|k| Some(name(k.event))).collect::<StringArray>()),
            Arc::new(rows.iter().map(|k| Some(k.of_company)).collect::<BooleanArray>()),
        ];
        let names = ["month", "company", "position", "branch", "event", "of_company"];
        RecordBatch::try_from_iter(names.into_iter().zip(columns)).expect("the columns of change_keys")
    }
}

/// Creates `change_keys` in the attached `history` unless it is there (a history written before it).
pub(crate) fn create(conn: &Connection) -> Result<(), LoadError> {
    conn.execute_batch(&format!("CREATE TABLE IF NOT EXISTS history.{}", cnpj_index::CHANGE_KEYS))
        .map_err(db("creating the history's change_keys"))
}

/// Keys every month of the attached `history` that has rows and no keys: the month built, and
/// every month of a history carried over from before `change_keys`. Returns those months.
pub(crate) fn key_months(conn: &Connection) -> Result<Vec<String>, LoadError> {
    const CONTEXT: &str = "finding the history's months without keys";
    let mut stmt = conn
        .prepare(
            "SELECT DISTINCT month FROM history.changes EXCEPT SELECT DISTINCT month FROM history.change_keys \
             ORDER BY month",
        )
        .map_err(db(CONTEXT))?;
    let months = stmt.query_map([], |r| r.get(0)).map_err(db(CONTEXT))?;
    let months = months.collect::<Result<Vec<String>, _>>().map_err(db(CONTEXT))?;
    for month in &months {
        store_keys(conn, month)?;
    }
    Ok(months)
}

/// Keys the history file at `path` as a build keys the history it carries over (`key_months`),
/// for a history served as it is: the benchmarks' fabricated ones.
pub fn key_history(path: &Path) -> Result<Vec<String>, LoadError> {
    let conn = Connection::open_in_memory().map_err(db("opening DuckDB"))?;
    attach(&conn, path, "history", false)?;
    create(&conn)?;
    let months = key_months(&conn)?;
    conn.execute_batch("CHECKPOINT history").map_err(db("writing the history's keys"))?;
    Ok(months)
}

/// Writes `month`'s rows of `history.change_keys` from its rows of `history.changes`.
fn store_keys(conn: &Connection, month: &str) -> Result<(), LoadError> {
    const CONTEXT: &str = "keying a month's changes";
    let mut keys = Keys::default();
    let mut stmt = conn
        .prepare("SELECT cnpj_basico, cnpj, event, field FROM history.changes WHERE month = ? ORDER BY rowid")
        .map_err(db(CONTEXT))?;
    for batch in stmt.query_arrow([month]).map_err(db(CONTEXT))? {
        keys.push(month, &batch)?;
    }
    // In company order (positions ascending within one: the sort is stable).
    let mut rows = std::mem::take(&mut keys.keys);
    rows.sort_by_key(|k| k.company);
    let mut appender = conn.appender_to_catalog_and_db("change_keys", "history", "main").map_err(db(CONTEXT))?;
    for chunk in rows.chunks(BATCH) {
        appender.append_record_batch(keys.batch(month, chunk)).map_err(db(CONTEXT))?;
    }
    appender.flush().map_err(db(CONTEXT))
}
