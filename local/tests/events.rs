//! Every file in `events/` runs through its function's handler — the same parsing
//! `lambda_http` does for a real invocation, claims from the request context — against the
//! embedded engine with the fixtures the events name, and gets the status its manifest says.

use std::collections::BTreeMap;

use gridline::auth::AuthMode;
use gridline::domain::values::{FieldDef, FieldType, StoredValue};
use gridline::domain::{IssueState, NewIssue, Participant, ParticipantKind, Project, Role};
use gridline::http::{AppState, Group, router};
use gridline_local::testing::{TestApi, into_reply};
use serde::Deserialize;
use tower::ServiceExt;

const TENANT: &str = "acme";
const PROJECT: &str = "01JDQ5S0000000000000000P01";
const FIELD: &str = "01JDQ5S0000000000000000F01";
const ISSUE: &str = "01JDQ5S0000000000000000N01";
const ISSUE_TO_DELETE: &str = "01JDQ5S0000000000000000N02";
const TEAM: &str = "01JDQ5S0000000000000000T01";
const SUB: &str = "7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6";

#[derive(Deserialize)]
struct Entry {
    file: String,
    function: String,
    /// HTTP events: the status.
    status: Option<u16>,
    /// Stream events: the sequence numbers reported as failures.
    batch_item_failures: Option<Vec<String>>,
    /// Stream events: another event to handle first.
    after: Option<String>,
    writes: Option<usize>,
    writes_at_least: Option<usize>,
    units: Option<usize>,
}

async fn handle_stream_event(
    api: &TestApi,
    file: &str,
) -> (Vec<String>, gridline::indexer::Metrics) {
    let text = std::fs::read_to_string(events_dir().join(file)).unwrap();
    let event: aws_lambda_events::event::dynamodb::Event =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (response, metrics) = api.stack.indexer().handle(event).await;
    let failures = response
        .batch_item_failures
        .into_iter()
        .filter_map(|f| f.item_identifier)
        .collect();
    (failures, metrics)
}

fn events_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events")
}

async fn seed(api: &TestApi) {
    let store = &api.stack.state.store;
    let project = Project {
        id: PROJECT.into(),
        name: "Apollo".into(),
        created_at: "2026-11-21T20:42:03.123Z".into(),
    };
    store.create_project(TENANT, &project).await.unwrap();
    let field = FieldDef {
        id: FIELD.into(),
        name: "Points".into(),
        field_type: FieldType::Number,
        options: None,
    };
    store.create_field(TENANT, PROJECT, &field).await.unwrap();
    let team = gridline::store::Team {
        id: TEAM.into(),
        name: "Platform".into(),
        created_at: "2026-11-21T20:42:03.123Z".into(),
    };
    store.create_team(TENANT, &team).await.unwrap();
    assert!(store.add_member(TENANT, &team, SUB).await.unwrap());
    for (last, id) in [(0, ISSUE), (1, ISSUE_TO_DELETE)] {
        let new = NewIssue {
            title: "Seeded".into(),
            state: IssueState::Open,
            description: Some("seeded description".into()),
            fields: BTreeMap::from([(FIELD.to_string(), StoredValue::N("5".parse().unwrap()))]),
            participants: vec![Participant {
                kind: ParticipantKind::User,
                id: SUB.into(),
                role: Role::Reporter,
            }],
        };
        store
            .create_issue(
                TENANT,
                PROJECT,
                last,
                new,
                id.into(),
                "2026-11-21T20:42:03.123Z".into(),
            )
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn every_sample_event_gets_its_expected_status_through_its_handler() {
    let manifest: Vec<Entry> =
        serde_json::from_str(&std::fs::read_to_string(events_dir().join("manifest.json")).unwrap())
            .unwrap();

    // No event goes untested.
    let mut on_disk: Vec<String> = std::fs::read_dir(events_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n != "manifest.json")
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = manifest.iter().map(|e| e.file.clone()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "every file in events/ must be in events/manifest.json"
    );

    for entry in manifest {
        let api = TestApi::start().await;
        seed(&api).await;
        if let Some(expected) = &entry.batch_item_failures {
            assert_eq!(entry.function, "IndexerFunction", "{}", entry.file);
            if let Some(first) = &entry.after {
                assert_eq!(
                    handle_stream_event(&api, first).await.0,
                    Vec::<String>::new(),
                    "{first}"
                );
            }
            let (failures, metrics) = handle_stream_event(&api, &entry.file).await;
            assert_eq!(&failures, expected, "{}", entry.file);
            if let Some(w) = entry.writes {
                assert_eq!(metrics.writes, w, "{}: {metrics:?}", entry.file);
            }
            if let Some(w) = entry.writes_at_least {
                assert!(metrics.writes >= w, "{}: {metrics:?}", entry.file);
            }
            if let Some(u) = entry.units {
                assert_eq!(metrics.units, u, "{}: {metrics:?}", entry.file);
            }
            continue;
        }
        let status = entry
            .status
            .unwrap_or_else(|| panic!("{}: no status", entry.file));
        let group = Group::ALL
            .into_iter()
            .find(|g| g.function_logical_id() == entry.function)
            .unwrap_or_else(|| panic!("{}: unknown function {}", entry.file, entry.function));
        let state = AppState {
            auth: AuthMode::ApiGateway,
            ..api.stack.state.clone()
        };
        let text = std::fs::read_to_string(events_dir().join(&entry.file)).unwrap();
        let request =
            lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", entry.file));
        let before = api.records_snapshot().await;
        let response = router(state, &[group]).oneshot(request).await.unwrap();
        let reply = into_reply(response).await;
        assert_eq!(
            reply.status.as_u16(),
            status,
            "{}: {}",
            entry.file,
            reply.text
        );
        if !reply.status.is_success() {
            assert_eq!(
                reply.header("content-type"),
                Some("application/problem+json"),
                "{}",
                entry.file
            );
            assert_eq!(
                api.records_snapshot().await,
                before,
                "{}: a rejected event wrote something",
                entry.file
            );
        }
    }
}

#[test]
fn every_route_has_a_sample_event() {
    let mut covered = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(events_dir()).unwrap() {
        let path = entry.unwrap().path();
        let event: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if let (Some(method), Some(resource)) =
            (event["httpMethod"].as_str(), event["resource"].as_str())
        {
            covered.insert((method.to_string(), resource.to_string()));
        }
    }
    let missing: Vec<_> = gridline::http::routes()
        .into_iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .filter(|r| !covered.contains(r))
        .collect();
    assert!(
        missing.is_empty(),
        "routes without a sample event: {missing:?}"
    );
}
