//! The search index written: postings gathered in memory while the build runs (a feed's, by
//! table and key), up to a budget, then spilled to files sorted by table and key; the file is
//! written by a merge of the spills, so the build's memory does not grow with the month.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use roaring::RoaringBitmap;

use super::SearchIndexError;
use super::format::{BEFORE, Field, MAGIC, SINCE, TABLES, Table, decode_list, encode};
use crate::lookup::put_varint;
use crate::text::{phrase_keys, words};

/// Postings in memory (one feed's, since its last spill), by table and key, with an estimate of
/// the memory they take.
#[derive(Default)]
pub(crate) struct Postings {
    tables: [TablePostings; TABLES.len()],
    pub(crate) bytes: usize,
    /// The buffer phrase keys are written in.
    key: String,
    /// By [`Field`]: the texts last added, with the slots of their keys.
    memos: [Vec<Memo>; Field::ALL.len()],
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

/// The columns one half of the establishments wrote, and its size.
pub(crate) struct HalfColumns {
    pub(crate) cnpjs: PathBuf,
    pub(crate) days: PathBuf,
    pub(crate) ceps: PathBuf,
    pub(crate) rows: u64,
}

/// The partners' column (10 bytes per partner ordinal), and how many partners it holds.
pub(crate) struct PartnerColumn {
    pub(crate) ids: PathBuf,
    pub(crate) rows: u64,
}

/// A key of the directory: its text, its bitmap's offset, its size (length `<< 1 | list`, see
/// [`encode`]) and the checksum of its bytes.
type Entry = (Vec<u8>, u64, u64, u32);

/// Writes the search index file from the halves' columns (lower, upper) and the spilled postings.
pub(crate) fn write_index(
    path: &Path,
    columns: [HalfColumns; 2],
    partners: Option<PartnerColumn>,
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
    put_varint(&mut directory, partners.as_ref().map_or(0, |p| p.rows));
    put_varint(&mut directory, file.offset);
    if let Some(partners) = &partners {
        file.copy(&partners.ids)?;
    }
    let (mut tables, repeating) = file.merge_spills(spills)?;
    let (before, since) = file.cumulative_decades(&tables[Table::Decada as usize])?;
    let mut repeats = Vec::with_capacity(Field::ALL.len());
    for (field, set) in Field::ALL.iter().zip(&repeating) {
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
    fn merge_spills(
        &mut self,
        spills: &[PathBuf],
    ) -> Result<(Vec<Vec<Entry>>, [RoaringBitmap; Field::ALL.len()]), SearchIndexError> {
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
        let mut repeating: [RoaringBitmap; Field::ALL.len()] = Default::default();
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
            if let Some(f) = Field::ALL.iter().position(|f| f.tables().1 as u8 == table) {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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
}
