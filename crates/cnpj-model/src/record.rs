//! The company record the API serves (search item, detail, batch), as the read side assembles it.
//!
//! Field order is the JSON order. Fields after `capital_social` are additive (clients ignore the fields they do not know).

use serde::Serialize;

/// The detail record (`data` of GET /api/v1/companies/{cnpj}).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DetailRecord {
    pub id: String,
    pub cnpj: String,
    pub razao_social: String,
    pub nome_fantasia: String,
    pub situacao_cadastral: String,
    pub situacao_cadastral_code: String,
    pub natureza_juridica: String,
    pub natureza_juridica_code: String,
    pub porte_empresa: String,
    pub porte_empresa_code: String,
    pub cnae_fiscal: String,
    pub cnae_fiscal_descricao: String,
    pub cnaes_secundarios: Vec<SecondaryActivity>,
    pub endereco: Address,
    pub contato: Contact,
    pub socios: Vec<Partner>,
    pub data_inicio_atividades: Option<String>,
    pub capital_social: Option<String>,
    // additive
    pub matriz_filial_code: String,
    pub matriz_filial: String,
    pub data_situacao_cadastral: Option<String>,
    pub motivo_situacao_cadastral_code: String,
    pub motivo_situacao_cadastral: String,
    pub situacao_especial: String,
    pub data_situacao_especial: Option<String>,
    pub ente_federativo_responsavel: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SecondaryActivity {
    pub codigo: String,
    pub descricao: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Address {
    pub logradouro: String,
    pub numero: String,
    pub complemento: String,
    pub bairro: String,
    pub municipio: String,
    pub municipio_nome: String,
    pub uf: String,
    pub cep: String,
    pub endereco_completo: String,
    // additive
    pub municipio_ibge: Option<String>,
    pub nome_cidade_exterior: String,
    pub pais_code: String,
    pub pais: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Contact {
    pub ddd: String,
    pub telefone: String,
    pub telefone_formatado: String,
    pub email: String,
    // additive
    pub ddd_2: String,
    pub telefone_2: String,
    pub ddd_fax: String,
    pub fax: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Partner {
    pub nome: String,
    pub qualificacao: String,
    pub tipo: String,
    pub documento: String,
    // additive
    pub qualificacao_descricao: String,
    pub tipo_descricao: String,
    pub data_entrada: Option<String>,
    pub faixa_etaria_code: String,
    pub faixa_etaria: String,
    pub pais_code: String,
    pub representante_legal: String,
    pub nome_representante: String,
    pub qualificacao_representante: String,
}

/// The batch record: the detail record plus the batch-only fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchRecord {
    #[serde(flatten)]
    pub detail: DetailRecord,
    pub regime_tributario: String,
    /// Additive: the regime's code (`lucro_real`, `mei`, `simples_nacional`, `nao_informado`, …).
    pub regime_tributario_code: String,
    pub simples_nacional: u8,
    pub employees_count: Option<u64>,
    pub employees_year: Option<u32>,
    pub employees_source: Option<String>,
    pub faturamento_estimado: Option<String>,
}

impl DetailRecord {
    /// The search item view: the detail record less `natureza_juridica(_code)`,
    /// `capital_social`, `endereco.endereco_completo` and `contato.telefone_formatado`.
    pub fn search_item(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).expect("a record serializes");
        if let Some(map) = value.as_object_mut() {
            for key in ["natureza_juridica", "natureza_juridica_code", "capital_social"] {
                map.shift_remove(key);
            }
            if let Some(address) = map.get_mut("endereco").and_then(serde_json::Value::as_object_mut) {
                address.shift_remove("endereco_completo");
            }
            if let Some(contact) = map.get_mut("contato").and_then(serde_json::Value::as_object_mut) {
                contact.shift_remove("telefone_formatado");
            }
        }
        value
    }
}

/// `endereco.endereco_completo`: `LOGRADOURO, NUMERO, COMPLEMENTO, BAIRRO,
/// MUNICIPIO_NOME - UF, 01310-100`, leaving out empty parts and their comma; the CEP (8 digits)
/// masked as 5 digits, a hyphen, 3 digits. Built when a record is read, from the stored parts.
pub fn endereco_completo(
    logradouro: &str,
    numero: &str,
    complemento: &str,
    bairro: &str,
    municipio_nome: &str,
    uf: &str,
    cep: &str,
) -> String {
    let place = match (municipio_nome.is_empty(), uf.is_empty()) {
        (false, false) => format!("{municipio_nome} - {uf}"),
        (false, true) => municipio_nome.to_owned(),
        (true, _) => uf.to_owned(),
    };
    let cep = if cep.len() == 8 { format!("{}-{}", &cep[..5], &cep[5..]) } else { String::new() };
    [logradouro, numero, complemento, bairro, &place, &cep]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `contato.telefone_formatado`: `(11) 12345678`; the number alone without an area
/// code; `""` without a number. Built when a record is read.
pub fn telefone_formatado(ddd: &str, telefone: &str) -> String {
    match (ddd.is_empty(), telefone.is_empty()) {
        (_, true) => String::new(),
        (true, false) => telefone.to_owned(),
        (false, false) => format!("({ddd}) {telefone}"),
    }
}

/// A city of GET /api/v1/cities.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct City {
    pub id: String,
    pub name: String,
    pub state: String,
    pub ibge_code: Option<String>,
}

/// A code with its label, as reference data lists them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CodeLabel {
    pub code: String,
    pub description: String,
}

/// GET /api/v1/reference-data.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReferenceData {
    pub business_sectors: Vec<CodeLabel>,
    pub states: Vec<String>,
    pub company_sizes: Vec<String>,
    pub legal_natures: Vec<CodeLabel>,
    pub registration_statuses: serde_json::Map<String, serde_json::Value>,
    pub locale: String,
    pub available_locales: serde_json::Map<String, serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(parts: [&str; 7], expected: &str) {
        let [logradouro, numero, complemento, bairro, municipio, uf, cep] = parts;
        assert_eq!(endereco_completo(logradouro, numero, complemento, bairro, municipio, uf, cep), expected);
    }

    #[test]
    fn full_address_leaves_out_empty_parts() {
        check(
            ["AVENIDA PAULISTA", "1000", "ANDAR 5", "BELA VISTA", "SAO PAULO", "SP", "01310100"],
            "AVENIDA PAULISTA, 1000, ANDAR 5, BELA VISTA, SAO PAULO - SP, 01310-100",
        );
        check(["RUA X", "S/N", "", "", "SAO PAULO", "SP", ""], "RUA X, S/N, SAO PAULO - SP");
        check(["PALPA", "2862", "", "COLEGIALES", "EXTERIOR", "EX", ""], "PALPA, 2862, COLEGIALES, EXTERIOR - EX");
        check(["", "", "", "", "SAO PAULO", "", ""], "SAO PAULO");
        check(["", "", "", "", "", "SP", ""], "SP");
        check(["", "", "", "", "", "", "0131"], "");
        check(["", "", "", "", "", "", ""], "");
    }

    #[test]
    fn phone_with_area_code_in_parentheses() {
        assert_eq!(telefone_formatado("11", "12345678"), "(11) 12345678");
        assert_eq!(telefone_formatado("", "12345678"), "12345678");
        assert_eq!(telefone_formatado("11", ""), "");
    }
}
