//! Scoped tokens: short-lived HS256 JWTs that an app's backend mints for one user, a few agents
//! and a few operations, so the browser can talk to this server directly.
//!
//! Pure: bytes and the clock's reading in, a [`Grant`] or a [`TokenError`] out. Signed with the
//! first secret of `AGENTSTREAM_TOKEN_SECRET`, verified with any of them (rotation: add the new
//! secret first, drop the old one once its tokens have expired).
//!
//! Claims: `sub` (the user, required), `exp` (required), `iat` and `nbf` (optional), `agents`
//! (agent ids, or chat/thread names of the AI SDK and AG-UI surfaces) and `scope`
//! (space-separated `read`, `write`, `approve`). Anything but `"alg": "HS256"` is refused —
//! `none` above all — and the signature is checked in constant time (`hmac`'s `verify_slice`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

/// How far the token issuer's clock may be off ours, by default: `exp` is honoured this long
/// after it passed (and a token's streams last as long — so a client that reconnects with it is
/// refused, not handed a stream that ends at once), `nbf`/`iat` this long before they come.
pub const TOKEN_CLOCK_SKEW_SECONDS_MAX: i64 = 30;
/// A token longer than this is refused before it is decoded (the `agents` list is bounded too).
pub const TOKEN_BYTES_MAX: usize = 8 * 1024;
/// Agents (ids or chat names) one token may name: a token is for one user's few conversations.
pub const TOKEN_AGENTS_MAX: usize = 100;
/// Characters of `sub` at most.
pub const TOKEN_SUB_CHARS_MAX: usize = 256;
/// Characters of one entry of `agents` at most (an agent id is 36, a chat name at most 128).
pub const TOKEN_AGENT_CHARS_MAX: usize = 128;
/// A secret shorter than this is refused at start: HS256 wants at least the hash's 32 bytes.
pub const TOKEN_SECRET_BYTES_MIN: usize = 32;
/// Secrets verified at most (the first signs): enough for a rotation or two in progress.
pub const TOKEN_SECRETS_MAX: usize = 8;
/// What `POST /v1/tokens` gives when the request names no `ttl_s` (Letta's default too).
pub const TOKEN_TTL_SECONDS_DEFAULT: u64 = 300;

/// One operation a token may allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// History, events, every stream and resume, the pages.
    Read,
    /// Send a message, cancel, stop.
    Write,
    /// Answer approval requests.
    Approve,
    /// Write runs into the agent's log as an external producer (the producer API), and nothing
    /// else: a producer's token cannot read the log or start our runs.
    Produce,
}

impl Scope {
    const ALL: [Scope; 4] = [Scope::Read, Scope::Write, Scope::Approve, Scope::Produce];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Approve => "approve",
            Scope::Produce => "produce",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of scopes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    pub fn of(scopes: &[Scope]) -> Scopes {
        Scopes(scopes.iter().fold(0, |bits, scope| bits | scope.bit()))
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// Reads `scope`'s space-separated names; an unknown name is an error (a typo must not
    /// quietly grant less — or, worse, be read as something else later).
    pub fn parse(text: &str) -> Result<Scopes, String> {
        let mut scopes = Scopes::default();
        for word in text.split_ascii_whitespace() {
            let scope =
                Scope::ALL.into_iter().find(|scope| scope.name() == word).ok_or_else(|| {
                    format!("unknown scope {word:?} (use read, write, approve, produce)")
                })?;
            scopes.0 |= scope.bit();
        }
        if scopes.0 == 0 {
            return Err("scope names no operation (use read, write, approve, produce)".to_owned());
        }
        Ok(scopes)
    }
}

impl std::fmt::Display for Scopes {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> =
            Scope::ALL.into_iter().filter(|scope| self.contains(*scope)).map(Scope::name).collect();
        formatter.write_str(&names.join(" "))
    }
}

/// What a verified token allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The user.
    pub sub: String,
    /// Agent ids and chat names, as the token lists them.
    pub agents: Vec<String>,
    pub scopes: Scopes,
    /// Unix seconds: the token's `exp`.
    pub expires_at: i64,
}

impl Grant {
    /// When the token stops being accepted (unix seconds): `exp` and the clock skew allowed.
    pub fn usable_until(&self, clock_skew_seconds: i64) -> i64 {
        self.expires_at.saturating_add(clock_skew_seconds)
    }
}

/// Why a token was refused. The message goes to the client: it says what to fix, never which
/// secret was tried.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the token is not a JWT (header.payload.signature, base64url)")]
    Malformed,
    #[error("the token is longer than {TOKEN_BYTES_MAX} bytes")]
    TooLarge,
    #[error("the token's alg is {0:?}: only HS256 is accepted")]
    Algorithm(String),
    #[error("the token's signature does not match")]
    Signature,
    #[error("the token expired")]
    Expired,
    #[error("the token is not valid yet (nbf/iat in the future)")]
    NotYetValid,
    #[error("the token lives {lifetime_s} s: at most {max_s} s is accepted")]
    TooLong { lifetime_s: i64, max_s: u64 },
    #[error("claim {0}")]
    Claim(String),
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    exp: Option<f64>,
    iat: Option<f64>,
    nbf: Option<f64>,
    agents: Option<Vec<String>>,
    scope: Option<String>,
}

/// The secrets, and the longest lifetime accepted.
#[derive(Clone)]
pub struct TokenKeys {
    secrets: Vec<Vec<u8>>,
    ttl_seconds_max: u64,
    clock_skew_seconds: i64,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "TokenKeys({} secrets)", self.secrets.len())
    }
}

impl TokenKeys {
    /// Reads `AGENTSTREAM_TOKEN_SECRET`'s value: comma-separated, the first signs.
    pub fn new(secrets: &str, ttl_seconds_max: u64) -> Result<TokenKeys, String> {
        let secrets: Vec<Vec<u8>> = secrets
            .split(',')
            .map(str::trim)
            .filter(|secret| !secret.is_empty())
            .map(|secret| secret.as_bytes().to_vec())
            .collect();
        if secrets.is_empty() {
            return Err("AGENTSTREAM_TOKEN_SECRET holds no secret".to_owned());
        }
        if secrets.len() > TOKEN_SECRETS_MAX {
            return Err(format!(
                "AGENTSTREAM_TOKEN_SECRET holds {} secrets: at most {TOKEN_SECRETS_MAX}",
                secrets.len()
            ));
        }
        if let Some(short) = secrets.iter().position(|s| s.len() < TOKEN_SECRET_BYTES_MIN) {
            return Err(format!(
                "AGENTSTREAM_TOKEN_SECRET: secret {} is shorter than {TOKEN_SECRET_BYTES_MIN} \
                 bytes (make one with `openssl rand -hex 32`)",
                short + 1
            ));
        }
        Ok(TokenKeys { secrets, ttl_seconds_max, clock_skew_seconds: TOKEN_CLOCK_SKEW_SECONDS_MAX })
    }

    /// The same keys with another clock skew allowance (at most the default; tests use less).
    pub fn with_clock_skew_seconds(mut self, clock_skew_seconds: i64) -> TokenKeys {
        self.clock_skew_seconds = clock_skew_seconds.clamp(0, TOKEN_CLOCK_SKEW_SECONDS_MAX);
        self
    }

    pub fn ttl_seconds_max(&self) -> u64 {
        self.ttl_seconds_max
    }

    pub fn clock_skew_seconds(&self) -> i64 {
        self.clock_skew_seconds
    }

    /// A token for `grant`, issued at `issued_at` (unix seconds), signed with the first secret.
    pub fn sign(&self, grant: &Grant, issued_at: i64) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "sub": grant.sub,
            "agents": grant.agents,
            "scope": grant.scopes.to_string(),
            "iat": issued_at,
            "exp": grant.expires_at,
        });
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signed = format!("{header}.{payload}");
        let signature =
            URL_SAFE_NO_PAD.encode(mac(&self.secrets[0], &signed).finalize().into_bytes());
        format!("{signed}.{signature}")
    }

    /// The grant of a valid token at `now` (unix seconds).
    pub fn verify(&self, token: &str, now: i64) -> Result<Grant, TokenError> {
        if token.len() > TOKEN_BYTES_MAX {
            return Err(TokenError::TooLarge);
        }
        let mut parts = token.split('.');
        let (Some(header_part), Some(payload_part), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|_| TokenError::Malformed);
        let header: Header =
            serde_json::from_slice(&decode(header_part)?).map_err(|_| TokenError::Malformed)?;
        if header.alg != "HS256" {
            return Err(TokenError::Algorithm(header.alg));
        }
        if header.crit.is_some() {
            return Err(TokenError::Claim(
                "crit: no critical header extension is understood here".to_owned(),
            ));
        }
        let signature = decode(signature)?;
        let signed = &token[..header_part.len() + 1 + payload_part.len()];
        let matches =
            self.secrets.iter().any(|secret| mac(secret, signed).verify_slice(&signature).is_ok());
        if !matches {
            return Err(TokenError::Signature);
        }
        let claims: Claims = serde_json::from_slice(&decode(payload_part)?)
            .map_err(|error| TokenError::Claim(format!("set: {error}")))?;
        self.check(claims, now)
    }

    fn check(&self, claims: Claims, now: i64) -> Result<Grant, TokenError> {
        let claim = |message: &str| TokenError::Claim(message.to_owned());
        let exp = claims.exp.ok_or_else(|| claim("exp is required"))?.floor() as i64;
        let skew = self.clock_skew_seconds;
        if now >= exp.saturating_add(skew) {
            return Err(TokenError::Expired);
        }
        let mut not_before = claims.nbf.into_iter().chain(claims.iat);
        if not_before.any(|time| time.floor() as i64 > now.saturating_add(skew)) {
            return Err(TokenError::NotYetValid);
        }
        // Checked: claims are any numbers (a float cast saturates at an i64's ends), and a
        // wrapped lifetime would be a token that never expires.
        let issued = claims.iat.map_or(now, |iat| iat.floor() as i64);
        let lifetime_s = exp.saturating_sub(issued);
        if lifetime_s > self.ttl_seconds_max as i64 {
            return Err(TokenError::TooLong { lifetime_s, max_s: self.ttl_seconds_max });
        }
        let sub = claims.sub.ok_or_else(|| claim("sub is required"))?;
        if sub.is_empty() || sub.chars().count() > TOKEN_SUB_CHARS_MAX {
            return Err(claim(&format!("sub must be 1–{TOKEN_SUB_CHARS_MAX} characters")));
        }
        let agents = claims
            .agents
            .ok_or_else(|| claim("agents is required (a list of agent ids or chat names)"))?;
        check_agents(&agents).map_err(TokenError::Claim)?;
        let scope = claims.scope.ok_or_else(|| claim("scope is required"))?;
        let scopes = Scopes::parse(&scope).map_err(TokenError::Claim)?;
        Ok(Grant { sub, agents, scopes, expires_at: exp })
    }
}

/// The `agents` list's bounds (shared with `POST /v1/tokens`).
pub fn check_agents(agents: &[String]) -> Result<(), String> {
    if agents.len() > TOKEN_AGENTS_MAX {
        return Err(format!("agents names {} agents: at most {TOKEN_AGENTS_MAX}", agents.len()));
    }
    if let Some(bad) = agents
        .iter()
        .find(|agent| agent.is_empty() || agent.chars().count() > TOKEN_AGENT_CHARS_MAX)
    {
        return Err(format!("agents: {bad:?} is not 1–{TOKEN_AGENT_CHARS_MAX} characters"));
    }
    Ok(())
}

fn mac(secret: &[u8], signed: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(signed.as_bytes());
    mac
}

#[cfg(test)]
mod tests;
