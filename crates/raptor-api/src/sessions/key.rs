//! The server key that turns a sign-in link into its session token
//! (`RAPTOR_SESSION_KEY`), so that every verification of one link within its grace window
//! answers the **same** session: a client retrying a lost answer, or a double submit, never
//! holds a session that a later answer revoked, and no session token is ever stored (only its
//! SHA-256, as for every token).
//!
//! The token is `rpt_` and the hex HMAC-SHA256 of the link token under the key: computable
//! only by someone holding both the link (which the email carries) and the key (which only the
//! servers hold), so a leaked link stops giving out sessions when its grace ends, and a copy
//! of the database gives out none.

use std::fmt;
use std::sync::Arc;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{ApiError, ApiResult};

/// Bytes of the key.
pub const SESSION_KEY_LEN: usize = 32;

/// Domain separation: a new derivation gets a new tag.
const DOMAIN: &[u8] = b"raptor/link-session/v1\0";

const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// `RAPTOR_SESSION_KEY`: 32 bytes. Cheap to clone; `Debug` never shows it.
#[derive(Clone)]
pub struct SessionKey(Arc<[u8; SESSION_KEY_LEN]>);

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey(***)")
    }
}

/// A malformed `RAPTOR_SESSION_KEY` (the message never repeats it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionKeyError {
    /// Not base64.
    #[error(
        "RAPTOR_SESSION_KEY is not valid base64 (generate one with `openssl rand -base64 32`)"
    )]
    NotBase64,
    /// Not 32 bytes.
    #[error(
        "RAPTOR_SESSION_KEY must decode to {SESSION_KEY_LEN} bytes, not {0} (generate one with \
         `openssl rand -base64 32`)"
    )]
    WrongLength(usize),
}

impl SessionKey {
    /// Parses standard base64 (padding optional).
    pub fn parse(text: &str) -> Result<Self, SessionKeyError> {
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|_| SessionKeyError::NotBase64)?;
        let key: [u8; SESSION_KEY_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| SessionKeyError::WrongLength(bytes.len()))?;
        Ok(Self(Arc::new(key)))
    }

    /// A random key, for a process with none configured (and tests): retries of a link within
    /// this process get the same session; on another replica they get a session of their own.
    pub fn random() -> Self {
        let mut key = [0u8; SESSION_KEY_LEN];
        if getrandom::fill(&mut key).is_err() {
            // No randomness at all: the process cannot make tokens either, and says so there.
            tracing::error!("no randomness for a session key");
        }
        Self(Arc::new(key))
    }

    /// The session token of the sign-in link whose token is `link_token`.
    pub(crate) fn session_token(&self, link_token: &str) -> ApiResult<String> {
        let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&self.0[..]) else {
            // HMAC takes a key of any length; kept as an error rather than a panic.
            return Err(ApiError::Internal(anyhow::anyhow!(
                "HMAC refused the session key"
            )));
        };
        mac.update(DOMAIN);
        mac.update(link_token.as_bytes());
        Ok(format!("rpt_{}", hex::encode(mac.finalize().into_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    #[test]
    fn one_link_one_token_per_key() {
        let key = SessionKey::parse(KEY).expect("key");
        let token = |key: &SessionKey, link: &str| key.session_token(link).expect("token");
        let first = token(&key, "rpl_abc");
        assert_eq!(first, token(&key, "rpl_abc"));
        assert!(
            first.starts_with("rpt_") && first.len() == 4 + 64,
            "{first}"
        );
        assert_ne!(first, token(&key, "rpl_abx"));
        assert_ne!(first, token(&SessionKey::random(), "rpl_abc"));
    }

    #[test]
    fn bad_keys_are_refused_without_echo() {
        assert_eq!(
            SessionKey::parse("not base64!").expect_err("refused"),
            SessionKeyError::NotBase64
        );
        let short = SessionKey::parse("c2hvcnQ=").expect_err("refused");
        assert_eq!(short, SessionKeyError::WrongLength(5));
        assert!(!short.to_string().contains("c2hvcnQ"));
        assert!(format!("{:?}", SessionKey::parse(KEY).expect("key")).contains("***"));
    }
}
