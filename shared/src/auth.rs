//! Who is calling: the tenant and user, from verified claims only.
//!
//! Behind API Gateway the API's Lambda authorizer ([`crate::authorizer`]) has verified the
//! token and the caller arrives in the request context, in the fields the authorizer set. On
//! the local stack the server verifies an HS256 token itself. Nothing is ever read from a
//! header the client controls other than the token.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use lambda_http::request::RequestContext;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::domain::ids::{TenantId, UserId};

/// The claim that carries the tenant (Cognito's convention for a custom attribute).
pub const TENANT_CLAIM: &str = "custom:tenant_id";

/// The `requestContext.authorizer` field holding the caller's user id (the token's `sub`),
/// as the authorizer sets it.
pub const CONTEXT_SUB: &str = "sub";
/// The `requestContext.authorizer` field holding the caller's tenant.
pub const CONTEXT_TENANT: &str = "tenant";
/// The `requestContext.authorizer` field holding the app client the token was issued to.
pub const CONTEXT_CLIENT: &str = "client_id";
/// The `requestContext.authorizer` field holding the token's `email` (empty when it has none).
pub const CONTEXT_EMAIL: &str = "email";
/// The `requestContext.authorizer` field holding `"true"` when the token's email is verified.
pub const CONTEXT_EMAIL_VERIFIED: &str = "email_verified";

/// The authenticated caller on a route of a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub tenant: TenantId,
    pub user: UserId,
}

/// Everything a verified token says of its holder. Routes that need no tenant (creating a
/// workspace, listing one's workspaces and invitations) take this; every other route takes a
/// [`Caller`], which needs the tenant claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: UserId,
    /// `custom:tenant_id`; a person who just signed up has none.
    pub tenant: Option<TenantId>,
    /// The token's `email` claim, as Cognito sets it.
    pub email: Option<String>,
    pub email_verified: bool,
}

impl Identity {
    /// The email an invitation may be accepted with: only a verified one, lower-cased.
    pub fn verified_email(&self) -> Option<String> {
        self.email
            .as_deref()
            .filter(|_| self.email_verified)
            .map(crate::domain::email::normalise)
    }
}

/// The environment variable listing the app clients whose tokens the API accepts,
/// comma-separated (the template joins the stack's own client and `AllowedClientIds`).
pub const ALLOWED_CLIENT_IDS_VAR: &str = "ALLOWED_CLIENT_IDS";

/// The Cognito app clients whose ID tokens the API accepts. Another client of a shared pool
/// may let its users write their own `custom:tenant_id`, so the authorizer checks the token's
/// `aud`, and the functions check the client it passes on too. An empty list accepts nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientIds(Vec<String>);

impl ClientIds {
    pub fn parse(list: &str) -> Self {
        Self(
            list.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }

    /// `ALLOWED_CLIENT_IDS` from the environment.
    pub fn from_env() -> Self {
        Self::parse(&std::env::var(ALLOWED_CLIENT_IDS_VAR).unwrap_or_default())
    }

    /// Whether `client` is one of the list.
    pub fn contains(&self, client: &str) -> bool {
        self.0.iter().any(|c| c == client)
    }
}

/// Where claims come from.
#[derive(Clone)]
pub enum AuthMode {
    /// API Gateway's authorizer verified the token; read the caller from
    /// `requestContext.authorizer` (the fields [`crate::authorizer`] sets), and accept only
    /// tokens issued to one of `client_ids`.
    ApiGateway { client_ids: ClientIds },
    /// Verify `Authorization: Bearer` as an HS256 JWT with this secret (the local stack).
    Hs256 { secret: Vec<u8> },
}

/// Why no caller could be found. The HTTP layer answers each with its problem document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unauthorized {
    /// `401`: no bearer token, or one that does not verify.
    NoToken,
    /// `403`: a valid token without a tenant claim, on a route that needs one.
    NoTenant,
}

/// An `Identity` is extracted from any state that can give its [`AuthMode`].
impl<S: Send + Sync> FromRequestParts<S> for Identity
where
    AuthMode: FromRef<S>,
{
    type Rejection = Unauthorized;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // Verified once per request: the access guard, a handler's `Caller` and its `Paging`
        // share the result.
        if let Some(identity) = parts.extensions.get::<Identity>() {
            return Ok(identity.clone());
        }
        let identity = match AuthMode::from_ref(state) {
            AuthMode::ApiGateway { client_ids } => from_request_context(parts, &client_ids),
            AuthMode::Hs256 { secret } => {
                bearer(parts).and_then(|token| verify_hs256(token, &secret, now()))
            }
        };
        let identity = identity.ok_or(Unauthorized::NoToken)?;
        if let Some(tenant) = &identity.tenant {
            crate::telemetry::note_tenant(tenant);
        }
        parts.extensions.insert(identity.clone());
        Ok(identity)
    }
}

/// A `Caller` is an [`Identity`] with a tenant.
impl<S: Send + Sync> FromRequestParts<S> for Caller
where
    AuthMode: FromRef<S>,
{
    type Rejection = Unauthorized;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let identity = Identity::from_request_parts(parts, state).await?;
        Ok(Caller {
            tenant: identity.tenant.ok_or(Unauthorized::NoTenant)?,
            user: identity.user,
        })
    }
}

fn from_request_context(parts: &Parts, client_ids: &ClientIds) -> Option<Identity> {
    let RequestContext::ApiGatewayV1(ctx) = parts.extensions.get::<RequestContext>()? else {
        return None;
    };
    let field = |name: &str| ctx.authorizer.fields.get(name)?.as_str();
    // The authorizer refuses all but ID tokens of the allowed clients; the client is checked
    // here too, so a function never serves a token its own configuration does not accept.
    if !client_ids.contains(field(CONTEXT_CLIENT)?) {
        return None;
    }
    identity_from(
        field(CONTEXT_SUB)?,
        field(CONTEXT_TENANT).unwrap_or_default(),
        field(CONTEXT_EMAIL).unwrap_or_default(),
        field(CONTEXT_EMAIL_VERIFIED) == Some("true"),
    )
}

/// The identity a token's claims give; an empty tenant or email is none.
pub fn identity_from(
    sub: &str,
    tenant: &str,
    email: &str,
    email_verified: bool,
) -> Option<Identity> {
    let tenant = match tenant {
        "" => None,
        t => Some(TenantId::parse(t)?),
    };
    Some(Identity {
        user: UserId::parse(sub)?,
        tenant,
        email: (!email.is_empty()).then(|| email.to_string()),
        email_verified,
    })
}

fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
}

/// The claims of a local token: Cognito's names, so a client reads both alike.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    #[serde(
        default,
        rename = "custom:tenant_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_verified: Option<bool>,
    #[serde(default)]
    pub exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
}

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length, so this cannot fail.
    <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"))
}

/// Verifies an HS256 JWT (signature in constant time, `alg` pinned, `exp` required).
pub fn verify_hs256(token: &str, secret: &[u8], now: i64) -> Option<Identity> {
    let mut parts = token.split('.');
    let (h, p, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let header: Header = serde_json::from_slice(&B64.decode(h).ok()?).ok()?;
    if header.alg != "HS256" {
        return None;
    }
    let mut m = mac(secret);
    m.update(format!("{h}.{p}").as_bytes());
    m.verify_slice(&B64.decode(s).ok()?).ok()?;
    let claims: Claims = serde_json::from_slice(&B64.decode(p).ok()?).ok()?;
    if claims.exp <= now {
        return None;
    }
    identity_from(
        &claims.sub,
        claims.tenant.as_deref().unwrap_or_default(),
        claims.email.as_deref().unwrap_or_default(),
        claims.email_verified == Some(true),
    )
}

/// Mints a token the local stack accepts (`make token`), valid for `ttl_secs`.
pub fn mint_hs256(user: &str, tenant: &str, secret: &[u8], ttl_secs: i64) -> String {
    let claims = Claims {
        sub: user.into(),
        tenant: Some(tenant.into()),
        ..Claims::default()
    };
    mint_claims(claims, secret, ttl_secs)
}

/// Mints a local token with these claims (`exp` and `iat` are set here), valid for `ttl_secs`.
pub fn mint_claims(mut claims: Claims, secret: &[u8], ttl_secs: i64) -> String {
    let header = Header {
        alg: "HS256".into(),
        typ: Some("JWT".into()),
    };
    let iat = now();
    claims.exp = iat + ttl_secs;
    claims.iat = Some(iat);
    let signing_input = format!("{}.{}", b64_json(&header), b64_json(&claims));
    let mut m = mac(secret);
    m.update(signing_input.as_bytes());
    format!("{signing_input}.{}", B64.encode(m.finalize().into_bytes()))
}

fn b64_json<T: Serialize>(value: &T) -> String {
    B64.encode(serde_json::to_vec(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"test-secret";

    #[test]
    fn minted_tokens_verify() {
        let token = mint_hs256("alice", "acme", SECRET, 60);
        let identity = verify_hs256(&token, SECRET, now()).unwrap();
        assert_eq!(identity.tenant, TenantId::parse("acme"));
        assert_eq!(identity.user, "alice");
        assert_eq!((identity.email, identity.email_verified), (None, false));
        let bare = mint_claims(
            Claims {
                sub: "bob".into(),
                email: Some("Bob@Example.com".into()),
                email_verified: Some(true),
                ..Claims::default()
            },
            SECRET,
            60,
        );
        let identity = verify_hs256(&bare, SECRET, now()).unwrap();
        assert_eq!(identity.tenant, None);
        assert_eq!(
            identity.verified_email().as_deref(),
            Some("bob@example.com")
        );
    }

    #[test]
    fn wrong_secret_expired_and_tampered_tokens_fail() {
        let token = mint_hs256("alice", "acme", SECRET, 60);
        assert!(verify_hs256(&token, b"other", now()).is_none());
        assert!(verify_hs256(&token, SECRET, now() + 61).is_none());
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged =
            B64.encode(br#"{"sub":"mallory","custom:tenant_id":"acme","exp":99999999999}"#);
        parts[1] = &forged;
        assert!(verify_hs256(&parts.join("."), SECRET, now()).is_none());
    }

    /// Any state that gives an `AuthMode` will do, the mode itself included.
    #[tokio::test]
    async fn caller_is_extracted_from_any_state_with_an_auth_mode() {
        let mode = AuthMode::Hs256 {
            secret: SECRET.to_vec(),
        };
        let token = mint_hs256("alice", "acme", SECRET, 60);
        let request = axum::http::Request::builder()
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .body(())
            .unwrap();
        let (mut parts, ()) = request.into_parts();
        let caller = Caller::from_request_parts(&mut parts, &mode).await.unwrap();
        assert_eq!(caller.user, "alice");
        // A second extractor of the same request (a handler's Paging) reuses the verified
        // caller instead of verifying the token again.
        parts.headers.remove(AUTHORIZATION);
        assert_eq!(
            Caller::from_request_parts(&mut parts, &mode).await,
            Ok(caller)
        );
        let (mut parts, ()) = axum::http::Request::new(()).into_parts();
        assert_eq!(
            Caller::from_request_parts(&mut parts, &mode).await,
            Err(Unauthorized::NoToken)
        );
    }

    #[test]
    fn alg_none_is_rejected() {
        let header = B64.encode(br#"{"alg":"none"}"#);
        let claims = B64.encode(br#"{"sub":"a","custom:tenant_id":"t","exp":99999999999}"#);
        assert!(verify_hs256(&format!("{header}.{claims}."), SECRET, now()).is_none());
    }
}
