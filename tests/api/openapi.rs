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

/// The limits the server enforces are in the schema: `legs` 2 to 4, the request URLs absolute
/// (`format: uri`) and at most 2048 characters, quantities and quoted prices without a minus
/// sign (and the signed limit prices of rolls and multi-leg orders with one).
#[test]
fn request_limits_are_in_the_schema() {
    let spec: serde_json::Value =
        serde_json::from_str(&raptor_api::openapi::to_json(&raptor_api::openapi())).expect("json");
    let schemas = &spec["components"]["schemas"];
    let legs = &schemas["CreateOrderRequest"]["properties"]["legs"];
    assert_eq!(legs["minItems"], 2, "{legs}");
    assert_eq!(legs["maxItems"], 4, "{legs}");
    let mut urls = 0;
    for (name, schema) in schemas.as_object().expect("schemas") {
        for (property, value) in schema["properties"].as_object().into_iter().flatten() {
            if name.ends_with("Request") && property.ends_with("_url") {
                urls += 1;
                assert_eq!(value["format"], "uri", "{name}.{property}");
                assert_eq!(value["maxLength"], 2048, "{name}.{property}");
            }
        }
    }
    assert_eq!(urls, 3, "success_url, cancel_url, return_url");
    let unsigned = raptor_api::openapi::UNSIGNED_DECIMAL_PATTERN;
    assert!(!unsigned.contains("-?"), "{unsigned}");
    for (schema, property) in [
        ("CreateOrderRequest", "qty"),
        ("RollRequest", "qty"),
        ("ClosePositionRequest", "qty"),
        ("SetQuoteRequest", "bid"),
        ("SetQuoteRequest", "ask"),
    ] {
        let value = &schemas[schema]["properties"][property];
        assert_eq!(value["pattern"], unsigned, "{schema}.{property}: {value}");
    }
    for (schema, property) in [
        ("CreateOrderRequest", "limit_price"),
        ("RollRequest", "limit_price"),
    ] {
        let value = &schemas[schema]["properties"][property];
        assert_eq!(
            value["pattern"],
            raptor_api::openapi::DECIMAL_PATTERN,
            "{schema}.{property} may be a credit: {value}"
        );
    }
}

/// Every operation in the document, with its method and path.
fn operations(spec: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
    let mut all = Vec::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            all.push((method.to_uppercase(), path.clone(), operation.clone()));
        }
    }
    all
}

/// The first 2xx response of an operation, with its status.
fn success(operation: &serde_json::Value) -> (String, serde_json::Value) {
    operation["responses"]
        .as_object()
        .and_then(|r| r.iter().find(|(status, _)| status.starts_with('2')))
        .map(|(status, response)| (status.clone(), response.clone()))
        .unwrap_or_else(|| panic!("{} has no success response", operation["operationId"]))
}

/// Every operation has a short `summary` (a plain phrase of at most 60 characters on one line),
/// a longer `description`, an example of its JSON request body (where it takes one) and of its
/// success answer (where that has a body), and an example of each path parameter.
#[test]
fn every_operation_has_a_summary_a_description_and_examples() {
    let spec: serde_json::Value =
        serde_json::from_str(&raptor_api::openapi::to_json(&raptor_api::openapi())).expect("json");
    let mut missing = Vec::new();
    for (method, path, op) in operations(&spec) {
        let name = format!("{method} {path}");
        let summary = op["summary"].as_str().unwrap_or_default();
        if summary.is_empty()
            || summary.len() > 60
            || summary.contains('\n')
            || summary.ends_with('.')
        {
            missing.push(format!("{name}: summary {summary:?} is not a short phrase"));
        }
        let description = op["description"].as_str().unwrap_or_default();
        if description.len() < 40 || description.len() > 480 {
            missing.push(format!(
                "{name}: description of {} characters (40 to 480)",
                description.len()
            ));
        }
        if let Some(content) = op["requestBody"]["content"].as_object() {
            for (media, content) in content {
                if content["example"].is_null() {
                    missing.push(format!("{name}: no {media} request example"));
                }
            }
        }
        let (status, response) = success(&op);
        for (media, content) in response["content"].as_object().into_iter().flatten() {
            if content["example"].is_null() {
                missing.push(format!("{name}: no {media} example of its {status}"));
            }
        }
        for parameter in op["parameters"].as_array().into_iter().flatten() {
            if parameter["in"] == "path" && parameter["example"].is_null() {
                missing.push(format!("{name}: no example of {}", parameter["name"]));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
