//! Lambda's and API Gateway's limits on the local API, so a request that would fail behind API
//! Gateway fails here too: each function's `Timeout` from the template (Lambda stops the
//! invocation; API Gateway answers `502`), API Gateway's 29-second integration timeout
//! (`504`), Lambda's 6 MB response payload (`502`; measured as the proxy response that
//! carries the body, see [`lambda_payload_len`]) and API Gateway's 10 MB request payload
//! (`413`). Every answer is problem+json, as the template's gateway responses make them.

use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use gridline::http::error::problem_response;
use serde_yaml_ng::Value;

/// API Gateway REST's maximum integration timeout.
pub const API_GATEWAY_TIMEOUT: Duration = Duration::from_secs(29);
/// API Gateway REST's request payload limit.
pub const MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;
/// Lambda's synchronous response payload limit (6 MB).
pub const MAX_RESPONSE_BYTES: usize = 6 * 1024 * 1024;

/// What the local API enforces around one function's routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The function's `Timeout`.
    pub function_timeout: Duration,
    /// API Gateway's integration timeout.
    pub gateway_timeout: Duration,
    pub max_request_bytes: usize,
    /// The most the Lambda response payload may take ([`lambda_payload_len`]).
    pub max_response_bytes: usize,
}

impl Limits {
    /// The limits of `function_logical_id` as the template deploys it.
    pub fn of(function_logical_id: &str) -> Result<Self> {
        Ok(Self {
            function_timeout: function_timeout(function_logical_id)?,
            gateway_timeout: API_GATEWAY_TIMEOUT,
            max_request_bytes: MAX_REQUEST_BYTES,
            max_response_bytes: MAX_RESPONSE_BYTES,
        })
    }
}

/// A function's `Timeout` from `template.yaml`: its own, or the `Globals` one.
pub fn function_timeout(function_logical_id: &str) -> Result<Duration> {
    let doc: Value =
        serde_yaml_ng::from_str(crate::template::TEMPLATE).context("template.yaml is not YAML")?;
    let own = doc["Resources"][function_logical_id]["Properties"]["Timeout"].as_u64();
    let global = doc["Globals"]["Function"]["Timeout"].as_u64();
    // Lambda's default when neither says.
    let secs = own.or(global).unwrap_or(3);
    anyhow::ensure!(
        doc["Resources"][function_logical_id].is_mapping(),
        "no function {function_logical_id} in template.yaml"
    );
    Ok(Duration::from_secs(secs))
}

/// A function's environment variable `name` as the template deploys it by default: its own
/// `Environment` or the `Globals` one, a `!Ref` to a parameter read as that parameter's
/// `Default` (the local stack takes no parameter overrides). `None` when neither sets it, or
/// when it is another intrinsic (`!Sub`, `!If`): the caller's default applies.
pub fn function_env(function_logical_id: &str, name: &str) -> Result<Option<String>> {
    let doc: Value =
        serde_yaml_ng::from_str(crate::template::TEMPLATE).context("template.yaml is not YAML")?;
    let own =
        &doc["Resources"][function_logical_id]["Properties"]["Environment"]["Variables"][name];
    let global = &doc["Globals"]["Function"]["Environment"]["Variables"][name];
    let value = if own.is_null() { global } else { own };
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    Ok(match value {
        Value::Tagged(t) if t.tag == "Ref" => t
            .value
            .as_str()
            .and_then(|p| scalar(&doc["Parameters"][p]["Default"])),
        other => scalar(other),
    })
}

/// Wraps one function's routes with the limits Lambda and API Gateway put on it. A function
/// the template does not know keeps Lambda's defaults (3 s), which no route should rely on.
pub fn lambda_limits(router: Router, function_logical_id: &str) -> Router {
    let limits = Limits::of(function_logical_id).unwrap_or(Limits {
        function_timeout: Duration::from_secs(3),
        gateway_timeout: API_GATEWAY_TIMEOUT,
        max_request_bytes: MAX_REQUEST_BYTES,
        max_response_bytes: MAX_RESPONSE_BYTES,
    });
    with_limits(router, limits)
}

/// Wraps `router` with `limits`.
pub fn with_limits(router: Router, limits: Limits) -> Router {
    router.layer(axum::middleware::from_fn(
        move |req: Request<Body>, next: Next| enforce(limits, req, next),
    ))
}

fn problem(status: StatusCode, slug: &str, detail: &str) -> Response {
    problem_response(status, slug, detail.to_string(), None)
}

async fn enforce(limits: Limits, req: Request<Body>, next: Next) -> Response {
    let origin = req.headers().get(header::ORIGIN).cloned();
    let mut response = answer(limits, req, next).await;
    // API Gateway's own answers carry the CORS headers the template's gateway responses give
    // them (the request's origin, reflected), so a page can read why it failed.
    if let Some(origin) = origin
        && response
            .headers()
            .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .is_none()
        && (response.status().is_client_error() || response.status().is_server_error())
    {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.append(header::VARY, header::HeaderValue::from_static("Origin"));
    }
    response
}

async fn answer(limits: Limits, req: Request<Body>, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limits.max_request_bytes) {
        return too_large();
    }
    // A body without a length (chunked) is measured before the function sees it, as API
    // Gateway buffers the whole request.
    let (parts, body) = req.into_parts();
    let Ok(bytes) = to_bytes(body, limits.max_request_bytes).await else {
        return too_large();
    };
    let req = Request::from_parts(parts, Body::from(bytes));

    // Lambda stops the invocation at its timeout; API Gateway gives up at its own. Whichever
    // comes first decides the answer. Dropping the future is the stop: nothing after it runs.
    let cut = limits.function_timeout.min(limits.gateway_timeout);
    let response = match tokio::time::timeout(cut, next.run(req)).await {
        Ok(response) => response,
        Err(_) if limits.function_timeout <= limits.gateway_timeout => {
            tracing::warn!(timeout_s = cut.as_secs_f64(), "the function timed out");
            return problem(
                StatusCode::BAD_GATEWAY,
                "bad-gateway",
                "the function did not answer within its timeout",
            );
        }
        Err(_) => {
            return problem(
                StatusCode::GATEWAY_TIMEOUT,
                "gateway-timeout",
                "the integration did not answer within API Gateway's 29 seconds",
            );
        }
    };

    // Lambda refuses a response over its payload limit; API Gateway then answers 502. The
    // limit holds the whole payload, which is never smaller than the body.
    let (parts, body) = response.into_parts();
    match to_bytes(body, limits.max_response_bytes).await {
        Ok(bytes) if lambda_payload_len(&parts, &bytes) <= limits.max_response_bytes => {
            Response::from_parts(parts, Body::from(bytes))
        }
        _ => {
            tracing::warn!("the function's response exceeded Lambda's 6 MB payload limit");
            problem(
                StatusCode::BAD_GATEWAY,
                "bad-gateway",
                "the function's response exceeded Lambda's payload limit",
            )
        }
    }
}

/// The size of the Lambda response payload that carries this response to API Gateway (REST),
/// which is what Lambda's 6 MB limit holds: the proxy response as `lambda_http` writes it, the
/// headers in `multiValueHeaders` and the body as a JSON string when its type is text (so every
/// `"` and `\` of a JSON body takes two bytes), base64-encoded otherwise.
pub fn lambda_payload_len(parts: &http::response::Parts, body: &[u8]) -> usize {
    use aws_lambda_events::apigw::ApiGatewayProxyResponse;
    use aws_lambda_events::encodings::Body as Payload;
    let text = is_text(&parts.headers)
        .then(|| std::str::from_utf8(body).ok())
        .flatten();
    let mut response = ApiGatewayProxyResponse::default();
    response.status_code = i64::from(parts.status.as_u16());
    response.multi_value_headers = parts.headers.clone();
    response.is_base64_encoded = !body.is_empty() && text.is_none();
    response.body = match text {
        _ if body.is_empty() => None,
        Some(text) => Some(Payload::Text(text.to_string())),
        None => Some(Payload::Binary(body.to_vec())),
    };
    serde_json::to_vec(&response).map_or(usize::MAX, |json| json.len())
}

/// Whether `lambda_http` sends a body of these headers as text (otherwise base64): no
/// `Content-Encoding`, and no `Content-Type` or a textual one.
fn is_text(headers: &http::HeaderMap) -> bool {
    if headers.contains_key(header::CONTENT_ENCODING) {
        return false;
    }
    let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
        return true;
    };
    let content_type = content_type.to_str().unwrap_or_default();
    let mime = content_type.split(';').next().unwrap_or_default().trim();
    let prefixes = [
        "text",
        "application/json",
        "application/javascript",
        "application/xml",
        "application/yaml",
    ];
    prefixes.iter().any(|p| content_type.starts_with(p))
        || ["+xml", "+yaml", "+json"].iter().any(|s| mime.ends_with(s))
}

fn too_large() -> Response {
    problem(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload-too-large",
        "the request exceeds API Gateway's 10 MB payload limit",
    )
}
