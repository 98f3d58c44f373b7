//! The company pages for people over HTTP, beside the API on the real server: `/search` answers
//! what `GET /api/v1/companies/search` answers for the same filters and charges the same credits,
//! a company's page charges like detail and shows the detail's values (a `<script>` in a company's
//! name as text), the export's cost is shown before it runs, its form needs its CSRF token, and
//! its CSV holds the search items, charged per row; the tables fold into cards on a phone. A
//! charged page opened from another site shows its price and charges only from its button; every
//! page names the same `Allow` to each method it refuses.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{AccountsAt, Reply, Server, exchange, get, root};

pub(crate) const PASSWORD: &str = "a long page password";

/// A person with a browser's cookies, logged in to the pages.
pub(crate) struct Visitor {
    pub addr: String,
    cookies: Vec<(String, String)>,
}

impl Visitor {
    /// A request with the visitor's cookies and `headers` (name, value).
    pub(crate) fn send(
        &mut self,
        method: &str,
        path: &str,
        form: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (Reply, String) {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.addr);
        if !self.cookies.is_empty() {
            let cookies: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            head.push_str(&format!("Cookie: {}\r\n", cookies.join("; ")));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(form) = form {
            head.push_str(&format!(
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
                form.len()
            ));
        }
        let raw = format!("{head}\r\n{}", form.unwrap_or(""));
        let reply = exchange(&self.addr, raw.as_bytes());
        for (_, set) in reply.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie")) {
            let (name, value) = set.split(';').next().unwrap().split_once('=').unwrap();
            self.cookies.retain(|(k, _)| k != name);
            if !set.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
        let text = String::from_utf8_lossy(&reply.raw).into_owned();
        (reply, text)
    }

    /// A GET as a browser sends it when the person follows a link of this site.
    pub fn get(&mut self, path: &str) -> (Reply, String) {
        self.send("GET", path, None, &[("Sec-Fetch-Site", "same-origin")])
    }

    /// A POST of `fields` as a form from this site (its `Origin`).
    pub fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> (Reply, String) {
        let form = form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
        let origin = format!("http://{}", self.addr);
        self.send("POST", path, Some(&form), &[("Origin", &origin)])
    }
}

/// The value of the first hidden `csrf_token` of a page.
pub(crate) fn csrf(page: &str) -> String {
    let at = page.find("name=\"csrf_token\" value=\"").expect("a form with a CSRF token") + 25;
    page[at..].split('"').next().unwrap().to_owned()
}

/// A user `name` with `credits` and an API token, who logs in to the pages as `<name>@example.com`.
pub(crate) fn person(s: &Server, name: &str, credits: i64) -> (String, Visitor) {
    let token = s.user(name, credits);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .args(s.accounts.args())
        .args(["accounts", "set-login", name, "--email", &format!("{name}@example.com")])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{PASSWORD}\n").as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    let mut visitor = Visitor { addr: s.addr.clone(), cookies: Vec::new() };
    let (_, login) = visitor.get("/login");
    let email = format!("{name}@example.com");
    let (r, _) = visitor.post("/login", &[("csrf_token", &csrf(&login)), ("email", &email), ("password", PASSWORD)]);
    assert_eq!((r.status, r.header("location")), (303, Some("/account")));
    (token, visitor)
}

/// The CNPJs a page links to as companies, in order.
pub(crate) fn linked(page: &str) -> Vec<String> {
    page.split("href=\"/companies/").skip(1).map(|rest| rest.split('"').next().unwrap().to_owned()).collect()
}

/// The text of the element with `id` (its first text, up to the next tag).
pub(crate) fn by_id<'a>(page: &'a str, id: &str) -> &'a str {
    let at = page.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id}"));
    let rest = &page[at..];
    rest[rest.find('>').unwrap() + 1..].split('<').next().unwrap()
}

/// Credits used so far by `name` (the ledger's sum).
fn used(s: &Server, name: &str) -> i64 {
    s.credits(name).1
}

/// Rewrites the one member of a zip with `edit` (its bytes in, the new bytes out).
pub(crate) fn rewrite_member(zip_path: &Path, edit: impl FnOnce(Vec<u8>) -> Vec<u8>) {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(zip_path).unwrap()).unwrap();
    let (name, bytes) = {
        let mut member = archive.by_index(0).unwrap();
        let mut bytes = Vec::new();
        member.read_to_end(&mut bytes).unwrap();
        (member.name().unwrap().into_owned(), bytes)
    };
    let bytes = edit(bytes);
    let mut writer = zip::ZipWriter::new(std::fs::File::create(zip_path).unwrap());
    writer.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
    writer.write_all(&bytes).unwrap();
    writer.finish().unwrap();
}

/// The sample dump with the first company named `<script>alert(1)</script> & EXEMPLO LTDA`.
fn scripted_sample(dir: &Path) -> std::path::PathBuf {
    let input = dir.join("2026-09");
    std::fs::create_dir_all(&input).unwrap();
    for entry in std::fs::read_dir(root().join("data/sample-dump")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), input.join(entry.file_name())).unwrap();
    }
    // Byte for byte: the member is Latin-1.
    rewrite_member(&input.join("Empresas0.zip"), |mut bytes| {
        let (from, to) = (b"EMPRESA EXEMPLO LTDA".as_slice(), b"<script>alert(1)</script> & EXEMPLO LTDA".as_slice());
        let at = bytes.windows(from.len()).position(|w| w == from).expect("the sample's first company");
        bytes.splice(at..at + from.len(), to.iter().copied());
        bytes
    });
    input
}

/// A server over the sample dump whose first company has a `<script>` in its name.
pub(crate) fn scripted_server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let input = scripted_sample(dir.path());
    let db = dir.path().join("registry.duckdb");
    super::build_dataset(&input, &db);
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    Server::spawn(dir, db.clone(), vec!["--db".into(), db.into()], accounts, &["--insecure-cookies"])
}

#[test]
fn the_search_page_answers_and_charges_as_the_api_does() {
    let s = scripted_server();
    let (token, mut ana) = person(&s, "ana", 100);
    let (first, page) = ana.get("/search");
    assert_eq!((first.status, used(&s, "ana")), (200, 0), "the form alone is free");
    assert!(first.header("content-security-policy").unwrap().contains("script-src 'none'"));
    assert!(page.contains("name=\"viewport\"") && !page.contains("??"), "{page}");
    for (query, pages) in [
        ("state=SP&situacao_cadastral=02&per_page=10", 1),
        ("zip_code=01310&per_page=2&page=2", 3),
        ("cnpj=11.222.333", 1),
        ("state=SP&has_email=true&head_office=true&capital_from=1000", 1),
        ("any_sector=6201501&simples=true&mei=false", 1),
    ] {
        let before = used(&s, "ana");
        let (r, page) = ana.get(&format!("/search?{query}"));
        assert_eq!(r.status, 200, "{query}: {page}");
        let charged = used(&s, "ana") - before;
        let api = get(&s, &format!("/api/v1/companies/search?{query}"), &token);
        assert_eq!(used(&s, "ana") - before, 2 * charged, "{query}: the page costs what the API does");
        assert_eq!(charged, 1, "{query}");
        let items = api.body["data"].as_array().unwrap();
        let cnpjs: Vec<String> = items.iter().map(|i| i["cnpj"].as_str().unwrap().to_owned()).collect();
        assert_eq!(linked(&page), cnpjs, "{query}: the same rows in the same order");
        assert_eq!(by_id(&page, "total"), api.body["total"].to_string(), "{query}");
        assert_eq!(api.body["last_page"], pages, "{query}");
        assert_eq!(by_id(&page, "current-page"), api.body["current_page"].to_string());
    }
    search_refusals_cost_nothing(&s, &mut ana);
    activities_by_words(&s, &mut ana);
    escaped_and_in_every_language(&s, &mut ana, &token);
}

/// An invalid filter, an empty result and no filter at all: no charge; the form says why.
fn search_refusals_cost_nothing(s: &Server, ana: &mut Visitor) {
    let before = used(s, "ana");
    let (r, page) = ana.get("/search?zip_code=ABC&state=SP");
    assert_eq!(r.status, 400);
    assert!(page.contains("id=\"invalid\"") && page.contains("CEP: Valor inválido."), "{page}");
    assert!(page.contains("value=\"ABC\""), "the form keeps what was typed");
    let (r, page) = ana.get("/search?capital_from=1.000%2C00&has_phone=true");
    assert_eq!(r.status, 400);
    assert!(page.contains("Capital social a partir de (R$): Valor inválido."), "{page}");
    assert!(page.contains("<option value=\"true\" selected>Sim</option>"), "the form keeps what was chosen");
    let (r, page) = ana.get("/search?state=AC");
    assert_eq!((r.status, by_id(&page, "total")), (200, "0"));
    let (r, page) = ana.get("/search?state=&go=1");
    assert!(r.status == 200 && page.contains("Informe ao menos um filtro."), "{page}");
    let (r, page) = ana.get("/search?state=SP&pick=1");
    assert!(r.status == 200 && !page.contains("id=\"results\""), "updating the cities searches nothing");
    assert!(page.contains(">SAO PAULO</option>"), "the state's cities to pick from");
    assert_eq!(used(s, "ana"), before);
}

/// Words of an activity's description: one activity is searched at once, several are offered to
/// choose among first (free); a code as typed.
fn activities_by_words(s: &Server, ana: &mut Visitor) {
    let before = used(s, "ana");
    let (r, page) = ana.get("/search?activity=arroz&state=SP");
    assert_eq!(r.status, 200);
    assert!(page.contains("<option value=\"0111301\">0111301 – Cultivo de arroz</option>"), "{page}");
    assert!(!page.contains("id=\"results\""), "no search before an activity is chosen");
    assert_eq!(used(s, "ana"), before);
    let (_, page) = ana.get("/search?activity=arroz&business_sector=0111301");
    assert_eq!(linked(&page), ["22333444000181"]);
    assert!(page.contains("business_sector=0111301"), "the pages' links carry the activity chosen");
    let (_, page) = ana.get("/search?activity=cultivo+de+arroz");
    assert_eq!(linked(&page), ["22333444000181"], "one activity: searched at once");
    let (_, page) = ana.get("/search?activity=0111-3%2F01");
    assert_eq!(linked(&page), ["22333444000181"]);
    let (_, page) = ana.get("/search?activity=nada+disso+existe");
    assert!(page.contains("Nenhuma atividade tem essas palavras."));
    assert_eq!(used(s, "ana"), before + 3);
}

/// A `<script>` in a name is text; the labels are the API's in each language.
fn escaped_and_in_every_language(s: &Server, ana: &mut Visitor, token: &str) {
    let (_, page) = ana.get("/search?cnpj=11222333000181");
    assert!(page.contains("&#60;script&#62;alert(1)&#60;/script&#62; &#38; EXEMPLO LTDA"), "{page}");
    assert!(!page.contains("<script"), "no script element");
    for (locale, status) in [("en", "Active"), ("es", "Activa"), ("pt-br", "Ativa")] {
        let (_, page) = ana.get(&format!("/search?cnpj=11222333000181&locale={locale}"));
        let api = get(s, &format!("/api/v1/companies/search?cnpj=11222333000181&locale={locale}"), token);
        assert_eq!(api.body["data"][0]["situacao_cadastral"], status);
        assert!(page.contains(&format!("<td data-label=\"{}\">{status}</td>", by_label(locale))), "{page}");
        assert!(!page.contains("??"), "{locale}: every word translated");
        let (_, company) = ana.get(&format!("/companies/11222333000181?locale={locale}"));
        assert!(!company.contains("??") && !company.contains("<script"), "{locale}: {company}");
    }
}

/// The registration status' column label in a language.
fn by_label(locale: &str) -> &'static str {
    match locale {
        "en" => "Registration status",
        "es" => "Situación catastral",
        _ => "Situação cadastral",
    }
}

#[test]
fn a_company_page_is_priced_like_detail_and_shows_its_record() {
    let s = Server::start(&["--insecure-cookies"]);
    let (token, mut bia) = person(&s, "bia", 50);
    let (r, page) = bia.get("/companies/11222333000181");
    assert_eq!((r.status, used(&s, "bia")), (200, 1), "{page}");
    let detail = get(&s, "/api/v1/companies/11222333000181", &token).body["data"].clone();
    assert_eq!(by_id(&page, "one-line"), detail["endereco"]["endereco_completo"].as_str().unwrap());
    assert_eq!(by_id(&page, "company-cnpj"), "11.222.333/0001-81");
    for partner in detail["socios"].as_array().unwrap() {
        let document = partner["documento"].as_str().unwrap();
        assert!(document.is_empty() || page.contains(&format!("<span class=\"document\">{document}</span>")));
        assert!(page.contains(partner["nome"].as_str().unwrap()), "{page}");
    }
    assert!(!detail["socios"].as_array().unwrap().is_empty());
    assert!(page.contains("Lucro Real") && page.contains("Optante pelo Simples Nacional"), "the tax regime");
    let listed = linked(&page);
    assert_eq!(
        listed,
        ["11222333000181/network", "11222333000262"],
        "its network, and the company's other establishment (this one is not a link)"
    );
    assert!(page.contains("<table class=\"cards\">") && page.contains("<td data-label="), "cards on a phone");
    let (r, _) = bia.get("/companies/11444777000161");
    assert_eq!((r.status, used(&s, "bia")), (404, 2), "not found costs nothing (the API's detail cost 1)");
    let (r, _) = bia.get("/companies/11222333000182");
    assert_eq!((r.status, used(&s, "bia")), (400, 2));
    let (r, _) = bia.get("/companies/44555666");
    assert_eq!((r.status, used(&s, "bia")), (200, 3), "a company's 8 characters: its head office");
    let (r, _) = bia.send("HEAD", "/companies/11222333000181", None, &[("Sec-Fetch-Site", "same-origin")]);
    assert_eq!((r.status, used(&s, "bia")), (405, 3), "a HEAD is not a charged GET");
    let mut nobody = Visitor { addr: s.addr.clone(), cookies: Vec::new() };
    let (r, _) = nobody.get("/companies/11222333000181");
    assert_eq!(r.header("location"), Some("/login"), "for people logged in");
    watch_from_the_page(&s, &mut bia, &token);
}

/// The page's button adds the CNPJ to one of the person's lists, free; another's list is a 404.
fn watch_from_the_page(s: &Server, bia: &mut Visitor, token: &str) {
    let body = serde_json::json!({"name": "<b>fornecedores</b>", "cnpjs": []});
    let made = super::post(s, "/api/v1/watchlists", token, &body);
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.body["data"]["id"].to_string();
    let before = used(s, "bia");
    let (_, page) = bia.get("/companies/11222333000181");
    assert!(page.contains("&#60;b&#62;fornecedores") && !page.contains("<b>"), "the list's name as text: {page}");
    let (r, _) = bia.post("/companies/11222333000181/watch", &[("list", &id)]);
    assert_eq!(r.status, 403, "without the CSRF token");
    let (r, done) = bia.post("/companies/11222333000181/watch", &[("csrf_token", &csrf(&page)), ("list", &id)]);
    assert_eq!(r.status, 200, "{done}");
    let (r, _) =
        bia.post("/companies/11222333000181/watch", &[("csrf_token", &csrf(&page)), ("list", &id), ("whole", "1")]);
    assert_eq!(r.status, 200);
    let (r, _) = bia.post("/companies/11222333000181/watch", &[("csrf_token", &csrf(&page)), ("list", "999")]);
    assert_eq!(r.status, 404);
    let list = get(s, &format!("/api/v1/watchlists/{id}"), token);
    assert_eq!(list.body["data"]["entries"], serde_json::json!(["11222333", "11222333000181"]));
    assert_eq!(used(s, "bia"), before + 1, "only the page's view was charged");
}

#[test]
fn an_export_shows_its_cost_needs_its_form_and_is_charged_per_row() {
    let s = Server::start(&["--insecure-cookies"]);
    let (token, mut cid) = person(&s, "cid", 20);
    let (r, page) = cid.get("/search/export?zip_code=01310");
    assert_eq!((r.status, used(&s, "cid")), (200, 0), "asking the cost is free: {page}");
    let (total, rows, credits) =
        (by_id(&page, "export-total"), by_id(&page, "export-rows"), by_id(&page, "export-credits"));
    assert_eq!((total, rows, credits), ("6", "6", "6"));
    let (_, page) = cid.get("/search/export?zip_code=01310&rows=4");
    assert_eq!((by_id(&page, "export-rows"), by_id(&page, "export-credits")), ("4", "4"));
    let form = [("zip_code", "01310"), ("rows", "4")];
    let (r, _) = cid.post("/search/export", &form);
    assert_eq!((r.status, used(&s, "cid")), (403, 0), "without the CSRF token nothing runs");
    let mut with_token = vec![("csrf_token", csrf(&page))];
    with_token.extend(form.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let fields: Vec<(&str, &str)> = with_token.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (r, csv) = cid.post("/search/export", &fields);
    assert_eq!(r.status, 200, "{csv}");
    assert_eq!(r.header("content-type"), Some("text/csv; charset=utf-8"));
    assert!(r.header("content-disposition").unwrap().starts_with("attachment"));
    assert_eq!(used(&s, "cid"), 4, "one credit a row, as batch");
    let api = get(&s, "/api/v1/companies/search?zip_code=01310&per_page=4", &token);
    read_back(&csv, api.body["data"].as_array().unwrap());
    rows_out_of_range_are_refused(&s, &mut cid, &csrf(&page));
    let poor = person(&s, "dan", 1).1;
    export_past_the_balance(&s, poor);
}

/// The CSV read back: its header the search item's fields, its rows the API's items.
fn read_back(csv: &str, items: &[Value]) {
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), items.len() + 1, "{csv}");
    let header: Vec<&str> = lines[0].split(',').collect();
    for key in items[0].as_object().unwrap().keys() {
        assert!(header.iter().any(|h| h == key || h.starts_with(&format!("{key}."))), "{key} in {header:?}");
    }
    assert!(header.contains(&"endereco.municipio_nome") && header.contains(&"socios"), "{header:?}");
    for (line, item) in lines[1..].iter().zip(items) {
        assert!(line.starts_with(&format!("{},{},", item["id"].as_str().unwrap(), item["cnpj"].as_str().unwrap())));
        assert!(line.contains(item["razao_social"].as_str().unwrap()), "{line}");
    }
}

/// Rows asked that are not a whole number from 1 to 10,000 (0 exported one row) are a 400 naming
/// the field in the page's language, on the cost page and from the confirmed form, which charges
/// nothing.
fn rows_out_of_range_are_refused(s: &Server, cid: &mut Visitor, csrf_token: &str) {
    let before = used(s, "cid");
    for (rows, locale, said) in [
        ("0", "en", "Rows to export (up to 10,000): Invalid value."),
        ("-1", "pt-br", "Linhas a exportar (até 10.000): Valor inválido."),
        ("10001", "es", "Filas a exportar (hasta 10.000): Valor no válido."),
        ("%2B5", "en", "Rows to export (up to 10,000): Invalid value."),
    ] {
        let (r, page) = cid.get(&format!("/search/export?zip_code=01310&rows={rows}&locale={locale}"));
        assert!(r.status == 400 && page.contains(said), "rows={rows}: {page}");
        let rows = rows.replace("%2B", "+");
        let (r, page) =
            cid.post("/search/export", &[("csrf_token", csrf_token), ("zip_code", "01310"), ("rows", &rows)]);
        assert!(r.status == 400 && page.contains(said), "rows={rows}: {page}");
    }
    assert_eq!(used(s, "cid"), before, "nothing charged");
}

/// An export over the balance: the confirm page says so; forcing it is a 402 that charges nothing.
fn export_past_the_balance(s: &Server, mut dan: Visitor) {
    let (_, page) = dan.get("/search/export?zip_code=01310");
    assert!(!page.contains("id=\"confirm-export\"") && page.contains("Créditos insuficientes"), "{page}");
    let (_, any) = dan.get("/search");
    let (r, _) = dan.post("/search/export", &[("csrf_token", &csrf(&any)), ("zip_code", "01310")]);
    assert_eq!((r.status, used(s, "dan")), (402, 0));
}

/// Every page here answers in Portuguese, English and Spanish with the same layout rules: the
/// viewport set, every table of cards labelled cell by cell.
pub(crate) fn cards_labelled(page: &str) -> bool {
    let tables = page.matches("<table class=\"cards\"").count();
    let cells = page.matches("<td").count();
    let labelled = page.matches("<td data-label=\"").count() + page.matches("<td class=\"cnpj\" data-label=\"").count();
    tables > 0 && cells == labelled && page.contains("width=device-width")
}

#[test]
fn tables_fold_into_labelled_cards() {
    let s = Server::start(&["--insecure-cookies"]);
    let (_, mut eva) = person(&s, "eva", 10);
    let (_, company) = eva.get("/companies/11222333000181");
    let partner = company.split("href=\"/partners/").nth(1).unwrap().split('"').next().unwrap().to_owned();
    for path in [
        "/search?state=SP",
        "/companies/11222333000181",
        "/search?state=SP&locale=en",
        "/companies/11222333000181/network",
        &format!("/partners/{partner}"),
    ] {
        let (r, page) = eva.get(path);
        assert_eq!(r.status, 200);
        assert!(cards_labelled(&page), "{path}: {page}");
    }
}

/// The hidden fields of a page's forms (`name`, `value`) but the CSRF token, in order.
fn hidden(page: &str) -> Vec<(String, String)> {
    let value = |rest: &str, attribute: &str| {
        let at = rest.find(&format!("{attribute}=\"")).unwrap() + attribute.len() + 2;
        rest[at..].split('"').next().unwrap().to_owned()
    };
    page.split("<input type=\"hidden\" ")
        .skip(1)
        .map(|rest| (value(rest, "name"), value(rest, "value")))
        .filter(|(name, _)| name != "csrf_token")
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A charged page opened from another site (a link there, or no sign of this site at all) charges
/// nothing: it shows its price and a button that asks for it again from here, which charges once;
/// typed, bookmarked or followed from these pages, it charges at once.
#[test]
fn a_charged_page_opened_from_another_site_shows_its_price_first() {
    let s = Server::start(&["--insecure-cookies"]);
    let (_, mut gil) = person(&s, "gil", 10);
    let company = "/companies/11222333000181?page=1";
    let here = format!("http://{}/search?state=SP", s.addr);
    for headers in [
        vec![("Sec-Fetch-Site", "cross-site")],
        vec![("Sec-Fetch-Site", "same-site")],
        vec![("Sec-Fetch-Site", "cross-site"), ("Referer", here.as_str())],
        vec![("Referer", "https://elsewhere.example/11222333000181")],
        vec![],
    ] {
        let (r, page) = gil.send("GET", company, None, &headers);
        assert_eq!((r.status, used(&s, "gil")), (200, 0), "{headers:?}: {page}");
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert_eq!(by_id(&page, "page-price"), "1", "{headers:?}");
        assert!(page.contains("id=\"go-on\"") && !page.contains("id=\"company-cnpj\""), "{page}");
        assert_eq!(hidden(&page), pairs(&[("page", "1")]), "the button asks for the same page");
    }
    // The button's request: from this page, as the browser says.
    let from_the_button = format!("http://{}{company}", s.addr);
    let (r, page) = gil.send("GET", company, None, &[("Sec-Fetch-Site", "same-origin"), ("Referer", &from_the_button)]);
    assert_eq!((r.status, used(&s, "gil")), (200, 1), "charged once");
    assert_eq!(by_id(&page, "company-cnpj"), "11.222.333/0001-81");
    let (r, _) = gil.send("GET", company, None, &[("Sec-Fetch-Site", "none")]);
    assert_eq!((r.status, used(&s, "gil")), (200, 2), "typed or bookmarked: the person's own act");
    let (r, _) = gil.send("GET", company, None, &[("Referer", &here)]);
    assert_eq!((r.status, used(&s, "gil")), (200, 3), "no fetch metadata, this site's Referer");

    let cross = [("Sec-Fetch-Site", "cross-site")];
    let (r, page) = gil.send("GET", "/search?state=SP&go=1", None, &cross);
    assert_eq!((r.status, used(&s, "gil")), (200, 3), "{page}");
    assert_eq!((by_id(&page, "page-price"), hidden(&page)), ("1", pairs(&[("state", "SP"), ("go", "1")])));
    let (r, page) = gil.send("GET", "/search", None, &cross);
    assert!(r.status == 200 && page.contains("id=\"f-state\""), "the form alone is free: shown at once");
    let (r, page) = gil.get("/search?state=SP&go=1");
    assert_eq!((r.status, linked(&page).is_empty(), used(&s, "gil")), (200, false, 4));
    for (locale, go_on) in [("en", "Go on and open it"), ("es", "Continuar y abrirla"), ("pt-br", "Continuar e abrir")]
    {
        let (_, page) = gil.send("GET", &format!("/companies/11222333000181?locale={locale}"), None, &cross);
        assert!(page.contains(go_on) && !page.contains("??"), "{locale}: {page}");
    }
    assert_eq!(used(&s, "gil"), 4);
}

/// A page answers every method it refuses with one `Allow`: HEAD refused (the charged pages, whose
/// HEAD would be a charged GET) is not in it, HEAD answered is.
#[test]
fn every_page_answers_one_allow_to_the_methods_it_refuses() {
    let s = Server::start(&["--insecure-cookies"]);
    let mut nobody = Visitor { addr: s.addr.clone(), cookies: Vec::new() };
    let paths = [
        "/",
        "/pages/style.css",
        "/signup",
        "/login",
        "/logout",
        "/password/forgot",
        "/password/reset",
        "/verify",
        "/account",
        "/account/tokens",
        "/account/tokens/cnpj_abcdefg/revoke",
        "/account/password",
        "/account/delete",
        "/account/watchlists",
        "/account/watchlists/1",
        "/account/watchlists/1/entries",
        "/account/watchlists/1/webhook",
        "/account/watchlists/1/secret",
        "/account/watchlists/1/delete",
        "/account/watchlists/1/deliveries/abc/retry",
        "/admin",
        "/admin/users/1/grant",
        "/admin/users/1/plan",
        "/admin/users/1/status",
        "/admin/tokens/revoke",
        "/search",
        "/search/export",
        "/companies/11222333000181",
        "/companies/11222333000181/watch",
        "/companies/11222333000181/network",
        "/companies/11222333000181/network.csv",
        "/companies/11222333000181/network.json",
        "/companies/11222333000181/network.graphml",
        "/partners/pzzzzzzzzzzzzzzzz",
    ];
    for path in paths {
        let mut allowed = Vec::new();
        let mut head_refused = false;
        for method in ["HEAD", "POST", "PUT", "DELETE", "PATCH"] {
            let (r, _) = nobody.send(method, path, None, &[("Sec-Fetch-Site", "same-origin")]);
            if r.status == 405 {
                allowed.push(r.header("allow").unwrap_or_else(|| panic!("{method} {path}: no Allow")).to_owned());
                head_refused |= method == "HEAD";
            }
        }
        allowed.dedup();
        assert_eq!(allowed.len(), 1, "{path}: {allowed:?}");
        let methods: Vec<&str> = allowed[0].split(',').map(str::trim).collect();
        assert_eq!(methods.contains(&"HEAD"), methods.contains(&"GET") && !head_refused, "{path}: {methods:?}");
    }
    for path in ["/search", "/companies/11222333000181"] {
        let (r, _) = nobody.send("POST", path, None, &[]);
        assert_eq!((r.status, r.header("allow")), (405, Some("GET")), "{path}: a charged page refuses HEAD");
    }
}
