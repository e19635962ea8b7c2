//! The statements of the claim protocol, and only here: the claim, the stale release, the
//! completion (alone, or as a common table expression of the handler's statement, as the Tier 1
//! order writes it), the settles, the release of an uncertain claim by its token, and cleanup.
//!
//! The service issues them through these functions, and so does the conformance replay
//! (`tests/api/conformance.rs`), which runs the model's traces through them on real Postgres:
//! a change to a statement here is a change the replay sees. Each function takes a connection
//! and plain values; what the service makes of the answer (the judge, the guard, sealing) stays
//! with the claim.
//!
//! Every statement that changes a key row it does not create is fenced: it names the row's `id`
//! (or the key's scope) *and* the `attempt` token that claimed it, *and* `status = 'in_flight'`,
//! so an attempt that was declared stale and released, or whose key was claimed again, changes
//! nothing.

use raptor_db::Statement;
use serde_json::value::RawValue;
use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::seal::StoredColumns;

/// The claim statement's values.
#[derive(Debug, Clone, Copy)]
pub struct ClaimValues<'a> {
    /// `idem_key`.
    pub key: &'a str,
    /// `scope_user_id` (`None` for service principals).
    pub scope_user_id: Option<i32>,
    /// `scope_endpoint`: method and route template.
    pub endpoint: &'a str,
    /// `request_hash`.
    pub request_hash: &'a str,
    /// The attempt token this claim writes when it wins.
    pub attempt: Uuid,
    /// Retention of a new lifetime, in milliseconds.
    pub ttl_ms: i64,
    /// How long an `in_flight` row may go before it reads as stale, in milliseconds.
    pub stale_ms: i64,
    /// The route stores nothing and re-executes: a completed row of the same request is free.
    pub re_execute: bool,
}

/// What the claim statement returns: the row it won, or the existing row.
#[derive(Debug, sqlx::FromRow)]
pub struct ClaimRow {
    /// `id` of the key row.
    pub id: i64,
    /// Its lineage.
    pub lineage: Uuid,
    /// Whether this claim won the row (then every other column is `None`).
    pub won: bool,
    /// The existing row's status.
    pub status: Option<String>,
    /// The existing row's attempt token.
    pub attempt: Option<Uuid>,
    /// The existing row's request hash.
    pub request_hash: Option<String>,
    /// The existing row's stored response code.
    pub response_code: Option<i16>,
    #[sqlx(flatten)]
    pub(crate) stored: StoredColumns,
    /// The existing row is `in_flight` and older than `stale_ms`.
    pub stale: bool,
    /// How long the existing row has been claimed, in milliseconds.
    pub in_flight_ms: i64,
}

/// The claim: one autocommit statement that inserts the key row `in_flight` for `attempt`, or
/// takes an existing row over when it is free for this request (expired: a new lifetime with a
/// new lineage; released, or completed on a route that re-executes, with the same request
/// hash: the same lineage), or else reads the existing unexpired row. `None`: the row
/// disappeared between the two (a row committed after the statement began is not seen).
pub const CLAIM_SQL: &str = "with won as (
        insert into idempotency_keys
            (idem_key, scope_user_id, scope_endpoint, request_hash, status, attempt,
             locked_at, expires_at)
        values ($1, $2, $3, $4, 'in_flight', $5, now(),
                now() + $6::bigint * interval '1 millisecond')
        on conflict on constraint uq_idem_key_user_endpoint do update
           set request_hash = excluded.request_hash, status = 'in_flight',
               attempt = excluded.attempt, response_code = null,
               response_body = null, response_kid = null, response_nonce = null,
               response_ciphertext = null, response_headers = null,
               response_seal = null, created_at = now(),
               locked_at = now(), completed_at = null, expires_at = excluded.expires_at,
               lineage = case when idempotency_keys.expires_at > now()
                              then idempotency_keys.lineage
                              else excluded.lineage end
         where idempotency_keys.expires_at <= now()
            or (idempotency_keys.request_hash = excluded.request_hash
                and (idempotency_keys.status = 'released'
                     or (idempotency_keys.status = 'completed' and $8)))
        returning id, lineage)
     select id, lineage, true as won, null::text as status, null::uuid as attempt,
            null::text as request_hash, null::smallint as response_code,
            null::jsonb as response_body, null::text as response_kid,
            null::bytea as response_nonce, null::bytea as response_ciphertext,
            null::jsonb as response_headers, null::smallint as response_seal,
            false as stale, 0::bigint as in_flight_ms
       from won
     union all
     select k.id, k.lineage, false, k.status, k.attempt, k.request_hash,
            k.response_code, k.response_body, k.response_kid, k.response_nonce,
            k.response_ciphertext, k.response_headers, k.response_seal,
            now() - k.locked_at > $7::bigint * interval '1 millisecond',
            (extract(epoch from (now() - k.locked_at)) * 1000)::bigint
       from idempotency_keys k
      where k.idem_key = $1 and k.scope_user_id is not distinct from $2
        and k.scope_endpoint = $3 and k.expires_at > now()
        and not exists (select 1 from won)";

/// Runs [`CLAIM_SQL`].
pub async fn claim(
    conn: &mut PgConnection,
    values: &ClaimValues<'_>,
) -> Result<Option<ClaimRow>, sqlx::Error> {
    raptor_db::query_as(CLAIM_SQL)
        .bind(values.key)
        .bind(values.scope_user_id)
        .bind(values.endpoint)
        .bind(values.request_hash)
        .bind(values.attempt)
        .bind(values.ttl_ms)
        .bind(values.stale_ms)
        .bind(values.re_execute)
        .fetch_optional(conn)
        .await
}

/// How a settle ends a key row whose attempt's transaction rolled back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// `failed`: a 5xx other than a retryable 503, or a panic; a retry is refused.
    Fail,
    /// `released`: nothing committed and a retry may run. The row keeps its lineage and is free
    /// for the next claim of the same request. Also how a stale attempt is fenced off.
    Release,
}

/// [`Settle::Fail`].
pub const FAIL_SQL: &str = "update idempotency_keys set status = 'failed', completed_at = now()
      where id = $1 and attempt = $2 and status = 'in_flight'";

/// [`Settle::Release`].
pub const RELEASE_SQL: &str =
    "update idempotency_keys set status = 'released', completed_at = now()
      where id = $1 and attempt = $2 and status = 'in_flight'";

/// The fenced settle of row `id` held by `attempt`: how many rows it changed (0: the attempt no
/// longer holds the row). The judge's release of a stale row is this statement with the
/// attempt it read.
pub async fn settle(
    conn: &mut PgConnection,
    how: Settle,
    id: i64,
    attempt: Uuid,
) -> Result<u64, sqlx::Error> {
    let sql = match how {
        Settle::Fail => FAIL_SQL,
        Settle::Release => RELEASE_SQL,
    };
    Ok(raptor_db::query(sql)
        .bind(id)
        .bind(attempt)
        .execute(conn)
        .await?
        .rows_affected())
}

/// [`release_attempt`]'s statement.
pub const RELEASE_ATTEMPT_SQL: &str = "update idempotency_keys
        set status = 'released', completed_at = now()
      where idem_key = $1 and scope_user_id is not distinct from $2
        and scope_endpoint = $3 and attempt = $4 and status = 'in_flight'";

/// The release of a claim whose outcome is unknown (its connection failed after the statement
/// went out), by the key's scope and the attempt token alone: the row's id was never read.
pub async fn release_attempt(
    conn: &mut PgConnection,
    key: &str,
    scope_user_id: Option<i32>,
    endpoint: &str,
    attempt: Uuid,
) -> Result<u64, sqlx::Error> {
    Ok(raptor_db::query(RELEASE_ATTEMPT_SQL)
        .bind(key)
        .bind(scope_user_id)
        .bind(endpoint)
        .bind(attempt)
        .execute(conn)
        .await?
        .rows_affected())
}

/// Pushes the fenced completion update onto `sql`, each value bound where it is used: one row
/// while the attempt still holds the key (`id`, `attempt` *and* `status = 'in_flight'`), none
/// once it was declared stale and released or re-claimed. `None` binds NULLs of the same types
/// (an update that matches no row).
pub fn push_completion<'a>(sql: &mut Statement<'a>, values: Option<CompletionValues<'a>>) {
    let sealed = values.and_then(|v| v.sealed);
    sql.push("update idempotency_keys set status = 'completed', response_code = ")
        .push_bind(values.map(|v| v.code))
        .push("::smallint, response_body = ")
        .push_bind(values.and_then(|v| v.body).map(Json))
        .push("::jsonb, response_kid = ")
        .push_bind(sealed.map(|(kid, _, _)| kid))
        .push("::text, response_nonce = ")
        .push_bind(sealed.map(|(_, nonce, _)| nonce))
        .push("::bytea, response_ciphertext = ")
        .push_bind(sealed.map(|(_, _, ciphertext)| ciphertext))
        .push("::bytea, response_headers = ")
        .push_bind(values.and_then(|v| v.headers))
        .push("::jsonb, response_seal = ")
        .push_bind(values.and_then(|v| v.seal))
        .push("::smallint, completed_at = now() where id = ")
        .push_bind(values.map(|v| v.id))
        .push("::bigint and attempt = ")
        .push_bind(values.map(|v| v.attempt))
        .push("::uuid and status = 'in_flight'");
}

/// Pushes the completion as a common table expression `idempotency_completion` of a handler's
/// statement (the Tier 1 order's insert is one): [`push_completion`], run only where the SQL
/// condition `when` holds, returning `token`. The statement selects [`COMPLETED_COLUMN`].
pub fn push_completion_cte<'a>(
    sql: &mut Statement<'a>,
    values: Option<CompletionValues<'a>>,
    when: &str,
    token: Uuid,
) {
    sql.push("idempotency_completion as (");
    push_completion(sql, values);
    sql.push(" and (")
        .push(when)
        .push(") returning ")
        .push_bind(token)
        .push("::uuid as token)");
}

/// The column a statement carrying [`push_completion_cte`] selects: the token when its
/// completion wrote the key row, NULL when it matched nothing.
pub const COMPLETED_COLUMN: &str =
    "(select token from idempotency_completion) as idempotency_completed";

/// The values of a completion, as its row keeps them.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompletionValues<'a> {
    /// The key row.
    pub id: i64,
    /// The attempt token that claimed it: the fence.
    pub attempt: Uuid,
    /// `response_code`.
    pub code: i16,
    /// `response_body`, when stored in the clear.
    pub body: Option<&'a RawValue>,
    /// `response_kid`, `response_nonce`, `response_ciphertext`: a sealed response.
    pub sealed: Option<(&'a str, &'a [u8], &'a [u8])>,
    /// `response_headers`, when stored in the clear.
    pub headers: Option<&'a serde_json::Value>,
    /// `response_seal`: the seal's version, with a sealed response.
    pub seal: Option<i16>,
}

/// The completion in a statement of its own (the claim's, or the store's for a refusal): how
/// many rows it completed (0: fenced off).
pub async fn complete(
    conn: &mut PgConnection,
    values: &CompletionValues<'_>,
) -> Result<u64, sqlx::Error> {
    let mut sql = raptor_db::statement("");
    push_completion(&mut sql, Some(*values));
    Ok(raptor_db::built(&mut sql)
        .execute(conn)
        .await?
        .rows_affected())
}

/// [`delete_expired_batch`]'s statement.
pub const CLEANUP_SQL: &str = "delete from idempotency_keys
      where id in (select id from idempotency_keys
                    where status = any($1) and expires_at < now()
                    order by expires_at
                    limit $2
                    for update skip locked)";

/// Cleanup: deletes up to `batch_size` expired rows whose status is one of `statuses`, skipping
/// rows another transaction holds locked (a completion under way). How many it deleted.
pub async fn delete_expired_batch(
    conn: &mut PgConnection,
    statuses: &[&str],
    batch_size: i64,
) -> Result<u64, sqlx::Error> {
    Ok(raptor_db::query(CLEANUP_SQL)
        .bind(statuses)
        .bind(batch_size)
        .execute(conn)
        .await?
        .rows_affected())
}

/// Every statement of the protocol, by name, as the service sends it (the completion as a
/// statement of its own and as the order's common table expression, wrapped in the smallest
/// statement that selects it): what a check that each one still prepares runs through.
pub fn statements() -> Vec<(&'static str, String)> {
    vec![
        ("claim", CLAIM_SQL.to_owned()),
        ("settle_fail", FAIL_SQL.to_owned()),
        ("settle_release", RELEASE_SQL.to_owned()),
        ("release_attempt", RELEASE_ATTEMPT_SQL.to_owned()),
        ("complete", {
            let mut sql = raptor_db::statement("");
            push_completion(&mut sql, None);
            sql.into_sql()
        }),
        ("complete_in_statement", {
            let mut sql = raptor_db::statement("with written as (select 1 where ");
            sql.push_bind(true).push("::bool), ");
            push_completion_cte(
                &mut sql,
                None,
                "exists (select 1 from written)",
                Uuid::nil(),
            );
            sql.push(" select ").push(COMPLETED_COLUMN);
            sql.into_sql()
        }),
        ("cleanup", CLEANUP_SQL.to_owned()),
    ]
}
