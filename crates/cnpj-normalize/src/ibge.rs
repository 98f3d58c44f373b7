//! RFB municipality code → IBGE code and state, from the project's copy of the Tesouro Nacional
//! TABMUN mapping (`data/municipios-rfb-ibge.csv`, compiled in).

use std::collections::HashMap;
use std::sync::LazyLock;

use cnpj_model::rows::{LookupRow, MunicipioRow};

/// The mapping's rows: RFB code, IBGE code, name, state.
fn rows() -> impl Iterator<Item = [&'static str; 4]> {
    include_str!("../../../data/municipios-rfb-ibge.csv").lines().skip(1).filter_map(|line| {
        let mut f = line.split(',');
        Some([f.next()?, f.next()?, f.next()?, f.next()?])
    })
}

static MAP: LazyLock<HashMap<&'static str, (&'static str, &'static str)>> =
    LazyLock::new(|| rows().map(|[code, ibge, _, uf]| (code, (ibge, uf))).collect());

/// The municipalities the project knows, by RFB code: the mapping's, and 9707 EXTERIOR.
pub(crate) fn municipalities() -> Vec<LookupRow> {
    let mut out: Vec<LookupRow> =
        rows().map(|[code, _, name, _]| LookupRow { code: code.to_owned(), label: name.to_owned() }).collect();
    out.push(LookupRow { code: "9707".into(), label: "EXTERIOR".into() });
    out.sort_by(|a, b| a.code.cmp(&b.code));
    out
}

/// A municipality of the month's table, with the state and IBGE code the mapping knows
/// (`EX` and no IBGE code for 9707 EXTERIOR; empty state and no code for an unmapped code).
pub fn municipio(row: &LookupRow) -> MunicipioRow {
    let (ibge, uf) = MAP.get(row.code.as_str()).copied().unwrap_or(("", ""));
    let uf = if row.code == "9707" { "EX" } else { uf };
    MunicipioRow {
        code: row.code.clone(),
        name: row.label.clone(),
        uf: uf.to_owned(),
        ibge: (!ibge.is_empty()).then(|| ibge.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(code: &str, expected: (&str, Option<&str>)) {
        let m = municipio(&LookupRow { code: code.into(), label: "X".into() });
        assert_eq!((m.uf.as_str(), m.ibge.as_deref()), expected, "{code}");
    }

    #[test]
    fn known_and_unknown_codes() {
        check("7107", ("SP", Some("3550308")));
        check("9701", ("DF", Some("5300108")));
        check("1182", ("MT", Some("5101837")));
        check("9707", ("EX", None));
        check("0000", ("", None));
    }
}
