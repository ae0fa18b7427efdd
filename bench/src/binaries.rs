//! Each function's release binary: its size, and its init time against a local Lambda
//! runtime API.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::indexer::stack;

/// Each function's binary name, and its logical id in template.yaml (`sam build`'s directory).
const FUNCTIONS: [(&str, &str); 7] = [
    ("projects", "ProjectsFunction"),
    ("issues", "IssuesFunction"),
    ("grid", "GridFunction"),
    ("people", "PeopleFunction"),
    ("inbox", "InboxFunction"),
    ("indexer", "IndexerFunction"),
    ("fieldjob", "FieldJobFunction"),
];

/// Time from process start to the function's first `GET /runtime/invocation/next`: Lambda's
/// init phase (configuration, the client, the warm-up call to the engine).
async fn init_time(binary: &Path, engine: &str) -> Result<Duration> {
    let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
    let tx = std::sync::Arc::new(std::sync::Mutex::new(Some(tx)));
    let app = axum::Router::new().route(
        "/2018-06-01/runtime/invocation/next",
        axum::routing::get(move || {
            if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
                let _ = tx.send(Instant::now());
            }
            std::future::pending::<&'static str>()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let api = listener.local_addr()?.to_string();
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    let started = Instant::now();
    let mut child = tokio::process::Command::new(binary)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", &api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("RECORDS_TABLE", "records")
        .env("INDEX_TABLE", "index")
        .env("DYNAMODB_ENDPOINT", engine)
        .env("CURSOR_SIGNING_KEY", "bench-cursor-signing-key-0123456789")
        // The indexer and the job function send to the field-job queue (no call at init).
        .env(
            gridline::runtime::QUEUE_URL_VAR,
            "https://sqs.us-east-1.amazonaws.com/123456789012/bench-field-jobs",
        )
        .env("LOG_LEVEL", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let reached = tokio::time::timeout(Duration::from_secs(10), rx).await;
    let _ = child.kill().await;
    server.abort();
    let at =
        reached.with_context(|| format!("{}: init did not finish in 10 s", binary.display()))??;
    Ok(at - started)
}

/// Each function's binary in `dir`: sizes and median init time; and the functions whose
/// binary is not there (a debug run: `make bench` builds them), left out rather than failing
/// the run after its long measurements.
pub(crate) async fn binaries(
    dir: &Path,
) -> Result<(Vec<(String, u64, Option<u64>, f64)>, Vec<String>)> {
    let engine = stack().await?;
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for (name, logical) in FUNCTIONS {
        let path = dir.join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            eprintln!(
                "   {}: not found, left out (build the release binaries first; make bench does)",
                path.display()
            );
            missing.push(name.to_string());
            continue;
        };
        let size = meta.len();
        let arm = std::fs::metadata(Path::new(".aws-sam/build").join(logical).join("bootstrap"))
            .ok()
            .map(|m| m.len());
        let mut times = Vec::new();
        for _ in 0..10 {
            times.push(init_time(&path, &engine.endpoint).await?.as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        out.push((name.to_string(), size, arm, crate::percentile(&times, 0.5)));
    }
    Ok((out, missing))
}
