//! Operational endpoints: liveness, readiness, metrics, the OpenAPI document and its pages.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ApiState;

/// Liveness/readiness answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HealthResponse {
    /// `ok`, `unavailable` or `draining`.
    pub(crate) status: &'static str,
    /// Readiness only: each dependency and whether it answered (`ok` or `unavailable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) checks: Option<ReadinessChecks>,
}

/// What `/readyz` asked.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReadinessChecks {
    /// The business pool (`DATABASE_URL`): every request's transaction.
    pub(crate) database: &'static str,
    /// The idempotency store's pool (`IDEMPOTENCY_STORE_DATABASE_URL`, or the same database):
    /// the claim of every keyed request. A replica that cannot reach it is not ready: Tier 1
    /// routes would answer 503.
    pub(crate) idempotency_store: &'static str,
}

/// Each operation's own error codes (`crate::codes`), by operationId: none of its own.
pub(crate) const ROUTE_CODES: &[crate::codes::RouteCodes] = &[
    ("get_healthz", &[]),
    ("get_metrics", &[&[crate::codes::ErrorCode::NotFound]]),
    ("get_readyz", &[]),
];

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(get_healthz))
        .routes(routes!(get_readyz))
        .routes(routes!(get_metrics))
}

/// Liveness probe
///
/// `200` while the process runs; it does not look at the database (that is `/readyz`). For load
/// balancers and orchestrators, not for apps.
#[utoipa::path(get, path = "/healthz", tag = "ops",
    responses((status = 200, description = "alive", body = HealthResponse)))]
pub(crate) async fn get_healthz() -> Json<HealthResponse> {
    Json(HealthResponse {
        status: "ok",
        checks: None,
    })
}

/// Readiness probe
///
/// `200` when both the database and the idempotency store answer within a second, else `503`;
/// `checks` says which one did not. Also `503` while the process shuts down. Each is asked on a
/// connection of its own (`ApiState::readiness`), never one of the request pools: a replica
/// whose pools are all busy is still ready. For load balancers and orchestrators, not for apps.
#[utoipa::path(get, path = "/readyz", tag = "ops",
    responses(
        (status = 200, description = "ready", body = HealthResponse),
        (status = 503, description = "a dependency does not answer (`unavailable`, and `checks` names it), or shutdown has begun (`draining`)", body = HealthResponse),
    ))]
pub(crate) async fn get_readyz(State(state): State<ApiState>) -> Response {
    if state.is_draining() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(HealthResponse {
                status: "draining",
                checks: None,
            }),
        )
            .into_response();
    }
    let probes = state.readiness();
    let (database, store) = tokio::join!(
        ping(&probes.database, "database"),
        ping(&probes.store, "idempotency store"),
    );
    let word = |ok: bool| if ok { "ok" } else { "unavailable" };
    let ready = database && store;
    let body = HealthResponse {
        status: word(ready),
        checks: Some(ReadinessChecks {
            database: word(database),
            idempotency_store: word(store),
        }),
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Whether `pool` answers `select 1` within a second.
async fn ping(pool: &sqlx::PgPool, what: &'static str) -> bool {
    let ping = async {
        let mut conn = raptor_db::conn(pool).await?;
        raptor_db::query_scalar::<i32>("select 1")
            .fetch_one(&mut *conn)
            .await?;
        conn.finish().await
    };
    match tokio::time::timeout(Duration::from_secs(1), ping).await {
        Ok(Ok(())) => true,
        Ok(Err(err)) => {
            tracing::warn!(error = %err, what, "readiness check failed");
            false
        }
        Err(_) => {
            tracing::warn!(what, "readiness check timed out");
            false
        }
    }
}

/// Prometheus metrics
///
/// The process's metrics in the Prometheus text exposition format (requests, idempotency
/// outcomes, pools, sweeps, schedules). With `RAPTOR_METRICS_ADDR` set they are served on that
/// listener only, and this route answers `404 not_found` here. For the Prometheus scraper, not for
/// apps.
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
pub(crate) async fn get_metrics(State(state): State<ApiState>) -> Response {
    if !state.config.metrics_on_api_listener {
        return crate::ApiError::NotFound("route").into_response();
    }
    crate::metrics::answer(&state)
}
