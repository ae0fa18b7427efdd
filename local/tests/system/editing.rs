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
