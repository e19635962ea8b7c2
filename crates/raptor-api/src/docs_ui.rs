//! The documentation routes: `GET /openapi.json` (the generated document), `GET /docs/errors`
//! (`docs/errors.md` as HTML) and `GET /docs`: Swagger UI, served from the `swagger-ui-dist` npm package installed in the
//! checkout (`npm ci --omit=dev`), never from a CDN. The assets directory comes from
//! `RAPTOR_DOCS_ASSETS` ([`crate::ApiConfig::docs_assets`]); `/docs/assets/*` serves its files.
//! While it holds no Swagger UI (npm not run), `/docs` answers the built-in route table
//! ([`crate::openapi::to_html`]) with a note saying how to install the assets.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::header;
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use tower_http::services::ServeDir;

use crate::state::ApiState;

/// Our page: loads `/docs/assets/swagger-ui-bundle.js` and its CSS, and reads `/openapi.json`.
const INDEX_HTML: &str = include_str!("docs_ui.html");

/// The files `INDEX_HTML` loads; all must exist for the Swagger UI page to be served.
const REQUIRED_ASSETS: [&str; 2] = ["swagger-ui-bundle.js", "swagger-ui.css"];

/// Whether `dir` holds Swagger UI's assets (checked per request, so installing them while the
/// server runs is picked up).
async fn assets_installed(dir: &Path) -> bool {
    for file in REQUIRED_ASSETS {
        match tokio::fs::metadata(dir.join(file)).await {
            Ok(meta) if meta.is_file() => {}
            _ => return false,
        }
    }
    true
}

/// The fallback: the built-in page, with a note on what is missing.
fn fallback_page(spec: &utoipa::openapi::OpenApi, dir: &Path) -> String {
    let note = format!(
        "<p style=\"background:#fff3cd;padding:.6em\">The interactive reference (Swagger UI) \
         is not installed: no <code>swagger-ui-bundle.js</code> in <code>{}</code> \
         (<code>RAPTOR_DOCS_ASSETS</code>). Run <code>npm ci --omit=dev</code> in the \
         repository, or <code>make run</code>, which does. This is the plain route list.</p>",
        crate::openapi::escape(&dir.display().to_string())
    );
    crate::openapi::to_html(spec).replacen("<body>", &format!("<body>{note}"), 1)
}

/// `/docs` and `/docs/assets/*`.
fn swagger(spec: &utoipa::openapi::OpenApi, assets: PathBuf) -> Router<ApiState> {
    // Both pages are built once; a request only clones a reference to one of them.
    let fallback = Bytes::from(fallback_page(spec, &assets));
    let dir: Arc<Path> = assets.clone().into();
    Router::new()
        .route(
            "/docs",
            get(move || {
                let fallback = fallback.clone();
                let dir = dir.clone();
                async move {
                    if assets_installed(&dir).await {
                        Html(Bytes::from_static(INDEX_HTML.as_bytes()))
                    } else {
                        Html(fallback)
                    }
                }
            }),
        )
        // A missing file is a 404, which `json_errors` turns into `not_found` problem details.
        .nest_service("/docs/assets", ServeDir::new(assets))
}

/// `docs/errors.md`, embedded: the page every error's `type` points into.
const ERRORS_MD: &str = include_str!("../../../docs/errors.md");

/// `docs/errors.md` as an HTML page (its `<a id="code">` anchors kept).
fn errors_page() -> String {
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Raptor errors</title>\
         </head><body>",
    );
    pulldown_cmark::html::push_html(&mut html, pulldown_cmark::Parser::new(ERRORS_MD));
    html.push_str("</body></html>");
    html
}

/// `GET /openapi.json` (the generated document), `GET /docs/errors`, and `GET /docs` with
/// `/docs/assets/*` (Swagger UI from `assets`, see [`crate::docs_ui`]).
pub(crate) fn router(
    spec: &utoipa::openapi::OpenApi,
    assets: std::path::PathBuf,
) -> axum::Router<ApiState> {
    let json = crate::openapi::to_json(spec);
    let errors = errors_page();
    axum::Router::new()
        .route(
            "/docs/errors",
            axum::routing::get(move || {
                let errors = errors.clone();
                async move { Html(errors) }
            }),
        )
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let json = json.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], json) }
            }),
        )
        .merge(swagger(spec, assets))
}
