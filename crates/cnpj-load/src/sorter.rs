//! An external sort of byte records by byte key, for the partners (`partners.rs`): records are
//! buffered, a full buffer is sorted and written out as a run file, and the runs are merged back
//! in key order, as many times as asked (the files go when the sorted set is dropped). Memory is
//! the buffer, whatever the number of records. The main tables have their own typed sort
//! (`runs.rs`), whose merge is where duplicates are found.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::LoadError;

/// Per buffered record: where it starts in the buffer, its key's and its payload's length.
type Entry = (u32, u32, u32);

/// A record: its key and its payload.
pub(crate) type Record<'a> = (&'a [u8], &'a [u8]);

/// Records being sorted (see the module's docs).
pub(crate) struct Sorter {
    dir: PathBuf,
    name: &'static str,
    buffer_bytes: usize,
    buffer: Vec<u8>,
    index: Vec<Entry>,
    runs: Vec<PathBuf>,
}

/// The runs of a finished sort.
pub(crate) struct Sorted {
    runs: Vec<PathBuf>,
}

impl Sorter {
    /// A sort whose runs are `dir/{name}-{n}.run`, each of about `buffer_bytes` (its index
    /// included).
    pub fn new(dir: &Path, name: &'static str, buffer_bytes: usize) -> Sorter {
        Sorter { dir: dir.to_owned(), name, buffer_bytes, buffer: Vec::new(), index: Vec::new(), runs: Vec::new() }
    }

    pub fn push(&mut self, key: &[u8], payload: &[u8]) -> Result<(), LoadError> {
        let bytes = key.len() + payload.len();
        let index_bytes = (self.index.len() + 1) * std::mem::size_of::<Entry>();
        if !self.index.is_empty() && self.buffer.len() + bytes + index_bytes > self.buffer_bytes {
            self.write_run()?;
        }
        let start = u32::try_from(self.buffer.len()).map_err(|_| self.too_big())?;
        self.buffer.extend_from_slice(key);
        self.buffer.extend_from_slice(payload);
        self.index.push((start, key.len() as u32, payload.len() as u32));
        Ok(())
    }

    /// Writes what is buffered as the last run.
    pub fn finish(mut self) -> Result<Sorted, LoadError> {
        self.write_run()?;
        Ok(Sorted { runs: std::mem::take(&mut self.runs) })
    }

    fn too_big(&self) -> LoadError {
        LoadError::Io { path: self.dir.clone(), source: std::io::Error::other("a sort buffer of 4 GB or more") }
    }

    fn write_run(&mut self) -> Result<(), LoadError> {
        if self.index.is_empty() {
            return Ok(());
        }
        let buffer = &self.buffer;
        let key = |&(start, key_len, _): &Entry| &buffer[start as usize..(start + key_len) as usize];
        // Stable: records of one key stay in the order pushed.
        self.index.sort_by(|a, b| key(a).cmp(key(b)));
        let path = self.dir.join(format!("{}-{}.run", self.name, self.runs.len()));
        let io = |source| LoadError::Io { path: path.clone(), source };
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io)?);
        for &(start, key_len, payload_len) in &self.index {
            out.write_all(&key_len.to_le_bytes()).map_err(io)?;
            out.write_all(&payload_len.to_le_bytes()).map_err(io)?;
            let end = (start + key_len + payload_len) as usize;
            out.write_all(&buffer[start as usize..end]).map_err(io)?;
        }
        out.flush().map_err(io)?;
        self.runs.push(path);
        self.index.clear();
        self.buffer.clear();
        Ok(())
    }
}

impl Sorted {
    /// The records in key order; records of one key in the order they were pushed.
    pub fn merge(&self) -> Result<Merge, LoadError> {
        let mut readers = Vec::with_capacity(self.runs.len());
        for path in &self.runs {
            let file = File::open(path).map_err(|source| LoadError::Io { path: path.clone(), source })?;
            let mut reader = Reader {
                path: path.clone(),
                file: BufReader::with_capacity(1 << 18, file),
                record: Vec::new(),
                key_len: 0,
                live: true,
            };
            reader.advance()?;
            readers.push(reader);
        }
        Ok(Merge { readers, last: None })
    }
}

impl Drop for Sorted {
    fn drop(&mut self) {
        for path in &self.runs {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The merge of a sort's runs (see [`Sorted::merge`]).
pub(crate) struct Merge {
    readers: Vec<Reader>,
    /// The reader whose record was handed out last, advanced on the next call.
    last: Option<usize>,
}

impl Merge {
    /// The next record, as its key and payload. A sort has a run per buffer, a few dozen at
    /// most: the smallest key is found by a scan of them, which costs less than a heap's moves.
    pub fn next(&mut self) -> Result<Option<Record<'_>>, LoadError> {
        if let Some(last) = self.last.take() {
            self.readers[last].advance()?;
        }
        let mut best: Option<usize> = None;
        for (i, reader) in self.readers.iter().enumerate() {
            if reader.live && best.is_none_or(|b| reader.key() < self.readers[b].key()) {
                best = Some(i);
            }
        }
        self.last = best;
        Ok(best.map(|i| {
            let reader = &self.readers[i];
            (reader.key(), &reader.record[reader.key_len..])
        }))
    }
}

/// One run, a record at a time.
struct Reader {
    path: PathBuf,
    file: BufReader<File>,
    record: Vec<u8>,
    key_len: usize,
    live: bool,
}

impl Reader {
    fn key(&self) -> &[u8] {
        &self.record[..self.key_len]
    }

    fn advance(&mut self) -> Result<(), LoadError> {
        let io = |source| LoadError::Io { path: self.path.clone(), source };
        let mut head = [0; 8];
        match self.file.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.live = false;
                return Ok(());
            }
            Err(e) => return Err(io(e)),
        }
        let [k0, k1, k2, k3, p0, p1, p2, p3] = head;
        self.key_len = u32::from_le_bytes([k0, k1, k2, k3]) as usize;
        let len = self.key_len + u32::from_le_bytes([p0, p1, p2, p3]) as usize;
        self.record.resize(len, 0);
        self.file.read_exact(&mut self.record).map_err(io)
    }
}

/// Appends a length-prefixed field to a record's payload (read back by [`take`]).
pub(crate) fn put(out: &mut Vec<u8>, field: &[u8]) {
    out.extend_from_slice(&(field.len() as u32).to_le_bytes());
    out.extend_from_slice(field);
}

/// Takes the next field [`put`] wrote off the front of a payload (empty once it runs out).
pub(crate) fn take<'a>(payload: &mut &'a [u8]) -> &'a [u8] {
    let Some((len, rest)) = payload.split_first_chunk::<4>() else { return &[] };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (field, rest) = rest.split_at(len);
    *payload = rest;
    field
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorts `records` with a buffer of `buffer_bytes` and reads the merge back twice.
    fn check(records: &[(&str, &str)], buffer_bytes: usize) {
        let dir = tempfile::tempdir().unwrap();
        let mut sorter = Sorter::new(dir.path(), "test", buffer_bytes);
        for (key, payload) in records {
            sorter.push(key.as_bytes(), payload.as_bytes()).unwrap();
        }
        let sorted = sorter.finish().unwrap();
        let mut expected = records.to_vec();
        expected.sort_by_key(|(key, _)| *key);
        for _ in 0..2 {
            let mut merge = sorted.merge().unwrap();
            let mut got = Vec::new();
            while let Some((key, payload)) = merge.next().unwrap() {
                got.push((String::from_utf8(key.to_vec()).unwrap(), String::from_utf8(payload.to_vec()).unwrap()));
            }
            let got: Vec<(&str, &str)> = got.iter().map(|(k, p)| (k.as_str(), p.as_str())).collect();
            assert_eq!(got, expected, "buffer of {buffer_bytes} bytes");
        }
        let runs = sorted.runs.clone();
        drop(sorted);
        assert!(runs.iter().all(|r| !r.exists()), "runs deleted");
    }

    #[test]
    fn records_come_back_in_key_order_ties_in_the_order_pushed() {
        let records = [("b", "1"), ("a", "2"), ("b", "3"), ("", "4"), ("ab", ""), ("a", "5"), ("b", "6")];
        // One run; a run per record or two; and no records.
        for buffer_bytes in [1 << 20, 1, 30] {
            check(&records, buffer_bytes);
        }
        check(&[], 1 << 20);
    }

    #[test]
    fn fields_round_trip_and_a_short_payload_gives_empty_fields() {
        let mut payload = Vec::new();
        for field in [&b"nome"[..], b"", b"x"] {
            put(&mut payload, field);
        }
        let mut rest = payload.as_slice();
        assert_eq!(
            [take(&mut rest), take(&mut rest), take(&mut rest), take(&mut rest)],
            [&b"nome"[..], b"", b"x", b""]
        );
        let mut cut = &payload[..6];
        assert_eq!(take(&mut cut), b"no", "a length past the end takes what is there");
    }
}
