//! Company search: filters combined with AND, ordered by CNPJ, paginated.

use cnpj_index::{Condition, Flag};
use cnpj_model::filter::money_text;
use cnpj_model::{CnpjQuery, fold};

use crate::backend::Dialect;

/// Validated search filters; text filters are kept as given and folded here. A code filter is a
/// list of values, any of which matches (empty: not given); the lists and the filters combine
/// with AND.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchFilters {
    pub cnpj: Option<CnpjQuery>,
    /// 7-digit CNAEs, of the main activity.
    pub business_sector: Vec<String>,
    /// 4-digit RFB municipality codes.
    pub city_id: Vec<String>,
    /// City name (equality after folding); ignored when `city_id` is given.
    pub city: Option<String>,
    pub state: Vec<String>,
    /// 2-digit size codes.
    pub porte: Vec<String>,
    /// `YYYY-MM-DD`, inclusive.
    pub opening_from: Option<String>,
    pub opening_to: Option<String>,
    pub trading_name: Option<String>,
    pub neighborhood: Option<String>,
    /// Digits: a prefix of the CEP.
    pub zip_prefix: Option<String>,
    /// 4-digit legal nature codes.
    pub nature_code: Vec<String>,
    /// 2-digit registration status codes.
    pub situacao: Vec<String>,
    /// 7-digit CNAEs, of the main activity or any secondary one.
    pub any_sector: Vec<String>,
    /// The company's capital from, in cents, inclusive.
    pub capital_from: Option<u64>,
    /// The company's capital to, in cents, inclusive.
    pub capital_to: Option<u64>,
    /// An email served (true) or none (false).
    pub has_email: Option<bool>,
    /// A first or second phone number served (true) or neither (false).
    pub has_phone: Option<bool>,
    /// The company opted for the Simples Nacional (`S` now), or not.
    pub simples: Option<bool>,
    /// The company opted for the MEI (`S` now), or not.
    pub mei: Option<bool>,
    /// Head offices (true) or branches (false).
    pub head_office: Option<bool>,
    /// The establishments of the companies of this partner (contract §14; a `partner_id`).
    pub partner_id: Option<String>,
}

/// The largest capital DECIMAL(18, 2) holds, in cents.
const MAX_CAPITAL: u64 = 999_999_999_999_999_999;

/// The `matriz_filial` code of a head office and of a branch.
fn matriz_code(head_office: bool) -> &'static str {
    if head_office { "1" } else { "2" }
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
        let any = |table: &'static str, values: &[String]| Condition::AnyOf { table, values: values.to_vec() };
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
        out.extend(
            equal.into_iter().filter(|(_, values)| !values.is_empty()).map(|(table, values)| any(table, values)),
        );
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
        match (self.city_id.as_slice(), &self.city) {
            ([], None) => {}
            ([], Some(name)) => out.push(Condition::AnyOf { table: "municipio", values: city_codes(name) }),
            (ids, _) => out.push(any("municipio", ids)),
        }
        if !self.any_sector.is_empty() {
            out.push(Condition::Sector(self.any_sector.clone()));
        }
        if self.capital_from.is_some() || self.capital_to.is_some() {
            out.push(Condition::Capital { from: self.capital_from, to: self.capital_to });
        }
        let flags = [
            (Flag::Email, self.has_email),
            (Flag::Phone, self.has_phone),
            (Flag::Simples, self.simples),
            (Flag::Mei, self.mei),
        ];
        for (flag, value) in flags {
            if let Some(value) = value {
                out.push(Condition::Flag { flag, value });
            }
        }
        if let Some(head) = self.head_office {
            out.push(Condition::HeadOffice(head));
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
        match (self.city_id.as_slice(), &self.city) {
            ([], None) => {}
            ([], Some(name)) => {
                let codes = city_codes(name);
                if codes.is_empty() {
                    w.clauses.push("FALSE".into());
                } else {
                    let first = w.params.len();
                    w.clauses.push(format!("e.municipio IN ({})", crate::placeholders(first, codes.len())));
                    w.params.extend(codes);
                }
            }
            (ids, _) => w.any("e.municipio", ids),
        }
        self.company_facts_sql(&mut w, pg);
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
        w.any("e.cnae_fiscal", &self.business_sector);
        w.any("e.uf", &self.state);
        if !self.porte.is_empty() {
            let test = w.test("porte_empresa", &self.porte);
            w.clauses.push(company(pg, &test));
        }
        let date = if pg { "CAST($::text AS DATE)" } else { "CAST($ AS DATE)" };
        if let Some(v) = &self.opening_from {
            w.eq(&format!("e.data_inicio_atividade >= {date}"), v.clone());
        }
        if let Some(v) = &self.opening_to {
            w.eq(&format!("e.data_inicio_atividade <= {date}"), v.clone());
        }
        if !self.nature_code.is_empty() {
            let test = w.test("natureza_juridica", &self.nature_code);
            w.clauses.push(company(pg, &test));
        }
        w.any("e.situacao_cadastral", &self.situacao);
    }

    /// The secondary activities, the capital, the contacts, the tax options, the head office and
    /// a partner's companies.
    fn company_facts_sql(&self, w: &mut Where, pg: bool) {
        if let Some(id) = &self.partner_id {
            w.eq("e.cnpj_basico IN (SELECT cnpj_basico FROM partner_links WHERE partner_id = $)", id.clone());
        }
        if !self.any_sector.is_empty() {
            let main = w.test("e.cnae_fiscal", &self.any_sector);
            // The same parameters again, as a list literal.
            let first = w.params.len() - self.any_sector.len();
            let list: Vec<String> = (first + 1..=w.params.len())
                .map(|n| if pg { format!("${n}::text") } else { format!("CAST(${n} AS VARCHAR)") })
                .collect();
            let secondary = if pg {
                format!("e.cnaes_secundarios && ARRAY[{}]", list.join(", "))
            } else {
                format!("list_has_any(e.cnaes_secundarios, [{}])", list.join(", "))
            };
            w.clauses.push(format!("({main} OR {secondary})"));
        }
        let money = if pg { "CAST($::text AS NUMERIC(18, 2))" } else { "CAST($ AS DECIMAL(18, 2))" };
        // A bound past what DECIMAL(18, 2) holds does not cast: every capital is below it.
        match self.capital_from {
            Some(cents) if cents > MAX_CAPITAL => w.clauses.push("FALSE".into()),
            Some(cents) => w.eq(&company(pg, &format!("capital_social >= {money}")), money_text(cents)),
            None => {}
        }
        if let Some(cents) = self.capital_to {
            w.eq(&company(pg, &format!("capital_social <= {money}")), money_text(cents.min(MAX_CAPITAL)));
        }
        let yes_no = |value: bool, yes: &str, no: &str| if value { yes.to_owned() } else { no.to_owned() };
        if let Some(v) = self.has_email {
            w.clauses.push(yes_no(v, "e.email <> ''", "e.email = ''"));
        }
        if let Some(v) = self.has_phone {
            w.clauses.push(yes_no(
                v,
                "(e.telefone_1 <> '' OR e.telefone_2 <> '')",
                "(e.telefone_1 = '' AND e.telefone_2 = '')",
            ));
        }
        for (value, column) in [(self.simples, "opcao_simples"), (self.mei, "opcao_mei")] {
            if let Some(v) = value {
                let opted = format!(
                    "EXISTS (SELECT 1 FROM simples s WHERE s.cnpj_basico = e.cnpj_basico AND s.{column} = 'S')"
                );
                w.clauses.push(if v { opted } else { format!("NOT {opted}") });
            }
        }
        if let Some(head) = self.head_office {
            w.clauses.push(format!("e.matriz_filial = '{}'", matriz_code(head)));
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

    /// `column` equal to one of `values` (none: no clause).
    fn any(&mut self, column: &str, values: &[String]) {
        if !values.is_empty() {
            let test = self.test(column, values);
            self.clauses.push(test);
        }
    }

    /// The test that `column` is one of `values` (`= $n` for one, `IN (…)` for several), their
    /// parameters added.
    fn test(&mut self, column: &str, values: &[String]) -> String {
        let first = self.params.len();
        self.params.extend(values.iter().cloned());
        match values.len() {
            1 => format!("{column} = ${}", first + 1),
            n => format!("{column} IN ({})", crate::placeholders(first, n)),
        }
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
            state: vec!["SP".into()],
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

    #[test]
    fn capitals_past_the_decimal_are_clamped() {
        let f = SearchFilters { capital_from: Some(u64::MAX), capital_to: Some(u64::MAX), ..Default::default() };
        let (clause, params) = f.sql(Dialect::DuckDb, |_| Vec::new());
        assert!(clause.contains("WHERE FALSE AND"), "{clause}");
        assert_eq!(params, ["9999999999999999.99"]);
    }

    #[test]
    fn lists_and_the_new_filters_in_both_dialects() {
        let f = SearchFilters {
            state: vec!["RJ".into(), "SP".into()],
            porte: vec!["01".into(), "03".into()],
            any_sector: vec!["4751201".into(), "6201501".into()],
            capital_from: Some(100_050),
            has_phone: Some(false),
            mei: Some(true),
            head_office: Some(false),
            ..Default::default()
        };
        check(
            f.clone(),
            Dialect::DuckDb,
            (
                "FROM estabelecimentos e WHERE e.uf IN ($1, $2) AND e.cnpj_basico IN (SELECT cnpj_basico FROM \
                 empresas WHERE porte_empresa IN ($3, $4)) AND (e.cnae_fiscal IN ($5, $6) OR \
                 list_has_any(e.cnaes_secundarios, [CAST($5 AS VARCHAR), CAST($6 AS VARCHAR)])) AND \
                 e.cnpj_basico IN (SELECT cnpj_basico FROM empresas WHERE capital_social >= CAST($7 AS \
                 DECIMAL(18, 2))) AND (e.telefone_1 = '' AND e.telefone_2 = '') AND EXISTS (SELECT 1 FROM \
                 simples s WHERE s.cnpj_basico = e.cnpj_basico AND s.opcao_mei = 'S') AND e.matriz_filial = '2'",
                &["RJ", "SP", "01", "03", "4751201", "6201501", "1000.50"],
            ),
        );
        check(
            f,
            Dialect::Postgres,
            (
                "FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico WHERE e.uf IN \
                 ($1, $2) AND c.porte_empresa IN ($3, $4) AND (e.cnae_fiscal IN ($5, $6) OR \
                 e.cnaes_secundarios && ARRAY[$5::text, $6::text]) AND c.capital_social >= \
                 CAST($7::text AS NUMERIC(18, 2)) AND (e.telefone_1 = '' AND e.telefone_2 = '') AND EXISTS \
                 (SELECT 1 FROM simples s WHERE s.cnpj_basico = e.cnpj_basico AND s.opcao_mei = 'S') AND \
                 e.matriz_filial = '2'",
                &["RJ", "SP", "01", "03", "4751201", "6201501", "1000.50"],
            ),
        );
    }
}
