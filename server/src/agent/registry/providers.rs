//! The providers a server offers and which one an agent's run uses: by its `metadata.provider`,
//! else by its model handle (`openai/gpt-4o`), else the server's default.

use std::collections::HashMap;
use std::sync::Arc;

use app::protocol::Agent;

use super::StartRunError;
use crate::provider::Provider;

/// The providers a server offers: the default, and others agents may choose by name in their
/// `metadata.provider`.
#[derive(Clone)]
pub struct Providers {
    pub default: Arc<dyn Provider>,
    pub by_name: HashMap<&'static str, Arc<dyn Provider>>,
}

impl Providers {
    /// The provider an agent uses: its `metadata.provider`; else the provider its model handle
    /// names (`openai/gpt-4o`, as Letta writes models); else the server's default. A model the
    /// default cannot serve is refused rather than faked: the scripted provider serves no model
    /// but its own (`scripted`, `scripted/…`) unless the agent chose it by name.
    pub fn for_agent(&self, agent: &Agent) -> Result<Arc<dyn Provider>, StartRunError> {
        let chosen = agent.metadata.get("provider").and_then(serde_json::Value::as_str);
        let model = agent.model.as_deref().map(str::trim).filter(|model| !model.is_empty());
        let named = chosen.or_else(|| model.and_then(provider_of_handle));
        let provider = match named {
            None => self.default.clone(),
            Some(name) => self.by_name.get(name).cloned().ok_or_else(|| {
                let mut names: Vec<_> = self.by_name.keys().copied().collect();
                names.sort_unstable();
                StartRunError::UnknownProvider(name.to_owned(), names.join(", "))
            })?,
        };
        let scripted_own =
            |model: &str| model == "scripted" || provider_of_handle(model) == Some("scripted");
        match model {
            Some(model)
                if chosen.is_none() && provider.name() == "scripted" && !scripted_own(model) =>
            {
                Err(StartRunError::ModelNotServed(model.to_owned()))
            }
            _ => Ok(provider),
        }
    }
}

/// The providers a model handle may name, and what configures each.
const PROVIDER_NAMES: [&str; 4] = ["scripted", "anthropic", "openai", "claude-cli"];

/// The provider a model handle names: `openai/gpt-4o` → `openai`. Only our providers' names
/// count: other prefixes (`meta-llama/…`) are model names of OpenAI-compatible servers.
fn provider_of_handle(model: &str) -> Option<&'static str> {
    let (prefix, _) = model.split_once('/')?;
    PROVIDER_NAMES.into_iter().find(|name| *name == prefix)
}

/// The model name sent to the provider: a Letta-style handle (`anthropic/claude-…`) names the
/// provider too, and the provider is sent the model name alone.
pub(super) fn model_for(agent: &Agent, provider_name: &str) -> Option<String> {
    agent.model.as_deref().map(|model| {
        model
            .strip_prefix(provider_name)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(model)
            .to_owned()
    })
}
