//! Probe routes: a minimal instrumented handler, so the idempotency mechanism is tested on its
//! own, through HTTP, with the real extractor, claim, audit writer and layers.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use raptor_api::audit::{self, AuditEvent};
use raptor_api::auth::Principal;
use raptor_api::{ApiError, ApiState};
use raptor_engine::OrderRejection;
use raptor_idempotency::{Idempotent, PendingCompletion, Policy, Reply, Tier1, Tier2};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::json;
use sqlx::{PgConnection, PgPool};

pub(crate) async fn create_table(pool: &PgPool) {
    sqlx::query(
        "create table if not exists probe_items (
            id serial primary key, label text not null, user_id integer,
            created_at timestamptz not null default now())",
    )
    .execute(pool)
    .await
    .expect("probe table");
    sqlx::query(
        "create or replace function probe_raise(code text) returns void language plpgsql as
         $$ begin raise exception 'probe error %', code using errcode = code; end $$",
    )
    .execute(pool)
    .await
    .expect("probe function");
}

/// Fail the handler's transaction after the insert with this SQLSTATE (e.g. `40P01`, a
/// deadlock), raised by Postgres itself.
pub(crate) const SQLSTATE_HEADER: &str = "x-probe-sqlstate";

/// How long the probe handler sleeps after its insert: a header, so that it is not part of the
/// request fingerprint (a retry of a slow attempt can be fast).
pub(crate) const SLEEP_HEADER: &str = "x-probe-sleep-ms";

/// `/probe/inline` only: its statement leaves the completion out and selects a made-up
/// `idempotency_completed` column instead, as a handler misusing the API would.
pub(crate) const FORGE_HEADER: &str = "x-probe-forge-completion";

/// Answer `503 database_unavailable` after the insert: a header, so that a retry of the same
/// request (same fingerprint) can succeed.
pub(crate) const UNAVAILABLE_HEADER: &str = "x-probe-unavailable";

fn sleep_ms(headers: &axum::http::HeaderMap) -> u64 {
    headers
        .get(SLEEP_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What the probe handler should do.
#[derive(Debug, Deserialize)]
pub(crate) struct ProbeBody {
    label: String,
    /// `fail` (500 after the insert), `reject` (403 business rejection committed with its
    /// audit row, no insert), `refuse` (422 after the insert: an `Err`, so the insert is
    /// rolled back), `panic`.
    #[serde(default)]
    outcome: Option<String>,
}

pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/probe/items", post(create_item::<Tier1>))
        .route("/probe/items/{slot}", post(create_item_in_slot))
        .route("/probe/other", post(create_item::<Tier1>))
        .route("/probe/open", post(create_item::<Tier2>))
        .route("/probe/strict", post(create_item::<Strict>))
        .route("/probe/inline", post(create_item_inline))
}

/// A policy with the optional switches on: the key is required and the response body (which
/// would hold personal data on a real route) is not stored.
pub(crate) struct Strict;

impl Policy for Strict {
    const TIER: raptor_idempotency::Tier = raptor_idempotency::Tier::FailClosed;
    const TTL: Duration = Duration::from_secs(60);
    const REQUIRE_KEY: bool = true;
    const REPLAY: raptor_idempotency::Replay = raptor_idempotency::Replay::StatusOnly;
}

async fn create_item<P: Policy>(
    State(_state): State<ApiState>,
    headers: axum::http::HeaderMap,
    Idempotent {
        mut claim,
        body,
        auth: principal,
        ..
    }: Idempotent<ProbeBody, P, Principal>,
) -> Response {
    let lineage = claim.lineage();
    let mut result = work(
        claim.conn(),
        principal.user_id(),
        &body,
        sleep_ms(&headers),
        lineage,
    )
    .await;
    if result.is_ok() && headers.contains_key(UNAVAILABLE_HEADER) {
        result = Err(ApiError::Unavailable(sqlx::Error::PoolTimedOut));
    }
    if let (true, Some(code)) = (
        result.is_ok(),
        headers.get(SQLSTATE_HEADER).and_then(|v| v.to_str().ok()),
    ) {
        if let Err(err) = sqlx::query("select probe_raise($1)")
            .bind(code)
            .execute(claim.conn())
            .await
        {
            result = Err(ApiError::from(err));
        }
    }
    claim.finish(result).await
}

async fn create_item_in_slot(
    State(_state): State<ApiState>,
    axum::extract::Path(_slot): axum::extract::Path<String>,
    Idempotent {
        mut claim,
        body,
        auth: principal,
        ..
    }: Idempotent<ProbeBody, Tier1, Principal>,
) -> Response {
    let lineage = claim.lineage();
    let result = work(claim.conn(), principal.user_id(), &body, 0, lineage).await;
    claim.finish(result).await
}

/// The probe with the key's completion in its own insert statement
/// ([`Claim::run_completing`](raptor_idempotency::Claim::run_completing)), as the order routes
/// do: it sleeps (`SLEEP_HEADER`) before that statement, so a stale attempt reaches it fenced.
async fn create_item_inline(
    State(_state): State<ApiState>,
    headers: axum::http::HeaderMap,
    Idempotent {
        claim,
        body,
        auth: principal,
        ..
    }: Idempotent<ProbeBody, Tier1, Principal>,
) -> Response {
    let lineage = claim.lineage();
    let user_id = principal.user_id();
    let sleep = sleep_ms(&headers);
    let forge = headers.contains_key(FORGE_HEADER);
    claim
        .run_completing(async |tx, completer| {
            let id: i32 = sqlx::query_scalar("select nextval('probe_items_id_seq')::integer")
                .fetch_one(&mut *tx)
                .await?;
            if sleep > 0 {
                tokio::time::sleep(Duration::from_millis(sleep)).await;
            }
            let pending = completer.prepare(
                Reply::json(
                    StatusCode::CREATED,
                    &json!({ "id": id, "label": body.label, "lineage": lineage }),
                )
                .with_location(format!("/probe/items/{id}")),
            );
            let row = {
                let mut sql = sqlx::QueryBuilder::new(
                    "with ins as (insert into probe_items (id, label, user_id) values (",
                );
                sql.push_bind(id)
                    .push(", ")
                    .push_bind(&body.label)
                    .push(", ")
                    .push_bind(user_id)
                    .push(") returning id)");
                if forge {
                    // A statement that makes the column up instead of carrying the completion.
                    sql.push(" select gen_random_uuid() as idempotency_completed");
                } else {
                    sql.push(", ");
                    pending.push_cte(&mut sql, "exists (select 1 from ins)");
                    sql.push(" select ")
                        .push(PendingCompletion::COMPLETED_COLUMN);
                }
                sql.build().fetch_one(&mut *tx).await?
            };
            Ok::<_, ApiError>(pending.written(&row)?.into())
        })
        .await
}

async fn work(
    conn: &mut PgConnection,
    user_id: Option<i32>,
    body: &ProbeBody,
    sleep_ms: u64,
    lineage: Option<uuid::Uuid>,
) -> Result<Reply, ApiError> {
    if body.outcome.as_deref() == Some("reject") {
        audit::record(
            conn,
            AuditEvent::named(user_id, "probe.rejected", json!({ "label": body.label })),
        )
        .await?;
        // A business rejection: committed with its audit row, stored and replayed.
        return Ok(Reply::rejected(&ApiError::Rejected(
            OrderRejection::InsufficientBuyingPower {
                buying_power: Decimal::new(100, 0),
                cost_basis: Decimal::new(250, 0),
            },
        )));
    }
    let id: i32 =
        sqlx::query_scalar("insert into probe_items (label, user_id) values ($1, $2) returning id")
            .bind(&body.label)
            .bind(user_id)
            .fetch_one(&mut *conn)
            .await?;
    audit::record(
        conn,
        AuditEvent::named(
            user_id,
            "probe.created",
            json!({ "id": id, "label": body.label }),
        ),
    )
    .await?;
    if sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
    }
    match body.outcome.as_deref() {
        Some("fail") => Err(ApiError::Internal(anyhow::anyhow!(
            "forced failure after the insert"
        ))),
        Some("refuse") => Err(ApiError::invalid(
            raptor_api::codes::ErrorCode::InvalidOrder,
            "refused after the insert",
        )),
        Some("panic") => panic!("forced panic after the insert"),
        _ => Ok(Reply::json(
            StatusCode::CREATED,
            &json!({ "id": id, "label": body.label, "lineage": lineage }),
        )
        .with_location(format!("/probe/items/{id}"))),
    }
}
