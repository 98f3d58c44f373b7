//! Sessions of people logged in to the pages (256 random bits in a cookie, stored as SHA-256;
//! shared by replicas; 2 hours idle and 30 days in all), one-time links (invite, verify, reset;
//! stored as SHA-256, single use).

use crate::people::{NewPerson, PERSON, Person, Status, insert_person, person};
use crate::sql::{Row, Sql};
use crate::{Accounts, AccountsError, hash, normal_email, now, random_hex, throttle, valid_email};

/// A session ends after this long without a request.
pub const SESSION_IDLE: i64 = 2 * 3600;
/// A session ends this long after it began, however busy.
pub const SESSION_MAX: i64 = 30 * 86_400;

/// A live session: its user (active) and when it began.
#[derive(Clone, Debug)]
pub struct Session {
    pub person: Person,
    pub created_at: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// Sign up by the operator's invitation (7 days).
    Invite,
    /// Confirm the email given at sign-up (7 days).
    Verify,
    /// Choose a new password (1 hour).
    Reset,
}

impl LinkKind {
    fn as_str(self) -> &'static str {
        match self {
            LinkKind::Invite => "invite",
            LinkKind::Verify => "verify",
            LinkKind::Reset => "reset",
        }
    }

    /// How long a link of this kind is valid, in seconds.
    pub fn valid_for(self) -> i64 {
        match self {
            LinkKind::Invite | LinkKind::Verify => 7 * 86_400,
            LinkKind::Reset => 3600,
        }
    }
}

/// An unused, unexpired link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub email: String,
    pub user_id: Option<i64>,
    pub plan: Option<String>,
    pub credits: i64,
    pub expires_at: i64,
}

const LINK: &str = "SELECT email, user_id, plan, credits, expires_at FROM links";

fn link(r: &Row) -> Link {
    Link { email: r.text(0), user_id: r.opt_int(1), plan: r.opt_text(2), credits: r.int(3), expires_at: r.int(4) }
}

/// The link of this token and kind, if unused and unexpired; marked used when `take`.
fn find_link(db: &mut dyn Sql, token: &str, kind: LinkKind, take: bool) -> Result<Option<Link>, AccountsError> {
    let at = now();
    let params = [hash(token).into(), kind.as_str().into(), at.into()];
    let found =
        db.row(&format!("{LINK} WHERE hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3"), &params)?;
    if take && found.is_some() {
        db.run("UPDATE links SET used_at = $3 WHERE hash = $1 AND kind = $2", &params)?;
    }
    Ok(found.as_ref().map(link))
}

impl Accounts {
    /// Opens a session for a user; its id (64 hex digits), for the cookie: only its hash is kept.
    pub fn open_session(&self, user_id: i64) -> Result<String, AccountsError> {
        let id = random_hex()?;
        let at = now();
        self.tx(|db| {
            db.run(
                "INSERT INTO sessions (hash, user_id, created_at, seen_at) VALUES ($1, $2, $3, $3)",
                &[hash(&id).into(), user_id.into(), at.into()],
            )
        })?;
        Ok(id)
    }

    /// The session of this id if it is live and its user active (it is then seen now); an
    /// expired one is deleted.
    pub fn session(&self, id: &str) -> Result<Option<Session>, AccountsError> {
        let at = now();
        self.tx(|db| {
            let key = hash(id);
            let Some(row) =
                db.row("SELECT user_id, created_at, seen_at FROM sessions WHERE hash = $1", &[key.as_str().into()])?
            else {
                return Ok(None);
            };
            let (user_id, created_at, seen_at) = (row.int(0), row.int(1), row.int(2));
            if at - seen_at >= SESSION_IDLE || at - created_at >= SESSION_MAX {
                db.run("DELETE FROM sessions WHERE hash = $1", &[key.as_str().into()])?;
                return Ok(None);
            }
            let found = db.row(&format!("{PERSON} WHERE id = $1"), &[user_id.into()])?.as_ref().map(person);
            let Some(person) = found.filter(|p| p.status == Status::Active) else { return Ok(None) };
            db.run("UPDATE sessions SET seen_at = $1 WHERE hash = $2", &[at.into(), key.as_str().into()])?;
            Ok(Some(Session { person, created_at }))
        })
    }

    /// Ends a session (logout).
    pub fn close_session(&self, id: &str) -> Result<(), AccountsError> {
        self.tx(|db| db.run("DELETE FROM sessions WHERE hash = $1", &[hash(id).into()]))?;
        Ok(())
    }

    /// A one-time link's token (only its hash is kept), valid for the kind's time.
    pub fn make_link(
        &self,
        kind: LinkKind,
        email: &str,
        user_id: Option<i64>,
        plan: Option<&str>,
        credits: i64,
    ) -> Result<String, AccountsError> {
        if let Some(p) = plan.filter(|p| !self.plans.contains(p)) {
            return Err(AccountsError::UnknownPlan(p.to_owned()));
        }
        // An invitation names a new address; the other links go to an account's own.
        if kind == LinkKind::Invite && !valid_email(&normal_email(email)) {
            return Err(AccountsError::InvalidEmail(email.to_owned()));
        }
        let token = random_hex()?;
        let at = now();
        self.tx(|db| {
            db.run(
                "INSERT INTO links (hash, kind, email, user_id, plan, credits, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    hash(&token).into(),
                    kind.as_str().into(),
                    normal_email(email).into(),
                    user_id.into(),
                    plan.into(),
                    credits.max(0).into(),
                    at.into(),
                    (at + kind.valid_for()).into(),
                ],
            )
        })?;
        Ok(token)
    }

    /// A link, if unused and unexpired, without using it.
    pub fn peek_link(&self, token: &str, kind: LinkKind) -> Result<Option<Link>, AccountsError> {
        self.tx(|db| find_link(db, token, kind, false))
    }

    /// Signs up by an invitation: the link is used and the account made (active: the link came by
    /// the email) in one transaction; `None` when the link is not valid.
    pub fn accept_invite(
        &self,
        token: &str,
        password_hash: &str,
        display_name: &str,
        locale: &str,
    ) -> Result<Option<Person>, AccountsError> {
        self.tx(|db| {
            let Some(link) = find_link(db, token, LinkKind::Invite, true)? else { return Ok(None) };
            let new = NewPerson {
                email: &link.email,
                password_hash,
                display_name,
                locale,
                plan: link.plan.as_deref(),
                credits: link.credits,
                status: Status::Active,
            };
            insert_person(db, &new).map(Some)
        })
    }

    /// Verifies an email: the user becomes active; `None` when the link is not valid.
    pub fn verify_email(&self, token: &str) -> Result<Option<i64>, AccountsError> {
        self.tx(|db| {
            let Some(Link { user_id: Some(id), .. }) = find_link(db, token, LinkKind::Verify, true)? else {
                return Ok(None);
            };
            db.run("UPDATE users SET status = 'active' WHERE id = $1 AND status = 'unverified'", &[id.into()])?;
            Ok(Some(id))
        })
    }

    /// Sets a new password by a reset link; every session of the user ends, and so does a lock of
    /// the account by failed logins. `None` when the link is not valid.
    pub fn reset_password(&self, token: &str, password_hash: &str) -> Result<Option<i64>, AccountsError> {
        self.tx(|db| {
            let Some(link) = find_link(db, token, LinkKind::Reset, true)? else { return Ok(None) };
            let Some(row) = db.row("SELECT id FROM users WHERE email = $1", &[link.email.as_str().into()])? else {
                return Ok(None);
            };
            let id = row.int(0);
            db.run("UPDATE users SET password_hash = $1 WHERE id = $2", &[password_hash.into(), id.into()])?;
            db.run("DELETE FROM sessions WHERE user_id = $1", &[id.into()])?;
            throttle::forget_account(db, &link.email)?;
            Ok(Some(id))
        })
    }
}
