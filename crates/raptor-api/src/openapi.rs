//! The OpenAPI document: the shared parts (info, security, error body, the Idempotency-Key
//! header) and its two renderings, JSON and a small HTML page.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::OpenApi as Spec;
use utoipa::{IntoParams, Modify, OpenApi};

use crate::error::ErrorBody;

/// The document's fixed parts; every path comes from the routers via utoipa-axum.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Raptor write API",
        description = "Orders, option rolls, billing and account changes with Idempotency-Key \
                       at-most-once execution. Errors are RFC 9457 problem details; every code \
                       is explained at /docs/errors.",
        version = "0.1.0",
        license(name = "Proprietary", identifier = "LicenseRef-Proprietary")
    ),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody)),
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

/// The `Idempotency-Key` request header of instrumented routes.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyHeader {
    /// A UUID (any version), bare or as a quoted structured-field string. Absent: no dedup.
    /// Present: the first request executes, retries replay its response
    /// (`Idempotent-Replayed: true`). Keys are retained 24 hours on order and position routes
    /// (Tier 1) and 7 days on billing and profile routes (Tier 2); after that a key is free
    /// again. See docs/api.md.
    #[param(rename = "Idempotency-Key", value_type = String, format = Uuid, required = false)]
    pub idempotency_key: Option<String>,
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

fn escape(text: &str) -> String {
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

/// Final touches the route attributes cannot say:
/// - every 4xx/5xx error envelope is documented with the `application/problem+json` media type
///   it is sent with;
/// - the response headers: `x-request-id` on every answer; `Idempotent-Replayed` on instrumented
///   routes; `Retry-After` where a retry is asked for (409, 429, 503); `Location` on a created
///   order;
/// - the `idempotency_replayed` member a replay adds to its stored body.
pub fn finish(spec: &mut Spec) {
    use utoipa::openapi::schema::Type;
    for item in spec.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            let instrumented = operation
                .parameters
                .iter()
                .flatten()
                .any(|p| p.name == "Idempotency-Key");
            let creates_order = operation.tags.iter().flatten().any(|t| t == "trading");
            for (status, response) in operation.responses.responses.iter_mut() {
                let code = status.parse::<u16>().unwrap_or(0);
                let utoipa::openapi::RefOr::T(response) = response else {
                    continue;
                };
                // Only the error envelope (`/readyz`'s 503 keeps its own JSON shape).
                let is_envelope = response.content.get("application/json").is_some_and(|c| {
                    matches!(&c.schema, Some(utoipa::openapi::RefOr::Ref(r))
                        if r.ref_location.ends_with("/ErrorBody"))
                });
                if code >= 400 && is_envelope {
                    if let Some(content) = response.content.shift_remove("application/json") {
                        response
                            .content
                            .insert(crate::problem::CONTENT_TYPE.to_owned(), content);
                    }
                }
                response.headers.insert(
                    "x-request-id".to_owned(),
                    header("The request's id (sent by the client, or made here); also the error's `instance`.", Type::String),
                );
                if instrumented {
                    response.headers.insert(
                        "Idempotent-Replayed".to_owned(),
                        header("`true` on a replay of a stored answer, `false` on a fresh one (absent when the request was refused before its key was looked at).", Type::String),
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
    }
    if let Some(components) = spec.components.as_mut() {
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
