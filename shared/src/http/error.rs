//! The API's errors and their HTTP form: status codes and `application/problem+json` bodies
//! (RFC 9457). The domain's and the store's errors become [`ApiError`]s here, so neither of
//! those layers knows about status codes.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::auth::Unauthorized;
use crate::domain::{
    FieldError, IssueTooLarge, MAX_FIELD_DEF_BYTES, MAX_FIELDS_PER_PROJECT, MAX_TEAMS_PER_USER,
    ValidationError,
};
use crate::store::{AddMemberError, CreateFieldError, CreateIssueError, StoreError};

pub const PROBLEM_JSON: &str = "application/problem+json";

/// Everything a request can fail with. Each variant's doc names its status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: a member of the body, path or query is invalid.
    #[error(transparent)]
    Validation(#[from] ValidationError),
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
    /// 409 with `Retry-After`: the grid is sorted by a field whose column is still being
    /// built (the field is not `sortable` yet); never a partial list.
    #[error(
        "the field {field} is not sortable yet: its column is being built; retry after {retry_after_s} seconds"
    )]
    ColumnIncomplete { field: String, retry_after_s: u32 },
    /// 422: the request is well-formed but cannot be processed as sent (an `Idempotency-Key`
    /// reused for another request).
    #[error("{0}")]
    Unprocessable(String),
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

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ValidationError::one(field, message).into()
    }

    pub fn from_errors(errors: Vec<FieldError>) -> Self {
        ValidationError { errors }.into()
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Validation(_) | Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) | Self::ColumnIncomplete { .. } => StatusCode::CONFLICT,
            Self::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            Self::Validation(_) => "validation",
            Self::BadRequest(_) => "bad-request",
            Self::Unauthorized => "unauthorized",
            Self::NotFound(_) => "not-found",
            Self::Conflict(_) => "conflict",
            Self::ColumnIncomplete { .. } => "column-incomplete",
            Self::PreconditionFailed(_) => "precondition-failed",
            Self::Unprocessable(_) => "unprocessable",
            Self::PayloadTooLarge(_) => "payload-too-large",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<Unauthorized> for ApiError {
    fn from(_: Unauthorized) -> Self {
        Self::Unauthorized
    }
}

impl From<IssueTooLarge> for ApiError {
    fn from(e: IssueTooLarge) -> Self {
        Self::PayloadTooLarge(e.to_string())
    }
}

impl From<CreateIssueError> for ApiError {
    fn from(e: CreateIssueError) -> Self {
        match e {
            CreateIssueError::ProjectNotFound => Self::NotFound("project"),
            CreateIssueError::TooLarge => IssueTooLarge.into(),
            CreateIssueError::Store(e) => e.into(),
        }
    }
}

impl From<CreateFieldError> for ApiError {
    fn from(e: CreateFieldError) -> Self {
        match e {
            CreateFieldError::ProjectNotFound => Self::NotFound("project"),
            CreateFieldError::TooManyFields => Self::Conflict(format!(
                "a project has at most {MAX_FIELDS_PER_PROJECT} fields"
            )),
            CreateFieldError::DefinitionsTooLarge => Self::Conflict(format!(
                "a project's field definitions (names and options) take at most {MAX_FIELD_DEF_BYTES} bytes"
            )),
            CreateFieldError::Store(e) => e.into(),
        }
    }
}

impl From<AddMemberError> for ApiError {
    fn from(e: AddMemberError) -> Self {
        match e {
            AddMemberError::TooManyTeams => Self::Conflict(format!(
                "the user belongs to {MAX_TEAMS_PER_USER} teams, the most a user may"
            )),
            AddMemberError::Store(e) => e.into(),
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
            Self::Validation(v) => Some(v.errors.as_slice()),
            _ => None,
        };
        let mut response = problem_response(self.status(), self.slug(), self.to_string(), errors);
        if let Self::ColumnIncomplete { retry_after_s, .. } = &self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_s));
        }
        response
    }
}

impl IntoResponse for Unauthorized {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;

    async fn body_of(e: ApiError) -> (StatusCode, String) {
        let response = e.into_response();
        let status = response.status();
        let bytes = to_bytes(response.into_body(), 4096).await.unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn validation_problems_keep_their_shape() {
        let (status, body) = body_of(ApiError::invalid("name", "is empty")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body,
            r#"{"type":"urn:gridline:problem:validation","title":"Bad Request","status":400,"detail":"name: is empty","errors":[{"field":"name","message":"is empty"}]}"#
        );
        let (_, body) = body_of(ApiError::from_errors(vec![
            FieldError::new("a", "x"),
            FieldError::new("b", "y"),
        ]))
        .await;
        assert!(body.contains(r#""detail":"2 members of the request are invalid""#));
    }

    #[tokio::test]
    async fn other_problems_have_no_errors_member() {
        let (status, body) = body_of(Unauthorized.into()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            body,
            r#"{"type":"urn:gridline:problem:unauthorized","title":"Unauthorized","status":401,"detail":"a valid bearer token is required"}"#
        );
        let (status, body) = body_of(IssueTooLarge.into()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(body.contains("409600 bytes, DynamoDB's item limit"));
    }
}
