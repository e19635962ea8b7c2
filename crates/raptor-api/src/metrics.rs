//! The Prometheus recorder: installed once per process, rendered by `GET /metrics` (the
//! service's counters and histograms are recorded with the `metrics` crate where they happen).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The process's metrics handle, installing the global recorder on first use.
pub fn prometheus() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if ::metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            handle
        })
        .clone()
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
