//! Sign-up and sign-in: session lifetime, the key sign-in sessions are derived with, and the
//! rate limits.

use std::time::Duration;

use clap::Args;
use raptor_api::sessions::SessionKey;

fn parse_session_key(text: &str) -> Result<SessionKey, String> {
    SessionKey::parse(text).map_err(|err| err.to_string())
}

/// `RAPTOR_SESSION_TTL_DAYS`, `RAPTOR_SESSION_KEY`, `RAPTOR_AUTH_EMAIL_PER_HOUR`,
/// `RAPTOR_AUTH_IP_PER_MINUTE`.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Lifetime in days of a session made by sign-up or login.
    #[arg(long, env = "RAPTOR_SESSION_TTL_DAYS", value_name = "RAPTOR_SESSION_TTL_DAYS",
          default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3650), global = true)]
    pub session_ttl_days: u64,

    /// The server key a sign-in link's session token is derived with (32 bytes, base64:
    /// `openssl rand -base64 32`), so that every verification of one link answers the same
    /// session. The same on every replica. Unset: a random key per process (serve warns: a
    /// retried verification on another replica gets a session of its own).
    #[arg(long, env = "RAPTOR_SESSION_KEY", value_name = "RAPTOR_SESSION_KEY",
          value_parser = parse_session_key, global = true, hide_env_values = true)]
    pub session_key: Option<SessionKey>,

    /// Register and login requests allowed per email address per hour (then 429).
    #[arg(long, env = "RAPTOR_AUTH_EMAIL_PER_HOUR", value_name = "RAPTOR_AUTH_EMAIL_PER_HOUR",
          default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub auth_email_per_hour: u32,

    /// Register and login requests allowed per client IP address per minute (then 429).
    #[arg(long, env = "RAPTOR_AUTH_IP_PER_MINUTE", value_name = "RAPTOR_AUTH_IP_PER_MINUTE",
          default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub auth_ip_per_minute: u32,
}

impl SessionArgs {
    /// A session's lifetime.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.session_ttl_days * 24 * 60 * 60)
    }

    /// The sign-up and login rate limits.
    pub fn limits(&self) -> raptor_api::AuthLimits {
        raptor_api::AuthLimits {
            per_email_per_hour: self.auth_email_per_hour,
            per_ip_per_minute: self.auth_ip_per_minute,
        }
    }
}
