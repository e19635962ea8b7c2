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

mod cipher;
mod keys;
mod reencrypt;

pub use cipher::NONCE_LEN;
pub(crate) use cipher::{RowIdentity, SealError, Sealed, StoredColumns, SEAL_V2};
pub use keys::{KeysError, ResponseKeys, KEY_LEN, MAX_KID_LEN};
pub use reencrypt::{reencrypt, ReencryptError, Reencrypted};
