//! Wire types of the waitlist.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /api/waitlist/signup`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitlistSignupRequest {
    /// The address to notify.
    #[schema(example = "ada@example.com", format = Email, max_length = 254)]
    pub email: String,
}

/// The answer, the same for a first signup and a repeat.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WaitlistSignupResponse {
    /// Always `accepted`.
    #[schema(example = "accepted")]
    pub status: &'static str,
}
