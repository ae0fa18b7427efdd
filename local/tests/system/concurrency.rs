//! Races: numbers stay unique, If-Match lets one writer win, and patches to
//! different members never lose each other.

use futures::future::join_all;
use gridline_local::testing::{TestApi, send};
use http::{Method, StatusCode};
use serde_json::json;

/// Numbers come from an atomic counter, so concurrent creates never conflict: a hundred at
/// once all succeed, first time, with the numbers 1 to 100 (none fails, so none is burned).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_parallel_creates_get_numbers_one_to_a_hundred() {
    let (api, p) = TestApi::with_project("p").await;
    let token = TestApi::token("alice", "acme");
    let path = format!("/projects/{p}/issues");
    let n: u64 = 100;
    let replies = join_all((0..n).map(|i| {
        let (router, token, path) = (api.router(), token.clone(), path.clone());
        tokio::spawn(async move {
            let body = format!(r#"{{"title":"issue {i}"}}"#);
            send(router, Method::POST, &path, Some(&token), Some(&body), &[]).await
        })
    }))
    .await;
    let mut nums: Vec<u64> = replies
        .into_iter()
        .map(|r| {
            let r = r.unwrap();
            assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
            r.body["num"].as_u64().unwrap()
        })
        .collect();
    nums.sort();
    assert_eq!(nums, (1..=n).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_if_match_patches_let_exactly_one_win() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let path = format!("/issues/{}", issue["id"].as_str().unwrap());
    let token = TestApi::token("alice", "acme");
    let replies = join_all((0..10).map(|i| {
        let (router, token, path) = (api.router(), token.clone(), path.clone());
        tokio::spawn(async move {
            let body = format!(r#"{{"title":"writer {i}"}}"#);
            send(
                router,
                Method::PATCH,
                &path,
                Some(&token),
                Some(&body),
                &[("if-match", "\"1\"")],
            )
            .await
        })
    }))
    .await;
    let statuses: Vec<StatusCode> = replies.into_iter().map(|r| r.unwrap().status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::PRECONDITION_FAILED)
            .count(),
        9
    );
    let r = api.get(&path).await;
    assert_eq!(r.body["version"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_to_different_members_both_survive() {
    let (api, p) = TestApi::with_project("p").await;
    let fields: Vec<String> =
        join_all((0..8).map(|i| api.field(&p, json!({"name": format!("f{i}"), "type": "number"}))))
            .await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let path = format!("/issues/{}", issue["id"].as_str().unwrap());
    let token = TestApi::token("alice", "acme");
    let mut tasks: Vec<_> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let (router, token, path) = (api.router(), token.clone(), path.clone());
            let body = format!(r#"{{"fields":{{"{f}":{i}}}}}"#);
            tokio::spawn(async move {
                send(router, Method::PATCH, &path, Some(&token), Some(&body), &[]).await
            })
        })
        .collect();
    let (router, token2, path2) = (api.router(), token.clone(), path.clone());
    tasks.push(tokio::spawn(async move {
        send(
            router,
            Method::PATCH,
            &path2,
            Some(&token2),
            Some(r#"{"title":"renamed"}"#),
            &[],
        )
        .await
    }));
    for r in join_all(tasks).await {
        assert_eq!(r.unwrap().status, StatusCode::OK);
    }
    let r = api.get(&path).await;
    assert_eq!(r.body["title"], "renamed");
    assert_eq!(r.body["version"], 10);
    for (i, f) in fields.iter().enumerate() {
        assert_eq!(r.body["fields"][f], i, "field {i} survived");
    }
}
