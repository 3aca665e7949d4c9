use super::*;
use serde_json::{json, Value};

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const OLD_SECRET: &str = "fedcba9876543210fedcba9876543210";
const NOW: i64 = 1_800_000_000;

fn keys(secrets: &str) -> TokenKeys {
    TokenKeys::new(secrets, 3600).unwrap()
}

/// A token with any header and claims, signed with `secret` (what an attacker or a careless
/// issuer could send).
fn forge(header: Value, claims: Value, secret: &str) -> String {
    let header = URL_SAFE_NO_PAD.encode(header.to_string());
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{payload}");
    let signature = URL_SAFE_NO_PAD.encode(mac(secret.as_bytes(), &signed).finalize().into_bytes());
    format!("{signed}.{signature}")
}

fn claims() -> Value {
    json!({"sub": "alice", "agents": ["chat-1"], "scope": "read write", "iat": NOW, "exp": NOW + 300})
}

fn with(mut value: Value, key: &str, new: Value) -> Value {
    if new.is_null() {
        value.as_object_mut().unwrap().remove(key);
    } else {
        value[key] = new;
    }
    value
}

#[test]
fn tokens_are_checked_claim_by_claim() {
    let hs256 = json!({"alg": "HS256", "typ": "JWT"});
    // (what, token, verdict: Ok(scopes) or the error)
    let cases: Vec<(&str, String, Result<&str, TokenError>)> = vec![
        ("valid", forge(hs256.clone(), claims(), SECRET), Ok("read write")),
        (
            "signed with an older secret of the list",
            forge(hs256.clone(), claims(), OLD_SECRET),
            Ok("read write"),
        ),
        (
            "signed with another secret",
            forge(hs256.clone(), claims(), "another-secret-another-secret-xx"),
            Err(TokenError::Signature),
        ),
        (
            "alg none, no signature",
            format!(
                "{}.{}.",
                URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
                URL_SAFE_NO_PAD.encode(claims().to_string())
            ),
            Err(TokenError::Algorithm("none".into())),
        ),
        (
            "alg HS512",
            forge(json!({"alg": "HS512"}), claims(), SECRET),
            Err(TokenError::Algorithm("HS512".into())),
        ),
        (
            "alg hs256 (case matters)",
            forge(json!({"alg": "hs256"}), claims(), SECRET),
            Err(TokenError::Algorithm("hs256".into())),
        ),
        (
            "a critical extension",
            forge(json!({"alg": "HS256", "crit": ["b64"]}), claims(), SECRET),
            Err(TokenError::Claim("crit: no critical header extension is understood here".into())),
        ),
        ("two parts", "a.b".to_owned(), Err(TokenError::Malformed)),
        ("four parts", "a.b.c.d".to_owned(), Err(TokenError::Malformed)),
        ("not base64", "@@.@@.@@".to_owned(), Err(TokenError::Malformed)),
        ("the operator token", "s3cret-operator".to_owned(), Err(TokenError::Malformed)),
        ("huge", "a".repeat(TOKEN_BYTES_MAX + 1), Err(TokenError::TooLarge)),
        (
            "expired",
            forge(hs256.clone(), with(claims(), "exp", json!(NOW - 31)), SECRET),
            Err(TokenError::Expired),
        ),
        (
            "expired within the clock skew",
            forge(hs256.clone(), with(claims(), "exp", json!(NOW - 5)), SECRET),
            Ok("read write"),
        ),
        (
            "no exp",
            forge(hs256.clone(), with(claims(), "exp", Value::Null), SECRET),
            Err(TokenError::Claim("exp is required".into())),
        ),
        (
            "lives two hours",
            forge(hs256.clone(), with(claims(), "exp", json!(NOW + 7200)), SECRET),
            Err(TokenError::TooLong { lifetime_s: 7200, max_s: 3600 }),
        ),
        (
            "no iat, exp too far from now",
            forge(
                hs256.clone(),
                with(with(claims(), "iat", Value::Null), "exp", json!(NOW + 4000)),
                SECRET,
            ),
            Err(TokenError::TooLong { lifetime_s: 4000, max_s: 3600 }),
        ),
        (
            "iat at the bottom of an i64, exp at its top: the lifetime does not wrap",
            forge(
                hs256.clone(),
                with(with(claims(), "iat", json!(-9.3e18)), "exp", json!(9.2e18)),
                SECRET,
            ),
            Err(TokenError::TooLong { lifetime_s: i64::MAX, max_s: 3600 }),
        ),
        (
            "issued in the future",
            forge(hs256.clone(), with(claims(), "iat", json!(NOW + 120)), SECRET),
            Err(TokenError::NotYetValid),
        ),
        (
            "nbf in the future",
            forge(hs256.clone(), with(claims(), "nbf", json!(NOW + 120)), SECRET),
            Err(TokenError::NotYetValid),
        ),
        (
            "no sub",
            forge(hs256.clone(), with(claims(), "sub", Value::Null), SECRET),
            Err(TokenError::Claim("sub is required".into())),
        ),
        (
            "empty sub",
            forge(hs256.clone(), with(claims(), "sub", json!("")), SECRET),
            Err(TokenError::Claim("sub must be 1–256 characters".into())),
        ),
        (
            "no agents",
            forge(hs256.clone(), with(claims(), "agents", Value::Null), SECRET),
            Err(TokenError::Claim("agents is required (a list of agent ids or chat names)".into())),
        ),
        (
            "too many agents",
            forge(
                hs256.clone(),
                with(claims(), "agents", json!(vec!["a"; TOKEN_AGENTS_MAX + 1])),
                SECRET,
            ),
            Err(TokenError::Claim("agents names 101 agents: at most 100".into())),
        ),
        (
            "an unknown scope",
            forge(hs256.clone(), with(claims(), "scope", json!("read admin")), SECRET),
            Err(TokenError::Claim(
                "unknown scope \"admin\" (use read, write, approve, produce)".into(),
            )),
        ),
        (
            "an empty scope",
            forge(hs256.clone(), with(claims(), "scope", json!(" ")), SECRET),
            Err(TokenError::Claim(
                "scope names no operation (use read, write, approve, produce)".into(),
            )),
        ),
        (
            "approve only",
            forge(hs256.clone(), with(claims(), "scope", json!("approve")), SECRET),
            Ok("approve"),
        ),
    ];
    let keys = keys(&format!("{SECRET},{OLD_SECRET}"));
    for (what, token, verdict) in cases {
        let got = keys.verify(&token, NOW).map(|grant| grant.scopes.to_string());
        assert_eq!(got, verdict.map(str::to_owned), "{what}");
    }
}

#[test]
fn claims_of_the_wrong_type_are_refused() {
    let token = forge(json!({"alg": "HS256"}), with(claims(), "exp", json!("soon")), SECRET);
    let error = keys(SECRET).verify(&token, NOW).unwrap_err();
    assert!(
        matches!(&error, TokenError::Claim(message) if message.contains("expected f64")),
        "{error}"
    );
}

#[test]
fn a_tampered_payload_fails_the_signature() {
    let keys = keys(SECRET);
    let token = forge(json!({"alg": "HS256"}), claims(), SECRET);
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = URL_SAFE_NO_PAD
        .encode(with(claims(), "agents", json!(["chat-1", "someone-elses"])).to_string());
    assert_eq!(keys.verify(&parts.join("."), NOW), Err(TokenError::Signature));
}

#[test]
fn signed_tokens_verify_and_carry_their_grant() {
    let keys = keys(&format!("{SECRET},{OLD_SECRET}"));
    let grant = Grant {
        sub: "alice".into(),
        agents: vec!["chat-1".into(), "7c1b7a52-6c1d-4f5e-9a0b-1d2e3f405162".into()],
        scopes: Scopes::of(&[Scope::Read, Scope::Approve]),
        expires_at: NOW + 60,
    };
    let token = keys.sign(&grant, NOW);
    assert_eq!(keys.verify(&token, NOW), Ok(grant.clone()));
    // The first secret signs: a server that knows only the old one refuses it.
    assert_eq!(keys_old_only().verify(&token, NOW), Err(TokenError::Signature));
}

fn keys_old_only() -> TokenKeys {
    keys(OLD_SECRET)
}

#[test]
fn secrets_are_checked_at_start() {
    assert!(TokenKeys::new("short", 3600).unwrap_err().contains("shorter than 32"));
    assert!(TokenKeys::new(" , ", 3600).unwrap_err().contains("no secret"));
    assert!(TokenKeys::new(&format!("{SECRET}, {OLD_SECRET}"), 3600).is_ok());
}
