//! The client's address, the key of per-IP rate limits and of the access log: the TCP peer,
//! or, when the peer is a trusted proxy (`RAPTOR_TRUSTED_PROXIES`), the right-most address of
//! the forwarding header that is not itself a trusted proxy. A peer outside the trusted ranges
//! cannot move itself into another bucket by sending the header.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName};
use axum::middleware::Next;
use axum::response::Response;
use forwarded_header_value::ForwardedHeaderValue;
use ipnet::IpNet;

/// Which header the trusted proxies write (`RAPTOR_FORWARDED_HEADER`). Only one is read: a
/// proxy that appends `X-Forwarded-For` passes a client's own `Forwarded` through untouched,
/// so reading both would let a client name its own address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (HAProxy's `option forwardfor`, nginx, most cloud load balancers).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=…`.
    Forwarded,
}

impl ForwardedHeader {
    fn name(self) -> HeaderName {
        match self {
            Self::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            Self::Forwarded => axum::http::header::FORWARDED,
        }
    }
}

/// The proxies whose forwarding header is believed, and the header they write.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    nets: Arc<[IpNet]>,
    header: ForwardedHeader,
}

impl TrustedProxies {
    /// Proxies in `nets` writing `header`.
    pub fn new(nets: Vec<IpNet>, header: ForwardedHeader) -> Self {
        Self {
            nets: nets.into(),
            header,
        }
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The client behind `peer`: `peer` itself unless it is trusted; else the forwarding
    /// header's entries read from the right, skipping trusted proxies, the first that is not
    /// one. Each entry is read on its own, so what a client put on the left (junk, a name, an
    /// `ip:port`) cannot spoil the entries the proxies appended: an entry that is not an
    /// address (a name, `unknown`, junk) stops the walk only when the walk reaches it, at the
    /// last trusted address (the proxy that could not say more); all hops trusted: the leftmost.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        // Several field lines are one list, in order (RFC 9110 5.3).
        let mut hops: Vec<Option<IpAddr>> = Vec::new();
        for line in headers.get_all(self.header.name()) {
            let Ok(line) = line.to_str() else {
                // Not text: one unreadable entry.
                hops.push(None);
                continue;
            };
            for entry in list_entries(line) {
                hops.push(match self.header {
                    ForwardedHeader::XForwardedFor => x_forwarded_for_entry(entry),
                    ForwardedHeader::Forwarded => forwarded_entry(entry),
                });
            }
        }
        let mut client = peer;
        for hop in hops.into_iter().rev() {
            match hop.map(|ip| ip.to_canonical()) {
                Some(ip) if self.trusts(ip) => client = ip,
                Some(ip) => return ip,
                None => {
                    tracing::debug!(header = %self.header.name(), "unreadable forwarding entry");
                    return client;
                }
            }
        }
        client
    }
}

/// The non-empty elements of a comma-separated list, commas inside double quotes kept (a
/// `Forwarded` element may quote a value).
fn list_entries(line: &str) -> impl Iterator<Item = &str> {
    let mut entries = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                entries.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(&line[start..]);
    entries.into_iter().map(str::trim).filter(|e| !e.is_empty())
}

/// One `X-Forwarded-For` entry: an address, or an address with a port (`198.51.100.7:4711`,
/// `[2001:db8::1]:443`), or a bracketed IPv6 address.
fn x_forwarded_for_entry(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            entry
                .strip_prefix('[')
                .and_then(|e| e.strip_suffix(']'))
                .and_then(|e| e.parse().ok())
        })
}

/// One RFC 7239 `Forwarded` element's `for=` address.
fn forwarded_entry(entry: &str) -> Option<IpAddr> {
    ForwardedHeaderValue::from_forwarded(entry)
        .ok()?
        .iter()
        .next()?
        .forwarded_for_ip()
}

/// The client's address of a request (see the module docs); absent when the server was not
/// started with the peer's address (in-process tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// Middleware: puts the request's [`ClientAddr`] in its extensions.
pub(crate) async fn resolve(
    State(trusted): State<TrustedProxies>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    if let Some(peer) = peer {
        let client = trusted.client(peer, request.headers());
        request.extensions_mut().insert(ClientAddr(client));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    fn proxies(nets: &[&str], header: ForwardedHeader) -> TrustedProxies {
        TrustedProxies::new(
            nets.iter().map(|n| n.parse().expect("cidr")).collect(),
            header,
        )
    }

    fn headers(name: &str, lines: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(line).expect("value"),
            );
        }
        map
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_sends() {
        let trusted = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let spoofed = headers("x-forwarded-for", &["203.0.113.9"]);
        assert_eq!(
            trusted.client(ip("198.51.100.1"), &spoofed),
            ip("198.51.100.1")
        );
        let none = TrustedProxies::default();
        assert_eq!(none.client(ip("10.0.0.1"), &spoofed), ip("10.0.0.1"));
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let trusted = proxies(
            &["10.0.0.0/8", "192.0.2.1/32"],
            ForwardedHeader::XForwardedFor,
        );
        // The client's own (spoofed) entry, then what each proxy appended, on two lines.
        let chain = headers(
            "x-forwarded-for",
            &["203.0.113.66, 198.51.100.7", "192.0.2.1"],
        );
        assert_eq!(trusted.client(ip("10.1.1.1"), &chain), ip("198.51.100.7"));
        let all_trusted = headers("x-forwarded-for", &["10.9.9.9, 10.8.8.8"]);
        assert_eq!(trusted.client(ip("10.1.1.1"), &all_trusted), ip("10.9.9.9"));
        let garbage = headers("x-forwarded-for", &["not an address"]);
        assert_eq!(trusted.client(ip("10.1.1.1"), &garbage), ip("10.1.1.1"));
        let mapped = headers("x-forwarded-for", &["::ffff:198.51.100.8"]);
        assert_eq!(
            trusted.client(ip("::ffff:10.1.1.1"), &mapped),
            ip("198.51.100.8")
        );
    }

    /// Each entry is read on its own: junk or an `ip:port` entry used to make the whole
    /// header unreadable, so the client became the proxy (its bucket, and its address gone
    /// from the access log).
    #[test]
    fn entries_are_read_one_by_one() {
        let trusted = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        for (line, client) in [
            ("garbage, 198.51.100.7", "198.51.100.7"),
            ("unknown, 198.51.100.7, 10.0.0.9", "198.51.100.7"),
            ("198.51.100.7:4711", "198.51.100.7"),
            ("203.0.113.1:1, [2001:db8::1]:443", "2001:db8::1"),
            ("[2001:db8::2]", "2001:db8::2"),
            ("198.51.100.7,, 10.0.0.9", "198.51.100.7"),
            // Junk that a trusted proxy appended stops the walk there.
            ("198.51.100.7, junk, 10.0.0.9", "10.0.0.9"),
        ] {
            let header = headers("x-forwarded-for", &[line]);
            assert_eq!(
                trusted.client(ip("10.1.1.1"), &header),
                ip(client),
                "{line}"
            );
        }
        let forwarded = proxies(&["10.0.0.0/8"], ForwardedHeader::Forwarded);
        let header = headers(
            "forwarded",
            &[r#"for="junk, still junk", for=198.51.100.9;proto=https, for=10.0.0.3"#],
        );
        assert_eq!(
            forwarded.client(ip("10.1.1.1"), &header),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn only_the_configured_header_is_read() {
        let xff = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let forwarded = proxies(&["10.0.0.0/8"], ForwardedHeader::Forwarded);
        let mut both = headers(
            "forwarded",
            &[r#"for=203.0.113.5, for="[2001:db8::1]:443""#],
        );
        both.append("x-forwarded-for", HeaderValue::from_static("198.51.100.3"));
        assert_eq!(xff.client(ip("10.0.0.2"), &both), ip("198.51.100.3"));
        assert_eq!(forwarded.client(ip("10.0.0.2"), &both), ip("2001:db8::1"));
        let obfuscated = headers("forwarded", &["for=_hidden, for=10.0.0.7"]);
        assert_eq!(
            forwarded.client(ip("10.0.0.2"), &obfuscated),
            ip("10.0.0.7")
        );
    }
}
