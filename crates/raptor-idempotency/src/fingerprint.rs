//! The request fingerprint stored as `request_hash`: hex SHA-256 over the method, the concrete
//! path and query, and the body with JSON object keys sorted recursively (raw bytes otherwise).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Hex SHA-256 fingerprint of one request.
pub fn fingerprint(method: &str, path_and_query: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path_and_query.as_bytes());
    hasher.update(b"\n");
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => {
            hasher.update(b"json:");
            write_canonical(&value, &mut hasher);
        }
        Err(_) => {
            hasher.update(b"raw:");
            hasher.update(body);
        }
    }
    hex::encode(hasher.finalize())
}

/// The canonical text goes straight into the hash, without a string of its own.
struct Hashing<'a>(&'a mut Sha256);

impl std::io::Write for Hashing<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `value` as compact JSON with object keys in byte order at every depth. Done by hand
/// rather than trusting `serde_json::Map`'s order, which a `preserve_order` feature enabled
/// anywhere in the dependency graph would silently change. Strings and scalars are written by
/// serde_json, as `Value`'s `Display` writes them.
fn write_canonical(value: &Value, out: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.update(b"{");
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                write_scalar(key, out);
                out.update(b":");
                write_canonical(item, out);
            }
            out.update(b"}");
        }
        Value::Array(items) => {
            out.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                write_canonical(item, out);
            }
            out.update(b"]");
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(scalar: &(impl serde::Serialize + ?Sized), out: &mut Sha256) {
    // Writing into a hash cannot fail, and a string or a parsed scalar always serialises.
    let _ = serde_json::to_writer(Hashing(out), scalar);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = fingerprint(
            "POST",
            "/x",
            br#"{"b":1,"a":{"d":[1,{"z":1,"y":2}],"c":"s"}}"#,
        );
        let b = fingerprint(
            "POST",
            "/x",
            br#"{ "a": {"c": "s", "d": [1, {"y": 2, "z": 1}]}, "b": 1 }"#,
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn method_path_query_and_values_matter() {
        let base = fingerprint("POST", "/p/AAPL/roll", br#"{"qty":"1"}"#);
        assert_ne!(base, fingerprint("PUT", "/p/AAPL/roll", br#"{"qty":"1"}"#));
        assert_ne!(base, fingerprint("POST", "/p/MSFT/roll", br#"{"qty":"1"}"#));
        assert_ne!(
            base,
            fingerprint("POST", "/p/AAPL/roll?x=1", br#"{"qty":"1"}"#)
        );
        assert_ne!(base, fingerprint("POST", "/p/AAPL/roll", br#"{"qty":"2"}"#));
        assert_ne!(base, fingerprint("POST", "/p/AAPL/roll", br#"{"qty":1}"#));
        assert_ne!(
            base,
            fingerprint("POST", "/p/AAPL/roll", br#"[{"qty":"1"}]"#)
        );
    }

    /// Stored keys keep their `request_hash` across releases (a retry after a deploy must still
    /// match): the value for one body, computed independently (Python's `json.dumps` with
    /// `sort_keys=True, separators=(",", ":"), ensure_ascii=False`, then SHA-256), with escapes,
    /// non-ASCII, nesting and numbers.
    #[test]
    fn the_fingerprint_of_a_body_does_not_change_between_releases() {
        let body = r#"{"b": 1, "a": {"d": [1, {"z": true, "y": null}],
                        "c": "s\"q\n\u00fc\u0001"}, "qty": "1.50", "n": -2.5}"#;
        assert_eq!(
            fingerprint("POST", "/api/trading/orders?x=1", body.as_bytes()),
            "f53dcd6d76421adfc488ac631093cee5c755efa4ffe95d1cf99af3f8d22ac42c"
        );
    }

    #[test]
    fn non_json_bodies_hash_their_bytes() {
        assert_eq!(
            fingerprint("POST", "/", b"a=1"),
            fingerprint("POST", "/", b"a=1")
        );
        assert_ne!(
            fingerprint("POST", "/", b"a=1"),
            fingerprint("POST", "/", b"a=2")
        );
        assert_ne!(
            fingerprint("POST", "/", b"1"),
            fingerprint("POST", "/", b" x1")
        );
    }
}
