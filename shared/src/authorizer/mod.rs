//! The API's Lambda authorizer (TOKEN type). It verifies the caller's Cognito ID token itself
//! (RS256 against the pool's keys, fetched at cold start and again when a token names a key
//! they lack, see [`Live`]; issuer, expiry, `token_use`, audience), and answers API Gateway
//! with
//! - an Allow policy for every method of the stage (API Gateway caches the answer per token,
//!   so it must hold for whatever route the token calls next);
//! - a `context` with the caller ([`CONTEXT_SUB`], [`CONTEXT_TENANT`], [`CONTEXT_CLIENT`]),
//!   which the functions read from `requestContext.authorizer`;
//! - `usageIdentifierKey`: the tenant's API key value ([`usage_key`]), so the stage's usage
//!   plan throttles each tenant on its own (`ApiKeySourceType: AUTHORIZER`).
//!
//! A token it refuses is the error `Unauthorized`, which API Gateway answers `401`.

mod jwks;
mod live;
mod token;

use aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerPolicy, ApiGatewayCustomAuthorizerRequest,
    ApiGatewayCustomAuthorizerResponse,
};
use aws_lambda_events::iam::{IamPolicyEffect, IamPolicyStatement};
use lambda_http::lambda_runtime::{self, Diagnostic, LambdaEvent, service_fn};
use sha2::{Digest, Sha256};

pub use jwks::{Jwks, JwksError, fetch};
pub use live::{Live, REFETCH_AFTER};
pub use token::{Expected, Rejection, Verified, verify};

use crate::auth::ClientIds;
pub use crate::auth::{
    CONTEXT_CLIENT, CONTEXT_EMAIL, CONTEXT_EMAIL_VERIFIED, CONTEXT_SUB, CONTEXT_TENANT,
};

/// The usage-plan key of every token without a tenant (people who just signed up, before they
/// create or join a workspace), when [`NO_TENANT_KEY_VAR`] does not name the stack's own: so
/// those few routes are throttled together, never unthrottled.
pub const NO_TENANT_USAGE_KEY: &str = "gridline-usage-plan-key-no-tenant";
use crate::domain::ids::TenantId;

/// The environment variable naming the pool as tokens name it (`iss`).
pub const ISSUER_VAR: &str = "TOKEN_ISSUER";

/// The usage-plan key of `tenant`: what API Gateway throttles the tenant's requests by. The
/// hex SHA-256 of a fixed prefix and the tenant id (64 characters; API keys take 20–128). Not
/// a secret: with `ApiKeySourceType: AUTHORIZER` no client can present a key, and
/// authentication is the token. `gridctl tenant-key` creates the key with this value.
pub fn usage_key(tenant: &TenantId) -> String {
    let digest = Sha256::digest(format!("gridline-usage-plan-key:{}", tenant.as_str()));
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The pool's key-set address, from its issuer.
pub fn jwks_url(issuer: &str) -> String {
    format!("{}/.well-known/jwks.json", issuer.trim_end_matches('/'))
}

/// What the authorizer knows for its process's life.
pub struct Authorizer {
    pub issuer: String,
    pub client_ids: ClientIds,
    pub keys: Jwks,
    /// The usage-plan key named for tokens without a tenant ([`NO_TENANT_KEY_VAR`]).
    pub no_tenant_key: String,
}

/// The environment variable holding the no-tenant key's value (the template's
/// `NoTenantApiKey`); [`NO_TENANT_USAGE_KEY`] when unset.
pub const NO_TENANT_KEY_VAR: &str = "NO_TENANT_USAGE_KEY";

/// The authorizer cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{ISSUER_VAR} is not set")]
    NoIssuer,
    #[error(transparent)]
    Jwks(#[from] JwksError),
}

impl Authorizer {
    /// From the environment (`TOKEN_ISSUER`, `ALLOWED_CLIENT_IDS`), the keys fetched from the
    /// pool.
    pub async fn from_env() -> Result<Self, StartError> {
        let issuer = std::env::var(ISSUER_VAR)
            .ok()
            .filter(|i| !i.is_empty())
            .ok_or(StartError::NoIssuer)?;
        let keys = fetch(&jwks_url(&issuer)).await?;
        Ok(Self {
            issuer,
            client_ids: ClientIds::from_env(),
            keys,
            no_tenant_key: std::env::var(NO_TENANT_KEY_VAR)
                .ok()
                .filter(|k| !k.is_empty())
                .unwrap_or_else(|| NO_TENANT_USAGE_KEY.into()),
        })
    }

    /// API Gateway's answer for `event` at `now` (seconds since the epoch).
    pub fn authorize(
        &self,
        event: &ApiGatewayCustomAuthorizerRequest,
        now: i64,
    ) -> Result<ApiGatewayCustomAuthorizerResponse, Rejection> {
        let expected = Expected {
            issuer: &self.issuer,
            client_ids: &self.client_ids,
        };
        let authorization = event.authorization_token.as_deref().unwrap_or_default();
        let verified = verify(authorization, &self.keys, &expected, now)?;
        let resource = event
            .method_arn
            .as_deref()
            .and_then(stage_arn)
            .ok_or(Rejection::Malformed)?;
        Ok(allow(&verified, resource, &self.no_tenant_key))
    }
}

/// `arn:…:{api id}/{stage}/*` from a method's ARN (`arn:…:{api id}/{stage}/{verb}/{path}`):
/// every method of the stage, so a cached answer holds for the token's next route too.
fn stage_arn(method_arn: &str) -> Option<String> {
    let mut parts = method_arn.splitn(3, '/');
    let (api, stage) = (parts.next()?, parts.next()?);
    (api.starts_with("arn:") && !stage.is_empty()).then(|| format!("{api}/{stage}/*"))
}

fn allow(
    verified: &Verified,
    resource: String,
    no_tenant_key: &str,
) -> ApiGatewayCustomAuthorizerResponse {
    let mut statement = IamPolicyStatement::default();
    statement.action = vec!["execute-api:Invoke".into()];
    statement.effect = IamPolicyEffect::Allow;
    statement.resource = vec![resource];
    let mut policy = ApiGatewayCustomAuthorizerPolicy::default();
    policy.version = Some("2012-10-17".into());
    policy.statement = vec![statement];
    let identity = &verified.identity;
    let mut response = ApiGatewayCustomAuthorizerResponse::default();
    response.principal_id = Some(identity.user.as_str().to_string());
    response.policy_document = policy;
    // Context values are strings; an absent tenant or email is "".
    response.context = serde_json::json!({
        CONTEXT_SUB: identity.user.as_str(),
        CONTEXT_TENANT: identity.tenant.as_ref().map_or("", |t| t.as_str()),
        CONTEXT_CLIENT: verified.client_id,
        CONTEXT_EMAIL: identity.email.as_deref().unwrap_or_default(),
        CONTEXT_EMAIL_VERIFIED: if identity.email_verified { "true" } else { "false" },
    });
    response.usage_identifier_key = Some(match &identity.tenant {
        Some(tenant) => usage_key(tenant),
        None => no_tenant_key.to_string(),
    });
    response
}

/// Handles one invocation: the answer, or the error whose message is `Unauthorized`, which
/// API Gateway answers `401` (any other error is its `500`).
pub fn handle(
    authorizer: &Authorizer,
    event: &ApiGatewayCustomAuthorizerRequest,
    now: i64,
) -> Result<ApiGatewayCustomAuthorizerResponse, Diagnostic> {
    respond(authorizer.authorize(event, now))
}

fn respond(
    answer: Result<ApiGatewayCustomAuthorizerResponse, Rejection>,
) -> Result<ApiGatewayCustomAuthorizerResponse, Diagnostic> {
    answer.map_err(|rejection| {
        // The reason only: never the token.
        tracing::info!(?rejection, "token refused");
        Diagnostic {
            error_type: "Unauthorized".into(),
            error_message: "Unauthorized".into(),
        }
    })
}

/// Runs the authorizer on Lambda.
pub async fn run_lambda() -> Result<(), lambda_runtime::Error> {
    crate::telemetry::init_lambda();
    let live = Live::new(Authorizer::from_env().await?, std::time::Instant::now());
    let live = &live;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<ApiGatewayCustomAuthorizerRequest>| async move {
            live.handle(
                &event.payload,
                now(),
                |url| async move { fetch(&url).await },
            )
            .await
        },
    ))
    .await
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests;
