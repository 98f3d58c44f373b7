//! Where a webhook may lead. A URL must be `https` (`http` only when allowed), and every address
//! its host resolves to must be public: loopback, private, link-local (the cloud metadata
//! address 169.254.169.254 among them), shared (CGNAT), multicast, unspecified, broadcast and
//! reserved addresses, and their IPv6 equivalents (IPv4-mapped and NAT64 addresses by the IPv4
//! address they hold), are refused unless private addresses are allowed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// The longest webhook URL, in bytes.
pub const MAX_URL: usize = 2048;

/// What the operator allows beyond public `https` URLs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Policy {
    pub allow_http: bool,
    pub allow_private: bool,
}

/// Why a webhook URL is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the URL must be https")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    #[error("the URL is longer than {MAX_URL} bytes")]
    TooLong,
    #[error("the URL has white space or a control character")]
    Spaces,
    #[error("the URL has a user name before its host")]
    UserInfo,
    #[error("the URL's port {0:?} is not a number")]
    Port(String),
    #[error("{host} does not resolve: {reason}")]
    Unresolved { host: String, reason: String },
    #[error("{host} resolves to {address}, a {class} address")]
    Address { host: String, address: IpAddr, class: &'static str },
}

/// The class of a non-public address (`None`: public).
pub fn refusal(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

fn v4_class(a: Ipv4Addr) -> Option<&'static str> {
    let [first, second, ..] = a.octets();
    Some(match (first, second) {
        _ if a.is_unspecified() || first == 0 => "unspecified",
        _ if a.is_loopback() => "loopback",
        (10, _) | (172, 16..=31) | (192, 168) => "private",
        (169, 254) => "link-local",
        (100, 64..=127) => "shared (CGNAT)",
        _ if a.is_multicast() => "multicast",
        _ if a.is_broadcast() => "broadcast",
        (240..=255, _) | (192, 0) | (198, 18..=19) => "reserved",
        _ => return None,
    })
}

fn v6_class(a: Ipv6Addr) -> Option<&'static str> {
    let segments = a.segments();
    if let Some(v4) = a.to_ipv4_mapped() {
        return v4_class(v4);
    }
    // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return v4_class(Ipv4Addr::from((u128::from(a) & 0xffff_ffff) as u32));
    }
    Some(match segments[0] {
        _ if a.is_unspecified() => "unspecified",
        _ if a.is_loopback() => "loopback",
        0xfc00..=0xfdff => "private (unique local)",
        0xfe80..=0xfebf => "link-local",
        0xfec0..=0xfeff => "site-local",
        0xff00..=0xffff => "multicast",
        _ => return None,
    })
}

/// The host and port of an `http(s)` URL, its scheme checked.
fn host_port(url: &str, policy: Policy) -> Result<(String, u16), Refused> {
    let lower = url.to_ascii_lowercase();
    let (rest, default) = match (lower.strip_prefix("https://"), lower.strip_prefix("http://")) {
        (Some(rest), _) => (rest, 443),
        (None, Some(rest)) if policy.allow_http => (rest, 80),
        _ => return Err(Refused::Scheme),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            bracketed.split_once(']').map(|(host, after)| (host, after.strip_prefix(':'))).ok_or(Refused::NoHost)?
        }
        None => authority.rsplit_once(':').map_or((authority, None), |(host, port)| (host, Some(port))),
    };
    let port = port.map_or(Ok(default), |p| p.parse().map_err(|_| Refused::Port(p.to_owned())))?;
    if host.is_empty() {
        return Err(Refused::NoHost);
    }
    Ok((host.to_owned(), port))
}

impl Policy {
    /// The addresses `url` leads to, each allowed by this policy; else why not.
    pub fn check(&self, url: &str) -> Result<Vec<SocketAddr>, Refused> {
        let (host, port) = host_port(url, *self)?;
        self.resolve(&host, port)
    }

    /// What can be said of `url` without resolving a name, for a URL as a user sets it: at most
    /// `MAX_URL` bytes, no white space, its scheme, a host without a user name, and the address
    /// it is, when it is one (a name is checked when a delivery connects).
    pub fn check_written(&self, url: &str) -> Result<(), Refused> {
        if url.len() > MAX_URL {
            return Err(Refused::TooLong);
        }
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Refused::Spaces);
        }
        let (host, port) = host_port(url, *self)?;
        let rest = url.split_once("://").map_or("", |(_, rest)| rest);
        if rest.split(['/', '?', '#']).next().unwrap_or_default().contains('@') {
            return Err(Refused::UserInfo);
        }
        if host.parse::<IpAddr>().is_ok() {
            self.resolve(&host, port)?;
        }
        Ok(())
    }

    /// Resolves `host`: every address it has must be allowed (a name that also resolves to a
    /// private address is refused whole).
    pub fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
        let unresolved = |reason: String| Refused::Unresolved { host: host.to_owned(), reason };
        let found: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => (host, port).to_socket_addrs().map_err(|e| unresolved(e.to_string()))?.collect(),
        };
        if found.is_empty() {
            return Err(unresolved("no address".into()));
        }
        if !self.allow_private {
            for address in &found {
                if let Some(class) = refusal(address.ip()) {
                    return Err(Refused::Address { host: host.to_owned(), address: address.ip(), class });
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, policy: Policy, expected: Result<(), &str>) {
        let got = policy.check(url).map(drop).map_err(|e| match e {
            Refused::Address { class, .. } => class.to_owned(),
            other => other.to_string(),
        });
        assert_eq!(got, expected.map_err(str::to_owned), "{url}");
    }

    const STRICT: Policy = Policy { allow_http: false, allow_private: false };

    #[test]
    fn every_non_public_class_is_refused() {
        for (url, class) in [
            ("https://127.0.0.1/hook", "loopback"),
            ("https://127.9.9.9:8443/", "loopback"),
            ("https://[::1]/hook", "loopback"),
            ("https://10.1.2.3/", "private"),
            ("https://172.16.0.1/", "private"),
            ("https://172.31.255.255/", "private"),
            ("https://192.168.1.1/", "private"),
            ("https://169.254.169.254/latest/meta-data/", "link-local"),
            ("https://100.64.0.1/", "shared (CGNAT)"),
            ("https://100.127.255.254/", "shared (CGNAT)"),
            ("https://224.0.0.1/", "multicast"),
            ("https://[ff02::1]/", "multicast"),
            ("https://0.0.0.0/", "unspecified"),
            ("https://[::]/", "unspecified"),
            ("https://[::ffff:127.0.0.1]/", "loopback"),
            ("https://[::ffff:169.254.169.254]/", "link-local"),
            ("https://[64:ff9b::10.0.0.1]/", "private"),
            ("https://[fd00::1]/", "private (unique local)"),
            ("https://[fe80::1]/", "link-local"),
            ("https://255.255.255.255/", "broadcast"),
            ("https://localhost:9000/hook", "loopback"),
        ] {
            check(url, STRICT, Err(class));
        }
    }

    #[test]
    fn public_https_passes_and_the_operator_may_allow_more() {
        for url in
            ["https://8.8.8.8/hook", "https://172.32.0.1/", "https://100.128.0.1/", "https://[2001:4860::8888]:8443/x"]
        {
            check(url, STRICT, Ok(()));
        }
        check("http://8.8.8.8/hook", STRICT, Err("the URL must be https"));
        check("ftp://8.8.8.8/", STRICT, Err("the URL must be https"));
        check("https:///x", STRICT, Err("the URL has no host"));
        let written = |url: &str| STRICT.check_written(url).map_err(|e| e.to_string());
        assert!(written("https://10.0.0.1/").unwrap_err().contains("private"));
        assert!(written("https://[::1]:8443/").unwrap_err().contains("loopback"));
        assert_eq!(written("https://localhost/"), Ok(()), "a name is checked when a delivery connects");
        assert_eq!(written("https://hooks.example.com:x/"), Err("the URL's port \"x\" is not a number".to_owned()));
        let lab = Policy { allow_http: true, allow_private: true };
        check("http://127.0.0.1:8080/hook", lab, Ok(()));
        check("https://user@127.0.0.1/", Policy { allow_private: true, ..STRICT }, Ok(()));
        let ports = |url: &str| lab.check(url).unwrap().iter().map(SocketAddr::port).collect::<Vec<_>>();
        assert_eq!(
            (ports("http://127.0.0.1/"), ports("https://[::1]/"), ports("http://127.0.0.1:81/x")),
            (vec![80], vec![443], vec![81])
        );
    }

    #[test]
    fn urls_as_users_set_them() {
        let lab = Policy { allow_http: true, allow_private: true };
        for (url, policy, expected) in [
            ("https://hooks.example.com/cnpj?x=1", STRICT, Ok(())),
            ("HTTPS://hooks.example.com", STRICT, Ok(())),
            ("http://127.0.0.1:9000/hook", lab, Ok(())),
            ("https://hooks.example.com/a@b", STRICT, Ok(())),
            ("https://127.0.0.1:9000/hook", STRICT, Err("loopback")),
            ("https://169.254.169.254/latest", STRICT, Err("link-local")),
            ("http://hooks.example.com/", STRICT, Err("must be https")),
            ("https://", STRICT, Err("no host")),
            ("https:///path", STRICT, Err("no host")),
            ("https://user@hooks.example.com/", STRICT, Err("a user name")),
            ("https://hooks.example.com/a b", STRICT, Err("white space")),
            ("https://hooks.example.com/\u{7}", STRICT, Err("control")),
            ("ftp://hooks.example.com/", lab, Err("must be https")),
        ] {
            match (policy.check_written(url), expected) {
                (Ok(()), Ok(())) => {}
                (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{url}: {e}"),
                (got, want) => panic!("{url}: {got:?}, not {want:?}"),
            }
        }
        let long = format!("https://h.example/{}", "a".repeat(MAX_URL));
        assert_eq!(STRICT.check_written(&long), Err(Refused::TooLong));
    }
}
