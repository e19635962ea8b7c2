//! Wire types of the account routes, the profile patch parsed into validated changes, and the
//! [`Email`] value every onboarding route parses its address into.

use chrono::{DateTime, Utc};
use email_address::{EmailAddress, Options};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::codes::ErrorCode;
use crate::error::ApiError;

/// Longest accepted display name, in characters (after trimming).
pub const DISPLAY_NAME_MAX_CHARS: usize = 64;

/// A syntactically valid email address (RFC 5322 `addr-spec`, a domain with a TLD, no display
/// text, no domain literal), trimmed. Addresses compare case-insensitively everywhere
/// (`lower(email)` indexes); [`Email::key`] is that comparison form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);

impl Email {
    /// Parses `text`, or `422 invalid_email`.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let text = text.trim();
        let options = Options {
            minimum_sub_domains: 2,
            allow_domain_literal: false,
            allow_display_text: false,
            allow_long_local_parts: false,
        };
        // 254: the longest address SMTP can deliver (RFC 5321 path limit minus the brackets).
        if text.len() > 254 || EmailAddress::parse_with_options(text, options).is_err() {
            return Err(ApiError::invalid(
                ErrorCode::InvalidEmail,
                "email must be a valid email address",
            ));
        }
        Ok(Self(text.to_owned()))
    }

    /// The address as given (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The lower-cased form: rate-limit key, comparison key.
    pub fn key(&self) -> String {
        self.0.to_lowercase()
    }
}

/// `PATCH /api/account/profile`: every field optional; `null` clears `display_name` and
/// `time_zone`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfilePatch {
    /// At most 64 characters after trimming, no control characters; `null` or blank clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable, example = "Ada")]
    pub display_name: Option<Option<String>>,
    /// An IANA time zone name (`America/New_York`); `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable, example = "America/New_York")]
    pub time_zone: Option<Option<String>>,
    /// Marketing email consent.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = bool, required = false)]
    pub marketing_opt_in: Option<Option<bool>>,
}

/// Tells an absent field (`None`, via `#[serde(default)]`) from an explicit `null`
/// (`Some(None)`): serde alone reads both as `None`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A profile patch after validation: `None` leaves a field alone, `Some(value)` sets it.
/// The time zone is checked against the database's zone list by the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileChanges {
    /// New display name (`Some(None)` clears).
    pub display_name: Option<Option<String>>,
    /// New time zone (`Some(None)` clears).
    pub time_zone: Option<Option<String>>,
    /// New consent.
    pub marketing_opt_in: Option<bool>,
}

impl TryFrom<ProfilePatch> for ProfileChanges {
    type Error = ApiError;

    fn try_from(patch: ProfilePatch) -> Result<Self, ApiError> {
        let display_name = patch
            .display_name
            .map(|name| name.map(|n| parse_display_name(&n)).transpose())
            .transpose()?
            // A blank name clears it, like `null`.
            .map(Option::flatten);
        let time_zone = match patch.time_zone {
            // IANA names are printable ASCII (and a NUL could not even be looked up).
            Some(Some(zone))
                if zone.is_empty()
                    || zone.len() > 64
                    || !zone.bytes().all(|b| b.is_ascii_graphic()) =>
            {
                return Err(invalid_time_zone(&zone))
            }
            other => other,
        };
        let marketing_opt_in = match patch.marketing_opt_in {
            Some(None) => {
                return Err(ApiError::invalid(
                    ErrorCode::InvalidMarketingOptIn,
                    "marketing_opt_in must be true or false",
                ))
            }
            Some(Some(value)) => Some(value),
            None => None,
        };
        Ok(Self {
            display_name,
            time_zone,
            marketing_opt_in,
        })
    }
}

/// `Ok(None)` for a blank name.
fn parse_display_name(name: &str) -> Result<Option<String>, ApiError> {
    let name = name.trim();
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            ErrorCode::InvalidDisplayName,
            "display_name must not contain control characters",
        ));
    }
    if name.chars().count() > DISPLAY_NAME_MAX_CHARS {
        return Err(ApiError::invalid(
            ErrorCode::InvalidDisplayName,
            format!("display_name must be at most {DISPLAY_NAME_MAX_CHARS} characters"),
        ));
    }
    Ok((!name.is_empty()).then(|| name.to_owned()))
}

/// `422 invalid_time_zone`.
pub(crate) fn invalid_time_zone(zone: &str) -> ApiError {
    let shown: String = zone.chars().take(64).collect();
    ApiError::invalid(
        ErrorCode::InvalidTimeZone,
        format!("time_zone must be an IANA time zone name such as America/New_York, not {shown:?}"),
    )
}

/// The caller's profile.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProfileResponse {
    /// `users.id`.
    pub user_id: i32,
    /// The sign-up address.
    pub email: String,
    /// Display name, if set.
    #[schema(required = true)]
    pub display_name: Option<String>,
    /// IANA time zone, if set.
    #[schema(required = true)]
    pub time_zone: Option<String>,
    /// Marketing email consent.
    pub marketing_opt_in: bool,
    /// Last change of the profile.
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(json: &str) -> Result<ProfileChanges, ApiError> {
        let patch: ProfilePatch = serde_json::from_str(json).expect("json");
        ProfileChanges::try_from(patch)
    }

    #[test]
    fn absent_null_and_values_differ() {
        assert_eq!(patch("{}").expect("ok"), ProfileChanges::default());
        let cleared = patch(r#"{"display_name": null, "time_zone": null}"#).expect("ok");
        assert_eq!(cleared.display_name, Some(None));
        assert_eq!(cleared.time_zone, Some(None));
        let set = patch(r#"{"display_name": "  Ada  ", "marketing_opt_in": true}"#).expect("ok");
        assert_eq!(set.display_name, Some(Some("Ada".to_owned())));
        assert_eq!(set.time_zone, None);
        assert_eq!(set.marketing_opt_in, Some(true));
        assert_eq!(
            patch(r#"{"display_name": "   "}"#)
                .expect("ok")
                .display_name,
            Some(None)
        );
    }

    #[test]
    fn display_name_counts_characters() {
        let ok = format!(r#"{{"display_name": "{}"}}"#, "é".repeat(64));
        assert!(patch(&ok).is_ok(), "64 two-byte characters fit");
        let long = format!(r#"{{"display_name": "{}"}}"#, "a".repeat(65));
        assert_eq!(
            patch(&long).err().map(|e| e.code()),
            Some(ErrorCode::InvalidDisplayName)
        );
        assert_eq!(
            patch(r#"{"display_name": "a\u0007b"}"#)
                .err()
                .map(|e| e.code()),
            Some(ErrorCode::InvalidDisplayName)
        );
        assert_eq!(
            patch(r#"{"marketing_opt_in": null}"#)
                .err()
                .map(|e| e.code()),
            Some(ErrorCode::InvalidMarketingOptIn)
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<ProfilePatch>(r#"{"email": "x@y.com"}"#).is_err());
    }

    #[test]
    fn emails() {
        assert!(Email::parse(" A@Example.com ").is_ok());
        assert_eq!(
            Email::parse("A@Example.com").expect("ok").key(),
            "a@example.com"
        );
        for bad in [
            "",
            "a",
            "a@",
            "@x.com",
            "a@localhost",
            "Ann <a@x.com>",
            "a@[127.0.0.1]",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad}");
        }
    }
}

/// One stored row, column name → value, as the export shows it.
pub type Row = std::collections::BTreeMap<String, serde_json::Value>;

/// `200` of `GET /api/account/export`: everything stored about the caller, by table (the rows
/// as stored; secrets such as token hashes are left out). Documentation type: the handler
/// builds the same members.
#[derive(Debug, ToSchema)]
pub struct AccountExport {
    /// The user row.
    #[schema(value_type = Object)]
    pub user: Row,
    /// The profile.
    #[schema(value_type = Object)]
    pub profile: Row,
    /// The paper account.
    #[schema(value_type = Vec<Object>)]
    pub account: Vec<Row>,
    /// Every order, oldest first.
    #[schema(value_type = Vec<Object>)]
    pub orders: Vec<Row>,
    /// Every order leg.
    #[schema(value_type = Vec<Object>)]
    pub order_legs: Vec<Row>,
    /// Every fill.
    #[schema(value_type = Vec<Object>)]
    pub fills: Vec<Row>,
    /// Every position.
    #[schema(value_type = Vec<Object>)]
    pub positions: Vec<Row>,
    /// The caller's audit rows.
    #[schema(value_type = Vec<Object>)]
    pub audit_log: Vec<Row>,
    /// Sessions (without their token hashes).
    #[schema(value_type = Vec<Object>)]
    pub sessions: Vec<Row>,
    /// Sign-in links (without their token hashes).
    #[schema(value_type = Vec<Object>)]
    pub sign_in_links: Vec<Row>,
    /// Messages queued for the caller's address.
    #[schema(value_type = Vec<Object>)]
    pub email_outbox: Vec<Row>,
    /// Waitlist rows for the caller's address.
    #[schema(value_type = Vec<Object>)]
    pub waitlist: Vec<Row>,
    /// The Stripe customer link, if any.
    #[schema(required = true, value_type = Option<Object>)]
    pub billing_customer: Option<Row>,
    /// The subscription mirror.
    #[schema(value_type = Vec<Object>)]
    pub billing_subscriptions: Vec<Row>,
    /// Idempotency keys with their stored requests and answers.
    #[schema(value_type = Vec<Object>)]
    pub idempotency_keys: Vec<Row>,
}

/// `200` of `POST /api/account/erasure`: how many rows each table lost, and whose they were.
/// Documentation type: the handler builds the same members.
#[derive(Debug, ToSchema)]
pub struct ErasureResponse {
    /// The erased user's id.
    pub user_id: i32,
    /// Table name → deleted (or detached) rows, e.g. `"paper_orders": 3`.
    #[serde(flatten)]
    #[schema(additional_properties)]
    pub counts: std::collections::BTreeMap<String, u64>,
}
