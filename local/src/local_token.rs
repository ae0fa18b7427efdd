//! Local tokens as Cognito would issue them: `POST /local/token` on the local stack (not part
//! of the API; `make token` and a browser's dev sign-in call it). A token without a given
//! tenant gets the one the pre token generation trigger would set (`gridline::token_trigger`,
//! run here as TokenTriggerFunction, under its policy), so sign-up → workspace → new token
//! works on `make dev` as in AWS.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use gridline::auth::{Claims, mint_claims};
use gridline::domain::ids::{TenantId, UserId};
use gridline::http::error::problem_response;
use gridline::store::Store;
use serde::Deserialize;

/// The route's path on the local stack.
pub const PATH: &str = "/local/token";
/// The template's logical id of the trigger, whose policy the local run is held to.
pub const TRIGGER_FUNCTION: &str = "TokenTriggerFunction";
/// How long a local token lives, as Cognito's ID tokens do by default.
pub const TTL_SECS: i64 = 3600;

/// What to mint: the user (`sub`), and optionally a tenant (as an operator's attribute would
/// give), an email and whether it is verified (as Cognito's sign-up confirmation would).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub user: String,
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub email_verified: bool,
}

/// Mints `request`'s token: its own tenant when given, else the trigger's.
pub async fn mint(store: &Store, secret: &[u8], request: TokenRequest) -> anyhow::Result<String> {
    let user = UserId::parse(&request.user)
        .ok_or_else(|| anyhow::anyhow!("user must be 1-128 printable characters without '#'"))?;
    let tenant = match request.tenant.filter(|t| !t.is_empty()) {
        Some(t) => Some(TenantId::parse(&t).ok_or_else(|| {
            anyhow::anyhow!("tenant must be 1-128 printable characters without '#'")
        })?),
        None => gridline::token_trigger::tenant_for(store, &user).await?,
    };
    let claims = Claims {
        sub: user.to_string(),
        tenant: tenant.map(|t| t.to_string()),
        email: request.email.filter(|e| !e.is_empty()),
        email_verified: Some(request.email_verified),
        ..Claims::default()
    };
    Ok(mint_claims(claims, secret, TTL_SECS))
}

/// What the route needs: the trigger's store and the local secret.
#[derive(Clone)]
pub struct Minter {
    pub store: Store,
    pub secret: Vec<u8>,
    /// The API's allowed origins: the console's dev sign-in calls this route from a browser.
    pub cors: gridline::http::cors::Cors,
}

/// The route: `{"token"}`, or a problem document; preflights answered as the API's are.
pub fn router(minter: Minter) -> axum::Router {
    let cors = minter.cors.clone();
    axum::Router::new()
        .route(PATH, axum::routing::post(handle))
        .layer(axum::middleware::from_fn(move |req, next| {
            gridline::http::cors::layer(cors.clone(), req, next)
        }))
        .with_state(minter)
}

async fn handle(State(minter): State<Minter>, body: axum::body::Bytes) -> Response {
    let request: TokenRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return problem_response(StatusCode::BAD_REQUEST, "bad-request", e.to_string(), None);
        }
    };
    match mint(&minter.store, &minter.secret, request).await {
        Ok(token) => Json(serde_json::json!({ "token": token })).into_response(),
        Err(e) => problem_response(
            StatusCode::BAD_REQUEST,
            "bad-request",
            format!("{e:#}"),
            None,
        ),
    }
}

/// Asks the local stack at `api` (`make dev`) for a token: what `make token` does without a
/// tenant.
pub async fn request(api: &str, body: &serde_json::Value) -> anyhow::Result<String> {
    use anyhow::Context;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    let client: Client<_, Full<axum::body::Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let request = http::Request::post(format!("{}{PATH}", api.trim_end_matches('/')))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body.to_string().into()))?;
    let response = client
        .request(request)
        .await
        .with_context(|| format!("is the local stack running at {api}? (make dev)"))?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    anyhow::ensure!(status.is_success(), "{status}: {}", answer["detail"]);
    answer["token"]
        .as_str()
        .map(str::to_string)
        .context("the local stack answered without a token")
}
