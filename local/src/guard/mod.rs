//! What AWS enforces, enforced on the local stack: every AWS client a function builds goes
//! through a guard that refuses what the function's policy in `template.yaml` does not allow
//! (`iam`), and what DynamoDB's limits do not allow (`limits`), answering as AWS does.
//!
//! The guard is the SDK's HTTP client, wrapped: it reads each request's `X-Amz-Target` (the
//! action) and JSON body (the resources), and either forwards it or answers in AWS's place
//! without sending anything, so a refused write writes nothing.

pub mod iam;
pub mod limits;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use serde_json::{Value, json};

pub use iam::Policy;

/// The plain HTTP client the guard forwards through (the SDK's own default connector does not
/// show in `SdkConfig`, so the guard builds the same one).
pub fn base_http_client(endpoint: &str) -> SharedHttpClient {
    let builder = aws_smithy_http_client::Builder::new();
    if endpoint.starts_with("https:") {
        builder
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::AwsLc,
            ))
            .build_https()
    } else {
        builder.build_http()
    }
}

/// A function `$name(client, http, policy)`: `client` of SDK `$sdk` (its endpoint,
/// credentials, interceptors) with every request sent through a [`Guard`]. The SDKs' clients
/// share no trait to be generic over, hence the macro.
macro_rules! guarded_client {
    ($(#[$doc:meta])* $name:ident, $sdk:ident) => {
        $(#[$doc])*
        pub fn $name(
            client: &$sdk::Client,
            http: &SharedHttpClient,
            policy: Arc<Policy>,
            in_flight: InFlight,
        ) -> $sdk::Client {
            let config = client
                .config()
                .to_builder()
                .http_client(Guard::new(http, policy, in_flight))
                .build();
            $sdk::Client::from_conf(config)
        }
    };
}

guarded_client!(
    /// `client` (its endpoint, credentials, interceptors) with every request checked against
    /// `policy` and DynamoDB's limits.
    dynamodb,
    aws_sdk_dynamodb
);
guarded_client!(
    /// A DynamoDB Streams client checked against `policy`.
    streams,
    aws_sdk_dynamodbstreams
);

/// The DynamoDB requests a principal has sent that the engine has not answered yet. A request
/// that has left runs to its end even when the caller is dropped (an invocation cut at its
/// timeout), as a request that reached DynamoDB is applied whatever becomes of its sender; the
/// stream poller waits for them to settle before it delivers a timed-out batch again, so no
/// abandoned write lands after the retry's own.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<(std::sync::atomic::AtomicUsize, tokio::sync::Notify)>);

impl InFlight {
    /// Sends `sent` to its end on its own task, counted while it runs.
    fn track(&self, sent: HttpConnectorFuture) -> HttpConnectorFuture {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return sent;
        };
        let count = self.clone();
        count.0.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let task = runtime.spawn(async move {
            let answer = sent.await;
            if count.0.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                count.0.1.notify_waiters();
            }
            answer
        });
        HttpConnectorFuture::new(async move {
            task.await.unwrap_or_else(|e| {
                Err(
                    aws_smithy_runtime_api::client::result::ConnectorError::other(
                        Box::new(e),
                        None,
                    ),
                )
            })
        })
    }

    /// Waits until nothing is in flight, or `limit` has passed.
    pub async fn settled(&self, limit: std::time::Duration) {
        let idle = async {
            loop {
                let notified = self.0.1.notified();
                if self.0.0.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(limit, idle).await;
    }
}

/// Shard iterator → the stream it reads: GetRecords names no stream, but IAM authorizes it on
/// the stream the iterator was issued for.
type Iterators = Arc<Mutex<HashMap<String, String>>>;

#[derive(Debug, Clone)]
struct Guard {
    inner: SharedHttpClient,
    policy: Arc<Policy>,
    iterators: Iterators,
    in_flight: InFlight,
}

impl Guard {
    fn new(inner: &SharedHttpClient, policy: Arc<Policy>, in_flight: InFlight) -> Self {
        Self {
            inner: inner.clone(),
            policy,
            iterators: Iterators::default(),
            in_flight,
        }
    }
}

impl HttpClient for Guard {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(GuardConnector {
            inner: self.inner.http_connector(settings, components),
            policy: self.policy.clone(),
            iterators: self.iterators.clone(),
            in_flight: self.in_flight.clone(),
        })
    }
}

#[derive(Debug)]
struct GuardConnector {
    inner: SharedHttpConnector,
    policy: Arc<Policy>,
    iterators: Iterators,
    in_flight: InFlight,
}

/// The service a request is for, from its `X-Amz-Target` prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    DynamoDb,
    Streams,
}

/// The `(action, resource)` pairs IAM authorizes a request by (`stream_of`: the stream a
/// shard iterator reads).
pub fn requested(
    service: Service,
    operation: &str,
    body: &Value,
    stream_of: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if service == Service::Streams {
        let resource = match operation {
            "ListStreams" => "*".to_string(),
            "GetRecords" => stream_of(&str_of(body, "ShardIterator"))
                .unwrap_or_else(|| "an unknown shard iterator".into()),
            _ => str_of(body, "StreamArn"),
        };
        return vec![(format!("dynamodb:{operation}"), resource)];
    }
    let table = |v: &Value| {
        let arn = iam::table_arn(&str_of(v, "TableName"));
        match v.get("IndexName").and_then(Value::as_str) {
            Some(index) => format!("{arn}/index/{index}"),
            None => arn,
        }
    };
    let keys_of = |k: &str| -> Vec<String> {
        body.get(k)
            .and_then(Value::as_object)
            .map(|m| m.keys().map(|t| iam::table_arn(t)).collect())
            .unwrap_or_default()
    };
    let action = |op: &str| format!("dynamodb:{op}");
    match operation {
        "ListTables" => vec![(action(operation), "*".into())],
        "BatchGetItem" | "BatchWriteItem" => keys_of("RequestItems")
            .into_iter()
            .map(|t| (action(operation), t))
            .collect(),
        "TransactWriteItems" | "TransactGetItems" => body
            .get("TransactItems")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, inner) = item.as_object()?.iter().next()?;
                let op = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    "Get" => "GetItem",
                    other => other,
                };
                Some((action(op), table(inner)))
            })
            .collect(),
        _ => vec![(action(operation), table(body))],
    }
}

fn refusal(code: &str, message: String) -> HttpResponse {
    let body = json!({
        "__type": format!("com.amazonaws.dynamodb.v20120810#{code}"),
        "message": message,
    })
    .to_string();
    let mut response = HttpResponse::new(
        400u16
            .try_into()
            .unwrap_or_else(|_| unreachable!("400 is a status")),
        SdkBody::from(body.clone()),
    );
    response
        .headers_mut()
        .insert("content-type", "application/x-amz-json-1.0");
    response
        .headers_mut()
        .insert("content-length", body.len().to_string());
    response
        .headers_mut()
        .insert("x-amzn-requestid", ulid::Ulid::new().to_string());
    response
}

impl HttpConnector for GuardConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let target = crate::chaos::target(&request);
        let (service, operation) = match target.split_once('.') {
            Some(("DynamoDB_20120810", op)) => (Service::DynamoDb, op.to_string()),
            Some(("DynamoDBStreams_20120810", op)) => (Service::Streams, op.to_string()),
            _ => {
                return HttpConnectorFuture::ready(Ok(refusal(
                    "AccessDeniedException",
                    format!("the local guard does not know the target {target:?}"),
                )));
            }
        };
        let body: Value = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or(Value::Null);
        if let Some(refused) = self.refusal_for(service, &operation, &body) {
            return HttpConnectorFuture::ready(Ok(refused));
        }
        if service == Service::Streams
            && !matches!(operation.as_str(), "GetShardIterator" | "GetRecords")
        {
            return self.inner.call(request);
        }
        let sent = match service {
            Service::DynamoDb => self.in_flight.track(self.inner.call(request)),
            Service::Streams => self.inner.call(request),
        };
        let iterators = self.iterators.clone();
        HttpConnectorFuture::new(answer(sent, service, operation, body, iterators))
    }
}

impl GuardConnector {
    /// What AWS would answer instead of serving the request: an action the policy denies, or
    /// a DynamoDB request over DynamoDB's limits.
    fn refusal_for(&self, service: Service, operation: &str, body: &Value) -> Option<HttpResponse> {
        let stream_of = |iterator: &str| {
            let map = self.iterators.lock().ok()?;
            map.get(iterator).cloned()
        };
        for (action, resource) in requested(service, operation, body, stream_of) {
            if let Err(denied) = self.policy.check(&action, &resource) {
                // On stderr, so a failing test shows what was refused.
                eprintln!(
                    "local IAM guard: AccessDeniedException: {}",
                    denied.message()
                );
                return Some(refusal("AccessDeniedException", denied.message()));
            }
        }
        if service == Service::DynamoDb {
            return limits::check_request(operation, body)
                .err()
                .map(|r| refusal(r.code, r.message));
        }
        None
    }
}

/// The engine's answer as AWS would give it: a stream's iterators remembered (to authorize
/// the GetRecords that use them), a DynamoDB answer cut to DynamoDB's limits.
async fn answer(
    sent: HttpConnectorFuture,
    service: Service,
    operation: String,
    body: Value,
    iterators: Iterators,
) -> Result<HttpResponse, aws_smithy_runtime_api::client::result::ConnectorError> {
    let mut response = sent.await?;
    if !response.status().is_success() {
        return Ok(response);
    }
    let bytes = ByteStream::new(response.take_body())
        .collect()
        .await
        .map_err(|e| aws_smithy_runtime_api::client::result::ConnectorError::io(Box::new(e)))?
        .into_bytes();
    let answer = serde_json::from_slice::<Value>(&bytes).ok();
    if service == Service::Streams {
        remember_iterator(&iterators, &operation, &body, answer.as_ref());
        *response.body_mut() = SdkBody::from(bytes);
        return Ok(response);
    }
    let limited = answer.and_then(|answer| limits::limit_response(&operation, &body, &answer));
    match limited {
        Some(answer) => {
            let text = answer.to_string();
            let headers = response.headers_mut();
            headers.remove("x-amz-crc32");
            headers.insert("content-length", text.len().to_string());
            *response.body_mut() = SdkBody::from(text);
        }
        None => *response.body_mut() = SdkBody::from(bytes),
    }
    Ok(response)
}

/// Notes which stream the iterator a GetShardIterator or GetRecords answer holds reads.
fn remember_iterator(
    iterators: &Iterators,
    operation: &str,
    request: &Value,
    answer: Option<&Value>,
) {
    let Ok(mut map) = iterators.lock() else {
        return;
    };
    let (stream, next) = match operation {
        "GetShardIterator" => (
            request
                .get("StreamArn")
                .and_then(Value::as_str)
                .map(str::to_string),
            answer.and_then(|a| a.get("ShardIterator")),
        ),
        // Kept after use: a retried batch may read from the same iterator again.
        _ => {
            let used = request
                .get("ShardIterator")
                .and_then(Value::as_str)
                .unwrap_or("");
            (
                map.get(used).cloned(),
                answer.and_then(|a| a.get("NextShardIterator")),
            )
        }
    };
    if let (Some(stream), Some(next)) = (stream, next.and_then(Value::as_str)) {
        map.insert(next.to_string(), stream);
    }
}
