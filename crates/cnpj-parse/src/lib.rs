//! Streams records out of RFB zips: lists and recognises members, then splits each member's
//! bytes into CSV records (`;`-separated, every field quoted, no header; tax-regime files are
//! `,`-separated with a header). Pure with respect to meaning: fields come out as raw Latin-1 bytes,
//! and decoding, cleaning and validation belong to `cnpj-normalize`.

mod csv_records;
mod zip_members;

pub use csv_records::{Record, Records};
pub use zip_members::{Member, ParseError, list_members, read_member};
