//! `make invoke-local`: a sample event through its function's handler, without Docker.
//!
//! An API event goes through `lambda_http`'s own event parsing and the function's router with
//! the caller from the request context, exactly as in Lambda; a stream event goes to the
//! indexer's handler; a TOKEN authorizer event to the authorizer's, with the key set of
//! [`crate::fixtures::JWKS`]. Responses print as Lambda returns them (an API Gateway proxy
//! response, the batch-item-failures response, the authorizer's policy or its error).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use gridline::auth::AuthMode;
use gridline::http::{AppState, Function, router};
use gridline::indexer::Metrics;
use gridline::model::event::StreamEvent;
use gridline::telemetry::LogStyle;
use serde::Deserialize;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::Stack;
use crate::testing::{Reply, into_reply};

pub use crate::INDEXER_FUNCTION;

/// One line of `events/manifest.json`: an event, its function and what it should produce.
#[derive(Debug, Clone, Deserialize)]
pub struct ManifestEntry {
    pub file: String,
    pub function: String,
    pub purpose: String,
    /// API events: the status.
    pub status: Option<u16>,
    /// Stream events: the sequence numbers reported as failures.
    pub batch_item_failures: Option<Vec<String>>,
    /// Stream events: another event to handle first.
    pub after: Option<String>,
    pub writes: Option<usize>,
    pub writes_at_least: Option<usize>,
    pub units: Option<usize>,
    /// Authorizer events: whether the token is allowed.
    pub authorized: Option<bool>,
    /// Token trigger events: whether the answer sets `custom:tenant_id`.
    pub trigger_sets_tenant: Option<bool>,
}

/// The template's logical id of the user pool's token trigger.
pub const TOKEN_TRIGGER_FUNCTION: &str = crate::local_token::TRIGGER_FUNCTION;

/// The template's logical id of the authorizer.
pub const AUTHORIZER_FUNCTION: &str = "AuthorizerFunction";

impl ManifestEntry {
    /// What the manifest expects that `outcome` does not give (its status, or its batch item
    /// failures), if anything.
    pub fn mismatch(&self, outcome: &Outcome) -> Option<String> {
        match outcome {
            Outcome::Api(reply) => self
                .status
                .filter(|s| *s != reply.status.as_u16())
                .map(|s| format!("status {s}")),
            Outcome::Stream { response, .. } => {
                let got: Vec<String> = response
                    .batch_item_failures
                    .iter()
                    .filter_map(|f| f.item_identifier.clone())
                    .collect();
                self.batch_item_failures
                    .as_ref()
                    .filter(|want| **want != got)
                    .map(|want| format!("batch item failures {want:?}"))
            }
            Outcome::Trigger(answer) => {
                let sets = !answer["response"]["claimsOverrideDetails"]["claimsToAddOrOverride"]
                    [gridline::auth::TENANT_CLAIM]
                    .is_null();
                self.trigger_sets_tenant
                    .filter(|want| *want != sets)
                    .map(|want| format!("trigger_sets_tenant {want}"))
            }
            Outcome::Authorizer(answer) => self
                .authorized
                .filter(|want| *want != answer.is_ok())
                .map(|want| format!("authorized {want}")),
            Outcome::Queue(response) => {
                let got: Vec<String> = response
                    .batch_item_failures
                    .iter()
                    .map(|f| f.item_identifier.clone())
                    .collect();
                self.batch_item_failures
                    .as_ref()
                    .filter(|want| **want != got)
                    .map(|want| format!("batch item failures {want:?}"))
            }
        }
    }
}

/// `events/` of this checkout.
pub fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../events")
}

pub fn manifest() -> Result<Vec<ManifestEntry>> {
    let path = events_dir().join("manifest.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// What the handler returned.
#[derive(Debug)]
pub enum Outcome {
    Api(Reply),
    Stream {
        response: DynamoDbEventResponse,
        metrics: Metrics,
    },
    /// The field-job function's answer to an SQS event.
    Queue(SqsBatchResponse),
    /// The authorizer's answer, or its error (`{"errorType", "errorMessage"}`).
    Authorizer(Result<Value, Value>),
    /// The token trigger's answer: the event with its response.
    Trigger(Value),
}

impl Outcome {
    /// The response as Lambda hands it back to `sam local invoke`'s caller.
    pub fn to_lambda_json(&self) -> Value {
        match self {
            Outcome::Api(reply) => {
                let headers: BTreeMap<String, String> = reply
                    .headers
                    .iter()
                    .filter_map(|(k, v)| Some((k.to_string(), v.to_str().ok()?.to_string())))
                    .collect();
                json!({
                    "statusCode": reply.status.as_u16(),
                    "headers": headers,
                    "body": reply.text,
                    "isBase64Encoded": false,
                })
            }
            Outcome::Stream { response, .. } => {
                serde_json::to_value(response).unwrap_or(Value::Null)
            }
            Outcome::Queue(response) => serde_json::to_value(response).unwrap_or(Value::Null),
            Outcome::Authorizer(Ok(answer) | Err(answer)) | Outcome::Trigger(answer) => {
                answer.clone()
            }
        }
    }
}

/// Runs `event` (the file's text) through the handler of `function` (a template logical id).
pub async fn invoke(stack: &Stack, function: &str, event: &str) -> Result<Outcome> {
    if function == INDEXER_FUNCTION {
        let event = StreamEvent::from_json(event).context("not a DynamoDB stream event")?;
        let outcome = stack.indexer().handle(&event).await;
        println!("{}", outcome.metrics.emf());
        let response = gridline::runtime::stream_response(outcome.retry_from);
        return Ok(Outcome::Stream {
            response,
            metrics: outcome.metrics,
        });
    }
    if function == crate::jobs::FIELD_JOB_FUNCTION {
        let event: SqsEvent = serde_json::from_str(event).context("not an SQS event")?;
        let timeout = crate::gateway::function_timeout(function)?;
        let deadline = std::time::Instant::now() + timeout;
        let response = gridline::runtime::handle_sqs(&stack.field_jobs(), &event, deadline).await;
        return Ok(Outcome::Queue(response));
    }
    if function == AUTHORIZER_FUNCTION {
        return authorize(event);
    }
    if function == TOKEN_TRIGGER_FUNCTION {
        let event = serde_json::from_str(event).context("not a pre token generation event")?;
        let store = stack.function_store(function);
        let answer = gridline::token_trigger::handle(&store, event).await?;
        return Ok(Outcome::Trigger(serde_json::to_value(answer)?));
    }
    let Some(group) = Function::ALL
        .into_iter()
        .find(|g| g.function_logical_id() == function)
    else {
        bail!("no function {function} in template.yaml");
    };
    // As in Lambda: the function's own (guarded) clients, the caller from API Gateway's
    // authorizer, EMF request records on stdout.
    let state = AppState {
        auth: AuthMode::ApiGateway {
            client_ids: gridline::auth::ClientIds::parse(crate::fixtures::CLIENT_ID),
        },
        log: LogStyle::Emf,
        ..stack.function_state(function)
    };
    let request = lambda_http::request::from_str(event).context("not an API Gateway event")?;
    let response = crate::gateway::lambda_limits(router(state, &[group]), function)
        .oneshot(request)
        .await
        .context("the router failed")?;
    Ok(Outcome::Api(into_reply(response).await))
}

/// The authorizer's handler, for the pool of [`crate::fixtures`], at the present time.
fn authorize(event: &str) -> Result<Outcome> {
    use gridline::authorizer::{Authorizer, Jwks, handle};
    let event = serde_json::from_str(event).context("not a TOKEN authorizer event")?;
    let authorizer = Authorizer {
        issuer: crate::fixtures::ISSUER.into(),
        client_ids: gridline::auth::ClientIds::parse(crate::fixtures::CLIENT_ID),
        keys: Jwks::parse(crate::fixtures::JWKS.as_bytes())?,
        no_tenant_key: gridline::authorizer::NO_TENANT_USAGE_KEY.into(),
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let answer = handle(&authorizer, &event, now)
        .map(|a| serde_json::to_value(a).unwrap_or(Value::Null))
        .map_err(|e| serde_json::to_value(e).unwrap_or(Value::Null));
    Ok(Outcome::Authorizer(answer))
}
