//! Where a month's files are and how big they are: WebDAV PROPFIND on the Nextcloud public share
//! (share token as the basic-auth user, empty password), or the legacy Apache directory listing.

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
}

/// A source of monthly dumps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Nextcloud public share: `{base}/public.php/webdav/` lists, `{base}/public.php/dav/files/{token}/…` serves.
    Nextcloud { base: String, token: String },
    /// Apache listing: `{base}/YYYY-MM/` holds the zips (e.g. `…/dados/cnpj/dados_abertos_cnpj`).
    Legacy { base: String },
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
}

pub(crate) fn agent(stall: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(20)).timeout_read(stall).timeout_write(stall).build()
}

impl Source {
    fn base(&self) -> &str {
        match self {
            Source::Nextcloud { base, .. } | Source::Legacy { base } => base.trim_end_matches('/'),
        }
    }

    /// The `Authorization` header a request to this source carries, if any.
    pub(crate) fn authorization(&self) -> Option<String> {
        match self {
            Source::Nextcloud { token, .. } => {
                Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{token}:"))))
            }
            Source::Legacy { .. } => None,
        }
    }

    /// The months offered, `YYYY-MM`, newest first.
    pub fn months(&self, agent: &ureq::Agent) -> Result<Vec<String>, ListingError> {
        let mut months: Vec<String> = match self {
            Source::Nextcloud { .. } => {
                let url = format!("{}/public.php/webdav/", self.base());
                propfind(agent, &url, self.authorization().as_deref())?
                    .into_iter()
                    .filter(|e| e.collection)
                    .filter_map(|e| last_segment(&e.href))
                    .collect()
            }
            Source::Legacy { .. } => {
                let url = format!("{}/", self.base());
                hrefs(&get_text(agent, &url)?).into_iter().filter_map(|h| last_segment(&h)).collect()
            }
        };
        months.retain(|m| is_month(m));
        months.sort();
        months.dedup();
        months.reverse();
        Ok(months)
    }

    /// The zips of `folder` (a month, or `""` for the share's root) with their sizes.
    pub fn files(&self, agent: &ureq::Agent, folder: &str) -> Result<Vec<RemoteFile>, ListingError> {
        let folder = folder.trim_matches('/');
        let prefix = if folder.is_empty() { String::new() } else { format!("{folder}/") };
        let mut files = match self {
            Source::Nextcloud { token, .. } => {
                let url = format!("{}/public.php/webdav/{prefix}", self.base());
                propfind(agent, &url, self.authorization().as_deref())?
                    .into_iter()
                    .filter(|e| !e.collection)
                    .filter_map(|e| {
                        let name = last_segment(&e.href)?;
                        Some(RemoteFile {
                            url: format!("{}/public.php/dav/files/{token}/{prefix}{}", self.base(), encode(&name)),
                            name,
                            size: e.size?,
                            modified: e.modified,
                        })
                    })
                    .collect::<Vec<_>>()
            }
            Source::Legacy { .. } => {
                let url = format!("{}/{prefix}", self.base());
                let mut files = Vec::new();
                for href in hrefs(&get_text(agent, &url)?) {
                    let Some(name) = last_segment(&href) else { continue };
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
                    files.push(RemoteFile { name, url: file_url, size, modified });
                }
                files
            }
        };
        files.retain(|f| f.name.to_ascii_lowercase().ends_with(".zip"));
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    /// The requested month's files, or (for `latest`) those of the newest month in which every
    /// required table of the dump is present.
    pub fn month_files(&self, agent: &ureq::Agent, month: &str) -> Result<(String, Vec<RemoteFile>), ListingError> {
        let months = self.months(agent)?;
        if month != "latest" {
            if !months.iter().any(|m| m == month) {
                return Err(ListingError::NoMonth { month: month.to_owned(), source_url: self.base().to_owned() });
            }
            return Ok((month.to_owned(), self.files(agent, month)?));
        }
        for m in months {
            let files = self.files(agent, &m)?;
            if complete(&files) {
                return Ok((m, files));
            }
            tracing::info!(month = %m, "incomplete month skipped");
        }
        Err(ListingError::NoCompleteMonth(self.base().to_owned()))
    }
}

/// Every required kind of file of a dump is among `files`.
pub(crate) fn complete(files: &[RemoteFile]) -> bool {
    cnpj_model::FileKind::ALL
        .iter()
        .filter(|k| k.required())
        .all(|k| files.iter().any(|f| cnpj_model::FileKind::recognise(&f.name, None) == Some(*k)))
}

fn is_month(s: &str) -> bool {
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

fn get_text(agent: &ureq::Agent, url: &str) -> Result<String, ListingError> {
    agent
        .get(url)
        .call()
        .map_err(|e| ListingError::Http { url: url.to_owned(), message: e.to_string() })?
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
        .map_err(|e| ListingError::Http { url: url.to_owned(), message: e.to_string() })?
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
