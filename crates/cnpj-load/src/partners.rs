//! The partners fed to the serving files once `transform.sql` has made `partner_identities` and
//! `partner_links` (contract §14; see `cnpj_index::PartnerFeed`): the identities in search order
//! (folded name, then `partner_id`) with the states of their companies' establishments, then in
//! `partner_id` order, merged with their links. Read as Arrow batches: tens of millions of rows
//! at a full month.
//!
//! The states: each company's are known from the establishments' feed (a bit per state, in
//! company order); `socios`, stored in company order, is read beside them, and each partner row's
//! company states are staged in a temporary table that SQL sums up per partner (`bit_or`). SQL
//! alone (the distinct states of every establishment's company, joined to the links) cost
//! several times as much.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::Int64Type;
use cnpj_index::{PARTNER_IDENTITY_CELLS, PartnerFeed, ServingWriter};
use duckdb::Connection;

use crate::{LoadError, Loader, db};

/// The temporary table of each partner row's company states (kept out of the dataset's file: a
/// table dropped there leaves its blocks behind).
const STAGED: &str = "CREATE TEMP TABLE stg_partner_states (partner_id VARCHAR, states INTEGER)";

/// The partner rows in company order, as stored.
const PARTNER_ROWS: &str = "SELECT cnpj_basico, partner_id FROM socios";

/// The identities in search order, each with its id rank (its row in `partner_identities`,
/// stored in `partner_id` order) and the states of its companies' establishments.
const SEARCH_ORDER: &str = "
SELECT i.rowid, i.partner_id, i.nome_busca, i.tipo, i.documento, CAST(s.states AS BIGINT)
FROM partner_identities i
LEFT JOIN (SELECT partner_id, bit_or(states) AS states FROM stg_partner_states GROUP BY partner_id) s USING (partner_id)
ORDER BY i.nome_busca, i.partner_id";

/// The identities as stored (`partner_id` order), with the cells of their lookup entries after
/// the ordinal.
const IDENTITIES: &str = "SELECT rowid, partner_id, nome, tipo, documento, pais, partner_basico, \
    CAST(companies AS VARCHAR), CAST(first_entry AS VARCHAR) FROM partner_identities";

/// The links as stored (`partner_id`, company, qualification, date order).
const LINKS: &str = "SELECT partner_id, cnpj_basico, qualificacao, CAST(data_entrada AS VARCHAR) FROM partner_links";

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

    fn text(&self, column: usize) -> Option<&str> {
        let array = self.batch.as_ref()?.column(column).as_string::<i32>();
        (!array.is_null(self.row)).then(|| array.value(self.row))
    }

    /// An integer cell (0 for NULL).
    fn int(&self, column: usize) -> i64 {
        let Some(batch) = &self.batch else { return 0 };
        let array = batch.column(column).as_primitive::<Int64Type>();
        if array.is_null(self.row) { 0 } else { array.value(self.row) }
    }

    fn advance(&mut self) {
        self.row += 1;
        self.fill();
    }
}

impl Loader {
    /// Feeds the partners to the serving files; returns the identities fed.
    pub fn feed_partners(&self, serving: &ServingWriter) -> Result<u64, LoadError> {
        let mut feed = serving.partners()?;
        // The temporary table is this connection's; the partner rows stream on the loader's.
        let staging = self.conn().try_clone().map_err(db("opening another connection"))?;
        stage_states(self.conn(), &staging, serving)?;
        let ordinals = search_order(&staging, &mut feed)?;
        by_id(self.conn(), &mut feed, &ordinals)?;
        feed.finish()?;
        Ok(ordinals.len() as u64)
    }
}

/// Numbers and indexes the identities in search order; the ordinal of each by its id rank.
fn search_order(conn: &Connection, feed: &mut PartnerFeed<'_>) -> Result<Vec<u32>, LoadError> {
    let context = "reading the partners in search order";
    let mut stmt = conn.prepare(SEARCH_ORDER).map_err(db(context))?;
    let mut rows = Cursor::new(&mut stmt, context)?;
    let mut ordinals = Vec::new();
    while !rows.is_done() {
        let rank = usize::try_from(rows.int(0)).unwrap_or(usize::MAX);
        let ordinal = feed.identity(
            rows.text(1).unwrap_or_default(),
            rows.text(2).unwrap_or_default(),
            rows.text(3).unwrap_or_default(),
            rows.text(4).unwrap_or_default(),
            rows.int(5) as u32,
        )?;
        if ordinals.len() <= rank {
            ordinals.resize(rank + 1, u32::MAX);
        }
        ordinals[rank] = ordinal;
        rows.advance();
    }
    Ok(ordinals)
}

/// Stages each partner row's company states (`stg_partner_states`), the rows of no known state
/// left out.
fn stage_states(conn: &Connection, staging: &Connection, serving: &ServingWriter) -> Result<(), LoadError> {
    const CONTEXT: &str = "staging the partners' states";
    staging.execute_batch(STAGED).map_err(db(CONTEXT))?;
    let mut states = serving.company_states()?;
    let mut stmt = conn.prepare(PARTNER_ROWS).map_err(db(CONTEXT))?;
    let mut rows = Cursor::new(&mut stmt, CONTEXT)?;
    let mut appender = staging.appender_to_catalog_and_db("stg_partner_states", "temp", "main").map_err(db(CONTEXT))?;
    let (mut ids, mut masks): (Vec<String>, Vec<i32>) = (Vec::new(), Vec::new());
    let mut last = String::new();
    while !rows.is_done() {
        let basico = rows.text(0).unwrap_or_default();
        // Company states are read in company order: so must the partner rows be.
        if basico < last.as_str() {
            return Err(LoadError::SociosOrder { basico: basico.to_owned(), previous: last });
        }
        if basico != last {
            last = basico.to_owned();
        }
        let mask = states.states_of(basico.as_bytes())?;
        if mask != 0 {
            ids.push(rows.text(1).unwrap_or_default().to_owned());
            masks.push(mask as i32);
        }
        if ids.len() >= 65_536 {
            appender.append_record_batch(states_batch(&mut ids, &mut masks)).map_err(db(CONTEXT))?;
        }
        rows.advance();
    }
    appender.append_record_batch(states_batch(&mut ids, &mut masks)).map_err(db(CONTEXT))?;
    appender.flush().map_err(db(CONTEXT))
}

/// A batch of `stg_partner_states` rows; empties the columns.
fn states_batch(ids: &mut Vec<String>, masks: &mut Vec<i32>) -> RecordBatch {
    let ids: StringArray = std::mem::take(ids).into_iter().map(Some).collect();
    let masks = Int32Array::from(std::mem::take(masks));
    RecordBatch::try_from_iter([("partner_id", Arc::new(ids) as ArrayRef), ("states", Arc::new(masks) as ArrayRef)])
        .expect("two columns of one length")
}

/// Writes each identity's lookup entry, in `partner_id` order, with its links.
fn by_id(conn: &Connection, feed: &mut PartnerFeed<'_>, ordinals: &[u32]) -> Result<(), LoadError> {
    let context = "reading the partner identities";
    let mut stmt = conn.prepare(IDENTITIES).map_err(db(context))?;
    let mut identities = Cursor::new(&mut stmt, context)?;
    // A connection can stream one result at a time.
    let links_conn = conn.try_clone().map_err(db("opening another connection"))?;
    let context = "reading the partner links";
    let mut links_stmt = links_conn.prepare(LINKS).map_err(db(context))?;
    let mut links = Cursor::new(&mut links_stmt, context)?;
    let mut cells: Vec<[Option<String>; 3]> = Vec::new();
    while !identities.is_done() {
        let id = identities.text(1).unwrap_or_default().to_owned();
        // Links of ids before this one have no identity: there are none (the reconciliation
        // checks every link's partner), but a stray one must not stop the merge.
        while !links.is_done() && links.text(0).unwrap_or_default() < id.as_str() {
            links.advance();
        }
        cells.clear();
        while !links.is_done() && links.text(0) == Some(id.as_str()) {
            cells.push([1, 2, 3].map(|c| links.text(c).map(str::to_owned)));
            links.advance();
        }
        let rank = usize::try_from(identities.int(0)).unwrap_or(usize::MAX);
        let ordinal = ordinals.get(rank).copied().unwrap_or(u32::MAX).to_string();
        let mut identity: [Option<&str>; PARTNER_IDENTITY_CELLS] = [None; PARTNER_IDENTITY_CELLS];
        identity[0] = Some(&ordinal);
        for (cell, column) in identity[1..].iter_mut().zip(2..) {
            *cell = identities.text(column);
        }
        feed.entry(&id, identity, cells.iter().map(|l| [l[0].as_deref(), l[1].as_deref(), l[2].as_deref()]))?;
        identities.advance();
    }
    Ok(())
}
