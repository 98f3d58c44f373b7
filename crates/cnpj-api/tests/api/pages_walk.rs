//! The company pages walked in headless Chromium (through the `docs` module's chromedriver), over
//! an evolved synthetic month: a person logs in, searches by state, words of an activity and
//! status, pages to the third page, opens a company and reads its partners and its history,
//! opens its partner network (the picture that fits the window) and a partner's page from it,
//! exports 500 rows and reads the CSV back, then exports the whole result of the search as a job
//! (the search page's offer, its cost confirmed, the job's page refreshing itself until its link
//! to the file, the file downloaded and read back); the credits moved as the API charges the same
//! requests (made by another user with a token). Screenshots of the search, results, company,
//! network, partner and both export job pages at 360 and 1,440 pixels wide go to
//! `$CARGO_TARGET_TMPDIR/pages-walk`; at 360 no page is wider than the screen.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use super::changes::{build_month, serve};
use super::company_pages::{PASSWORD, person, rewrite_member};
use super::export_jobs::items;
use super::{Server, get, post};
use crate::browser::{self, Driver, element};

/// The establishments of the evolved month moved into one cluster (state, city, activity, status)
/// that the walk searches: more than two pages of 20.
const CLUSTER: usize = 50;
const ACTIVITY: &str = "4711302";
const WIDTHS: [u32; 2] = [360, 1440];

/// The first `n` full records of a `;`-separated, quoted CSV, each made by `change` from its
/// fields (unquoted); the rest byte for byte.
fn rewrite_records(bytes: &[u8], n: usize, change: impl Fn(&mut [Vec<u8>])) -> Vec<u8> {
    let (mut out, mut at, mut done) = (Vec::new(), 0, 0);
    while done < n && at < bytes.len() {
        let (mut fields, mut field, mut quoted) = (Vec::new(), Vec::new(), false);
        while at < bytes.len() {
            let b = bytes[at];
            at += 1;
            match (b, quoted) {
                (b'"', true) if bytes.get(at) == Some(&b'"') => {
                    field.push(b'"');
                    at += 1;
                }
                (b'"', _) => quoted = !quoted,
                (b';', false) => fields.push(std::mem::take(&mut field)),
                (b'\n', false) => break,
                (b'\r', false) => {}
                (b, _) => field.push(b),
            }
        }
        fields.push(field);
        if fields.len() >= 30 {
            change(&mut fields);
            done += 1;
        }
        for (i, field) in fields.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"\"" } else { b";\"" });
            for &b in field {
                out.extend_from_slice(if b == b'"' { b"\"\"" } else { std::slice::from_ref(&b) });
            }
            out.push(b'"');
        }
        out.push(b'\n');
    }
    out.extend_from_slice(&bytes[at..]);
    out
}

/// Synthetic 2026-11 and its evolution 2026-12 (whose first `CLUSTER` establishments of part 0
/// moved to São Paulo (7107), activity `ACTIVITY`, active: history for each), built, served.
fn evolved_server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("m1"), dir.path().join("m2"));
    let synth =
        cnpj_synth::SynthOptions { month: "2026-11".into(), seed: 3, ..cnpj_synth::SynthOptions::new(0.0005, &first) };
    cnpj_synth::generate(&synth).unwrap();
    cnpj_synth::evolve(&cnpj_synth::EvolveOptions { from: first.clone(), out: second.clone(), seed: 4 }).unwrap();
    rewrite_member(&second.join("Estabelecimentos0.zip"), |bytes| {
        rewrite_records(&bytes, CLUSTER, |fields| {
            for (i, value) in [(5, "02"), (7, "00"), (11, ACTIVITY), (19, "SP"), (20, "7107")] {
                fields[i] = value.as_bytes().to_vec();
            }
        })
    });
    let (old, new) = (dir.path().join("2026-11.duckdb"), dir.path().join("2026-12.duckdb"));
    build_month(&first, &old, None);
    build_month(&second, &new, Some(&old));
    // Export jobs written in the test's folder, looked for every second.
    let exports = dir.path().join("exports").to_str().unwrap().to_owned();
    let args = ["--insecure-cookies", "--rate-limit", "100000", "--export-dir", &exports, "--export-interval", "1"];
    serve(dir, new, &args)
}

/// A headless Chromium session that downloads into `downloads`, `WIDTHS[1]` wide.
async fn session(driver: &Driver, profile: &Path, downloads: &Path) -> Client {
    let prefs = json!({"download.default_directory": downloads, "download.prompt_for_download": false});
    let client = driver.session_with(profile, prefs).await;
    client.set_window_size(WIDTHS[1], 1000).await.unwrap();
    client
}

/// The walk's screenshots, and what it checks at each width.
struct Shots {
    dir: PathBuf,
}

impl Shots {
    /// Screenshots of the page at both widths (`<name>-360.png`, `<name>-1440.png`); at 360 the
    /// page is no wider than the screen (its tables fold into cards); axe-core finds no serious
    /// or critical violation at either.
    async fn take(&self, client: &Client, name: &str, at: &str) {
        for width in WIDTHS {
            client.set_window_size(width, if width < 400 { 800 } else { 1000 }).await.unwrap();
            client.execute(&format!("document.querySelector('{at}').scrollIntoView()"), vec![]).await.unwrap();
            let sizes = client
                .execute("return [document.documentElement.scrollWidth, window.innerWidth]", vec![])
                .await
                .unwrap();
            let [scroll, inner]: [u64; 2] = serde_json::from_value(sizes).unwrap();
            assert!(scroll <= inner, "{name} at {width}: {scroll} px wide in a window of {inner}");
            let png = client.screenshot().await.unwrap();
            std::fs::write(self.dir.join(format!("{name}-{width}.png")), png).unwrap();
            browser::axe(client, &format!("{name} at {width} px")).await;
        }
    }
}

/// The texts of the elements `css` finds.
async fn texts(client: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in client.find_all(Locator::Css(css)).await.unwrap() {
        out.push(e.text().await.unwrap().trim().to_owned());
    }
    out
}

/// The CNPJs an API search's page lists.
fn cnpjs(reply: &Value) -> Vec<String> {
    reply["data"].as_array().unwrap().iter().map(|i| i["cnpj"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_person_searches_reads_a_company_and_exports_in_chromium() {
    let s = evolved_server();
    let twin = s.user("twin", 100_000);
    let scout = s.user("scout", 100_000);
    person(&s, "rui", 100_000);
    let shots = Shots { dir: Path::new(env!("CARGO_TARGET_TMPDIR")).join("pages-walk") };
    std::fs::create_dir_all(&shots.dir).unwrap();
    let (profile, downloads) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let driver = Driver::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let base = format!("http://{}", s.addr);
    let walked = runtime.block_on(async {
        let client = session(&driver, profile.path(), downloads.path()).await;
        log_in(&client, &base).await;
        let query = search_by_state_activity_and_status(&client, &base, &shots).await;
        let company = page_to_the_third_and_open_a_company(&client, &s, &scout, &query, &shots).await;
        let partner = its_network_and_a_partner(&client, &s, &scout, &company, &shots).await;
        let exported = export_500(&client, &base, downloads.path()).await;
        let job = export_the_whole_result_as_a_job(&client, &s, &scout, &query, downloads.path(), &shots).await;
        let session = client.session_id().await.unwrap().unwrap();
        let log = driver.browser_log(&session);
        let problems: Vec<&Value> = log.as_array().unwrap().iter().filter(|e| e["level"] == "SEVERE").collect();
        assert!(problems.is_empty(), "the browser logged: {problems:#?}");
        client.close().await.unwrap();
        (query, company, partner, exported, job)
    });
    let (query, company, partner, exported, job) = walked;
    the_api_charges_the_same(&s, [&twin, &scout], &query, [&company, &partner], &exported, job);
    println!("screenshots in {}", shots.dir.display());
}

async fn log_in(client: &Client, base: &str) {
    // In Portuguese (the browser asks for English): kept in a cookie from here on.
    client.goto(&format!("{base}/login?locale=pt-br")).await.unwrap();
    element(client, "#email").await.send_keys("rui@example.com").await.unwrap();
    element(client, "#password").await.send_keys(PASSWORD).await.unwrap();
    element(client, "main form button[type=submit]").await.click().await.unwrap();
    element(client, "#credits").await;
    element(client, "nav a[href='/search']").await.click().await.unwrap();
    element(client, "#f-state").await;
}

/// Two states (a multi-select: contract §15's lists), words of the activity (several activities
/// match: one is chosen) and status; the search's query string as the API takes it.
async fn search_by_state_activity_and_status(client: &Client, base: &str, shots: &Shots) -> String {
    shots.take(client, "search", "h1").await;
    for state in ["RJ", "SP"] {
        element(client, &format!("#f-state option[value={state}]")).await.click().await.unwrap();
    }
    element(client, "#f-activity").await.send_keys("varejista mercadorias em geral").await.unwrap();
    element(client, "#f-status").await.select_by_value("02").await.unwrap();
    element(client, "button[name=go]").await.click().await.unwrap();
    let choose = element(client, "#f-business-sector").await;
    assert!(client.find(Locator::Css("#results")).await.is_err(), "no search before the activity is chosen");
    choose.select_by_value(ACTIVITY).await.unwrap();
    element(client, "button[name=go]").await.click().await.unwrap();
    element(client, "#results-table").await;
    assert!(client.current_url().await.unwrap().as_str().starts_with(&format!("{base}/search?")));
    let chosen = "return [...document.querySelectorAll('#f-state option:checked')].map(o => o.value)";
    let chosen = client.execute(chosen, vec![]).await.unwrap();
    assert_eq!(chosen, json!(["RJ", "SP"]), "both states stay chosen on the results' page");
    format!("state=RJ,SP&situacao_cadastral=02&business_sector={ACTIVITY}")
}

/// Pages on to the third page (its rows the API's), then opens a company of it that has
/// partners: its partners and its history as the API has them. Returns its CNPJ.
async fn page_to_the_third_and_open_a_company(
    client: &Client,
    s: &Server,
    scout: &str,
    query: &str,
    shots: &Shots,
) -> String {
    let first = get(s, &format!("/api/v1/companies/search?{query}"), scout);
    assert!(first.body["total"].as_u64().unwrap() > 40, "{}", first.body);
    assert_eq!(texts(client, "#total").await, [first.body["total"].to_string()]);
    for page in [2, 3] {
        element(client, "a[rel=next]").await.click().await.unwrap();
        let wait = client.wait().at_most(Duration::from_secs(30));
        wait.for_element(Locator::XPath(&format!("//span[@id='current-page'][text()='{page}']"))).await.unwrap();
    }
    shots.take(client, "results", "#results").await;
    let third = get(s, &format!("/api/v1/companies/search?{query}&page=3"), scout);
    let shown: Vec<String> = texts(client, "#results-table td:first-child a").await;
    let listed: Vec<String> = cnpjs(&third.body).iter().map(|c| cnpj_shown(c)).collect();
    assert_eq!(shown, listed, "the third page's rows are the API's");
    let company = cnpjs(&third.body)
        .into_iter()
        .find(|c| {
            let detail = get(s, &format!("/api/v1/companies/{c}"), scout);
            !detail.body["data"]["socios"].as_array().unwrap().is_empty()
        })
        .expect("a company with partners on the third page");
    element(client, &format!("a[href='/companies/{company}']")).await.click().await.unwrap();
    element(client, "#history").await;
    let detail = get(s, &format!("/api/v1/companies/{company}"), scout).body["data"].clone();
    let names: Vec<String> =
        detail["socios"].as_array().unwrap().iter().map(|p| p["nome"].as_str().unwrap().into()).collect();
    assert_eq!(texts(client, "#partners tbody td:first-child").await, names, "its partners");
    let history = get(s, &format!("/api/v1/companies/{company}/history"), scout).body["data"].clone();
    let events = texts(client, "#history li.event").await;
    assert!(!events.is_empty() && events.len() == history.as_array().unwrap().len(), "{events:?}\n{history}");
    assert!(events.iter().any(|e| e.starts_with("Atividade principal alterada")), "{events:?}");
    assert!(events.iter().all(|e| !e.contains("??")), "{events:?}");
    shots.take(client, "company", "h1").await;
    company
}

/// From the company's page to its network (the picture for the window's width, the nodes as
/// links), then to a partner's page from it: each as the API has it. Returns the partner's id.
async fn its_network_and_a_partner(client: &Client, s: &Server, scout: &str, company: &str, shots: &Shots) -> String {
    element(client, "#network-link").await.click().await.unwrap();
    element(client, "figure.network").await;
    let network = get(s, &format!("/api/v1/companies/{company}/network"), scout).body["data"].clone();
    let nodes = network["nodes"].as_array().unwrap();
    assert_eq!(texts(client, "#network-nodes tbody tr").await.len(), nodes.len());
    let shown =
        |kind: &'static str| format!("return getComputedStyle(document.querySelector('.network-{kind}')).display");
    for (width, kind) in [(WIDTHS[0], "narrow"), (WIDTHS[1], "wide")] {
        client.set_window_size(width, 1000).await.unwrap();
        assert_eq!(
            client.execute(&shown(kind), vec![]).await.unwrap(),
            json!("block"),
            "{width} px: the {kind} picture"
        );
    }
    shots.take(client, "network", "h1").await;
    shots.take(client, "network-picture", "figure.network").await;
    let partner = nodes.iter().find(|n| n["kind"] == "partner").expect("a partner in the network");
    let id = partner["id"].as_str().unwrap().to_owned();
    element(client, &format!("#network-nodes a[href='/partners/{id}']")).await.click().await.unwrap();
    element(client, "#partner-events").await;
    assert_eq!(texts(client, "#partner-name").await, [partner["label"].as_str().unwrap()]);
    let api = get(s, &format!("/api/v1/partners/{id}"), scout).body["data"].clone();
    assert_eq!(texts(client, "#partner-companies tbody tr").await.len(), api["companies"].as_array().unwrap().len());
    shots.take(client, "partner", "h1").await;
    id
}

/// `11222333000181` as the pages write it.
fn cnpj_shown(c: &str) -> String {
    format!("{}.{}.{}/{}-{}", &c[..2], &c[2..5], &c[5..8], &c[8..12], &c[12..])
}

/// A search by state alone, exported: 500 rows asked, their cost shown and confirmed, the file
/// downloaded. Returns its lines.
async fn export_500(client: &Client, base: &str, downloads: &Path) -> Vec<String> {
    client.goto(&format!("{base}/search?state=SP&go=1")).await.unwrap();
    element(client, "#export").await.click().await.unwrap();
    let rows = element(client, "#export-rows-asked").await;
    rows.clear().await.unwrap();
    rows.send_keys("500").await.unwrap();
    element(client, "form[method=get] button[type=submit]").await.click().await.unwrap();
    let wait = client.wait().at_most(Duration::from_secs(30));
    wait.for_element(Locator::XPath("//dd[@id='export-credits'][text()='500']")).await.unwrap();
    element(client, "#confirm-export").await.click().await.unwrap();
    let csv = downloaded(downloads, "cnpj-search.csv").await;
    csv.split("\r\n").filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

/// The file `name` Chromium downloaded into `downloads`, once written whole (UTF-8).
async fn downloaded(downloads: &Path, name: &str) -> String {
    let file = downloads.join(name);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Chrome reserves the name with an empty file, writes a `.crdownload`, then renames it.
    let partial = |dir: &Path| {
        std::fs::read_dir(dir).unwrap().any(|e| e.unwrap().path().extension().is_some_and(|x| x == "crdownload"))
    };
    while std::fs::metadata(&file).map_or(true, |m| m.len() == 0) || partial(downloads) {
        assert!(Instant::now() < deadline, "no download in {}", downloads.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    std::fs::read_to_string(&file).expect("the CSV is UTF-8")
}

/// The walk's search (its `query`) again, its whole result exported as a job: the search page's
/// link names its rows and credits, the confirmation page the same and the balance; confirmed
/// (CSV), the job's page refreshes itself until the file is written, then links to it; the file
/// Chromium downloads is the people's export's CSV of the search's items, in order. Screenshots
/// of both pages. Returns the rows (the credits held).
async fn export_the_whole_result_as_a_job(
    client: &Client,
    s: &Server,
    scout: &str,
    query: &str,
    downloads: &Path,
    shots: &Shots,
) -> u64 {
    let total = get(s, &format!("/api/v1/companies/count?{query}"), scout).body["total"].as_u64().unwrap();
    client.goto(&format!("http://{}/search?{query}&go=1", s.addr)).await.unwrap();
    let link = element(client, "#export-all").await;
    assert_eq!(link.text().await.unwrap(), format!("Exportar todas as {total} linhas ({total} créditos)"));
    link.click().await.unwrap();
    element(client, "#confirm-export-job").await;
    assert_eq!(texts(client, "#export-job-cost dd").await[..2], [total.to_string(), total.to_string()]);
    shots.take(client, "export-job-confirm", "h1").await;
    element(client, "#confirm-export-job").await.click().await.unwrap();
    // Its page reloads itself (`Refresh: 3`) until the job is done: the download link then.
    let wait = client.wait().at_most(Duration::from_secs(60));
    let download = wait.for_element(Locator::Css("#job-download")).await.expect("the job's file within a minute");
    let url = client.current_url().await.unwrap();
    let id = url.path().strip_prefix("/search/exports/").expect("the job's page").to_owned();
    assert_eq!(texts(client, "#job-status").await, ["Pronta"]);
    assert_eq!(texts(client, "#job-written").await, [total.to_string()]);
    shots.take(client, "export-job", "h1").await;
    download.click().await.unwrap();
    let csv = downloaded(downloads, &format!("cnpj-export-{id}.csv")).await;
    let items = items(s, scout, &format!("{query}&locale=pt-br"));
    assert_eq!(items.len() as u64, total);
    let columns = cnpj_pages::csv_columns(&items[0]);
    assert!(columns.starts_with(&["id".into(), "cnpj".into(), "razao_social".into()]), "{columns:?}");
    let mut lines = csv.split_inclusive("\r\n");
    assert_eq!(lines.next(), Some(cnpj_pages::csv_header(&columns).as_str()), "the CSV's header");
    let rows: Vec<&str> = lines.collect();
    let expected: Vec<String> = items.iter().map(cnpj_pages::csv_line).collect();
    assert_eq!(rows, expected, "the CSV's rows are the search's items, in order");
    total
}

/// The same requests by token: the walker's credits moved as the twin's did, and the CSV's rows
/// are the API's search items, in order.
fn the_api_charges_the_same(
    s: &Server,
    [twin, scout]: [&str; 2],
    query: &str,
    [company, partner]: [&str; 2],
    exported: &[String],
    job: u64,
) {
    for page in 1..=3 {
        assert_eq!(get(s, &format!("/api/v1/companies/search?{query}&page={page}"), twin).status, 200);
    }
    assert_eq!(get(s, &format!("/api/v1/companies/{company}"), twin).status, 200);
    assert_eq!(get(s, &format!("/api/v1/companies/{company}/network"), twin).status, 200);
    assert_eq!(get(s, &format!("/api/v1/partners/{partner}"), twin).status, 200);
    assert_eq!(get(s, "/api/v1/companies/search?state=SP", twin).status, 200);
    let mut items = Vec::new();
    for page in 1..=10 {
        let reply = get(s, &format!("/api/v1/companies/search?state=SP&per_page=50&page={page}"), scout);
        items.extend(cnpjs(&reply.body));
    }
    for chunk in items.chunks(100) {
        let batch = post(s, "/api/v1/companies/batch", twin, &json!({"cnpjs": chunk}));
        assert_eq!(batch.body["credits_used"], 100);
    }
    assert_eq!(exported.len(), 501, "a header and 500 rows");
    assert!(exported[0].starts_with("id,cnpj,razao_social,"), "{}", exported[0]);
    let rows: Vec<&str> = exported[1..].iter().map(|l| l.split(',').next().unwrap()).collect();
    assert_eq!(rows, items, "the CSV's rows are the search's, in order");
    // The whole result as a job: its search again, then the job's credits held.
    assert_eq!(get(s, &format!("/api/v1/companies/search?{query}"), twin).status, 200);
    let filters = json!({"state": ["RJ", "SP"], "situacao_cadastral": "02", "business_sector": ACTIVITY});
    let accepted = post(s, "/api/v1/exports", twin, &json!({"filters": filters, "format": "csv"}));
    assert_eq!((accepted.status, accepted.body["data"]["credits"].as_u64()), (202, Some(job)), "{}", accepted.body);
    assert_eq!(s.credits("rui").1, s.credits("twin").1, "the pages charged what the API charged");
    assert_eq!(s.credits("rui").1, 3 + 1 + 1 + 1 + 1 + 500 + 1 + job as i64);
}
