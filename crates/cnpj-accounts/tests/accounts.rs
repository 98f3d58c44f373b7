//! The accounts store on Postgres, as API replicas share it: two `Accounts` opened on one
//! database charge (allowance and credits) and count requests concurrently; a store of version 0
//! migrated; people, sessions, links, usage and erasure on Postgres. Needs the throwaway cluster
//! of `scripts/test`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cnpj_accounts::{Accounts, AccountsError, Insufficient, LinkKind, Plans, Status, UsageRow, hash_password};

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
    assert_eq!(version, 1);
    drop(a);
    Accounts::open_postgres(&url).unwrap().authenticate(&token).unwrap().expect("opened again, nothing lost");
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
    for _ in 0..5 {
        a.login_failed(&["account:ana@example.com".to_owned()]).unwrap();
    }
    assert!(a.login_wait(&["account:ana@example.com".to_owned()]).unwrap().is_some());
    a.erase(ana.id).unwrap();
    assert!(a.session(&session).unwrap().is_none());
    assert!(a.person_by_email("ana@example.com").unwrap().is_none());
}
