//! Workspaces people run themselves: sign-up → workspace → new token → invite → accept →
//! role change → removal, through the local stack's token minting (the token trigger's logic,
//! under its policy), the real handlers and the IAM guard.

use gridline::http::fields_cache::FieldsCache;
use gridline_local::testing::TestApi;
use http::{Method, StatusCode};
use serde_json::json;

/// Waits out the instances' hold of a role, so a change made a moment ago is seen.
async fn roles_settle() {
    tokio::time::sleep(FieldsCache::MAX_AGE + std::time::Duration::from_millis(100)).await;
}

#[tokio::test]
async fn sign_up_workspace_invite_accept_role_change_and_removal() {
    let api = TestApi::start().await;

    // Ana signs up: her token has no tenant. Tenant routes are 403, the workspace ones work.
    let ana = api.signed_in("ana", "ana@example.com").await;
    let r = api.with_token(&ana, Method::GET, "/projects", None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.body);
    assert_eq!(r.body["status"], 403);
    let r = api
        .with_token(
            &ana,
            Method::POST,
            "/workspaces",
            Some(json!({"name": "Acme"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["role"], "owner");
    let ws = r.body["id"].as_str().unwrap().to_string();
    let r = api
        .with_token(&ana, Method::GET, "/me/workspaces", None)
        .await;
    assert_eq!(
        r.body["items"],
        json!([{"id": ws, "name": "Acme", "role": "owner"}])
    );

    // Until she chooses it, her next token still has no tenant; then it names the workspace.
    assert_eq!(
        api.signed_in("ana", "ana@example.com")
            .await
            .split('.')
            .count(),
        3
    );
    let r = api
        .with_token(&ana, Method::PUT, "/me/workspace", Some(json!({"id": ws})))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    let ana = api.signed_in("ana", "ana@example.com").await;
    let r = api.with_token(&ana, Method::GET, "/workspace", None).await;
    assert_eq!(r.body, json!({"id": ws, "name": "Acme"}));
    let r = api
        .with_token(
            &ana,
            Method::POST,
            "/projects",
            Some(json!({"name": "Roadmap"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let project = r.body["id"].as_str().unwrap().to_string();

    // She invites Ben as a viewer; a second invitation for the same email is 409.
    let r = api
        .with_token(
            &ana,
            Method::POST,
            "/workspace/invitations",
            Some(json!({"email": "Ben@Example.com", "role": "viewer"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["email"], "ben@example.com");
    let invitation = r.body["id"].as_str().unwrap().to_string();
    let again = api
        .with_token(
            &ana,
            Method::POST,
            "/workspace/invitations",
            Some(json!({"email": "ben@example.com", "role": "member"})),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);

    // Ben signs up and sees it; Eve (another email) may not accept it.
    let ben = api.signed_in("ben", "ben@example.com").await;
    let r = api
        .with_token(&ben, Method::GET, "/me/invitations", None)
        .await;
    assert_eq!(r.body["items"][0]["id"], invitation.as_str());
    assert_eq!(
        r.body["items"][0]["workspace"],
        json!({"id": ws, "name": "Acme"})
    );
    let eve = api.signed_in("eve", "eve@example.com").await;
    let accept = format!("/invitations/{invitation}/accept");
    let r = api.with_token(&eve, Method::POST, &accept, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = api.with_token(&ben, Method::POST, &accept, None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    let r = api.with_token(&ben, Method::POST, &accept, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "accepted once");

    // Ben, a viewer, reads but may not write; his profile is his own.
    let r = api
        .with_token(&ben, Method::PUT, "/me/workspace", Some(json!({"id": ws})))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let ben = api.signed_in("ben", "ben@example.com").await;
    let r = api
        .with_token(&ben, Method::GET, &format!("/projects/{project}"), None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let before = api.records_snapshot().await;
    let r = api
        .with_token(
            &ben,
            Method::POST,
            &format!("/projects/{project}/issues"),
            Some(json!({"title": "nope"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.body);
    assert_eq!(
        api.records_snapshot().await,
        before,
        "a refused write writes nothing"
    );
    let r = api
        .with_token(
            &ben,
            Method::PUT,
            "/me",
            Some(json!({"display_name": "Ben"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api
        .with_token(&ben, Method::GET, "/workspace/members", None)
        .await;
    assert_eq!(
        r.body["items"],
        json!([
            {"id": "ana", "role": "owner", "display_name": null},
            {"id": "ben", "role": "viewer", "display_name": "Ben"}
        ])
    );

    // Made a member, Ben writes; made an admin, he manages invitations but not owners.
    let r = api
        .with_token(
            &ana,
            Method::PUT,
            "/workspace/members/ben",
            Some(json!({"role": "admin"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    roles_settle().await;
    let r = api
        .with_token(
            &ben,
            Method::POST,
            &format!("/projects/{project}/issues"),
            Some(json!({"title": "yes"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let r = api
        .with_token(&ben, Method::GET, "/workspace/invitations", None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api
        .with_token(
            &ben,
            Method::PUT,
            "/workspace/members/ana",
            Some(json!({"role": "member"})),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::FORBIDDEN,
        "an admin cannot unmake an owner"
    );
    let r = api
        .with_token(
            &ben,
            Method::PUT,
            "/workspace/members/ben",
            Some(json!({"role": "owner"})),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::FORBIDDEN,
        "an admin cannot make an owner"
    );

    // The last owner can neither leave nor step down.
    let r = api
        .with_token(&ana, Method::DELETE, "/workspace/members/ana", None)
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    let r = api
        .with_token(
            &ana,
            Method::PUT,
            "/workspace/members/ana",
            Some(json!({"role": "admin"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);

    // Removed, Ben is refused on every route within seconds, whatever his token says.
    let r = api
        .with_token(&ana, Method::DELETE, "/workspace/members/ben", None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    roles_settle().await;
    for path in [
        "/projects".to_string(),
        format!("/projects/{project}"),
        "/workspace".into(),
    ] {
        let r = api.with_token(&ben, Method::GET, &path, None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {:?}", r.body);
    }
    // And his next token has no tenant: the choice no longer counts.
    let ben = api.signed_in("ben", "ben@example.com").await;
    let r = api
        .with_token(&ben, Method::GET, "/me/workspaces", None)
        .await;
    assert_eq!(r.body["items"], json!([]));
}

#[tokio::test]
async fn operator_tenants_keep_working_and_have_no_workspace_routes() {
    let (api, _p) = TestApi::with_project("ops").await;
    // Every user an operator's token names may do everything, as before workspaces.
    let bob = TestApi::token("bob", gridline_local::testing::ALICE.1);
    let r = api
        .with_token(&bob, Method::POST, "/projects", Some(json!({"name": "x"})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    for path in ["/workspace", "/workspace/members", "/workspace/invitations"] {
        assert_eq!(api.get(path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    // Choosing a workspace one is not in is 403, and writes nothing.
    let r = api
        .put(
            "/me/workspace",
            Some(json!({"id": "01JNOTAWORKSPACE0000000000"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn bad_workspace_input_is_a_problem_and_writes_nothing() {
    let api = TestApi::start().await;
    let ana = api.signed_in("ana", "ana@example.com").await;
    let before = api.records_snapshot().await;
    for (method, path, body) in [
        (Method::POST, "/workspaces", json!({"name": ""})),
        (
            Method::POST,
            "/workspaces",
            json!({"name": "x", "extra": 1}),
        ),
        (Method::PUT, "/me/workspace", json!({})),
    ] {
        let r = api.with_token(&ana, method, path, Some(body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {:?}", r.body);
        assert_eq!(r.headers["content-type"], "application/problem+json");
    }
    assert_eq!(api.records_snapshot().await, before);
    let ws = api
        .with_token(
            &ana,
            Method::POST,
            "/workspaces",
            Some(json!({"name": "W"})),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.with_token(&ana, Method::PUT, "/me/workspace", Some(json!({"id": ws})))
        .await;
    let ana = api.signed_in("ana", "ana@example.com").await;
    let before = api.records_snapshot().await;
    for body in [
        json!({"email": "not-an-email", "role": "member"}),
        json!({"email": "a@b.org", "role": "boss"}),
    ] {
        let r = api
            .with_token(&ana, Method::POST, "/workspace/invitations", Some(body))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    }
    let r = api
        .with_token(
            &ana,
            Method::PUT,
            "/workspace/members/zed",
            Some(json!({"role": "x"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(api.records_snapshot().await, before);
    // An unverified email sees no invitations and accepts none.
    let unverified = gridline::auth::mint_claims(
        gridline::auth::Claims {
            sub: "ben".into(),
            email: Some("a@b.org".into()),
            email_verified: Some(false),
            ..Default::default()
        },
        gridline_local::testing::TEST_JWT_SECRET,
        60,
    );
    let r = api
        .with_token(&unverified, Method::GET, "/me/invitations", None)
        .await;
    assert_eq!(r.body["items"], json!([]));
}

#[tokio::test]
async fn creating_workspaces_is_bounded_idempotent_and_head_asks_what_get_asks() {
    let api = TestApi::start().await;
    let ana = api.signed_in("ana", "ana@example.com").await;
    // The same Idempotency-Key twice: one workspace, the same answer.
    let body = json!({"name": "Once"}).to_string();
    let key = [("idempotency-key", "ws-1")];
    let first = api
        .send(Method::POST, "/workspaces", Some(&ana), Some(&body), &key)
        .await;
    let again = api
        .send(Method::POST, "/workspaces", Some(&ana), Some(&body), &key)
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    assert_eq!(again.body, first.body);
    let mine = api
        .with_token(&ana, Method::GET, "/me/workspaces", None)
        .await;
    assert_eq!(mine.body["items"].as_array().unwrap().len(), 1);
    // At most MAX_WORKSPACES_CREATED each.
    let max = gridline::store::records::workspaces::MAX_WORKSPACES_CREATED;
    for n in 1..max {
        let r = api
            .with_token(
                &ana,
                Method::POST,
                "/workspaces",
                Some(json!({"name": format!("w{n}")})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{n}: {:?}", r.body);
    }
    let r = api
        .with_token(
            &ana,
            Method::POST,
            "/workspaces",
            Some(json!({"name": "one too many"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    let mine = api
        .with_token(&ana, Method::GET, "/me/workspaces", None)
        .await;
    assert_eq!(mine.body["items"].as_array().unwrap().len(), max as usize);

    // HEAD on a workspace's route by someone who is not a member: refused as GET is.
    let ws = first.body["id"].as_str().unwrap();
    let eve = TestApi::token("eve", ws);
    let r = api
        .send(Method::HEAD, "/projects", Some(&eve), None, &[])
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
}

/// A role change decided on a role that changed meanwhile is not applied.
#[tokio::test]
async fn a_role_change_holds_only_while_the_role_it_was_decided_on_does() {
    use gridline::domain::role::Role;
    use gridline::store::records::workspaces::{MembershipError, Workspace};
    let api = TestApi::start().await;
    let records = api.stack.state.store.records();
    let ws = Workspace {
        id: gridline::domain::ids::TenantId::new_workspace(),
        name: "W".into(),
    };
    let ana = gridline::domain::ids::UserId::parse("ana").unwrap();
    let ben = gridline::domain::ids::UserId::parse("ben").unwrap();
    assert!(
        records
            .create_workspace(&ws, &ana, "2026-11-27T00:00:00.000Z")
            .await
            .unwrap()
    );
    records
        .set_role(&ws, &ben, Role::Member, None)
        .await
        .unwrap();
    // Decided on "not a member" while ben is one: refused, and ben stays a member.
    let stale = records.set_role(&ws, &ben, Role::Viewer, None).await;
    assert!(matches!(stale, Err(MembershipError::Changed)), "{stale:?}");
    let stale = records
        .remove_from_workspace(&ws.id, &ben, Role::Admin)
        .await;
    assert!(matches!(stale, Err(MembershipError::Changed)), "{stale:?}");
    assert_eq!(
        records.role_of(&ws.id, &ben).await.unwrap(),
        Some(Role::Member)
    );
    // Owners and admins are one range of the ranked index.
    records
        .set_role(&ws, &ben, Role::Admin, Some(Role::Member))
        .await
        .unwrap();
    let admins: Vec<_> = records.workspace_admins(&ws.id).await.unwrap();
    assert_eq!(
        admins.iter().map(|m| m.role).collect::<Vec<_>>(),
        [Role::Owner, Role::Admin]
    );
    // The last owner stays.
    let last = records
        .remove_from_workspace(&ws.id, &ana, Role::Owner)
        .await;
    assert!(matches!(last, Err(MembershipError::LastOwner)), "{last:?}");
}
