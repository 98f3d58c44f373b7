//! Partners as identities (contract §14), made once `socios` is stored: `partner_identities`
//! and the partners' part of the serving files (see `cnpj_index::PartnerFeed`).
//!
//! `socios`, stored in company order, is read once beside the states of each company's
//! establishments (known from the establishments' feed, a bit per state, in company order), and
//! its rows are sorted by link (`partner_id`, company, qualification, date) by an external sort
//! (`sorter.rs`). The sorted links are read twice: first to sum each identity up, which is
//! appended to `partner_identities` (so stored in `partner_id` order) and sorted again in search
//! order (folded name, then `partner_id`) to number and index the identities; then to write each
//! identity's lookup entry, with its ordinal and its links. `partner_links` is a view of `socios`
//! (`transform.sql`).
//!
//! Each identity sums its rows up the same way whatever their order: `tipo` and `nome` the
//! smallest by byte order, `documento` and `pais` the smallest that is not empty,
//! `partner_basico` the greatest, `companies` its distinct companies, `first_entry` its first
//! known date, and `nome_busca` its name folded as the search folds text (`cnpj_model::fold`).
//! SQL did the same (a `GROUP BY` and three sorts of tens of millions of rows) in about the same
//! time at a full month, but 1.2 GB past the memory DuckDB was allowed (BENCHMARKS.md, "The
//! partners sorted in Rust").

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Date32Array, Int64Array, RecordBatch, StringBuilder};
use arrow::datatypes::Date32Type;
use cnpj_index::{PARTNER_IDENTITY_CELLS, PartnerFeed, ServingWriter};
use duckdb::Connection;

use crate::sorter::{Sorted, Sorter, put, take};
use crate::{LoadError, Loader, db};

/// The identities' table, filled in `partner_id` order.
const IDENTITIES: &str = "CREATE TABLE partner_identities (partner_id VARCHAR, tipo VARCHAR, nome VARCHAR, \
    nome_busca VARCHAR, documento VARCHAR, pais VARCHAR, partner_basico VARCHAR, companies BIGINT, first_entry DATE)";

/// The partner rows in company order, as stored.
const PARTNER_ROWS: &str = "SELECT cnpj_basico, partner_id, qualificacao, data_entrada, tipo, nome, documento, pais, \
    partner_basico FROM socios";

/// Identities per batch appended to `partner_identities`.
const BATCH_ROWS: usize = 65_536;

/// Rows of a query's Arrow batches (streamed: memory does not grow with the month), one at a time.
struct Cursor<'s> {
    batches: Box<dyn Iterator<Item = RecordBatch> + 's>,
    batch: Option<RecordBatch>,
    row: usize,
}

impl<'s> Cursor<'s> {
    fn new(stmt: &'s mut duckdb::Statement<'_>, context: &'static str) -> Result<Cursor<'s>, LoadError> {
        let batches = stmt.stream_arrow([]).map_err(db(context))?;
        let mut cursor = Cursor { batches: Box::new(batches), batch: None, row: 0 };
        cursor.fill();
        Ok(cursor)
    }

    fn fill(&mut self) {
        while self.batch.as_ref().is_none_or(|b| self.row >= b.num_rows()) {
            match self.batches.next() {
                Some(batch) => (self.batch, self.row) = (Some(batch), 0),
                None => {
                    self.batch = None;
                    return;
                }
            }
        }
    }

    fn is_done(&self) -> bool {
        self.batch.is_none()
    }

    /// A text cell ("" for NULL).
    fn text(&self, column: usize) -> &str {
        let Some(batch) = &self.batch else { return "" };
        let array = batch.column(column).as_string::<i32>();
        if array.is_null(self.row) { "" } else { array.value(self.row) }
    }

    fn date(&self, column: usize) -> Option<i32> {
        let array = self.batch.as_ref()?.column(column).as_primitive::<Date32Type>();
        (!array.is_null(self.row)).then(|| array.value(self.row))
    }

    fn advance(&mut self) {
        self.row += 1;
        self.fill();
    }
}

impl Loader {
    /// Makes `partner_identities` and feeds the partners to the serving files, sorting with
    /// buffers of `buffer_bytes`; returns the identities.
    pub fn feed_partners(&self, serving: &ServingWriter, buffer_bytes: usize) -> Result<u64, LoadError> {
        let dir = self.runs_dir()?;
        let started = std::time::Instant::now();
        let step = |name: &str| tracing::debug!(step = name, seconds = started.elapsed().as_secs_f64(), "partners");
        let links = sort_links(self.conn(), serving, &dir, buffer_bytes)?;
        step("links sorted");
        let names = store_identities(self.conn(), &links, &dir, buffer_bytes)?;
        step("identities stored");
        let mut feed = serving.partners()?;
        let ordinals = search_order(&names, &mut feed)?;
        drop(names);
        step("identities indexed");
        lookup_entries(&links, &mut feed, &ordinals)?;
        feed.finish()?;
        step("entries written");
        Ok(ordinals.len() as u64)
    }
}

/// Sorts the partner rows by link, each with its company's states.
fn sort_links(
    conn: &Connection,
    serving: &ServingWriter,
    dir: &Path,
    buffer_bytes: usize,
) -> Result<Sorted, LoadError> {
    const CONTEXT: &str = "reading the partner rows";
    let mut states = serving.company_states()?;
    let mut stmt = conn.prepare(PARTNER_ROWS).map_err(db(CONTEXT))?;
    let mut rows = Cursor::new(&mut stmt, CONTEXT)?;
    let mut sorter = Sorter::new(dir, "partner-links", buffer_bytes);
    let (mut key, mut payload) = (Vec::new(), Vec::new());
    let (mut last, mut mask) = (String::new(), 0);
    while !rows.is_done() {
        let basico = rows.text(0);
        // Company states are read in company order: so must the partner rows be.
        if basico < last.as_str() {
            return Err(LoadError::SociosOrder { basico: basico.to_owned(), previous: last });
        }
        if basico != last || last.is_empty() {
            last = basico.to_owned();
            mask = states.states_of(basico.as_bytes())?;
        }
        key.clear();
        link_key(&mut key, [rows.text(1), basico, rows.text(2)], rows.date(3));
        payload.clear();
        for column in 4..=8 {
            put(&mut payload, rows.text(column).as_bytes());
        }
        put(&mut payload, &mask.to_le_bytes());
        sorter.push(&key, &payload)?;
        rows.advance();
    }
    sorter.finish()
}

/// A link's sort key: `partner_id`, company and qualification, each ended by a 0 byte, then the
/// date (NULL last, as SQL orders it).
fn link_key(key: &mut Vec<u8>, texts: [&str; 3], date: Option<i32>) {
    for text in texts {
        key.extend_from_slice(text.as_bytes());
        key.push(0);
    }
    match date {
        Some(days) => {
            key.push(0);
            key.extend_from_slice(&((days as u32) ^ 0x8000_0000).to_be_bytes());
        }
        None => key.push(1),
    }
}

/// A link read back from its key: `partner_id`, company, qualification and date.
fn link_of(key: &[u8]) -> ([&str; 3], Option<i32>) {
    let mut parts = key.splitn(4, |&b| b == 0);
    let texts = [(); 3].map(|()| parts.next().map_or("", |p| std::str::from_utf8(p).unwrap_or_default()));
    let date = match parts.next() {
        Some(&[0, a, b, c, d]) => Some((u32::from_be_bytes([a, b, c, d]) ^ 0x8000_0000) as i32),
        _ => None,
    };
    (texts, date)
}

/// A date as SQL writes it, from its days since 1970-01-01.
fn date_text(days: i32) -> String {
    cnpj_model::date_text(i64::from(days))
}

/// One identity summed up from its links (see the module's docs).
#[derive(Default)]
struct Identity {
    partner_id: String,
    tipo: String,
    nome: String,
    documento: String,
    pais: String,
    partner_basico: String,
    companies: i64,
    first_entry: Option<i32>,
    states: u32,
    last_company: String,
    /// The keys of its links, one after the other, and where each ends.
    link_keys: Vec<u8>,
    link_ends: Vec<usize>,
}

/// Sets `to` to `text`, keeping its allocation.
fn set(to: &mut String, text: &str) {
    to.clear();
    to.push_str(text);
}

impl Identity {
    fn start(&mut self, partner_id: &str) {
        set(&mut self.partner_id, partner_id);
        self.companies = 0;
        self.first_entry = None;
        self.states = 0;
        self.link_keys.clear();
        self.link_ends.clear();
    }

    /// Adds a link: its key, the key read back ([`link_of`]) and its payload.
    fn add(&mut self, key: &[u8], ([_, basico, _], date): ([&str; 3], Option<i32>), mut payload: &[u8]) {
        let mut field = || std::str::from_utf8(take(&mut payload)).unwrap_or_default();
        let (tipo, nome, documento, pais, partner_basico) = (field(), field(), field(), field(), field());
        let states = take(&mut payload).try_into().map_or(0, u32::from_le_bytes);
        if self.link_ends.is_empty() {
            for (to, text) in [
                (&mut self.tipo, tipo),
                (&mut self.nome, nome),
                (&mut self.documento, documento),
                (&mut self.pais, pais),
                (&mut self.partner_basico, partner_basico),
                (&mut self.last_company, basico),
            ] {
                set(to, text);
            }
            self.companies = 1;
        } else {
            for (to, text) in [(&mut self.tipo, tipo), (&mut self.nome, nome)] {
                if text < to.as_str() {
                    set(to, text);
                }
            }
            for (to, text) in [(&mut self.documento, documento), (&mut self.pais, pais)] {
                if !text.is_empty() && (to.is_empty() || text < to.as_str()) {
                    set(to, text);
                }
            }
            if partner_basico > self.partner_basico.as_str() {
                set(&mut self.partner_basico, partner_basico);
            }
            if basico != self.last_company {
                self.companies += 1;
                set(&mut self.last_company, basico);
            }
        }
        self.first_entry = match (self.first_entry, date) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.states |= states;
        self.link_keys.extend_from_slice(key);
        self.link_ends.push(self.link_keys.len());
    }

    /// Its links: company, qualification and date.
    fn links(&self) -> impl Iterator<Item = ([&str; 3], Option<i32>)> {
        let starts = std::iter::once(0).chain(self.link_ends.iter().copied());
        starts.zip(&self.link_ends).map(|(start, &end)| link_of(&self.link_keys[start..end]))
    }
}

/// Each identity of the sorted links, in `partner_id` order, with its links.
fn each_identity(links: &Sorted, each: &mut dyn FnMut(&Identity) -> Result<(), LoadError>) -> Result<(), LoadError> {
    let mut merge = links.merge()?;
    let mut identity = Identity::default();
    while let Some((key, payload)) = merge.next()? {
        let link = link_of(key);
        let partner_id = link.0[0];
        if partner_id != identity.partner_id || identity.link_ends.is_empty() {
            if !identity.link_ends.is_empty() {
                each(&identity)?;
            }
            identity.start(partner_id);
        }
        identity.add(key, link, payload);
    }
    if !identity.link_ends.is_empty() {
        each(&identity)?;
    }
    Ok(())
}

/// Appends every identity to `partner_identities` and sorts them in search order, each with its
/// rank (its row in the table). DuckDB compresses what is appended, most of this step's work: it
/// does so on a thread of its own, beside the sort.
fn store_identities(conn: &Connection, links: &Sorted, dir: &Path, buffer_bytes: usize) -> Result<Sorted, LoadError> {
    const CONTEXT: &str = "storing partner_identities";
    conn.execute_batch(IDENTITIES).map_err(db(CONTEXT))?;
    let appending = conn.try_clone().map_err(db("opening another connection"))?;
    let (batches, received) = std::sync::mpsc::sync_channel::<RecordBatch>(2);
    std::thread::scope(|scope| {
        let appender = scope.spawn(move || {
            let mut appender = appending.appender("partner_identities").map_err(db(CONTEXT))?;
            for batch in received {
                appender.append_record_batch(batch).map_err(db(CONTEXT))?;
            }
            appender.flush().map_err(db(CONTEXT))
        });
        let names = sort_names(links, dir, buffer_bytes, &batches);
        drop(batches);
        appender.join().expect("the appender does not panic")?;
        names
    })
}

/// Sorts the identities in search order and sends them in batches of `partner_identities` rows.
fn sort_names(
    links: &Sorted,
    dir: &Path,
    buffer_bytes: usize,
    batches: &std::sync::mpsc::SyncSender<RecordBatch>,
) -> Result<Sorted, LoadError> {
    let mut names = Sorter::new(dir, "partner-names", buffer_bytes);
    let mut batch = IdentityBatch::default();
    let (mut rank, mut key, mut payload) = (0u32, Vec::new(), Vec::new());
    each_identity(links, &mut |identity| {
        let folded = cnpj_model::fold(&identity.nome);
        key.clear();
        key.extend_from_slice(folded.as_bytes());
        key.push(0);
        key.extend_from_slice(identity.partner_id.as_bytes());
        payload.clear();
        for field in [&identity.tipo, &identity.documento] {
            put(&mut payload, field.as_bytes());
        }
        put(&mut payload, &identity.states.to_le_bytes());
        put(&mut payload, &rank.to_le_bytes());
        names.push(&key, &payload)?;
        rank += 1;
        batch.push(identity, &folded);
        if batch.len() >= BATCH_ROWS {
            batches.send(batch.take()).map_err(|_| LoadError::Stopped)?;
        }
        Ok(())
    })?;
    batches.send(batch.take()).map_err(|_| LoadError::Stopped)?;
    names.finish()
}

/// Rows of `partner_identities` being gathered into a batch.
#[derive(Default)]
struct IdentityBatch {
    texts: [StringBuilder; 7],
    companies: Vec<i64>,
    first_entry: Vec<Option<i32>>,
}

impl IdentityBatch {
    fn len(&self) -> usize {
        self.companies.len()
    }

    fn push(&mut self, i: &Identity, folded: &str) {
        let texts = [&i.partner_id, &i.tipo, &i.nome, folded, &i.documento, &i.pais, &i.partner_basico];
        for (column, text) in self.texts.iter_mut().zip(texts) {
            column.append_value(text);
        }
        self.companies.push(i.companies);
        self.first_entry.push(i.first_entry);
    }

    /// The batch, in the table's column order; empties it.
    fn take(&mut self) -> RecordBatch {
        let names = ["partner_id", "tipo", "nome", "nome_busca", "documento", "pais", "partner_basico"];
        let mut columns: Vec<(&str, ArrayRef)> = names
            .into_iter()
            .zip(&mut self.texts)
            .map(|(name, texts)| (name, Arc::new(texts.finish()) as ArrayRef))
            .collect();
        columns.push(("companies", Arc::new(Int64Array::from(std::mem::take(&mut self.companies)))));
        columns.push(("first_entry", Arc::new(Date32Array::from(std::mem::take(&mut self.first_entry)))));
        RecordBatch::try_from_iter(columns).expect("columns of one length")
    }
}

/// Numbers and indexes the identities in search order; the ordinal of each by its rank.
fn search_order(names: &Sorted, feed: &mut PartnerFeed<'_>) -> Result<Vec<u32>, LoadError> {
    let mut merge = names.merge()?;
    let mut ordinals = Vec::new();
    while let Some((key, mut payload)) = merge.next()? {
        let mut parts = key.splitn(2, |&b| b == 0).map(|p| std::str::from_utf8(p).unwrap_or_default());
        let (folded, partner_id) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        let mut field = || std::str::from_utf8(take(&mut payload)).unwrap_or_default();
        let (tipo, documento) = (field(), field());
        let mut word = || take(&mut payload).try_into().map_or(0, u32::from_le_bytes);
        let (states, rank) = (word(), word() as usize);
        let ordinal = feed.identity(partner_id, folded, tipo, documento, states)?;
        if ordinals.len() <= rank {
            ordinals.resize(rank + 1, u32::MAX);
        }
        ordinals[rank] = ordinal;
    }
    Ok(ordinals)
}

/// Writes each identity's lookup entry, in `partner_id` order, with its links.
fn lookup_entries(links: &Sorted, feed: &mut PartnerFeed<'_>, ordinals: &[u32]) -> Result<(), LoadError> {
    let mut rank = 0;
    each_identity(links, &mut |i| {
        let ordinal = ordinals.get(rank).copied().unwrap_or(u32::MAX).to_string();
        rank += 1;
        let (companies, first_entry) = (i.companies.to_string(), i.first_entry.map(date_text));
        let dates: Vec<Option<String>> = i.links().map(|(_, date)| date.map(date_text)).collect();
        let identity: [Option<&str>; PARTNER_IDENTITY_CELLS] = [
            Some(&ordinal),
            Some(&i.nome),
            Some(&i.tipo),
            Some(&i.documento),
            Some(&i.pais),
            Some(&i.partner_basico),
            Some(&companies),
            first_entry.as_deref(),
        ];
        let links = i
            .links()
            .zip(&dates)
            .map(|(([_, basico, qualificacao], _), date)| [Some(basico), Some(qualificacao), date.as_deref()]);
        feed.entry(&i.partner_id, identity, links)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dates written as DuckDB writes them, from the first year of the era to the last.
    #[test]
    fn dates_are_written_as_sql_writes_them() {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT CAST(i AS INTEGER), CAST(DATE '1970-01-01' + CAST(i AS INTEGER) AS VARCHAR) \
                 FROM range(-719_162, 2_932_897, 997) t(i)",
            )
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i32>(0)?, r.get::<_, String>(1)?))).unwrap();
        let mut n = 0;
        for row in rows {
            let (days, text) = row.unwrap();
            assert_eq!(date_text(days), text, "{days}");
            n += 1;
        }
        assert!(n > 3_000);
    }

    /// A link's key sorts as SQL orders links (company, qualification, then date, NULL last)
    /// and reads back as it was.
    #[test]
    fn link_keys_sort_as_sql_and_read_back() {
        let links = [
            (["pa", "00000001", "49"], Some(-1)),
            (["pa", "00000001", "49"], Some(0)),
            (["pa", "00000001", "49"], Some(7_000)),
            (["pa", "00000001", "49"], None),
            (["pa", "00000001", "5"], Some(-30_000)),
            (["pa", "00000002", ""], None),
            (["pab", "00000000", "49"], Some(1)),
        ];
        let keys: Vec<Vec<u8>> = links
            .iter()
            .map(|&(texts, date)| {
                let mut key = Vec::new();
                link_key(&mut key, texts, date);
                key
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        for (key, link) in keys.iter().zip(links) {
            assert_eq!(link_of(key), link);
        }
    }
}
