//! `/companies/{cnpj}`, for people logged in: a company's record laid out for reading (identity,
//! status, address with a one-line form to copy, contact, activities, partners with their
//! documents masked, Simples and tax regime), its company's establishments a page at a time, and
//! its history as a timeline, newest month first; read and priced like the detail endpoint by the
//! registry (opened from another site: its price first, `Visit::ask_first`). While partners are
//! served, each partner links to its page and the company to its network. A form adds it to
//! one of the person's watchlists (`POST /companies/{cnpj}/watch`).

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cnpj_model::CnpjQuery;
use serde_json::Value;

use crate::registry::Refusal;
use crate::search::{Choice, Row, coded, query, row};
use crate::{Common, Fields, Lang, Pages, Visit, blocking, see_other, show};

/// A term and its value.
pub(crate) struct Line {
    pub term: String,
    pub value: String,
}

pub(crate) struct PartnerRow {
    /// Its page's id, when partners are served.
    pub id: Option<String>,
    pub name: String,
    pub qualification: String,
    pub kind: String,
    pub document: String,
    pub entered: String,
    pub age: String,
    pub representative: String,
}

/// One change of the timeline.
pub(crate) struct Event {
    pub what: String,
    pub field: String,
    pub cnpj: String,
    pub old: String,
    pub new: String,
}

/// A month of the timeline.
pub(crate) struct Month {
    pub month: String,
    pub events: Vec<Event>,
}

#[derive(Template)]
#[template(path = "company.html")]
pub(crate) struct CompanyPage {
    pub common: Common,
    pub cnpj: String,
    pub shown_cnpj: String,
    pub name: String,
    /// Not in the month served (gone): only its history is shown.
    pub gone: bool,
    pub identity: Vec<Line>,
    pub status: Vec<Line>,
    pub address: Vec<Line>,
    pub one_line: String,
    pub contact: Vec<Line>,
    pub main_activity: String,
    pub secondary: Vec<String>,
    pub partners: Vec<PartnerRow>,
    /// Partners are served: the page links to the company's network.
    pub network: bool,
    pub tax: Vec<Line>,
    pub establishments: Vec<Row>,
    pub establishments_total: String,
    pub previous: Option<String>,
    pub next: Option<String>,
    pub page: u64,
    pub last_page: u64,
    pub history: Vec<Month>,
    pub lists: Vec<Choice>,
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The lines of `pairs` (label key, value) that have a value.
fn lines(lang: Lang, pairs: Vec<(&str, String)>) -> Vec<Line> {
    pairs
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| Line { term: lang.t(key).to_owned(), value })
        .collect()
}

/// The record's sections: identity, status, address, contact, tax.
fn sections(lang: Lang, r: &Value, page: &mut CompanyPage) {
    let t = |key: &str| text(&r[key]);
    let a = |key: &str| text(&r["endereco"][key]);
    let c = |key: &str| text(&r["contato"][key]);
    page.identity = lines(
        lang,
        vec![
            ("cnpj", show::cnpj(&t("cnpj"))),
            ("company_name", t("razao_social")),
            ("trading_name", t("nome_fantasia")),
            ("head_or_branch", t("matriz_filial")),
            ("legal_nature", coded(&t("natureza_juridica_code"), &t("natureza_juridica"))),
            ("size", t("porte_empresa")),
            ("capital", show::money(lang, &t("capital_social"))),
            ("opening_date", show::date(lang, &t("data_inicio_atividades"))),
            ("federative_entity", t("ente_federativo_responsavel")),
        ],
    );
    page.status = lines(
        lang,
        vec![
            ("reg_status", t("situacao_cadastral")),
            ("status_date", show::date(lang, &t("data_situacao_cadastral"))),
            ("status_reason", t("motivo_situacao_cadastral")),
            ("special_status", t("situacao_especial")),
            ("special_status_date", show::date(lang, &t("data_situacao_especial"))),
        ],
    );
    let place = match (a("municipio_nome"), a("nome_cidade_exterior")) {
        (city, abroad) if city.is_empty() => abroad,
        (city, _) => city,
    };
    page.address = lines(
        lang,
        vec![
            ("street", a("logradouro")),
            ("number", a("numero")),
            ("complement", a("complemento")),
            ("neighborhood", a("bairro")),
            ("city", place),
            ("state", a("uf")),
            ("cep", show::cep(&a("cep"))),
            ("country", a("pais")),
        ],
    );
    page.one_line = a("endereco_completo");
    page.contact = lines(lang, vec![("phone", c("telefone_formatado")), ("fax", c("fax")), ("email", c("email"))]);
    let simples = if r["simples_nacional"] == 1 { "yes" } else { "no" };
    page.tax = lines(lang, vec![("simples", lang.t(simples).to_owned()), ("tax_regime", t("regime_tributario"))]);
    page.main_activity = coded(&t("cnae_fiscal"), &t("cnae_fiscal_descricao"));
    page.secondary = r["cnaes_secundarios"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| coded(&text(&s["codigo"]), &text(&s["descricao"])))
        .collect();
}

/// The record's partners, each with its page's id when partners are served (`ids`: the company
/// page's `partners`, in the record's order; `null` when not served).
fn partners(lang: Lang, record: &Value, ids: &Value) -> Vec<PartnerRow> {
    let list = record["socios"].as_array().map_or(&[][..], Vec::as_slice);
    list.iter()
        .enumerate()
        .map(|(i, p)| {
            let t = |key: &str| text(&p[key]);
            let representative = t("nome_representante");
            PartnerRow {
                id: ids[i]["partner_id"].as_str().map(str::to_owned),
                name: t("nome"),
                qualification: coded(&t("qualificacao"), &t("qualificacao_descricao")),
                kind: t("tipo_descricao"),
                document: t("documento"),
                entered: show::date(lang, &t("data_entrada")),
                age: t("faixa_etaria"),
                representative: if representative.is_empty() {
                    representative
                } else {
                    format!("{representative} ({})", t("representante_legal"))
                },
            }
        })
        .collect()
}

/// An old or new value of a change as read: codes with their labels, a list, a partner, money.
fn change_value(lang: Lang, field: &str, value: &Value, description: &Value) -> String {
    match (value, description) {
        (Value::Null, _) => "—".to_owned(),
        (Value::Array(codes), Value::Array(labels)) => {
            let pairs = codes.iter().zip(labels.iter().map(Some).chain(std::iter::repeat(None)));
            pairs.map(|(c, l)| coded(&text(c), &l.map(text).unwrap_or_default())).collect::<Vec<_>>().join("; ")
        }
        (Value::Array(codes), _) => codes.iter().map(text).collect::<Vec<_>>().join("; "),
        (Value::Object(p), _) => {
            let document = text(&p["documento"]);
            let who = if document.is_empty() { text(&p["nome"]) } else { format!("{} ({document})", text(&p["nome"])) };
            coded(&who, &text(description))
        }
        (value, _) => match field {
            "capital_social" => show::money(lang, &text(value)),
            "cep" => show::cep(&text(value)),
            "opcao_simples" | "opcao_mei" => lang.t(if text(value) == "S" { "yes" } else { "no" }).to_owned(),
            _ => coded(&text(value), &text(description)),
        },
    }
}

/// The history (newest first) as months of events.
fn timeline(lang: Lang, history: &Value) -> Vec<Month> {
    let mut months: Vec<Month> = Vec::new();
    for change in history.as_array().into_iter().flatten() {
        let field = text(&change["field"]);
        let event = Event {
            what: lang.t(&format!("ev_{}", text(&change["event"]))).to_owned(),
            field: if field.is_empty() { String::new() } else { lang.t(&format!("f_{field}")).to_owned() },
            cnpj: show::cnpj(&text(&change["cnpj"])),
            old: change_value(lang, &field, &change["old"], &change["old_description"]),
            new: change_value(lang, &field, &change["new"], &change["new_description"]),
        };
        let month = show::month(lang, &text(&change["month"]));
        match months.last_mut() {
            Some(last) if last.month == month => last.events.push(event),
            _ => months.push(Month { month, events: vec![event] }),
        }
    }
    months
}

/// The page's data from the registry's answer.
fn company_page(visit: &Visit, cnpj: &str, data: &Value) -> CompanyPage {
    let lang = visit.lang;
    let record = &data["record"];
    let listed = &data["establishments"];
    let number = |key: &str| listed[key].as_u64().unwrap_or(0);
    let (page, last_page) = (number("current_page"), number("last_page"));
    let link = |to: u64| format!("/companies/{cnpj}?{}", query(&[("page".to_owned(), to.to_string())]));
    let shown = if record.is_null() { cnpj.to_owned() } else { text(&record["cnpj"]) };
    let mut out = CompanyPage {
        common: visit.common("company"),
        shown_cnpj: show::cnpj(&shown),
        cnpj: shown,
        name: text(&record["razao_social"]),
        gone: record.is_null(),
        identity: Vec::new(),
        status: Vec::new(),
        address: Vec::new(),
        one_line: String::new(),
        contact: Vec::new(),
        main_activity: String::new(),
        secondary: Vec::new(),
        partners: partners(lang, record, &data["partners"]),
        network: data["partners"].is_array(),
        tax: Vec::new(),
        establishments: listed["data"].as_array().into_iter().flatten().map(|item| row(lang, item)).collect(),
        establishments_total: show::count(lang, number("total")),
        previous: (page > 1).then(|| link((page - 1).min(last_page))),
        next: (page < last_page).then(|| link(page + 1)),
        page,
        last_page,
        history: timeline(lang, &data["history"]),
        lists: Vec::new(),
    };
    if !record.is_null() {
        sections(lang, record, &mut out);
    }
    out.common.title = if out.name.is_empty() { out.shown_cnpj.clone() } else { out.name.clone() };
    out
}

/// GET /companies/{cnpj} (`?page=` pages the establishments): charged like detail, once the
/// person asked for it here (opened from another site, its price first).
pub(crate) async fn page(
    State(pages): State<Pages>,
    visit: Visit,
    Path(cnpj): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    if !visit.own_navigation {
        return visit.ask_first("price_company", registry.prices().company, raw.as_deref());
    }
    let fields = Fields::parse(raw.as_deref().unwrap_or("").as_bytes());
    let mut params = vec![("locale".to_owned(), visit.lang.locale().code().to_owned())];
    let number = fields.text("page", 12);
    if !number.is_empty() {
        params.push(("page".to_owned(), number));
    }
    let body = match registry.company(&session.person, cnpj.clone(), params).await {
        Ok(body) => body,
        Err(Refusal::NotFound) => {
            return visit.message(
                StatusCode::NOT_FOUND,
                "company",
                visit.lang.t("company_not_found"),
                true,
                Some(("/search", "search_companies")),
            );
        }
        Err(refusal) => return visit.refused(&refusal),
    };
    let mut page = company_page(&visit, &cnpj, &body["data"]);
    let id = session.person.id;
    match blocking(&pages, move |a| a.watchlists(id)).await {
        Ok(lists) => {
            page.lists =
                lists.into_iter().map(|l| Choice { value: l.id.to_string(), label: l.name, selected: false }).collect();
            visit.render(StatusCode::OK, &page)
        }
        Err(e) => e.into_response(),
    }
}

/// POST /companies/{cnpj}/watch: `list` (one of the person's), `whole` (the company's 8
/// characters rather than this establishment's 14); answered with a message and a way back.
pub(crate) async fn watch(State(pages): State<Pages>, visit: Visit, Path(cnpj): Path<String>, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    if !visit.post_allowed(form.get("csrf_token"), true) {
        return visit.forbidden();
    }
    let Some(list) = form.get("list").and_then(|l| l.parse::<i64>().ok()) else {
        return visit.message(StatusCode::BAD_REQUEST, "watch", visit.lang.t("invalid"), true, None);
    };
    let entry = match CnpjQuery::parse(&cnpj) {
        Ok(query) if form.get("whole").is_some() => query.basico().to_owned(),
        _ => cnpj.clone(),
    };
    let back =
        if cnpj.bytes().all(|b| b.is_ascii_alphanumeric()) { format!("/companies/{cnpj}") } else { "/search".into() };
    match registry.watch(&session.person, list, entry).await {
        Ok(()) => {
            visit.message(StatusCode::OK, "watch", visit.lang.t("watched"), false, Some((&back, "back_to_company")))
        }
        Err(Refusal::Invalid(invalid)) => {
            let message = invalid.into_iter().map(|(_, m)| m).collect::<Vec<_>>().join(" ");
            visit.message(StatusCode::BAD_REQUEST, "watch", &message, true, Some((&back, "back_to_company")))
        }
        Err(refusal) => visit.refused(&refusal),
    }
}
