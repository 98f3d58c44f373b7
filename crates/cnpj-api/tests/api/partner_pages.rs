//! The partners' pages for people over HTTP, beside the API on the real server (contract §14): a
//! company's page links each partner to its page and the company to its network; a partner's page
//! and the network page are priced like detail and show the API's values; the network's files
//! (CSV, JSON, GraphML) are attachments of the right type, charged like the endpoint, and hold the
//! API's network: the CSV a row per link, networkx reading the GraphML's nodes and links. Opened
//! from another site, their price first. With `serve --partners off`: 404, and no partner links.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::company_pages::{Visitor, by_id, person, scripted_server};
use super::{Server, get};

const COMPANY: &str = "11222333000181";

/// Credits used so far by `name`.
fn used(s: &Server, name: &str) -> i64 {
    s.credits(name).1
}

/// The partner ids a page links to, in order.
fn partner_links(page: &str) -> Vec<String> {
    page.split("href=\"/partners/").skip(1).map(|rest| rest.split('"').next().unwrap().to_owned()).collect()
}

#[test]
fn partner_and_network_pages_are_priced_like_detail_and_show_the_api() {
    let s = Server::start(&["--insecure-cookies"]);
    let (_, mut cai) = person(&s, "cai", 100);
    // The API's answers, asked by another user: cai's credits move by the pages alone.
    let token = s.user("ref", 1000);
    let (_, company) = cai.get(&format!("/companies/{COMPANY}"));
    let detail = get(&s, &format!("/api/v1/companies/{COMPANY}"), &token).body["data"].clone();
    let ids = partner_links(&company);
    assert_eq!(ids.len(), detail["socios"].as_array().unwrap().len(), "each partner links to its page: {company}");
    assert!(company.contains(&format!("href=\"/companies/{COMPANY}/network\"")), "the network's link");
    let before = used(&s, "cai");
    let mut people = 0;
    for (n, id) in ids.iter().enumerate() {
        let (r, page) = cai.get(&format!("/partners/{id}"));
        assert_eq!((r.status, used(&s, "cai")), (200, before + n as i64 + 1), "{page}");
        let partner = get(&s, &format!("/api/v1/partners/{id}"), &token).body["data"].clone();
        assert_eq!(by_id(&page, "partner-name"), html(partner["nome"].as_str().unwrap()));
        assert_eq!(by_id(&page, "partner-kind"), html(partner["tipo_descricao"].as_str().unwrap()));
        if partner["tipo"] == "2" {
            people += 1;
            assert_eq!(by_id(&page, "partner-document"), partner["documento"].as_str().unwrap());
            let rule = by_id(&page, "partner-identity");
            assert!(rule.starts_with("Pessoas com o mesmo nome e os mesmos seis dígitos do CPF"), "{rule}");
        }
        if let Some(own) = partner["company"]["cnpj"].as_str() {
            assert!(page.contains(&format!("id=\"partner-company\" href=\"/companies/{own}\"")), "{page}");
        }
        for c in partner["companies"].as_array().unwrap() {
            assert!(page.contains(&format!("href=\"/companies/{}\"", c["cnpj"].as_str().unwrap())), "{page}");
        }
    }
    assert!(people > 0, "a person among the partners");
    let before = used(&s, "cai");
    let (r, _) = cai.get("/partners/pzzzzzzzzzzzzzzzz");
    assert_eq!((r.status, used(&s, "cai")), (404, before), "an unknown partner costs nothing");
    network_page_and_files(&s, &mut cai, &token);
}

/// Text as the pages' templates escape it.
fn html(text: &str) -> String {
    text.replace('&', "&#38;").replace('<', "&#60;").replace('>', "&#62;").replace('"', "&#34;").replace('\'', "&#39;")
}

/// The network page (two pictures, the files' links, each node) and its three files, each
/// charged like the endpoint.
fn network_page_and_files(s: &Server, cai: &mut Visitor, token: &str) {
    let asked = "depth=2&max_nodes=50";
    let api = get(s, &format!("/api/v1/companies/{COMPANY}/network?{asked}"), token).body["data"].clone();
    let before = used(s, "cai");
    let (r, page) = cai.get(&format!("/companies/{COMPANY}/network?{asked}"));
    assert_eq!((r.status, used(s, "cai")), (200, before + 1), "{page}");
    assert_eq!(page.matches("<svg xmlns=\"http://www.w3.org/2000/svg\"").count(), 2, "a picture per width");
    assert_eq!(page.matches(" role=\"img\" ").count(), 2);
    assert!(!page.contains("<script"), "no script");
    let nodes = api["nodes"].as_array().unwrap();
    let edges = api["edges"].as_array().unwrap();
    assert!(nodes.len() > 2 && !edges.is_empty(), "{api}");
    for node in nodes.iter().filter(|n| n["kind"] == "partner") {
        assert!(page.contains(&format!("href=\"/partners/{}\"", node["id"].as_str().unwrap())), "{node}");
    }
    let mut files = Vec::new();
    for (extension, content_type) in
        [("csv", "text/csv; charset=utf-8"), ("json", "application/json"), ("graphml", "application/graphml+xml")]
    {
        let link = format!("/companies/{COMPANY}/network.{extension}?depth=2&#38;max_nodes=50&#38;active_only=false");
        assert!(page.contains(&format!("href=\"{link}\"")), "{link} in {page}");
        let charged = used(s, "cai");
        let (r, text) = cai.get(&link.replace("&#38;", "&"));
        assert_eq!((r.status, used(s, "cai")), (200, charged + 1), "{extension}: {text}");
        assert!(r.header("content-type").unwrap().starts_with(content_type), "{extension}");
        let disposition = r.header("content-disposition").unwrap();
        assert_eq!(disposition, format!("attachment; filename=\"network-11222333.{extension}\""));
        files.push(text);
    }
    let charged = used(s, "cai");
    let (r, page) = cai.get(&format!("/companies/{COMPANY}/network?depth=9"));
    assert_eq!((r.status, used(s, "cai")), (400, charged), "a depth out of range, free: {page}");
    assert!(page.contains(&format!("href=\"/companies/{COMPANY}/network\"")), "a way back: {page}");
    let [csv, json, graphml] = <[String; 3]>::try_from(files).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), api, "the JSON is the API's data");
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines[0], "from,to,kind,qualificacao,data_entrada,from_label,to_label");
    assert_eq!(lines.len() - 1, edges.len(), "a row per link");
    for (line, edge) in lines[1..].iter().zip(edges) {
        assert!(line.starts_with(&format!("{},{},{},", edge["from"], edge["to"], edge["kind"]).replace('"', "")));
    }
    let read = networkx_counts(&graphml);
    assert_eq!(read, (nodes.len(), edges.len()), "networkx reads every node and link");
}

/// How many nodes and links networkx reads in a GraphML document (`CNPJ_TEST_PYTHON`).
fn networkx_counts(graphml: &str) -> (usize, usize) {
    let python = std::env::var("CNPJ_TEST_PYTHON").unwrap_or_else(|_| {
        panic!("CNPJ_TEST_PYTHON is not set: the network test needs a Python with networkx (scripts/setup-test-deps)")
    });
    let script = "import sys, networkx as nx\ng = nx.read_graphml(sys.stdin.buffer)\n\
                  print(g.number_of_nodes(), g.number_of_edges())";
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("CNPJ_TEST_PYTHON={python} cannot be run: {e}"));
    child.stdin.take().unwrap().write_all(graphml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "networkx: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let counts: Vec<usize> = text.split_whitespace().map(|n| n.parse().unwrap()).collect();
    (counts[0], counts[1])
}

/// A company named `<script>alert(1)</script> & EXEMPLO LTDA`: its network's pictures, set in the
/// page as they are, hold its name as text.
#[test]
fn a_network_picture_holds_names_as_text() {
    let s = scripted_server();
    let (_, mut fia) = person(&s, "fia", 100);
    let (r, page) = fia.get(&format!("/companies/{COMPANY}/network"));
    assert_eq!(r.status, 200, "{page}");
    assert!(!page.contains("<script"), "{page}");
    let svg = &page[page.find("<svg").unwrap()..];
    assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; EXEMPLO LTDA"), "{svg}");
}

/// Opened from another site (no `Sec-Fetch-Site: same-origin`): the price and a button, nothing
/// charged; a file too.
#[test]
fn partner_pages_opened_from_another_site_show_their_price_first() {
    let s = Server::start(&["--insecure-cookies"]);
    let (_, mut dan) = person(&s, "dan", 100);
    let (_, company) = dan.get(&format!("/companies/{COMPANY}"));
    let id = partner_links(&company)[0].clone();
    let before = used(&s, "dan");
    for path in [
        format!("/partners/{id}"),
        format!("/companies/{COMPANY}/network?depth=1"),
        format!("/companies/{COMPANY}/network.csv?depth=1"),
    ] {
        let (r, page) = dan.send("GET", &path, None, &[("Sec-Fetch-Site", "cross-site")]);
        assert_eq!((r.status, used(&s, "dan")), (200, before), "{path}: {page}");
        assert!(page.contains("id=\"go-on\"") && page.contains("id=\"page-price\""), "{path}: {page}");
    }
}

/// `serve --partners off`: the partner and network pages are not there, and a company's page
/// links to neither.
#[test]
fn with_partners_off_there_are_no_partner_pages() {
    let s = Server::start(&["--insecure-cookies", "--partners", "off"]);
    let (_, mut eva) = person(&s, "eva", 100);
    let (r, company) = eva.get(&format!("/companies/{COMPANY}"));
    assert_eq!(r.status, 200);
    assert!(partner_links(&company).is_empty() && !company.contains("/network"), "{company}");
    let before = used(&s, "eva");
    for path in [
        "/partners/pzzzzzzzzzzzzzzzz".to_owned(),
        format!("/companies/{COMPANY}/network"),
        format!("/companies/{COMPANY}/network.graphml"),
    ] {
        let (r, _) = eva.get(&path);
        assert_eq!((r.status, used(&s, "eva")), (404, before), "{path}");
        // Not there at all: no price asked first either.
        let (r, _) = eva.send("GET", &path, None, &[("Sec-Fetch-Site", "cross-site")]);
        assert_eq!(r.status, 404, "{path} from another site");
    }
}
