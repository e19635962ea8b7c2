#![doc = include_str!("../README.md")]

pub mod accounts;
pub mod admin;
pub mod audit;
pub mod auth;
pub mod billing;
pub mod client_addr;
mod clock;
pub mod codes;
mod docs_ui;
pub mod error;
pub mod extract;
mod health;
pub mod mail;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod problem;
pub mod retention;
pub mod sessions;
pub mod state;
pub mod trace_context;
pub mod trading;
pub mod waitlist;

use axum::Router;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub use error::{ApiError, ApiResult};
pub use state::{
    ApiConfig, ApiState, AuthLimits, BillingConfig, Clock, FixedClock, Readiness, SystemClock,
};

/// All documented routes. A route cannot exist without its OpenAPI entry: `routes!` registers
/// the handler and its `#[utoipa::path]` together.
pub fn api_routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(health::routes())
        .merge(trading::routes())
        .merge(accounts::routes())
        .merge(admin::routes())
        .merge(billing::routes())
        .merge(sessions::routes())
        .merge(waitlist::routes())
}

/// Every operation's own error codes, by operationId: each resource's `ROUTE_CODES`, beside
/// its routes in [`api_routes`]. `openapi::finish` hands them to `codes::operation_codes`,
/// which adds what the operation's shape implies.
pub fn route_codes() -> impl Iterator<Item = codes::RouteCodes> {
    [
        accounts::ROUTE_CODES,
        admin::ROUTE_CODES,
        billing::ROUTE_CODES,
        health::ROUTE_CODES,
        sessions::ROUTE_CODES,
        trading::ROUTE_CODES,
        waitlist::ROUTE_CODES,
    ]
    .into_iter()
    .flatten()
    .copied()
}

/// The generated OpenAPI document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut spec = api_routes().split_for_parts().1;
    openapi::finish(&mut spec, &route_codes().collect::<Vec<_>>());
    spec
}

/// The application: every route, `/openapi.json`, `/docs`, and every layer.
pub fn app(state: ApiState) -> Router {
    app_with(state, Router::new())
}

/// [`app`] plus `extra` routes that get the same state and layers (tests mount probe routes
/// this way).
pub fn app_with(state: ApiState, extra: Router<ApiState>) -> Router {
    let config = state.config.clone();
    // Install the recorder before the first request, or early metrics go nowhere; its
    // histogram buckets reach past the request timeout.
    crate::metrics::install(config.request_timeout);
    let (routes, mut spec) = api_routes().split_for_parts();
    openapi::finish(&mut spec, &route_codes().collect::<Vec<_>>());
    let router = routes
        .merge(docs_ui::router(&spec, config.docs_assets.clone()))
        .merge(extra)
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::close_when_draining,
        ))
        .with_state(state);
    middleware::layers(router, &config)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("route")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_codes_are_answered_over_http_and_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for (operation, sets) in route_codes() {
            assert!(seen.insert(operation), "{operation} is declared twice");
            for code in sets.iter().flat_map(|s| s.iter()) {
                assert!(code.over_http(), "{operation} lists the CLI's {code}");
            }
        }
    }
}
