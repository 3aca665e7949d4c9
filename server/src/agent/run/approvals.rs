//! A run's steps for calls that wait: writing approval requests, and carrying out what a person
//! (or a client) answered.

use serde_json::json;

use super::Run;
use crate::agent::approval::{denial, request_drafts, ApprovalAnswer};
use crate::agent::step::PendingCall;
use crate::delivery::writer::AppendError;
use crate::provider::ConversationMessage;

impl Run {
    /// Writes the approval requests of `held` (their cards marked) and commits them.
    pub(super) async fn request_approvals(
        &mut self,
        held: &[PendingCall],
    ) -> Result<(), AppendError> {
        for call in held {
            let client = self.runs_in_client(&call.name);
            for draft in request_drafts(self.ids, call, client) {
                self.emit(draft).await?;
            }
        }
        self.flush().await
    }

    /// Carries out a person's answers: denied calls get their error results, approved ones
    /// run (together, as a step's calls do). Returns the results for the model.
    pub(super) async fn carry_out(
        &mut self,
        answers: Vec<ApprovalAnswer>,
    ) -> Result<Vec<ConversationMessage>, AppendError> {
        let mut results = Vec::with_capacity(answers.len());
        let mut approved = Vec::new();
        for answer in answers {
            if let Some(returned) = answer.returned {
                // A client tool's result: written as the call's result, like a tool's own.
                let (drafts, message) = self.result_drafts(&answer.call, returned);
                for draft in drafts {
                    self.emit(draft).await?;
                }
                results.push(message);
                continue;
            }
            if answer.approve {
                let status = json!({ "status": "approved" });
                self.emit(self.ids.call_merge(&answer.call, status)).await?;
                approved.push(answer.call);
                continue;
            }
            let (drafts, message) =
                self.result_drafts(&answer.call, Err(denial(answer.reason.as_deref())));
            for draft in drafts {
                self.emit(draft).await?;
            }
            results.push(message);
        }
        if !approved.is_empty() {
            results.extend(self.run_tools(approved).await?.results);
        }
        Ok(results)
    }
}
