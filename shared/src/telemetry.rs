//! Logging set-up and error formatting.

use tracing_subscriber::EnvFilter;

/// JSON logs for Lambda (CloudWatch), filtered by `RUST_LOG` or `LOG_LEVEL` (default `info`).
/// No ANSI colours and no timestamps: CloudWatch adds its own.
pub fn init_lambda() {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| {
            EnvFilter::try_new(std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into()))
        })
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Human-readable logs for the local stack.
pub fn init_local() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,aws_smithy=warn,aws_config=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
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
