//! Browser clients: preflights answered without a token, CORS headers on every answer from an
//! allowed origin (errors included), none for any other origin.

use gridline_local::testing::{TEST_ORIGIN, TestApi};
use http::Method;

const PREFLIGHT: [(&str, &str); 3] = [
    ("origin", TEST_ORIGIN),
    ("access-control-request-method", "PATCH"),
    (
        "access-control-request-headers",
        "authorization,content-type,if-match",
    ),
];

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_needs_no_token() {
    let api = TestApi::start().await;
    let before = api.record_count().await;
    let reply = api
        .send(
            Method::OPTIONS,
            "/issues/01JDQ5S0000000000000000N01",
            None,
            None,
            &PREFLIGHT,
        )
        .await;
    assert_eq!(reply.status, 204, "{}", reply.text);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some(TEST_ORIGIN)
    );
    let methods = reply.header("access-control-allow-methods").unwrap();
    assert!(
        methods.contains("PATCH") && methods.contains("DELETE"),
        "{methods}"
    );
    let headers = reply
        .header("access-control-allow-headers")
        .unwrap()
        .to_ascii_lowercase();
    for h in ["authorization", "content-type", "if-match"] {
        assert!(headers.contains(h), "{headers}");
    }
    assert!(reply.header("access-control-max-age").is_some());
    assert_eq!(reply.header("vary"), Some("Origin"));
    assert_eq!(
        api.record_count().await,
        before,
        "a preflight writes nothing"
    );
}

#[tokio::test]
async fn a_preflight_from_another_origin_gets_no_allow_headers() {
    let api = TestApi::start().await;
    let mut headers = PREFLIGHT;
    headers[0].1 = "https://evil.example.net";
    let reply = api
        .send(Method::OPTIONS, "/projects", None, None, &headers)
        .await;
    assert_eq!(reply.status, 204);
    assert_eq!(reply.header("access-control-allow-origin"), None);
    assert_eq!(reply.header("access-control-allow-methods"), None);
}

#[tokio::test]
async fn every_answer_to_an_allowed_origin_carries_the_headers_errors_included() {
    let api = TestApi::start().await;
    let origin = [("origin", TEST_ORIGIN)];
    let ok = api
        .send_as_alice(Method::GET, "/projects", None, &origin)
        .await;
    let unauthenticated = api
        .send(Method::GET, "/projects", None, None, &origin)
        .await;
    let missing = api
        .send_as_alice(Method::GET, "/nowhere", None, &origin)
        .await;
    let big = "x".repeat(gridline::http::MAX_BODY_BYTES + 1);
    let too_large = api
        .send_as_alice(Method::POST, "/projects", Some(&big), &origin)
        .await;
    for (reply, status) in [
        (&ok, 200),
        (&unauthenticated, 401),
        (&missing, 404),
        (&too_large, 413),
    ] {
        assert_eq!(reply.status, status, "{}", reply.text);
        assert_eq!(
            reply.header("access-control-allow-origin"),
            Some(TEST_ORIGIN),
            "{status}"
        );
        // A browser client reads these: the version for If-Match, how long a building list
        // or a 429 asks it to wait, and the request's id.
        let exposed = reply.header("access-control-expose-headers").unwrap();
        for name in ["ETag", "Retry-After", "X-Request-Id"] {
            assert!(exposed.contains(name), "{name} in {exposed}");
        }
    }
    // Without an Origin (not a browser) or from another origin: no CORS headers.
    let plain = api.send_as_alice(Method::GET, "/projects", None, &[]).await;
    assert_eq!(plain.header("access-control-allow-origin"), None);
    let other = api
        .send_as_alice(
            Method::GET,
            "/projects",
            None,
            &[("origin", "https://evil.example.net")],
        )
        .await;
    assert_eq!(other.header("access-control-allow-origin"), None);
}

#[tokio::test]
async fn options_without_a_preflight_header_is_not_a_route() {
    let api = TestApi::start().await;
    let reply = api
        .send_as_alice(
            Method::OPTIONS,
            "/projects",
            None,
            &[("origin", TEST_ORIGIN)],
        )
        .await;
    assert_eq!(reply.status, 405, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some(TEST_ORIGIN)
    );
}

/// The console's dev sign-in calls the stack's token route from the browser: it answers
/// preflights from an allowed origin like the API's routes.
#[tokio::test]
async fn the_local_token_route_answers_a_browsers_preflight() {
    let api = TestApi::start().await;
    let preflight = [
        ("origin", TEST_ORIGIN),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "content-type"),
    ];
    let reply = api
        .send(Method::OPTIONS, "/local/token", None, None, &preflight)
        .await;
    assert_eq!(reply.status, 204, "{}", reply.text);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some(TEST_ORIGIN)
    );
    let reply = api
        .send(
            Method::POST,
            "/local/token",
            None,
            Some(r#"{"user":"ana","tenant":"acme"}"#),
            &[
                ("origin", TEST_ORIGIN),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some(TEST_ORIGIN)
    );
}
