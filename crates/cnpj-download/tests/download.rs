//! Downloads from an in-process HTTP server on loopback that serves a Nextcloud share (a landing
//! page that redirects to it, WebDAV listings of its folders, the month folders under a prefix, at
//! its root, moved elsewhere beside another registry's, or nowhere in a hostile tree, the
//! tax-regime zips somewhere in it or in a share of their own) with the project's sample dump, and
//! injects faults: cut connections, stalls, a server that ignores Range, 416, 5xx
//! bursts, corrupt bytes, a listing whose size disagrees, a token that rotates, and stalls of every
//! stream beyond the second.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cnpj_download::{
    DownloadError, DownloadOptions, Manifest, NoObserver, Source, TaxRegime, download, resolve_month, unrecorded,
};
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
    /// The main share's token today: the landing page redirects to it; any other is refused.
    token: String,
    /// The main share's folder of the month folders: `""` or `a/b/`.
    prefix: String,
    /// Where the tax-regime zips also sit in the main share, relative to the prefix.
    tax_folder: Option<String>,
    /// More files of the main share, by their path in it (not under the prefix).
    extra: BTreeMap<String, Vec<u8>>,
    /// PROPFIND requests answered.
    propfinds: usize,
    /// A file request that arrives while more than this many are being answered stalls until the
    /// client hangs up.
    stall_above: Option<usize>,
    in_flight: usize,
    overload_stalls: usize,
    /// Waited before each file's body.
    latency: Duration,
    /// (file, first byte) of every Range request.
    ranges: Vec<(String, usize)>,
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
        let mut remote = Remote { token: TOKEN.into(), ..Remote::default() };
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

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The share of today, found from the landing page, its month folders under `prefix`.
    fn todays(&self, prefix: &str) -> Source {
        Source::Nextcloud { base: self.base(), token: None, landing: None, prefix: prefix.into() }
    }

    fn options(&self, dest: &Path) -> DownloadOptions {
        let mut opts = DownloadOptions::new(Source::share(self.base(), TOKEN), "latest", dest);
        opts.tax_regime = TaxRegime::Other(Source::share(self.base(), TAX_TOKEN));
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
    let mut bytes = Vec::new();
    let mut rest = path.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        match (b, tail.get(..2).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())) {
            (b'%', Some(v)) => {
                bytes.push(v);
                rest = &tail[2..];
            }
            _ => {
                bytes.push(b);
                rest = tail;
            }
        }
    }
    String::from_utf8(bytes).unwrap()
}

fn multistatus(base: &str, folders: &[String], files: &[(String, u64)]) -> String {
    let mut xml = String::from(r#"<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">"#);
    xml.push_str(&format!("<d:response><d:href>{base}</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop></d:propstat></d:response>"));
    for f in folders {
        xml.push_str(&format!("<d:response><d:href>{base}{}/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop></d:propstat></d:response>", encode(f)));
    }
    for (name, size) in files {
        xml.push_str(&format!("<d:response><d:href>{base}{}</d:href><d:propstat><d:prop><d:resourcetype/><d:getcontentlength>{size}</d:getcontentlength><d:getlastmodified>Sun, 13 Sep 2026 10:00:00 GMT</d:getlastmodified></d:prop></d:propstat></d:response>", encode(name)));
    }
    xml.push_str("</d:multistatus>");
    xml
}

/// Every file of the share of `token`, by its path in the share (`Dados/Cadastros/CNPJ/2026-09/Cnaes.zip`).
fn share_files<'a>(r: &'a Remote, token: &str) -> Option<BTreeMap<String, &'a Vec<u8>>> {
    let mut files = BTreeMap::new();
    if token == TAX_TOKEN {
        files.extend(r.tax.iter().map(|(n, b)| (n.clone(), b)));
    } else if token == r.token {
        for (month, names) in &r.months {
            files.extend(names.iter().map(|(n, b)| (format!("{}{month}/{n}", r.prefix), b)));
        }
        if let Some(folder) = &r.tax_folder {
            let folder = if folder.is_empty() { String::new() } else { format!("{folder}/") };
            files.extend(r.tax.iter().map(|(n, b)| (format!("{}{folder}{n}", r.prefix), b)));
        }
        files.extend(r.extra.iter().map(|(p, b)| (p.clone(), b)));
    } else {
        return None;
    }
    Some(files)
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

/// Counts a file request as being answered until dropped.
struct InFlight<'a>(&'a Mutex<Remote>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap().in_flight -= 1;
    }
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
    // The landing page redirects to today's share; `/meta` names it in a refresh tag instead.
    if method == "GET" && (path == "/" || path == "/meta" || path == "/elsewhere" || path.starts_with("/index.php/s/"))
    {
        let share = format!("/index.php/s/{}", r.token);
        return match path.as_str() {
            "/" => respond(&mut stream, "302 Found", &[("Location", share)], b""),
            "/meta" => {
                let page = format!(
                    r#"<html><meta http-equiv="refresh" content="0; url=http://{}{share}"></html>"#,
                    headers["host"]
                );
                respond(&mut stream, "200 OK", &[], page.as_bytes())
            }
            p if p == share => respond(&mut stream, "200 OK", &[], b"<html>the share</html>"),
            "/elsewhere" => respond(&mut stream, "200 OK", &[], b"<html>maintenance</html>"),
            _ => respond(&mut stream, "404 Not Found", &[], b""),
        };
    }
    if method == "PROPFIND" {
        r.propfinds += 1;
        let share_root = "/public.php/webdav/";
        let Some(folder) = path.strip_prefix(share_root) else {
            return respond(&mut stream, "404 Not Found", &[], b"");
        };
        let mut folder = decode(folder);
        if !folder.is_empty() && !folder.ends_with('/') {
            folder.push('/');
        }
        let token = [TAX_TOKEN, r.token.as_str()].into_iter().find(|t| auth == basic(t));
        let Some(files) = token.and_then(|t| share_files(&r, t)) else {
            return respond(&mut stream, "401 Unauthorized", &[], b"");
        };
        let mut folders = BTreeSet::new();
        let mut listed = Vec::new();
        let mut exists = folder.is_empty();
        for (path, bytes) in files.iter().filter_map(|(p, b)| Some((p.strip_prefix(folder.as_str())?, b))) {
            exists = true;
            match path.split_once('/') {
                Some((sub, _)) => drop(folders.insert(sub.to_owned())),
                None => {
                    listed.push((path.to_owned(), bytes.len() as u64 + r.listing_extra.get(path).copied().unwrap_or(0)))
                }
            }
        }
        if !exists {
            return respond(&mut stream, "404 Not Found", &[], b"");
        }
        let folders: Vec<String> = folders.into_iter().collect();
        let xml = multistatus(&format!("{share_root}{}", encode(&folder)), &folders, &listed);
        return respond(&mut stream, "207 Multi-Status", &[("Content-Type", "application/xml".into())], xml.as_bytes());
    }
    // GET /public.php/dav/files/<token>/<path in the share>
    let Some(rest) = path.strip_prefix("/public.php/dav/files/") else {
        return respond(&mut stream, "404 Not Found", &[], b"");
    };
    let (token, file_path) = rest.split_once('/').unwrap_or((rest, ""));
    if auth != basic(token) {
        return respond(&mut stream, "401 Unauthorized", &[], b"");
    }
    let bytes = share_files(&r, token).and_then(|files| files.get(&decode(file_path)).map(|b| (*b).clone()));
    let Some(mut bytes) = bytes else { return respond(&mut stream, "404 Not Found", &[], b"") };
    let name = decode(file_path.rsplit('/').next().unwrap_or_default());
    *r.gets.entry(name.clone()).or_default() += 1;
    let fault = r.faults.get_mut(&name).and_then(|f| (!f.is_empty()).then(|| f.remove(0)));
    let ignore_range = r.ignore_range.contains(&name);
    let range = headers
        .get("range")
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.trim_end_matches('-').parse::<usize>().ok());
    if let Some(start) = range {
        r.ranges.push((name.clone(), start));
    }
    r.in_flight += 1;
    let overloaded = r.stall_above.is_some_and(|n| r.in_flight > n);
    r.overload_stalls += usize::from(overloaded);
    let latency = r.latency;
    drop(r);
    let _in_flight = InFlight(remote);
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
    std::thread::sleep(latency);
    if overloaded {
        // Half the body, then nothing until the client gives up and hangs up.
        let _ = stream.write_all(&body[..body.len() / 2]);
        let _ = stream.set_read_timeout(Some(Duration::from_millis(20)));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 64];
        while Instant::now() < deadline {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        return;
    }
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
    opts.tax_regime = TaxRegime::Skip;
    let err = download(&opts, &NoObserver).unwrap_err().to_string();
    assert!(err.contains("Motivos.zip") && err.contains("gave up"), "{err}");
    assert!(!dir.path().join("Motivos.zip").exists());
}

#[test]
fn months_latest_complete_and_unknown() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.tax_regime = TaxRegime::Skip;
    opts.month = "2026-01".into();
    let err = download(&opts, &NoObserver).unwrap_err().to_string();
    assert!(err.contains("no month 2026-01"), "{err}");
    opts.month = "2026-08".into();
    let partial = download(&opts, &NoObserver).unwrap();
    assert_eq!(partial.downloaded, vec!["Cnaes.zip"], "an explicit month is taken as it is");
}

#[test]
fn todays_share_is_found_from_the_landing_page() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    // The landing page redirects to index.php/s/<TOKEN>; `/meta` names it in a refresh tag.
    for landing in [None, Some(format!("{}/meta", server.base()))] {
        opts.source = Source::Nextcloud { base: server.base(), token: None, landing, prefix: String::new() };
        assert_eq!(resolve_month(&opts).unwrap(), MONTH);
    }
    opts.source = Source::Nextcloud {
        base: server.base(),
        token: None,
        landing: Some(format!("{}/elsewhere", server.base())),
        prefix: String::new(),
    };
    let err = resolve_month(&opts).unwrap_err().to_string();
    assert!(err.contains("no share token") && err.contains("/elsewhere"), "{err}");

    opts.source = server.todays("");
    let summary = download(&opts, &NoObserver).unwrap();
    assert_eq!(summary.downloaded.len(), 15, "{:?}", summary.downloaded);
    assert!(summary.source.contains(TOKEN), "{}", summary.source);
    assert!(Manifest::load(dir.path()).source.contains(TOKEN));
}

#[test]
fn a_token_that_changes_between_two_runs_is_found_again_and_the_download_resumes() {
    let server = Server::start();
    let municipios = server.bytes("Municipios.zip");
    server.fault("Municipios.zip", &[Fault::Cut(5_000); 3]);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.source = server.todays("");
    opts.retries = 2;
    let err = download(&opts, &NoObserver).unwrap_err().to_string();
    assert!(err.contains("Municipios.zip") && err.contains("gave up"), "{err}");
    let part = std::fs::metadata(dir.path().join("Municipios.zip.part")).unwrap().len();
    assert!(part > 0 && (part as usize) < municipios.len(), "{part}");
    assert_eq!(Manifest::load(dir.path()).files.len(), 14);
    let gets = server.gets();

    // The share is published again under a new token; the old one is refused.
    server.remote.lock().unwrap().token = "Rotated789".into();
    let mut stale = server.options(dir.path());
    stale.tax_regime = TaxRegime::Skip;
    let err = download(&stale, &NoObserver).unwrap_err().to_string();
    assert!(err.contains("401"), "a given token is used as it is: {err}");

    let summary = download(&opts, &NoObserver).expect("the new token is found");
    assert_eq!(summary.downloaded, vec!["Municipios.zip"]);
    assert_eq!(summary.skipped.len(), 14, "complete files are kept: {:?}", summary.skipped);
    assert_eq!(server.gets(), gets + 1, "one request: the rest of Municipios.zip");
    let ranges = server.remote.lock().unwrap().ranges.clone();
    assert_eq!(ranges.last(), Some(&("Municipios.zip".to_owned(), part as usize)), "{ranges:?}");
    assert_eq!(std::fs::read(dir.path().join("Municipios.zip")).unwrap(), municipios);
    assert!(leftovers(dir.path()).is_empty());
    let manifest = Manifest::load(dir.path());
    assert!(manifest.source.contains("Rotated789") && summary.source.contains("Rotated789"), "{}", manifest.source);
    assert_eq!(manifest.files.len(), 15);
}

#[test]
fn month_folders_under_a_prefix_and_the_tax_regime_files_wherever_the_listing_shows_them() {
    // (where the tax-regime zips sit under the prefix, the folder the download finds them in)
    let layouts = [
        (Some("regime_tributario"), Some("regime_tributario")),
        (Some("2026-09/regime_tributario"), Some("2026-09/regime_tributario")),
        (Some("Regime Tributário/2026-09"), Some("Regime Tributário/2026-09")),
        (Some(""), Some("")),
        (Some("2026-09"), Some("2026-09")),
        // Another month's are not this month's.
        (Some("2026-08"), None),
    ];
    for (placed, found) in layouts {
        let server = Server::start();
        {
            let mut r = server.remote.lock().unwrap();
            r.prefix = "Dados/Cadastros/CNPJ/".into();
            r.tax_folder = placed.map(str::to_owned);
        }
        let dir = tempfile::tempdir().unwrap();
        let mut opts = server.options(dir.path());
        opts.source = server.todays("/Dados/Cadastros/CNPJ");
        opts.tax_regime = TaxRegime::SameSource;
        let summary = download(&opts, &NoObserver).unwrap_or_else(|e| panic!("{placed:?}: {e}"));
        assert_eq!(summary.month, MONTH, "{placed:?}");
        let tax: Vec<&String> =
            summary.downloaded.iter().filter(|n| n.starts_with("Lucro") || n.starts_with("Imunes")).collect();
        let (offered, month) = {
            let r = server.remote.lock().unwrap();
            (r.tax.len(), r.months[MONTH].len())
        };
        assert_eq!(tax.len(), if found.is_some() { offered } else { 0 }, "{placed:?}: {:?}", summary.downloaded);
        assert_eq!(summary.downloaded.len(), month + tax.len(), "{placed:?}: {:?}", summary.downloaded);
        assert_eq!(summary.tax_regime_folders, found.map(|f| vec![f.to_owned()]).unwrap_or_default(), "{placed:?}");
        for name in &summary.downloaded {
            assert_eq!(std::fs::read(dir.path().join(name)).unwrap(), server.bytes(name), "{placed:?} {name}");
        }
    }
}

/// A share whose month folders are not in the folder the source names is searched: the folder
/// found is the one downloaded from, logged, and named in the summary's source.
#[test]
fn month_folders_at_the_shares_root_are_found_when_the_default_prefix_is_missing() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.source = server.todays("/Dados/Cadastros/CNPJ");
    let (summary, logs) = logged(|| download(&opts, &NoObserver));
    let summary = summary.expect("the month folders are found at the share's root");
    assert_eq!((summary.month.as_str(), summary.downloaded.len()), (MONTH, 15), "{:?}", summary.downloaded);
    assert!(summary.source.ends_with(", folder /"), "{}", summary.source);
    assert!(
        logs.contains("INFO")
            && logs.contains("month folders found by a search of the share: /Dados/Cadastros/CNPJ/ is missing")
            && logs.contains("folder=/ "),
        "{logs}"
    );
}

/// Another registry's month folders (without the dump's zips) come first in the walk; the
/// month folders of the dump sit deeper. Whether the default prefix is missing or holds none, the
/// dump's are found, and the tax-regime zips are looked for below them.
#[test]
fn month_folders_moved_to_another_nested_folder_are_found_past_another_registrys() {
    for prefix_there in [false, true] {
        let server = Server::start();
        {
            let mut r = server.remote.lock().unwrap();
            r.prefix = "Dados/Cadastros/Mensal/CNPJ/".into();
            r.tax_folder = Some("regime_tributario".into());
            for month in ["2026-08", "2026-09"] {
                r.extra.insert(format!("Dados/Cadastros/CNO/{month}/cno.zip"), b"PK".to_vec());
            }
            if prefix_there {
                r.extra.insert("Dados/Cadastros/CNPJ/LEIAME.txt".into(), b"moved".to_vec());
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut opts = server.options(dir.path());
        opts.source = server.todays("/Dados/Cadastros/CNPJ");
        opts.tax_regime = TaxRegime::SameSource;
        let (summary, logs) = logged(|| download(&opts, &NoObserver));
        let summary = summary.unwrap_or_else(|e| panic!("{prefix_there}: {e}"));
        assert!(summary.source.ends_with("folder /Dados/Cadastros/Mensal/CNPJ/"), "{}", summary.source);
        assert_eq!(summary.month, MONTH);
        assert_eq!(summary.downloaded.len(), 15, "the month's and the tax-regime zips: {:?}", summary.downloaded);
        assert_eq!(summary.tax_regime_folders, ["regime_tributario"], "{prefix_there}");
        for name in &summary.downloaded {
            assert_eq!(std::fs::read(dir.path().join(name)).unwrap(), server.bytes(name), "{name}");
        }
        let why = if prefix_there { "holds no month folder" } else { "is missing" };
        assert!(logs.contains(&format!("/Dados/Cadastros/CNPJ/ {why}")), "{logs}");
        assert!(logs.contains("folder=/Dados/Cadastros/Mensal/CNPJ/"), "{logs}");
    }
}

/// A prefix that holds month folders is used as given, even when the share's root holds others:
/// `/Dados/Cadastros/CNPJ` gives its complete month; the root (`""`) its own, incomplete one.
#[test]
fn a_prefix_that_holds_month_folders_is_used_as_given() {
    let server = Server::start();
    let cnaes = server.bytes("Cnaes.zip");
    {
        let mut r = server.remote.lock().unwrap();
        r.prefix = "Dados/Cadastros/CNPJ/".into();
        r.extra.insert("2026-11/Cnaes.zip".into(), cnaes);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.source = server.todays("/Dados/Cadastros/CNPJ");
    assert_eq!(resolve_month(&opts).unwrap(), MONTH);
    opts.source = server.todays("/");
    let err = resolve_month(&opts).unwrap_err().to_string();
    assert!(err.contains(&format!("no complete month at {}/public.php/webdav/ (", server.base())), "{err}");
}

#[test]
fn no_month_folder_anywhere_is_an_error_naming_the_folders_searched() {
    let server = Server::start();
    {
        let mut r = server.remote.lock().unwrap();
        r.months.clear();
        r.extra.insert("Dados/Cadastros/CNO/2026-09/cno.zip".into(), b"PK".to_vec());
        r.extra.insert("Outros/LEIAME.txt".into(), b"?".to_vec());
    }
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.source = server.todays("/Dados/Cadastros/CNPJ");
    let err = resolve_month(&opts).unwrap_err().to_string();
    for part in [
        "no month folder (YYYY-MM/) in share ShareToken123",
        "/Dados/Cadastros/CNPJ/ is missing",
        "a search of the share from its root (4 levels down) found none",
        "folders seen: /, /Dados/, /Outros/, /Dados/Cadastros/, /Dados/Cadastros/CNO/ (month folders without the dump's zips)",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(!err.contains("stopped"), "{err}");
}

/// A deep chain of folders is walked four levels down; a wide tree, 64 folders in all; the error
/// names 24 of them and counts the rest.
#[test]
fn a_hostile_tree_does_not_make_the_search_list_forever() {
    let server = Server::start();
    let deep = format!("{}LEIAME.txt", "fundo/".repeat(40));
    {
        let mut r = server.remote.lock().unwrap();
        r.months.clear();
        r.extra.insert(deep, b"?".to_vec());
    }
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.source = server.todays("/Dados/Cadastros/CNPJ");
    let err = resolve_month(&opts).unwrap_err().to_string();
    assert!(err.contains("folders seen: /, /fundo/, /fundo/fundo/") && !err.contains("stopped"), "{err}");
    assert_eq!(server.remote.lock().unwrap().propfinds, 1 + 5, "the prefix, then the root and four levels");

    {
        let mut r = server.remote.lock().unwrap();
        for i in 0..500 {
            r.extra.insert(format!("largo{i:03}/{}LEIAME.txt", "x/".repeat(i % 7)), b"?".to_vec());
        }
        r.propfinds = 0;
    }
    let started = Instant::now();
    let err = resolve_month(&opts).unwrap_err().to_string();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(server.remote.lock().unwrap().propfinds, 1 + 64, "the prefix, then 64 folders");
    assert!(err.contains("stopped at 64 folders") && err.ends_with(" and 40 more"), "{err}");
}

/// Log lines written under a test's own subscriber.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

/// What `f` returns, and the lines it logged (info and above).
fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let lines = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    (out, lines)
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_server_that_stalls_more_than_two_streams_gets_two() {
    let server = Server::start();
    {
        let mut r = server.remote.lock().unwrap();
        r.stall_above = Some(2);
        r.latency = Duration::from_millis(100);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server.options(dir.path());
    opts.parallel = 4;
    opts.stall = Duration::from_millis(300);
    let (summary, logs) = logged(|| download(&opts, &NoObserver));
    let summary = summary.expect("completes");
    assert_eq!(summary.downloaded.len(), 15, "{:?}", summary.downloaded);
    for name in &summary.downloaded {
        assert_eq!(std::fs::read(dir.path().join(name)).unwrap(), server.bytes(name), "{name}");
    }
    let p = &summary.parallelism;
    assert_eq!(p.started, 4);
    assert!(p.ended <= 2 && p.stalls >= 2, "{p:?}");
    assert_eq!((p.drops[0].from, p.drops[0].to), (4, 2), "{p:?}");
    let stalls_served = server.remote.lock().unwrap().overload_stalls;
    assert_eq!(p.stalls, stalls_served, "every stall the server made was seen as one");
    assert!(
        logs.contains("WARN") && logs.contains("server stalls parallel streams: dropping to 2 transfers"),
        "{logs}"
    );
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["parallelism"]["drops"][0]["to"], 2, "{json}");
}
