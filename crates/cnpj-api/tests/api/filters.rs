//! Issue 42's filters over HTTP: a code filter's comma-separated list (any of its values), the new
//! filters (`any_sector`, `capital_from`/`capital_to`, `has_email`, `has_phone`, `simples`, `mei`,
//! `head_office`) over the sample dump, whose eleven establishments are known one by one, each bad
//! value a 400 naming its parameter; and `GET /api/v1/companies/count`, the search's total, free
//! but counted in the rate limit.

use serde_json::json;

use super::{Server, error_of, get, request};

/// The sample dump's establishments, as these filters see them (`cnpj`, state, head office, email,
/// phone, main CNAE, secondary CNAEs, capital, Simples, MEI):
/// ```text
/// 11222333000181 SP 1 email phone 6204000 6201501,6202300,6203100 10000.00   S N
/// 11222333000262 SP 2 email -     4781400 -                       10000.00   S N
/// 12345678000195 MG 1 -     phone 8888888 -                       5000.00    S S
/// 22333444000181 SP 1 email phone 0111301 -                       1000.00    (no option)
/// 33444555000181 SP 1 -     phone 5611201 -                       (no company)
/// 44555666000181 EX 1 -     -     8411600 -                       0.00       (not in Simples)
/// 44555666000262 SP 2 -     phone 6204000 -                       0.00
/// 55666777000181 SP 1 -     -     6204000 -                       999999999999.00
/// 77888999000262 SP 2 -     phone 6204000 -                       50000.50
/// 77888999000343 SP 2 -     phone 6204000 -                       50000.50
/// AB12CD34000184 DF 1 -     phone 6204000 -                       10000.00
/// ```
#[test]
fn lists_new_filters_and_the_free_count() {
    let s = Server::start(&["--rate-limit", "1000"]);
    let token = s.user("lia", 100);
    // The count of a query, checked against the total of the search of the same query.
    let count = |query: &str| -> u64 {
        let r = get(&s, &format!("/api/v1/companies/count?{query}"), &token);
        assert_eq!(r.status, 200, "{query}: {}", r.body);
        let total = r.body["total"].as_u64().unwrap();
        assert_eq!(r.body, json!({"success": true, "total": total}), "{query}");
        let search = get(&s, &format!("/api/v1/companies/search?{query}&per_page=50"), &token);
        assert_eq!(search.body["total"].as_u64(), Some(total), "{query}: the search's total");
        total
    };
    let cases: &[(&str, u64)] = &[
        ("", 11),
        // Lists: any of their values; repeats, case and padding count once.
        ("state=SP", 8),
        ("state=SP,DF", 9),
        ("state=sp,SP,DF", 9),
        ("state=MG,EX,AC", 2),
        ("situacao_cadastral=2,8", 9),
        ("situacao_cadastral=02,2", 8),
        ("city_id=9999,1182", 1),
        ("business_sector=6204000,4781400", 7),
        ("business_sector=6201501", 0),
        ("company_size=05,5&porte_empresa_code=5", 3),
        // Lists still combine with AND.
        ("state=SP,MG&situacao_cadastral=4,8", 2),
        // The main or a secondary activity.
        ("any_sector=6201-5/01", 1),
        ("any_sector=6204000", 6),
        ("any_sector=6201501,4781400", 2),
        // The company's capital, inclusive; a company without one matches no capital filter.
        ("capital_from=10000", 6),
        ("capital_from=10000.01", 3),
        ("capital_from=50000.5&capital_to=50000.50", 2),
        ("capital_to=0", 2),
        ("capital_to=999.99", 2),
        ("capital_from=0", 10),
        ("capital_from=1000000&capital_to=999999", 0),
        ("capital_from=9999999999999999.99", 0),
        // Yes or no.
        ("has_email=true", 3),
        ("has_email=false", 8),
        ("has_phone=true", 8),
        ("has_phone=false", 3),
        ("simples=true", 3),
        ("simples=false", 8),
        ("mei=true", 1),
        ("mei=false", 10),
        ("head_office=true", 7),
        ("head_office=false", 4),
        ("state=SP&has_email=true&head_office=true", 2),
        ("simples=true&has_phone=true&capital_to=5000", 1),
    ];
    for &(query, expected) in cases {
        assert_eq!(count(query), expected, "{query}");
    }
    let (credits, used) = s.credits("lia");
    assert_eq!(credits + used, 100);
    let searches_with_items = cases.iter().filter(|(_, n)| *n > 0).count() as i64;
    assert_eq!(used, searches_with_items, "the searches paid, the counts did not");
    // Up to 50 values.
    let fifty: Vec<String> = (1..=50).map(|n| n.to_string()).collect();
    assert_eq!(count(&format!("city_id={}", fifty.join(","))), 0);
}

/// Each bad value, in a list or alone, is a 400 naming its parameter, from the search and the
/// count alike.
#[test]
fn bad_values_name_their_parameter() {
    let s = Server::start(&["--rate-limit", "1000"]);
    let token = s.user("ivo", 10);
    let fifty: Vec<String> = (1..=50).map(|n| n.to_string()).collect();
    let r = get(&s, &format!("/api/v1/companies/count?city_id={},51", fifty.join(",")), &token);
    assert_eq!(error_of(&r), (400, "Invalid input parameters"));
    assert!(r.body["errors"]["city_id"][0].as_str().unwrap().contains("at most 50"), "{}", r.body);
    for (bad, param) in [
        ("state=SP,,RJ", "state"),
        ("state=SP,", "state"),
        ("state=SP,%20RJ", "state"),
        ("state=SP,+RJ", "state"),
        ("business_sector=4781400,12", "business_sector"),
        ("any_sector=x", "any_sector"),
        ("capital_from=1.000,00", "capital_from"),
        ("capital_from=1,5", "capital_from"),
        ("capital_to=-1", "capital_to"),
        ("capital_to=1e6", "capital_to"),
        ("has_email=yes", "has_email"),
        ("has_phone=1", "has_phone"),
        ("simples=S", "simples"),
        ("mei=TRUE", "mei"),
        ("head_office=", "head_office"),
        ("company_size=1,3&porte_empresa_code=3", "company_size"),
    ] {
        for endpoint in ["search", "count"] {
            let r = get(&s, &format!("/api/v1/companies/{endpoint}?{bad}"), &token);
            assert_eq!(error_of(&r), (400, "Invalid input parameters"), "{endpoint}?{bad}");
            assert!(r.body["errors"][param].is_array(), "{endpoint}?{bad}: {}", r.body);
        }
    }
    assert_eq!(s.credits("ivo"), (10, 0));
}

/// A count needs a token and counts in the rate limit, though it costs nothing.
#[test]
fn a_count_is_authenticated_and_rate_limited() {
    let s = Server::start(&["--rate-limit", "2", "--rate-window", "60"]);
    let token = s.user("rui", 0);
    let r = request(&s.addr, "GET", "/api/v1/companies/count?state=SP", None, None);
    assert_eq!(error_of(&r), (401, "Unauthenticated."));
    for _ in 0..2 {
        assert_eq!(get(&s, "/api/v1/companies/count?state=SP", &token).body, json!({"success": true, "total": 8}));
    }
    let r = get(&s, "/api/v1/companies/count?state=SP", &token);
    assert_eq!(error_of(&r), (429, "Too many requests."));
    assert_eq!(s.credits("rui"), (0, 0));
}
