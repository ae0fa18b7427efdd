//! The API's errors, rendered as `application/problem+json` (RFC 9457).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::store::StoreError;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// One invalid member of a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Everything a request can fail with. Each variant's doc names its status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: a member of the body, path or query is invalid.
    #[error("{detail}")]
    Validation {
        detail: String,
        errors: Vec<FieldError>,
    },
    /// 400: the request is malformed (not JSON, bad cursor, ...).
    #[error("{0}")]
    BadRequest(String),
    /// 401: no bearer token, or one that does not verify.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// 404: the resource does not exist for this tenant.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 409: the request conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// 412: `If-Match` names a version that is no longer current.
    #[error("the issue has changed since version {0}; fetch it again")]
    PreconditionFailed(String),
    /// 413: the body, or the item it would create, is too large.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 500: logged with its source chain; the client sees only a generic message.
    #[error("internal error")]
    Internal(#[from] StoreError),
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::from_errors(vec![FieldError::new(field, message)])
    }

    pub fn from_errors(errors: Vec<FieldError>) -> Self {
        let detail = match errors.as_slice() {
            [one] => format!("{}: {}", one.field, one.message),
            _ => format!("{} members of the request are invalid", errors.len()),
        };
        Self::Validation { detail, errors }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Validation { .. } | Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            Self::Validation { .. } => "validation",
            Self::BadRequest(_) => "bad-request",
            Self::Unauthorized => "unauthorized",
            Self::NotFound(_) => "not-found",
            Self::Conflict(_) => "conflict",
            Self::PreconditionFailed(_) => "precondition-failed",
            Self::PayloadTooLarge(_) => "payload-too-large",
            Self::Internal(_) => "internal",
        }
    }
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
}

/// Renders a problem document for `status`.
pub fn problem_response(
    status: StatusCode,
    slug: &str,
    detail: String,
    errors: Option<&[FieldError]>,
) -> Response {
    let body = Problem {
        kind: format!("urn:gridline:problem:{slug}"),
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail,
        errors,
    };
    let json = serde_json::to_vec(&body).unwrap_or_default();
    let mut response = (status, json).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(source) = &self {
            // The source chain goes to the log, never to the client.
            tracing::error!(error = %crate::telemetry::chain(source), "request failed");
        }
        let errors = match &self {
            Self::Validation { errors, .. } => Some(errors.as_slice()),
            _ => None,
        };
        problem_response(self.status(), self.slug(), self.to_string(), errors)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
