//! The mail relay: sends the sign-in messages that register and login queue in `email_outbox`
//! (docs/operations.md, "Sign-in email").
//!
//! Each message is leased before it is sent: one statement takes the oldest due row nobody
//! holds (`FOR UPDATE SKIP LOCKED`) and moves its `next_attempt_at` [`LEASE`] ahead, and
//! commits. The SMTP conversation then runs with no transaction open (a slow or hung SMTP
//! server holds no row lock and no idle transaction), and its outcome is recorded in a
//! statement of its own, only while the row still carries the lease. So any number of relays
//! (loops in one process, replicas) share the queue and never send one message twice while they
//! run. What is not covered is a relay that dies (or loses Postgres) after the SMTP server
//! accepted a message and before it marked it sent, or one whose conversation outlived the
//! lease: the row comes due again when the lease runs out, and another relay sends it again.
//! Sign-in mail is delivered at least once; both copies carry the same Message-ID and the
//! same, still valid, link.
//!
//! A failure is retried with exponential backoff; an SMTP server's permanent refusal (5xx), an
//! address it cannot be sent to, or the last allowed attempt gives the message up. Sent and
//! given-up messages lose their body and link: the sign-in token is kept in clear only while
//! the message waits.
//!
//! Without an SMTP relay configured ([`Relay::log`], development), the relay logs each link
//! instead of sending it.

mod store;

use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::message::Mailbox;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::Error as SmtpError;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde::Serialize;
use sqlx::PgPool;
use tracing::Instrument;

/// How long a relay holds a message it is sending: longer than an SMTP conversation takes
/// (each command is bounded by the relay's timeout), short enough that a message whose relay
/// died goes out again soon.
pub const LEASE: Duration = Duration::from_secs(120);

/// How failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts before a message is given up (at least 1).
    pub max_attempts: u32,
    /// The wait after the first failure; doubled after each further one.
    pub base: Duration,
    /// The longest wait between two attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            base: Duration::from_secs(10),
            max_delay: Duration::from_secs(30 * 60),
        }
    }
}

impl RetryPolicy {
    /// The wait after the `failures`-th failure (1-based): `base × 2^(failures-1)`, capped.
    pub fn delay(&self, failures: u32) -> Duration {
        let doubling = 2u32.saturating_pow(failures.saturating_sub(1));
        self.base.saturating_mul(doubling).min(self.max_delay)
    }
}

/// A relay setting that cannot work: a start-up error naming the variable.
#[derive(Debug, thiserror::Error)]
pub enum MailConfigError {
    /// `RAPTOR_SMTP_URL` is not an SMTP URL lettre understands.
    #[error("RAPTOR_SMTP_URL is not a valid SMTP URL ({0}); expected smtps://[user:pass@]host:port, smtp://[user:pass@]host:port?tls=required, or smtp://host:port for a local relay")]
    Url(String),
    /// `RAPTOR_SMTP_CA_FILE` holds no certificate, or TLS settings lettre refuses.
    #[error("RAPTOR_SMTP_CA_FILE: {0}")]
    Ca(String),
    /// `RAPTOR_MAIL_FROM` is not a mailbox.
    #[error("RAPTOR_MAIL_FROM is not an email address or `Name <address>` ({0})")]
    From(String),
}

/// How messages leave.
#[derive(Clone)]
enum Delivery {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    /// Development: the link is logged.
    Log,
    /// No SMTP relay outside development: nothing leaves, the link is never logged (anyone
    /// who reads the log could sign in with it), and the message waits for a relay.
    Withheld,
}

/// The relay: a delivery, a sender address and a retry policy. Cheap to clone.
#[derive(Clone)]
pub struct Relay {
    delivery: Delivery,
    from: Mailbox,
    retry: RetryPolicy,
    /// The longest one SMTP conversation may take, whatever the server does (lettre bounds
    /// the connect and each command it writes, but not a server that accepts and never
    /// greets): well inside [`LEASE`].
    conversation: Duration,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("smtp", &self.is_smtp())
            .field("from", &self.from.to_string())
            .field("retry", &self.retry)
            .finish()
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pass {
    /// Messages accepted by the SMTP server (or logged, without one).
    pub sent: u64,
    /// Messages that failed and wait for another attempt.
    pub retried: u64,
    /// Messages given up.
    pub given_up: u64,
}

impl Pass {
    /// Messages the pass handled.
    pub fn total(&self) -> u64 {
        self.sent + self.retried + self.given_up
    }
}

/// Why a message was not sent.
struct Failure {
    permanent: bool,
    reason: String,
}

impl Failure {
    fn smtp(err: &SmtpError) -> Self {
        let mut reason = err.to_string();
        if reason.contains("invalid peer certificate") || err.is_tls() {
            // Said plainly: the fix is a setting, not the SMTP server's mood.
            reason = format!(
                "TLS to the SMTP server failed: its certificate did not verify for the host of \
                 RAPTOR_SMTP_URL against Mozilla's roots and RAPTOR_SMTP_CA_FILE ({reason})"
            );
        }
        Self {
            // A 5xx reply will not change on retry; anything else (4xx, connection refused,
            // TLS, timeout) may: a TLS failure is retried, so fixing the CA setting delivers
            // what waits.
            permanent: err.is_permanent(),
            reason,
        }
    }
}

/// What became of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Sent,
    Retried,
    GivenUp,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Retried => "retried",
            Self::GivenUp => "given_up",
        }
    }
}

impl Relay {
    /// A relay that sends through the SMTP server of `url` (lettre's URL form: `smtps://` is
    /// implicit TLS, `smtp://…?tls=required` STARTTLS, plain `smtp://` a local relay; user and
    /// password from the URL), from `from`, giving each SMTP command `timeout`. The server's
    /// certificate must chain to Mozilla's roots or, with `ca_pem` (`RAPTOR_SMTP_CA_FILE`), to
    /// one of its certificates (a private relay's CA), for the URL's host name.
    pub fn smtp(
        url: &str,
        from: &str,
        timeout: Duration,
        retry: RetryPolicy,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, MailConfigError> {
        let from = parse_from(from)?;
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|err| MailConfigError::Url(err.to_string()))?
            .timeout(Some(timeout));
        if let Some(pem) = ca_pem {
            builder = builder.tls(tls_with_ca(url, pem)?);
        }
        let transport = builder.build();
        Ok(Self {
            delivery: Delivery::Smtp(transport),
            from,
            retry: normalized(retry),
            conversation: timeout.saturating_mul(5).min(LEASE / 2),
        })
    }

    /// A relay without SMTP outside development: it sends nothing and logs no link; each
    /// message is retried (with the back-off) until a relay with SMTP sends it.
    pub fn withheld(from: &str, retry: RetryPolicy) -> Result<Self, MailConfigError> {
        Ok(Self {
            delivery: Delivery::Withheld,
            ..Self::log(from, retry)?
        })
    }

    /// A relay that logs each message's link instead of sending it (development).
    pub fn log(from: &str, retry: RetryPolicy) -> Result<Self, MailConfigError> {
        Ok(Self {
            delivery: Delivery::Log,
            from: parse_from(from)?,
            retry: normalized(retry),
            conversation: LEASE / 2,
        })
    }

    /// Whether messages go to an SMTP server (not to the log).
    pub fn is_smtp(&self) -> bool {
        matches!(self.delivery, Delivery::Smtp(_))
    }

    /// Sends due messages, one transaction each, until none is due or `limit` were handled;
    /// each message at most once per pass. A database error ends the pass (the message in
    /// hand stays due).
    pub async fn run_pass(&self, pool: &PgPool, limit: u64) -> Result<Pass, sqlx::Error> {
        let mut pass = Pass::default();
        let mut done = Vec::new();
        while pass.total() < limit {
            let Some((id, outcome)) = self.relay_one(pool, &done).await? else {
                break;
            };
            done.push(id);
            match outcome {
                Outcome::Sent => pass.sent += 1,
                Outcome::Retried => pass.retried += 1,
                Outcome::GivenUp => pass.given_up += 1,
            }
        }
        Ok(pass)
    }

    /// Samples the queue into `raptor_mail_outbox_unsent` (messages neither sent nor given up)
    /// and `raptor_mail_outbox_oldest_unsent_age_seconds` (0 when empty). Every replica's relay
    /// samples the same table: aggregate with `max`, not `sum`.
    pub async fn sample_backlog(pool: &PgPool) -> Result<(), sqlx::Error> {
        let mut conn = raptor_db::conn(pool).await?;
        let (unsent, oldest) = store::backlog(&mut conn).await?;
        conn.finish().await?;
        metrics::gauge!("raptor_mail_outbox_unsent").set(unsent as f64);
        metrics::gauge!("raptor_mail_outbox_oldest_unsent_age_seconds")
            .set(oldest.unwrap_or(0.0).max(0.0));
        Ok(())
    }

    async fn relay_one(
        &self,
        pool: &PgPool,
        done: &[i64],
    ) -> Result<Option<(i64, Outcome)>, sqlx::Error> {
        let mut conn = raptor_db::conn(pool).await?;
        let due = store::lease_due(&mut conn, done, LEASE).await;
        conn.finish().await?;
        let Some(due) = due? else {
            return Ok(None);
        };
        // A span per message, not per poll: an idle relay records (and exports) none.
        let span = tracing::info_span!("mail.relay", outbox.id = due.id);
        self.relay_due(pool, due).instrument(span).await.map(Some)
    }

    /// Sends `due`, leased by this relay, then records the outcome (no transaction is open
    /// while the SMTP server is talked to).
    async fn relay_due(
        &self,
        pool: &PgPool,
        due: store::Due,
    ) -> Result<(i64, Outcome), sqlx::Error> {
        let delivered = self.deliver(&due).await;
        let mut conn = raptor_db::conn(pool).await?;
        let (outcome, recorded) = match delivered {
            Ok(()) => {
                let recorded = store::mark_sent(&mut conn, &due).await;
                if let Err(err) = &recorded {
                    // The window of at-least-once: the server has the message, the row says
                    // unsent (its lease runs out and it is sent again).
                    tracing::error!(error = %err, "a sent sign-in email could not be marked sent; it will be sent again");
                }
                (Outcome::Sent, recorded?)
            }
            Err(failure) => {
                let failures = u32::try_from(due.attempts).unwrap_or(0).saturating_add(1);
                if failure.permanent || failures >= self.retry.max_attempts {
                    tracing::warn!(
                        attempts = failures,
                        permanent = failure.permanent,
                        error = %failure.reason,
                        "sign-in email given up"
                    );
                    let recorded = store::mark_failed(&mut conn, &due, &failure.reason).await?;
                    (Outcome::GivenUp, recorded)
                } else {
                    let delay = self.retry.delay(failures);
                    tracing::info!(
                        attempts = failures,
                        retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error = %failure.reason,
                        "sign-in email not sent; retried"
                    );
                    let recorded =
                        store::mark_retry(&mut conn, &due, delay, &failure.reason).await?;
                    (Outcome::Retried, recorded)
                }
            }
        };
        conn.finish().await?;
        if !recorded {
            tracing::warn!(
                outcome = outcome.label(),
                "the message's lease ran out during the SMTP conversation; another relay has it"
            );
        }
        metrics::counter!("raptor_mail_messages_total", "outcome" => outcome.label()).increment(1);
        Ok((due.id, outcome))
    }

    async fn deliver(&self, due: &store::Due) -> Result<(), Failure> {
        let Some(body) = due.body.clone() else {
            return Err(Failure {
                permanent: true,
                reason: "the message has no body".to_owned(),
            });
        };
        match &self.delivery {
            Delivery::Log => {
                tracing::info!(
                    to = %due.email,
                    subject = %due.subject,
                    link = due.link.as_deref().unwrap_or_default(),
                    "RAPTOR_SMTP_URL is not set: sign-in email logged, not sent"
                );
                Ok(())
            }
            Delivery::Withheld => Err(Failure {
                permanent: false,
                reason: "RAPTOR_SMTP_URL is not set: not sent (its link is not logged outside \
                         development)"
                    .to_owned(),
            }),
            Delivery::Smtp(transport) => {
                let message = self.message(due, body)?;
                let started = std::time::Instant::now();
                // One SMTP conversation, a client span when exported.
                let span = tracing::info_span!("smtp.send", otel.kind = "client");
                let sent = tokio::time::timeout(
                    self.conversation,
                    transport.send(message).instrument(span),
                )
                .await
                .map_err(|_| Failure {
                    permanent: false,
                    reason: format!(
                        "the SMTP conversation took longer than {} s",
                        self.conversation.as_secs()
                    ),
                })
                .and_then(|sent| sent.map(|_| ()).map_err(|err| Failure::smtp(&err)));
                let outcome = match &sent {
                    Ok(()) => "sent",
                    Err(failure) if failure.permanent => "permanent_failure",
                    Err(_) => "transient_failure",
                };
                metrics::histogram!("raptor_smtp_send_duration_seconds", "outcome" => outcome)
                    .record(started.elapsed().as_secs_f64());
                sent
            }
        }
    }

    fn message(&self, due: &store::Due, body: String) -> Result<Message, Failure> {
        let to: Mailbox = due.email.parse().map_err(|err| Failure {
            permanent: true,
            reason: format!("not a deliverable address: {err}"),
        })?;
        // Stable across attempts: a copy sent again after a crash carries the same id.
        let message_id = format!(
            "<raptor.{}.{}@{}>",
            due.id,
            due.created_us,
            self.from.email.domain()
        );
        Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(due.subject.clone())
            .message_id(Some(message_id))
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .map_err(|err| Failure {
                permanent: true,
                reason: format!("could not build the message: {err}"),
            })
    }
}

/// The TLS mode of `url` (as lettre reads it: `smtps://` implicit, `?tls=required` or
/// `?tls=opportunistic` STARTTLS) with the certificates of `pem` trusted besides Mozilla's roots.
fn tls_with_ca(url: &str, pem: &[u8]) -> Result<Tls, MailConfigError> {
    let parsed = url::Url::parse(url).map_err(|err| MailConfigError::Url(err.to_string()))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| MailConfigError::Url("no host".to_owned()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    if !pem
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        return Err(MailConfigError::Ca(
            "no PEM certificate (-----BEGIN CERTIFICATE-----) in the file".to_owned(),
        ));
    }
    let ca = Certificate::from_pem(pem).map_err(|err| MailConfigError::Ca(err.to_string()))?;
    let parameters = TlsParameters::builder(host)
        .add_root_certificate(ca)
        .build_rustls()
        .map_err(|err| MailConfigError::Ca(err.to_string()))?;
    let mode = parsed
        .query_pairs()
        .find(|(key, _)| key == "tls")
        .map(|(_, value)| value.into_owned());
    match (parsed.scheme(), mode.as_deref()) {
        ("smtps", _) => Ok(Tls::Wrapper(parameters)),
        ("smtp", Some("required")) => Ok(Tls::Required(parameters)),
        ("smtp", Some("opportunistic")) => Ok(Tls::Opportunistic(parameters)),
        _ => Err(MailConfigError::Ca(
            "RAPTOR_SMTP_URL does not use TLS (smtps://, or smtp:// with ?tls=required): a CA \
             file has nothing to verify"
                .to_owned(),
        )),
    }
}

fn parse_from(from: &str) -> Result<Mailbox, MailConfigError> {
    from.trim()
        .parse()
        .map_err(|err: lettre::address::AddressError| MailConfigError::From(err.to_string()))
}

fn normalized(retry: RetryPolicy) -> RetryPolicy {
    RetryPolicy {
        max_attempts: retry.max_attempts.max(1),
        ..retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base: Duration::from_secs(10),
            max_delay: Duration::from_secs(60),
        };
        let waits: Vec<u64> = (1..=5).map(|n| policy.delay(n).as_secs()).collect();
        assert_eq!(waits, [10, 20, 40, 60, 60]);
        assert_eq!(policy.delay(200).as_secs(), 60);
    }

    #[test]
    fn bad_settings_name_their_variable() {
        let policy = RetryPolicy::default();
        let url = Relay::smtp(
            "http://mail",
            "a@example.com",
            Duration::from_secs(1),
            policy,
            None,
        )
        .err()
        .map(|err| err.to_string());
        assert!(url.is_some_and(|m| m.starts_with("RAPTOR_SMTP_URL")));
        let from = Relay::log("not an address", policy)
            .err()
            .map(|err| err.to_string());
        assert!(from.is_some_and(|m| m.starts_with("RAPTOR_MAIL_FROM")));
    }
}
