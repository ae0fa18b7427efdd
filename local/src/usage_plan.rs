//! API Gateway's usage plan on the local API: each tenant's requests draw from the tenant's own
//! token bucket, so one tenant's burst cannot make another tenant's requests fail. In AWS the
//! authorizer names the tenant's API key (`usageIdentifierKey`) and the template's `UsagePlan`
//! throttles each key at `TenantRateLimit` requests a second with bursts of `TenantBurstLimit`;
//! here the tenant comes from the verified local token and the numbers from the same
//! parameters' defaults. Past the limit: `429` problem+json with `Retry-After`, as the
//! template's `THROTTLED` gateway response answers. Preflights (`OPTIONS`, no key in AWS)
//! and requests without a valid token (the authorizer's `401` comes first in AWS) are not
//! counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use gridline::http::error::problem_response;
use serde_yaml_ng::Value;

/// The template parameter holding each tenant's steady requests per second.
pub const RATE_PARAMETER: &str = "TenantRateLimit";
/// The template parameter holding each tenant's burst.
pub const BURST_PARAMETER: &str = "TenantBurstLimit";
/// Overrides [`RATE_PARAMETER`]'s default on the local stack (`make dev`).
pub const RATE_VAR: &str = "GRIDLINE_TENANT_RATE_LIMIT";
/// Overrides [`BURST_PARAMETER`]'s default on the local stack.
pub const BURST_VAR: &str = "GRIDLINE_TENANT_BURST_LIMIT";

/// One tenant's throttle: a token bucket of `burst` tokens refilled at `rate` a second, the
/// algorithm API Gateway documents for its throttles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TenantLimits {
    pub rate: f64,
    pub burst: u32,
}

impl TenantLimits {
    /// The template's defaults, each overridden by its environment variable when set.
    pub fn from_template() -> Result<Self> {
        let doc: Value = serde_yaml_ng::from_str(crate::template::TEMPLATE)
            .context("template.yaml is not YAML")?;
        let default = |name: &str| {
            doc["Parameters"][name]["Default"]
                .as_f64()
                .with_context(|| format!("template.yaml has no numeric default for {name}"))
        };
        let from_env = |var: &str| -> Result<Option<f64>> {
            match std::env::var(var) {
                Ok(v) => Ok(Some(
                    v.trim().parse().with_context(|| format!("{var}={v}"))?,
                )),
                Err(_) => Ok(None),
            }
        };
        let rate = from_env(RATE_VAR)?.map_or_else(|| default(RATE_PARAMETER), Ok)?;
        let burst = from_env(BURST_VAR)?.map_or_else(|| default(BURST_PARAMETER), Ok)?;
        anyhow::ensure!(
            rate > 0.0 && burst >= 1.0,
            "a tenant's rate must be above 0 and its burst at least 1"
        );
        Ok(Self {
            rate,
            burst: burst as u32,
        })
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Every tenant's bucket. Cloning shares them.
#[derive(Clone)]
pub struct UsagePlan {
    limits: TenantLimits,
    jwt_secret: Arc<[u8]>,
    buckets: Arc<Mutex<HashMap<String, Bucket>>>,
}

impl UsagePlan {
    /// A plan with `limits` per tenant, its tenants read from tokens signed with `jwt_secret`.
    pub fn new(limits: TenantLimits, jwt_secret: &[u8]) -> Self {
        Self {
            limits,
            jwt_secret: jwt_secret.into(),
            buckets: Arc::default(),
        }
    }

    /// Takes one request from `tenant`'s bucket, or says how long until one is there.
    pub fn take(&self, tenant: &str, now: Instant) -> Result<(), Duration> {
        let TenantLimits { rate, burst } = self.limits;
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = buckets.entry(tenant.to_string()).or_insert(Bucket {
            tokens: f64::from(burst),
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(f64::from(burst));
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }

    /// The bucket of a request's valid local token: its tenant, or the one bucket every token
    /// without a tenant shares (as in AWS, where they share the no-tenant key); `None`
    /// without a valid token.
    fn tenant_of(&self, req: &Request<Body>) -> Option<String> {
        let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let identity = gridline::auth::verify_hs256(token.trim(), &self.jwt_secret, now)?;
        Some(identity.tenant.map_or_else(
            || gridline::authorizer::NO_TENANT_USAGE_KEY.to_string(),
            |t| t.as_str().to_string(),
        ))
    }
}

/// Wraps `router` (every function's routes) with `plan`.
pub fn with_usage_plan(router: Router, plan: UsagePlan) -> Router {
    router.layer(axum::middleware::from_fn(
        move |req: Request<Body>, next: Next| {
            let plan = plan.clone();
            async move { throttle(&plan, req, next).await }
        },
    ))
}

async fn throttle(plan: &UsagePlan, req: Request<Body>, next: Next) -> Response {
    if req.method() == Method::OPTIONS {
        return next.run(req).await;
    }
    let Some(tenant) = plan.tenant_of(&req) else {
        return next.run(req).await;
    };
    match plan.take(&tenant, Instant::now()) {
        Ok(()) => next.run(req).await,
        Err(wait) => too_many_requests(wait, req.headers().get(header::ORIGIN)),
    }
}

/// The `THROTTLED` gateway response: problem+json, the request's origin reflected as the
/// template's gateway responses do, and `Retry-After` in whole seconds.
fn too_many_requests(wait: Duration, origin: Option<&HeaderValue>) -> Response {
    let mut response = problem_response(
        StatusCode::TOO_MANY_REQUESTS,
        "too-many-requests",
        "the tenant's requests exceed its rate limit".to_string(),
        None,
    );
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    if let Some(origin) = origin {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_holds_the_burst_and_refills_at_the_rate() {
        let plan = UsagePlan::new(
            TenantLimits {
                rate: 2.0,
                burst: 3,
            },
            b"s",
        );
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(plan.take("a", t0), Ok(()));
        }
        let wait = plan.take("a", t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        // Another tenant's bucket is its own.
        assert_eq!(plan.take("b", t0), Ok(()));
        // Half a second later one more request fits, and no more.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(plan.take("a", t1), Ok(()));
        assert!(plan.take("a", t1).is_err());
    }
}
