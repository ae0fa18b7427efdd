//! Cross-origin access for browser clients on the deployment's allowed origins.
//!
//! A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here, before any
//! route or token is looked at: browsers send it without credentials. Every other answer,
//! errors included, carries the CORS headers when the request's `Origin` is allowed, or the
//! browser would hide the answer from the page (a `401` or a `413` included).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// The environment variable listing the allowed origins, comma-separated (the template's
/// `AllowedOrigins` parameter); empty or unset allows no browser origin.
pub const ALLOWED_ORIGINS_VAR: &str = "ALLOWED_ORIGINS";

const ALLOW_METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const ALLOW_HEADERS: &str = "Authorization, Content-Type, Idempotency-Key, If-Match, X-Request-Id";
/// What a page may read of an answer besides the CORS-safelisted headers.
const EXPOSE_HEADERS: &str = "ETag, Location, Retry-After, X-Request-Id";
/// How long a browser may reuse a preflight's answer.
const MAX_AGE_SECS: &str = "600";

/// The origins whose pages may call the API: exact `scheme://host[:port]` strings, or `*`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cors {
    origins: Vec<String>,
}

impl Cors {
    /// Parses a comma-separated list; blanks are ignored and a trailing `/` is dropped, so
    /// `https://app.example.com/` matches the `Origin` a browser sends.
    pub fn parse(list: &str) -> Self {
        Self {
            origins: list
                .split(',')
                .map(|o| o.trim().trim_end_matches('/').to_string())
                .filter(|o| !o.is_empty())
                .collect(),
        }
    }

    /// `ALLOWED_ORIGINS` from the environment.
    pub fn from_env() -> Self {
        Self::parse(&std::env::var(ALLOWED_ORIGINS_VAR).unwrap_or_default())
    }

    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// The request's origin when it is allowed.
    fn allowed<'a>(&self, headers: &'a HeaderMap) -> Option<&'a HeaderValue> {
        let origin = headers.get(header::ORIGIN)?;
        let text = origin.to_str().ok()?;
        self.origins
            .iter()
            .any(|o| o == "*" || o == text)
            .then_some(origin)
    }
}

fn is_preflight(req: &Request<Body>) -> bool {
    req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The middleware: answers preflights, and adds the headers to every other answer.
pub async fn layer(cors: Cors, req: Request<Body>, next: Next) -> Response {
    let origin = cors.allowed(req.headers()).cloned();
    if is_preflight(&req) {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let h = response.headers_mut();
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        // A disallowed origin gets no Allow-* headers: the browser then refuses the call.
        if let Some(origin) = origin {
            allow(h, origin, &PREFLIGHT_HEADERS);
        }
        return response;
    }
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = origin {
        allow(h, origin, &ANSWER_HEADERS);
    }
    response
}

/// What a preflight's answer to an allowed origin says besides the origin.
const PREFLIGHT_HEADERS: [(HeaderName, &str); 3] = [
    (header::ACCESS_CONTROL_ALLOW_METHODS, ALLOW_METHODS),
    (header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOW_HEADERS),
    (header::ACCESS_CONTROL_MAX_AGE, MAX_AGE_SECS),
];

/// What any other answer to an allowed origin says besides the origin.
const ANSWER_HEADERS: [(HeaderName, &str); 1] =
    [(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSE_HEADERS)];

/// Allows `origin`, with `headers`.
fn allow(h: &mut HeaderMap, origin: HeaderValue, headers: &[(HeaderName, &'static str)]) {
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    for (name, value) in headers {
        h.insert(name.clone(), HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_list_and_matches_exactly() {
        let cors = Cors::parse(" https://app.example.com/ ,, http://localhost:5173");
        assert_eq!(
            cors.origins(),
            ["https://app.example.com", "http://localhost:5173"]
        );
        let mut h = HeaderMap::new();
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://app.example.com"),
        );
        assert!(cors.allowed(&h).is_some());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://app.example.com.evil.io"),
        );
        assert!(cors.allowed(&h).is_none());
        assert!(Cors::default().allowed(&h).is_none());
        assert!(Cors::parse("*").allowed(&h).is_some());
    }
}
