//! The OpenAPI document: the shared parts (info, security, error body, the Idempotency-Key
//! header) and its two renderings, JSON and a small HTML page.

use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::OpenApi as Spec;
use utoipa::{IntoParams, Modify, OpenApi, ToSchema};

use crate::codes;

pub mod examples;

/// The document's fixed parts; every path comes from the routers via utoipa-axum.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Raptor write API",
        description = "Orders, option rolls, billing and account changes with Idempotency-Key \
                       at-most-once execution. Errors are RFC 9457 problem details; every code \
                       is explained at /docs/errors.",
        version = "0.9.0",
        license(name = "Proprietary", identifier = "LicenseRef-Proprietary")
    ),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody, codes::ErrorCode, crate::trading::dto::OrderListStatus)),
    tags(
        (name = "ops", description = "Health, readiness, metrics"),
        (name = "trading", description = "Paper orders, rolls, closes, account"),
        (name = "account", description = "Profile, export and erasure"),
        (name = "billing", description = "Stripe checkout and portal sessions, the subscription mirror, webhooks"),
        (name = "auth", description = "Sign-up and sessions by email magic link"),
        (name = "waitlist", description = "The waitlist"),
        (name = "admin", description = "Operator tooling"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut Spec) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The `Idempotency-Key` request header of instrumented routes (its schema, one string with the
/// parser's pattern, is set in `parameter_forms`).
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyHeader {
    /// A UUID (any version), bare or as a quoted structured-field string. Absent: no dedup.
    /// Present: the first request executes, retries replay its response
    /// (`Idempotent-Replayed: true`). Keys are retained 24 hours on order and position routes
    /// (Tier 1) and 7 days on billing and profile routes (Tier 2); after that a key is free
    /// again. See docs/api.md.
    #[param(rename = "Idempotency-Key", value_type = String, required = false,
            example = "5f0c2c3e-3c41-4a0e-9a51-7a7c1d1f6a11")]
    pub idempotency_key: Option<String>,
}

/// The error body every error response carries (documented once in OpenAPI): RFC 9457
/// problem details (`application/problem+json`, see `crate::problem`) plus the stable code,
/// the message and the code's context members (e.g. `buying_power`, `retry_after_ms`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine code, e.g. `insufficient_buying_power`. Each error response lists the
    /// codes its route answers with that status (its description and `x-error-codes`); a client
    /// must accept a code it does not know yet and act on `retry`.
    #[schema(value_type = crate::codes::ErrorCode, example = "insufficient_buying_power")]
    pub error: String,
    /// Human-readable explanation.
    pub message: String,
    /// What to do about it, a property of the code (`docs/errors.md` gives each code's):
    /// `same_key` (retrying with the same `Idempotency-Key` and body can help, after
    /// `Retry-After` when present), `new_key` (the key is spent: a new attempt is a new
    /// operation with a new key) or `no`.
    pub retry: crate::codes::Retry,
    /// Where the code is explained: `/docs/errors#<code>`.
    #[serde(rename = "type")]
    #[schema(example = "/docs/errors#insufficient_buying_power")]
    pub problem_type: String,
    /// The HTTP status's reason phrase.
    #[schema(example = "Forbidden")]
    pub title: String,
    /// The HTTP status.
    #[schema(example = 403)]
    pub status: u16,
    /// Same as `message`.
    pub detail: String,
    /// This occurrence: `urn:request:<x-request-id>`.
    #[schema(
        nullable = false,
        example = "urn:request:5f0c2c3e-3c41-4a0e-9a51-7a7c1d1f6a11"
    )]
    pub instance: Option<String>,
    /// `idempotency_in_flight`: milliseconds until the first attempt may be taken over.
    #[schema(nullable = false)]
    pub retry_after_ms: Option<u64>,
    /// `insufficient_buying_power`: the account's buying power.
    #[schema(required = false, value_type = String, format = "decimal")]
    pub buying_power: Option<String>,
    /// `insufficient_buying_power`: what the order would reserve.
    #[schema(required = false, value_type = String, format = "decimal")]
    pub cost_basis: Option<String>,
    /// `insufficient_qty`, `quote_unavailable`, `contract_expired`, `uncovered_short_option`:
    /// the symbol concerned.
    #[schema(nullable = false)]
    pub symbol: Option<String>,
    /// `insufficient_qty`: the quantity the position has.
    #[schema(required = false, value_type = String, format = "decimal")]
    pub available: Option<String>,
    /// `insufficient_qty`: the quantity the order asked for.
    #[schema(required = false, value_type = String, format = "decimal")]
    pub requested: Option<String>,
    /// `order_not_cancelable`: the order's status (`status` is the HTTP status).
    #[schema(required = false, value_type = crate::trading::dto::OrderStatusDto)]
    pub order_status: Option<String>,
}

/// The JSON bytes served at `/openapi.json` and written to `openapi/openapi.json`.
pub fn to_json(spec: &Spec) -> String {
    let mut json = spec
        .to_pretty_json()
        .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
    json.push('\n');
    json
}

/// A self-contained HTML page listing every operation (no external assets).
pub fn to_html(spec: &Spec) -> String {
    let mut rows = String::new();
    for (path, item) in &spec.paths.paths {
        let operations = [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PUT", &item.put),
            ("PATCH", &item.patch),
            ("DELETE", &item.delete),
        ];
        for (method, operation) in operations {
            let Some(operation) = operation else { continue };
            let summary = operation.summary.as_deref().unwrap_or_default();
            let description = operation.description.as_deref().unwrap_or_default();
            let statuses: Vec<&str> = operation
                .responses
                .responses
                .keys()
                .map(String::as_str)
                .collect();
            rows.push_str(&format!(
                "<tr><td><code>{method}</code></td><td><code>{}</code></td><td><b>{}</b><br>{}</td><td>{}</td></tr>\n",
                escape(path),
                escape(summary),
                escape(description).replace('\n', "<br>"),
                escape(&statuses.join(" ")),
            ));
        }
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}td{{vertical-align:top;padding:.4em;border-bottom:1px solid #ddd}}</style>\
         </head><body><h1>{title} {version}</h1><p>{description}</p>\
         <p>Machine-readable: <a href=\"/openapi.json\">/openapi.json</a></p>\
         <table><tr><th>Method</th><th>Path</th><th>Description</th><th>Responses</th></tr>\n{rows}</table></body></html>\n",
        title = escape(&spec.info.title),
        version = escape(&spec.info.version),
        description = escape(spec.info.description.as_deref().unwrap_or_default()),
    )
}

/// HTML-escapes text for the pages served under `/docs`.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Schemas a replay of an instrumented route can carry: each gets the replay marker.
const REPLAYABLE: &[&str] = &[
    "OrderResponse",
    "AccountResponse",
    "CheckoutSessionResponse",
    "PortalSessionResponse",
    "SubscriptionResponse",
    "ProfileResponse",
    "ErrorBody",
];

fn header(description: &str, schema: utoipa::openapi::schema::Type) -> utoipa::openapi::Header {
    let mut header =
        utoipa::openapi::Header::new(utoipa::openapi::ObjectBuilder::new().schema_type(schema));
    header.description = Some(description.to_owned());
    header
}

/// Final touches the route attributes cannot say, in one pass over the operations and one over
/// the schemas:
/// - every operation's error responses, from `crate::codes` and `route_codes`, every
///   resource's table of its operations' own codes (`error_responses`);
/// - the response headers: `x-request-id` on every answer; `Idempotent-Replayed` on instrumented
///   routes; `WWW-Authenticate` on 401; `Retry-After` where a retry is asked for (409, 429,
///   503); `Location` on a created order;
/// - the parameters' accepted forms (symbols, both `Idempotency-Key` forms), bodies that may be
///   absent, `security: []` on public operations, `x-internal` on the ops probes, the server;
/// - decimal and symbol patterns, and the `idempotency_replayed` member a replay adds to its
///   stored body.
pub fn finish(spec: &mut Spec, route_codes: &[codes::RouteCodes]) {
    use utoipa::openapi::schema::Type;
    let Spec {
        paths,
        components,
        servers,
        ..
    } = spec;
    for item in paths.paths.values_mut() {
        for (_, operation) in operations_mut(item) {
            // Reads an absent `security` as public, so before `mark_public` fills it in.
            error_responses(operation, route_codes);
            response_headers(operation);
            parameter_forms(operation);
            optional_body(operation, components.as_ref());
            mark_public(operation);
            mark_internal(operation);
            operation_examples(operation);
            operation.description = operation.description.as_deref().map(unwrap_lines);
        }
    }
    *servers = Some(vec![utoipa::openapi::server::Server::new("/")]);
    if let Some(components) = components.as_mut() {
        for schema in components.schemas.values_mut() {
            decimal_patterns(schema);
            symbol_patterns(schema);
        }
        unsigned_decimals(components);
        for name in REPLAYABLE {
            if let Some(utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(
                object,
            ))) = components.schemas.get_mut(*name)
            {
                object.properties.insert(
                    "idempotency_replayed".to_owned(),
                    utoipa::openapi::ObjectBuilder::new()
                        .schema_type(Type::Boolean)
                        .description(Some(
                            "Present (`true`) only on a replay of a stored answer.",
                        ))
                        .into(),
                );
            }
        }
    }
}

/// A doc comment's paragraphs as the document carries them: the lines of a paragraph joined
/// by a space (they were wrapped for the source, not for a reader), paragraphs kept apart.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The operation's examples from [`examples`]: its JSON request body, its success answer and
/// its path parameters.
fn operation_examples(operation: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::RefOr;
    let Some(id) = operation.operation_id.clone() else {
        return;
    };
    if let Some(example) = examples::request(&id) {
        if let Some(content) = operation
            .request_body
            .as_mut()
            .and_then(|body| body.content.get_mut("application/json"))
        {
            content.example = Some(example);
        }
    }
    if let Some(example) = examples::response(&id) {
        let success = operation
            .responses
            .responses
            .iter_mut()
            .find(|(status, _)| status.starts_with('2'));
        if let Some((_, RefOr::T(response))) = success {
            for content in response.content.values_mut() {
                content.example = Some(example.clone());
            }
        }
    }
    for parameter in operation.parameters.iter_mut().flatten() {
        if matches!(parameter.parameter_in, ParameterIn::Path) {
            if let Some(example) = examples::parameter(&id, &parameter.name) {
                *parameter = utoipa::openapi::path::ParameterBuilder::from(parameter.clone())
                    .example(Some(example))
                    .build();
            }
        }
    }
}

/// The `ops` operations (`/healthz`, `/readyz`, `/metrics`) are for load balancers, probes and
/// Prometheus, not for the apps: `x-internal: true` tells client generators to leave them out.
fn mark_internal(operation: &mut utoipa::openapi::path::Operation) {
    if operation.tags.iter().flatten().any(|t| t == "ops") {
        let internal = utoipa::openapi::extensions::ExtensionsBuilder::new()
            .add("x-internal", true)
            .build();
        match operation.extensions.as_mut() {
            Some(extensions) => extensions.merge(internal),
            None => operation.extensions = Some(internal),
        }
    }
}

/// Does the operation take an `Idempotency-Key`?
fn is_keyed(operation: &utoipa::openapi::path::Operation) -> bool {
    operation
        .parameters
        .iter()
        .flatten()
        .any(|p| p.name == KEY_HEADER)
}

/// The header's name as the document spells it.
const KEY_HEADER: &str = "Idempotency-Key";

/// The `format` of the `Idempotency-Key` header's schema (a name of ours, see `parameter_forms`).
const KEY_FORMAT: &str = "idempotency-key";

/// The response headers of one operation's answers.
fn response_headers(operation: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::schema::Type;
    let instrumented = is_keyed(operation);
    let creates_order = operation.tags.iter().flatten().any(|t| t == "trading");
    for (status, response) in operation.responses.responses.iter_mut() {
        let code = status.parse::<u16>().unwrap_or(0);
        let utoipa::openapi::RefOr::T(response) = response else {
            continue;
        };
        response.headers.insert(
            "x-request-id".to_owned(),
            header(
                "The request's id (sent by the client, or made here); also the error's `instance`.",
                Type::String,
            ),
        );
        if instrumented {
            response.headers.insert(
                "Idempotent-Replayed".to_owned(),
                replayed_header("`true` on a replay of a stored answer, `false` on a fresh one (absent when the request was refused before its key was looked at)."),
            );
        }
        if code == 401 {
            response.headers.insert(
                "WWW-Authenticate".to_owned(),
                header("`Bearer`.", Type::String),
            );
        }
        if matches!(code, 409 | 429 | 503) {
            response.headers.insert(
                "Retry-After".to_owned(),
                header("Seconds to wait before retrying (with the same Idempotency-Key), when a retry can help.", Type::Integer),
            );
        }
        if code == 201 && creates_order {
            response.headers.insert(
                "Location".to_owned(),
                header(
                    "The created order: `/api/trading/orders/{id}` (replayed too).",
                    Type::String,
                ),
            );
        }
    }
}

/// The operations of a path item, with their method names.
fn operations_mut(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = (&'static str, &mut utoipa::openapi::path::Operation)> {
    [
        ("GET", &mut item.get),
        ("PUT", &mut item.put),
        ("POST", &mut item.post),
        ("DELETE", &mut item.delete),
        ("PATCH", &mut item.patch),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.as_mut().map(|op| (method, op)))
}

/// What `codes::operation_codes` needs to know about an operation, read off the operation.
fn shape(operation_id: &str, operation: &utoipa::openapi::path::Operation) -> codes::Shape {
    use utoipa::openapi::path::ParameterIn;
    let parameters = operation.parameters.as_deref().unwrap_or_default();
    codes::Shape {
        ops: operation.tags.iter().flatten().any(|t| t == "ops"),
        authenticated: operation.security.as_ref().is_some_and(|s| !s.is_empty()),
        json_body: operation.request_body.is_some() && !codes::RAW_BODY.contains(&operation_id),
        keyed: is_keyed(operation),
        query: parameters
            .iter()
            .any(|p| matches!(p.parameter_in, ParameterIn::Query)),
        uuid_path: parameters
            .iter()
            .any(|p| matches!(p.parameter_in, ParameterIn::Path) && p.name == "id"),
    }
}

/// Replaces an operation's error responses with the ones `crate::codes` computes: one per
/// status, `application/problem+json` with the shared `ErrorBody` schema, the operation's codes
/// at that status listed in the description and in `x-error-codes`, with an example. An operation the table does not know keeps what its attributes
/// say (a test keeps that list empty).
fn error_responses(
    operation: &mut utoipa::openapi::path::Operation,
    route_codes: &[codes::RouteCodes],
) {
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    let Some(operation_id) = operation.operation_id.clone() else {
        return;
    };
    let form = shape(&operation_id, operation);
    let Some(codes) = codes::operation_codes(route_codes, &operation_id, form) else {
        return;
    };
    let mut by_status: std::collections::BTreeMap<u16, Vec<codes::ErrorCode>> = Default::default();
    for code in codes {
        for status in code.statuses() {
            by_status.entry(*status).or_default().push(code);
        }
    }
    let responses = &mut operation.responses.responses;
    for (status, codes) in by_status {
        // A status the route's attribute already answers (`/readyz`'s 503) keeps its response.
        if responses.contains_key(&status.to_string()) {
            continue;
        }
        let reason = axum::http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        let description = codes
            .iter()
            .map(|c| format!("- `{c}`: {}", c.summary()))
            .collect::<Vec<_>>()
            .join("\n");
        // One shared problem schema (and its one code enum) for every error response: generated
        // clients get one error type, not one per operation and status. The codes this
        // operation answers with this status stay in the document for humans (the description)
        // and for tools (`x-error-codes`, which the TypeScript contract test checks answers
        // against).
        let schema = Ref::from_schema_name("ErrorBody");
        let first = codes[0];
        let example = serde_json::json!({
            "error": first.as_str(),
            "message": first.summary(),
            "retry": first.retry().as_str(),
            "type": crate::problem::type_uri(first.as_str()),
            "title": reason,
            "status": status,
            "detail": first.summary(),
            "instance": "urn:request:5f0c2c3e-3c41-4a0e-9a51-7a7c1d1f6a11",
        });
        let listed = utoipa::openapi::extensions::ExtensionsBuilder::new()
            .add(
                "x-error-codes",
                codes.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            )
            .build();
        let response = ResponseBuilder::new()
            .description(format!("{reason}:\n{description}"))
            .extensions(Some(listed))
            .content(
                crate::problem::CONTENT_TYPE,
                ContentBuilder::new()
                    .schema(Some(schema))
                    .example(Some(example))
                    .build(),
            )
            .build();
        responses.insert(status.to_string(), RefOr::T(response));
    }
}

/// What a decimal string looks like: an optional minus, digits, an optional fraction.
pub const DECIMAL_PATTERN: &str = r"^-?[0-9]{1,20}(\.[0-9]{1,12})?$";

/// Gives every `format: decimal` string (money, quantities, prices) its pattern, in nested
/// properties and array items too.
fn decimal_patterns(schema: &mut utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>) {
    use utoipa::openapi::schema::{ArrayItems, Schema, SchemaFormat};
    use utoipa::openapi::RefOr;
    let RefOr::T(schema) = schema else { return };
    match schema {
        Schema::Object(object) => {
            if matches!(&object.format, Some(SchemaFormat::Custom(f)) if f == "decimal") {
                object.pattern = Some(DECIMAL_PATTERN.to_owned());
            }
            object.properties.values_mut().for_each(decimal_patterns);
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                decimal_patterns(items);
            }
        }
        Schema::AllOf(all) => all.items.iter_mut().for_each(decimal_patterns),
        Schema::OneOf(one) => one.items.iter_mut().for_each(decimal_patterns),
        Schema::AnyOf(any) => any.items.iter_mut().for_each(decimal_patterns),
        _ => {}
    }
}

/// What a decimal that may not be negative looks like: [`DECIMAL_PATTERN`] without the minus.
pub const UNSIGNED_DECIMAL_PATTERN: &str = r"^[0-9]{1,20}(\.[0-9]{1,12})?$";

/// The request decimals the server refuses when negative, as `(schema, property)`: quantities
/// (`422 invalid_order`: a quantity is positive) and quoted prices (`422 invalid_quote`). Limit
/// prices are not here: a multi-leg order's or a roll's net limit is negative for a credit.
pub const UNSIGNED_DECIMALS: &[(&str, &str)] = &[
    ("CreateOrderRequest", "qty"),
    ("RollRequest", "qty"),
    ("ClosePositionRequest", "qty"),
    ("SetQuoteRequest", "bid"),
    ("SetQuoteRequest", "ask"),
];

/// Gives the [`UNSIGNED_DECIMALS`] the pattern without a minus sign.
fn unsigned_decimals(components: &mut utoipa::openapi::Components) {
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    for (schema, property) in UNSIGNED_DECIMALS {
        if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(*schema) {
            if let Some(RefOr::T(Schema::Object(property))) = object.properties.get_mut(*property) {
                property.pattern = Some(UNSIGNED_DECIMAL_PATTERN.to_owned());
            }
        }
    }
}

/// What a symbol looks like: an equity ticker (letters, at most one `.`; at most 6 letters in
/// all, which a pattern does not say) or a compact OCC option symbol (root, `YYMMDD`, `C`/`P`,
/// strike × 1000 in 8 digits). The engine's parser is stricter (a real expiry date, a non-zero
/// strike): those answer `422 invalid_symbol`.
pub const SYMBOL_PATTERN: &str =
    r"^([A-Z]{1,6}|[A-Z]{1,5}\.[A-Z]{1,5}|[A-Z]{1,6}[0-9]{6}[CP][0-9]{8})$";

/// Gives every `symbol`/`to_symbol` string property its pattern.
fn symbol_patterns(schema: &mut utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>) {
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    let RefOr::T(Schema::Object(object)) = schema else {
        return;
    };
    for (name, property) in object.properties.iter_mut() {
        if let RefOr::T(Schema::Object(property)) = property {
            if matches!(name.as_str(), "symbol" | "to_symbol") {
                property.pattern = Some(SYMBOL_PATTERN.to_owned());
            }
        }
    }
}

/// An instrumented route reads an absent body as `{}`: where `{}` is a valid body (no required
/// member: the account reset, a profile patch, a close of everything, a cancellation), the
/// document says the body is optional.
fn optional_body(
    operation: &mut utoipa::openapi::path::Operation,
    components: Option<&utoipa::openapi::Components>,
) {
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::{RefOr, Required};
    let keyed = is_keyed(operation);
    let Some(body) = operation.request_body.as_mut() else {
        return;
    };
    let Some(RefOr::Ref(reference)) = body
        .content
        .get("application/json")
        .and_then(|c| c.schema.as_ref())
    else {
        return;
    };
    let name = reference
        .ref_location
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let empty_is_valid = components.is_some_and(|c| {
        matches!(c.schemas.get(name), Some(RefOr::T(Schema::Object(object)))
            if object.required.is_empty())
    });
    if keyed && empty_is_valid {
        body.required = Some(Required::False);
    }
}

/// The parameters' accepted forms: a `{symbol}` path parameter has the symbol pattern; the
/// `Idempotency-Key` header is a bare UUID or the IETF draft's structured-field string (the UUID
/// in double quotes).
fn parameter_forms(operation: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaFormat, Type};
    use utoipa::openapi::RefOr;
    for parameter in operation.parameters.iter_mut().flatten() {
        if matches!(parameter.parameter_in, ParameterIn::Path) && parameter.name == "symbol" {
            if let Some(RefOr::T(Schema::Object(object))) = parameter.schema.as_mut() {
                object.pattern = Some(SYMBOL_PATTERN.to_owned());
            }
        }
        if parameter.name == KEY_HEADER {
            // One string schema for both forms, so generated clients type the header `string`
            // (an `anyOf` with a `uuid` member crashes openapi-python-client). The named format
            // is an annotation validators ignore; it lets the fuzzer (fuzz/hooks.py) generate
            // valid keys, which it does not do for a header pattern that needs a `-`.
            let (shortest, longest) = raptor_idempotency::key::KEY_LENGTHS;
            let key = ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::Custom(KEY_FORMAT.to_owned())))
                .pattern(Some(raptor_idempotency::key::KEY_PATTERN))
                .min_length(Some(shortest))
                .max_length(Some(longest))
                .build();
            parameter.schema = Some(RefOr::T(Schema::Object(key)));
        }
    }
}

/// An operation without a bearer token says so (`security: []`: no requirement), so a reader
/// and a linter can tell "public" from "forgot to say". Not `[{}]` (an empty requirement, which
/// also means anonymous): openapi-python-client reads that as "a token is required". Runs after
/// `error_responses`, which reads an absent `security` as public.
fn mark_public(operation: &mut utoipa::openapi::path::Operation) {
    if operation.security.is_none() {
        operation.security = Some(Vec::new());
    }
}

/// `Idempotent-Replayed`: `"true"` or `"false"`.
fn replayed_header(description: &str) -> utoipa::openapi::Header {
    let mut header = utoipa::openapi::Header::new(
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(["true", "false"])),
    );
    header.description = Some(description.to_owned());
    header
}
