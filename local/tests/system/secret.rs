//! The cursor key in AWS comes from Secrets Manager, read once at init. There is no Secrets
//! Manager here, so a loopback endpoint answers `GetSecretValue` the way the service does
//! (JSON 1.1 protocol); the client, request and parsing are the real SDK's.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use gridline::config::{ConfigError, cursor_key_from_secret};
use gridline::cursor::{Binding, CursorKey, Position};
use serde_json::{Value, json};

async fn secrets_manager(secret: &'static str) -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = Router::new().route(
        "/",
        post(move |headers: HeaderMap, body: String| {
            let log = log.clone();
            async move {
                let target = headers
                    .get("x-amz-target")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                log.lock().unwrap().push(json!({"target": target, "body": body}));
                (
                    [("content-type", "application/x-amz-json-1.1")],
                    json!({
                        "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:gridline-cursor-AbCdEf",
                        "Name": "gridline-cursor",
                        "SecretString": secret,
                        "VersionId": "v1",
                        "CreatedDate": 1.7e9
                    })
                    .to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

fn client(endpoint: &str) -> aws_sdk_secretsmanager::Client {
    let config = aws_sdk_secretsmanager::Config::builder()
        .behavior_version(aws_sdk_secretsmanager::config::BehaviorVersion::latest())
        .region(aws_sdk_secretsmanager::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_secretsmanager::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .build();
    aws_sdk_secretsmanager::Client::from_conf(config)
}

#[tokio::test]
async fn the_cursor_key_is_the_secret_string() {
    let secret = "k2VwQ8nT5rYx0sLm3ZbJ7cFh1dGp9aUe4oWi6vNq2XyR8tKs5LzM0jHb3gDf7AcE";
    let (url, seen) = secrets_manager(secret).await;
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gridline-cursor-AbCdEf";
    let key = cursor_key_from_secret(&client(&url), arn).await.unwrap();

    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["target"], "secretsmanager.GetSecretValue");
    assert_eq!(requests[0]["body"]["SecretId"], arn);

    // Cursors sealed with the fetched key open with the secret's value, and only with it.
    let scope = Binding {
        tenant: "acme",
        route: "r",
        params: "p",
        caller: None,
    };
    let position: Position = [("PK".to_string(), "x".to_string())].into();
    let cursor = key.seal(&scope, &position);
    assert_eq!(
        CursorKey::new(secret.as_bytes()).open(&scope, &cursor),
        Ok(position)
    );
    assert!(
        CursorKey::new(b"another-key-entirely")
            .open(&scope, &cursor)
            .is_err()
    );
}

#[tokio::test]
async fn a_short_secret_is_refused_at_init() {
    let (url, _) = secrets_manager("short").await;
    let err = cursor_key_from_secret(&client(&url), "gridline-cursor")
        .await
        .err()
        .expect("a 5-byte key is refused");
    assert!(matches!(err, ConfigError::SecretInvalid(_)), "{err}");
}
