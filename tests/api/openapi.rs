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
