//! The kinds of file in a month's dump, recognised by zip or member name (never by part number).

/// One kind of RFB file. Main tables come in numbered parts; lookups and Simples in one zip;
/// the optional tax-regime zips hold comma-separated files with a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    Empresas,
    Estabelecimentos,
    Socios,
    Simples,
    Cnaes,
    Motivos,
    Municipios,
    Naturezas,
    Paises,
    Qualificacoes,
    TaxRegime,
}

impl FileKind {
    pub const ALL: [FileKind; 11] = [
        FileKind::Empresas,
        FileKind::Estabelecimentos,
        FileKind::Socios,
        FileKind::Simples,
        FileKind::Cnaes,
        FileKind::Motivos,
        FileKind::Municipios,
        FileKind::Naturezas,
        FileKind::Paises,
        FileKind::Qualificacoes,
        FileKind::TaxRegime,
    ];

    /// Recognises a zip by its file name (`Estabelecimentos3.zip`, `Lucro Real.zip`) or, failing that,
    /// by the suffix of its member (`K3241.K03200Y3.D60314.ESTABELE`, `F.K03200$W.SIMPLES.CSV.D60314`).
    pub fn recognise(zip_name: &str, member_name: Option<&str>) -> Option<FileKind> {
        let stem = zip_name.rsplit('/').next().unwrap_or(zip_name);
        let stem = stem.strip_suffix(".zip").or_else(|| stem.strip_suffix(".ZIP")).unwrap_or(stem);
        let letters: String = stem.trim_end_matches(|c: char| c.is_ascii_digit()).to_lowercase();
        let by_zip = match letters.as_str() {
            "empresas" => Some(FileKind::Empresas),
            "estabelecimentos" => Some(FileKind::Estabelecimentos),
            "socios" => Some(FileKind::Socios),
            "simples" => Some(FileKind::Simples),
            "cnaes" => Some(FileKind::Cnaes),
            "motivos" => Some(FileKind::Motivos),
            "municipios" => Some(FileKind::Municipios),
            "naturezas" => Some(FileKind::Naturezas),
            "paises" => Some(FileKind::Paises),
            "qualificacoes" => Some(FileKind::Qualificacoes),
            "imunes e isentas" | "lucro arbitrado" | "lucro presumido" | "lucro real" => Some(FileKind::TaxRegime),
            _ => None,
        };
        by_zip.or_else(|| member_name.and_then(Self::by_member)).or_else(|| Self::by_member(stem))
    }

    fn by_member(name: &str) -> Option<FileKind> {
        let upper = name.to_ascii_uppercase();
        let suffixes = [
            (".EMPRECSV", FileKind::Empresas),
            (".ESTABELE", FileKind::Estabelecimentos),
            (".SOCIOCSV", FileKind::Socios),
            (".CNAECSV", FileKind::Cnaes),
            (".MOTICSV", FileKind::Motivos),
            (".MUNICCSV", FileKind::Municipios),
            (".NATJUCSV", FileKind::Naturezas),
            (".PAISCSV", FileKind::Paises),
            (".QUALSCSV", FileKind::Qualificacoes),
        ];
        suffixes
            .iter()
            .find(|(suffix, _)| upper.ends_with(suffix))
            .map(|&(_, kind)| kind)
            .or_else(|| upper.contains(".SIMPLES.CSV").then_some(FileKind::Simples))
    }

    /// Fields per record in the RFB layout (`None` for the headed tax-regime files).
    pub fn field_count(self) -> Option<usize> {
        match self {
            FileKind::Empresas | FileKind::Simples => Some(7),
            FileKind::Estabelecimentos => Some(30),
            FileKind::Socios => Some(11),
            FileKind::TaxRegime => None,
            _ => Some(2),
        }
    }

    /// Whether a month's dump is incomplete without this kind.
    pub fn required(self) -> bool {
        self != FileKind::TaxRegime
    }

    pub fn is_lookup(self) -> bool {
        matches!(
            self,
            FileKind::Cnaes
                | FileKind::Motivos
                | FileKind::Municipios
                | FileKind::Naturezas
                | FileKind::Paises
                | FileKind::Qualificacoes
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            FileKind::Empresas => "empresas",
            FileKind::Estabelecimentos => "estabelecimentos",
            FileKind::Socios => "socios",
            FileKind::Simples => "simples",
            FileKind::Cnaes => "cnaes",
            FileKind::Motivos => "motivos",
            FileKind::Municipios => "municipios",
            FileKind::Naturezas => "naturezas",
            FileKind::Paises => "paises",
            FileKind::Qualificacoes => "qualificacoes",
            FileKind::TaxRegime => "regime_tributario",
        }
    }
}

impl serde::Serialize for FileKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(zip: &str, member: Option<&str>, expected: Option<FileKind>) {
        assert_eq!(FileKind::recognise(zip, member), expected, "{zip} / {member:?}");
    }

    #[test]
    fn by_zip_name_whatever_the_part_number() {
        check("Empresas0.zip", None, Some(FileKind::Empresas));
        check("Estabelecimentos10.zip", None, Some(FileKind::Estabelecimentos));
        check("Estabelecimentos19.zip", None, Some(FileKind::Estabelecimentos));
        check("Socios3.zip", None, Some(FileKind::Socios));
        check("Simples.zip", None, Some(FileKind::Simples));
        check("Qualificacoes.zip", None, Some(FileKind::Qualificacoes));
        check("Lucro Presumido.zip", None, Some(FileKind::TaxRegime));
        check("Imunes e Isentas.zip", None, Some(FileKind::TaxRegime));
    }

    #[test]
    fn by_member_suffix_when_the_zip_name_says_nothing() {
        check("part-a.zip", Some("K3241.K03200Y7.D60314.ESTABELE"), Some(FileKind::Estabelecimentos));
        check("x.zip", Some("F.K03200$W.SIMPLES.CSV.D60314"), Some(FileKind::Simples));
        check("x.zip", Some("F.K03200$Z.D60314.QUALSCSV"), Some(FileKind::Qualificacoes));
        check("K3241.K03200Y0.D10710.EMPRECSV.zip", None, Some(FileKind::Empresas));
        check("F.K03200$W.SIMPLES.CSV.D10710.zip", None, Some(FileKind::Simples));
    }

    #[test]
    fn unknown_names() {
        check("README.zip", Some("readme.txt"), None);
        check("Empresas0.zip.part", None, None);
    }
}
