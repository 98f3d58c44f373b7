//! What the company pages ask of the service that serves the registry (`cnpj-api` answers):
//! each question is one of the API's own endpoints, answered for the person logged in and charged
//! to them exactly as that endpoint charges a token's request; and the served dataset's labels
//! and cities, for the search form. The pages open no database and price nothing themselves.

use std::future::Future;
use std::pin::Pin;

use cnpj_accounts::Person;
use cnpj_model::{City, Locale, ReferenceData};
use serde_json::Value;

/// An answer to come (the registry reads off the request's thread).
pub type Answer<T> = Pin<Box<dyn Future<Output = Result<T, Refusal>> + Send>>;

/// A search's parameters by their API names (values as a person typed them, not encoded).
pub type Pairs = Vec<(String, String)>;

/// Why the registry did not answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Invalid parameters: each named with the API's message (in English).
    Invalid(Vec<(String, String)>),
    /// No such company, or no such watchlist of this person's.
    NotFound,
    /// The allowance and credits left cannot pay for it: nothing was charged.
    InsufficientCredits,
    /// Past the person's rate limit: try again in `retry_after` seconds.
    TooManyRequests { retry_after: u64 },
    /// Anything else (the registry logged it).
    Failed,
}

/// What exporting a search would cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportCost {
    /// The search's matches.
    pub total: u64,
    /// The rows the export holds (the first matches, at most the rows asked and the cap).
    pub rows: u64,
    pub credits: i64,
}

/// What the charged pages cost, in credits, when they answer as their endpoints do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagePrices {
    /// A company's page: the detail's price, when the company is found.
    pub company: i64,
    /// A page of search results: the search's price, when it finds companies.
    pub search: i64,
}

/// The registry as the pages see it.
pub trait Registry: Send + Sync {
    /// The body of `GET /api/v1/companies/search` with these parameters, charged as that is.
    fn search(&self, person: &Person, params: Pairs) -> Answer<Value>;
    /// A company's page by the CNPJ as typed: `{record, establishments, history, partners}` (the
    /// record as a batch item, or `null` when the company is gone; a page of its company's
    /// establishments as search items, `page` of `params`; its changes, newest first; with
    /// partners served, its partners `{partner_id, nome, documento}` in the record's order),
    /// priced like detail.
    fn company(&self, person: &Person, cnpj: String, params: Pairs) -> Answer<Value>;
    /// The body of `GET /api/v1/partners/{partner_id}` (`page`, `per_page`, `locale` of
    /// `params`), charged as that is; [`Refusal::NotFound`] when partners are not served.
    fn partner(&self, person: &Person, partner_id: String, params: Pairs) -> Answer<Value>;
    /// The body of `GET /api/v1/companies/{cnpj}/network` (`depth`, `max_nodes`, `active_only`,
    /// `locale` of `params`), charged as that is; [`Refusal::NotFound`] when partners are not
    /// served.
    fn network(&self, person: &Person, cnpj: String, params: Pairs) -> Answer<Value>;
    /// Whether partners are served first-class (`serve --partners`): off, no page links to a
    /// partner or a network. (A company's page then has no `partners` with ids.)
    fn partners_served(&self) -> bool;
    /// What exporting the first `rows` of a search costs (asking is free).
    fn export_cost(&self, person: &Person, params: Pairs, rows: u64) -> Answer<ExportCost>;
    /// The first `rows` of a search as search items, charged per row found like batch.
    fn export(&self, person: &Person, params: Pairs, rows: u64) -> Answer<Vec<Value>>;
    /// The total of a search (`GET /api/v1/companies/count`, free): an export job's rows.
    fn count(&self, person: &Person, params: Pairs) -> Answer<u64>;
    /// An export job of a search's whole result in `format` (`csv`, `parquet`, `jsonl`), its
    /// credits held: the body of `POST /api/v1/exports`.
    fn create_export_job(&self, person: &Person, params: Pairs, format: String) -> Answer<Value>;
    /// One of the person's export jobs, as `GET /api/v1/exports/{id}` describes it
    /// ([`Refusal::NotFound`]: none of theirs).
    fn export_job(&self, person: &Person, id: String) -> Answer<Value>;
    /// The file of one of the person's export jobs, once done, as the answer that streams it.
    fn export_job_file(&self, person: &Person, id: String) -> Answer<axum::response::Response>;
    /// Adds a CNPJ (14 characters, or the company's 8) to one of the person's watchlists.
    fn watch(&self, person: &Person, list: i64, cnpj: String) -> Answer<()>;
    /// What the charged pages cost (shown before a page opened from elsewhere is charged).
    fn prices(&self) -> PagePrices;
    /// The reference data of `GET /api/v1/reference-data` (free).
    fn reference_data(&self, locale: Locale) -> ReferenceData;
    /// The label of a code of a label table (`porte_empresa`, …), as the records carry it.
    fn label(&self, locale: Locale, table: &str, code: &str) -> String;
    /// The cities of a state (two letters), as `GET /api/v1/cities` orders them (free).
    fn cities(&self, state: &str) -> Vec<City>;
}
