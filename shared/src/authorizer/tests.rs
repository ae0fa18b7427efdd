//! The authorizer against tokens signed here, with a key generated for the test and served
//! as the pool's key set.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Value, json};

use super::*;

const ISSUER: &str = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example";
const CLIENT: &str = "5example0client0id0gridline";
const METHOD_ARN: &str = "arn:aws:execute-api:us-east-1:123456789012:abc123defg/prod/GET/projects";
const NOW: i64 = 1_800_000_000;

/// The modulus and exponent of a PKCS#1 `RSAPublicKey` (a DER SEQUENCE of two INTEGERs).
fn n_and_e(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    fn length(der: &[u8], at: &mut usize) -> usize {
        let first = der[*at];
        *at += 1;
        if first < 0x80 {
            return usize::from(first);
        }
        let mut len = 0;
        for _ in 0..(first & 0x7f) {
            len = (len << 8) | usize::from(der[*at]);
            *at += 1;
        }
        len
    }
    fn integer(der: &[u8], at: &mut usize) -> Vec<u8> {
        assert_eq!(der[*at], 0x02, "an INTEGER");
        *at += 1;
        let len = length(der, at);
        let value = &der[*at..*at + len];
        *at += len;
        let start = value.iter().position(|&b| b != 0).unwrap_or(0);
        value[start..].to_vec()
    }
    let mut at = 1;
    assert_eq!(der[0], 0x30, "a SEQUENCE");
    length(der, &mut at);
    let n = integer(der, &mut at);
    (n, integer(der, &mut at))
}

struct Pool {
    key: KeyPair,
    authorizer: Authorizer,
}

fn jwks_of(key: &KeyPair, kid: &str) -> Value {
    let (n, e) = n_and_e(key.public_key().as_ref());
    json!({"keys": [
        {"kty": "EC", "kid": "ec", "crv": "P-256", "x": "", "y": ""},
        {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": B64.encode(n), "e": B64.encode(e)},
    ]})
}

fn pool() -> Pool {
    let key = KeyPair::generate(KeySize::Rsa2048).unwrap();
    let keys = Jwks::parse(jwks_of(&key, "k1").to_string().as_bytes()).unwrap();
    Pool {
        key,
        authorizer: Authorizer {
            issuer: ISSUER.into(),
            client_ids: ClientIds::parse(CLIENT),
            keys,
            no_tenant_key: super::NO_TENANT_USAGE_KEY.into(),
        },
    }
}

fn claims() -> Value {
    json!({
        "sub": "7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6",
        "custom:tenant_id": "acme",
        "iss": ISSUER,
        "aud": CLIENT,
        "token_use": "id",
        "exp": NOW + 3600,
        "iat": NOW - 60,
        "email": "alice@example.com",
    })
}

fn sign(key: &KeyPair, header: &Value, claims: &Value) -> String {
    let input = format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    );
    let mut signature = vec![0; key.public_modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        input.as_bytes(),
        &mut signature,
    )
    .unwrap();
    format!("{input}.{}", B64.encode(signature))
}

fn event(token: &str) -> ApiGatewayCustomAuthorizerRequest {
    serde_json::from_value(json!({
        "type": "TOKEN",
        "authorizationToken": format!("Bearer {token}"),
        "methodArn": METHOD_ARN,
    }))
    .unwrap()
}

impl Pool {
    fn token(&self, claims: &Value) -> String {
        sign(&self.key, &json!({"kid": "k1", "alg": "RS256"}), claims)
    }

    fn answer(&self, claims: &Value) -> Result<ApiGatewayCustomAuthorizerResponse, Rejection> {
        self.authorizer.authorize(&event(&self.token(claims)), NOW)
    }
}

#[test]
fn a_valid_id_token_is_allowed_on_the_whole_stage_with_the_caller_and_the_tenants_key() {
    let pool = pool();
    let answer = pool.answer(&claims()).unwrap();
    let json = serde_json::to_value(&answer).unwrap();
    assert_eq!(json["principalId"], "7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6");
    let statement = &json["policyDocument"]["Statement"][0];
    assert_eq!(statement["Effect"], "Allow");
    assert_eq!(statement["Action"], json!(["execute-api:Invoke"]));
    assert_eq!(
        statement["Resource"],
        json!(["arn:aws:execute-api:us-east-1:123456789012:abc123defg/prod/*"])
    );
    assert_eq!(
        json["context"],
        json!({"sub": "7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6", "tenant": "acme", "client_id": CLIENT,
               "email": "alice@example.com", "email_verified": "false"})
    );
    let acme = TenantId::parse("acme").unwrap();
    assert_eq!(json["usageIdentifierKey"], usage_key(&acme));
}

#[test]
fn tokens_that_are_not_the_pools_valid_id_tokens_are_refused() {
    let pool = pool();
    let with = |key: &str, value: Value| {
        let mut c = claims();
        c[key] = value;
        pool.answer(&c).map(|_| ())
    };
    assert_eq!(with("exp", json!(NOW)), Err(Rejection::Expired));
    assert_eq!(
        with("aud", json!("someotherclient")),
        Err(Rejection::Client)
    );
    assert_eq!(
        with("token_use", json!("access")),
        Err(Rejection::NotAnIdToken)
    );
    assert_eq!(
        with("iss", json!("https://evil.example.com")),
        Err(Rejection::Issuer)
    );
    assert_eq!(with("sub", json!("")), Err(Rejection::Subject));
    assert_eq!(
        with("custom:tenant_id", json!("a#b")),
        Err(Rejection::NoTenant)
    );
}

/// A person who just signed up holds a token without a tenant: it is allowed, with an empty
/// tenant and the shared no-tenant usage key, and its email passes on; the functions then
/// serve only the routes that need no tenant.
#[tokio::test]
async fn a_token_without_a_tenant_is_allowed_with_its_email_and_the_no_tenant_key() {
    use axum::extract::FromRequestParts;

    use crate::auth::{AuthMode, Caller, Identity, Unauthorized};

    let pool = pool();
    let mut no_tenant = claims();
    let object = no_tenant.as_object_mut().unwrap();
    object.remove("custom:tenant_id");
    object.insert("email".into(), json!("Ana@Example.com"));
    object.insert("email_verified".into(), json!(true));
    let answer = serde_json::to_value(pool.answer(&no_tenant).unwrap()).unwrap();
    assert_eq!(answer["context"]["tenant"], "");
    assert_eq!(answer["context"]["email"], "Ana@Example.com");
    assert_eq!(answer["context"]["email_verified"], "true");
    assert_eq!(answer["usageIdentifierKey"], super::NO_TENANT_USAGE_KEY);
    let mut authorizer = answer["context"].clone();
    authorizer["principalId"] = answer["principalId"].clone();
    let mut event: Value =
        serde_json::from_str(include_str!("../../../events/projects-get.json")).unwrap();
    event["requestContext"]["authorizer"] = authorizer;
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let (mut parts, _) = request.into_parts();
    let mode = AuthMode::ApiGateway {
        client_ids: ClientIds::parse(CLIENT),
    };
    let identity = Identity::from_request_parts(&mut parts, &mode)
        .await
        .unwrap();
    assert_eq!(identity.tenant, None);
    assert_eq!(
        identity.verified_email().as_deref(),
        Some("ana@example.com")
    );
    assert_eq!(
        Caller::from_request_parts(&mut parts, &mode).await,
        Err(Unauthorized::NoTenant)
    );
}

#[test]
fn forged_and_malformed_tokens_are_refused() {
    let pool = pool();
    let refused = |token: &str| pool.authorizer.authorize(&event(token), NOW).map(|_| ());
    // Signed by another key under the pool's key id.
    let other = KeyPair::generate(KeySize::Rsa2048).unwrap();
    let forged = sign(&other, &json!({"kid": "k1", "alg": "RS256"}), &claims());
    assert_eq!(refused(&forged), Err(Rejection::BadSignature));
    // The pool's signature over other claims.
    let good = pool.token(&claims());
    let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
    let mut tampered = claims();
    tampered["custom:tenant_id"] = json!("evilcorp");
    parts[1] = B64.encode(tampered.to_string());
    assert_eq!(refused(&parts.join(".")), Err(Rejection::BadSignature));
    // A key the pool does not have, and algorithms other than RS256.
    let unknown = sign(&pool.key, &json!({"kid": "k2", "alg": "RS256"}), &claims());
    assert_eq!(refused(&unknown), Err(Rejection::UnknownKey));
    let none = format!(
        "{}.{}.",
        B64.encode(r#"{"alg":"none","kid":"k1"}"#),
        B64.encode(claims().to_string())
    );
    assert_eq!(refused(&none), Err(Rejection::Algorithm));
    assert_eq!(refused("not-a-jwt"), Err(Rejection::Malformed));
    let mut no_scheme = event(&good);
    no_scheme.authorization_token = Some(good.clone());
    assert!(pool.authorizer.authorize(&no_scheme, NOW).is_err());
}

#[test]
fn a_refusal_is_the_error_api_gateway_answers_401() {
    let pool = pool();
    let error = handle(&pool.authorizer, &event("x.y.z"), NOW).unwrap_err();
    assert_eq!(error.error_message, "Unauthorized");
    let mut stale = claims();
    stale["exp"] = json!(NOW - 1);
    assert!(handle(&pool.authorizer, &event(&pool.token(&stale)), NOW).is_err());
    assert!(handle(&pool.authorizer, &event(&pool.token(&claims())), NOW).is_ok());
}

#[test]
fn each_tenant_has_its_own_stable_usage_key_that_api_gateway_accepts() {
    let acme = TenantId::parse("acme").unwrap();
    let other = TenantId::parse("globex").unwrap();
    let key = usage_key(&acme);
    assert_eq!(key.len(), 64);
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(key, usage_key(&other));
    // gridctl tenant-key creates keys with this value: it must never change.
    assert_eq!(
        key,
        "31b34efaab92baaaf1eebe91b60a24d9f89d45a4cd953b8e5d46b0ad23b070a0"
    );
}

#[test]
fn a_key_set_without_rsa_signing_keys_is_refused() {
    assert!(matches!(
        Jwks::parse(br#"{"keys":[{"kty":"EC","kid":"a"}]}"#),
        Err(JwksError::NoKeys)
    ));
    assert!(Jwks::parse(b"<html>").is_err());
    assert_eq!(jwks_url(ISSUER), format!("{ISSUER}/.well-known/jwks.json"));
    assert_eq!(
        stage_arn("arn:aws:execute-api:r:1:api/prod/GET/x/y").unwrap(),
        "arn:aws:execute-api:r:1:api/prod/*"
    );
    assert_eq!(stage_arn("nonsense"), None);
}

#[tokio::test]
async fn a_key_set_that_cannot_be_fetched_is_an_error_not_a_hang() {
    // Nothing listens there, and plain HTTP is refused anyway.
    assert!(
        fetch("https://127.0.0.1:9/.well-known/jwks.json")
            .await
            .is_err()
    );
    assert!(
        fetch("http://127.0.0.1:9/.well-known/jwks.json")
            .await
            .is_err()
    );
}

/// The contract between the authorizer and the functions: what it answers is what they read.
#[tokio::test]
async fn the_functions_read_the_caller_the_authorizer_passes_on() {
    use axum::extract::FromRequestParts;

    use crate::auth::{AuthMode, Caller};

    let pool = pool();
    let answer = serde_json::to_value(pool.answer(&claims()).unwrap()).unwrap();
    // API Gateway puts the context's fields beside principalId in requestContext.authorizer.
    let mut authorizer = answer["context"].clone();
    authorizer["principalId"] = answer["principalId"].clone();
    authorizer["integrationLatency"] = json!(12);
    let mut event: Value =
        serde_json::from_str(include_str!("../../../events/projects-get.json")).unwrap();
    event["requestContext"]["authorizer"] = authorizer;
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let (mut parts, _) = request.into_parts();
    let mode = AuthMode::ApiGateway {
        client_ids: ClientIds::parse(CLIENT),
    };
    let caller = Caller::from_request_parts(&mut parts, &mode).await.unwrap();
    assert_eq!(caller.tenant, "acme");
    assert_eq!(caller.user, "7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6");
}

#[tokio::test]
async fn a_key_the_pool_added_since_the_cold_start_is_fetched_once_then_not_for_a_while() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    let pool = pool();
    let rotated = KeyPair::generate(KeySize::Rsa2048).unwrap();
    let token = sign(&rotated, &json!({"kid": "k2", "alg": "RS256"}), &claims());
    let mut both = jwks_of(&pool.key, "k1");
    both["keys"][0] = jwks_of(&rotated, "k2")["keys"][1].clone();
    let fetches = AtomicUsize::new(0);
    let fetch = |url: String| {
        fetches.fetch_add(1, Ordering::SeqCst);
        assert_eq!(url, jwks_url(ISSUER));
        let keys = Jwks::parse(both.to_string().as_bytes());
        async move { keys }
    };
    let long_ago = Instant::now().checked_sub(REFETCH_AFTER).unwrap();
    let live = Live::new(pool.authorizer, long_ago);

    let answer = live.handle(&event(&token), NOW, fetch).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    // The renewed keys stay: the next token of the new key needs no fetch.
    assert!(live.handle(&event(&token), NOW, fetch).await.is_ok());
    // A made-up key id right after: refused, and no second fetch so soon.
    let made_up = sign(&rotated, &json!({"kid": "k3", "alg": "RS256"}), &claims());
    assert!(live.handle(&event(&made_up), NOW, fetch).await.is_err());
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}
