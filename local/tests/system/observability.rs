//! The request log: one record per request with the route template, tenant, status, latency and
//! the DynamoDB calls it made; never the token or a field value.

use gridline_local::testing::{ALICE, TestApi};
use http::Method;
use serde_json::{Value, json};
use std::time::Instant;

use crate::support::Buffer;

fn records(buffer: &Buffer) -> Vec<Value> {
    let text = buffer.text();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["request_id"].is_string())
        .map(|v| v["fields"].clone())
        .collect()
}

/// The log of this thread's requests from now on, as JSON lines, with the product's own
/// filter at its most verbose (Gridline's spans at trace, the SDK and the HTTP stack at warn).
fn capture() -> (Buffer, tracing::subscriber::DefaultGuard) {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(gridline::telemetry::log_filter("trace"))
            .with_writer(move || writer.clone())
            .finish(),
    );
    (buffer, guard)
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

    let (buffer, _guard) = capture();

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

/// A warm grid instance holds its project's field definitions for a few seconds: the first
/// page reads them (a Query of the project), the next pages do not. A field created after they
/// were read, or built since, sorts at once (a query they refuse is parsed again against a
/// fresh read), and a field deleted is unknown once they are older than the limit.
#[tokio::test]
async fn a_warm_grid_page_reads_no_field_definitions() {
    let held = gridline::http::fields_cache::FieldsCache::MAX_AGE;
    let (api, project) = TestApi::with_project("Held").await;
    let points = api
        .field(&project, json!({"name": "Points", "type": "number"}))
        .await;
    for n in 0..3 {
        api.issue(
            &project,
            json!({"title": format!("i{n}"), "fields": {points.clone(): n}}),
        )
        .await;
    }
    // Points is hot (as after any earlier page sorted by it) and filled, so the page's issues
    // come with its entries; marked on the store, so no grid instance holds the project yet.
    let project_id = gridline::domain::ids::ProjectId::parse(&project).unwrap();
    api.stack
        .state
        .store
        .records()
        .mark_hot(&crate::support::acme(), &project_id, &points)
        .await
        .unwrap();
    api.sync().await;

    let (buffer, _guard) = capture();
    let page = format!("/projects/{project}/issues?sort={points}&limit=2");
    let held_at = Instant::now();
    for _ in 0..2 {
        let got = api.get(&page).await;
        assert_eq!(got.status, 200, "{}", got.body);
        assert_eq!(got.body["items"].as_array().map(Vec::len), Some(2));
    }
    // Each request's record (a request without `x-request-id` logs none of its own).
    let text = buffer.text();
    let logged: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["fields"].clone())
        .filter(|f| f["message"] == "GET /projects/{project_id}/issues")
        .collect();
    let calls: Vec<u64> = logged
        .iter()
        .map(|r| r["dynamodb_calls"].as_u64().unwrap_or(0))
        .collect();
    // The tenant's kind (a new instance reads once whether its tenant is a workspace), the
    // fields, the column (its `open` and `closed` scopes, merged: the page is of every
    // state; the issues' summaries come with the entries) and their people's names (each
    // issue's reporter); then the column and the names only.
    assert_eq!(calls, [5, 3], "{logged:?}");

    // A field created while the held definitions (which lack it) are still served: its grid
    // is answered from a fresh read, 409 while its column is built, never 400.
    let size = api
        .field(&project, json!({"name": "Size", "type": "number"}))
        .await;
    let by_size = format!("/projects/{project}/issues?sort={size}");
    let got = api.get(&by_size).await;
    assert_eq!(got.status, 409, "{}", got.body);
    assert!(held_at.elapsed() < held, "the held definitions had expired");
    // Built now, while the definitions held since (not sortable) are still served: it
    // sorts at once, from a fresh read.
    let held_at = Instant::now();
    api.sync().await;
    let got = api.get(&by_size).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert!(held_at.elapsed() < held, "the held definitions had expired");

    // Deleted: once the held definitions are older than the limit, it is an unknown field.
    assert_eq!(
        api.delete(&format!("/projects/{project}/fields/{points}"))
            .await
            .status,
        204
    );
    api.sync().await;
    tokio::time::sleep(held).await;
    let got = api.get(&page).await;
    assert_eq!(got.status, 400, "{}", got.body);
}

/// A warm grid instance holds a saved view and its project's definitions for a few seconds as
/// well: the first page of a view of open issues reads them (the view's item and the project,
/// at once), the next pages only the view's list and the names.
#[tokio::test]
async fn a_warm_view_page_reads_only_its_list_and_names() {
    let (api, project) = TestApi::with_project("Held view").await;
    for n in 0..3 {
        api.issue(&project, json!({"title": format!("i{n}")})).await;
    }
    let r = api
        .post(
            &format!("/projects/{project}/views"),
            json!({"name": "Open", "state": "open"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let view = r.body["id"].as_str().unwrap().to_string();
    api.sync().await;

    let (buffer, _guard) = capture();
    let held_at = Instant::now();
    for _ in 0..2 {
        let got = api.get(&format!("/views/{view}/issues?limit=2")).await;
        assert_eq!(got.status, 200, "{}", got.body);
        assert_eq!(got.body["items"].as_array().map(Vec::len), Some(2));
    }
    assert!(
        held_at.elapsed() < gridline::http::fields_cache::ViewsCache::MAX_AGE,
        "the held view had expired"
    );
    let calls: Vec<u64> = buffer
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["fields"].clone())
        .filter(|f| f["message"] == "GET /views/{view_id}/issues")
        .map(|r| r["dynamodb_calls"].as_u64().unwrap_or(0))
        .collect();
    // The first page also reads the tenant's kind, once per instance (`access`).
    assert_eq!(calls, [5, 2]);
}
