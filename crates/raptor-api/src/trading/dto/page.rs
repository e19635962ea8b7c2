//! Lists that page (`GET /api/trading/orders`, `GET /api/trading/activities`): Stripe's list
//! object (`data`, `has_more`, `next_cursor`) and the opaque cursor, the keyset
//! `(time, id)` of the last item of a page.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};

use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult};

/// The bounds of `limit`.
pub const LIST_LIMIT: std::ops::RangeInclusive<i64> = 1..=500;

/// `limit`'s default.
pub const DEFAULT_LIST_LIMIT: i64 = 50;

/// Where a page starts: strictly older than this `(at, id)`. On the wire it is opaque
/// (base64url of the two), so its layout can change without breaking a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The time of the previous page's last item.
    pub at: DateTime<Utc>,
    /// Its id (an order's UUID, an activity's id).
    pub id: String,
}

impl Cursor {
    /// The `next_cursor` a client sends back.
    pub fn encode(&self) -> String {
        let at = self.at.to_rfc3339_opts(SecondsFormat::Micros, true);
        URL_SAFE_NO_PAD.encode(format!("{at}|{}", self.id))
    }

    /// A cursor this API handed out; anything else is `400 invalid_query`.
    pub fn decode(text: &str) -> ApiResult<Self> {
        let malformed = || {
            ApiError::bad_request(
                ErrorCode::InvalidQuery,
                "cursor is not one this API handed out (use next_cursor as it is)",
            )
        };
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| malformed())?;
        let text = String::from_utf8(bytes).map_err(|_| malformed())?;
        let (at, id) = text.split_once('|').ok_or_else(malformed)?;
        let at = DateTime::parse_from_rfc3339(at).map_err(|_| malformed())?;
        // Ids this API hands out are short and printable; anything else (a NUL, which Postgres
        // refuses in text, say) never reaches a statement.
        if id.is_empty() || id.len() > 64 || id.chars().any(char::is_control) {
            return Err(malformed());
        }
        Ok(Cursor {
            at: at.with_timezone(&Utc),
            id: id.to_owned(),
        })
    }
}

/// Whether `id` is an activity id this API hands out: `<kind>:<row>`, the kind one of the
/// feed's, the row a number or (cancels) an order's UUID.
pub(crate) fn is_activity_id(id: &str) -> bool {
    let Some((kind, row)) = id.split_once(':') else {
        return false;
    };
    match kind {
        "fill" | "order_expiry" | "reset" | "expiry" => {
            !row.is_empty() && row.len() <= 19 && row.bytes().all(|b| b.is_ascii_digit())
        }
        "cancel" => uuid::Uuid::parse_str(row).is_ok(),
        _ => false,
    }
}

/// `limit` checked against [`LIST_LIMIT`] (absent: [`DEFAULT_LIST_LIMIT`]).
pub(crate) fn list_limit(limit: Option<i64>) -> ApiResult<i64> {
    let limit = limit.unwrap_or(DEFAULT_LIST_LIMIT);
    if LIST_LIMIT.contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::bad_request(
            ErrorCode::InvalidQuery,
            format!("limit must be between 1 and 500, not {limit}"),
        ))
    }
}

/// Cuts the `limit + 1` rows read into a page: the first `limit`, whether there were more,
/// and the cursor after the last one shown (`None` on the last page).
pub(crate) fn paginate<T>(
    mut rows: Vec<T>,
    limit: i64,
    key: impl Fn(&T) -> Cursor,
) -> (Vec<T>, bool, Option<String>) {
    let shown = usize::try_from(limit).unwrap_or(usize::MAX);
    let has_more = rows.len() > shown;
    rows.truncate(shown);
    let next = has_more
        .then(|| rows.last().map(|last| key(last).encode()))
        .flatten();
    (rows, has_more, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_junk_is_refused() {
        let cursor = Cursor {
            at: DateTime::parse_from_rfc3339("2026-12-01T15:00:00.123456Z")
                .map(|t| t.with_timezone(&Utc))
                .expect("time"),
            id: "fill:42".to_owned(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()).ok(), Some(cursor));
        for junk in [
            "",
            "x",
            "!!!",
            &URL_SAFE_NO_PAD.encode("no separator"),
            &URL_SAFE_NO_PAD.encode("yesterday|id"),
            &URL_SAFE_NO_PAD.encode("2026-12-01T15:00:00Z|"),
            &URL_SAFE_NO_PAD.encode("2026-12-01T15:00:00Z|fill:1\u{0}"),
            &URL_SAFE_NO_PAD.encode(format!("2026-12-01T15:00:00Z|{}", "x".repeat(65))),
        ] {
            assert!(Cursor::decode(junk).is_err(), "{junk:?} accepted");
        }
    }
}

#[cfg(test)]
mod activity_ids {
    use super::is_activity_id;

    #[test]
    fn only_the_feeds_ids_are_activity_ids() {
        for id in [
            "fill:42",
            "order_expiry:7",
            "reset:1",
            "expiry:99",
            "cancel:01a23dfc-eb9b-719c-9de6-1f792fea643b",
        ] {
            assert!(is_activity_id(id), "{id}");
        }
        for id in [
            "fill:",
            "fill:4x",
            "fill:-1",
            "cancel:42",
            "refund:1",
            "42",
            "fill:99999999999999999999",
        ] {
            assert!(!is_activity_id(id), "{id}");
        }
    }
}
