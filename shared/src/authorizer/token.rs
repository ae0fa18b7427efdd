//! A Cognito ID token, verified: RS256 by one of the pool's keys, then its claims (issuer,
//! expiry, `token_use`, audience, subject and tenant).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde::Deserialize;

use super::jwks::{Jwks, KeyError};
use crate::auth::{ClientIds, Identity};
use crate::domain::ids::{TenantId, UserId};

/// Why a token was refused. Logged by kind (never the token); the client sees only `401`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Not `Bearer <header>.<payload>.<signature>`, or parts that are not base64 JSON.
    Malformed,
    /// A header `alg` other than RS256 (`none` and HS256 included).
    Algorithm,
    /// No key of the pool has the token's `kid`.
    UnknownKey,
    BadSignature,
    /// `iss` is not the pool.
    Issuer,
    Expired,
    /// An access token (or anything but an ID token).
    NotAnIdToken,
    /// `aud` is not one of the allowed app clients.
    Client,
    /// No valid `sub`.
    Subject,
    /// A `custom:tenant_id` that is not a valid tenant id (none at all is fine: the
    /// workspace routes take such tokens, the others answer `403`).
    NoTenant,
}

/// What a token must say besides its signature.
pub struct Expected<'a> {
    /// `https://cognito-idp.{region}.amazonaws.com/{pool id}`.
    pub issuer: &'a str,
    pub client_ids: &'a ClientIds,
}

/// A verified token: its holder and the app client it was issued to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub identity: Identity,
    pub client_id: String,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: String,
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: String,
    #[serde(default, rename = "custom:tenant_id")]
    tenant: Option<String>,
    #[serde(default)]
    iss: String,
    exp: i64,
    #[serde(default)]
    token_use: String,
    #[serde(default)]
    aud: String,
    #[serde(default)]
    email: Option<String>,
    /// A boolean in Cognito's ID tokens; some tools write it as a string.
    #[serde(default)]
    email_verified: Option<serde_json::Value>,
}

/// Verifies `authorization` (the `Authorization` header's value, `Bearer <jwt>`) at `now`
/// (seconds since the epoch).
pub fn verify(
    authorization: &str,
    keys: &Jwks,
    expected: &Expected<'_>,
    now: i64,
) -> Result<Verified, Rejection> {
    let token = bearer(authorization).ok_or(Rejection::Malformed)?;
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Rejection::Malformed);
    };
    let header: Header = decode_json(h)?;
    if header.alg != "RS256" {
        return Err(Rejection::Algorithm);
    }
    let signature = B64.decode(s).map_err(|_| Rejection::Malformed)?;
    let signing_input = &token[..h.len() + 1 + p.len()];
    keys.verify(&header.kid, signing_input.as_bytes(), &signature)
        .map_err(|e| match e {
            KeyError::Unknown => Rejection::UnknownKey,
            KeyError::BadSignature => Rejection::BadSignature,
        })?;
    let claims: Claims = decode_json(p)?;
    check(claims, expected, now)
}

fn check(claims: Claims, expected: &Expected<'_>, now: i64) -> Result<Verified, Rejection> {
    if claims.iss != expected.issuer {
        return Err(Rejection::Issuer);
    }
    if claims.exp <= now {
        return Err(Rejection::Expired);
    }
    // Only ID tokens carry `custom:tenant_id`, and only their `aud` names the app client.
    if claims.token_use != "id" {
        return Err(Rejection::NotAnIdToken);
    }
    if !expected.client_ids.contains(&claims.aud) {
        return Err(Rejection::Client);
    }
    let user = UserId::parse(&claims.sub).ok_or(Rejection::Subject)?;
    let tenant = match claims.tenant.as_deref() {
        None | Some("") => None,
        Some(t) => Some(TenantId::parse(t).ok_or(Rejection::NoTenant)?),
    };
    let email_verified = matches!(&claims.email_verified, Some(serde_json::Value::Bool(true)))
        || matches!(&claims.email_verified, Some(serde_json::Value::String(s)) if s == "true");
    Ok(Verified {
        identity: Identity {
            user,
            tenant,
            email: claims.email.filter(|e| !e.is_empty()),
            email_verified,
        },
        client_id: claims.aud,
    })
}

fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, Rejection> {
    let bytes = B64.decode(part).map_err(|_| Rejection::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| Rejection::Malformed)
}
