//! `Idempotency-Key` on the `POST`s that create: a repeat by the same caller with the same key
//! within a day creates nothing and gets the first answer again.
//!
//! The key is claimed (a conditional put) before the handler runs, so a repeat that arrives
//! while the first is still running finds it claimed (`409`) instead of creating twice; a
//! success is kept with the claim, an error frees the key.

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::AppState;
use super::error::ApiError;
use super::extract::MAX_BODY_BYTES;
use crate::auth::{Caller, Identity};
use crate::store::idempotency::{LEASE_S, MAX_PARTS, PART_BYTES};
use crate::store::{Answer, Claimed, KeyClaim};

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The longest key the contract allows.
pub const MAX_KEY_LEN: usize = 255;
/// The largest answer kept: far above any create's (an issue's answer is under 1 MB). One
/// larger would be kept without its body, and its repeat is a `409` naming where the created
/// resource is (`Location`), never a second create.
pub const MAX_REMEMBERED_BODY: usize = PART_BYTES * MAX_PARTS;
/// Attempts at keeping an answer before the claim is left to its lease.
const REMEMBER_ATTEMPTS: u32 = 3;
/// The answer's headers a repeat gets again.
const KEPT_HEADERS: [HeaderName; 3] = [header::CONTENT_TYPE, header::ETAG, header::LOCATION];

/// The middleware: passes every request without the header, and every method but `POST`.
pub async fn layer(State(app): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let Some(key) = req.headers().get(IDEMPOTENCY_KEY).cloned() else {
        return next.run(req).await;
    };
    let Some(key) = valid_key(&key) else {
        return ApiError::invalid(
            "Idempotency-Key",
            format!("must be 1 to {MAX_KEY_LEN} printable ASCII characters"),
        )
        .into_response();
    };
    let (mut parts, body) = req.into_parts();
    // Unauthenticated: the handler answers 401, and nothing is remembered.
    let Ok(identity) = Identity::from_request_parts(&mut parts, &app).await else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    // A route that needs no tenant (`POST /workspaces`) remembers its answers per user
    // alone, whatever tenant the token names; any other, per tenant and user.
    let tenantless = parts
        .extensions
        .get::<axum::extract::MatchedPath>()
        .and_then(|path| super::gate_of(&parts.method, path.as_str()))
        == Some(super::Gate::Token);
    let tenant = match (tenantless, &identity.tenant) {
        (true, _) => crate::domain::ids::TenantId::unknown(),
        (false, Some(tenant)) => tenant.clone(),
        // The handler answers 403; nothing is remembered.
        (false, None) => return next.run(Request::from_parts(parts, body)).await,
    };
    let caller = Caller {
        tenant,
        user: identity.user,
    };
    let Ok(bytes) = to_bytes(body, MAX_BODY_BYTES).await else {
        return ApiError::PayloadTooLarge(format!(
            "the request body exceeds {MAX_BODY_BYTES} bytes"
        ))
        .into_response();
    };
    let key_digest = digest(&[key.as_bytes()]);
    let fingerprint = digest(&[
        parts.method.as_str().as_bytes(),
        parts.uri.path().as_bytes(),
        &bytes,
    ]);
    let token = ulid::Ulid::new().to_string();
    let claim = KeyClaim {
        tenant: &caller.tenant,
        user: &caller.user,
        key_digest: &key_digest,
        fingerprint: &fingerprint,
        token: &token,
    };
    let req = Request::from_parts(parts, Body::from(bytes));
    match run_once(&app, &claim, req, next).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// Claims the key, then runs the request or answers as the claim says.
async fn run_once(
    app: &AppState,
    claim: &KeyClaim<'_>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let records = app.store.records();
    match records.claim_key(claim, epoch_seconds()).await? {
        Claimed::Won => {}
        Claimed::Running => {
            let mut response = ApiError::Conflict(
                "a request with this Idempotency-Key is still running; retry shortly".into(),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(1));
            return Ok(response);
        }
        Claimed::Mismatch => {
            return Err(ApiError::Unprocessable(
                "this Idempotency-Key was used for another request (another route or body)".into(),
            ));
        }
        Claimed::Done(answer) => return Ok(replay(answer)),
    }
    let response = next.run(req).await;
    if !response.status().is_success() {
        if let Err(e) = records.release_key(claim).await {
            tracing::warn!(error = %crate::telemetry::chain(&e), "an idempotency key stayed claimed until its lease ends");
        }
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    // The handlers' bodies are bytes in memory: reading one cannot fail but for a bug.
    let bytes = to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::Internal(crate::store::StoreError::Build(e.to_string())))?;
    let answer = answer_of(parts.status, &parts.headers, &bytes);
    remember(app, claim, &answer).await;
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

/// Keeps the answer, retrying a few times: the create happened, so a failure must not turn it
/// into an error — but a claim left running lets a repeat past its lease create again.
async fn remember(app: &AppState, claim: &KeyClaim<'_>, answer: &Answer) {
    for attempt in 0..REMEMBER_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
        }
        match app
            .store
            .records()
            .remember_answer(claim, answer, epoch_seconds())
            .await
        {
            Ok(()) => return,
            Err(e) => tracing::warn!(
                attempt,
                error = %crate::telemetry::chain(&e),
                "an answer was not remembered"
            ),
        }
    }
    tracing::error!(
        lease_s = LEASE_S,
        "an answer was not remembered: a repeat after the lease would create again"
    );
}

/// What is kept of a successful answer.
fn answer_of(status: StatusCode, headers: &HeaderMap, body: &Bytes) -> Answer {
    Answer {
        status: status.as_u16(),
        headers: KEPT_HEADERS
            .iter()
            .filter_map(|name| {
                let value = headers.get(name)?.to_str().ok()?;
                Some((name.as_str().to_string(), value.to_string()))
            })
            .collect(),
        body: (body.len() <= MAX_REMEMBERED_BODY).then(|| body.to_vec()),
    }
}

/// The first answer again; one too large to keep is a `409` naming what was created.
fn replay(answer: Answer) -> Response {
    let headers = answer.headers.iter().filter_map(|(k, v)| {
        Some((
            HeaderName::from_bytes(k.as_bytes()).ok()?,
            HeaderValue::from_str(v).ok()?,
        ))
    });
    let Some(body) = answer.body else {
        let mut response = ApiError::Conflict(
            "this Idempotency-Key's request succeeded, but its answer was too large to keep; the created resource is at Location".into(),
        )
        .into_response();
        for (name, value) in headers.filter(|(n, _)| n == header::LOCATION) {
            response.headers_mut().insert(name, value);
        }
        return response;
    };
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut response = (status, body).into_response();
    for (name, value) in headers {
        // Replacing: the bytes' own content type is not the first answer's.
        response.headers_mut().insert(name, value);
    }
    response
}

/// The key when it is 1–255 printable ASCII characters.
fn valid_key(value: &HeaderValue) -> Option<&str> {
    let key = value.to_str().ok()?;
    let printable = key.bytes().all(|b| (0x20..=0x7e).contains(&b));
    (printable && (1..=MAX_KEY_LEN).contains(&key.len())).then_some(key)
}

/// SHA-256 of the parts, each length-prefixed so no two splits of the same bytes agree.
fn digest(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    URL_SAFE_NO_PAD.encode(hash.finalize())
}

fn epoch_seconds() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_one_to_255_printable_ascii_characters() {
        let ok = |s: &str| valid_key(&HeaderValue::from_str(s).unwrap()).is_some();
        assert!(ok("a"));
        assert!(ok("order 42/retry#1"));
        assert!(ok(&"k".repeat(255)));
        assert!(!ok(""));
        assert!(!ok(&"k".repeat(256)));
        assert!(!ok("tab\there"));
        let non_ascii = HeaderValue::from_bytes("clé".as_bytes()).unwrap();
        assert!(valid_key(&non_ascii).is_none());
    }

    #[test]
    fn fingerprints_tell_route_and_body_apart() {
        let a = digest(&[b"POST", b"/projects", b"{}"]);
        assert_eq!(a, digest(&[b"POST", b"/projects", b"{}"]));
        assert_ne!(a, digest(&[b"POST", b"/teams", b"{}"]));
        assert_ne!(a, digest(&[b"POST", b"/projects", b"{ }"]));
        // Length prefixes: moving bytes from one part to the next changes the digest.
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
    }

    #[test]
    fn a_large_answer_is_kept_without_its_body() {
        let mut headers = HeaderMap::new();
        headers.insert(header::LOCATION, HeaderValue::from_static("/issues/x"));
        headers.insert("x-request-id", HeaderValue::from_static("r"));
        let small = answer_of(StatusCode::CREATED, &headers, &Bytes::from_static(b"{}"));
        assert_eq!(small.body.as_deref(), Some(&b"{}"[..]));
        assert_eq!(small.headers, vec![("location".into(), "/issues/x".into())]);
        let big = Bytes::from(vec![b' '; MAX_REMEMBERED_BODY + 1]);
        let big = answer_of(StatusCode::CREATED, &headers, &big);
        assert_eq!(big.body, None);
        let replayed = replay(big);
        assert_eq!(replayed.status(), StatusCode::CONFLICT);
        assert_eq!(replayed.headers()[header::LOCATION], "/issues/x");
    }
}
