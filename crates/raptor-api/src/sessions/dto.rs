//! Wire types of the sign-up and session routes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /api/auth/register`, `POST /api/auth/login`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmailRequest {
    /// The address to send the link to.
    #[schema(example = "ada@example.com", format = Email, max_length = 254)]
    pub email: String,
}

/// The answer of routes that queue an email: the same whether or not the address is known.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AcceptedResponse {
    /// Always `accepted`.
    #[schema(example = "accepted")]
    pub status: &'static str,
}

impl AcceptedResponse {
    /// `{"status": "accepted"}`.
    pub const ACCEPTED: Self = Self { status: "accepted" };
}

/// `POST /api/auth/register/verify-with-token`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// The token from the emailed link.
    pub token: String,
}

/// A new session.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionResponse {
    /// `users.id`.
    pub user_id: i32,
    /// The bearer token (shown once; expires after the session TTL).
    pub token: String,
}
