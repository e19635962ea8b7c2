//! `POST /api/waitlist/signup`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::json;

use super::dto::{WaitlistSignupRequest, WaitlistSignupResponse};
use super::store;
use crate::accounts::dto::Email;
use crate::audit::{self, AuditAction, AuditEvent};
use crate::error::{ApiResult, ResultExt};
use crate::extract::ApiJson;
use crate::state::ApiState;

/// Join the waitlist
///
/// Adds an email address to the waitlist. A repeat (any letter case) is `202` again and changes
/// nothing, so the answer does not tell whether the address was already there. `422 invalid_email`.
#[utoipa::path(post, path = "/api/waitlist/signup", tag = "waitlist",
    request_body = WaitlistSignupRequest,
    responses(
        (status = 202, description = "on the list", body = WaitlistSignupResponse),
    ))]
pub(crate) async fn join_waitlist(
    State(state): State<ApiState>,
    ApiJson(request): ApiJson<WaitlistSignupRequest>,
) -> ApiResult<(StatusCode, Json<WaitlistSignupResponse>)> {
    let email = Email::parse(&request.email)?;
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    if let Some(id) = store::insert_signup(&mut tx, &email).await? {
        // The row id only: the address is personal data and the audit log outlives erasure of
        // waitlist rows (they have no user).
        audit::record(
            &mut tx,
            AuditEvent::new(
                None,
                AuditAction::WaitlistJoined,
                json!({ "waitlist_signup_id": id }),
            ),
        )
        .await
        .context("audit waitlist")?;
    }
    tx.commit().await.context("commit waitlist")?;
    Ok((
        StatusCode::ACCEPTED,
        Json(WaitlistSignupResponse { status: "accepted" }),
    ))
}
