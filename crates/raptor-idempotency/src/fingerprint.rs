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
            let mut canonical = String::with_capacity(body.len());
            write_canonical(&value, &mut canonical);
            hasher.update(b"json:");
            hasher.update(canonical.as_bytes());
        }
        Err(_) => {
            hasher.update(b"raw:");
            hasher.update(body);
        }
    }
    hex::encode(hasher.finalize())
}

/// Writes `value` as compact JSON with object keys in byte order at every depth. Done by hand
/// rather than trusting `serde_json::Map`'s order, which a `preserve_order` feature enabled
/// anywhere in the dependency graph would silently change.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
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
