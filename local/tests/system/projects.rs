//! Projects and fields through the real router against the embedded engine.

use gridline_local::testing::TestApi;
use http::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn a_created_project_can_be_read_back_with_its_fields() {
    let api = TestApi::start().await;
    let r = api.post("/projects", json!({"name": "Apollo"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let id = r.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        r.header("location"),
        Some(format!("/projects/{id}").as_str())
    );
    assert!(r.body["created_at"].as_str().unwrap().ends_with('Z'));

    let f = api
        .field(
            &id,
            json!({"name": "Priority", "type": "select", "options": ["low", "high"]}),
        )
        .await;
    let r = api.get(&format!("/projects/{id}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["name"], "Apollo");
    assert_eq!(
        r.body["fields"],
        json!([{"id": f, "name": "Priority", "type": "select", "options": ["low", "high"], "sortable": true}])
    );
}

#[tokio::test]
async fn projects_are_listed_by_name_case_insensitively_across_pages() {
    let api = TestApi::start().await;
    for name in ["delta", "Alpha", "charlie", "Bravo", "echo"] {
        api.project(name).await;
    }
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/projects?limit=2&cursor={c}"),
            None => "/projects?limit=2".to_string(),
        };
        let r = api.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        let items = r.body["items"].as_array().unwrap();
        assert!(items.len() <= 2);
        names.extend(
            items
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_string()),
        );
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(names, ["Alpha", "Bravo", "charlie", "delta", "echo"]);
}

#[tokio::test]
async fn limit_outside_one_to_a_hundred_is_rejected() {
    let api = TestApi::start().await;
    for limit in ["0", "101", "-1", "ten"] {
        let r = api.get(&format!("/projects?limit={limit}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "limit={limit}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert_eq!(r.body["errors"][0]["field"], "limit");
    }
}

#[tokio::test]
async fn fields_of_every_type_are_created_listed_and_deleted() {
    let (api, p) = TestApi::with_project("p").await;
    let mut ids = Vec::new();
    for t in ["text", "number", "date", "datetime"] {
        ids.push(api.field(&p, json!({"name": t, "type": t})).await);
    }
    ids.push(
        api.field(
            &p,
            json!({"name": "sel", "type": "select", "options": ["a", "b"]}),
        )
        .await,
    );

    let r = api.get(&format!("/projects/{p}/fields?limit=3")).await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 3);
    let cursor = r.body["next_cursor"].as_str().unwrap().to_string();
    let r = api
        .get(&format!("/projects/{p}/fields?limit=3&cursor={cursor}"))
        .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    assert!(r.body["next_cursor"].is_null());

    let path = format!("/projects/{p}/fields/{}", ids[0]);
    assert_eq!(api.delete(&path).await.status, StatusCode::NO_CONTENT);
    assert_eq!(api.delete(&path).await.status, StatusCode::NOT_FOUND);
    let r = api.get(&format!("/projects/{p}")).await;
    assert_eq!(r.body["fields"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn a_cursor_is_bound_to_its_route_and_parameters() {
    let (api, p1) = TestApi::with_project("one").await;
    let p2 = api.project("two").await;
    for p in [&p1, &p2] {
        for i in 0..3 {
            api.field(p, json!({"name": format!("f{i}"), "type": "text"}))
                .await;
        }
    }
    let r = api.get(&format!("/projects/{p1}/fields?limit=1")).await;
    let cursor = r.body["next_cursor"].as_str().unwrap().to_string();
    // Same route, other project: 400.
    let r = api
        .get(&format!("/projects/{p2}/fields?cursor={cursor}"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // Other route: 400.
    let r = api.get(&format!("/projects?cursor={cursor}")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // Altered: 400.
    let altered = format!("x{}", &cursor[1..]);
    let r = api
        .get(&format!("/projects/{p1}/fields?cursor={altered}"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // A different limit with the same cursor is fine.
    let r = api
        .get(&format!("/projects/{p1}/fields?limit=5&cursor={cursor}"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn the_four_hundred_and_first_field_is_a_conflict() {
    let (api, p) = TestApi::with_project("big").await;
    for i in 0..400 {
        api.field(&p, json!({"name": format!("f{i}"), "type": "number"}))
            .await;
    }
    let before = api.record_count().await;
    let r = api
        .post_field(&p, json!({"name": "one more", "type": "text"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(api.record_count().await, before);
    // The whole collection still comes back in one GET.
    let r = api.get(&format!("/projects/{p}")).await;
    assert_eq!(r.body["fields"].as_array().unwrap().len(), 400);
}

#[tokio::test]
async fn unknown_projects_and_routes_are_not_found_as_problems() {
    let api = TestApi::start().await;
    for path in [
        "/projects/01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "/projects/not-an-id",
        "/nowhere",
    ] {
        let r = api.get(path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert_eq!(r.body["status"], 404);
    }
    let r = api.get("/projects/01ARZ3NDEKTSV4RRFFQ69G5FAV/fields").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = api.put("/projects", None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(
        r.header("allow")
            .is_some_and(|a| a.contains("GET") && a.contains("POST"))
    );
}

#[tokio::test]
async fn requests_without_a_valid_token_are_unauthorized() {
    let api = TestApi::start().await;
    let r = api.send(Method::GET, "/projects", None, None, &[]).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let forged = gridline::auth::mint_hs256("alice", "acme", b"wrong-secret", 60);
    let r = api
        .send(Method::GET, "/projects", Some(&forged), None, &[])
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = api
        .send(
            Method::POST,
            "/projects",
            None,
            Some(r#"{"name":"x"}"#),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(api.record_count().await, 0);
}
