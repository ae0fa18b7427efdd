//! `Idempotency-Key` on creates: a repeat creates nothing and gets the first answer again, the
//! same key for another request is 422, a repeat while the first runs is 409, an error frees
//! the key, and a malformed key is 400 — each through the real router and engine.

use futures::future::join_all;
use gridline_local::testing::{ALICE, TestApi, send};
use http::{Method, StatusCode};
use serde_json::json;

const KEY: &str = "idempotency-key";

#[tokio::test]
async fn a_repeated_create_creates_nothing_and_answers_as_the_first() {
    let (api, p) = TestApi::with_project("p").await;
    let path = format!("/projects/{p}/issues");
    let body = json!({"title": "once"}).to_string();
    let headers = [(KEY, "retry-after-timeout 1")];
    let first = api
        .send_as_alice(Method::POST, &path, Some(&body), &headers)
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    let again = api
        .send_as_alice(Method::POST, &path, Some(&body), &headers)
        .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.text, first.text);
    for h in ["etag", "location", "content-type"] {
        assert_eq!(again.headers.get(h), first.headers.get(h), "{h}");
    }
    // One issue, not two; another key creates another.
    let other = api
        .send_as_alice(Method::POST, &path, Some(&body), &[(KEY, "another")])
        .await;
    assert_eq!(other.status, StatusCode::CREATED);
    assert_eq!(other.body["num"], 2);
    // Another caller's same key is theirs alone.
    let token = TestApi::token("bob", ALICE.1);
    let bob = api
        .send(Method::POST, &path, Some(&token), Some(&body), &headers)
        .await;
    assert_eq!(bob.status, StatusCode::CREATED);
    assert_eq!(bob.body["num"], 3);
}

#[tokio::test]
async fn the_same_key_for_another_body_or_route_is_422_and_writes_nothing() {
    let (api, p) = TestApi::with_project("p").await;
    let path = format!("/projects/{p}/issues");
    let headers = [(KEY, "k1")];
    let first = api
        .send_as_alice(Method::POST, &path, Some(r#"{"title":"a"}"#), &headers)
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let other_body = api
        .send_as_alice(Method::POST, &path, Some(r#"{"title":"b"}"#), &headers)
        .await;
    assert_eq!(other_body.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        other_body.headers["content-type"],
        "application/problem+json"
    );
    let other_route = api
        .send_as_alice(Method::POST, "/projects", Some(r#"{"name":"q"}"#), &headers)
        .await;
    assert_eq!(other_route.status, StatusCode::UNPROCESSABLE_ENTITY);
    let projects = api.get("/projects").await;
    assert_eq!(projects.body["items"].as_array().unwrap().len(), 1);
    // The number counter tells how many issues were created.
    let next = api
        .send_as_alice(Method::POST, &path, Some(r#"{"title":"c"}"#), &[])
        .await;
    assert_eq!(next.body["num"], 2);
}

#[tokio::test]
async fn an_error_frees_the_key_and_a_bad_key_is_400() {
    let (api, p) = TestApi::with_project("p").await;
    let path = format!("/projects/{p}/issues");
    let headers = [(KEY, "k2")];
    let bad = api
        .send_as_alice(Method::POST, &path, Some(r#"{"title":""}"#), &headers)
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let good = api
        .send_as_alice(Method::POST, &path, Some(r#"{"title":"t"}"#), &headers)
        .await;
    assert_eq!(good.status, StatusCode::CREATED, "{:?}", good.body);
    for key in ["", &"k".repeat(256)] {
        let r = api
            .send_as_alice(Method::POST, &path, Some(r#"{"title":"t"}"#), &[(KEY, key)])
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{key:?}");
        assert_eq!(r.body["errors"][0]["field"], "Idempotency-Key");
    }
    // Nothing was created by the refused requests: the next number is 2.
    let next = api.post_issue(&p, json!({"title": "n"})).await;
    assert_eq!(next.body["num"], 2);
}

/// Of many requests with one key at once, one creates; the others get its answer or a 409
/// while it runs — never a second issue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_repeats_create_once() {
    let (api, p) = TestApi::with_project("p").await;
    let path = format!("/projects/{p}/issues");
    let token = TestApi::token(ALICE.0, ALICE.1);
    let replies = join_all((0..20).map(|_| {
        let (router, token, path) = (api.router(), token.clone(), path.clone());
        tokio::spawn(async move {
            let body = r#"{"title":"racing"}"#;
            send(
                router,
                Method::POST,
                &path,
                Some(&token),
                Some(body),
                &[(KEY, "race")],
            )
            .await
        })
    }))
    .await;
    let replies: Vec<_> = replies.into_iter().map(|r| r.unwrap()).collect();
    let created: Vec<_> = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .collect();
    assert!(!created.is_empty());
    assert!(created.iter().all(|r| r.body["num"] == 1), "{created:?}");
    assert!(
        replies
            .iter()
            .all(|r| matches!(r.status, StatusCode::CREATED | StatusCode::CONFLICT)),
        "{:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let next = api.post_issue(&p, json!({"title": "n"})).await;
    assert_eq!(next.body["num"], 2);
}

/// A claim's lease outlives any request holding it: every HTTP function's timeout (Lambda
/// runs on after API Gateway's 29 s answer, up to it) is under the lease, so a repeat can
/// take over only a claim whose request is gone.
#[test]
fn every_http_functions_timeout_is_under_the_claims_lease() {
    for function in gridline::http::Function::ALL {
        let timeout =
            gridline_local::gateway::function_timeout(function.function_logical_id()).unwrap();
        assert!(
            (timeout.as_secs() as i64) < gridline::store::idempotency::LEASE_S,
            "{function:?}: {timeout:?}"
        );
    }
}

/// Through the store, at chosen times: an expired item not yet deleted by TTL is claimed
/// anew, a claim past its lease is taken over (and its late answer is then not kept), and
/// the same user id and key in another tenant is another claim. An answer larger than one
/// item comes back whole.
#[tokio::test]
async fn claims_expire_leases_end_and_large_answers_come_back_whole() {
    use gridline::domain::ids::{TenantId, UserId};
    use gridline::store::{Answer, Claimed, KeyClaim};
    let api = TestApi::start().await;
    let records = api.stack.state.store.records();
    let (acme, globex) = (
        TenantId::parse("acme").unwrap(),
        TenantId::parse("globex").unwrap(),
    );
    let user = UserId::parse("alice").unwrap();
    let claim = |tenant, token| KeyClaim {
        tenant,
        user: &user,
        key_digest: "k",
        fingerprint: "f",
        token,
    };
    let t0 = 1_000_000;
    assert_eq!(
        records.claim_key(&claim(&acme, "a"), t0).await.unwrap(),
        Claimed::Won
    );
    assert_eq!(
        records.claim_key(&claim(&acme, "b"), t0 + 1).await.unwrap(),
        Claimed::Running
    );
    assert_eq!(
        records
            .claim_key(&claim(&globex, "g"), t0 + 1)
            .await
            .unwrap(),
        Claimed::Won
    );
    // Past the lease: taken over; the first request's answer is no longer its to keep.
    let later = t0 + gridline::store::idempotency::LEASE_S + 1;
    assert_eq!(
        records.claim_key(&claim(&acme, "c"), later).await.unwrap(),
        Claimed::Won
    );
    let big = Answer {
        status: 201,
        headers: vec![("location".into(), "/issues/x".into())],
        body: Some(vec![b'x'; gridline::store::idempotency::PART_BYTES * 2 + 7]),
    };
    let stale = Answer {
        body: Some(b"first".to_vec()),
        ..big.clone()
    };
    records
        .remember_answer(&claim(&acme, "a"), &stale, later)
        .await
        .unwrap();
    records
        .remember_answer(&claim(&acme, "c"), &big, later)
        .await
        .unwrap();
    let again = records
        .claim_key(&claim(&acme, "d"), later + 1)
        .await
        .unwrap();
    // Compared, not printed: the body is 600 KB.
    assert!(
        again == Claimed::Done(big),
        "the answer came back different"
    );
    // A day on, the item (not yet removed by TTL) is claimed anew.
    let next_day = later + gridline::store::idempotency::REMEMBERED_FOR_S + 1;
    assert_eq!(
        records
            .claim_key(&claim(&acme, "e"), next_day)
            .await
            .unwrap(),
        Claimed::Won
    );
}
