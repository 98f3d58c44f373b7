//! The partners' part of the serving files (contract §14), fed once the build has made
//! `partner_identities` and `partner_links`: first every identity in the order a partners' search
//! lists them (folded name, then `partner_id`), which numbers them (partner ordinals) and indexes
//! them (`search/partners.rs`); then every identity again in `partner_id` order with its links,
//! which become the lookup file's `PartnerIds` entries. A partner by its id, its companies and a
//! network's steps are then point lookups, and a search a few bitmap operations.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use crate::IndexError;
use crate::feed::{CompanyRanges, ServingWriter, UF_CODES, company_ranges, io_error};
use crate::lookup::{LookupTable, Part, TableWriter, put_cell};
use crate::search::{Field, PARTNER_ID_BYTES, Postings, Table};

/// The cells of a `PartnerIds` entry before its links: the identity's ordinal in the search
/// index, then its `nome`, `tipo`, `documento` (masked), `pais`, `partner_basico`, `companies`
/// and `first_entry`. Each link follows as three cells: `cnpj_basico`, `qualificacao`,
/// `data_entrada`, in `partner_links` order (company, qualification, date).
pub const PARTNER_IDENTITY_CELLS: usize = 8;

/// Cells per link in a `PartnerIds` entry.
pub const PARTNER_LINK_CELLS: usize = 3;

/// Feeds the partners to the serving files (see the module's docs).
pub struct PartnerFeed<'a> {
    writer: &'a ServingWriter,
    postings: Postings,
    ids: (PathBuf, BufWriter<File>),
    count: u32,
    lookup: Option<TableWriter>,
    cells: Vec<u8>,
}

impl ServingWriter {
    /// The states each company's establishments are in, read in company order (the
    /// establishments' feeds wrote them).
    pub fn company_states(&self) -> Result<CompanyRanges, IndexError> {
        company_ranges(self)
    }

    /// The partners' feed; call [`PartnerFeed::finish`] before [`ServingWriter::finish`].
    pub fn partners(&self) -> Result<PartnerFeed<'_>, IndexError> {
        let path = self.partner_ids_scratch();
        let file = File::create(&path).map_err(io_error(&path))?;
        Ok(PartnerFeed {
            writer: self,
            postings: Postings::default(),
            ids: (path, BufWriter::with_capacity(1 << 16, file)),
            count: 0,
            lookup: Some(self.table(LookupTable::PartnerIds, Part::Lower)?),
            cells: Vec::new(),
        })
    }
}

/// The six digits a person's served document shows (`***.123.456-**`), as the SQL of a search by
/// document reads them; `""` for any other shape.
fn shown_digits(documento: &str) -> String {
    let digits: String = documento.get(4..11).unwrap_or_default().replace('.', "");
    if digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit()) { digits } else { String::new() }
}

impl PartnerFeed<'_> {
    /// Numbers and indexes the next identity in search order (folded name, then id); returns its
    /// ordinal. `states`: the states of its companies' establishments, a bit each (as
    /// [`CompanyRanges::states_of`] gives them).
    pub fn identity(
        &mut self,
        partner_id: &str,
        folded: &str,
        tipo: &str,
        documento: &str,
        states: u32,
    ) -> Result<u32, IndexError> {
        let bytes = cnpj_model::partner::id_bytes(partner_id).ok_or_else(|| IndexError::Io {
            path: self.ids.0.clone(),
            source: std::io::Error::other(format!("{partner_id:?} is not a partner_id")),
        })?;
        let (path, out) = &mut self.ids;
        out.write_all(&bytes[..PARTNER_ID_BYTES]).map_err(io_error(path))?;
        let ordinal = self.count;
        self.count += 1;
        let p = &mut self.postings;
        p.add_text(Field::Socio, folded, ordinal..ordinal + 1);
        p.add(Table::SocioTipo, tipo, ordinal);
        for (i, uf) in UF_CODES.iter().enumerate() {
            if states & (1 << i) != 0 {
                p.add(Table::SocioUf, uf, ordinal);
            }
        }
        let shown = if tipo == "2" { shown_digits(documento) } else { String::new() };
        if !shown.is_empty() {
            p.add(Table::SocioCpf, &shown, ordinal);
        }
        p.settle();
        if p.bytes > self.writer.spill_bytes() {
            self.writer.spill(&mut self.postings)?;
        }
        Ok(ordinal)
    }

    /// The lookup entry of an identity, in `partner_id` order: its [`PARTNER_IDENTITY_CELLS`]
    /// cells, then its links' cells.
    pub fn entry<'c>(
        &mut self,
        partner_id: &str,
        identity: [Option<&str>; PARTNER_IDENTITY_CELLS],
        links: impl IntoIterator<Item = [Option<&'c str>; PARTNER_LINK_CELLS]>,
    ) -> Result<(), IndexError> {
        self.cells.clear();
        identity.into_iter().for_each(|c| put_cell(&mut self.cells, c));
        links.into_iter().flatten().for_each(|c| put_cell(&mut self.cells, c));
        self.lookup.as_mut().expect("until finished").put(partner_id, &self.cells)?;
        Ok(())
    }

    /// Hands the postings, the ids' column and the lookup entries to the writer.
    pub fn finish(mut self) -> Result<(), IndexError> {
        let (path, out) = &mut self.ids;
        out.flush().map_err(io_error(path))?;
        self.writer.spill(&mut self.postings)?;
        let lookup = self.lookup.take().expect("finished once");
        self.writer.partners_fed(lookup.finish()?, u64::from(self.count));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Lookup, PartnerConditions, SearchIndex};
    use cnpj_model::partner::served_partner_id;

    fn partner_id(tipo: &str, name: &str, documento: &str) -> String {
        served_partner_id(tipo, name, documento, "", "")
    }

    /// A partner of the tests: (folded name, tipo, served document, states).
    type Partner = (&'static str, &'static str, &'static str, &'static [&'static str]);

    const PARTNERS: [Partner; 6] = [
        ("ana maria souza", "2", "***.123.456-**", &["SP"]),
        ("ana maria souza", "2", "***.999.456-**", &["RJ", "SP"]),
        ("holding ana ltda", "1", "**.555.666/0001-**", &["MG"]),
        ("joao da silva", "2", "***.123.456-**", &[]),
        ("maria maria", "2", "***.222.333-**", &["SP"]),
        ("silva llc", "3", "", &["EX"]),
    ];

    /// A lookup file and a search index holding only [`PARTNERS`], fed in search order with a
    /// tiny spill budget (every identity spills); their ids in search order.
    fn written(dir: &std::path::Path) -> (Lookup, SearchIndex, Vec<String>) {
        let (lookup, search) = (dir.join("d.lookup"), dir.join("d.search"));
        let writer = ServingWriter::create(&lookup, &search, 1, None).unwrap();
        let mut feed = writer.partners().unwrap();
        let mut ids: Vec<(String, String)> =
            PARTNERS.iter().map(|(name, tipo, doc, _)| (name.to_string(), partner_id(tipo, name, doc))).collect();
        ids.sort();
        let mut ordinals = Vec::new();
        for (name, id) in &ids {
            let (_, tipo, doc, ufs) = PARTNERS.iter().find(|p| partner_id(p.1, p.0, p.2) == *id).unwrap();
            let states = ufs.iter().map(|uf| 1 << UF_CODES.iter().position(|c| c == uf).unwrap()).sum();
            ordinals.push((id.clone(), feed.identity(id, name, tipo, doc, states).unwrap()));
        }
        ordinals.sort();
        for (id, ordinal) in &ordinals {
            let ordinal = ordinal.to_string();
            let mut identity = [None; PARTNER_IDENTITY_CELLS];
            identity[0] = Some(ordinal.as_str());
            feed.entry(id, identity, [[Some("11222333"), Some("49"), None], [Some("44555666"), Some("22"), None]])
                .unwrap();
        }
        feed.finish().unwrap();
        writer.finish("build").unwrap();
        let index = SearchIndex::open(&search, 1 << 20).unwrap();
        (Lookup::open(&lookup).unwrap(), index, ids.into_iter().map(|(_, id)| id).collect())
    }

    #[test]
    fn partners_are_searched_in_order_and_read_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let (lookup, index, ids) = written(dir.path());
        assert_eq!(index.partners(), 6);
        let find = |conditions: PartnerConditions| {
            let (total, page) = index.partner_page(&conditions, 0, 10).unwrap().unwrap();
            assert_eq!(total, page.len() as u64);
            page.iter().map(|id| ids.iter().position(|i| i == id).unwrap()).collect::<Vec<_>>()
        };
        let name = |n: &str| PartnerConditions { name: Some(n.into()), ..Default::default() };
        // The ordinals of the partners `keep` keeps (homonyms are in id order).
        let expect = |keep: &dyn Fn(&Partner) -> bool| {
            let of = |id: &String| *PARTNERS.iter().find(|p| partner_id(p.1, p.0, p.2) == *id).unwrap();
            (0..ids.len()).filter(|&i| keep(&of(&ids[i]))).collect::<Vec<_>>()
        };
        assert_eq!(find(PartnerConditions::default()), [0, 1, 2, 3, 4, 5]);
        assert_eq!(find(name("mari")), [0, 1, 4]);
        assert_eq!(find(name("a maria s")), [0, 1], "a phrase cut at both ends");
        assert_eq!(find(name("maria maria")), [4], "a word twice");
        assert_eq!(find(name("ana souza")), Vec::<usize>::new());
        assert_eq!(find(PartnerConditions { tipo: Some("2".into()), ..name("silva") }), [3]);
        assert_eq!(find(PartnerConditions { uf: Some("SP".into()), ..name("maria") }), [0, 1, 4]);
        assert_eq!(
            find(PartnerConditions { uf: Some("RJ".into()), ..Default::default() }),
            expect(&|p| p.3 == ["RJ", "SP"])
        );
        let shown = PartnerConditions { shown: Some("123456".into()), ..Default::default() };
        assert_eq!(find(shown), expect(&|p| p.2 == "***.123.456-**"));
        assert_eq!(find(PartnerConditions { only: Some(Some(2)), ..Default::default() }), [2]);
        assert_eq!(find(PartnerConditions { only: Some(None), ..Default::default() }), Vec::<usize>::new());
        assert_eq!(index.partner_page(&name("..."), 0, 10).unwrap(), None, "beyond the index");
        let (total, page) = index.partner_page(&name("a"), 2, 2).unwrap().unwrap();
        assert_eq!((total, page), (6, ids[2..4].to_vec()), "a page by rank");
        for (ordinal, id) in ids.iter().enumerate() {
            let entry = lookup.get(crate::LookupTable::PartnerIds, id).unwrap().unwrap();
            assert_eq!(entry[0], Some(ordinal.to_string()), "{id}");
            assert_eq!(entry.len(), PARTNER_IDENTITY_CELLS + 2 * PARTNER_LINK_CELLS);
            assert_eq!(entry[PARTNER_IDENTITY_CELLS + PARTNER_LINK_CELLS], Some("44555666".into()));
        }
    }

    fn check(documento: &str, expected: &str) {
        assert_eq!(shown_digits(documento), expected, "{documento:?}");
    }

    #[test]
    fn a_person_is_found_by_the_six_digits_shown() {
        check("***.123.456-**", "123456");
        check("***.12A.456-**", "");
        check("", "");
        check("**.555.666/0001-**", "");
    }
}
