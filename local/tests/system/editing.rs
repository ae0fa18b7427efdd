//! Editing what exists: renames of projects and teams.

use gridline_local::testing::TestApi;
use serde_json::json;

#[tokio::test]
async fn a_renamed_project_moves_in_the_list_and_answers_with_its_fields() {
    let api = TestApi::start().await;
    let a = api.project("alpha").await;
    let _b = api.project("beta").await;
    let f = api
        .field(&a, json!({"name": "Points", "type": "number"}))
        .await;
    let r = api
        .patch(&format!("/projects/{a}"), json!({"name": "zeta"}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["name"], "zeta");
    assert_eq!(r.body["fields"][0]["id"], f.as_str());
    let names: Vec<String> = api.get("/projects").await.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["beta", "zeta"]);

    let before = api.records_snapshot().await;
    for body in [
        json!({"name": ""}),
        json!({"name": "x", "id": "y"}),
        json!({}),
    ] {
        let r = api.patch(&format!("/projects/{a}"), body).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
    }
    let missing = "01JDQ5S0000000000000000P99";
    let r = api
        .patch(&format!("/projects/{missing}"), json!({"name": "n"}))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        api.records_snapshot().await,
        before,
        "refused edits write nothing"
    );
}

#[tokio::test]
async fn a_renamed_team_shows_its_new_name_everywhere_at_once() {
    let (api, p) = TestApi::with_project("p").await;
    let team = api.team("core").await;
    api.join(&team, "bob").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let i = issue["id"].as_str().unwrap();
    let r = api
        .put(
            &format!("/issues/{i}/participants/team/{team}"),
            Some(json!({"role": "watcher"})),
        )
        .await;
    assert!(r.status.is_success(), "{:?}", r.body);

    let r = api
        .patch(&format!("/teams/{team}"), json!({"name": "platform"}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["name"], "platform");
    assert_eq!(
        api.get(&format!("/teams/{team}")).await.body["name"],
        "platform"
    );
    let bob = api
        .call(
            ("bob", gridline_local::testing::ALICE.1),
            http::Method::GET,
            "/me/teams",
            None,
        )
        .await;
    assert_eq!(bob.body["items"][0]["name"], "platform", "{:?}", bob.body);
    // The grid names participants from the directory when it is read.
    api.sync().await;
    let got = api.get(&format!("/projects/{p}/issues")).await;
    let named = got.body["items"][0]["participants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "team")
        .cloned()
        .unwrap();
    assert_eq!(named["display_name"], "platform", "{:?}", got.body);
    let r = api
        .patch("/teams/01JDQ5S0000000000000000T99", json!({"name": "x"}))
        .await;
    assert_eq!(r.status, 404);
}

/// On a workspace, renaming a project is an owner's or admin's; a team, any non-viewer's.
#[tokio::test]
async fn renames_follow_the_roles() {
    let api = TestApi::start().await;
    let owner = api.signed_in("ana", "ana@example.com").await;
    let ws = api
        .with_token(
            &owner,
            http::Method::POST,
            "/workspaces",
            Some(json!({"name": "W"})),
        )
        .await
        .body["id"]
        .clone();
    api.with_token(
        &owner,
        http::Method::PUT,
        "/me/workspace",
        Some(json!({"id": ws})),
    )
    .await;
    let owner = api.signed_in("ana", "ana@example.com").await;
    let p = api
        .with_token(
            &owner,
            http::Method::POST,
            "/projects",
            Some(json!({"name": "p"})),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let t = api
        .with_token(
            &owner,
            http::Method::POST,
            "/teams",
            Some(json!({"name": "t"})),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = api
        .with_token(
            &owner,
            http::Method::PUT,
            "/workspace/members/ben",
            Some(json!({"role": "member"})),
        )
        .await;
    assert_eq!(r.status, 204);
    // Ben's token as an operator would have minted it for the workspace's tenant.
    let ben = TestApi::token("ben", ws.as_str().unwrap());
    let r = api
        .with_token(
            &ben,
            http::Method::PATCH,
            &format!("/projects/{p}"),
            Some(json!({"name": "q"})),
        )
        .await;
    assert_eq!(r.status, 403, "a member may not rename a project");
    let r = api
        .with_token(
            &ben,
            http::Method::PATCH,
            &format!("/teams/{t}"),
            Some(json!({"name": "u"})),
        )
        .await;
    assert_eq!(r.status, 200, "teams are not admin business: {:?}", r.body);
}

/// A select field's options edited: a label renamed, one removed, the rest reordered and one
/// added. The field is not sortable until its job has rewritten the issues and rebuilt the
/// column; then the grid sorts by the new order, the issues hold the new labels, a view that
/// named the renamed label follows it, one that named the removed label is gone, and the
/// index is exactly what the records say.
#[tokio::test]
async fn a_select_fields_options_are_renamed_removed_and_reordered_through_its_job() {
    let (api, p) = TestApi::with_project("options").await;
    let f = api
        .field(
            &p,
            json!({"name": "Priority", "type": "select", "options": ["low", "mid", "high"]}),
        )
        .await;
    let mut ids = std::collections::BTreeMap::new();
    for label in ["low", "mid", "high", "mid"] {
        let issue = api
            .issue(&p, json!({"title": label, "fields": {&f: label}}))
            .await;
        ids.entry(label)
            .or_insert_with(Vec::new)
            .push(issue["id"].as_str().unwrap().to_string());
    }
    let none = api.issue(&p, json!({"title": "none"})).await;
    let follows = api
        .post(
            &format!("/projects/{p}/views"),
            json!({"name": "mid", "where": [[&f, "eq", "mid"]]}),
        )
        .await;
    let dies = api
        .post(
            &format!("/projects/{p}/views"),
            json!({"name": "low", "where": [[&f, "in", ["low", "high"]]]}),
        )
        .await;
    assert_eq!((follows.status.as_u16(), dies.status.as_u16()), (201, 201));
    api.sync().await;

    let path = format!("/projects/{p}/fields/{f}");
    let edit = json!({"options": ["high", {"label": "medium", "was": "mid"}, "urgent"]});
    let r = api.patch(&path, edit).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["options"], json!(["high", "medium", "urgent"]));
    assert_eq!(r.body["sortable"], false);
    // Meanwhile: the grid by it and a second such edit are 409 with Retry-After.
    let grid = api.get(&format!("/projects/{p}/issues?sort={f}")).await;
    assert_eq!(grid.status, 409);
    let again = api
        .patch(&path, json!({"options": ["medium", "high", "urgent"]}))
        .await;
    assert_eq!(again.status, 409, "{:?}", again.body);
    assert!(again.header("retry-after").is_some());
    // A rename alone is no change of the options: it goes through meanwhile.
    let renamed = api.patch(&path, json!({"name": "Priority!"})).await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);
    assert_eq!(renamed.body["sortable"], false);

    api.sync().await;
    let field = api.get(&format!("/projects/{p}")).await.body["fields"][0].clone();
    assert_eq!(field["sortable"], true, "{field}");
    for id in &ids["mid"] {
        let issue = api.get(&format!("/issues/{id}")).await;
        assert_eq!(issue.body["fields"][&f], "medium", "{:?}", issue.body);
    }
    let low = api.get(&format!("/issues/{}", ids["low"][0])).await;
    assert!(low.body["fields"].get(&f).is_none(), "{:?}", low.body);
    // The grid by the new order: high, then medium; the issues without a value last.
    let grid = api
        .get(&format!("/projects/{p}/issues?sort={f}&limit=100"))
        .await;
    assert_eq!(grid.status, 200, "{:?}", grid.body);
    let titles: Vec<&str> = grid.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["title"].as_str().unwrap())
        .collect();
    assert_eq!(&titles[..3], ["high", "mid", "mid"]);
    let view = follows.body["id"].as_str().unwrap();
    let got = api.get(&format!("/views/{view}")).await;
    assert_eq!(
        got.body["where"],
        json!([[&f, "eq", "medium"]]),
        "{:?}",
        got.body
    );
    let listed = api.get(&format!("/views/{view}/issues")).await;
    assert_eq!(
        listed.body["items"].as_array().map(Vec::len),
        Some(2),
        "{:?}",
        listed.body
    );
    let gone = dies.body["id"].as_str().unwrap();
    assert_eq!(api.get(&format!("/views/{gone}")).await.status, 404);
    let tenant = gridline::domain::ids::TenantId::parse(gridline_local::testing::ALICE.1).unwrap();
    let project = gridline::domain::ids::ProjectId::parse(&p).unwrap();
    // Sorting by it made its column hot: its fill job runs first.
    api.sync().await;
    api.assert_index_matches_records(&tenant, &[project]).await;
    assert!(none["fields"].get(&f).is_none());

    // A name alone, or labels added at the end, need no job.
    let r = api
        .patch(
            &path,
            json!({"name": "Urgency", "options": ["high", "medium", "urgent", "later"]}),
        )
        .await;
    assert_eq!(
        (r.body["name"].as_str(), r.body["sortable"].as_bool()),
        (Some("Urgency"), Some(true))
    );
}

#[tokio::test]
async fn bad_field_edits_are_problems_and_write_nothing() {
    let (api, p) = TestApi::with_project("bad").await;
    let n = api.field(&p, json!({"name": "n", "type": "number"})).await;
    let s = api
        .field(
            &p,
            json!({"name": "s", "type": "select", "options": ["a", "b"]}),
        )
        .await;
    let before = api.records_snapshot().await;
    for (field, body) in [
        (&n, json!({"type": "text"})),
        (&n, json!({"options": ["x"]})),
        (&n, json!({})),
        (&n, json!({"name": ""})),
        (&s, json!({"options": []})),
        (&s, json!({"options": ["a", {"label": "c", "was": "zzz"}]})),
        (
            &s,
            json!({"options": [{"label": "b", "was": "a"}, {"label": "a", "was": "b"}]}),
        ),
        (&s, json!({"colour": "red"})),
    ] {
        let r = api
            .patch(&format!("/projects/{p}/fields/{field}"), body.clone())
            .await;
        assert_eq!(r.status, 400, "{body}: {:?}", r.body);
        assert_eq!(r.headers["content-type"], "application/problem+json");
    }
    let r = api
        .patch(
            &format!("/projects/{p}/fields/01JDQ5S0000000000000000F99"),
            json!({"name": "x"}),
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(api.records_snapshot().await, before);
    // The same type is no change of type.
    let r = api
        .patch(
            &format!("/projects/{p}/fields/{n}"),
            json!({"type": "number", "name": "m"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// A deleted team is gone at once; within seconds (the indexer, off its item's removal) it
/// leaves every issue it was on, each a new version whose history names no actor, and every
/// member's team list; and the index is exactly what the records say.
#[tokio::test]
async fn a_deleted_team_leaves_its_issues_and_members() {
    let (api, p) = TestApi::with_project("teams").await;
    let team = api.team("core").await;
    api.join(&team, "bob").await;
    api.join(&team, "carol").await;
    let open = api.issue(&p, json!({"title": "open"})).await;
    let closed = api.issue(&p, json!({"title": "closed"})).await;
    let (open, closed) = (open["id"].as_str().unwrap(), closed["id"].as_str().unwrap());
    for i in [open, closed] {
        let r = api
            .put(
                &format!("/issues/{i}/participants/team/{team}"),
                Some(json!({"role": "watcher"})),
            )
            .await;
        assert!(r.status.is_success(), "{:?}", r.body);
    }
    api.patch(&format!("/issues/{closed}"), json!({"state": "closed"}))
        .await;
    api.sync().await;
    let before = api.get(&format!("/issues/{open}")).await.body["version"]
        .as_u64()
        .unwrap();

    assert_eq!(api.delete(&format!("/teams/{team}")).await.status, 204);
    assert_eq!(api.get(&format!("/teams/{team}")).await.status, 404);
    assert_eq!(api.delete(&format!("/teams/{team}")).await.status, 404);
    api.sync().await;

    let bob = ("bob", gridline_local::testing::ALICE.1);
    let teams = api.call(bob, http::Method::GET, "/me/teams", None).await;
    assert_eq!(teams.body["items"], json!([]), "{:?}", teams.body);
    for i in [open, closed] {
        let issue = api.get(&format!("/issues/{i}")).await.body;
        let kinds: Vec<&str> = issue["participants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["user"], "{issue}");
    }
    let issue = api.get(&format!("/issues/{open}")).await.body;
    assert_eq!(issue["version"].as_u64(), Some(before + 1));
    let history = api.get(&format!("/issues/{open}/history?limit=1")).await;
    assert_eq!(
        history.body["items"][0]["actor"],
        serde_json::Value::Null,
        "{:?}",
        history.body
    );
    let tenant = gridline::domain::ids::TenantId::parse(gridline_local::testing::ALICE.1).unwrap();
    let project = gridline::domain::ids::ProjectId::parse(&p).unwrap();
    api.assert_index_matches_records(&tenant, &[project]).await;
    let inbox = api.get(&format!("/teams/{team}/issues")).await;
    assert_eq!(inbox.status, 404);
}

/// Every item of `table` whose keys or attributes name any of `ids`, as text.
async fn naming(api: &TestApi, table: &str, ids: &[&str]) -> Vec<String> {
    api.scan_all(table)
        .await
        .into_iter()
        .map(|item| format!("{item:?}"))
        .filter(|text| ids.iter().any(|id| text.contains(id)))
        .collect()
}

/// A deleted project is `404` at once; its purge job deletes its issues (their comments and
/// history with them, a relation to another project's issue removed there as a system change),
/// its fields, views and tree, and what the index held for it: nothing of it is left in either
/// table, and `gridctl verify` finds nothing to mend.
#[tokio::test]
async fn a_deleted_project_leaves_nothing_in_either_table() {
    let (api, p) = TestApi::with_project("doomed").await;
    let other = api.project("stays").await;
    let f = api
        .field(
            &p,
            json!({"name": "Priority", "type": "select", "options": ["low", "high"]}),
        )
        .await;
    let parent = api
        .issue(&p, json!({"title": "parent", "fields": {&f: "high"}}))
        .await;
    let parent = parent["id"].as_str().unwrap().to_string();
    let child = api
        .issue(&p, json!({"title": "child", "parent_id": parent}))
        .await;
    let child = child["id"].as_str().unwrap().to_string();
    let outside = api.issue(&other, json!({"title": "outside"})).await;
    let outside = outside["id"].as_str().unwrap().to_string();
    let r = api
        .put(
            &format!("/issues/{outside}/relations/relates_to/{parent}"),
            None,
        )
        .await;
    assert!(r.status.is_success(), "{:?}", r.body);
    let r = api
        .post(&format!("/issues/{child}/comments"), json!({"body": "hi"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    api.patch(&format!("/issues/{child}"), json!({"title": "child 2"}))
        .await;
    let view = api
        .post(
            &format!("/projects/{p}/views"),
            json!({"name": "v", "where": [[&f, "eq", "high"]], "group_by": &f}),
        )
        .await;
    assert_eq!(view.status, 201, "{:?}", view.body);
    api.get(&format!("/projects/{p}/issues?sort={f}")).await;
    api.sync().await;
    let before = api.get(&format!("/issues/{outside}")).await.body["version"]
        .as_u64()
        .unwrap();

    assert_eq!(api.delete(&format!("/projects/{p}")).await.status, 204);
    assert_eq!(api.get(&format!("/projects/{p}")).await.status, 404);
    // The grid's instances hold a project's definitions for up to 2 s.
    tokio::time::sleep(gridline::http::fields_cache::FieldsCache::MAX_AGE).await;
    assert_eq!(api.get(&format!("/projects/{p}/issues")).await.status, 404);
    let r = api
        .post(&format!("/projects/{p}/issues"), json!({"title": "late"}))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(api.delete(&format!("/projects/{p}")).await.status, 404);
    api.sync().await;

    assert_eq!(api.get(&format!("/issues/{parent}")).await.status, 404);
    let ids = [p.as_str(), parent.as_str(), child.as_str(), f.as_str()];
    // The other project's issue keeps, in its own record and history, that its relation to
    // the deleted issue was removed: that is its history, not the deleted project's.
    let theirs = |text: &String| !text.contains(&outside);
    let records = naming(&api, &api.stack.tables.records, &ids).await;
    let records: Vec<_> = records.into_iter().filter(theirs).collect();
    assert_eq!(records, Vec::<String>::new(), "records left");
    // Left: each deleted issue's delete marker (its watermark at the deleted version, no
    // data but its id), which keeps a late stream record from bringing it back, and expires.
    let index: Vec<_> = api
        .scan_all(&api.stack.tables.index)
        .await
        .into_iter()
        .filter(|item| {
            let text = format!("{item:?}");
            ids.iter().any(|id| text.contains(id)) && theirs(&text)
        })
        .filter(|item| {
            let marker = item.get("version").and_then(|v| v.as_n().ok())
                == Some(&u64::MAX.to_string())
                && item.contains_key("expires_at");
            !marker
        })
        .map(|item| format!("{item:?}"))
        .collect();
    assert_eq!(index, Vec::<String>::new(), "index items left");
    let outside = api.get(&format!("/issues/{outside}")).await.body;
    assert_eq!(outside["relations"], json!([]), "{outside}");
    assert_eq!(outside["version"].as_u64(), Some(before + 1));
    let names: Vec<String> = api.get("/projects").await.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["stays"]);
    let tenant = gridline::domain::ids::TenantId::parse(gridline_local::testing::ALICE.1).unwrap();
    let stays = gridline::domain::ids::ProjectId::parse(&other).unwrap();
    api.assert_index_matches_records(&tenant, &[stays]).await;
}

/// An issue written to a project as it is deleted (its number taken before the delete, its
/// item put after the purge passed) is deleted by the indexer when it sees it, not indexed.
#[tokio::test]
async fn an_issue_left_by_a_deleted_project_is_deleted_when_indexed() {
    let (api, p) = TestApi::with_project("late").await;
    let issue = api.issue(&p, json!({"title": "late"})).await;
    let id = issue["id"].as_str().unwrap().to_string();
    api.sync().await;
    let item = api
        .scan_all(&api.stack.tables.records)
        .await
        .into_iter()
        .find(|i| {
            i.get("id").and_then(|v| v.as_s().ok()) == Some(&id)
                && i.get("entity")
                    .and_then(|v| v.as_s().ok())
                    .map(String::as_str)
                    == Some("issue")
        })
        .expect("the issue's item");
    assert_eq!(api.delete(&format!("/projects/{p}")).await.status, 204);
    api.sync().await;
    assert_eq!(api.get(&format!("/issues/{id}")).await.status, 404);
    // The late write.
    api.put_record(item).await.unwrap();
    api.sync().await;
    assert_eq!(api.get(&format!("/issues/{id}")).await.status, 404);
    let left: Vec<String> = api
        .scan_all(&api.stack.tables.index)
        .await
        .into_iter()
        .map(|i| format!("{i:?}"))
        .filter(|t| t.contains(&p))
        .collect();
    assert_eq!(left, Vec::<String>::new());
}
