//! `POST /v1/tokens` (operator only): mints a scoped token, so an app's backend needs the
//! operator token alone, not the signing secret. The token is the same JWT an app could sign
//! itself with the secret (README: the recipe).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::caller::Caller;
use super::error::{ApiError, ApiJson};
use super::token::{check_agents, Grant, Scopes, TOKEN_SUB_CHARS_MAX, TOKEN_TTL_SECONDS_DEFAULT};
use crate::http::auth::Access;

/// `{sub, agents, scope, ttl_s}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MintRequest {
    pub sub: String,
    pub agents: Vec<String>,
    /// Space-separated: `read`, `write`, `approve`.
    pub scope: String,
    /// Seconds the token lives (`TOKEN_TTL_SECONDS_DEFAULT` when absent), at most
    /// `AGENTSTREAM_TOKEN_TTL_SECONDS_MAX`.
    #[serde(default)]
    pub ttl_s: Option<u64>,
}

/// Answers `{token, expires_at}` (RFC 3339) and `expires_in_s`.
pub async fn mint(
    State(access): State<Access>,
    caller: Caller,
    ApiJson(request): ApiJson<MintRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require_operator()?;
    let keys = access.token_keys.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "tokens_disabled",
            "scoped tokens are off: set AGENTSTREAM_TOKEN_SECRET (32+ bytes) to mint them",
        )
    })?;
    let invalid =
        |message: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message);
    if request.sub.is_empty() || request.sub.chars().count() > TOKEN_SUB_CHARS_MAX {
        return Err(invalid(format!("sub must be 1–{TOKEN_SUB_CHARS_MAX} characters")));
    }
    check_agents(&request.agents).map_err(invalid)?;
    let scopes = Scopes::parse(&request.scope).map_err(invalid)?;
    let ttl_s = request.ttl_s.unwrap_or(TOKEN_TTL_SECONDS_DEFAULT.min(keys.ttl_seconds_max()));
    if ttl_s == 0 || ttl_s > keys.ttl_seconds_max() {
        return Err(invalid(format!(
            "ttl_s must be 1–{} (AGENTSTREAM_TOKEN_TTL_SECONDS_MAX)",
            keys.ttl_seconds_max()
        )));
    }
    let now = chrono::Utc::now().timestamp();
    let grant =
        Grant { sub: request.sub, agents: request.agents, scopes, expires_at: now + ttl_s as i64 };
    let token = keys.sign(&grant, now);
    let expires_at = chrono::DateTime::from_timestamp(grant.expires_at, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Ok((
        StatusCode::CREATED,
        Json(json!({ "token": token, "expires_at": expires_at, "expires_in_s": ttl_s })),
    ))
}
