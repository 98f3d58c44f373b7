//! The registry as the pages for people (`cnpj-pages`) reach it: each page's question is answered
//! by the very function of the API endpoint it mirrors (`companies`, `exports`, `watchlists`),
//! for the person logged in as a caller of their own: their plan's rate limit, their credits, their
//! usage counts (by the page's endpoint, without a token). The dataset is the one served when the
//! page asks.

use std::future::Future;
use std::sync::Arc;

use cnpj_accounts::{Person, User};
use cnpj_model::{City, Locale, ReferenceData};
use cnpj_pages::{Answer, ExportCost, PagePrices, Pairs, Refusal, Registry};
use cnpj_store::Store;
use serde_json::Value;

use crate::companies;
use crate::error::ApiError;
use crate::exports;
use crate::jobs;
use crate::params::Params;
use crate::partners;
use crate::server::{Caller, Shared};
use crate::watchlists;

/// The pages' registry over the served state.
pub struct Site {
    state: Shared,
}

/// The registry the pages ask, over the served state.
pub fn registry(state: Shared) -> Arc<dyn Registry> {
    Arc::new(Site { state })
}

/// The user a person is to the API.
fn user_of(person: &Person) -> User {
    User { id: person.id, name: person.name.clone(), credits: person.credits, plan: person.plan.clone() }
}

/// Runs `answer` for `person` as the API runs a request of theirs: admitted by their rate limit
/// first, then counted in usage as `endpoint` with its status and the credits it charged.
async fn as_caller<T, F>(
    state: Shared,
    person: User,
    endpoint: &'static str,
    answer: impl FnOnce(Shared, Caller, Arc<Store>) -> F,
) -> Result<T, Refusal>
where
    F: Future<Output = Result<T, ApiError>>,
{
    let per_minute = state.accounts().plans().of(person.plan.as_deref()).1.requests_per_minute;
    let user_id = person.id;
    let caller = Caller::new(person);
    let result = match state.admit(user_id, per_minute).await {
        Ok(_) => answer(Arc::clone(&state), caller.clone(), state.served().store).await,
        Err(e) => Err(e),
    };
    let status = result.as_ref().map_or_else(|e| e.status().0.as_u16(), |_| 200);
    state.count_usage(user_id, endpoint, status, caller.charged());
    result.map_err(refusal)
}

/// An API error as the pages are told it (an internal one is logged here).
fn refusal(error: ApiError) -> Refusal {
    match error {
        ApiError::BadRequest(errors) => Refusal::Invalid(
            errors
                .into_iter()
                .flat_map(|(param, messages)| {
                    let messages: Vec<String> = messages
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect();
                    messages.into_iter().map(move |m| (param.clone(), m))
                })
                .collect(),
        ),
        ApiError::CompanyNotFound
        | ApiError::PartnerNotFound
        | ApiError::WatchlistNotFound
        | ApiError::ExportNotFound
        | ApiError::ExportNotReady
        | ApiError::ExportExpired
        | ApiError::NotFound => Refusal::NotFound,
        ApiError::InsufficientCredits => Refusal::InsufficientCredits,
        ApiError::TooManyRequests { retry_after } => Refusal::TooManyRequests { retry_after },
        other => {
            other.body();
            Refusal::Failed
        }
    }
}

impl Registry for Site {
    fn search(&self, person: &Person, params: Pairs) -> Answer<Value> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "search-page", move |state, caller, store| async move {
            companies::search(&state, &caller, store, &Params::from_pairs(params)).await
        }))
    }

    fn company(&self, person: &Person, cnpj: String, params: Pairs) -> Answer<Value> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "company-page", move |state, caller, store| async move {
            companies::company_page(&state, &caller, store, &cnpj, &Params::from_pairs(params)).await
        }))
    }

    fn partner(&self, person: &Person, partner_id: String, params: Pairs) -> Answer<Value> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "partner-page", move |state, caller, store| async move {
            if !state.partners {
                return Err(ApiError::NotFound);
            }
            partners::partner(&state, &caller, store, &partner_id, &Params::from_pairs(params)).await
        }))
    }

    fn network(&self, person: &Person, cnpj: String, params: Pairs) -> Answer<Value> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "network-page", move |state, caller, store| async move {
            if !state.partners {
                return Err(ApiError::NotFound);
            }
            partners::network(&state, &caller, store, &cnpj, &Params::from_pairs(params)).await
        }))
    }

    fn partners_served(&self) -> bool {
        self.state.partners
    }

    fn export_cost(&self, person: &Person, params: Pairs, rows: u64) -> Answer<ExportCost> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "export", move |state, _, store| async move {
            let (total, rows, credits) = exports::export_cost(&state, store, &Params::from_pairs(params), rows).await?;
            Ok(ExportCost { total, rows, credits })
        }))
    }

    fn export(&self, person: &Person, params: Pairs, rows: u64) -> Answer<Vec<Value>> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "export", move |state, caller, store| async move {
            exports::export(&state, &caller, store, &Params::from_pairs(params), rows).await
        }))
    }

    fn count(&self, person: &Person, params: Pairs) -> Answer<u64> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "count", move |state, _, store| async move {
            let body = companies::count(&state, store, &Params::from_pairs(params)).await?;
            Ok(body["total"].as_u64().unwrap_or(0))
        }))
    }

    fn create_export_job(&self, person: &Person, params: Pairs, format: String) -> Answer<Value> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "exports", move |state, caller, store| async move {
            let format = crate::exporting::FORMATS.iter().find(|(name, ..)| *name == format).map(|(name, ..)| *name);
            let format =
                format.ok_or_else(|| ApiError::invalid("format", "The format must be one of csv, parquet, jsonl."))?;
            jobs::create(&state, &caller, store, params, format).await
        }))
    }

    fn export_job(&self, person: &Person, id: String) -> Answer<Value> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "exports", move |state, caller, _| async move {
            Ok(jobs::described(&jobs::job(&state, caller.user_id(), id).await?))
        }))
    }

    fn export_job_file(&self, person: &Person, id: String) -> Answer<axum::response::Response> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "exports", move |state, caller, _| async move {
            let found = jobs::job(&state, caller.user_id(), id).await?;
            jobs::file(&state, &found).await
        }))
    }

    fn watch(&self, person: &Person, list: i64, cnpj: String) -> Answer<()> {
        let (state, user) = (Arc::clone(&self.state), user_of(person));
        Box::pin(as_caller(state, user, "watchlists", move |state, caller, _| async move {
            watchlists::add(&state, caller.user_id(), list, cnpj).await
        }))
    }

    fn prices(&self) -> PagePrices {
        // A company's page is priced like detail (`server::company_page`), a search like search;
        // a partner's page and a network like detail.
        PagePrices { company: self.state.prices.detail, search: self.state.prices.search }
    }

    fn reference_data(&self, locale: Locale) -> ReferenceData {
        self.state.served().store.reference_data(locale)
    }

    fn label(&self, locale: Locale, table: &str, code: &str) -> String {
        self.state.served().store.label(locale, table, code)
    }

    fn cities(&self, state: &str) -> Vec<City> {
        self.state.served().store.cities(Some(state), None, 1, u64::from(u32::MAX)).1
    }
}
