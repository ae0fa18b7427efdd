//! Every file in `events/` runs through its function's handler — the same parsing
//! `lambda_http` does for a real invocation, the caller from the request context — against the
//! embedded engine with the fixtures the events name, and gets the status its manifest says.

use gridline_local::fixtures::seed;
use gridline_local::invoke::{Outcome, events_dir, invoke, manifest};
use gridline_local::testing::TestApi;

/// The event's text.
fn read(file: &str) -> String {
    std::fs::read_to_string(events_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[tokio::test]
async fn every_sample_event_gets_its_expected_outcome_through_its_handler() {
    let manifest = manifest().unwrap();

    // No event goes untested, and each says what it is for.
    let mut on_disk: Vec<String> = std::fs::read_dir(events_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n != "manifest.json" && n != "env.json")
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = manifest.iter().map(|e| e.file.clone()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "every file in events/ must be in events/manifest.json"
    );

    for entry in manifest {
        assert!(
            !entry.purpose.trim().is_empty(),
            "{}: no purpose",
            entry.file
        );
        // The same path `make invoke-local` takes: a fresh stack with the fixtures.
        let api = TestApi::start().await;
        seed(&api.stack.state.store).await.unwrap();
        if let Some(first) = &entry.after {
            let Outcome::Stream { response, .. } =
                invoke(&api.stack, &entry.function, &read(first))
                    .await
                    .unwrap()
            else {
                panic!("{first}: not a stream event");
            };
            assert!(response.batch_item_failures.is_empty(), "{first}");
        }
        let text = read(&entry.file);
        let before = api.records_snapshot().await;
        match invoke(&api.stack, &entry.function, &text).await.unwrap() {
            Outcome::Stream { response, metrics } => {
                let failures: Vec<String> = response
                    .batch_item_failures
                    .into_iter()
                    .filter_map(|f| f.item_identifier)
                    .collect();
                let expected = entry
                    .batch_item_failures
                    .as_ref()
                    .unwrap_or_else(|| panic!("{}: no batch_item_failures", entry.file));
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
            }
            Outcome::Authorizer(answer) => {
                let want = entry
                    .authorized
                    .unwrap_or_else(|| panic!("{}: no authorized", entry.file));
                match answer {
                    // A token without a tenant: the shared no-tenant key.
                    Ok(answer) if want && answer["context"]["tenant"] == "" => {
                        assert_eq!(
                            answer["usageIdentifierKey"],
                            gridline::authorizer::NO_TENANT_USAGE_KEY,
                            "{}",
                            entry.file
                        );
                    }
                    Ok(answer) if want => {
                        let acme = gridline::domain::ids::TenantId::parse("acme").unwrap();
                        assert_eq!(answer["context"]["tenant"], "acme", "{}", entry.file);
                        assert_eq!(
                            answer["usageIdentifierKey"],
                            gridline::authorizer::usage_key(&acme),
                            "{}",
                            entry.file
                        );
                    }
                    Err(error) if !want => assert_eq!(error["errorMessage"], "Unauthorized"),
                    other => panic!("{}: {other:?}", entry.file),
                }
            }
            outcome @ Outcome::Trigger(_) => {
                assert!(entry.trigger_sets_tenant.is_some(), "{}", entry.file);
                assert_eq!(entry.mismatch(&outcome), None, "{}", entry.file);
                assert_eq!(
                    api.records_snapshot().await,
                    before,
                    "the trigger is read-only"
                );
            }
            Outcome::Queue(response) => {
                let failures: Vec<String> = response
                    .batch_item_failures
                    .into_iter()
                    .map(|f| f.item_identifier)
                    .collect();
                let expected = entry
                    .batch_item_failures
                    .as_ref()
                    .unwrap_or_else(|| panic!("{}: no batch_item_failures", entry.file));
                assert_eq!(&failures, expected, "{}", entry.file);
            }
            Outcome::Api(reply) => {
                let status = entry
                    .status
                    .unwrap_or_else(|| panic!("{}: no status", entry.file));
                // The request log and the response carry API Gateway's request id.
                let event: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(
                    reply.header("x-request-id"),
                    event["requestContext"]["requestId"].as_str(),
                    "{}",
                    entry.file
                );
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
