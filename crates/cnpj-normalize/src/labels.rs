//! Labels of every code the API returns, in pt-br, en and es (each code in all three).
//!
//! pt-br comes from the month's lookup tables (cleaned; `data/labels/pt-br/cnaes.tsv` corrects an
//! obvious typo of the RFB text); en and es come from the project's label files under
//! `data/labels/`, compiled in. Fixed domains (statuses, sizes, regimes, partner types,
//! age bands, head office/branch) have project files in all three locales. A month code without
//! an en/es label falls back to pt-br and is reported as untranslated. The project keeps a copy of
//! each RFB lookup table (`data/labels/rfb/`, and the municipalities of the IBGE mapping):
//! [`bundled`], which a month's tables are checked against and which stands in for the codes
//! they lack.

use std::collections::HashMap;

use cnpj_model::rows::{LabelRow, LookupRow};
use cnpj_model::{FileKind, Locale};

/// A month code that has no label of the project's in `locale`; it is served in pt-br.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Untranslated {
    pub table: &'static str,
    pub code: String,
    pub locale: Locale,
}

macro_rules! label_files {
    ($($locale:literal / $table:literal),* $(,)?) => {
        /// Every label file compiled in, as (locale, table, text).
        #[cfg(test)]
        fn all_files() -> Vec<(&'static str, &'static str, &'static str)> {
            vec![$(($locale, $table, include_str!(concat!("../../../data/labels/", $locale, "/", $table, ".tsv")))),*]
        }

        fn file(locale: &str, table: &str) -> Option<&'static str> {
            match (locale, table) {
                $(($locale, $table) => Some(include_str!(concat!("../../../data/labels/", $locale, "/", $table, ".tsv"))),)*
                _ => None,
            }
        }
    };
}

label_files!(
    "pt-br" / "situacao_cadastral",
    "en" / "situacao_cadastral",
    "es" / "situacao_cadastral",
    "pt-br" / "porte_empresa",
    "en" / "porte_empresa",
    "es" / "porte_empresa",
    "pt-br" / "regime_tributario",
    "en" / "regime_tributario",
    "es" / "regime_tributario",
    "pt-br" / "tipo_socio",
    "en" / "tipo_socio",
    "es" / "tipo_socio",
    "pt-br" / "faixa_etaria",
    "en" / "faixa_etaria",
    "es" / "faixa_etaria",
    "pt-br" / "matriz_filial",
    "en" / "matriz_filial",
    "es" / "matriz_filial",
    "pt-br" / "cnaes",
    "en" / "cnaes",
    "es" / "cnaes",
    "en" / "naturezas",
    "es" / "naturezas",
    "en" / "qualificacoes",
    "es" / "qualificacoes",
    "en" / "motivos",
    "es" / "motivos",
    "en" / "paises",
    "es" / "paises",
);

/// Tables whose codes have fixed meanings and project labels in every locale.
pub const FIXED_DOMAINS: [&str; 6] =
    ["situacao_cadastral", "porte_empresa", "regime_tributario", "tipo_socio", "faixa_etaria", "matriz_filial"];

/// The project's copies of the RFB's lookup tables, their text cleaned as a month's is.
const RFB_TABLES: [(FileKind, &str); 5] = [
    (FileKind::Cnaes, include_str!("../../../data/labels/rfb/cnaes.tsv")),
    (FileKind::Motivos, include_str!("../../../data/labels/rfb/motivos.tsv")),
    (FileKind::Naturezas, include_str!("../../../data/labels/rfb/naturezas.tsv")),
    (FileKind::Paises, include_str!("../../../data/labels/rfb/paises.tsv")),
    (FileKind::Qualificacoes, include_str!("../../../data/labels/rfb/qualificacoes.tsv")),
];

/// The `code<TAB>label` lines of a label file.
fn entries(text: &'static str) -> impl Iterator<Item = (&'static str, &'static str)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty() && *l != "code\tlabel")
        .map(|l| l.split_once('\t').unwrap_or((l, "")))
}

/// The project's labels of `table` in `locale`: code → label (empty when there is no file).
pub fn translations(table: &str, locale: Locale) -> Vec<(&'static str, &'static str)> {
    file(locale.code(), table).map_or_else(Vec::new, |text| entries(text).collect())
}

/// The project's copy of a lookup table, in code order: for the municipalities, the names of the
/// IBGE mapping and 9707 EXTERIOR. A month's table that lacks most of its codes is cut short,
/// and the codes it lacks are served with these rows.
pub fn bundled(kind: FileKind) -> Vec<LookupRow> {
    if kind == FileKind::Municipios {
        return crate::ibge::municipalities();
    }
    let text = RFB_TABLES.iter().find(|(k, _)| *k == kind).map_or("", |(_, text)| text);
    entries(text).map(|(code, label)| LookupRow { code: code.to_owned(), label: label.to_owned() }).collect()
}

/// Every label of the fixed domains, in all three locales.
pub fn fixed_domains() -> Vec<LabelRow> {
    let mut rows = Vec::new();
    for table in FIXED_DOMAINS {
        for locale in Locale::ALL {
            for (code, label) in translations(table, locale) {
                rows.push(LabelRow { table, code: code.to_owned(), locale, label: label.to_owned() });
            }
        }
    }
    rows
}

/// The labels of a month: fixed domains plus the month's lookup tables in three locales.
#[derive(Debug, Default)]
pub struct LabelSet {
    pub rows: Vec<LabelRow>,
    pub untranslated: Vec<Untranslated>,
}

impl LabelSet {
    /// `lookups` holds the month's lookup tables (municipalities excepted: names are not translated).
    /// A code met twice in a month's table keeps its first label.
    pub fn build(lookups: &[(FileKind, Vec<LookupRow>)]) -> LabelSet {
        let mut set = LabelSet { rows: fixed_domains(), untranslated: Vec::new() };
        for (kind, rows) in lookups {
            let table = kind.name();
            let fixes: HashMap<&str, &str> = translations(table, Locale::PtBr).into_iter().collect();
            let others: Vec<(Locale, HashMap<&str, &str>)> = [Locale::En, Locale::Es]
                .into_iter()
                .map(|l| (l, translations(table, l).into_iter().collect()))
                .collect();
            let mut seen = std::collections::HashSet::new();
            for row in rows.iter().filter(|r| seen.insert(r.code.as_str())) {
                let pt = fixes.get(row.code.as_str()).map_or_else(|| row.label.clone(), |fixed| (*fixed).to_owned());
                set.rows.push(LabelRow { table, code: row.code.clone(), locale: Locale::PtBr, label: pt.clone() });
                for (locale, map) in &others {
                    let label = match map.get(row.code.as_str()) {
                        Some(label) if !label.is_empty() => (*label).to_owned(),
                        _ => {
                            set.untranslated.push(Untranslated { table, code: row.code.clone(), locale: *locale });
                            pt.clone()
                        }
                    };
                    set.rows.push(LabelRow { table, code: row.code.clone(), locale: *locale, label });
                }
            }
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_domains_are_complete_in_every_locale() {
        for table in FIXED_DOMAINS {
            let codes = |l| translations(table, l).into_iter().map(|(c, _)| c).collect::<Vec<_>>();
            let pt = codes(Locale::PtBr);
            assert!(!pt.is_empty(), "{table}");
            for l in [Locale::En, Locale::Es] {
                assert_eq!(codes(l), pt, "{table} {l}");
            }
            for (code, label) in translations(table, Locale::PtBr) {
                assert!(!label.is_empty(), "{table} {code}");
            }
        }
    }

    /// The label files' format: comment lines, the header, then `code<TAB>label` lines with
    /// unique codes in ascending order and non-empty labels without stray white space.
    #[test]
    fn label_files_are_well_formed() {
        let rfb = RFB_TABLES.iter().map(|(kind, text)| ("rfb", kind.name(), *text));
        for (locale, table, text) in all_files().into_iter().chain(rfb) {
            let mut lines = text.lines().skip_while(|l| l.starts_with("# "));
            assert_eq!(lines.next(), Some("code\tlabel"), "{locale}/{table}: header");
            let mut previous: Option<&str> = None;
            for line in lines.filter(|l| !l.starts_with("# ")) {
                let (code, label) = line.split_once('\t').unwrap_or_else(|| panic!("{locale}/{table}: {line:?}"));
                assert!(!code.is_empty() && !label.is_empty() && !label.contains('\t'), "{locale}/{table}: {line:?}");
                assert_eq!(label, label.trim(), "{locale}/{table}: {line:?}");
                assert!(!label.contains("  "), "{locale}/{table}: {line:?}");
                if let Some(p) = previous {
                    assert!(p < code, "{locale}/{table}: {code} after {p}");
                }
                previous = Some(code);
            }
        }
    }

    /// The codes the project's copies stand in for are translated: a month's table cut short is
    /// served in every locale.
    #[test]
    fn the_copies_of_the_lookup_tables_are_translated() {
        for kind in FileKind::ALL.into_iter().filter(|k| k.is_lookup() && *k != FileKind::Municipios) {
            let rows = bundled(kind);
            assert!(rows.len() > 50, "{kind:?}: {} rows", rows.len());
            let set = LabelSet::build(&[(kind, rows)]);
            assert!(set.untranslated.is_empty(), "{kind:?}: {:?}", set.untranslated);
        }
        let municipalities = bundled(FileKind::Municipios);
        assert_eq!(municipalities.len(), 5572);
        assert!(municipalities.contains(&LookupRow { code: "9707".into(), label: "EXTERIOR".into() }));
        assert!(municipalities.windows(2).all(|w| w[0].code < w[1].code));
    }

    #[test]
    fn spec_labels_for_statuses_and_sizes() {
        let pt = |t| translations(t, Locale::PtBr).into_iter().collect::<HashMap<_, _>>();
        assert_eq!(pt("situacao_cadastral")["02"], "Ativa");
        assert_eq!(pt("situacao_cadastral")["08"], "Baixada");
        assert_eq!(pt("porte_empresa")["01"], "Microempresa (ME)");
        assert_eq!(pt("porte_empresa")["00"], "Não informado");
    }

    #[test]
    fn a_month_code_without_translation_falls_back_and_is_reported() {
        let month = vec![(
            FileKind::Motivos,
            vec![
                LookupRow { code: "00".into(), label: "SEM MOTIVO".into() },
                LookupRow { code: "Z9".into(), label: "NOVO MOTIVO".into() },
                LookupRow { code: "Z9".into(), label: "REPETIDO".into() },
            ],
        )];
        let set = LabelSet::build(&month);
        let typo = LabelSet::build(&[(
            FileKind::Cnaes,
            vec![LookupRow { code: "8888888".into(), label: "Atividade Econônica não informada".into() }],
        )]);
        let pt = typo.rows.iter().find(|r| r.code == "8888888" && r.locale == Locale::PtBr).unwrap();
        assert_eq!(pt.label, "Atividade Econômica não informada", "the typo is corrected");
        let z9: Vec<_> = set.rows.iter().filter(|r| r.code == "Z9").map(|r| (r.locale, r.label.as_str())).collect();
        assert_eq!(z9, vec![(Locale::PtBr, "NOVO MOTIVO"), (Locale::En, "NOVO MOTIVO"), (Locale::Es, "NOVO MOTIVO")]);
        assert!(set.untranslated.contains(&Untranslated { table: "motivos", code: "Z9".into(), locale: Locale::En }));
        // A translated code is not reported: the fixed domains are translated in full.
        let fixed = LabelSet::build(&[(FileKind::Motivos, Vec::new())]);
        assert!(fixed.untranslated.is_empty());
        assert!(
            fixed.rows.iter().any(|r| r.table == "situacao_cadastral" && r.locale == Locale::Es && r.label == "Activa")
        );
    }
}
