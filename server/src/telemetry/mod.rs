//! Traces over OTLP (HTTP, protobuf), under OpenTelemetry's GenAI names: a span per run
//! (`invoke_agent`), a `chat` child per model call, an `execute_tool` child per tool call, and a
//! server span per HTTP request, which a caller's W3C `traceparent` makes the child of the
//! caller's own span — so a user's request in the app's traces leads into the agent.
//!
//! Configured only by the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, …): off
//! when no endpoint is set, and then every span is a no-op. Exporting never slows the event
//! path: a finished span goes into a bounded queue ([`processor`]) or, when it is full, is
//! dropped and counted (`agentstream_trace_spans_dropped_total`). No prompt or completion text
//! is recorded.
//!
//! May use: metrics (the drop counter). Used by: http (server spans), agent (run, model and tool
//! spans).

pub mod processor;
pub mod spans;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

use crate::metrics::Metrics;
pub use spans::Traced;

/// The service name spans carry when `OTEL_SERVICE_NAME` does not say one.
pub const SERVICE_NAME_DEFAULT: &str = "agentstream";

/// How long one export (an HTTP POST of a batch) may take before it counts as failed.
pub const EXPORT_TIMEOUT_MS: u64 = 10_000;

/// Where traces go, read from the standard variables; `None`: tracing is off.
pub fn endpoint_from_env() -> Result<Option<String>, String> {
    let variable = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    endpoint_from(&variable)
}

/// The rule of [`endpoint_from_env`], over any source of variables (pure, tested).
pub fn endpoint_from(variable: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, String> {
    if variable("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if let Some(exporter) = variable("OTEL_TRACES_EXPORTER") {
        match exporter.as_str() {
            "otlp" => {}
            "none" => return Ok(None),
            other => {
                return Err(format!(
                    "OTEL_TRACES_EXPORTER={other:?}: this server exports traces over otlp only \
                     (or none)"
                ))
            }
        }
    }
    let protocol = variable("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| variable("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(protocol) = protocol.filter(|protocol| protocol != "http/protobuf") {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={protocol:?}: this server speaks http/protobuf only"
        ));
    }
    // The signal's own endpoint is used as it is; the general one gets the signal's path
    // (OpenTelemetry's exporter specification).
    Ok(variable("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| {
        variable("OTEL_EXPORTER_OTLP_ENDPOINT")
            .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
    }))
}

/// The server's tracing: a tracer when an endpoint is configured, else nothing.
pub struct Telemetry {
    tracer: Option<SdkTracer>,
    provider: Option<SdkTracerProvider>,
    queue: Option<processor::Flusher>,
}

impl Telemetry {
    /// Tracing off: every span is a no-op.
    pub fn off() -> Telemetry {
        Telemetry { tracer: None, provider: None, queue: None }
    }

    /// Exports to `endpoint` (the full URL of the traces path). Must run inside the runtime:
    /// the queue's exporting task is spawned here.
    pub fn start(endpoint: &str, metrics: Arc<Metrics>) -> Result<Telemetry, String> {
        let client = crate::http_client::builder()
            .timeout(Duration::from_millis(EXPORT_TIMEOUT_MS))
            .build()
            .map_err(|error| {
                format!("cannot set up the OTLP client: {}", crate::http_client::describe(&error))
            })?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_endpoint(endpoint)
            .with_timeout(Duration::from_millis(EXPORT_TIMEOUT_MS))
            .build()
            .map_err(|error| format!("cannot set up the OTLP exporter for {endpoint}: {error}"))?;
        let (processor, queue) = processor::QueueProcessor::spawn(exporter, metrics);
        let mut resource = Resource::builder();
        if std::env::var("OTEL_SERVICE_NAME").map_or(true, |name| name.trim().is_empty()) {
            resource = resource.with_service_name(SERVICE_NAME_DEFAULT);
        }
        // The sampler comes from `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (the SDK's
        // default configuration reads them; parent-based, always on, when unset).
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("agentstream");
        tracing::info!(%endpoint, "exporting traces over OTLP");
        Ok(Telemetry { tracer: Some(tracer), provider: Some(provider), queue: Some(queue) })
    }

    pub fn tracer(&self) -> Option<&SdkTracer> {
        self.tracer.as_ref()
    }

    /// Exports what is queued, waiting `wait_max` at most (at shutdown).
    pub async fn flush(&self, wait_max: Duration) {
        if let Some(queue) = &self.queue {
            queue.flush(wait_max).await;
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Our processor's shutdown only lets go of its queue; it never blocks.
            let _ = provider.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variables set, and the endpoint (or a piece of the error) expected.
    type Case = (Vec<(&'static str, &'static str)>, Result<Option<&'static str>, &'static str>);

    #[test]
    fn the_endpoint_follows_the_standard_variables() {
        let cases: Vec<Case> = vec![
            (vec![], Ok(None)),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")],
                Ok(Some("http://collector:4318/v1/traces")),
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")],
                Ok(Some("http://collector:4318/v1/traces")),
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
                    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4318/custom"),
                ],
                Ok(Some("http://b:4318/custom")),
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
                    ("OTEL_SDK_DISABLED", "true"),
                ],
                Ok(None),
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
                    ("OTEL_TRACES_EXPORTER", "none"),
                ],
                Ok(None),
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4317"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                Err("http/protobuf only"),
            ),
            (vec![("OTEL_TRACES_EXPORTER", "zipkin")], Err("otlp only")),
        ];
        for (variables, expected) in cases {
            let lookup = |name: &str| {
                variables.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
            };
            match (endpoint_from(&lookup), expected) {
                (Ok(found), Ok(wanted)) => {
                    assert_eq!(found.as_deref(), wanted, "{variables:?}")
                }
                (Err(found), Err(wanted)) => assert!(found.contains(wanted), "{found}"),
                (found, wanted) => panic!("{variables:?}: {found:?}, wanted {wanted:?}"),
            }
        }
    }
}
