//! The HTTP error boundary: one error type, a stable code and a sentence for the client, the
//! internal cause in the log.

use app::protocol::{ErrorBody, ErrorDetail};
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;

use crate::agent::start::StartError;
use crate::agent::StartRunError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unknown_agent(agent_id: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            format!("agent {agent_id} does not exist"),
        )
    }

    pub fn unknown_run(run_id: impl std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "unknown_run", format!("run {run_id} does not exist"))
    }

    /// A failure that is ours, not the client's: the cause is logged, the client gets a generic
    /// sentence.
    pub fn internal(cause: impl std::fmt::Display) -> ApiError {
        tracing::error!(%cause, "request failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle this request; it has been logged",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            detail: self.message.clone(),
            error: ErrorDetail { code: self.code.to_owned(), message: self.message },
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match error {
            StoreError::UnknownAgent(agent_id) => ApiError::unknown_agent(agent_id),
            // Busy, restarting, unreachable: the request may succeed if sent again. The
            // driver's own words (addresses, statements) go to the log, not to the client.
            other if other.is_transient() => {
                tracing::warn!(error = %other, "a request met an unavailable database");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "database_unavailable",
                    "the database is unavailable right now; send the request again",
                )
            }
            StoreError::ProducerMoved { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "producer_contended",
                "the producer's position kept moving on other servers while this batch was \
                 fenced; send it again",
            ),
            other => ApiError::internal(other),
        }
    }
}

impl From<StartRunError> for ApiError {
    fn from(error: StartRunError) -> ApiError {
        match error {
            StartRunError::RunInProgress { .. } => {
                ApiError::new(StatusCode::CONFLICT, "run_in_progress", error.to_string())
            }
            StartRunError::UnknownProvider(..) => {
                ApiError::bad_request("unknown_provider", error.to_string())
            }
            StartRunError::ModelNotServed(..) => {
                ApiError::bad_request("model_not_served", error.to_string())
            }
            StartRunError::TooManyRuns => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "too_many_runs", error.to_string())
            }
        }
    }
}

impl From<StartError> for ApiError {
    fn from(error: StartError) -> ApiError {
        match error {
            StartError::EmptyContent => ApiError::bad_request("invalid_body", error.to_string()),
            StartError::ContentTooLarge => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "content_too_large", error.to_string())
            }
            StartError::KeyTooLong => {
                ApiError::bad_request("invalid_idempotency_key", error.to_string())
            }
            StartError::UnknownAgent(agent_id) => ApiError::unknown_agent(agent_id),
            StartError::KeyReused { .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                error.to_string(),
            ),
            StartError::ApprovalPending { .. } => {
                ApiError::new(StatusCode::CONFLICT, "approval_pending", error.to_string())
            }
            StartError::ClientToolPending { .. } => {
                ApiError::new(StatusCode::CONFLICT, "client_tool_pending", error.to_string())
            }
            StartError::BadClientTools(_) => {
                ApiError::bad_request("invalid_client_tools", error.to_string())
            }
            StartError::BadApproval(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_approval",
                error.to_string(),
            ),
            StartError::UnknownApproval(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_approval", error.to_string())
            }
            StartError::AlreadyAnswered { .. } => {
                ApiError::new(StatusCode::CONFLICT, "already_answered", error.to_string())
            }
            StartError::Run(error) => error.into(),
            StartError::Store(error) => error.into(),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        let (status, code) = match &rejection {
            JsonRejection::JsonSyntaxError(_) => (StatusCode::BAD_REQUEST, "malformed_json"),
            JsonRejection::JsonDataError(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body"),
            JsonRejection::MissingJsonContentType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "expected_json")
            }
            _ if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
            }
            _ => (rejection.status(), "unreadable_body"),
        };
        ApiError::new(status, code, rejection.body_text())
    }
}

/// `Json` whose rejections are [`ApiError`]s, so a bad body gets the same JSON error shape as
/// everything else.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<T>::from_request(request, state).await?;
        Ok(ApiJson(value))
    }
}
