//! Streams records out of RFB zips: lists and recognises members, then splits each member's
//! bytes into CSV records (`;`-separated, every field quoted, no header; tax-regime files are
//! `,`-separated with a header). Pure with respect to meaning: fields come out as raw Latin-1 bytes,
//! and decoding, cleaning and validation belong to `cnpj-normalize`.

mod csv_records;
mod zip_members;

pub use csv_records::{DEFAULT_MAX_RECORD_BYTES, Record, Records, TextStats};
pub use zip_members::{BOMB_MIN_BYTES, BOMB_RATIO, Member, ParseError, list_members, read_member};
