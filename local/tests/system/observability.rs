//! The request log: one record per request with the route template, tenant, status, latency and
//! the DynamoDB calls it made; never the token or a field value.

use gridline_local::testing::{ALICE, TestApi};
use http::Method;
use serde_json::{Value, json};

use crate::support::Buffer;

fn records(buffer: &Buffer) -> Vec<Value> {
    let text = buffer.text();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["request_id"].is_string())
        .map(|v| v["fields"].clone())
        .collect()
}

#[tokio::test]
async fn each_request_logs_its_route_tenant_and_calls_and_no_secrets() {
    let (api, project) = TestApi::with_project("Observed").await;
    let field = api
        .field(&project, json!({"name": "Secret", "type": "text"}))
        .await;
    let issue = api
        .issue(
            &project,
            json!({"title": "t", "fields": {field.clone(): "hush-value"}}),
        )
        .await;
    let issue_id = issue["id"].as_str().unwrap().to_string();

    let buffer = Buffer::default();
    let writer = buffer.clone();
    // The product's own filter at its most verbose: Gridline's spans at trace, the SDK and
    // the HTTP stack at warn.
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(gridline::telemetry::log_filter("trace"))
            .with_writer(move || writer.clone())
            .finish(),
    );

    let token = TestApi::token(ALICE.0, ALICE.1);
    let got = api
        .send_as_alice(
            Method::GET,
            &format!("/issues/{issue_id}"),
            None,
            &[("x-request-id", "req-123")],
        )
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.header("x-request-id"), Some("req-123"));
    let patched = api
        .send_as_alice(
            Method::PATCH,
            &format!("/issues/{issue_id}"),
            Some(&json!({"fields": {field.clone(): "another-hush"}}).to_string()),
            &[],
        )
        .await;
    assert_eq!(patched.status, 200);
    let missing = api.send(Method::GET, "/projects", None, None, &[]).await;
    assert_eq!(missing.status, 401);

    let logged = records(&buffer);
    assert_eq!(logged.len(), 3, "{logged:?}");
    let get = &logged[0];
    assert_eq!(get["request_id"], "req-123");
    assert_eq!(get["message"], "GET /issues/{issue_id}");
    assert_eq!(get["tenant"], "acme");
    assert_eq!(get["status"], 200);
    // The issue and its description in one Query, plus the project's fields.
    assert_eq!(get["dynamodb_calls"], 2, "{get}");
    assert!(logged[1]["dynamodb_calls"].as_u64().unwrap() >= 2);
    assert_eq!(logged[2]["status"], 401);
    assert_eq!(logged[2]["tenant"], "-");
    assert_eq!(logged[2]["dynamodb_calls"], 0);

    let all = buffer.text();
    assert!(!all.contains(&token), "the token reached the log");
    assert!(!all.contains("hush"), "a field value reached the log");
    assert!(!all.contains(&issue_id), "a concrete path reached the log");
}
