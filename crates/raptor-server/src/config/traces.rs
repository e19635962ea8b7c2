//! Traces: OpenTelemetry's standard `OTEL_*` variables for the OTLP/HTTP export of `serve`'s
//! spans (`crate::telemetry`). Without an endpoint nothing is exported and no exporter exists.

use clap::{Args, ValueEnum};

use super::parse_flag;

/// How traces are sampled (`OTEL_TRACES_SAMPLER`, the specification's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SamplerArg {
    /// Every trace.
    #[value(name = "always_on")]
    AlwaysOn,
    /// No trace.
    #[value(name = "always_off")]
    AlwaysOff,
    /// A share of traces (`OTEL_TRACES_SAMPLER_ARG`), by trace id.
    #[value(name = "traceidratio")]
    TraceIdRatio,
    /// The caller's decision (its `traceparent` flag) where there is one, else every trace.
    #[value(name = "parentbased_always_on")]
    ParentBasedAlwaysOn,
    /// The caller's decision where there is one, else none.
    #[value(name = "parentbased_always_off")]
    ParentBasedAlwaysOff,
    /// The caller's decision where there is one, else a share (`OTEL_TRACES_SAMPLER_ARG`).
    #[value(name = "parentbased_traceidratio")]
    ParentBasedTraceIdRatio,
}

/// Where the spans go (`OTEL_TRACES_EXPORTER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TracesExporterArg {
    /// OTLP over HTTP (when an endpoint is set).
    #[value(name = "otlp")]
    Otlp,
    /// Nowhere, whatever the endpoint.
    #[value(name = "none")]
    None,
}

/// The wire format of the export (`OTEL_EXPORTER_OTLP_PROTOCOL`); only protobuf over HTTP is
/// built in (no gRPC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OtlpProtocolArg {
    /// Protobuf over HTTP, the specification's default.
    #[value(name = "http/protobuf")]
    HttpProtobuf,
}

fn parse_ratio(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
        _ => Err(format!("expected a ratio from 0 to 1, got {text:?}")),
    }
}

fn parse_endpoint(text: &str) -> Result<String, String> {
    let url = text.trim();
    if super::is_http_url(url) {
        Ok(url.to_owned())
    } else {
        Err(format!(
            "{text:?} is not an OTLP/HTTP URL like http://collector:4318"
        ))
    }
}

/// `OTEL_SDK_DISABLED`, `OTEL_TRACES_EXPORTER`, `OTEL_EXPORTER_OTLP_ENDPOINT`,
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_SERVICE_NAME`,
/// `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`. The exporter also reads
/// `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_RESOURCE_ATTRIBUTES` and the
/// batch processor's `OTEL_BSP_*` from the environment itself.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// The OTLP/HTTP collector's base URL (`http://collector:4318`); spans are posted to
    /// `<url>/v1/traces`. Unset (and no OTEL_EXPORTER_OTLP_TRACES_ENDPOINT): no traces are
    /// exported and no exporter runs.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "OTEL_EXPORTER_OTLP_ENDPOINT",
          value_parser = parse_endpoint, global = true)]
    pub otel_exporter_otlp_endpoint: Option<String>,

    /// The full URL spans are posted to, used as it is (overrides
    /// OTEL_EXPORTER_OTLP_ENDPOINT for traces).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
          value_name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", value_parser = parse_endpoint,
          global = true)]
    pub otel_exporter_otlp_traces_endpoint: Option<String>,

    /// The export's wire format: `http/protobuf` (the only one built in).
    #[arg(
        long,
        env = "OTEL_EXPORTER_OTLP_PROTOCOL",
        value_name = "OTEL_EXPORTER_OTLP_PROTOCOL",
        value_enum,
        default_value = "http/protobuf",
        global = true
    )]
    pub otel_exporter_otlp_protocol: OtlpProtocolArg,

    /// `otlp`, or `none` to export nothing whatever the endpoint.
    #[arg(
        long,
        env = "OTEL_TRACES_EXPORTER",
        value_name = "OTEL_TRACES_EXPORTER",
        value_enum,
        default_value = "otlp",
        global = true
    )]
    pub otel_traces_exporter: TracesExporterArg,

    /// `true` turns the export off whatever else is set.
    #[arg(long, env = "OTEL_SDK_DISABLED", value_name = "OTEL_SDK_DISABLED",
          value_parser = parse_flag, default_value = "false", global = true)]
    pub otel_sdk_disabled: bool,

    /// The `service.name` of the exported spans.
    #[arg(
        long,
        env = "OTEL_SERVICE_NAME",
        value_name = "OTEL_SERVICE_NAME",
        default_value = "raptor",
        global = true
    )]
    pub otel_service_name: String,

    /// Which traces are kept: `parentbased_always_on` (the caller's `traceparent` decides,
    /// else all), `parentbased_traceidratio` (the caller decides, else a share),
    /// `traceidratio`, `always_on`, `always_off`, `parentbased_always_off`.
    #[arg(
        long,
        env = "OTEL_TRACES_SAMPLER",
        value_name = "OTEL_TRACES_SAMPLER",
        value_enum,
        default_value = "parentbased_always_on",
        global = true
    )]
    pub otel_traces_sampler: SamplerArg,

    /// The share of traces the ratio samplers keep, from 0 to 1.
    #[arg(long, env = "OTEL_TRACES_SAMPLER_ARG", value_name = "OTEL_TRACES_SAMPLER_ARG",
          value_parser = parse_ratio, default_value = "1.0", global = true)]
    pub otel_traces_sampler_arg: f64,
}

impl TraceArgs {
    /// The URL spans are posted to, or `None` when traces are not exported (no endpoint,
    /// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`).
    pub fn traces_endpoint(&self) -> Option<String> {
        if self.otel_sdk_disabled || self.otel_traces_exporter == TracesExporterArg::None {
            return None;
        }
        if let Some(url) = &self.otel_exporter_otlp_traces_endpoint {
            return Some(url.clone());
        }
        self.otel_exporter_otlp_endpoint
            .as_ref()
            .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(endpoint: Option<&str>, traces: Option<&str>) -> TraceArgs {
        TraceArgs {
            otel_exporter_otlp_endpoint: endpoint.map(str::to_owned),
            otel_exporter_otlp_traces_endpoint: traces.map(str::to_owned),
            otel_exporter_otlp_protocol: OtlpProtocolArg::HttpProtobuf,
            otel_traces_exporter: TracesExporterArg::Otlp,
            otel_sdk_disabled: false,
            otel_service_name: "raptor".into(),
            otel_traces_sampler: SamplerArg::ParentBasedAlwaysOn,
            otel_traces_sampler_arg: 1.0,
        }
    }

    #[test]
    fn no_endpoint_means_no_export() {
        assert_eq!(args(None, None).traces_endpoint(), None);
    }

    #[test]
    fn the_base_endpoint_gets_the_traces_path_and_the_signal_endpoint_is_used_as_it_is() {
        assert_eq!(
            args(Some("http://c:4318/"), None)
                .traces_endpoint()
                .as_deref(),
            Some("http://c:4318/v1/traces")
        );
        assert_eq!(
            args(Some("http://c:4318"), Some("https://t.example/otlp"))
                .traces_endpoint()
                .as_deref(),
            Some("https://t.example/otlp")
        );
    }

    #[test]
    fn disabled_sdk_or_none_exporter_exports_nothing_whatever_the_endpoint() {
        let mut disabled = args(Some("http://c:4318"), None);
        disabled.otel_sdk_disabled = true;
        assert_eq!(disabled.traces_endpoint(), None);
        let mut none = args(Some("http://c:4318"), None);
        none.otel_traces_exporter = TracesExporterArg::None;
        assert_eq!(none.traces_endpoint(), None);
    }

    #[test]
    fn ratios_outside_zero_to_one_are_refused() {
        assert_eq!(parse_ratio("0.25"), Ok(0.25));
        assert!(parse_ratio("1.5").is_err());
        assert!(parse_ratio("half").is_err());
    }
}
