//! What a folder holds and how big its files are: WebDAV PROPFIND on a Nextcloud public share
//! (share token as the basic-auth user, empty password; the token read from the landing page's
//! redirect when none is given; folders relative to a path prefix inside the share), or the
//! legacy Apache directory listing.

use std::time::Duration;

use base64::Engine;

/// A file offered by the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteFile {
    pub name: String,
    pub url: String,
    /// Bytes, as the listing says.
    pub size: u64,
    /// The listing's modification time, as given (`Last-Modified` form).
    pub modified: String,
    /// The folder it was listed in, relative to the folder of the month folders (`2026-09`,
    /// `regime_tributario`).
    pub folder: String,
}

/// A source of monthly dumps, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Nextcloud public share: `{base}/public.php/webdav/{prefix}/` lists, `{base}/public.php/dav/files/{token}/{prefix}/…`
    /// serves. Without a token, today's is read from `landing` (default `base`): the final URL of
    /// its redirects (`…/index.php/s/<TOKEN>` or `…/s/<TOKEN>`), or else the first
    /// `index.php/s/<TOKEN>` in the page's text (a `<meta http-equiv="refresh">` or a link).
    Nextcloud {
        base: String,
        token: Option<String>,
        landing: Option<String>,
        /// The folder inside the share that holds the `YYYY-MM/` folders (`/Dados/Cadastros/CNPJ`),
        /// `""` for its root. When it is missing or holds none, the share is searched for them.
        prefix: String,
    },
    /// Apache listing: `{base}/YYYY-MM/` holds the zips (e.g. `…/dados/cnpj/dados_abertos_cnpj`).
    Legacy { base: String },
}

impl Source {
    /// A share at its root, by token.
    pub fn share(base: impl Into<String>, token: impl Into<String>) -> Source {
        Source::Nextcloud { base: base.into(), token: Some(token.into()), landing: None, prefix: String::new() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error("listing {url}: {message}")]
    Http { url: String, message: String },
    #[error("listing {url}: unreadable answer: {message}")]
    Parse { url: String, message: String },
    #[error("no month {month} at {source_url}")]
    NoMonth { month: String, source_url: String },
    #[error("no complete month at {0} (every table of the dump present)")]
    NoCompleteMonth(String),
    #[error("listing {url}: no such folder (404)")]
    Missing { url: String },
    #[error("no month folder (YYYY-MM/) {place}; folders seen: {seen}")]
    NoMonths { place: String, seen: String },
    #[error("no share token at {landing} (it led to {url}, and the page names no index.php/s/<TOKEN>)")]
    NoToken { landing: String, url: String },
}

pub(crate) fn agent(stall: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(stall.min(Duration::from_secs(20)))
        .timeout_read(stall)
        .timeout_write(stall)
        .build()
}

/// A source ready to list: the share's token known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Site {
    /// `prefix` is `""` or `a/b/` (no leading slash, one trailing).
    Share {
        base: String,
        token: String,
        prefix: String,
    },
    Apache {
        base: String,
    },
}

/// What a folder holds: its subfolders and its zips.
#[derive(Debug, Default)]
pub(crate) struct Folder {
    pub folders: Vec<String>,
    pub files: Vec<RemoteFile>,
}

impl Source {
    /// The site to list: the share's token read from the landing page when none is given.
    pub(crate) fn open(&self, agent: &ureq::Agent) -> Result<Site, ListingError> {
        Ok(match self {
            Source::Nextcloud { base, token, landing, prefix } => {
                let base = base.trim_end_matches('/').to_owned();
                let token = match token {
                    Some(token) => token.clone(),
                    None => {
                        let token = discover_token(agent, landing.as_deref().unwrap_or(&base))?;
                        tracing::info!(%token, "share token read from the landing page");
                        token
                    }
                };
                let prefix: Vec<&str> = prefix.split('/').filter(|s| !s.is_empty()).collect();
                let prefix = if prefix.is_empty() { String::new() } else { format!("{}/", prefix.join("/")) };
                Site::Share { base, token, prefix }
            }
            Source::Legacy { base } => Site::Apache { base: base.trim_end_matches('/').to_owned() },
        })
    }
}

/// Today's share token: the landing page is fetched with its redirects followed, and the token
/// read from the final URL (`…/s/<TOKEN>`), or else from the page (`index.php/s/<TOKEN>`).
fn discover_token(agent: &ureq::Agent, landing: &str) -> Result<String, ListingError> {
    let http = |e: &dyn std::fmt::Display| ListingError::Http { url: landing.to_owned(), message: e.to_string() };
    let response = agent.get(landing).call().map_err(|e| http(&e))?;
    let url = response.get_url().to_owned();
    let path = url.split(['?', '#']).next().unwrap_or_default();
    if let Some(token) = token_after(path, "/s/") {
        return Ok(token);
    }
    let page = response.into_string().map_err(|e| http(&e))?;
    token_after(&page, "index.php/s/").ok_or(ListingError::NoToken { landing: landing.to_owned(), url })
}

/// The alphanumeric run right after the first `marker` of `text`.
fn token_after(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let token: String = rest.chars().take_while(char::is_ascii_alphanumeric).collect();
    (!token.is_empty()).then_some(token)
}

impl Site {
    /// Where it is, for the manifest and the logs.
    pub(crate) fn describe(&self) -> String {
        match self {
            Site::Share { base, token, prefix } => format!("share {token} at {base}, folder /{prefix}"),
            Site::Apache { base } => format!("listing {base}/"),
        }
    }

    /// The `Authorization` header a request to this site carries, if any.
    pub(crate) fn authorization(&self) -> Option<String> {
        match self {
            Site::Share { token, .. } => {
                Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{token}:"))))
            }
            Site::Apache { .. } => None,
        }
    }

    /// The listing's URL of `folder` (relative to the prefix; `""` for the prefix itself).
    pub(crate) fn folder_url(&self, folder: &str) -> String {
        match self {
            Site::Share { base, prefix, .. } => {
                format!("{base}/public.php/webdav/{}", encode_path(&join(prefix, folder)))
            }
            Site::Apache { base } => format!("{base}/{}", encode_path(&join("", folder))),
        }
    }

    /// The subfolders and zips of `folder` (relative to the prefix; `""` for the prefix itself).
    pub(crate) fn list(&self, agent: &ureq::Agent, folder: &str) -> Result<Folder, ListingError> {
        let url = self.folder_url(folder);
        let here = join("", folder);
        let mut out = Folder::default();
        match self {
            Site::Share { base, token, prefix } => {
                let own = format!("public.php/webdav/{}", join(prefix, folder));
                for e in propfind(agent, &url, self.authorization().as_deref())? {
                    let Some(name) = last_segment(&e.href) else { continue };
                    let path = decode(e.href.split(['?', '#']).next().unwrap_or_default());
                    if e.collection {
                        if !path.trim_end_matches('/').ends_with(own.trim_end_matches('/')) {
                            out.folders.push(name);
                        }
                    } else if let Some(size) = e.size {
                        out.files.push(RemoteFile {
                            url: format!(
                                "{base}/public.php/dav/files/{token}/{}{}",
                                encode_path(&join(prefix, folder)),
                                encode(&name)
                            ),
                            name,
                            size,
                            modified: e.modified,
                            folder: here.trim_end_matches('/').to_owned(),
                        });
                    }
                }
            }
            Site::Apache { .. } => {
                for href in hrefs(&get_text(agent, &url)?) {
                    if href.starts_with(['/', '?', '.', '#']) || href.contains("://") {
                        continue;
                    }
                    let Some(name) = last_segment(&href) else { continue };
                    if href.ends_with('/') {
                        out.folders.push(name);
                        continue;
                    }
                    if !name.to_ascii_lowercase().ends_with(".zip") {
                        continue;
                    }
                    let file_url = format!("{url}{}", encode(&name));
                    let head = agent
                        .head(&file_url)
                        .call()
                        .map_err(|e| ListingError::Http { url: file_url.clone(), message: e.to_string() })?;
                    let size = head.header("content-length").and_then(|v| v.parse().ok()).ok_or_else(|| {
                        ListingError::Parse { url: file_url.clone(), message: "no Content-Length".into() }
                    })?;
                    let modified = head.header("last-modified").unwrap_or_default().to_owned();
                    out.files.push(RemoteFile {
                        name,
                        url: file_url,
                        size,
                        modified,
                        folder: here.trim_end_matches('/').to_owned(),
                    });
                }
            }
        }
        out.files.retain(|f| f.name.to_ascii_lowercase().ends_with(".zip"));
        out.files.sort_by(|a, b| a.name.cmp(&b.name));
        out.folders.sort();
        out.folders.dedup();
        Ok(out)
    }
}

/// `a/` + `b` as `a/b/` (`""` stays `""`).
pub(crate) fn join(prefix: &str, folder: &str) -> String {
    let folder = folder.trim_matches('/');
    if folder.is_empty() { prefix.to_owned() } else { format!("{prefix}{folder}/") }
}

/// Percent-encodes each segment of a `/`-separated path.
fn encode_path(path: &str) -> String {
    path.split('/').map(encode).collect::<Vec<_>>().join("/")
}

/// Every required kind of file of a dump is among `files`.
pub(crate) fn complete(files: &[RemoteFile]) -> bool {
    cnpj_model::FileKind::ALL
        .iter()
        .filter(|k| k.required())
        .all(|k| files.iter().any(|f| cnpj_model::FileKind::recognise(&f.name, None) == Some(*k)))
}

pub(crate) fn is_month(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 7 && b[4] == b'-' && b[..4].iter().chain(&b[5..]).all(u8::is_ascii_digit)
}

/// Percent-encodes what a file name may hold that a URL path may not (spaces, `$`).
fn encode(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The last non-empty path segment of an href, percent-decoded.
fn last_segment(href: &str) -> Option<String> {
    let path = href.split(['?', '#']).next()?;
    path.trim_end_matches('/').rsplit('/').next().filter(|s| !s.is_empty()).map(decode)
}

/// A listing request that failed: a folder that is not there (404), or another failure.
fn unanswered(url: &str, error: ureq::Error) -> ListingError {
    match error {
        ureq::Error::Status(404, _) => ListingError::Missing { url: url.to_owned() },
        e => ListingError::Http { url: url.to_owned(), message: e.to_string() },
    }
}

fn get_text(agent: &ureq::Agent, url: &str) -> Result<String, ListingError> {
    agent
        .get(url)
        .call()
        .map_err(|e| unanswered(url, e))?
        .into_string()
        .map_err(|e| ListingError::Http { url: url.to_owned(), message: e.to_string() })
}

/// `href="…"` values of an HTML page.
fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"").skip(1).filter_map(|rest| rest.split('"').next()).map(str::to_owned).collect()
}

#[derive(Debug, Default)]
struct DavEntry {
    href: String,
    collection: bool,
    size: Option<u64>,
    modified: String,
}

const PROPFIND_BODY: &str = r#"<?xml version="1.0"?>
<d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/><d:getcontentlength/><d:getlastmodified/></d:prop></d:propfind>"#;

fn propfind(agent: &ureq::Agent, url: &str, auth: Option<&str>) -> Result<Vec<DavEntry>, ListingError> {
    let mut request = agent.request("PROPFIND", url).set("Depth", "1").set("Content-Type", "application/xml");
    if let Some(auth) = auth {
        request = request.set("Authorization", auth);
    }
    let body = request
        .send_string(PROPFIND_BODY)
        .map_err(|e| unanswered(url, e))?
        .into_string()
        .map_err(|e| ListingError::Http { url: url.to_owned(), message: e.to_string() })?;
    parse_multistatus(&body).map_err(|message| ListingError::Parse { url: url.to_owned(), message })
}

/// The `response` elements of a WebDAV multistatus, whatever the namespace prefix.
fn parse_multistatus(xml: &str) -> Result<Vec<DavEntry>, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut entries = Vec::new();
    let mut current: Option<DavEntry> = None;
    let mut element = String::new();
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            Event::Start(e) | Event::Empty(e) => {
                let local = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                match local.as_str() {
                    "response" => current = Some(DavEntry::default()),
                    "collection" => {
                        if let Some(c) = current.as_mut() {
                            c.collection = true;
                        }
                    }
                    _ => {}
                }
                element = local;
            }
            Event::Text(t) => {
                let text = t.decode().map_err(|e| e.to_string())?.trim().to_owned();
                if let Some(c) = current.as_mut() {
                    match element.as_str() {
                        "href" => c.href = text,
                        "getcontentlength" => c.size = text.parse().ok(),
                        "getlastmodified" => c.modified = text,
                        _ => {}
                    }
                }
            }
            Event::End(e) => {
                if e.local_name().as_ref() == b"response"
                    && let Some(c) = current.take()
                {
                    entries.push(c);
                }
                element.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multistatus_of_a_nextcloud_share() {
        let xml = r#"<?xml version="1.0"?>
<d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">
 <d:response><d:href>/public.php/webdav/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop></d:propstat></d:response>
 <d:response><d:href>/public.php/webdav/2026-03/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop></d:propstat></d:response>
 <d:response><d:href>/public.php/webdav/2026-03/Lucro%20Real.zip</d:href><d:propstat><d:prop><d:resourcetype/><d:getcontentlength>1234</d:getcontentlength><d:getlastmodified>Sat, 14 Mar 2026 10:00:00 GMT</d:getlastmodified></d:prop></d:propstat></d:response>
</d:multistatus>"#;
        let entries = parse_multistatus(xml).unwrap();
        assert_eq!(entries.len(), 3);
        assert!(entries[1].collection && !entries[2].collection);
        assert_eq!(last_segment(&entries[1].href).as_deref(), Some("2026-03"));
        assert_eq!(last_segment(&entries[2].href).as_deref(), Some("Lucro Real.zip"));
        assert_eq!((entries[2].size, entries[2].modified.as_str()), (Some(1234), "Sat, 14 Mar 2026 10:00:00 GMT"));
    }

    fn check_token(text: &str, marker: &str, expected: Option<&str>) {
        assert_eq!(token_after(text, marker).as_deref(), expected, "{text}");
    }

    #[test]
    fn share_tokens() {
        check_token("/index.php/s/gn672Ad4CF8N6TK", "/s/", Some("gn672Ad4CF8N6TK"));
        check_token("/s/YggdBLfdninEJX9/", "/s/", Some("YggdBLfdninEJX9"));
        check_token("/index.php/login", "/s/", None);
        check_token("/index.php/s/", "/s/", None);
        check_token(
            r#"<meta http-equiv="refresh" content="0; url=https://x/index.php/s/Ab12?path=/Dados">"#,
            "index.php/s/",
            Some("Ab12"),
        );
        check_token("<a href=\"/s/Nope\">", "index.php/s/", None);
    }

    #[test]
    fn paths_inside_a_share() {
        assert_eq!(join("", ""), "");
        assert_eq!(join("", "/2026-09/"), "2026-09/");
        assert_eq!(join("Dados/Cadastros/CNPJ/", "2026-09"), "Dados/Cadastros/CNPJ/2026-09/");
        assert_eq!(encode_path("Dados/Regime Tributário/"), "Dados/Regime%20Tribut%C3%A1rio/");
    }

    #[test]
    fn names_and_months() {
        assert_eq!(encode("Lucro Real.zip"), "Lucro%20Real.zip");
        assert_eq!(encode("F.K03200$W.zip"), "F.K03200%24W.zip");
        assert!(is_month("2026-03") && !is_month("2026-3") && !is_month("latest"));
        assert_eq!(
            hrefs(r#"<a href="2026-02/">2026-02/</a> <a href="?C=N;O=D">Name</a>"#),
            vec!["2026-02/", "?C=N;O=D"]
        );
    }
}
