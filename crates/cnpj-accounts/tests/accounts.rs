//! The accounts store on Postgres, as API replicas share it: two `Accounts` opened on one
//! database charge (allowance and credits) and count requests concurrently; stores of versions 0
//! and 1 migrated; people, sessions, links, usage and erasure on Postgres. Needs the throwaway cluster
//! of `scripts/test`. Watchlists and their deliveries: one walk through every operation, on SQLite
//! and on Postgres.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cnpj_accounts::{
    Accounts, AccountsError, Insufficient, LinkKind, LoginTry, NewWatchlist, Plans, Status, UsageRow, WatchlistChange,
    hash_password,
};

/// A new, empty database on the test cluster; its URL.
fn pg_database() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let base = std::env::var("CNPJ_TEST_POSTGRES")
        .expect("CNPJ_TEST_POSTGRES is not set: run the suite with scripts/test, which starts a throwaway Postgres");
    let name = format!("accounts_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let mut admin = postgres::Client::connect(&format!("{base}/postgres"), postgres::NoTls).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    format!("{base}/{name}")
}

#[test]
fn tokens_credits_and_ledger_on_postgres() {
    let a = Accounts::open_postgres(&pg_database()).unwrap();
    let user = a.create_user("ana", 3).unwrap();
    assert!(matches!(a.create_user("ana", 1), Err(AccountsError::UserExists(_))));
    let token = a.issue_token("ana", None).unwrap();
    assert_eq!(a.authenticate(&token).unwrap(), Some(user.clone()));
    assert_eq!(a.authenticate("cnpj_00000000000000").unwrap(), None);
    let expired = a.issue_token("ana", Some(0)).unwrap();
    assert_eq!(a.authenticate(&expired).unwrap(), None, "an expiry of 0 days is already past");
    a.revoke_token(&token[..12]).unwrap();
    assert_eq!(a.authenticate(&token).unwrap(), None);
    assert!(matches!(a.revoke_token("cnpj_nothing"), Err(AccountsError::UnknownToken(_))));
    assert_eq!(a.charge(user.id, 2, "batch").unwrap(), Ok(1));
    assert_eq!(a.charge(user.id, 2, "batch").unwrap(), Err(Insufficient { balance: 1 }));
    assert_eq!(a.grant("ana", -5).unwrap().credits, 0, "never below zero");
    assert_eq!(a.grant("ana", 4).unwrap().credits, 4);
    let (shown, tokens, used) = a.show("ana").unwrap();
    assert_eq!((shown.credits, tokens.len(), used), (4, 2, 2));
    assert!(matches!(a.grant("nobody", 1), Err(AccountsError::UnknownUser(_))));
}

#[test]
fn replicas_never_overspend_and_share_the_rate_limit() {
    let url = pg_database();
    // Half of the 100 credits that can be spent is the plan's allowance, taken first.
    let plans = || Plans::parse("default = \"free\"\n[plans.free]\nmonthly_allowance = 50\n").unwrap();
    let replicas = [
        Accounts::open_postgres(&url).unwrap().with_plans(plans()),
        Accounts::open_postgres(&url).unwrap().with_plans(plans()),
    ];
    let user = replicas[0].create_user("bia", 50).unwrap();
    let outcomes: Vec<Result<i64, Insufficient>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let replica = &replicas[i % 2];
                scope.spawn(move || replica.charge(user.id, 3, "batch").unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let charged = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(charged, 33, "100 credits pay for 33 charges of 3");
    let (left, _, used) = replicas[1].show("bia").unwrap();
    assert_eq!((left.credits, used), (1, 99), "balance and ledger agree");
    let person = replicas[1].person(user.id).unwrap().unwrap();
    assert_eq!(replicas[1].allowance_left(&person), 0, "the allowance went first");

    let window = Duration::from_secs(2);
    let verdicts: Vec<Result<u32, u64>> =
        (0..6).map(|i| replicas[i % 2].rate_check(user.id, 4, window).unwrap()).collect();
    assert_eq!(verdicts[..4], [Ok(3), Ok(2), Ok(1), Ok(0)]);
    assert!(matches!(verdicts[4], Err(1..=2)), "{verdicts:?}");
    assert!(verdicts[5].is_err(), "a refused request is not counted, and the limit holds on every replica");
    std::thread::sleep(window);
    assert_eq!(replicas[1].rate_check(user.id, 4, window).unwrap(), Ok(3), "the window rolls");
}

#[test]
fn a_store_of_version_0_is_migrated_on_postgres() {
    let url = pg_database();
    let mut old = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    old.batch_execute(include_str!("../../../sql/postgres/accounts.sql")).unwrap();
    old.batch_execute("INSERT INTO cnpj_accounts.users (name, credits, created_at) VALUES ('ana', 7, 1)").unwrap();
    let a = Accounts::open_postgres(&url).unwrap();
    let token = a.issue_token("ana", None).unwrap();
    let user = a.authenticate(&token).unwrap().unwrap();
    assert_eq!(a.charge(user.id, 2, "detail").unwrap(), Ok(5));
    let version: i32 = old.query_one("SELECT version FROM cnpj_accounts.version", &[]).unwrap().get(0);
    assert_eq!(version, 4);
    drop(a);
    Accounts::open_postgres(&url).unwrap().authenticate(&token).unwrap().expect("opened again, nothing lost");
}

#[test]
fn a_store_of_version_1_gets_the_watchlists_on_postgres_whether_it_has_their_tables_or_not() {
    for had_tables in [false, true] {
        let url = pg_database();
        let mut old = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        old.batch_execute(include_str!("../../../sql/postgres/accounts.sql")).unwrap();
        old.batch_execute("SET search_path TO cnpj_accounts").unwrap();
        old.batch_execute(include_str!("../../../sql/postgres/accounts-1.sql")).unwrap();
        old.batch_execute(
            "CREATE TABLE version (version integer NOT NULL); INSERT INTO version VALUES (1); \
             INSERT INTO users (name, credits, created_at) VALUES ('ana', 0, 1)",
        )
        .unwrap();
        if had_tables {
            // Earlier builds made the very same tables whenever a store was opened.
            old.batch_execute(include_str!("../../../sql/postgres/accounts-2.sql")).unwrap();
            old.batch_execute(
                "INSERT INTO watchlists (user_id, name, events, entries, created_at, updated_at) \
                 VALUES (1, 'kept', '', 1, 1, 1); INSERT INTO watchlist_entries VALUES (1, '11222333')",
            )
            .unwrap();
        }
        let a = Accounts::open_postgres(&url).unwrap();
        let version: i32 = old.query_one("SELECT version FROM version", &[]).unwrap().get(0);
        assert_eq!(version, 4, "had the tables: {had_tables}");
        let cnpjs = strings(&["33683111"]);
        a.create_watchlist(1, &NewWatchlist { name: "new", cnpjs: &cnpjs, events: &[], webhook_url: None }).unwrap();
        let names: Vec<String> = a.watchlists(1).unwrap().into_iter().map(|l| l.name).collect();
        assert_eq!(names, if had_tables { strings(&["kept", "new"]) } else { strings(&["new"]) });
        if had_tables {
            assert_eq!(a.watchlist(1, 1, 0, None).unwrap().unwrap().1, ["11222333"], "its entries kept");
        }
    }
}

#[test]
fn people_sessions_links_and_usage_on_postgres() {
    let a = Accounts::open_postgres(&pg_database()).unwrap();
    let hashed = hash_password("a long enough secret").unwrap();
    let invite = a.make_link(LinkKind::Invite, "Ana@Example.com", None, None, 9).unwrap();
    let ana = a.accept_invite(&invite, &hashed, "Ana", "en").unwrap().unwrap();
    assert!(a.accept_invite(&invite, &hashed, "Ana", "en").unwrap().is_none(), "single use");
    assert!(matches!(
        a.create_person("ana@EXAMPLE.com", &hashed, "", "en", Status::Active),
        Err(AccountsError::EmailTaken(_))
    ));
    let session = a.open_session(ana.id).unwrap();
    assert_eq!(a.session(&session).unwrap().unwrap().person.credits, 9);
    let token = a.create_token(ana.id, "laptop", None).unwrap();
    assert!(a.revoke_token_of(Some(ana.id), &token[..12]).unwrap());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let today = cnpj_model::utc_text(now)[..10].to_owned();
    let row = UsageRow {
        user_id: ana.id,
        day: today.clone(),
        endpoint: "detail".into(),
        status_class: "2xx".into(),
        requests: 2,
        credits: 1,
    };
    a.record_usage(&[row.clone(), row], &[(token[..12].to_owned(), 5)]).unwrap();
    let usage = a.usage(ana.id, 1).unwrap();
    assert_eq!((usage.len(), usage[0].requests, usage[0].credits), (1, 4, 2), "a batch adds up");
    let summary = &a.user_summaries("ana").unwrap()[0];
    assert_eq!((summary.requests_30d, summary.last_activity.is_some()), (4, true));
    a.admin_grant(ana.id, ana.id, -100, "test").unwrap();
    assert_eq!(a.person(ana.id).unwrap().unwrap().credits, 0, "never below zero");
    assert_eq!(a.audit_log(5).unwrap()[0].target.as_deref(), Some("ana@example.com"));
    let login = LoginTry { email: "ana@example.com".into(), address: "10.0.0.1".into(), device: None };
    for _ in 0..5 {
        a.login_failed(&login).unwrap();
    }
    assert!(a.login_wait(&login).unwrap().is_some());
    assert_eq!(a.signup_try("10.0.0.1".parse().unwrap()).unwrap(), None, "the sign-up throttle on Postgres");
    let cnpjs = ["11222333".to_owned()];
    a.create_watchlist(ana.id, &NewWatchlist { name: "l", cnpjs: &cnpjs, events: &[], webhook_url: None }).unwrap();
    a.erase(ana.id).unwrap();
    assert!(a.session(&session).unwrap().is_none());
    assert!(a.person_by_email("ana@example.com").unwrap().is_none());
    assert!(a.watchlists(ana.id).unwrap().is_empty(), "the watchlists erased too");
}

/// The plans of the watchlists' walk: 10 CNPJs watched by default, 12 on `more`.
fn small_caps() -> Plans {
    Plans::parse("default = \"free\"\n[plans.free]\nmax_watched = 10\n[plans.more]\nmax_watched = 12\n").unwrap()
}

#[test]
fn watchlists_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    watchlists_walk(&Accounts::open(&dir.path().join("accounts.sqlite")).unwrap().with_plans(small_caps()));
}

#[test]
fn watchlists_on_postgres() {
    watchlists_walk(&Accounts::open_postgres(&pg_database()).unwrap().with_plans(small_caps()));
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Invalid entries (every one named, with its field), too many at once, or no name: nothing
/// stored (`ana` has one list, `id`, of 2 entries).
fn refused_whole(a: &Accounts, ana: i64, id: i64, new: &NewWatchlist<'_>) {
    let bad = strings(&["44555666", "11222333000182", "nope"]);
    let refused = a.create_watchlist(ana, &NewWatchlist { cnpjs: &bad, ..*new });
    assert!(matches!(&refused, Err(AccountsError::InvalidCnpjs(i)) if i.len() == 2), "{refused:?}");
    let change = WatchlistChange { add: &bad[1..], remove: &bad[2..], ..Default::default() };
    let Err(AccountsError::InvalidCnpjs(invalid)) = a.update_watchlist(ana, id, &change) else { panic!("refused") };
    let named: Vec<(&str, &str)> = invalid.iter().map(|i| (i.field, i.entry.as_str())).collect();
    assert_eq!(named, [("add", "11222333000182"), ("add", "nope"), ("remove", "nope")]);
    let too_many = vec!["44555666".to_owned(); cnpj_accounts::MAX_PER_REQUEST + 1];
    let refused = a.create_watchlist(ana, &NewWatchlist { cnpjs: &too_many, ..*new });
    assert!(matches!(refused, Err(AccountsError::TooManyCnpjs("cnpjs"))), "{refused:?}");
    let unnamed = a.create_watchlist(ana, &NewWatchlist { name: "  ", ..*new });
    assert!(matches!(unnamed, Err(AccountsError::WatchlistName)), "{unnamed:?}");
    assert_eq!(a.watchlists(ana).unwrap().len(), 1);
    assert_eq!(a.watchlist(ana, id, 0, None).unwrap().unwrap().0.entries, 2);
}

/// Lists kept per user within the cap, on either store.
fn watchlists_walk(a: &Accounts) {
    let ana = a.create_user("ana", 0).unwrap().id;
    let bia = a.create_user("bia", 0).unwrap().id;
    let cnpjs = strings(&["11.222.333/0001-81", "33683111", "11222333000181"]);
    let new = NewWatchlist { name: "suppliers", cnpjs: &cnpjs, events: &[], webhook_url: None };
    let saved = a.create_watchlist(ana, &new).unwrap();
    assert_eq!((saved.watchlist.entries, saved.webhook_secret), (2, None));
    let id = saved.watchlist.id;
    let (list, entries) = a.watchlist(ana, id, 0, None).unwrap().unwrap();
    assert_eq!((list.name.as_str(), entries), ("suppliers", strings(&["11222333000181", "33683111"])));
    assert_eq!(a.watchlist(bia, id, 0, None).unwrap(), None, "another user's list is not found");
    assert!(!a.delete_watchlist(bia, id).unwrap());

    refused_whole(a, ana, id, &new);

    // The cap counts every list of the user.
    let many: Vec<String> = (0..9).map(|i| format!("{:08}", 10 + i)).collect();
    let over = a.create_watchlist(ana, &NewWatchlist { name: "many", cnpjs: &many, ..new });
    assert!(matches!(over, Err(AccountsError::OverCap { cap: 10, watched: 11 })), "{over:?}");
    assert_eq!(a.watchlists(ana).unwrap().len(), 1, "nothing stored");
    let url = "https://hooks.example.com/cnpj";
    let with_hook = NewWatchlist { name: "many", cnpjs: &many[..8], webhook_url: Some(url), ..new };
    let second = a.create_watchlist(ana, &with_hook).unwrap();
    let secret = second.webhook_secret.clone().unwrap();
    assert!(secret.starts_with("whsec_") && secret.len() == 6 + 64);
    assert!(a.create_watchlist(bia, &with_hook).is_ok(), "caps are per user");

    // A change: add and remove, rename, events, the webhook; a new secret only when asked.
    let events = strings(&["moved", "opened"]);
    let change = WatchlistChange {
        name: Some("main"),
        add: &many[8..],
        remove: &strings(&["33.683.111", "99999999"]),
        events: Some(&events),
        ..Default::default()
    };
    let changed = a.update_watchlist(ana, id, &change).unwrap().unwrap();
    assert_eq!((changed.watchlist.entries, changed.webhook_secret), (2, None));
    assert_eq!((changed.watchlist.name.as_str(), &changed.watchlist.events), ("main", &events));
    assert!(changed.watchlist.revision > saved.watchlist.revision);
    let over = WatchlistChange { add: &strings(&["77777777"]), ..Default::default() };
    assert!(matches!(a.update_watchlist(ana, id, &over), Err(AccountsError::OverCap { cap: 10, watched: 11 })));
    // The cap is the user's plan's, as it is when the list changes.
    a.admin_set_plan(ana, ana, "more").unwrap();
    assert_eq!(a.update_watchlist(ana, id, &over).unwrap().unwrap().watchlist.entries, 3);
    let past = WatchlistChange { add: &strings(&["88888888", "99999999"]), ..Default::default() };
    assert!(matches!(a.update_watchlist(ana, id, &past), Err(AccountsError::OverCap { cap: 12, watched: 13 })));
    let back = WatchlistChange { remove: &strings(&["77777777"]), ..Default::default() };
    a.update_watchlist(ana, id, &back).unwrap().unwrap();
    a.admin_set_plan(ana, ana, "free").unwrap();
    let hook = WatchlistChange { webhook_url: Some(Some(url)), ..Default::default() };
    let hooked = a.update_watchlist(ana, id, &hook).unwrap().unwrap();
    assert!(hooked.webhook_secret.is_some(), "a first webhook gets a secret");
    assert!(a.update_watchlist(ana, id, &hook).unwrap().unwrap().webhook_secret.is_none());
    let rotate = WatchlistChange { rotate_secret: true, ..Default::default() };
    let rotated = a.update_watchlist(ana, second.watchlist.id, &rotate).unwrap().unwrap();
    assert!(rotated.webhook_secret.is_some_and(|s| s != secret));
    let unhook = WatchlistChange { webhook_url: Some(None), ..Default::default() };
    assert_eq!(a.update_watchlist(ana, id, &unhook).unwrap().unwrap().watchlist.webhook_url, None);
    assert_eq!(a.update_watchlist(bia, id, &unhook).unwrap(), None);

    // Entries paged in key order; a list deleted with its entries.
    let (_, page) = a.watchlist(ana, second.watchlist.id, 2, Some(3)).unwrap().unwrap();
    assert_eq!(page, many[2..5]);
    assert!(a.delete_watchlist(ana, second.watchlist.id).unwrap());
    assert_eq!(a.watchlist(ana, second.watchlist.id, 0, None).unwrap(), None);
    let names: Vec<String> = a.watchlists(ana).unwrap().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["main"]);
    ids_never_handed_out_again(a, ana, bia, &new);
}

/// The id of a deleted list, the newest one included, is never another list's (what is known by
/// a list's id, as the API's kept entries, must never answer for another user's list).
fn ids_never_handed_out_again(a: &Accounts, ana: i64, bia: i64, new: &NewWatchlist<'_>) {
    let cnpjs = strings(&["44555666"]);
    let newest = a.create_watchlist(ana, &NewWatchlist { name: "newest", cnpjs: &cnpjs, ..*new }).unwrap().watchlist;
    assert!(a.delete_watchlist(ana, newest.id).unwrap());
    let made = a.create_watchlist(bia, &NewWatchlist { name: "bia's", cnpjs: &cnpjs, ..*new }).unwrap().watchlist;
    assert!(made.id > newest.id, "list {} was handed out again", newest.id);
    assert_eq!(a.watchlist(bia, newest.id, 0, None).unwrap(), None);
}

#[test]
fn deliveries_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("accounts.sqlite");
    deliveries_walk(&Accounts::open(&path).unwrap(), &Accounts::open(&path).unwrap());
}

#[test]
fn deliveries_on_postgres() {
    let url = pg_database();
    deliveries_walk(&Accounts::open_postgres(&url).unwrap(), &Accounts::open_postgres(&url).unwrap());
}

/// Deliveries made once per page, claimed by one process at a time under a lease, retried,
/// delivered, listed and retried by their user; `a` and `b` are two processes on one store.
fn deliveries_walk(a: &Accounts, b: &Accounts) {
    use cnpj_accounts::Attempt;
    let ana = a.create_user("ana", 0).unwrap().id;
    let bia = a.create_user("bia", 0).unwrap().id;
    let cnpjs = strings(&["11222333"]);
    let hooked = NewWatchlist { name: "l", cnpjs: &cnpjs, events: &[], webhook_url: Some("https://h.example/x") };
    let list = a.create_watchlist(ana, &hooked).unwrap().watchlist.id;
    let quiet = a.create_watchlist(ana, &NewWatchlist { webhook_url: None, ..hooked }).unwrap().watchlist.id;
    let lists = b.every_watchlist().unwrap();
    assert_eq!(
        lists.iter().map(|(u, l)| (*u, l.id, l.webhook_url.is_some())).collect::<Vec<_>>(),
        [(ana, list, true), (ana, quiet, false)]
    );
    assert!(!a.has_deliveries(list, "2026-10").unwrap());
    let bodies = strings(&["{\"page\":1}", "{\"page\":2}"]);
    a.enqueue(ana, list, "2026-10", &bodies).unwrap();
    b.enqueue(ana, list, "2026-10", &strings(&["{\"other\":1}"])).unwrap();
    assert!(a.has_deliveries(list, "2026-10").unwrap());

    // One claim takes them, under a lease: the other process gets none until it runs out.
    let now = 2_000_000_000;
    let due = a.claim_deliveries(now, 60, 10).unwrap();
    let ids: Vec<&str> = due.iter().map(|d| d.delivery.id.as_str()).collect();
    assert_eq!(ids, [format!("wl{list}-2026-10-1"), format!("wl{list}-2026-10-2")]);
    assert_eq!((due[0].body.as_str(), due[0].url.as_deref()), ("{\"page\":1}", Some("https://h.example/x")));
    assert!(due[0].secret.starts_with("whsec_") && due[0].delivery.pages == 2);
    assert!(b.claim_deliveries(now + 59, 60, 10).unwrap().is_empty(), "leased");
    let again = b.claim_deliveries(now + 61, 60, 10).unwrap();
    assert_eq!(again.len(), 2, "a lease that ran out (its sender died) is claimed again");

    a.finish_delivery(ids[0], &Attempt::Delivered, now + 62).unwrap();
    let retry = Attempt::Retry { error: "HTTP 500".into(), next_at: now + 122 };
    a.finish_delivery(ids[1], &retry, now + 62).unwrap();
    assert!(b.claim_deliveries(now + 121, 60, 10).unwrap().is_empty(), "not due yet");
    let second = b.claim_deliveries(now + 122, 60, 10).unwrap();
    assert_eq!((second.len(), second[0].delivery.attempts), (1, 1));
    b.finish_delivery(ids[1], &Attempt::WaitingCredits { next_at: now + 130 }, now + 123).unwrap();
    let waiting = a.claim_deliveries(now + 130, 60, 10).unwrap();
    assert_eq!((waiting[0].delivery.status.as_str(), waiting[0].delivery.attempts), ("waiting_credits", 1));
    a.finish_delivery(ids[1], &Attempt::Failed { error: "HTTP 410".into() }, now + 131).unwrap();

    let (total, listed) = b.deliveries(ana, list, 0, 10).unwrap().unwrap();
    let states: Vec<(&str, i64, Option<&str>)> =
        listed.iter().map(|d| (d.status.as_str(), d.attempts, d.last_error.as_deref())).collect();
    assert_eq!((total, states), (2, vec![("delivered", 1, None), ("failed", 2, Some("HTTP 410"))]));
    assert_eq!(b.deliveries(bia, list, 0, 10).unwrap(), None, "another user's list");
    assert_eq!(a.retry_delivery(bia, list, ids[1]).unwrap(), None);
    let retried = a.retry_delivery(ana, list, ids[1]).unwrap().unwrap();
    assert_eq!((retried.status.as_str(), retried.attempts), ("pending", 2));
    assert!(a.retry_delivery(ana, list, "wl1-2026-10-9").unwrap().is_none());
    assert_eq!(b.claim_deliveries(cnpj_now(), 60, 10).unwrap().len(), 1, "due again now");
    assert!(a.delete_watchlist(ana, list).unwrap());
    assert!(!a.has_deliveries(list, "2026-10").unwrap(), "deleted with its list");
}

fn cnpj_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}
