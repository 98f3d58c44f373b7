//! Webhook deliveries of watchlists: the only crate besides cnpj-download that connects out.
//! `guard` decides where a webhook may lead (https only, public addresses only, unless the
//! operator allows otherwise), `sign` signs a body (HMAC-SHA256 of timestamp and body), `send`
//! makes one POST to the address that was checked: no redirect followed, at most 64 KiB of the
//! answer's body read, 10 s in all.

mod guard;
mod send;
mod sign;

pub use guard::{MAX_URL, Policy, Refused, refusal};
pub use send::{Outcome, SendError, send};
pub use sign::{SIGNATURE_PREFIX, signature};
