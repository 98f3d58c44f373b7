//! The staged build ([`build`]): survey the folder (the zips' members, the checks, the month, the
//! previous dataset), read the lookups, sort the main members into runs and store them merged,
//! reconcile, record the changes, write the serving files, guard, write the report, commit.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::time::Instant;

use cnpj_index::ServingWriter;
use cnpj_load::{
    Batch, FileCounts, LabelBatch, LoadError, LoadSummary, Loader, MunicipioBatch, Provenance, RejectBatch, RunWriter,
    Runs, Session, SourceFile, Spill, Stored,
};
use cnpj_model::FileKind;
use cnpj_model::rows::{EmpresaRow, EstabelecimentoRow, LookupRow, RegimeRow, RejectRow, SimplesRow, SocioRow};
use cnpj_normalize::{LabelSet, Normalizer, Reject, TaxRegimeColumns, municipio, record_hash};
use cnpj_parse::{Member, ParseError, Record, Records, list_members, read_member};
use rayon::prelude::*;

use crate::checks::{CapitalTally, Checks, Notes};
use crate::error::BuildError;
use crate::guard::PreviousReport;
use crate::options::{Budget, BuildOptions};
use crate::report::{
    BuildReport, Count, FileReport, MonthFrom, MonthOverMonth, TableRows, TableThenNow, Timings, UntranslatedCode,
    source_month, utc_now,
};

/// Hooks for progress display; every method has a no-op default.
pub trait Observer: Sync {
    fn stage(&self, _name: &str) {}
    /// The bytes of the main tables' members about to be read (their CSV size).
    fn input(&self, _bytes: u64) {}
    fn file_started(&self, _id: i32, _name: &str, _bytes: u64) {}
    fn file_progress(&self, _id: i32, _bytes: u64, _rows: u64) {}
    fn file_finished(&self, _id: i32, _rows: u64) {}
}

#[derive(Debug)]
pub struct NoObserver;
impl Observer for NoObserver {}

/// Sorts names so that digit runs compare as numbers (`Estabelecimentos2` before `Estabelecimentos10`).
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut n = c.to_digit(10).map_or(0, u64::from);
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                n = n.saturating_mul(10).saturating_add(u64::from(d));
                chars.next();
            }
            key.push((std::mem::take(&mut text), n));
        } else {
            text.push(c);
        }
    }
    key.push((text, 0));
    key
}

fn zip_name(m: &Member) -> String {
    m.zip.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Every recognised member of the folder's zips, in reading order; and the zips that were skipped.
fn discover(input: &Path) -> Result<(Vec<Member>, Vec<String>), BuildError> {
    let entries = std::fs::read_dir(input).map_err(|source| BuildError::Input { path: input.to_owned(), source })?;
    let mut zips = Vec::new();
    for entry in entries {
        let path = entry.map_err(|source| BuildError::Input { path: input.to_owned(), source })?.path();
        let is_zip = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("zip"));
        if is_zip && path.is_file() {
            zips.push(path);
        }
    }
    let mut members = Vec::new();
    let mut ignored = Vec::new();
    for zip in zips {
        match list_members(&zip) {
            Ok(found) => members.extend(found),
            Err(ParseError::Unrecognised { path } | ParseError::Empty { path }) => {
                tracing::warn!(zip = %path.display(), "no member of a known kind: skipped");
                ignored.push(path.display().to_string());
            }
            Err(e) => return Err(e.into()),
        }
    }
    members.sort_by_cached_key(|m| (natural_key(&zip_name(m)), natural_key(&m.name)));
    // A missing required table is one of the problems `checks` names.
    ignored.sort();
    Ok((members, ignored))
}

/// A record as it stood, decoded from Latin-1 with every field quoted (the RFB form).
fn verbatim(rec: Record<'_>) -> String {
    let fields: Vec<String> = rec
        .iter()
        .map(|f| {
            let text: String = f.iter().map(|&b| char::from(b)).collect();
            format!("\"{}\"", text.replace('"', "\"\""))
        })
        .collect();
    fields.join(";")
}

fn reject_row(id: i32, line: u64, reject: &Reject, rec: Record<'_>) -> RejectRow {
    let mut record = verbatim(rec);
    if cnpj_model::rows::Fields::over_cap(&rec).is_some() {
        // Only the beginning of a record over the cap is kept: rejects are batched in memory.
        if let Some((at, _)) = record.char_indices().nth(1024) {
            record.truncate(at);
            record.push('…');
        }
    }
    RejectRow { source_file: id, line: line as i64, reason: reject.to_string(), record }
}

/// What reading a member needs besides the member: progress hooks, the record cap, and where to
/// note what the checks and the report want to know.
struct Reading<'a> {
    observer: &'a dyn Observer,
    notes: &'a Notes,
    max_record_bytes: usize,
}

/// Reads one member record by record, handing each (with its line and 1-based index, and the
/// tax-regime columns when the file has a header) to `each`. Stream errors become [`BuildError::Damaged`].
fn stream(
    member: &Member,
    reading: &Reading<'_>,
    id: i32,
    mut each: impl FnMut(Record<'_>, u64, u64, Option<TaxRegimeColumns>) -> Result<(), BuildError>,
) -> Result<u64, BuildError> {
    let (zip, observer) = (zip_name(member), reading.observer);
    observer.file_started(id, &format!("{zip} ({})", member.name), member.size);
    let count = read_member(member, |reader| -> Result<u64, BuildError> {
        let tax = member.kind == FileKind::TaxRegime;
        let records = if tax { Records::tax_regime(reader) } else { Records::rfb(reader) };
        let mut records = records.max_record_bytes(reading.max_record_bytes);
        let damaged =
            |line: u64, source| BuildError::Damaged { zip: zip.clone(), member: member.name.clone(), line, source };
        let cols = if tax {
            let header = records.headers().map_err(|e| damaged(records.current_line(), e))?;
            Some(TaxRegimeColumns::from_header(&header).map_err(|reason| BuildError::Header {
                zip: zip.clone(),
                member: member.name.clone(),
                reason,
            })?)
        } else {
            None
        };
        loop {
            match records.advance() {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(damaged(records.current_line(), e)),
            }
            let (line, n) = (records.line(), records.count());
            each(records.record(), line, n, cols)?;
            if n % 65_536 == 0 {
                observer.file_progress(id, records.bytes(), n);
            }
        }
        observer.file_progress(id, records.bytes(), records.count());
        reading.notes.text(id, records.text_stats());
        Ok(records.count())
    })??;
    observer.file_finished(id, count);
    Ok(count)
}

/// A main table's row and the writer of its runs.
trait Sink: Send {
    fn normalize(&mut self, n: &mut Normalizer, rec: Record<'_>, cols: Option<TaxRegimeColumns>) -> Result<(), Reject>;
    /// Keeps the row last normalized.
    fn keep(&mut self, at: Provenance) -> Result<(), LoadError>;
    fn finish(self: Box<Self>) -> Result<Runs, LoadError>;
}

macro_rules! sink {
    ($name:ident, $row:ty, |$n:ident, $rec:ident, $cols:ident, $out:ident| $normalize:expr) => {
        struct $name {
            row: $row,
            runs: RunWriter<$row>,
        }

        impl Sink for $name {
            fn normalize(
                &mut self,
                $n: &mut Normalizer,
                $rec: Record<'_>,
                $cols: Option<TaxRegimeColumns>,
            ) -> Result<(), Reject> {
                let $out = &mut self.row;
                $normalize
            }
            fn keep(&mut self, at: Provenance) -> Result<(), LoadError> {
                self.runs.push(&self.row, at)
            }
            fn finish(self: Box<Self>) -> Result<Runs, LoadError> {
                self.runs.finish()
            }
        }
    };
}

sink!(Empresas, EmpresaRow, |n, rec, _c, out| n.empresa(&rec, out));
sink!(Estabelecimentos, EstabelecimentoRow, |n, rec, _c, out| n.estabelecimento(&rec, out));
sink!(Socios, SocioRow, |n, rec, _c, out| n.socio(&rec, out));
sink!(Simples, SimplesRow, |n, rec, _c, out| n.simples(&rec, out));
sink!(Regimes, RegimeRow, |n, rec, cols, out| n.tax_regime(&rec, cols.expect("tax-regime files have a header"), out));

fn sink_for(kind: FileKind, spill: &Spill) -> Box<dyn Sink> {
    match kind {
        FileKind::Empresas => Box::new(Empresas { row: EmpresaRow::default(), runs: spill.writer() }),
        FileKind::Estabelecimentos => {
            Box::new(Estabelecimentos { row: EstabelecimentoRow::default(), runs: spill.writer() })
        }
        FileKind::Socios => Box::new(Socios { row: SocioRow::default(), runs: spill.writer() }),
        FileKind::Simples => Box::new(Simples { row: SimplesRow::default(), runs: spill.writer() }),
        FileKind::TaxRegime => Box::new(Regimes { row: RegimeRow::default(), runs: spill.writer() }),
        lookup => unreachable!("{lookup:?} is read before the main tables"),
    }
}

fn provenance(id: i32, index: u64, rec: Record<'_>) -> Provenance {
    Provenance::read(id, index, record_hash(&rec))
}

fn send(tx: &SyncSender<Batch>, batch: Batch) -> Result<(), BuildError> {
    tx.send(batch).map_err(|_| BuildError::LoaderGone)
}

/// Streams one main member into sorted runs, its rejects into batches on `tx`; returns (rows
/// read, rows rejected, runs).
fn load_member(
    member: &Member,
    id: i32,
    spill: &Spill,
    batch_rows: usize,
    tx: &SyncSender<Batch>,
    reading: &Reading<'_>,
) -> Result<(u64, u64, Runs), BuildError> {
    let mut normalizer = Normalizer::default();
    let mut sink = sink_for(member.kind, spill);
    let mut rejects = RejectBatch::default();
    let mut rejected = 0;
    let mut capital = CapitalTally::default();
    let read = stream(member, reading, id, |rec, line, index, cols| {
        match sink.normalize(&mut normalizer, rec, cols) {
            Ok(()) => {
                if let Some((issue, value)) = normalizer.take_capital_issue() {
                    capital.note(line, issue, value);
                }
                sink.keep(provenance(id, index, rec))?
            }
            Err(reject) => {
                rejected += 1;
                rejects.push(&reject_row(id, line, &reject, rec));
                if rejects.len() >= batch_rows {
                    send(tx, rejects.take())?;
                }
            }
        }
        Ok(())
    })?;
    send(tx, rejects.take())?;
    reading.notes.capital(id, capital.examples, &capital.rows);
    Ok((read, rejected, sink.finish()?))
}

/// A lookup member read whole (lookups are small): its rows, first occurrence of a code kept.
struct Lookup {
    kind: FileKind,
    rows: Vec<LookupRow>,
    file: SourceFile,
}

fn read_lookup(
    member: &Member,
    id: i32,
    seen: &mut HashMap<FileKind, HashMap<String, String>>,
    rejects: &mut RejectBatch,
    reading: &Reading<'_>,
) -> Result<Lookup, BuildError> {
    let mut normalizer = Normalizer::default();
    let codes = seen.entry(member.kind).or_default();
    let (mut rows, mut counts, mut rejected) = (Vec::new(), FileCounts::default(), 0);
    let mut row = LookupRow::default();
    let read = stream(member, reading, id, |rec, line, _, _| {
        match normalizer.lookup(member.kind, &rec, &mut row) {
            Ok(()) => match codes.get(&row.code) {
                Some(label) => {
                    counts.duplicates += 1;
                    counts.duplicates_differing += u64::from(*label != row.label);
                }
                None => {
                    codes.insert(row.code.clone(), row.label.clone());
                    counts.rows_loaded += 1;
                    rows.push(row.clone());
                }
            },
            Err(reject) => {
                rejected += 1;
                rejects.push(&reject_row(id, line, &reject, rec));
            }
        }
        Ok(())
    })?;
    let file = source_file(member, id, read, rejected, Some(counts));
    Ok(Lookup { kind: member.kind, rows, file })
}

fn source_file(member: &Member, id: i32, read: u64, rejected: u64, lookup_counts: Option<FileCounts>) -> SourceFile {
    SourceFile {
        id,
        zip: zip_name(member),
        member: member.name.clone(),
        kind: member.kind,
        rows_read: read,
        rows_rejected: rejected,
        lookup_counts,
    }
}

/// Builds the dataset of `opts.input` into `opts.db`. On any error the target is left untouched.
pub fn build(opts: &BuildOptions, observer: &dyn Observer) -> Result<BuildReport, BuildError> {
    let started = Instant::now();
    let mut timings = Timings::default();
    crate::checks::outputs(&opts.db, opts.report.as_deref())?;
    observer.stage("reading the zips' directories");
    let mut input = survey(opts)?;
    let notes = Notes::default();
    let reading = Reading { observer, notes: &notes, max_record_bytes: opts.max_record_bytes };

    observer.stage("reading the lookup tables");
    let lookups = read_lookups(&input.members, &mut input.checks, &reading)?;
    timings.lookups = started.elapsed().as_secs_f64();

    let budget = Budget::of(opts.memory_limit);
    tracing::debug!(?budget, "memory");
    let (mut loader, serving, session) = open_loader(opts, &budget, &input, lookups.small_tables)?;

    observer.stage("sorting the main tables and storing them");
    let load_started = Instant::now();
    let batch_rows = opts.batch_rows.min(budget.batch_rows);
    let MainTables { mut files, stored } =
        store_main_tables(&input.members, &loader, session, budget.sort_buffer, batch_rows, &serving, &reading)?;
    input.checks.files(&files, &notes);
    input.checks.verdict()?;
    files.extend(lookups.files);
    files.sort_by_key(|f| f.id);
    timings.load = load_started.elapsed().as_secs_f64();

    observer.stage("indexing the partners");
    let transform_started = Instant::now();
    loader.record(stored.into_iter().collect::<Result<Vec<_>, _>>()?);
    let identities = loader.feed_partners(&serving, budget.sort_buffer)?;
    tracing::debug!(identities, seconds = transform_started.elapsed().as_secs_f64(), "partners fed");
    observer.stage("reconciling");
    let summary = loader.transform(files)?;
    timings.transform = transform_started.elapsed().as_secs_f64();

    let changes_started = Instant::now();
    if input.previous.is_some() {
        observer.stage("recording the changes since the previous month");
    }
    let month = input.month.as_deref().unwrap_or_default();
    let changes = loader.record_changes(month, &serving.changes(), input.previous.as_ref(), opts.keep_months)?;
    timings.changes = changes_started.elapsed().as_secs_f64();

    let mut report = assemble_report(opts, &input, summary, &lookups.labels, &notes, timings);
    observer.stage("writing the lookup file and the search index");
    let build_id = write_serving_files(serving, &mut report, started)?;
    if let Some(previous) = &input.previous {
        guard(opts, previous, &changes, &mut report)?;
    }
    commit(opts, loader, &report, build_id)?;
    Ok(report)
}

/// What the build knows of its input before it reads a record: the checks so far, the members in
/// reading order (a member's id is its place in it, from 1), the zips skipped, the month, and the
/// previous dataset.
struct Survey {
    checks: Checks,
    members: Vec<Member>,
    ignored_files: Vec<String>,
    month: Option<String>,
    previous: Option<cnpj_load::PreviousDataset>,
}

/// Checks the folder and its zips' directories, and settles the month and the previous dataset.
fn survey(opts: &BuildOptions) -> Result<Survey, BuildError> {
    let mut checks = Checks::new(&opts.input, opts.accept_incomplete, opts.ignore_stale);
    checks.folder();
    checks.manifest();
    let (mut members, ignored_files) = discover(&opts.input)?;
    checks.members(&mut members);
    let folder = opts.input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let month = source_month(opts.month.as_deref(), &folder, checks.delivery());
    if let Some((month, from)) = &month {
        tracing::info!("the month of the build is {month}, {from}");
    }
    let previous =
        opts.previous.as_deref().map(|path| previous_dataset(path, month.as_ref(), &mut checks)).transpose()?;
    Ok(Survey { checks, members, ignored_files, month: month.map(|(month, _)| month), previous })
}

/// The lookup tables read and checked: their files, the labels they make, and the small tables
/// (labels, municipalities, the lookups' rejects) to store first.
struct Lookups {
    files: Vec<SourceFile>,
    labels: LabelSet,
    small_tables: Vec<Batch>,
}

/// Reads the lookup members whole, checks them, and fills in the codes a table lacks from the
/// project's copy of it.
fn read_lookups(members: &[Member], checks: &mut Checks, reading: &Reading<'_>) -> Result<Lookups, BuildError> {
    let mut seen = HashMap::new();
    let mut rejects = RejectBatch::default();
    let mut lookups = Vec::new();
    for (member, id) in members.iter().zip(1..).filter(|(m, _)| m.kind.is_lookup()) {
        lookups.push(read_lookup(member, id, &mut seen, &mut rejects, reading)?);
    }
    let files: Vec<SourceFile> = lookups.iter().map(|l| l.file.clone()).collect();
    checks.files(&files, reading.notes);
    // The project's rows of the codes a table lacks follow the month's own.
    let gaps = checks.lookups(&seen, &files);
    checks.verdict()?;
    let mut municipios = MunicipioBatch::default();
    let mut tables: Vec<(FileKind, Vec<LookupRow>)> = Vec::new();
    let rows = lookups.iter().map(|l| (l.kind, &l.rows)).chain(gaps.iter().map(|(kind, rows)| (*kind, rows)));
    for (kind, rows) in rows {
        if kind == FileKind::Municipios {
            for row in rows {
                municipios.push(&municipio(row));
            }
        } else {
            match tables.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, all)) => all.extend(rows.iter().cloned()),
                None => tables.push((kind, rows.clone())),
            }
        }
    }
    let labels = LabelSet::build(&tables);
    let mut label_batch = LabelBatch::default();
    labels.rows.iter().for_each(|r| label_batch.push(r));
    let small_tables = vec![label_batch.take(), municipios.take(), rejects.take()];
    Ok(Lookups { files, labels, small_tables })
}

/// The loader (on a temporary file), the serving files' writer (comparing with the previous
/// month's lookup file when that month is before this one), and a session that has stored the
/// small tables.
fn open_loader(
    opts: &BuildOptions,
    budget: &Budget,
    input: &Survey,
    small_tables: Vec<Batch>,
) -> Result<(Loader, ServingWriter, Session), BuildError> {
    let loader = Loader::create(&opts.db, budget.duckdb, rayon::current_num_threads())?;
    let (lookup_file, search_file) = loader.serving_files();
    let previous_lookup = input
        .previous
        .as_ref()
        .filter(|p| p.month.as_deref() < input.month.as_deref())
        .map(|p| cnpj_index::Previous::open(&p.path, &p.build_id))
        .transpose()?;
    let serving = ServingWriter::create(&lookup_file, &search_file, budget.postings, previous_lookup)?;
    let session = loader.session()?;
    for batch in small_tables {
        session.append(batch)?;
    }
    Ok((loader, serving, session))
}

/// Main members with their ids.
type Part<'a> = Vec<(&'a Member, i32)>;

/// The main members with their ids, in the order they are read, cut after the establishments.
/// Establishments first: the biggest table takes the longest to store, so it is stored while the
/// other members are read, and then while the other tables are stored. Biggest first within each
/// part keeps both cores busy.
fn main_members(members: &[Member]) -> (Part<'_>, Part<'_>) {
    let mut main: Part<'_> = members.iter().zip(1..).filter(|(m, _)| !m.kind.is_lookup()).collect();
    main.sort_by_key(|(m, _)| (m.kind != FileKind::Estabelecimentos, std::cmp::Reverse(m.size)));
    let split = main.iter().take_while(|(m, _)| m.kind == FileKind::Estabelecimentos).count();
    let others = main.split_off(split);
    (main, others)
}

/// Reads `members` in parallel into sorted runs, their rejects sent on `tx`.
fn read_main(
    members: &[(&Member, i32)],
    tx: SyncSender<Batch>,
    spill: &Spill,
    batch_rows: usize,
    reading: &Reading<'_>,
) -> Result<(Vec<SourceFile>, Vec<Runs>), BuildError> {
    let results: Vec<Result<(SourceFile, Runs), BuildError>> = members
        .par_iter()
        .map_with(tx, |tx, &(member, id)| {
            let (read, rejected, runs) = load_member(member, id, spill, batch_rows, tx, reading)?;
            Ok((source_file(member, id, read, rejected, None), runs))
        })
        .collect();
    Ok(results.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter().unzip())
}

/// The main members' files, and what each part's store gave (its error comes after the checks').
struct MainTables {
    files: Vec<SourceFile>,
    stored: Vec<Result<Stored, LoadError>>,
}

/// Sorts the main members into runs and stores each part (the establishments, then the other
/// tables), merged in key order, on a connection of its own as soon as it is read; the rejects
/// are appended through `session`.
fn store_main_tables(
    members: &[Member],
    loader: &Loader,
    session: Session,
    sort_buffer: usize,
    batch_rows: usize,
    serving: &ServingWriter,
    reading: &Reading<'_>,
) -> Result<MainTables, BuildError> {
    reading.observer.input(members.iter().filter(|m| !m.kind.is_lookup()).map(|m| m.size).sum());
    let spill = loader.spill(sort_buffer)?;
    let (establishments, others) = main_members(members);
    let (establishments_session, others_session) = (loader.session()?, loader.session()?);
    let read = |members: &[(&Member, i32)], tx| read_main(members, tx, &spill, batch_rows, reading);
    let (tx, rx) = sync_channel::<Batch>(4);
    let (written, read_first, read_others, stored) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> Result<(), LoadError> {
            for batch in rx {
                session.append(batch)?;
            }
            Ok(())
        });
        // Each part is stored (on a connection of its own) as soon as it is read.
        let mut stores = Vec::new();
        let read_first = read(&establishments, tx.clone()).map(|(files, runs)| {
            stores.push(scope.spawn(move || {
                let stored = establishments_session.store(runs, batch_rows, serving);
                // The companies' index waits for the establishments' ordinals.
                serving.establishments_stored(stored.is_ok());
                stored
            }));
            files
        });
        // The writer stops once every sender is gone: `read` takes its own.
        let read_others = match read_first {
            Ok(_) => read(&others, tx).map(|(files, runs)| {
                stores.push(scope.spawn(move || others_session.store(runs, batch_rows, serving)));
                files
            }),
            Err(_) => {
                drop(tx);
                serving.establishments_stored(false);
                Ok(Vec::new())
            }
        };
        let written = writer.join().expect("the writer thread does not panic");
        let stored: Vec<_> = stores.into_iter().map(|store| store.join().expect("a store does not panic")).collect();
        (written, read_first, read_others, stored)
    });
    // A loader error explains a worker's LoaderGone, so it goes first.
    written?;
    let mut files = read_first?;
    files.extend(read_others?);
    Ok(MainTables { files, stored })
}

/// The build report of what was stored (the serving files' time and the month over month to come).
fn assemble_report(
    opts: &BuildOptions,
    input: &Survey,
    summary: LoadSummary,
    labels: &LabelSet,
    notes: &Notes,
    seconds: Timings,
) -> BuildReport {
    let files: Vec<FileReport> = summary
        .files
        .iter()
        .map(|(f, c)| FileReport {
            zip: f.zip.clone(),
            member: f.member.clone(),
            kind: f.kind,
            rows_read: f.rows_read,
            rows_loaded: c.rows_loaded,
            rows_rejected: f.rows_rejected,
            duplicates: c.duplicates,
            duplicates_differing: c.duplicates_differing,
        })
        .collect();
    let sum = |f: fn(&FileReport) -> u64| files.iter().map(f).sum::<u64>();
    BuildReport {
        source_month: input.month.clone(),
        built_at: utc_now(),
        input: opts.input.display().to_string(),
        dataset: opts.db.display().to_string(),
        rows_read: sum(|f| f.rows_read),
        rows_loaded: sum(|f| f.rows_loaded),
        rows_rejected: sum(|f| f.rows_rejected),
        duplicates: sum(|f| f.duplicates),
        duplicates_differing: sum(|f| f.duplicates_differing),
        files,
        ignored_files: input.ignored_files.clone(),
        tables: summary.tables.iter().map(|(table, rows)| TableRows { table: table.clone(), rows: *rows }).collect(),
        rejects_by_reason: summary
            .rejects_by_reason
            .iter()
            .map(|(name, count)| Count { name: name.clone(), count: *count })
            .collect(),
        estabelecimentos_sem_empresa: summary.estabelecimentos_sem_empresa,
        unknown_codes: summary.unknown_codes,
        untranslated: labels.untranslated.iter().map(UntranslatedCode::from).collect(),
        capital_not_loaded: notes.capital_report(&summary.files.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>()),
        warnings: input.checks.warnings(),
        month_over_month: None,
        seconds,
    }
}

/// Finishes the lookup file and the search index under a new build id (a store ignores serving
/// files of another build), and returns the id.
fn write_serving_files(
    serving: ServingWriter,
    report: &mut BuildReport,
    started: Instant,
) -> Result<String, BuildError> {
    let build_id = format!("{}-{}-{}", report.built_at, std::process::id(), started.elapsed().as_nanos());
    let serving_started = Instant::now();
    serving.finish(&build_id)?;
    report.seconds.serving_files = serving_started.elapsed().as_secs_f64();
    report.seconds.total = started.elapsed().as_secs_f64();
    Ok(build_id)
}

/// Writes the report, then renames the dataset into place with its metadata (the report in it).
fn commit(opts: &BuildOptions, loader: Loader, report: &BuildReport, build_id: String) -> Result<(), BuildError> {
    let json = serde_json::to_string(report).expect("the report serializes");
    // The report is written before the dataset takes its place: no failure after that.
    if let Some(path) = &opts.report {
        crate::checks::write_report(path, report)?;
    }
    loader.commit(&[
        ("format_version", "1".to_owned()),
        ("source_month", report.source_month.clone().unwrap_or_default()),
        ("built_at", report.built_at.clone()),
        ("build_id", build_id),
        ("report", json),
    ])?;
    Ok(())
}

/// Reads the previous dataset's metadata, and checks that it is not of a later month than
/// `month` (this month and what decided it). A dataset of the same month is not compared with
/// (its history, this month's changes included, is carried over as it is), which is said loudly
/// (a warning in the log and the report); unless it is of another delivery (other main-table date
/// stamps): then one of the two months is wrong, and the build is refused.
fn previous_dataset(
    path: &Path,
    month: Option<&(String, MonthFrom)>,
    checks: &mut Checks,
) -> Result<cnpj_load::PreviousDataset, BuildError> {
    let previous = cnpj_load::PreviousDataset::read(path)?;
    let refuse = |reason: String| Err(BuildError::Previous { path: path.to_owned(), reason });
    let Some((month, from)) = month else {
        return refuse("the month of this dump is unknown (name the input folder YYYY-MM, or give --month)".into());
    };
    let Some(before) = previous.month.as_deref() else { return refuse("its metadata does not say its month".into()) };
    if before > month.as_str() {
        return refuse(format!("it is of {before}, which is after this month ({month}, {from})"));
    }
    if before < month.as_str() {
        return Ok(previous);
    }
    let report: PreviousReport =
        previous.report.as_deref().and_then(|json| serde_json::from_str(json).ok()).unwrap_or_default();
    match (report.delivery(), checks.delivery()) {
        (Some(then), Some(now)) if then != now => refuse(format!(
            "it holds {month} too ({from}), but of another delivery: its main tables are stamped {then}, this \
             folder's {now}. Either this folder is not of {month} (name it by its month, or give --month), or \
             {month} was published again, and its changes can only be recorded against the month before: give \
             that month's dataset as --previous"
        )),
        _ => {
            checks.warn(format!(
                "--previous {} holds this very month ({month}, {from}): nothing is compared (its history, this \
                 month's changes included, is carried over as it is); give the dataset of the month before to \
                 compare this month with it",
                path.display()
            ));
            Ok(previous)
        }
    }
}

/// Fills in the report's month-over-month section, and refuses the month when the guard finds
/// anomalies the operator did not accept (the report is written first, naming them).
fn guard(
    opts: &BuildOptions,
    previous: &cnpj_load::PreviousDataset,
    changes: &cnpj_load::ChangeSummary,
    report: &mut BuildReport,
) -> Result<(), BuildError> {
    let before: PreviousReport =
        previous.report.as_deref().and_then(|json| serde_json::from_str(json).ok()).unwrap_or_default();
    let anomalies = crate::guard::anomalies(&before, report, changes.count("disappeared"), &opts.thresholds);
    let counts =
        |c: &[(String, u64)]| c.iter().map(|(name, count)| Count { name: name.clone(), count: *count }).collect();
    let mut tables: Vec<TableThenNow> = report
        .tables
        .iter()
        .map(|t| TableThenNow { table: t.table.clone(), previous: before.rows(&t.table).unwrap_or(0), current: t.rows })
        .collect();
    for t in &before.tables {
        if !tables.iter().any(|n| n.table == t.table) {
            tables.push(TableThenNow { table: t.table.clone(), previous: t.rows, current: 0 });
        }
    }
    let refused = !anomalies.is_empty() && !opts.accept_anomalies;
    let messages: Vec<String> = anomalies.iter().map(|a| a.message.clone()).collect();
    report.month_over_month = Some(MonthOverMonth {
        previous_month: previous.month.clone(),
        previous_dataset: previous.path.display().to_string(),
        tables,
        events: counts(&changes.events),
        states: counts(&changes.states),
        history_rows: changes.history_rows,
        anomalies,
        anomalies_accepted: opts.accept_anomalies,
    });
    if !refused {
        return Ok(());
    }
    if let Some(path) = &opts.report {
        crate::checks::write_report(path, report)?;
    }
    Err(BuildError::Anomalies {
        month: report.source_month.clone().unwrap_or_default(),
        previous_month: previous.month.clone().unwrap_or_default(),
        anomalies: messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_compares_digit_runs_as_numbers() {
        let mut names =
            vec!["Estabelecimentos10.zip", "Estabelecimentos2.zip", "Estabelecimentos0.zip", "Empresas1.zip"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(
            names,
            vec!["Empresas1.zip", "Estabelecimentos0.zip", "Estabelecimentos2.zip", "Estabelecimentos10.zip"]
        );
    }
}
