//! `/search`, for people logged in: every filter of `GET /api/v1/companies/search` as a form (the
//! state and the city picked from the served cities, the activity by its code or by words of its
//! description, among the main activities or the secondary ones too, the other codes from the
//! reference data, the capital, and the yes-or-no filters), answered by the registry as that
//! endpoint answers and charged to the person as it charges; the results as a table with the exact
//! total and pages, each row linking to its company, and a link to export them.

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use cnpj_accounts::Person;
use cnpj_model::{CodeLabel, ReferenceData, fold};
use serde_json::Value;

use crate::registry::{Pairs, Refusal, Registry};
use crate::{Common, Fields, Lang, Pages, Visit, see_other, show};

/// The search's filters the form sends as typed, by their API names (the activity's words are
/// resolved to `business_sector`, or `any_sector` with the secondary activities), with the key
/// of each one's label.
pub(crate) const TYPED: [(&str, &str); 18] = [
    ("state", "state"),
    ("city_id", "city"),
    ("situacao_cadastral", "reg_status"),
    ("porte_empresa_code", "size"),
    ("nature_code", "legal_nature"),
    ("opening_date_from", "opened_from"),
    ("opening_date_to", "opened_to"),
    ("trading_name", "trading_name"),
    ("neighborhood", "neighborhood"),
    ("zip_code", "cep"),
    ("cnpj", "cnpj"),
    ("capital_from", "capital_from"),
    ("capital_to", "capital_to"),
    ("has_email", "has_email"),
    ("has_phone", "has_phone"),
    ("head_office", "head_office"),
    ("simples", "simples"),
    ("mei", "mei"),
];

/// The code filters the form offers as multi-selects (lists of codes, any of them: contract §15).
const LISTS: [&str; 5] = ["state", "city_id", "situacao_cadastral", "porte_empresa_code", "nature_code"];
/// The longest list taken (50 codes of 7 characters and their commas).
const MAX_LIST: usize = 400;

/// The yes-or-no filters, by their API names (the key of each one's label too).
const FLAGS: [&str; 5] = ["has_email", "has_phone", "head_office", "simples", "mei"];

/// The longest value taken of a field.
pub(crate) const MAX_FIELD: usize = 200;
/// The most activities offered to choose among.
const MAX_CHOICES: usize = 200;
/// The page sizes offered (the API's default first).
const PER_PAGE: [&str; 3] = ["20", "10", "50"];

/// An option of a picker.
pub(crate) struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

/// The filter form as shown.
pub(crate) struct Form {
    /// The multi-selects (none chosen: any).
    pub states: Vec<Choice>,
    /// The chosen states' cities (none until a state is chosen).
    pub cities: Vec<Choice>,
    pub statuses: Vec<Choice>,
    pub sizes: Vec<Choice>,
    pub natures: Vec<Choice>,
    pub per_page: Vec<Choice>,
    pub activity: String,
    /// The activities the words match, when there are several to choose among.
    pub activities: Vec<Choice>,
    /// What the activity's words came to (several to choose among, none).
    pub activity_note: Option<String>,
    /// The typed fields by name (`trading_name`, …), as typed.
    pub typed: Vec<(&'static str, String)>,
    /// Whether the activity is searched among the secondary activities too (`any_sector`).
    pub secondary: bool,
    /// The yes-or-no filters: name, label and their options (any, yes, no).
    pub flags: Vec<(&'static str, String, Vec<Choice>)>,
    /// Each refused parameter: its label and the API's message.
    pub invalid: Vec<(String, String)>,
    /// The filters searched, in a line (the form folds under it once there are results).
    pub summary: String,
}

impl Form {
    /// A typed field's value.
    pub fn value(&self, name: &str) -> &str {
        self.typed.iter().find(|(n, _)| *n == name).map_or("", |(_, v)| v.as_str())
    }
}

/// A result as a row of the table.
pub(crate) struct Row {
    pub cnpj: String,
    pub shown_cnpj: String,
    pub name: String,
    pub trading_name: String,
    pub status: String,
    pub place: String,
    pub activity: String,
    pub opened: String,
    pub size: String,
}

/// A page of results.
pub(crate) struct Results {
    pub total: String,
    pub from: u64,
    pub to: u64,
    pub page: u64,
    pub last_page: u64,
    pub rows: Vec<Row>,
    /// Links to the first, previous, next and last pages (none where there is none to go to).
    pub first: Option<String>,
    pub previous: Option<String>,
    pub next: Option<String>,
    pub last: Option<String>,
    pub export: String,
    /// The link to export the whole result as a job, and its words (the rows and their credits).
    pub export_all: String,
    pub export_all_text: String,
}

#[derive(Template)]
#[template(path = "search.html")]
pub(crate) struct SearchPage {
    pub common: Common,
    pub form: Form,
    pub notice: Option<String>,
    pub results: Option<Results>,
}

/// What the activity field asks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Activity {
    Any,
    /// A code: typed as one, or the one activity the words match, or chosen among them.
    Code(String),
    /// Words that match several activities, none chosen yet.
    Choose,
    /// Words that match no activity.
    Unknown,
}

/// Whether a typed activity is a code: digits and the mask's characters only.
fn is_code(typed: &str) -> bool {
    typed.bytes().any(|b| b.is_ascii_digit()) && typed.bytes().all(|b| b.is_ascii_digit() || b"-./ ".contains(&b))
}

/// The activities whose description (folded) holds every word of `words` (folded), in code order.
fn matching<'a>(words: &str, sectors: &'a [CodeLabel]) -> Vec<&'a CodeLabel> {
    let words: Vec<String> = fold(words).split_whitespace().map(str::to_owned).collect();
    if words.is_empty() || is_code(&words.join(" ")) {
        return Vec::new();
    }
    let holds = |s: &&CodeLabel| {
        let description = fold(&s.description);
        words.iter().all(|w| description.contains(w.as_str()))
    };
    sectors.iter().filter(holds).collect()
}

/// What the activity field asks: `typed` as the person typed it, `chosen` the code picked among
/// the matches of its words (or carried by a link), `matches` those of the words.
fn activity(typed: &str, chosen: &str, matches: &[&CodeLabel]) -> Activity {
    match (typed.is_empty(), chosen.is_empty()) {
        (true, true) => return Activity::Any,
        (true, false) => return Activity::Code(chosen.to_owned()),
        _ if is_code(typed) => return Activity::Code(typed.to_owned()),
        _ => {}
    }
    match matches {
        _ if matches.iter().any(|m| m.code == chosen) => Activity::Code(chosen.to_owned()),
        [one] => Activity::Code(one.code.clone()),
        [] => Activity::Unknown,
        _ => Activity::Choose,
    }
}

/// The search's parameters from a form or a link: the typed filters given, then the activity's
/// code when it has one (as `any_sector` when the secondary activities are asked too).
pub(crate) fn filters(fields: &Fields, activity: &Activity) -> Pairs {
    let mut pairs: Pairs = TYPED
        .iter()
        .map(|(name, _)| ((*name).to_owned(), field(fields, name)))
        .filter(|(_, value)| !value.is_empty())
        .collect();
    if let Activity::Code(code) = activity {
        let name = if secondary(fields) { "any_sector" } else { "business_sector" };
        pairs.push((name.to_owned(), code.clone()));
    }
    pairs
}

/// A filter's field as given: a list (a multi-select's choices, or commas) up to [`MAX_LIST`]
/// characters, any other up to [`MAX_FIELD`].
fn field(fields: &Fields, name: &str) -> String {
    fields.text(name, if LISTS.contains(&name) { MAX_LIST } else { MAX_FIELD })
}

/// Whether the activity is asked among the secondary activities too: the form's box, or a link's
/// `any_sector`.
fn secondary(fields: &Fields) -> bool {
    fields.get("secondary").is_some() || !fields.text("any_sector", 20).is_empty()
}

/// The activity's code as chosen or carried by a link (`business_sector` or `any_sector`).
pub(crate) fn chosen_code(fields: &Fields) -> String {
    let code = fields.text("business_sector", 20);
    if code.is_empty() { fields.text("any_sector", 20) } else { code }
}

/// A query string of `pairs`.
pub(crate) fn query(pairs: &[(String, String)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

/// The options of a picker, `selected` marked, after an option for "any".
fn choices(lang: Lang, options: impl IntoIterator<Item = (String, String)>, selected: &str) -> Vec<Choice> {
    let any = Choice { value: String::new(), label: lang.t("any").to_owned(), selected: selected.is_empty() };
    let options = options.into_iter().map(|(value, label)| Choice { selected: value == selected, value, label });
    std::iter::once(any).chain(options).collect()
}

/// The options of a multi-select, those in `selected` (a comma-separated list) marked; none marked
/// means any.
fn several(options: impl IntoIterator<Item = (String, String)>, selected: &str) -> Vec<Choice> {
    let selected: Vec<&str> = selected.split(',').map(str::trim).collect();
    options
        .into_iter()
        .map(|(value, label)| Choice { selected: selected.contains(&value.as_str()), value, label })
        .collect()
}

/// The cities of the chosen states (a list): by name, and with their state when there are
/// several states.
fn cities_of(registry: &dyn Registry, states: &str) -> Vec<(String, String)> {
    let states: Vec<&str> = states.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let several = states.len() > 1;
    states
        .iter()
        .flat_map(|state| {
            registry.cities(state).into_iter().map(move |c| {
                let label = if several { format!("{}/{state}", c.name) } else { c.name };
                (c.id, label)
            })
        })
        .collect()
}

/// `code – label` (the code alone without a label).
pub(crate) fn coded(code: &str, label: &str) -> String {
    if label.is_empty() { code.to_owned() } else { format!("{code} – {label}") }
}

/// The form as the fields ask it, its pickers from the reference data and the registry's cities.
fn form(
    lang: Lang,
    registry: &dyn Registry,
    reference: &ReferenceData,
    fields: &Fields,
    matches: &[&CodeLabel],
) -> Form {
    let value = |name: &str| field(fields, name);
    let state = value("state").to_uppercase();
    let mut states: Vec<(String, String)> = reference.states.iter().map(|s| (s.clone(), s.clone())).collect();
    states.push(("EX".to_owned(), lang.t("abroad").to_owned()));
    let cities = several(cities_of(registry, &state), &value("city_id"));
    let statuses = reference
        .registration_statuses
        .iter()
        .map(|(code, label)| (code.clone(), coded(code, label.as_str().unwrap_or_default())));
    let sizes = reference
        .company_sizes
        .iter()
        .map(|code| (code.clone(), coded(code, &registry.label(lang.locale(), "porte_empresa", code))));
    let natures = reference.legal_natures.iter().map(|n| (n.code.clone(), coded(&n.code, &n.description)));
    let per_page = value("per_page");
    let chosen = chosen_code(fields);
    let yes_no = |name: &str| {
        let options = [("true", "yes"), ("false", "no")].map(|(v, key)| (v.to_owned(), lang.t(key).to_owned()));
        choices(lang, options, &value(name))
    };
    Form {
        states: several(states, &state),
        cities,
        statuses: several(statuses, &value("situacao_cadastral")),
        sizes: several(sizes, &value("porte_empresa_code")),
        natures: several(natures, &value("nature_code")),
        per_page: PER_PAGE
            .iter()
            .map(|n| Choice { value: (*n).to_owned(), label: (*n).to_owned(), selected: per_page == *n })
            .collect(),
        activity: value("activity"),
        activities: if matches.len() > 1 {
            let options = matches.iter().take(MAX_CHOICES).map(|m| (m.code.clone(), coded(&m.code, &m.description)));
            choices(lang, options, &chosen)
        } else {
            Vec::new()
        },
        activity_note: None,
        typed: TYPED.iter().skip(5).map(|(name, _)| (*name, value(name))).collect(),
        secondary: secondary(fields),
        flags: FLAGS.iter().map(|name| (*name, lang.t(name).to_owned(), yes_no(name))).collect(),
        invalid: Vec::new(),
        summary: String::new(),
    }
}

/// GET /search: the form; with filters, a page of results (charged as the API charges it, once
/// the person asked for it here: opened from another site, its price first).
pub(crate) async fn page(State(pages): State<Pages>, visit: Visit, RawQuery(raw): RawQuery) -> Response {
    let (Some((_, session)), Some(registry)) = (visit.session.as_ref(), pages.registry.as_deref()) else {
        return see_other("/login");
    };
    let fields = Fields::parse(raw.as_deref().unwrap_or("").as_bytes());
    let lang = visit.lang;
    let reference = registry.reference_data(lang.locale());
    let typed = fields.text("activity", MAX_FIELD);
    let matches = matching(&typed, &reference.business_sectors);
    let asked = activity(&typed, &chosen_code(&fields), &matches);
    let mut form = form(lang, registry, &reference, &fields, &matches);
    form.activity_note = match asked {
        Activity::Choose => Some(format!("{} {}", show::count(lang, matches.len() as u64), lang.t("activities_match"))),
        Activity::Unknown => Some(lang.t("no_activity").to_owned()),
        _ => None,
    };
    let filters = filters(&fields, &asked);
    let shown: Vec<String> = filters.iter().map(|(name, value)| format!("{}: {value}", label_of(lang, name))).collect();
    form.summary = shown.join(" · ");
    let ready = matches!(asked, Activity::Any | Activity::Code(_)) && fields.get("pick").is_none();
    let page = SearchPage { common: visit.common("search_companies"), form, notice: None, results: None };
    match (ready, filters.is_empty()) {
        (true, false) if !visit.own_navigation => {
            visit.ask_first("price_search", registry.prices().search, raw.as_deref())
        }
        (true, false) => search(&visit, registry, &session.person, page, &fields, filters).await,
        (_, true) if fields.get("go").is_some() => {
            let notice = Some(lang.t("give_a_filter").to_owned());
            visit.render(StatusCode::OK, &SearchPage { notice, ..page })
        }
        _ => visit.render(StatusCode::OK, &page),
    }
}

/// Runs the search and shows its page of results (or why it was refused).
async fn search(
    visit: &Visit,
    registry: &dyn Registry,
    person: &Person,
    mut page: SearchPage,
    fields: &Fields,
    filters: Pairs,
) -> Response {
    let lang = visit.lang;
    let mut carried = filters.clone();
    let typed = fields.text("activity", MAX_FIELD);
    if !typed.is_empty() {
        carried.push(("activity".to_owned(), typed));
    }
    let per_page = fields.text("per_page", 4);
    if !per_page.is_empty() {
        carried.push(("per_page".to_owned(), per_page));
    }
    let mut asked = carried.clone();
    asked.retain(|(name, _)| name != "activity");
    let number = fields.text("page", 12);
    if !number.is_empty() {
        asked.push(("page".to_owned(), number));
    }
    asked.push(("locale".to_owned(), lang.locale().code().to_owned()));
    match registry.search(person, asked).await {
        Ok(body) => {
            page.results = Some(results(lang, &body, &carried, &filters));
            visit.render(StatusCode::OK, &page)
        }
        Err(Refusal::Invalid(invalid)) => {
            page.form.invalid = invalid.into_iter().map(|(param, message)| (label_of(lang, &param), message)).collect();
            visit.render(StatusCode::BAD_REQUEST, &page)
        }
        Err(refusal) => visit.refused(&refusal),
    }
}

/// The label of a search parameter as the form names it.
pub(crate) fn label_of(lang: Lang, param: &str) -> String {
    let key = match param {
        "business_sector" | "any_sector" => "activity",
        "page" | "per_page" => "per_page",
        other => TYPED.iter().find(|(name, _)| *name == other).map_or(other, |(_, key)| key),
    };
    lang.t(key).to_owned()
}

/// A search's answer as the page shows it; links keep `carried` (the filters, the activity's
/// words, the page size).
fn results(lang: Lang, body: &Value, carried: &Pairs, filters: &Pairs) -> Results {
    let number = |key: &str| body[key].as_u64().unwrap_or(0);
    let (page, last_page) = (number("current_page"), number("last_page"));
    let link = |to: u64| {
        let mut pairs = carried.clone();
        pairs.push(("page".to_owned(), to.to_string()));
        format!("/search?{}", query(&pairs))
    };
    let rows = body["data"].as_array().map_or(&[][..], Vec::as_slice).iter().map(|item| row(lang, item)).collect();
    Results {
        total: show::count(lang, number("total")),
        from: number("from"),
        to: number("to"),
        page,
        last_page,
        rows,
        first: (page > 1).then(|| link(1)),
        previous: (page > 1).then(|| link((page - 1).min(last_page))),
        next: (page < last_page).then(|| link(page + 1)),
        last: (page < last_page).then(|| link(last_page)),
        export: format!("/search/export?{}", query(filters)),
        export_all: format!("/search/exports?{}", query(filters)),
        export_all_text: {
            let n = show::count(lang, number("total"));
            crate::i18n::fill(lang.t("export_all_link"), &[&n, &n])
        },
    }
}

/// A search item as a row.
pub(crate) fn row(lang: Lang, item: &Value) -> Row {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let address = &item["endereco"];
    let (city, uf) = (text(&address["municipio_nome"]), text(&address["uf"]));
    Row {
        cnpj: text(&item["cnpj"]),
        shown_cnpj: show::cnpj(&text(&item["cnpj"])),
        name: text(&item["razao_social"]),
        trading_name: text(&item["nome_fantasia"]),
        status: text(&item["situacao_cadastral"]),
        place: if city.is_empty() { uf } else { format!("{city}/{uf}") },
        activity: coded(&text(&item["cnae_fiscal"]), &text(&item["cnae_fiscal_descricao"])),
        opened: show::date(lang, &text(&item["data_inicio_atividades"])),
        size: text(&item["porte_empresa"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sectors() -> Vec<CodeLabel> {
        [
            ("4711302", "Comércio varejista de mercadorias em geral - supermercados"),
            ("4712100", "Comércio varejista de mercadorias em geral - minimercados"),
            ("1091102", "Fabricação de produtos de padaria e confeitaria"),
        ]
        .map(|(code, description)| CodeLabel { code: code.into(), description: description.into() })
        .to_vec()
    }

    fn check(typed: &str, chosen: &str, expected: Activity) {
        let sectors = sectors();
        let matches = matching(typed, &sectors);
        assert_eq!(activity(typed, chosen, &matches), expected, "{typed:?} {chosen:?}");
    }

    fn check_filters(query: &str, expected: &[(&str, &str)]) {
        let fields = Fields::parse(query.as_bytes());
        let asked = activity(&fields.text("activity", MAX_FIELD), &chosen_code(&fields), &[]);
        let pairs = filters(&fields, &asked);
        let expected: Vec<(String, String)> = expected.iter().map(|(n, v)| ((*n).into(), (*v).into())).collect();
        assert_eq!(pairs, expected, "{query}");
    }

    #[test]
    fn the_activity_among_the_secondary_ones_and_the_new_filters() {
        check_filters("activity=4711-3/02", &[("business_sector", "4711-3/02")]);
        check_filters("activity=4711-3/02&secondary=1", &[("any_sector", "4711-3/02")]);
        // A link carries the code as the search asked it.
        check_filters("any_sector=4711302", &[("any_sector", "4711302")]);
        check_filters("business_sector=4711302", &[("business_sector", "4711302")]);
        check_filters(
            "has_email=true&mei=&head_office=false&capital_from=1000&state=SP",
            &[("state", "SP"), ("capital_from", "1000"), ("has_email", "true"), ("head_office", "false")],
        );
    }

    #[test]
    fn a_multi_selects_choices_are_one_list() {
        check_filters("state=SP&state=RJ", &[("state", "SP,RJ")]);
        check_filters("state=&state=RJ&state=", &[("state", "RJ")]);
        check_filters("situacao_cadastral=02,08&situacao_cadastral=04", &[("situacao_cadastral", "02,08,04")]);
        // 50 cities fit; a free-text field stays short.
        let cities = vec!["3550308"; 50].join(",");
        check_filters(&format!("city_id={cities}"), &[("city_id", &cities)]);
        let long = "a".repeat(300);
        check_filters(&format!("trading_name={long}"), &[("trading_name", &long[..MAX_FIELD])]);
        let marked = |chosen: &str| -> Vec<bool> {
            let options = ["RJ", "SP", "MG"].map(|s| (s.to_owned(), s.to_owned()));
            several(options, chosen).iter().map(|c| c.selected).collect()
        };
        assert_eq!(marked("SP,RJ"), [true, true, false]);
        assert_eq!(marked(""), [false, false, false]);
    }

    #[test]
    fn an_activity_by_its_code_or_by_words_of_its_description() {
        check("", "", Activity::Any);
        check("4711-3/02", "", Activity::Code("4711-3/02".into()));
        check("", "4712100", Activity::Code("4712100".into()));
        check("PADARIA", "", Activity::Code("1091102".into()));
        check("comercio varejista", "", Activity::Choose);
        check("comercio varejista", "4712100", Activity::Code("4712100".into()));
        check("comercio varejista", "1091102", Activity::Choose);
        check("varejista supermercado", "", Activity::Code("4711302".into()));
        check("aviação", "", Activity::Unknown);
    }
}
