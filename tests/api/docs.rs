//! `/docs`: Swagger UI when its assets are on disk (`RAPTOR_DOCS_ASSETS`), the built-in route
//! list when they are not; either way a 200 HTML page. `/openapi.json` and `/docs/errors` are
//! unaffected.

use raptor_api::codes::ErrorCode;
use std::path::PathBuf;

use axum::http::StatusCode;
use raptor_api::ApiConfig;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, Options, TestApp};

fn with_assets(dir: PathBuf) -> Options {
    Options {
        api: ApiConfig {
            docs_assets: dir,
            ..ApiConfig::default()
        },
        ..Options::default()
    }
}

fn is_html(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| ct.starts_with("text/html"))
}

/// A directory holding stand-ins for Swagger UI's files (tests run without npm).
fn fake_assets() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("raptor-docs-assets-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("swagger-ui-bundle.js"),
        "window.SwaggerUIBundle = 1;\n",
    )
    .expect("write js");
    std::fs::write(dir.join("swagger-ui.css"), "body {}\n").expect("write css");
    dir
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn docs_serve_swagger_ui_from_the_assets_directory(pool: PgPool) {
    let dir = fake_assets();
    TestApp::run(&pool, with_assets(dir.clone()), async |app| {
        let page = app.get_public("/docs").await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(is_html(page.header("content-type")), "{:?}", page.headers);
        assert!(page.text.contains("/docs/assets/swagger-ui-bundle.js"));
        assert!(page.text.contains("/docs/assets/swagger-ui.css"));
        assert!(page.text.contains("url: \"/openapi.json\""));
        assert!(!page.text.contains("https://"), "nothing from elsewhere");

        let js = app.get_public("/docs/assets/swagger-ui-bundle.js").await;
        assert_eq!(js.status, StatusCode::OK);
        assert!(js.text.contains("SwaggerUIBundle"));
        assert!(js
            .header("content-type")
            .is_some_and(|ct| ct.contains("javascript")));

        // A missing asset, or a path leaving the directory, is an ordinary 404 problem.
        for path in ["/docs/assets/nope.js", "/docs/assets/../Cargo.toml"] {
            let missing = app.get_public(path).await;
            assert_problem(&missing, StatusCode::NOT_FOUND, ErrorCode::NotFound);
        }

        std::fs::remove_dir_all(&dir).ok();
    })
    .await;
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn docs_fall_back_to_the_route_list_without_assets(pool: PgPool) {
    let dir = std::env::temp_dir().join(format!("raptor-no-assets-{}", Uuid::new_v4()));
    TestApp::run(&pool, with_assets(dir), async |app| {
        let page = app.get_public("/docs").await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(is_html(page.header("content-type")), "{:?}", page.headers);
        assert!(
            page.text.contains("npm ci --omit=dev"),
            "says how to install"
        );
        assert!(
            page.text.contains("/api/trading/orders"),
            "lists the routes"
        );
        assert!(!page.text.contains("swagger-ui-bundle.js\"></script>"));

        // The document and the error page do not depend on the assets.
        let spec = app.get_public("/openapi.json").await;
        assert_eq!(spec.status, StatusCode::OK);
        assert_eq!(
            spec.text,
            raptor_api::openapi::to_json(&raptor_api::openapi())
        );
        let errors = app.get_public("/docs/errors").await;
        assert_eq!(errors.status, StatusCode::OK);
    })
    .await;
}
