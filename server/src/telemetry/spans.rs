//! A span that may not exist: [`Traced`] is a started span with its context, or nothing when
//! tracing is off (or the span was not sampled), so the code that traces reads the same either
//! way. And the W3C `traceparent` of a request as a parent context.

use std::borrow::Cow;

use axum::http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracer;

/// A started span (with the context that carries it), or nothing.
#[derive(Clone, Default)]
pub struct Traced {
    inner: Option<(SdkTracer, Context)>,
}

impl std::fmt::Debug for Traced {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Traced({:?})", self.trace_id())
    }
}

impl Traced {
    /// Starts span `name` as a child of `parent`'s span (a root span when it has none).
    pub fn start(
        tracer: Option<&SdkTracer>,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        parent: &Context,
        attributes: Vec<KeyValue>,
    ) -> Traced {
        let Some(tracer) = tracer else {
            return Traced::default();
        };
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Traced { inner: Some((tracer.clone(), parent.with_span(span))) }
    }

    /// A child span of this one (nothing when this is nothing).
    pub fn child(&self, name: impl Into<Cow<'static, str>>, attributes: Vec<KeyValue>) -> Traced {
        match &self.inner {
            None => Traced::default(),
            Some((tracer, context)) => {
                Traced::start(Some(tracer), name, SpanKind::Internal, context, attributes)
            }
        }
    }

    pub fn set(&self, attributes: Vec<KeyValue>) {
        if let Some((_, context)) = &self.inner {
            context.span().set_attributes(attributes);
        }
    }

    pub fn event(&self, name: &'static str, attributes: Vec<KeyValue>) {
        if let Some((_, context)) = &self.inner {
            context.span().add_event(name, attributes);
        }
    }

    /// Marks the span failed with OpenTelemetry's `error.type`.
    pub fn fail(&self, error_type: &str) {
        if let Some((_, context)) = &self.inner {
            let span = context.span();
            span.set_attribute(KeyValue::new("error.type", error_type.to_owned()));
            span.set_status(Status::error(error_type.to_owned()));
        }
    }

    pub fn end(&self) {
        if let Some((_, context)) = &self.inner {
            context.span().end();
        }
    }

    /// The trace's id (32 hex digits), when the span exists and is sampled.
    pub fn trace_id(&self) -> Option<String> {
        self.ids().map(|(trace_id, _)| trace_id)
    }

    /// The trace's and the span's ids (hex), when the span exists and is sampled.
    pub fn ids(&self) -> Option<(String, String)> {
        let (_, context) = self.inner.as_ref()?;
        let span = context.span();
        let span_context = span.span_context();
        (span_context.is_valid() && span_context.is_sampled())
            .then(|| (span_context.trace_id().to_string(), span_context.span_id().to_string()))
    }

    /// The context to run code under, so what it starts is this span's child.
    pub fn context(&self) -> Context {
        self.inner.as_ref().map_or_else(Context::new, |(_, context)| context.clone())
    }
}

/// A run's `invoke_agent` span (OpenTelemetry's GenAI agent span), the child of whatever span
/// is current where the run starts (the request that started it).
pub fn invoke_agent(
    tracer: Option<&SdkTracer>,
    agent: &app::protocol::Agent,
    provider: &'static str,
    model: Option<String>,
    run_id: uuid::Uuid,
) -> Traced {
    Traced::start(
        tracer,
        format!("invoke_agent {}", agent.name),
        SpanKind::Internal,
        &Context::current(),
        vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.id", agent.id.to_string()),
            KeyValue::new("gen_ai.agent.name", agent.name.clone()),
            KeyValue::new("gen_ai.conversation.id", agent.id.to_string()),
            KeyValue::new("gen_ai.provider.name", provider),
            KeyValue::new("gen_ai.request.model", model.unwrap_or_default()),
            KeyValue::new("agentstream.run.id", run_id.to_string()),
        ],
    )
}

/// The log span a run's task runs in: its lines name the agent, the run and (when traced) the
/// run's trace and span.
pub fn run_log_span(agent_id: uuid::Uuid, run_id: uuid::Uuid, trace: &Traced) -> tracing::Span {
    let span = tracing::info_span!(
        "run",
        agent_id = %agent_id,
        run_id = %run_id,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    if let Some((trace_id, span_id)) = trace.ids() {
        span.record("trace_id", trace_id.as_str());
        span.record("span_id", span_id.as_str());
    }
    span
}

/// The caller's trace context from its `traceparent` (and `tracestate`) header; an empty
/// context when it sent none or an invalid one.
pub fn remote_parent(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&Headers(headers))
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;

    #[test]
    fn a_traceparent_is_read_and_a_bad_one_ignored() {
        let cases = [
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("4bf92f3577b34da6a3ce929d0e0e4736"),
            ),
            ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),
            ("garbage", None),
        ];
        for (header, trace_id) in cases {
            let mut headers = HeaderMap::new();
            headers.insert("traceparent", header.parse().unwrap());
            let context = remote_parent(&headers);
            let span = context.span();
            let found = span.span_context();
            assert_eq!(
                found.is_valid().then(|| found.trace_id().to_string()).as_deref(),
                trace_id,
                "{header}"
            );
        }
    }

    #[test]
    fn without_a_tracer_everything_is_a_no_op() {
        let traced = Traced::start(None, "x", SpanKind::Server, &Context::new(), vec![]);
        let child = traced.child("y", vec![KeyValue::new("a", 1)]);
        child.fail("boom");
        child.end();
        assert_eq!(traced.trace_id(), None);
        assert!(!traced.context().has_active_span());
    }
}
