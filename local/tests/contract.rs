//! The routes the router serves, the routes `template.yaml` sends to each function, and the
//! operations `openapi.yaml` documents are the same set, so none can drift.

use std::collections::BTreeSet;

use gridline::http::routes;
use gridline_local::template::{TEMPLATE, api_routes, tables};

#[test]
fn the_template_routes_exactly_the_routers_routes_to_each_function() {
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
    let from_template: BTreeSet<_> = api_routes(TEMPLATE).unwrap().into_iter().collect();
    assert_eq!(from_router, from_template);
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
        serde_json::json!([gridline::keys::ISSUE_SK, {"prefix": gridline::keys::FIELD_SK_PREFIX}])
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
