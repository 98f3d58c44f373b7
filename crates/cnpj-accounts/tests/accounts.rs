//! The accounts store on Postgres, as API replicas share it: two `Accounts` opened on one
//! database charge and count requests concurrently. Needs the throwaway cluster of `scripts/test`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cnpj_accounts::{Accounts, AccountsError, Insufficient};

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
    let replicas = [Accounts::open_postgres(&url).unwrap(), Accounts::open_postgres(&url).unwrap()];
    let user = replicas[0].create_user("bia", 100).unwrap();
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

    let window = Duration::from_secs(2);
    let verdicts: Vec<Result<u32, u64>> =
        (0..6).map(|i| replicas[i % 2].rate_check(user.id, 4, window).unwrap()).collect();
    assert_eq!(verdicts[..4], [Ok(3), Ok(2), Ok(1), Ok(0)]);
    assert!(matches!(verdicts[4], Err(1..=2)), "{verdicts:?}");
    assert!(verdicts[5].is_err(), "a refused request is not counted, and the limit holds on every replica");
    std::thread::sleep(window);
    assert_eq!(replicas[1].rate_check(user.id, 4, window).unwrap(), Ok(3), "the window rolls");
}
