//! Shared vocabulary of cnpj-registry: what every stage crate agrees on.
//!
//! Nothing here does I/O. The stage crates (`cnpj-parse`, `cnpj-normalize`, `cnpj-load`,
//! `cnpj-store`) depend on this crate and never on each other.

mod calendar;
mod cnpj;
mod fold;
mod kind;
mod locale;
pub mod partner;
mod record;
mod size;
mod utc;

pub use calendar::is_dataset_date;
pub use cnpj::{Cnpj, CnpjQuery, InvalidCnpj, check_digits};
pub use fold::fold;
pub use kind::FileKind;
pub use locale::{Locale, UnknownLocale};
pub use record::{
    Address, BatchRecord, City, CodeLabel, Contact, DetailRecord, Partner, ReferenceData, SecondaryActivity,
    endereco_completo, telefone_formatado,
};
pub use size::parse_size;
pub mod filter;
pub use utc::{date_text, utc_seconds, utc_text};
pub mod rows;
