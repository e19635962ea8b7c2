//! `raptor idempotency reencrypt`: moving stored responses to the current key and layout in
//! bounded batches, safe while the server runs.

use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use super::cipher::{RowIdentity, StoredColumns, SEAL_V2};
use super::ResponseKeys;

/// What [`reencrypt`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reencrypted {
    /// Rows now sealed under the current key.
    pub reencrypted: u64,
    /// Rows left as they were because they could not be opened (unknown key id, or tampered);
    /// each is logged at ERROR with its id.
    pub unreadable: u64,
}

/// Why [`reencrypt`] could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReencryptError {
    /// No key configured: nothing to encrypt with.
    #[error("RAPTOR_RESPONSE_KEYS is not set: there is no key to re-encrypt with")]
    NoKeys,
    /// Sealing failed (no randomness for a nonce); batches committed before it stay done.
    #[error("could not encrypt a stored response")]
    Encrypt,
    /// A statement failed; batches committed before it stay done.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

#[derive(sqlx::FromRow)]
struct RekeyRow {
    id: i64,
    scope_user_id: Option<i32>,
    scope_endpoint: String,
    response_code: Option<i16>,
    lineage: Uuid,
    attempt: Uuid,
    #[sqlx(flatten)]
    stored: StoredColumns,
}

/// Moves every stored response that is plain, sealed in the first layout, or sealed under a
/// key other than the current one, to the current key and layout: `batch_size` rows per short
/// transaction, locked `FOR UPDATE SKIP LOCKED` (a row being claimed or completed right now is
/// left for the next run), walking the table once by id. Safe while the server runs. Rows that
/// cannot be opened are left untouched and counted.
pub async fn reencrypt(
    pool: &PgPool,
    keys: &ResponseKeys,
    batch_size: i64,
) -> Result<Reencrypted, ReencryptError> {
    let current = keys.current_kid().ok_or(ReencryptError::NoKeys)?;
    let batch_size = batch_size.max(1);
    let mut done = Reencrypted::default();
    let mut after = 0_i64;
    loop {
        let mut tx = raptor_db::begin(pool).await?;
        let rows: Vec<RekeyRow> = raptor_db::query_as(
            "select id, scope_user_id, scope_endpoint, response_code, lineage, attempt,
                    response_body, response_headers, response_kid, response_nonce,
                    response_ciphertext, response_seal
               from idempotency_keys
              where id > $1 and status = 'completed'
                and (response_body is not null or response_headers is not null
                     or (response_ciphertext is not null
                         and (response_kid <> $2 or response_seal is distinct from $4)))
              order by id
              limit $3
              for update skip locked",
        )
        .bind(after)
        .bind(current)
        .bind(batch_size)
        .bind(SEAL_V2)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last() else {
            tx.rollback().await?;
            break;
        };
        after = last.id;
        let fetched = rows.len();

        let (mut ids, mut nonces, mut ciphertexts) = (Vec::new(), Vec::new(), Vec::new());
        for row in rows {
            if !row.stored.needs_reseal(current) {
                continue;
            }
            let identity = RowIdentity {
                id: row.id,
                scope_user_id: row.scope_user_id,
                endpoint: &row.scope_endpoint,
                response_code: row.response_code,
                lineage: row.lineage,
                attempt: row.attempt,
            };
            let kid = row.stored.response_kid.clone();
            let opened = match keys.open_response(identity, row.stored) {
                Ok(opened) => opened,
                Err(reason) => {
                    tracing::error!(
                        idempotency_key_id = row.id,
                        kid = kid.as_deref(),
                        reason = reason.as_str(),
                        "stored response cannot be decrypted; left as it is"
                    );
                    done.unreadable += 1;
                    continue;
                }
            };
            let headers = opened.headers.unwrap_or(Value::Null);
            // The batch's transaction rolls back; batches before it stay done.
            let Ok(Some(sealed)) = keys.seal_response(identity, opened.body.as_deref(), &headers)
            else {
                return Err(ReencryptError::Encrypt);
            };
            ids.push(row.id);
            nonces.push(sealed.nonce);
            ciphertexts.push(sealed.ciphertext);
        }
        if !ids.is_empty() {
            let updated = raptor_db::query(
                "update idempotency_keys k
                    set response_body = null, response_headers = null, response_kid = $2,
                        response_nonce = u.nonce, response_ciphertext = u.ciphertext,
                        response_seal = $5
                   from unnest($1::bigint[], $3::bytea[], $4::bytea[]) as u(id, nonce, ciphertext)
                  where k.id = u.id",
            )
            .bind(&ids)
            .bind(current)
            .bind(&nonces)
            .bind(&ciphertexts)
            .bind(SEAL_V2)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            done.reencrypted += updated;
        }
        tx.commit().await?;
        if fetched < usize::try_from(batch_size).unwrap_or(usize::MAX) {
            break;
        }
    }
    Ok(done)
}
