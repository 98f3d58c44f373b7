//! The writer of both serving files, fed by the build's merge: each served table is stored in two
//! halves at once, and each half hands every row it keeps, in key order, to a [`Feed`] of its
//! table. Establishments are numbered (ordinals, see `search/format.rs`) and indexed as they pass; the
//! company of each run of establishments is noted with its ordinal range, so that the companies,
//! stored afterwards, carry their size, legal nature and name down to their establishments. Rows
//! also become the lookup file's entries as the store reads them.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};

use cnpj_model::rows::{EmpresaRow, EstabelecimentoRow, RegimeRow, SimplesRow, SocioRow};

use crate::IndexError;
use crate::changes::{ChangeFile, Differ, Previous};
use crate::lookup::{FinishedPart, LookupError, LookupTable, Part, TableWriter, Writer, put_cell};
use crate::search::{
    CAPITAL_LIMIT, Field, Flag, HEAD_OFFICE, HalfColumns, PartnerColumn, Postings, Table, UPPER, capital_key,
    capital_range, pack, write_index,
};
use crate::text::date_text;

/// What the feeds have handed back, and how far the establishments are.
#[derive(Default)]
struct State {
    lookup_parts: Vec<FinishedPart>,
    /// The search index's postings, spilled by the feeds.
    spills: Vec<PathBuf>,
    /// Establishments per half, once its feed finished.
    establishments: [Option<u64>; 2],
    /// Set when the build says the establishments are stored (true) or when a feed was dropped
    /// unfinished (false).
    establishments_over: Option<bool>,
    /// The events of the comparison with the previous month, per finished table half.
    changes: Vec<ChangeFile>,
    /// Partner identities, once the partners' feed finished.
    partners: Option<u64>,
}

/// Writes the lookup file and the search index of one build (see the crate's docs). Files are
/// written at the paths given (the build's temporary names) and deleted on drop unless
/// [`ServingWriter::finish`] completed.
pub struct ServingWriter {
    lookup: Option<Writer>,
    lookup_path: PathBuf,
    search_path: PathBuf,
    state: Mutex<State>,
    changed: Condvar,
    /// The memory a feed's postings may take (estimated) before they are spilled to a file.
    spill_bytes: usize,
    /// The previous month's lookup file, when the build compares with it.
    previous: Option<Previous>,
    finished: bool,
}

impl std::fmt::Debug for ServingWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServingWriter({}, {})", self.lookup_path.display(), self.search_path.display())
    }
}

fn half(part: Part) -> usize {
    usize::from(part == Part::Upper)
}

fn part_name(part: Part) -> &'static str {
    if part == Part::Upper { "upper" } else { "lower" }
}

impl ServingWriter {
    /// `spill_bytes`: the memory each feed's postings may take before they are spilled.
    /// `previous`: the previous month to record the changes against (see `changes.rs`).
    pub fn create(
        lookup_path: &Path,
        search_path: &Path,
        spill_bytes: usize,
        previous: Option<Previous>,
    ) -> Result<ServingWriter, IndexError> {
        Ok(ServingWriter {
            lookup: Some(Writer::create(lookup_path)?),
            lookup_path: lookup_path.to_owned(),
            search_path: search_path.to_owned(),
            state: Mutex::default(),
            changed: Condvar::new(),
            spill_bytes,
            previous,
            finished: false,
        })
    }

    /// The comparison of `table`'s half `part` with the previous month; the table is cut at the
    /// company `cut` (the lower half below it).
    fn differ(&self, table: LookupTable, part: Part, cut: [u8; 8]) -> Result<Option<Differ<'_>>, IndexError> {
        let (start, end) = match part {
            Part::Lower => ([0; 8], Some(cut)),
            Part::Upper => (cut, None),
        };
        Differ::create(self.previous.as_ref(), table, start, end, self.change_scratch(table, part))
    }

    fn change_scratch(&self, table: LookupTable, part: Part) -> PathBuf {
        self.scratch(&format!("changes-{table:?}"), part)
    }

    /// The events of the comparison with the previous month (empty without one), once every
    /// table is stored. Their files are deleted with the writer.
    pub fn changes(&self) -> Vec<ChangeFile> {
        std::mem::take(&mut self.state().changes)
    }

    fn deposit_changes(&self, differ: Option<Differ<'_>>) -> Result<(), IndexError> {
        if let Some(differ) = differ {
            let file = differ.finish()?;
            self.state().changes.push(file);
        }
        Ok(())
    }

    /// A temporary file of the search index's writing.
    fn scratch(&self, what: &str, part: Part) -> PathBuf {
        let mut name = self.search_path.as_os_str().to_owned();
        name.push(format!(".{what}-{}", part_name(part)));
        PathBuf::from(name)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn table(&self, table: LookupTable, part: Part) -> Result<TableWriter, IndexError> {
        let writer = self
            .lookup
            .as_ref()
            .ok_or(LookupError::Invalid { path: self.lookup_path.clone(), reason: "already finished".into() })?;
        Ok(writer.table(table, part)?)
    }

    /// Tells the companies' feeds that every establishment was stored (the build calls it once
    /// the establishments' store returned, whether it stored any or not).
    pub fn establishments_stored(&self, ok: bool) {
        let mut state = self.state();
        if state.establishments_over.is_none() {
            state.establishments_over = Some(ok);
        }
        self.changed.notify_all();
    }

    fn deposit(&self, lookup: FinishedPart) {
        self.state().lookup_parts.push(lookup);
    }

    pub(crate) fn partners_fed(&self, lookup: FinishedPart, identities: u64) {
        let mut state = self.state();
        state.lookup_parts.push(lookup);
        state.partners = Some(identities);
    }

    pub(crate) fn partner_ids_scratch(&self) -> PathBuf {
        self.scratch("partner-ids", Part::Lower)
    }

    pub(crate) fn spill_bytes(&self) -> usize {
        self.spill_bytes
    }

    /// Writes `postings` to a new spill file.
    pub(crate) fn spill(&self, postings: &mut Postings) -> Result<(), IndexError> {
        let path = {
            let mut state = self.state();
            let path = self.scratch(&format!("spill{}", state.spills.len()), Part::Lower);
            state.spills.push(path.clone());
            path
        };
        postings.spill(&path)?;
        Ok(())
    }

    /// Writes the footers of both files, stamped with `build_id`; the files are then the
    /// finished lookup file and search index, at the paths given to [`ServingWriter::create`].
    pub fn finish(mut self, build_id: &str) -> Result<(), IndexError> {
        let state = std::mem::take(&mut *self.state());
        let lookup = self
            .lookup
            .take()
            .ok_or(LookupError::Invalid { path: self.lookup_path.clone(), reason: "already finished".into() })?;
        lookup.finish(state.lookup_parts, build_id)?;
        let half = |part: Part, rows: Option<u64>| -> Result<HalfColumns, IndexError> {
            let columns = HalfColumns {
                cnpjs: self.scratch("cnpjs", part),
                days: self.scratch("days", part),
                ceps: self.scratch("ceps", part),
                rows: rows.unwrap_or_default(),
            };
            if rows.is_none() {
                for path in [&columns.cnpjs, &columns.days, &columns.ceps] {
                    File::create(path).map_err(io_error(path))?;
                }
            }
            Ok(columns)
        };
        let [lower, upper] = state.establishments;
        let columns = [half(Part::Lower, lower)?, half(Part::Upper, upper)?];
        let partners = state.partners.map(|rows| PartnerColumn { ids: self.partner_ids_scratch(), rows });
        write_index(&self.search_path, columns, partners, &state.spills, build_id)?;
        for spill in &state.spills {
            let _ = std::fs::remove_file(spill);
        }
        self.finished = true;
        Ok(())
    }
}

impl Drop for ServingWriter {
    fn drop(&mut self) {
        drop(self.lookup.take());
        for part in [Part::Lower, Part::Upper] {
            for what in ["cnpjs", "days", "ceps", "companies", "partner-ids"] {
                let _ = std::fs::remove_file(self.scratch(what, part));
            }
        }
        for spill in &self.state().spills {
            let _ = std::fs::remove_file(spill);
        }
        for table in LookupTable::ALL {
            for part in [Part::Lower, Part::Upper] {
                let _ = std::fs::remove_file(self.change_scratch(table, part));
            }
        }
        if !self.finished {
            let _ = std::fs::remove_file(&self.lookup_path);
            let _ = std::fs::remove_file(&self.search_path);
        }
    }
}

/// Receives the rows one half of a table keeps, in key order.
pub trait Feed<T>: Send {
    fn push(&mut self, row: &T) -> Result<(), IndexError>;
    /// Hands what was written to the [`ServingWriter`]; a feed dropped unfinished is a failure.
    fn finish(self: Box<Self>) -> Result<(), IndexError>;
}

/// A served row type and its feed.
pub trait Fed: Sized {
    /// The feed of half `part` of the table, which is cut at the company `cut` (the lower half
    /// holds the companies before it).
    fn feed(writer: &ServingWriter, part: Part, cut: [u8; 8]) -> Result<Box<dyn Feed<Self> + '_>, IndexError>;
}

/// Text of a date cell, as the dataset's SQL casts it.
fn date_cell(days: Option<i32>) -> Option<String> {
    days.map(date_text)
}

/// `"1061004829.23"` as DuckDB casts the DECIMAL(18, 2) it is stored as to text.
fn decimal_cell(text: &Option<String>) -> Option<String> {
    let (negative, cents) = cents(text.as_deref()?);
    let sign = if negative && cents != 0 { "-" } else { "" };
    Some(format!("{sign}{}.{:02}", cents / 100, cents % 100))
}

/// The sign and the cents of an amount as the normalizer writes it (`-1234.50`).
fn cents(text: &str) -> (bool, i128) {
    let (negative, digits) = text.strip_prefix('-').map_or((false, text), |t| (true, t));
    (negative, digits.bytes().filter(u8::is_ascii_digit).fold(0i128, |n, d| n * 10 + i128::from(d - b'0')))
}

/// The capital's keys of an amount: its order of magnitude, its first two digits and, unless it
/// is the lowest amount of its first two digits, itself (that one's establishments are those of
/// its two digits less the others': most capitals are round, and the exact table holds only the
/// rest). None for an amount DECIMAL(18, 2) cannot hold (the load would have refused it).
pub(crate) fn capital_keys(text: &str) -> Vec<(Table, String)> {
    let (negative, cents) = cents(text);
    let Some(cents) = i64::try_from(if negative { -cents } else { cents }).ok().filter(|c| c.abs() < CAPITAL_LIMIT)
    else {
        return Vec::new();
    };
    let mut keys = vec![(Table::CapitalOrdem, capital_key(capital_range(Table::CapitalOrdem, cents).0))];
    let faixa = capital_range(Table::CapitalFaixa, cents).0;
    keys.push((Table::CapitalFaixa, capital_key(faixa)));
    if faixa != cents {
        keys.push((Table::Capital, capital_key(cents)));
    }
    keys
}

pub(crate) fn io_error(path: &Path) -> impl Fn(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io { path: path.to_owned(), source }
}

struct EstablishmentFeed<'a> {
    writer: &'a ServingWriter,
    part: Part,
    /// Taken when the feed finishes.
    lookup: Option<TableWriter>,
    postings: Postings,
    base: u32,
    rows: u32,
    cnpjs: (PathBuf, BufWriter<File>),
    days: (PathBuf, BufWriter<File>),
    ceps: (PathBuf, BufWriter<File>),
    companies: (PathBuf, BufWriter<File>),
    /// The company of the establishments since ordinal `.1`, and the states they are in
    /// ([`uf_bit`]).
    company: Option<([u8; 8], u32, u32)>,
    cells: Vec<u8>,
    differ: Option<Differ<'a>>,
    finished: bool,
}

impl EstablishmentFeed<'_> {
    fn end_company(&mut self, end: u32) -> Result<(), IndexError> {
        if let Some((basico, start, states)) = self.company.take() {
            let (path, out) = &mut self.companies;
            let mut record = [0u8; COMPANY_RECORD];
            record[..8].copy_from_slice(&basico);
            record[8..12].copy_from_slice(&start.to_le_bytes());
            record[12..16].copy_from_slice(&end.to_le_bytes());
            record[16..].copy_from_slice(&states.to_le_bytes());
            out.write_all(&record).map_err(io_error(path))?;
        }
        Ok(())
    }

    /// Adds the establishment at `ordinal` to the search index's postings (spilled past the
    /// writer's budget); returns what the index keeps in columns: its opening day (0 without a
    /// date) and the last four digits of its CEP (`u16::MAX` without one).
    fn index(&mut self, r: &EstabelecimentoRow, ordinal: u32, opened: Option<&str>) -> Result<(u8, u16), IndexError> {
        let p = &mut self.postings;
        p.add(Table::Uf, &r.uf, ordinal);
        p.add(Table::Municipio, &r.municipio, ordinal);
        p.add(Table::Cnae, &r.cnae_fiscal, ordinal);
        p.add(Table::Situacao, &r.situacao_cadastral, ordinal);
        // Head offices are most establishments: they are every establishment of no other key.
        if r.matriz_filial != HEAD_OFFICE {
            p.add(Table::Matriz, &r.matriz_filial, ordinal);
        }
        for code in r.cnaes_secundarios.split(',').filter(|c| !c.is_empty()) {
            p.add(Table::Cnae2, code, ordinal);
        }
        let mut flag = |flag: Flag, on: bool| {
            let (table, key) = flag.table_and_key();
            if on {
                p.add(table, key, ordinal);
            }
        };
        flag(Flag::Email, !r.email.is_empty());
        flag(Flag::Phone, !r.telefone_1.is_empty() || !r.telefone_2.is_empty());
        let mut day = 0u8;
        if let Some(date) = opened {
            // `YYYY-MM-DD`
            p.add(Table::Mes, &date[..7], ordinal);
            p.add(Table::Ano, &date[..4], ordinal);
            p.add(Table::Decada, &date[..3], ordinal);
            day = date[8..].parse().unwrap_or(0);
        }
        // The normalizer leaves a CEP of 8 digits or empty.
        let mut cep_suffix = u16::MAX;
        if r.cep.len() == 8 && r.cep.bytes().all(|b| b.is_ascii_digit()) {
            p.add(Table::Cep2, &r.cep[..2], ordinal);
            p.add(Table::Cep4, &r.cep[..4], ordinal);
            cep_suffix = r.cep[4..].parse().unwrap_or(u16::MAX);
        }
        p.add_text(Field::Fantasia, &r.nome_fantasia_fold, ordinal..ordinal + 1);
        p.add_text(Field::Bairro, &r.bairro_fold, ordinal..ordinal + 1);
        p.settle();
        if p.bytes > self.writer.spill_bytes {
            self.writer.spill(&mut self.postings)?;
        }
        Ok((day, cep_suffix))
    }

    /// Appends the establishment at `ordinal` to the index's columns (packed CNPJ, opening day,
    /// CEP suffix), and notes where its company's run of establishments starts.
    fn put_columns(
        &mut self,
        r: &EstabelecimentoRow,
        ordinal: u32,
        day: u8,
        cep_suffix: u16,
    ) -> Result<(), IndexError> {
        let cnpj = &r.cnpj;
        let (path, out) = &mut self.cnpjs;
        out.write_all(&pack(cnpj.as_bytes()).to_le_bytes()).map_err(io_error(path))?;
        let (path, out) = &mut self.days;
        out.write_all(&[day]).map_err(io_error(path))?;
        let (path, out) = &mut self.ceps;
        out.write_all(&cep_suffix.to_le_bytes()).map_err(io_error(path))?;
        let basico: [u8; 8] = cnpj.as_bytes()[..8].try_into().expect("a CNPJ has 14 characters");
        if self.company.is_none_or(|(b, ..)| b != basico) {
            self.end_company(ordinal)?;
            self.company = Some((basico, ordinal, 0));
        }
        if let Some((.., states)) = &mut self.company {
            *states |= uf_bit(&r.uf);
        }
        Ok(())
    }
}

/// An establishment's cells in the lookup file (the order the store reads them in, and the
/// comparison's `est` positions), but for the first and the last, its CNPJ and base, which the
/// key gives (`Lookup` puts them back). A list of fields: its length is theirs.
fn establishment_cells(cells: &mut Vec<u8>, r: &EstabelecimentoRow, opened: Option<&str>) {
    cells.clear();
    let situacao = date_cell(r.data_situacao_cadastral);
    let especial = date_cell(r.data_situacao_especial);
    for cell in [
        &r.nome_fantasia,
        &r.situacao_cadastral,
        &r.cnae_fiscal,
        &r.cnaes_secundarios,
        &r.logradouro,
        &r.numero,
        &r.complemento,
        &r.bairro,
        &r.municipio,
        &r.uf,
        &r.cep,
        &r.ddd_1,
        &r.telefone_1,
        &r.email,
    ] {
        put_cell(cells, Some(cell));
    }
    put_cell(cells, opened);
    put_cell(cells, Some(&r.matriz_filial));
    put_cell(cells, situacao.as_deref());
    put_cell(cells, Some(&r.motivo_situacao_cadastral));
    put_cell(cells, Some(&r.situacao_especial));
    put_cell(cells, especial.as_deref());
    for cell in [&r.nome_cidade_exterior, &r.pais, &r.ddd_2, &r.telefone_2, &r.ddd_fax, &r.fax] {
        put_cell(cells, Some(cell));
    }
}

impl Feed<EstabelecimentoRow> for EstablishmentFeed<'_> {
    fn push(&mut self, r: &EstabelecimentoRow) -> Result<(), IndexError> {
        if self.rows >= UPPER {
            return Err(IndexError::TooMany);
        }
        let ordinal = self.base + self.rows;
        self.rows += 1;
        let opened = date_cell(r.data_inicio_atividade);
        establishment_cells(&mut self.cells, r, opened.as_deref());
        self.lookup.as_mut().expect("until finished").put(&r.cnpj, &self.cells)?;
        if let Some(differ) = &mut self.differ {
            differ.row(&r.cnpj, &self.cells)?;
        }
        let (day, cep_suffix) = self.index(r, ordinal, opened.as_deref())?;
        self.put_columns(r, ordinal, day, cep_suffix)
    }

    fn finish(mut self: Box<Self>) -> Result<(), IndexError> {
        self.end_company(self.base + self.rows)?;
        for (path, out) in [&mut self.cnpjs, &mut self.days, &mut self.ceps, &mut self.companies] {
            out.flush().map_err(io_error(path))?;
        }
        self.writer.spill(&mut self.postings)?;
        self.writer.deposit_changes(self.differ.take())?;
        self.finished = true;
        let lookup = self.lookup.take().expect("finished once");
        self.writer.deposit(lookup.finish()?);
        self.writer.state().establishments[half(self.part)] = Some(u64::from(self.rows));
        Ok(())
    }
}

impl Drop for EstablishmentFeed<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.writer.state().establishments_over = Some(false);
            self.writer.changed.notify_all();
        }
    }
}

impl Fed for EstabelecimentoRow {
    fn feed(writer: &ServingWriter, part: Part, cut: [u8; 8]) -> Result<Box<dyn Feed<Self> + '_>, IndexError> {
        let create = |what: &str| {
            let path = writer.scratch(what, part);
            let file = File::create(&path).map_err(io_error(&path))?;
            Ok::<_, IndexError>((path, BufWriter::with_capacity(1 << 16, file)))
        };
        Ok(Box::new(EstablishmentFeed {
            writer,
            part,
            lookup: Some(writer.table(LookupTable::Establishments, part)?),
            postings: Postings::default(),
            base: if part == Part::Upper { UPPER } else { 0 },
            rows: 0,
            cnpjs: create("cnpjs")?,
            days: create("days")?,
            ceps: create("ceps")?,
            companies: create("companies")?,
            company: None,
            cells: Vec::new(),
            differ: writer.differ(LookupTable::Establishments, part, cut)?,
            finished: false,
        }))
    }
}

/// A company's record in the establishments' scratch file: its base, the ordinals of its first
/// establishment and of the one after its last (u32 each), and the states they are in (u32,
/// [`uf_bit`]).
const COMPANY_RECORD: usize = 20;

/// The states a company's establishments are in, a bit each, as the partners' search needs them
/// (`socio_uf`): the 27 states and `EX` (abroad). Another code sets no bit: a search for it is
/// answered by SQL (see `cnpj_store`).
pub const UF_CODES: [&str; 28] = [
    "AC", "AL", "AM", "AP", "BA", "CE", "DF", "ES", "GO", "MA", "MG", "MS", "MT", "PA", "PB", "PE", "PI", "PR", "RJ",
    "RN", "RO", "RR", "RS", "SC", "SE", "SP", "TO", "EX",
];

fn uf_bit(uf: &str) -> u32 {
    UF_CODES.iter().position(|c| *c == uf).map_or(0, |i| 1 << i)
}

/// Reads the establishments' company ranges (lower half, then upper half) in company order.
pub struct CompanyRanges {
    files: Vec<(PathBuf, BufReader<File>)>,
    current: Option<([u8; 8], u32, u32, u32)>,
}

impl CompanyRanges {
    /// The ordinals of the establishments of `basico` (companies must be asked in order).
    fn of(&mut self, basico: &[u8]) -> Result<Option<std::ops::Range<u32>>, IndexError> {
        Ok(self.record(basico)?.map(|(start, end, _)| start..end))
    }

    /// The states of the establishments of `basico`, one bit each (the codes of [`UF_CODES`]);
    /// companies must be asked in order.
    pub fn states_of(&mut self, basico: &[u8]) -> Result<u32, IndexError> {
        Ok(self.record(basico)?.map_or(0, |(.., states)| states))
    }

    fn record(&mut self, basico: &[u8]) -> Result<Option<(u32, u32, u32)>, IndexError> {
        loop {
            match self.current {
                Some((b, start, end, states)) if b.as_slice() == basico => return Ok(Some((start, end, states))),
                Some((b, ..)) if b.as_slice() > basico => return Ok(None),
                _ => {}
            }
            let Some((path, file)) = self.files.first_mut() else { return Ok(None) };
            let mut record = [0u8; COMPANY_RECORD];
            match file.read_exact(&mut record) {
                Ok(()) => {
                    let word = |at: usize| u32::from_le_bytes(record[at..at + 4].try_into().expect("4 bytes"));
                    self.current = Some((record[..8].try_into().expect("8 bytes"), word(8), word(12), word(16)));
                }
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    self.files.remove(0);
                }
                Err(e) => return Err(io_error(path)(e)),
            }
        }
    }
}

struct CompanyFeed<'a> {
    writer: &'a ServingWriter,
    lookup: TableWriter,
    postings: Postings,
    ranges: CompanyRanges,
    cells: Vec<u8>,
    differ: Option<Differ<'a>>,
}

impl Feed<EmpresaRow> for CompanyFeed<'_> {
    fn push(&mut self, r: &EmpresaRow) -> Result<(), IndexError> {
        self.cells.clear();
        let capital = decimal_cell(&r.capital_social);
        for cell in [Some(r.razao_social.as_str()), Some(&r.natureza_juridica), Some(&r.porte_empresa)] {
            put_cell(&mut self.cells, cell);
        }
        put_cell(&mut self.cells, capital.as_deref());
        put_cell(&mut self.cells, Some(&r.ente_federativo_responsavel));
        self.lookup.put(&r.cnpj_basico, &self.cells)?;
        if let Some(differ) = &mut self.differ {
            differ.row(&r.cnpj_basico, &self.cells)?;
        }
        if let Some(ordinals) = self.ranges.of(r.cnpj_basico.as_bytes())? {
            let p = &mut self.postings;
            p.add_range(Table::Porte, &r.porte_empresa, ordinals.clone());
            p.add_range(Table::Natureza, &r.natureza_juridica, ordinals.clone());
            for (table, key) in r.capital_social.as_deref().map(capital_keys).unwrap_or_default() {
                p.add_range(table, &key, ordinals.clone());
            }
            p.add_text(Field::Razao, &r.razao_social_fold, ordinals);
            p.settle();
            if p.bytes > self.writer.spill_bytes {
                self.writer.spill(&mut self.postings)?;
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), IndexError> {
        let CompanyFeed { writer, lookup, mut postings, differ, .. } = *self;
        writer.spill(&mut postings)?;
        writer.deposit_changes(differ)?;
        writer.deposit(lookup.finish()?);
        Ok(())
    }
}

/// The establishments' company ranges, once the establishments are stored (the companies'
/// and the Simples table's feeds carry company facts down to them).
pub(crate) fn company_ranges(writer: &ServingWriter) -> Result<CompanyRanges, IndexError> {
    let mut state = writer.state();
    while state.establishments_over.is_none() {
        state = writer.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
    }
    if state.establishments_over == Some(false) {
        return Err(IndexError::EstablishmentsFailed);
    }
    drop(state);
    let mut files = Vec::new();
    for half in [Part::Lower, Part::Upper] {
        let path = writer.scratch("companies", half);
        match File::open(&path) {
            Ok(file) => files.push((path, BufReader::with_capacity(1 << 16, file))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&path)(e)),
        }
    }
    Ok(CompanyRanges { files, current: None })
}

impl Fed for EmpresaRow {
    /// Waits until the establishments are stored: their company ranges are read here.
    fn feed(writer: &ServingWriter, part: Part, cut: [u8; 8]) -> Result<Box<dyn Feed<Self> + '_>, IndexError> {
        Ok(Box::new(CompanyFeed {
            writer,
            lookup: writer.table(LookupTable::Companies, part)?,
            postings: Postings::default(),
            ranges: company_ranges(writer)?,
            cells: Vec::new(),
            differ: writer.differ(LookupTable::Companies, part, cut)?,
        }))
    }
}

/// A lookup table of one entry per company, made of its rows in reading order.
struct GroupFeed<'a> {
    writer: &'a ServingWriter,
    lookup: TableWriter,
    basico: String,
    cells: Vec<u8>,
    /// Only the first row of each company (the regimes: latest year first).
    first_only: bool,
    differ: Option<Differ<'a>>,
}

impl GroupFeed<'_> {
    fn push_cells<'c>(
        &mut self,
        basico: &str,
        cells: impl IntoIterator<Item = Option<&'c str>>,
    ) -> Result<(), IndexError> {
        if basico != self.basico {
            self.flush()?;
            self.basico.clear();
            self.basico.push_str(basico);
        } else if self.first_only {
            return Ok(());
        }
        cells.into_iter().for_each(|c| put_cell(&mut self.cells, c));
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IndexError> {
        if !self.basico.is_empty() {
            self.lookup.put(&self.basico, &self.cells)?;
            if let Some(differ) = &mut self.differ {
                differ.row(&self.basico, &self.cells)?;
            }
        }
        self.cells.clear();
        Ok(())
    }

    fn done(mut self) -> Result<(), IndexError> {
        self.flush()?;
        let GroupFeed { writer, lookup, differ, .. } = self;
        writer.deposit_changes(differ)?;
        writer.deposit(lookup.finish()?);
        Ok(())
    }

    fn create(
        writer: &ServingWriter,
        table: LookupTable,
        part: Part,
        cut: [u8; 8],
    ) -> Result<GroupFeed<'_>, IndexError> {
        Ok(GroupFeed {
            differ: writer.differ(table, part, cut)?,
            writer,
            lookup: writer.table(table, part)?,
            basico: String::new(),
            cells: Vec::new(),
            first_only: table == LookupTable::Regimes,
        })
    }
}

impl Feed<SocioRow> for GroupFeed<'_> {
    fn push(&mut self, r: &SocioRow) -> Result<(), IndexError> {
        let entrada = date_cell(r.data_entrada);
        self.push_cells(
            &r.cnpj_basico,
            [
                Some(r.nome.as_str()),
                Some(&r.qualificacao),
                Some(&r.tipo),
                Some(&r.documento),
                entrada.as_deref(),
                Some(&r.faixa_etaria),
                Some(&r.pais),
                Some(&r.representante_legal),
                Some(&r.nome_representante),
                Some(&r.qualificacao_representante),
                Some(&r.partner_basico),
            ],
        )
    }

    fn finish(self: Box<Self>) -> Result<(), IndexError> {
        self.done()
    }
}

/// The Simples table's feed: its lookup entries, and the companies' options carried down to
/// their establishments.
struct SimplesFeed<'a> {
    group: GroupFeed<'a>,
    postings: Postings,
    ranges: CompanyRanges,
}

impl Feed<SimplesRow> for SimplesFeed<'_> {
    fn push(&mut self, r: &SimplesRow) -> Result<(), IndexError> {
        self.group.push_cells(&r.cnpj_basico, [Some(r.opcao_simples.as_str()), Some(&r.opcao_mei)])?;
        let options = [(Flag::Simples, &r.opcao_simples), (Flag::Mei, &r.opcao_mei)];
        if options.iter().any(|(_, o)| *o == "S")
            && let Some(ordinals) = self.ranges.of(r.cnpj_basico.as_bytes())?
        {
            let p = &mut self.postings;
            for (flag, option) in options {
                if option == "S" {
                    let (table, key) = flag.table_and_key();
                    p.add_range(table, key, ordinals.clone());
                }
            }
            p.settle();
            if p.bytes > self.group.writer.spill_bytes {
                self.group.writer.spill(&mut self.postings)?;
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), IndexError> {
        let SimplesFeed { group, mut postings, .. } = *self;
        group.writer.spill(&mut postings)?;
        group.done()
    }
}

impl Feed<RegimeRow> for GroupFeed<'_> {
    fn push(&mut self, r: &RegimeRow) -> Result<(), IndexError> {
        self.push_cells(&r.cnpj_basico, [Some(r.regime.as_str())])
    }

    fn finish(self: Box<Self>) -> Result<(), IndexError> {
        self.done()
    }
}

impl Fed for SocioRow {
    fn feed(writer: &ServingWriter, part: Part, cut: [u8; 8]) -> Result<Box<dyn Feed<Self> + '_>, IndexError> {
        Ok(Box::new(GroupFeed::create(writer, LookupTable::Partners, part, cut)?))
    }
}

impl Fed for SimplesRow {
    /// Waits until the establishments are stored, as the companies' feed does.
    fn feed(writer: &ServingWriter, part: Part, cut: [u8; 8]) -> Result<Box<dyn Feed<Self> + '_>, IndexError> {
        let ranges = company_ranges(writer)?;
        Ok(Box::new(SimplesFeed {
            group: GroupFeed::create(writer, LookupTable::Simples, part, cut)?,
            postings: Postings::default(),
            ranges,
        }))
    }
}

impl Fed for RegimeRow {
    fn feed(writer: &ServingWriter, part: Part, cut: [u8; 8]) -> Result<Box<dyn Feed<Self> + '_>, IndexError> {
        Ok(Box::new(GroupFeed::create(writer, LookupTable::Regimes, part, cut)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(capital: Option<&str>, expected: Option<&str>) {
        assert_eq!(decimal_cell(&capital.map(str::to_owned)).as_deref(), expected);
    }

    #[test]
    fn capital_keys_hold_the_amount_at_three_precisions() {
        let check = |text: &str, expected: &[i64]| {
            let keys: Vec<String> = capital_keys(text).into_iter().map(|(_, key)| key).collect();
            assert_eq!(keys, expected.iter().map(|&c| capital_key(c)).collect::<Vec<_>>(), "{text}");
        };
        check("12345.67", &[1_000_000, 1_200_000, 1_234_567]);
        // Round amounts: their first two digits are exact.
        check("12000.00", &[1_000_000, 1_200_000]);
        check("0.00", &[0, 0]);
        check("0.05", &[1, 5]);
        check("-5.00", &[-CAPITAL_LIMIT, -CAPITAL_LIMIT, -500]);
        check("9999999999999999.99", &[CAPITAL_LIMIT / 10, CAPITAL_LIMIT / 100 * 99, CAPITAL_LIMIT - 1]);
        check("10000000000000000.00", &[]);
    }

    #[test]
    fn capital_reads_as_the_stored_decimal() {
        check(Some("1061004829.23"), Some("1061004829.23"));
        check(Some("0.50"), Some("0.50"));
        check(Some("10000.00"), Some("10000.00"));
        check(Some("-5.00"), Some("-5.00"));
        check(Some("0.00"), Some("0.00"));
        check(None, None);
    }
}
