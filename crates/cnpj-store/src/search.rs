//! Company search (contract §5): filters combined with AND, ordered by CNPJ, paginated.

use cnpj_model::{CnpjQuery, fold};
use duckdb::types::Value;

/// Validated search filters; text filters are kept as given and folded here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchFilters {
    pub cnpj: Option<CnpjQuery>,
    /// 7-digit CNAE.
    pub business_sector: Option<String>,
    /// 4-digit RFB municipality code.
    pub city_id: Option<String>,
    /// City name (equality after folding); ignored when `city_id` is given.
    pub city: Option<String>,
    pub state: Option<String>,
    /// 2-digit size code.
    pub porte: Option<String>,
    /// `YYYY-MM-DD`, inclusive.
    pub opening_from: Option<String>,
    pub opening_to: Option<String>,
    pub trading_name: Option<String>,
    pub neighborhood: Option<String>,
    /// Digits: a prefix of the CEP.
    pub zip_prefix: Option<String>,
    /// 4-digit legal nature code.
    pub nature_code: Option<String>,
    /// 2-digit registration status code.
    pub situacao: Option<String>,
}

impl SearchFilters {
    /// The WHERE clause and its parameters; `city_codes` resolves a city name to its codes.
    pub(crate) fn sql(&self, city_codes: impl Fn(&str) -> Vec<String>) -> (String, Vec<Value>) {
        let mut clauses: Vec<String> = Vec::new();
        let mut params: Vec<Value> = Vec::new();
        let mut eq = |clause: &str, value: &str| {
            clauses.push(clause.to_owned());
            params.push(Value::Text(value.to_owned()));
        };
        match &self.cnpj {
            Some(CnpjQuery::Full(c)) => eq("e.cnpj = ?", c.as_str()),
            Some(q @ CnpjQuery::Basico(_)) => eq("e.cnpj_basico = ?", q.basico()),
            None => {}
        }
        if let Some(v) = &self.business_sector {
            eq("e.cnae_fiscal = ?", v);
        }
        if let Some(v) = &self.state {
            eq("e.uf = ?", v);
        }
        if let Some(v) = &self.porte {
            eq("c.porte_empresa = ?", v);
        }
        if let Some(v) = &self.opening_from {
            eq("e.data_inicio_atividade >= CAST(? AS DATE)", v);
        }
        if let Some(v) = &self.opening_to {
            eq("e.data_inicio_atividade <= CAST(? AS DATE)", v);
        }
        if let Some(v) = &self.nature_code {
            eq("c.natureza_juridica = ?", v);
        }
        if let Some(v) = &self.situacao {
            eq("e.situacao_cadastral = ?", v);
        }
        if let Some(v) = &self.zip_prefix {
            eq("starts_with(e.cep, ?)", v);
        }
        if let Some(v) = &self.neighborhood {
            eq("contains(e.bairro_fold, ?)", &fold(v));
        }
        if let Some(v) = &self.trading_name {
            let folded = fold(v);
            clauses.push("(contains(e.nome_fantasia_fold, ?) OR contains(c.razao_social_fold, ?))".into());
            params.push(Value::Text(folded.clone()));
            params.push(Value::Text(folded));
        }
        match (&self.city_id, &self.city) {
            (Some(id), _) => {
                clauses.push("e.municipio = ?".into());
                params.push(Value::Text(id.clone()));
            }
            (None, Some(name)) => {
                let codes = city_codes(name);
                if codes.is_empty() {
                    clauses.push("FALSE".into());
                } else {
                    clauses.push(format!("e.municipio IN ({})", vec!["?"; codes.len()].join(", ")));
                    params.extend(codes.into_iter().map(Value::Text));
                }
            }
            (None, None) => {}
        }
        let clause = if clauses.is_empty() { String::new() } else { format!(" WHERE {}", clauses.join(" AND ")) };
        (clause, params)
    }
}
