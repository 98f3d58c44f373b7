//! Partners by id and a company's partners with their ids: the reads every partners' answer is
//! made of. On a DuckDB dataset with its lookup file each is a point lookup (`PartnerIds` entries,
//! the companies' `Partners` entries: a network of 200 nodes is 200 block reads, not a scan per
//! level); otherwise SQL, which Postgres answers through its indexes.

use std::collections::HashMap;

use cnpj_index::{LookupTable, PARTNER_IDENTITY_CELLS, PARTNER_LINK_CELLS};
use cnpj_model::partner::served_partner_id;

use super::{IDENTITY, rows_in};
use crate::backend::TextRow;
use crate::{Key, PARTNER_COLUMNS, Store, StoreError, opt, text};

/// A partner identity: its cells in [`IDENTITY`]'s positions and, when asked for, its links
/// (`cnpj_basico`, `qualificacao`, `data_entrada`) in company order.
pub(super) struct Identity {
    pub(super) row: TextRow,
    /// Its ordinal in the search index (the lookup file's entries only).
    pub(super) ordinal: Option<u32>,
    pub(super) links: Vec<TextRow>,
}

/// One partner row of a company, as a network's step and edges need it.
pub(super) struct PartnerRow {
    pub(super) basico: String,
    pub(super) partner_id: String,
    pub(super) partner_basico: String,
    pub(super) qualificacao: String,
    pub(super) data_entrada: Option<String>,
}

impl Store {
    /// The identities of `ids` that exist, by id, with their links when `links` is set.
    pub(super) fn identities(&self, ids: &[String], links: bool) -> Result<HashMap<String, Identity>, StoreError> {
        if let Some(lookup) = &self.lookup {
            let mut found = HashMap::with_capacity(ids.len());
            for id in ids {
                if let Some(cells) = lookup.get(LookupTable::PartnerIds, id)? {
                    found.insert(id.clone(), identity_of_entry(id, cells, links));
                }
            }
            return Ok(found);
        }
        let sql = format!("SELECT {IDENTITY} FROM partner_identities WHERE partner_id IN (?)");
        let mut found: HashMap<String, Identity> = rows_in(self, "partners", &sql, ids)?
            .into_iter()
            .map(|row| (text(&row, 0), Identity { row, ordinal: None, links: Vec::new() }))
            .collect();
        if links {
            let sql = "SELECT partner_id, cnpj_basico, qualificacao, CAST(data_entrada AS VARCHAR) FROM partner_links \
                       WHERE partner_id IN (?) ORDER BY partner_id, cnpj_basico, qualificacao, data_entrada NULLS LAST";
            for mut row in rows_in(self, "partner links", sql, ids)? {
                let id = text(&row, 0);
                row.remove(0);
                if let Some(identity) = found.get_mut(&id) {
                    identity.links.push(row);
                }
            }
        }
        Ok(found)
    }

    /// The partner rows of the companies `basicos`, with each partner's id (computed from what the
    /// row keeps, as the normalizer computed it from the raw row).
    pub(super) fn partner_rows(&self, basicos: &[String]) -> Result<Vec<PartnerRow>, StoreError> {
        let rows: Vec<(String, TextRow)> = match &self.lookup {
            Some(lookup) => {
                let mut rows = Vec::new();
                for basico in basicos {
                    if let Some(cells) = lookup.get(LookupTable::Partners, basico)? {
                        rows.extend(cells.chunks(PARTNER_COLUMNS).map(|p| (basico.clone(), p.to_vec())));
                    }
                }
                rows
            }
            None => {
                let sql = format!("SELECT {}, cnpj_basico FROM socios WHERE cnpj_basico IN (?)", crate::PARTNER);
                rows_in(self, "partners", &sql, basicos)?
                    .into_iter()
                    .map(|mut r| (r.pop().flatten().unwrap_or_default(), r))
                    .collect()
            }
        };
        Ok(rows.into_iter().map(|(basico, p)| partner_row(basico, &p)).collect())
    }

    /// A company's partners as its record lists them, with their ids (`None`: no establishment).
    pub(super) fn partners_of(&self, basico: &str) -> Result<Option<Vec<(String, TextRow)>>, StoreError> {
        let Some(found) = self.find(&[Key::Basico(basico)], false)?.pop().flatten() else { return Ok(None) };
        Ok(Some(found.partners.into_iter().map(|p| (partner_id_of(&p), p)).collect()))
    }
}

/// The id of a company's partner row (`PARTNER` columns).
fn partner_id_of(p: &TextRow) -> String {
    served_partner_id(&text(p, 2), &text(p, 0), &text(p, 3), &text(p, 6), &text(p, 10))
}

fn partner_row(basico: String, p: &TextRow) -> PartnerRow {
    PartnerRow {
        basico,
        partner_id: partner_id_of(p),
        partner_basico: text(p, 10),
        qualificacao: text(p, 1),
        data_entrada: opt(p, 4),
    }
}

/// An identity from its lookup entry (see `cnpj_index::PARTNER_IDENTITY_CELLS`).
fn identity_of_entry(id: &str, mut cells: TextRow, links: bool) -> Identity {
    let ordinal = opt(&cells, 0).and_then(|o| o.parse().ok());
    let link_cells = cells.split_off(PARTNER_IDENTITY_CELLS.min(cells.len()));
    if let Some(first) = cells.first_mut() {
        *first = Some(id.to_owned());
    }
    let links = if links { link_cells.chunks(PARTNER_LINK_CELLS).map(<[_]>::to_vec).collect() } else { Vec::new() };
    Identity { row: cells, ordinal, links }
}
