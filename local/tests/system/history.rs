//! History: one entry per version with exactly what it changed and who made it, newest first,
//! made by the indexer from the real stream (old and new images) — through the real handlers
//! and the IAM guard; and gone with its issue.

use std::collections::HashSet;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use gridline::keys::index::{HISTORY_PART_PREFIX, HISTORY_SK_PREFIX};
use gridline_local::testing::TestApi;

const BOB: (&str, &str) = ("bob", "acme");

fn history(issue: &str) -> String {
    format!("/issues/{issue}/history")
}

/// Every entry of an issue's history, following its cursors `limit` at a time.
async fn all_entries(api: &TestApi, issue: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("{}?limit={limit}", history(issue));
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let r = api.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let items = r.body["items"].as_array().unwrap();
        assert!(items.len() <= limit);
        out.extend(items.iter().cloned());
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

/// An entry's changes as a set (the contract gives them in no particular order).
fn changes(entry: &Value) -> HashSet<String> {
    entry["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect()
}

fn set(values: &[Value]) -> HashSet<String> {
    values.iter().map(Value::to_string).collect()
}

async fn version(api: &TestApi, issue: &str) -> u64 {
    let r = api.get(&format!("/issues/{issue}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body["version"].as_u64().unwrap()
}

#[tokio::test]
async fn every_kind_of_change_is_one_entry_with_exactly_its_changes_and_actor() {
    let (api, p) = TestApi::with_project("p").await;
    let points = api
        .field(&p, json!({"name": "points", "type": "number"}))
        .await;
    let parent = api.issue(&p, json!({"title": "parent"})).await;
    let parent = parent["id"].as_str().unwrap().to_string();
    let other = api.issue(&p, json!({"title": "other"})).await;
    let other = other["id"].as_str().unwrap().to_string();
    let issue = api
        .issue(&p, json!({"title": "a", "fields": {&points: 3}}))
        .await;
    let id = issue["id"].as_str().unwrap().to_string();
    let path = format!("/issues/{id}");

    // v2: title and a value, by alice.
    let r = api
        .patch(&path, json!({"title": "b", "fields": {&points: 5.50}}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // Nothing new: no version.
    let r = api
        .patch(&path, json!({"title": "b", "fields": {&points: 5.5}}))
        .await;
    assert_eq!(r.body["version"], 2, "{}", r.text);
    // v3: the description.
    let r = api.patch(&path, json!({"description": "why"})).await;
    assert_eq!(r.body["version"], 3);
    let r = api.patch(&path, json!({"description": "why"})).await;
    assert_eq!(r.body["version"], 3, "the same description is no change");
    // v4: bob makes himself assignee; again is no change.
    let bob_seat = format!("/issues/{id}/participants/user/bob");
    for _ in 0..2 {
        let r = api
            .call(
                BOB,
                Method::PUT,
                &bob_seat,
                Some(json!({"role": "assignee"})),
            )
            .await;
        assert!(r.status.is_success(), "{}", r.text);
    }
    assert_eq!(version(&api, &id).await, 4);
    // v5: a relation (the other side gets its own version and entry).
    let r = api
        .put(&format!("/issues/{id}/relations/blocks/{other}"), None)
        .await;
    assert!(r.status.is_success(), "{}", r.text);
    // v6: a parent and the state.
    let r = api
        .patch(&path, json!({"parent_id": &parent, "state": "closed"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // A comment is no version.
    let r = api
        .post(&format!("/issues/{id}/comments"), json!({"body": "hi"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // v7: the parent deleted detaches it: a system change, no actor.
    api.sync().await;
    let r = api.delete(&format!("/issues/{parent}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    api.sync().await;
    // v8: the other issue deleted drops the relation: a system change too.
    let r = api.delete(&format!("/issues/{other}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    api.sync().await;
    assert_eq!(version(&api, &id).await, 8);

    let entries = all_entries(&api, &id, 50).await;
    let versions: Vec<u64> = entries
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [8, 7, 6, 5, 4, 3, 2, 1], "newest first, one each");
    let by_version = |v: u64| &entries[(8 - v) as usize];
    let created = by_version(1);
    assert_eq!(created["action"], "created");
    assert_eq!(created["actor"], "alice");
    assert_eq!(created["changes"], json!([]));
    assert_eq!(created["at"], issue["created_at"]);
    let expect = |v: u64, actor: Value, want: &[Value]| {
        let e = by_version(v);
        assert_eq!(e["action"], "updated", "{e}");
        assert_eq!(e["actor"], actor, "{e}");
        assert_eq!(changes(e), set(want), "version {v}: {e}");
    };
    expect(
        2,
        json!("alice"),
        &[
            json!({"field": "title", "from": "a", "to": "b"}),
            json!({"field": &points, "from": 3, "to": 5.5}),
        ],
    );
    expect(3, json!("alice"), &[json!({"field": "description"})]);
    expect(
        4,
        json!("bob"),
        &[
            json!({"field": "participant", "participant": {"kind": "user", "id": "bob"},
                 "from": null, "to": "assignee"}),
        ],
    );
    expect(
        5,
        json!("alice"),
        &[json!({"field": "relation", "issue_id": &other, "from": null, "to": "blocks"})],
    );
    expect(
        6,
        json!("alice"),
        &[
            json!({"field": "parent_id", "from": null, "to": &parent}),
            json!({"field": "state", "from": "open", "to": "closed"}),
        ],
    );
    expect(
        7,
        Value::Null,
        &[json!({"field": "parent_id", "from": &parent, "to": null})],
    );
    expect(
        8,
        Value::Null,
        &[json!({"field": "relation", "issue_id": &other, "from": "blocks", "to": null})],
    );
    // The last entry's time is the issue's.
    let now = api.get(&path).await;
    assert_eq!(entries[0]["at"], now.body["updated_at"]);

    // Deleted issues' histories are 404 at once, and gone from the index.
    for gone in [&parent, &other] {
        let r = api.get(&history(gone)).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    }
    let left = api
        .scan_all(&api.stack.tables.index)
        .await
        .into_iter()
        .filter(|i| {
            let pk = i["PK"].as_s().unwrap();
            let sk = i["SK"].as_s().unwrap();
            sk.starts_with(HISTORY_SK_PREFIX) && (pk.ends_with(&parent) || pk.ends_with(&other))
        })
        .count();
    assert_eq!(left, 0, "a deleted issue's history is deleted");
}

#[tokio::test]
async fn pages_follow_the_cursor_and_bad_requests_are_400_or_404() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t0"})).await;
    let id = issue["id"].as_str().unwrap().to_string();
    for n in 1..=6 {
        let r = api
            .patch(&format!("/issues/{id}"), json!({"title": format!("t{n}")}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    // Before the indexer ran: the issue exists, its list has not caught up.
    let r = api.get(&history(&id)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    api.sync().await;
    for limit in [1, 3, 7, 50] {
        let entries = all_entries(&api, &id, limit).await;
        let versions: Vec<u64> = entries
            .iter()
            .map(|e| e["version"].as_u64().unwrap())
            .collect();
        assert_eq!(versions, [7, 6, 5, 4, 3, 2, 1], "limit {limit}");
    }
    // A cursor is bound to its issue.
    let other = api.issue(&p, json!({"title": "o"})).await;
    let other = other["id"].as_str().unwrap();
    let r = api.get(&format!("{}?limit=2", history(&id))).await;
    let cursor = r.body["next_cursor"].as_str().unwrap();
    let r = api
        .get(&format!("{}?limit=2&cursor={cursor}", history(other)))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = api.get(&format!("{}?order=asc", history(&id))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    // Unknown, or another tenant's: 404.
    let r = api.get(&history("01ARZ3NDEKTSV4RRFFQ69G5FAV")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = api
        .call(("mallory", "evil"), Method::GET, &history(&id), None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
}

#[tokio::test]
async fn a_deleted_field_changes_values_without_a_version_or_an_entry() {
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let issue = api
        .issue(&p, json!({"title": "t", "fields": {&f: 1}}))
        .await;
    let id = issue["id"].as_str().unwrap().to_string();
    let r = api
        .patch(&format!("/issues/{id}"), json!({"fields": {&f: 2}}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    api.sync().await;
    let r = api.delete(&format!("/projects/{p}/fields/{f}")).await;
    assert!(r.status.is_success(), "{}", r.text);
    api.sync().await;
    assert_eq!(version(&api, &id).await, 2);
    let entries = all_entries(&api, &id, 50).await;
    assert_eq!(entries.len(), 2);
    // The older entry keeps the value as it was.
    assert_eq!(
        entries[0]["changes"],
        json!([{"field": &f, "from": 1, "to": 2}])
    );
}

/// Concurrent requests asking for the same change: one makes the version, the others find the
/// issue already as they ask and make none — so no entry lists no change.
#[tokio::test]
async fn concurrent_identical_changes_make_one_version() {
    let (api, p) = TestApi::with_project("p").await;
    let f = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap().to_string();
    let path = format!("/issues/{id}");
    let seat = format!("/issues/{id}/participants/user/bob");
    let patches = (0..6).map(|_| api.patch(&path, json!({"title": "same", "fields": {&f: 4}})));
    for r in futures::future::join_all(patches).await {
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let seats = (0..6).map(|_| api.call(BOB, Method::PUT, &seat, Some(json!({"role": "watcher"}))));
    for r in futures::future::join_all(seats).await {
        assert!(r.status.is_success(), "{}", r.text);
    }
    assert_eq!(version(&api, &id).await, 3);
    api.sync().await;
    let entries = all_entries(&api, &id, 50).await;
    assert_eq!(entries.len(), 3);
    for e in &entries[..2] {
        assert!(!changes(e).is_empty(), "{e}");
    }
}

/// An entry too large for one item (a patch replacing 200 long values lists each old and new
/// one: ~400 KB of JSON) is kept in parts and listed whole; the grid is updated as always.
#[tokio::test]
async fn an_entry_larger_than_an_item_is_kept_in_parts_and_listed_whole() {
    let (api, p) = TestApi::with_project("p").await;
    let mut fields = Vec::new();
    for i in 0..200 {
        fields.push(
            api.field(&p, json!({"name": format!("f{i}"), "type": "text"}))
                .await,
        );
    }
    let values = |c: char| -> Value {
        let text: String = std::iter::repeat_n(c, 1000).collect();
        Value::Object(fields.iter().map(|f| (f.clone(), json!(text))).collect())
    };
    let issue = api
        .issue(&p, json!({"title": "wide", "fields": values('a')}))
        .await;
    let id = issue["id"].as_str().unwrap().to_string();
    let r = api
        .patch(&format!("/issues/{id}"), json!({"fields": values('b')}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    api.sync().await;
    assert_eq!(api.dead_letters().await, 0);
    let entries = all_entries(&api, &id, 50).await;
    assert_eq!(entries.len(), 2);
    let changes = entries[0]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 200);
    assert!(
        changes
            .iter()
            .all(|c| c["from"].as_str().unwrap().starts_with("aaa")
                && c["to"].as_str().unwrap().starts_with("bbb"))
    );
    let parts = api
        .scan_all(&api.stack.tables.index)
        .await
        .into_iter()
        .filter(|i| i["SK"].as_s().unwrap().starts_with(HISTORY_PART_PREFIX))
        .count();
    assert!(parts >= 2, "kept in {parts} parts");
    // The grid caught up too.
    let page = api
        .get(&format!("/projects/{p}/issues?sort={}&limit=1", fields[0]))
        .await;
    assert_eq!(
        page.body["items"][0]["fields"][&fields[0]]
            .as_str()
            .unwrap()
            .chars()
            .next(),
        Some('b')
    );
    // Deleting the issue deletes the parts with its entries.
    let r = api.delete(&format!("/issues/{id}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    api.sync().await;
    let left = api
        .scan_all(&api.stack.tables.index)
        .await
        .into_iter()
        .filter(|i| {
            let sk = i["SK"].as_s().unwrap();
            sk.starts_with(HISTORY_PART_PREFIX) || sk.starts_with(HISTORY_SK_PREFIX)
        })
        .count();
    assert_eq!(left, 0);
}
