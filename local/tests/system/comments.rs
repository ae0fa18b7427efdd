//! Comments: listed at once in either order with their authors' current names, counted exactly
//! on the issue under concurrent posts and deletes, edited and deleted by their author only,
//! never moving the issue's version, and gone with their issue — through the real handlers,
//! the IAM guard and the stream.

use http::{Method, StatusCode};
use serde_json::{Value, json};

use gridline_local::testing::TestApi;

const BOB: (&str, &str) = ("bob", "acme");

fn comments(issue: &str) -> String {
    format!("/issues/{issue}/comments")
}

async fn post(api: &TestApi, issue: &str, body: &str) -> Value {
    let r = api.post(&comments(issue), json!({ "body": body })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        r.header("location"),
        Some(format!("/comments/{}", r.body["id"].as_str().unwrap()).as_str())
    );
    r.body
}

/// The bodies of one page, in order.
fn bodies(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["body"].as_str().unwrap().to_string())
        .collect()
}

async fn issue_with_count(api: &TestApi, issue: &str) -> (u64, u64) {
    let r = api.get(&format!("/issues/{issue}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    (
        r.body["comment_count"].as_u64().unwrap(),
        r.body["version"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn comments_are_listed_at_once_in_either_order_with_their_authors_current_names() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let me = api.put("/me", Some(json!({"display_name": "Alice"}))).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.text);
    let first = post(&api, id, "first").await;
    assert_eq!(first["author"], "alice");
    assert_eq!(first["author_display_name"], "Alice");
    assert_eq!(first["issue_id"], id);
    assert_eq!(first["created_at"], first["updated_at"]);
    post(&api, id, "second\nwith a line break").await;
    let r = api
        .call(
            BOB,
            Method::POST,
            &comments(id),
            Some(json!({"body": "third"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert!(
        r.body.get("author_display_name").is_none(),
        "bob has no profile name: {}",
        r.body
    );

    // No sync: read straight from the table.
    let asc = api.get(&comments(id)).await;
    assert_eq!(asc.status, StatusCode::OK, "{}", asc.text);
    assert_eq!(
        bodies(&asc.body),
        ["first", "second\nwith a line break", "third"]
    );
    let desc = api.get(&format!("{}?order=desc", comments(id))).await;
    assert_eq!(
        bodies(&desc.body),
        ["third", "second\nwith a line break", "first"]
    );

    // A rename shows at once (names are looked up when read).
    api.put("/me", Some(json!({"display_name": "Alice B."})))
        .await;
    let again = api.get(&comments(id)).await;
    assert_eq!(again.body["items"][0]["author_display_name"], "Alice B.");

    // Counted on the issue, which they never change.
    assert_eq!(issue_with_count(&api, id).await, (3, 1));
    let etag = "\"1\"";
    let r = api
        .send_as_alice(
            Method::PATCH,
            &format!("/issues/{id}"),
            Some(r#"{"title": "still version 1"}"#),
            &[("if-match", etag), ("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    api.sync().await;
    api.assert_index_matches_records(
        &crate::support::acme(),
        &[gridline::domain::ids::ProjectId::parse(&p).unwrap()],
    )
    .await;
}

#[tokio::test]
async fn pages_follow_the_cursor_and_a_cursor_is_bound_to_its_order() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    for i in 0..5 {
        post(&api, id, &format!("c{i}")).await;
    }
    for (order, want) in [
        ("asc", ["c0", "c1", "c2", "c3", "c4"]),
        ("desc", ["c4", "c3", "c2", "c1", "c0"]),
    ] {
        let mut seen = Vec::new();
        let mut path = format!("{}?order={order}&limit=2", comments(id));
        loop {
            let r = api.get(&path).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            seen.extend(bodies(&r.body));
            let Some(next) = r.body["next_cursor"].as_str() else {
                break;
            };
            // Reused with the other order: 400.
            let other = if order == "asc" { "desc" } else { "asc" };
            let bad = api
                .get(&format!(
                    "{}?order={other}&limit=2&cursor={next}",
                    comments(id)
                ))
                .await;
            assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
            path = format!("{}?order={order}&limit=2&cursor={next}", comments(id));
        }
        assert_eq!(seen, want);
    }
}

#[tokio::test]
async fn only_the_author_edits_or_deletes_a_comment() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let c = post(&api, id, "mine").await;
    let path = format!("/comments/{}", c["id"].as_str().unwrap());
    let before = api.records_snapshot().await;
    let r = api
        .call(BOB, Method::PATCH, &path, Some(json!({"body": "his"})))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let r = api.call(BOB, Method::DELETE, &path, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(api.records_snapshot().await, before, "nothing written");

    let edited = api.patch(&path, json!({"body": "mine, edited"})).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    assert_eq!(edited.body["body"], "mine, edited");
    assert_eq!(edited.body["created_at"], c["created_at"]);
    assert!(edited.body["updated_at"].as_str() >= c["updated_at"].as_str());
    let listed = api.get(&comments(id)).await;
    assert_eq!(bodies(&listed.body), ["mine, edited"]);

    assert_eq!(api.delete(&path).await.status, StatusCode::NO_CONTENT);
    assert_eq!(api.delete(&path).await.status, StatusCode::NOT_FOUND);
    let r = api.patch(&path, json!({"body": "again"})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert!(bodies(&api.get(&comments(id)).await.body).is_empty());
    assert_eq!(issue_with_count(&api, id).await, (0, 1));
}

#[tokio::test]
async fn bad_comments_are_400_unknown_ones_404_and_nothing_is_written() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let c = post(&api, id, "kept").await;
    let comment = format!("/comments/{}", c["id"].as_str().unwrap());
    let before = api.records_snapshot().await;
    for body in [
        json!({"body": ""}),
        json!({"body": "x".repeat(65_537)}),
        json!({"body": "bell \u{7}"}),
        json!({"body": 5}),
        json!({}),
        json!({"body": "ok", "extra": 1}),
    ] {
        let r = api.post(&comments(id), body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
        let r = api.patch(&comment, body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
    }
    let r = api.get(&format!("{}?order=sideways", comments(id))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(api.records_snapshot().await, before, "nothing written");
    // The longest body fits.
    post(&api, id, &"é".repeat(65_536)).await;

    let missing = "01JDQ5S0000000000000000X99";
    let r = api.post(&comments(missing), json!({"body": "x"})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert_eq!(
        api.get(&comments(missing)).await.status,
        StatusCode::NOT_FOUND
    );
    for path in [
        format!("/comments/{missing}{missing}"),
        "/comments/nope".to_string(),
    ] {
        let r = api.patch(&path, json!({"body": "x"})).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
        assert_eq!(api.delete(&path).await.status, StatusCode::NOT_FOUND);
    }
    // Another tenant's issue and comment are unknown.
    let other = ("alice", "globex");
    let r = api
        .call(
            other,
            Method::POST,
            &comments(id),
            Some(json!({"body": "x"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = api.call(other, Method::GET, &comments(id), None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = api.call(other, Method::DELETE, &comment, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
}

#[tokio::test]
async fn the_count_stays_exact_under_concurrent_posts_and_deletes() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let posts = (0..16).map(|i| {
        let api = &api;
        async move {
            api.post(&comments(id), json!({"body": format!("c{i}")}))
                .await
        }
    });
    let posted = futures::future::join_all(posts).await;
    assert!(posted.iter().all(|r| r.status == StatusCode::CREATED));
    let deletes = posted.iter().take(6).map(|r| {
        let api = &api;
        let path = format!("/comments/{}", r.body["id"].as_str().unwrap());
        async move { api.delete(&path).await }
    });
    let more = (0..4).map(|i| {
        let api = &api;
        async move {
            api.post(&comments(id), json!({"body": format!("d{i}")}))
                .await
        }
    });
    let (deleted, more) = futures::join!(
        futures::future::join_all(deletes),
        futures::future::join_all(more)
    );
    assert!(deleted.iter().all(|r| r.status == StatusCode::NO_CONTENT));
    assert!(more.iter().all(|r| r.status == StatusCode::CREATED));
    let listed = api.get(&format!("{}?limit=100", comments(id))).await;
    assert_eq!(bodies(&listed.body).len(), 14);
    assert_eq!(issue_with_count(&api, id).await, (14, 1));
}

#[tokio::test]
async fn a_deleted_issues_comments_are_gone_from_every_route() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(post(&api, id, &format!("c{i}")).await["id"].clone());
    }
    let first = api.get(&format!("{}?limit=1", comments(id))).await;
    let cursor = first.body["next_cursor"].as_str().unwrap().to_string();
    api.sync().await;
    assert_eq!(
        api.delete(&format!("/issues/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    // At once: the list (first pages and later ones), a comment's own routes (404 for anyone,
    // not 403), a new post.
    for order in ["asc", "desc"] {
        let r = api.get(&format!("{}?order={order}", comments(id))).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{order}: {}", r.text);
    }
    let r = api
        .get(&format!("{}?limit=1&cursor={cursor}", comments(id)))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let path = format!("/comments/{}", ids[0].as_str().unwrap());
    let r = api.patch(&path, json!({"body": "late"})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = api
        .call(BOB, Method::PATCH, &path, Some(json!({"body": "his"})))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = api.call(BOB, Method::DELETE, &path, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = api.post(&comments(id), json!({"body": "late"})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    // Within seconds the indexer deletes them, the marks last.
    api.sync().await;
    assert_eq!(api.get(&comments(id)).await.status, StatusCode::NOT_FOUND);
    assert_eq!(api.delete(&path).await.status, StatusCode::NOT_FOUND);
    let left: Vec<String> = api
        .records_snapshot()
        .await
        .into_iter()
        .filter(|i| i.contains(id))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(api.dead_letters().await, 0);
}

#[tokio::test]
async fn a_repeated_post_with_its_idempotency_key_comments_once() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let id = issue["id"].as_str().unwrap();
    let body = json!({"body": "once"}).to_string();
    let headers = [
        ("idempotency-key", "comment-1"),
        ("content-type", "application/json"),
    ];
    let first = api
        .send_as_alice(Method::POST, &comments(id), Some(&body), &headers)
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let again = api
        .send_as_alice(Method::POST, &comments(id), Some(&body), &headers)
        .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.text, first.text);
    let other = json!({"body": "another"}).to_string();
    let reused = api
        .send_as_alice(Method::POST, &comments(id), Some(&other), &headers)
        .await;
    assert_eq!(
        reused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reused.text
    );
    assert_eq!(bodies(&api.get(&comments(id)).await.body), ["once"]);
    assert_eq!(issue_with_count(&api, id).await, (1, 1));
}

/// Posts `n` comments on a new issue of `p`; its id.
async fn issue_with_comments(api: &TestApi, p: &str, n: usize) -> String {
    let issue = api.issue(p, json!({"title": "busy"})).await;
    let id = issue["id"].as_str().unwrap().to_string();
    for i in 0..n {
        post(api, &id, &format!("c{i}")).await;
    }
    id
}

fn left_of(snapshot: Vec<String>, id: &str) -> usize {
    snapshot.into_iter().filter(|i| i.contains(id)).count()
}

#[tokio::test]
async fn a_clean_up_past_its_budget_goes_on_over_the_streams_retries_or_a_replay() {
    let (api, p) = TestApi::with_project("p").await;
    // 250 comments, at most a page (100) deleted per attempt: three attempts of one record.
    let id = issue_with_comments(&api, &p, 250).await;
    api.sync().await;
    assert_eq!(
        api.delete(&format!("/issues/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    // Gone at once, from the first page in either order.
    for order in ["asc", "desc"] {
        let r = api.get(&format!("{}?order={order}", comments(&id))).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{order}: {}", r.text);
    }
    let indexer = api.stack.indexer().with_purge_budget(1);
    let mut poller = api.stack.poller(indexer).await;
    poller.max_retries = 5;
    while poller.poll_once().await.unwrap() > 0 {}
    assert!(poller.dead_letters.is_empty());
    assert_eq!(left_of(api.records_snapshot().await, &id), 0);

    // With too few retries the record goes to the on-failure queue; the replay (one issue
    // re-indexed, as `gridctl replay` does) deletes the rest at once.
    let id = issue_with_comments(&api, &p, 250).await;
    while poller.poll_once().await.unwrap() > 0 {}
    api.delete(&format!("/issues/{id}")).await;
    poller.max_retries = 1;
    while poller.poll_once().await.unwrap() > 0 {}
    assert_eq!(poller.dead_letters.len(), 1);
    assert!(left_of(api.records_snapshot().await, &id) > 0);
    let issue = gridline::domain::ids::IssueId::parse(&id).unwrap();
    api.stack
        .indexer()
        .reindex_issue(&crate::support::acme(), &issue)
        .await
        .unwrap();
    assert_eq!(left_of(api.records_snapshot().await, &id), 0);
    assert_eq!(api.get(&comments(&id)).await.status, StatusCode::NOT_FOUND);
}
