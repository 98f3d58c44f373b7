//! The partners' pages for people logged in (contract §14): a partner's page (`/partners/{id}`:
//! who the registry takes it to be and why, its companies a page at a time, its entries and exits
//! month by month, a legal entity's own company) and a company's network (`/companies/{cnpj}/
//! network`: depth, most nodes and active companies only as a GET form; the picture drawn by
//! `network` for a phone and for a wide screen, both in the page, CSS showing the one that fits;
//! the nodes as a table of links; the data as CSV, JSON and GraphML files). Each is read and
//! priced by the registry as its endpoint is (detail's price), once the person asked for it here
//! (from another site: its price first, `Visit::ask_first`); each file is a request of its own.
//! Not served when the operator turned partners off (`serve --partners off`).

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::i18n::fill;
use crate::network::{self, Network, Width};
use crate::registry::{Pairs, Refusal};
use crate::search::{Choice, coded, query};
use crate::{Common, Fields, Lang, Pages, Visit, see_other, show};

/// A partner's company, as its page lists it.
pub(crate) struct CompanyRow {
    pub cnpj: String,
    pub shown_cnpj: String,
    pub name: String,
    pub qualification: String,
    pub entered: String,
    pub status: String,
    pub place: String,
}

/// An entry or exit of the partner's timeline.
pub(crate) struct Change {
    pub what: String,
    pub cnpj_basico: String,
    pub name: String,
    pub qualification: String,
    pub entered: String,
}

/// A month of the partner's timeline.
pub(crate) struct ChangeMonth {
    pub month: String,
    pub changes: Vec<Change>,
}

#[derive(Template)]
#[template(path = "partner.html")]
pub(crate) struct PartnerPage {
    pub common: Common,
    pub name: String,
    pub kind: String,
    pub document: String,
    pub identity: String,
    pub first_entry: String,
    /// A legal entity's own company, when the registry has it: (CNPJ, name).
    pub company: Option<(String, String)>,
    pub companies: Vec<CompanyRow>,
    pub companies_total: String,
    pub previous: Option<String>,
    pub next: Option<String>,
    pub page: u64,
    pub last_page: u64,
    pub events: Vec<ChangeMonth>,
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The partner's page from the registry's answer (its `data`, and the pagination of its companies).
fn partner_page(visit: &Visit, id: &str, body: &Value) -> PartnerPage {
    let (lang, data) = (visit.lang, &body["data"]);
    let number = |key: &str| body[key].as_u64().unwrap_or(0);
    let (page, last_page) = (number("current_page"), number("last_page"));
    // The id as the registry answers it (the path's may be written otherwise).
    let id = data["partner_id"].as_str().unwrap_or(id);
    let link = |to: u64| format!("/partners/{id}?{}", query(&[("page".to_owned(), to.to_string())]));
    let companies = data["companies"].as_array().into_iter().flatten().map(|c| {
        let t = |key: &str| text(&c[key]);
        let place = [t("municipio"), t("uf")].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" / ");
        CompanyRow {
            shown_cnpj: show::cnpj(&t("cnpj")),
            cnpj: t("cnpj"),
            name: t("razao_social"),
            qualification: coded(&t("qualificacao"), &t("qualificacao_descricao")),
            entered: show::date(lang, &t("data_entrada")),
            status: coded(&t("situacao_cadastral"), &t("situacao_cadastral_descricao")),
            place,
        }
    });
    let company = data["company"].as_object().map(|c| (text(&c["cnpj"]), text(&c["razao_social"])));
    let identity = format!("identity_{}", text(&data["identity"]));
    let name = text(&data["nome"]);
    PartnerPage {
        common: Common { title: name.clone(), ..visit.common("partner") },
        name,
        kind: text(&data["tipo_descricao"]),
        document: text(&data["documento"]),
        identity: lang.t(&identity).to_owned(),
        first_entry: show::date(lang, &text(&data["first_entry"])),
        company,
        companies: companies.collect(),
        companies_total: show::count(lang, data["companies_total"].as_u64().unwrap_or(0)),
        previous: (page > 1).then(|| link((page - 1).min(last_page))),
        next: (page < last_page).then(|| link(page + 1)),
        page,
        last_page,
        events: timeline(lang, &data["events"]),
    }
}

/// The partner's entries and exits (newest month first) as months.
fn timeline(lang: Lang, events: &Value) -> Vec<ChangeMonth> {
    let mut months: Vec<ChangeMonth> = Vec::new();
    for event in events.as_array().into_iter().flatten() {
        let t = |key: &str| text(&event[key]);
        let change = Change {
            what: lang.t(&format!("ev_{}", t("event"))).to_owned(),
            cnpj_basico: t("cnpj_basico"),
            name: t("razao_social"),
            qualification: coded(&t("qualificacao"), &t("qualificacao_descricao")),
            entered: show::date(lang, &t("data_entrada")),
        };
        let month = show::month(lang, &t("month"));
        match months.last_mut() {
            Some(last) if last.month == month => last.changes.push(change),
            _ => months.push(ChangeMonth { month, changes: vec![change] }),
        }
    }
    months
}

/// GET /partners/{partner_id} (`?page=` pages its companies): charged like detail, once the person
/// asked for it here.
pub(crate) async fn partner(
    State(pages): State<Pages>,
    visit: Visit,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    if !visit.own_navigation {
        return visit.ask_first("price_partner", registry.prices().company, raw.as_deref());
    }
    let fields = Fields::parse(raw.as_deref().unwrap_or("").as_bytes());
    let mut params = vec![("locale".to_owned(), visit.lang.locale().code().to_owned())];
    let number = fields.text("page", 12);
    if !number.is_empty() {
        params.push(("page".to_owned(), number));
    }
    match registry.partner(&session.person, id.clone(), params).await {
        Ok(body) => visit.render(StatusCode::OK, &partner_page(&visit, &id, &body)),
        Err(Refusal::NotFound) => visit.message(
            StatusCode::NOT_FOUND,
            "partner",
            visit.lang.t("partner_not_found"),
            true,
            Some(("/search", "search_companies")),
        ),
        Err(refusal) => visit.refused(&refusal),
    }
}

/// A node of the network, as the page's table lists it.
pub(crate) struct NodeRow {
    pub href: Option<String>,
    pub name: String,
    pub kind: String,
    pub document: String,
    pub level: u64,
}

#[derive(Template)]
#[template(path = "network.html")]
pub(crate) struct NetworkPage {
    pub common: Common,
    pub cnpj: String,
    pub depths: Vec<Choice>,
    pub max_nodes: u64,
    pub active_only: bool,
    /// The query the downloads ask with (the form's values).
    pub asked: String,
    pub narrow: String,
    pub wide: String,
    pub nodes: Vec<NodeRow>,
}

/// The network's parameters as the form sends them (the API's names), without the locale.
fn network_params(raw: Option<&str>) -> Pairs {
    let fields = Fields::parse(raw.unwrap_or("").as_bytes());
    ["depth", "max_nodes", "active_only"]
        .into_iter()
        .map(|name| (name.to_owned(), fields.text(name, 12)))
        .filter(|(_, value)| !value.is_empty())
        .collect()
}

/// The network of `cnpj` from the registry (charged), or the page that says why not.
async fn read_network(pages: &Pages, visit: &Visit, cnpj: &str, asked: &Pairs) -> Result<Value, Response> {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return Err(see_other("/login"));
    };
    let mut params = asked.clone();
    params.push(("locale".to_owned(), visit.lang.locale().code().to_owned()));
    match registry.network(&session.person, cnpj.to_owned(), params).await {
        Ok(body) => Ok(body),
        Err(Refusal::NotFound) => Err(visit.message(
            StatusCode::NOT_FOUND,
            "network",
            visit.lang.t("company_not_found"),
            true,
            Some(("/search", "search_companies")),
        )),
        Err(Refusal::Invalid(invalid)) => {
            let message = invalid.into_iter().map(|(_, m)| m).collect::<Vec<_>>().join(" ");
            let back = format!("/companies/{}/network", query_safe(cnpj));
            Err(visit.message(StatusCode::BAD_REQUEST, "network", &message, true, Some((&back, "network"))))
        }
        Err(refusal) => Err(visit.refused(&refusal)),
    }
}

/// A CNPJ as typed, safe in a path of this site (letters and digits; anything else dropped).
fn query_safe(cnpj: &str) -> String {
    cnpj.chars().filter(char::is_ascii_alphanumeric).collect()
}

/// The page's data from the network (`data` of the answer).
fn network_page(visit: &Visit, data: &Value, net: &Network, [narrow, wide]: [String; 2]) -> NetworkPage {
    let lang = visit.lang;
    let root = net.nodes.iter().find(|n| n.id == net.root);
    // The links' CNPJ as the registry answers it (the path's may be written otherwise): the head
    // office's, else the company's 8 characters.
    let cnpj = root.and_then(|n| n.cnpj.clone()).unwrap_or_else(|| net.root.clone());
    let root = root.map_or(cnpj.as_str(), |n| n.label.as_str());
    let nodes = net
        .nodes
        .iter()
        .map(|n| NodeRow {
            href: match (n.kind.as_str(), &n.cnpj) {
                ("company", Some(cnpj)) => Some(format!("/companies/{cnpj}")),
                ("company", None) => None,
                _ => Some(format!("/partners/{}", n.id)),
            },
            name: n.label.clone(),
            kind: lang.t(network::kind_word(n, &net.root)).to_owned(),
            document: match (&n.cnpj, &n.documento) {
                (Some(cnpj), _) => show::cnpj(cnpj),
                (None, Some(documento)) => documento.clone(),
                _ => String::new(),
            },
            level: n.level,
        })
        .collect();
    let asked = [
        ("depth".to_owned(), net.depth.to_string()),
        ("max_nodes".to_owned(), net.max_nodes.to_string()),
        ("active_only".to_owned(), net.active_only.to_string()),
    ];
    NetworkPage {
        common: Common { title: fill(lang.t("net_title"), &[root]), ..visit.common("network") },
        depths: (1..=3)
            .map(|d| Choice { value: d.to_string(), label: d.to_string(), selected: d == net.depth })
            .collect(),
        max_nodes: net.max_nodes,
        active_only: data["active_only"] == true,
        asked: query(&asked),
        narrow,
        wide,
        nodes,
        cnpj,
    }
}

/// GET /companies/{cnpj}/network: the network's form, picture, files and nodes; charged like
/// the network endpoint once the person asked for it here.
pub(crate) async fn network(
    State(pages): State<Pages>,
    visit: Visit,
    Path(cnpj): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(registry) = pages.registry.as_deref() else { return see_other("/login") };
    if visit.session.is_none() {
        return see_other("/login");
    }
    if !visit.own_navigation {
        return visit.ask_first("price_network", registry.prices().company, raw.as_deref());
    }
    let asked = network_params(raw.as_deref());
    let body = match read_network(&pages, &visit, &cnpj, &asked).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let Ok(net) = Network::parse(&body["data"]) else {
        tracing::error!("the registry's network answer has another shape");
        return visit.refused(&Refusal::Failed);
    };
    // Drawn off the async threads: 500 nodes take a quarter of a second a picture.
    let (lang, to_draw) = (visit.lang, net.clone());
    let drawn = tokio::task::spawn_blocking(move || {
        [Width::Narrow, Width::Wide].map(|width| network::svg(&to_draw, width, lang))
    });
    match drawn.await {
        Ok(pictures) => visit.render(StatusCode::OK, &network_page(&visit, &body["data"], &net, pictures)),
        Err(e) => {
            tracing::error!(error = %e, "drawing a network failed");
            visit.refused(&Refusal::Failed)
        }
    }
}

/// The network's files.
#[derive(Clone, Copy)]
pub(crate) enum File {
    Csv,
    Json,
    Graphml,
}

/// GET /companies/{cnpj}/network.{csv,json,graphml}: the network as a file (an attachment),
/// charged like the network endpoint once the person asked for it here.
async fn file(pages: Pages, visit: Visit, cnpj: String, raw: Option<String>, kind: File) -> Response {
    let Some(registry) = pages.registry.as_deref() else { return see_other("/login") };
    if visit.session.is_none() {
        return see_other("/login");
    }
    if !visit.own_navigation {
        return visit.ask_first("price_network", registry.prices().company, raw.as_deref());
    }
    let body = match read_network(&pages, &visit, &cnpj, &network_params(raw.as_deref())).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let data = &body["data"];
    let Ok(net) = Network::parse(data) else {
        tracing::error!("the registry's network answer has another shape");
        return visit.refused(&Refusal::Failed);
    };
    // The root is a company's 8 characters (letters and digits): safe in a file name.
    let base: String = net.root.chars().filter(char::is_ascii_alphanumeric).collect();
    let (content_type, extension, text) = match kind {
        File::Csv => ("text/csv; charset=utf-8", "csv", network::csv(&net)),
        File::Json => ("application/json", "json", serde_json::to_string_pretty(data).unwrap_or_default()),
        File::Graphml => ("application/graphml+xml; charset=utf-8", "graphml", network::graphml(&net)),
    };
    let disposition = format!("attachment; filename=\"network-{base}.{extension}\"");
    ([(header::CONTENT_TYPE, content_type.to_owned()), (header::CONTENT_DISPOSITION, disposition)], text)
        .into_response()
}

pub(crate) async fn csv(
    State(pages): State<Pages>,
    visit: Visit,
    Path(cnpj): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    file(pages, visit, cnpj, raw, File::Csv).await
}

pub(crate) async fn json(
    State(pages): State<Pages>,
    visit: Visit,
    Path(cnpj): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    file(pages, visit, cnpj, raw, File::Json).await
}

pub(crate) async fn graphml(
    State(pages): State<Pages>,
    visit: Visit,
    Path(cnpj): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    file(pages, visit, cnpj, raw, File::Graphml).await
}
