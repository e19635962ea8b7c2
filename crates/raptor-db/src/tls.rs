//! TLS to Postgres: libpq's URL parameters (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`)
//! as the pools use them, checked before the first connection, and connection errors that say
//! which of them to fix.
//!
//! sqlx parses these parameters itself and connects with rustls. Where it differs from libpq,
//! this module brings it closer before sqlx sees the URL:
//!
//! - `sslmode=require` with an `sslrootcert` verifies the server's certificate against it, as
//!   libpq does (sqlx would check nothing): it becomes `verify-ca`;
//! - `sslrootcert=system` (libpq 16: the platform's public roots) is not a file for sqlx: it
//!   is dropped, so only the public (Mozilla) roots sqlx always carries are trusted, and it
//!   needs `sslmode=verify-full` (the default with it), as in libpq;
//! - the certificate and key files are read up front, so a missing one is an error naming the
//!   parameter and the variable, not a bare "No such file or directory" mid-handshake;
//!   `sslcert` and `sslkey` go together.
//!
//! What remains different from libpq (docs/operations.md): the public roots are trusted in
//! addition to `sslrootcert`'s; `sslmode=verify-ca` checks the host name too (sqlx 0.8.6 lets
//! only rustls's older form of the name error through, and the rustls it runs with reports
//! the newer one), so it is `verify-full`; `sslmode=allow` is `disable`; `sslcrl`,
//! `sslpassword` and `sslnegotiation` are not supported.

use std::str::FromStr;

use anyhow::{bail, Context};
use sqlx::postgres::{PgConnectOptions, PgSslMode};

/// The TLS parameters of one URL, for the error messages.
#[derive(Debug, Clone, Default)]
struct UrlTls {
    mode: Option<String>,
    root_cert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

const MODE: [&str; 2] = ["sslmode", "ssl-mode"];
const ROOT_CERT: [&str; 3] = ["sslrootcert", "ssl-root-cert", "ssl-ca"];
const CERT: [&str; 2] = ["sslcert", "ssl-cert"];
const KEY: [&str; 2] = ["sslkey", "ssl-key"];

impl UrlTls {
    fn of(url: &url::Url) -> Self {
        let mut tls = Self::default();
        for (name, value) in url.query_pairs() {
            let value = Some(value.into_owned());
            if MODE.contains(&&*name) {
                tls.mode = value;
            } else if ROOT_CERT.contains(&&*name) {
                tls.root_cert = value;
            } else if CERT.contains(&&*name) {
                tls.cert = value;
            } else if KEY.contains(&&*name) {
                tls.key = value;
            }
        }
        tls
    }

    /// `sslmode=…, sslrootcert=…` as the URL (or sqlx's default) has them.
    fn describe(&self, options: &PgConnectOptions) -> String {
        let mode = match options.get_ssl_mode() {
            PgSslMode::Disable => "disable",
            PgSslMode::Allow => "allow",
            PgSslMode::Prefer => "prefer",
            PgSslMode::Require => "require",
            PgSslMode::VerifyCa => "verify-ca",
            PgSslMode::VerifyFull => "verify-full",
        };
        let mut text = format!("sslmode={mode}");
        if self.mode.is_none() {
            text.push_str(" (the default)");
        }
        match &self.root_cert {
            Some(root) => text.push_str(&format!(", sslrootcert={root}")),
            None => text.push_str(", no sslrootcert"),
        }
        if let Some(cert) = &self.cert {
            text.push_str(&format!(", sslcert={cert}"));
        }
        text
    }
}

/// Rewrites `url`'s query: drops the parameters named in `drop`, sets `set`.
fn rewrite(url: &mut url::Url, drop: &[&str], set: Option<(&str, &str)>) {
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(name, _)| !drop.contains(&&**name))
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    url.set_query(None);
    if kept.is_empty() && set.is_none() {
        return;
    }
    let mut query = url.query_pairs_mut();
    for (name, value) in &kept {
        query.append_pair(name, value);
    }
    if let Some((name, value)) = set {
        query.append_pair(name, value);
    }
}

/// The connect options of `url` (the value of the variable `var`), its TLS parameters checked
/// and made to behave as libpq's (see the module docs).
pub fn connect_options(var: &str, url: &str) -> anyhow::Result<PgConnectOptions> {
    let mut parsed =
        url::Url::parse(url).with_context(|| format!("{var} is not a valid Postgres URL"))?;
    let tls = UrlTls::of(&parsed);
    let mode = tls.mode.as_deref();
    if tls.root_cert.as_deref() == Some("system") {
        match mode {
            None | Some("verify-full") => {}
            Some(weak) => bail!(
                "{var}: sslmode={weak} cannot be used with sslrootcert=system (the public roots \
                 only mean something when the host name is checked): use sslmode=verify-full"
            ),
        }
        let mut drop = ROOT_CERT.to_vec();
        drop.extend(MODE);
        rewrite(&mut parsed, &drop, Some(("sslmode", "verify-full")));
    } else if let Some(root) = &tls.root_cert {
        readable(var, "sslrootcert", root)?;
        if mode == Some("require") {
            rewrite(&mut parsed, &MODE, Some(("sslmode", "verify-ca")));
        }
    }
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            readable(var, "sslcert", cert)?;
            readable(var, "sslkey", key)?;
        }
        (None, None) => {}
        (Some(_), None) => {
            bail!("{var} has sslcert but no sslkey: a client certificate needs both")
        }
        (None, Some(_)) => {
            bail!("{var} has sslkey but no sslcert: a client certificate needs both")
        }
    }
    PgConnectOptions::from_str(parsed.as_str())
        .with_context(|| format!("{var} is not a valid Postgres URL"))
}

fn readable(var: &str, parameter: &str, path: &str) -> anyhow::Result<()> {
    std::fs::read(path)
        .map(drop)
        .with_context(|| format!("{var}: {parameter}={path} cannot be read"))
}

/// Whether a failed connection is a TLS or authentication setting of the URL (the server was
/// reached and refused the settings), as opposed to a server that could not be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Certificates, host name, TLS refused or required, `pg_hba.conf`: fix the URL.
    Settings,
    /// Anything else (not reachable, timeouts, …).
    Other,
}

/// `error`, from connecting with `url` (the value of `var`), explained: for a TLS failure or
/// a `pg_hba.conf` refusal the message says what went wrong in words and names `var`'s TLS
/// settings; the original error stays its cause.
pub fn explain(var: &str, url: &str, error: sqlx::Error) -> (Cause, anyhow::Error) {
    let (tls, options) = match url::Url::parse(url) {
        Ok(parsed) => (UrlTls::of(&parsed), connect_options(var, url).ok()),
        Err(_) => (UrlTls::default(), None),
    };
    let settings = options
        .as_ref()
        .map_or_else(String::new, |options| tls.describe(options));
    let host = options
        .as_ref()
        .map_or_else(String::new, |o| o.get_host().to_owned());
    let why = match &error {
        sqlx::Error::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .map(|tls_error| {
                let verify_ca = options
                    .as_ref()
                    .is_some_and(|o| matches!(o.get_ssl_mode(), PgSslMode::VerifyCa));
                certificate(tls_error, &host, verify_ca)
            }),
        sqlx::Error::Tls(inner) => {
            let text = inner.to_string();
            Some(if text.contains("does not support TLS") {
                "the server does not accept TLS connections".to_owned()
            } else {
                format!("the TLS handshake failed ({text})")
            })
        }
        sqlx::Error::Configuration(inner) => Some(format!("bad TLS settings ({inner})")),
        sqlx::Error::Database(db) if db.code().as_deref() == Some("28000") => {
            let message = db.message();
            if message.contains("no encryption") {
                Some(format!(
                    "Postgres refused a connection without TLS: {message} (the server's \
                     pg_hba.conf accepts only TLS connections: use sslmode=verify-full with \
                     sslrootcert)"
                ))
            } else if message.contains("certificate") {
                Some(format!(
                    "Postgres refused the client certificate: {message} (sslcert and sslkey: a \
                     certificate the server's CA signed, for this user)"
                ))
            } else {
                Some(format!("Postgres refused the connection: {message}"))
            }
        }
        _ => None,
    };
    match why {
        Some(why) => (
            Cause::Settings,
            anyhow::Error::new(error).context(format!("{why}; {var}'s TLS settings: {settings}")),
        ),
        None => (Cause::Other, anyhow::Error::new(error)),
    }
}

/// A certificate error of the handshake, in words.
fn certificate(error: &rustls::Error, host: &str, verify_ca: bool) -> String {
    use rustls::CertificateError as C;
    match error {
        rustls::Error::InvalidCertificate(
            C::UnknownIssuer | C::BadSignature | C::UnknownRevocationStatus,
        ) => "the server's certificate is not signed by a CA of sslrootcert (nor by a public \
              root CA): sslrootcert must be the CA bundle of this server"
            .to_owned(),
        rustls::Error::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. },
        ) => {
            let checks = if verify_ca {
                "sqlx checks it even with sslmode=verify-ca"
            } else {
                "sslmode=verify-full checks it"
            };
            format!(
                "the server's certificate is not valid for the host name {host:?} of the URL \
                 ({checks}): connect by a name the certificate lists"
            )
        }
        rustls::Error::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => "the server's certificate is expired or not valid yet".to_owned(),
        other => format!("the TLS handshake failed ({other})"),
    }
}
