//! The `Idempotency-Key` request header: parsing and validation (docs/idempotency.md).

use axum::http::HeaderMap;
use uuid::Uuid;

/// The header's name.
pub const HEADER: &str = "idempotency-key";

/// A validated key: a UUID of any version, kept in lower-case hyphenated form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(Uuid);

/// The error code of a refused key header: the design record's sentence, not a snake_case code
/// (its section in `docs/errors.md` is `idempotency_key_invalid`).
pub const KEY_INVALID: &str = "Idempotency-Key must be a UUID string";

/// Why a key header was refused. Every variant answers `400` with the ADR's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// More than one `Idempotency-Key` field line.
    #[error("more than one Idempotency-Key header")]
    Repeated,
    /// Not a hyphenated UUID, bare or as a structured-field string.
    #[error("{KEY_INVALID}")]
    Malformed,
}

impl IdempotencyKey {
    /// Reads the key from request headers: `Ok(None)` when absent.
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, KeyError> {
        let mut values = headers.get_all(HEADER).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(KeyError::Repeated);
        }
        let text = value.to_str().map_err(|_| KeyError::Malformed)?;
        Self::parse(text).map(Some)
    }

    /// Parses a bare UUID (`0a1b…`) or the IETF draft's sf-string form (`"0a1b…"`).
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        let inner = match text.strip_prefix('"') {
            Some(rest) => rest.strip_suffix('"').ok_or(KeyError::Malformed)?,
            None => text,
        };
        // Only the 36-character hyphenated form: `Uuid::try_parse` would also take the simple,
        // braced and URN forms, which the contract does not allow.
        let hyphens_at_rfc_positions = inner.len() == 36
            && inner
                .char_indices()
                .all(|(i, c)| matches!(i, 8 | 13 | 18 | 23) == (c == '-'));
        if !hyphens_at_rfc_positions {
            return Err(KeyError::Malformed);
        }
        Uuid::try_parse(inner)
            .map(Self)
            .map_err(|_| KeyError::Malformed)
    }

    /// The UUID.
    pub fn uuid(&self) -> Uuid {
        self.0
    }
}

impl std::fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Uuid's Display is lower-case hyphenated: the stored form.
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const K: &str = "6F9619FF-8B86-D011-B42D-00C04FC964FF";

    #[test]
    fn accepts_bare_and_quoted_any_case_and_stores_lower_case() {
        for text in [
            K,
            &K.to_lowercase(),
            &format!("\"{K}\""),
            &format!("  {K} "),
        ] {
            let key = IdempotencyKey::parse(text).expect("valid key");
            assert_eq!(key.to_string(), K.to_lowercase());
        }
    }

    #[test]
    fn refuses_everything_else() {
        let long = "a".repeat(300);
        let simple = K.replace('-', "");
        let braced = format!("{{{K}}}");
        let urn = format!("urn:uuid:{K}");
        let unterminated = format!("\"{K}");
        let list = format!("{K}, {K}");
        for text in [
            "",
            "all",
            "admin",
            long.as_str(),
            simple.as_str(),
            braced.as_str(),
            urn.as_str(),
            "\"not-a-uuid\"",
            unterminated.as_str(),
            list.as_str(),
            "6F9619FF-8B86-D011-B42D-00C04FC964FG",
            "6F9619FF8-B86-D011-B42D-00C04FC964FF",
        ] {
            assert_eq!(
                IdempotencyKey::parse(text),
                Err(KeyError::Malformed),
                "{text:?}"
            );
        }
    }

    #[test]
    fn header_absent_single_and_repeated() {
        let mut headers = HeaderMap::new();
        assert_eq!(IdempotencyKey::from_headers(&headers), Ok(None));
        headers.append(HEADER, HeaderValue::from_static(K));
        assert!(matches!(
            IdempotencyKey::from_headers(&headers),
            Ok(Some(_))
        ));
        headers.append(HEADER, HeaderValue::from_static(K));
        assert_eq!(
            IdempotencyKey::from_headers(&headers),
            Err(KeyError::Repeated)
        );
    }
}
