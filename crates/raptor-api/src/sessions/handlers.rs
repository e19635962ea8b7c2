//! Sign-up and session handlers. None is idempotency-instrumented: their answers carry
//! credentials, which must never be stored in `idempotency_keys`; each is idempotent by design
//! instead (a repeated register or login only queues another link, a repeated verification
//! returns the same user, a repeated logout finds no session).

use std::time::Duration;

use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CACHE_CONTROL};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;

use super::dto::{AcceptedResponse, EmailRequest, SessionResponse, VerifyRequest};
use super::store::{self, Link, OutboxMessage, Purpose};
use crate::accounts::dto::Email;
use crate::accounts::store as accounts;
use crate::audit::{self, AuditAction, AuditEvent};
use crate::auth::{AuthUser, Role};
use crate::client_addr::ClientAddr;
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::extract::ApiJson;
use crate::state::ApiState;

/// A sign-up link is valid this long.
const REGISTER_LINK_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// A login link is valid this long (it opens an existing account: shorter).
const LOGIN_LINK_TTL: Duration = Duration::from_secs(60 * 60);
/// A used link verifies again, for the same user, this long after its first use: a client whose
/// response was lost can retry. After it, the link is spent (`400 invalid_token`).
pub const REVERIFY_GRACE: Duration = Duration::from_secs(15 * 60);

/// The client's address ([`crate::client_addr`]), when the server was started with connect
/// info (`raptor serve` is).
type Peer = Option<Extension<ClientAddr>>;

fn accepted() -> (StatusCode, Json<AcceptedResponse>) {
    (StatusCode::ACCEPTED, Json(AcceptedResponse::ACCEPTED))
}

fn invalid_token() -> ApiError {
    ApiError::bad_request(
        ErrorCode::InvalidToken,
        "the link is unknown, expired or already used",
    )
}

/// The request's address, once the address and the client IP are within their rate limits.
fn admit(state: &ApiState, peer: Peer, request: &EmailRequest) -> ApiResult<Email> {
    let email = Email::parse(&request.email)?;
    state
        .auth_limiter
        .check(&email.key(), peer.map(|Extension(ClientAddr(ip))| ip))?;
    Ok(email)
}

/// Start sign-up by email
///
/// Emails a verification link (valid 24 hours). The answer is the same whether or not the address
/// has an account (an existing user is sent a login link instead), so it cannot be used to probe
/// for accounts. `422 invalid_email`; `429 rate_limited` per address and per client IP.
#[utoipa::path(post, path = "/api/auth/register", tag = "auth",
    request_body = EmailRequest,
    responses(
        (status = 202, description = "accepted; a link is on its way if the address can receive one", body = AcceptedResponse),
    ))]
pub(crate) async fn register(
    State(state): State<ApiState>,
    peer: Peer,
    ApiJson(request): ApiJson<EmailRequest>,
) -> ApiResult<impl IntoResponse> {
    let email = admit(&state, peer, &request)?;
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    let token = store::new_link_token()?;
    match accounts::find_user_by_email(&mut tx, &email).await? {
        Some(user_id) => {
            let intro = "Someone asked to sign up for Raptor with this address, which already \
                         has an account.";
            queue_login_link(&mut tx, &state, &email, user_id, &token, intro).await?;
        }
        None => {
            let link = store::link_url(&state.config.public_url, Purpose::Register, &token);
            store::insert_link(
                &mut tx,
                &token,
                Purpose::Register,
                email.as_str(),
                None,
                REGISTER_LINK_TTL,
            )
            .await?;
            store::enqueue_email(
                &mut tx,
                OutboxMessage {
                    user_id: None,
                    email: email.as_str(),
                    kind: "verify_email",
                    subject: "Confirm your email for Raptor",
                    body: format!(
                        "Welcome to Raptor. To confirm this address and open your paper trading \
                         account, open this link within 24 hours:\n\n{link}\n\n\
                         or enter this one-time token in the app:\n\n{token}\n\n\
                         If this was not you, ignore this message.\n"
                    ),
                    link,
                },
            )
            .await?;
        }
    }
    tx.commit().await.context("commit register")?;
    Ok(accepted())
}

/// Request a login link
///
/// Emails a login link (valid 1 hour) to an existing account. Always `202`: for an unknown address
/// nothing is sent, so the answer cannot be used to probe for accounts. `422 invalid_email`; `429
/// rate_limited` per address and per client IP, like sign-up.
#[utoipa::path(post, path = "/api/auth/login", tag = "auth",
    request_body = EmailRequest,
    responses(
        (status = 202, description = "accepted; a link is on its way if the address has an account", body = AcceptedResponse),
    ))]
pub(crate) async fn login(
    State(state): State<ApiState>,
    peer: Peer,
    ApiJson(request): ApiJson<EmailRequest>,
) -> ApiResult<impl IntoResponse> {
    let email = admit(&state, peer, &request)?;
    // The work happens after the answer: a known and an unknown address answer alike and in
    // the same time, so neither the body nor the latency tells whether an account exists.
    // Owed work: shutdown waits for it (`Idempotency::drain`).
    let background = state.idempotency.background().clone();
    background.spawn(async move {
        if let Err(err) = send_login_link(&state, &email).await {
            tracing::warn!(error = %err, "could not queue a login link");
        }
    });
    Ok(accepted())
}

/// Queues a login link for `email` if it has an account (nothing otherwise).
async fn send_login_link(state: &ApiState, email: &Email) -> ApiResult<()> {
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    if let Some(user_id) = accounts::find_user_by_email(&mut tx, email).await? {
        let token = store::new_link_token()?;
        queue_login_link(&mut tx, state, email, user_id, &token, "").await?;
    }
    tx.commit().await.context("commit login")?;
    Ok(())
}

/// Writes a login link for `user_id` (valid 1 h) and its message to the outbox.
async fn queue_login_link(
    tx: &mut sqlx::PgConnection,
    state: &ApiState,
    email: &Email,
    user_id: i32,
    token: &str,
    intro: &str,
) -> ApiResult<()> {
    store::insert_link(
        tx,
        token,
        Purpose::Login,
        email.as_str(),
        Some(user_id),
        LOGIN_LINK_TTL,
    )
    .await?;
    let link = store::link_url(&state.config.public_url, Purpose::Login, token);
    let intro = if intro.is_empty() {
        String::new()
    } else {
        format!("{intro} ")
    };
    store::enqueue_email(
        tx,
        OutboxMessage {
            user_id: Some(user_id),
            email: email.as_str(),
            kind: "login_link",
            subject: "Sign in to Raptor",
            body: format!(
                "{intro}To sign in to Raptor, open this link within an hour:\n\n{link}\n\n\
                 or enter this one-time token in the app:\n\n{token}\n\n\
                 If this was not you, ignore this message.\n"
            ),
            link,
        },
    )
    .await
}

/// Exchange an emailed link's token for a session
///
/// Verifies a sign-up or login link: a session, and on the first use of a sign-up link a new user
/// with a paper account. A repeat within 15 minutes answers the same session, so whichever answer
/// the app keeps works; after that, or after logout of that session, the link is spent (`400
/// invalid_token`, also for an unknown or expired token). Never creates a second user for one
/// address.
#[utoipa::path(post, path = "/api/auth/register/verify-with-token", tag = "auth",
    request_body = VerifyRequest,
    responses(
        (status = 200, description = "the link's session (Cache-Control: no-store); the same one on every verification of the link", body = SessionResponse),
    ))]
pub(crate) async fn verify_link(
    State(state): State<ApiState>,
    ApiJson(request): ApiJson<VerifyRequest>,
) -> ApiResult<Response> {
    let token = request.token.trim();
    if token.is_empty() || token.len() > 128 {
        return Err(invalid_token());
    }
    // The link's one session: derived from the link with the server key, never stored.
    let session = state.config.session_key.session_token(token)?;
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    let link = store::lock_link(&mut tx, token, REVERIFY_GRACE)
        .await?
        .ok_or_else(invalid_token)?;
    let user_id = if link.used {
        // A repeat: only within the grace, and only while the link's session lives (its
        // logout ends the grace too).
        let (false, Some(user_id), Some(_)) =
            (link.grace_over, link.user_id, link.session_token_id)
        else {
            return Err(invalid_token());
        };
        if let Some(session_id) =
            store::insert_session_if_new(&mut tx, user_id, &session, state.config.session_ttl)
                .await?
        {
            // Another replica with another RAPTOR_SESSION_KEY: its session stays valid too.
            tracing::warn!(
                link.id = link.id,
                "a repeated verification derived another session; is RAPTOR_SESSION_KEY the same on every replica?"
            );
            store::set_link_session(&mut tx, link.id, session_id).await?;
            audit_session(&mut tx, user_id, &link, true).await?;
        }
        user_id
    } else if link.expired {
        return Err(invalid_token());
    } else {
        let user_id = first_verification(&mut tx, &state, &link).await?;
        store::mark_link_used(&mut tx, link.id, user_id).await?;
        let session_id =
            store::insert_session_if_new(&mut tx, user_id, &session, state.config.session_ttl)
                .await?
                .ok_or_else(|| {
                    ApiError::Internal(anyhow::anyhow!("a fresh link's session already exists"))
                })?;
        store::set_link_session(&mut tx, link.id, session_id).await?;
        audit_session(&mut tx, user_id, &link, false).await?;
        user_id
    };
    tx.commit().await.context("commit verification")?;
    let body = SessionResponse {
        user_id,
        token: session,
    };
    // A credential: no cache may keep it.
    Ok((
        [(CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Json(body),
    )
        .into_response())
}

async fn audit_session(
    tx: &mut sqlx::PgConnection,
    user_id: i32,
    link: &Link,
    repeat: bool,
) -> ApiResult<()> {
    audit::record(
        tx,
        AuditEvent::new(
            Some(user_id),
            AuditAction::SessionCreated,
            json!({ "via": link.purpose.as_str(), "link_id": link.id, "repeat": repeat }),
        ),
    )
    .await
    .context("audit session")?;
    Ok(())
}

/// The user a first verification signs in: the link's user, else the address's user, else (a
/// sign-up link) a new one. Two sign-up links of one address verified at once both end on one
/// user: the `lower(email)` unique index lets one insert win, the other reads it.
async fn first_verification(
    tx: &mut sqlx::PgConnection,
    state: &ApiState,
    link: &Link,
) -> ApiResult<i32> {
    if let Some(user_id) = link.user_id {
        return Ok(user_id);
    }
    let email = Email::parse(&link.email)?;
    if let Some(user_id) = accounts::find_user_by_email(tx, &email).await? {
        return Ok(user_id);
    }
    if link.purpose != Purpose::Register {
        return Err(invalid_token());
    }
    let starting_cash = state.config.paper_starting_cash;
    if let Some(user_id) = accounts::insert_user(tx, &email, Role::User, starting_cash).await? {
        audit::record(
            tx,
            AuditEvent::new(
                Some(user_id),
                AuditAction::UserRegistered,
                json!({ "role": Role::User.as_str(), "starting_cash": starting_cash.to_string(), "link_id": link.id }),
            ),
        )
        .await
        .context("audit registration")?;
        return Ok(user_id);
    }
    // Lost the race to a concurrent verification of another link: its user is committed now.
    accounts::find_user_by_email(tx, &email)
        .await?
        .ok_or_else(invalid_token)
}

/// End the current session
///
/// Revokes the session of the bearer token: the token is refused (`401 unauthenticated`) from now
/// on. The user's other sessions stay valid.
#[utoipa::path(post, path = "/api/auth/logout", tag = "auth",
    security(("bearer" = [])),
    responses(
        (status = 204, description = "the session is revoked"),
    ))]
pub(crate) async fn logout(
    State(state): State<ApiState>,
    user: AuthUser,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    // The extractor authenticated this very header; it is present and well-formed.
    let token = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .map(|(_, token)| token.trim())
        .ok_or(ApiError::Unauthenticated)?;
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    if store::delete_session(&mut tx, user.id, token).await? {
        audit::record(
            &mut tx,
            AuditEvent::new(Some(user.id), AuditAction::SessionRevoked, json!({})),
        )
        .await
        .context("audit logout")?;
    }
    tx.commit().await.context("commit logout")?;
    Ok(StatusCode::NO_CONTENT)
}
