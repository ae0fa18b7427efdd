//! Request extractors whose failures are problem documents.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Query, Request};
use axum::http::Method;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::auth::{Identity, Unauthorized};
use crate::cursor::{Binding, CursorKey, Position};
use crate::domain::FieldError;
use crate::domain::ids::{
    CommentId, FieldId, InvitationId, IssueId, ProjectId, TeamId, TenantId, UserId, ViewId,
};
use crate::http::AppState;
use crate::http::error::ApiError;

/// A server-issued id of a path, parsed at the edge. An id the server could not have issued
/// names nothing, so it is answered `404` for what the path names without a database call.
pub trait PathId: Sized {
    /// What the `404` says is not found.
    const WHAT: &'static str;
    fn parse(s: &str) -> Option<Self>;
}

macro_rules! path_id {
    ($($id:ty => $what:literal),*) => {$(
        impl PathId for $id {
            const WHAT: &'static str = $what;
            fn parse(s: &str) -> Option<Self> {
                <$id>::parse(s)
            }
        }
    )*};
}
path_id!(ProjectId => "project", IssueId => "issue", TeamId => "team", FieldId => "field", UserId => "user", CommentId => "comment", ViewId => "view", InvitationId => "invitation");

/// `id` as a `T`, or `404` for what `T` names.
pub fn path_id<T: PathId>(id: &str) -> Result<T, ApiError> {
    T::parse(id).ok_or(ApiError::NotFound(T::WHAT))
}

/// The one id of a route such as `/issues/{issue_id}`, typed. Put it after the `Caller` so a
/// request without a valid token is `401` before anything about its path is said. A segment
/// that does not decode is the path extractor's own `400`, as for every other route; one that
/// decodes to no id of the server's is `404`.
pub struct Id<T>(pub T);

impl<S: Send + Sync, T: PathId> FromRequestParts<S> for Id<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(IntoResponse::into_response)?;
        path_id(&raw).map(Id).map_err(IntoResponse::into_response)
    }
}

/// The two ids of a route such as `/projects/{project_id}/fields/{field_id}`, each typed
/// where it names one (`None`: no id of its kind). Routes differ in what a bad segment is
/// (`404` for the pair, or `400` for a user id in a body-like position), so the handler
/// says it. Put it after the `Caller`, as [`Id`].
pub struct Ids<A, B>(pub Option<A>, pub Option<B>);

impl<S: Send + Sync, A: PathId, B: PathId> FromRequestParts<S> for Ids<A, B> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path((a, b)) =
            axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
                .await
                .map_err(IntoResponse::into_response)?;
        Ok(Ids(A::parse(&a), B::parse(&b)))
    }
}

/// Largest request body accepted; larger is `413`. A description (100,000 characters) plus a
/// full set of field values fits comfortably.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A JSON body parsed into `T`; type errors name the member that failed.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|_| {
            ApiError::PayloadTooLarge(format!("the request body exceeds {MAX_BODY_BYTES} bytes"))
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parses a JSON body, reporting the path of the member that failed.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::BadRequest(format!("the request body is not valid JSON: {inner}"))
        } else if path == "." {
            ApiError::from_errors(vec![FieldError::new(
                "body",
                strip_position(&inner.to_string()),
            )])
        } else {
            ApiError::from_errors(vec![FieldError::new(
                path,
                strip_position(&inner.to_string()),
            )])
        }
    })?;
    de.end()
        .map_err(|e| ApiError::BadRequest(format!("the request body is not valid JSON: {e}")))?;
    Ok(value)
}

/// serde_json appends "at line 1 column 9"; the member path already says where.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// `limit` and `cursor` of a list request, as given ([`Paging`] binds the cursor).
pub struct ListQuery {
    pub limit: i32,
    pub cursor: Option<String>,
}

pub const DEFAULT_LIMIT: i32 = 50;
pub const MAX_LIMIT: i32 = 100;

impl<S: Send + Sync> FromRequestParts<S> for ListQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(mut params) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(format!("the query string is invalid: {e}")))?;
        let limit = match params.remove("limit") {
            None => DEFAULT_LIMIT,
            Some(l) => l
                .parse::<i32>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or_else(|| {
                    ApiError::invalid("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))
                })?,
        };
        let cursor = params.remove("cursor").filter(|c| !c.is_empty());
        Ok(Self { limit, cursor })
    }
}

/// One error for each query parameter a route does not take (besides `limit` and `cursor`),
/// so a typo never silently changes a list.
pub fn unknown_params(params: &HashMap<String, String>, known: &[&str]) -> Vec<FieldError> {
    params
        .keys()
        .filter(|k| !known.contains(&k.as_str()) && *k != "limit" && *k != "cursor")
        .map(|k| FieldError::new(k.clone(), "is not a parameter of this route"))
        .collect()
}

/// A list request's paging: its `limit`, and its cursor bound to the tenant of the caller and
/// to the route the request matched, so no handler spells either out. A handler binds it to
/// its interpreted parameters ([`Paging::bind`]) and opens and seals positions through that.
pub struct Paging {
    pub limit: i32,
    cursor: Option<String>,
    key: CursorKey,
    tenant: TenantId,
    user: UserId,
    route: String,
}

impl FromRequestParts<AppState> for Paging {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // The caller first (verified once per request; the handler's own `Caller` reuses it): a
        // request without a valid token is `401` whatever its parameters.
        let identity = Identity::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let matched = MatchedPath::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        // A list that needs no tenant (a person's workspaces, invitations) is bound to no
        // tenant, so its cursors outlive a change of the token's workspace; the handler binds
        // it to the caller.
        let tenant = match super::gate_of(&parts.method, matched.as_str()) {
            Some(super::Gate::Token) => TenantId::unknown(),
            _ => identity
                .tenant
                .ok_or_else(|| ApiError::from(Unauthorized::NoTenant).into_response())?,
        };
        let ListQuery { limit, cursor } = ListQuery::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self {
            limit,
            cursor,
            key: state.cursor_key.clone(),
            tenant,
            user: identity.user,
            route: bound_route(&parts.method, matched.as_str()),
        })
    }
}

/// The route a cursor is bound to: `GET /projects/{project_id}/issues`, the method and the
/// route table's path. Every list is a GET; axum answers HEAD with the GET handler, and HEAD
/// binds as GET did when these strings were written by hand, so cursors stay valid.
fn bound_route(method: &Method, matched: &str) -> String {
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    format!("{method} {matched}")
}

impl Paging {
    /// The cursor of this request with its interpreted parameters (canonical, defaults applied).
    pub fn bind(&self, params: impl Into<String>) -> BoundCursor<'_> {
        BoundCursor {
            paging: self,
            params: params.into(),
            per_caller: false,
        }
    }

    /// As [`Paging::bind`], and bound to the calling user too: a list that is the caller's own.
    pub fn bind_to_caller(&self, params: impl Into<String>) -> BoundCursor<'_> {
        BoundCursor {
            per_caller: true,
            ..self.bind(params)
        }
    }
}

/// A request's cursor bound to everything it must be issued for.
pub struct BoundCursor<'a> {
    paging: &'a Paging,
    params: String,
    per_caller: bool,
}

impl BoundCursor<'_> {
    fn binding(&self) -> Binding<'_> {
        Binding {
            tenant: &self.paging.tenant,
            route: &self.paging.route,
            params: &self.params,
            caller: self.per_caller.then_some(self.paging.user.as_str()),
        }
    }

    /// The position the request's cursor holds, if it has one; a cursor from elsewhere is `400`.
    pub fn start(&self) -> Result<Option<Position>, ApiError> {
        self.paging
            .cursor
            .as_deref()
            .map(|c| {
                self.paging
                    .key
                    .open(&self.binding(), c)
                    .map_err(|e| ApiError::invalid("cursor", e.to_string()))
            })
            .transpose()
    }

    /// The cursor of the next page, resuming at `position`.
    pub fn seal(&self, position: &Position) -> String {
        self.paging.key.seal(&self.binding(), position)
    }
}

/// The version named by `If-Match`, quoted or bare. `*` (or no header) asks for no check.
/// A value that is not a version can never match, so it fails as a stale version would.
pub fn if_match(parts: &axum::http::HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = parts.get(axum::http::header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("").trim();
    if text == "*" {
        return Ok(None);
    }
    let bare = text.strip_prefix("W/").unwrap_or(text).trim_matches('"');
    bare.parse::<u64>()
        .map(Some)
        .map_err(|_| ApiError::PreconditionFailed(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The routes cursors were bound to when handlers spelled them out. The bound route must
    /// stay exactly these strings: they are part of every cursor's HMAC input.
    const LISTS: [&str; 9] = [
        "GET /projects",
        "GET /projects/{project_id}/fields",
        "GET /projects/{project_id}/issues",
        "GET /teams/{team_id}/members",
        "GET /me/teams",
        "GET /users/{user_id}/teams",
        "GET /me/issues",
        "GET /me/teams/issues",
        "GET /teams/{team_id}/issues",
    ];

    #[test]
    fn cursors_bind_the_routes_they_always_did() {
        let table: Vec<String> = crate::http::routes()
            .iter()
            .map(|r| bound_route(&r.method, r.path))
            .collect();
        for list in LISTS {
            assert!(table.iter().any(|r| r == list), "{list} is not a route");
        }
        assert_eq!(
            bound_route(&Method::HEAD, "/me/issues"),
            bound_route(&Method::GET, "/me/issues")
        );
    }

    #[tokio::test]
    async fn the_matched_path_is_the_route_table_path() {
        use tower::ServiceExt;
        let app = axum::Router::new().route(
            "/teams/{team_id}/issues",
            axum::routing::get(|m: MatchedPath| async move { m.as_str().to_string() }),
        );
        let request = Request::builder()
            .uri("/teams/01ABC/issues?limit=5")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"/teams/{team_id}/issues");
    }
}
