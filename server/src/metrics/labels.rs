//! The metrics' label sets, and label values taken from outside cut to a known set (`bounded`).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;

/// `value` when it is one of `known`, else `"other"`: a label's value from outside cut to a set
/// known when the server was built.
pub fn bounded(value: &str, known: &[&'static str]) -> &'static str {
    known.iter().find(|candidate| **candidate == value).copied().unwrap_or("other")
}

/// A label with one name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SurfaceLabel {
    pub surface: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunEndLabels {
    pub outcome: &'static str,
    pub stop_reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub route: Arc<str>,
    pub method: &'static str,
    pub status_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub route: Arc<str>,
}

/// OpenTelemetry's attributes of a model call, as Prometheus labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelCallLabels {
    pub gen_ai_operation_name: &'static str,
    pub gen_ai_provider_name: &'static str,
    /// Empty when the call succeeded, else the kind of error (bounded).
    pub error_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub gen_ai_operation_name: &'static str,
    pub gen_ai_provider_name: &'static str,
    pub gen_ai_token_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    pub gen_ai_tool_name: Arc<str>,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct McpServerLabel {
    pub server: Arc<str>,
}
