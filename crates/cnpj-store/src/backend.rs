//! Where a dataset lives (a DuckDB file or a Postgres schema) behind one narrow interface: text
//! rows from parameterised SQL, on connections borrowed from a small pool.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use duckdb::{AccessMode, Config};
use postgres::error::SqlState;

use crate::StoreError;

/// A dataset to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A DuckDB file built by `cnpj-etl build --db`, opened read-only.
    DuckDb(PathBuf),
    /// A schema published by `cnpj-etl build --postgres`.
    Postgres { url: String, schema: String },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::DuckDb(path) => write!(f, "{}", path.display()),
            // The URL may carry a password: name the schema only.
            Source::Postgres { schema, .. } => write!(f, "Postgres schema {schema}"),
        }
    }
}

/// The SQL dialect a query is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    DuckDb,
    Postgres,
}

/// A result row, every column as text (`NULL` as `None`).
pub(crate) type TextRow = Vec<Option<String>>;

struct PgConn {
    client: postgres::Client,
    statements: HashMap<String, postgres::Statement>,
}

enum Conn {
    DuckDb(duckdb::Connection),
    Postgres(Box<PgConn>),
}

/// Connections open at most per store: more concurrent queries wait for one to be free (a
/// Postgres server limits its connections, and two cores gain nothing from more).
const MAX_CONNECTIONS: usize = 16;

#[derive(Default)]
struct Pool {
    idle: Vec<Conn>,
    open: usize,
}

pub(crate) struct Backend {
    source: Source,
    /// DuckDB: whether the dataset's history file (of its build) is attached as `history`.
    pub(crate) history: bool,
    /// DuckDB: the connection others are cloned from.
    primary: Option<Mutex<duckdb::Connection>>,
    pool: Mutex<Pool>,
    freed: Condvar,
}

impl Backend {
    /// Opens `source`; DuckDB may hold `memory` bytes (its buffer pool and every query's state).
    pub(crate) fn open(source: &Source, memory: u64) -> Result<Backend, StoreError> {
        let open_err = |source_: Box<dyn std::error::Error + Send + Sync>| StoreError::Open {
            dataset: source.to_string(),
            error: source_.to_string(),
        };
        match source {
            Source::DuckDb(path) => {
                if !path.is_file() {
                    return Err(open_err("no such file".into()));
                }
                let config = Config::default().access_mode(AccessMode::ReadOnly).map_err(|e| open_err(e.into()))?;
                let conn = duckdb::Connection::open_with_flags(path, config).map_err(|e| open_err(e.into()))?;
                // Point lookups and small scans: one thread per query; concurrency comes from the pool.
                // A page of changes is the first rows of a scan in stored order (`changes.rs`):
                // results keep that order (DuckDB's default, said here), and the scan stops at the
                // page, which late materialisation (a second scan fetching the page's columns by
                // rowid, ≈ 12 ms over 36 M rows) would not. (The other limited queries return
                // their sort key only, or rank a company's few establishments.)
                conn.execute_batch(&format!(
                    "SET threads = 1; SET preserve_insertion_order = true; \
                     SET disabled_optimizers = 'late_materialization'; SET memory_limit = '{}KiB'",
                    (memory >> 10).max(1 << 10)
                ))
                .map_err(|e| open_err(e.into()))?;
                let history = attach_history(&conn, path).map_err(|e| open_err(e.into()))?;
                Ok(Backend {
                    source: source.clone(),
                    history,
                    primary: Some(Mutex::new(conn)),
                    pool: Mutex::default(),
                    freed: Condvar::new(),
                })
            }
            Source::Postgres { .. } => {
                let backend = Backend {
                    source: source.clone(),
                    history: false,
                    primary: None,
                    pool: Mutex::default(),
                    freed: Condvar::new(),
                };
                let conn = backend.connect().map_err(|e| open_err(e.to_string().into()))?;
                backend.checkin(Some(conn), true);
                Ok(backend)
            }
        }
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self.source {
            Source::DuckDb(_) => Dialect::DuckDb,
            Source::Postgres { .. } => Dialect::Postgres,
        }
    }

    fn connect(&self) -> Result<Conn, StoreError> {
        let err = |e: &dyn fmt::Display| StoreError::Query { context: "connecting", error: e.to_string() };
        match &self.source {
            Source::DuckDb(_) => {
                let primary = self.primary.as_ref().expect("DuckDB backends keep a primary connection");
                let conn = primary.lock().unwrap_or_else(PoisonError::into_inner).try_clone().map_err(|e| err(&e))?;
                Ok(Conn::DuckDb(conn))
            }
            Source::Postgres { url, schema } => {
                let mut client = postgres::Client::connect(url, postgres::NoTls).map_err(|e| err(&e))?;
                // Names resolve in the served schema; a swap (schema rename) re-plans cached statements.
                client
                    .batch_execute(&format!(
                        "SET search_path TO \"{schema}\"; SET default_transaction_read_only = on; SET DateStyle = ISO"
                    ))
                    .map_err(|e| err(&e))?;
                Ok(Conn::Postgres(Box::new(PgConn { client, statements: HashMap::new() })))
            }
        }
    }

    /// An idle connection, a new one while fewer than `MAX_CONNECTIONS` are open, or the next freed.
    fn checkout(&self) -> Result<Conn, StoreError> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(conn) = pool.idle.pop() {
                return Ok(conn);
            }
            if pool.open < MAX_CONNECTIONS {
                pool.open += 1;
                drop(pool);
                let conn = self.connect();
                if conn.is_err() {
                    self.checkin(None, false);
                }
                return conn;
            }
            pool = self.freed.wait(pool).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Returns a connection to the pool (`None`: it broke and is closed); `new` counts it as opened.
    fn checkin(&self, conn: Option<Conn>, new: bool) {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        match conn {
            Some(conn) => {
                pool.open += usize::from(new);
                pool.idle.push(conn);
            }
            None => pool.open -= 1,
        }
        self.freed.notify_one();
    }

    /// DuckDB: the (text, bytes) rows of `sql`, whose columns are a text and a BLOB.
    pub(crate) fn blobs(&self, context: &'static str, sql: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut conn = self.checkout()?;
        let result = match &mut conn {
            Conn::DuckDb(c) => c.prepare(sql).and_then(|mut stmt| {
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<duckdb::Result<Vec<_>>>()
            }),
            Conn::Postgres(_) => unreachable!("blobs are read from DuckDB files"),
        };
        self.checkin(Some(conn), false);
        result.map_err(|e| StoreError::Query { context, error: e.to_string() })
    }

    /// Runs `sql` with text parameters (`$1`, `$2`, …) on a pooled connection.
    pub(crate) fn rows(&self, context: &'static str, sql: &str, params: &[String]) -> Result<Vec<TextRow>, StoreError> {
        let mut conn = self.checkout()?;
        let err = |e: &dyn fmt::Display| StoreError::Query { context, error: e.to_string() };
        let result = match &mut conn {
            Conn::DuckDb(c) => duck_rows(c, sql, params).map_err(|e| err(&e)),
            Conn::Postgres(c) => pg_rows(c, sql, params).map_err(|e| err(&e)),
        };
        let broken = matches!(&conn, Conn::Postgres(c) if c.client.is_closed());
        self.checkin((!broken).then_some(conn), false);
        result
    }

    /// The rows of each of `queries` (SQL and its parameters), in their order, the queries run at
    /// once on connections of their own (each query runs on one thread: parts of one read on
    /// both cores).
    pub(crate) fn rows_at_once(
        &self,
        context: &'static str,
        queries: Vec<(String, Vec<String>)>,
    ) -> Result<Vec<TextRow>, StoreError> {
        let parts: Vec<Result<Vec<TextRow>, StoreError>> = std::thread::scope(|scope| {
            let running: Vec<_> =
                queries.iter().map(|(sql, params)| scope.spawn(move || self.rows(context, sql, params))).collect();
            running.into_iter().map(|part| part.join().expect("a query thread panicked")).collect()
        });
        let mut rows = Vec::new();
        for part in parts {
            rows.extend(part?);
        }
        Ok(rows)
    }

    /// [`Backend::rows`], stopped at `deadline` ([`StoreError::OverBudget`], also for a query that
    /// ends past it): DuckDB's query is
    /// interrupted by a watchdog thread, Postgres' by `statement_timeout`. The connection is
    /// closed afterwards (an interrupt that comes as the query ends must not reach the next).
    pub(crate) fn rows_within(
        &self,
        context: &'static str,
        sql: &str,
        params: &[String],
        deadline: Instant,
    ) -> Result<Vec<TextRow>, StoreError> {
        let Some(budget) = deadline.checked_duration_since(Instant::now()) else { return Err(StoreError::OverBudget) };
        let mut conn = self.checkout()?;
        let err = |e: &dyn fmt::Display| StoreError::Query { context, error: e.to_string() };
        let (result, stopped) = match &mut conn {
            Conn::DuckDb(c) => {
                let handle = c.interrupt_handle();
                let (done, finished) = std::sync::mpsc::channel::<()>();
                let watchdog = std::thread::spawn(move || {
                    let late = finished.recv_timeout(budget) == Err(std::sync::mpsc::RecvTimeoutError::Timeout);
                    if late {
                        handle.interrupt();
                    }
                    late
                });
                let result = duck_rows(c, sql, params).map_err(|e| err(&e));
                drop(done);
                (result, watchdog.join().unwrap_or(true))
            }
            Conn::Postgres(c) => {
                let millis = budget.as_millis().max(1);
                let result = c
                    .client
                    .batch_execute(&format!("SET statement_timeout = {millis}"))
                    .and_then(|()| pg_rows(c, sql, params));
                let stopped = result.as_ref().err().and_then(|e| e.code()) == Some(&SqlState::QUERY_CANCELED);
                (result.map_err(|e| err(&e)), stopped)
            }
        };
        self.checkin(None, false);
        drop(conn);
        // A query that ended past the deadline (the interrupt came as it finished) is over budget
        // all the same: a search answers within its budget or not at all.
        match result {
            Err(_) if stopped => Err(StoreError::OverBudget),
            _ if Instant::now() > deadline => Err(StoreError::OverBudget),
            result => result,
        }
    }
}

/// Attaches the history file beside the dataset at `path` as `history` to `conn` (on the
/// dataset), when there is one of the dataset's build (another build's is left, with a warning:
/// its changes are neither served nor exported).
pub(crate) fn attach_history(conn: &duckdb::Connection, path: &std::path::Path) -> duckdb::Result<bool> {
    if !cnpj_index::history_path(path).is_file() {
        return Ok(false);
    }
    conn.execute_batch(&cnpj_index::attach_history_sql(path))?;
    let same: i64 = conn.query_row(cnpj_index::SAME_BUILD, [], |r| r.get(0))?;
    if same == 0 {
        tracing::warn!(dataset = %path.display(), "the history file is of another build: its changes are left out");
        conn.execute_batch("DETACH history")?;
    }
    Ok(same > 0)
}

fn duck_rows(conn: &duckdb::Connection, sql: &str, params: &[String]) -> duckdb::Result<Vec<TextRow>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(duckdb::params_from_iter(params))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let n = row.as_ref().column_count();
        out.push((0..n).map(|i| row.get::<_, Option<String>>(i)).collect::<duckdb::Result<_>>()?);
    }
    Ok(out)
}

fn pg_rows(conn: &mut PgConn, sql: &str, params: &[String]) -> Result<Vec<TextRow>, postgres::Error> {
    let stmt = match conn.statements.get(sql) {
        Some(s) => s.clone(),
        None => {
            if conn.statements.len() >= 256 {
                // Search SQL varies with its filters: keep the cache bounded.
                conn.statements.clear();
            }
            let s = conn.client.prepare(sql)?;
            conn.statements.insert(sql.to_owned(), s.clone());
            s
        }
    };
    let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
        params.iter().map(|p| p as &(dyn postgres::types::ToSql + Sync)).collect();
    let rows = conn.client.query(&stmt, &params)?;
    rows.iter().map(|r| (0..r.len()).map(|i| r.try_get::<_, Option<String>>(i)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// A query that runs for minutes is stopped at its deadline, and the pool serves the next.
    fn check(backend: &Backend, slow: &str, fast: &str) {
        let started = Instant::now();
        let stopped = backend.rows_within("slow", slow, &[], started + Duration::from_millis(200));
        assert!(matches!(stopped, Err(StoreError::OverBudget)), "{:?}", stopped.map(|r| r.len()));
        assert!(started.elapsed() < Duration::from_secs(5), "stopped after {:?}", started.elapsed());
        let rows = backend.rows_within("fast", fast, &[], Instant::now() + Duration::from_secs(30)).unwrap();
        assert_eq!(rows, [vec![Some("1".to_owned())]]);
        assert!(matches!(backend.rows_within("late", fast, &[], started), Err(StoreError::OverBudget)));
    }

    #[test]
    fn duckdb_queries_stop_at_their_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.duckdb");
        duckdb::Connection::open(&path).unwrap().execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let backend = Backend::open(&Source::DuckDb(path), 256 << 20).unwrap();
        check(&backend, "SELECT CAST(count(*) AS VARCHAR) FROM range(1000000000000) a", "SELECT '1'");
    }

    #[test]
    fn postgres_queries_stop_at_their_deadline() {
        let base = std::env::var("CNPJ_TEST_POSTGRES").expect(
            "CNPJ_TEST_POSTGRES is not set: run the suite with scripts/test, which starts a throwaway Postgres",
        );
        let source = Source::Postgres { url: format!("{base}/postgres"), schema: "public".into() };
        let backend = Backend::open(&source, 256 << 20).unwrap();
        check(&backend, "SELECT CAST(pg_sleep(600) AS TEXT)", "SELECT '1'");
    }
}
