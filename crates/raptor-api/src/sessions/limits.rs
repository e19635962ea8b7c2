//! Rate limits of register and login, per email and per client IP. (Skeleton.)

use crate::state::AuthLimits;

/// The sign-up and login rate limiters.
#[derive(Debug)]
pub struct AuthLimiter {}

impl AuthLimiter {
    /// Limiters for `limits`.
    pub fn new(_limits: AuthLimits) -> Self {
        Self {}
    }
}
