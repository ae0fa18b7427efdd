//! People, teams, participants and inboxes, end to end through the API, with the indexer fed
//! from the engine's real stream.

use std::collections::{BTreeMap, BTreeSet};

use gridline::domain::ids::{ProjectId, TeamId, UserId};
use gridline_local::testing::{ALICE, TestApi};
use http::{Method, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::{acme, delete_twice};

const BOB: (&str, &str) = ("bob", "acme");

/// Adds `user` to `team`, which must succeed.
async fn join(api: &TestApi, team: &str, user: &str) {
    assert_eq!(api.join(team, user).await, StatusCode::NO_CONTENT);
}

/// Every item of an inbox as `(issue id, via)`, following cursors with pages of `limit`.
async fn page_all(
    api: &TestApi,
    who: (&str, &str),
    path: &str,
    limit: usize,
) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut p = format!("{path}{sep}limit={limit}");
        if let Some(c) = &cursor {
            p.push_str(&format!("&cursor={c}"));
        }
        let r = api.call(who, Method::GET, &p, None).await;
        assert_eq!(r.status, StatusCode::OK, "{p}: {}", r.text);
        let items = r.body["items"].as_array().unwrap();
        assert!(items.len() <= limit);
        for i in items {
            out.push((i["id"].as_str().unwrap().to_string(), i["via"].clone()));
        }
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
    panic!("paging did not end")
}

#[tokio::test]
async fn memberships_are_written_in_both_directions_or_not_at_all() {
    let api = TestApi::start().await;
    let t = api.team("Platform").await;
    api.call(
        BOB,
        Method::PUT,
        "/me",
        Some(json!({"display_name": "Bob B."})),
    )
    .await;
    let before = api.record_count().await;
    join(&api, &t, "bob").await;
    // Both edges, and the user's team count (created by their first membership).
    assert_eq!(api.record_count().await, before + 3);
    join(&api, &t, "bob").await; // idempotent
    assert_eq!(api.record_count().await, before + 3);

    let r = api.get(&format!("/teams/{t}/members")).await;
    assert_eq!(
        r.body["items"],
        json!([{"id": "bob", "display_name": "Bob B."}])
    );
    let r = api.call(BOB, Method::GET, "/me/teams", None).await;
    assert_eq!(r.body["items"][0]["name"], "Platform");
    assert_eq!(
        api.get("/users/bob/teams").await.body["items"][0]["id"],
        t.as_str()
    );

    let r = api.delete(&format!("/teams/{t}/members/bob")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    // The edges are gone; the count stays, at zero.
    assert_eq!(api.record_count().await, before + 1);
    assert_eq!(
        api.get(&format!("/teams/{t}/members")).await.body["items"],
        json!([])
    );
    assert_eq!(api.get("/users/bob/teams").await.body["items"], json!([]));
    let r = api.delete(&format!("/teams/{t}/members/bob")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // A team that does not exist: the transaction's condition fails and nothing is written.
    let ghost = gridline::store::Team {
        id: TeamId::parse("01JDQ5S0000000000000000X99").unwrap(),
        name: "ghost".into(),
        created_at: "2026-11-21T00:00:00.000Z".into(),
    };
    let before = api.records_snapshot().await;
    assert!(
        !api.stack
            .state
            .store
            .records()
            .add_member(&acme(), &ghost, &UserId::parse("bob").unwrap())
            .await
            .unwrap()
    );
    assert_eq!(api.records_snapshot().await, before);
    let r = api
        .put(&format!("/teams/{}/members/bob", ghost.id), None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn profiles_start_without_a_name() {
    let api = TestApi::start().await;
    assert_eq!(
        api.get("/me").await.body,
        json!({"id": "alice", "display_name": null})
    );
    let r = api
        .put("/me", Some(json!({"display_name": "Alice A."})))
        .await;
    assert_eq!(r.body, json!({"id": "alice", "display_name": "Alice A."}));
    assert_eq!(api.get("/me").await.body["display_name"], "Alice A.");
    for bad in [
        json!({}),
        json!({"display_name": ""}),
        json!({"display_name": 5}),
        json!({"display_name": "a", "x": 1}),
    ] {
        assert_eq!(
            api.put("/me", Some(bad)).await.status,
            StatusCode::BAD_REQUEST
        );
    }
}

#[tokio::test]
async fn a_participant_has_one_role_and_participant_changes_are_issue_changes() {
    let (api, p) = TestApi::with_project("p").await;
    let issue = api.issue(&p, json!({"title": "t"})).await;
    let path = format!("/issues/{}", issue["id"].as_str().unwrap());
    let r = api
        .put(
            &format!("{path}/participants/user/bob"),
            Some(json!({"role": "watcher"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["version"], 2);
    let r = api
        .put(
            &format!("{path}/participants/user/bob"),
            Some(json!({"role": "assignee"})),
        )
        .await;
    assert_eq!(
        r.body["participants"],
        json!([{"kind": "user", "id": "alice", "role": "reporter"}, {"kind": "user", "id": "bob", "role": "assignee"}])
    );
    assert_eq!(r.body["version"], 3);
    assert!(r.body["updated_at"].as_str() > issue["updated_at"].as_str());
    delete_twice(&api, &format!("{path}/participants/user/bob")).await;
    assert_eq!(
        api.get(&path).await.body["participants"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Teams must exist; roles and kinds must be known; the issue must exist.
    for (target, role, status) in [
        (
            format!("{path}/participants/team/01JDQ5S0000000000000000X99"),
            "watcher",
            StatusCode::BAD_REQUEST,
        ),
        (
            format!("{path}/participants/user/bob"),
            "boss",
            StatusCode::BAD_REQUEST,
        ),
        (
            format!("{path}/participants/robot/x"),
            "watcher",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/issues/01JDQ5S0000000000000000X99/participants/user/bob".to_string(),
            "watcher",
            StatusCode::NOT_FOUND,
        ),
    ] {
        let r = api.put(&target, Some(json!({"role": role}))).await;
        assert_eq!(r.status, status, "{target}");
    }
}

#[tokio::test]
async fn grid_items_show_participants_with_their_names() {
    let api = TestApi::start().await;
    let t = api.team("Platform").await;
    api.put("/me", Some(json!({"display_name": "Alice A."})))
        .await;
    let p = api.project("p").await;
    api.issue(&p, json!({"title": "t", "participants": [{"kind": "team", "id": t, "role": "watcher"}, {"kind": "user", "id": "nobody", "role": "assignee"}]}))
        .await;
    api.sync().await;
    let r = api.get(&format!("/projects/{p}/issues")).await;
    let ps = &r.body["items"][0]["participants"];
    // Participants are listed users first, then teams, each by id.
    assert_eq!(
        ps[0],
        json!({"kind": "user", "id": "alice", "role": "reporter", "display_name": "Alice A."})
    );
    assert_eq!(
        ps[1],
        json!({"kind": "user", "id": "nobody", "role": "assignee"}),
        "no name: no display_name"
    );
    assert_eq!(
        ps[2],
        json!({"kind": "team", "id": t, "role": "watcher", "display_name": "Platform"})
    );
    // A rename shows at once.
    api.put("/me", Some(json!({"display_name": "Al"}))).await;
    let r = api.get(&format!("/projects/{p}/issues")).await;
    assert_eq!(r.body["items"][0]["participants"][0]["display_name"], "Al");
}

/// Past the size a page reads whole (250 entries), names come from a BatchGetItem of the
/// page's own directory entries: still every name, still current, and another tenant's
/// directory is never read.
#[tokio::test]
async fn a_large_directory_still_names_everyone() {
    let api = TestApi::start().await;
    let users: Vec<String> = (0..gridline::store::directory::READ_WHOLE_MAX_ENTRIES + 10)
        .map(|i| format!("u{i:03}"))
        .collect();
    for u in &users {
        let r = api
            .call(
                (u, "acme"),
                Method::PUT,
                "/me",
                Some(json!({"display_name": format!("Name {u}")})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    // Another tenant's same user id has its own name.
    api.call(
        ("u001", "globex"),
        Method::PUT,
        "/me",
        Some(json!({"display_name": "Globex one"})),
    )
    .await;
    let p = api.project("p").await;
    let participants: Vec<_> = ["u001", "u259"]
        .iter()
        .map(|u| json!({"kind": "user", "id": u, "role": "assignee"}))
        .collect();
    api.issue(&p, json!({"title": "t", "participants": participants}))
        .await;
    api.sync().await;
    let names = |r: &gridline_local::testing::Reply| -> Vec<Value> {
        r.body["items"][0]["participants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["display_name"].clone())
            .collect()
    };
    let r = api.get(&format!("/projects/{p}/issues")).await;
    // Users by id: alice (the reporter, who never named herself), u001, u259.
    assert_eq!(
        names(&r),
        vec![Value::Null, json!("Name u001"), json!("Name u259")]
    );
    api.call(
        ("u259", "acme"),
        Method::PUT,
        "/me",
        Some(json!({"display_name": "Renamed"})),
    )
    .await;
    let r = api.get(&format!("/projects/{p}/issues")).await;
    assert!(names(&r).contains(&json!("Renamed")), "{:?}", names(&r));
}

#[tokio::test]
async fn inbox_routes_are_tenant_isolated_and_validate_their_parameters() {
    let api = TestApi::start().await;
    let t = api.team("Platform").await;
    join(&api, &t, "alice").await;
    let p = api.project("p").await;
    let issue = api
        .issue(
            &p,
            json!({"title": "t", "participants": [{"kind": "team", "id": t, "role": "watcher"}]}),
        )
        .await;
    api.sync().await;
    let mallory = ("alice", "evilcorp"); // the same user id in another tenant
    let before = api.records_snapshot().await;
    let id = issue["id"].as_str().unwrap();
    let path = format!("/issues/{id}/participants/user/mallory");
    let r = api
        .call(
            mallory,
            Method::PUT,
            &path,
            Some(json!({"role": "watcher"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let path = format!("/issues/{id}/participants/team/{t}");
    assert_eq!(
        api.call(mallory, Method::DELETE, &path, None).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(api.records_snapshot().await, before);
    for path in [
        format!("/teams/{t}"),
        format!("/teams/{t}/members"),
        format!("/teams/{t}/issues"),
    ] {
        assert_eq!(
            api.call(mallory, Method::GET, &path, None).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    assert_eq!(
        api.call(
            mallory,
            Method::PUT,
            &format!("/teams/{t}/members/alice"),
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.call(
            mallory,
            Method::DELETE,
            &format!("/teams/{t}/members/alice"),
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    for path in [
        "/me/issues",
        "/me/teams/issues",
        "/me/teams",
        "/users/alice/teams",
    ] {
        let r = api.call(mallory, Method::GET, path, None).await;
        assert_eq!(r.body["items"], json!([]), "{path}");
    }
    assert_eq!(
        api.call(mallory, Method::GET, "/me", None).await.body["display_name"],
        Value::Null
    );
    // Alice in acme sees both.
    assert_eq!(
        api.get("/me/issues").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        api.get("/me/teams/issues").await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    for bad in [
        "/me/issues?role=boss",
        "/me/issues?state=done",
        "/me/teams/issues?colour=red",
        "/me/issues?limit=101",
    ] {
        assert_eq!(api.get(bad).await.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    // A /me cursor is bound to the caller.
    api.issue(&p, json!({"title": "u"})).await;
    api.sync().await;
    let c = api.get("/me/issues?limit=1").await.body["next_cursor"]
        .as_str()
        .unwrap()
        .to_string();
    let r = api
        .call(BOB, Method::GET, &format!("/me/issues?cursor={c}"), None)
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

/// What a participant entry of the model looks like.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct P {
    kind: &'static str,
    id: String,
    role: &'static str,
}

/// Random issue, participant and membership changes through the API; then the participation
/// copies equal a recomputation from the records, and every inbox, paged with small pages,
/// equals a reference computed from the issues.
#[tokio::test]
async fn random_histories_give_exact_inboxes() {
    for seed in [5u64, 6, 7] {
        let mut rng = StdRng::seed_from_u64(seed);
        let (api, p) = TestApi::with_project("p").await;
        let teams = [
            api.team("T1").await,
            api.team("T2").await,
            api.team("T3").await,
        ];
        let users = ["alice", "bob", "carol"];
        let roles = ["assignee", "reporter", "watcher"];
        let mut members: BTreeSet<(String, String)> = BTreeSet::new();
        let mut live: Vec<String> = Vec::new();
        for step in 0..70 {
            match rng.gen_range(0..10) {
                0..=2 => {
                    let mut ps = Vec::new();
                    for t in &teams {
                        if rng.gen_bool(0.4) {
                            ps.push(json!({"kind": "team", "id": t, "role": roles[rng.gen_range(0..3)]}));
                        }
                    }
                    if rng.gen_bool(0.5) {
                        ps.push(json!({"kind": "user", "id": "bob", "role": roles[rng.gen_range(0..3)]}));
                    }
                    let state = if rng.gen_bool(0.8) { "open" } else { "closed" };
                    let i = api.issue(&p, json!({"title": format!("i{step}"), "state": state, "participants": ps})).await;
                    live.push(i["id"].as_str().unwrap().to_string());
                }
                3..=5 if !live.is_empty() => {
                    let id = &live[rng.gen_range(0..live.len())];
                    let (kind, who) = if rng.gen_bool(0.5) {
                        ("team", teams[rng.gen_range(0..3)].clone())
                    } else {
                        ("user", users[rng.gen_range(0..3)].to_string())
                    };
                    let path = format!("/issues/{id}/participants/{kind}/{who}");
                    if rng.gen_bool(0.7) {
                        let r = api
                            .put(&path, Some(json!({"role": roles[rng.gen_range(0..3)]})))
                            .await;
                        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
                    } else {
                        api.delete(&path).await;
                    }
                }
                6 if !live.is_empty() => {
                    let id = &live[rng.gen_range(0..live.len())];
                    let state = if rng.gen_bool(0.5) { "open" } else { "closed" };
                    api.patch(
                        &format!("/issues/{id}"),
                        json!({"state": state, "title": format!("s{step}")}),
                    )
                    .await;
                }
                7 if !live.is_empty() => {
                    let id = live.swap_remove(rng.gen_range(0..live.len()));
                    api.delete(&format!("/issues/{id}")).await;
                }
                _ => {
                    let t = teams[rng.gen_range(0..3)].clone();
                    let u = users[rng.gen_range(0..2)].to_string();
                    if members.contains(&(t.clone(), u.clone())) {
                        api.delete(&format!("/teams/{t}/members/{u}")).await;
                        members.remove(&(t, u));
                    } else {
                        join(&api, &t, &u).await;
                        members.insert((t, u));
                    }
                }
            }
            if rng.gen_bool(0.25) {
                api.sync().await;
            }
        }
        api.sync().await;
        api.assert_index_matches_records(&acme(), &[ProjectId::parse(&p).unwrap()])
            .await;

        // The reference: every issue with its participants, from the API.
        let mut issues: Vec<(String, String, String, Vec<P>)> = Vec::new(); // (sort key, id, state, participants)
        for id in &live {
            let i = api.get(&format!("/issues/{id}")).await.body;
            let ps = i["participants"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| P {
                    kind: if x["kind"] == "team" { "team" } else { "user" },
                    id: x["id"].as_str().unwrap().to_string(),
                    role: roles.into_iter().find(|r| x["role"] == *r).unwrap(),
                })
                .collect();
            let sk = format!("{}#{}", i["updated_at"].as_str().unwrap(), id);
            issues.push((sk, id.clone(), i["state"].as_str().unwrap().to_string(), ps));
        }
        issues.sort_by(|a, b| b.0.cmp(&a.0));
        let reference = |state: &str, pick: &dyn Fn(&P) -> bool| -> Vec<(String, Value)> {
            issues
                .iter()
                .filter(|i| i.2 == state)
                .filter_map(|i| {
                    let via: Vec<Value> =
                        i.3.iter()
                            .filter(|p| pick(p))
                            .map(|p| json!({"kind": p.kind, "id": p.id, "role": p.role}))
                            .collect();
                    (!via.is_empty()).then(|| (i.1.clone(), Value::Array(via)))
                })
                .collect()
        };
        for state in ["open", "closed"] {
            for user in ["alice", "bob"] {
                let who = (user, "acme");
                let limit = rng.gen_range(1..4);
                let expected = reference(state, &|p| p.kind == "user" && p.id == user);
                assert_eq!(
                    page_all(&api, who, &format!("/me/issues?state={state}"), limit).await,
                    expected,
                    "seed {seed} {user} {state}"
                );
                let wanted = ["assignee", "watcher"];
                let expected = reference(state, &|p| {
                    p.kind == "user" && p.id == user && wanted.contains(&p.role)
                });
                assert_eq!(
                    page_all(
                        &api,
                        who,
                        &format!("/me/issues?state={state}&role=watcher,assignee"),
                        limit
                    )
                    .await,
                    expected,
                    "seed {seed} {user} {state} roles"
                );
                let mine: BTreeMap<&str, ()> = members
                    .iter()
                    .filter(|m| m.1 == user)
                    .map(|m| (m.0.as_str(), ()))
                    .collect();
                let expected = reference(state, &|p| {
                    p.kind == "team" && mine.contains_key(p.id.as_str())
                });
                let got =
                    page_all(&api, who, &format!("/me/teams/issues?state={state}"), limit).await;
                assert_eq!(
                    got, expected,
                    "seed {seed} {user} {state} teams (member of {mine:?})"
                );
            }
            for t in &teams {
                let expected = reference(state, &|p| p.kind == "team" && &p.id == t);
                assert_eq!(
                    page_all(&api, ALICE, &format!("/teams/{t}/issues?state={state}"), 2).await,
                    expected,
                    "seed {seed} team {state}"
                );
            }
        }
    }
}
