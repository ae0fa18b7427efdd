//! The API's errors and their HTTP form: status codes and `application/problem+json` bodies
//! (RFC 9457). The domain's and the store's errors become [`ApiError`]s here, so neither of
//! those layers knows about status codes.

use std::borrow::Cow;

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
    /// 403: the caller is known but may not do this (another user's comment).
    #[error("{0}")]
    Forbidden(String),
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
    /// 409 with `Retry-After`: a saved view's list is being built (the view is not `ready`);
    /// never a partial list.
    #[error("the view's list is being built; retry after {retry_after_s} seconds")]
    ViewNotReady { retry_after_s: u32 },
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
    /// 503: a service the request depends on (API Gateway's key management) failed; nothing
    /// was written, and the request may be sent again.
    #[error("{0}")]
    Unavailable(String),
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
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) | Self::ColumnIncomplete { .. } | Self::ViewNotReady { .. } => {
                StatusCode::CONFLICT
            }
            Self::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            Self::Validation(_) => "validation",
            Self::BadRequest(_) => "bad-request",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not-found",
            Self::Conflict(_) => "conflict",
            Self::ColumnIncomplete { .. } => "column-incomplete",
            Self::ViewNotReady { .. } => "view-not-ready",
            Self::PreconditionFailed(_) => "precondition-failed",
            Self::Unprocessable(_) => "unprocessable",
            Self::PayloadTooLarge(_) => "payload-too-large",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<Unauthorized> for ApiError {
    fn from(e: Unauthorized) -> Self {
        match e {
            Unauthorized::NoToken => Self::Unauthorized,
            Unauthorized::NoTenant => Self::Forbidden(
                "the token names no workspace: choose one with PUT /me/workspace and get a new token"
                    .into(),
            ),
        }
    }
}

impl From<IssueTooLarge> for ApiError {
    fn from(e: IssueTooLarge) -> Self {
        Self::PayloadTooLarge(e.to_string())
    }
}

use crate::store::records::tree::{MAX_DEPTH, TreeRefusal};

impl From<CreateIssueError> for ApiError {
    fn from(e: CreateIssueError) -> Self {
        match e {
            CreateIssueError::ProjectNotFound => Self::NotFound("project"),
            CreateIssueError::TooLarge => IssueTooLarge.into(),
            CreateIssueError::Parent(refusal) => refusal.into(),
            CreateIssueError::Store(e) => e.into(),
        }
    }
}

impl From<TreeRefusal> for ApiError {
    fn from(refusal: TreeRefusal) -> Self {
        match refusal {
            TreeRefusal::NoParent => Self::invalid("parent_id", crate::domain::NO_SUCH_PARENT),
            TreeRefusal::Cycle => Self::Conflict(
                "the parent is the issue itself or one of its sub-issues: that would make a cycle"
                    .into(),
            ),
            TreeRefusal::Busy => Self::Conflict(
                "the project's issue tree kept changing while this change was checked against it; try again"
                    .into(),
            ),
            TreeRefusal::TooDeep => Self::Conflict(format!(
                "an issue tree is at most {MAX_DEPTH} issues deep, and this change would make it deeper"
            )),
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

/// Most `errors` entries a problem lists: past them the problem says how many it left out
/// (`errors_omitted`). With each entry's echo bounded too, a problem document is at most about
/// 160 KB whatever the request (a body of 2 MB of unknown members included), and a few KB in
/// practice.
pub const MAX_PROBLEM_ERRORS: usize = 100;
/// Most bytes of an entry's `field` a problem echoes (a member's name, or a path to it).
pub const MAX_ECHOED_FIELD_BYTES: usize = 256;
/// Most bytes of an entry's `message` (which may quote what the request held).
pub const MAX_ECHOED_MESSAGE_BYTES: usize = 512;
/// Most bytes of a problem's `detail` (which may name a member and its message).
pub const MAX_DETAIL_BYTES: usize = 1024;

/// What marks an echo cut short.
const ELLIPSIS: char = '…';

/// `text` if it is at most `max` bytes; otherwise its longest start, cut on a character
/// boundary, that fits in `max` bytes with an ellipsis after it.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(ELLIPSIS.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{ELLIPSIS}", &text[..end]))
}

/// One `errors` entry as a problem echoes it: bounded.
#[derive(Serialize)]
struct Echo<'a> {
    field: Cow<'a, str>,
    message: Cow<'a, str>,
}

impl<'a> Echo<'a> {
    fn of(e: &'a FieldError) -> Self {
        Self {
            field: clip(&e.field, MAX_ECHOED_FIELD_BYTES),
            message: clip(&e.message, MAX_ECHOED_MESSAGE_BYTES),
        }
    }
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<Vec<Echo<'a>>>,
    /// How many invalid members `errors` leaves out; absent when it lists them all.
    #[serde(skip_serializing_if = "Option::is_none")]
    errors_omitted: Option<usize>,
}

/// Renders a problem document for `status`: `errors` lists at most [`MAX_PROBLEM_ERRORS`]
/// entries, and every string that may echo the request is clipped.
pub fn problem_response(
    status: StatusCode,
    slug: &str,
    detail: String,
    errors: Option<&[FieldError]>,
) -> Response {
    let omitted = errors
        .map(|e| e.len().saturating_sub(MAX_PROBLEM_ERRORS))
        .filter(|&n| n > 0);
    let body = Problem {
        kind: format!("urn:gridline:problem:{slug}"),
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail: clip(&detail, MAX_DETAIL_BYTES),
        errors: errors.map(|e| e.iter().take(MAX_PROBLEM_ERRORS).map(Echo::of).collect()),
        errors_omitted: omitted,
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
        if let Self::ColumnIncomplete { retry_after_s, .. } | Self::ViewNotReady { retry_after_s } =
            &self
        {
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
        let (status, body) = body_of(Unauthorized::NoToken.into()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            body,
            r#"{"type":"urn:gridline:problem:unauthorized","title":"Unauthorized","status":401,"detail":"a valid bearer token is required"}"#
        );
        let (status, body) = body_of(IssueTooLarge.into()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(body.contains("409600 bytes, DynamoDB's item limit"));
    }

    #[test]
    fn clipped_echoes_fit_their_bound_on_a_character_boundary() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("abcdefghij", 10), "abcdefghij");
        assert_eq!(clip("abcdefghijk", 10), "abcdefg…");
        // "é" is two bytes: the cut never splits one.
        let accents = "é".repeat(10);
        let clipped = clip(&accents, 10);
        assert_eq!(clipped, "ééé…");
        assert!(clipped.len() <= 10);
    }

    #[tokio::test]
    async fn a_problem_lists_a_bounded_number_of_bounded_errors() {
        let long = "n".repeat(1_000_000);
        let mut errors: Vec<FieldError> = (0..100_000)
            .map(|i| FieldError::new(format!("fields.f{i}"), "is not a field of this project"))
            .collect();
        errors.insert(
            0,
            FieldError::new(format!("fields.{long}"), format!("`{long}`")),
        );
        let response = ApiError::from_errors(errors).into_response();
        let bytes = to_bytes(response.into_body(), 64 * 1024).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["detail"], "100001 members of the request are invalid");
        let listed = body["errors"].as_array().unwrap();
        assert_eq!(listed.len(), MAX_PROBLEM_ERRORS);
        assert_eq!(body["errors_omitted"], 100_001 - MAX_PROBLEM_ERRORS);
        let first = &listed[0];
        assert!(first["field"].as_str().unwrap().len() <= MAX_ECHOED_FIELD_BYTES);
        assert!(first["field"].as_str().unwrap().ends_with('…'));
        assert!(first["message"].as_str().unwrap().len() <= MAX_ECHOED_MESSAGE_BYTES);
        assert_eq!(listed[1]["field"], "fields.f0");
        assert!(bytes.len() < 16 * 1024, "{} bytes", bytes.len());
        // One long error: the detail that names it is bounded too.
        let one = ApiError::invalid(long.clone(), long).into_response();
        let bytes = to_bytes(one.into_body(), 64 * 1024).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert!(body["detail"].as_str().unwrap().len() <= MAX_DETAIL_BYTES);
        assert!(body.get("errors_omitted").is_none());
    }
}
