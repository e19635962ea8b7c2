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
