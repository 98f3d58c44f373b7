//! The lookup file beside a DuckDB dataset (`<dataset>.lookup`): the text rows a record is built
//! from, by key, in zstd-compressed blocks of about 16 KiB under a sparse index kept in memory.
//! A detail record costs a few block reads (`pread`, then the page cache) instead of SQL, which
//! DuckDB plans and runs in ≥ 150 µs a query. Written by the build's merge as it stores each
//! table (see `feed.rs`); it carries the dataset's `build_id`, and a file of another build is not
//! used.
//!
//! Tables (each keyed by fixed-width ASCII keys, ascending): establishments by CNPJ (the store's
//! establishment columns, but the first and the last, the CNPJ and its base, which the key gives:
//! 22 bytes a row, 7 % of the establishments' compressed blocks; the reader puts them back),
//! companies by `cnpj_basico` (company columns), partners by
//! `cnpj_basico` (every partner's columns and the company a legal-entity partner is, in reading
//! order, one entry per company), Simples by `cnpj_basico` (`opcao_simples`, `opcao_mei`), tax
//! regimes by `cnpj_basico` (the latest year's regime, the first read winning a tie) and partner
//! identities by `partner_id` (contract §14: the identity, its ordinal in the search index and its
//! links to companies; written once the build has made `partner_identities`, see
//! `partners.rs`). Each table of the merge is written in two parts at once (the build stores a
//! table in two halves cut between companies); a table's index lists the blocks of its lower
//! part, then of its upper part.
//!
//! Each table's blocks are compressed with a zstd dictionary trained on its first blocks (see
//! [`TRAIN_BLOCKS`]: at 1.0, 10 % less than zstd alone for the establishments, companies and
//! partners, 4 % for the partner identities; BENCHMARKS.md "The lookup file's dictionaries"); a
//! table too small to train one, or whose blocks it does not make 5 % smaller, goes without.
//!
//! Layout: blocks, then the index of each table (key width, rows, per block its first key,
//! offset, compressed and raw sizes and the XXH3 of its compressed bytes, and the dictionary
//! with its XXH3, empty for none), the build id, the index's offset and the magic. In a block,
//! an entry is its key, a varint length and the row: per cell a varint `len + 1`, or 0 for NULL,
//! and the bytes. A block or dictionary whose checksum does not match is an error (the store then
//! answers through SQL), never a wrong or missing row.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use zstd::zstd_safe::{self, CCtx, CDict, DCtx, DDict};

/// The version: 5 added a dictionary per table and left an establishment's CNPJ and base to its
/// key; 4 the partner identities and a legal-entity partner's company to the partners' cells.
const MAGIC: &[u8; 8] = b"CNPJLKP5";
/// Uncompressed bytes per block: one block is read and inflated per lookup.
const BLOCK_BYTES: usize = 16 * 1024;
const ZSTD_LEVEL: i32 = 1;
/// A table's first blocks, held back to train its dictionary on (all but an eighth) and to judge
/// it by (the last eighth).
const TRAIN_BLOCKS: usize = 512;
/// A dictionary is kept where it makes the blocks it is judged by at least 5 % smaller: inflating
/// a block with one costs about 3.5 µs more (18.9 against 22.3 µs for an establishments' block),
/// and Simples' blocks, which compress 5 to 1 alone, came out larger with one.
const KEEP_BELOW_PERCENT: usize = 95;
/// A dictionary's largest size: 256 KiB gave 1 % less than zstd's default of 110 KiB on blocks
/// sampled from a lookup file at 1.0.
const DICTIONARY_BYTES: usize = 256 * 1024;

/// A row as the store reads it: every cell as text, `None` for NULL.
pub type TextRow = Vec<Option<String>>;

/// The lookup file's tables, in index order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupTable {
    Establishments,
    Companies,
    Partners,
    Simples,
    Regimes,
    PartnerIds,
}

impl LookupTable {
    pub(crate) const ALL: [LookupTable; 6] = [
        LookupTable::Establishments,
        LookupTable::Companies,
        LookupTable::Partners,
        LookupTable::Simples,
        LookupTable::Regimes,
        LookupTable::PartnerIds,
    ];

    fn key_width(self) -> usize {
        match self {
            LookupTable::Establishments => 14,
            LookupTable::PartnerIds => 17,
            _ => 8,
        }
    }
}

/// Which half of a table (cut between companies) a writer fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Lower,
    Upper,
}

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
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(crate) fn varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
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
pub(crate) fn put_cell(out: &mut Vec<u8>, cell: Option<&str>) {
    match cell {
        None => put_varint(out, 0),
        Some(s) => {
            put_varint(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

/// The cells of an encoded row.
fn row(bytes: &[u8]) -> Option<TextRow> {
    Some(cells(bytes)?.into_iter().map(|c| c.map(str::to_owned)).collect())
}

#[derive(Clone, Copy)]
struct BlockRef {
    offset: u64,
    compressed: u32,
    raw: u32,
    checksum: u64,
}

/// One table's index (or one part of it, while writing): the first key of every block, and (once
/// read) the dictionary its blocks are inflated with.
struct Table {
    key_width: usize,
    first_keys: Vec<u8>,
    blocks: Vec<BlockRef>,
    rows: u64,
    dictionary: Option<DDict<'static>>,
}

impl Table {
    fn new(key_width: usize) -> Table {
        Table { key_width, first_keys: Vec::new(), blocks: Vec::new(), rows: 0, dictionary: None }
    }

    fn first_key(&self, block: usize) -> &[u8] {
        &self.first_keys[block * self.key_width..(block + 1) * self.key_width]
    }

    /// The last block whose first key is not after `key` (None: `key` is before every block).
    fn block_for(&self, key: &[u8]) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.blocks.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.first_key(mid) <= key { lo = mid + 1 } else { hi = mid }
        }
        lo.checked_sub(1)
    }
}

/// A raw block on its way to the compressing thread, with the (table, part) it belongs to.
type RawBlock = (usize, Vec<u8>);

/// What the compressing thread returns: the file, the (table, part), compressed size and
/// checksum of every block, in file order, and each table's dictionary (empty for none).
type Compressed = (BufWriter<File>, Vec<(usize, u32, u64)>, Vec<Vec<u8>>);

fn zstd_error(code: usize) -> std::io::Error {
    std::io::Error::other(format!("zstd: {}", zstd_safe::get_error_name(code)))
}

/// A table's dictionary: its first blocks while they are too few to train it, then the trained
/// dictionary (`None` when training failed: too few or too alike samples).
enum Dictionary {
    Training(Vec<RawBlock>),
    Trained(Option<(Vec<u8>, CDict<'static>)>),
}

/// The compressing thread's state: blocks are written in the order they arrive, except a
/// table's first blocks, which wait for its dictionary.
struct Compressing {
    out: BufWriter<File>,
    sizes: Vec<(usize, u32, u64)>,
    context: CCtx<'static>,
    compressed: Vec<u8>,
    dictionaries: Vec<Dictionary>,
}

impl Compressing {
    fn new(file: File) -> std::io::Result<Compressing> {
        let context = CCtx::try_create().ok_or_else(|| std::io::Error::other("zstd: no compression context"))?;
        Ok(Compressing {
            out: BufWriter::with_capacity(1 << 20, file),
            sizes: Vec::new(),
            context,
            compressed: Vec::new(),
            dictionaries: LookupTable::ALL.iter().map(|_| Dictionary::Training(Vec::new())).collect(),
        })
    }

    fn block(&mut self, slot: usize, raw: Vec<u8>) -> std::io::Result<()> {
        match &mut self.dictionaries[slot / 2] {
            Dictionary::Training(first) => {
                first.push((slot, raw));
                if first.len() >= TRAIN_BLOCKS {
                    self.train(slot / 2)?;
                }
                Ok(())
            }
            Dictionary::Trained(_) => self.write(slot, &raw),
        }
    }

    /// Trains table `table`'s dictionary on the blocks held back and keeps it if it pays (see
    /// [`KEEP_BELOW_PERCENT`]), then writes them.
    fn train(&mut self, table: usize) -> std::io::Result<()> {
        let Dictionary::Training(first) = &mut self.dictionaries[table] else { return Ok(()) };
        let first = std::mem::take(first);
        let (training, judged) = first.split_at(first.len() - first.len() / 8);
        let sizes: Vec<usize> = training.iter().map(|(_, raw)| raw.len()).collect();
        let samples: Vec<u8> = training.iter().flat_map(|(_, raw)| raw.iter().copied()).collect();
        let trained = zstd::dict::from_continuous(&samples, &sizes, DICTIONARY_BYTES)
            .ok()
            .and_then(|bytes| CDict::try_create(&bytes, ZSTD_LEVEL).map(|prepared| (bytes, prepared)));
        let kept = match trained {
            Some((bytes, prepared)) if !judged.is_empty() => {
                let (mut with, mut without) = (0, 0);
                for (_, raw) in judged {
                    with += compress(&mut self.context, &mut self.compressed, raw, Some(&prepared))?;
                    without += compress(&mut self.context, &mut self.compressed, raw, None)?;
                }
                (with * 100 <= without * KEEP_BELOW_PERCENT).then_some((bytes, prepared))
            }
            _ => None,
        };
        self.dictionaries[table] = Dictionary::Trained(kept);
        first.into_iter().try_for_each(|(slot, raw)| self.write(slot, &raw))
    }

    fn write(&mut self, slot: usize, raw: &[u8]) -> std::io::Result<()> {
        let dictionary = match &self.dictionaries[slot / 2] {
            Dictionary::Trained(Some((_, prepared))) => Some(prepared),
            _ => None,
        };
        compress(&mut self.context, &mut self.compressed, raw, dictionary)?;
        self.out.write_all(&self.compressed)?;
        let checksum = xxhash_rust::xxh3::xxh3_64(&self.compressed);
        self.sizes.push((slot, self.compressed.len() as u32, checksum));
        Ok(())
    }

    /// Trains the dictionaries of the tables that had too few blocks, writes their blocks.
    fn finish(mut self) -> std::io::Result<Compressed> {
        (0..self.dictionaries.len()).try_for_each(|table| self.train(table))?;
        let dictionaries = self
            .dictionaries
            .into_iter()
            .map(|d| match d {
                Dictionary::Trained(Some((bytes, _))) => bytes,
                _ => Vec::new(),
            })
            .collect();
        Ok((self.out, self.sizes, dictionaries))
    }
}

/// Compresses `raw` into `out`, with `dictionary` if given; the compressed size.
fn compress(
    context: &mut CCtx<'static>,
    out: &mut Vec<u8>,
    raw: &[u8],
    dictionary: Option<&CDict<'static>>,
) -> std::io::Result<usize> {
    out.clear();
    out.reserve(zstd_safe::compress_bound(raw.len()));
    match dictionary {
        Some(dictionary) => context.compress_using_cdict(out, raw, dictionary),
        None => context.compress(out, raw, ZSTD_LEVEL),
    }
    .map_err(zstd_error)
}

fn slot(table: LookupTable, part: Part) -> usize {
    table as usize * 2 + usize::from(part == Part::Upper)
}

/// Writes a lookup file. Each (table, part) is filled by its own [`TableWriter`] (on any
/// thread), in ascending key order; one thread compresses and writes the blocks in the order they
/// arrive, so blocks of all tables interleave in the file (the index has every offset).
pub(crate) struct Writer {
    path: PathBuf,
    raw_blocks: Option<SyncSender<RawBlock>>,
    compressing: Option<JoinHandle<std::io::Result<Compressed>>>,
}

impl Writer {
    pub(crate) fn create(path: &Path) -> Result<Writer, LookupError> {
        let io = |source| LookupError::Io { path: path.to_owned(), source };
        let file = File::create(path).map_err(io)?;
        let mut state = Compressing::new(file).map_err(io)?;
        let (raw_blocks, received) = sync_channel::<RawBlock>(8);
        let compressing = std::thread::spawn(move || {
            for (slot, raw) in received {
                state.block(slot, raw)?;
            }
            state.finish()
        });
        Ok(Writer { path: path.to_owned(), raw_blocks: Some(raw_blocks), compressing: Some(compressing) })
    }

    /// The writer of one part of `table`.
    pub(crate) fn table(&self, table: LookupTable, part: Part) -> Result<TableWriter, LookupError> {
        let raw_blocks = self.raw_blocks.clone().ok_or_else(|| LookupError::Invalid {
            path: self.path.clone(),
            reason: "the lookup file is already finished".into(),
        })?;
        Ok(TableWriter {
            slot: slot(table, part),
            path: self.path.clone(),
            raw_blocks,
            table: Table::new(table.key_width()),
            block: Vec::with_capacity(2 * BLOCK_BYTES),
            first_key: Vec::new(),
            last_key: Vec::new(),
        })
    }

    /// Stops the compressing thread: the file and the sizes of all blocks.
    fn done(&mut self) -> Result<Compressed, LookupError> {
        drop(self.raw_blocks.take());
        let thread = self.compressing.take().ok_or_else(|| LookupError::Invalid {
            path: self.path.clone(),
            reason: "the lookup file is already finished".into(),
        })?;
        let result = thread.join().unwrap_or_else(|_| Err(std::io::Error::other("the compressing thread panicked")));
        result.map_err(|source| LookupError::Io { path: self.path.clone(), source })
    }

    /// Writes the index and the footer. `parts` are the finished table writers (a table or part
    /// that never got a writer is empty).
    pub(crate) fn finish(mut self, parts: Vec<FinishedPart>, build_id: &str) -> Result<(), LookupError> {
        let (mut out, sizes, dictionaries) = self.done()?;
        let mut slots: Vec<Option<Table>> = (0..LookupTable::ALL.len() * 2).map(|_| None).collect();
        for FinishedPart(slot, table) in parts {
            slots[slot] = Some(table);
        }
        let mut next = vec![0; slots.len()];
        let mut offset = 0u64;
        for (slot, compressed, checksum) in sizes {
            let table = slots[slot].as_mut().ok_or_else(|| LookupError::Invalid {
                path: self.path.clone(),
                reason: "a block of a table part that was not finished".into(),
            })?;
            let block = &mut table.blocks[next[slot]];
            (block.offset, block.compressed, block.checksum) = (offset, compressed, checksum);
            next[slot] += 1;
            offset += u64::from(compressed);
        }
        let mut index = Vec::new();
        put_varint(&mut index, LookupTable::ALL.len() as u64);
        for table in LookupTable::ALL {
            let lower = slots[slot(table, Part::Lower)].take();
            let upper = slots[slot(table, Part::Upper)].take();
            let parts: Vec<Table> = [lower, upper].into_iter().flatten().collect();
            put_varint(&mut index, table.key_width() as u64);
            put_varint(&mut index, parts.iter().map(|t| t.rows).sum());
            put_varint(&mut index, parts.iter().map(|t| t.blocks.len() as u64).sum());
            for part in &parts {
                for (i, block) in part.blocks.iter().enumerate() {
                    index.extend_from_slice(part.first_key(i));
                    put_varint(&mut index, block.offset);
                    put_varint(&mut index, u64::from(block.compressed));
                    put_varint(&mut index, u64::from(block.raw));
                    index.extend_from_slice(&block.checksum.to_le_bytes());
                }
            }
            let dictionary = &dictionaries[table as usize];
            put_varint(&mut index, dictionary.len() as u64);
            index.extend_from_slice(dictionary);
            index.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(dictionary).to_le_bytes());
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

/// A finished part of a table, for [`Writer::finish`].
pub(crate) struct FinishedPart(usize, Table);

/// Fills one part of a table: rows in ascending key order, cut into blocks that go to the
/// compressing thread.
pub(crate) struct TableWriter {
    slot: usize,
    path: PathBuf,
    raw_blocks: SyncSender<RawBlock>,
    table: Table,
    block: Vec<u8>,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
}

impl TableWriter {
    /// Appends one row (cells encoded by [`put_cell`]) under `key`, which must be greater than
    /// the previous key of the part.
    pub(crate) fn put(&mut self, key: &str, row: &[u8]) -> Result<(), LookupError> {
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
        // Offset, compressed size and checksum are known once the compressing thread is done.
        self.table.blocks.push(BlockRef { offset: 0, compressed: 0, raw: self.block.len() as u32, checksum: 0 });
        let raw = std::mem::replace(&mut self.block, Vec::with_capacity(2 * BLOCK_BYTES));
        // The compressing thread only stops early on an I/O error, which `Writer::done` returns.
        self.raw_blocks.send((self.slot, raw)).map_err(|_| LookupError::Io {
            path: self.path.clone(),
            source: std::io::Error::other("the compressing thread stopped"),
        })
    }

    /// Sends the last block; the part's index (offsets filled in by `Writer::finish`).
    pub(crate) fn finish(mut self) -> Result<FinishedPart, LookupError> {
        self.flush_block()?;
        Ok(FinishedPart(self.slot, self.table))
    }
}

/// Reads varints and fixed-width keys from the index.
struct IndexReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> IndexReader<'a> {
    fn varint(&mut self) -> Option<u64> {
        varint(self.bytes, &mut self.pos)
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.pos..self.pos.checked_add(n)?)?;
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
            let checksum = u64::from_le_bytes(self.bytes(8)?.try_into().ok()?);
            table.blocks.push(BlockRef { offset, compressed: compressed as u32, raw: raw as u32, checksum });
        }
        let n = self.varint()? as usize;
        let dictionary = self.bytes(n)?;
        let checksum = u64::from_le_bytes(self.bytes(8)?.try_into().ok()?);
        if xxhash_rust::xxh3::xxh3_64(dictionary) != checksum {
            return None;
        }
        if n > 0 {
            table.dictionary = Some(DDict::try_create(dictionary)?);
        }
        Some(table)
    }
}

/// An open lookup file.
pub struct Lookup {
    file: File,
    path: PathBuf,
    build_id: String,
    tables: Vec<Table>,
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lookup({})", self.path.display())
    }
}

impl Lookup {
    pub fn open(path: &Path) -> Result<Lookup, LookupError> {
        let invalid = |reason: &str| LookupError::Invalid { path: path.to_owned(), reason: reason.to_owned() };
        let io = |source| LookupError::Io { path: path.to_owned(), source };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut tail = [0u8; 16];
        if len < 16 || file.read_exact_at(&mut tail, len - 16).is_err() || &tail[8..] != MAGIC {
            return Err(invalid(&crate::refused_format("lookup file", &tail[8..], MAGIC)));
        }
        let index_at = u64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
        let index_len = (len - 16).checked_sub(index_at).ok_or_else(|| invalid("bad index offset"))?;
        let mut index = vec![0u8; index_len as usize];
        file.read_exact_at(&mut index, index_at).map_err(io)?;
        let mut reader = IndexReader { bytes: &index, pos: 0 };
        let parsed = (|| {
            let n = reader.varint()? as usize;
            if n != LookupTable::ALL.len() {
                return None;
            }
            let tables = (0..n).map(|_| reader.table()).collect::<Option<Vec<_>>>()?;
            let n = reader.varint()? as usize;
            let build_id = String::from_utf8(reader.bytes(n)?.to_vec()).ok()?;
            Some((tables, build_id))
        })();
        let (tables, build_id) = parsed.ok_or_else(|| invalid("corrupt index"))?;
        Ok(Lookup { file, path: path.to_owned(), build_id, tables })
    }

    /// The build this file was written for.
    pub fn build_id(&self) -> &str {
        &self.build_id
    }

    /// Rows in `table`.
    pub fn rows(&self, table: LookupTable) -> u64 {
        self.tables[table as usize].rows
    }

    /// A reader that keeps the last block it inflated of each table (see [`Reader`]).
    pub fn reader(&self) -> Reader<'_> {
        Reader { lookup: self, kept: Default::default() }
    }

    /// The row of `key` in `table`.
    pub fn get(&self, table: LookupTable, key: &str) -> Result<Option<TextRow>, LookupError> {
        self.reader().get(table, key)
    }

    /// Every establishment of the company `basico`, in CNPJ order.
    pub fn establishments_of(&self, basico: &str) -> Result<Vec<TextRow>, LookupError> {
        let t = &self.tables[LookupTable::Establishments as usize];
        let basico = basico.as_bytes();
        if basico.len() != 8 {
            return Ok(Vec::new());
        }
        // '0' is the lowest character of a CNPJ: every establishment of the company comes after.
        let mut first = [b'0'; 14];
        first[..8].copy_from_slice(basico);
        let mut rows = Vec::new();
        let start = t.block_for(&first).unwrap_or(0);
        self.scan(t, start, |key, value| match key[..8].cmp(basico) {
            std::cmp::Ordering::Less => Ok(true),
            std::cmp::Ordering::Equal => {
                rows.push(self.row(LookupTable::Establishments, key, value)?);
                Ok(true)
            }
            std::cmp::Ordering::Greater => Ok(false),
        })?;
        Ok(rows)
    }

    /// The entries of `table` from the first key not before `from`, in key order, block by block.
    pub(crate) fn entries(&self, table: LookupTable, from: &[u8]) -> Result<Entries<'_>, LookupError> {
        let t = &self.tables[table as usize];
        let mut entries = Entries {
            lookup: self,
            inflater: Inflater::new(self)?,
            table: t,
            next_block: t.block_for(from).unwrap_or(0),
            raw: Vec::new(),
            pos: 0,
        };
        while entries.peek()?.is_some_and(|(key, _)| key < from) {
            entries.advance();
        }
        Ok(entries)
    }

    /// Calls `each` with the entries from block `start` on, until it returns `false` or the
    /// table ends.
    fn scan(
        &self,
        table: &Table,
        start: usize,
        mut each: impl FnMut(&[u8], &[u8]) -> Result<bool, LookupError>,
    ) -> Result<(), LookupError> {
        for block in &table.blocks[start.min(table.blocks.len())..] {
            let raw = self.block(table, block)?;
            let mut pos = 0;
            while pos < raw.len() {
                let key = raw.get(pos..pos + table.key_width).ok_or_else(|| self.corrupt("a key is cut"))?;
                pos += table.key_width;
                let len = varint(&raw, &mut pos).ok_or_else(|| self.corrupt("a length is cut"))? as usize;
                let value = raw.get(pos..pos + len).ok_or_else(|| self.corrupt("a row is cut"))?;
                pos += len;
                if !each(key, value)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The value of `key` in the inflated block `raw` of `table`, if there.
    fn value_in<'r>(&self, table: &Table, raw: &'r [u8], key: &[u8]) -> Result<Option<&'r [u8]>, LookupError> {
        let mut pos = 0;
        while pos < raw.len() {
            let entry = raw.get(pos..pos + table.key_width).ok_or_else(|| self.corrupt("a key is cut"))?;
            pos += table.key_width;
            let len = varint(raw, &mut pos).ok_or_else(|| self.corrupt("a length is cut"))? as usize;
            let value = raw.get(pos..pos + len).ok_or_else(|| self.corrupt("a row is cut"))?;
            pos += len;
            match entry.cmp(key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Ok(Some(value)),
                std::cmp::Ordering::Greater => return Ok(None),
            }
        }
        Ok(None)
    }

    /// One block, read, checked and inflated (with the thread's inflater: making a zstd context
    /// costs more than inflating a block, and was 10 % of the API's CPU under detail lookups at
    /// 1.0 by `perf`, BENCHMARKS.md "Detail lookups with the metrics on").
    fn block(&self, table: &Table, block: &BlockRef) -> Result<Vec<u8>, LookupError> {
        thread_local! {
            static INFLATER: RefCell<Option<Inflater>> = const { RefCell::new(None) };
        }
        INFLATER.with_borrow_mut(|kept| {
            let inflater = match kept {
                Some(inflater) => inflater,
                None => kept.insert(Inflater::new(self)?),
            };
            let mut raw = Vec::new();
            inflater.block(self, table, block, &mut raw)?;
            Ok(raw)
        })
    }

    /// The row of `key` in `table` as the store reads it, from its encoded cells `value`: an
    /// establishment's CNPJ and base put back from its key.
    fn row(&self, table: LookupTable, key: &[u8], value: &[u8]) -> Result<TextRow, LookupError> {
        let corrupt = || self.corrupt("a row does not decode");
        let mut row = row(value).ok_or_else(corrupt)?;
        if table == LookupTable::Establishments {
            let cnpj = std::str::from_utf8(key).ok().filter(|k| k.is_ascii() && k.len() == 14).ok_or_else(corrupt)?;
            row.insert(0, Some(cnpj.to_owned()));
            row.push(Some(cnpj[..8].to_owned()));
        }
        Ok(row)
    }

    fn corrupt(&self, reason: &str) -> LookupError {
        LookupError::Invalid { path: self.path.clone(), reason: reason.to_owned() }
    }
}

/// An entry of a lookup table: its key and its encoded row.
pub(crate) type Entry<'a> = (&'a [u8], &'a [u8]);

/// Reads, checks and inflates blocks with one zstd context and buffers kept across blocks (a
/// context per block costs more than a 16 KiB block's inflating when a whole table is read).
struct Inflater {
    zstd: DCtx<'static>,
    compressed: Vec<u8>,
}

impl Inflater {
    fn new(lookup: &Lookup) -> Result<Inflater, LookupError> {
        let zstd = DCtx::try_create().ok_or_else(|| LookupError::Io {
            path: lookup.path.clone(),
            source: std::io::Error::other("zstd: no decompression context"),
        })?;
        Ok(Inflater { zstd, compressed: Vec::new() })
    }

    /// Block `block` of `table` of `lookup`, inflated into `raw`.
    fn block(
        &mut self,
        lookup: &Lookup,
        table: &Table,
        block: &BlockRef,
        raw: &mut Vec<u8>,
    ) -> Result<(), LookupError> {
        self.compressed.resize(block.compressed as usize, 0);
        lookup
            .file
            .read_exact_at(&mut self.compressed, block.offset)
            .map_err(|source| LookupError::Io { path: lookup.path.clone(), source })?;
        if xxhash_rust::xxh3::xxh3_64(&self.compressed) != block.checksum {
            return Err(lookup.corrupt(&format!("the block at {} does not match its checksum", block.offset)));
        }
        raw.clear();
        raw.reserve(block.raw as usize);
        let inflated = match &table.dictionary {
            Some(dictionary) => self.zstd.decompress_using_ddict(raw, &self.compressed, dictionary),
            None => self.zstd.decompress(raw, &self.compressed),
        };
        match inflated {
            Ok(n) if n == block.raw as usize => Ok(()),
            _ => Err(lookup.corrupt(&format!("the block at {} does not inflate", block.offset))),
        }
    }
}

/// A cursor over one table of a lookup file, in key order (see [`Lookup::entries`]).
pub(crate) struct Entries<'a> {
    lookup: &'a Lookup,
    inflater: Inflater,
    table: &'a Table,
    next_block: usize,
    raw: Vec<u8>,
    pos: usize,
}

impl Entries<'_> {
    /// The current entry (key, encoded row), `None` past the end; reads the next block when the
    /// current one is used up.
    pub(crate) fn peek(&mut self) -> Result<Option<Entry<'_>>, LookupError> {
        while self.pos >= self.raw.len() {
            let Some(block) = self.table.blocks.get(self.next_block) else { return Ok(None) };
            self.inflater.block(self.lookup, self.table, block, &mut self.raw)?;
            self.pos = 0;
            self.next_block += 1;
        }
        let width = self.table.key_width;
        let raw = &self.raw;
        let mut pos = self.pos + width;
        let key = raw.get(self.pos..pos).ok_or_else(|| self.lookup.corrupt("a key is cut"))?;
        let len = varint(raw, &mut pos).ok_or_else(|| self.lookup.corrupt("a length is cut"))? as usize;
        let value = raw.get(pos..pos + len).ok_or_else(|| self.lookup.corrupt("a row is cut"))?;
        Ok(Some((key, value)))
    }

    /// Moves past the current entry (which [`Entries::peek`] read).
    pub(crate) fn advance(&mut self) {
        let mut pos = self.pos + self.table.key_width;
        let len = varint(&self.raw, &mut pos).unwrap_or(0) as usize;
        self.pos = pos + len;
    }
}

/// The cells of an encoded row, borrowed (`None` when it does not decode).
pub(crate) fn cells(bytes: &[u8]) -> Option<Vec<Option<&str>>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let n = varint(bytes, &mut pos)? as usize;
        if n == 0 {
            out.push(None);
        } else {
            let cell = bytes.get(pos..pos + n - 1)?;
            pos += n - 1;
            out.push(Some(std::str::from_utf8(cell).ok()?));
        }
    }
    Some(out)
}

/// Rows read one key after another, as an export reads the rows of a search in key order: the
/// last block inflated of each table is kept, so that a block is inflated once however many of
/// the keys asked it holds ([`Lookup::get`] inflates a block per key: three per establishment
/// with its company and partners, most of an export's time).
pub struct Reader<'a> {
    lookup: &'a Lookup,
    kept: [Option<(usize, Vec<u8>)>; LookupTable::ALL.len()],
}

impl<'a> Reader<'a> {
    /// The file read.
    pub fn lookup(&self) -> &'a Lookup {
        self.lookup
    }

    /// The row of `key` in `table`, as [`Lookup::get`] reads it.
    pub fn get(&mut self, table: LookupTable, key: &str) -> Result<Option<TextRow>, LookupError> {
        let lookup = self.lookup;
        let t = &lookup.tables[table as usize];
        if key.len() != t.key_width {
            return Ok(None);
        }
        let Some(i) = t.block_for(key.as_bytes()) else { return Ok(None) };
        let kept = &mut self.kept[table as usize];
        let raw = match kept {
            Some((at, raw)) if *at == i => raw,
            _ => &mut kept.insert((i, lookup.block(t, &t.blocks[i])?)).1,
        };
        match lookup.value_in(t, raw, key.as_bytes())? {
            Some(value) => lookup.row(table, key.as_bytes(), value).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(cells: &[Option<&str>]) -> Vec<u8> {
        let mut row = Vec::new();
        cells.iter().for_each(|c| put_cell(&mut row, *c));
        row
    }

    /// An establishment's row as read: the cells written, between its CNPJ and its base.
    fn establishment(key: &str, cells: &[Option<&str>]) -> TextRow {
        let mut row = vec![Some(key.to_owned())];
        row.extend(cells.iter().map(|c| c.map(str::to_owned)));
        row.push(Some(key[..8].to_owned()));
        row
    }

    /// Writes `rows` as establishments (lower part: the first half, upper: the rest, both at once)
    /// and 2,000 companies.
    fn write(path: &Path, rows: &[(&str, Vec<Option<&str>>)]) {
        let writer = Writer::create(path).unwrap();
        let (lower, upper) = rows.split_at(rows.len() / 2);
        let parts = std::thread::scope(|scope| {
            let mut halves = Vec::new();
            for (part, rows) in [(Part::Lower, lower), (Part::Upper, upper)] {
                let mut w = writer.table(LookupTable::Establishments, part).unwrap();
                halves.push(scope.spawn(move || {
                    for (key, cells) in rows {
                        w.put(key, &encoded(cells)).unwrap();
                    }
                    w.finish().unwrap()
                }));
            }
            let mut companies = writer.table(LookupTable::Companies, Part::Lower).unwrap();
            for i in 0..2_000 {
                companies.put(&format!("{i:08}"), &encoded(&[Some("company"), Some(&"y".repeat(i % 200))])).unwrap();
            }
            let mut parts: Vec<FinishedPart> = halves.into_iter().map(|h| h.join().unwrap()).collect();
            parts.push(companies.finish().unwrap());
            parts
        });
        writer.finish(parts, "build-1").unwrap();
    }

    /// Writes `rows` and reads every one back.
    fn check(rows: &[(&str, Vec<Option<&str>>)]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        write(&path, rows);
        let lookup = Lookup::open(&path).unwrap();
        assert_eq!(lookup.build_id(), "build-1");
        assert_eq!(lookup.rows(LookupTable::Establishments), rows.len() as u64);
        for (key, cells) in rows {
            assert_eq!(lookup.get(LookupTable::Establishments, key).unwrap(), Some(establishment(key, cells)), "{key}");
        }
        for i in [0, 1, 777, 1_999] {
            let expected = vec![Some("company".to_owned()), Some("y".repeat(i % 200))];
            assert_eq!(lookup.get(LookupTable::Companies, &format!("{i:08}")).unwrap(), Some(expected));
        }
        // One reader for every key in order, a company's and an absent key's between: each row
        // as `get` reads it, from blocks kept or not.
        let mut reader = lookup.reader();
        for (i, (key, cells)) in rows.iter().enumerate() {
            assert_eq!(reader.get(LookupTable::Establishments, key).unwrap(), Some(establishment(key, cells)), "{key}");
            let company = format!("{:08}", i % 2_000);
            assert_eq!(reader.get(LookupTable::Companies, &company).unwrap().unwrap()[0].as_deref(), Some("company"));
            let absent = format!("{key}x");
            assert_eq!(reader.get(LookupTable::Establishments, &absent[1..]).unwrap(), None, "{absent}");
        }
        assert_eq!(lookup.get(LookupTable::Companies, "00002000").unwrap(), None);
        assert_eq!(lookup.get(LookupTable::Partners, "00000001").unwrap(), None, "an empty table");
        for absent in ["00000000000000", "99999999999999", "0000000000000", "00000000000001x"] {
            if !rows.iter().any(|(k, _)| *k == absent) {
                assert_eq!(lookup.get(LookupTable::Establishments, absent).unwrap(), None, "{absent}");
            }
        }
    }

    #[test]
    fn rows_come_back_as_written_across_many_blocks_and_both_parts() {
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
    fn a_table_of_many_blocks_is_compressed_with_its_dictionary() {
        // Words of a vocabulary too large to repeat within a block, as names and streets are.
        let word = |n: u64| format!("{:x}", n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16);
        let rows: Vec<(String, Vec<String>)> = (0..200_000u64)
            .map(|i| {
                let h = i.wrapping_mul(0xD1B5_4A32_D192_ED03) >> 20;
                let cells = vec![word(h % 3_000), word(h / 3_000 % 3_000), format!("{:08}", h % 100_000_000)];
                (format!("{:014}", i * 13), cells)
            })
            .collect();
        let borrowed: Vec<(&str, Vec<Option<&str>>)> =
            rows.iter().map(|(k, cells)| (k.as_str(), cells.iter().map(|c| Some(c.as_str())).collect())).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        write(&path, &borrowed);
        let lookup = Lookup::open(&path).unwrap();
        let table = &lookup.tables[LookupTable::Establishments as usize];
        assert!(table.blocks.len() > TRAIN_BLOCKS, "{} blocks: the dictionary is trained early", table.blocks.len());
        assert!(table.dictionary.is_some());
        for (key, cells) in borrowed.iter().step_by(997) {
            assert_eq!(lookup.get(LookupTable::Establishments, key).unwrap(), Some(establishment(key, cells)), "{key}");
        }
        // Smaller than the same blocks compressed alone.
        let (mut with, mut without) = (0, 0);
        for block in &table.blocks {
            let raw = lookup.block(table, block).unwrap();
            with += block.compressed as usize;
            without += zstd::bulk::compress(&raw, ZSTD_LEVEL).unwrap().len();
        }
        assert!(with * 20 < without * 19, "{with} bytes with the dictionary, {without} without");
        // The index is mostly the dictionary: a bit flipped there is seen when the file is opened.
        drop(lookup);
        let mut bytes = std::fs::read(&path).unwrap();
        let index_at = u64::from_le_bytes(bytes[bytes.len() - 16..bytes.len() - 8].try_into().unwrap()) as usize;
        let dictionary_at = index_at + (bytes.len() - index_at) / 2;
        bytes[dictionary_at] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(Lookup::open(&path), Err(LookupError::Invalid { .. })));
    }

    #[test]
    fn a_dictionary_that_does_not_pay_is_left_out() {
        // Random digits: what one block of them has in common with another, zstd finds alone.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        let writer = Writer::create(&path).unwrap();
        let mut w = writer.table(LookupTable::Simples, Part::Lower).unwrap();
        let mut state = 1u64;
        let mut digits = || {
            (0..200)
                .map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    char::from(b'0' + (state >> 59) as u8 % 10)
                })
                .collect::<String>()
        };
        for i in 0..60_000 {
            w.put(&format!("{i:08}"), &encoded(&[Some(&digits())])).unwrap();
        }
        let part = w.finish().unwrap();
        writer.finish(vec![part], "b").unwrap();
        let lookup = Lookup::open(&path).unwrap();
        let table = &lookup.tables[LookupTable::Simples as usize];
        assert!(table.blocks.len() > TRAIN_BLOCKS, "{} blocks", table.blocks.len());
        assert!(table.dictionary.is_none());
        assert_eq!(
            lookup.get(LookupTable::Simples, "00059999").unwrap().unwrap()[0].as_deref().map(str::len),
            Some(200)
        );
    }

    #[test]
    fn null_and_empty_cells_differ() {
        check(&[("12345678000195", vec![None, Some(""), Some("ção"), None])]);
    }

    #[test]
    fn establishments_of_a_company_span_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        let writer = Writer::create(&path).unwrap();
        let mut w = writer.table(LookupTable::Establishments, Part::Lower).unwrap();
        let big = "z".repeat(3_000);
        for basico in ["11111111", "22222222", "33333333"] {
            for ordem in 1..=20 {
                let key = format!("{basico}{ordem:04}00");
                w.put(&key, &encoded(&[Some(&key), Some(&big)])).unwrap();
            }
        }
        let part = w.finish().unwrap();
        writer.finish(vec![part], "b").unwrap();
        let lookup = Lookup::open(&path).unwrap();
        let of =
            |b: &str| lookup.establishments_of(b).unwrap().iter().map(|r| r[0].clone().unwrap()).collect::<Vec<_>>();
        let expected: Vec<String> = (1..=20).map(|o| format!("22222222{o:04}00")).collect();
        assert_eq!(of("22222222"), expected);
        assert!(of("22222223").is_empty() && of("00000000").is_empty() && of("9").is_empty());
    }

    #[test]
    fn keys_must_ascend() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::create(&dir.path().join("t.lookup")).unwrap();
        let mut writer = writer.table(LookupTable::Companies, Part::Upper).unwrap();
        writer.put("00000002", &[]).unwrap();
        for bad in ["00000002", "00000001", "0000003"] {
            assert!(matches!(writer.put(bad, &[]), Err(LookupError::Invalid { .. })), "{bad}");
        }
    }

    #[test]
    fn a_file_of_another_format_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        Writer::create(&path).unwrap().finish(Vec::new(), "b").unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 8..].copy_from_slice(b"CNPJLKP4");
        std::fs::write(&path, &bytes).unwrap();
        let error = Lookup::open(&path).unwrap_err().to_string();
        assert!(
            error.ends_with("a lookup file of format CNPJLKP4, and this version reads CNPJLKP5: build the month again"),
            "{error}"
        );
        bytes[n - 8..].copy_from_slice(b"PAR1\0\0\0\0");
        std::fs::write(&path, &bytes).unwrap();
        assert!(Lookup::open(&path).unwrap_err().to_string().ends_with("not a lookup file"));
    }

    #[test]
    fn a_truncated_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        Writer::create(&path).unwrap().finish(Vec::new(), "b").unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(Lookup::open(&path), Err(LookupError::Invalid { .. })));
    }

    #[test]
    fn a_flipped_bit_in_a_block_is_an_error_not_a_missing_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lookup");
        let writer = Writer::create(&path).unwrap();
        let mut w = writer.table(LookupTable::Companies, Part::Lower).unwrap();
        for i in 0..3_000 {
            w.put(&format!("{i:08}"), &encoded(&[Some(&format!("company {i} {}", "x".repeat(i % 50)))])).unwrap();
        }
        let part = w.finish().unwrap();
        writer.finish(vec![part], "b").unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        // Flip one bit in every tenth byte of the blocks (the index is at the end).
        let index_at = u64::from_le_bytes(bytes[bytes.len() - 16..bytes.len() - 8].try_into().unwrap()) as usize;
        for at in (5..index_at).step_by(1_000) {
            bytes[at] ^= 0x10;
        }
        std::fs::write(&path, &bytes).unwrap();
        let lookup = Lookup::open(&path).unwrap();
        let mut errors = 0;
        for i in 0..3_000 {
            match lookup.get(LookupTable::Companies, &format!("{i:08}")) {
                Ok(Some(row)) => assert!(row[0].as_deref().unwrap().starts_with(&format!("company {i} "))),
                Ok(None) => panic!("{i} came back missing"),
                Err(LookupError::Invalid { .. }) => errors += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(errors > 0, "the damage is seen");
    }
}
