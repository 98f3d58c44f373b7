//! Mail, when the operator configured SMTP: the verification link sent at sign-up, the notice to
//! an account's owner that someone signed up with their email (with the link to a new password),
//! and the reset link sent by `/password/forgot`, each in the page's language; and the link to an
//! export job's page once its file is ready, in the person's. Sent off the request's path: a
//! page answers the same whether or not a mail went out.

use lettre::message::header::{ContentTransferEncoding, ContentType};
use lettre::message::{Body, Mailbox};
use lettre::{Message, SmtpTransport, Transport};

use crate::i18n::Lang;

/// An SMTP server, the sender, and the service's address for the links.
#[derive(Clone)]
pub struct Mailer {
    transport: SmtpTransport,
    from: Mailbox,
    public_url: String,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mailer(from {}, links to {})", self.from, self.public_url)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("--smtp-url {0:?}: {1}")]
    Url(String, String),
    #[error("--mail-from {0:?}: {1}")]
    From(String, String),
}

/// What a mail is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mail {
    Verify,
    /// Someone signed up with the email of an account.
    Taken,
    Reset,
    /// An export job's file is ready.
    Export,
}

impl Mailer {
    /// `smtp_url`: `smtp://host:port` (plain; `?tls=required` for STARTTLS) or `smtps://host`
    /// (TLS), with `user:password@` when the server wants them; `public_url`: the service's
    /// address as people reach it (the links' base).
    pub fn new(smtp_url: &str, from: &str, public_url: &str) -> Result<Mailer, MailError> {
        let transport =
            SmtpTransport::from_url(smtp_url).map_err(|e| MailError::Url(smtp_url.to_owned(), e.to_string()))?.build();
        let from = from.parse::<Mailbox>().map_err(|e| MailError::From(from.to_owned(), e.to_string()))?;
        Ok(Mailer { transport, from, public_url: public_url.trim_end_matches('/').to_owned() })
    }

    /// Tells `to` that their export job `id` is done: the link to its page, in `locale` (a
    /// person's, pt-br when unknown) (blocking).
    pub fn send_export(&self, locale: Option<&str>, to: &str, id: &str) -> Result<(), String> {
        let lang = locale.and_then(Lang::parse).unwrap_or(Lang::PtBr);
        self.send(Mail::Export, lang, to, &format!("/search/exports/{id}"))
    }

    /// Sends the link `path_and_token` (e.g. `/verify?token=…`) to `to` (blocking).
    pub(crate) fn send(&self, kind: Mail, lang: Lang, to: &str, path_and_token: &str) -> Result<(), String> {
        let link = format!("{}{path_and_token}", self.public_url);
        let (subject, text) = match kind {
            Mail::Verify => (lang.t("mail_verify_subject"), lang.t("mail_verify_body")),
            Mail::Taken => (lang.t("mail_taken_subject"), lang.t("mail_taken_body")),
            Mail::Reset => (lang.t("mail_reset_subject"), lang.t("mail_reset_body")),
            Mail::Export => (lang.t("mail_export_subject"), lang.t("mail_export_body")),
        };
        let to = to.parse::<Mailbox>().map_err(|e| e.to_string())?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(
                Body::new_with_encoding(format!("{text}\n\n{link}\n"), ContentTransferEncoding::QuotedPrintable)
                    .map_err(|_| "the mail's body".to_owned())?,
            )
            .map_err(|e| e.to_string())?;
        self.transport.send(&message).map(drop).map_err(|e| e.to_string())
    }
}
