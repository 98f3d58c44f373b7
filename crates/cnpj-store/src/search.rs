//! Company search: filters combined with AND, ordered by CNPJ, paginated.

use cnpj_index::Condition;
use cnpj_model::{CnpjQuery, fold};

use crate::backend::Dialect;

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

/// `term` with LIKE's own characters escaped (`\` is Postgres' default escape).
pub(crate) fn like_escape(term: &str) -> String {
    let mut out = String::with_capacity(term.len());
    for c in term.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl SearchFilters {
    /// The filters as conditions on the search index (the same semantics as [`SearchFilters::sql`]);
    /// `city_codes` resolves a city name to its codes.
    pub(crate) fn conditions(&self, city_codes: impl Fn(&str) -> Vec<String>) -> Vec<Condition> {
        let mut out = Vec::new();
        let any = |table: &'static str, value: &String| Condition::AnyOf { table, values: vec![value.clone()] };
        match &self.cnpj {
            Some(CnpjQuery::Full(c)) => out.push(Condition::Cnpj(c.as_str().to_owned())),
            Some(q @ CnpjQuery::Basico(_)) => out.push(Condition::Cnpj(q.basico().to_owned())),
            None => {}
        }
        let equal = [
            ("cnae", &self.business_sector),
            ("uf", &self.state),
            ("porte", &self.porte),
            ("natureza", &self.nature_code),
            ("situacao", &self.situacao),
        ];
        out.extend(equal.into_iter().filter_map(|(table, value)| value.as_ref().map(|v| any(table, v))));
        if self.opening_from.is_some() || self.opening_to.is_some() {
            out.push(Condition::Opening { from: self.opening_from.clone(), to: self.opening_to.clone() });
        }
        if let Some(prefix) = self.zip_prefix.as_ref().filter(|p| !p.is_empty()) {
            out.push(Condition::ZipPrefix(prefix.clone()));
        }
        if let Some(term) = &self.trading_name {
            out.push(Condition::Term { table: "nome", folded: fold(term) });
        }
        if let Some(term) = &self.neighborhood {
            out.push(Condition::Term { table: "bairro", folded: fold(term) });
        }
        match (&self.city_id, &self.city) {
            (Some(id), _) => out.push(any("municipio", id)),
            (None, Some(name)) => out.push(Condition::AnyOf { table: "municipio", values: city_codes(name) }),
            (None, None) => {}
        }
        out
    }

    /// The FROM and WHERE clauses (with `$n` placeholders) over establishments `e`, and their
    /// parameters, in `dialect`; `city_codes` resolves a city name to its codes. The dialects
    /// differ in form only. DuckDB scans: text filters with `contains`, company filters as a
    /// semi-join on the companies that match (joining every company costs a hash table of the
    /// whole table per search, 20× the scan). Postgres joins the company, and matches
    /// `LIKE '%term%'` that its trigram indexes serve.
    pub(crate) fn sql(&self, dialect: Dialect, city_codes: impl Fn(&str) -> Vec<String>) -> (String, Vec<String>) {
        let pg = dialect == Dialect::Postgres;
        let mut w = Where::default();
        self.codes_and_dates_sql(&mut w, pg);
        self.text_sql(&mut w, pg);
        match (&self.city_id, &self.city) {
            (Some(id), _) => w.eq("e.municipio = $", id.clone()),
            (None, Some(name)) => {
                let codes = city_codes(name);
                if codes.is_empty() {
                    w.clauses.push("FALSE".into());
                } else {
                    let first = w.params.len();
                    w.clauses.push(format!("e.municipio IN ({})", crate::placeholders(first, codes.len())));
                    w.params.extend(codes);
                }
            }
            (None, None) => {}
        }
        let from = if pg {
            "FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico"
        } else {
            "FROM estabelecimentos e"
        };
        let clause = if w.clauses.is_empty() { String::new() } else { format!(" WHERE {}", w.clauses.join(" AND ")) };
        (format!("{from}{clause}"), w.params)
    }

    /// The CNPJ, the codes and the opening dates.
    fn codes_and_dates_sql(&self, w: &mut Where, pg: bool) {
        match &self.cnpj {
            Some(CnpjQuery::Full(c)) => w.eq("e.cnpj = $", c.as_str().to_owned()),
            Some(q @ CnpjQuery::Basico(_)) => w.eq("e.cnpj_basico = $", q.basico().to_owned()),
            None => {}
        }
        if let Some(v) = &self.business_sector {
            w.eq("e.cnae_fiscal = $", v.clone());
        }
        if let Some(v) = &self.state {
            w.eq("e.uf = $", v.clone());
        }
        if let Some(v) = &self.porte {
            w.eq(&company(pg, "porte_empresa = $"), v.clone());
        }
        let date = if pg { "CAST($::text AS DATE)" } else { "CAST($ AS DATE)" };
        if let Some(v) = &self.opening_from {
            w.eq(&format!("e.data_inicio_atividade >= {date}"), v.clone());
        }
        if let Some(v) = &self.opening_to {
            w.eq(&format!("e.data_inicio_atividade <= {date}"), v.clone());
        }
        if let Some(v) = &self.nature_code {
            w.eq(&company(pg, "natureza_juridica = $"), v.clone());
        }
        if let Some(v) = &self.situacao {
            w.eq("e.situacao_cadastral = $", v.clone());
        }
    }

    /// The CEP prefix and the words of the neighbourhood and of the names.
    fn text_sql(&self, w: &mut Where, pg: bool) {
        if let Some(v) = &self.zip_prefix {
            if pg {
                w.eq("e.cep LIKE $", format!("{}%", like_escape(v)));
            } else {
                w.eq("starts_with(e.cep, $)", v.clone());
            }
        }
        if let Some(v) = &self.neighborhood {
            if pg {
                w.eq("e.bairro_fold LIKE $", format!("%{}%", like_escape(&fold(v))));
            } else {
                w.eq("contains(e.bairro_fold, $)", fold(v));
            }
        }
        if let Some(v) = &self.trading_name {
            if pg {
                // Each side of the OR on its own trigram index; cnpj is unique, so the union is exact.
                w.eq(
                    "e.cnpj IN (SELECT cnpj FROM estabelecimentos WHERE nome_fantasia_fold LIKE $ \
                     UNION SELECT x.cnpj FROM empresas y JOIN estabelecimentos x ON x.cnpj_basico = y.cnpj_basico \
                     WHERE y.razao_social_fold LIKE $)",
                    format!("%{}%", like_escape(&fold(v))),
                );
            } else {
                w.eq(
                    &format!(
                        "(contains(e.nome_fantasia_fold, $) OR {})",
                        company(pg, "contains(razao_social_fold, $)")
                    ),
                    fold(v),
                );
            }
        }
    }
}

/// The WHERE clauses of a search and their parameters, a filter at a time.
#[derive(Default)]
struct Where {
    clauses: Vec<String>,
    params: Vec<String>,
}

impl Where {
    /// `clause` with `$` standing for the next parameter, `value`.
    fn eq(&mut self, clause: &str, value: String) {
        self.params.push(value);
        self.clauses.push(clause.replace('$', &format!("${}", self.params.len())));
    }
}

/// A condition on the establishment's company: on the joined company `c` (Postgres), else a
/// semi-join on the companies that meet it.
fn company(pg: bool, condition: &str) -> String {
    if pg {
        format!("c.{condition}")
    } else {
        format!("e.cnpj_basico IN (SELECT cnpj_basico FROM empresas WHERE {condition})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(filters: SearchFilters, dialect: Dialect, expected: (&str, &[&str])) {
        let (clause, params) = filters.sql(dialect, |_| vec!["7107".into(), "6001".into()]);
        assert_eq!((clause.as_str(), params.iter().map(String::as_str).collect::<Vec<_>>().as_slice()), expected);
    }

    #[test]
    fn placeholders_number_every_parameter_once() {
        let f = SearchFilters {
            state: Some("SP".into()),
            trading_name: Some("Açaí 100%".into()),
            city: Some("São Paulo".into()),
            ..Default::default()
        };
        check(
            f.clone(),
            Dialect::DuckDb,
            (
                "FROM estabelecimentos e WHERE e.uf = $1 AND (contains(e.nome_fantasia_fold, $2) OR \
                 e.cnpj_basico IN (SELECT cnpj_basico FROM empresas WHERE contains(razao_social_fold, $2))) \
                 AND e.municipio IN ($3, $4)",
                &["SP", "acai 100%", "7107", "6001"],
            ),
        );
        let (clause, params) = f.sql(Dialect::Postgres, |_| vec!["7107".into()]);
        assert!(clause.contains("nome_fantasia_fold LIKE $2") && clause.contains("razao_social_fold LIKE $2"));
        assert!(clause.ends_with("e.municipio IN ($3)"), "{clause}");
        assert_eq!(params, ["SP", "%acai 100\\%%", "7107"]);
    }

    #[test]
    fn postgres_prefix_and_dates() {
        let f = SearchFilters {
            zip_prefix: Some("0131".into()),
            opening_from: Some("2020-01-01".into()),
            ..Default::default()
        };
        check(
            f,
            Dialect::Postgres,
            (
                "FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico \
                 WHERE e.data_inicio_atividade >= CAST($1::text AS DATE) AND e.cep LIKE $2",
                &["2020-01-01", "0131%"],
            ),
        );
        let none = SearchFilters { city: Some("Nowhere".into()), ..Default::default() };
        let (clause, params) = none.sql(Dialect::DuckDb, |_| Vec::new());
        assert_eq!((clause.as_str(), params.len()), ("FROM estabelecimentos e WHERE FALSE", 0));
    }
}
