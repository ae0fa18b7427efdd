//! Observability: logging set-up, error chains for logs, the per-request facts (DynamoDB calls,
//! tenant), and the one CloudWatch Embedded Metric Format writer ([`Emf`]) that both the API's
//! request records and the indexer's batch metrics go through.

use tracing_subscriber::EnvFilter;

/// Crates whose spans and events `LOG_LEVEL` governs: Gridline's own.
const OWN_CRATES: [&str; 9] = [
    "gridline",
    "gridline_local",
    "gridctl",
    "projects",
    "issues",
    "grid",
    "people",
    "inbox",
    "indexer",
];

/// The log filter for `level` (`error` … `trace`; anything else is `info`): Gridline's own
/// spans at that level, every other crate (the AWS SDK, hyper, rustls) at `warn`. At `debug`
/// and `trace` the SDK would log request and response bodies — item values — and the HTTP
/// stack its headers; raising `LOG_LEVEL` must never do that. `RUST_LOG` is not read for the
/// same reason.
pub fn log_filter(level: &str) -> EnvFilter {
    let level = match level.trim().to_ascii_lowercase().as_str() {
        l @ ("error" | "warn" | "info" | "debug" | "trace") => l.to_string(),
        _ => "info".to_string(),
    };
    let directives = OWN_CRATES
        .iter()
        .map(|c| format!("{c}={level}"))
        .collect::<Vec<_>>()
        .join(",");
    EnvFilter::try_new(format!("warn,{directives}")).unwrap_or_else(|_| EnvFilter::new("warn"))
}

fn level_from_env() -> String {
    std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into())
}

/// JSON logs for Lambda (CloudWatch), filtered by `LOG_LEVEL` (default `info`; see
/// [`log_filter`]). No ANSI colours and no timestamps: CloudWatch adds its own.
pub fn init_lambda() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(log_filter(&level_from_env()))
        .with_current_span(false)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Human-readable logs for the local stack, filtered like Lambda's.
pub fn init_local() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(log_filter(&level_from_env()))
        .with_target(false)
        .try_init();
}

/// An error and its sources, `a: b: c`, for logs.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

// --- Embedded Metric Format -----------------------------------------------------------------

/// The CloudWatch namespace of every Gridline metric.
pub const NAMESPACE: &str = "Gridline";

/// The units Gridline's metrics are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricUnit {
    Count,
    Milliseconds,
}

impl MetricUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Count => "Count",
            Self::Milliseconds => "Milliseconds",
        }
    }
}

/// An EMF metric directive: which top-level members of a document are metrics (with their
/// units) and which members they are broken down by. CloudWatch reads such a line from stdout
/// and turns it into metrics in [`NAMESPACE`]; the other members stay searchable log fields.
#[derive(Debug, Clone, Copy)]
pub struct Emf<'a> {
    /// Each set of dimension member names is one breakdown of every metric.
    pub dimensions: &'a [&'a [&'a str]],
    pub metrics: &'a [(&'a str, MetricUnit)],
}

impl Emf<'_> {
    /// The EMF document: `members` (a JSON object holding every metric and dimension named)
    /// under the `_aws` envelope, stamped `timestamp_ms`.
    pub fn document(&self, timestamp_ms: i64, members: serde_json::Value) -> serde_json::Value {
        let metrics: Vec<_> = self
            .metrics
            .iter()
            .map(|(name, unit)| serde_json::json!({"Name": name, "Unit": unit.as_str()}))
            .collect();
        let envelope = serde_json::json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": self.dimensions,
                "Metrics": metrics,
            }]
        });
        let mut document = serde_json::Map::new();
        document.insert("_aws".into(), envelope);
        if let serde_json::Value::Object(members) = members {
            document.extend(members);
        }
        serde_json::Value::Object(document)
    }
}

/// Now, in milliseconds since the Unix epoch (EMF timestamps, ages).
pub fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

// --- Per-request observation -----------------------------------------------------------------

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use aws_sdk_dynamodb::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use aws_sdk_dynamodb::error::BoxError;

/// What a request learns about itself on the way through: the DynamoDB calls it made and the
/// tenant its token named. Task-local, so concurrent requests never mix.
#[derive(Default, Debug)]
pub struct RequestFacts {
    calls: AtomicU32,
    tenant: Mutex<Option<String>>,
}

impl RequestFacts {
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    pub fn tenant(&self) -> Option<String> {
        self.tenant.lock().ok().and_then(|t| t.clone())
    }
}

tokio::task_local! {
    static SCOPE: Arc<RequestFacts>;
}

/// Runs `f` with a fresh scope and returns the scope with its output.
pub async fn observed<F: std::future::Future>(f: F) -> (F::Output, Arc<RequestFacts>) {
    let scope = Arc::new(RequestFacts::default());
    let out = SCOPE.scope(scope.clone(), f).await;
    (out, scope)
}

/// Records the verified caller's tenant for the request log (outside a request, a no-op).
pub fn note_tenant(tenant: &str) {
    let _ = SCOPE.try_with(|s| {
        if let Ok(mut t) = s.tenant.lock() {
            *t = Some(tenant.to_string());
        }
    });
}

/// Counts every DynamoDB operation the client sends (retries of one operation count once).
#[derive(Debug, Clone, Copy)]
pub struct CallCounter;

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "GridlineCallCounter"
    }

    fn read_before_execution(
        &self,
        _ctx: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let _ = SCOPE.try_with(|s| s.calls.fetch_add(1, Ordering::Relaxed));
        Ok(())
    }
}

/// How request records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStyle {
    /// One EMF JSON line per request on stdout (Lambda).
    Emf,
    /// A human-readable log event (the local stack, tests).
    Local,
}

/// One request, as the API logs it: a structured line that is also a CloudWatch Embedded
/// Metric Format document. It holds ids, the route template, status, latency and call
/// counts, never a token, a path with ids, or a field value.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub function: String,
    pub request_id: String,
    pub method: String,
    /// The route template (`/issues/{issue_id}`), not the concrete path.
    pub route: String,
    pub status: u16,
    pub latency_ms: f64,
    pub dynamodb_calls: u32,
    pub tenant: Option<String>,
}

/// A request record's metrics: by function, and by function and route.
const REQUEST_METRICS: Emf<'static> = Emf {
    dimensions: &[&["Function"], &["Function", "Route"]],
    metrics: &[
        ("Latency", MetricUnit::Milliseconds),
        ("DynamoDBCalls", MetricUnit::Count),
        ("ServerErrors", MetricUnit::Count),
        ("ClientErrors", MetricUnit::Count),
    ],
};

impl RequestRecord {
    /// The EMF document: metrics `Latency`, `DynamoDBCalls`, `ServerErrors`, `ClientErrors`
    /// by function and by function and route; the rest are searchable properties.
    pub fn emf(&self, timestamp_ms: i64) -> serde_json::Value {
        let members = serde_json::json!({
            "level": "INFO",
            "message": "request",
            "Function": self.function,
            "Route": format!("{} {}", self.method, self.route),
            "requestId": self.request_id,
            "tenant": self.tenant,
            "status": self.status,
            "Latency": (self.latency_ms * 1000.0).round() / 1000.0,
            "DynamoDBCalls": self.dynamodb_calls,
            "ServerErrors": u32::from(self.status >= 500),
            "ClientErrors": u32::from((400..500).contains(&self.status)),
        });
        REQUEST_METRICS.document(timestamp_ms, members)
    }

    /// Writes the record: an EMF line on stdout in Lambda (CloudWatch reads it), a log event
    /// on the local stack.
    pub fn emit(&self, style: LogStyle) {
        if style == LogStyle::Emf {
            println!("{}", self.emf(now_ms()));
        } else {
            tracing::info!(
                request_id = %self.request_id,
                tenant = self.tenant.as_deref().unwrap_or("-"),
                status = self.status,
                latency_ms = format_args!("{:.1}", self.latency_ms),
                dynamodb_calls = self.dynamodb_calls,
                "{} {}",
                self.method,
                self.route,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scopes_are_per_task_and_count_only_inside() {
        note_tenant("outside"); // no scope: ignored
        let ((), a) = observed(async {
            note_tenant("acme");
            let ((), b) = observed(async { note_tenant("other") }).await;
            assert_eq!(b.tenant().as_deref(), Some("other"));
        })
        .await;
        assert_eq!(a.tenant().as_deref(), Some("acme"));
        assert_eq!(a.calls(), 0);
    }

    #[test]
    fn the_request_record_is_emf_with_properties() {
        let r = RequestRecord {
            function: "grid".into(),
            request_id: "c6af9ac6-7b61-11e6-9a41-93e8deadbeef".into(),
            method: "GET".into(),
            route: "/projects/{project_id}/issues".into(),
            status: 503,
            latency_ms: 12.34567,
            dynamodb_calls: 3,
            tenant: Some("acme".into()),
        };
        let v = r.emf(1_700_000_000_000);
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Gridline");
        assert_eq!(v["Route"], "GET /projects/{project_id}/issues");
        assert_eq!(v["DynamoDBCalls"], 3);
        assert_eq!(v["ServerErrors"], 1);
        assert_eq!(v["ClientErrors"], 0);
        assert_eq!(v["Latency"], 12.346);
        // Every metric the directive names is a top-level member.
        for m in v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
        {
            assert!(v.get(m["Name"].as_str().unwrap()).is_some());
        }
        for d in v["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
            .as_array()
            .unwrap()
        {
            for name in d.as_array().unwrap() {
                assert!(v[name.as_str().unwrap()].is_string());
            }
        }
    }

    /// The document is exactly what the hand-written envelope was (CloudWatch parses it).
    #[test]
    fn the_emf_writer_writes_the_cloudwatch_envelope() {
        let emf = Emf {
            dimensions: &[&["Function"]],
            metrics: &[
                ("Records", MetricUnit::Count),
                ("Age", MetricUnit::Milliseconds),
            ],
        };
        let v = emf.document(
            1_700_000_000_000,
            serde_json::json!({"Function": "f", "Records": 2, "Age": 5}),
        );
        let expected = serde_json::json!({
            "_aws": {
                "Timestamp": 1_700_000_000_000i64,
                "CloudWatchMetrics": [{
                    "Namespace": "Gridline",
                    "Dimensions": [["Function"]],
                    "Metrics": [
                        {"Name": "Records", "Unit": "Count"},
                        {"Name": "Age", "Unit": "Milliseconds"}
                    ]
                }]
            },
            "Function": "f",
            "Records": 2,
            "Age": 5,
        });
        assert_eq!(v, expected);
        assert_eq!(v.to_string(), expected.to_string());
    }

    #[test]
    fn log_level_raises_our_crates_only() {
        let filter = log_filter("trace").to_string();
        assert!(filter.split(',').any(|d| d == "warn"), "{filter}");
        assert!(filter.contains("gridline=trace"), "{filter}");
        assert!(!filter.contains("aws"), "{filter}");
        assert!(log_filter("nonsense").to_string().contains("gridline=info"));
    }
}
