//! Where a webhook may lead. A URL must be `https` (`http` only when allowed), its port plain
//! digits from 1 to 65535, and every address its host resolves to must be public: loopback,
//! private, link-local (the cloud metadata address 169.254.169.254 among them), shared (CGNAT),
//! documentation, multicast, unspecified, broadcast and reserved addresses are refused unless
//! private addresses are allowed. An IPv6 address is public only in global unicast (2000::/3)
//! outside its special blocks; one that carries an IPv4 address is refused when that address is
//! not public (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16) or refused whole where it could
//! lead anywhere (IPv4-compatible, IPv4-translated, local-use NAT64, Teredo). A refusal never
//! names the address a name resolved to: the delivery's error would make the API a resolver of
//! internal names.

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
    #[error("the URL's port {0:?} is not a number from 1 to 65535")]
    Port(String),
    #[error("{host} does not resolve: {reason}")]
    Unresolved { host: String, reason: String },
    /// Which address and what kind it is are left unsaid (see the module's notes).
    #[error("{host} does not resolve to public addresses only")]
    NotPublic { host: String },
}

/// The class of a non-public address (`None`: public).
pub fn refusal(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

fn v4_class(a: Ipv4Addr) -> Option<&'static str> {
    let [first, second, third, _] = a.octets();
    Some(match (first, second, third) {
        _ if a.is_unspecified() || first == 0 => "unspecified",
        _ if a.is_loopback() => "loopback",
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => "private",
        (169, 254, _) => "link-local",
        (100, 64..=127, _) => "shared (CGNAT)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        _ if a.is_multicast() => "multicast",
        _ if a.is_broadcast() => "broadcast",
        // 192.88.99/24: the 6to4 relays' anycast (deprecated), which leads where a relay is.
        (240..=255, ..) | (192, 0, _) | (198, 18..=19, _) | (192, 88, 99) => "reserved",
        _ => return None,
    })
}

fn v6_class(a: Ipv6Addr) -> Option<&'static str> {
    let segments = a.segments();
    let [.., a1, a2, a3, a4] = a.octets();
    let last = Ipv4Addr::new(a1, a2, a3, a4);
    match segments {
        // IPv4-mapped and the well-known NAT64 prefix reach the IPv4 address in their last 32
        // bits; 6to4 reaches (through a relay) the one in bits 16 to 48.
        [0, 0, 0, 0, 0, 0xffff, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => return v4_class(last),
        [0x2002, high, low, ..] => return v4_class(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))),
        _ => {}
    }
    Some(match segments {
        _ if a.is_unspecified() => "unspecified",
        _ if a.is_loopback() => "loopback",
        // ::a.b.c.d, deprecated: what a host does with it is its own affair.
        [0, 0, 0, 0, 0, 0, ..] => "IPv4-compatible",
        // ::ffff:0:a.b.c.d (SIIT) is never a destination on the Internet.
        [0, 0, 0, 0, 0xffff, 0, ..] => "IPv4-translated",
        // 64:ff9b:1::/48: an operator's own NAT64, to addresses of its choosing.
        [0x64, 0xff9b, 1, ..] => "local-use NAT64",
        [0x100, 0, 0, 0..=1, ..] => "discard",
        [0xfc00..=0xfdff, ..] => "private (unique local)",
        [0xfe80..=0xfebf, ..] => "link-local",
        [0xfec0..=0xfeff, ..] => "site-local",
        [0xff00..=0xffff, ..] => "multicast",
        // Teredo: its server's IPv4 address and its client's (obfuscated) can be any.
        [0x2001, 0, ..] => "Teredo",
        [0x2001, 0xdb8, ..] | [0x3fff, 0..=0x0fff, ..] => "documentation",
        // 2001::/23: benchmarking, ORCHID and other protocols' blocks.
        [0x2001, 0..=0x1ff, ..] => "reserved",
        [0x2000..=0x3fff, ..] => return None,
        _ => "reserved",
    })
}

/// A port as written: plain digits from 1 to 65535 (Rust's parse takes `+443`, and port 0 is
/// no port).
fn port_number(written: &str) -> Result<u16, Refused> {
    match written.parse::<u16>() {
        Ok(port) if port > 0 && written.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err(Refused::Port(written.to_owned())),
    }
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
    let port = port.map_or(Ok(default), port_number)?;
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
        if !self.allow_private && found.iter().any(|address| refusal(address.ip()).is_some()) {
            return Err(Refused::NotPublic { host: host.to_owned() });
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const STRICT: Policy = Policy { allow_http: false, allow_private: false };
    const LAB: Policy = Policy { allow_http: true, allow_private: true };

    /// What the policy says of `url` where a delivery connects, as its error's text.
    fn check(url: &str, policy: Policy, expected: Result<(), &str>) {
        let got = policy.check(url).map(drop).map_err(|e| e.to_string());
        assert_eq!(got, expected.map_err(str::to_owned), "{url}");
    }

    /// The class of an address as written (`None`: public).
    fn class(address: &str) -> Option<&'static str> {
        refusal(address.parse().unwrap())
    }

    #[test]
    fn every_non_public_class_is_refused() {
        for (address, expected) in [
            ("127.0.0.1", "loopback"),
            ("127.9.9.9", "loopback"),
            ("::1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.254", "shared (CGNAT)"),
            ("192.0.2.1", "documentation"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("192.88.99.1", "reserved"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("fd00::1", "private (unique local)"),
            ("fc00::1", "private (unique local)"),
            ("fe80::1", "link-local"),
            ("fec0::1", "site-local"),
            ("100::1", "discard"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("2001:2::1", "reserved"),
            ("2001:10::1", "reserved"),
            ("2001:20::1", "reserved"),
            ("4000::1", "reserved"),
            ("5f00::1", "reserved"),
        ] {
            assert_eq!(class(address), Some(expected), "{address}");
        }
    }

    /// Each IPv6 form that carries an IPv4 address: by that address where it leads there, refused
    /// whole where it could lead anywhere.
    #[test]
    fn ipv6_forms_carrying_an_ipv4_address() {
        for (address, expected) in [
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:169.254.169.254", Some("link-local")),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some("IPv4-compatible")),
            ("::8.8.8.8", Some("IPv4-compatible")),
            ("::ffff:0:127.0.0.1", Some("IPv4-translated")),
            ("::ffff:0:8.8.8.8", Some("IPv4-translated")),
            ("64:ff9b::127.0.0.1", Some("loopback")),
            ("64:ff9b::10.0.0.1", Some("private")),
            ("64:ff9b::8.8.8.8", None),
            ("64:ff9b:1::8.8.8.8", Some("local-use NAT64")),
            ("64:ff9b:1:ffff::1", Some("local-use NAT64")),
            ("2002:7f00:1::", Some("loopback")),
            ("2002:a9fe:a9fe::1", Some("link-local")),
            ("2002:c0a8:101:1::1", Some("private")),
            ("2002:808:808::1", None),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some("Teredo")),
            ("2001::1", Some("Teredo")),
        ] {
            assert_eq!(class(address), expected, "{address}");
        }
        for url in
            ["https://[::127.0.0.1]/", "https://[::ffff:0:127.0.0.1]/", "https://[64:ff9b:1::1]/", "https://[2001::1]/"]
        {
            let host = url.trim_start_matches("https://[").trim_end_matches("]/");
            let refused = format!("{host} does not resolve to public addresses only");
            check(url, STRICT, Err(refused.as_str()));
            assert_eq!(STRICT.check_written(url).map_err(|e| e.to_string()), Err(refused), "{url}");
        }
    }

    /// The non-public IPv4 blocks: (first address, prefix length).
    const NOT_PUBLIC: [(u32, u32); 14] = [
        (0x0000_0000, 8),
        (0x0a00_0000, 8),
        (0x6440_0000, 10),
        (0x7f00_0000, 8),
        (0xa9fe_0000, 16),
        (0xac10_0000, 12),
        (0xc000_0000, 24),
        (0xc000_0200, 24),
        (0xc058_6300, 24),
        (0xc0a8_0000, 16),
        (0xc612_0000, 15),
        (0xc633_6400, 24),
        (0xcb00_7100, 24),
        (0xe000_0000, 3),
    ];

    /// Every IPv6 form an IPv4 address `v` can be written in, with `bits` filling the rest.
    fn forms(v: u32, bits: u128) -> [Ipv6Addr; 7] {
        let v = u128::from(v);
        [
            Ipv6Addr::from(v),
            Ipv6Addr::from(0xffff << 32 | v),
            Ipv6Addr::from(0xffff << 48 | v),
            Ipv6Addr::from(0x64_ff9b << 96 | v),
            Ipv6Addr::from(0x64_ff9b_0001 << 80 | (bits >> 48) & !0xffff_ffff | v),
            Ipv6Addr::from(0x2002 << 112 | v << 80 | bits >> 48),
            // Teredo: the server's address in bits 64 to 96, the client's (inverted) in the last 32.
            Ipv6Addr::from(0x2001_0000 << 96 | v << 64 | bits >> 64),
        ]
    }

    proptest! {
        #[test]
        fn every_form_of_a_non_public_ipv4_address_is_refused(
            block in 0..NOT_PUBLIC.len(), host in any::<u32>(), bits in any::<u128>()
        ) {
            let (first, length) = NOT_PUBLIC[block];
            let v = first | (host & (u32::MAX >> length));
            prop_assert!(v4_class(Ipv4Addr::from(v)).is_some(), "{}", Ipv4Addr::from(v));
            for form in forms(v, bits) {
                prop_assert!(v6_class(form).is_some(), "{form} of {}", Ipv4Addr::from(v));
            }
        }

        /// A public IPv4 address: IPv4-mapped, NAT64 and 6to4 lead to it; the other forms are
        /// refused whatever they carry.
        #[test]
        fn a_public_ipv4_address_is_public_only_where_it_leads(v in any::<u32>(), bits in any::<u128>()) {
            prop_assume!(v4_class(Ipv4Addr::from(v)).is_none());
            let refused = forms(v, bits).map(|form| v6_class(form).is_some());
            prop_assert_eq!(refused, [true, false, true, false, true, false, true]);
        }
    }

    /// A port as written, where the URL is set and where a delivery connects.
    #[test]
    fn ports_are_plain_digits_from_1_to_65535() {
        let refused = |port: &str| Refused::Port(port.to_owned()).to_string();
        for port in ["0", "+443", "-1", "65536", "", "1e3"] {
            let said = STRICT.check_written(&format!("https://hooks.example.com:{port}/x")).map_err(|e| e.to_string());
            assert_eq!(said, Err(refused(port)), "{port:?}");
            check(&format!("http://127.0.0.1:{port}/"), LAB, Err(&refused(port)));
        }
        check("https://[::1]:+443/", LAB, Err(&refused("+443")));
        for (port, expected) in [("443", 443), ("0443", 443), ("1", 1), ("65535", 65535)] {
            assert_eq!(STRICT.check_written(&format!("https://hooks.example.com:{port}/x")), Ok(()), "{port}");
            assert_eq!(LAB.check(&format!("http://127.0.0.1:{port}/")).unwrap()[0].port(), expected);
        }
    }

    #[test]
    fn public_https_passes_and_the_operator_may_allow_more() {
        for url in [
            "https://8.8.8.8/hook",
            "https://172.32.0.1/",
            "https://100.128.0.1/",
            "https://[2001:4860::8888]:8443/x",
            "https://[2001:200::1]/",
            "https://[2002:808:808::1]/",
            "https://[64:ff9b::8.8.8.8]/",
        ] {
            check(url, STRICT, Ok(()));
        }
        check("http://8.8.8.8/hook", STRICT, Err("the URL must be https"));
        check("ftp://8.8.8.8/", STRICT, Err("the URL must be https"));
        check("https:///x", STRICT, Err("the URL has no host"));
        check("https://localhost:9000/hook", STRICT, Err("localhost does not resolve to public addresses only"));
        let written = |url: &str| STRICT.check_written(url).map_err(|e| e.to_string());
        assert_eq!(written("https://10.0.0.1/"), Err("10.0.0.1 does not resolve to public addresses only".to_owned()));
        assert_eq!(written("https://localhost/"), Ok(()), "a name is checked when a delivery connects");
        assert_eq!(
            written("https://hooks.example.com:x/"),
            Err("the URL's port \"x\" is not a number from 1 to 65535".to_owned())
        );
        check("http://127.0.0.1:8080/hook", LAB, Ok(()));
        check("https://user@127.0.0.1/", Policy { allow_private: true, ..STRICT }, Ok(()));
        let ports = |url: &str| LAB.check(url).unwrap().iter().map(SocketAddr::port).collect::<Vec<_>>();
        assert_eq!(
            (ports("http://127.0.0.1/"), ports("https://[::1]/"), ports("http://127.0.0.1:81/x")),
            (vec![80], vec![443], vec![81])
        );
    }

    /// The address a name resolved to, and its kind, are never said: only that it is not public.
    #[test]
    fn a_refusal_does_not_name_the_address() {
        let said = STRICT.check("https://localhost:8443/").unwrap_err().to_string();
        assert_eq!(said, "localhost does not resolve to public addresses only");
        assert!(!["127.", "::1", "loopback"].iter().any(|a| said.contains(a)), "{said}");
    }

    #[test]
    fn urls_as_users_set_them() {
        for (url, policy, expected) in [
            ("https://hooks.example.com/cnpj?x=1", STRICT, Ok(())),
            ("HTTPS://hooks.example.com", STRICT, Ok(())),
            ("http://127.0.0.1:9000/hook", LAB, Ok(())),
            ("https://hooks.example.com/a@b", STRICT, Ok(())),
            ("https://127.0.0.1:9000/hook", STRICT, Err("not resolve to public")),
            ("https://169.254.169.254/latest", STRICT, Err("not resolve to public")),
            ("http://hooks.example.com/", STRICT, Err("must be https")),
            ("https://", STRICT, Err("no host")),
            ("https:///path", STRICT, Err("no host")),
            ("https://user@hooks.example.com/", STRICT, Err("a user name")),
            ("https://hooks.example.com/a b", STRICT, Err("white space")),
            ("https://hooks.example.com/\u{7}", STRICT, Err("control")),
            ("ftp://hooks.example.com/", LAB, Err("must be https")),
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
