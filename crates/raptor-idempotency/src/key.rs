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

/// The accepted forms as one ECMA-262 pattern (the OpenAPI document's `pattern` for the
/// header): a hyphenated UUID in any letter case, bare or in double quotes. The end is anchored
/// with `(?![\s\S])` ("no character follows") rather than `$`, which Python's `re` also lets
/// match before a trailing newline. [`IdempotencyKey::parse`] accepts exactly the strings this
/// pattern matches (the tests check a table of edge values).
pub const KEY_PATTERN: &str = concat!(
    r#"^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"#,
    r#"|"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")(?![\s\S])"#,
);

/// The shortest (bare) and longest (quoted) accepted key, in characters.
pub const KEY_LENGTHS: (usize, usize) = (36, 38);

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
        // Optional whitespace around a field value is not part of it (RFC 9110, 5.5).
        Self::parse(text.trim_matches([' ', '\t'])).map(Some)
    }

    /// Parses a bare UUID (`0a1b…`) or the IETF draft's sf-string form (`"0a1b…"`): exactly the
    /// strings [`KEY_PATTERN`] matches.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
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
        for text in [K, &K.to_lowercase(), &format!("\"{K}\"")] {
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

    /// The pattern the table below was checked against, by hand: a change of [`KEY_PATTERN`]
    /// fails here until the table is checked again and this copy updated.
    const CHECKED_PATTERN: &str = r#"^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")(?![\s\S])"#;

    /// Edge values and whether [`CHECKED_PATTERN`] matches them (ECMA-262 and Python `re` agree
    /// on every row: no `$`, no flags).
    fn pattern_table() -> Vec<(String, bool)> {
        let lower = K.to_lowercase();
        vec![
            // Both forms, any case, any version and variant (the nil and the max UUID too).
            (K.to_owned(), true),
            (lower.clone(), true),
            ("6f9619ff-8B86-d011-B42D-00c04fc964FF".to_owned(), true),
            (format!("\"{K}\""), true),
            (format!("\"{lower}\""), true),
            ("00000000-0000-0000-0000-000000000000".to_owned(), true),
            ("ffffffff-ffff-ffff-ffff-ffffffffffff".to_owned(), true),
            ("5f0c2c3e-3c41-4a0e-9a51-7a7c1d1f6a11".to_owned(), true),
            ("5f0c2c3e-3c41-7a0e-ca51-7a7c1d1f6a11".to_owned(), true),
            // Anything before or after, including what `$` would let through in Python.
            (format!("{K}\n"), false),
            (format!("\"{K}\"\n"), false),
            (format!(" {K}"), false),
            (format!("{K} "), false),
            (format!("\t{K}"), false),
            (format!("{K}0"), false),
            (format!("0{K}"), false),
            (format!("{K}\""), false),
            (format!("\"{K}"), false),
            (format!("\"\"{K}\"\""), false),
            (format!("'{K}'"), false),
            (format!("\" {K}\""), false),
            // Other spellings of a UUID.
            (K.replace('-', ""), false),
            (format!("{{{K}}}"), false),
            (format!("urn:uuid:{K}"), false),
            ("6F9619FF8-B86-D011-B42D-00C04FC964FF".to_owned(), false),
            ("6F9619FF-8B86-D011-B42D-00C04FC964F".to_owned(), false),
            ("6F9619FF-8B86-D011-B42D-00C04FC964FG".to_owned(), false),
            ("6F9619FF-8B86-D011-B42D_00C04FC964FF".to_owned(), false),
            ("６F9619FF-8B86-D011-B42D-00C04FC964F".to_owned(), false),
            // What the fuzzer sends for "wrong type" and empty values.
            (String::new(), false),
            ("\"\"".to_owned(), false),
            ("0".to_owned(), false),
            ("null".to_owned(), false),
            ("true".to_owned(), false),
            (format!("{K},{K}"), false),
        ]
    }

    #[test]
    fn the_parser_accepts_exactly_what_the_documented_pattern_matches() {
        assert_eq!(KEY_PATTERN, CHECKED_PATTERN, "check the table again");
        for (text, matches) in pattern_table() {
            assert_eq!(IdempotencyKey::parse(&text).is_ok(), matches, "{text:?}");
            if matches {
                let (shortest, longest) = KEY_LENGTHS;
                assert!(
                    (shortest..=longest).contains(&text.chars().count()),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn whitespace_around_the_header_value_is_not_part_of_the_key() {
        for text in [format!("  {K} "), format!("\t\"{K}\"\t")] {
            let mut headers = HeaderMap::new();
            headers.append(HEADER, HeaderValue::from_str(&text).expect("header value"));
            let key = IdempotencyKey::from_headers(&headers).expect("valid key");
            assert_eq!(key.map(|k| k.to_string()), Some(K.to_lowercase()));
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
