//! What the per-request membership check costs (`membership_check_rcu_per_request`): the same
//! request stream (`GET /projects`, one caller, 20 a second for 10 s, one warm instance per
//! function) on a workspace's tenant and on a tenant an operator provisioned; the difference
//! in read units, per request, is the check's.

use std::time::Duration;

use anyhow::{Context, Result};
use gridline_local::Stack;
use gridline_local::testing::{TestApi, send};
use http::Method;
use serde_json::{Value, json};

use crate::meter::Meter;

/// Requests a second, and for how long: a caller working in the grid.
const RATE: u64 = 20;
const SECONDS: u64 = 10;

/// The check's read units per request on a warm instance.
pub(crate) async fn membership_check_rcu() -> Result<f64> {
    let stack = crate::indexer::stack().await?;
    let token = workspace_token(&stack).await?;
    let operator = TestApi::token("ana", "operator-tenant");
    let on_workspace = metered_stream(&stack, &token).await?;
    let on_operator = metered_stream(&stack, &operator).await?;
    Ok((on_workspace - on_operator).max(0.0) / (RATE * SECONDS) as f64)
}

/// A token of a workspace's owner, made as a person who signs up makes it.
async fn workspace_token(stack: &Stack) -> Result<String> {
    let router = stack.router();
    let mint = || async {
        let body = json!({"user": "ana", "email": "ana@example.com", "email_verified": true});
        let reply = send(
            stack.router(),
            Method::POST,
            gridline_local::local_token::PATH,
            None,
            Some(&body.to_string()),
            &[],
        )
        .await;
        reply.body["token"]
            .as_str()
            .map(str::to_string)
            .context("a local token")
    };
    let first = mint().await?;
    let call = |method: Method, path: &'static str, body: Value| {
        let (router, token) = (router.clone(), first.clone());
        async move {
            send(
                router,
                method,
                path,
                Some(&token),
                Some(&body.to_string()),
                &[],
            )
            .await
        }
    };
    let reply = call(Method::POST, "/workspaces", json!({"name": "Bench"})).await;
    anyhow::ensure!(reply.status == 201, "workspace: {}", reply.text);
    let id = reply.body["id"].clone();
    let reply = call(Method::PUT, "/me/workspace", json!({ "id": id })).await;
    anyhow::ensure!(reply.status == 204, "choose: {}", reply.text);
    mint().await
}

/// The read units of the request stream with `token`, on a fresh router (cold caches, as a
/// new instance), warm after its first request.
async fn metered_stream(stack: &Stack, token: &str) -> Result<f64> {
    let meter = Meter::new();
    let router = stack.router_with(|f| meter.client(&stack.function_client(f)));
    let reply = send(
        router.clone(),
        Method::GET,
        "/projects",
        Some(token),
        None,
        &[],
    )
    .await;
    anyhow::ensure!(reply.status == 200, "warm-up: {}", reply.text);
    let before = meter.now();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / RATE));
    for _ in 0..RATE * SECONDS {
        tick.tick().await;
        let reply = send(
            router.clone(),
            Method::GET,
            "/projects",
            Some(token),
            None,
            &[],
        )
        .await;
        anyhow::ensure!(reply.status == 200, "list: {}", reply.text);
    }
    Ok((meter.now() - before).capacity)
}
