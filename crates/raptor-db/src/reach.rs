//! Whether a database can be connected to at all: for the idempotency store, the one question
//! that decides whether a fail-open (Tier 2) route may run without dedup (docs/idempotency.md,
//! "Tiers").
//!
//! A claim that got no connection from the store pool cannot tell, from the pool's error alone,
//! a pool whose connections are all busy (the store is up: refuse, the key may exist) from a
//! store nobody can connect to (sqlx retries a refused connect until its acquire timeout and
//! then reports the same `PoolTimedOut`). So the claim asks: it opens one connection of its own,
//! outside the pool. One probe runs at a time per process and its answer is reused for
//! [`FRESH`], so a saturated pool does not turn every waiting request into a new connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tokio::sync::Mutex;

/// How long a probe's answer is reused.
pub const FRESH: Duration = Duration::from_secs(1);

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A connection was made: the store is up.
    Reachable,
    /// Something answered and refused: a server or pooler refusal (too many connections
    /// `53300`, `08P01` from a pooler at `max_client_conn`, starting up `57P03`, …) or any other
    /// failure that is not an affirmative connect failure. The store may hold the key: refuse.
    Refused(String),
    /// No connection can be made at all ([`affirmative_connect_failure`]); why.
    Unreachable(String),
}

/// Why `err` says affirmatively that no connection to the database can be made, or `None`.
///
/// The only failures that count (docs/idempotency.md, "Tiers"): the connection is refused
/// (nothing listens there), the host name does not resolve, or authentication or TLS is
/// refused (SQLSTATE class 28: a wrong password, no `pg_hba.conf` entry; a failed TLS
/// handshake, or a server without TLS where it is required). Every timeout, every refusal by a
/// server or pooler that answered (`08P01`, `53300`, `57P03`, …), a reset or a broken
/// connection says nothing certain about whether the store holds a key, so none of them is
/// one: a fail-open route must not run untracked on them.
pub fn affirmative_connect_failure(err: &sqlx::Error) -> Option<String> {
    match err {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            Some(format!("connection refused: {io}"))
        }
        // The resolver's failure (std's `getaddrinfo` error, as tokio reports it), or a name
        // that resolved to no address.
        sqlx::Error::Io(io)
            if io
                .to_string()
                .starts_with("failed to lookup address information")
                || io.to_string() == "could not resolve to any address" =>
        {
            Some(format!("host name does not resolve: {io}"))
        }
        sqlx::Error::Tls(tls) => Some(format!("TLS refused: {tls}")),
        sqlx::Error::Database(db) if db.code().is_some_and(|code| code.starts_with("28")) => {
            Some(format!("authentication refused: {db}"))
        }
        _ => None,
    }
}

/// The store's reachability, probed on demand (see the module docs).
pub struct Reachability {
    options: Arc<PgConnectOptions>,
    last: Mutex<Option<(Instant, Reach)>>,
}

impl Reachability {
    /// Probes connections with `options` (the pool's).
    pub fn new(options: Arc<PgConnectOptions>) -> Self {
        Self {
            options,
            last: Mutex::new(None),
        }
    }

    /// Whether a connection to the store can be made, found out within `budget`; `None` when
    /// no answer came in time (another probe holds the turn, or the connect is slow or hangs):
    /// the caller must then not assume unreachable. A slow store is not an unreachable one.
    pub async fn probe(&self, budget: Duration) -> Option<Reach> {
        let started = Instant::now();
        let mut last = tokio::time::timeout(budget, self.last.lock()).await.ok()?;
        if let Some((at, reach)) = &*last {
            if at.elapsed() < FRESH {
                return Some(reach.clone());
            }
        }
        let left = budget.saturating_sub(started.elapsed());
        if left < budget / 2 {
            // Most of the budget went on waiting for another probe's turn: too little is left
            // to tell a hanging connect from a slow one.
            return None;
        }
        let reach = match tokio::time::timeout(left, self.options.connect()).await {
            Ok(Ok(conn)) => {
                // Closed politely off the request's path.
                tokio::spawn(async move {
                    let _ = conn.close().await;
                });
                Reach::Reachable
            }
            Ok(Err(err)) => match affirmative_connect_failure(&err) {
                Some(why) => Reach::Unreachable(why),
                None => Reach::Refused(err.to_string()),
            },
            // No answer in time: slow, or hanging. Not remembered: the next claim asks again.
            Err(_) => return None,
        };
        *last = Some((Instant::now(), reach.clone()));
        Some(reach)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `DATABASE_URL` server's options (`make test` sets it).
    fn server() -> PgConnectOptions {
        let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (make test sets it)");
        url.parse().expect("DATABASE_URL parses")
    }

    /// A local port nothing listens on (bound, then released).
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    }

    async fn connect_error(options: PgConnectOptions) -> sqlx::Error {
        options.connect().await.expect_err("the connect fails")
    }

    #[tokio::test]
    async fn only_affirmative_failures_say_unreachable() {
        let refused = connect_error(server().host("127.0.0.1").port(closed_port())).await;
        let why = affirmative_connect_failure(&refused).unwrap_or_default();
        assert!(why.starts_with("connection refused"), "{why}");

        let unresolved = connect_error(server().host("raptor-test.invalid")).await;
        let why = affirmative_connect_failure(&unresolved).unwrap_or_default();
        assert!(
            why.starts_with("host name does not resolve"),
            "{why}: {unresolved}"
        );

        let stranger = connect_error(server().username("raptor_no_such_role")).await;
        let why = affirmative_connect_failure(&stranger).unwrap_or_default();
        assert!(
            why.starts_with("authentication refused"),
            "{why}: {stranger}"
        );

        // The server answered and refused for another reason (3D000: no such database): it
        // is up, so it may hold the key.
        let no_database = connect_error(server().database("raptor_no_such_database")).await;
        assert_eq!(
            no_database
                .as_database_error()
                .and_then(|db| db.code())
                .as_deref(),
            Some("3D000")
        );
        assert_eq!(affirmative_connect_failure(&no_database), None);

        for unsure in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "reset",
            )),
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            )),
            sqlx::Error::Protocol("garbled".into()),
        ] {
            assert_eq!(affirmative_connect_failure(&unsure), None, "{unsure}");
        }
    }

    /// A listener that accepts and closes at once: something answered, so not unreachable.
    async fn slamming_door(port: u16) -> tokio::task::JoinHandle<()> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the door");
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                drop(socket);
            }
        })
    }

    #[tokio::test]
    async fn a_probe_answers_and_its_answer_is_reused_for_a_second() {
        let budget = Duration::from_secs(2);
        let up = Reachability::new(Arc::new(server()));
        assert_eq!(up.probe(budget).await, Some(Reach::Reachable));

        let port = closed_port();
        let probe = Reachability::new(Arc::new(server().host("127.0.0.1").port(port)));
        assert!(matches!(
            probe.probe(budget).await,
            Some(Reach::Unreachable(why)) if why.starts_with("connection refused")
        ));
        // Something listens now, but the answer is under a second old: reused.
        let door = slamming_door(port).await;
        assert!(matches!(
            probe.probe(budget).await,
            Some(Reach::Unreachable(_))
        ));
        tokio::time::sleep(FRESH + Duration::from_millis(100)).await;
        assert!(matches!(probe.probe(budget).await, Some(Reach::Refused(_))));
        door.abort();
    }

    /// A probe that waited most of its budget for another's turn does not guess.
    #[tokio::test]
    async fn a_probe_left_without_time_answers_nothing() {
        let probe = Arc::new(Reachability::new(Arc::new(server())));
        let turn = probe.last.lock().await;
        let waiting = {
            let probe = Arc::clone(&probe);
            tokio::spawn(async move { probe.probe(Duration::from_millis(1000)).await })
        };
        tokio::time::sleep(Duration::from_millis(700)).await;
        drop(turn);
        assert_eq!(waiting.await.expect("join"), None);
        // With the turn free and the budget whole, it answers.
        assert_eq!(
            probe.probe(Duration::from_millis(2000)).await,
            Some(Reach::Reachable)
        );
    }
}
