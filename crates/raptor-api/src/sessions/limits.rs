//! Rate limits of register and login, per email address and per client IP: `governor` keyed
//! GCRA limiters, in process memory (each server process counts on its own).

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::error::ApiError;

/// Rate limits of `POST /api/auth/register` and `POST /api/auth/login`.
#[derive(Debug, Clone, Copy)]
pub struct AuthLimits {
    /// Requests per hour for one email address (`RAPTOR_AUTH_EMAIL_PER_HOUR`).
    pub per_email_per_hour: u32,
    /// Requests per minute from one client IP address (`RAPTOR_AUTH_IP_PER_MINUTE`).
    pub per_ip_per_minute: u32,
}

impl Default for AuthLimits {
    fn default() -> Self {
        Self {
            per_email_per_hour: 5,
            per_ip_per_minute: 30,
        }
    }
}

/// How many checks pass between two sweeps of idle keys.
const RETAIN_EVERY: u64 = 1024;

/// The sign-up and login rate limiters. Register and login share them: both send an email to
/// the address, and both are what an attacker would hammer.
pub struct AuthLimiter {
    per_email: DefaultKeyedRateLimiter<String>,
    per_ip: DefaultKeyedRateLimiter<IpAddr>,
    clock: DefaultClock,
    checks: AtomicU64,
}

impl std::fmt::Debug for AuthLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthLimiter")
            .field("emails", &self.per_email.len())
            .field("ips", &self.per_ip.len())
            .finish()
    }
}

impl AuthLimiter {
    /// Limiters for `limits`. A limit of 0 is read as 1 (configuration validates the range).
    pub fn new(limits: AuthLimits) -> Self {
        let per_hour = NonZeroU32::new(limits.per_email_per_hour).unwrap_or(NonZeroU32::MIN);
        let per_minute = NonZeroU32::new(limits.per_ip_per_minute).unwrap_or(NonZeroU32::MIN);
        Self {
            per_email: RateLimiter::keyed(Quota::per_hour(per_hour)),
            per_ip: RateLimiter::keyed(Quota::per_minute(per_minute)),
            clock: DefaultClock::default(),
            checks: AtomicU64::new(0),
        }
    }

    /// Counts one request for `email` (already lower-cased) from `ip` (when the server knows
    /// the peer). Over either limit: `429 rate_limited` with the wait until the next allowed one.
    pub fn check(&self, email: &str, ip: Option<IpAddr>) -> Result<(), ApiError> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            // Forget keys whose buckets are full again, so the maps do not grow without bound.
            self.per_email.retain_recent();
            self.per_ip.retain_recent();
        }
        // The IP first: a client spraying many addresses is stopped before it touches (and
        // uses up) the per-address budget of its victims.
        if let Some(ip) = ip.map(client_network) {
            self.per_ip
                .check_key(&ip)
                .map_err(|not_until| self.limited(not_until.wait_time_from(self.clock.now())))?;
        }
        self.per_email
            .check_key(&email.to_owned())
            .map_err(|not_until| self.limited(not_until.wait_time_from(self.clock.now())))
    }

    fn limited(&self, wait: std::time::Duration) -> ApiError {
        // Round up: a client that waits `Retry-After` seconds must then succeed.
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        ApiError::TooManyRequests {
            retry_after_secs: secs.max(1),
        }
    }
}

/// The key of a client address: an IPv4 address as is, an IPv6 address by its /64 (one
/// subscriber's allocation: rotating addresses inside it must not escape the limit).
fn client_network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
        v4 @ IpAddr::V4(_) => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_are_keyed_by_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().expect("ip");
        let other: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert_eq!(client_network(a), client_network(b));
        assert_ne!(client_network(a), client_network(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        assert_eq!(
            client_network(mapped),
            "192.0.2.7".parse::<IpAddr>().expect("ip")
        );
        let limiter = AuthLimiter::new(AuthLimits {
            per_email_per_hour: 100,
            per_ip_per_minute: 1,
        });
        assert!(limiter.check("x@example.com", Some(a)).is_ok());
        assert!(limiter.check("y@example.com", Some(b)).is_err(), "same /64");
        assert!(limiter.check("z@example.com", Some(other)).is_ok());
    }

    #[test]
    fn per_email_limit_then_retry_after() {
        let limiter = AuthLimiter::new(AuthLimits {
            per_email_per_hour: 2,
            per_ip_per_minute: 100,
        });
        assert!(limiter.check("a@x.com", None).is_ok());
        assert!(limiter.check("a@x.com", None).is_ok());
        match limiter.check("a@x.com", None) {
            Err(ApiError::TooManyRequests { retry_after_secs }) => {
                assert!((1..=1800).contains(&retry_after_secs), "{retry_after_secs}");
            }
            other => panic!("expected 429, got {other:?}"),
        }
        assert!(
            limiter.check("b@x.com", None).is_ok(),
            "other keys unaffected"
        );
    }

    #[test]
    fn per_ip_limit() {
        let limiter = AuthLimiter::new(AuthLimits {
            per_email_per_hour: 100,
            per_ip_per_minute: 1,
        });
        let ip = Some(IpAddr::from([10, 0, 0, 1]));
        assert!(limiter.check("a@x.com", ip).is_ok());
        assert!(limiter.check("b@x.com", ip).is_err());
        assert!(limiter
            .check("c@x.com", Some(IpAddr::from([10, 0, 0, 2])))
            .is_ok());
    }
}
