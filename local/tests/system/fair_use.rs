//! Fair use per tenant: API Gateway's usage plan throttles each tenant on its own, so one
//! tenant's burst gets it `429`s while another tenant's requests in the same moment succeed.

use futures::future::join_all;
use gridline_local::testing::TestApi;
use gridline_local::usage_plan::{TenantLimits, UsagePlan};
use http::{Method, StatusCode};

/// A burst of 5, then one request every 5 seconds: slow enough that no token comes back
/// while a test runs, however loaded the machine.
const LIMITS: TenantLimits = TenantLimits {
    rate: 0.2,
    burst: 5,
};
const NOISY: (&str, &str) = ("alice", "noisy");
const QUIET: (&str, &str) = ("bob", "quiet");

#[tokio::test]
async fn a_tenant_over_its_limit_gets_429_while_another_tenants_requests_succeed() {
    let api = TestApi::with_tenant_limits(LIMITS).await;
    // Both tenants at once: the noisy one sends four times its burst, the quiet one within it.
    let noisy = (0..20).map(|_| api.call(NOISY, Method::GET, "/projects", None));
    let quiet = (0..4).map(|_| api.call(QUIET, Method::GET, "/projects", None));
    let (noisy, quiet) = tokio::join!(join_all(noisy), join_all(quiet));

    for reply in &quiet {
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let ok = noisy.iter().filter(|r| r.status == StatusCode::OK).count();
    let throttled: Vec<_> = noisy
        .iter()
        .filter(|r| r.status == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert_eq!(ok + throttled.len(), noisy.len(), "only 200s and 429s");
    // The burst, and at most a token refilled while the requests ran.
    assert!(
        (5..=6).contains(&ok),
        "{ok} of the noisy tenant's requests passed"
    );
    for reply in throttled {
        assert_eq!(
            reply.header("content-type"),
            Some("application/problem+json")
        );
        assert_eq!(reply.body["status"], 429);
        assert_eq!(reply.body["type"], "urn:gridline:problem:too-many-requests");
        let retry: u64 = reply.header("retry-after").unwrap().parse().unwrap();
        assert!(retry >= 1);
    }

    // Still throttled, the noisy tenant does not hold the quiet one back.
    let again = api.call(NOISY, Method::GET, "/projects", None).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    let quiet = api.call(QUIET, Method::GET, "/projects", None).await;
    assert_eq!(quiet.status, StatusCode::OK, "{}", quiet.text);
    api.stop().await;
}

#[tokio::test]
async fn the_tenant_is_throttled_not_the_user_and_preflights_and_bad_tokens_are_not_counted() {
    let api = TestApi::with_tenant_limits(LIMITS).await;
    // Another user of the noisy tenant shares its bucket.
    for user in ["alice", "carol", "dave", "erin", "frank"] {
        let reply = api
            .call((user, NOISY.1), Method::GET, "/projects", None)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let reply = api
        .call(("grace", NOISY.1), Method::GET, "/projects", None)
        .await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);

    // No token: the authorizer's 401, never a 429; a preflight needs no key.
    let reply = api.send(Method::GET, "/projects", None, None, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let preflight = [
        ("origin", gridline_local::testing::TEST_ORIGIN),
        ("access-control-request-method", "GET"),
    ];
    let reply = api
        .send(Method::OPTIONS, "/projects", None, None, &preflight)
        .await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.text);

    // A 429 carries the CORS headers, so a page can read why it failed.
    let token = TestApi::token("alice", NOISY.1);
    let origin = [("origin", gridline_local::testing::TEST_ORIGIN)];
    let reply = api
        .send(Method::GET, "/projects", Some(&token), None, &origin)
        .await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some(gridline_local::testing::TEST_ORIGIN)
    );
    api.stop().await;
}

#[test]
fn the_local_limits_are_the_templates_defaults() {
    let limits = TenantLimits::from_template().unwrap();
    assert_eq!(
        limits,
        TenantLimits {
            rate: 50.0,
            burst: 100
        }
    );
}

/// The template's gateway response `kind`, its body read with API Gateway's message filled in.
fn gateway_response(kind: &str) -> (serde_yaml_ng::Value, serde_json::Value) {
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(gridline_local::template::TEMPLATE).unwrap();
    let response = doc["Resources"]["GridlineApi"]["Properties"]["GatewayResponses"][kind].clone();
    let template = response["ResponseTemplates"]["application/json"]
        .as_str()
        .unwrap()
        .replace("$context.error.messageString", "\"Too Many Requests\"");
    (response, serde_json::from_str(&template).unwrap())
}

#[tokio::test]
async fn the_local_429_is_the_templates_throttled_response() {
    let (response, body) = gateway_response("THROTTLED");
    assert_eq!(response["StatusCode"].as_str(), Some("429"));
    let headers = &response["ResponseParameters"]["Headers"];
    assert_eq!(headers["Retry-After"].as_str(), Some("'1'"));

    let api = TestApi::with_tenant_limits(TenantLimits {
        rate: 0.2,
        burst: 1,
    })
    .await;
    api.call(NOISY, Method::GET, "/projects", None).await;
    let reply = api.call(NOISY, Method::GET, "/projects", None).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    for key in ["type", "title", "status"] {
        assert_eq!(reply.body[key], body[key], "{key}");
    }
    // Whole seconds until the next token: up to 5 at this rate.
    let retry: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=5).contains(&retry), "{retry}");
    api.stop().await;

    // At the template's rate a token is back within a second: the template's fixed `1`.
    let defaults = TenantLimits::from_template().unwrap();
    let plan = UsagePlan::new(defaults, b"secret");
    let now = std::time::Instant::now();
    for _ in 0..defaults.burst {
        plan.take("t", now).unwrap();
    }
    let wait = plan.take("t", now).unwrap_err();
    assert!(wait <= std::time::Duration::from_secs(1), "{wait:?}");
}

#[test]
fn a_tenant_without_its_key_gets_a_problem_that_says_so() {
    let (response, body) = gateway_response("INVALID_API_KEY");
    assert_eq!(response["StatusCode"].as_str(), Some("403"));
    assert_eq!(body["status"], 403);
    assert_eq!(body["type"], "urn:gridline:problem:tenant-not-provisioned");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("gridctl tenant-key")
    );
}

#[test]
fn openapi_documents_the_429_on_every_operation() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml")).unwrap();
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    for (path, ops) in doc["paths"].as_mapping().unwrap() {
        for (method, op) in ops.as_mapping().unwrap() {
            if method.as_str() == Some("parameters") {
                continue;
            }
            assert!(
                !op["responses"]["429"].is_null(),
                "{method:?} {path:?} does not document 429"
            );
        }
    }
}
