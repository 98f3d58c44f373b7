//! The company record the API serves (spec §2.2, contract §2), as the read side assembles it.
//!
//! Field order is the JSON order. Fields after `capital_social` are additive (contract §2 allows them).

use serde::Serialize;

/// The detail record (`data` of GET /api/v1/companies/{cnpj}).
#[derive(Clone, Debug, PartialEq, Serialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize)]
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
