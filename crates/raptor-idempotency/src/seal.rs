//! Encryption at rest of stored responses (docs/idempotency.md, "Stored responses at rest").
//!
//! A completed key's response (its body and its replayed headers, `Location` holding the new
//! order's id) is sealed with ChaCha20-Poly1305 under the current key of `RAPTOR_RESPONSE_KEYS`
//! (`kid:base64key,…`; the first encrypts, all decrypt), with a random 96-bit nonce per row and
//! the row's identity as associated data: its id, scope, endpoint, status code, key id, and the
//! key's lineage and completing attempt, so a ciphertext copied onto another row, or restored
//! onto its own row in a later lifetime of the key, does not open. The key id, nonce and
//! ciphertext are stored beside the row; `response_body` and `response_headers` stay NULL.
//!
//! Layouts (`response_seal`): NULL on a row with a ciphertext is the first layout (the body
//! alone sealed, headers in plain text, no lineage or attempt in the associated data), still
//! opened for rows written before the second; 2 is the sealed envelope
//! `{"body", "headers"}`. Rows written without a key keep their plain columns and still
//! replay; a row that carries a ciphertext is never read any other way.
//!
//! [`reencrypt`] moves rows (plain, in the first layout, or sealed under an older key) to the
//! current key and layout in bounded batches.

use std::fmt;
use std::sync::Arc;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::{ChaCha20Poly1305, KeyInit, Nonce};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// Bytes of a nonce (ChaCha20-Poly1305's 96 bits).
pub const NONCE_LEN: usize = 12;
/// Bytes of a key (256 bits).
pub const KEY_LEN: usize = 32;
/// Longest key id.
pub const MAX_KID_LEN: usize = 32;

/// Domain separation of the associated data of the first layout (body only).
const AD_DOMAIN_V1: &[u8] = b"raptor/idempotency/response/v1";
/// Domain separation of the second layout (body and headers; lineage and attempt bound).
const AD_DOMAIN_V2: &[u8] = b"raptor/idempotency/response/v2";
/// `response_seal` of the second layout (NULL with a ciphertext is the first).
pub(crate) const SEAL_V2: i16 = 2;

/// Standard base64, padding optional (`openssl rand -base64 32` or an unpadded copy of it).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

struct Entry {
    kid: String,
    // Holds the key; the crate's `zeroize` feature wipes it on drop.
    cipher: ChaCha20Poly1305,
}

/// The keys of `RAPTOR_RESPONSE_KEYS`: the first seals new responses, every one opens. Empty
/// means encryption is off (responses are stored as plain JSON). Cheap to clone; `Debug`
/// shows the key ids only.
#[derive(Clone)]
pub struct ResponseKeys {
    entries: Arc<[Entry]>,
}

impl Default for ResponseKeys {
    fn default() -> Self {
        Self::none()
    }
}

impl fmt::Debug for ResponseKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseKeys")
            .field("kids", &self.kids().collect::<Vec<_>>())
            .finish()
    }
}

/// A malformed `RAPTOR_RESPONSE_KEYS`. The message names the variable and the entry, never the
/// key material (nor a key id that failed to parse, which might be a misplaced key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// An entry is empty (`a:…,,b:…` or a trailing comma).
    #[error("RAPTOR_RESPONSE_KEYS entry {position} is empty (expected kid:base64key,…)")]
    EmptyEntry {
        /// 1-based position in the list.
        position: usize,
    },
    /// An entry has no `:` between key id and key.
    #[error("RAPTOR_RESPONSE_KEYS entry {position} is not kid:base64key")]
    NotAPair {
        /// 1-based position in the list.
        position: usize,
    },
    /// The key id is empty, too long or has characters outside `A-Z a-z 0-9 . _ -`.
    #[error(
        "RAPTOR_RESPONSE_KEYS entry {position}: the key id must be 1 to {MAX_KID_LEN} characters \
         of A-Z a-z 0-9 . _ -"
    )]
    BadKid {
        /// 1-based position in the list.
        position: usize,
    },
    /// The key is not base64.
    #[error("RAPTOR_RESPONSE_KEYS entry {position} (key id {kid:?}): the key is not valid base64")]
    NotBase64 {
        /// 1-based position in the list.
        position: usize,
        /// The entry's key id.
        kid: String,
    },
    /// The key does not decode to 32 bytes.
    #[error(
        "RAPTOR_RESPONSE_KEYS entry {position} (key id {kid:?}): the key must decode to \
         {KEY_LEN} bytes, not {len} (generate one with `openssl rand -base64 32`)"
    )]
    WrongLength {
        /// 1-based position in the list.
        position: usize,
        /// The entry's key id.
        kid: String,
        /// Decoded length.
        len: usize,
    },
    /// Two entries share a key id.
    #[error("RAPTOR_RESPONSE_KEYS: key id {kid:?} appears more than once")]
    DuplicateKid {
        /// The repeated key id.
        kid: String,
    },
}

/// Why a stored response could not be opened. Every case answers 503; none re-executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// Sealed under a key id that is not configured (removed too early, or never given).
    UnknownKid,
    /// Key id, nonce or ciphertext missing or of the wrong shape, or the plaintext not JSON.
    Malformed,
    /// The tag did not verify: tampered ciphertext, nonce or key id, or moved from another row.
    Authentication,
}

impl OpenError {
    /// The `reason` label of `raptor_idempotency_decrypt_failures_total`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::UnknownKid => "unknown_kid",
            Self::Malformed => "malformed",
            Self::Authentication => "authentication",
        }
    }

    /// Counts one failure.
    pub(crate) fn record(self, endpoint: &str) {
        metrics::counter!(
            "raptor_idempotency_decrypt_failures_total",
            "endpoint" => endpoint.to_owned(),
            "reason" => self.as_str(),
        )
        .increment(1);
    }
}

/// Sealing failed: no randomness for the nonce, or a body too large for the cipher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("could not encrypt the stored response")]
pub(crate) struct SealError;

/// Which row, and which lifetime and attempt of its key, a response belongs to: bound into the
/// associated data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowIdentity<'a> {
    pub(crate) id: i64,
    pub(crate) scope_user_id: Option<i32>,
    pub(crate) endpoint: &'a str,
    pub(crate) response_code: Option<i16>,
    /// The key's lineage (new for each lifetime of the key).
    pub(crate) lineage: Uuid,
    /// The attempt that completed the key.
    pub(crate) attempt: Uuid,
}

/// A sealed response, as stored in `response_kid`, `response_nonce`, `response_ciphertext`
/// (`response_seal` = [`SEAL_V2`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sealed {
    pub(crate) kid: String,
    pub(crate) nonce: Vec<u8>,
    pub(crate) ciphertext: Vec<u8>,
}

/// The response columns of a key row: plain (`response_body`, `response_headers`) or sealed.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub(crate) struct StoredColumns {
    pub(crate) response_body: Option<Value>,
    pub(crate) response_headers: Option<Value>,
    pub(crate) response_kid: Option<String>,
    pub(crate) response_nonce: Option<Vec<u8>>,
    pub(crate) response_ciphertext: Option<Vec<u8>>,
    pub(crate) response_seal: Option<i16>,
}

impl StoredColumns {
    fn is_sealed(&self) -> bool {
        self.response_kid.is_some()
            || self.response_nonce.is_some()
            || self.response_ciphertext.is_some()
    }

    /// Whether the row is stored in plain text, or sealed in the first layout or under a key
    /// other than `current` (what [`reencrypt`] moves).
    fn needs_reseal(&self, current: &str) -> bool {
        if !self.is_sealed() {
            return self.response_body.is_some() || self.response_headers.is_some();
        }
        self.response_seal != Some(SEAL_V2) || self.response_kid.as_deref() != Some(current)
    }
}

/// A stored response, opened: the body (none when the policy kept none) and the replayed
/// headers.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Opened {
    pub(crate) body: Option<Value>,
    pub(crate) headers: Option<Value>,
}

/// The sealed envelope of the second layout.
#[derive(serde::Serialize, serde::Deserialize)]
struct Envelope {
    body: Option<Value>,
    headers: Option<Value>,
}

fn valid_kid(kid: &str) -> bool {
    !kid.is_empty()
        && kid.len() <= MAX_KID_LEN
        && kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl ResponseKeys {
    /// No keys: encryption off.
    pub fn none() -> Self {
        Self {
            entries: Arc::from(Vec::new()),
        }
    }

    /// Parses `kid:base64key,…` (whitespace around entries and parts is ignored). An empty or
    /// blank text is no keys. Every key must decode to 32 bytes; key ids are unique.
    pub fn parse(text: &str) -> Result<Self, KeysError> {
        if text.trim().is_empty() {
            return Ok(Self::none());
        }
        let mut entries: Vec<Entry> = Vec::new();
        for (index, entry) in text.split(',').enumerate() {
            let position = index + 1;
            let entry = entry.trim();
            if entry.is_empty() {
                return Err(KeysError::EmptyEntry { position });
            }
            let Some((kid, key)) = entry.split_once(':') else {
                return Err(KeysError::NotAPair { position });
            };
            let (kid, key) = (kid.trim(), key.trim());
            if !valid_kid(kid) {
                return Err(KeysError::BadKid { position });
            }
            let kid = kid.to_owned();
            let Ok(bytes) = BASE64.decode(key) else {
                return Err(KeysError::NotBase64 { position, kid });
            };
            let Ok(cipher) = ChaCha20Poly1305::new_from_slice(&bytes) else {
                let len = bytes.len();
                return Err(KeysError::WrongLength { position, kid, len });
            };
            if entries.iter().any(|e| e.kid == kid) {
                return Err(KeysError::DuplicateKid { kid });
            }
            entries.push(Entry { kid, cipher });
        }
        Ok(Self {
            entries: Arc::from(entries),
        })
    }

    /// Whether no key is configured (responses are stored in plain text).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The key id that seals new responses.
    pub fn current_kid(&self) -> Option<&str> {
        self.entries.first().map(|e| e.kid.as_str())
    }

    /// Every configured key id, the current one first.
    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.kid.as_str())
    }

    /// Seals `plaintext` for `row` under the current key in the second layout; `Ok(None)` when
    /// no key is configured.
    pub(crate) fn seal(
        &self,
        row: RowIdentity<'_>,
        plaintext: &[u8],
    ) -> Result<Option<Sealed>, SealError> {
        let Some(entry) = self.entries.first() else {
            return Ok(None);
        };
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SealError)?;
        let mut buffer = plaintext.to_vec();
        entry
            .cipher
            .encrypt_in_place(
                &Nonce::from(nonce),
                &associated_data(row, &entry.kid, Layout::V2),
                &mut buffer,
            )
            .map_err(|_| SealError)?;
        Ok(Some(Sealed {
            kid: entry.kid.clone(),
            nonce: nonce.to_vec(),
            ciphertext: buffer,
        }))
    }

    /// Seals a response (its body, if kept, and its replayed headers) for `row`; `Ok(None)`
    /// without a key.
    pub(crate) fn seal_response(
        &self,
        row: RowIdentity<'_>,
        body: Option<&Value>,
        headers: &Value,
    ) -> Result<Option<Sealed>, SealError> {
        if self.is_empty() {
            return Ok(None);
        }
        let envelope = serde_json::json!({ "body": body, "headers": headers });
        let plaintext = serde_json::to_vec(&envelope).map_err(|_| SealError)?;
        self.seal(row, &plaintext)
    }

    /// Opens a sealed body of `row` in `layout`.
    fn open(
        &self,
        row: RowIdentity<'_>,
        layout: Layout,
        kid: &str,
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> Result<Vec<u8>, OpenError> {
        let entry = self
            .entries
            .iter()
            .find(|e| e.kid == kid)
            .ok_or(OpenError::UnknownKid)?;
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| OpenError::Malformed)?;
        let mut buffer = ciphertext.to_vec();
        entry
            .cipher
            .decrypt_in_place(
                &Nonce::from(nonce),
                &associated_data(row, kid, layout),
                &mut buffer,
            )
            .map_err(|_| OpenError::Authentication)?;
        Ok(buffer)
    }

    /// The response a row stores: its plain columns when it was written without a key, else
    /// the opened ciphertext. A sealed row is only ever read by opening it: there is no
    /// fallback to anything else.
    pub(crate) fn open_response(
        &self,
        row: RowIdentity<'_>,
        stored: StoredColumns,
    ) -> Result<Opened, OpenError> {
        if !stored.is_sealed() {
            return Ok(Opened {
                body: stored.response_body,
                headers: stored.response_headers,
            });
        }
        let layout = match stored.response_seal {
            None => Layout::V1,
            Some(SEAL_V2) => Layout::V2,
            Some(_) => return Err(OpenError::Malformed),
        };
        let (Some(kid), Some(nonce), Some(ciphertext)) = (
            stored.response_kid,
            stored.response_nonce,
            stored.response_ciphertext,
        ) else {
            return Err(OpenError::Malformed);
        };
        let plaintext = self.open(row, layout, &kid, &nonce, &ciphertext)?;
        match layout {
            Layout::V1 => Ok(Opened {
                body: Some(serde_json::from_slice(&plaintext).map_err(|_| OpenError::Malformed)?),
                headers: stored.response_headers,
            }),
            Layout::V2 => {
                let envelope: Envelope =
                    serde_json::from_slice(&plaintext).map_err(|_| OpenError::Malformed)?;
                Ok(Opened {
                    body: envelope.body,
                    headers: envelope.headers,
                })
            }
        }
    }
}

/// The two layouts of a sealed response (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    V1,
    V2,
}

/// The associated data: a versioned domain tag, then the row's id, scope user, endpoint, the
/// key id and the stored status code, and (second layout) the key's lineage and completing
/// attempt, each fixed-size or length-prefixed so that no two rows share an encoding. A
/// ciphertext moved onto another row, or onto its own row in another lifetime or attempt of
/// the key (or whose stored code or key id was changed), fails authentication.
fn associated_data(row: RowIdentity<'_>, kid: &str, layout: Layout) -> Vec<u8> {
    let domain = match layout {
        Layout::V1 => AD_DOMAIN_V1,
        Layout::V2 => AD_DOMAIN_V2,
    };
    let mut ad = Vec::with_capacity(domain.len() + 64 + row.endpoint.len() + kid.len());
    ad.extend_from_slice(domain);
    ad.push(0);
    ad.extend_from_slice(&row.id.to_be_bytes());
    match row.scope_user_id {
        Some(user) => {
            ad.push(1);
            ad.extend_from_slice(&user.to_be_bytes());
        }
        None => ad.push(0),
    }
    push_prefixed(&mut ad, row.endpoint.as_bytes());
    push_prefixed(&mut ad, kid.as_bytes());
    match row.response_code {
        Some(code) => {
            ad.push(1);
            ad.extend_from_slice(&code.to_be_bytes());
        }
        None => ad.push(0),
    }
    if layout == Layout::V2 {
        ad.extend_from_slice(row.lineage.as_bytes());
        ad.extend_from_slice(row.attempt.as_bytes());
    }
    ad
}

fn push_prefixed(ad: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    ad.extend_from_slice(&len.to_be_bytes());
    ad.extend_from_slice(bytes);
}

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
        let mut tx = pool.begin().await?;
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
            let Ok(Some(sealed)) = keys.seal_response(identity, opened.body.as_ref(), &headers)
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

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="; // bytes 0..32
    const KEY_B: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="; // bytes 32..64

    const LINEAGE: Uuid = Uuid::from_u128(0x1111);
    const ATTEMPT: Uuid = Uuid::from_u128(0x2222);

    fn row(id: i64) -> RowIdentity<'static> {
        RowIdentity {
            id,
            scope_user_id: Some(7),
            endpoint: "POST /api/trading/orders",
            response_code: Some(201),
            lineage: LINEAGE,
            attempt: ATTEMPT,
        }
    }

    fn sealed_columns(sealed: Sealed) -> StoredColumns {
        StoredColumns {
            response_kid: Some(sealed.kid),
            response_nonce: Some(sealed.nonce),
            response_ciphertext: Some(sealed.ciphertext),
            response_seal: Some(SEAL_V2),
            ..StoredColumns::default()
        }
    }

    #[test]
    fn parses_keys_first_is_current() {
        let keys = ResponseKeys::parse(&format!(" new : {KEY_B} , old:{KEY_A}")).expect("parse");
        assert_eq!(keys.current_kid(), Some("new"));
        assert_eq!(keys.kids().collect::<Vec<_>>(), ["new", "old"]);
        assert!(ResponseKeys::parse("").expect("empty").is_empty());
        assert!(ResponseKeys::parse("  ").expect("blank").is_empty());
        // Unpadded base64 is accepted too.
        let unpadded = KEY_A.trim_end_matches('=');
        assert!(ResponseKeys::parse(&format!("k:{unpadded}")).is_ok());
    }

    #[test]
    fn bad_formats_are_clear_errors_without_the_secret() {
        let short = "c2hvcnQ="; // "short"
        let cases = [
            (KEY_A.to_owned(), KeysError::NotAPair { position: 1 }),
            (
                format!("k1:{KEY_A},"),
                KeysError::EmptyEntry { position: 2 },
            ),
            (
                format!("bad kid:{KEY_A}"),
                KeysError::BadKid { position: 1 },
            ),
            (format!(":{KEY_A}"), KeysError::BadKid { position: 1 }),
            (
                format!("k1:{KEY_A},k2:not*base64!"),
                KeysError::NotBase64 {
                    position: 2,
                    kid: "k2".into(),
                },
            ),
            (
                format!("k1:{short}"),
                KeysError::WrongLength {
                    position: 1,
                    kid: "k1".into(),
                    len: 5,
                },
            ),
            (
                format!("k1:{KEY_A},k1:{KEY_B}"),
                KeysError::DuplicateKid { kid: "k1".into() },
            ),
        ];
        for (text, expected) in cases {
            let err = ResponseKeys::parse(&text).expect_err(&expected.to_string());
            assert_eq!(err, expected);
            let message = err.to_string();
            assert!(message.contains("RAPTOR_RESPONSE_KEYS"), "{message}");
            for secret in [KEY_A, KEY_B, short, "not*base64!"] {
                assert!(!message.contains(secret), "{message} echoes a secret");
            }
        }
    }

    #[test]
    fn debug_shows_key_ids_only() {
        let keys = ResponseKeys::parse(&format!("k1:{KEY_A}")).expect("parse");
        let debug = format!("{keys:?}");
        assert!(debug.contains("k1"), "{debug}");
        assert!(!debug.contains(KEY_A), "{debug}");
        assert!(!debug.contains("[0, 1, 2"), "{debug}");
    }

    #[test]
    fn round_trip_and_fresh_nonce() {
        let keys = ResponseKeys::parse(&format!("k1:{KEY_A}")).expect("parse");
        let body = serde_json::json!({ "symbol": "AAPL", "qty": "3" });
        let headers = serde_json::json!({ "location": "/api/trading/orders/42" });
        let sealed = keys
            .seal_response(row(1), Some(&body), &headers)
            .expect("seal")
            .expect("keys");
        assert_eq!(sealed.kid, "k1");
        assert_eq!(sealed.nonce.len(), NONCE_LEN);
        let text = String::from_utf8_lossy(&sealed.ciphertext).into_owned();
        assert!(
            !text.contains("AAPL") && !text.contains("orders/42"),
            "{text}"
        );
        let again = keys
            .seal_response(row(1), Some(&body), &headers)
            .expect("seal")
            .expect("keys");
        assert_ne!(sealed.nonce, again.nonce, "a random nonce per seal");

        let opened = keys
            .open_response(row(1), sealed_columns(sealed))
            .expect("open");
        assert_eq!(opened.body, Some(body.clone()));
        assert_eq!(opened.headers, Some(headers.clone()));

        // A policy that keeps no body still seals the headers.
        let headers_only = keys
            .seal_response(row(1), None, &headers)
            .expect("seal")
            .expect("keys");
        let opened = keys
            .open_response(row(1), sealed_columns(headers_only))
            .expect("open");
        assert_eq!((opened.body, opened.headers), (None, Some(headers.clone())));

        // A plain row (written before keys were configured) still reads.
        let plain = StoredColumns {
            response_body: Some(body.clone()),
            response_headers: Some(headers.clone()),
            ..StoredColumns::default()
        };
        let opened = keys.open_response(row(1), plain).expect("plain");
        assert_eq!((opened.body, opened.headers), (Some(body), Some(headers)));
    }

    #[test]
    fn a_seal_from_another_lifetime_or_attempt_does_not_open() {
        let keys = ResponseKeys::parse(&format!("k1:{KEY_A}")).expect("parse");
        let sealed = keys
            .seal_response(row(1), Some(&serde_json::json!({})), &Value::Null)
            .expect("seal")
            .expect("keys");
        let later_lifetime = RowIdentity {
            lineage: Uuid::from_u128(0x3333),
            ..row(1)
        };
        let other_attempt = RowIdentity {
            attempt: Uuid::from_u128(0x4444),
            ..row(1)
        };
        for at in [later_lifetime, other_attempt] {
            assert_eq!(
                keys.open_response(at, sealed_columns(sealed.clone())),
                Err(OpenError::Authentication)
            );
        }
        assert!(keys
            .open_response(row(1), sealed_columns(sealed.clone()))
            .is_ok());
        // Claimed to be the first layout, the second's ciphertext does not open either.
        let relabelled = StoredColumns {
            response_seal: None,
            ..sealed_columns(sealed)
        };
        assert_eq!(
            keys.open_response(row(1), relabelled),
            Err(OpenError::Authentication)
        );
    }

    #[test]
    fn rows_of_the_first_layout_still_open() {
        // Sealed as the first layout did: the body alone, without lineage and attempt.
        let keys = ResponseKeys::parse(&format!("k1:{KEY_A}")).expect("parse");
        let entry = &keys.entries[0];
        let nonce = [7u8; NONCE_LEN];
        let mut ciphertext = br#"{"id":"o1"}"#.to_vec();
        entry
            .cipher
            .encrypt_in_place(
                &Nonce::from(nonce),
                &associated_data(row(1), "k1", Layout::V1),
                &mut ciphertext,
            )
            .expect("encrypt");
        let headers = serde_json::json!({ "location": "/api/trading/orders/o1" });
        let v1 = StoredColumns {
            response_headers: Some(headers.clone()),
            response_kid: Some("k1".into()),
            response_nonce: Some(nonce.to_vec()),
            response_ciphertext: Some(ciphertext),
            ..StoredColumns::default()
        };
        assert!(
            v1.needs_reseal("k1"),
            "reencrypt moves it to the second layout"
        );
        let opened = keys.open_response(row(1), v1).expect("open");
        assert_eq!(opened.body, Some(serde_json::json!({ "id": "o1" })));
        assert_eq!(opened.headers, Some(headers));
    }

    #[test]
    fn identity_key_and_bytes_are_authenticated() {
        let keys = ResponseKeys::parse(&format!("k1:{KEY_A}")).expect("parse");
        let sealed = keys
            .seal(row(1), br#"{"ok":true}"#)
            .expect("seal")
            .expect("keys");
        let open = |at: RowIdentity<'_>, kid: &str, nonce: &[u8], ct: &[u8]| {
            keys.open(at, Layout::V2, kid, nonce, ct)
        };
        let (n, c) = (&sealed.nonce[..], &sealed.ciphertext[..]);
        assert!(open(row(1), "k1", n, c).is_ok());
        assert_eq!(open(row(2), "k1", n, c), Err(OpenError::Authentication));
        let other_user = RowIdentity {
            scope_user_id: Some(8),
            ..row(1)
        };
        assert_eq!(open(other_user, "k1", n, c), Err(OpenError::Authentication));
        let service = RowIdentity {
            scope_user_id: None,
            ..row(1)
        };
        assert_eq!(open(service, "k1", n, c), Err(OpenError::Authentication));
        let other_route = RowIdentity {
            endpoint: "POST /api/trading/positions/{symbol}/close",
            ..row(1)
        };
        assert_eq!(
            open(other_route, "k1", n, c),
            Err(OpenError::Authentication)
        );
        let other_code = RowIdentity {
            response_code: Some(200),
            ..row(1)
        };
        assert_eq!(open(other_code, "k1", n, c), Err(OpenError::Authentication));
        let mut tampered = c.to_vec();
        tampered[0] ^= 1;
        assert_eq!(
            open(row(1), "k1", n, &tampered),
            Err(OpenError::Authentication)
        );
        let mut nonce = n.to_vec();
        nonce[11] ^= 0x80;
        assert_eq!(
            open(row(1), "k1", &nonce, c),
            Err(OpenError::Authentication)
        );
        assert_eq!(open(row(1), "k9", n, c), Err(OpenError::UnknownKid));
        assert_eq!(open(row(1), "k1", &n[..8], c), Err(OpenError::Malformed));
        let half_sealed = StoredColumns {
            response_kid: Some("k1".into()),
            ..StoredColumns::default()
        };
        assert_eq!(
            keys.open_response(row(1), half_sealed),
            Err(OpenError::Malformed)
        );
    }

    #[test]
    fn rotation_old_key_still_opens() {
        let old = ResponseKeys::parse(&format!("old:{KEY_A}")).expect("parse");
        let sealed = old.seal(row(1), b"{}").expect("seal").expect("keys");
        let rotated = ResponseKeys::parse(&format!("new:{KEY_B},old:{KEY_A}")).expect("parse");
        assert_eq!(
            rotated.open(row(1), Layout::V2, "old", &sealed.nonce, &sealed.ciphertext),
            Ok(b"{}".to_vec())
        );
        let resealed = rotated.seal(row(1), b"{}").expect("seal").expect("keys");
        assert_eq!(resealed.kid, "new");
        // The same key under another id is still another key id: the id is authenticated.
        let renamed = ResponseKeys::parse(&format!("other:{KEY_A}")).expect("parse");
        assert_eq!(
            renamed.open(
                row(1),
                Layout::V2,
                "other",
                &sealed.nonce,
                &sealed.ciphertext
            ),
            Err(OpenError::Authentication)
        );
        assert!(ResponseKeys::none()
            .seal(row(1), b"{}")
            .expect("no keys")
            .is_none());
    }
}
