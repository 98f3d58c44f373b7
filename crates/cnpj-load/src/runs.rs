//! The external sort of the main tables. A member's rows are encoded into a buffer; a full buffer
//! is sorted by key and written out as a run file. The runs of a table are then merged in key
//! order, which is where one row per key is kept (the first read) and every later one becomes a
//! duplicate, and the merged rows are appended straight into the served table: each value is
//! stored by DuckDB once, already in key order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::marker::PhantomData;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cnpj_model::rows::{EmpresaRow, EstabelecimentoRow, RegimeRow, SimplesRow, SocioRow};

use crate::LoadError;
use crate::batches::{Batch, Codec, DuplicateBatch, DuplicateRow, Provenance, Served};

/// A row's sort key: its table's key bytes, zero-padded. The first 8 bytes are always the
/// company (`cnpj_basico`), the group within which duplicates are looked for.
pub type Key = [u8; 16];

/// Every key: keys are ASCII text, zero-padded, so none reaches the end.
pub(crate) const ALL_KEYS: Range<Key> = [0; 16]..[u8::MAX; 16];

/// A served table's rows: how they sort and when two are the same row (the first read of a key is kept).
pub trait Keyed {
    /// The served table.
    const TABLE: &'static str;
    /// The served order: empresas and simples by company, estabelecimentos by CNPJ, socios by
    /// company (then reading order), regimes by company and year, latest first.
    fn key(&self) -> Key;
    /// Within a company, rows with the same identity are duplicates and the first read wins:
    /// one row per company (empresas, simples) or CNPJ; socios only when fully identical;
    /// regimes per (CNPJ, year, regime).
    fn identity(&self, row_hash: i64, out: &mut Vec<u8>);
    /// The key shown in the `duplicates` table.
    fn chave(&self) -> String;
    /// Every non-empty code of the row, with the lookup table that should know it.
    fn codes(&self, _each: &mut dyn FnMut(&'static str, &str)) {}
}

fn key(parts: &[&[u8]]) -> Key {
    let mut key = [0; 16];
    let mut at = 0;
    for part in parts {
        key[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    key
}

impl Keyed for EmpresaRow {
    const TABLE: &'static str = "empresas";
    fn key(&self) -> Key {
        key(&[self.cnpj_basico.as_bytes()])
    }
    fn identity(&self, _: i64, _: &mut Vec<u8>) {}
    fn chave(&self) -> String {
        self.cnpj_basico.clone()
    }
    fn codes(&self, each: &mut dyn FnMut(&'static str, &str)) {
        each("naturezas", &self.natureza_juridica);
        each("qualificacoes", &self.qualificacao_responsavel);
        each("porte_empresa", &self.porte_empresa);
    }
}

impl Keyed for EstabelecimentoRow {
    const TABLE: &'static str = "estabelecimentos";
    fn key(&self) -> Key {
        key(&[self.cnpj.as_bytes()])
    }
    fn identity(&self, _: i64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.cnpj.as_bytes());
    }
    fn chave(&self) -> String {
        self.cnpj.clone()
    }
    fn codes(&self, each: &mut dyn FnMut(&'static str, &str)) {
        each("cnaes", &self.cnae_fiscal);
        if !self.cnaes_secundarios.is_empty() {
            self.cnaes_secundarios.split(',').for_each(|code| each("cnaes", code));
        }
        each("motivos", &self.motivo_situacao_cadastral);
        each("paises", &self.pais);
        each("situacao_cadastral", &self.situacao_cadastral);
        each("matriz_filial", &self.matriz_filial);
        each("municipios", &self.municipio);
    }
}

impl Keyed for SimplesRow {
    const TABLE: &'static str = "simples";
    fn key(&self) -> Key {
        key(&[self.cnpj_basico.as_bytes()])
    }
    fn identity(&self, _: i64, _: &mut Vec<u8>) {}
    fn chave(&self) -> String {
        self.cnpj_basico.clone()
    }
}

impl Keyed for SocioRow {
    const TABLE: &'static str = "socios";
    fn key(&self) -> Key {
        key(&[self.cnpj_basico.as_bytes()])
    }
    fn identity(&self, row_hash: i64, out: &mut Vec<u8>) {
        out.extend_from_slice(&row_hash.to_le_bytes());
        for part in [&self.nome, &self.documento] {
            out.extend_from_slice(part.as_bytes());
            out.push(0);
        }
    }
    fn chave(&self) -> String {
        self.cnpj_basico.clone()
    }
    fn codes(&self, each: &mut dyn FnMut(&'static str, &str)) {
        each("qualificacoes", &self.qualificacao);
        each("qualificacoes", &self.qualificacao_representante);
        each("paises", &self.pais);
        each("tipo_socio", &self.tipo);
        each("faixa_etaria", &self.faixa_etaria);
    }
}

impl Keyed for RegimeRow {
    const TABLE: &'static str = "regimes_tributarios";
    fn key(&self) -> Key {
        // Latest year first: the sign bit flipped makes the year's bytes sort as numbers, and the
        // complement reverses them.
        let year = !((self.ano as u32) ^ 0x8000_0000);
        key(&[self.cnpj_basico.as_bytes(), &year.to_be_bytes()])
    }
    fn identity(&self, _: i64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.cnpj.as_bytes());
        out.extend_from_slice(&self.ano.to_le_bytes());
        out.extend_from_slice(self.regime.as_bytes());
    }
    fn chave(&self) -> String {
        format!("{}:{}:{}", self.cnpj, self.ano, self.regime)
    }
}

/// Where a build's runs are written, and how big a member's buffer grows before it is sorted and
/// written out. Shared by the members read in parallel.
#[derive(Clone, Debug)]
pub struct Spill {
    dir: Arc<PathBuf>,
    next: Arc<AtomicUsize>,
    buffer_bytes: usize,
}

impl Spill {
    pub(crate) fn new(dir: PathBuf, buffer_bytes: usize) -> Spill {
        Spill { dir: Arc::new(dir), next: Arc::new(AtomicUsize::new(0)), buffer_bytes }
    }

    /// A writer of one member's rows.
    pub fn writer<T: Keyed + Served>(&self) -> RunWriter<T> {
        RunWriter {
            spill: self.clone(),
            buffer: Vec::new(),
            index: Vec::new(),
            record: Vec::new(),
            runs: Vec::new(),
            row: PhantomData,
        }
    }
}

/// A run file's record: the key, `seq`, the payload's length, then the payload: `source_file`,
/// `row_hash` and the row's fields.
const HEAD: usize = 16 + 8 + 4;

/// Per buffered row: key, seq, payload start and length in the buffer.
type IndexEntry = (Key, i64, u32, u32);

/// Sorts one member's rows into runs.
#[derive(Debug)]
pub struct RunWriter<T> {
    spill: Spill,
    buffer: Vec<u8>,
    index: Vec<IndexEntry>,
    record: Vec<u8>,
    runs: Vec<Run>,
    row: PhantomData<fn(T)>,
}

/// The run files of one member.
#[derive(Debug)]
pub struct Runs {
    table: &'static str,
    runs: Vec<Run>,
}

/// A run file, and the company in the middle of its rows (where a table is cut in halves).
#[derive(Debug)]
pub(crate) struct Run {
    pub path: PathBuf,
    middle: [u8; 8],
}

impl<T: Keyed + Served> RunWriter<T> {
    pub fn push(&mut self, row: &T, at: Provenance) -> Result<(), LoadError> {
        self.record.clear();
        at.source_file.encode(&mut self.record);
        at.row_hash.encode(&mut self.record);
        row.encode(&mut self.record);
        // The buffer and its index share the member's sort budget: a short row (Simples: about
        // 30 bytes) costs as much again in the index.
        let index_bytes = (self.index.len() + 1) * std::mem::size_of::<IndexEntry>();
        if self.buffer.capacity() == 0 {
            self.buffer.reserve_exact(self.spill.buffer_bytes.max(self.record.len()));
        } else if self.buffer.len() + self.record.len() + index_bytes > self.spill.buffer_bytes {
            self.write_run()?;
        }
        let start = self.buffer.len() as u32;
        self.buffer.extend_from_slice(&self.record);
        self.index.push((row.key(), at.seq, start, self.record.len() as u32));
        Ok(())
    }

    /// Writes what is buffered as a run and hands over every run of the member.
    pub fn finish(mut self) -> Result<Runs, LoadError> {
        self.write_run()?;
        Ok(Runs { table: T::TABLE, runs: std::mem::take(&mut self.runs) })
    }

    fn write_run(&mut self) -> Result<(), LoadError> {
        if self.index.is_empty() {
            return Ok(());
        }
        self.index.sort_unstable_by_key(|&(key, seq, _, _)| (key, seq));
        let n = self.spill.next.fetch_add(1, Ordering::Relaxed);
        let path = self.spill.dir.join(format!("{}-{n}.run", T::TABLE));
        let io = |source| LoadError::Io { path: path.clone(), source };
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io)?);
        for &(key, seq, start, len) in &self.index {
            out.write_all(&key).map_err(io)?;
            out.write_all(&seq.to_le_bytes()).map_err(io)?;
            out.write_all(&len.to_le_bytes()).map_err(io)?;
            out.write_all(&self.buffer[start as usize..(start + len) as usize]).map_err(io)?;
        }
        out.flush().map_err(io)?;
        let middle = self.index[self.index.len() / 2].0[..8].try_into().expect("8 bytes");
        self.runs.push(Run { path, middle });
        self.index.clear();
        self.buffer.clear();
        Ok(())
    }
}

/// Reads a run file record by record.
struct RunReader {
    path: PathBuf,
    file: BufReader<File>,
    key: Key,
    seq: i64,
    payload: Vec<u8>,
}

impl RunReader {
    fn open(path: &Path) -> Result<RunReader, LoadError> {
        let file = File::open(path).map_err(|source| LoadError::Io { path: path.to_owned(), source })?;
        Ok(RunReader {
            path: path.to_owned(),
            file: BufReader::with_capacity(1 << 18, file),
            key: [0; 16],
            seq: 0,
            payload: Vec::new(),
        })
    }

    /// Reads the next record whose key is in `keys` (the ones before it are skipped unread);
    /// `false` at the end of the file or of `keys`.
    fn next(&mut self, keys: &Range<Key>) -> Result<bool, LoadError> {
        let mut head = [0; HEAD];
        let io = |source| LoadError::Io { path: self.path.clone(), source };
        loop {
            match self.file.read_exact(&mut head) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
                Err(e) => return Err(io(e)),
            }
            self.key.copy_from_slice(&head[..16]);
            let len = u32::from_le_bytes(head[24..28].try_into().expect("4 bytes")) as usize;
            if self.key < keys.start {
                self.file.seek_relative(len as i64).map_err(io)?;
                continue;
            }
            if self.key >= keys.end {
                return Ok(false);
            }
            self.seq = i64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
            self.payload.resize(len, 0);
            self.file.read_exact(&mut self.payload).map_err(io)?;
            return Ok(true);
        }
    }

    fn damaged(&self) -> LoadError {
        LoadError::Io {
            path: self.path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "a run record does not decode"),
        }
    }
}

/// How many kept rows carry each code, per lookup table: the report's unknown codes come from it.
#[derive(Debug, Default)]
pub(crate) struct Codes(pub foldhash::HashMap<&'static str, foldhash::HashMap<String, u64>>);

impl Codes {
    fn count(&mut self, table: &'static str, code: &str, rows: u64) {
        if code.is_empty() {
            return;
        }
        let codes = self.0.entry(table).or_default();
        match codes.get_mut(code) {
            Some(n) => *n += rows,
            None => {
                codes.insert(code.to_owned(), rows);
            }
        }
    }

    pub fn add(&mut self, other: Codes) {
        for (table, codes) in other.0 {
            for (code, rows) in codes {
                self.count(table, &code, rows);
            }
        }
    }
}

/// The run files of every member, by table.
pub(crate) fn by_table(runs: Vec<Runs>) -> HashMap<&'static str, Vec<Run>> {
    let mut tables: HashMap<&'static str, Vec<Run>> = HashMap::new();
    for member in runs {
        tables.entry(member.table).or_default().extend(member.runs);
    }
    tables
}

/// Where a table's keys are cut in two halves of about the same size: the first key of the
/// median of the runs' middle companies. A company's rows are never cut apart, since that is
/// where duplicates are looked for.
pub(crate) fn halfway(runs: &[Run]) -> Key {
    let mut middles: Vec<[u8; 8]> = runs.iter().map(|r| r.middle).collect();
    middles.sort_unstable();
    let mut key = [0; 16];
    if let Some(middle) = middles.get(middles.len() / 2) {
        key[..8].copy_from_slice(middle);
    }
    key
}

/// Merges a table's runs in key order, the rows whose key is in `keys`: the first row read of
/// each identity goes to `feed` (the serving files) and to `out` in batches of `batch_rows` for
/// the table, the later ones in batches for `duplicates`, and the codes of the kept rows are
/// counted. Returns the rows kept.
pub(crate) fn merge<T: Keyed + Served>(
    paths: &[PathBuf],
    keys: &Range<Key>,
    batch_rows: usize,
    codes: &mut Codes,
    feed: &mut dyn cnpj_index::Feed<T>,
    out: &mut dyn FnMut(Batch) -> Result<(), LoadError>,
) -> Result<u64, LoadError> {
    let mut readers = paths.iter().map(|p| RunReader::open(p)).collect::<Result<Vec<_>, _>>()?;
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (i, reader) in readers.iter_mut().enumerate() {
        if reader.next(keys)? {
            heap.push(Reverse((reader.key, reader.seq, i)));
        }
    }
    let (mut row, mut batch, mut kept) = (T::default(), T::Batch::default(), 0);
    let mut duplicates = DuplicateBatch::default();
    let mut company = [0u8; 8];
    // Identities met in the current company, with the raw-record hash of the row that won.
    let mut winners: foldhash::HashMap<Vec<u8>, i64> = foldhash::HashMap::default();
    let mut identity = Vec::new();
    while let Some(Reverse((key, seq, i))) = heap.pop() {
        let reader = &mut readers[i];
        let mut payload = reader.payload.as_slice();
        let mut at = Provenance { seq, ..Provenance::default() };
        at.source_file.decode(&mut payload).ok_or_else(|| reader.damaged())?;
        at.row_hash.decode(&mut payload).ok_or_else(|| reader.damaged())?;
        row.decode(&mut payload).ok_or_else(|| reader.damaged())?;
        if key[..8] != company[..] {
            company.copy_from_slice(&key[..8]);
            winners.clear();
        }
        identity.clear();
        row.identity(at.row_hash, &mut identity);
        match winners.get(&identity) {
            Some(&winner) => {
                duplicates.push(&DuplicateRow {
                    tabela: T::TABLE.to_owned(),
                    chave: row.chave(),
                    source_file: at.source_file,
                    seq: at.record(),
                    differs_from_winner: winner != at.row_hash,
                });
                if duplicates.len() >= batch_rows {
                    out(duplicates.take())?;
                }
            }
            None => {
                winners.insert(identity.clone(), at.row_hash);
                row.codes(&mut |table, code| codes.count(table, code, 1));
                feed.push(&row)?;
                T::push(&mut batch, &row, at);
                kept += 1;
                if T::len(&batch) >= batch_rows {
                    out(T::take(&mut batch))?;
                }
            }
        }
        if reader.next(keys)? {
            heap.push(Reverse((reader.key, reader.seq, i)));
        }
    }
    if T::len(&batch) > 0 {
        out(T::take(&mut batch))?;
    }
    if !duplicates.is_empty() {
        out(duplicates.take())?;
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;

    /// Pushes `rows` (row, seq, raw hash) into runs of at most about `buffer_bytes`, merges them,
    /// and returns the kept rows' (key column, seq) in served order and the duplicates'
    /// (chave, seq, differs). Merging the two halves cut at [`halfway`] must give the same.
    #[allow(clippy::type_complexity)]
    fn sorted<T: Keyed + Served>(
        rows: Vec<(T, i64, i64)>,
        buffer_bytes: usize,
    ) -> (Vec<(String, i64)>, Vec<(String, i64, bool)>) {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(dir.path().to_owned(), buffer_bytes);
        // Two members, as two workers would write them.
        let (mut a, mut b) = (spill.writer::<T>(), spill.writer::<T>());
        for (n, (row, seq, row_hash)) in rows.into_iter().enumerate() {
            let w = if n % 2 == 0 { &mut a } else { &mut b };
            w.push(&row, Provenance { source_file: (seq >> 40) as i32, seq, row_hash }).unwrap();
        }
        let tables = by_table(vec![a.finish().unwrap(), b.finish().unwrap()]);
        let runs = &tables[T::TABLE];
        let paths: Vec<PathBuf> = runs.iter().map(|r| r.path.clone()).collect();
        let whole = merged::<T>(&paths, ALL_KEYS);
        let middle = halfway(runs);
        let (mut halves, upper) =
            (merged::<T>(&paths, ALL_KEYS.start..middle), merged::<T>(&paths, middle..ALL_KEYS.end));
        halves.0.extend(upper.0);
        halves.1.extend(upper.1);
        assert_eq!(halves, whole, "the halves cut at {middle:?} make the whole");
        whole
    }

    /// The serving files are not under test here.
    struct Ignore;

    impl<T> cnpj_index::Feed<T> for Ignore {
        fn push(&mut self, _: &T) -> Result<(), cnpj_index::IndexError> {
            Ok(())
        }
        fn finish(self: Box<Self>) -> Result<(), cnpj_index::IndexError> {
            Ok(())
        }
    }

    #[allow(clippy::type_complexity)]
    fn merged<T: Keyed + Served>(
        paths: &[PathBuf],
        keys: Range<Key>,
    ) -> (Vec<(String, i64)>, Vec<(String, i64, bool)>) {
        let mut kept = Vec::new();
        let mut dups = Vec::new();
        merge::<T>(paths, &keys, 3, &mut Codes::default(), &mut Ignore, &mut |batch| {
            if batch.table == DuplicateBatch::TABLE {
                let d = batch.data;
                let (chave, seq, differs) =
                    (d.column(1).as_string::<i32>(), d.column(3).as_primitive::<Int64Type>(), d.column(4).as_boolean());
                dups.extend((0..d.num_rows()).map(|i| (chave.value(i).to_owned(), seq.value(i), differs.value(i))));
                return Ok(());
            }
            let keys = batch.data.column(0).as_string::<i32>().clone();
            let seqs = batch.data.column_by_name("seq").unwrap().as_primitive::<Int64Type>().clone();
            kept.extend((0..keys.len()).map(|i| (keys.value(i).to_owned(), seqs.value(i))));
            Ok(())
        })
        .unwrap();
        (kept, dups)
    }

    #[test]
    fn halfway_is_the_first_key_of_the_median_middle_company() {
        let run = |middle: &[u8; 8]| Run { path: PathBuf::new(), middle: *middle };
        let cut = halfway(&[run(b"33000000"), run(b"11000000"), run(b"22000000"), run(b"2200000A")]);
        assert_eq!(&cut, b"2200000A\0\0\0\0\0\0\0\0");
        assert_eq!(halfway(&[]), ALL_KEYS.start);
    }

    fn empresa(basico: &str, nome: &str) -> EmpresaRow {
        EmpresaRow { cnpj_basico: basico.into(), razao_social: nome.into(), ..Default::default() }
    }

    #[test]
    fn the_first_read_of_a_key_wins_across_runs() {
        let rows = vec![
            (empresa("33000000", "C"), 1, 10),
            (empresa("11000000", "A"), 2, 20),
            (empresa("22000000", "B"), 3, 30),
            (empresa("11000000", "A again"), 4, 21),
            (empresa("11000000", "A"), 5, 20),
            (empresa("00000001", "D"), 6, 40),
        ];
        let expected_kept = [("00000001", 6), ("11000000", 2), ("22000000", 3), ("33000000", 1)];
        let expected_dups = [("11000000", 4, true), ("11000000", 5, false)];
        // One run per member, and runs of a row or two (every push fills the buffer).
        for buffer_bytes in [1 << 20, 1] {
            let (kept, dups) = sorted(rows.clone(), buffer_bytes);
            assert_eq!(kept, expected_kept.map(|(k, s)| (k.to_owned(), s)));
            assert_eq!(dups, expected_dups.map(|(k, s, d)| (k.to_owned(), s, d)));
        }
    }

    #[test]
    fn partners_are_duplicates_only_when_identical_and_keep_reading_order() {
        let socio = |nome: &str, doc: &str| SocioRow {
            cnpj_basico: "11000000".into(),
            nome: nome.into(),
            documento: doc.into(),
            ..Default::default()
        };
        let rows = vec![
            (socio("ANA", "***1**"), 9, 1),
            (socio("BIA", "***2**"), 3, 2),
            (socio("ANA", "***1**"), 12, 1),
            (socio("ANA", "***1**"), 7, 3),
        ];
        let (kept, dups) = sorted(rows, 1);
        assert_eq!(kept, [3, 7, 9].map(|s| ("11000000".to_owned(), s)));
        assert_eq!(dups, [("11000000".to_owned(), 12, false)]);
    }

    #[test]
    fn regimes_sort_latest_year_first_and_dedupe_per_year_and_regime() {
        let regime = |ano: i32, regime: &str| RegimeRow {
            cnpj_basico: "11000000".into(),
            cnpj: "11000000000191".into(),
            ano,
            regime: regime.into(),
        };
        let rows = vec![
            (regime(2021, "lucro_real"), 1, 1),
            (regime(2023, "lucro_presumido"), 2, 2),
            (regime(2021, "lucro_real"), 3, 9),
            (regime(2021, "imune"), 4, 4),
        ];
        let (kept, dups) = sorted(rows, 1);
        assert_eq!(kept.iter().map(|k| k.1).collect::<Vec<_>>(), [2, 1, 4]);
        assert_eq!(dups, [("11000000000191:2021:lucro_real".to_owned(), 3, true)]);
    }

    #[test]
    fn codes_are_counted_on_kept_rows_only() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(dir.path().to_owned(), 1 << 20);
        let mut w = spill.writer::<EmpresaRow>();
        for (seq, natureza) in [(1, "2062"), (2, "9999"), (3, "2062")] {
            let row = EmpresaRow {
                cnpj_basico: format!("1100000{seq}"),
                natureza_juridica: natureza.into(),
                ..Default::default()
            };
            w.push(&row, Provenance { source_file: 1, seq, row_hash: seq }).unwrap();
        }
        // A later occurrence of the first company with another code: a duplicate, not counted.
        let again =
            EmpresaRow { cnpj_basico: "11000001".into(), natureza_juridica: "1234".into(), ..Default::default() };
        w.push(&again, Provenance { source_file: 1, seq: 4, row_hash: 4 }).unwrap();
        let mut codes = Codes::default();
        let paths: Vec<PathBuf> = w.finish().unwrap().runs.into_iter().map(|r| r.path).collect();
        merge::<EmpresaRow>(&paths, &ALL_KEYS, 10, &mut codes, &mut Ignore, &mut |_| Ok(())).unwrap();
        let mut naturezas: Vec<(String, u64)> = codes.0["naturezas"].clone().into_iter().collect();
        naturezas.sort();
        assert_eq!(naturezas, [("2062".to_owned(), 2), ("9999".to_owned(), 1)]);
        assert!(!codes.0.contains_key("porte_empresa"), "empty codes are not counted");
    }
}
