//! `RAPTOR_RESPONSE_KEYS`: the keys that seal stored responses (`kid:base64key,…`; the first
//! seals, every one opens), parsed without ever echoing key material.

use std::fmt;
use std::sync::Arc;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use chacha20poly1305::{ChaCha20Poly1305, KeyInit};

/// Bytes of a key (256 bits).
pub const KEY_LEN: usize = 32;
/// Longest key id.
pub const MAX_KID_LEN: usize = 32;

/// Standard base64, padding optional (`openssl rand -base64 32` or an unpadded copy of it).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub(super) struct Entry {
    pub(super) kid: String,
    // Holds the key; the crate's `zeroize` feature wipes it on drop.
    pub(super) cipher: ChaCha20Poly1305,
}

/// The keys of `RAPTOR_RESPONSE_KEYS`: the first seals new responses, every one opens. Empty
/// means encryption is off (responses are stored as plain JSON). Cheap to clone; `Debug`
/// shows the key ids only.
#[derive(Clone)]
pub struct ResponseKeys {
    pub(super) entries: Arc<[Entry]>,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="; // bytes 0..32
    const KEY_B: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="; // bytes 32..64

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
}
