//! Month over month: each table half, as its feed writes its lookup rows in key
//! order, is compared with the same key range of the previous dataset's lookup file, read in key
//! order too: a merge of two sorted streams, never a join of two months in memory. A row whose
//! encoded cells are byte-identical to last month's costs one comparison; the others are decoded
//! and compared field by field on served values. The events go to a scratch file per half, which
//! the loader turns into the `changes` table ([`ChangeFile`]).
//!
//! Company events are written without a CNPJ (the loader fills in the head office) and only make
//! sense for a company present in both months: the companies' comparison writes a marker event
//! (`MARKER_*`) for a company that appeared or vanished, and the loader drops that company's
//! company events with it.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use cnpj_model::rows::ChangeRow;

use crate::IndexError;
use crate::lookup::{Entries, Lookup, LookupTable, cells, lookup_path, put_cell};

/// A company in this month's Empresas and not in last month's.
pub const MARKER_COMPANY_NEW: &str = "_company_new";
/// A company in last month's Empresas and not in this month's.
pub const MARKER_COMPANY_GONE: &str = "_company_gone";

/// The previous month's lookup file, checked against the build id of its dataset.
pub struct Previous {
    lookup: Lookup,
}

impl std::fmt::Debug for Previous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Previous({:?})", self.lookup)
    }
}

impl Previous {
    /// Opens the lookup file of the dataset at `dataset`, whose metadata says `build_id`.
    pub fn open(dataset: &Path, build_id: &str) -> Result<Previous, IndexError> {
        let path = lookup_path(dataset);
        let lookup = Lookup::open(&path).map_err(|e| IndexError::PreviousLookup {
            path: path.clone(),
            reason: format!(
                "{e} (a build writes it beside its dataset; rebuild the previous month, or build without --previous)"
            ),
        })?;
        if lookup.build_id() != build_id {
            return Err(IndexError::PreviousLookup {
                path,
                reason: format!("it belongs to build {:?}, the dataset is build {build_id:?}", lookup.build_id()),
            });
        }
        Ok(Previous { lookup })
    }

    pub(crate) fn rows(&self, table: LookupTable) -> u64 {
        self.lookup.rows(table)
    }
}

/// Writes change events to a scratch file: per event the cells of [`ChangeRow`], encoded as the
/// lookup file's cells.
struct Sink {
    path: PathBuf,
    out: BufWriter<File>,
    buf: Vec<u8>,
    events: u64,
}

impl Sink {
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        cnpj: Option<&str>,
        basico: &str,
        event: &str,
        field: Option<&str>,
        old: Option<String>,
        new: Option<String>,
        place: [Option<&str>; 3],
    ) -> Result<(), IndexError> {
        let buf = &mut self.buf;
        buf.clear();
        for cell in [cnpj, Some(basico), Some(event), field, old.as_deref(), new.as_deref()].into_iter().chain(place) {
            put_cell(buf, cell);
        }
        let mut len = Vec::with_capacity(4);
        crate::lookup::put_varint(&mut len, buf.len() as u64);
        self.events += 1;
        self.out
            .write_all(&len)
            .and_then(|()| self.out.write_all(buf))
            .map_err(|source| IndexError::Io { path: self.path.clone(), source })
    }
}

/// JSON text of a served text value.
fn json(text: Option<&str>) -> Option<String> {
    text.map(|t| serde_json::Value::from(t).to_string())
}

/// How one table's rows compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Establishments,
    Companies,
    Partners,
    Simples,
    Regimes,
}

/// Compares one table half with the previous month (see the module docs).
pub(crate) struct Differ<'a> {
    kind: Kind,
    entries: Entries<'a>,
    /// This half's companies end before this one (the lower half), or with the table.
    end: Option<[u8; 8]>,
    sink: Sink,
}

impl<'a> Differ<'a> {
    /// The differ of `table`'s half that holds the companies from `start` (inclusive) to `end`
    /// (exclusive, `None`: to the end); `None` when there is nothing to compare with (no previous
    /// month, or a table the previous month does not have, such as the tax regimes).
    pub(crate) fn create(
        previous: Option<&'a Previous>,
        table: LookupTable,
        start: [u8; 8],
        end: Option<[u8; 8]>,
        path: PathBuf,
    ) -> Result<Option<Differ<'a>>, IndexError> {
        let Some(previous) = previous else { return Ok(None) };
        if table == LookupTable::Regimes && previous.rows(table) == 0 {
            return Ok(None);
        }
        let kind = match table {
            LookupTable::Establishments => Kind::Establishments,
            LookupTable::Companies => Kind::Companies,
            LookupTable::Partners => Kind::Partners,
            LookupTable::Simples => Kind::Simples,
            LookupTable::Regimes => Kind::Regimes,
            // Partners' events are the companies' partner rows (`Partners`).
            LookupTable::PartnerIds => return Ok(None),
        };
        let file = File::create(&path).map_err(|source| IndexError::Io { path: path.clone(), source })?;
        Ok(Some(Differ {
            kind,
            entries: previous.lookup.entries(table, &start).map_err(damaged)?,
            end,
            sink: Sink { path, out: BufWriter::with_capacity(1 << 16, file), buf: Vec::new(), events: 0 },
        }))
    }

    /// Records last month's rows of this half before `key` (all that are left: `None`) as gone.
    fn gone_before(&mut self, key: Option<&[u8]>) -> Result<(), IndexError> {
        let Differ { kind, entries, end, sink } = self;
        while let Some((prev_key, prev)) = entries.peek().map_err(damaged)? {
            if key.is_some_and(|key| prev_key >= key) || end.is_some_and(|end| prev_key[..8] >= end[..]) {
                break;
            }
            let prev_key = std::str::from_utf8(prev_key).map_err(|_| corrupt())?;
            compare(*kind, sink, prev_key, Some(prev), None)?;
            entries.advance();
        }
        Ok(())
    }

    /// This month's row of `key` (encoded cells), after every row of keys before it.
    pub(crate) fn row(&mut self, key: &str, row: &[u8]) -> Result<(), IndexError> {
        self.gone_before(Some(key.as_bytes()))?;
        let Differ { kind, entries, sink, .. } = self;
        match entries.peek().map_err(damaged)? {
            Some((prev_key, prev)) if prev_key == key.as_bytes() => {
                if prev != row {
                    compare(*kind, sink, key, Some(prev), Some(row))?;
                }
                entries.advance();
            }
            _ => compare(*kind, sink, key, None, Some(row))?,
        }
        Ok(())
    }

    /// Records what is left of last month's rows in this half; the scratch file of the events.
    pub(crate) fn finish(mut self) -> Result<ChangeFile, IndexError> {
        self.gone_before(None)?;
        let Sink { path, mut out, events, .. } = self.sink;
        out.flush().map_err(|source| IndexError::Io { path: path.clone(), source })?;
        Ok(ChangeFile { path, events })
    }
}

/// A damaged block of the previous lookup file: the comparison cannot go on (rebuild that month).
fn damaged(e: crate::lookup::LookupError) -> IndexError {
    match e {
        crate::lookup::LookupError::Io { path, source } => {
            IndexError::PreviousLookup { path, reason: source.to_string() }
        }
        crate::lookup::LookupError::Invalid { path, reason } => IndexError::PreviousLookup { path, reason },
    }
}

fn corrupt() -> IndexError {
    IndexError::PreviousLookup { path: PathBuf::new(), reason: "a key is not text".into() }
}

/// The cells of an encoded row, or an error naming the previous lookup file's damage.
fn decode(row: &[u8]) -> Result<Vec<Option<&str>>, IndexError> {
    cells(row)
        .ok_or_else(|| IndexError::PreviousLookup { path: PathBuf::new(), reason: "a row does not decode".into() })
}

/// Establishment cells as stored (see `feed.rs`: the key gives the CNPJ and base): the ones
/// compared, and where the establishment is.
mod est {
    pub const NOME_FANTASIA: usize = 0;
    pub const SITUACAO: usize = 1;
    pub const CNAE: usize = 2;
    pub const CNAES_SECUNDARIOS: usize = 3;
    pub const LOGRADOURO: usize = 4;
    pub const MUNICIPIO: usize = 8;
    pub const UF: usize = 9;
    pub const CEP: usize = 10;
}

/// Company cells: razão social, natureza, porte, capital.
mod co {
    pub const RAZAO_SOCIAL: usize = 0;
    pub const NATUREZA: usize = 1;
    pub const PORTE: usize = 2;
    pub const CAPITAL: usize = 3;
}

/// Cells per partner in a partners' entry, and which of them make a partner (nome, qualificação,
/// documento).
const PARTNER_CELLS: usize = 11;

/// Records the events between last month's row `old` and this month's `new` of `key`.
fn compare(kind: Kind, sink: &mut Sink, key: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> Result<(), IndexError> {
    let old = old.map(decode).transpose()?;
    let new = new.map(decode).transpose()?;
    match kind {
        Kind::Establishments => establishment(sink, key, &old, &new),
        Kind::Companies => company(sink, key, &old, &new),
        Kind::Partners => partners(sink, key, &old, &new),
        Kind::Simples => simples(sink, key, &old, &new),
        Kind::Regimes => {
            let (o, n) = (cell(&old, 0), cell(&new, 0));
            if o != n {
                sink.emit(None, key, "tax_regime_changed", Some("regime_tributario"), json(o), json(n), [None; 3])?;
            }
            Ok(())
        }
    }
}

/// A decoded row's cells; `None` for a row absent that month.
type Cells<'r> = Option<Vec<Option<&'r str>>>;

/// Cell `i` of a row, `None` when the row or the cell is.
fn cell<'r>(row: &Cells<'r>, i: usize) -> Option<&'r str> {
    row.as_ref().and_then(|r| r.get(i).copied().flatten())
}

/// An establishment opened, disappeared, or changed in a compared field; the events carry where
/// it is now (or was last seen).
fn establishment(sink: &mut Sink, key: &str, old: &Cells, new: &Cells) -> Result<(), IndexError> {
    let (o, n) = (|i| cell(old, i), |i| cell(new, i));
    // Where the establishment is now, or was last seen.
    let here = |i| if new.is_some() { n(i) } else { o(i) };
    let place = [here(est::UF), here(est::MUNICIPIO), here(est::CNAE)];
    let basico = &key[..8];
    let mut emit = |event: &str, field: Option<&str>, old: Option<String>, new: Option<String>| {
        sink.emit(Some(key), basico, event, field, old, new, place)
    };
    match (old, new) {
        (None, _) => emit("opened", None, None, None)?,
        (_, None) => emit("disappeared", None, None, None)?,
        _ => {
            for (event, field, i) in [
                ("status_changed", "situacao_cadastral", est::SITUACAO),
                ("moved", "municipio", est::MUNICIPIO),
                ("moved", "cep", est::CEP),
                ("moved", "logradouro", est::LOGRADOURO),
                ("renamed", "nome_fantasia", est::NOME_FANTASIA),
                ("main_activity_changed", "cnae_fiscal", est::CNAE),
            ] {
                if o(i) != n(i) {
                    emit(event, Some(field), json(o(i)), json(n(i)))?;
                }
            }
            let codes = |text: Option<&str>| -> Vec<String> {
                text.unwrap_or_default().split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect()
            };
            let (before, after) = (codes(o(est::CNAES_SECUNDARIOS)), codes(n(est::CNAES_SECUNDARIOS)));
            let sorted = |codes: &[String]| {
                let mut codes = codes.to_vec();
                codes.sort_unstable();
                codes.dedup();
                codes
            };
            if sorted(&before) != sorted(&after) {
                let list = |codes: Vec<String>| Some(serde_json::Value::from(codes).to_string());
                emit("secondary_activities_changed", Some("cnaes_secundarios"), list(before), list(after))?;
            }
        }
    }
    Ok(())
}

/// A company's marker when it appeared or vanished, else its changed fields.
fn company(sink: &mut Sink, key: &str, old: &Cells, new: &Cells) -> Result<(), IndexError> {
    let mut emit = |event: &str, field: Option<&str>, old: Option<String>, new: Option<String>| {
        sink.emit(None, key, event, field, old, new, [None; 3])
    };
    match (old, new) {
        (None, _) => emit(MARKER_COMPANY_NEW, None, None, None)?,
        (_, None) => emit(MARKER_COMPANY_GONE, None, None, None)?,
        _ => {
            for (event, field, i) in [
                ("renamed", "razao_social", co::RAZAO_SOCIAL),
                ("legal_nature_changed", "natureza_juridica", co::NATUREZA),
                ("capital_changed", "capital_social", co::CAPITAL),
                ("size_changed", "porte_empresa", co::PORTE),
            ] {
                let (o, n) = (cell(old, i), cell(new, i));
                if o != n {
                    emit(event, Some(field), json(o), json(n))?;
                }
            }
        }
    }
    Ok(())
}

/// The partners who left and entered: a partner is (nome, documento, qualificação), and a
/// company's partners are compared as multisets.
fn partners(sink: &mut Sink, key: &str, old: &Cells, new: &Cells) -> Result<(), IndexError> {
    fn partners<'r>(row: &Cells<'r>) -> Vec<[&'r str; 3]> {
        let mut out: Vec<[&str; 3]> = row
            .as_deref()
            .unwrap_or_default()
            .chunks(PARTNER_CELLS)
            .map(|p| [0, 3, 1].map(|i| p.get(i).copied().flatten().unwrap_or_default()))
            .collect();
        out.sort_unstable();
        out
    }
    let (before, after) = (partners(old), partners(new));
    let json_partner =
        |p: &[&str; 3]| serde_json::json!({"nome": p[0], "documento": p[1], "qualificacao": p[2]}).to_string();
    let (mut i, mut j) = (0, 0);
    while i < before.len() || j < after.len() {
        match (before.get(i), after.get(j)) {
            (Some(b), Some(a)) if b == a => (i, j) = (i + 1, j + 1),
            (Some(b), a) if a.is_none_or(|a| b < a) => {
                sink.emit(None, key, "partner_left", Some("socios"), Some(json_partner(b)), None, [None; 3])?;
                i += 1;
            }
            (_, Some(a)) => {
                sink.emit(None, key, "partner_entered", Some("socios"), None, Some(json_partner(a)), [None; 3])?;
                j += 1;
            }
            (None, None) => unreachable!("the loop stops when both are used up"),
            (Some(_), None) => unreachable!("covered by the arm above"),
        }
    }
    Ok(())
}

/// Opting in or out of the Simples and of the MEI.
fn simples(sink: &mut Sink, key: &str, old: &Cells, new: &Cells) -> Result<(), IndexError> {
    for (i, field, opted_in, opted_out) in [
        (0, "opcao_simples", "simples_opted_in", "simples_opted_out"),
        (1, "opcao_mei", "mei_opted_in", "mei_opted_out"),
    ] {
        let (o, n) = (cell(old, i), cell(new, i));
        let event = match (o == Some("S"), n == Some("S")) {
            (false, true) => opted_in,
            (true, false) => opted_out,
            _ => continue,
        };
        sink.emit(None, key, event, Some(field), json(o), json(n), [None; 3])?;
    }
    Ok(())
}

/// The events of one table half, written by the build's comparison.
#[derive(Debug)]
pub struct ChangeFile {
    pub path: PathBuf,
    pub events: u64,
}

impl ChangeFile {
    /// Calls `each` with every event of the file, in the order written (streamed).
    pub fn read(&self, mut each: impl FnMut(ChangeRow)) -> Result<(), IndexError> {
        let io = |source| IndexError::Io { path: self.path.clone(), source };
        let bad = || IndexError::Io { path: self.path.clone(), source: std::io::Error::other("a change is cut") };
        let mut input = BufReader::with_capacity(1 << 16, File::open(&self.path).map_err(io)?);
        let mut row = Vec::new();
        loop {
            // The varint length of the next event, or the end of the file.
            let (mut len, mut shift) = (0usize, 0);
            loop {
                let mut byte = [0u8; 1];
                if input.read(&mut byte).map_err(io)? == 0 {
                    return if shift == 0 { Ok(()) } else { Err(bad()) };
                }
                len |= usize::from(byte[0] & 0x7f) << shift;
                shift += 7;
                if byte[0] < 0x80 {
                    break;
                }
                if shift > 35 {
                    return Err(bad());
                }
            }
            row.resize(len, 0);
            input.read_exact(&mut row).map_err(|_| bad())?;
            let cells = cells(&row).ok_or_else(bad)?;
            let text = |i: usize| cells.get(i).copied().flatten().map(str::to_owned);
            each(ChangeRow {
                cnpj: text(0),
                cnpj_basico: text(1).unwrap_or_default(),
                event: text(2).unwrap_or_default(),
                field: text(3),
                old: text(4),
                new: text(5),
                uf: text(6),
                municipio: text(7),
                cnae: text(8),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::{Part, Writer};

    type Rows<'a> = &'a [(&'a str, Vec<Option<&'a str>>)];

    fn encoded(cells: &[Option<&str>]) -> Vec<u8> {
        let mut row = Vec::new();
        cells.iter().for_each(|c| put_cell(&mut row, *c));
        row
    }

    /// Compares `current` with `previous` (rows of `table`), both halves cut at company `cut`,
    /// and returns the events as (key, event, field, old, new).
    fn changes(table: LookupTable, previous: Rows, current: Rows, cut: &str) -> Vec<[Option<String>; 5]> {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::create(&dir.path().join("prev.lookup")).unwrap();
        let mut part = writer.table(table, Part::Lower).unwrap();
        for (key, cells) in previous {
            part.put(key, &encoded(cells)).unwrap();
        }
        writer.finish(vec![part.finish().unwrap()], "b1").unwrap();
        let previous = Previous::open(&dir.path().join("prev"), "b1").unwrap();
        let cut: [u8; 8] = cut.as_bytes().try_into().unwrap();
        let mut events = Vec::new();
        for (half, (start, end)) in [([0; 8], Some(cut)), (cut, None)].into_iter().enumerate() {
            let path = dir.path().join(format!("changes{half}"));
            let mut differ = Differ::create(Some(&previous), table, start, end, path).unwrap().unwrap();
            for (key, cells) in current
                .iter()
                .filter(|(k, _)| (k.as_bytes()[..8] >= start[..]) && end.is_none_or(|e| k.as_bytes()[..8] < e[..]))
            {
                differ.row(key, &encoded(cells)).unwrap();
            }
            differ
                .finish()
                .unwrap()
                .read(|c| events.push([c.cnpj.or(Some(c.cnpj_basico)), Some(c.event), c.field, c.old, c.new]))
                .unwrap();
        }
        events
    }

    fn check(table: LookupTable, previous: Rows, current: Rows, expected: &[[Option<&str>; 5]]) {
        // Every cut gives the same events: before, inside and after the companies.
        for cut in ["00000000", "22222222", "99999999"] {
            let got = changes(table, previous, current, cut);
            let expected: Vec<[Option<String>; 5]> = expected.iter().map(|e| e.map(|c| c.map(str::to_owned))).collect();
            assert_eq!(got, expected, "cut at {cut}");
        }
    }

    /// An establishment row as `feed.rs` encodes it, with the compared cells set.
    fn est(situacao: &str, municipio: &str, cep: &str, cnaes: &str) -> Vec<Option<&'static str>> {
        let leak = |s: &str| Some(&*Box::leak(s.to_owned().into_boxed_str()));
        let mut row = vec![Some(""); 26];
        row[est::NOME_FANTASIA] = Some("LOJA");
        row[est::SITUACAO] = leak(situacao);
        row[est::CNAE] = Some("4711302");
        row[est::CNAES_SECUNDARIOS] = leak(cnaes);
        row[est::LOGRADOURO] = Some("RUA A");
        row[est::MUNICIPIO] = leak(municipio);
        row[est::UF] = Some("SP");
        row[est::CEP] = leak(cep);
        row
    }

    #[test]
    fn establishments_open_vanish_and_change_field_by_field() {
        let s = |t: &'static str| Some(t);
        check(
            LookupTable::Establishments,
            &[
                ("11111111000101", est("02", "7107", "01310100", "1,2")),
                ("22222222000102", est("02", "7107", "01310100", "")),
                ("33333333000103", est("02", "7107", "01310100", "1,2")),
            ],
            &[
                ("11111111000101", est("08", "7107", "01310100", "2,1")),
                ("22222222000199", est("02", "7107", "01310100", "")),
                ("33333333000103", est("02", "6001", "20000000", "1,3")),
            ],
            &[
                [s("11111111000101"), s("status_changed"), s("situacao_cadastral"), s("\"02\""), s("\"08\"")],
                [s("22222222000102"), s("disappeared"), None, None, None],
                [s("22222222000199"), s("opened"), None, None, None],
                [s("33333333000103"), s("moved"), s("municipio"), s("\"7107\""), s("\"6001\"")],
                [s("33333333000103"), s("moved"), s("cep"), s("\"01310100\""), s("\"20000000\"")],
                [
                    s("33333333000103"),
                    s("secondary_activities_changed"),
                    s("cnaes_secundarios"),
                    s("[\"1\",\"2\"]"),
                    s("[\"1\",\"3\"]"),
                ],
            ],
        );
    }

    #[test]
    fn companies_mark_the_ones_that_come_and_go() {
        let s = |t: &'static str| Some(t);
        let co = |name: &'static str, capital: Option<&'static str>| {
            vec![Some(name), Some("2062"), Some("05"), capital, Some("")]
        };
        check(
            LookupTable::Companies,
            &[("11111111", co("A LTDA", Some("10.00"))), ("22222222", co("B SA", None))],
            &[("11111111", co("A EIRELI", None)), ("33333333", co("C ME", None))],
            &[
                [s("11111111"), s("renamed"), s("razao_social"), s("\"A LTDA\""), s("\"A EIRELI\"")],
                [s("11111111"), s("capital_changed"), s("capital_social"), s("\"10.00\""), None],
                [s("22222222"), s(MARKER_COMPANY_GONE), None, None, None],
                [s("33333333"), s(MARKER_COMPANY_NEW), None, None, None],
            ],
        );
    }

    #[test]
    fn partners_compare_as_multisets_and_options_by_their_s() {
        let s = |t: &'static str| Some(t);
        let partner = |nome: &'static str, doc: &'static str| {
            [
                Some(nome),
                Some("49"),
                Some("2"),
                Some(doc),
                None,
                Some("4"),
                Some(""),
                Some(""),
                Some(""),
                Some("00"),
                Some(""),
            ]
        };
        let partners = |list: &[[Option<&'static str>; PARTNER_CELLS]]| list.concat();
        check(
            LookupTable::Partners,
            &[("11111111", partners(&[partner("ANA", "***1**"), partner("BRUNO", "***2**")]))],
            &[("11111111", partners(&[partner("CARLA", "***3**"), partner("ANA", "***1**")]))],
            &[
                [
                    s("11111111"),
                    s("partner_left"),
                    s("socios"),
                    s(r#"{"nome":"BRUNO","documento":"***2**","qualificacao":"49"}"#),
                    None,
                ],
                [
                    s("11111111"),
                    s("partner_entered"),
                    s("socios"),
                    None,
                    s(r#"{"nome":"CARLA","documento":"***3**","qualificacao":"49"}"#),
                ],
            ],
        );
        check(
            LookupTable::Simples,
            &[("11111111", vec![s("S"), s("N")]), ("22222222", vec![s("N"), s("S")])],
            &[("11111111", vec![s("N"), s("S")]), ("33333333", vec![s("S"), s("")])],
            &[
                [s("11111111"), s("simples_opted_out"), s("opcao_simples"), s("\"S\""), s("\"N\"")],
                [s("11111111"), s("mei_opted_in"), s("opcao_mei"), s("\"N\""), s("\"S\"")],
                [s("22222222"), s("mei_opted_out"), s("opcao_mei"), s("\"S\""), None],
                [s("33333333"), s("simples_opted_in"), s("opcao_simples"), None, s("\"S\"")],
            ],
        );
    }
}
