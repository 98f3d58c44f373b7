//! Shared vocabulary of cnpj-registry: what every stage crate agrees on.
//!
//! Nothing here does I/O. The stage crates (`cnpj-parse`, `cnpj-normalize`, `cnpj-load`,
//! `cnpj-store`) depend on this crate and never on each other.

mod cnpj;
mod kind;
mod locale;
mod record;

pub use cnpj::{Cnpj, CnpjQuery, InvalidCnpj, check_digits};
pub use kind::FileKind;
pub use locale::{Locale, UnknownLocale};
pub use record::{Address, Contact, DetailRecord, Partner, SecondaryActivity};
pub mod rows;
