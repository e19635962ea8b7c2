//! Logging and traces. Logs: `tracing` with an `EnvFilter` (`RUST_LOG`, default `info`), JSON or
//! pretty, on stderr. Traces (`serve` only, when an OTLP endpoint is set): the same spans, at
//! the levels the filter lets through, exported by OpenTelemetry's batch processor over
//! OTLP/HTTP (protobuf), with W3C trace context as the propagator. Without an endpoint no
//! OpenTelemetry layer, exporter or thread exists.

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

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
/// and, when `traces` names an endpoint, the OpenTelemetry layer and its exporter.
///
/// # Errors
/// The exporter could not be built (its HTTP client, or an `OTEL_EXPORTER_OTLP_HEADERS` /
/// `OTEL_EXPORTER_OTLP_TIMEOUT` it refuses).
pub fn init(format: LogFormat, traces: Option<&TraceArgs>) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    let endpoint = traces.and_then(TraceArgs::traces_endpoint);
    let provider = match (traces, &endpoint) {
        (Some(args), Some(endpoint)) => Some(provider(args, endpoint)?),
        _ => None,
    };
    let tracer = provider.as_ref().map(|provider| provider.tracer("raptor"));
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match format {
        LogFormat::Json => install(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            ),
            tracer,
        ),
        LogFormat::Pretty => install(
            registry.with(
                tracing_subscriber::fmt::layer()
                    .compact()
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                    .with_writer(std::io::stderr),
            ),
            tracer,
        ),
    };
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

/// `subscriber` as the global default, with the OpenTelemetry layer on top when there is a
/// tracer; false when a subscriber was already installed.
fn install<S>(subscriber: S, tracer: Option<SdkTracer>) -> bool
where
    S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync + 'static,
{
    match tracer {
        Some(tracer) => subscriber
            .with(
                tracing_opentelemetry::layer()
                    .with_tracer(tracer)
                    .with_tracked_inactivity(false)
                    .with_threads(false),
            )
            .try_init()
            .is_ok(),
        None => subscriber.try_init().is_ok(),
    }
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
