//! Downloads from an in-process HTTP server on loopback that serves a WebDAV listing (or an Apache
//! listing) and the project's sample dump, and injects faults: cut connections, stalls, a server
//! that ignores Range, 416, 5xx bursts, corrupt bytes, a listing whose size disagrees.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cnpj_download::{DownloadError, DownloadOptions, Manifest, NoObserver, Source, download, unrecorded};
use sha2::{Digest, Sha256};

const TOKEN: &str = "ShareToken123";
const TAX_TOKEN: &str = "TaxToken456";
const MONTH: &str = "2026-09";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Send the full Content-Length, then only this many bytes, then close.
    Cut(usize),
    /// Send this many bytes, then stall past the client's stall timeout.
    Stall(usize),
    /// Answer 503.
    Unavailable,
    /// Answer a Range request with 416.
    RangeNotSatisfiable,
    /// Serve the bytes with one flipped in the middle.
    Corrupt,
}

#[derive(Default)]
struct Remote {
    /// month → file name → bytes
    months: HashMap<String, HashMap<String, Vec<u8>>>,
    tax: HashMap<String, Vec<u8>>,
    /// file name → faults to apply, one per request, in order
    faults: HashMap<String, Vec<Fault>>,
    /// file name → extra bytes the listing claims
    listing_extra: HashMap<String, u64>,
    ignore_range: Vec<String>,
    gets: HashMap<String, usize>,
}

struct Server {
    addr: String,
    remote: Arc<Mutex<Remote>>,
}

fn sample_dump() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample-dump")
}

impl Server {
    fn start() -> Server {
        let mut remote = Remote::default();
        let mut month = HashMap::new();
        for entry in std::fs::read_dir(sample_dump()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".zip") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            if name.starts_with("Lucro") || name.starts_with("Imunes") {
                remote.tax.insert(name, bytes);
            } else {
                month.insert(name, bytes);
            }
        }
        let incomplete: HashMap<String, Vec<u8>> =
            month.iter().filter(|(n, _)| n.starts_with("Cnaes")).map(|(n, b)| (n.clone(), b.clone())).collect();
        remote.months.insert("2026-08".into(), incomplete.clone());
        remote.months.insert("2026-10".into(), incomplete);
        remote.months.insert(MONTH.into(), month);
        let remote = Arc::new(Mutex::new(remote));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let shared = Arc::clone(&remote);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let remote = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &remote));
            }
        });
        Server { addr, remote }
    }

    fn fault(&self, name: &str, faults: &[Fault]) {
        self.remote.lock().unwrap().faults.insert(name.into(), faults.to_vec());
    }

    fn bytes(&self, name: &str) -> Vec<u8> {
        let r = self.remote.lock().unwrap();
        r.months[MONTH].get(name).or_else(|| r.tax.get(name)).unwrap().clone()
    }

    fn gets(&self) -> usize {
        self.remote.lock().unwrap().gets.values().sum()
    }

    fn options(&self, dest: &Path) -> DownloadOptions {
        let source = Source::Nextcloud { base: format!("http://{}", self.addr), token: TOKEN.into() };
        let mut opts = DownloadOptions::new(source, "latest", dest);
        opts.tax_regime = Some(Source::Nextcloud { base: format!("http://{}", self.addr), token: TAX_TOKEN.into() });
        opts.stall = Duration::from_millis(400);
        opts.backoff = Duration::from_millis(5);
        opts.retries = 6;
        opts
    }
}

fn encode(name: &str) -> String {
    name.replace(' ', "%20").replace('$', "%24")
}

fn decode(path: &str) -> String {
    path.replace("%20", " ").replace("%24", "$")
}

fn multistatus(base: &str, folders: &[&str], files: &[(String, u64)]) -> String {
    let mut xml = String::from(r#"<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">"#);
    xml.push_str(&format!("<d:response><d:href>{base}</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop></d:propstat></d:response>"));
    for f in folders {
        xml.push_str(&format!("<d:response><d:href>{base}{f}/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop></d:propstat></d:response>"));
    }
    for (name, size) in files {
        xml.push_str(&format!("<d:response><d:href>{base}{}</d:href><d:propstat><d:prop><d:resourcetype/><d:getcontentlength>{size}</d:getcontentlength><d:getlastmodified>Sun, 13 Sep 2026 10:00:00 GMT</d:getlastmodified></d:prop></d:propstat></d:response>", encode(name)));
    }
    xml.push_str("</d:multistatus>");
    xml
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

fn serve(mut stream: TcpStream, remote: &Mutex<Remote>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    if let Some(n) = headers.get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        let mut body = vec![0; n];
        let _ = reader.read_exact(&mut body);
    }
    let basic = |token: &str| {
        use base64::Engine;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{token}:")))
    };
    let auth = headers.get("authorization").cloned().unwrap_or_default();
    let mut r = remote.lock().unwrap();
    if method == "PROPFIND" {
        let share_root = "/public.php/webdav/";
        let Some(folder) = path.strip_prefix(share_root) else {
            return respond(&mut stream, "404 Not Found", &[], b"");
        };
        let folder = folder.trim_end_matches('/');
        let xml = if auth == basic(TAX_TOKEN) && folder.is_empty() {
            multistatus(share_root, &[], &r.tax.iter().map(|(n, b)| (n.clone(), b.len() as u64)).collect::<Vec<_>>())
        } else if auth != basic(TOKEN) {
            return respond(&mut stream, "401 Unauthorized", &[], b"");
        } else if folder.is_empty() {
            let months: Vec<&str> = r.months.keys().map(String::as_str).collect();
            multistatus(share_root, &months, &[])
        } else if let Some(files) = r.months.get(folder) {
            let listed: Vec<(String, u64)> = files
                .iter()
                .map(|(n, b)| (n.clone(), b.len() as u64 + r.listing_extra.get(n).copied().unwrap_or(0)))
                .collect();
            multistatus(&format!("{share_root}{folder}/"), &[], &listed)
        } else {
            return respond(&mut stream, "404 Not Found", &[], b"");
        };
        return respond(&mut stream, "207 Multi-Status", &[("Content-Type", "application/xml".into())], xml.as_bytes());
    }
    // GET /public.php/dav/files/<token>/<month>/<name> or /public.php/dav/files/<token>/<name>
    let Some(rest) = path.strip_prefix("/public.php/dav/files/") else {
        return respond(&mut stream, "404 Not Found", &[], b"");
    };
    let mut segments: Vec<String> = rest.split('/').map(decode).collect();
    let token = segments.remove(0);
    if auth != basic(&token) {
        return respond(&mut stream, "401 Unauthorized", &[], b"");
    }
    let name = segments.pop().unwrap_or_default();
    let bytes = match segments.first() {
        Some(month) => r.months.get(month).and_then(|m| m.get(&name)).cloned(),
        None => r.tax.get(&name).cloned(),
    };
    let Some(mut bytes) = bytes else { return respond(&mut stream, "404 Not Found", &[], b"") };
    *r.gets.entry(name.clone()).or_default() += 1;
    let fault = r.faults.get_mut(&name).and_then(|f| (!f.is_empty()).then(|| f.remove(0)));
    let ignore_range = r.ignore_range.contains(&name);
    drop(r);
    let range = headers
        .get("range")
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.trim_end_matches('-').parse::<usize>().ok());
    match fault {
        Some(Fault::Unavailable) => return respond(&mut stream, "503 Service Unavailable", &[], b""),
        Some(Fault::RangeNotSatisfiable) if range.is_some() => {
            return respond(&mut stream, "416 Range Not Satisfiable", &[], b"");
        }
        Some(Fault::Corrupt) => {
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0xFF;
        }
        _ => {}
    }
    let (status, start) = match range {
        Some(start) if !ignore_range && start < bytes.len() => ("206 Partial Content", start),
        Some(start) if !ignore_range && start >= bytes.len() => {
            return respond(&mut stream, "416 Range Not Satisfiable", &[], b"");
        }
        _ => ("200 OK", 0),
    };
    let body = &bytes[start..];
    let total = bytes.len();
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if start > 0 {
        head.push_str(&format!("Content-Range: bytes {start}-{}/{total}\r\n", total - 1));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    match fault {
        Some(Fault::Cut(n)) => {
            let _ = stream.write_all(&body[..n.min(body.len())]);
        }
        Some(Fault::Stall(n)) => {
            let _ = stream.write_all(&body[..n.min(body.len())]);
            let _ = stream.flush();
            std::thread::sleep(Duration::from_millis(1500));
        }
        _ => {
            let _ = stream.write_all(body);
        }
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn leftovers(dest: &Path) -> Vec<String> {
    std::fs::read_dir(dest)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect()
}

#[test]
fn faults_heal_into_verified_identical_files_and_a_second_run_fetches_nothing() {
    let server = Server::start();
    server.fault("Municipios.zip", &[Fault::Cut(10_000), Fault::Cut(5_000)]);
    server.fault("Cnaes.zip", &[Fault::Stall(4_000)]);
    server.fault("Estabelecimentos2.zip", &[Fault::Unavailable, Fault::Unavailable, Fault::Unavailable]);
    server.fault("Empresas0.zip", &[Fault::Corrupt]);
    server.fault("Naturezas.zip", &[Fault::Cut(700), Fault::RangeNotSatisfiable]);
    server.fault("Paises.zip", &[Fault::Cut(1_000)]);
    server.remote.lock().unwrap().ignore_range.push("Paises.zip".into());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("2026-09");
    let summary = download(&server.options(&dest), &NoObserver).expect("the download heals");
    assert_eq!(summary.month, MONTH);
    assert_eq!(summary.downloaded.len(), 15, "{:?}", summary.downloaded);
    assert!(leftovers(&dest).is_empty());
    let manifest = Manifest::load(&dest);
    assert_eq!(manifest.files.len(), 15);
    for (name, entry) in &manifest.files {
        let got = std::fs::read(dest.join(name)).unwrap();
        let want = server.bytes(name);
        assert_eq!(got, want, "{name} is byte-identical");
        assert_eq!((entry.size, entry.sha256.as_str()), (want.len() as u64, sha256(&want).as_str()), "{name}");
        assert!(entry.verified_at > 0);
    }
    let gets = server.gets();
    // Municipios 2 cuts + 1; Cnaes stall + 1; Estabelecimentos2 3 × 503 + 1; Empresas0 corrupt + 1;
    // Naturezas cut, 416, full; Paises cut, then 200 to a Range request; 9 others once.
    assert_eq!(gets, 3 + 2 + 4 + 2 + 3 + 2 + 9, "every fault was met once");

    let again = download(&server.options(&dest), &NoObserver).unwrap();
    assert!(again.downloaded.is_empty(), "{:?}", again.downloaded);
    assert_eq!(again.skipped.len(), 15);
    assert_eq!(server.gets(), gets, "nothing was fetched again");
}

/// `unrecorded` lists what the source published since a folder was downloaded (a file the
/// manifest lacks, or one listed with another size), not the zips deleted from the folder since.
#[test]
fn unrecorded_files_are_those_the_manifest_lacks_or_lists_otherwise() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("2026-09");
    let (month, fresh) = unrecorded(&server.options(&dest)).unwrap();
    assert_eq!((month.as_str(), fresh.len()), (MONTH, 15), "a folder never downloaded: everything");
    download(&server.options(&dest), &NoObserver).unwrap();
    assert_eq!(unrecorded(&server.options(&dest)).unwrap(), (MONTH.to_owned(), Vec::new()));
    std::fs::remove_file(dest.join("Empresas0.zip")).unwrap();
    assert_eq!(unrecorded(&server.options(&dest)).unwrap().1, Vec::<String>::new(), "a deleted zip is not news");
    let gets = server.gets();
    let republished = server.bytes("Cnaes.zip");
    server.remote.lock().unwrap().months.get_mut(MONTH).unwrap().insert("Simples.zip".into(), republished);
    assert_eq!(unrecorded(&server.options(&dest)).unwrap().1, ["Simples.zip"]);
    assert_eq!(server.gets(), gets, "nothing is fetched");
}

#[test]
fn a_file_corrupt_twice_is_reported_and_never_marked_complete() {
    let server = Server::start();
    server.fault("Socios0.zip", &[Fault::Corrupt, Fault::Corrupt]);
    let dir = tempfile::tempdir().unwrap();
    let err = download(&server.options(dir.path()), &NoObserver).unwrap_err();
    let DownloadError::Failed(failures) = &err else { panic!("{err}") };
    assert_eq!(failures.len(), 1, "{err}");
    assert_eq!(failures[0].0, "Socios0.zip");
    assert!(failures[0].1.contains("corrupt"), "{err}");
    assert!(!dir.path().join("Socios0.zip").exists());
    assert!(leftovers(dir.path()).is_empty());
    let manifest = Manifest::load(dir.path());
    assert!(!manifest.files.contains_key("Socios0.zip"));
    assert_eq!(manifest.files.len(), 14, "the other files are complete");
}

#[test]
fn a_listing_whose_size_disagrees_is_reported() {
    let server = Server::start();
    server.remote.lock().unwrap().listing_extra.insert("Simples.zip".into(), 100);
    let dir = tempfile::tempdir().unwrap();
    let err = download(&server.options(dir.path()), &NoObserver).unwrap_err().to_string();
    assert!(err.contains("Simples.zip") && err.contains("listing"), "{err}");
    assert!(!dir.path().join("Simples.zip").exists());
}

#[test]
fn a_connection_that_always_breaks_is_reported() {
    let server = Server::start();
    server.fault("Motivos.zip", &[Fault::Cut(100); 20]);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.retries = 3;
    opts.tax_regime = None;
    let err = download(&opts, &NoObserver).unwrap_err().to_string();
    assert!(err.contains("Motivos.zip") && err.contains("gave up"), "{err}");
    assert!(!dir.path().join("Motivos.zip").exists());
}

#[test]
fn months_latest_complete_and_unknown() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.tax_regime = None;
    opts.month = "2026-01".into();
    let err = download(&opts, &NoObserver).unwrap_err().to_string();
    assert!(err.contains("no month 2026-01"), "{err}");
    opts.month = "2026-08".into();
    let partial = download(&opts, &NoObserver).unwrap();
    assert_eq!(partial.downloaded, vec!["Cnaes.zip"], "an explicit month is taken as it is");
}
