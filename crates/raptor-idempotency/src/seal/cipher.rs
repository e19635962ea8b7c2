//! Sealing and opening a stored response: ChaCha20-Poly1305 with a random nonce per row and
//! the row's identity (and, in the second layout, its key's lineage and completing attempt) as
//! associated data. The layouts are described in the module above.

use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::Nonce;
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

use super::ResponseKeys;

/// Bytes of a nonce (ChaCha20-Poly1305's 96 bits).
pub const NONCE_LEN: usize = 12;

/// Domain separation of the associated data of the first layout (body only).
const AD_DOMAIN_V1: &[u8] = b"raptor/idempotency/response/v1";
/// Domain separation of the second layout (body and headers; lineage and attempt bound).
const AD_DOMAIN_V2: &[u8] = b"raptor/idempotency/response/v2";
/// `response_seal` of the second layout (NULL with a ciphertext is the first).
pub(crate) const SEAL_V2: i16 = 2;

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

/// [`Envelope`] borrowed, to seal: serialised from the values themselves (a `json!` object
/// would first copy the whole body).
#[derive(serde::Serialize)]
struct EnvelopeRef<'a, B: ?Sized> {
    body: Option<&'a B>,
    headers: &'a Value,
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
    pub(super) fn needs_reseal(&self, current: &str) -> bool {
        if !self.is_sealed() {
            return self.response_body.is_some() || self.response_headers.is_some();
        }
        self.response_seal != Some(SEAL_V2) || self.response_kid.as_deref() != Some(current)
    }
}

/// A stored response, opened: the body (none when the policy kept none) and the replayed
/// headers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Opened {
    /// The body's text, as sealed (a plain row's serialised again from its `jsonb`).
    pub(crate) body: Option<Box<RawValue>>,
    pub(crate) headers: Option<Value>,
}

/// Two opened responses are equal when their bodies are the same text.
impl PartialEq for Opened {
    fn eq(&self, other: &Self) -> bool {
        self.body.as_deref().map(RawValue::get) == other.body.as_deref().map(RawValue::get)
            && self.headers == other.headers
    }
}

/// The sealed envelope of the second layout.
#[derive(serde::Serialize, serde::Deserialize)]
struct Envelope {
    body: Option<Box<RawValue>>,
    headers: Option<Value>,
}

impl ResponseKeys {
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
    pub(crate) fn seal_response<B: serde::Serialize + ?Sized>(
        &self,
        row: RowIdentity<'_>,
        body: Option<&B>,
        headers: &Value,
    ) -> Result<Option<Sealed>, SealError> {
        if self.is_empty() {
            return Ok(None);
        }
        let plaintext =
            serde_json::to_vec(&EnvelopeRef { body, headers }).map_err(|_| SealError)?;
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
            let body = stored
                .response_body
                .map(|body| serde_json::value::to_raw_value(&body))
                .transpose()
                .map_err(|_| OpenError::Malformed)?;
            return Ok(Opened {
                body,
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

    fn parsed(body: Option<Box<RawValue>>) -> Option<Value> {
        body.map(|body| serde_json::from_str(body.get()).expect("json"))
    }

    /// A sealed body opens as the text that was sealed: a replay keeps the original's members
    /// in the original's order.
    #[test]
    fn a_sealed_body_opens_as_its_own_text() {
        let keys = ResponseKeys::parse(&format!("k1:{KEY_A}")).expect("parse");
        let body = RawValue::from_string(r#"{"symbol":"AAPL","id":"o1","qty":"3"}"#.to_owned())
            .expect("json");
        let headers = serde_json::json!({});
        let sealed = keys
            .seal_response(row(1), Some(&*body), &headers)
            .expect("seal")
            .expect("keys");
        let opened = keys
            .open_response(row(1), sealed_columns(sealed))
            .expect("open");
        assert_eq!(opened.body.as_deref().map(RawValue::get), Some(body.get()));
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
        assert_eq!(parsed(opened.body), Some(body.clone()));
        assert_eq!(opened.headers, Some(headers.clone()));

        // A policy that keeps no body still seals the headers.
        let headers_only = keys
            .seal_response(row(1), None::<&Value>, &headers)
            .expect("seal")
            .expect("keys");
        let opened = keys
            .open_response(row(1), sealed_columns(headers_only))
            .expect("open");
        assert_eq!(
            (parsed(opened.body), opened.headers),
            (None, Some(headers.clone()))
        );

        // A plain row (written before keys were configured) still reads.
        let plain = StoredColumns {
            response_body: Some(body.clone()),
            response_headers: Some(headers.clone()),
            ..StoredColumns::default()
        };
        let opened = keys.open_response(row(1), plain).expect("plain");
        assert_eq!(
            (parsed(opened.body), opened.headers),
            (Some(body), Some(headers))
        );
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
        assert_eq!(parsed(opened.body), Some(serde_json::json!({ "id": "o1" })));
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
