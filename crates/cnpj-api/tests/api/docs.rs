//! The API reference page (`GET /docs`) in a real browser: headless Chromium driven through
//! chromedriver (Debian's `chromium` and `chromium-driver`; `scripts/setup-test-deps` installs
//! them) by WebDriver.
//! Every operation of the served OpenAPI document is listed on the page, and a request made with
//! the page's own "Authorize" and "Try it out" reaches the server (and is charged); the page and
//! its assets are served without a token, without charge, from this origin only.

use serde_json::{Value, json};

use crate::browser::{Driver, element};
use crate::{Server, get, request};

/// The (method, path) of every operation of an OpenAPI document, in its order.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let paths = doc["paths"].as_object().unwrap();
    paths.iter().flat_map(|(path, item)| item.as_object().unwrap().keys().map(|m| (m.clone(), path.clone()))).collect()
}

#[test]
fn the_docs_page_lists_every_operation_and_tries_one() {
    let s = Server::start(&[]);
    let token = s.user("rui", 10);
    // Not the document's example, which the page fills in: the test types its own.
    let cnpj = "44555666000181";
    // What the try-it request must show, read with another user's token.
    let checker = s.user("sol", 10);
    let expected = get(&s, &format!("/api/v1/companies/{cnpj}"), &checker);
    assert_eq!(expected.status, 200);
    let name = expected.body["data"]["razao_social"].as_str().unwrap().to_owned();
    let doc = request(&s.addr, "GET", "/api/v1/openapi.json", None, None).body;

    // The page and its assets: no token, the right types, versioned assets cached for good.
    let page = request(&s.addr, "GET", "/docs", None, None);
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    let csp = page.header("content-security-policy").expect("a Content-Security-Policy");
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"), "{csp}");
    let html = String::from_utf8(page.raw.clone()).unwrap();
    let version = include_str!("../../assets/swagger-ui/VERSION").trim();
    let assets = [
        (format!("/docs/swagger-ui-bundle-{version}.js"), "text/javascript; charset=utf-8", "immutable"),
        (format!("/docs/swagger-ui-{version}.css"), "text/css; charset=utf-8", "immutable"),
        ("/docs/docs.js".to_owned(), "text/javascript; charset=utf-8", "no-cache"),
    ];
    for (asset, content_type, cache) in &assets {
        assert!(html.contains(&format!("\"{asset}\"")), "the page names {asset}:\n{html}");
        let r = request(&s.addr, "GET", asset, None, None);
        assert_eq!((r.status, r.header("content-type")), (200, Some(*content_type)), "{asset}");
        assert!(r.header("cache-control").unwrap().contains(cache), "{asset}: {:?}", r.header("cache-control"));
        assert!(r.raw.len() > 100, "{asset}");
    }
    let documented = &doc["paths"]["/docs/{file}"]["get"]["parameters"][0]["schema"]["enum"];
    let names: Vec<&str> = assets.iter().map(|a| a.0.trim_start_matches("/docs/")).collect();
    assert_eq!(documented, &json!(names), "the document names the assets the page uses");
    let vendored = include_bytes!("../../assets/swagger-ui/swagger-ui-bundle.js");
    let bundle = request(&s.addr, "GET", &format!("/docs/swagger-ui-bundle-{version}.js"), None, None);
    assert!(bundle.raw == vendored, "the vendored bundle, byte for byte");
    let unknown = request(&s.addr, "GET", "/docs/swagger-ui-bundle-0.0.0.js", None, None);
    assert_eq!((unknown.status, unknown.body["message"].as_str()), (404, Some("Not found.")));
    let head = request(&s.addr, "HEAD", "/docs", None, None);
    assert_eq!((head.status, head.header("allow")), (405, Some("GET")));

    let profile = tempfile::tempdir().unwrap();
    let driver = Driver::start();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = driver.session(profile.path()).await;
        let base = format!("http://{}", s.addr);
        client.goto(&format!("{base}/docs")).await.unwrap();

        // Every operation of the served document is listed, and nothing else.
        element(&client, ".opblock [data-path]").await;
        let listed = client
            .execute(
                "return [...document.querySelectorAll('.opblock')].map(b => [
                    b.querySelector('.opblock-summary-method').textContent.toLowerCase(),
                    b.querySelector('[data-path]').dataset.path])",
                vec![],
            )
            .await
            .unwrap();
        let listed: Vec<(String, String)> = serde_json::from_value(listed).unwrap();
        let mut wanted = operations(&doc);
        assert!(wanted.len() >= 9, "{wanted:?}");
        let mut got = listed;
        got.sort();
        wanted.sort();
        assert_eq!(got, wanted, "the operations listed on the page");
        assert_eq!(s.credits("rui"), (10, 0), "the page costs nothing");

        // Authorize with the token, as a user would paste it.
        element(&client, ".auth-wrapper button.authorize").await.click().await.unwrap();
        element(&client, ".modal-ux .auth-container input").await.send_keys(&token).await.unwrap();
        element(&client, ".modal-ux .auth-btn-wrapper button.authorize").await.click().await.unwrap();
        element(&client, ".modal-ux .auth-btn-wrapper button.btn-done").await.click().await.unwrap();

        // Open the detail operation, try it out with a CNPJ of the sample, execute.
        let operation = "#operations-default-getCompany";
        element(&client, &format!("{operation} .opblock-summary-control")).await.click().await.unwrap();
        element(&client, &format!("{operation} button.try-out__btn")).await.click().await.unwrap();
        let input = format!("{operation} tr[data-param-name=cnpj][data-param-in=path] input");
        let input = element(&client, &input).await;
        input.clear().await.unwrap();
        input.send_keys(cnpj).await.unwrap();
        element(&client, &format!("{operation} button.execute")).await.click().await.unwrap();

        // The live response: the request URL, status 200, the record's data.
        let status =
            element(&client, &format!("{operation} .live-responses-table tr.response .response-col_status")).await;
        assert_eq!(status.text().await.unwrap().trim(), "200");
        let url = element(&client, &format!("{operation} .request-url pre")).await.text().await.unwrap();
        // (The page sends the locale's default, listed in the document.)
        assert_eq!(url.trim(), format!("{base}/api/v1/companies/{cnpj}?locale=pt-br"));
        let body =
            element(&client, &format!("{operation} .live-responses-table tr.response .response-col_description"))
                .await
                .text()
                .await
                .unwrap();
        assert!(body.contains(&format!("\"razao_social\": \"{name}\"")), "{body}");
        assert!(body.contains("x-ratelimit-remaining: 99"), "the server's own headers: {body}");

        // Nothing was fetched from elsewhere, and the browser logged no error (a request or a
        // style the Content-Security-Policy refused would be one).
        let fetched =
            client.execute("return performance.getEntriesByType('resource').map(e => e.name)", vec![]).await.unwrap();
        let fetched: Vec<String> = serde_json::from_value(fetched).unwrap();
        assert!(fetched.iter().any(|u| *u == format!("{base}/api/v1/companies/{cnpj}?locale=pt-br")), "{fetched:?}");
        assert!(fetched.iter().all(|u| u.starts_with(&format!("{base}/"))), "{fetched:?}");
        let session = client.session_id().await.unwrap().unwrap();
        let log = driver.browser_log(&session);
        let problems: Vec<&Value> = log.as_array().unwrap().iter().filter(|e| e["level"] != "INFO").collect();
        assert!(problems.is_empty(), "the browser logged: {problems:#?}");
        client.close().await.unwrap();
    });
    // The server answered the page's request and charged it, like any other.
    assert_eq!(s.credits("rui"), (9, 1), "the try-it request was served and charged");
}
