//! What a failed statement means for the request that sent it: one classification, shared by
//! the API's error mapping and the idempotency claim.

/// The class of a failed statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The server rolled the work back to resolve contention: a lock wait or statement that ran
    /// past its timeout (55P03, 57014), a deadlock (40P01), a serialization failure (40001).
    /// Nothing committed; the same work may succeed when run again.
    Busy,
    /// No connection (the pool timed out or is closed, connecting failed), or the connection
    /// was lost or the server is going away: an I/O error, SQLSTATE class 08, 57P01–57P03, or
    /// a write that reached a read-only server (25006: a standby, as during a failover). A
    /// statement that failed this way committed nothing; only a lost COMMIT is ambiguous.
    Unavailable,
    /// Anything else: a bug or a constraint the caller did not expect.
    Other,
}

/// Classifies `err`.
pub fn classify(err: &sqlx::Error) -> Failure {
    match err {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            return Failure::Unavailable;
        }
        _ => {}
    }
    let Some(code) = err.as_database_error().and_then(|db| db.code()) else {
        return Failure::Other;
    };
    match &*code {
        "55P03" | "57014" | "40P01" | "40001" => Failure::Busy,
        // 25006: a write reached a read-only server (a standby, say during a failover).
        "57P01" | "57P02" | "57P03" | "25006" => Failure::Unavailable,
        class if class.starts_with("08") => Failure::Unavailable,
        _ => Failure::Other,
    }
}

/// The connection was lost or the server is going away (the [`Failure::Unavailable`] cases
/// other than a pool that lent nothing): the reply to a COMMIT sent this way is lost, so its
/// outcome is unknown.
pub fn is_connection_lost(err: &sqlx::Error) -> bool {
    !matches!(err, sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed)
        && classify(err) == Failure::Unavailable
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;

    /// The error Postgres itself answers with `sqlstate` (raised in a `DO` block on the
    /// `DATABASE_URL` server, as `make test` sets it).
    async fn raised(sqlstate: &str) -> sqlx::Error {
        let url = std::env::var("DATABASE_URL").expect("DATABASE_URL (make test sets it)");
        let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
        let statement =
            format!("do $$ begin raise exception 'raised' using errcode = '{sqlstate}'; end $$");
        let err = crate::query(&statement)
            .execute(&mut conn)
            .await
            .expect_err("the block raises");
        let _ = conn.close().await;
        err
    }

    fn io(kind: std::io::ErrorKind) -> sqlx::Error {
        sqlx::Error::Io(std::io::Error::new(kind, "test"))
    }

    #[tokio::test]
    async fn every_sqlstate_is_classified_as_the_request_needs() {
        for (sqlstate, expected) in [
            ("55P03", Failure::Busy),
            ("57014", Failure::Busy),
            ("40P01", Failure::Busy),
            ("40001", Failure::Busy),
            ("57P01", Failure::Unavailable),
            ("57P02", Failure::Unavailable),
            ("57P03", Failure::Unavailable),
            ("25006", Failure::Unavailable),
            ("08006", Failure::Unavailable),
            ("08000", Failure::Unavailable),
            ("23505", Failure::Other),
            ("P0001", Failure::Other),
            ("28000", Failure::Other),
        ] {
            assert_eq!(classify(&raised(sqlstate).await), expected, "{sqlstate}");
        }
    }

    #[test]
    fn a_pool_or_a_socket_that_failed_is_unavailable() {
        assert_eq!(classify(&sqlx::Error::PoolTimedOut), Failure::Unavailable);
        assert_eq!(classify(&sqlx::Error::PoolClosed), Failure::Unavailable);
        assert_eq!(
            classify(&io(std::io::ErrorKind::ConnectionReset)),
            Failure::Unavailable
        );
        assert_eq!(
            classify(&sqlx::Error::Protocol("garbled".into())),
            Failure::Other
        );
        assert_eq!(classify(&sqlx::Error::RowNotFound), Failure::Other);
    }

    /// Only a lost connection makes a COMMIT's outcome unknown: a pool that lent nothing sent
    /// no COMMIT, and a busy or other error is the server's answer.
    #[tokio::test]
    async fn only_a_lost_connection_leaves_the_outcome_unknown() {
        assert!(!is_connection_lost(&sqlx::Error::PoolTimedOut));
        assert!(!is_connection_lost(&sqlx::Error::PoolClosed));
        assert!(is_connection_lost(&io(std::io::ErrorKind::BrokenPipe)));
        assert!(is_connection_lost(&raised("57P01").await));
        assert!(is_connection_lost(&raised("08006").await));
        assert!(!is_connection_lost(&raised("55P03").await));
        assert!(!is_connection_lost(&raised("23505").await));
    }
}
