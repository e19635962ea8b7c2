//! `GET`/`PATCH /api/account/profile`, `GET /api/account/export`, `POST /api/account/erasure`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use raptor_idempotency::{Idempotent, Policy, Replay, Reply, Tier, Tier2};
use serde_json::Value;

use super::dto::{AccountExport, ErasureResponse, ProfileChanges, ProfilePatch, ProfileResponse};
use super::store::{self, Profile};
use crate::auth::AuthUser;
use crate::error::{ApiResult, ResultExt};
use crate::openapi::IdempotencyKeyHeader;
use crate::state::ApiState;

impl From<Profile> for ProfileResponse {
    fn from(profile: Profile) -> Self {
        Self {
            user_id: profile.id,
            email: profile.email,
            display_name: profile.display_name,
            time_zone: profile.time_zone,
            marketing_opt_in: profile.marketing_opt_in,
            updated_at: profile.updated_at,
        }
    }
}

/// Tier 2 for a response that holds personal data (the design record's rule): nothing of it is
/// kept on the key row, and a retry of a completed key re-executes.
pub(crate) struct PersonalData;

impl Policy for PersonalData {
    const TIER: Tier = Tier::FailOpen;
    const TTL: std::time::Duration = Tier2::TTL;
    const REPLAY: Replay = Replay::ReExecute;
}

/// Read the caller's profile
///
/// The caller's email, display name, time zone and marketing consent, with when they last changed.
/// `404 not_found` when the user was erased meanwhile.
#[utoipa::path(get, path = "/api/account/profile", tag = "account",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the profile", body = ProfileResponse),
    ))]
pub(crate) async fn get_profile(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Json<ProfileResponse>> {
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let profile = store::profile(&mut conn, user.id).await?;
    conn.finish().await.context("finish")?;
    Ok(Json(profile.into()))
}

/// Change the caller's profile
///
/// Only the fields sent change; `null` clears `display_name` or `time_zone`. Tier 2 (fail-open,
/// keys kept 7 days). The answer is personal data, so it is never stored: a retry with the same key
/// runs the patch again and answers the profile as it is then. `422 invalid_display_name`,
/// `invalid_time_zone` or `invalid_marketing_opt_in` for a bad value.
#[utoipa::path(patch, path = "/api/account/profile", tag = "account",
    security(("bearer" = [])),
    params(IdempotencyKeyHeader),
    request_body = ProfilePatch,
    responses(
        (status = 200, description = "the profile after the change", body = ProfileResponse),
    ))]
pub(crate) async fn update_profile(
    Idempotent {
        claim,
        body,
        auth: user,
        ..
    }: Idempotent<ProfilePatch, PersonalData, AuthUser>,
) -> Response {
    claim
        .run(async |tx| {
            let changes = ProfileChanges::try_from(body)?;
            let profile = store::update_profile(tx, user.id, changes).await?;
            Ok::<_, crate::ApiError>(Reply::json(StatusCode::OK, &ProfileResponse::from(profile)))
        })
        .await
}

/// Export the caller's data
///
/// Everything stored about the caller (GDPR access and portability), idempotency keys included, as
/// one JSON object streamed from one consistent snapshot, so an account of any size is exported in
/// bounded memory.
#[utoipa::path(get, path = "/api/account/export", tag = "account",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the caller's data (streamed; a transfer that ends early is incomplete)", body = AccountExport),
    ))]
pub(crate) async fn export_account(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Response> {
    super::export::respond(&state, user.id).await
}

/// Erase the caller's data
///
/// Erases everything stored about the caller (GDPR): idempotency keys, audit rows, orders, fills,
/// positions, the paper account, sessions, sign-in links, outbox messages, waitlist rows and the
/// billing mirror; operator-owned rows that named the user keep no reference. The token stops
/// working. `409 subscription_active` while a subscription still renews: cancel it first.
#[utoipa::path(post, path = "/api/account/erasure", tag = "account",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "erased; counts of deleted rows", body = ErasureResponse),
    ))]
pub(crate) async fn erase_account(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Json<Value>> {
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    let erased = store::erase(&mut tx, user.id).await?;
    tx.commit().await.context("commit")?;
    Ok(Json(erased))
}
