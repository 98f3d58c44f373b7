//! Turns raw RFB fields (Latin-1 bytes) into the registry's served values:
//! text cleaning, CPF masking, padded codes, dates, exact capital, CEP, phones, addresses,
//! partner documents (identities are `cnpj_model::partner`), tax regimes, and the labels of every code in pt-br, en and es.
//!
//! Pure: bytes in, values out. A record that cannot be a row is a [`Reject`], which is data.

mod fields;
mod ibge;
mod labels;
mod tables;
mod text;

pub use fields::{
    CapitalIssue, capital, cep, date, ddd, email, logradouro, mask_company_document, mask_person_document, pad_code,
    telefone,
};
pub use ibge::municipio;
pub use labels::{FIXED_DOMAINS, LabelSet, Untranslated, bundled, fixed_domains, translations};
pub use tables::{Normalizer, Reject, TaxRegimeColumns, record_hash};
pub use text::{clean, mask_cpf_runs};
