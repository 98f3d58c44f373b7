//! Partners as first-class (contract §14): a search of the partners' identities, a partner with
//! its companies and its entries and exits, and a company's network walked breadth-first. The
//! same SQL for both backends (`$n` parameters, text compared byte-wise: Postgres' columns are
//! `COLLATE "C"`), so both answer byte for byte alike.
//!
//! Where each read lands: a search is answered by the search index's partner tables (partner
//! ordinals in the search's order, see `cnpj_index`), and its page's partners, a partner by its
//! id and a company's partners by the lookup file (`identities`). Without them (a Postgres
//! dataset, or a term beyond the index) by SQL: Postgres has an index for each read
//! (sql/postgres/indexes.sql); a DuckDB file finds a partner by id through the zone maps of
//! `partner_identities`, stored in `partner_id` order, and its links by a scan of `socios`'
//! `partner_id` column (`partner_links` is a view of `socios`).

use std::collections::{BTreeSet, HashMap};

use cnpj_model::partner::identity_rule;
use cnpj_model::{CnpjQuery, Locale, fold};
use serde::Serialize;

use crate::backend::{Dialect, TextRow};
use crate::changes::Change;
use crate::search::like_escape;
use crate::{ESTABLISHMENT_COLUMNS, Key, Store, StoreError, opt, placeholders, text};

mod identities;
mod network;

pub use network::{Network, NetworkEdge, NetworkNode, NetworkOptions, NodeDetail};

/// Validated filters of `GET /api/v1/partners/search`, combined with AND.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartnerFilters {
    /// A case- and accent-insensitive substring of the name (folded here).
    pub name: Option<String>,
    pub document: Option<PartnerDocument>,
    /// `1`, `2` or `3`.
    pub tipo: Option<String>,
    /// Partners of at least one company with an establishment in this state.
    pub state: Option<String>,
}

/// A partner's document as a filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartnerDocument {
    /// The six digits a person's masked CPF shows.
    Shown(String),
    /// A legal entity's company base (8 characters).
    Company(String),
}

/// A partner as a search lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartnerItem {
    pub partner_id: String,
    pub nome: String,
    pub tipo: String,
    pub tipo_descricao: String,
    /// Masked as the company record masks it (§4).
    pub documento: String,
    pub pais_code: String,
    /// The rule the identity follows (`company`, `name_and_masked_document`, `name_and_country`,
    /// `name`).
    pub identity: &'static str,
    /// The companies it is a partner of.
    pub companies: u64,
    pub first_entry: Option<String>,
}

/// One of a partner's companies (one row of `partner_links`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartnerCompany {
    /// The company's head office (§1), `None` when it has no establishment this month.
    pub cnpj: Option<String>,
    pub cnpj_basico: String,
    pub razao_social: String,
    pub qualificacao: String,
    pub qualificacao_descricao: String,
    pub data_entrada: Option<String>,
    pub situacao_cadastral: Option<String>,
    pub situacao_cadastral_descricao: Option<String>,
    pub uf: Option<String>,
    pub municipio: Option<String>,
}

/// A legal-entity partner's own company.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OwnCompany {
    pub cnpj: String,
    pub razao_social: String,
}

/// A partner with a page of its companies and its entries and exits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartnerRecord {
    pub partner_id: String,
    pub nome: String,
    pub tipo: String,
    pub tipo_descricao: String,
    pub documento: String,
    pub pais_code: String,
    pub identity: &'static str,
    /// What the identity rule means, in the request's locale.
    pub identity_note: &'static str,
    /// The companies it is a partner of (the page lists its links: one per qualification).
    pub companies_total: u64,
    pub first_entry: Option<String>,
    /// A legal entity's own company, when the registry has it.
    pub company: Option<OwnCompany>,
    pub companies: Vec<PartnerCompany>,
    /// Its `partner_entered` and `partner_left` events, newest month first (see
    /// `Store::partner_events`).
    pub events: Vec<Change>,
}

/// What `identity_note` says of each rule.
fn identity_note(rule: &str, locale: Locale) -> &'static str {
    match (rule, locale) {
        ("company", Locale::PtBr) => "Uma pessoa jurídica é a sua empresa: a base do CNPJ a identifica.",
        ("company", Locale::En) => "A legal entity is its company: the base of its CNPJ identifies it.",
        ("company", Locale::Es) => "Una persona jurídica es su empresa: la base de su CNPJ la identifica.",
        ("name_and_country", Locale::PtBr) => "Sócios estrangeiros com o mesmo nome e o mesmo país contam como um.",
        ("name_and_country", Locale::En) => "Foreign partners with the same name and country are counted as one.",
        ("name_and_country", Locale::Es) => "Los socios extranjeros con el mismo nombre y país cuentan como uno.",
        ("name", Locale::PtBr) => "Sem CNPJ válido no cadastro: identificado só pelo nome.",
        ("name", Locale::En) => "No valid CNPJ in the dump: identified by its name alone.",
        ("name", Locale::Es) => "Sin CNPJ válido en el registro: identificado solo por su nombre.",
        (_, Locale::PtBr) => "Pessoas com o mesmo nome e os mesmos seis dígitos do CPF são contadas como um só sócio.",
        (_, Locale::En) => "People with the same name and the same six digits of the CPF are counted as one partner.",
        (_, Locale::Es) => {
            "Las personas con el mismo nombre y los mismos seis dígitos del CPF se cuentan como un solo socio."
        }
    }
}

/// The columns of a partner item, in [`Store::partner_item`]'s positions (a lookup entry's
/// identity cells are in the same positions, its ordinal in the id's place).
const IDENTITY: &str =
    "partner_id, nome, tipo, documento, pais, partner_basico, CAST(companies AS VARCHAR), CAST(first_entry AS VARCHAR)";

/// A company as the partners' answers show it: from its head office's record.
struct CompanyInfo {
    cnpj: String,
    razao_social: String,
    situacao: String,
    uf: String,
    municipio: String,
}

impl PartnerFilters {
    /// The WHERE clause (empty or ` WHERE …`) over `partner_identities` and its parameters.
    fn sql(&self, dialect: Dialect) -> (String, Vec<String>) {
        let mut clauses = Vec::new();
        let mut params = Vec::new();
        let mut add = |clause: &str, value: String| {
            params.push(value);
            clauses.push(clause.replace('$', &format!("${}", params.len())));
        };
        if let Some(name) = &self.name {
            match dialect {
                Dialect::DuckDb => add("contains(nome_busca, $)", fold(name)),
                Dialect::Postgres => add("nome_busca LIKE $", format!("%{}%", like_escape(&fold(name)))),
            }
        }
        match &self.document {
            // The served form is `***.123.456-**`.
            Some(PartnerDocument::Shown(digits)) => {
                add("tipo = '2' AND replace(substr(documento, 5, 7), '.', '') = $", digits.clone());
            }
            Some(PartnerDocument::Company(basico)) => add("partner_basico = $", basico.clone()),
            None => {}
        }
        if let Some(tipo) = &self.tipo {
            add("tipo = $", tipo.clone());
        }
        if let Some(uf) = &self.state {
            add(
                "partner_id IN (SELECT l.partner_id FROM partner_links l JOIN estabelecimentos e \
                 ON e.cnpj_basico = l.cnpj_basico WHERE e.uf = $)",
                uf.clone(),
            );
        }
        let clause = if clauses.is_empty() { String::new() } else { format!(" WHERE {}", clauses.join(" AND ")) };
        (clause, params)
    }
}

impl Store {
    /// A page of partners (ordered by folded name, then `partner_id`) and the exact total: by the
    /// search index when it can answer, else by SQL.
    pub fn search_partners(
        &self,
        filters: &PartnerFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<(u64, Vec<PartnerItem>), StoreError> {
        match self.search_partners_by_index(filters, page, per_page, locale) {
            Ok(Some(found)) => return Ok(found),
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "the search index failed: searching the partners by SQL"),
        }
        self.search_partners_by_sql(filters, page, per_page, locale)
    }

    /// [`Store::search_partners`] by the search index; `None` when it cannot answer (no index,
    /// a term beyond it, or a company's identity asked without the lookup file).
    pub fn search_partners_by_index(
        &self,
        filters: &PartnerFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<Option<(u64, Vec<PartnerItem>)>, StoreError> {
        let Some(index) = &self.search else { return Ok(None) };
        // The index keys the states of `UF_CODES` only.
        if filters.state.as_deref().is_some_and(|uf| !cnpj_index::UF_CODES.contains(&uf)) {
            return Ok(None);
        }
        let mut conditions = cnpj_index::PartnerConditions {
            name: filters.name.as_deref().map(fold),
            tipo: filters.tipo.clone(),
            uf: filters.state.clone(),
            ..Default::default()
        };
        match &filters.document {
            Some(PartnerDocument::Shown(digits)) => {
                conditions.shown = Some(digits.clone());
                // Only a person shows six digits.
                conditions.tipo.get_or_insert_with(|| "2".to_owned());
                if conditions.tipo.as_deref() != Some("2") {
                    conditions.only = Some(None);
                }
            }
            Some(PartnerDocument::Company(basico)) => {
                if self.lookup.is_none() {
                    return Ok(None);
                }
                let id = cnpj_model::partner::company_partner_id(basico);
                conditions.only = Some(self.identities(&[id], false)?.into_values().next().and_then(|i| i.ordinal));
            }
            None => {}
        }
        let offset = page.saturating_sub(1).saturating_mul(per_page);
        let Some((total, ids)) = index.partner_page(&conditions, offset, per_page)? else { return Ok(None) };
        let mut found = self.identities(&ids, false)?;
        let items = ids.iter().filter_map(|id| found.remove(id)).map(|i| self.partner_item(&i.row, locale)).collect();
        Ok(Some((total, items)))
    }

    /// [`Store::search_partners`] by SQL alone, within the search budget (past it,
    /// [`StoreError::OverBudget`]): the reference the index is compared with.
    pub fn search_partners_by_sql(
        &self,
        filters: &PartnerFilters,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<(u64, Vec<PartnerItem>), StoreError> {
        let deadline = std::time::Instant::now() + self.limits.search_budget;
        let (clause, params) = filters.sql(self.backend.dialect());
        let count = format!("SELECT CAST(count(*) AS VARCHAR) FROM partner_identities{clause}");
        let total: u64 = self
            .backend
            .rows_within("partner count", &count, &params, deadline)?
            .first()
            .map_or(0, |r| text(r, 0).parse().unwrap_or(0));
        let offset = page.saturating_sub(1).saturating_mul(per_page);
        if total <= offset {
            return Ok((total, Vec::new()));
        }
        let sql = format!(
            "SELECT {IDENTITY} FROM partner_identities{clause} ORDER BY nome_busca, partner_id \
             LIMIT {per_page} OFFSET {offset}"
        );
        let rows = self.backend.rows_within("partner search", &sql, &params, deadline)?;
        Ok((total, rows.iter().map(|r| self.partner_item(r, locale)).collect()))
    }

    fn partner_item(&self, r: &TextRow, locale: Locale) -> PartnerItem {
        let tipo = text(r, 2);
        PartnerItem {
            partner_id: text(r, 0),
            nome: text(r, 1),
            tipo_descricao: self.label(locale, "tipo_socio", &tipo),
            identity: identity_rule(&tipo, &text(r, 5)),
            tipo,
            documento: text(r, 3),
            pais_code: text(r, 4),
            companies: text(r, 6).parse().unwrap_or(0),
            first_entry: opt(r, 7),
        }
    }

    /// A partner by its id with a page of its companies (its links in company order), and the
    /// number of its links; `None` for an unknown id.
    pub fn partner(
        &self,
        partner_id: &str,
        page: u64,
        per_page: u64,
        locale: Locale,
    ) -> Result<Option<(u64, PartnerRecord)>, StoreError> {
        let Some(identity) = self.identities(&[partner_id.to_owned()], true)?.into_values().next() else {
            return Ok(None);
        };
        let row = identity.row;
        let partner = self.partner_item(&row, locale);
        let total = identity.links.len() as u64;
        let offset = usize::try_from(page.saturating_sub(1).saturating_mul(per_page)).unwrap_or(usize::MAX);
        let links: Vec<TextRow> =
            identity.links.into_iter().skip(offset).take(usize::try_from(per_page).unwrap_or(usize::MAX)).collect();
        let mut basicos: Vec<String> = links.iter().map(|l| text(l, 0)).collect();
        let own = text(&row, 5);
        if !own.is_empty() {
            basicos.push(own.clone());
        }
        let info = self.company_info(&basicos)?;
        let companies = links.iter().map(|l| self.partner_company(l, info.get(&text(l, 0)), locale)).collect();
        let company = info.get(&own).map(|c| OwnCompany { cnpj: c.cnpj.clone(), razao_social: c.razao_social.clone() });
        let events = self.partner_events(&partner, &text(&row, 1), locale)?;
        let record = PartnerRecord {
            identity_note: identity_note(partner.identity, locale),
            partner_id: partner.partner_id,
            nome: partner.nome,
            tipo: partner.tipo,
            tipo_descricao: partner.tipo_descricao,
            documento: partner.documento,
            pais_code: partner.pais_code,
            identity: partner.identity,
            companies_total: partner.companies,
            first_entry: partner.first_entry,
            company,
            companies,
            events,
        };
        Ok(Some((total, record)))
    }

    fn partner_company(&self, link: &TextRow, info: Option<&CompanyInfo>, locale: Locale) -> PartnerCompany {
        let qualificacao = text(link, 1);
        PartnerCompany {
            cnpj: info.map(|c| c.cnpj.clone()),
            cnpj_basico: text(link, 0),
            razao_social: info.map(|c| c.razao_social.clone()).unwrap_or_default(),
            qualificacao_descricao: self.label(locale, "qualificacoes", &qualificacao),
            qualificacao,
            data_entrada: opt(link, 2),
            situacao_cadastral: info.map(|c| c.situacao.clone()),
            situacao_cadastral_descricao: info.map(|c| self.label(locale, "situacao_cadastral", &c.situacao)),
            uf: info.map(|c| c.uf.clone()),
            municipio: info.map(|c| self.municipios.get(&c.municipio).map(|m| m.0.clone()).unwrap_or_default()),
        }
    }

    /// The head office of each company of `basicos` that has an establishment, by base.
    fn company_info(&self, basicos: &[String]) -> Result<HashMap<String, CompanyInfo>, StoreError> {
        let keys: Vec<Key<'_>> = basicos.iter().map(|b| Key::Basico(b)).collect();
        let found = self.find(&keys, false)?;
        Ok(basicos
            .iter()
            .zip(found)
            .filter_map(|(basico, found)| {
                let d = found?.detail;
                let info = CompanyInfo {
                    cnpj: text(&d, 0),
                    razao_social: text(&d, ESTABLISHMENT_COLUMNS),
                    situacao: text(&d, 2),
                    uf: text(&d, 10),
                    municipio: text(&d, 9),
                };
                Some((basico.clone(), info))
            })
            .collect())
    }

    /// A partner's `partner_entered` and `partner_left` events, newest first. The history records
    /// a partner as `{nome, documento, qualificacao}`, not by its id: an event is the partner's
    /// when its folded name is the identity's and its document the identity's (for a foreign
    /// partner, with no document, the name alone). The scan is narrowed to the rows that hold
    /// the identity's document, or (without one) its name as the identity spells it, so an event
    /// under another spelling of a foreign partner's name is not found.
    fn partner_events(&self, partner: &PartnerItem, nome: &str, locale: Locale) -> Result<Vec<Change>, StoreError> {
        let Some(table) = self.tables.table else { return Ok(Vec::new()) };
        let needle = if partner.documento.is_empty() {
            serde_json::to_string(nome).expect("a string serializes")
        } else {
            serde_json::to_string(&partner.documento).expect("a string serializes")
        };
        let sql = format!(
            "SELECT {} FROM {table} WHERE event IN ('partner_entered', 'partner_left') \
             AND strpos(coalesce(old, new), $1) > 0 ORDER BY month DESC, {}",
            crate::changes::COLUMNS,
            crate::changes::ORDER_AFTER_MONTH
        );
        let folded = fold(nome);
        let rows = self.backend.rows("partner events", &sql, &[needle])?;
        Ok(rows
            .into_iter()
            .map(|r| self.change(r, locale))
            .filter(|c| {
                let who = if c.old.is_null() { &c.new } else { &c.old };
                let field = |k: &str| who.get(k).and_then(|v| v.as_str()).unwrap_or_default();
                fold(field("nome")) == folded && field("documento") == partner.documento
            })
            .collect())
    }

    /// The bases of a partner's companies, in order, for the `partner_id` search filter.
    pub(crate) fn partner_companies(&self, partner_id: &str) -> Result<Vec<String>, StoreError> {
        let identity = self.identities(&[partner_id.to_owned()], true)?.into_values().next();
        let links = identity.map(|i| i.links).unwrap_or_default();
        Ok(links.iter().map(|l| text(l, 0)).collect::<BTreeSet<_>>().into_iter().collect())
    }

    /// The partners of a company with their ids, in the order its record lists them (entry
    /// date, unknown last, then name and document): `(partner_id, nome, documento)`. For the
    /// company's page to link each to the partner's.
    pub fn company_partners(&self, query: &CnpjQuery) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut partners = self.partners_of(query.basico())?.unwrap_or_default();
        // The record's order, and the id where two rows are alike in it.
        partners.sort_by(|(a_id, a), (b_id, b)| {
            let key = |r: &TextRow| (r[4].is_none(), r[4].clone(), r[0].clone(), r[3].clone());
            key(a).cmp(&key(b)).then_with(|| a_id.cmp(b_id))
        });
        Ok(partners.into_iter().map(|(id, p)| (id, text(&p, 0), text(&p, 3))).collect())
    }
}

/// `sql` with ` IN (…)` of `values` as parameters (none: no rows, without a query).
fn rows_in(store: &Store, context: &'static str, sql: &str, values: &[String]) -> Result<Vec<TextRow>, StoreError> {
    if values.is_empty() {
        return Ok(Vec::new());
    }
    store.backend.rows(context, &sql.replace("IN (?)", &format!("IN ({})", placeholders(0, values.len()))), values)
}
