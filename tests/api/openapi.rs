//! The checked-in spec matches the generated one, and documents what clients rely on.

#[test]
fn checked_in_spec_is_current() {
    let generated = raptor_api::openapi::to_json(&raptor_api::openapi());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/openapi.json");
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        generated == on_disk,
        "openapi/openapi.json is out of date: run `make openapi`"
    );
}

#[test]
fn order_routes_document_every_outcome() {
    let spec: serde_json::Value =
        serde_json::from_str(&raptor_api::openapi::to_json(&raptor_api::openapi())).expect("json");
    for (path, success) in [
        ("/api/trading/orders", "201"),
        ("/api/trading/positions/{symbol}/roll", "201"),
        ("/api/trading/positions/{symbol}/close", "201"),
        ("/api/trading/account/reset", "200"),
    ] {
        let op = &spec["paths"][path]["post"];
        for status in [success, "400", "401", "403", "409", "422", "503"] {
            assert!(op["responses"][status].is_object(), "{path} lacks {status}");
        }
        let params = op["parameters"].as_array().expect("parameters");
        assert!(
            params
                .iter()
                .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"),
            "{path} lacks the Idempotency-Key header"
        );
    }
    assert_eq!(
        spec["paths"]["/api/trading/orders"]["post"]["operationId"],
        "create_order"
    );
}

/// Every `Idempotency-Key` header is one string schema whose pattern is the parser's
/// (`raptor_idempotency::key::KEY_PATTERN`, checked against the parser there): no `anyOf`, so
/// generated clients type it `string`.
#[test]
fn the_idempotency_key_header_is_one_string_schema_with_the_parsers_pattern() {
    let spec: serde_json::Value =
        serde_json::from_str(&raptor_api::openapi::to_json(&raptor_api::openapi())).expect("json");
    let (shortest, longest) = raptor_idempotency::key::KEY_LENGTHS;
    let expected = serde_json::json!({
        "type": "string",
        "format": "idempotency-key",
        "pattern": raptor_idempotency::key::KEY_PATTERN,
        "minLength": shortest,
        "maxLength": longest,
    });
    let mut keyed = 0;
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            for param in op["parameters"].as_array().into_iter().flatten() {
                if param["name"] == "Idempotency-Key" {
                    assert_eq!(param["schema"], expected, "{method} {path}");
                    keyed += 1;
                }
            }
        }
    }
    assert!(keyed >= 8, "only {keyed} operations take the header");
}

/// The checked-in document is the one `CHANGELOG.md`'s newest entry names (by SHA-256), and that
/// entry's version is the document's `info.version`: a document that changed without a new
/// entry, or a version that did not follow, fails here.
#[test]
fn the_changelog_names_the_current_document_and_version() {
    use sha2::Digest;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let document = std::fs::read(format!("{root}/openapi/openapi.json")).expect("openapi.json");
    let hash = hex::encode(sha2::Sha256::digest(&document));
    let version = serde_json::from_slice::<serde_json::Value>(&document).expect("JSON")["info"]
        ["version"]
        .as_str()
        .expect("info.version")
        .to_owned();
    let changelog = std::fs::read_to_string(format!("{root}/CHANGELOG.md")).expect("CHANGELOG.md");
    let newest = changelog
        .split("\n## ")
        .nth(1)
        .expect("CHANGELOG.md has an entry");
    let heading = newest.lines().next().unwrap_or_default();
    assert!(
        heading.starts_with(&format!("{version} ")),
        "CHANGELOG.md's newest entry is {heading:?}, the document's info.version is {version}: \
         add an entry for the new version"
    );
    assert!(
        newest.contains(&format!("document: sha256 {hash}")),
        "openapi/openapi.json (sha256 {hash}) is not the document CHANGELOG.md's newest entry \
         ({heading}) names: a changed document needs a new version and an entry"
    );
}
