//! Tenant isolation: another tenant's ids behave exactly like ids that do not exist.

use gridline_local::testing::TestApi;
use http::{Method, StatusCode};
use serde_json::json;

const MALLORY: (&str, &str) = ("mallory", "evilcorp");
/// Same user id, other tenant: the tenant, not the user, scopes the data.
const ALICE_ELSEWHERE: (&str, &str) = ("alice", "evilcorp");

#[tokio::test]
async fn another_tenants_resources_are_not_found_and_untouched() {
    let (api, p) = TestApi::with_project("secret").await;
    let f = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let issue = api
        .issue(&p, json!({"title": "t", "description": "d"}))
        .await;
    let i = issue["id"].as_str().unwrap();
    let before = api.records_snapshot().await;

    for who in [MALLORY, ALICE_ELSEWHERE] {
        let cases = [
            (Method::GET, format!("/projects/{p}"), None),
            (Method::GET, format!("/projects/{p}/fields"), None),
            (
                Method::POST,
                format!("/projects/{p}/fields"),
                Some(json!({"name": "x", "type": "text"})),
            ),
            (Method::DELETE, format!("/projects/{p}/fields/{f}"), None),
            (
                Method::POST,
                format!("/projects/{p}/issues"),
                Some(json!({"title": "x"})),
            ),
            (Method::GET, format!("/issues/{i}"), None),
            (
                Method::PATCH,
                format!("/issues/{i}"),
                Some(json!({"title": "x"})),
            ),
            (Method::DELETE, format!("/issues/{i}"), None),
        ];
        for (method, path, body) in cases {
            let r = api.call(who, method.clone(), &path, body.clone()).await;
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{method} {path}");
            // The same answer as for an id that never existed.
            let missing = path
                .replace(&p, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
                .replace(i, "01ARZ3NDEKTSV4RRFFQ69G5FAV");
            let r2 = api.call(who, method.clone(), &missing, body).await;
            assert_eq!(r.body["detail"], r2.body["detail"], "{method} {path}");
        }
        let r = api.call(who, Method::GET, "/projects", None).await;
        assert_eq!(r.body["items"], json!([]));
    }
    assert_eq!(api.records_snapshot().await, before);
}

#[tokio::test]
async fn a_cursor_from_another_tenant_is_rejected() {
    let api = TestApi::start().await;
    for name in ["a", "b", "c"] {
        api.project(name).await;
    }
    let r = api.get("/projects?limit=1").await;
    let cursor = r.body["next_cursor"].as_str().unwrap();
    let r = api
        .call(
            MALLORY,
            Method::GET,
            &format!("/projects?cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["errors"][0]["field"], "cursor");
}
