//! The HTTP server: where it listens, how long a request may take, how it shuts down, who
//! may call it from a browser, the docs assets and the log format.

use std::net::SocketAddr;

use clap::{Args, ValueEnum};

/// Log output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (production).
    Json,
    /// Human-readable (development).
    Pretty,
}

fn parse_origin(text: &str) -> Result<String, String> {
    let origin = text.trim();
    if origin.is_empty() {
        return Ok(String::new());
    }
    let well_formed = (origin.starts_with("http://") || origin.starts_with("https://"))
        && !origin.contains('*')
        && !origin.ends_with('/')
        && origin.chars().all(|c| c.is_ascii_graphic());
    if well_formed {
        Ok(origin.to_owned())
    } else {
        Err(format!(
            "{origin:?} is not an origin like https://app.example.com (no wildcards)"
        ))
    }
}

/// A proxy range of `RAPTOR_TRUSTED_PROXIES`: a CIDR (`10.0.0.0/8`, `fd00::/8`) or one address.
fn parse_proxy(text: &str) -> Result<Option<ipnet::IpNet>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map(|net| Some(net.trunc()))
        .map_err(|_| format!("{text:?} is not a CIDR like 10.0.0.0/8 or an IP address"))
}

/// The header the trusted proxies write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ForwardedHeaderArg {
    /// `X-Forwarded-For` (HAProxy's `option forwardfor`, nginx, cloud load balancers).
    XForwardedFor,
    /// RFC 7239 `Forwarded`.
    Forwarded,
}

/// `RAPTOR_ADDR`, `RAPTOR_METRICS_ADDR`, `RAPTOR_REQUEST_TIMEOUT_SECS`,
/// `RAPTOR_SHUTDOWN_DRAIN_SECS`, `RAPTOR_HEADER_READ_TIMEOUT_SECS`,
/// `RAPTOR_KEEPALIVE_TIMEOUT_SECS`, `RAPTOR_MAX_CONNECTIONS`,
/// `RAPTOR_CORS_ORIGINS`, `RAPTOR_TRUSTED_PROXIES`, `RAPTOR_FORWARDED_HEADER`,
/// `RAPTOR_DOCS_ASSETS`, `RAPTOR_LOG_FORMAT`.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// `production` (the default): `raptor serve` refuses to start without what a deployment
    /// needs (RAPTOR_SMTP_URL, RAPTOR_RESPONSE_KEYS, RAPTOR_SESSION_KEY; STRIPE_WEBHOOK_SECRET
    /// with STRIPE_SECRET_KEY), listing every problem in one message, and sign-in links are
    /// never written to the log. `development` (`make run` writes it into `.env`): those may be
    /// missing, and without an SMTP relay sign-in links are logged.
    #[arg(
        long = "env",
        env = "RAPTOR_ENV",
        value_name = "RAPTOR_ENV",
        value_enum,
        default_value = "production",
        global = true
    )]
    pub environment: RaptorEnv,

    /// Address `raptor serve` listens on.
    #[arg(
        long,
        env = "RAPTOR_ADDR",
        value_name = "RAPTOR_ADDR",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub addr: SocketAddr,

    /// Address of a listener of its own for `GET /metrics` (e.g. `0.0.0.0:9090`, reachable by
    /// Prometheus but not published like the API); the API listener then answers 404 for
    /// `/metrics`. Unset: `/metrics` is served on RAPTOR_ADDR.
    #[arg(
        long,
        env = "RAPTOR_METRICS_ADDR",
        value_name = "RAPTOR_METRICS_ADDR",
        global = true
    )]
    pub metrics_addr: Option<SocketAddr>,

    /// Request timeout in seconds; a request past it is answered 503 and rolled back.
    #[arg(long, env = "RAPTOR_REQUEST_TIMEOUT_SECS", value_name = "RAPTOR_REQUEST_TIMEOUT_SECS",
          default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub request_timeout_secs: u64,

    /// On SIGTERM/SIGINT, answer `/readyz` 503 for this many seconds while still serving, so
    /// load balancers stop routing here; then stop accepting and let requests in flight finish.
    /// 5 s covers a Kubernetes Service, whose endpoint removal reaches the nodes' proxies a few
    /// seconds after the pod is told to stop.
    #[arg(long, env = "RAPTOR_SHUTDOWN_DRAIN_SECS", value_name = "RAPTOR_SHUTDOWN_DRAIN_SECS",
          default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=300), global = true)]
    pub shutdown_drain_secs: u64,

    /// Seconds a connection may take to send a request's line and headers, counted from the
    /// connection's start for its first request and from the first byte of each later one;
    /// past it the connection is closed. Slow or stalled clients cannot hold connections (and
    /// file descriptors) open. An idle keep-alive connection is not timed by it.
    #[arg(long, env = "RAPTOR_HEADER_READ_TIMEOUT_SECS", value_name = "RAPTOR_HEADER_READ_TIMEOUT_SECS",
          default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300), global = true)]
    pub header_read_timeout_secs: u64,

    /// Seconds a keep-alive connection may stay idle after a response before the server closes
    /// it (no byte of a next request in that time). A proxy that keeps connections to the
    /// server must close its idle ones sooner than this (AWS ALB: 60 s, so 65; Google Cloud's
    /// load balancers: 600 s, so 620).
    #[arg(long, env = "RAPTOR_KEEPALIVE_TIMEOUT_SECS", value_name = "RAPTOR_KEEPALIVE_TIMEOUT_SECS",
          default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub keepalive_timeout_secs: u64,

    /// Seconds a write to a connection may make no progress (its peer stopped reading and the
    /// buffers between are full) before the connection is closed: a trade-updates stream's
    /// reader that stopped reading is dropped, not buffered for.
    #[arg(long, env = "RAPTOR_WRITE_STALL_TIMEOUT_SECS", value_name = "RAPTOR_WRITE_STALL_TIMEOUT_SECS",
          default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub write_stall_timeout_secs: u64,

    /// Open connections one process holds at most; a connection past it is answered `503
    /// too_many_connections` (with `Connection: close` and `Retry-After: 1`) and never served. Keep it
    /// below the process's file descriptor limit.
    #[arg(long, env = "RAPTOR_MAX_CONNECTIONS", value_name = "RAPTOR_MAX_CONNECTIONS",
          default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000), global = true)]
    pub max_connections: u64,

    /// Allowed CORS origins for the Antlers web app, comma-separated (none by default); each a
    /// full origin such as `https://app.example.com` (no `*`).
    #[arg(
        long,
        env = "RAPTOR_CORS_ORIGINS",
        value_name = "RAPTOR_CORS_ORIGINS",
        value_delimiter = ',',
        value_parser = parse_origin,
        global = true
    )]
    pub cors_origins: Vec<String>,

    /// Load balancers and proxies in front of the server, comma-separated CIDRs or addresses
    /// (none by default). Only a request whose TCP peer is in one of them has its client
    /// address read from RAPTOR_FORWARDED_HEADER (the right-most address not in these ranges);
    /// from any other peer the header is ignored. The client address keys per-IP rate limits
    /// and is in the access log.
    #[arg(
        long,
        env = "RAPTOR_TRUSTED_PROXIES",
        value_name = "RAPTOR_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = parse_proxy,
        global = true
    )]
    pub trusted_proxies: Vec<Option<ipnet::IpNet>>,

    /// The forwarding header the trusted proxies append to; the other one is never read (a
    /// proxy passes a client's own copy of it through).
    #[arg(
        long,
        env = "RAPTOR_FORWARDED_HEADER",
        value_name = "RAPTOR_FORWARDED_HEADER",
        value_enum,
        default_value = "x-forwarded-for",
        global = true
    )]
    pub forwarded_header: ForwardedHeaderArg,

    /// Directory of Swagger UI's files (the `swagger-ui-dist` npm package, installed by
    /// `npm ci --omit=dev`) served at `/docs/assets/`; relative paths are from the working
    /// directory. When it holds no Swagger UI, `/docs` answers a plain route list instead.
    #[arg(
        long,
        env = "RAPTOR_DOCS_ASSETS",
        value_name = "RAPTOR_DOCS_ASSETS",
        default_value = raptor_api::state::DEFAULT_DOCS_ASSETS,
        global = true
    )]
    pub docs_assets: std::path::PathBuf,

    /// Log format.
    #[arg(
        long,
        env = "RAPTOR_LOG_FORMAT",
        value_name = "RAPTOR_LOG_FORMAT",
        value_enum,
        default_value = "pretty",
        global = true
    )]
    pub log_format: LogFormat,
}

impl ServerArgs {
    /// `RAPTOR_TRUSTED_PROXIES` and `RAPTOR_FORWARDED_HEADER`, as the API takes them.
    pub fn trusted_proxies(&self) -> raptor_api::client_addr::TrustedProxies {
        let header = match self.forwarded_header {
            ForwardedHeaderArg::XForwardedFor => {
                raptor_api::client_addr::ForwardedHeader::XForwardedFor
            }
            ForwardedHeaderArg::Forwarded => raptor_api::client_addr::ForwardedHeader::Forwarded,
        };
        raptor_api::client_addr::TrustedProxies::new(
            self.trusted_proxies.iter().flatten().copied().collect(),
            header,
        )
    }

    /// The configured CORS origins, blanks dropped.
    pub fn cors_origins(&self) -> Vec<String> {
        self.cors_origins
            .iter()
            .map(|o| o.trim().to_owned())
            .filter(|o| !o.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_proxies_take_cidrs_and_addresses() {
        let net = |text: &str| parse_proxy(text).expect("valid").expect("a range");
        assert_eq!(net(" 10.0.0.0/8"), "10.0.0.0/8".parse().expect("cidr"));
        assert_eq!(net("192.0.2.7"), "192.0.2.7/32".parse().expect("cidr"));
        assert_eq!(net("10.1.2.3/8"), "10.0.0.0/8".parse().expect("cidr"));
        assert_eq!(net("fd00::/8"), "fd00::/8".parse().expect("cidr"));
        assert_eq!(parse_proxy(" ").expect("blank"), None);
        let err = parse_proxy("10.0.0.0/33").expect_err("bad prefix");
        assert!(err.contains("not a CIDR"), "{err}");
        assert!(parse_proxy("bogus").is_err());
    }
}

/// `RAPTOR_ENV`: what the process is run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RaptorEnv {
    /// Secure by default: nothing a deployment needs may be missing.
    Production,
    /// A developer's machine (`make run`): development keys, links in the log.
    Development,
}
