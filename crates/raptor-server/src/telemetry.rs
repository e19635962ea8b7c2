//! Logging and traces. Logs: `tracing` with an `EnvFilter` (`RUST_LOG`, default `info`), JSON or
//! pretty, on stderr; a JSON line inside a traced request names its `trace_id` and `span_id`.
//! Traces (`serve` only, when an OTLP endpoint is set): the same spans, at the levels the filter
//! lets through, plus a client span per SQL statement (`db_spans.rs`), exported by
//! OpenTelemetry's batch processor over OTLP/HTTP (protobuf), with W3C trace context as the
//! propagator. Without an endpoint no OpenTelemetry layer, exporter or thread exists.

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Level;
use tracing_opentelemetry::OtelData;
use tracing_subscriber::filter::{FilterExt, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{LogFormat, SamplerArg, TraceArgs};

/// What [`init`] started; [`Telemetry::shutdown`] flushes it.
#[derive(Debug, Default)]
#[must_use = "shut it down to export the last spans"]
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported (an OTLP endpoint was set).
    pub fn exports_traces(&self) -> bool {
        self.traces.is_some()
    }

    /// Exports the spans still queued and stops the exporter (the end of `serve`'s graceful
    /// shutdown). Blocks until the batch processor's thread is done, so it runs on a thread
    /// where blocking is allowed.
    pub async fn shutdown(self) {
        let Some(provider) = self.traces else { return };
        let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        match done {
            Ok(Ok(())) => tracing::debug!("traces flushed"),
            Ok(Err(err)) => eprintln!("raptor: the last traces could not be exported: {err}"),
            Err(err) => eprintln!("raptor: the trace exporter did not stop: {err}"),
        }
    }
}

/// Installs the global subscriber (logs go to stderr so command output on stdout stays JSON)
/// and, when `traces` names an endpoint, the OpenTelemetry layer, its exporter, and the
/// statements' spans (`db_spans.rs`). A JSON log line inside a traced request carries its
/// `trace_id` and `span_id`.
///
/// Each layer has its own filter: the logs and the exported spans follow `RUST_LOG` (default
/// `info`), while the statements' spans also see sqlx's per-statement events (which the logs
/// leave out).
///
/// # Errors
/// The exporter could not be built (its HTTP client, or an `OTEL_EXPORTER_OTLP_HEADERS` /
/// `OTEL_EXPORTER_OTLP_TIMEOUT` it refuses).
pub fn init(format: LogFormat, traces: Option<&TraceArgs>) -> anyhow::Result<Telemetry> {
    let endpoint = traces.and_then(TraceArgs::traces_endpoint);
    let provider = match (traces, &endpoint) {
        (Some(args), Some(endpoint)) => Some(provider(args, endpoint)?),
        _ => None,
    };
    let tracer = provider.as_ref().map(|provider| provider.tracer("raptor"));
    let logs = match format {
        LogFormat::Json => {
            let mut layer = json_subscriber::fmt::layer()
                .with_current_span(true)
                .with_writer(std::io::stderr);
            // The ids of the span the event happened in (its trace's, when it is exported).
            let json = layer.inner_layer_mut();
            json.add_from_extension::<OtelData, _, _>("trace_id", |otel| {
                otel.trace_id().map(|id| id.to_string())
            });
            json.add_from_extension::<OtelData, _, _>("span_id", |otel| {
                otel.span_id().map(|id| id.to_string())
            });
            layer.with_filter(log_filter()).boxed()
        }
        LogFormat::Pretty => tracing_subscriber::fmt::layer()
            .compact()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_writer(std::io::stderr)
            .with_filter(log_filter())
            .boxed(),
    };
    let spans = tracer.as_ref().map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer.clone())
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_filter(log_filter())
    });
    let (statements, slot) = match tracer {
        Some(tracer) => {
            let (layer, slot) = crate::db_spans::DbSpans::new(tracer);
            let filter = log_filter()
                .or(Targets::new().with_target(crate::db_spans::SQLX_TARGET, Level::DEBUG));
            (Some(layer.with_filter(filter)), Some(slot))
        }
        None => (None, None),
    };
    let installed = tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .with(statements)
        .try_init()
        .is_ok();
    if let (true, Some(slot)) = (installed, &slot) {
        crate::db_spans::fill(slot);
    }
    // A second init (tests) keeps the first subscriber, and exports nothing of its own.
    if !installed {
        if let Some(provider) = provider {
            let _ = std::thread::spawn(move || provider.shutdown()).join();
        }
        return Ok(Telemetry::default());
    }
    if let Some(endpoint) = &endpoint {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        raptor_api::trace_context::set_exporting();
        tracing::info!(endpoint = %endpoint, "traces are exported over OTLP/HTTP");
    }
    Ok(Telemetry { traces: provider })
}

/// `RUST_LOG`, or `info` with sqlx's statements and tower-http's details left out.
fn log_filter() -> EnvFilter {
    EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"))
}

/// The tracer provider: OTLP/HTTP protobuf to `endpoint`, batched (`OTEL_BSP_*`), sampled as
/// `args` say, `service.name` and `service.version` on every span.
fn provider(args: &TraceArgs, endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .build()
        .with_context(|| format!("could not start the OTLP trace exporter for {endpoint}"))?;
    let resource = Resource::builder()
        .with_service_name(args.otel_service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            crate::VERSION,
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler(
            args.otel_traces_sampler,
            args.otel_traces_sampler_arg,
        ))
        .with_resource(resource)
        .build())
}

fn sampler(kind: SamplerArg, ratio: f64) -> Sampler {
    match kind {
        SamplerArg::AlwaysOn => Sampler::AlwaysOn,
        SamplerArg::AlwaysOff => Sampler::AlwaysOff,
        SamplerArg::TraceIdRatio => Sampler::TraceIdRatioBased(ratio),
        SamplerArg::ParentBasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        SamplerArg::ParentBasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        SamplerArg::ParentBasedTraceIdRatio => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
        }
    }
}
