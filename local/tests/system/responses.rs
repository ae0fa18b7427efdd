//! Responses within Lambda's limit: list pages of issues near DynamoDB's 400 KB end early at
//! their byte budget (every page `200`, every issue once), and a problem about a body of 2 MB
//! of unknown members is small. Through the local stack, whose gateway answers `502` where
//! Lambda would refuse the response.

use std::collections::BTreeMap;

use gridline::http::error::{MAX_ECHOED_FIELD_BYTES, MAX_PROBLEM_ERRORS};
use gridline::http::page::PAGE_BUDGET_BYTES;
use gridline_local::gateway::{MAX_RESPONSE_BYTES, lambda_payload_len};
use gridline_local::testing::{Reply, TestApi};
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// Text fields per issue, each holding 1,024 characters: half `"`, half U+1D11E (four bytes).
const FIELDS: usize = 140;
/// Issues in the project: their summaries take far more than one response can carry.
const ISSUES: usize = 16;

/// A field's value: 1,024 characters, 2,560 bytes stored; on the wire every `"` takes four
/// bytes (escaped when rendered, and both bytes escaped again in the proxy response).
fn big_value(i: usize) -> String {
    let mut value = format!("{i:04}");
    for n in 4..1024 {
        value.push(if n % 2 == 0 { '"' } else { '𝄞' });
    }
    value
}

/// The Lambda response payload that carried `reply`.
fn payload_of(reply: &Reply) -> usize {
    let mut builder = http::Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        builder = builder.header(name, value);
    }
    let (parts, ()) = builder.body(()).unwrap().into_parts();
    lambda_payload_len(&parts, reply.text.as_bytes())
}

/// Follows `path`'s cursors to the end: every item's id in order, and each page's item count.
async fn page_through(api: &TestApi, path: &str) -> (Vec<String>, Vec<usize>) {
    let (mut ids, mut pages) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            Some(c) => format!("{path}{sep}cursor={c}"),
            None => path.to_string(),
        };
        let r = api.get(&url).await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "{url}: {}",
            &r.text[..r.text.len().min(500)]
        );
        let payload = payload_of(&r);
        assert!(
            payload < MAX_RESPONSE_BYTES,
            "{url}: a payload of {payload} bytes"
        );
        assert!(
            payload < PAGE_BUDGET_BYTES + 64 * 1024,
            "{url}: {payload} bytes"
        );
        let items = r.body["items"].as_array().unwrap();
        pages.push(items.len());
        ids.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (ids, pages),
        }
    }
    panic!("{path}: paging did not end")
}

/// Every issue exactly once across the pages, and the budget, not the count, ended them.
fn exactly_once(path: &str, (ids, pages): (Vec<String>, Vec<usize>), expected: &[String]) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &ids {
        *seen.entry(id).or_default() += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "{path}: an issue twice");
    let mut want: Vec<&str> = expected.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), want, "{path}");
    assert!(pages.len() >= 3, "{path}: pages of {pages:?}");
    assert!(pages.iter().all(|&n| n >= 1), "{path}: pages of {pages:?}");
}

#[tokio::test]
async fn pages_of_issues_near_the_item_limit_end_at_the_byte_budget() {
    let (api, p) = TestApi::with_project("big").await;
    let team = api.team("wide").await;
    assert_eq!(api.join(&team, "alice").await, StatusCode::NO_CONTENT);
    let mut fields = Vec::new();
    for i in 0..FIELDS {
        fields.push(
            api.field(&p, json!({"name": format!("t{i}"), "type": "text"}))
                .await,
        );
    }
    let mut ids = Vec::new();
    for n in 0..ISSUES {
        let values: serde_json::Map<String, Value> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.clone(), json!(big_value(n * FIELDS + i))))
            .collect();
        let body = json!({
            "title": format!("big {n}"),
            "fields": values,
            "participants": [{"kind": "team", "id": team, "role": "watcher"}],
        });
        let r = api.post_issue(&p, body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        ids.push(r.body["id"].as_str().unwrap().to_string());
    }
    api.sync().await;
    // Each issue is near DynamoDB's 400 KB item, and its summary takes more on the wire.
    let one = api.get(&format!("/issues/{}", ids[0])).await;
    assert!(one.text.len() > 350_000, "{} bytes", one.text.len());
    for path in [
        format!("/projects/{p}/issues"),
        format!(
            "/projects/{p}/issues?sort={}&order=desc&limit=100",
            fields[0]
        ),
        "/me/issues".to_string(),
        format!("/teams/{team}/issues"),
        "/me/teams/issues".to_string(),
    ] {
        let paged = page_through(&api, &path).await;
        exactly_once(&path, paged, &ids);
    }
    // With a small limit the count ends pages before the budget does.
    let (_, pages) = page_through(&api, &format!("/projects/{p}/issues?limit=3")).await;
    assert_eq!(pages, [3, 3, 3, 3, 3, 1]);
}

/// `{"title":"t","fields":{...}}` of `n`-byte unknown field ids, up to 2 MB.
fn unknown_fields_body(max: usize) -> (String, usize) {
    let mut body = String::from(r#"{"title":"t","fields":{"#);
    let mut count = 0;
    loop {
        let member = format!(r#""{count:026}":1"#);
        if body.len() + member.len() + 3 > max {
            break;
        }
        if count > 0 {
            body.push(',');
        }
        body.push_str(&member);
        count += 1;
    }
    body.push_str("}}");
    (body, count)
}

/// A `400` problem that is small and lists at most the cap.
fn small_problem(r: &Reply) -> &Vec<Value> {
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "{}",
        &r.text[..r.text.len().min(500)]
    );
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(
        r.text.len() < 64 * 1024,
        "a problem of {} bytes",
        r.text.len()
    );
    let errors = r.body["errors"].as_array().expect("errors");
    assert!(errors.len() <= MAX_PROBLEM_ERRORS);
    errors
}

#[tokio::test]
async fn a_body_of_2_mb_of_unknown_members_is_a_small_400() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let i = issue["id"].as_str().unwrap();
    let max = gridline::http::MAX_BODY_BYTES;
    let (body, count) = unknown_fields_body(max);
    assert!(body.len() > max - 64 && body.len() <= max);
    let before = api.records_snapshot().await;
    for (method, path) in [
        (Method::POST, format!("/projects/{p}/issues")),
        (Method::PATCH, format!("/issues/{i}")),
    ] {
        let r = api
            .send_as_alice(method.clone(), &path, Some(&body), &[])
            .await;
        let errors = small_problem(&r);
        assert_eq!(errors.len(), MAX_PROBLEM_ERRORS, "{method} {path}");
        assert_eq!(r.body["errors_omitted"], count - MAX_PROBLEM_ERRORS);
        assert_eq!(
            r.body["detail"],
            format!("{count} members of the request are invalid")
        );
        assert_eq!(errors[0]["field"], format!("fields.{:026}", 0));
    }
    // A member name of 1 MB is echoed clipped, at the top level and among the fields.
    let long = "m".repeat(1024 * 1024);
    for (method, path, body) in [
        (
            Method::POST,
            format!("/projects/{p}/issues"),
            format!(r#"{{"title":"t","{long}":1}}"#),
        ),
        (
            Method::POST,
            format!("/projects/{p}/issues"),
            format!(r#"{{"title":"t","fields":{{"{long}":1}}}}"#),
        ),
        (
            Method::POST,
            "/projects".into(),
            format!(r#"{{"{long}":1}}"#),
        ),
        (
            Method::PATCH,
            format!("/issues/{i}"),
            format!(r#"{{"{long}":1}}"#),
        ),
    ] {
        let r = api.send_as_alice(method, &path, Some(&body), &[]).await;
        let errors = small_problem(&r);
        assert_eq!(errors.len(), 1, "{path}");
        assert!(errors[0]["field"].as_str().unwrap().len() <= MAX_ECHOED_FIELD_BYTES);
        assert!(r.body.get("errors_omitted").is_none());
        assert!(r.text.len() < 4 * 1024, "{path}: {} bytes", r.text.len());
    }
    assert_eq!(
        api.records_snapshot().await,
        before,
        "a rejected request writes nothing"
    );
}
