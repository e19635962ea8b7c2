//! The Stripe webhook's pure parts: `Stripe-Signature` verification (HMAC-SHA256 over
//! `"{t}.{raw body}"`, any `v1` candidate, 5-minute tolerance) and the event envelope.

use chrono::{DateTime, TimeZone, Utc};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;

use super::stripe::Subscription;
use crate::codes::ErrorCode;
use crate::error::ApiError;

/// The largest accepted distance between the signature's timestamp and our clock.
pub const TOLERANCE_SECS: i64 = 300;

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &str, timestamp: &str, payload: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length: `new_from_slice` never fails for it.
    let Ok(mut mac) = HmacSha256::new_from_slice(secret.as_bytes()) else {
        unreachable!("HMAC takes keys of any length")
    };
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(payload);
    mac
}

/// A `Stripe-Signature` header value for `payload` signed at `timestamp` (Unix seconds), as
/// Stripe computes it. For tests and tooling that replay events against this service.
pub fn signature_header(secret: &str, timestamp: i64, payload: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    let digest = mac(secret, &timestamp, payload).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(digest))
}

fn invalid_signature(message: &str) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidSignature, message)
}

/// Verifies `header` for `payload`: accepted when any `v1` candidate matches (compared in
/// constant time) and the timestamp is within [`TOLERANCE_SECS`] of `now`.
pub(crate) fn verify(
    header: Option<&str>,
    payload: &[u8],
    secret: &str,
    now: DateTime<Utc>,
) -> Result<(), ApiError> {
    let header = header.ok_or_else(|| invalid_signature("Stripe-Signature header missing"))?;
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) if timestamp.is_none() => timestamp = Some(value.trim()),
            // A candidate that is not hex cannot match; it does not spoil the others.
            Some(("v1", value)) => candidates.extend(hex::decode(value.trim()).ok()),
            _ => {}
        }
    }
    let timestamp =
        timestamp.ok_or_else(|| invalid_signature("Stripe-Signature has no timestamp"))?;
    let seconds: i64 = timestamp
        .parse()
        .map_err(|_| invalid_signature("Stripe-Signature timestamp is not a number"))?;
    if candidates.is_empty() {
        return Err(invalid_signature("Stripe-Signature has no v1 signature"));
    }
    let expected = mac(secret, timestamp, payload);
    let matched = candidates
        .iter()
        .any(|candidate| expected.clone().verify_slice(candidate).is_ok());
    if !matched {
        return Err(invalid_signature("no signature matches the payload"));
    }
    if now.timestamp().abs_diff(seconds) > TOLERANCE_SECS.unsigned_abs() {
        return Err(invalid_signature(
            "Stripe-Signature timestamp is outside the 5-minute tolerance",
        ));
    }
    Ok(())
}

/// A Stripe event (the envelope; `data.object` is read by type).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Event {
    /// `evt_…`: the dedup key.
    pub(crate) id: String,
    /// e.g. `customer.subscription.updated`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// Unix seconds: when Stripe created the event (orders the mirror's states).
    pub(crate) created: i64,
    #[serde(default)]
    pub(crate) livemode: bool,
    pub(crate) data: EventData,
}

/// `data` of an event.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct EventData {
    pub(crate) object: Value,
}

/// `data.object` of `checkout.session.completed` (the fields we use).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CompletedCheckout {
    #[serde(default)]
    pub(crate) customer: Option<String>,
    #[serde(default)]
    pub(crate) subscription: Option<String>,
    /// Our user id, set when the session was created.
    #[serde(default)]
    pub(crate) client_reference_id: Option<String>,
}

/// What an event asks of the mirror.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// `customer.subscription.created|updated|deleted`.
    Subscription(Box<Subscription>),
    /// `checkout.session.completed`.
    CheckoutCompleted(CompletedCheckout),
    /// Any other type: recorded and acknowledged.
    Ignored,
}

/// A verified, parsed event.
#[derive(Debug, Clone)]
pub(crate) struct ParsedEvent {
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) created: DateTime<Utc>,
    pub(crate) livemode: bool,
    pub(crate) change: Change,
}

/// The event types whose own name is a `type` label of `raptor_stripe_webhook_events_total`
/// (the ones applied); every other type counts as `other`, so the label stays bounded.
const COUNTED_TYPES: &[&str] = &[
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "checkout.session.completed",
];

impl ParsedEvent {
    /// The event's `type` label: its type when it is one of [`COUNTED_TYPES`], else `other`.
    pub(crate) fn metric_type(&self) -> &'static str {
        let counted = match self.change {
            Change::Ignored => None,
            _ => COUNTED_TYPES.iter().find(|t| **t == self.kind),
        };
        counted.copied().unwrap_or("other")
    }
}

fn invalid_payload(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidPayload, message)
}

fn checked_text(what: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > 255 || value.contains('\0') {
        return Err(invalid_payload(format!(
            "event {what} is empty or malformed"
        )));
    }
    Ok(())
}

/// Parses a verified payload. Everything is checked before the transaction starts, so a
/// malformed event writes nothing.
pub(crate) fn parse(payload: &[u8]) -> Result<ParsedEvent, ApiError> {
    let event: Event = serde_json::from_slice(payload)
        .map_err(|err| invalid_payload(format!("not a Stripe event: {err}")))?;
    checked_text("id", &event.id)?;
    checked_text("type", &event.kind)?;
    let created = Utc
        .timestamp_opt(event.created, 0)
        .single()
        .ok_or_else(|| invalid_payload("event created is out of range"))?;
    let change = match event.kind.as_str() {
        "customer.subscription.created"
        | "customer.subscription.updated"
        | "customer.subscription.deleted" => {
            let subscription: Subscription = serde_json::from_value(event.data.object)
                .map_err(|err| invalid_payload(format!("not a subscription: {err}")))?;
            checked_text("subscription id", &subscription.id)?;
            checked_text("customer id", &subscription.customer)?;
            checked_text("status", &subscription.status)?;
            Change::Subscription(Box::new(subscription))
        }
        "checkout.session.completed" => {
            let session: CompletedCheckout = serde_json::from_value(event.data.object)
                .map_err(|err| invalid_payload(format!("not a checkout session: {err}")))?;
            for id in [
                &session.customer,
                &session.subscription,
                &session.client_reference_id,
            ]
            .into_iter()
            .flatten()
            {
                checked_text("object id", id)?;
            }
            Change::CheckoutCompleted(session)
        }
        _ => Change::Ignored,
    };
    Ok(ParsedEvent {
        id: event.id,
        kind: event.kind,
        created,
        livemode: event.livemode,
        change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000, 0).single().expect("time")
    }

    #[test]
    fn signatures_verify_with_any_candidate_and_tolerance() {
        let body = br#"{"id":"evt_1"}"#;
        let good = signature_header("whsec_x", 1_800_000_000, body);
        assert!(verify(Some(&good), body, "whsec_x", now()).is_ok());
        let v1 = good.split_once(",v1=").expect("v1").1;
        let two = format!("t=1800000000,v1={},v1={v1}", "00".repeat(32));
        assert!(verify(Some(&two), body, "whsec_x", now()).is_ok());
        assert!(verify(Some(&good), body, "whsec_other", now()).is_err());
        assert!(verify(Some(&good), b"{}", "whsec_x", now()).is_err());
        assert!(verify(None, body, "whsec_x", now()).is_err());
        assert!(verify(Some("garbage"), body, "whsec_x", now()).is_err());
        let stale = signature_header("whsec_x", 1_800_000_000 - 301, body);
        assert!(verify(Some(&stale), body, "whsec_x", now()).is_err());
        let edge = signature_header("whsec_x", 1_800_000_000 - 300, body);
        assert!(verify(Some(&edge), body, "whsec_x", now()).is_ok());
    }
}
