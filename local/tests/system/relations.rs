//! Relations between issues: both sides in one transaction, the inverse on the far side,
//! one relation per pair, at most 100 per issue under concurrency, cleaned from the other
//! issues when one is deleted — through the real handlers, the IAM guard and the stream.

use http::{Method, StatusCode};
use serde_json::{Value, json};

use gridline_local::testing::TestApi;

async fn issues(api: &TestApi, p: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let issue = api.issue(p, json!({"title": format!("issue {i}")})).await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    ids
}

fn relate_path(a: &str, kind: &str, b: &str) -> String {
    format!("/issues/{a}/relations/{kind}/{b}")
}

/// `(kind, other id, other title)` of an issue's relations as `GET` shows them, and its
/// version.
async fn relations(api: &TestApi, id: &str) -> (Vec<(String, String, String)>, u64) {
    let r = api.get(&format!("/issues/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let list = r.body["relations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let s = |v: &Value| v.as_str().unwrap().to_string();
            (s(&x["kind"]), s(&x["issue"]["id"]), s(&x["issue"]["title"]))
        })
        .collect();
    (list, r.body["version"].as_u64().unwrap())
}

#[tokio::test]
async fn a_relation_shows_on_both_sides_at_once_and_a_pair_has_one() {
    let (api, p) = TestApi::with_project("p").await;
    let ids = issues(&api, &p, 2).await;
    let (a, b) = (&ids[0], &ids[1]);
    let r = api.put(&relate_path(a, "blocks", b), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let (on_a, va) = relations(&api, a).await;
    let (on_b, vb) = relations(&api, b).await;
    assert_eq!(on_a, vec![("blocks".into(), b.clone(), "issue 1".into())]);
    assert_eq!(
        on_b,
        vec![("blocked_by".into(), a.clone(), "issue 0".into())]
    );
    assert_eq!(
        (va, vb),
        (2, 2),
        "a relation is an issue change on both sides"
    );

    // The same relation again changes nothing.
    let r = api.put(&relate_path(a, "blocks", b), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(relations(&api, a).await.1, 2);

    // Another kind replaces it on both sides; the title shown is the other issue's now.
    let renamed = api
        .patch(&format!("/issues/{a}"), json!({"title": "renamed"}))
        .await;
    assert_eq!(renamed.status, StatusCode::OK);
    let r = api.put(&relate_path(b, "duplicates", a), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let (on_a, _) = relations(&api, a).await;
    let (on_b, _) = relations(&api, b).await;
    assert_eq!(
        on_a,
        vec![("duplicated_by".into(), b.clone(), "issue 1".into())]
    );
    assert_eq!(
        on_b,
        vec![("duplicates".into(), a.clone(), "renamed".into())]
    );

    // Deleting needs the kind this side sees.
    let r = api.delete(&relate_path(a, "duplicates", b)).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = api.delete(&relate_path(a, "duplicated_by", b)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(relations(&api, a).await.0.is_empty());
    assert!(relations(&api, b).await.0.is_empty());
    api.sync().await;
}

#[tokio::test]
async fn relations_are_ordered_by_kind_then_the_other_issues_project_and_number() {
    let (api, p) = TestApi::with_project("p").await;
    let ids = issues(&api, &p, 5).await;
    for (kind, other) in [
        ("relates_to", 1),
        ("blocks", 4),
        ("blocks", 2),
        ("blocked_by", 3),
    ] {
        let r = api
            .put(&relate_path(&ids[0], kind, &ids[other]), None)
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    let (list, _) = relations(&api, &ids[0]).await;
    let got: Vec<(&str, &str)> = list
        .iter()
        .map(|(k, id, _)| (k.as_str(), id.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("blocked_by", ids[3].as_str()),
            ("blocks", ids[2].as_str()),
            ("blocks", ids[4].as_str()),
            ("relates_to", ids[1].as_str()),
        ]
    );
}

#[tokio::test]
async fn bad_relations_are_refused_and_write_nothing() {
    let (api, p) = TestApi::with_project("p").await;
    let ids = issues(&api, &p, 2).await;
    let (a, b) = (&ids[0], &ids[1]);
    let foreign = {
        let r = api
            .call(
                ("eve", "umbrella"),
                Method::POST,
                "/projects",
                Some(json!({"name": "x"})),
            )
            .await;
        let fp = r.body["id"].as_str().unwrap().to_string();
        let r = api
            .call(
                ("eve", "umbrella"),
                Method::POST,
                &format!("/projects/{fp}/issues"),
                Some(json!({"title": "theirs"})),
            )
            .await;
        r.body["id"].as_str().unwrap().to_string()
    };
    let missing = "01JDQ5S0000000000000000N99";
    let before = api.records_snapshot().await;
    for (method, path, status) in [
        (
            Method::PUT,
            relate_path(a, "parent_of", b),
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::PUT,
            relate_path(a, "blocks", a),
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::PUT,
            relate_path(a, "blocks", missing),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::PUT,
            relate_path(missing, "blocks", a),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::PUT,
            relate_path(a, "blocks", &foreign),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::PUT,
            relate_path(a, "blocks", "not-an-id"),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::DELETE,
            relate_path(a, "blocks", b),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::DELETE,
            relate_path(a, "parent_of", b),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let r = api
            .call(("alice", "acme"), method.clone(), &path, None)
            .await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.text);
        assert_eq!(
            r.header("content-type"),
            Some("application/problem+json"),
            "{path}"
        );
    }
    assert_eq!(
        api.records_snapshot().await,
        before,
        "a refused relation wrote something"
    );
}

#[tokio::test]
async fn an_issue_has_at_most_100_relations_even_under_concurrent_puts() {
    let (api, p) = TestApi::with_project("p").await;
    let ids = issues(&api, &p, 111).await;
    let hub = &ids[0];
    for other in &ids[1..99] {
        let r = api.put(&relate_path(hub, "relates_to", other), None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    }
    // 98 relations: of 12 concurrent PUTs of new pairs, exactly 2 get in.
    let puts = ids[99..111].iter().map(|other| {
        let api = &api;
        async move {
            api.put(&relate_path(other, "blocks", hub), None)
                .await
                .status
        }
    });
    let statuses = futures::future::join_all(puts).await;
    let ok = statuses
        .iter()
        .filter(|s| **s == StatusCode::NO_CONTENT)
        .count();
    let full = statuses
        .iter()
        .filter(|s| **s == StatusCode::CONFLICT)
        .count();
    assert_eq!((ok, full), (2, 10), "{statuses:?}");
    let (list, _) = relations(&api, hub).await;
    assert_eq!(list.len(), 100);
    // Re-kinding an existing relation is fine at the bound.
    let r = api.put(&relate_path(hub, "blocks", &ids[1]), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
}

#[tokio::test]
async fn a_deleted_issues_relations_leave_the_other_issues_within_seconds() {
    let (api, p) = TestApi::with_project("p").await;
    let ids = issues(&api, &p, 3).await;
    for other in &ids[1..] {
        let r = api.put(&relate_path(&ids[0], "blocks", other), None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    let (_, before) = relations(&api, &ids[1]).await;
    api.sync().await;
    assert_eq!(
        api.delete(&format!("/issues/{}", ids[0])).await.status,
        StatusCode::NO_CONTENT
    );
    api.sync().await;
    for other in &ids[1..] {
        let (list, version) = relations(&api, other).await;
        assert!(list.is_empty(), "{list:?}");
        assert_eq!(version, before + 1, "a system change on the other issue");
    }
    // Nothing of the deleted issue is left in the records table (the other issues' marks of
    // their last relation change name it: what their history entries say).
    let left: Vec<String> = api
        .records_snapshot()
        .await
        .into_iter()
        .filter(|i| {
            let item: serde_json::Value = serde_json::from_str(i).unwrap();
            item["PK"].as_str().unwrap().contains(&ids[0])
                || item["SK"].as_str().unwrap().contains(&ids[0])
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // And the index agrees with the records (the other issues' new versions indexed).
    api.assert_index_matches_records(
        &crate::support::acme(),
        &[gridline::domain::ids::ProjectId::parse(&p).unwrap()],
    )
    .await;
    assert_eq!(api.dead_letters().await, 0);
}
