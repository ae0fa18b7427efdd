//! `gridctl verify` checks relations from both sides, the issue tree, comments and history,
//! and `repair` mends them, with the permissions `gridctl/iam-policy.json` gives the commands.

mod support;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use gridctl::ops;
use gridline_local::testing::TestApi;
use http::StatusCode;
use serde_json::json;

use support::{hidden, verify};

fn key(pk: String, sk: String) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("PK".to_string(), AttributeValue::S(pk)),
        ("SK".to_string(), AttributeValue::S(sk)),
    ])
}

/// A hand delete of one records item, as a fault outside the product would make.
async fn hand_delete(api: &TestApi, table: &str, key: HashMap<String, AttributeValue>) {
    api.stack
        .client
        .delete_item()
        .table_name(table)
        .set_key(Some(key))
        .send()
        .await
        .unwrap();
}

/// A hand edit of one attribute of an issue's item, as a fault outside the product would make.
async fn set_on_issue(api: &TestApi, issue: &str, name: &str, value: AttributeValue) {
    api.stack
        .client
        .update_item()
        .table_name(&api.stack.tables.records)
        .set_key(Some(key(format!("T#acme#I#{issue}"), "#ISSUE".into())))
        .update_expression("SET #a = :v")
        .expression_attribute_names("#a", name)
        .expression_attribute_values(":v", value)
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn verify_finds_one_sided_dangling_and_miscounted_relations_and_repair_mends_them() {
    let (api, p) = TestApi::with_project("p").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let issue = api.issue(&p, json!({"title": format!("issue {i}")})).await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    for other in &ids[1..] {
        let r = api
            .put(
                &format!("/issues/{}/relations/blocks/{other}", ids[0]),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
    }
    api.sync().await;
    assert!(verify(&api).await.is_clean());

    // Issue 1 loses its side of the relation (its count still says 1): issue 0's edge is
    // one-sided and issue 1 miscounted. Issue 2 gains an edge to an issue that never was.
    hand_delete(
        &api,
        &api.stack.tables.records,
        key(format!("T#acme#I#{}", ids[1]), format!("R#{}", ids[0])),
    )
    .await;
    let mut ghost = key(
        format!("T#acme#I#{}", ids[2]),
        "R#01JDQ5S0000000000000000N99".into(),
    );
    ghost.insert("entity".into(), AttributeValue::S("relation".into()));
    ghost.insert("kind".into(), AttributeValue::S("relates_to".into()));
    api.put_record(ghost).await.unwrap();

    let found = verify(&api).await;
    let problems: Vec<String> = found
        .drift
        .relations
        .iter()
        .map(|d| {
            serde_json::to_value(d).unwrap()["problem"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(found.relations, 4, "{:?}", found.drift.relations);
    for problem in ["one_sided", "dangling", "count"] {
        assert!(problems.iter().any(|p| p == problem), "{problems:?}");
    }

    // Repair's changes are issue changes: the indexer (the stream, synced here) indexes them.
    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 1, &hidden)
        .await
        .unwrap();
    assert_eq!(report.relations, 4, "{report:?}");
    api.sync().await;
    let after = verify(&api).await;
    assert!(after.is_clean(), "{:?}", after.drift);
    let r = api.get(&format!("/issues/{}", ids[0])).await;
    let related: Vec<&str> = r.body["relations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["issue"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(related, vec![ids[2].as_str()], "the one-sided edge is gone");
    // The counts are right again: issue 1 can take relations up to its bound, and so on.
    let r = api
        .put(
            &format!("/issues/{}/relations/relates_to/{}", ids[1], ids[2]),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    api.sync().await;
    assert!(verify(&api).await.is_clean());
}

#[tokio::test]
async fn verify_finds_sub_issues_out_of_step_with_their_edges_and_repair_mends_them() {
    let (api, p) = TestApi::with_project("p").await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let issue = api.issue(&p, json!({"title": format!("issue {i}")})).await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    for kid in &ids[1..3] {
        let r = api
            .patch(&format!("/issues/{kid}"), json!({"parent_id": ids[0]}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    api.sync().await;
    assert!(verify(&api).await.is_clean());

    // Issue 1's edge lost; a stray edge naming issue 3 (under nobody); issue 2 told its
    // parent is one that never was.
    let edges = format!("T#acme#I#{}#C", ids[0]);
    hand_delete(
        &api,
        &api.stack.tables.records,
        key(edges.clone(), ids[1].clone()),
    )
    .await;
    let mut stray = key(edges, ids[3].clone());
    stray.insert("entity".into(), AttributeValue::S("child".into()));
    api.put_record(stray).await.unwrap();
    let never = AttributeValue::S("01JDQ5S0000000000000000N99".into());
    set_on_issue(&api, &ids[2], "parent_id", never).await;
    api.sync().await;

    let found = verify(&api).await;
    let problems: Vec<String> = found
        .drift
        .tree
        .iter()
        .map(|d| {
            serde_json::to_value(d).unwrap()["problem"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        problems.contains(&"missing_edge".to_string()),
        "{problems:?}"
    );
    assert!(problems.contains(&"stray_edge".to_string()), "{problems:?}");
    assert!(problems.contains(&"orphan".to_string()), "{problems:?}");

    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 1, &hidden)
        .await
        .unwrap();
    assert!(report.tree >= 3, "{report:?}");
    api.sync().await;
    let after = verify(&api).await;
    assert!(after.is_clean(), "{:?}", after.drift);
    let r = api.get(&format!("/issues/{}", ids[2])).await;
    assert_eq!(
        r.body["parent_id"],
        serde_json::Value::Null,
        "the orphan is detached"
    );
}

#[tokio::test]
async fn verify_finds_orphaned_and_miscounted_comments_and_repair_mends_them() {
    let (api, p) = TestApi::with_project("p").await;
    let mut ids = Vec::new();
    for i in 0..2 {
        let issue = api.issue(&p, json!({"title": format!("issue {i}")})).await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        for n in 0..3 {
            let r = api
                .post(
                    &format!("/issues/{id}/comments"),
                    json!({"body": format!("c{n}")}),
                )
                .await;
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        }
    }
    api.sync().await;
    assert!(verify(&api).await.is_clean());

    // Issue 0's item vanishes (as if its clean-up ran out of retries): its comments are
    // orphans. Issue 1's count is knocked off by hand.
    hand_delete(
        &api,
        &api.stack.tables.records,
        key(format!("T#acme#I#{}", ids[0]), "#ISSUE".into()),
    )
    .await;
    set_on_issue(
        &api,
        &ids[1],
        "comment_count",
        AttributeValue::N("7".into()),
    )
    .await;
    // The orphans must outlive the stream's own clean-up to be found: verify before syncing.
    let found = verify(&api).await;
    let problems: Vec<serde_json::Value> = found
        .drift
        .comments
        .iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect();
    assert_eq!(found.comments, 2, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|d| d["problem"] == "orphaned" && d["comments"] == 3),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|d| d["problem"] == "count" && d["stored"] == 7 && d["comments"] == 3),
        "{problems:?}"
    );

    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 1, &hidden)
        .await
        .unwrap();
    assert_eq!(report.comments, 2, "{report:?}");
    api.sync().await;
    let after = verify(&api).await;
    assert!(after.is_clean(), "{:?}", after.drift);
    let r = api.get(&format!("/issues/{}", ids[1])).await;
    assert_eq!(r.body["comment_count"], 3);
    let left = api
        .records_snapshot()
        .await
        .into_iter()
        .filter(|i| i.contains(&ids[0]))
        .count();
    assert_eq!(left, 0, "nothing of issue 0 is left");
}

#[tokio::test]
async fn verify_finds_missing_stray_and_orphaned_history_and_repair_mends_what_it_can() {
    let (api, p) = TestApi::with_project("p").await;
    let mut ids = Vec::new();
    for i in 0..2 {
        let issue = api.issue(&p, json!({"title": format!("issue {i}")})).await;
        ids.push(issue["id"].as_str().unwrap().to_string());
    }
    for n in 0..2 {
        let r = api
            .patch(
                &format!("/issues/{}", ids[0]),
                json!({"title": format!("t{n}")}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    api.sync().await;
    assert!(verify(&api).await.is_clean());

    // Issue 0 loses its entry of version 2 and gains one of a version it never reached; issue
    // 1's item vanishes by hand (its history is an orphan until the stream's clean-up).
    let history_pk = |id: &str| {
        let issue = gridline::domain::ids::IssueId::parse(id).unwrap();
        let acme = gridline::domain::ids::TenantId::parse("acme").unwrap();
        gridline::keys::index::watermark_pk(&acme, &issue)
    };
    let entry = |v| gridline::keys::index::history_sk(v);
    let index = &api.stack.tables.index;
    hand_delete(&api, index, key(history_pk(&ids[0]), entry(2))).await;
    let mut stray = key(history_pk(&ids[0]), entry(9));
    stray.insert("e".into(), AttributeValue::S("{}".into()));
    api.put_index(stray).await.unwrap();
    hand_delete(
        &api,
        &api.stack.tables.records,
        key(format!("T#acme#I#{}", ids[1]), "#ISSUE".into()),
    )
    .await;

    let found = verify(&api).await;
    let problems: Vec<serde_json::Value> = found
        .drift
        .history
        .iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect();
    assert_eq!(found.history, 3, "{problems:?}");
    for want in [
        json!({"tenant": "acme", "issue": ids[0], "problem": "missing", "versions": [2], "count": 1}),
        json!({"tenant": "acme", "issue": ids[0], "problem": "stray", "versions": [9]}),
        json!({"tenant": "acme", "issue": ids[1], "problem": "orphaned", "entries": 1}),
    ] {
        assert!(problems.contains(&want), "{want} not in {problems:?}");
    }

    // Repair deletes the stray entry and the orphans; a lost entry it cannot make up (the
    // stream's record of that version is what would rebuild it: `gridctl replay`).
    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 2, &hidden)
        .await
        .unwrap();
    assert!(report.history >= 2, "{report:?}");
    assert!(!report.clean);
    assert_eq!(report.remaining["history"], 1, "{report:?}");
    let left = verify(&api).await;
    assert_eq!(left.history, 1);
    assert!(matches!(
        &left.drift.history[0].problem,
        gridline::ops::history::HistoryProblem::Missing { versions, .. } if versions == &[2]
    ));

    // The operator accepts the loss: recorded, verify clean, the list goes on without it
    // (once the stream has taken issue 1's delete, which repair leaves to it: in flight).
    api.sync().await;
    let store = support::store(&api.stack, "Repair");
    let report = ops::repair_with(&store, (2, 2), true, &hidden)
        .await
        .unwrap();
    assert!(report.clean, "{report:?}");
    let r = api.get(&format!("/issues/{}/history", ids[0])).await;
    let versions: Vec<u64> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [3, 1]);
}
