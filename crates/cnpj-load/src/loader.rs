//! The DuckDB loader: a temporary database file next to the target, the merge of the sorted runs
//! into the served tables, the SQL transform of the small inputs, reconciliation of counts, and
//! the atomic rename that makes a finished build the served dataset.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use cnpj_model::FileKind;
use cnpj_model::rows::{EmpresaRow, EstabelecimentoRow, RegimeRow, SimplesRow, SocioRow};
use duckdb::Connection;
use serde::Serialize;

use crate::batches::{Batch, DuplicateBatch, Served, ddl, tables};
use crate::runs::{ALL_KEYS, Codes, Key, Keyed, Run, Runs, Spill, by_table, halfway, merge};
use crate::{LoadError, db};
use cnpj_index::{Fed, Part, ServingWriter};

const TRANSFORM: &str = include_str!("../../../sql/duckdb/transform.sql");
const COUNTS: &str = include_str!("../../../sql/duckdb/counts.sql");
const VIEWS: &str = include_str!("../../../sql/duckdb/views.sql");

/// One source file (a zip member) of the build, as the pipeline read it.
#[derive(Clone, Debug, Serialize)]
pub struct SourceFile {
    pub id: i32,
    pub zip: String,
    pub member: String,
    pub kind: FileKind,
    pub rows_read: u64,
    pub rows_rejected: u64,
    /// Lookup tables are deduplicated by the pipeline, which gives their counts here.
    #[serde(skip)]
    pub lookup_counts: Option<FileCounts>,
}

/// What became of a file's rows in the dataset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileCounts {
    pub rows_loaded: u64,
    pub duplicates: u64,
    /// Duplicates whose raw content differs from the row that won.
    pub duplicates_differing: u64,
}

/// A code met in the data but absent from its lookup table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnknownCode {
    pub table: String,
    pub code: String,
    pub rows: u64,
}

/// The loader's part of the build report.
#[derive(Clone, Debug, Serialize)]
pub struct LoadSummary {
    pub files: Vec<(SourceFile, FileCounts)>,
    pub unknown_codes: Vec<UnknownCode>,
    /// Establishments whose `cnpj_basico` is not in Empresas (loaded with empty company fields).
    pub estabelecimentos_sem_empresa: u64,
    /// Rows per served table.
    pub tables: Vec<(String, u64)>,
    /// Rejected rows per reason, the values a reason quotes masked (see [`REJECT_REASON`]), most first.
    pub rejects_by_reason: Vec<(String, u64)>,
}

/// Builds one dataset file. Dropping a loader that was not committed deletes its temporary file,
/// so a failed build never touches the target.
pub struct Loader {
    conn: Option<Connection>,
    /// Rows per code met in the served tables, by lookup table (from the merges).
    codes: Codes,
    tmp: PathBuf,
    target: PathBuf,
    /// Whether this build has a history file (attached as `history`: see `changes.rs`).
    pub(crate) history: bool,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Loader({} -> {})", self.tmp.display(), self.target.display())
    }
}

impl Loader {
    /// Creates the temporary database beside `target` with the staging tables.
    /// `memory_limit` is DuckDB's, in bytes; `threads` its worker threads.
    pub fn create(target: &Path, memory_limit: u64, threads: usize) -> Result<Loader, LoadError> {
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "dataset".into());
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.is_dir() {
            return Err(LoadError::Io {
                path: dir.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "the target's folder does not exist"),
            });
        }
        remove_abandoned_builds(dir, &name);
        let tmp = dir.join(format!(".{name}.building-{}", std::process::id()));
        let mut loader = Loader { conn: None, codes: Codes::default(), tmp, target: target.to_owned(), history: false };
        loader.remove_tmp();
        let conn = Connection::open(&loader.tmp).map_err(db(format!("cannot create {}", loader.tmp.display())))?;
        // Insertion order stays on (DuckDB's default): the served tables are appended in key
        // order, and without it DuckDB stores an appender's chunks out of order.
        let mut setup = format!("SET memory_limit = '{}KB'; SET threads = {threads};", memory_limit / 1000);
        for (table, schema) in tables() {
            setup.push_str(&ddl(table, &schema));
            setup.push(';');
        }
        conn.execute_batch(&setup).map_err(db("creating the tables"))?;
        loader.conn = Some(conn);
        Ok(loader)
    }

    pub(crate) fn conn(&self) -> &Connection {
        self.conn.as_ref().expect("the connection lives until commit")
    }

    /// A connection of its own to the dataset being built, for work done on another thread
    /// (appending rejects, storing a table) while the loader does something else.
    pub fn session(&self) -> Result<Session, LoadError> {
        Ok(Session { conn: self.conn().try_clone().map_err(db("opening another connection"))? })
    }

    /// Where the main tables' rows are sorted into runs, `buffer_bytes` per member at a time:
    /// a folder beside the temporary database, deleted with it.
    pub fn spill(&self, buffer_bytes: usize) -> Result<Spill, LoadError> {
        Ok(Spill::new(self.runs_dir()?, buffer_bytes))
    }

    /// The folder of the build's sorted runs, created when missing.
    pub(crate) fn runs_dir(&self) -> Result<PathBuf, LoadError> {
        let dir = self.runs_path();
        std::fs::create_dir_all(&dir).map_err(|source| LoadError::Io { path: dir.clone(), source })?;
        Ok(dir)
    }

    fn runs_path(&self) -> PathBuf {
        PathBuf::from(format!("{}.runs", self.tmp.display()))
    }

    /// Where the lookup file and the search index of this build are written until the commit
    /// renames them beside the target (deleted with the temporary database on failure).
    pub fn serving_files(&self) -> (PathBuf, PathBuf) {
        (cnpj_index::lookup_path(&self.tmp), cnpj_index::search_index_path(&self.tmp))
    }

    /// Where the history file of this build is written until the commit renames it beside the
    /// target (deleted with the temporary database on failure).
    pub(crate) fn history_file(&self) -> PathBuf {
        cnpj_index::history_path(&self.tmp)
    }

    /// Keeps what the stores counted (the codes their rows carry) for the report's unknown codes.
    pub fn record(&mut self, stored: Vec<Stored>) {
        stored.into_iter().for_each(|Stored(codes)| self.codes.add(codes));
    }

    /// Once every table is stored and the partners fed ([`Loader::feed_partners`]): finishes the
    /// small tables and `partner_links` (`transform.sql`), creates the analysts' views
    /// (`views.sql`), then checks that, for every file, rows read = loaded + duplicates +
    /// rejected, and sums up the dataset.
    pub fn transform(&mut self, files: Vec<SourceFile>) -> Result<LoadSummary, LoadError> {
        let conn = self.conn();
        finish_tables(conn)?;
        let step = |name: &str, started: std::time::Instant| {
            tracing::debug!(step = name, seconds = started.elapsed().as_secs_f64(), "reconcile");
        };
        let started = std::time::Instant::now();
        let counts = counts_per_file(conn)?;
        step("counts", started);
        let files = reconcile(conn, files, &counts)?;
        let started = std::time::Instant::now();
        let unknown_codes = self.unknown_codes()?;
        step("unknown codes", started);
        let started = std::time::Instant::now();
        let estabelecimentos_sem_empresa =
            conn.query_row(
                "SELECT count(*) FROM estabelecimentos e WHERE NOT EXISTS \
                 (SELECT 1 FROM empresas c WHERE c.cnpj_basico = e.cnpj_basico)",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(db("counting establishments without a company"))? as u64;
        step("establishments without a company", started);
        let tables = table_rows(conn)?;
        Ok(LoadSummary {
            files,
            unknown_codes,
            estabelecimentos_sem_empresa,
            tables,
            rejects_by_reason: rejects_by_reason(conn)?,
        })
    }

    /// Codes met in the served tables that the month's lookup tables (or the fixed domains) do not
    /// know, with the number of rows that carry each, by table and code. They keep their code and
    /// get an empty label.
    fn unknown_codes(&self) -> Result<Vec<UnknownCode>, LoadError> {
        let mut known = HashSet::new();
        let mut stmt = self
            .conn()
            .prepare("SELECT tabela, codigo FROM labels WHERE locale = 'pt-br' UNION ALL SELECT 'municipios', code FROM municipios")
            .map_err(db("reading the known codes"))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(db("reading the known codes"))?;
        for row in rows {
            known.insert(row.map_err(db("reading the known codes"))?);
        }
        let mut unknown = Vec::new();
        for (table, codes) in &self.codes.0 {
            for (code, rows) in codes {
                if !known.contains(&(table.to_string(), code.clone())) {
                    unknown.push(UnknownCode { table: table.to_string(), code: code.clone(), rows: *rows });
                }
            }
        }
        unknown.sort_by(|a, b| (&a.table, &a.code).cmp(&(&b.table, &b.code)));
        Ok(unknown)
    }

    /// Writes the metadata table (and the history's `build_id`), checkpoints and closes the files,
    /// then renames the serving files (when written: see [`Loader::serving_files`]) and the
    /// history over the target's (a build without one deletes the target's, of another build),
    /// the DuckDB file last: a store uses the files beside it only when their build id is its own.
    pub fn commit(mut self, metadata: &[(&str, String)]) -> Result<(), LoadError> {
        let conn = self.conn.take().expect("commit once");
        conn.execute_batch("CREATE TABLE metadata (key VARCHAR PRIMARY KEY, value VARCHAR)")
            .map_err(db("creating metadata"))?;
        for (key, value) in metadata {
            conn.execute("INSERT INTO metadata VALUES (?, ?)", duckdb::params![key, value])
                .map_err(db("writing metadata"))?;
        }
        if self.history {
            conn.execute_batch(
                "DELETE FROM history.metadata;
                 INSERT INTO history.metadata SELECT key, value FROM metadata WHERE key IN ('build_id', 'source_month');
                 CHECKPOINT history;
                 DETACH history;",
            )
            .map_err(db("writing the history's metadata"))?;
        }
        conn.execute_batch("CHECKPOINT").map_err(db("checkpointing"))?;
        conn.close().map_err(|(_, e)| db("closing the dataset")(e))?;
        let (lookup, search) = self.serving_files();
        let history = cnpj_index::history_path(&self.target);
        for (from, to) in [
            (lookup, cnpj_index::lookup_path(&self.target)),
            (search, cnpj_index::search_index_path(&self.target)),
            (self.history_file(), history.clone()),
        ] {
            if from.exists() {
                std::fs::rename(&from, &to).map_err(|source| LoadError::Io { path: to.clone(), source })?;
            }
        }
        if !self.history && history.exists() {
            std::fs::remove_file(&history).map_err(|source| LoadError::Io { path: history.clone(), source })?;
        }
        std::fs::rename(&self.tmp, &self.target)
            .map_err(|source| LoadError::Io { path: self.target.clone(), source })?;
        Ok(())
    }

    /// Deletes the temporary database, its WAL and DuckDB's spill folder.
    fn remove_tmp(&self) {
        let name = self.tmp.display();
        let _ = std::fs::remove_file(&self.tmp);
        let _ = std::fs::remove_file(format!("{name}.wal"));
        let _ = std::fs::remove_dir_all(format!("{name}.tmp"));
        let _ = std::fs::remove_dir_all(self.runs_path());
        let (lookup, search) = self.serving_files();
        let _ = std::fs::remove_file(lookup);
        let _ = std::fs::remove_file(search);
        let history = self.history_file();
        let _ = std::fs::remove_file(format!("{}.wal", history.display()));
        let _ = std::fs::remove_file(history);
    }
}

/// A second connection to the dataset being built (see [`Loader::session`]).
pub struct Session {
    conn: Connection,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session")
    }
}

/// What storing some tables counted besides their rows (see [`Loader::record`]).
#[derive(Debug)]
pub struct Stored(Codes);

impl Session {
    /// Appends one batch to its table.
    pub fn append(&self, batch: Batch) -> Result<(), LoadError> {
        append(&self.conn, batch)
    }

    /// Merges the runs into their served tables, one table after the other, in batches of
    /// `batch_rows`, and the later occurrences of keys into `duplicates`. Run files are deleted
    /// once merged. Each table is stored in two halves at once (see [`store`]), and its kept rows
    /// go to `serving` as well.
    pub fn store(&self, runs: Vec<Runs>, batch_rows: usize, serving: &ServingWriter) -> Result<Stored, LoadError> {
        let mut codes = Codes::default();
        let mut tables = by_table(runs);
        let mut runs = |table: &str| tables.remove(table).unwrap_or_default();
        let conn = &self.conn;
        store::<EstabelecimentoRow>(conn, &runs(EstabelecimentoRow::TABLE), batch_rows, &mut codes, serving)?;
        store::<EmpresaRow>(conn, &runs(EmpresaRow::TABLE), batch_rows, &mut codes, serving)?;
        store::<SocioRow>(conn, &runs(SocioRow::TABLE), batch_rows, &mut codes, serving)?;
        store::<SimplesRow>(conn, &runs(SimplesRow::TABLE), batch_rows, &mut codes, serving)?;
        store::<RegimeRow>(conn, &runs(RegimeRow::TABLE), batch_rows, &mut codes, serving)?;
        Ok(Stored(codes))
    }
}

fn append(conn: &Connection, batch: Batch) -> Result<(), LoadError> {
    if batch.data.num_rows() == 0 {
        return Ok(());
    }
    let mut appender = conn.appender(batch.table).map_err(db(format!("appending to {}", batch.table)))?;
    appender.append_record_batch(batch.data).map_err(db(format!("appending to {}", batch.table)))?;
    appender.flush().map_err(db(format!("appending to {}", batch.table)))
}

/// Stores one table from its runs, then deletes them. The keys are cut in two halves
/// ([`halfway`]), stored at once, each in one transaction on a connection of its own: DuckDB's
/// appender is single-threaded, and appending transactions run side by side (autocommitting
/// appenders did not: they wait on each other's commits). The lower half commits first, so the
/// table is in key order.
fn store<T: Keyed + Served + Fed>(
    conn: &Connection,
    runs: &[Run],
    batch_rows: usize,
    codes: &mut Codes,
    serving: &ServingWriter,
) -> Result<(), LoadError> {
    if runs.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let paths: Vec<PathBuf> = runs.iter().map(|r| r.path.clone()).collect();
    let middle = halfway(runs);
    let cut: [u8; 8] = middle[..8].try_into().expect("a key starts with the company");
    let upper_conn = conn.try_clone().map_err(db("opening another connection"))?;
    let mut upper_codes = Codes::default();
    let (lower_done, lower_committed) = std::sync::mpsc::channel::<()>();
    let (lower, upper) = std::thread::scope(|scope| {
        let (paths, upper_codes) = (&paths, &mut upper_codes);
        let upper = scope.spawn(move || {
            let keys = middle..ALL_KEYS.end;
            let feed = T::feed(serving, Part::Upper, cut)?;
            store_keys::<T>(&upper_conn, paths, &keys, batch_rows, upper_codes, feed, || {
                // Returns once the lower half is committed or has failed.
                let _ = lower_committed.recv();
            })
        });
        let lower = T::feed(serving, Part::Lower, cut)
            .map_err(LoadError::from)
            .and_then(|feed| store_keys::<T>(conn, paths, &(ALL_KEYS.start..middle), batch_rows, codes, feed, || ()));
        drop(lower_done);
        (lower, upper.join().expect("a store does not panic"))
    });
    let rows = lower? + upper?;
    codes.add(upper_codes);
    let run_bytes: u64 = paths.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    tracing::debug!(
        table = T::TABLE,
        runs = paths.len(),
        run_bytes,
        rows,
        seconds = started.elapsed().as_secs_f64(),
        "merged"
    );
    Ok(())
}

/// Merges the rows of `keys` from the runs into their table (and their later occurrences into
/// `duplicates`) in one transaction, committed after `before_commit` returns. The merge runs on
/// a thread of its own (feeding the serving files) and hands its batches to this one, which
/// appends them: DuckDB's appender is the costlier half. Returns the rows kept.
#[allow(clippy::too_many_arguments)]
fn store_keys<T: Keyed + Served>(
    conn: &Connection,
    paths: &[PathBuf],
    keys: &std::ops::Range<Key>,
    batch_rows: usize,
    codes: &mut Codes,
    mut feed: Box<dyn cnpj_index::Feed<T> + '_>,
    before_commit: impl FnOnce(),
) -> Result<u64, LoadError> {
    let context = format!("appending to {}", T::TABLE);
    conn.execute_batch("BEGIN TRANSACTION").map_err(db(&context))?;
    let mut appender = conn.appender(T::TABLE).map_err(db(&context))?;
    let mut duplicates = conn.appender(DuplicateBatch::TABLE).map_err(db("appending to duplicates"))?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(2);
    let rows = std::thread::scope(|scope| {
        let merged = scope.spawn(move || {
            let kept = merge::<T>(paths, keys, batch_rows, codes, feed.as_mut(), &mut |batch| {
                tx.send(batch).map_err(|_| LoadError::Stopped)
            })?;
            feed.finish()?;
            Ok::<u64, LoadError>(kept)
        });
        // Each batch is flushed into the transaction at once: DuckDB's appender otherwise
        // collects 204,800 rows (tens of MB) outside the memory limit before it does.
        let appended = rx.into_iter().try_for_each(|batch| match batch.table {
            DuplicateBatch::TABLE => duplicates.append_record_batch(batch.data),
            _ => appender.append_record_batch(batch.data).and_then(|()| appender.flush()),
        });
        let merged = merged.join().expect("a merge does not panic");
        // An appender's error explains the merge's `Stopped`, so it goes first.
        appended.map_err(db(&context))?;
        merged
    })?;
    appender.flush().map_err(db(&context))?;
    duplicates.flush().map_err(db("appending to duplicates"))?;
    drop((appender, duplicates));
    before_commit();
    conn.execute_batch("COMMIT").map_err(db(&context))?;
    Ok(rows)
}

/// The statements of a SQL script, each with the comments before it: a statement ends with a line
/// (not a comment) that ends with `;`. Comments after the last statement are left out.
fn statements(script: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in script.split_inclusive('\n') {
        at += line.len();
        let code = line.trim_end();
        if code.ends_with(';') && !code.trim_start().starts_with("--") {
            out.push(&script[start..at]);
            start = at;
        }
    }
    let rest = &script[start..];
    if rest.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--")) {
        out.push(rest);
    }
    out
}

/// Deletes the temporary files of earlier builds of the same target whose process is gone (a build
/// killed before it could clean up), so that they do not pile up: `.NAME.building-PID` (the
/// database, its WAL, spill and run folders) and any `NAME.<ext>.writing-PID` beside the target
/// (the lookup file being written, `NAME.lookup.writing-PID`, and whatever else is written there
/// the same way).
fn remove_abandoned_builds(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = abandoned_pid(&file, name) else { continue };
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        if !alive {
            tracing::info!(file, "removing an abandoned build's file");
            let path = entry.path();
            let _ = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        }
    }
}

/// The process id in the name of a temporary file of a build of `name`, if it is one.
fn abandoned_pid(file: &str, name: &str) -> Option<u32> {
    let pid = if let Some(rest) = file.strip_prefix(&format!(".{name}.building-")) {
        rest.split('.').next()?
    } else {
        let (head, pid) = file.strip_prefix(&format!("{name}."))?.rsplit_once(".writing-")?;
        if head.is_empty() || head.contains('/') {
            return None;
        }
        pid
    };
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

impl Drop for Loader {
    /// Closes the connection and deletes what is left of the temporary file: all of it after a
    /// failure, nothing after a commit (it was renamed).
    fn drop(&mut self) {
        drop(self.conn.take());
        self.remove_tmp();
    }
}

/// A reject's reason without the values it names, so that rejects of one kind count together:
/// quoted values (`"11222333000300"`, `'-'`) become `…`, and so does a number that starts a word
/// (`expected 30 fields, found 5` → `expected … fields, found …`; `[0-9A-Z]` stays).
const REJECT_REASON: &str = r#"regexp_replace(
    regexp_replace(reason, '"(?:[^"\\]|\\.)*"|''(?:[^''\\]|\\.)*''', '…', 'g'),
    '(^|\s)[0-9]+', '\1…', 'g')"#;

/// Finishes the small tables (`transform.sql`, a statement at a time, each timed in the debug
/// log) and creates the analysts' views (`views.sql`).
fn finish_tables(conn: &Connection) -> Result<(), LoadError> {
    for statement in statements(TRANSFORM) {
        let started = std::time::Instant::now();
        conn.execute_batch(statement).map_err(db("transforming the staging tables (sql/duckdb/transform.sql)"))?;
        let head = statement.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("--")).unwrap_or_default();
        tracing::debug!(statement = head, seconds = started.elapsed().as_secs_f64(), "transform");
    }
    conn.execute_batch(VIEWS).map_err(db("creating the analysts' views (sql/duckdb/views.sql)"))
}

/// The rows of each source file (by id) in the served tables and in `duplicates` (`counts.sql`).
fn counts_per_file(conn: &Connection) -> Result<HashMap<i32, FileCounts>, LoadError> {
    let mut stmt = conn.prepare(COUNTS).map_err(db("counting rows per file"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i32>(0)?,
                FileCounts {
                    rows_loaded: r.get::<_, i64>(1)? as u64,
                    duplicates: r.get::<_, i64>(2)? as u64,
                    duplicates_differing: r.get::<_, i64>(3)? as u64,
                },
            ))
        })
        .map_err(db("counting rows per file"))?;
    rows.collect::<Result<_, _>>().map_err(db("counting rows per file"))
}

/// Checks that every file's rows read = loaded + duplicates + rejected, and records the files
/// with their counts in `source_files`.
fn reconcile(
    conn: &Connection,
    files: Vec<SourceFile>,
    counts: &HashMap<i32, FileCounts>,
) -> Result<Vec<(SourceFile, FileCounts)>, LoadError> {
    conn.execute_batch(
        "CREATE TABLE source_files (id INTEGER PRIMARY KEY, zip VARCHAR, member VARCHAR, kind VARCHAR, \
         rows_read BIGINT, rows_loaded BIGINT, duplicates BIGINT, duplicates_differing BIGINT, rows_rejected BIGINT)",
    )
    .map_err(db("creating source_files"))?;
    let mut out = Vec::new();
    for file in files {
        let c = file.lookup_counts.unwrap_or_else(|| counts.get(&file.id).copied().unwrap_or_default());
        if file.rows_read != c.rows_loaded + c.duplicates + file.rows_rejected {
            return Err(LoadError::Reconcile {
                file: format!("{} ({})", file.zip, file.member),
                read: file.rows_read,
                loaded: c.rows_loaded,
                duplicates: c.duplicates,
                rejected: file.rows_rejected,
            });
        }
        conn.execute(
            "INSERT INTO source_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            duckdb::params![
                file.id,
                file.zip,
                file.member,
                file.kind.name(),
                file.rows_read as i64,
                c.rows_loaded as i64,
                c.duplicates as i64,
                c.duplicates_differing as i64,
                file.rows_rejected as i64
            ],
        )
        .map_err(db("recording source_files"))?;
        out.push((file, c));
    }
    Ok(out)
}

/// Rows per served table (and `rejects`, `duplicates`).
fn table_rows(conn: &Connection) -> Result<Vec<(String, u64)>, LoadError> {
    let tables = [
        "empresas",
        "estabelecimentos",
        "socios",
        "partner_links",
        "partner_identities",
        "simples",
        "regimes_tributarios",
        "municipios",
        "labels",
        "rejects",
        "duplicates",
    ];
    let mut out = Vec::new();
    for table in tables {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .map_err(db(format!("counting {table}")))?;
        out.push((table.to_owned(), n as u64));
    }
    Ok(out)
}

/// Rejected rows per reason (values masked), most first.
fn rejects_by_reason(conn: &Connection) -> Result<Vec<(String, u64)>, LoadError> {
    let sql =
        format!("SELECT {REJECT_REASON} AS reason, count(*) AS n FROM rejects GROUP BY ALL ORDER BY n DESC, reason");
    let mut stmt = conn.prepare(&sql).map_err(db("counting rejects per reason"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))
        .map_err(db("counting rejects per reason"))?;
    rows.collect::<Result<_, _>>().map_err(db("counting rejects per reason"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(script: &str, expected: &[&str]) {
        assert_eq!(statements(script), expected);
    }

    #[test]
    fn temporary_files_of_a_build_are_told_by_name() {
        let name = "registry.duckdb";
        assert_eq!(abandoned_pid(".registry.duckdb.building-123", name), Some(123));
        assert_eq!(abandoned_pid(".registry.duckdb.building-123.runs", name), Some(123));
        assert_eq!(abandoned_pid(".registry.duckdb.building-123.wal", name), Some(123));
        assert_eq!(abandoned_pid("registry.duckdb.lookup.writing-77", name), Some(77));
        assert_eq!(abandoned_pid("registry.duckdb.report.writing-78", name), Some(78));
        assert_eq!(abandoned_pid("registry.duckdb.lookup", name), None);
        assert_eq!(abandoned_pid("registry.duckdb", name), None);
        assert_eq!(abandoned_pid("registry.duckdb.lookup.writing-", name), None);
        assert_eq!(abandoned_pid("registry.duckdb.lookup.writing-12x", name), None);
        assert_eq!(abandoned_pid("other.duckdb.lookup.writing-77", name), None);
        assert_eq!(abandoned_pid("registry.duckdb..writing-77", name), None);
    }

    #[test]
    fn rejects_count_per_reason_without_their_values() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE rejects (reason VARCHAR)").unwrap();
        for reason in [
            "expected 30 fields, found 5",
            "expected 7 fields, found 3",
            r#"invalid CNPJ "11222333000300": wrong check digits: expected 43"#,
            r#"invalid CNPJ "11.222.333/0001-99": wrong check digits: expected 81"#,
            r#"invalid CNPJ "1122-333000181": character '-' is not allowed in a CNPJ"#,
            r#"invalid CNPJ "a \"b\" 1": character '\'' is not allowed in a CNPJ"#,
            r#"invalid cnpj_basico "AB12CD3!": 8 characters of [0-9A-Z] expected"#,
            "record of 2000000 bytes is over the 1048576-byte cap (kept: its beginning)",
        ] {
            conn.execute("INSERT INTO rejects VALUES (?)", [reason]).unwrap();
        }
        let got = rejects_by_reason(&conn).unwrap();
        let expected = [
            ("expected … fields, found …", 2),
            ("invalid CNPJ …: character … is not allowed in a CNPJ", 2),
            ("invalid CNPJ …: wrong check digits: expected …", 2),
            ("invalid cnpj_basico …: … characters of [0-9A-Z] expected", 1),
            ("record of … bytes is over the …-byte cap (kept: its beginning)", 1),
        ];
        assert_eq!(got, expected.map(|(r, n)| (r.to_owned(), n)));
    }

    #[test]
    fn a_script_splits_at_lines_ending_a_statement() {
        check("SELECT 1;\nSELECT 2;\n", &["SELECT 1;\n", "SELECT 2;\n"]);
        check("-- a comment; not an end\nSELECT\n  1;\n", &["-- a comment; not an end\nSELECT\n  1;\n"]);
        check("SELECT 'a;b'\nFROM t;\n-- trailing comment\n", &["SELECT 'a;b'\nFROM t;\n"]);
        check("SELECT 1", &["SELECT 1"]);
        // Every statement of the transform runs on its own.
        let parts = statements(TRANSFORM);
        let count =
            |s: &str| ["CREATE TABLE", "CREATE VIEW", "DROP TABLE"].iter().map(|k| s.matches(k).count()).sum::<usize>();
        assert_eq!(parts.iter().filter(|p| count(p) == 1).count(), count(TRANSFORM));
    }
}
