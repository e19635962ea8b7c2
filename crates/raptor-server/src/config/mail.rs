//! Sign-in email: the SMTP relay, the sender, the app's public URL that links point to, and the
//! relay's schedule and retries.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use raptor_api::mail::{Relay, RetryPolicy};

use super::Secret;

fn parse_public_url(text: &str) -> Result<String, String> {
    let url = text.trim().trim_end_matches('/');
    if super::is_http_url(url) && !url.contains(['?', '#']) {
        Ok(url.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a base URL like https://app.example.com (no query or fragment)"
        ))
    }
}

/// `RAPTOR_SMTP_URL`, `RAPTOR_SMTP_CA_FILE`, `RAPTOR_MAIL_FROM`, `RAPTOR_PUBLIC_URL`, `RAPTOR_SMTP_TIMEOUT_MS`,
/// `RAPTOR_MAIL_RELAY_INTERVAL_MS`, `RAPTOR_MAIL_MAX_ATTEMPTS`, `RAPTOR_MAIL_RETRY_BASE_MS`.
#[derive(Debug, Clone, Args)]
pub struct MailArgs {
    /// The SMTP server sign-in email is sent through, in lettre's URL form:
    /// `smtps://user:pass@host:465` (implicit TLS), `smtp://user:pass@host:587?tls=required`
    /// (STARTTLS), `smtp://host:25` (plain: a relay on this host or network only). Unset: the
    /// relay logs each link instead (development).
    #[arg(
        long,
        env = "RAPTOR_SMTP_URL",
        value_name = "RAPTOR_SMTP_URL",
        global = true,
        hide_env_values = true
    )]
    pub smtp_url: Option<Secret>,

    /// A PEM file of CA certificates the SMTP server's certificate may chain to, besides
    /// Mozilla's roots: the CA of a private relay. Only with a TLS URL (smtps://, or smtp://
    /// with ?tls=required); the certificate must name the URL's host either way.
    #[arg(
        long,
        env = "RAPTOR_SMTP_CA_FILE",
        value_name = "RAPTOR_SMTP_CA_FILE",
        global = true
    )]
    pub smtp_ca_file: Option<std::path::PathBuf>,

    /// The sender of sign-in email (`no-reply@example.com` or `Raptor <no-reply@example.com>`);
    /// required with RAPTOR_SMTP_URL.
    #[arg(
        long,
        env = "RAPTOR_MAIL_FROM",
        value_name = "RAPTOR_MAIL_FROM",
        global = true
    )]
    pub mail_from: Option<String>,

    /// The app's public base URL: sign-in links are `<url>/verify?token=…` and
    /// `<url>/login?token=…`. Required with RAPTOR_SMTP_URL; unset: `http://RAPTOR_ADDR`.
    #[arg(long, env = "RAPTOR_PUBLIC_URL", value_name = "RAPTOR_PUBLIC_URL",
          value_parser = parse_public_url, global = true)]
    pub public_url: Option<String>,

    /// Timeout of each SMTP command (connect, greeting, each reply), in milliseconds.
    #[arg(long, env = "RAPTOR_SMTP_TIMEOUT_MS", value_name = "RAPTOR_SMTP_TIMEOUT_MS",
          default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(100..=300_000),
          global = true)]
    pub smtp_timeout_ms: u64,

    /// How often `serve`'s relay looks for due messages when the queue is empty, in
    /// milliseconds (0: no relay in this process).
    #[arg(long, env = "RAPTOR_MAIL_RELAY_INTERVAL_MS", value_name = "RAPTOR_MAIL_RELAY_INTERVAL_MS",
          default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=3_600_000),
          global = true)]
    pub mail_relay_interval_ms: u64,

    /// Attempts to send a message before it is given up (counted in
    /// `raptor_mail_messages_total{outcome="given_up"}`).
    #[arg(long, env = "RAPTOR_MAIL_MAX_ATTEMPTS", value_name = "RAPTOR_MAIL_MAX_ATTEMPTS",
          default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100),
          global = true)]
    pub mail_max_attempts: u32,

    /// The wait after a message's first failed attempt, in milliseconds; doubled after each
    /// further failure, at most 30 minutes.
    #[arg(long, env = "RAPTOR_MAIL_RETRY_BASE_MS", value_name = "RAPTOR_MAIL_RETRY_BASE_MS",
          default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000),
          global = true)]
    pub mail_retry_base_ms: u64,
}

/// The sender of logged messages when no SMTP relay is set.
const DEV_FROM: &str = "Raptor <no-reply@localhost>";

impl MailArgs {
    /// Checks that an SMTP relay comes with a sender and a public URL.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.smtp_url.is_some() {
            let missing: Vec<&str> = [
                ("RAPTOR_MAIL_FROM", self.mail_from.is_none()),
                ("RAPTOR_PUBLIC_URL", self.public_url.is_none()),
            ]
            .into_iter()
            .filter_map(|(name, missing)| missing.then_some(name))
            .collect();
            if !missing.is_empty() {
                bail!(
                    "RAPTOR_SMTP_URL is set but {} is not: sign-in email needs a sender and the \
                     app's public URL for its links",
                    missing.join(" and ")
                );
            }
        }
        self.relay(false)?;
        Ok(())
    }

    /// The base of sign-in links: `RAPTOR_PUBLIC_URL`, or this server's own address.
    pub fn public_url(&self, addr: SocketAddr) -> String {
        self.public_url.clone().unwrap_or_else(|| {
            let mut addr = addr;
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("http://{addr}")
        })
    }

    /// The relay these settings describe: SMTP when `RAPTOR_SMTP_URL` is set; else, with
    /// `log_links` (development), the log, and otherwise a relay that withholds every message
    /// (a sign-in link in the log lets anyone who reads it sign in).
    pub fn relay(&self, log_links: bool) -> anyhow::Result<Relay> {
        let retry = RetryPolicy {
            max_attempts: self.mail_max_attempts,
            base: Duration::from_millis(self.mail_retry_base_ms),
            ..RetryPolicy::default()
        };
        let from = self.mail_from.as_deref().unwrap_or(DEV_FROM);
        let ca = match &self.smtp_ca_file {
            Some(path) => Some(std::fs::read(path).with_context(|| {
                format!("RAPTOR_SMTP_CA_FILE: could not read {}", path.display())
            })?),
            None => None,
        };
        Ok(match &self.smtp_url {
            Some(url) => Relay::smtp(
                url.expose(),
                from,
                Duration::from_millis(self.smtp_timeout_ms),
                retry,
                ca.as_deref(),
            )?,
            None if ca.is_some() => bail!("RAPTOR_SMTP_CA_FILE is set without RAPTOR_SMTP_URL"),
            None if log_links => Relay::log(from, retry)?,
            None => Relay::withheld(from, retry)?,
        })
    }

    /// The relay's idle poll interval (`None`: off).
    pub fn relay_interval(&self) -> Option<Duration> {
        (self.mail_relay_interval_ms > 0)
            .then(|| Duration::from_millis(self.mail_relay_interval_ms))
    }

    /// Whether the SMTP URL sends in clear to a host other than this one (logged at start-up).
    pub fn plain_remote(&self) -> bool {
        let Some(url) = &self.smtp_url else {
            return false;
        };
        let url = url.expose();
        let Some(rest) = url.strip_prefix("smtp://") else {
            return false;
        };
        if url.contains("tls=required") || url.contains("tls=opportunistic") {
            return false;
        }
        let host_port = rest.split(['/', '?']).next().unwrap_or_default();
        let host = host_port
            .rsplit_once('@')
            .map_or(host_port, |(_, host)| host);
        let host = host.rsplit_once(':').map_or(host, |(host, _)| host);
        !matches!(host, "localhost" | "127.0.0.1" | "[::1]")
    }
}
