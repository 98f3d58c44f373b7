//! One SQL text for both backends: statements with `$n` parameters run in a transaction of
//! either SQLite or Postgres, their rows read as integers and texts. The store's people,
//! sessions, links, usage and audit are written once on it; the hot paths (authenticate, charge)
//! keep their backend's own code.

use postgres::types::{ToSql, Type};

use crate::AccountsError;

/// A parameter or a column's value: an integer or a text, either maybe NULL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    Int(Option<i64>),
    Text(Option<String>),
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(Some(v))
    }
}

impl From<Option<i64>> for Val {
    fn from(v: Option<i64>) -> Val {
        Val::Int(v)
    }
}

impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Text(Some(v.to_owned()))
    }
}

impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Text(Some(v))
    }
}

impl From<Option<&str>> for Val {
    fn from(v: Option<&str>) -> Val {
        Val::Text(v.map(str::to_owned))
    }
}

/// A row read: its columns in order.
#[derive(Debug)]
pub(crate) struct Row(Vec<Val>);

impl Row {
    pub(crate) fn opt_int(&self, i: usize) -> Option<i64> {
        match &self.0[i] {
            Val::Int(v) => *v,
            Val::Text(v) => v.as_deref().and_then(|t| t.parse().ok()),
        }
    }

    pub(crate) fn int(&self, i: usize) -> i64 {
        self.opt_int(i).unwrap_or(0)
    }

    pub(crate) fn opt_text(&self, i: usize) -> Option<String> {
        match &self.0[i] {
            Val::Text(v) => v.clone(),
            Val::Int(v) => v.map(|n| n.to_string()),
        }
    }

    pub(crate) fn text(&self, i: usize) -> String {
        self.opt_text(i).unwrap_or_default()
    }
}

/// A transaction of either backend.
pub(crate) trait Sql {
    /// Runs a statement; the rows it changed.
    fn run(&mut self, sql: &str, params: &[Val]) -> Result<u64, AccountsError>;
    /// Runs a query; its rows.
    fn rows(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>, AccountsError>;

    fn row(&mut self, sql: &str, params: &[Val]) -> Result<Option<Row>, AccountsError> {
        Ok(self.rows(sql, params)?.into_iter().next())
    }
}

/// `$n` parameters as SQLite writes them (`?n`); no statement of the store holds a `$` otherwise.
fn sqlite_text(sql: &str) -> String {
    sql.replace('$', "?")
}

fn sqlite_params(params: &[Val]) -> impl Iterator<Item = rusqlite::types::Value> + '_ {
    params.iter().map(|p| match p {
        Val::Int(Some(n)) => rusqlite::types::Value::Integer(*n),
        Val::Text(Some(t)) => rusqlite::types::Value::Text(t.clone()),
        Val::Int(None) | Val::Text(None) => rusqlite::types::Value::Null,
    })
}

impl Sql for rusqlite::Transaction<'_> {
    fn run(&mut self, sql: &str, params: &[Val]) -> Result<u64, AccountsError> {
        let mut stmt = self.prepare_cached(&sqlite_text(sql))?;
        Ok(stmt.execute(rusqlite::params_from_iter(sqlite_params(params)))? as u64)
    }

    fn rows(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>, AccountsError> {
        let mut stmt = self.prepare_cached(&sqlite_text(sql))?;
        let columns = stmt.column_count();
        let rows = stmt.query_map(rusqlite::params_from_iter(sqlite_params(params)), |r| {
            (0..columns)
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        rusqlite::types::ValueRef::Integer(n) => Val::Int(Some(n)),
                        rusqlite::types::ValueRef::Real(f) => Val::Int(Some(f as i64)),
                        rusqlite::types::ValueRef::Text(t) => Val::Text(Some(String::from_utf8_lossy(t).into_owned())),
                        rusqlite::types::ValueRef::Blob(_) | rusqlite::types::ValueRef::Null => Val::Int(None),
                    })
                })
                .collect::<Result<Vec<_>, rusqlite::Error>>()
                .map(Row)
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn pg_params(params: &[Val]) -> Vec<Box<dyn ToSql + Sync>> {
    params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync> {
            match p {
                Val::Int(v) => Box::new(*v),
                Val::Text(v) => Box::new(v.clone()),
            }
        })
        .collect()
}

fn pg_row(row: &postgres::Row) -> Row {
    let vals = row
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| match *c.type_() {
            Type::INT8 => Val::Int(row.get(i)),
            Type::INT4 => Val::Int(row.get::<_, Option<i32>>(i).map(i64::from)),
            _ => Val::Text(row.get(i)),
        })
        .collect();
    Row(vals)
}

impl Sql for postgres::Transaction<'_> {
    fn run(&mut self, sql: &str, params: &[Val]) -> Result<u64, AccountsError> {
        let boxed = pg_params(params);
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(AsRef::as_ref).collect();
        Ok(self.execute(sql, &refs)?)
    }

    fn rows(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>, AccountsError> {
        let boxed = pg_params(params);
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(AsRef::as_ref).collect();
        Ok(self.query(sql, &refs)?.iter().map(pg_row).collect())
    }
}
