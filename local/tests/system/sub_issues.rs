//! Sub-issues: `parent_id` on create and `PATCH`, checked against the tree (same project, no
//! cycle, at most 8 deep) also under concurrent changes; children listed from the index by
//! number; counts on `GET`; children detached when their parent is deleted.

use http::StatusCode;
use serde_json::{Value, json};

use gridline_local::testing::TestApi;

async fn child(api: &TestApi, p: &str, title: &str, parent: Option<&str>) -> String {
    let r = api
        .post(
            &format!("/projects/{p}/issues"),
            json!({"title": title, "parent_id": parent}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["parent_id"].as_str(), parent);
    r.body["id"].as_str().unwrap().to_string()
}

async fn set_parent(api: &TestApi, id: &str, parent: Value) -> (StatusCode, Value) {
    let r = api
        .patch(&format!("/issues/{id}"), json!({"parent_id": parent}))
        .await;
    (r.status, r.body)
}

/// The titles of an issue's children as its route lists them (every page).
async fn children(api: &TestApi, id: &str, query: &str) -> Vec<String> {
    let mut titles = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/issues/{id}/children?limit=2{query}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let r = api.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        for item in r.body["items"].as_array().unwrap() {
            assert_eq!(item["parent_id"].as_str(), Some(id));
            titles.push(item["title"].as_str().unwrap().to_string());
        }
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return titles,
        }
    }
}

#[tokio::test]
async fn children_are_listed_by_number_counted_by_state_and_shown_in_lists() {
    let (api, p) = TestApi::with_project("p").await;
    let parent = child(&api, &p, "parent", None).await;
    let mut kids = Vec::new();
    for i in 0..5 {
        kids.push(child(&api, &p, &format!("kid {i}"), Some(&parent)).await);
    }
    let r = api
        .patch(&format!("/issues/{}", kids[1]), json!({"state": "closed"}))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    api.sync().await;
    assert_eq!(
        children(&api, &parent, "").await,
        ["kid 0", "kid 1", "kid 2", "kid 3", "kid 4"]
    );
    assert_eq!(children(&api, &parent, "&state=closed").await, ["kid 1"]);
    assert_eq!(children(&api, &parent, "&state=open").await.len(), 4);
    let r = api.get(&format!("/issues/{parent}")).await;
    assert_eq!(r.body["sub_issues"], json!({"open": 4, "closed": 1}));
    assert_eq!(r.body["parent_id"], Value::Null);
    let r = api.get(&format!("/issues/{}", kids[0])).await;
    assert_eq!(r.body["sub_issues"], json!({"open": 0, "closed": 0}));
    assert_eq!(r.body["parent_id"].as_str(), Some(parent.as_str()));
    // The grid's summaries carry parent_id too.
    let r = api.get(&format!("/projects/{p}/issues?limit=100")).await;
    let with_parent = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["parent_id"].as_str() == Some(parent.as_str()))
        .count();
    assert_eq!(with_parent, 5, "{}", r.text);
    // Moving and detaching move the entries.
    let (status, _) = set_parent(&api, &kids[0], json!(kids[2])).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = set_parent(&api, &kids[3], Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["parent_id"], Value::Null);
    api.sync().await;
    assert_eq!(
        children(&api, &parent, "").await,
        ["kid 1", "kid 2", "kid 4"]
    );
    assert_eq!(children(&api, &kids[2], "").await, ["kid 0"]);
    // An unknown issue is 404; one without children an empty list.
    let r = api.get("/issues/01JDQ5S0000000000000000N99/children").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(children(&api, &kids[4], "").await.is_empty());
    api.assert_index_matches_records(
        &crate::support::acme(),
        &[gridline::domain::ids::ProjectId::parse(&p).unwrap()],
    )
    .await;
}

#[tokio::test]
async fn bad_parents_are_refused_and_write_nothing() {
    let (api, p) = TestApi::with_project("p").await;
    let other_project = api.project("other").await;
    let elsewhere = child(&api, &other_project, "elsewhere", None).await;
    // A chain of 8: root, then 7 below it.
    let mut chain = vec![child(&api, &p, "d1", None).await];
    for depth in 2..=8 {
        let parent = chain.last().unwrap().clone();
        chain.push(child(&api, &p, &format!("d{depth}"), Some(&parent)).await);
    }
    let loose = child(&api, &p, "loose", None).await;
    let with_kid = child(&api, &p, "with kid", None).await;
    child(&api, &p, "kid", Some(&with_kid)).await;
    let before = api.records_snapshot().await;
    let create = |parent: &str| json!({"title": "new", "parent_id": parent});
    for (parent, status) in [
        ("01JDQ5S0000000000000000N99", StatusCode::BAD_REQUEST),
        ("not an id", StatusCode::BAD_REQUEST),
        (elsewhere.as_str(), StatusCode::BAD_REQUEST),
        (chain[7].as_str(), StatusCode::CONFLICT),
    ] {
        let r = api
            .post(&format!("/projects/{p}/issues"), create(parent))
            .await;
        assert_eq!(r.status, status, "{parent}: {}", r.text);
        if status == StatusCode::BAD_REQUEST {
            assert_eq!(r.body["errors"][0]["field"], "parent_id", "{}", r.text);
        }
    }
    for (id, parent, status) in [
        (&loose, json!(loose), StatusCode::BAD_REQUEST),
        (&loose, json!(elsewhere), StatusCode::BAD_REQUEST),
        (&chain[0], json!(chain[5]), StatusCode::CONFLICT),
        (&chain[3], json!(chain[3]), StatusCode::BAD_REQUEST),
        (&loose, json!(chain[7]), StatusCode::CONFLICT),
        // A subtree of 2 under depth 7 would make depth 9.
        (&with_kid, json!(chain[6]), StatusCode::CONFLICT),
    ] {
        let (got, body) = set_parent(&api, id, parent.clone()).await;
        assert_eq!(got, status, "{id} under {parent}: {body}");
    }
    assert_eq!(
        api.records_snapshot().await,
        before,
        "a refused parent wrote something"
    );
    // Just within the bound is fine.
    let (got, body) = set_parent(&api, &with_kid, json!(chain[5])).await;
    assert_eq!(got, StatusCode::OK, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_parent_changes_never_close_a_loop() {
    let (api, p) = TestApi::with_project("p").await;
    for round in 0..6 {
        let a = child(&api, &p, &format!("a{round}"), None).await;
        let b = child(&api, &p, &format!("b{round}"), None).await;
        let c = child(&api, &p, &format!("c{round}"), None).await;
        // Three PATCHes that together would make a → b → c → a.
        let (x, y, z) = tokio::join!(
            set_parent(&api, &a, json!(b)),
            set_parent(&api, &b, json!(c)),
            set_parent(&api, &c, json!(a)),
        );
        let ok = [x.0, y.0, z.0]
            .iter()
            .filter(|s| **s == StatusCode::OK)
            .count();
        assert!(ok <= 2, "round {round}: {:?}", [x.0, y.0, z.0]);
        for s in [x.0, y.0, z.0] {
            assert!([StatusCode::OK, StatusCode::CONFLICT].contains(&s), "{s}");
        }
        // Following parents from each never comes back.
        for start in [&a, &b, &c] {
            let mut seen = vec![start.clone()];
            let mut at = start.clone();
            loop {
                let r = api.get(&format!("/issues/{at}")).await;
                match r.body["parent_id"].as_str() {
                    None => break,
                    Some(next) => {
                        assert!(!seen.contains(&next.to_string()), "a loop: {seen:?}");
                        seen.push(next.to_string());
                        at = next.to_string();
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn deleting_a_parent_detaches_its_children_within_seconds() {
    let (api, p) = TestApi::with_project("p").await;
    let parent = child(&api, &p, "parent", None).await;
    let kids = [
        child(&api, &p, "kid 0", Some(&parent)).await,
        child(&api, &p, "kid 1", Some(&parent)).await,
    ];
    api.sync().await;
    let before = api.get(&format!("/issues/{}", kids[0])).await.body["version"]
        .as_u64()
        .unwrap();
    assert_eq!(
        api.delete(&format!("/issues/{parent}")).await.status,
        StatusCode::NO_CONTENT
    );
    api.sync().await;
    for kid in &kids {
        let r = api.get(&format!("/issues/{kid}")).await;
        assert_eq!(r.body["parent_id"], Value::Null, "{}", r.text);
        assert_eq!(r.body["version"].as_u64(), Some(before + 1));
    }
    let r = api.get(&format!("/issues/{parent}/children")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    api.assert_index_matches_records(
        &crate::support::acme(),
        &[gridline::domain::ids::ProjectId::parse(&p).unwrap()],
    )
    .await;
    assert_eq!(api.dead_letters().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_parent_again_is_fine_and_concurrent_children_never_fail_the_server() {
    let (api, p) = TestApi::with_project("p").await;
    let parent = child(&api, &p, "epic", None).await;
    let kid = child(&api, &p, "kid", Some(&parent)).await;
    // A client writing back the whole issue sends its parent again: no tree change, 200.
    let (status, body) = set_parent(&api, &kid, json!(parent)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["parent_id"].as_str(), Some(parent.as_str()));
    // A script creating sub-issues in parallel under one epic: each is created, or told to
    // try again (409), never a 5xx.
    let creates = (0..12).map(|i| {
        let (api, p, parent) = (&api, &p, &parent);
        async move {
            api.post(
                &format!("/projects/{p}/issues"),
                json!({"title": format!("parallel {i}"), "parent_id": parent}),
            )
            .await
            .status
        }
    });
    let statuses = futures::future::join_all(creates).await;
    assert!(
        statuses
            .iter()
            .all(|s| [StatusCode::CREATED, StatusCode::CONFLICT].contains(s)),
        "{statuses:?}"
    );
    let created = statuses
        .iter()
        .filter(|s| **s == StatusCode::CREATED)
        .count();
    api.sync().await;
    assert_eq!(children(&api, &parent, "").await.len(), created + 1);
    api.assert_index_matches_records(
        &crate::support::acme(),
        &[gridline::domain::ids::ProjectId::parse(&p).unwrap()],
    )
    .await;
}
