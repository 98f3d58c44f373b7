//! The search index beside a DuckDB dataset (`<dataset>.search`): every search filter as
//! compressed bitmaps (`roaring`) of establishment ordinals, so that a search is a few bitmap
//! operations instead of a scan. A total is the cardinality of an intersection, a page a select
//! by rank; the page's CNPJs come from a column of the file. The file is memory-mapped: the
//! server holds the directory, and the pages it touches are the kernel's to keep or drop.
//!
//! Ordinals number the establishments in CNPJ order. The build stores a table in two halves at
//! once, so the lower half is numbered from 0 and the upper half from [`UPPER`]: no half waits
//! for the other to know where it starts. A position (0..n) in the columns is an ordinal of the
//! lower half, or `lower +` its rank in the upper half.
//!
//! Posting tables (a sorted list of keys, a bitmap per key):
//! - equality filters by their stored code: `uf`, `municipio`, `cnae`, `situacao`, and the
//!   company's `porte` and `natureza` carried down to its establishments;
//! - the opening date by `mes` (`YYYY-MM`), `ano` and `decada` (`199`), and cumulatively by
//!   decade: `desde` (opened in the decade or later) and `antes` (opened before it; none for the
//!   first decade held), derived from `decada` when the file is written. A range is its whole
//!   decades (one decade's bitmap, or `desde` of the first ∩ `antes` of the one after the last,
//!   either dropped at an open end) less or plus its edges, each end moved to the decade boundary
//!   below or above it, whichever leaves the fewer bitmap bytes to read; an edge, or a range
//!   cheaper tiled whole, is the fewest whole years and months that tile it, and a month covered
//!   in part is its month's bitmap filtered by the day-of-month column. The whole decades join
//!   the other filters' intersection (smallest first), and the edges are applied to what it
//!   leaves: an open-ended range from a decade boundary costs one stored bitmap;
//! - the CEP by its first 2 and 4 digits (`cep2`, `cep4`): a prefix of 1 to 4 digits is the union
//!   of the keys that start with it; a longer one is its `cep4` bitmap filtered by the column of
//!   the CEPs' last four digits. (A bitmap per day or per full CEP costs about one 8-byte
//!   container header per establishment: the columns cost one and two bytes.)
//! - the folded words (runs of alphanumeric characters) of `nome` (nome fantasia and razão
//!   social, the company's carried down) and of `bairro`: a one-word term's matches are exactly
//!   the union of the words that contain it;
//! - phrases, for every other term with a word character, per field (`fantasia`, `razao`,
//!   `bairro`): `pares_*` keys every two adjacent words with the separator between them, and a
//!   field's first or last word with the separator before or after it (`text::phrase_keys`). A
//!   term is the intersection of its links (`text::term_plan`), each the union of the keys it
//!   stands in (found by prefix where the link starts at a key's start, else with `memmem` in the
//!   keys). That is exact unless the field holds a word twice (its links may then stand apart):
//!   `repetidos_*` keys the whole folded text of those fields, and `repete_*` (one key, derived
//!   when the file is written) unites them, so that a term of several links is `(links ∖
//!   repete) ∪` the `repetidos` keys that contain it. A name matches in either field. Only a
//!   term without a word character is beyond the index (the store then searches by SQL, within
//!   a budget).
//!
//! While the build runs, postings are kept in memory up to a budget, then spilled to files sorted
//! by table and key; the file is written by a merge of the spills, so the build's memory does not
//! grow with the month.
//!
//! Layout: the magic; the columns, each the lower half's positions then the upper half's: the
//! CNPJs (the 12 characters before the check digits packed as a base-36 number, `u64`
//! little-endian, order-preserving), the day of the month of the opening date (`u8`, 0 for none),
//! the CEP's last four digits (`u16`, `u16::MAX` for none); the bitmaps, each table's in key
//! order one after another (roaring's portable format, or a list of the ordinals' gaps as varints
//! where that is shorter; the derived tables after the others); the directory (varints: the
//! halves' sizes, the columns' offsets, per table its name, its key count and its first bitmap's
//! offset, and per key its text, its bitmap's length `<< 1 | list` and the XXH3 of the bitmap's
//! bytes truncated to 32 bits), the build id; the directory's XXH3, its offset and the magic
//! again. The magic names the format's version (`CNPJSRC5`: with the phrase tables and the gap
//! lists); a file of another version is refused, and the store searches by SQL.
//!
//! Big bitmaps once read, and the sets of terms that took a while to reckon, are kept in memory
//! up to the cache's budget.

use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use roaring::{MultiOps, RoaringBitmap};

use crate::lookup::{put_varint, varint};
use crate::text::{TermPlan, civil_from_days, days_from_civil, parse_date, phrase_keys, term_plan, words};

const MAGIC: &[u8; 8] = b"CNPJSRC5";

/// The derived posting tables, by decade key (`201`): the establishments opened before the
/// decade, and those opened in it or later (in the decades held; none before the first).
const BEFORE: &str = "antes";
const SINCE: &str = "desde";

/// The first ordinal of the upper half of the establishments.
pub const UPPER: u32 = 1 << 31;

/// The search index of the dataset at `dataset`.
pub fn search_index_path(dataset: &Path) -> PathBuf {
    let mut name = dataset.as_os_str().to_owned();
    name.push(".search");
    PathBuf::from(name)
}

#[derive(Debug, thiserror::Error)]
pub enum SearchIndexError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// The posting tables, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Table {
    Uf,
    Municipio,
    Cnae,
    Situacao,
    Porte,
    Natureza,
    Mes,
    Ano,
    Decada,
    Cep2,
    Cep4,
    Nome,
    Bairro,
    PairsFantasia,
    PairsRazao,
    PairsBairro,
    RepeatsFantasia,
    RepeatsRazao,
    RepeatsBairro,
}

const TABLES: [(Table, &str); 19] = [
    (Table::Uf, "uf"),
    (Table::Municipio, "municipio"),
    (Table::Cnae, "cnae"),
    (Table::Situacao, "situacao"),
    (Table::Porte, "porte"),
    (Table::Natureza, "natureza"),
    (Table::Mes, "mes"),
    (Table::Ano, "ano"),
    (Table::Decada, "decada"),
    (Table::Cep2, "cep2"),
    (Table::Cep4, "cep4"),
    (Table::Nome, "nome"),
    (Table::Bairro, "bairro"),
    (Table::PairsFantasia, "pares_fantasia"),
    (Table::PairsRazao, "pares_razao"),
    (Table::PairsBairro, "pares_bairro"),
    (Table::RepeatsFantasia, "repetidos_fantasia"),
    (Table::RepeatsRazao, "repetidos_razao"),
    (Table::RepeatsBairro, "repetidos_bairro"),
];

/// A text field searched by phrase: its phrase and repeated-text tables, and the name of its
/// derived table of every establishment whose field holds a word twice (one key, empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Fantasia,
    Razao,
    Bairro,
}

impl Field {
    fn tables(self) -> (Table, Table, &'static str) {
        match self {
            Field::Fantasia => (Table::PairsFantasia, Table::RepeatsFantasia, "repete_fantasia"),
            Field::Razao => (Table::PairsRazao, Table::RepeatsRazao, "repete_razao"),
            Field::Bairro => (Table::PairsBairro, Table::RepeatsBairro, "repete_bairro"),
        }
    }

    /// The word table of the field's words.
    fn words_table(self) -> Table {
        match self {
            Field::Fantasia | Field::Razao => Table::Nome,
            Field::Bairro => Table::Bairro,
        }
    }

    fn name(table: Table) -> &'static str {
        TABLES.iter().find(|(t, _)| *t == table).map(|(_, name)| *name).expect("every table is named")
    }

    /// The fields a term of a word table is searched in as a phrase.
    fn of(table: &str) -> &'static [Field] {
        match table {
            "nome" => &[Field::Fantasia, Field::Razao],
            _ => &[Field::Bairro],
        }
    }
}

/// Postings in memory (one feed's, since its last spill), by table and key, with an estimate of
/// the memory they take.
#[derive(Default)]
pub(crate) struct Postings {
    tables: [TablePostings; TABLES.len()],
    pub(crate) bytes: usize,
    /// The buffer phrase keys are written in.
    key: String,
    /// By [`Field`]: the texts last added, with the slots of their keys.
    memos: [Vec<Memo>; 3],
}

/// A text a field held lately, and the keys it gave: `(table, slot)` of each of its words,
/// phrase keys and, when a word repeats, its repeated-text key.
///
/// Hand-rolled for speed (BENCHMARKS.md, "Phrase search at 1.0, third pass"): texts repeat (a
/// neighbourhood's name, an empty or common trading name, a company name carried to each of
/// its establishments), and splitting one into words and phrase keys and finding each key in the
/// maps cost more than the index's words had before phrases. A direct-mapped memo of
/// [`MEMO_SLOTS`] texts per field turns a repeated text into one hash and one comparison.
#[derive(Default)]
struct Memo {
    text: String,
    keys: Vec<(Table, u32)>,
}

/// Texts a field's memo holds (a power of two).
const MEMO_SLOTS: usize = 4096;

/// One table's postings in memory: a bitmap per key, and the (key, ordinal) pairs added since
/// they were last put in, up to [`PENDING`] of them.
///
/// Hand-rolled for speed (BENCHMARKS.md, "The build's CPU back"): an ordinal pushed straight
/// into its key's bitmap costs a cache miss at the bitmap's tail, and roaring's `push` into a
/// dense (bitmap) container looks for its maximum from the container's end, up to 1,024 words,
/// each time: the index cost 120 to 180 ns an ordinal. Pending pairs are sorted by key, and each
/// key's run goes in with one `append`. Keys of up to [`PACKED_LEN`] characters of
/// `[-0-9A-Za-z]` (the codes, the dates' parts and nearly every word) are held packed into a
/// `u64`, so that finding a key hashes a number and compares it in place; the others by their
/// text.
#[derive(Default)]
struct TablePostings {
    packed: foldhash::HashMap<u64, u32>,
    text: foldhash::HashMap<Box<str>, u32>,
    /// By slot (the number the maps give a key).
    bitmaps: Vec<RoaringBitmap>,
    /// `slot << 32 | ordinal`.
    pending: Vec<u64>,
}

/// The pairs a table holds before they are put in their bitmaps (8 bytes each).
const PENDING: usize = 1 << 15;

/// The longest key held packed: 6 bits a character, the first in the highest bits.
const PACKED_LEN: usize = 10;

/// `key` as a number whose order is the text's (a shorter key is padded with 0, below every
/// character), when it can be.
fn pack_key(key: &str) -> Option<u64> {
    if key.len() > PACKED_LEN {
        return None;
    }
    let mut n = 0u64;
    for &b in key.as_bytes() {
        // In byte order: `-` < digits < upper case < lower case.
        let code = match b {
            b'-' => 1,
            b'0'..=b'9' => b - b'0' + 2,
            b'A'..=b'Z' => b - b'A' + 12,
            b'a'..=b'z' => b - b'a' + 38,
            _ => return None,
        };
        n = n << 6 | u64::from(code);
    }
    Some(n << (6 * (PACKED_LEN - key.len())))
}

/// The text of a packed key.
fn unpack_key(mut n: u64) -> String {
    let mut key = String::with_capacity(PACKED_LEN);
    for _ in 0..PACKED_LEN {
        let code = (n >> (6 * (PACKED_LEN - 1))) as u8;
        n = (n << 6) & ((1 << (6 * PACKED_LEN)) - 1);
        key.push(char::from(match code {
            0 => break,
            1 => b'-',
            2..=11 => code - 2 + b'0',
            12..=37 => code - 12 + b'A',
            _ => code - 38 + b'a',
        }));
    }
    key
}

impl TablePostings {
    /// The slot of `key`, and whether it is new; none for a key with a newline (no filter
    /// value can hold one: the API validates them).
    fn slot(&mut self, key: &str) -> Option<(u32, bool)> {
        let next = self.bitmaps.len() as u32;
        let slot = match pack_key(key) {
            Some(n) => *self.packed.entry(n).or_insert(next),
            None if key.contains('\n') => return None,
            None => match self.text.get(key) {
                Some(&slot) => slot,
                None => *self.text.entry(key.into()).or_insert(next),
            },
        };
        let new = slot == next;
        if new {
            self.bitmaps.push(RoaringBitmap::new());
        }
        Some((slot, new))
    }

    /// Puts the pending pairs in their bitmaps, each key's ordinals in one `append` (an ordinal
    /// added twice kept once).
    fn settle(&mut self) {
        self.pending.sort_unstable();
        let mut run = Vec::new();
        for pairs in self.pending.chunk_by(|a, b| a >> 32 == b >> 32) {
            run.clear();
            run.extend(pairs.iter().map(|&pair| pair as u32));
            run.dedup();
            let bitmap = &mut self.bitmaps[(pairs[0] >> 32) as usize];
            // Ordinals ascend from one settling to the next (feeds add in ordinal order);
            // should they not, they are inserted one by one.
            if bitmap.append(run.iter().copied()).is_err() {
                bitmap.extend(run.iter().copied());
            }
        }
        self.pending.clear();
    }

    /// Every key with its bitmap, sorted by key; empties the table.
    fn drain_sorted(&mut self) -> Vec<(Box<str>, RoaringBitmap)> {
        self.settle();
        let mut bitmaps = std::mem::take(&mut self.bitmaps);
        let mut take = |slot: u32| std::mem::take(&mut bitmaps[slot as usize]);
        let mut sorted: Vec<(Box<str>, RoaringBitmap)> =
            self.packed.drain().map(|(n, slot)| (unpack_key(n).into_boxed_str(), take(slot))).collect();
        sorted.extend(self.text.drain().map(|(key, slot)| (key, take(slot))));
        sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        sorted
    }
}

impl Postings {
    /// Adds `ordinals` to `key`. A feed adds ordinals in ascending order, and calls
    /// [`Postings::settle`] between rows.
    pub(crate) fn add_range(&mut self, table: Table, key: &str, ordinals: std::ops::Range<u32>) {
        self.put(table, key, ordinals);
    }

    pub(crate) fn add(&mut self, table: Table, key: &str, ordinal: u32) {
        self.add_range(table, key, ordinal..ordinal + 1);
    }

    /// Adds `ordinals` to `key`; the key's slot, none for a key that cannot be held.
    fn put(&mut self, table: Table, key: &str, ordinals: std::ops::Range<u32>) -> Option<u32> {
        let t = &mut self.tables[table as usize];
        let (slot, new) = t.slot(key)?;
        if new {
            self.bytes += 96 + key.len();
        }
        self.put_slot(table, slot, ordinals);
        Some(slot)
    }

    fn put_slot(&mut self, table: Table, slot: u32, ordinals: std::ops::Range<u32>) {
        // An array entry is 2 bytes; a full container 8 KiB for 65,536.
        self.bytes += (ordinals.len() * 2).min(ordinals.len() / 8 + 64);
        let t = &mut self.tables[table as usize];
        t.pending.extend(ordinals.map(|ordinal| u64::from(slot) << 32 | u64::from(ordinal)));
    }

    /// Adds the words of `field`'s folded text to its word table, its phrase keys to its phrase
    /// table, and the text itself to its repeated-text table when a word stands in it twice.
    pub(crate) fn add_text(&mut self, field: Field, folded: &str, ordinals: std::ops::Range<u32>) {
        if folded.is_empty() {
            return;
        }
        let memos = &mut self.memos[field as usize];
        if memos.is_empty() {
            memos.resize_with(MEMO_SLOTS, Memo::default);
        }
        let at = std::hash::BuildHasher::hash_one(&foldhash::fast::FixedState::with_seed(0), folded) as usize
            & (MEMO_SLOTS - 1);
        let mut memo = std::mem::take(&mut memos[at]);
        if memo.text == folded {
            for &(table, slot) in &memo.keys {
                self.put_slot(table, slot, ordinals.clone());
            }
        } else {
            memo.text.clear();
            memo.text.push_str(folded);
            memo.keys.clear();
            self.add_keys(field, folded, ordinals, &mut memo.keys);
        }
        self.memos[field as usize][at] = memo;
    }

    /// [`Postings::add_text`] without the memo; pushes each key's `(table, slot)` on `keys`.
    fn add_keys(&mut self, field: Field, folded: &str, ordinals: std::ops::Range<u32>, keys: &mut Vec<(Table, u32)>) {
        let (pairs, repeats, _) = field.tables();
        let words_table = field.words_table();
        words(folded, |w| keys.extend(self.put(words_table, w, ordinals.clone()).map(|slot| (words_table, slot))));
        let mut key = std::mem::take(&mut self.key);
        let repeated = phrase_keys(folded, &mut key, |k| {
            keys.extend(self.put(pairs, k, ordinals.clone()).map(|slot| (pairs, slot)))
        });
        self.key = key;
        if repeated {
            keys.extend(self.put(repeats, folded, ordinals).map(|slot| (repeats, slot)));
        }
    }

    /// Puts the pending ordinals of the tables that hold [`PENDING`] of them in their bitmaps.
    pub(crate) fn settle(&mut self) {
        for t in &mut self.tables {
            if t.pending.len() >= PENDING {
                t.settle();
            }
        }
    }

    /// Writes every posting to `path`, sorted by table and key, and empties the memory.
    pub(crate) fn spill(&mut self, path: &Path) -> Result<(), SearchIndexError> {
        let io = |source| SearchIndexError::Io { path: path.to_owned(), source };
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
        let mut bytes = Vec::new();
        for (table, keys) in self.tables.iter_mut().enumerate() {
            for (key, bitmap) in keys.drain_sorted() {
                bytes.clear();
                bitmap.serialize_into(&mut bytes).map_err(io)?;
                let mut head = vec![table as u8];
                put_varint(&mut head, key.len() as u64);
                head.extend_from_slice(key.as_bytes());
                put_varint(&mut head, bytes.len() as u64);
                out.write_all(&head).map_err(io)?;
                out.write_all(&bytes).map_err(io)?;
            }
        }
        out.flush().map_err(io)?;
        self.bytes = 0;
        // The slots the memos hold were the maps', now empty.
        self.memos.iter_mut().for_each(Vec::clear);
        Ok(())
    }
}

/// Reads a spill file record by record.
struct Spill {
    path: PathBuf,
    file: BufReader<File>,
    table: u8,
    key: Vec<u8>,
    bitmap: Vec<u8>,
}

impl Spill {
    fn varint(&mut self) -> std::io::Result<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let mut b = [0u8];
            self.file.read_exact(&mut b)?;
            n |= u64::from(b[0] & 0x7f) << shift;
            if b[0] < 0x80 {
                return Ok(n);
            }
        }
        Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a varint is too long"))
    }

    /// Reads the next record; false at the end.
    fn next(&mut self) -> Result<bool, SearchIndexError> {
        let path = self.path.clone();
        let io = |source| SearchIndexError::Io { path: path.clone(), source };
        let mut table = [0u8];
        match self.file.read_exact(&mut table) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(io(e)),
        }
        self.table = table[0];
        let n = self.varint().map_err(io)? as usize;
        self.key.resize(n, 0);
        self.file.read_exact(&mut self.key).map_err(io)?;
        let n = self.varint().map_err(io)? as usize;
        self.bitmap.resize(n, 0);
        self.file.read_exact(&mut self.bitmap).map_err(io)?;
        Ok(true)
    }
}

/// Packs the 12 characters of a CNPJ before its check digits (`[0-9A-Z]`) into a number that
/// sorts as the text does.
pub(crate) fn pack(base: &[u8]) -> u64 {
    base.iter().take(12).fold(0u64, |n, &c| {
        let digit = if c.is_ascii_digit() { c - b'0' } else { c.wrapping_sub(b'A').wrapping_add(10) };
        n * 36 + u64::from(digit.min(35))
    })
}

fn unpack(mut n: u64) -> String {
    let mut base = [0u8; 12];
    for slot in base.iter_mut().rev() {
        let d = (n % 36) as u8;
        *slot = if d < 10 { b'0' + d } else { b'A' + d - 10 };
        n /= 36;
    }
    let dv = cnpj_model::check_digits(&base).expect("packed characters are valid");
    let mut cnpj = String::from_utf8(base.to_vec()).expect("ASCII");
    cnpj.push(char::from(dv[0]));
    cnpj.push(char::from(dv[1]));
    cnpj
}

/// The columns one half of the establishments wrote, and its size.
pub(crate) struct HalfColumns {
    pub(crate) cnpjs: PathBuf,
    pub(crate) days: PathBuf,
    pub(crate) ceps: PathBuf,
    pub(crate) rows: u64,
}

/// A key of the directory: its text, its bitmap's offset, its size (length `<< 1 | list`, see
/// [`encode`]) and the checksum of its bytes.
type Entry = (Vec<u8>, u64, u64, u32);

/// Bitmaps of at most this many ordinals are tried as a list of gaps.
const LIST_UP_TO: u64 = 1 << 16;

/// Puts `bitmap`'s bytes into `out` and says whether they are a list: roaring's portable format,
/// or, where it is at most half as long, the ordinals' gaps as varints (the first from 0).
/// Hand-rolled for size: a sparse bitmap costs roaring about 10 bytes an ordinal (a container's
/// header and offset each), a gap list about 4; where roaring's arrays are full enough to cost
/// about as much, roaring is kept, being quicker to read. Measured at 1.0: the 1.1 M small
/// bitmaps of `pares_razao` take 88 MB as lists instead of 241 MB, the 1.7 M of
/// `repetidos_razao` 10 MB instead of 32 MB.
fn encode(bitmap: &RoaringBitmap, out: &mut Vec<u8>) -> bool {
    out.clear();
    if bitmap.len() <= LIST_UP_TO {
        let mut previous = 0;
        for ordinal in bitmap {
            put_varint(out, u64::from(ordinal - previous));
            previous = ordinal;
        }
        if out.len() * 2 <= bitmap.serialized_size() {
            return true;
        }
        out.clear();
    }
    bitmap.serialize_into(&mut *out).expect("a Vec takes every byte");
    false
}

/// The bitmap of a list written by [`encode`]; `None` when the gaps do not ascend within `u32`.
fn decode_list(bytes: &[u8]) -> Option<RoaringBitmap> {
    let (mut pos, mut ordinal, mut ordinals) = (0, 0u64, Vec::new());
    while pos < bytes.len() {
        let gap = varint(bytes, &mut pos)?;
        if gap == 0 && !ordinals.is_empty() {
            return None;
        }
        ordinal = ordinal.checked_add(gap)?;
        ordinals.push(u32::try_from(ordinal).ok()?);
    }
    RoaringBitmap::from_sorted_iter(ordinals).ok()
}

/// Writes the search index file from the halves' columns (lower, upper) and the spilled postings.
pub(crate) fn write_index(
    path: &Path,
    columns: [HalfColumns; 2],
    spills: &[PathBuf],
    build_id: &str,
) -> Result<(), SearchIndexError> {
    let io = |source| SearchIndexError::Io { path: path.to_owned(), source };
    let mut file = IndexFile {
        out: BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?),
        path: path.to_owned(),
        offset: 0,
        bytes: Vec::new(),
    };
    file.write(MAGIC)?;
    let mut directory = Vec::new();
    put_varint(&mut directory, columns[0].rows);
    put_varint(&mut directory, columns[1].rows);
    for column in
        [|h: &HalfColumns| h.cnpjs.clone(), |h: &HalfColumns| h.days.clone(), |h: &HalfColumns| h.ceps.clone()]
    {
        put_varint(&mut directory, file.offset);
        for half in &columns {
            file.copy(&column(half))?;
        }
    }
    let (mut tables, repeating) = file.merge_spills(spills)?;
    let (before, since) = file.cumulative_decades(&tables[Table::Decada as usize])?;
    let fields = [Field::Fantasia, Field::Razao, Field::Bairro];
    let mut repeats = Vec::with_capacity(fields.len());
    for (field, set) in fields.iter().zip(&repeating) {
        repeats.push((field.tables().2, vec![file.put(set, Vec::new())?]));
    }
    let names = TABLES.iter().map(|(_, name)| *name);
    let derived = [(BEFORE, before), (SINCE, since)].into_iter().chain(repeats);
    let all: Vec<(&str, Vec<Entry>)> = names.zip(tables.drain(..)).chain(derived).collect();
    write_directory(&mut directory, &all, build_id);
    file.write(&directory)?;
    file.write(&xxhash_rust::xxh3::xxh3_64(&directory).to_le_bytes())?;
    let at = file.offset - directory.len() as u64 - 8;
    file.write(&at.to_le_bytes())?;
    file.write(MAGIC)?;
    let out = file.out.into_inner().map_err(|e| io(e.into_error()))?;
    out.sync_all().map_err(io)
}

/// The search index file being written, and where its next byte goes.
struct IndexFile {
    out: BufWriter<File>,
    path: PathBuf,
    offset: u64,
    /// A bitmap's bytes, reused.
    bytes: Vec<u8>,
}

impl IndexFile {
    fn io(&self, source: std::io::Error) -> SearchIndexError {
        SearchIndexError::Io { path: self.path.clone(), source }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), SearchIndexError> {
        self.out.write_all(bytes).map_err(|e| self.io(e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Appends the file at `part` (a column's half).
    fn copy(&mut self, part: &Path) -> Result<(), SearchIndexError> {
        let mut file = File::open(part).map_err(|source| SearchIndexError::Io { path: part.to_owned(), source })?;
        self.offset += std::io::copy(&mut file, &mut self.out).map_err(|e| self.io(e))?;
        Ok(())
    }

    /// Writes `bitmap` (see [`encode`]); its directory entry under `key`.
    fn put(&mut self, bitmap: &RoaringBitmap, key: Vec<u8>) -> Result<Entry, SearchIndexError> {
        let mut bytes = std::mem::take(&mut self.bytes);
        let list = encode(bitmap, &mut bytes);
        let at = self.offset;
        self.write(&bytes)?;
        let entry = (key, at, (bytes.len() as u64) << 1 | u64::from(list), xxhash_rust::xxh3::xxh3_64(&bytes) as u32);
        self.bytes = bytes;
        Ok(entry)
    }

    /// Writes every posting table from a k-way merge of the spills by (table, key), each key's
    /// pieces unioned: the tables' directory entries, and per phrase field every establishment
    /// whose text holds a word twice.
    fn merge_spills(&mut self, spills: &[PathBuf]) -> Result<(Vec<Vec<Entry>>, [RoaringBitmap; 3]), SearchIndexError> {
        let mut readers = Vec::new();
        for spill in spills {
            let file = File::open(spill).map_err(|source| SearchIndexError::Io { path: spill.clone(), source })?;
            readers.push(Spill {
                path: spill.clone(),
                file: BufReader::with_capacity(1 << 16, file),
                table: 0,
                key: Vec::new(),
                bitmap: Vec::new(),
            });
        }
        let mut heap = BinaryHeap::new();
        for (i, reader) in readers.iter_mut().enumerate() {
            if reader.next()? {
                heap.push(std::cmp::Reverse((reader.table, reader.key.clone(), i)));
            }
        }
        let mut tables: Vec<Vec<Entry>> = vec![Vec::new(); TABLES.len()];
        let fields = [Field::Fantasia, Field::Razao, Field::Bairro];
        let mut repeating: [RoaringBitmap; 3] = Default::default();
        while let Some(std::cmp::Reverse((table, key, first))) = heap.pop() {
            let mut sources = vec![first];
            while heap.peek().is_some_and(|std::cmp::Reverse((t, k, _))| *t == table && *k == key) {
                let std::cmp::Reverse((_, _, i)) = heap.pop().expect("peeked");
                sources.push(i);
            }
            let mut union = RoaringBitmap::new();
            for &i in &sources {
                let reader = &mut readers[i];
                let piece = RoaringBitmap::deserialize_from(reader.bitmap.as_slice())
                    .map_err(|source| SearchIndexError::Io { path: reader.path.clone(), source })?;
                union |= piece;
                if reader.next()? {
                    heap.push(std::cmp::Reverse((reader.table, reader.key.clone(), i)));
                }
            }
            if let Some(f) = fields.iter().position(|f| f.tables().1 as u8 == table) {
                repeating[f] |= &union;
            }
            let entry = self.put(&union, key)?;
            tables[table as usize].push(entry);
        }
        Ok((tables, repeating))
    }

    /// Writes the cumulative date tables (`antes`, `desde`) from the decades just written, read
    /// back one at a time; their directory entries.
    fn cumulative_decades(&mut self, decades: &[Entry]) -> Result<(Vec<Entry>, Vec<Entry>), SearchIndexError> {
        self.out.flush().map_err(|e| self.io(e))?;
        let mut written = File::open(&self.path).map_err(|e| self.io(e))?;
        let mut decade = |&(_, at, size, _): &Entry| {
            written.seek(std::io::SeekFrom::Start(at))?;
            let mut bytes = vec![0; (size >> 1) as usize];
            written.read_exact(&mut bytes)?;
            let bitmap = match size & 1 {
                1 => decode_list(&bytes),
                _ => RoaringBitmap::deserialize_from(bytes.as_slice()).ok(),
            };
            bitmap.ok_or_else(|| std::io::Error::other("a decade's bitmap does not read back"))
        };
        let (mut before, mut since) = (Vec::new(), Vec::new());
        let mut running = RoaringBitmap::new();
        for (i, entry) in decades.iter().enumerate() {
            if i > 0 {
                before.push(self.put(&running, entry.0.clone())?);
            }
            running |= decade(entry).map_err(|e| self.io(e))?;
        }
        // Each table's bitmaps follow one another in key order (the directory holds only lengths).
        running.clear();
        let mut later = Vec::with_capacity(decades.len());
        for entry in decades.iter().rev() {
            running |= decade(entry).map_err(|e| self.io(e))?;
            later.push(running.clone());
        }
        drop(running);
        for (entry, set) in decades.iter().zip(later.iter().rev()) {
            since.push(self.put(set, entry.0.clone())?);
        }
        Ok((before, since))
    }
}

/// The directory: the tables (name, key count, first bitmap's offset; per key its text, size and
/// checksum), then the build id.
fn write_directory(directory: &mut Vec<u8>, tables: &[(&str, Vec<Entry>)], build_id: &str) {
    put_varint(directory, tables.len() as u64);
    for (name, keys) in tables {
        put_varint(directory, name.len() as u64);
        directory.extend_from_slice(name.as_bytes());
        put_varint(directory, keys.len() as u64);
        put_varint(directory, keys.first().map_or(0, |k| k.1));
        for (i, (key, at, size, checksum)) in keys.iter().enumerate() {
            assert!(i == 0 || keys[i - 1].1 + (keys[i - 1].2 >> 1) == *at, "a table's bitmaps follow one another");
            put_varint(directory, key.len() as u64);
            directory.extend_from_slice(key);
            put_varint(directory, *size);
            directory.extend_from_slice(&checksum.to_le_bytes());
        }
    }
    put_varint(directory, build_id.len() as u64);
    directory.extend_from_slice(build_id.as_bytes());
}

/// The keys of one posting table, `\n`-separated in one buffer (so that words can be searched
/// with `memmem`), and where each key's bitmap is.
struct Keys {
    /// `\n` key `\n` key … `\n`.
    text: Vec<u8>,
    /// Where each key starts in `text`, and the end of the last one + 1.
    starts: Vec<u32>,
    spans: Vec<Span>,
}

/// Where a key's bitmap is in the file.
#[derive(Clone, Copy)]
struct Span {
    at: u64,
    /// Its length `<< 1 | list` (see [`encode`]).
    size: u32,
    /// The XXH3 of its bytes, truncated.
    checksum: u32,
}

impl Span {
    fn len(self) -> usize {
        (self.size >> 1) as usize
    }
}

impl Keys {
    fn len(&self) -> usize {
        self.spans.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        &self.text[self.starts[i] as usize..self.starts[i + 1] as usize - 1]
    }

    /// The first key not below `key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < key { lo = mid + 1 } else { hi = mid }
        }
        lo
    }

    fn find(&self, key: &[u8]) -> Option<usize> {
        let i = self.lower_bound(key);
        (i < self.len() && self.key(i) == key).then_some(i)
    }

    /// The keys that start with `prefix`.
    fn prefixed(&self, prefix: &[u8]) -> std::ops::Range<usize> {
        let start = self.lower_bound(prefix);
        let end = start + (start..self.len()).take_while(|&i| self.key(i).starts_with(prefix)).count();
        start..end
    }

    /// The keys that hold `needle`, in key order: a `\n` at its start or end pins that end to
    /// the key's (by binary search where the start is pinned, else with `memmem`).
    fn matching(&self, needle: &[u8]) -> Vec<usize> {
        match needle {
            [b'\n', whole @ .., b'\n'] => return self.find(whole).into_iter().collect(),
            [b'\n', prefix @ ..] => return self.prefixed(prefix).collect(),
            _ => {}
        }
        let mut found: Vec<usize> = Vec::new();
        for at in memchr::memmem::find_iter(&self.text, needle) {
            // The key that holds the start of the match.
            let key = self.starts.partition_point(|&s| s <= at as u32) - 1;
            if found.last() != Some(&key) {
                found.push(key);
            }
        }
        found
    }
}

/// A condition of a search, in the index's terms. All conditions hold at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// A 14-character CNPJ, or the 8 characters of a company's establishments.
    Cnpj(String),
    /// The key of `table` is one of `values` (several: a city name of several codes).
    AnyOf { table: &'static str, values: Vec<String> },
    /// The opening date, `YYYY-MM-DD`, inclusive on both sides.
    Opening { from: Option<String>, to: Option<String> },
    /// A CEP prefix of digits.
    ZipPrefix(String),
    /// A folded term in the words of `table` (`nome` or `bairro`).
    Term { table: &'static str, folded: String },
}

/// The establishments that match a search: `ordinals`, or `ordinals ∩ within` when `within` is
/// given. Of several filters the sparsest is kept apart from the intersection of the others,
/// which stays dense: a sparse intersection, once made, is every container turned from bits into
/// an array, and that was most of a search of three broad filters (state, status and size at
/// 1.0: 19–21 ms, 55 % of it in the conversion). The size and a page are read without making it.
#[derive(Debug)]
pub struct Matches {
    /// Shared with the index's cache when one bitmap is the answer or the dense part.
    ordinals: Arc<RoaringBitmap>,
    within: Option<Arc<RoaringBitmap>>,
}

/// A page is found by walking the smaller part while about this many ordinals are read (else
/// the intersection is made).
const PAGE_WALK: u64 = 200_000;

impl Matches {
    /// How many establishments match.
    pub fn len(&self) -> u64 {
        match &self.within {
            Some(within) => self.ordinals.intersection_len(within),
            None => self.ordinals.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every matching ordinal, in order.
    pub fn ordinals(&self) -> Arc<RoaringBitmap> {
        match &self.within {
            Some(within) => Arc::new(self.ordinals.as_ref() & within.as_ref()),
            None => Arc::clone(&self.ordinals),
        }
    }

    /// The matching ordinals from rank `offset` on, at most `limit` of them, of `total`.
    fn page(&self, total: u64, offset: u64, limit: u64) -> Vec<u32> {
        if let Some(within) = &self.within {
            let (small, large) =
                if within.len() <= self.ordinals.len() { (within, &self.ordinals) } else { (&self.ordinals, within) };
            // The ordinals of `small` read to reach the page's end, at the rate they match.
            let reads = (offset + limit).saturating_mul(small.len()) / total.max(1);
            if reads <= PAGE_WALK {
                return small
                    .iter()
                    .filter(|&o| large.contains(o))
                    .skip(offset as usize)
                    .take(limit as usize)
                    .collect();
            }
        }
        let set = self.ordinals();
        let Some(first) = u32::try_from(offset).ok().and_then(|o| set.select(o)) else { return Vec::new() };
        set.range(first..).take(limit as usize).collect()
    }
}

/// An open search index.
pub struct SearchIndex {
    map: memmap2::Mmap,
    path: PathBuf,
    build_id: String,
    lower: u64,
    upper: u64,
    /// Offsets of the CNPJ, day and CEP columns.
    columns: [usize; 3],
    tables: HashMap<String, Keys>,
    cache: Mutex<Cache>,
}

/// Bitmaps of at least this many bytes are kept once read (about 1.5 % of the establishments).
const CACHED_FROM: usize = 128 << 10;

/// A term's set is kept once its reckoning took this long (a union of many words' bitmaps, or a
/// search of the whole text of repeating fields): a term people type is typed again (one letter,
/// then the next), and its set is read back in microseconds.
const TERM_KEPT_FROM: std::time::Duration = std::time::Duration::from_millis(1);

/// What the cache keeps: a big bitmap by its offset, or a term's set by its table and text.
#[derive(PartialEq, Eq, Hash)]
enum Cached {
    Bitmap(u64),
    Term(&'static str, String),
}

/// Big bitmaps already read and costly terms' sets, up to `limit` bytes (past it the cache starts
/// over).
struct Cache {
    map: HashMap<Cached, Arc<RoaringBitmap>>,
    bytes: usize,
    limit: usize,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SearchIndex({})", self.path.display())
    }
}

/// Maps `file` into memory.
#[allow(unsafe_code)]
fn map(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the index file is written once under a temporary name and renamed into place, never
    // modified: a new build renames another file over the name, and this mapping keeps the old
    // inode. Every read of the mapping is bounds-checked against its length.
    unsafe { memmap2::Mmap::map(file) }
}

impl SearchIndex {
    /// Opens the index at `path`, keeping up to `cache_bytes` of its big bitmaps once read.
    pub fn open(path: &Path, cache_bytes: usize) -> Result<SearchIndex, SearchIndexError> {
        let invalid = |reason: &str| SearchIndexError::Invalid { path: path.to_owned(), reason: reason.to_owned() };
        let io = |source| SearchIndexError::Io { path: path.to_owned(), source };
        let file = File::open(path).map_err(io)?;
        let map = map(&file).map_err(io)?;
        let len = map.len();
        if len < 32 || &map[len - 8..] != MAGIC || &map[..8] != MAGIC {
            return Err(invalid("not a search index of this version"));
        }
        let word = |at: usize| u64::from_le_bytes(map[at..at + 8].try_into().expect("8 bytes"));
        let (checksum, at) = (word(len - 24), word(len - 16) as usize);
        let directory = map.get(at..len - 24).ok_or_else(|| invalid("bad directory offset"))?;
        if xxhash_rust::xxh3::xxh3_64(directory) != checksum {
            return Err(invalid("the directory does not match its checksum"));
        }
        let parsed = (|| {
            let mut pos = 0;
            let next = |pos: &mut usize| varint(directory, pos);
            let (lower, upper) = (next(&mut pos)?, next(&mut pos)?);
            let columns = [next(&mut pos)? as usize, next(&mut pos)? as usize, next(&mut pos)? as usize];
            let n = next(&mut pos)? as usize;
            let mut tables = HashMap::with_capacity(n);
            for _ in 0..n {
                let len = next(&mut pos)? as usize;
                let name = String::from_utf8(directory.get(pos..pos + len)?.to_vec()).ok()?;
                pos += len;
                let count = next(&mut pos)? as usize;
                let mut offset = next(&mut pos)?;
                let mut keys =
                    Keys { text: vec![b'\n'], starts: Vec::with_capacity(count + 1), spans: Vec::with_capacity(count) };
                for _ in 0..count {
                    let len = next(&mut pos)? as usize;
                    keys.starts.push(keys.text.len() as u32);
                    keys.text.extend_from_slice(directory.get(pos..pos + len)?);
                    keys.text.push(b'\n');
                    pos += len;
                    let size = u32::try_from(next(&mut pos)?).ok()?;
                    let checksum = u32::from_le_bytes(directory.get(pos..pos + 4)?.try_into().ok()?);
                    pos += 4;
                    let span = Span { at: offset, size, checksum };
                    offset = offset.checked_add(span.len() as u64).filter(|&end| end <= at as u64)?;
                    keys.spans.push(span);
                }
                keys.starts.push(keys.text.len() as u32);
                tables.insert(name, keys);
            }
            let n = next(&mut pos)? as usize;
            let build_id = String::from_utf8(directory.get(pos..pos + n)?.to_vec()).ok()?;
            let rows = (lower + upper) as usize;
            (columns[2] + rows * 2 <= at && columns[1] + rows <= at && columns[0] + rows * 8 <= at).then_some(())?;
            Some((lower, upper, columns, tables, build_id))
        })();
        let (lower, upper, columns, tables, build_id) = parsed.ok_or_else(|| invalid("corrupt directory"))?;
        let cache = Mutex::new(Cache { map: HashMap::new(), bytes: 0, limit: cache_bytes });
        Ok(SearchIndex { map, path: path.to_owned(), build_id, lower, upper, columns, tables, cache })
    }

    /// The build this index was written for.
    pub fn build_id(&self) -> &str {
        &self.build_id
    }

    /// Establishments in the index.
    pub fn len(&self) -> u64 {
        self.lower + self.upper
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn corrupt(&self, reason: String) -> SearchIndexError {
        SearchIndexError::Invalid { path: self.path.clone(), reason }
    }

    fn keys(&self, table: &str) -> Result<&Keys, SearchIndexError> {
        self.tables.get(table).ok_or_else(|| self.corrupt(format!("no posting table {table}")))
    }

    /// The bitmap of key `i`, checked against its checksum; the big ones (the broad filters,
    /// whose reading and checking is most of a search's time) kept once read, up to
    /// the cache's limit.
    fn bitmap(&self, keys: &Keys, i: usize) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let span = keys.spans[i];
        let (start, len) = (span.at, span.len());
        let cached = len >= CACHED_FROM;
        if cached && let Some(hit) = self.cached(&Cached::Bitmap(start)) {
            return Ok(hit);
        }
        let bytes = &self.map[start as usize..start as usize + len];
        if xxhash_rust::xxh3::xxh3_64(bytes) as u32 != span.checksum {
            return Err(self.corrupt(format!("the bitmap at {start} does not match its checksum")));
        }
        let bitmap = match span.size & 1 {
            1 => decode_list(bytes).ok_or_else(|| "a list of ordinals that does not ascend".to_owned()),
            _ => RoaringBitmap::deserialize_from(bytes).map_err(|e| e.to_string()),
        };
        let bitmap = Arc::new(bitmap.map_err(|e| self.corrupt(format!("the bitmap at {start}: {e}")))?);
        if cached {
            self.keep(Cached::Bitmap(start), &bitmap, len);
        }
        Ok(bitmap)
    }

    fn cached(&self, key: &Cached) -> Option<Arc<RoaringBitmap>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).map.get(key).cloned()
    }

    /// Keeps `set`, of about `bytes`, under `key`; past the cache's limit the cache starts over.
    fn keep(&self, key: Cached, set: &Arc<RoaringBitmap>, bytes: usize) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.bytes + bytes > cache.limit {
            cache.map.clear();
            cache.bytes = 0;
        }
        cache.bytes += bytes;
        cache.map.insert(key, Arc::clone(set));
    }

    fn union(
        &self,
        keys: &Keys,
        indexes: impl IntoIterator<Item = usize>,
    ) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let mut bitmaps = indexes.into_iter().map(|i| self.bitmap(keys, i)).collect::<Result<Vec<_>, _>>()?;
        if bitmaps.len() == 1 {
            return Ok(bitmaps.pop().expect("one"));
        }
        Ok(Arc::new(bitmaps.iter().map(|b| b.as_ref()).union()))
    }

    fn position(&self, ordinal: u32) -> usize {
        (if ordinal >= UPPER { self.lower + u64::from(ordinal - UPPER) } else { u64::from(ordinal) }) as usize
    }

    /// Ordinals of the positions `range`.
    fn ordinals(&self, range: std::ops::Range<u64>) -> RoaringBitmap {
        let mut out = RoaringBitmap::new();
        let lower = range.start.min(self.lower)..range.end.min(self.lower);
        if !lower.is_empty() {
            out.insert_range(lower.start as u32..lower.end as u32);
        }
        let upper = range.start.max(self.lower) - self.lower..range.end.max(self.lower) - self.lower;
        if !upper.is_empty() {
            out.insert_range(UPPER + upper.start as u32..UPPER + upper.end as u32);
        }
        out
    }

    fn packed_at(&self, position: usize) -> u64 {
        let at = self.columns[0] + position * 8;
        u64::from_le_bytes(self.map[at..at + 8].try_into().expect("8 bytes"))
    }

    fn day_at(&self, position: usize) -> u8 {
        self.map[self.columns[1] + position]
    }

    fn cep_suffix_at(&self, position: usize) -> u16 {
        let at = self.columns[2] + position * 2;
        u16::from_le_bytes(self.map[at..at + 2].try_into().expect("2 bytes"))
    }

    /// The first position whose packed CNPJ is not below `packed`.
    fn lower_bound(&self, packed: u64) -> u64 {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.packed_at(mid as usize) < packed { lo = mid + 1 } else { hi = mid }
        }
        lo
    }

    /// `set` filtered by `keep(position)`.
    fn filtered(&self, set: &RoaringBitmap, keep: impl Fn(usize) -> bool) -> RoaringBitmap {
        RoaringBitmap::from_sorted_iter(set.iter().filter(|&o| keep(self.position(o)))).expect("ascending")
    }

    /// What one condition resolves to; `None` when it is beyond the index.
    fn condition(&self, condition: &Condition) -> Result<Option<Resolved>, SearchIndexError> {
        let set = match condition {
            Condition::Cnpj(cnpj) => {
                let (first, last) = match cnpj.len() {
                    14 => (pack(cnpj.as_bytes()), pack(cnpj.as_bytes())),
                    _ => (pack(format!("{cnpj}0000").as_bytes()), pack(format!("{cnpj}ZZZZ").as_bytes())),
                };
                let (start, end) = (self.lower_bound(first), self.lower_bound(last.saturating_add(1)));
                let mut set = self.ordinals(start..end);
                // A full CNPJ must also have its check digits.
                if cnpj.len() == 14 && start < end && unpack(self.packed_at(start as usize)) != *cnpj {
                    set.clear();
                }
                Arc::new(set)
            }
            Condition::AnyOf { table, values } => {
                let keys = self.keys(table)?;
                self.union(keys, values.iter().filter_map(|v| keys.find(v.as_bytes())))?
            }
            Condition::Opening { from, to } => return Ok(Some(Resolved::Dates(self.opening(from, to)?))),
            Condition::ZipPrefix(prefix) => {
                let (table, head) =
                    if prefix.len() <= 2 { ("cep2", prefix.len()) } else { ("cep4", prefix.len().min(4)) };
                let keys = self.keys(table)?;
                let set = self.union(keys, keys.prefixed(&prefix.as_bytes()[..head]))?;
                if prefix.len() <= 4 {
                    set
                } else {
                    // The last four digits start with the rest of the prefix.
                    let rest = &prefix[4..];
                    let scale = 10u16.pow(4 - rest.len() as u32);
                    let low: u16 = rest.parse::<u16>().unwrap_or(0) * scale;
                    let range = low..low + scale;
                    Arc::new(self.filtered(&set, |p| range.contains(&self.cep_suffix_at(p))))
                }
            }
            Condition::Term { table, folded } => {
                let key = Cached::Term(table, folded.clone());
                match self.cached(&key) {
                    Some(hit) => hit,
                    None => {
                        let started = std::time::Instant::now();
                        let Some(set) = self.term(table, folded)? else { return Ok(None) };
                        if started.elapsed() >= TERM_KEPT_FROM {
                            self.keep(key, &set, set.serialized_size() + folded.len());
                        }
                        set
                    }
                }
            }
        };
        Ok(Some(Resolved::Set(set)))
    }

    /// The establishments whose words of `table` contain the folded `term`; `None` when the
    /// term is beyond the index.
    fn term(&self, table: &'static str, folded: &str) -> Result<Option<Arc<RoaringBitmap>>, SearchIndexError> {
        Ok(Some(match term_plan(folded) {
            TermPlan::Beyond => return Ok(None),
            TermPlan::Word(word) => {
                let keys = self.keys(table)?;
                self.union(keys, keys.matching(word.as_bytes()))?
            }
            TermPlan::Links(links) => {
                let mut found = Vec::new();
                for &field in Field::of(table) {
                    found.push(Arc::new(self.phrase(field, folded, &links)?));
                }
                Arc::new(union(found))
            }
        }))
    }

    /// The establishments whose `field` contains the folded `term`, of the phrase keys `links`.
    fn phrase(&self, field: Field, term: &str, links: &[Vec<u8>]) -> Result<RoaringBitmap, SearchIndexError> {
        let (pairs, repeats, repeating) = field.tables();
        let keys = self.keys(Field::name(pairs))?;
        let mut sets = Vec::with_capacity(links.len());
        for link in links {
            let set = self.union(keys, keys.matching(link))?;
            if set.is_empty() {
                return Ok(RoaringBitmap::new());
            }
            sets.push(set);
        }
        let mut found = Arc::unwrap_or_clone(intersect(sets));
        if links.len() == 1 || found.is_empty() {
            return Ok(found);
        }
        // Where a word stands twice, the links may stand apart: those establishments are
        // decided on their whole text.
        let repeating = self.keys(repeating)?;
        let repeating = self.bitmap(repeating, 0)?;
        if found.intersection_len(&repeating) == 0 {
            return Ok(found);
        }
        found -= repeating.as_ref();
        let texts = self.keys(Field::name(repeats))?;
        found |= self.union(texts, texts.matching(term.as_bytes()))?.as_ref();
        Ok(found)
    }

    /// The establishments opened from `from` to `to` (`YYYY-MM-DD`, inclusive; `None`: open).
    fn opening(&self, from: &Option<String>, to: &Option<String>) -> Result<DateSet, SearchIndexError> {
        let decades = self.keys("decada")?;
        if decades.len() == 0 {
            return Ok(DateSet::default());
        }
        // Dates are held from the first decade's start to the end of the last.
        let start = |key: &[u8]| {
            let decade: i32 = std::str::from_utf8(key).ok().and_then(|k| k.parse().ok())?;
            Some(days_from_civil(decade * 10, 1, 1))
        };
        let (Some(first), Some(last)) = (start(decades.key(0)), start(decades.key(decades.len() - 1))) else {
            return Err(self.corrupt("a decade key is not a number".into()));
        };
        let held = (first, days_from_civil(civil_from_days(last).0 + 10, 1, 1));
        let day = |text: &Option<String>, open: i32, shift: i32| match text {
            None => Ok(open),
            Some(t) => {
                parse_date(t).map(|d| d + shift).ok_or_else(|| self.corrupt(format!("the date {t} does not parse")))
            }
        };
        let lo = day(from, held.0, 0)?.max(held.0);
        let hi = day(to, held.1, 1)?.min(held.1);
        let plan = plan(lo, hi, |days| {
            tiles(days)
                .iter()
                .filter_map(|(table, key, _)| self.span(table, key))
                .map(|(_, _, len)| u64::from(len))
                .sum()
        });
        let edges = |ranges: &[Days]| -> Result<Vec<Arc<RoaringBitmap>>, SearchIndexError> {
            let mut parts = Vec::new();
            for (table, key, days) in ranges.iter().flat_map(|&r| tiles(r)) {
                let Some((keys, i, _)) = self.span(table, &key) else { continue };
                let set = self.bitmap(keys, i)?;
                parts.push(match days {
                    None => set,
                    Some(days) => Arc::new(self.filtered(&set, |p| days.contains(&self.day_at(p)))),
                });
            }
            Ok(parts)
        };
        let cores = match plan.middle {
            None => Vec::new(),
            Some(middle) => self.middle(middle, held)?,
        };
        let (minus, plus) = (edges(&plan.minus)?, edges(&plan.plus)?);
        Ok(DateSet { cores, minus, plus })
    }

    /// The bitmaps whose intersection is the establishments opened in the whole decades `[l, h)`
    /// of the decades `held`: the decade's own for one, else those opened since `l` and before `h`.
    fn middle(&self, (l, h): Days, held: Days) -> Result<Vec<Arc<RoaringBitmap>>, SearchIndexError> {
        let key = |day: i32| format!("{:03}", civil_from_days(day).0.div_euclid(10));
        // The bitmap of `table` at the first decade held from the one of `day` on (no
        // establishment opened in the decades between).
        let from_on = |table: &str, day: i32| {
            let keys = self.keys(table)?;
            match keys.lower_bound(key(day).as_bytes()) {
                i if i < keys.len() => self.bitmap(keys, i),
                _ => Ok(Arc::default()),
            }
        };
        if civil_from_days(h).0 - civil_from_days(l).0 == 10 {
            let decades = self.keys("decada")?;
            return Ok(vec![match decades.find(key(l).as_bytes()) {
                Some(i) => self.bitmap(decades, i)?,
                None => Arc::default(),
            }]);
        }
        let mut cores = Vec::with_capacity(2);
        if l > held.0 {
            cores.push(from_on(SINCE, l)?);
        }
        if h < held.1 {
            cores.push(from_on(BEFORE, h)?);
        }
        if cores.is_empty() {
            cores.push(from_on(SINCE, held.0)?);
        }
        Ok(cores)
    }

    /// The keys of `table`, the index of `key` in them and its bitmap's length, if it is held.
    fn span(&self, table: &str, key: &str) -> Option<(&Keys, usize, u32)> {
        let keys = self.tables.get(table)?;
        keys.find(key.as_bytes()).map(|i| (keys, i, keys.spans[i].len() as u32))
    }

    /// The establishments that match every condition (all of them for none), or `None` when a
    /// condition is beyond the index (a term without a word character): the caller then
    /// searches by SQL.
    pub fn matches(&self, conditions: &[Condition]) -> Result<Option<Matches>, SearchIndexError> {
        let none = || Ok(Some(Matches { ordinals: Arc::default(), within: None }));
        let mut sets = Vec::with_capacity(conditions.len());
        let mut dates = Vec::new();
        for condition in conditions {
            match self.condition(condition)? {
                None => return Ok(None),
                Some(Resolved::Set(set)) => {
                    if set.is_empty() {
                        return none();
                    }
                    sets.push(set);
                }
                Some(Resolved::Dates(range)) if range.is_empty() => return none(),
                Some(Resolved::Dates(range)) => dates.push(range),
            }
        }
        // A search has one date range; any other is resolved alone.
        let range = dates.pop();
        sets.extend(dates.into_iter().map(|d| d.within(Vec::new())));
        let (ordinals, within) = match range {
            Some(range) => (range.within(sets), None),
            None if sets.is_empty() => (Arc::new(self.ordinals(0..self.len())), None),
            None if sets.len() == 1 => (sets.pop().expect("one"), None),
            None => {
                sets.sort_by_key(|s| s.len());
                let sparsest = sets.remove(0);
                (intersect(sets), Some(sparsest))
            }
        };
        Ok(Some(Matches { ordinals, within }))
    }

    /// The CNPJs of `matches` from rank `offset` on, at most `limit` of them, of `total` (their
    /// [`Matches::len`]).
    pub fn cnpjs(&self, matches: &Matches, total: u64, offset: u64, limit: u64) -> Vec<String> {
        let page = matches.page(total, offset, limit);
        page.into_iter().map(|ordinal| unpack(self.packed_at(self.position(ordinal)))).collect()
    }
}

/// The first day of the month after the one of `day`.
fn next_month(day: i32) -> i32 {
    let (y, m, _) = civil_from_days(day);
    if m == 12 { days_from_civil(y + 1, 1, 1) } else { days_from_civil(y, m + 1, 1) }
}

/// The days `[start, end)`, in days since 1970-01-01.
type Days = (i32, i32);

/// A tile of a date range: a posting table and its key, and for a month covered in part the
/// days of the month covered.
type Tile = (&'static str, String, Option<std::ops::RangeInclusive<u8>>);

/// The fewest whole decades, years and months that tile `days`, and the months covered in part.
fn tiles((start, end): Days) -> Vec<Tile> {
    let mut out = Vec::new();
    let mut day = start;
    while day < end {
        let (y, m, d) = civil_from_days(day);
        let next_year = days_from_civil(y + 1, 1, 1);
        let next_decade = days_from_civil(y - y.rem_euclid(10) + 10, 1, 1);
        let month_end = next_month(day);
        let (tile, next) = if m == 1 && d == 1 && y.rem_euclid(10) == 0 && next_decade <= end {
            (("decada", format!("{:03}", y.div_euclid(10)), None), next_decade)
        } else if m == 1 && d == 1 && next_year <= end {
            (("ano", format!("{y:04}"), None), next_year)
        } else if d == 1 && month_end <= end {
            (("mes", format!("{y:04}-{m:02}"), None), month_end)
        } else {
            let last = month_end.min(end);
            (("mes", format!("{y:04}-{m:02}"), Some(d as u8..=(d as i32 + last - 1 - day) as u8)), last)
        };
        out.push(tile);
        day = next;
    }
    out
}

/// How the days `[lo, hi)` are read: the whole decades `middle` (from the cumulative tables),
/// less the `minus` ranges, plus the `plus` ranges (both tiled by [`tiles`]).
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    middle: Option<Days>,
    minus: Vec<Days>,
    plus: Vec<Days>,
}

/// The plan of the days `[lo, hi)` whose edges `cost` least: each end moved to the decade
/// boundary below or above it (the days between are then taken out or added), or no middle
/// (the range tiled whole) when that costs less. `lo` and `hi` lie within the decades held, and
/// the whole decades between them cost nothing (one stored bitmap or two, kept once read).
fn plan(lo: i32, hi: i32, cost: impl Fn(Days) -> u64) -> Plan {
    if lo >= hi {
        return Plan::default();
    }
    let boundaries = |day: i32| {
        let y = civil_from_days(day).0;
        let below = days_from_civil(y - y.rem_euclid(10), 1, 1);
        [below, if below == day { day } else { days_from_civil(y - y.rem_euclid(10) + 10, 1, 1) }]
    };
    let mut best = (cost((lo, hi)), Plan { middle: None, minus: Vec::new(), plus: vec![(lo, hi)] });
    for l in boundaries(lo) {
        for h in boundaries(hi) {
            // The edges must lie inside the middle (minus) or beside it (plus).
            if l > h || lo > h || l > hi {
                continue;
            }
            let minus: Vec<Days> = [(l, lo), (hi, h)].into_iter().filter(|r| r.0 < r.1).collect();
            let plus: Vec<Days> = [(lo, l), (h, hi)].into_iter().filter(|r| r.0 < r.1).collect();
            let edges = minus.iter().chain(&plus).map(|&r| cost(r)).sum();
            if edges < best.0 {
                best = (edges, Plan { middle: (l < h).then_some((l, h)), minus, plus });
            }
        }
    }
    best.1
}

/// The establishments opened in a date range: `(∩ cores ∖ ∪ minus) ∪ ∪ plus`, no cores for an
/// empty middle. The cores join the other conditions' intersection (smallest first) and the
/// edges are applied to what it leaves, so that a range of whole decades costs one intersection
/// more than its other conditions, not a union of its decades.
#[derive(Default)]
struct DateSet {
    cores: Vec<Arc<RoaringBitmap>>,
    minus: Vec<Arc<RoaringBitmap>>,
    plus: Vec<Arc<RoaringBitmap>>,
}

impl DateSet {
    fn is_empty(&self) -> bool {
        self.plus.iter().all(|p| p.is_empty()) && (self.cores.is_empty() || self.cores.iter().any(|c| c.is_empty()))
    }

    /// The range's establishments among those of every set of `others` (all of them for none).
    fn within(self, mut others: Vec<Arc<RoaringBitmap>>) -> Arc<RoaringBitmap> {
        let DateSet { mut cores, minus, mut plus } = self;
        if !others.is_empty() && !plus.is_empty() {
            // The edges among the other conditions' establishments: few, merged into one first.
            let rest = intersect(std::mem::take(&mut others));
            plus = vec![Arc::new(union(plus.iter().map(|p| Arc::new(rest.as_ref() & p.as_ref())).collect()))];
            others.push(rest);
        }
        if cores.is_empty() {
            return match plus.len() {
                1 => plus.pop().expect("one"),
                _ => Arc::new(plus.iter().map(|p| p.as_ref()).union()),
            };
        }
        cores.extend(others);
        let out = intersect(cores);
        if minus.is_empty() && plus.is_empty() {
            return out;
        }
        let mut out = Arc::unwrap_or_clone(out);
        for part in &minus {
            out -= part.as_ref();
        }
        for part in &plus {
            out |= part.as_ref();
        }
        Arc::new(out)
    }
}

/// What a condition resolves to.
enum Resolved {
    /// The establishments that match.
    Set(Arc<RoaringBitmap>),
    /// A date range.
    Dates(DateSet),
}

/// The union of `parts`, into a copy of the biggest (arrays merged as arrays: `MultiOps::union`
/// turns each into a bitmap and back, which costs more than the merge for the small parts of a
/// date range).
fn union(mut parts: Vec<Arc<RoaringBitmap>>) -> RoaringBitmap {
    parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else { return RoaringBitmap::new() };
    let mut out = Arc::unwrap_or_clone(first);
    for part in parts {
        out |= part.as_ref();
    }
    out
}

/// The intersection of `sets`, smallest first (one set is itself, not a copy).
fn intersect(mut sets: Vec<Arc<RoaringBitmap>>) -> Arc<RoaringBitmap> {
    sets.sort_by_key(|s| s.len());
    let mut sets = sets.into_iter();
    let Some(first) = sets.next() else { return Arc::default() };
    let Some(second) = sets.next() else { return first };
    let mut acc = first.as_ref() & second.as_ref();
    for set in sets {
        if acc.is_empty() {
            break;
        }
        acc &= set.as_ref();
    }
    Arc::new(acc)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn packing_keeps_text_order(a in "[0-9A-Z]{12}", b in "[0-9A-Z]{12}") {
            prop_assert_eq!(pack(a.as_bytes()).cmp(&pack(b.as_bytes())), a.cmp(&b));
            let dv = cnpj_model::check_digits(a.as_bytes().try_into().unwrap()).unwrap();
            prop_assert_eq!(unpack(pack(a.as_bytes())), format!("{a}{}", String::from_utf8_lossy(&dv)));
        }

        #[test]
        fn a_bitmap_reads_back_as_it_was_written(
            ordinals in proptest::collection::vec(any::<u32>(), 0..400),
            run in proptest::option::of((any::<u32>(), 0u32..200_000)),
        ) {
            let mut bitmap: RoaringBitmap = ordinals.into_iter().collect();
            if let Some((start, len)) = run {
                bitmap.insert_range(start..start.saturating_add(len));
            }
            let mut bytes = Vec::new();
            let read = match encode(&bitmap, &mut bytes) {
                true => decode_list(&bytes).unwrap(),
                false => RoaringBitmap::deserialize_from(bytes.as_slice()).unwrap(),
            };
            prop_assert!(bytes.len() <= bitmap.serialized_size());
            // Which form is chosen is its own test; this one checks both forms read back.
            prop_assert_eq!(read, bitmap);
        }
    }

    proptest! {
        #[test]
        fn a_page_of_a_part_kept_apart_is_the_page_of_the_intersection(
            a in proptest::collection::vec(0u32..5_000, 0..2_000),
            b in proptest::collection::vec(0u32..5_000, 0..3_000),
            offset in 0u64..1_500,
            limit in 1u64..50,
        ) {
            let (a, b): (RoaringBitmap, RoaringBitmap) = (a.into_iter().collect(), b.into_iter().collect());
            check_page(&a, &b, offset, limit);
        }
    }

    fn check_page(a: &RoaringBitmap, b: &RoaringBitmap, offset: u64, limit: u64) {
        let matches = Matches { ordinals: Arc::new(b.clone()), within: Some(Arc::new(a.clone())) };
        let all: Vec<u32> = (a & b).iter().collect();
        assert_eq!(matches.len(), all.len() as u64);
        let expected: Vec<u32> = all.iter().copied().skip(offset as usize).take(limit as usize).collect();
        assert_eq!(matches.page(matches.len(), offset, limit), expected, "from {offset}");
    }

    #[test]
    fn a_deep_page_of_a_sparse_intersection_is_read_from_the_intersection() {
        let evens: RoaringBitmap = (0..1_000_000).step_by(2).collect();
        let thirds: RoaringBitmap = (0..1_000_000).step_by(3).collect();
        // Every second multiple of 3 is even: a page is walked to up to rank 100,000 (two reads a
        // match, PAGE_WALK reads), past it read from the intersection.
        for offset in [0, 50_000, 150_000, 166_660, 170_000] {
            check_page(&evens, &thirds, offset, 20);
        }
    }

    #[test]
    fn sparse_bitmaps_are_lists_and_dense_ones_roaring() {
        let check = |ordinals: &[u32], list: bool| {
            let mut bytes = Vec::new();
            assert_eq!(encode(&ordinals.iter().copied().collect(), &mut bytes), list, "{} ordinals", ordinals.len());
        };
        check(&[], true);
        check(&[7], true);
        check(&[3, 1 << 20, 1 << 31, u32::MAX], true);
        // Gaps of 200 cost two bytes an ordinal, as roaring's arrays do.
        check(&(0..4_000).map(|i| i * 200).collect::<Vec<_>>(), false);
        check(&(0..4_000).map(|i| i * 100_000).collect::<Vec<_>>(), true);
    }

    #[test]
    fn lists_that_do_not_ascend_within_u32_are_refused() {
        let check = |gaps: &[u64], expected: Option<&[u32]>| {
            let mut bytes = Vec::new();
            gaps.iter().for_each(|&g| put_varint(&mut bytes, g));
            assert_eq!(decode_list(&bytes), expected.map(|o| o.iter().copied().collect()), "{gaps:?}");
        };
        check(&[0, 1, 2], Some(&[0, 1, 3]));
        check(&[5, 0], None);
        check(&[u64::from(u32::MAX), 1], None);
        check(&[1 << 40], None);
        // A varint cut short.
        assert_eq!(decode_list(&[0x80]), None);
    }

    proptest! {
        #[test]
        fn packed_keys_sort_as_their_text_and_unpack_to_it(a in "[-0-9A-Za-z]{0,10}", b in "[-0-9A-Za-z]{0,10}") {
            let (pa, pb) = (pack_key(&a).unwrap(), pack_key(&b).unwrap());
            prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
            prop_assert_eq!(unpack_key(pa), a);
        }
    }

    #[test]
    fn keys_too_long_or_of_other_characters_are_held_as_text() {
        for key in ["ABCDEFGHIJK", "SÃO", "A B", "A_B", "a%"] {
            assert_eq!(pack_key(key), None, "{key}");
        }
        let mut postings = Postings::default();
        for (ordinal, key) in ["PAULO", "CONCEIÇÃO", "ABCDEFGHIJKL", "PAULO", "", "0001"].into_iter().enumerate() {
            postings.add(Table::Nome, key, ordinal as u32);
        }
        let held: Vec<(String, Vec<u32>)> = postings.tables[Table::Nome as usize]
            .drain_sorted()
            .into_iter()
            .map(|(key, bitmap)| (key.into(), bitmap.iter().collect()))
            .collect();
        let expected = [
            ("", vec![4]),
            ("0001", vec![5]),
            ("ABCDEFGHIJKL", vec![2]),
            ("CONCEIÇÃO", vec![1]),
            ("PAULO", vec![0, 3]),
        ];
        assert_eq!(held, expected.map(|(k, v)| (k.to_owned(), v)));
    }

    #[test]
    fn pending_ordinals_settle_into_their_bitmaps_once_each() {
        let mut postings = Postings::default();
        let n = 3 * PENDING as u32 + 7;
        for ordinal in 0..n {
            postings.add(Table::Situacao, "02", ordinal);
            if ordinal % 3 == 0 {
                postings.add(Table::Situacao, "02", ordinal);
            }
            postings.settle();
        }
        let t = &mut postings.tables[Table::Situacao as usize];
        assert!(t.pending.len() < PENDING, "settled as they come");
        postings.add_range(Table::Situacao, "08", 5..9);
        postings.tables[Table::Situacao as usize].settle();
        postings.add(Table::Situacao, "08", 2); // below what the bitmap holds
        let held: Vec<(String, Vec<u32>)> = postings.tables[Table::Situacao as usize]
            .drain_sorted()
            .into_iter()
            .map(|(key, bitmap)| (key.into(), bitmap.iter().collect()))
            .collect();
        assert_eq!(held, [("02".to_owned(), (0..n).collect()), ("08".to_owned(), vec![2, 5, 6, 7, 8])]);
    }

    /// Every table's keys and ordinals, settled; empties `postings`.
    fn held(postings: &mut Postings) -> Vec<Vec<(Box<str>, Vec<u32>)>> {
        let tables = postings.tables.iter_mut();
        tables.map(|t| t.drain_sorted().into_iter().map(|(k, b)| (k, b.iter().collect())).collect()).collect()
    }

    proptest! {
        #[test]
        fn a_text_remembered_adds_the_keys_it_gave_when_first_split(
            texts in proptest::collection::vec((0usize..3, "(A|B|SAO|PAULO| |-|\\.){0,6}"), 1..200),
            spill_at in 0usize..200,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let fields = [Field::Fantasia, Field::Razao, Field::Bairro];
            let (mut memo, mut plain) = (Postings::default(), Postings::default());
            for (i, (field, text)) in texts.iter().enumerate() {
                let ordinals = 2 * i as u32..2 * i as u32 + 1 + (i % 2) as u32;
                if i == spill_at {
                    memo.spill(&dir.path().join("spill")).unwrap();
                    plain.spill(&dir.path().join("spill")).unwrap();
                }
                memo.add_text(fields[*field], text, ordinals.clone());
                plain.add_keys(fields[*field], text, ordinals, &mut Vec::new());
            }
            prop_assert_eq!(memo.bytes, plain.bytes);
            prop_assert_eq!(held(&mut memo), held(&mut plain));
        }
    }

    fn check(keys: &[&str], needle: &str, expected: &[&str]) {
        let mut k = Keys { text: vec![b'\n'], starts: Vec::new(), spans: Vec::new() };
        for key in keys {
            k.starts.push(k.text.len() as u32);
            k.text.extend_from_slice(key.as_bytes());
            k.text.push(b'\n');
            k.spans.push(Span { at: 0, size: 0, checksum: 0 });
        }
        k.starts.push(k.text.len() as u32);
        let found: Vec<&str> = k.matching(needle.as_bytes()).into_iter().map(|i| keys[i]).collect();
        assert_eq!(found, expected, "{needle:?}");
    }

    #[test]
    fn needles_are_found_where_they_are_pinned() {
        let keys = ["ana", "banana", "bar", "nan", "padaria", "ria", "ria sa", "sa ltda"];
        check(&keys, "an", &["ana", "banana", "nan"]);
        check(&keys, "ana", &["ana", "banana"]);
        check(&keys, "ria\n", &["padaria", "ria"]);
        check(&keys, "\nba", &["banana", "bar"]);
        check(&keys, "\nria\n", &["ria"]);
        check(&keys, "\nar\n", &[]);
        check(&keys, "x", &[]);
        check(&keys, "\na", &["ana"]);
        check(&keys, "ia sa\n", &["ria sa"]);
        check(&keys, "\nsa lt", &["sa ltda"]);
    }
}

/// How a date range is read: which decade boundaries and edges.
#[cfg(test)]
mod date_plans {
    use super::*;

    /// The plan of `[from, to]` (days of `YYYY-MM-DD`) when a day costs one.
    fn check(from: &str, to: &str, expected: Plan) {
        let day = |t: &str| parse_date(t).unwrap();
        let found = plan(day(from), day(to) + 1, |(a, b)| (b - a) as u64);
        assert_eq!(found, expected, "{from}..{to}");
    }

    #[test]
    fn a_range_is_whole_decades_and_the_cheapest_edges() {
        let d = |t: &str| parse_date(t).unwrap();
        let plan = |middle: Option<(&str, &str)>, minus: &[(&str, &str)], plus: &[(&str, &str)]| Plan {
            middle: middle.map(|(a, b)| (d(a), d(b))),
            minus: minus.iter().map(|&(a, b)| (d(a), d(b))).collect(),
            plus: plus.iter().map(|&(a, b)| (d(a), d(b))).collect(),
        };
        // Whole decades: no edge.
        check("2010-01-01", "2029-12-31", plan(Some(("2010-01-01", "2030-01-01")), &[], &[]));
        check("2010-01-01", "2019-12-31", plan(Some(("2010-01-01", "2020-01-01")), &[], &[]));
        // An end near a boundary: the days beyond it taken out, or the days before it added.
        check(
            "2011-01-01",
            "2019-12-31",
            plan(Some(("2010-01-01", "2020-01-01")), &[("2010-01-01", "2011-01-01")], &[]),
        );
        check(
            "2008-06-01",
            "2029-12-31",
            plan(Some(("2010-01-01", "2030-01-01")), &[], &[("2008-06-01", "2010-01-01")]),
        );
        check(
            "2000-01-01",
            "2027-12-31",
            plan(Some(("2000-01-01", "2030-01-01")), &[("2028-01-01", "2030-01-01")], &[]),
        );
        check(
            "2000-01-01",
            "2022-12-31",
            plan(Some(("2000-01-01", "2020-01-01")), &[], &[("2020-01-01", "2023-01-01")]),
        );
        // Inside one decade, or across a boundary, tiled when that is cheaper.
        check("2013-03-05", "2013-03-20", plan(None, &[], &[("2013-03-05", "2013-03-21")]));
        check("2013-03-05", "2016-12-31", plan(None, &[], &[("2013-03-05", "2017-01-01")]));
        check("2018-03-05", "2021-07-09", plan(None, &[], &[("2018-03-05", "2021-07-10")]));
        check(
            "2012-03-05",
            "2020-01-01",
            plan(Some(("2010-01-01", "2020-01-01")), &[("2010-01-01", "2012-03-05")], &[("2020-01-01", "2020-01-02")]),
        );
        // Nothing.
        check("2013-03-05", "2013-03-04", Plan::default());
        check("2013-03-05", "2001-01-01", Plan::default());
    }
}

/// Date ranges read from a real index file, against a scan of the dates it was written from.
#[cfg(test)]
mod date_ranges {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    use super::*;
    use crate::text::date_text;

    /// The ordinal of the `i`-th of `n` establishments (the first half in the lower half).
    fn ordinal(i: usize, n: usize) -> u32 {
        if i < n / 2 { i as u32 } else { UPPER + (i - n / 2) as u32 }
    }

    /// An index in `dir` of establishments opened on `dates`, every other one in `SP`.
    fn index(dir: &Path, dates: &[Option<i32>]) -> SearchIndex {
        let n = dates.len();
        let mut halves = Vec::new();
        let mut spills = Vec::new();
        for (half, rows) in [0..n / 2, n / 2..n].into_iter().enumerate() {
            let file = |name: &str| dir.join(format!("{name}{half}"));
            let mut postings = Postings::default();
            let (mut cnpjs, mut days, mut ceps) = (Vec::new(), Vec::new(), Vec::new());
            for i in rows.clone() {
                cnpjs.extend_from_slice(&pack(format!("{i:012}").as_bytes()).to_le_bytes());
                ceps.extend_from_slice(&u16::MAX.to_le_bytes());
                let mut day = 0;
                if let Some(date) = dates[i] {
                    let text = date_text(date);
                    postings.add(Table::Mes, &text[..7], ordinal(i, n));
                    postings.add(Table::Ano, &text[..4], ordinal(i, n));
                    postings.add(Table::Decada, &text[..3], ordinal(i, n));
                    day = text[8..].parse().unwrap();
                }
                days.push(day);
                if i % 2 == 0 {
                    postings.add(Table::Uf, "SP", ordinal(i, n));
                }
            }
            for (name, bytes) in [("cnpjs", cnpjs), ("days", days), ("ceps", ceps)] {
                std::fs::write(file(name), bytes).unwrap();
            }
            spills.push(file("spill"));
            postings.spill(&file("spill")).unwrap();
            halves.push(HalfColumns {
                cnpjs: file("cnpjs"),
                days: file("days"),
                ceps: file("ceps"),
                rows: rows.len() as u64,
            });
        }
        let path = dir.join("index.search");
        let halves: [HalfColumns; 2] = halves.try_into().ok().unwrap();
        write_index(&path, halves, &spills, "build").unwrap();
        SearchIndex::open(&path, 1 << 20).unwrap()
    }

    /// The index finds the establishments opened from `from` to `to` (inclusive, `None` open),
    /// alone and with another condition.
    fn check(index: &SearchIndex, dates: &[Option<i32>], from: Option<i32>, to: Option<i32>) {
        let opening = Condition::Opening { from: from.map(date_text), to: to.map(date_text) };
        let sp = Condition::AnyOf { table: "uf", values: vec!["SP".into()] };
        let held = |d: &Option<i32>| d.is_some_and(|d| from.is_none_or(|f| f <= d) && to.is_none_or(|t| d <= t));
        for (conditions, every) in [(vec![opening.clone()], 1), (vec![sp, opening], 2)] {
            let expected: Vec<u32> = (0..dates.len())
                .filter(|&i| i % every == 0 && held(&dates[i]))
                .map(|i| ordinal(i, dates.len()))
                .collect();
            let found = index.matches(&conditions).unwrap().unwrap();

            let found: Vec<u32> = found.ordinals().iter().collect();
            assert_eq!(found, expected, "{:?}..{:?} of {conditions:?}", from.map(date_text), to.map(date_text));
        }
    }

    /// Dates in a few decades with gaps between (1800s, 1890s, 1950–2029, 2100), a tenth unknown,
    /// and the days around some boundaries.
    fn dates() -> Vec<Option<i32>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        let mut dates: Vec<Option<i32>> = (0..6000)
            .map(|_| {
                let year = match next() % 100 {
                    0..10 => return None,
                    10 => 1800,
                    11 => 1805,
                    12 | 13 => 1899,
                    14 => 2100,
                    _ => 1950 + (next() % 80) as i32,
                };
                Some(days_from_civil(year, 1, 1) + (next() % 365) as i32)
            })
            .collect();
        for (i, text) in
            ["2009-12-31", "2010-01-01", "2019-12-31", "2020-02-29", "1899-12-31", "2100-12-31"].iter().enumerate()
        {
            dates[i * 997] = parse_date(text);
        }
        dates
    }

    #[test]
    fn a_date_range_finds_what_a_scan_finds() {
        let dir = tempfile::tempdir().unwrap();
        let dates = dates();
        let index = index(dir.path(), &dates);
        let d = |t: &str| Some(parse_date(t).unwrap());
        let cases = [
            (d("2013-03-05"), d("2013-03-20")), // inside one month
            (d("2013-03-05"), d("2017-08-01")), // inside one decade
            (d("2013-03-05"), d("2021-07-09")), // across a decade boundary
            (d("2011-01-01"), d("2019-12-31")), // a decade less a year
            (d("2010-01-01"), d("2019-12-31")), // one whole decade
            (d("1955-06-01"), d("2024-12-31")), // several, both edges inside
            (d("2005-01-01"), None),            // open above
            (d("2010-01-01"), None),            // open above from a boundary
            (None, d("1999-12-31")),            // open below
            (None, d("2010-01-01")),            // open below, one day past a boundary
            (d("2024-01-01"), d("2013-01-01")), // from after to
            (d("1700-01-01"), d("1899-12-31")), // before 1900
            (d("2099-12-31"), d("2200-01-01")), // after 2099
            (None, d("1700-01-01")),            // before everything
            (d("2200-01-01"), None),            // after everything
            (d("1800-01-01"), None),            // every known date, no unknown one
            (d("1810-01-01"), d("1889-12-31")), // only decades that hold none
            (d("1806-01-01"), d("1899-12-30")), // edges in decades held, a gap between
        ];
        for (from, to) in cases {
            check(&index, &dates, from, to);
        }
        let day = prop_oneof![
            Just(None),
            (-100_000i32..50_000).prop_map(Some),
            proptest::sample::select(dates.clone()).prop_flat_map(|d| (-1i32..=1).prop_map(move |s| d.map(|d| d + s))),
            (175i32..215, -1i32..=1).prop_map(|(decade, s)| Some(days_from_civil(decade * 10, 1, 1) + s)),
        ];
        let mut runner = TestRunner::new_with_rng(
            Config { cases: 1000, failure_persistence: None, ..Config::default() },
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        runner
            .run(&(day.clone(), day), |(from, to)| {
                check(&index, &dates, from, to);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn an_index_of_another_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let index = index(dir.path(), &dates());
        let path = index.path.clone();
        drop(index);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        for at in [0, n - 8] {
            bytes[at..at + 8].copy_from_slice(b"CNPJSRC2");
        }
        std::fs::write(&path, bytes).unwrap();
        let error = SearchIndex::open(&path, 1 << 20).unwrap_err();
        assert!(error.to_string().ends_with("not a search index of this version"), "{error}");
    }
}
