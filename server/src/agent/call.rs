//! One LLM call as I/O: the provider's stream read until it ends, is cancelled or fails (with
//! retries while nothing of the call is in the log), each event handed to the step assembler
//! ([`super::step`]) and what it returns written.

use futures::StreamExt;

use super::run::{Run, StepEnd};
use super::step::{Assembled, Output, Step};
use crate::delivery::writer::AppendError;
use crate::provider::{ProviderError, ProviderRequest};

impl Run {
    /// One LLM call. Returns how it ended and what it produced.
    pub(super) async fn llm_step(
        &mut self,
        request: ProviderRequest,
    ) -> Result<(StepEnd, Assembled), AppendError> {
        let mut step = Step::new(self.ids, self.usage);
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
                Some(Ok(event)) => event,
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
        self.usage = self.usage.plus(assembled.usage);
        let end = match end {
            None => StepEnd::Cancelled,
            Some(Err(error)) => StepEnd::Failed(error),
            Some(Ok(())) => StepEnd::Finished {
                stop_reason: assembled
                    .stop_reason
                    .clone()
                    .unwrap_or_else(|| "end_turn".to_owned()),
            },
        };
        Ok((end, assembled))
    }
}
