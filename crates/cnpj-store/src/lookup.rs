//! The point-lookup file beside a DuckDB dataset (`<dataset>.lookup`): every establishment by CNPJ
//! and every company by CNPJ base, as the text rows the record builder reads, in zstd-compressed
//! blocks of about 16 KiB under a sparse index kept in memory. A detail record costs two block
//! reads (`pread`, then the page cache) instead of SQL, which DuckDB plans and runs in ≥ 150 µs a
//! query. Written by the build from the finished dataset; it carries the dataset's `build_id`, and
//! a file of another build is not used.
//!
//! Layout: blocks, then the index of each table (key width, rows, and per block its first key,
//! offset and sizes), the build id, the index's offset and the magic. In a block, an entry is
//! its key (fixed width), a varint length and the row: per column a varint `len + 1`, or 0 for NULL,
//! and the bytes.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use duckdb::arrow::array::{Array, AsArray, StringArray};
use duckdb::{AccessMode, Config, Connection};

use crate::backend::TextRow;
use crate::{COMPANY, ESTABLISHMENT, NO_COMPANY, PARTNER};

const MAGIC: &[u8; 8] = b"CNPJLKP2";
/// Uncompressed bytes per block: one block is read and inflated per lookup.
const BLOCK_BYTES: usize = 16 * 1024;
const ZSTD_LEVEL: i32 = 1;

/// The lookup file of the dataset at `dataset`.
pub fn lookup_path(dataset: &Path) -> PathBuf {
    let mut name = dataset.as_os_str().to_owned();
    name.push(".lookup");
    PathBuf::from(name)
}

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("reading the dataset for the lookup file ({context}): {source}")]
    Dataset { context: String, source: duckdb::Error },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(n);
        }
    }
    None
}

/// Appends one cell to an encoded row.
fn put_cell(out: &mut Vec<u8>, cell: Option<&str>) {
    match cell {
        None => put_varint(out, 0),
        Some(s) => {
            put_varint(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn put_row<'a>(out: &mut Vec<u8>, cells: impl IntoIterator<Item = Option<&'a str>>) {
    cells.into_iter().for_each(|cell| put_cell(out, cell));
}

fn row(bytes: &[u8]) -> Option<TextRow> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let n = varint(bytes, &mut pos)? as usize;
        out.push(match n {
            0 => None,
            n => {
                let cell = bytes.get(pos..pos + n - 1)?;
                pos += n - 1;
                Some(String::from_utf8(cell.to_vec()).ok()?)
            }
        });
    }
    Some(out)
}

struct BlockRef {
    offset: u64,
    compressed: u32,
    raw: u32,
}

/// One table's index: the first key of every block.
struct Table {
    key_width: usize,
    first_keys: Vec<u8>,
    blocks: Vec<BlockRef>,
    rows: u64,
}

impl Table {
    fn new(key_width: usize) -> Table {
        Table { key_width, first_keys: Vec::new(), blocks: Vec::new(), rows: 0 }
    }

    fn first_key(&self, block: usize) -> &[u8] {
        &self.first_keys[block * self.key_width..(block + 1) * self.key_width]
    }
}

/// A raw block on its way to the compressing thread, with the table it belongs to.
type RawBlock = (usize, Vec<u8>);

/// What the compressing thread returns: the file, and the table and compressed size of every
/// block, in file order.
type Compressed = (BufWriter<File>, Vec<(usize, u32)>);

/// Writes a lookup file. Each table is filled by its own [`TableWriter`] (on any thread), in
/// ascending key order; one thread compresses and writes the blocks of all tables in the order
/// they arrive, so the blocks of the tables interleave in the file (the index has every offset).
struct Writer {
    path: PathBuf,
    raw_blocks: Option<SyncSender<RawBlock>>,
    compressing: Option<JoinHandle<std::io::Result<Compressed>>>,
}

impl Writer {
    fn create(path: &Path) -> Result<Writer, LookupError> {
        let io = |source| LookupError::Io { path: path.to_owned(), source };
        let file = File::create(path).map_err(io)?;
        let mut compressor = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(io)?;
        let (raw_blocks, received) = sync_channel::<RawBlock>(8);
        let compressing = std::thread::spawn(move || {
            let mut out = BufWriter::with_capacity(1 << 20, file);
            let mut sizes = Vec::new();
            for (table, raw) in received {
                let compressed = compressor.compress(&raw)?;
                out.write_all(&compressed)?;
                sizes.push((table, compressed.len() as u32));
            }
            Ok((out, sizes))
        });
        Ok(Writer { path: path.to_owned(), raw_blocks: Some(raw_blocks), compressing: Some(compressing) })
    }

    /// The writer of table number `id` (tables are numbered from 0 in index order).
    fn table(&self, id: usize, key_width: usize) -> TableWriter {
        TableWriter {
            id,
            path: self.path.clone(),
            raw_blocks: self.raw_blocks.clone().expect("open until finish"),
            table: Table::new(key_width),
            block: Vec::with_capacity(2 * BLOCK_BYTES),
            first_key: Vec::new(),
            last_key: Vec::new(),
        }
    }

    /// Stops the compressing thread: the file and the compressed sizes of all blocks.
    fn done(&mut self) -> Result<Compressed, LookupError> {
        drop(self.raw_blocks.take());
        let thread = self.compressing.take().expect("done once");
        let result = thread.join().unwrap_or_else(|_| Err(std::io::Error::other("the compressing thread panicked")));
        result.map_err(|source| LookupError::Io { path: self.path.clone(), source })
    }

    /// Writes the index of `tables` (the finished table writers' indexes, in order) and the footer.
    fn finish(mut self, mut tables: Vec<Table>, build_id: &str) -> Result<(), LookupError> {
        let (mut out, sizes) = self.done()?;
        let mut next = vec![0; tables.len()];
        let mut offset = 0u64;
        for (table, compressed) in sizes {
            let block = &mut tables[table].blocks[next[table]];
            (block.offset, block.compressed) = (offset, compressed);
            next[table] += 1;
            offset += u64::from(compressed);
        }
        let mut index = Vec::new();
        put_varint(&mut index, tables.len() as u64);
        for table in &tables {
            put_varint(&mut index, table.key_width as u64);
            put_varint(&mut index, table.rows);
            put_varint(&mut index, table.blocks.len() as u64);
            for (i, block) in table.blocks.iter().enumerate() {
                index.extend_from_slice(table.first_key(i));
                put_varint(&mut index, block.offset);
                put_varint(&mut index, u64::from(block.compressed));
                put_varint(&mut index, u64::from(block.raw));
            }
        }
        put_varint(&mut index, build_id.len() as u64);
        index.extend_from_slice(build_id.as_bytes());
        index.extend_from_slice(&offset.to_le_bytes());
        index.extend_from_slice(MAGIC);
        let io = |source| LookupError::Io { path: self.path.clone(), source };
        out.write_all(&index).map_err(io)?;
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.compressing.is_some() {
            let _ = self.done();
        }
    }
}

/// Fills one table of a lookup file: rows in ascending key order, cut into blocks that go to the
/// compressing thread.
struct TableWriter {
    id: usize,
    path: PathBuf,
    raw_blocks: SyncSender<RawBlock>,
    table: Table,
    block: Vec<u8>,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
}

impl TableWriter {
    /// Appends one row (cells encoded by [`put_row`]) under `key`, which must be greater than the
    /// previous key of the table.
    fn put(&mut self, key: &str, row: &[u8]) -> Result<(), LookupError> {
        if key.len() != self.table.key_width || key.as_bytes() <= self.last_key.as_slice() {
            return Err(LookupError::Invalid {
                path: self.path.clone(),
                reason: format!(
                    "key {key:?} after {:?}: keys must be unique, ascending and {} bytes wide",
                    String::from_utf8_lossy(&self.last_key),
                    self.table.key_width
                ),
            });
        }
        self.table.rows += 1;
        self.last_key.clear();
        self.last_key.extend_from_slice(key.as_bytes());
        if self.block.is_empty() {
            self.first_key.clear();
            self.first_key.extend_from_slice(key.as_bytes());
        }
        self.block.extend_from_slice(key.as_bytes());
        put_varint(&mut self.block, row.len() as u64);
        self.block.extend_from_slice(row);
        if self.block.len() >= BLOCK_BYTES {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), LookupError> {
        if self.block.is_empty() {
            return Ok(());
        }
        self.table.first_keys.extend_from_slice(&self.first_key);
        // The offset and compressed size are known once the compressing thread is done.
        self.table.blocks.push(BlockRef { offset: 0, compressed: 0, raw: self.block.len() as u32 });
        let raw = std::mem::replace(&mut self.block, Vec::with_capacity(2 * BLOCK_BYTES));
        // The compressing thread only stops early on an I/O error, which `Writer::done` returns.
        self.raw_blocks.send((self.id, raw)).map_err(|_| LookupError::Io {
            path: self.path.clone(),
            source: std::io::Error::other("the compressing thread stopped"),
        })
    }

    /// Sends the last block; the table's index (offsets still to be filled in by `Writer::finish`).
    fn finish(mut self) -> Result<Table, LookupError> {
        self.flush_block()?;
        Ok(self.table)
    }
}

/// Reads varints and fixed-width keys from the index.
struct IndexReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl IndexReader<'_> {
    fn varint(&mut self) -> Option<u64> {
        varint(self.bytes, &mut self.pos)
    }

    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let out = self.bytes.get(self.pos..self.pos + n)?;
        self.pos += n;
        Some(out)
    }

    fn table(&mut self) -> Option<Table> {
        let mut table = Table::new(self.varint()? as usize);
        table.rows = self.varint()?;
        for _ in 0..self.varint()? {
            let key = self.bytes(table.key_width)?;
            table.first_keys.extend_from_slice(key);
            let (offset, compressed, raw) = (self.varint()?, self.varint()?, self.varint()?);
            table.blocks.push(BlockRef { offset, compressed: compressed as u32, raw: raw as u32 });
        }
        Some(table)
    }
}

/// An open lookup file.
pub(crate) struct Lookup {
    file: File,
    path: PathBuf,
    pub(crate) build_id: String,
    establishments: Table,
    companies: Table,
}

impl Lookup {
    pub(crate) fn open(path: &Path) -> Result<Lookup, LookupError> {
        let invalid = |reason: &str| LookupError::Invalid { path: path.to_owned(), reason: reason.to_owned() };
        let io = |source| LookupError::Io { path: path.to_owned(), source };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut tail = [0u8; 16];
        if len < 16 || file.read_exact_at(&mut tail, len - 16).is_err() || &tail[8..] != MAGIC {
            return Err(invalid("not a lookup file"));
        }
        let index_at = u64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
        let index_len = (len - 16).checked_sub(index_at).ok_or_else(|| invalid("bad index offset"))?;
        let mut index = vec![0u8; index_len as usize];
        file.read_exact_at(&mut index, index_at).map_err(io)?;
        let mut reader = IndexReader { bytes: &index, pos: 0 };
        let parsed = (|| {
            if reader.varint()? != 2 {
                return None;
            }
            let (establishments, companies) = (reader.table()?, reader.table()?);
            let n = reader.varint()? as usize;
            let build_id = String::from_utf8(reader.bytes(n)?.to_vec()).ok()?;
            Some((establishments, companies, build_id))
        })();
        let (establishments, companies, build_id) = parsed.ok_or_else(|| invalid("corrupt index"))?;
        Ok(Lookup { file, path: path.to_owned(), build_id, establishments, companies })
    }

    /// The establishment row (the `ESTABLISHMENT` columns) of `cnpj`.
    pub(crate) fn establishment(&self, cnpj: &str) -> Result<Option<TextRow>, LookupError> {
        self.get(&self.establishments, cnpj)
    }

    /// The company row of `basico`: `COMPANY` columns, head office CNPJ, latest tax regime,
    /// `opcao_simples`, `opcao_mei`, then the partners' `PARTNER` columns, in contract §2 order.
    pub(crate) fn company(&self, basico: &str) -> Result<Option<TextRow>, LookupError> {
        self.get(&self.companies, basico)
    }

    fn get(&self, table: &Table, key: &str) -> Result<Option<TextRow>, LookupError> {
        let key = key.as_bytes();
        if key.len() != table.key_width {
            return Ok(None);
        }
        // The last block whose first key is not after `key`.
        let (mut lo, mut hi) = (0, table.blocks.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if table.first_key(mid) <= key { lo = mid + 1 } else { hi = mid }
        }
        let Some(i) = lo.checked_sub(1) else { return Ok(None) };
        let block = &table.blocks[i];
        let corrupt =
            || LookupError::Invalid { path: self.path.clone(), reason: format!("corrupt block at {}", block.offset) };
        let mut compressed = vec![0u8; block.compressed as usize];
        self.file
            .read_exact_at(&mut compressed, block.offset)
            .map_err(|source| LookupError::Io { path: self.path.clone(), source })?;
        let raw = zstd::bulk::decompress(&compressed, block.raw as usize).map_err(|_| corrupt())?;
        let mut pos = 0;
        while pos < raw.len() {
            let entry_key = raw.get(pos..pos + table.key_width).ok_or_else(corrupt)?;
            pos += table.key_width;
            let len = varint(&raw, &mut pos).ok_or_else(corrupt)? as usize;
            let value = raw.get(pos..pos + len).ok_or_else(corrupt)?;
            pos += len;
            match entry_key.cmp(key) {
                std::cmp::Ordering::Less => continue,
                std::cmp::Ordering::Equal => return row(value).map(Some).ok_or_else(corrupt),
                std::cmp::Ordering::Greater => break,
            }
        }
        Ok(None)
    }
}

/// Rows of a streamed query, every column `VARCHAR`, the first being the key.
struct Cursor<'a> {
    batches: duckdb::ArrowStream<'a>,
    columns: Vec<StringArray>,
    rows: usize,
    row: usize,
}

impl<'a> Cursor<'a> {
    fn new(batches: duckdb::ArrowStream<'a>) -> Cursor<'a> {
        Cursor { batches, columns: Vec::new(), rows: 0, row: 0 }
    }

    /// Loads the next batch when the current one is done; false at the end.
    fn ready(&mut self) -> bool {
        while self.row >= self.rows {
            let Some(batch) = self.batches.next() else { return false };
            self.columns = batch.columns().iter().map(|c| c.as_string::<i32>().clone()).collect();
            (self.rows, self.row) = (batch.num_rows(), 0);
        }
        true
    }

    fn cell(&self, column: usize) -> Option<&str> {
        let array = &self.columns[column];
        (!array.is_null(self.row)).then(|| array.value(self.row))
    }

    /// The current row's key (after `ready`).
    fn key(&self) -> Option<&str> {
        self.cell(0)
    }

    fn owned(&self, columns: std::ops::Range<usize>) -> TextRow {
        columns.map(|c| self.cell(c).map(str::to_owned)).collect()
    }

    fn width(&self) -> usize {
        self.columns.len()
    }

    /// Whether the current row has key `key` (loading the next batch as needed).
    fn at(&mut self, key: &str) -> bool {
        self.ready() && self.key() == Some(key)
    }
}

/// Writes the lookup file of the finished DuckDB dataset at `dataset` to `out` (through a
/// temporary file renamed into place). Reads each served table once, in its stored key order.
pub fn write_lookup(dataset: &Path, out: &Path) -> Result<(), LookupError> {
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(format!(".writing-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let result = write_to(dataset, &tmp)
        .and_then(|()| std::fs::rename(&tmp, out).map_err(|source| LookupError::Io { path: out.to_owned(), source }));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_to(dataset: &Path, tmp: &Path) -> Result<(), LookupError> {
    let config = Config::default().access_mode(AccessMode::ReadOnly).map_err(query_error("opening"))?;
    let conn = Connection::open_with_flags(dataset, config).map_err(query_error("opening"))?;
    // Insertion order is key order (the transform wrote every served table sorted); the writer
    // checks that keys ascend.
    conn.execute_batch("SET preserve_insertion_order = true; SET memory_limit = '1GB'")
        .map_err(query_error("configuring"))?;
    let build_id: String = conn
        .query_row("SELECT value FROM metadata WHERE key = 'build_id'", [], |r| r.get(0))
        .map_err(query_error("reading the build id"))?;
    let mut writer = Writer::create(tmp)?;
    // The two tables are written at once, each from its own connection: their blocks interleave
    // in the file.
    let (mut establishments, mut companies) = (writer.table(0, 14), writer.table(1, 8));
    let other = conn.try_clone().map_err(query_error("connecting"))?;
    let (written, companies_written) = std::thread::scope(|scope| {
        let thread = scope.spawn(move || write_establishments(&other, &mut establishments).map(|()| establishments));
        let companies_written = write_companies(&conn, &mut companies);
        (thread.join().expect("the establishments' thread does not panic"), companies_written)
    });
    let tables = written.and_then(|establishments| {
        companies_written?;
        Ok(vec![establishments.finish()?, companies.finish()?])
    });
    match tables {
        Ok(tables) => writer.finish(tables, &build_id),
        // An I/O error of the compressing thread explains a table writer's error: it goes first.
        Err(e) => Err(writer.done().err().unwrap_or(e)),
    }
}

/// Maps a DuckDB error to [`LookupError::Dataset`] with what was being read.
fn query_error(context: &str) -> impl FnOnce(duckdb::Error) -> LookupError {
    let context = context.to_owned();
    move |source| LookupError::Dataset { context, source }
}

/// Every establishment by CNPJ, in the table's stored (key) order.
fn write_establishments(conn: &Connection, writer: &mut TableWriter) -> Result<(), LookupError> {
    let mut stmt = conn
        .prepare(&format!("SELECT {ESTABLISHMENT} FROM estabelecimentos e"))
        .map_err(query_error("establishments"))?;
    let mut rows = Cursor::new(stmt.stream_arrow([]).map_err(query_error("establishments"))?);
    let mut row = Vec::new();
    while rows.ready() {
        row.clear();
        put_row(&mut row, (0..rows.width()).map(|c| rows.cell(c)));
        writer.put(rows.key().unwrap_or_default(), &row)?;
        rows.row += 1;
    }
    Ok(())
}

/// Every company by CNPJ base: a merge of the key-sorted tables that make its row.
fn write_companies(conn: &Connection, writer: &mut TableWriter) -> Result<(), LookupError> {
    let queries = [
        format!("SELECT c.cnpj_basico, {COMPANY} FROM empresas c"),
        "SELECT cnpj_basico, cnpj, matriz_filial FROM estabelecimentos".to_owned(),
        "SELECT cnpj_basico, regime, CAST(ano AS VARCHAR), CAST(seq AS VARCHAR) FROM regimes_tributarios".to_owned(),
        "SELECT cnpj_basico, opcao_simples, opcao_mei FROM simples".to_owned(),
        format!("SELECT cnpj_basico, {PARTNER} FROM socios"),
    ];
    let conns =
        queries.iter().map(|_| conn.try_clone()).collect::<Result<Vec<_>, _>>().map_err(query_error("connecting"))?;
    let mut stmts = Vec::new();
    for (c, sql) in conns.iter().zip(&queries) {
        stmts.push(c.prepare(sql).map_err(query_error("companies"))?);
    }
    let mut cursors = Vec::new();
    for stmt in &mut stmts {
        cursors.push(Cursor::new(stmt.stream_arrow([]).map_err(query_error("companies"))?));
    }
    // The row is encoded as it is read: company, head office, regime, Simples, partners.
    let (mut key, mut row, mut head, mut regime) = (String::new(), Vec::new(), String::new(), String::new());
    let mut partners: Vec<TextRow> = Vec::new();
    loop {
        let live: Vec<bool> = cursors.iter_mut().map(Cursor::ready).collect();
        // A NULL key reads as "", which the writer refuses.
        let next = cursors.iter().zip(live).filter(|(_, l)| *l).map(|(c, _)| c.key().unwrap_or_default()).min();
        let Some(next) = next else { break };
        key.clear();
        key.push_str(next);
        let [empresas, estabelecimentos, regimes, simples, socios] = &mut cursors[..] else { unreachable!() };
        row.clear();
        if empresas.at(&key) {
            put_row(&mut row, (1..6).map(|c| empresas.cell(c)));
            while empresas.at(&key) {
                empresas.row += 1;
            }
        } else {
            put_row(&mut row, NO_COMPANY);
        }
        // The head office: the first establishment marked as such, else the first (lowest order).
        // `marked`: whether the one kept in `head` is marked, once there is one.
        let mut marked: Option<bool> = None;
        while estabelecimentos.at(&key) {
            let is_head = estabelecimentos.cell(2) == Some("1");
            if marked.is_none_or(|m| is_head && !m) {
                head.clear();
                head.push_str(estabelecimentos.cell(1).unwrap_or_default());
                marked = Some(is_head);
            }
            estabelecimentos.row += 1;
        }
        put_cell(&mut row, marked.map(|_| head.as_str()));
        // The latest year's regime; the first read wins a tie.
        let mut latest: Option<(i64, i64, bool)> = None;
        while regimes.at(&key) {
            let year = regimes.cell(2).and_then(|y| y.parse().ok()).unwrap_or(i64::MIN);
            let seq = regimes.cell(3).and_then(|s| s.parse().ok()).unwrap_or(i64::MAX);
            if latest.is_none_or(|(y, s, _)| (year, -seq) > (y, -s)) {
                let value = regimes.cell(1);
                regime.clear();
                regime.push_str(value.unwrap_or_default());
                latest = Some((year, seq, value.is_some()));
            }
            regimes.row += 1;
        }
        put_cell(&mut row, latest.and_then(|(_, _, some)| some.then_some(regime.as_str())));
        if simples.at(&key) {
            put_row(&mut row, (1..3).map(|c| simples.cell(c)));
            while simples.at(&key) {
                simples.row += 1;
            }
        } else {
            put_row(&mut row, [None, None]);
        }
        partners.clear();
        while socios.at(&key) {
            partners.push(socios.owned(1..socios.width()));
            socios.row += 1;
        }
        crate::sort_partners(&mut partners);
        put_row(&mut row, partners.iter().flatten().map(Option::as_deref));
        writer.put(&key, &row)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(cells: &[Option<&str>]) -> Vec<u8> {
        let mut row = Vec::new();
        put_row(&mut row, cells.iter().copied());
        row
    }

    fn check(rows: &[(&str, Vec<Option<&str>>)]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        let writer = Writer::create(&path).unwrap();
        let (mut establishments, mut companies) = (writer.table(0, 14), writer.table(1, 8));
        // Both tables at once, as the build writes them: their blocks interleave in the file.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for (key, cells) in rows {
                    establishments.put(key, &encoded(cells)).unwrap();
                }
            });
            for i in 0..2_000 {
                companies.put(&format!("{i:08}"), &encoded(&[Some("company"), Some(&"y".repeat(i % 200))])).unwrap();
            }
        });
        writer.finish(vec![establishments.finish().unwrap(), companies.finish().unwrap()], "build-1").unwrap();
        let lookup = Lookup::open(&path).unwrap();
        assert_eq!(lookup.build_id, "build-1");
        for (key, cells) in rows {
            let expected: TextRow = cells.iter().map(|c| c.map(str::to_owned)).collect();
            assert_eq!(lookup.establishment(key).unwrap(), Some(expected), "{key}");
        }
        for i in [0, 1, 777, 1_999] {
            let expected = vec![Some("company".to_owned()), Some("y".repeat(i % 200))];
            assert_eq!(lookup.company(&format!("{i:08}")).unwrap(), Some(expected));
        }
        assert_eq!(lookup.company("00002000").unwrap(), None);
        for absent in ["00000000000000", "99999999999999", "0000000000000", "00000000000001x"] {
            if !rows.iter().any(|(k, _)| *k == absent) {
                assert_eq!(lookup.establishment(absent).unwrap(), None, "{absent}");
            }
        }
    }

    #[test]
    fn rows_come_back_as_written_across_many_blocks() {
        let keys: Vec<String> = (0..5_000).map(|i| format!("{:014}", i * 7 + 3)).collect();
        let values: Vec<String> = (0..5_000).map(|i| "x".repeat(i % 300)).collect();
        let rows: Vec<(&str, Vec<Option<&str>>)> = keys
            .iter()
            .zip(&values)
            .enumerate()
            .map(|(i, (k, v))| (k.as_str(), vec![Some(k.as_str()), (i % 3 != 0).then_some(v.as_str()), Some("")]))
            .collect();
        check(&rows);
    }

    #[test]
    fn null_and_empty_cells_differ() {
        check(&[("12345678000195", vec![None, Some(""), Some("ção"), None])]);
    }

    #[test]
    fn keys_must_ascend() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::create(&dir.path().join("t.lookup")).unwrap();
        let mut writer = writer.table(0, 8);
        writer.put("00000002", &[]).unwrap();
        for bad in ["00000002", "00000001", "0000003"] {
            assert!(matches!(writer.put(bad, &[]), Err(LookupError::Invalid { .. })), "{bad}");
        }
    }

    #[test]
    fn a_truncated_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        let writer = Writer::create(&path).unwrap();
        let tables = vec![writer.table(0, 14).finish().unwrap(), writer.table(1, 8).finish().unwrap()];
        writer.finish(tables, "b").unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(Lookup::open(&path), Err(LookupError::Invalid { .. })));
    }
}
