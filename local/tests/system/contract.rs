//! The routes the router serves, the routes `template.yaml` sends to each function, and the
//! operations `openapi.yaml` documents are the same set, so none can drift.

use std::collections::{BTreeMap, BTreeSet};

use gridline::http::routes;
use gridline_local::template::{ApiEvent, TEMPLATE, api_events, tables};

/// The template's `Api` events are exactly: every router route on its function behind the
/// default (Cognito) authorizer, and one unauthenticated `OPTIONS` per distinct path (API
/// Gateway answers a method a resource lacks with 403, so each needs its own preflight) on a
/// function that serves that path. Nothing else is public.
#[test]
fn the_template_routes_exactly_the_routers_routes_plus_one_preflight_per_path() {
    let events = api_events(TEMPLATE).unwrap();
    let (preflights, authenticated): (Vec<ApiEvent>, Vec<ApiEvent>) =
        events.into_iter().partition(|e| e.method == "OPTIONS");

    let from_router: BTreeSet<(String, String, String)> = routes()
        .into_iter()
        .map(|r| {
            (
                r.group.function_logical_id().to_string(),
                r.method.to_string(),
                r.path.to_string(),
            )
        })
        .collect();
    for e in &authenticated {
        assert_eq!(
            e.authorizer, None,
            "{} {} must use the default authorizer",
            e.method, e.path
        );
    }
    let from_template: BTreeSet<_> = authenticated
        .into_iter()
        .map(|e| (e.function, e.method, e.path))
        .collect();
    assert_eq!(from_router, from_template);

    // The functions serving each path.
    let mut servers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (function, _, path) in &from_router {
        servers
            .entry(path.clone())
            .or_default()
            .insert(function.clone());
    }
    let mut preflighted = BTreeSet::new();
    for e in &preflights {
        assert_eq!(
            e.authorizer.as_deref(),
            Some("NONE"),
            "the preflight of {} must not need a token",
            e.path
        );
        assert!(
            servers
                .get(&e.path)
                .is_some_and(|f| f.contains(&e.function)),
            "the preflight of {} is on {}, which does not serve it",
            e.path,
            e.function
        );
        assert!(
            preflighted.insert(e.path.clone()),
            "two preflights for {}",
            e.path
        );
    }
    let paths: BTreeSet<String> = servers.into_keys().collect();
    assert_eq!(paths, preflighted, "every path needs exactly one preflight");
}

#[test]
fn openapi_documents_exactly_the_routers_operations() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml")).unwrap();
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let mut documented = BTreeSet::new();
    for (path, ops) in doc["paths"].as_mapping().unwrap() {
        for (method, _) in ops.as_mapping().unwrap() {
            let method = method.as_str().unwrap();
            if ["get", "post", "put", "patch", "delete"].contains(&method) {
                documented.insert((method.to_uppercase(), path.as_str().unwrap().to_string()));
            }
        }
    }
    let served: BTreeSet<_> = routes()
        .into_iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(served, documented);
}

#[test]
fn the_template_defines_both_tables_and_streams_the_records() {
    let tables = tables(TEMPLATE).unwrap();
    assert!(tables["RecordsTable"].has_stream());
    assert!(tables.contains_key("IndexTable"));
}

/// The stream carries both images (history is their difference); tombstone
/// watermarks expire by TTL on `expires_at` (the attribute the indexer writes), and so do the
/// records table's remembered idempotency answers (the only items there that have it).
#[test]
fn the_stream_carries_both_images_and_the_index_expires_tombstones() {
    let tables = tables(TEMPLATE).unwrap();
    assert_eq!(
        tables["RecordsTable"].stream_view_type(),
        Some("NEW_AND_OLD_IMAGES")
    );
    assert_eq!(tables["IndexTable"].ttl_attribute(), Some("expires_at"));
    assert_eq!(tables["RecordsTable"].ttl_attribute(), Some("expires_at"));
}

/// GSI1 copies only what `list_projects` deserialises from it; issues are read from the
/// table by the keys it gives.
#[test]
fn gsi1_projects_the_project_attributes_only() {
    let tables = tables(TEMPLATE).unwrap();
    let gsis = tables["RecordsTable"].gsi_projections();
    let (name, kind, attrs) = &gsis[0];
    assert_eq!((*name, *kind), (gridline::keys::GSI1, "INCLUDE"));
    let attrs: BTreeSet<&str> = attrs.iter().copied().collect();
    assert_eq!(
        attrs,
        BTreeSet::from([
            "entity",
            "id",
            "name",
            "created_at",
            "next_num",
            "field_count"
        ])
    );
}

/// The HTTP functions get the app clients and origins they must check; an existing pool
/// without client ids is refused at deploy time.
#[test]
fn every_http_function_gets_the_allowed_client_ids_and_origins() {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(TEMPLATE).unwrap();
    let functions: BTreeSet<String> = routes()
        .into_iter()
        .map(|r| r.group.function_logical_id().to_string())
        .collect();
    for f in &functions {
        let vars = &doc["Resources"][f.as_str()]["Properties"]["Environment"]["Variables"];
        for var in [
            "ALLOWED_CLIENT_IDS",
            gridline::http::cors::ALLOWED_ORIGINS_VAR,
        ] {
            assert!(!vars[var].is_null(), "{f} has no {var}");
        }
    }
    assert!(
        !doc["Rules"]["ExistingUserPoolNeedsClientIds"]["Assertions"].is_null(),
        "the rule refusing an existing pool without AllowedClientIds is gone"
    );
}

#[test]
fn the_indexers_stream_filter_selects_issues_and_field_definitions_by_key() {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(TEMPLATE).unwrap();
    let stream =
        &doc["Resources"]["IndexerFunction"]["Properties"]["Events"]["RecordsStream"]["Properties"];
    let pattern: serde_json::Value = serde_json::from_str(
        stream["FilterCriteria"]["Filters"][0]["Pattern"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        pattern["dynamodb"]["Keys"]["SK"]["S"],
        serde_json::json!([gridline::keys::records::ISSUE_SK, {"prefix": gridline::keys::records::FIELD_SK_PREFIX}])
    );
    // A project's and a team's removal, and no other event of their items.
    let removals: Vec<serde_json::Value> = stream["FilterCriteria"]["Filters"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|f| serde_json::from_str::<serde_json::Value>(f["Pattern"].as_str().unwrap()).unwrap())
        .filter(|p| p["eventName"] == serde_json::json!(["REMOVE"]))
        .map(|p| p["dynamodb"]["Keys"]["SK"]["S"].clone())
        .collect();
    assert_eq!(
        removals,
        [
            serde_json::json!([gridline::keys::records::PROJECT_SK]),
            serde_json::json!([gridline::keys::records::TEAM_SK])
        ]
    );
    assert_eq!(
        stream["FunctionResponseTypes"][0].as_str(),
        Some("ReportBatchItemFailures")
    );
    assert_eq!(
        stream["DestinationConfig"]["OnFailure"]["Type"].as_str(),
        Some("SQS")
    );
}

/// The local tables are made from the template: the engine holds the same stream view type,
/// GSI projection and TTL as AWS would.
#[tokio::test]
async fn the_local_tables_take_the_templates_stream_projection_and_ttl() {
    let api = gridline_local::testing::TestApi::start().await;
    let client = &api.stack.client;
    let records = api.records_table().await;
    assert_eq!(
        records
            .stream_specification()
            .and_then(|s| s.stream_view_type())
            .map(|v| v.as_str()),
        Some("NEW_AND_OLD_IMAGES")
    );
    let projection = records.global_secondary_indexes()[0].projection().unwrap();
    assert_eq!(
        projection.projection_type().map(|p| p.as_str()),
        Some("INCLUDE")
    );
    assert_eq!(projection.non_key_attributes().len(), 6);
    let ttl = client
        .describe_time_to_live()
        .table_name(&api.stack.tables.index)
        .send()
        .await
        .unwrap()
        .time_to_live_description
        .unwrap();
    assert_eq!(ttl.attribute_name(), Some("expires_at"));
    assert_eq!(
        ttl.time_to_live_status().map(|s| s.as_str()),
        Some("ENABLED")
    );
}
