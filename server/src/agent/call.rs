//! One LLM call as I/O: the provider's stream read until it ends, is cancelled or fails (with
//! retries while nothing of the call is in the log), each event handed to the step assembler
//! ([`super::step`]) and what it returns written.

use futures::StreamExt;

use super::run::{Run, StepEnd};
use super::step::{Assembled, Output, Step, Usage};
use crate::delivery::writer::AppendError;
use crate::metrics::{Metrics, ModelCallLabels, TokenLabels};
use crate::provider::{ProviderError, ProviderRequest};
use opentelemetry::KeyValue;

impl Run {
    /// One LLM call. Returns how it ended and what it produced.
    pub(super) async fn llm_step(
        &mut self,
        request: ProviderRequest,
    ) -> Result<(StepEnd, Assembled), AppendError> {
        let mut step = Step::new(self.ids, self.usage).with_client_tools(self.client_tool_names());
        let mut timing = CallTiming::start();
        let model = request.model.clone().unwrap_or_default();
        let chat = self.trace.child(
            format!("{CHAT} {model}"),
            vec![
                KeyValue::new("gen_ai.operation.name", CHAT),
                KeyValue::new("gen_ai.provider.name", self.provider.name()),
                KeyValue::new("gen_ai.request.model", model),
            ],
        );
        let mut stream = self.provider.stream(request.clone());
        let end = loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => break None,
                next = stream.next() => next,
            };
            // A stream that ends before the model said it was done (a provider's task that
            // died, a connection cut) is a failure, not a finished reply.
            let next = match next {
                None if !step.stopped() => Some(Err(ProviderError::connection(
                    "the provider's stream ended before the model said it was done",
                ))),
                other => other,
            };
            let event = match next {
                None => break Some(Ok(())),
                Some(Err(error)) => match step.retry(&error) {
                    Some((delay_ms, notice)) => {
                        self.metrics().model_call_retries.inc();
                        chat.event(
                            "retry",
                            vec![
                                KeyValue::new("error.type", error.kind.clone()),
                                KeyValue::new("agentstream.retry.delay_ms", delay_ms as i64),
                            ],
                        );
                        self.emit(notice).await?;
                        tokio::select! {
                            _ = self.cancel.cancelled() => break None,
                            _ = tokio::time::sleep(std::time::Duration::from_millis(delay_ms)) => {}
                        }
                        stream = self.provider.stream(request.clone());
                        continue;
                    }
                    None => break Some(Err(error)),
                },
                Some(Ok(event)) => {
                    if timing.first_chunk(self.metrics(), self.provider.name()) {
                        chat.event("first_chunk", Vec::new());
                    }
                    event
                }
            };
            match step.apply(event) {
                None => {}
                Some(Output::Write(draft)) => {
                    self.emit(draft).await?;
                }
                Some(Output::OpenCall { call_id, draft }) => {
                    let written = self.emit(draft).await?;
                    if !written {
                        // Dropped at the event limit: the call never existed in the log, so
                        // it must not get a result either.
                        step.forget_call(&call_id);
                    }
                }
                Some(Output::ProviderResult { index, result }) => {
                    let call = &step.calls()[index];
                    let drafts = self.result_drafts(call, result).0;
                    for draft in drafts {
                        self.emit(draft).await?;
                    }
                }
            }
        };
        let assembled = step.finish();
        let error_type = match &end {
            None => "cancelled",
            Some(Ok(())) => "",
            Some(Err(error)) => crate::metrics::labels::bounded(&error.kind, PROVIDER_ERROR_KINDS),
        };
        timing.end(self.metrics(), self.provider.name(), error_type, assembled.usage);
        chat.set(vec![
            KeyValue::new("gen_ai.usage.input_tokens", assembled.usage.input_tokens as i64),
            KeyValue::new("gen_ai.usage.output_tokens", assembled.usage.output_tokens as i64),
            KeyValue::new(
                "gen_ai.response.finish_reasons",
                opentelemetry::Value::Array(
                    vec![opentelemetry::StringValue::from(
                        assembled.stop_reason.clone().unwrap_or_default(),
                    )]
                    .into(),
                ),
            ),
        ]);
        if !error_type.is_empty() {
            chat.fail(error_type);
        }
        chat.end();
        self.usage = self.usage.plus(assembled.usage);
        let end = match end {
            None => StepEnd::Cancelled,
            Some(Err(error)) => StepEnd::Failed(error),
            Some(Ok(())) => StepEnd::Finished {
                stop_reason: assembled.stop_reason.clone().unwrap_or_else(|| "end_turn".to_owned()),
            },
        };
        Ok((end, assembled))
    }
}

/// Provider error kinds with a label of their own on the model-call metrics.
const PROVIDER_ERROR_KINDS: &[&str] = &[
    "api_error",
    "authentication_error",
    "cli_error",
    "connection_error",
    "invalid_response",
    "overloaded_error",
    "rate_limit_error",
    "server_error",
    "timeout",
];

/// OpenTelemetry's operation name of a model call.
const CHAT: &str = "chat";

/// One model call's clock, for the GenAI metrics: from the request to the first piece of the
/// answer, and to the stream's end (retries included: the caller waited through them).
struct CallTiming {
    started: std::time::Instant,
    first_chunk_seen: bool,
}

impl CallTiming {
    fn start() -> CallTiming {
        CallTiming { started: std::time::Instant::now(), first_chunk_seen: false }
    }

    /// True for the call's first piece (counted once).
    fn first_chunk(&mut self, metrics: &Metrics, provider: &'static str) -> bool {
        if std::mem::replace(&mut self.first_chunk_seen, true) {
            return false;
        }
        metrics
            .time_to_first_chunk
            .get_or_create(&labels(provider, ""))
            .observe(self.started.elapsed().as_secs_f64());
        true
    }

    fn end(
        &self,
        metrics: &Metrics,
        provider: &'static str,
        error_type: &'static str,
        usage: Usage,
    ) {
        metrics
            .model_call_duration
            .get_or_create(&labels(provider, error_type))
            .observe(self.started.elapsed().as_secs_f64());
        for (token_type, tokens) in [("input", usage.input_tokens), ("output", usage.output_tokens)]
        {
            metrics
                .token_usage
                .get_or_create(&TokenLabels {
                    gen_ai_operation_name: CHAT,
                    gen_ai_provider_name: provider,
                    gen_ai_token_type: token_type,
                })
                .observe(tokens as f64);
        }
    }
}

fn labels(provider: &'static str, error_type: &'static str) -> ModelCallLabels {
    ModelCallLabels { gen_ai_operation_name: CHAT, gen_ai_provider_name: provider, error_type }
}
