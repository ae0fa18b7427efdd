//! Lambda's and API Gateway's limits on the local API: timeouts, payload sizes.

use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use gridline_local::gateway::{self, Limits};
use gridline_local::testing::send;
use http::Method;

fn limits(function_timeout_ms: u64, gateway_timeout_ms: u64) -> Limits {
    Limits {
        function_timeout: Duration::from_millis(function_timeout_ms),
        gateway_timeout: Duration::from_millis(gateway_timeout_ms),
        max_request_bytes: 1_000,
        max_response_bytes: 2_000,
    }
}

fn app() -> Router {
    Router::new()
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "late"
            }),
        )
        .route("/big", get(|| async { "x".repeat(2_001) }))
        .route("/fits", get(|| async { "x".repeat(1_800) }))
        // 1,500 bytes of body, but each `"` takes two in the payload that carries it.
        .route("/quotes", get(|| async { "\"".repeat(1_500) }))
        .route(
            "/echo",
            post(|body: String| async move { body.len().to_string() }),
        )
}

#[test]
fn each_function_gets_its_timeout_from_the_template() {
    assert_eq!(
        gateway::function_timeout("IssuesFunction").unwrap(),
        Duration::from_secs(10)
    );
    assert_eq!(
        gateway::function_timeout("IndexerFunction").unwrap(),
        Duration::from_secs(120)
    );
    assert!(gateway::function_timeout("NoSuchFunction").is_err());
}

/// `GET /slow` under `limits` is answered with `status` and a problem body.
async fn slow_is_a_problem(limits: Limits, status: u16) {
    let router = gateway::with_limits(app(), limits);
    let reply = send(router, Method::GET, "/slow", None, None, &[]).await;
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
}

#[tokio::test]
async fn a_function_past_its_timeout_is_a_502_problem() {
    slow_is_a_problem(limits(50, 1_000), 502).await;
}

#[tokio::test]
async fn past_api_gateways_timeout_is_a_504_problem() {
    // A function allowed longer than API Gateway waits.
    slow_is_a_problem(limits(1_000, 50), 504).await;
}

#[tokio::test]
async fn a_response_over_the_payload_limit_is_a_502_and_one_within_it_passes() {
    let router = gateway::with_limits(app(), limits(1_000, 1_000));
    let big = send(router.clone(), Method::GET, "/big", None, None, &[]).await;
    assert_eq!(big.status, 502, "{}", big.text);
    assert_eq!(big.header("content-type"), Some("application/problem+json"));
    let quotes = send(router.clone(), Method::GET, "/quotes", None, None, &[]).await;
    assert_eq!(quotes.status, 502, "{}", quotes.text);
    let fits = send(router, Method::GET, "/fits", None, None, &[]).await;
    assert_eq!(fits.status, 200);
    assert_eq!(fits.text.len(), 1_800);
}

/// Lambda's limit holds the payload that carries the response to API Gateway, as
/// `lambda_http` writes it: a text body as a JSON string, any other base64-encoded.
#[test]
fn the_payload_is_the_proxy_response_lambda_http_writes() {
    let parts = |content_type: &str| {
        let (parts, ()) = http::Response::builder()
            .status(200)
            .header("content-type", content_type)
            .body(())
            .unwrap()
            .into_parts();
        parts
    };
    let json = parts("application/problem+json");
    let payload = r#"{"statusCode":200,"headers":{},"multiValueHeaders":{"content-type":["application/problem+json"]},"body":"{\"a\":\"\\\"\"}","isBase64Encoded":false}"#;
    assert_eq!(
        gateway::lambda_payload_len(&json, br#"{"a":"\""}"#),
        payload.len()
    );
    let binary = parts("application/octet-stream");
    let payload = r#"{"statusCode":200,"headers":{},"multiValueHeaders":{"content-type":["application/octet-stream"]},"body":"AAEC","isBase64Encoded":true}"#;
    assert_eq!(
        gateway::lambda_payload_len(&binary, &[0, 1, 2]),
        payload.len()
    );
}

#[tokio::test]
async fn a_request_over_the_payload_limit_is_a_413_problem() {
    let router = gateway::with_limits(app(), limits(1_000, 1_000));
    let over = "y".repeat(1_001);
    let reply = send(
        router.clone(),
        Method::POST,
        "/echo",
        None,
        Some(&over),
        &[],
    )
    .await;
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
    let at = "y".repeat(1_000);
    let reply = send(router, Method::POST, "/echo", None, Some(&at), &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text, "1000");
}

#[test]
fn the_real_limits_are_api_gateways_and_lambdas() {
    let l = Limits::of("GridFunction").unwrap();
    assert_eq!(l.gateway_timeout, Duration::from_secs(29));
    assert_eq!(l.max_request_bytes, 10 * 1024 * 1024);
    assert_eq!(l.max_response_bytes, 6 * 1024 * 1024);
}
