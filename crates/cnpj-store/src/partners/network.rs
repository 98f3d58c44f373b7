//! A company's network (contract §14): companies and partners walked breadth-first from one
//! company. An edge `partner_of` (a partner to a company) is one step; `is_company` joins a
//! legal-entity partner to its company when the registry has it, at no step, so the walk goes on
//! through it. A node's `level` is the steps from the root; the walk keeps the nodes of levels up
//! to `depth`, each level's new nodes in byte order of their ids (a company's is its base, a
//! partner's its `partner_id`), and stops at `max_nodes` (then `truncated`). The edges are every
//! link between two kept nodes, read once the nodes are known. Every read is by key
//! (`identities.rs`): point lookups on a DuckDB file with its lookup file.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cnpj_model::partner::company_partner_id;
use cnpj_model::{CnpjQuery, Locale};
use serde::Serialize;

use super::CompanyInfo;
use crate::{Store, StoreError, text};

/// How far a walk goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkOptions {
    /// 1 to 3 steps.
    pub depth: u8,
    /// 1 to 500 nodes.
    pub max_nodes: usize,
    /// Companies whose head office is not active (`02`) are left out (the root never is).
    pub active_only: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Network {
    /// The root company's base.
    pub root: String,
    pub depth: u8,
    pub max_nodes: usize,
    pub active_only: bool,
    pub truncated: bool,
    pub nodes: Vec<NetworkNode>,
    pub edges: Vec<NetworkEdge>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetworkNode {
    pub id: String,
    #[serde(flatten)]
    pub detail: NodeDetail,
    pub label: String,
    pub level: u8,
}

/// What a node is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NodeDetail {
    Company {
        /// The head office's CNPJ, situation and state (`None`: no establishment this month).
        cnpj: Option<String>,
        situacao_cadastral: Option<String>,
        uf: Option<String>,
    },
    Partner {
        tipo: String,
        documento: String,
        identity: &'static str,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct NetworkEdge {
    pub from: String,
    pub to: String,
    /// `partner_of` or `is_company`.
    pub kind: &'static str,
    pub qualificacao: Option<String>,
    pub qualificacao_descricao: Option<String>,
    pub data_entrada: Option<String>,
}

/// A walk in progress: the kept nodes by id, in order.
struct Walk<'s> {
    store: &'s Store,
    options: NetworkOptions,
    order: Vec<(String, u8)>,
    levels: HashMap<String, u8>,
    companies: HashMap<String, Option<CompanyInfo>>,
    /// Each partner reached, with the company it is (a legal entity's base, or empty).
    partners: HashMap<String, String>,
    truncated: bool,
}

impl Walk<'_> {
    fn is_company(id: &str) -> bool {
        !id.starts_with('p')
    }

    /// Adds the new nodes of `level` (ids not kept yet) in byte order, up to `max_nodes`.
    fn keep(&mut self, level: u8, new: BTreeSet<String>) -> Vec<String> {
        let mut kept = Vec::new();
        for id in new {
            if self.levels.contains_key(&id) {
                continue;
            }
            if self.order.len() >= self.options.max_nodes {
                self.truncated = true;
                break;
            }
            self.levels.insert(id.clone(), level);
            self.order.push((id.clone(), level));
            kept.push(id);
        }
        kept
    }

    /// Reads what the walk needs of new companies; those left out (`active_only`) are dropped.
    fn admit_companies(&mut self, basicos: BTreeSet<String>) -> Result<BTreeSet<String>, StoreError> {
        let asked: Vec<String> = basicos.into_iter().filter(|b| !self.companies.contains_key(b)).collect();
        let mut info = self.store.company_info(&asked)?;
        let mut admitted = BTreeSet::new();
        for basico in asked {
            let found = info.remove(&basico);
            let active = found.as_ref().is_some_and(|c| c.situacao == "02");
            if !self.options.active_only || active {
                admitted.insert(basico.clone());
            }
            self.companies.insert(basico, found);
        }
        Ok(admitted)
    }

    /// The nodes joined to `ids` at no step: a company's identity as a partner (when it is a
    /// partner of any company) and a legal-entity partner's company (when the registry has it).
    fn joins(&mut self, ids: &[String]) -> Result<BTreeSet<String>, StoreError> {
        let as_partners: HashMap<String, &String> =
            ids.iter().filter(|id| Self::is_company(id)).map(|b| (company_partner_id(b), b)).collect();
        let asked: Vec<String> = as_partners.keys().cloned().collect();
        let mut joined = BTreeSet::new();
        for partner in self.store.identities(&asked, false)?.into_keys() {
            self.partners.insert(partner.clone(), as_partners[&partner].clone());
            joined.insert(partner);
        }
        let their_companies: BTreeSet<String> =
            ids.iter().filter_map(|id| self.partners.get(id)).filter(|b| !b.is_empty()).cloned().collect();
        let admitted = self.admit_companies(their_companies)?;
        joined.extend(admitted.into_iter().filter(|b| matches!(self.companies.get(b), Some(Some(_)))));
        Ok(joined)
    }

    /// The nodes one step from `ids`: the partners of its companies, the companies of its partners.
    fn step(&mut self, ids: &[String]) -> Result<BTreeSet<String>, StoreError> {
        let (companies, partners): (Vec<String>, Vec<String>) =
            ids.iter().cloned().partition(|id| Self::is_company(id));
        let mut next = BTreeSet::new();
        for row in self.store.partner_rows(&companies)? {
            self.partners.entry(row.partner_id.clone()).or_insert(row.partner_basico);
            next.insert(row.partner_id);
        }
        let identities = self.store.identities(&partners, true)?;
        let reached = identities.values().flat_map(|i| i.links.iter().map(|l| text(l, 0))).collect();
        next.extend(self.admit_companies(reached)?);
        next.retain(|id| !self.levels.contains_key(id));
        Ok(next)
    }

    /// Keeps `new` at `level` and what joins them; the ids kept.
    fn keep_with_joins(&mut self, level: u8, new: BTreeSet<String>) -> Result<Vec<String>, StoreError> {
        let mut kept = self.keep(level, new);
        let joined = self.joins(&kept)?;
        kept.extend(self.keep(level, joined));
        Ok(kept)
    }
}

impl Store {
    /// The network of the company of `query` (its base: the walk is of companies); `None` when
    /// the registry has no establishment of it.
    pub fn network(
        &self,
        query: &CnpjQuery,
        options: NetworkOptions,
        locale: Locale,
    ) -> Result<Option<Network>, StoreError> {
        let root = query.basico().to_owned();
        let mut walk = Walk {
            store: self,
            options,
            order: Vec::new(),
            levels: HashMap::new(),
            companies: HashMap::new(),
            partners: HashMap::new(),
            truncated: false,
        };
        let info = self.company_info(std::slice::from_ref(&root))?;
        if info.is_empty() {
            return Ok(None);
        }
        walk.companies.extend(info.into_iter().map(|(b, c)| (b, Some(c))));
        let mut frontier = walk.keep_with_joins(0, BTreeSet::from([root.clone()]))?;
        for level in 1..=options.depth {
            if frontier.is_empty() || walk.truncated {
                break;
            }
            let next = walk.step(&frontier)?;
            frontier = walk.keep_with_joins(level, next)?;
        }
        let edges = self.network_edges(&walk, locale)?;
        let nodes = self.network_nodes(&walk)?;
        Ok(Some(Network {
            root,
            depth: options.depth,
            max_nodes: options.max_nodes,
            active_only: options.active_only,
            truncated: walk.truncated,
            nodes,
            edges,
        }))
    }

    /// Every link between two kept nodes: each kept company's partner rows whose partner is
    /// kept, and each kept legal-entity partner's join to its kept company.
    fn network_edges(&self, walk: &Walk<'_>, locale: Locale) -> Result<Vec<NetworkEdge>, StoreError> {
        let companies: Vec<String> =
            walk.order.iter().map(|(id, _)| id).filter(|id| Walk::is_company(id)).cloned().collect();
        let mut edges = BTreeSet::new();
        for row in self.partner_rows(&companies)? {
            if walk.levels.contains_key(&row.partner_id) {
                edges.insert(NetworkEdge {
                    from: row.partner_id,
                    to: row.basico,
                    kind: "partner_of",
                    qualificacao_descricao: Some(self.label(locale, "qualificacoes", &row.qualificacao)),
                    qualificacao: Some(row.qualificacao),
                    data_entrada: row.data_entrada,
                });
            }
        }
        for (partner, basico) in &walk.partners {
            if !basico.is_empty() && walk.levels.contains_key(partner) && walk.levels.contains_key(basico) {
                edges.insert(NetworkEdge {
                    from: partner.clone(),
                    to: basico.clone(),
                    kind: "is_company",
                    qualificacao: None,
                    qualificacao_descricao: None,
                    data_entrada: None,
                });
            }
        }
        Ok(edges.into_iter().collect())
    }

    /// The kept nodes in walk order: companies from their head office, partners from their
    /// identity.
    fn network_nodes(&self, walk: &Walk<'_>) -> Result<Vec<NetworkNode>, StoreError> {
        let partners: Vec<String> =
            walk.order.iter().map(|(id, _)| id).filter(|id| !Walk::is_company(id)).cloned().collect();
        let identities: BTreeMap<String, _> =
            self.identities(&partners, false)?.into_iter().map(|(id, i)| (id, i.row)).collect();
        Ok(walk
            .order
            .iter()
            .map(|(id, level)| {
                let (label, detail) = if Walk::is_company(id) {
                    let info = walk.companies.get(id).and_then(Option::as_ref);
                    let detail = NodeDetail::Company {
                        cnpj: info.map(|c| c.cnpj.clone()),
                        situacao_cadastral: info.map(|c| c.situacao.clone()),
                        uf: info.map(|c| c.uf.clone()),
                    };
                    (info.map_or_else(|| id.clone(), |c| c.razao_social.clone()), detail)
                } else {
                    let row = identities.get(id).cloned().unwrap_or_default();
                    let tipo = text(&row, 2);
                    let detail = NodeDetail::Partner {
                        identity: cnpj_model::partner::identity_rule(&tipo, &text(&row, 5)),
                        tipo,
                        documento: text(&row, 3),
                    };
                    (text(&row, 1), detail)
                };
                NetworkNode { id: id.clone(), detail, label, level: *level }
            })
            .collect())
    }
}
