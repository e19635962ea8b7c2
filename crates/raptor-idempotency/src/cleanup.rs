//! Retention: deleting expired keys in bounded batches, and the per-user GDPR sweep and export
//! (stored responses decrypted).

use futures_util::stream::{BoxStream, StreamExt};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};

use crate::seal::{ResponseKeys, RowIdentity, StoredColumns};

/// Deletes expired keys, `batch_size` rows per statement (each its own short transaction, so it
/// is safe while the server runs and never holds many locks). Returns the number deleted.
pub async fn delete_expired(pool: &PgPool, batch_size: i64) -> Result<u64, sqlx::Error> {
    let batch_size = batch_size.max(1);
    let mut total = 0;
    // Both passes find their rows by idx_idem_keys_expires (every row's `expires_at`); in-flight
    // rows only expire when abandoned for a whole TTL, which is rare, so they go last.
    for statuses in [&["completed", "failed", "released"][..], &["in_flight"][..]] {
        loop {
            let mut conn = raptor_db::conn(pool).await?;
            let deleted =
                crate::protocol::delete_expired_batch(&mut conn, statuses, batch_size).await?;
            conn.finish().await?;
            total += deleted;
            if deleted < u64::try_from(batch_size).unwrap_or(u64::MAX) {
                break;
            }
        }
    }
    Ok(total)
}

/// GDPR erasure: deletes every key scoped to `user_id`.
pub async fn delete_for_user(conn: &mut PgConnection, user_id: i32) -> Result<u64, sqlx::Error> {
    Ok(
        raptor_db::query("delete from idempotency_keys where scope_user_id = $1")
            .bind(user_id)
            .execute(conn)
            .await?
            .rows_affected(),
    )
}

#[derive(sqlx::FromRow)]
struct ExportRow {
    id: i64,
    scope_endpoint: String,
    response_code: Option<i16>,
    lineage: uuid::Uuid,
    attempt: uuid::Uuid,
    #[sqlx(flatten)]
    stored: StoredColumns,
    document: Value,
}

/// GDPR access/portability: every key scoped to `user_id`, as JSON objects in id order, one at
/// a time (an account's export is streamed, never held whole), with the stored responses
/// decrypted (`response_encrypted` says whether the row is stored sealed). A body that cannot
/// be decrypted is exported as `null` with `response_body_unreadable: true`, and logged at
/// ERROR.
pub fn export_for_user<'a>(
    conn: &'a mut PgConnection,
    user_id: i32,
    keys: &'a ResponseKeys,
) -> BoxStream<'a, Result<Value, sqlx::Error>> {
    raptor_db::query_as::<ExportRow>(
        "select id, scope_endpoint, response_code, lineage, attempt, response_body,
                response_headers, response_kid, response_nonce, response_ciphertext, response_seal,
                jsonb_build_object(
                    'id', id, 'idem_key', idem_key, 'scope_endpoint', scope_endpoint,
                    'request_hash', request_hash, 'status', status,
                    'response_code', response_code,
                    'response_encrypted', response_ciphertext is not null,
                    'created_at', created_at, 'expires_at', expires_at) as document
           from idempotency_keys where scope_user_id = $1 order by id",
    )
    .bind(user_id)
    .fetch(conn)
    .map(move |row| row.map(|row| document(row, user_id, keys)))
    .boxed()
}

fn document(row: ExportRow, user_id: i32, keys: &ResponseKeys) -> Value {
    let identity = RowIdentity {
        id: row.id,
        scope_user_id: Some(user_id),
        endpoint: &row.scope_endpoint,
        response_code: row.response_code,
        lineage: row.lineage,
        attempt: row.attempt,
    };
    let mut document = row.document;
    let opened = keys.open_response(identity, row.stored);
    if let Value::Object(map) = &mut document {
        match opened {
            Ok(opened) => {
                map.insert(
                    "response_body".into(),
                    opened
                        .body
                        .and_then(|body| serde_json::from_str(body.get()).ok())
                        .unwrap_or(Value::Null),
                );
                map.insert(
                    "response_headers".into(),
                    opened.headers.unwrap_or(Value::Null),
                );
            }
            Err(reason) => {
                tracing::error!(
                    idempotency_key_id = row.id,
                    reason = reason.as_str(),
                    "stored response cannot be decrypted for the export"
                );
                map.insert("response_body".into(), Value::Null);
                map.insert("response_body_unreadable".into(), Value::Bool(true));
            }
        }
    }
    document
}
