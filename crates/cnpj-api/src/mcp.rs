//! The MCP endpoint, `/mcp`: the Model Context Protocol's streamable HTTP transport (the `rmcp`
//! SDK), stateless and answering JSON, so that any replica answers any call. One tool per read
//! endpoint of the REST API (a watchlist's events among them): a tool's arguments are read as
//! that endpoint's query string (and a batch's body, a watchlist's id) and handed to the very
//! function its route calls, for the same validation,
//! prices, locales and errors. The HTTP request was authenticated and counted by the rate limit
//! before it got here (the route's layers); its user rides in the request's extensions. A body
//! that is not a JSON-RPC message is JSON-RPC's error, in a 400.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde_json::{Value, json};
use tower::Layer;

use crate::changes;
use crate::companies;
use crate::error::ApiError;
use crate::params::Params;
use crate::partners;
use crate::server::{AppState, Caller, MAX_BODY, Served};

/// The `/mcp` service. No session (each POST stands alone) and JSON answers, not event streams:
/// only POST is answered. The `Host` header is not checked against a list: every call carries a
/// Bearer token, which a DNS-rebinding page does not have. A body that is not a JSON-RPC message
/// is answered by `json_rpc_errors` before rmcp sees it.
pub fn service(
    state: Arc<AppState>,
) -> impl tower::Service<Request, Response = Response, Error = Infallible, Future: Send> + Clone + Send + Sync + 'static
{
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts();
    let rmcp = StreamableHttpService::new(
        move || Ok(Tools { state: Arc::clone(&state) }),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    axum::middleware::from_fn(json_rpc_errors).layer(rmcp)
}

/// A JSON body that is not JSON (JSON-RPC's parse error, -32700) or not a JSON-RPC message (its
/// invalid request, -32600): a 400 with that error object and a null id, as JSON-RPC asks and
/// MCP's streamable HTTP transport allows (rmcp would answer 415 with serde's message). A body of
/// another type is left to rmcp (its 415).
async fn json_rpc_errors(request: Request, next: Next) -> Response {
    let declared = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let json =
        declared.is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // The router has read the body already (at most `server::MAX_BODY`): this only takes it.
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => return ApiError::invalid("body", format!("The body could not be read: {e}.")).into_response(),
    };
    let (code, message) = match serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) {
        Ok(_) => return next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(e) if e.is_data() => (-32600, "Invalid Request"),
        Err(_) => (-32700, "Parse error"),
    };
    let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (StatusCode::BAD_REQUEST, Json(error)).into_response()
}

/// The tools, over the served dataset and the accounts.
#[derive(Clone)]
pub struct Tools {
    state: Arc<AppState>,
}

/// A tool, and the REST endpoint it is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Endpoint {
    Search,
    Count,
    Detail,
    Batch,
    History,
    Changes,
    WatchlistEvents,
    ReferenceData,
    Cities,
    SearchPartners,
    GetPartner,
    CompanyNetwork,
}

impl Endpoint {
    const ALL: [Endpoint; 12] = [
        Endpoint::Search,
        Endpoint::Count,
        Endpoint::Detail,
        Endpoint::Batch,
        Endpoint::History,
        Endpoint::Changes,
        Endpoint::WatchlistEvents,
        Endpoint::ReferenceData,
        Endpoint::Cities,
        Endpoint::SearchPartners,
        Endpoint::GetPartner,
        Endpoint::CompanyNetwork,
    ];

    /// Whether the tool is of the partners, gone with `serve --partners off`.
    fn of_partners(self) -> bool {
        matches!(self, Endpoint::SearchPartners | Endpoint::GetPartner | Endpoint::CompanyNetwork)
    }

    fn name(self) -> &'static str {
        match self {
            Endpoint::Search => "search_companies",
            Endpoint::Count => "count_companies",
            Endpoint::Detail => "get_company",
            Endpoint::Batch => "get_companies",
            Endpoint::History => "company_history",
            Endpoint::Changes => "list_changes",
            Endpoint::WatchlistEvents => "watchlist_events",
            Endpoint::ReferenceData => "reference_data",
            Endpoint::Cities => "list_cities",
            Endpoint::SearchPartners => "search_partners",
            Endpoint::GetPartner => "get_partner",
            Endpoint::CompanyNetwork => "company_network",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Endpoint::Search => {
                "Search Brazilian companies (establishments) in the CNPJ registry: filters combine with AND, results \
                 are ordered by CNPJ and paged (per_page up to 50); a code filter takes one code or up to 50, \
                 comma-separated (any of them). Costs 1 credit when the page has items."
            }
            Endpoint::Count => {
                "How many establishments a search_companies of the same filters would find (its total), to size a \
                 query before paying for its pages. Free."
            }
            Endpoint::Detail => {
                "One establishment's full record by CNPJ (14 characters), or a company's head office (8 characters, \
                 the cnpj_basico): company, address, contact, activities, partners (documents masked), capital, \
                 tax regime. Costs 1 credit when found."
            }
            Endpoint::Batch => {
                "Full records of 1 to 100 CNPJs at once, in the order given, duplicates merged; each item is found, \
                 not found, or of an invalid format. Costs 1 credit per CNPJ found."
            }
            Endpoint::History => {
                "Every change recorded month over month of an establishment and its company (14 characters) or of a \
                 whole company (8 characters), newest month first. Costs 1 credit when answered."
            }
            Endpoint::Changes => {
                "Changes between consecutive monthly datasets (companies opened, closed, moved, renamed, partners \
                 entering or leaving…), filtered and paged like the search. Costs 1 credit when the page has items."
            }
            Endpoint::WatchlistEvents => {
                "The changes of the CNPJs on one of your watchlists (its events, a month or since one), ordered and \
                 paged like list_changes. Costs 1 credit when the page has items."
            }
            Endpoint::ReferenceData => {
                "The codes and labels the filters and records use (registration statuses, company sizes, legal \
                 natures, activities, states…), in the locale asked. Free."
            }
            Endpoint::Cities => {
                "Cities (RFB municipality codes, the city_id of search_companies), by state and a name substring, \
                 paged. Free."
            }
            Endpoint::SearchPartners => {
                "Search the partners (shareholders, administrators) of Brazilian companies by name substring, masked \
                 document, type or state; each with its partner_id, its number of companies and the identity rule \
                 (people with the same name and the same six CPF digits are one partner). Ordered by name, paged. \
                 Costs 1 credit when the page has items."
            }
            Endpoint::GetPartner => {
                "One partner by its partner_id: its companies (paged) with qualification and entry date, its own \
                 company for a legal entity, and its entries and exits month over month. Costs 1 credit when found."
            }
            Endpoint::CompanyNetwork => {
                "The network of a company: its partners, their other companies, and so on breadth-first to depth 1 \
                 to 3, at most max_nodes nodes (then truncated); a legal-entity partner is joined to its company. \
                 Costs 1 credit when the company is found."
            }
        }
    }

    fn named(name: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.name() == name)
    }

    fn input_schema(self) -> Arc<JsonObject> {
        let schema = match self {
            Endpoint::Search => schema_for_input::<SearchArgs>(),
            Endpoint::Count => schema_for_input::<CountArgs>(),
            Endpoint::Detail | Endpoint::History => schema_for_input::<CnpjArgs>(),
            Endpoint::Batch => schema_for_input::<BatchArgs>(),
            Endpoint::Changes => schema_for_input::<ChangesArgs>(),
            Endpoint::WatchlistEvents => schema_for_input::<WatchlistEventsArgs>(),
            Endpoint::ReferenceData => schema_for_input::<LocaleArgs>(),
            Endpoint::Cities => schema_for_input::<CitiesArgs>(),
            Endpoint::SearchPartners => schema_for_input::<PartnerSearchArgs>(),
            Endpoint::GetPartner => schema_for_input::<PartnerArgs>(),
            Endpoint::CompanyNetwork => schema_for_input::<NetworkArgs>(),
        };
        let mut schema = Arc::unwrap_or_clone(schema.expect("every argument struct is an object"));
        // A doc comment's line breaks are kept in its description: one line each.
        let properties = schema.get_mut("properties").and_then(Value::as_object_mut);
        for property in properties.into_iter().flat_map(|p| p.values_mut()) {
            if let Some(Value::String(description)) = property.get_mut("description") {
                *description = description.replace('\n', " ");
            }
        }
        Arc::new(schema)
    }

    fn tool(self) -> Tool {
        let annotations = ToolAnnotations::new().read_only(true).open_world(false);
        Tool::new(self.name(), self.description(), self.input_schema()).with_annotations(annotations)
    }

    /// The REST answer (its whole JSON body) to these arguments.
    async fn answer(
        self,
        state: &Arc<AppState>,
        caller: &Caller,
        served: &Served,
        args: &JsonObject,
    ) -> Result<Value, ApiError> {
        let store = Arc::clone(&served.store);
        match self {
            Endpoint::Search => companies::search(state, caller, store, &query(args, &[])?).await,
            Endpoint::Count => companies::count(state, store, &query(args, &[])?).await,
            Endpoint::Detail => {
                companies::detail(state, caller, store, &required(args, "cnpj")?, &query(args, &[])?).await
            }
            Endpoint::Batch => {
                let body = match args.get("cnpjs") {
                    Some(cnpjs) => json!({"cnpjs": cnpjs}),
                    None => json!({}),
                };
                companies::batch(state, caller, store, &query(args, &["cnpjs"])?, body.to_string().as_bytes()).await
            }
            Endpoint::History => {
                changes::history(state, caller, store, &required(args, "cnpj")?, &query(args, &[])?).await
            }
            Endpoint::Changes => changes::changes(state, caller, store, &query(args, &[])?).await,
            Endpoint::WatchlistEvents => {
                let id = required(args, "watchlist_id")?;
                crate::watchlists::events_of(state, caller, store, &id, &query(args, &["watchlist_id"])?).await
            }
            Endpoint::ReferenceData => companies::reference_data(&store, &query(args, &[])?),
            Endpoint::Cities => companies::cities(&store, &query(args, &[])?),
            Endpoint::SearchPartners => partners::search(state, caller, store, &query(args, &[])?).await,
            Endpoint::GetPartner => {
                let id = required(args, "partner_id")?;
                partners::partner(state, caller, store, &id, &query(args, &["partner_id"])?).await
            }
            Endpoint::CompanyNetwork => {
                partners::network(state, caller, store, &required(args, "cnpj")?, &query(args, &["cnpj"])?).await
            }
        }
    }
}

/// An argument as a query-string value: a string as sent, a number as its decimal text, a
/// boolean as `true` or `false`, `null` as absent; anything else is a 400 naming it.
fn text(name: &str, value: &Value) -> Result<Option<String>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        _ => Err(ApiError::invalid(name, format!("The {name} must be a string, a number or a boolean."))),
    }
}

/// The arguments as the REST request's query string (but those of `except`).
fn query(args: &JsonObject, except: &[&str]) -> Result<Params, ApiError> {
    let mut pairs = Vec::new();
    for (name, value) in args.iter().filter(|(name, _)| !except.contains(&name.as_str())) {
        if let Some(text) = text(name, value)? {
            pairs.push((name.clone(), text));
        }
    }
    Ok(Params::from_pairs(pairs))
}

/// The argument that stands for the REST path's CNPJ.
fn required(args: &JsonObject, name: &str) -> Result<String, ApiError> {
    args.get(name)
        .map_or(Ok(None), |value| text(name, value))?
        .ok_or_else(|| ApiError::invalid(name, format!("The {name} is required.")))
}

/// A tool's result: the REST body's `data` as structured content, and a line saying what it is.
fn success(endpoint: Endpoint, mut body: Value) -> CallToolResult {
    let summary = summary(endpoint, &body);
    // A count has no `data`: its structured content is `{total}`.
    let data = match endpoint {
        Endpoint::Count => json!({"total": body["total"]}),
        _ => body["data"].take(),
    };
    let mut result = CallToolResult::structured(data);
    result.content = vec![ContentBlock::text(summary)];
    result
}

/// A refused call: the REST error's message (and each parameter's) as text, its JSON envelope
/// as structured content.
fn failure(error: &ApiError) -> CallToolResult {
    let body = error.body();
    let details: Vec<String> = (body["errors"].as_object().into_iter().flatten())
        .flat_map(|(param, messages)| {
            let messages = messages.as_array().into_iter().flatten().filter_map(Value::as_str);
            messages.map(move |message| format!("{param}: {message}"))
        })
        .collect();
    let mut text = body["message"].as_str().unwrap_or_default().to_owned();
    if !details.is_empty() {
        text.push_str(&format!(" ({})", details.join(" ")));
    }
    let mut result = CallToolResult::structured_error(body);
    result.content = vec![ContentBlock::text(text)];
    result
}

/// One line on what a REST body holds.
fn summary(endpoint: Endpoint, body: &Value) -> String {
    let data = &body["data"];
    let count = data.as_array().map_or(0, Vec::len);
    match endpoint {
        Endpoint::Search => page("companies", body),
        Endpoint::SearchPartners => page("partners", body),
        Endpoint::GetPartner => format!(
            "{} ({}): {} companies; page {} of {}.",
            data["nome"].as_str().unwrap_or_default(),
            data["partner_id"].as_str().unwrap_or_default(),
            body["total"],
            body["current_page"],
            body["last_page"]
        ),
        Endpoint::CompanyNetwork => format!(
            "{} nodes and {} edges from {}{}.",
            data["nodes"].as_array().map_or(0, Vec::len),
            data["edges"].as_array().map_or(0, Vec::len),
            data["root"].as_str().unwrap_or_default(),
            if data["truncated"] == json!(true) { ", truncated at max_nodes" } else { "" }
        ),
        Endpoint::Count => format!("{} companies (establishments) match.", body["total"]),
        Endpoint::Changes | Endpoint::WatchlistEvents => page("changes", body),
        Endpoint::Cities => page("cities", &body["pagination"]),
        Endpoint::Detail => format!(
            "{} {}: {}.",
            data["cnpj"].as_str().unwrap_or_default(),
            data["razao_social"].as_str().unwrap_or_default(),
            data["situacao_cadastral"].as_str().unwrap_or_default()
        ),
        Endpoint::Batch => format!(
            "{} of {count} distinct CNPJs found; {} credits used, {} remaining.",
            body["total_found"], body["credits_used"], body["credits_remaining"]
        ),
        Endpoint::History => format!("{count} changes, newest month first."),
        Endpoint::ReferenceData => {
            let keys: Vec<&str> = data.as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
            format!("Reference data: {}.", keys.join(", "))
        }
    }
}

/// A page of a paged answer (`total`, `current_page`, `last_page`, `from`, `to`).
fn page(what: &str, pagination: &Value) -> String {
    let [total, current, last, from, to] =
        ["total", "current_page", "last_page", "from", "to"].map(|k| pagination[k].as_u64().unwrap_or(0));
    if from == 0 {
        format!("Page {current} of {last}: no {what} ({total} in all).")
    } else {
        format!("Page {current} of {last}: {what} {from} to {to} of {total}.")
    }
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cnpj-registry", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Brazil's CNPJ registry, from the Receita Federal's monthly open data: search companies, read their \
                 records, their month-over-month history and each month's changes. Calls are charged in credits \
                 as the REST API's requests are; labels are in the locale asked (pt-br, en, es).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let served = Endpoint::ALL.into_iter().filter(|e| self.state.partners || !e.of_partners());
        Ok(ListToolsResult::with_all_items(served.map(Endpoint::tool).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let named = Endpoint::named(&request.name).filter(|e| self.state.partners || !e.of_partners());
        let Some(endpoint) = named else {
            return Err(ErrorData::invalid_params(format!("Unknown tool: {}.", request.name), None));
        };
        let parts = context.extensions.get::<Parts>();
        let caller = parts.and_then(|parts| parts.extensions.get::<Caller>());
        let served = parts.and_then(|parts| parts.extensions.get::<Served>());
        let (Some(caller), Some(served)) = (caller, served) else {
            return Err(ErrorData::internal_error("the request reached the tools unauthenticated", None));
        };
        let args = request.arguments.unwrap_or_default();
        let result = match endpoint.answer(&self.state, caller, served, &args).await {
            Ok(body) => success(endpoint, body),
            Err(error) => failure(&error),
        };
        Ok(result.into())
    }
}

// The arguments of each tool, for their JSON Schemas: the values themselves are read as the REST
// request's parameters (`query`), so that the REST validation alone accepts or refuses them.

/// The language of labels; pt-br when not given.
#[derive(JsonSchema)]
#[schemars(inline)]
#[expect(dead_code, reason = "a schema only")]
enum Locale {
    #[serde(rename = "pt-br")]
    PtBr,
    #[serde(rename = "en")]
    En,
    #[serde(rename = "es")]
    Es,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct SearchArgs {
    #[serde(flatten)]
    filters: FilterArgs,
    /// Page number, from 1.
    #[schemars(range(min = 1, max = 4_294_967_295u64))]
    page: Option<u64>,
    /// Results per page, 1 to 50 (20 when not given).
    #[schemars(range(min = 1, max = 50))]
    per_page: Option<u64>,
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct CountArgs {
    #[serde(flatten)]
    filters: FilterArgs,
    locale: Option<Locale>,
}

/// The search's filters. A code filter takes one code or up to 50, comma-separated without
/// spaces: any of them matches.
#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct FilterArgs {
    /// Case- and accent-insensitive substring of the trading name (nome_fantasia) or the company
    /// name (razao_social).
    trading_name: Option<String>,
    /// Case- and accent-insensitive substring of the neighbourhood (bairro).
    neighborhood: Option<String>,
    /// 14 characters (one establishment; its check digits must be right) or 8 (every establishment
    /// of a company); masks (. / -) and white space accepted.
    cnpj: Option<String>,
    /// CEP prefix: 1 to 8 digits (01310 matches 01310100); masks accepted.
    zip_code: Option<String>,
    /// Company size codes: 01, 03 or 05 (00 not informed), one or a comma-separated list; see
    /// reference_data.
    porte_empresa_code: Option<String>,
    /// Legacy alias of porte_empresa_code: both given must agree.
    company_size: Option<String>,
    /// Main activity, CNAE codes of 7 digits (6 are left-padded), one or a comma-separated list;
    /// masks accepted (4751-2/01).
    business_sector: Option<String>,
    /// Main or any secondary activity, CNAE codes as business_sector.
    any_sector: Option<String>,
    /// RFB municipality codes (1 to 4 digits), as list_cities gives them, one or a
    /// comma-separated list; wins over city.
    city_id: Option<String>,
    /// City name, case- and accent-insensitive equality (city_id is preferred).
    city: Option<String>,
    /// Two-letter state codes (UF), either case, one or a comma-separated list (SP,RJ); EX abroad.
    state: Option<String>,
    /// Opening date from, inclusive: YYYY-MM-DD.
    opening_date_from: Option<String>,
    /// Opening date to, inclusive: YYYY-MM-DD.
    opening_date_to: Option<String>,
    /// Legal nature codes: 3 or 4 digits, one or a comma-separated list; see reference_data.
    nature_code: Option<String>,
    /// Registration status codes: 01 null, 02 active, 03 suspended, 04 unfit, 08 closed; one or a
    /// comma-separated list.
    situacao_cadastral: Option<String>,
    /// The company's capital from, inclusive, in reais: digits and at most two decimals after a
    /// point (100000 or 1000.50), no thousands separators.
    capital_from: Option<String>,
    /// The company's capital to, inclusive, in reais, as capital_from.
    capital_to: Option<String>,
    /// true: an email is served; false: none is.
    has_email: Option<bool>,
    /// true: a first or second phone number is served; false: neither is.
    has_phone: Option<bool>,
    /// true: the company opted for the Simples Nacional (now); false: it did not.
    simples: Option<bool>,
    /// true: the company opted for the MEI (now); false: it did not.
    mei: Option<bool>,
    /// true: head offices only; false: branches only.
    head_office: Option<bool>,
    /// The establishments of the companies of this partner (its partner_id).
    partner_id: Option<String>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct CnpjArgs {
    /// 14 characters (an establishment; its check digits must be right) or 8 (the company: its head
    /// office, or every event of the company for a history); masks (. / -) and white space
    /// accepted, letters in either case.
    cnpj: String,
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct BatchArgs {
    /// 1 to 100 CNPJs, 14 or 8 characters each, masks accepted; duplicates are merged.
    #[schemars(length(min = 1, max = 100))]
    cnpjs: Vec<String>,
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct ChangesArgs {
    /// One month, YYYY-MM: its changes against the month before.
    month: Option<String>,
    /// This month (YYYY-MM) and every later one.
    since: Option<String>,
    /// One event name or several, comma-separated, no spaces: opened, disappeared, status_changed,
    /// moved, renamed, main_activity_changed, secondary_activities_changed, legal_nature_changed,
    /// capital_changed, size_changed, partner_entered, partner_left, simples_opted_in,
    /// simples_opted_out, mei_opted_in, mei_opted_out, tax_regime_changed.
    event: Option<String>,
    /// Two-letter state code of the establishment (its head office's for a company event).
    state: Option<String>,
    /// RFB municipality code of the establishment (its head office's for a company event).
    city_id: Option<String>,
    /// Main CNAE of the establishment (its head office's for a company event).
    business_sector: Option<String>,
    /// 14 characters (that establishment's events and its company's) or 8 (every event of the
    /// company).
    cnpj: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1, max = 4_294_967_295u64))]
    page: Option<u64>,
    /// Results per page, 1 to 50 (20 when not given).
    #[schemars(range(min = 1, max = 50))]
    per_page: Option<u64>,
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct WatchlistEventsArgs {
    /// The id of one of your watchlists.
    #[schemars(range(min = 1))]
    watchlist_id: u64,
    /// One month, YYYY-MM: its changes against the month before.
    month: Option<String>,
    /// This month (YYYY-MM) and every later one.
    since: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1, max = 4_294_967_295u64))]
    page: Option<u64>,
    /// Results per page, 1 to 50 (20 when not given).
    #[schemars(range(min = 1, max = 50))]
    per_page: Option<u64>,
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct LocaleArgs {
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct CitiesArgs {
    /// Two-letter state code, either case.
    state: Option<String>,
    /// Case- and accent-insensitive substring of the city's name.
    term: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1, max = 4_294_967_295u64))]
    page: Option<u64>,
    /// Results per page, 1 to 50 (20 when not given).
    #[schemars(range(min = 1, max = 50))]
    per_page: Option<u64>,
    locale: Option<Locale>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments read as a query string, then by the REST validation: `(page, per_page, state)`,
    /// or the parameter a 400 names.
    fn check(args: Value, expected: Result<(u64, u64, Option<&str>), &str>) {
        let Value::Object(args) = args else { panic!("arguments are an object") };
        let read = query(&args, &["cnpjs"]).and_then(|params| {
            let (page, per_page) = crate::params::pagination(&params)?;
            let states = crate::params::search_filters(&params, true)?.state;
            Ok((page, per_page, (!states.is_empty()).then(|| states.join(","))))
        });
        let named = read.map_err(|e| match e {
            ApiError::BadRequest(errors) => errors.keys().next().cloned().unwrap_or_default(),
            other => format!("{other:?}"),
        });
        let expected = expected.map(|(page, per_page, state)| (page, per_page, state.map(str::to_owned)));
        assert_eq!(named, expected.map_err(str::to_owned), "{args:?}");
    }

    #[test]
    fn arguments_are_read_as_a_query_string() {
        check(json!({"state": "sp", "page": 2, "per_page": "5"}), Ok((2, 5, Some("SP"))));
        check(json!({"state": "rj,SP", "has_email": true, "capital_from": 1000.5}), Ok((1, 20, Some("RJ,SP"))));
        check(json!({"has_email": "yes"}), Err("has_email"));
        check(json!({"state": null, "cnpjs": ["11222333"], "unknown": 1}), Ok((1, 20, None)));
        check(json!({"per_page": 2.5}), Err("per_page"));
        check(json!({"page": 0}), Err("page"));
        check(json!({"state": ""}), Err("state"));
        check(json!({"state": ["SP"]}), Err("state"));
        check(json!({"page": true}), Err("page"));
    }

    #[test]
    fn every_schema_is_an_object_with_the_locales() {
        for endpoint in Endpoint::ALL {
            let schema = endpoint.input_schema();
            assert_eq!(schema["type"], "object", "{}", endpoint.name());
            let locales = &schema["properties"]["locale"]["enum"];
            assert_eq!(locales, &json!(["pt-br", "en", "es", null]), "{}", endpoint.name());
            let properties = schema["properties"].as_object().unwrap().values();
            assert!(properties.filter_map(|p| p["description"].as_str()).all(|d| !d.contains('\n')));
        }
        let event = &Endpoint::Changes.input_schema()["properties"]["event"]["description"];
        for name in cnpj_store::EVENTS {
            assert!(event.as_str().unwrap().contains(name), "{name} is not described");
        }
    }
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct PartnerSearchArgs {
    /// A case- and accent-insensitive substring of the partner's name.
    name: Option<String>,
    /// A person's masked CPF as served (***123456**) or its six digits; a CNPJ or a company's base
    /// (8 characters) for a legal entity.
    document: Option<String>,
    /// 1 (legal entity), 2 (person) or 3 (foreign).
    #[serde(rename = "type")]
    tipo: Option<PartnerType>,
    /// Partners of at least one company with an establishment in this state (two letters).
    state: Option<String>,
    #[schemars(range(min = 1))]
    page: Option<u64>,
    #[schemars(range(min = 1, max = 50))]
    per_page: Option<u64>,
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[schemars(inline)]
#[expect(dead_code, reason = "a schema only")]
enum PartnerType {
    #[serde(rename = "1")]
    LegalEntity,
    #[serde(rename = "2")]
    Person,
    #[serde(rename = "3")]
    Foreign,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct PartnerArgs {
    /// The partner's id (`p` and 16 characters), as search_partners and company_network give it.
    partner_id: String,
    /// The page of its companies.
    #[schemars(range(min = 1))]
    page: Option<u64>,
    #[schemars(range(min = 1, max = 50))]
    per_page: Option<u64>,
    locale: Option<Locale>,
}

#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct NetworkArgs {
    /// The company: 14 characters or its 8-character base (masks accepted).
    cnpj: String,
    /// Steps from the company, 1 to 3 (default 2).
    #[schemars(range(min = 1, max = 3))]
    depth: Option<u64>,
    /// At most this many nodes, 1 to 500 (default 200).
    #[schemars(range(min = 1, max = 500))]
    max_nodes: Option<u64>,
    /// Leave out companies that are not active.
    active_only: Option<bool>,
    locale: Option<Locale>,
}
