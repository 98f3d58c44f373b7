//! People's accounts: an email (stored lower-cased, so unique case-insensitively), an argon2id
//! password, display name, locale, plan, role and status; their named tokens; a CLI user (a name
//! only) given an email and a password; and erasure, which keeps the ledger and the usage under
//! the user's now anonymous id.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use crate::sql::{Row, Sql, Val};
use crate::{
    Accounts, AccountsError, PREFIX_LEN, TokenInfo, allowance_left, hash, new_token, normal_email, now, throttle,
    valid_email,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Admin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Active,
    Disabled,
    Unverified,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        [Role::User, Role::Admin].into_iter().find(|r| r.as_str() == text)
    }
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Disabled => "disabled",
            Status::Unverified => "unverified",
        }
    }

    pub fn parse(text: &str) -> Option<Status> {
        [Status::Active, Status::Disabled, Status::Unverified].into_iter().find(|s| s.as_str() == text)
    }
}

/// A user as the pages and the account JSON show them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    pub id: i64,
    pub name: String,
    pub email: Option<String>,
    pub display_name: Option<String>,
    pub locale: Option<String>,
    /// `None`: the default plan.
    pub plan: Option<String>,
    pub role: Role,
    pub status: Status,
    pub credits: i64,
    /// The allowance stored and its month (see `Accounts::allowance_left`).
    pub allowance: i64,
    pub allowance_month: Option<String>,
    pub created_at: i64,
    pub(crate) password_hash: Option<String>,
}

impl Person {
    pub fn has_password(&self) -> bool {
        self.password_hash.is_some()
    }

    /// Whether `password` is this person's.
    pub fn password_matches(&self, password: &str) -> bool {
        self.password_hash.as_deref().is_some_and(|h| check_password(h, password))
    }

    /// The name to show: the display name, else the email, else the user's name.
    pub fn shown_name(&self) -> &str {
        self.display_name.as_deref().filter(|n| !n.is_empty()).or(self.email.as_deref()).unwrap_or(&self.name)
    }
}

pub(crate) const PERSON: &str = "SELECT id, name, email, display_name, locale, plan, role, status, credits, allowance, \
     allowance_month, created_at, password_hash FROM users";

pub(crate) fn person(r: &Row) -> Person {
    Person {
        id: r.int(0),
        name: r.text(1),
        email: r.opt_text(2),
        display_name: r.opt_text(3),
        locale: r.opt_text(4),
        plan: r.opt_text(5),
        role: Role::parse(&r.text(6)).unwrap_or(Role::User),
        status: Status::parse(&r.text(7)).unwrap_or(Status::Disabled),
        credits: r.int(8),
        allowance: r.int(9),
        allowance_month: r.opt_text(10),
        created_at: r.int(11),
        password_hash: r.opt_text(12),
    }
}

/// An argon2id hash (PHC string, random salt) of `password`.
pub fn hash_password(password: &str) -> Result<String, AccountsError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| AccountsError::Random(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| AccountsError::Password(e.to_string()))?;
    let hashed = argon2::Argon2::default().hash_password(password.as_bytes(), &salt);
    Ok(hashed.map_err(|e| AccountsError::Password(e.to_string()))?.to_string())
}

/// Whether `password` matches a hash made by `hash_password`.
pub fn check_password(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| argon2::Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// A hash checked in place of an unknown account's, so that a login takes as long for an
/// unknown email as for a wrong password.
fn stand_in_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| hash_password("no account has this password").unwrap_or_default())
}

fn one_person(db: &mut dyn Sql, filter: &str, param: Val) -> Result<Option<Person>, AccountsError> {
    Ok(db.row(&format!("{PERSON} WHERE {filter}"), &[param])?.as_ref().map(person))
}

/// What a new person's account is made of.
#[derive(Clone, Debug)]
pub(crate) struct NewPerson<'a> {
    pub email: &'a str,
    pub password_hash: &'a str,
    pub display_name: &'a str,
    pub locale: &'a str,
    pub plan: Option<&'a str>,
    pub credits: i64,
    pub status: Status,
}

/// Inserts a person (their name is their email); `InvalidEmail` when it is no address,
/// `EmailTaken` when it is taken.
pub(crate) fn insert_person(db: &mut dyn Sql, new: &NewPerson<'_>) -> Result<Person, AccountsError> {
    let email = normal_email(new.email);
    if !valid_email(&email) {
        return Err(AccountsError::InvalidEmail(email));
    }
    let taken = db.row("SELECT id FROM users WHERE email = $1 OR name = $1", &[email.as_str().into()])?;
    if taken.is_some() {
        return Err(AccountsError::EmailTaken(email));
    }
    let row = db.row(
        "INSERT INTO users (name, credits, created_at, email, password_hash, display_name, locale, plan, status) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        &[
            email.as_str().into(),
            new.credits.max(0).into(),
            now().into(),
            email.as_str().into(),
            new.password_hash.into(),
            new.display_name.into(),
            new.locale.into(),
            new.plan.into(),
            new.status.as_str().into(),
        ],
    )?;
    let id = row.map_or(0, |r| r.int(0));
    one_person(db, "id = $1", id.into())?.ok_or_else(|| AccountsError::UnknownUser(email))
}

impl Accounts {
    pub fn person(&self, id: i64) -> Result<Option<Person>, AccountsError> {
        self.tx(|db| one_person(db, "id = $1", id.into()))
    }

    pub fn person_by_email(&self, email: &str) -> Result<Option<Person>, AccountsError> {
        self.tx(|db| one_person(db, "email = $1", normal_email(email).into()))
    }

    /// The active person with this email and password; `None` otherwise, after the same work
    /// (one argon2id verification) whether the email is unknown or the password wrong.
    pub fn verify_login(&self, email: &str, password: &str) -> Result<Option<Person>, AccountsError> {
        let found = self.person_by_email(email)?;
        let hash = found.as_ref().and_then(|p| p.password_hash.as_deref()).unwrap_or(stand_in_hash());
        let matches = check_password(hash, password);
        Ok(found.filter(|p| matches && p.password_hash.is_some() && p.status == Status::Active))
    }

    pub fn person_by_name(&self, name: &str) -> Result<Person, AccountsError> {
        self.tx(|db| one_person(db, "name = $1", name.into()))?.ok_or_else(|| AccountsError::UnknownUser(name.into()))
    }

    /// A person signing up on the default plan (or `plan`), active or waiting for verification.
    pub fn create_person(
        &self,
        email: &str,
        password_hash: &str,
        display_name: &str,
        locale: &str,
        status: Status,
    ) -> Result<Person, AccountsError> {
        let new = NewPerson { email, password_hash, display_name, locale, plan: None, credits: 0, status };
        self.tx(|db| insert_person(db, &new))
    }

    /// What is left of `person`'s allowance this month.
    pub fn allowance_left(&self, person: &Person) -> i64 {
        allowance_left(&self.plans, person.plan.as_deref(), person.allowance, person.allowance_month.as_deref(), now())
    }

    /// Gives a user (a CLI user, by name) an email and a password.
    pub fn set_login(&self, name: &str, email: &str, password_hash: &str) -> Result<Person, AccountsError> {
        let email = normal_email(email);
        if !valid_email(&email) {
            return Err(AccountsError::InvalidEmail(email));
        }
        self.tx(|db| {
            let user =
                one_person(db, "name = $1", name.into())?.ok_or_else(|| AccountsError::UnknownUser(name.into()))?;
            if db
                .row("SELECT id FROM users WHERE email = $1 AND id <> $2", &[email.as_str().into(), user.id.into()])?
                .is_some()
            {
                return Err(AccountsError::EmailTaken(email.clone()));
            }
            db.run(
                "UPDATE users SET email = $1, password_hash = $2 WHERE id = $3",
                &[email.as_str().into(), password_hash.into(), user.id.into()],
            )?;
            one_person(db, "id = $1", user.id.into())?.ok_or_else(|| AccountsError::UnknownUser(name.into()))
        })
    }

    pub fn set_role(&self, name: &str, role: Role) -> Result<(), AccountsError> {
        let changed =
            self.tx(|db| db.run("UPDATE users SET role = $1 WHERE name = $2", &[role.as_str().into(), name.into()]))?;
        if changed == 0 { Err(AccountsError::UnknownUser(name.into())) } else { Ok(()) }
    }

    pub fn set_status(&self, id: i64, status: Status) -> Result<(), AccountsError> {
        self.tx(|db| db.run("UPDATE users SET status = $1 WHERE id = $2", &[status.as_str().into(), id.into()]))?;
        Ok(())
    }

    /// A new password; every session of the user ends (the caller opens a new one).
    pub fn set_password(&self, id: i64, password_hash: &str) -> Result<(), AccountsError> {
        self.tx(|db| {
            db.run("UPDATE users SET password_hash = $1 WHERE id = $2", &[password_hash.into(), id.into()])?;
            db.run("DELETE FROM sessions WHERE user_id = $1", &[id.into()])
        })?;
        Ok(())
    }

    /// A user's tokens, revoked ones included, oldest first.
    pub fn tokens(&self, user_id: i64) -> Result<Vec<TokenInfo>, AccountsError> {
        self.tx(|db| {
            let rows = db.rows(
                "SELECT prefix, name, created_at, last_used_at, expires_at, revoked_at FROM tokens \
                 WHERE user_id = $1 ORDER BY created_at, prefix",
                &[user_id.into()],
            )?;
            Ok(rows
                .iter()
                .map(|r| TokenInfo {
                    prefix: r.text(0),
                    name: r.text(1),
                    created_at: r.int(2),
                    last_used_at: r.opt_int(3),
                    expires_at: r.opt_int(4),
                    revoked_at: r.opt_int(5),
                })
                .collect())
        })
    }

    /// A named token for a user, within their plan's most tokens (`TooManyTokens` beyond).
    pub fn create_token(
        &self,
        user_id: i64,
        name: &str,
        expires_in_days: Option<u32>,
    ) -> Result<String, AccountsError> {
        let token = new_token()?;
        self.tx(|db| {
            let plan = db.row("SELECT plan FROM users WHERE id = $1", &[user_id.into()])?.and_then(|r| r.opt_text(0));
            let max = self.plans.of(plan.as_deref()).1.max_tokens;
            let at = now();
            let live = db
                .row(
                    "SELECT count(*) FROM tokens WHERE user_id = $1 AND revoked_at IS NULL \
                     AND (expires_at IS NULL OR expires_at > $2)",
                    &[user_id.into(), at.into()],
                )?
                .map_or(0, |r| r.int(0));
            if live >= i64::from(max) {
                return Err(AccountsError::TooManyTokens(max));
            }
            let expires = expires_in_days.map(|d| at + i64::from(d) * 86_400);
            db.run(
                "INSERT INTO tokens (prefix, hash, user_id, created_at, expires_at, name) VALUES ($1, $2, $3, $4, $5, $6)",
                &[token[..PREFIX_LEN].into(), hash(&token).into(), user_id.into(), at.into(), expires.into(), name.into()],
            )
        })?;
        Ok(token)
    }

    /// Revokes a token of this user (or of anyone: `user_id` `None`); whether there was one.
    pub fn revoke_token_of(&self, user_id: Option<i64>, prefix: &str) -> Result<bool, AccountsError> {
        let changed = self.tx(|db| {
            db.run(
                "UPDATE tokens SET revoked_at = coalesce(revoked_at, $1) WHERE prefix = $2 AND user_id = coalesce($3, user_id)",
                &[now().into(), prefix.into(), user_id.into()],
            )
        })?;
        Ok(changed > 0)
    }

    /// Erases a person: email, names, password, locale, sessions, links, tokens, watchlists and
    /// their deliveries go; the user
    /// stays, anonymous and disabled, so the ledger and the usage stay whole.
    pub fn erase(&self, id: i64) -> Result<(), AccountsError> {
        self.tx(|db| {
            if let Some(email) =
                db.row("SELECT email FROM users WHERE id = $1", &[id.into()])?.and_then(|r| r.opt_text(0))
            {
                db.run("DELETE FROM links WHERE email = $1", &[email.as_str().into()])?;
                throttle::forget_account(db, &email)?;
            }
            db.run("DELETE FROM sessions WHERE user_id = $1", &[id.into()])?;
            db.run("DELETE FROM deliveries WHERE user_id = $1", &[id.into()])?;
            let entries =
                "DELETE FROM watchlist_entries WHERE watchlist_id IN (SELECT id FROM watchlists WHERE user_id = $1)";
            db.run(entries, &[id.into()])?;
            db.run("DELETE FROM watchlists WHERE user_id = $1", &[id.into()])?;
            db.run("DELETE FROM links WHERE user_id = $1", &[id.into()])?;
            db.run("DELETE FROM tokens WHERE user_id = $1", &[id.into()])?;
            db.run(
                "UPDATE users SET name = $1, email = NULL, password_hash = NULL, display_name = NULL, locale = NULL, \
                 status = 'disabled' WHERE id = $2",
                &[format!("erased-{id}").into(), id.into()],
            )
        })?;
        Ok(())
    }
}
