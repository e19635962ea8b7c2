//! Typed calls of the routes, as methods of [`TestApp`] (`app.create_order(&token, key, &body)`),
//! and [`assert_problem`], the one matcher of error answers.

use raptor_api::codes::ErrorCode;
use std::fmt::Display;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{Call, TestApp, TestResponse};

/// The media type of every error answer (RFC 9457).
pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// The kill switch of the idempotency middleware.
pub(crate) const IDEMPOTENCY_FLAG: &str = "FLAG_IDEMPOTENCY_MIDDLEWARE";

/// `response` is an error answer: `status`, the `error` member `code`, served as
/// `application/problem+json`, with the code's `retry` advice. The code is typed, so a test cannot expect one the API does not
/// have.
#[track_caller]
pub(crate) fn assert_problem(response: &TestResponse, status: StatusCode, code: ErrorCode) {
    let retry = code.retry().as_str();
    let code = code.as_str();
    let media_type = response.header("content-type");
    assert!(
        response.status == status
            && response.body["error"].as_str() == Some(code)
            && media_type == Some(PROBLEM_JSON),
        "{}: expected {status} `{code}` as {PROBLEM_JSON}, got {} {:?} as {media_type:?}: {}",
        response.request,
        response.status,
        response.body["error"],
        response.text
    );
    assert_eq!(
        response.body["retry"].as_str(),
        Some(retry),
        "{}: `{code}` must advise `retry: {retry}`: {}",
        response.request,
        response.text
    );
}

impl TestApp {
    /// `GET path` without credentials.
    pub(crate) async fn get_public(&self, path: &str) -> TestResponse {
        self.send(Call::new(Method::GET, path)).await
    }

    /// `POST path` with a JSON body and without credentials.
    pub(crate) async fn post_public(&self, path: &str, body: &Value) -> TestResponse {
        self.send(Call::new(Method::POST, path).json(body)).await
    }

    /// The Prometheus scrape (which must succeed), as text.
    pub(crate) async fn metrics(&self) -> String {
        let metrics = self.get_public("/metrics").await;
        assert_eq!(metrics.status, StatusCode::OK, "{}", metrics.text);
        metrics.text
    }

    // The paper book.

    pub(crate) async fn create_order(
        &self,
        token: &str,
        key: impl Into<Option<Uuid>>,
        body: &Value,
    ) -> TestResponse {
        self.post("/api/trading/orders", token, key, body).await
    }

    pub(crate) async fn order(&self, token: &str, id: impl Display) -> TestResponse {
        self.get(&format!("/api/trading/orders/{id}"), token).await
    }

    /// `GET /api/trading/orders`, with `query` (`status=open`) when it is not empty.
    pub(crate) async fn list_orders(&self, token: &str, query: &str) -> TestResponse {
        if query.is_empty() {
            self.get("/api/trading/orders", token).await
        } else {
            self.get(&format!("/api/trading/orders?{query}"), token)
                .await
        }
    }

    pub(crate) async fn cancel_order(&self, token: &str, id: impl Display) -> TestResponse {
        self.send(Call::new(Method::DELETE, format!("/api/trading/orders/{id}")).token(token))
            .await
    }

    pub(crate) async fn account(&self, token: &str) -> TestResponse {
        self.get("/api/trading/account", token).await
    }

    /// The account's positions (the read must succeed).
    pub(crate) async fn positions(&self, token: &str) -> Vec<Value> {
        let response = self.get("/api/trading/positions", token).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        response.body.as_array().cloned().unwrap_or_default()
    }

    /// `POST /api/trading/positions/{symbol}/close`.
    pub(crate) async fn close_position(
        &self,
        token: &str,
        key: impl Into<Option<Uuid>>,
        symbol: &str,
        body: &Value,
    ) -> TestResponse {
        self.position_action(token, key, symbol, "close", body)
            .await
    }

    /// `POST /api/trading/positions/{symbol}/roll`.
    pub(crate) async fn roll(
        &self,
        token: &str,
        key: impl Into<Option<Uuid>>,
        symbol: &str,
        body: &Value,
    ) -> TestResponse {
        self.position_action(token, key, symbol, "roll", body).await
    }

    /// `POST /api/trading/positions/{symbol}/{action}`.
    async fn position_action(
        &self,
        token: &str,
        key: impl Into<Option<Uuid>>,
        symbol: &str,
        action: &str,
        body: &Value,
    ) -> TestResponse {
        let path = format!("/api/trading/positions/{symbol}/{action}");
        self.post(&path, token, key, body).await
    }

    /// `POST /api/trading/account/reset` with `{}`.
    pub(crate) async fn reset_account(
        &self,
        token: &str,
        key: impl Into<Option<Uuid>>,
    ) -> TestResponse {
        self.post("/api/trading/account/reset", token, key, &json!({}))
            .await
    }

    // Administration.

    /// `PUT /api/admin/quotes/{symbol}` (an operator's quote update, over HTTP).
    pub(crate) async fn put_quote(&self, token: &str, symbol: &str, body: &Value) -> TestResponse {
        let path = format!("/api/admin/quotes/{symbol}");
        self.send(Call::new(Method::PUT, path).token(token).json(body))
            .await
    }

    /// `PUT /api/admin/flags/{flag}` with `{ "enabled": enabled }`.
    pub(crate) async fn set_flag(&self, token: &str, flag: &str, enabled: bool) -> TestResponse {
        let path = format!("/api/admin/flags/{flag}");
        let body = json!({ "enabled": enabled });
        self.send(Call::new(Method::PUT, path).token(token).json(&body))
            .await
    }

    // The user's account.

    pub(crate) async fn profile(&self, token: &str) -> TestResponse {
        self.get("/api/account/profile", token).await
    }

    pub(crate) async fn patch_profile(
        &self,
        token: &str,
        key: impl Into<Option<Uuid>>,
        body: &Value,
    ) -> TestResponse {
        let call = Call::new(Method::PATCH, "/api/account/profile")
            .token(token)
            .json(body);
        self.send(call.maybe_key(key)).await
    }

    pub(crate) async fn export(&self, token: &str) -> TestResponse {
        self.get("/api/account/export", token).await
    }

    /// `POST /api/account/erasure` with `{}`.
    pub(crate) async fn erase(&self, token: &str) -> TestResponse {
        self.post("/api/account/erasure", token, None, &json!({}))
            .await
    }

    // Sign-up and sessions.

    pub(crate) async fn register(&self, email: &str) -> TestResponse {
        self.post_public("/api/auth/register", &json!({ "email": email }))
            .await
    }

    /// Verifies a link token (sign-up or login): the answer holds the session.
    pub(crate) async fn verify(&self, link: &str) -> TestResponse {
        let body = json!({ "token": link });
        self.post_public("/api/auth/register/verify-with-token", &body)
            .await
    }

    pub(crate) async fn login(&self, email: &str) -> TestResponse {
        self.post_public("/api/auth/login", &json!({ "email": email }))
            .await
    }

    pub(crate) async fn logout(&self, token: &str) -> TestResponse {
        self.send(Call::new(Method::POST, "/api/auth/logout").token(token))
            .await
    }

    pub(crate) async fn join_waitlist(&self, body: &Value) -> TestResponse {
        self.post_public("/api/waitlist/signup", body).await
    }

    /// Signs `email` up through HTTP: register, read the link, verify. The user id and session.
    pub(crate) async fn sign_up(&self, email: &str) -> (i32, String) {
        let registered = self.register(email).await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        let verified = self
            .verify(&self.outbox_token(email, "verify_email").await)
            .await;
        assert_eq!(verified.status, StatusCode::OK, "{}", verified.text);
        let user_id = verified.body["user_id"].as_i64().expect("user_id");
        let token = verified.body["token"].as_str().expect("token").to_owned();
        (i32::try_from(user_id).expect("i32"), token)
    }
}
