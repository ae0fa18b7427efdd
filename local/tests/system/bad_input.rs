//! Bad input: each case gets a clear 400 or 413 problem and writes nothing.

use gridline_local::testing::TestApi;
use http::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn bad_requests_are_rejected_with_a_problem_and_write_nothing() {
    let (api, p) = TestApi::with_project("p").await;
    let text = api.field(&p, json!({"name": "t", "type": "text"})).await;
    let num = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let date = api.field(&p, json!({"name": "d", "type": "date"})).await;
    let dt = api
        .field(&p, json!({"name": "dt", "type": "datetime"}))
        .await;
    let sel = api
        .field(
            &p,
            json!({"name": "s", "type": "select", "options": ["a", "b"]}),
        )
        .await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let i = issue["id"].as_str().unwrap().to_string();
    let issues = format!("/projects/{p}/issues");
    let fields = format!("/projects/{p}/fields");
    let patch = format!("/issues/{i}");
    let long_title = "x".repeat(257);
    let long_text = "y".repeat(1025);
    let long_description = "z".repeat(100_001);
    let huge = "w".repeat(3 * 1024 * 1024);

    let cases: Vec<(&str, Method, &str, String, StatusCode)> = vec![
        ("malformed JSON", Method::POST, "/projects", "{\"name\":".into(), StatusCode::BAD_REQUEST),
        ("not an object", Method::POST, "/projects", "[]".into(), StatusCode::BAD_REQUEST),
        ("trailing garbage", Method::POST, "/projects", r#"{"name":"a"} x"#.into(), StatusCode::BAD_REQUEST),
        ("empty body", Method::POST, "/projects", "".into(), StatusCode::BAD_REQUEST),
        ("name wrong type", Method::POST, "/projects", r#"{"name":5}"#.into(), StatusCode::BAD_REQUEST),
        ("empty name", Method::POST, "/projects", r#"{"name":""}"#.into(), StatusCode::BAD_REQUEST),
        ("unknown member", Method::POST, "/projects", r#"{"name":"a","owner":"b"}"#.into(), StatusCode::BAD_REQUEST),
        ("control character", Method::POST, "/projects", r#"{"name":"a\u0007"}"#.into(), StatusCode::BAD_REQUEST),
        ("unknown field type", Method::POST, &fields, r#"{"name":"a","type":"money"}"#.into(), StatusCode::BAD_REQUEST),
        ("select without options", Method::POST, &fields, r#"{"name":"a","type":"select"}"#.into(), StatusCode::BAD_REQUEST),
        ("duplicate options", Method::POST, &fields, r#"{"name":"a","type":"select","options":["x","x"]}"#.into(), StatusCode::BAD_REQUEST),
        ("options on text", Method::POST, &fields, r#"{"name":"a","type":"text","options":["x"]}"#.into(), StatusCode::BAD_REQUEST),
        ("missing title", Method::POST, &issues, r#"{}"#.into(), StatusCode::BAD_REQUEST),
        ("title too long", Method::POST, &issues, format!(r#"{{"title":"{long_title}"}}"#), StatusCode::BAD_REQUEST),
        ("bad state", Method::POST, &issues, r#"{"title":"t","state":"done"}"#.into(), StatusCode::BAD_REQUEST),
        ("description too long", Method::POST, &issues, format!(r#"{{"title":"t","description":"{long_description}"}}"#), StatusCode::BAD_REQUEST),
        ("text too long", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{text}":"{long_text}"}}}}"#), StatusCode::BAD_REQUEST),
        ("text control char", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{text}":"a\nb"}}}}"#), StatusCode::BAD_REQUEST),
        ("number as bool", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{num}":true}}}}"#), StatusCode::BAD_REQUEST),
        ("number too big", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{num}":1E+126}}}}"#), StatusCode::BAD_REQUEST),
        ("number too small", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{num}":1E-131}}}}"#), StatusCode::BAD_REQUEST),
        ("number too precise", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{num}":1.00000000000000000000000000000000000001}}}}"#), StatusCode::BAD_REQUEST),
        ("number string not a number", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{num}":"12abc"}}}}"#), StatusCode::BAD_REQUEST),
        ("impossible date", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{date}":"2023-02-30"}}}}"#), StatusCode::BAD_REQUEST),
        ("datetime without offset", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{dt}":"2026-11-21T10:00:00"}}}}"#), StatusCode::BAD_REQUEST),
        ("select not an option", Method::POST, &issues, format!(r#"{{"title":"t","fields":{{"{sel}":"c"}}}}"#), StatusCode::BAD_REQUEST),
        ("field of no project", Method::POST, &issues, r#"{"title":"t","fields":{"01ARZ3NDEKTSV4RRFFQ69G5FAV":1}}"#.into(), StatusCode::BAD_REQUEST),
        ("bad participant kind", Method::POST, &issues, r#"{"title":"t","participants":[{"kind":"robot","id":"x","role":"watcher"}]}"#.into(), StatusCode::BAD_REQUEST),
        ("bad participant role", Method::POST, &issues, r#"{"title":"t","participants":[{"kind":"user","id":"x","role":"boss"}]}"#.into(), StatusCode::BAD_REQUEST),
        ("participant listed twice", Method::POST, &issues, r#"{"title":"t","participants":[{"kind":"user","id":"x","role":"watcher"},{"kind":"user","id":"x","role":"assignee"}]}"#.into(), StatusCode::BAD_REQUEST),
        ("body over the limit", Method::POST, &issues, format!(r#"{{"title":"t","description":"{huge}"}}"#), StatusCode::PAYLOAD_TOO_LARGE),
        ("title removed", Method::PATCH, &patch, r#"{"title":null}"#.into(), StatusCode::BAD_REQUEST),
        ("patch unknown member", Method::PATCH, &patch, r#"{"num":7}"#.into(), StatusCode::BAD_REQUEST),
        ("patch wrong type", Method::PATCH, &patch, format!(r#"{{"fields":{{"{num}":"x"}}}}"#), StatusCode::BAD_REQUEST),
        ("patch malformed", Method::PATCH, &patch, "{".into(), StatusCode::BAD_REQUEST),
    ];

    let token = TestApi::token("alice", "acme");
    let before = api.records_snapshot().await;
    for (name, method, path, body, expected) in cases {
        let r = api.send(method, path, Some(&token), Some(&body), &[]).await;
        assert_eq!(r.status, expected, "{name}: {:?}", r.body);
        assert_eq!(
            r.header("content-type"),
            Some("application/problem+json"),
            "{name}"
        );
        assert_eq!(r.body["status"], expected.as_u16(), "{name}");
        assert!(
            r.body["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{name}"
        );
        assert!(
            r.body["type"].as_str().is_some() && r.body["title"].as_str().is_some(),
            "{name}"
        );
    }
    assert_eq!(
        api.records_snapshot().await,
        before,
        "a rejected request wrote something"
    );
}

#[tokio::test]
async fn an_issue_too_large_for_one_item_is_413() {
    let (api, p) = TestApi::with_project("p").await;
    let mut values = serde_json::Map::new();
    for i in 0..400 {
        let f = api
            .field(&p, json!({"name": format!("f{i}"), "type": "text"}))
            .await;
        values.insert(f, json!("é".repeat(1024)));
    }
    let before = api.record_count().await;
    let r = api
        .call(
            ("alice", "acme"),
            Method::POST,
            &format!("/projects/{p}/issues"),
            Some(json!({"title": "t", "fields": values})),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{:?}", r.body);
    assert_eq!(api.record_count().await, before);
}

#[tokio::test]
async fn validation_errors_name_each_invalid_member() {
    let (api, p) = TestApi::with_project("p").await;
    let r = api
        .call(
            ("alice", "acme"),
            Method::POST,
            &format!("/projects/{p}/issues"),
            Some(json!({"title": "", "fields": {"nope": 1}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let fields: Vec<&str> = r.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["title", "fields.nope"]);
}

/// Path ids and list parameters answer in the contract's order: no token is `401` whatever
/// else is wrong; a segment that does not decode is `400`; an id the server never issued is
/// `404` for what the path names.
#[tokio::test]
async fn bad_path_ids_and_list_parameters_answer_in_order() {
    let (api, _) = TestApi::with_project("p").await;
    let anonymous = api
        .send(Method::GET, "/projects?limit=0", None, None, &[])
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        api.get("/projects?limit=0").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(api.get("/issues/%FF").await.status, StatusCode::BAD_REQUEST);
    let unknown = api.get("/issues/not-an-id").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(
        unknown.body["detail"], "issue not found",
        "{:?}",
        unknown.body
    );
    assert_eq!(
        api.get("/teams/not-an-id").await.status,
        StatusCode::NOT_FOUND
    );
}
