//! SQL of the waitlist.

use sqlx::PgConnection;

use crate::accounts::dto::Email;
use crate::error::{ApiResult, ResultExt};

/// Adds `email` unless the address (case-insensitively) is already on the list; the new row's
/// id, or `None` for a repeat. The unique index `uix_waitlist_signups_email_ci` decides, so
/// concurrent signups of one address leave one row.
#[tracing::instrument(skip_all)]
pub(crate) async fn insert_signup(
    conn: &mut PgConnection,
    email: &Email,
) -> ApiResult<Option<i64>> {
    raptor_db::query_scalar(
        "insert into waitlist_signups (email) values ($1)
         on conflict ((lower(email))) do nothing returning id",
    )
    .bind(email.as_str())
    .fetch_optional(conn)
    .await
    .context("insert waitlist signup")
}
