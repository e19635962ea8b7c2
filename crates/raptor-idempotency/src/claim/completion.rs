//! Completing a key: what its row keeps of the answer ([`Completion`]), written by the claim
//! in a statement of its own, or by the handler's own last write statement
//! ([`Completer`]), which saves the request a round trip and a statement.
//!
//! The second way keeps the claim's guarantee. The handler cannot make up a completion: it gets
//! a [`PendingCompletion`] for the answer it will return, binds it into its statement with
//! [`PendingCompletion::push_cte`], and hands the statement's row to [`PendingCompletion::written`],
//! which checks that the row carries the token only this completion's update returns (not
//! another completion's, not a column the statement made up). Only that gives the
//! [`Completed`] the claim commits; it holds the answer that was stored, so the answer sent and
//! the answer replayed are one. A statement that completed nothing (the attempt was fenced off as stale)
//! is rolled back by [`Claim::finish`](super::Claim), as with the claim's own completion.

use serde_json::value::RawValue;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::Tracked;
use crate::protocol::{self, CompletionValues};
use crate::reply::{self, Reply};
use crate::seal::{ResponseKeys, RowIdentity, SealError, Sealed, SEAL_V2};

/// The completion of a key: what its row keeps of `reply`.
pub(super) struct Completion {
    id: i64,
    attempt: uuid::Uuid,
    code: i16,
    plain_body: Option<Box<RawValue>>,
    plain_headers: Option<serde_json::Value>,
    sealed: Option<Sealed>,
}

impl Completion {
    /// What `tracked`'s row keeps of `reply` under its policy: with keys configured the
    /// response (body and headers) is stored sealed, bound to this row, this lifetime of the
    /// key and this attempt (`response_body` and `response_headers` stay NULL); without, as
    /// plain JSON. A policy that keeps nothing keeps no headers either.
    pub(super) fn new(
        tracked: &Tracked,
        endpoint: &str,
        reply: &Reply,
        keys: &ResponseKeys,
    ) -> Result<Self, SealError> {
        let headers = reply::stored_headers(reply.location.as_deref());
        let code = i16::try_from(reply.status.as_u16()).unwrap_or(i16::MAX);
        let body = tracked
            .replay
            .stores_body(reply.status)
            .then_some(&*reply.body);
        let identity = RowIdentity {
            id: tracked.id,
            scope_user_id: tracked.scope_user_id,
            endpoint,
            response_code: Some(code),
            lineage: tracked.lineage,
            attempt: tracked.attempt,
        };
        let keeps_headers = tracked.replay != crate::policy::Replay::ReExecute;
        let sealed = if keeps_headers {
            keys.seal_response(identity, body, &headers)?
        } else {
            None
        };
        let (plain_body, plain_headers) = match (&sealed, keeps_headers) {
            (None, true) => (body.map(ToOwned::to_owned), Some(headers)),
            _ => (None, None),
        };
        Ok(Self {
            id: tracked.id,
            attempt: tracked.attempt,
            code,
            plain_body,
            plain_headers,
            sealed,
        })
    }

    /// The values the completion writes ([`protocol::push_completion`]).
    fn values(&self) -> CompletionValues<'_> {
        let sealed = self.sealed.as_ref();
        CompletionValues {
            id: self.id,
            attempt: self.attempt,
            code: self.code,
            body: self.plain_body.as_deref(),
            sealed: sealed.map(|s| (s.kid.as_str(), s.nonce.as_slice(), s.ciphertext.as_slice())),
            headers: self.plain_headers.as_ref(),
            seal: sealed.map(|_| SEAL_V2),
        }
    }

    /// The completion in a statement of its own: how many rows it completed (0: fenced off).
    pub(super) async fn write(&self, conn: &mut PgConnection) -> Result<u64, sqlx::Error> {
        protocol::complete(conn, &self.values()).await
    }
}

/// Lent to the work of [`Claim::run_completing`](super::Claim::run_completing): prepares the
/// key's completion for the answer the work will return, to be written by the work's own last
/// statement.
pub struct Completer<'a> {
    pub(super) tracked: Option<Tracked>,
    pub(super) endpoint: &'a str,
    pub(super) keys: &'a ResponseKeys,
}

impl Completer<'_> {
    /// The completion of `reply`, to be bound into the statement that writes it. Prepare again
    /// for another answer (e.g. a retry of the statement with other values); only the one
    /// whose statement ran is [`PendingCompletion::written`].
    pub fn prepare(&self, reply: Reply) -> PendingCompletion {
        let completion = match &self.tracked {
            None => Ok(None),
            Some(tracked) => Completion::new(tracked, self.endpoint, &reply, self.keys).map(Some),
        };
        PendingCompletion {
            reply,
            completion,
            token: Uuid::new_v4(),
        }
    }
}

/// A completion prepared for one answer, not written yet.
pub struct PendingCompletion {
    reply: Reply,
    /// `Ok(None)`: the claim guards no key row (untracked, kill switch off), nothing to write.
    completion: Result<Option<Completion>, SealError>,
    /// Returned by the update that wrote this completion, and only by it: a row that does not
    /// carry it (another completion's statement, a made-up column) is refused.
    token: Uuid,
}

impl PendingCompletion {
    /// The column [`PendingCompletion::written`] reads: the handler's statement selects it.
    pub const COMPLETED_COLUMN: &'static str = protocol::COMPLETED_COLUMN;

    /// Pushes the common table expression `idempotency_completion` onto the handler's
    /// statement: the fenced completion update with its values (the attempt's fence among
    /// them) and this completion's token, bound where they are written; NULLs when there is
    /// nothing to write, which completes no row. It runs only where the SQL condition `when`
    /// holds (e.g. `exists (select 1 from inserted)`, so a statement that wrote nothing
    /// completes nothing). The statement must select [`PendingCompletion::COMPLETED_COLUMN`].
    pub fn push_cte<'q>(&'q self, sql: &mut raptor_db::Statement<'q>, when: &str) {
        let completion = self.completion.as_ref().ok().and_then(Option::as_ref);
        protocol::push_completion_cte(sql, completion.map(Completion::values), when, self.token);
    }

    /// The completion, once the handler's statement ran with its `when` holding: `row` is the
    /// statement's row, whose [`PendingCompletion::COMPLETED_COLUMN`] says whether this
    /// completion's update wrote the key row. Return the result from the work; the claim commits
    /// it, or rolls back when nothing was completed (fenced off). A row from a statement that
    /// did not carry this completion is an error (and so a rollback).
    pub fn written(self, row: &PgRow) -> Result<Completed, sqlx::Error> {
        let written = match self.completion {
            Err(err) => Written::SealFailed(err),
            Ok(None) => Written::Nothing,
            Ok(Some(_)) => match row.try_get::<Option<Uuid>, _>("idempotency_completed")? {
                None => Written::Rows(0),
                Some(token) if token == self.token => Written::Rows(1),
                Some(_) => {
                    return Err(sqlx::Error::Protocol(
                        "the statement completed another answer than this one".into(),
                    ))
                }
            },
        };
        Ok(Completed {
            reply: self.reply,
            written,
        })
    }
}

/// An answer whose completion the handler's statement wrote (or tried to).
pub struct Completed {
    pub(super) reply: Reply,
    pub(super) written: Written,
}

/// What the handler's statement did with the key row.
pub(super) enum Written {
    /// Nothing to write (no key row).
    Nothing,
    /// Key rows completed: 1, or 0 when the attempt was fenced off.
    Rows(i64),
    /// The answer could not be sealed: nothing was written, the claim answers 500.
    SealFailed(SealError),
}

/// What a claim's work ends with: an answer for the claim to complete the key with, or one
/// whose completion the work's own statement wrote ([`Completer`]).
pub enum Answer {
    /// Completed by [`Claim::finish`](super::Claim::finish) in a statement of its own.
    Reply(Reply),
    /// Completed by the work's statement.
    Completed(Completed),
}

impl Answer {
    pub(super) fn reply(&self) -> &Reply {
        match self {
            Self::Reply(reply) | Self::Completed(Completed { reply, .. }) => reply,
        }
    }

    pub(super) fn into_reply(self) -> Reply {
        match self {
            Self::Reply(reply) | Self::Completed(Completed { reply, .. }) => reply,
        }
    }
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Self {
        Self::Reply(reply)
    }
}

impl From<Completed> for Answer {
    fn from(completed: Completed) -> Self {
        Self::Completed(completed)
    }
}
