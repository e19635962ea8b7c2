//! The Prometheus recorder: installed once per process, rendered by `GET /metrics` (on the API
//! listener, or on `RAPTOR_METRICS_ADDR`'s). The service's counters and histograms are recorded
//! with the `metrics` crate where they happen; the gauges of things that are read rather than
//! counted (the pools, the process) are set at each scrape ([`render`]).

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::state::ApiState;

mod process;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The fixed latency buckets below ten seconds (the request timeout adds its own, see
/// [`latency_buckets`]).
const BASE_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The buckets of every `_seconds` histogram for a request timeout of `timeout`: the fixed ones
/// below it, then half, 80 %, 90 % of it, the timeout itself, and 1.5 and 2 times it, so a
/// p99 near the timeout and the requests cut off by it are both seen.
pub fn latency_buckets(timeout: Duration) -> Vec<f64> {
    // In whole milliseconds, so each bound prints as the decimal it is (`le="2.4"`).
    let ms = u64::try_from(timeout.as_millis())
        .unwrap_or(u64::MAX / 20)
        .max(1);
    let t = ms as f64 / 1000.0;
    let mut buckets: Vec<f64> = BASE_BUCKETS.iter().copied().filter(|b| *b < t).collect();
    buckets.extend(
        [
            ms * 5 / 10,
            ms * 8 / 10,
            ms * 9 / 10,
            ms,
            ms * 15 / 10,
            ms * 2,
        ]
        .map(|bound| bound as f64 / 1000.0),
    );
    buckets.sort_by(f64::total_cmp);
    buckets.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    buckets
}

/// Installs the global recorder with buckets for `request_timeout` (once per process: the
/// first call decides; later ones return the same handle).
pub fn install(request_timeout: Duration) -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("_seconds".into()),
                    &latency_buckets(request_timeout),
                )
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if ::metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            metrics::gauge!("raptor_request_timeout_seconds").set(request_timeout.as_secs_f64());
            handle
        })
        .clone()
}

/// The process's metrics handle, installing the recorder (for the default 30 s request
/// timeout) if nothing did yet.
pub fn prometheus() -> PrometheusHandle {
    install(Duration::from_secs(30))
}

/// `raptor_build_info{version, git_sha}` = 1: which build runs (`raptor serve` sets it).
pub fn record_build_info(version: &'static str, git_sha: &'static str) {
    metrics::gauge!("raptor_build_info", "version" => version, "git_sha" => git_sha).set(1.0);
}

/// The last time a schedule of `raptor serve` finished a run without an error:
/// `raptor_schedule_last_success_timestamp_seconds{schedule}` (unix seconds), and
/// `raptor_schedule_runs_total{schedule, outcome}` (`ok`, `error`) for every run.
pub fn record_schedule_run(schedule: &'static str, ok: bool) {
    let outcome = if ok { "ok" } else { "error" };
    metrics::counter!("raptor_schedule_runs_total", "schedule" => schedule, "outcome" => outcome)
        .increment(1);
    if ok {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        metrics::gauge!("raptor_schedule_last_success_timestamp_seconds", "schedule" => schedule)
            .set(now);
    }
}

/// The text exposition of every metric, after setting the gauges read at scrape time: both
/// pools of `state`, the process and the last year the market calendar covers.
pub fn render(state: &ApiState) -> String {
    let handle = prometheus();
    raptor_db::pool_metrics::record(&state.db);
    raptor_db::pool_metrics::record(state.idempotency.store_pool());
    process::record();
    metrics::gauge!("raptor_market_calendar_last_year")
        .set(f64::from(raptor_engine::calendar::last_covered_year()));
    let mut text = handle.render();
    text.push_str(&process::cpu_exposition());
    text
}

/// `GET /metrics`'s answer: [`render`] as Prometheus text.
pub(crate) fn answer(state: &ApiState) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render(state),
    )
        .into_response()
}

/// The router of `RAPTOR_METRICS_ADDR`'s listener: `GET /metrics` only (anything else 404).
pub fn router(state: ApiState) -> axum::Router {
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(|State(state): State<ApiState>| async move { answer(&state) }),
        )
        .with_state(state)
}

/// Runs the recorder's upkeep (draining histogram buffers) every `every`. Without it the
/// buffers are only drained when `/metrics` is scraped, and grow while nobody scrapes.
pub fn spawn_upkeep(every: std::time::Duration) -> tokio::task::JoinHandle<()> {
    let handle = prometheus();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            handle.run_upkeep();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buckets_reach_past_the_request_timeout() {
        let buckets = latency_buckets(Duration::from_secs(30));
        assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{buckets:?}");
        for needed in [0.001, 10.0, 15.0, 24.0, 27.0, 30.0, 45.0, 60.0] {
            assert!(buckets.contains(&needed), "{needed} missing: {buckets:?}");
        }
        let short = latency_buckets(Duration::from_secs(2));
        assert_eq!(short.last(), Some(&4.0), "{short:?}");
        assert!(short.contains(&2.0) && short.contains(&1.8), "{short:?}");
        assert!(
            !short.contains(&2.5),
            "fixed buckets above the timeout are left out"
        );
    }
}
