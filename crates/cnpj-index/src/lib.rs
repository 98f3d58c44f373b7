//! The serving files beside a DuckDB dataset, one concern with a writer fed by the build's merge
//! and a reader used by the store: the lookup file (`lookup`: the rows a record is built from, by
//! key) and the search index (`search`: every search filter as compressed bitmaps of
//! establishment ordinals). Both are written while the merge stores the tables (`feed`), stamped
//! with the build's id, and renamed into place with the DuckDB file. The partners (`partners`) are
//! fed to both once the build has made its partner tables. Beside them, the month-over-
//! month history (`history`): a DuckDB file whose name, tables and per-month company sets the
//! loader and the store share.

mod changes;
mod feed;
mod history;
mod lookup;
mod partners;
mod search;
mod text;

use std::path::PathBuf;

pub use changes::{ChangeFile, MARKER_COMPANY_GONE, MARKER_COMPANY_NEW, Previous};
pub use feed::{CompanyRanges, Fed, Feed, ServingWriter, UF_CODES};
pub use history::{
    CHANGE_KEYS, COMPANY_FIELDS, Companies, HISTORY_DDL, SAME_BUILD, attach_history_sql, branch_key, cnpj_of,
    company_base, company_key, history_path,
};
pub use lookup::{Lookup, LookupError, LookupTable, Part, Reader, TextRow, lookup_path};
pub use partners::{PARTNER_IDENTITY_CELLS, PARTNER_LINK_CELLS, PartnerFeed};
pub use search::{
    Condition, Flag, Matches, PartnerConditions, SearchIndex, SearchIndexError, UPPER, search_index_path,
};

/// Why a serving file whose magic is `found` is not read, `expected` being this version's: a file
/// of an earlier (or later) format is named as such, and the way out given.
fn refused_format(what: &str, found: &[u8], expected: &[u8; 8]) -> String {
    if found.len() == expected.len() && found[..7] == expected[..7] {
        format!(
            "a {what} of format {}, and this version reads {}: build the month again",
            String::from_utf8_lossy(found),
            String::from_utf8_lossy(expected)
        )
    } else {
        format!("not a {what}")
    }
}

/// What can go wrong writing the serving files, in any of their parts: the lookup file, the
/// search index, the feeds and the comparison with the previous month.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("writing the lookup file: {0}")]
    Lookup(#[from] LookupError),
    #[error("writing the search index: {0}")]
    Search(#[from] SearchIndexError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("the establishments were not stored, so the companies cannot be indexed")]
    EstablishmentsFailed,
    #[error("more than 2^31 establishments in one half of the table")]
    TooMany,
    #[error("the previous dataset's lookup file {path}: {reason}")]
    PreviousLookup { path: PathBuf, reason: String },
}
