//! Normalized rows: what `cnpj-normalize` produces and `cnpj-load` writes. Codes are padded,
//! text is cleaned and masked, dates are days since 1970-01-01. Rows are reused between records,
//! so every field is overwritten by each normalization.

/// Empresas: one company (`cnpj_basico`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmpresaRow {
    pub cnpj_basico: String,
    pub razao_social: String,
    /// `razao_social` folded for search (NFKD, marks removed, lower case).
    pub razao_social_fold: String,
    pub natureza_juridica: String,
    pub qualificacao_responsavel: String,
    /// Exact decimal with a point and two places, e.g. `1061004829.23`.
    pub capital_social: Option<String>,
    pub porte_empresa: String,
    pub ente_federativo_responsavel: String,
}

/// Estabelecimentos: one establishment (14-character CNPJ).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EstabelecimentoRow {
    pub cnpj: String,
    pub cnpj_basico: String,
    pub matriz_filial: String,
    pub nome_fantasia: String,
    pub nome_fantasia_fold: String,
    pub situacao_cadastral: String,
    pub data_situacao_cadastral: Option<i32>,
    pub motivo_situacao_cadastral: String,
    pub nome_cidade_exterior: String,
    pub pais: String,
    pub data_inicio_atividade: Option<i32>,
    pub cnae_fiscal: String,
    /// Secondary CNAEs, 7 digits each, comma-separated, repeats dropped.
    pub cnaes_secundarios: String,
    /// `tipo_logradouro` + " " + `logradouro`.
    pub logradouro: String,
    pub numero: String,
    pub complemento: String,
    pub bairro: String,
    pub bairro_fold: String,
    pub cep: String,
    pub uf: String,
    pub municipio: String,
    pub ddd_1: String,
    pub telefone_1: String,
    pub ddd_2: String,
    pub telefone_2: String,
    pub ddd_fax: String,
    pub fax: String,
    pub email: String,
    pub situacao_especial: String,
    pub data_situacao_especial: Option<i32>,
}

/// Socios: one partner of a company.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SocioRow {
    pub cnpj_basico: String,
    pub tipo: String,
    pub nome: String,
    /// Masked: never the whole document.
    pub documento: String,
    pub qualificacao: String,
    pub data_entrada: Option<i32>,
    pub pais: String,
    /// Masked; `""` for the `***000000**` placeholder.
    pub representante_legal: String,
    pub nome_representante: String,
    pub qualificacao_representante: String,
    pub faixa_etaria: String,
    /// The partner's identity as an opaque id (contract §14; `cnpj_model::partner::partner_id`): the
    /// same partner, the same id, in every build and month.
    pub partner_id: String,
    /// A legal-entity partner (`tipo` 1): the company it is, the first 8 characters of its
    /// document when that is a well-formed CNPJ (taken before the document is masked); else `""`.
    pub partner_basico: String,
}

/// Simples: the Simples Nacional / MEI options of one company.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimplesRow {
    pub cnpj_basico: String,
    /// `S`, `N` or `""`.
    pub opcao_simples: String,
    pub data_opcao_simples: Option<i32>,
    pub data_exclusao_simples: Option<i32>,
    pub opcao_mei: String,
    pub data_opcao_mei: Option<i32>,
    pub data_exclusao_mei: Option<i32>,
}

/// One line of a tax-regime file: a company's regime for one year.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RegimeRow {
    pub cnpj_basico: String,
    pub cnpj: String,
    pub ano: i32,
    /// A `regime_tributario` label code: `lucro_real`, `lucro_presumido`, `lucro_arbitrado`, `imune`, `isenta`.
    pub regime: String,
}

/// One line of a lookup table, cleaned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LookupRow {
    pub code: String,
    pub label: String,
}

/// One label of one code in one locale (the dataset's `labels` table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelRow {
    pub table: &'static str,
    pub code: String,
    pub locale: crate::Locale,
    pub label: String,
}

/// A municipality of the month, with its state and IBGE code where known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MunicipioRow {
    pub code: String,
    pub name: String,
    pub uf: String,
    pub ibge: Option<String>,
}

/// A record that could not be loaded, kept verbatim (decoded from Latin-1, fields re-quoted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RejectRow {
    pub source_file: i32,
    pub line: i64,
    pub reason: String,
    pub record: String,
}

/// The fields of one raw record, as the parser hands them over (Latin-1 bytes).
pub trait Fields {
    fn count(&self) -> usize;
    /// Field `i`, or an empty slice past the end.
    fn field(&self, i: usize) -> &[u8];
    /// `(bytes, cap)` when the record was longer than the reader keeps: its fields are then only
    /// the part that was kept, and the record is a reject.
    fn over_cap(&self) -> Option<(u64, u64)> {
        None
    }
    /// Whether the input ended inside the record, in a quoted field or right after a delimiter
    /// (a member cut short): its last field is then incomplete, and the record is a reject.
    fn unterminated(&self) -> bool {
        false
    }
}

impl Fields for [&[u8]] {
    fn count(&self) -> usize {
        self.len()
    }

    fn field(&self, i: usize) -> &[u8] {
        self.get(i).copied().unwrap_or_default()
    }
}

/// One change between the previous month and this one, as the build records it.
/// `old` and `new` are JSON texts of served values (`null` as `None`); `uf`, `municipio` and
/// `cnae` are the establishment's values now (last seen for a disappeared one), for filtering.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeRow {
    /// `None` for a company event until the build fills in the head office.
    pub cnpj: Option<String>,
    pub cnpj_basico: String,
    pub event: String,
    pub field: Option<String>,
    pub old: Option<String>,
    pub new: Option<String>,
    pub uf: Option<String>,
    pub municipio: Option<String>,
    pub cnae: Option<String>,
}
