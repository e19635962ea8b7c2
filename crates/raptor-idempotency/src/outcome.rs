//! The outcome of an instrumented request, as counted in
//! `raptor_idempotency_requests_total{endpoint, outcome}`.

/// One label value of the `outcome` metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The key was new (or expired): the handler ran.
    Miss,
    /// A completed response was replayed.
    Replay,
    /// Same key, different request: 422.
    Mismatch,
    /// Another attempt holds the key: 409.
    InFlight,
    /// The earlier attempt failed: 409.
    PreviousFailed,
    /// An abandoned attempt was fenced off and its row released.
    Stale,
    /// Fail-closed route could not claim in time: 503.
    StoreUnavailable,
    /// Fail-open route ran without dedup because the store could not answer.
    FailOpen,
    /// The header was malformed: 400.
    InvalidKey,
    /// No tracking: no key sent, or the kill switch is off.
    Passthrough,
}

impl Outcome {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Miss => "miss",
            Self::Replay => "replay",
            Self::Mismatch => "mismatch",
            Self::InFlight => "in_flight",
            Self::PreviousFailed => "previous_failed",
            Self::Stale => "stale",
            Self::StoreUnavailable => "store_unavailable",
            Self::FailOpen => "fail_open",
            Self::InvalidKey => "invalid_key",
            Self::Passthrough => "passthrough",
        }
    }

    /// Counts one request with this outcome.
    pub fn record(self, endpoint: &str) {
        metrics::counter!(
            "raptor_idempotency_requests_total",
            "endpoint" => endpoint.to_owned(),
            "outcome" => self.as_str(),
        )
        .increment(1);
    }
}
