//! The throttles of getting in, kept in the store's `login_failures` rows (a key and a time) so
//! that replicas share them: failed logins by account and address, by address alone and, much
//! higher, by account as a whole; open sign-ups by address and by network; and the device tokens
//! that let a browser which logged in before past an account's lock.

use std::net::IpAddr;

use hmac::{Hmac, KeyInit, Mac};
use sha2_0_11::Sha256;

use crate::sql::Sql;
use crate::{Accounts, AccountsError, normal_email, now};

/// Failures of one key counted for the login throttle.
const FAILURE_WINDOW: i64 = 15 * 60;
/// Failures in the window, for an account from one address, before tries wait.
const FREE_FAILURES: i64 = 5;
/// Failures in the window from one address, whatever the accounts, before its tries wait: more,
/// as people behind one address (an office, a proxy) each mistype theirs.
const ADDRESS_FREE_FAILURES: i64 = 20;
/// Failures in the window, for an account from anywhere, before it is locked as a whole (save to a
/// device it logged in from): far above one address's, so that nobody locks others out cheaply.
const ACCOUNT_FREE_FAILURES: i64 = 50;
/// The longest wait: the lock.
const LOCK: i64 = 15 * 60;
/// Sign-ups counted for the sign-up throttle.
const SIGNUP_WINDOW: i64 = 3600;
/// Sign-ups an hour from one address.
const SIGNUPS_PER_ADDRESS: i64 = 5;
/// Sign-ups an hour from one network (an IPv4 /24, an IPv6 /64).
const SIGNUPS_PER_NETWORK: i64 = 20;
/// How long a device token lets its browser past an account's lock.
pub const DEVICE_MAX: i64 = 180 * 86_400;

/// A try to log in: the email typed, the peer's address and the device token the browser holds.
#[derive(Clone, Debug)]
pub struct LoginTry {
    pub email: String,
    pub address: String,
    pub device: Option<String>,
}

impl LoginTry {
    fn account_key(&self) -> String {
        account_key(&self.email)
    }

    fn pair_key(&self) -> String {
        format!("pair:{} {}", normal_email(&self.email), self.address)
    }

    fn address_key(&self) -> String {
        format!("address:{}", self.address)
    }
}

/// The key of an account's failures from anywhere.
fn account_key(email: &str) -> String {
    format!("account:{}", normal_email(email))
}

/// Forgets an account's failures from anywhere (at a password reset and at erasure): its lock
/// ends. (Its failures from one address stay: the address's own, never fewer, would stop it.)
pub(crate) fn forget_account(db: &mut dyn Sql, email: &str) -> Result<(), AccountsError> {
    db.run("DELETE FROM login_failures WHERE key = $1", &[account_key(email).into()])?;
    Ok(())
}

/// The failures of `key` in the window, and when the last was.
fn failures(db: &mut dyn Sql, key: &str, window: i64, at: i64) -> Result<(i64, i64), AccountsError> {
    let row = db.row(
        "SELECT count(*), max(at) FROM login_failures WHERE key = $1 AND at > $2",
        &[key.into(), (at - window).into()],
    )?;
    Ok(row.map_or((0, 0), |r| (r.int(0), r.int(1))))
}

/// The network of an address, for the sign-up throttle: its IPv4 /24 or IPv6 /64.
fn network(address: IpAddr) -> String {
    match address.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            format!("{a}.{b}.{c}.0/24")
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

/// The HMAC of a device token: keyed by the account's password hash (a secret of the store, so
/// replicas agree, and a new password retires every token), over the user and the token's time.
fn device_mac(password_hash: &str, user_id: i64, issued_at: i64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(password_hash.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(format!("cnpj-accounts device\n{user_id}\n{issued_at}").as_bytes());
    mac
}

/// Whether `token` is a live device token of the account with this email.
fn trusted_device(db: &mut dyn Sql, email: &str, token: &str, at: i64) -> Result<bool, AccountsError> {
    let mut parts = token.splitn(3, '.');
    let (Some(Ok(user_id)), Some(Ok(issued_at)), Some(Ok(sent))) =
        (parts.next().map(str::parse::<i64>), parts.next().map(str::parse::<i64>), parts.next().map(hex::decode))
    else {
        return Ok(false);
    };
    if at - issued_at >= DEVICE_MAX || issued_at > at {
        return Ok(false);
    }
    let row = db.row(
        "SELECT password_hash FROM users WHERE id = $1 AND email = $2",
        &[user_id.into(), normal_email(email).into()],
    )?;
    let Some(password_hash) = row.and_then(|r| r.opt_text(0)) else { return Ok(false) };
    Ok(device_mac(&password_hash, user_id, issued_at).verify_slice(&sent).is_ok())
}

/// The wait of `failures` past `free`: a minute after the last, doubling with each further one up
/// to the lock.
fn wait_after(failures: i64, free: i64, last: i64, at: i64) -> i64 {
    if failures < free {
        return 0;
    }
    let lock = (60i64 << (failures - free).min(10)).min(LOCK);
    last + lock - at
}

impl Accounts {
    /// Seconds a login try must still wait, if any: after 5 failures in 15 minutes for this
    /// account from this address, 20 from this address for any accounts, or 50 for this
    /// account from anywhere (unless the try carries a device token of the account); a minute
    /// after the last failure, doubling with each further one up to 15 minutes.
    pub fn login_wait(&self, login: &LoginTry) -> Result<Option<u64>, AccountsError> {
        let at = now();
        self.tx(|db| {
            let mut wait = 0;
            for (key, free) in [(login.pair_key(), FREE_FAILURES), (login.address_key(), ADDRESS_FREE_FAILURES)] {
                let (count, last) = failures(db, &key, FAILURE_WINDOW, at)?;
                wait = wait.max(wait_after(count, free, last, at));
            }
            let (count, last) = failures(db, &login.account_key(), FAILURE_WINDOW, at)?;
            let account_wait = wait_after(count, ACCOUNT_FREE_FAILURES, last, at);
            if account_wait > 0 {
                let trusted = match &login.device {
                    Some(token) => trusted_device(db, &login.email, token, at)?,
                    None => false,
                };
                if !trusted {
                    wait = wait.max(account_wait);
                }
            }
            Ok((wait > 0).then_some(wait as u64))
        })
    }

    /// Counts a failed login against the account from this address, the address and the account
    /// (and forgets rows older than the longest window).
    pub fn login_failed(&self, login: &LoginTry) -> Result<(), AccountsError> {
        let at = now();
        self.tx(|db| {
            db.run("DELETE FROM login_failures WHERE at <= $1", &[(at - SIGNUP_WINDOW.max(FAILURE_WINDOW)).into()])?;
            for key in [login.pair_key(), login.address_key(), login.account_key()] {
                db.run("INSERT INTO login_failures (key, at) VALUES ($1, $2)", &[key.into(), at.into()])?;
            }
            Ok(())
        })
    }

    /// Forgets the account's failures from this address after a successful login. Its failures
    /// from anywhere stay: one of its devices getting past a lock does not end the lock for
    /// others (a reset does, or time).
    pub fn login_succeeded(&self, login: &LoginTry) -> Result<(), AccountsError> {
        self.tx(|db| db.run("DELETE FROM login_failures WHERE key = $1", &[login.pair_key().into()]))?;
        Ok(())
    }

    /// A new device token of a user who logged in, for their browser to keep (`DEVICE_MAX`): a
    /// try that carries it is let past the account's lock (see `login_wait`). `None` for a user
    /// without a password.
    pub fn device_token(&self, user_id: i64) -> Result<Option<String>, AccountsError> {
        let at = now();
        let row = self.tx(|db| db.row("SELECT password_hash FROM users WHERE id = $1", &[user_id.into()]))?;
        Ok(row.and_then(|r| r.opt_text(0)).map(|password_hash| {
            let mac = device_mac(&password_hash, user_id, at).finalize().into_bytes();
            format!("{user_id}.{at}.{}", hex::encode(mac))
        }))
    }

    /// Counts an open sign-up from `address` unless it must wait: `Some(seconds)` after 5 from
    /// the address, or 20 from its network (IPv4 /24, IPv6 /64), in the last hour (a refused try
    /// is not counted).
    pub fn signup_try(&self, address: IpAddr) -> Result<Option<u64>, AccountsError> {
        let at = now();
        let keys = [
            (format!("signup:{}", address.to_canonical()), SIGNUPS_PER_ADDRESS),
            (format!("signup-network:{}", network(address)), SIGNUPS_PER_NETWORK),
        ];
        self.tx(|db| {
            let mut wait = 0;
            for (key, most) in &keys {
                let row = db.row(
                    "SELECT count(*), min(at) FROM login_failures WHERE key = $1 AND at > $2",
                    &[key.as_str().into(), (at - SIGNUP_WINDOW).into()],
                )?;
                let (count, first) = row.map_or((0, 0), |r| (r.int(0), r.int(1)));
                if count >= *most {
                    wait = wait.max((first + SIGNUP_WINDOW - at).max(1));
                }
            }
            if wait > 0 {
                return Ok(Some(wait as u64));
            }
            db.run("DELETE FROM login_failures WHERE at <= $1", &[(at - SIGNUP_WINDOW.max(FAILURE_WINDOW)).into()])?;
            for (key, _) in &keys {
                db.run("INSERT INTO login_failures (key, at) VALUES ($1, $2)", &[key.as_str().into(), at.into()])?;
            }
            Ok(None)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(address: &str, expected: &str) {
        assert_eq!(network(address.parse().unwrap()), expected, "{address}");
    }

    #[test]
    fn networks() {
        check("10.1.2.3", "10.1.2.0/24");
        check("::ffff:10.1.2.3", "10.1.2.0/24");
        check("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64");
        check("::1", "0:0:0:0::/64");
    }
}
