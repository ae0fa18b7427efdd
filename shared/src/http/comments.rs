//! Comments: `POST` and `GET /issues/{issue_id}/comments`, `PATCH` and
//! `DELETE /comments/{comment_id}` (`store::records::comments`). A page is one strongly
//! consistent Query of the issue's comments and the authors' names' read; only the author
//! edits or deletes a comment (`403` for anyone else in the tenant).

use std::collections::{BTreeSet, HashMap};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::{ApiError, ApiResult};
use super::extract::{Id, JsonBody, Paging, unknown_params};
use super::page::{PageBody, render};
use super::{AppState, now};
use crate::auth::Caller;
use crate::domain::ids::{CommentId, IssueId, UserId};
use crate::domain::{FieldError, ParticipantKind, ValidationError, text};
use crate::store::records::comments::{Comment, CommentChange, Posted};
use crate::store::records::directory::Names;

/// The longest comment body, in characters.
pub const MAX_BODY_CHARS: usize = 65_536;

const COMMENT: &str = "comment";

/// `POST /issues/{id}/comments` and `PATCH /comments/{id}` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommentBody {
    pub body: String,
}

impl CommentBody {
    /// 1–65,536 characters of prose (line breaks and tabs welcome, other controls not).
    fn validate(&self) -> Result<&str, ValidationError> {
        let error = |m: String| ValidationError::one("body", m);
        if self.body.is_empty() {
            return Err(error("must not be empty".into()));
        }
        text::check_prose(&self.body, MAX_BODY_CHARS).map_err(error)?;
        Ok(&self.body)
    }
}

/// A comment as the API shows it.
#[derive(Serialize)]
struct CommentView {
    id: CommentId,
    issue_id: IssueId,
    author: UserId,
    /// The author's profile name now; absent when they have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    author_display_name: Option<String>,
    body: String,
    created_at: String,
    updated_at: String,
}

impl CommentView {
    fn new(c: Comment, names: &Names) -> Self {
        let author_display_name = names
            .get(&(ParticipantKind::User, c.author.to_string()))
            .cloned();
        Self {
            id: c.id,
            issue_id: c.issue_id,
            author: c.author,
            author_display_name,
            body: c.body,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// The names of `authors`, from the tenant's directory (one read, none for no author).
async fn names_of<'a>(
    app: &AppState,
    caller: &Caller,
    authors: impl IntoIterator<Item = &'a UserId>,
) -> ApiResult<Names> {
    let who: BTreeSet<(ParticipantKind, String)> = authors
        .into_iter()
        .map(|a| (ParticipantKind::User, a.to_string()))
        .collect();
    Ok(app.store.records().names(&caller.tenant, &who).await?)
}

/// One comment with its author's name.
async fn comment_response(
    app: &AppState,
    caller: &Caller,
    status: StatusCode,
    comment: Comment,
) -> ApiResult<Response> {
    let names = names_of(app, caller, [&comment.author]).await?;
    let view = CommentView::new(comment, &names);
    let location = format!("/comments/{}", view.id);
    let mut response = (status, Json(view)).into_response();
    if status == StatusCode::CREATED
        && let Ok(location) = HeaderValue::from_str(&location)
    {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// `POST /issues/{issue_id}/comments` → `201` comment.
pub async fn create(
    State(app): State<AppState>,
    caller: Caller,
    Id(issue_id): Id<IssueId>,
    JsonBody(body): JsonBody<CommentBody>,
) -> ApiResult<Response> {
    let text = body.validate()?;
    // The id's time is the comment's `created_at`: the order by id is the order by time.
    let id = CommentId::new(&issue_id, std::time::SystemTime::now());
    let comment = app
        .store
        .records()
        .create_comment(&caller.tenant, id, &caller.user, text)
        .await?;
    let comment = match comment {
        Posted::Done(c) => c,
        Posted::NotFound => return Err(ApiError::NotFound("issue")),
        Posted::IssueTooLarge => {
            return Err(ApiError::PayloadTooLarge(
                "the issue is at DynamoDB's item size limit: its comment count cannot grow".into(),
            ));
        }
    };
    comment_response(&app, &caller, StatusCode::CREATED, comment).await
}

/// `GET /issues/{issue_id}/comments?order=asc|desc&limit=&cursor=`: oldest first by default.
/// A first page with no comment reads the issue to tell `404` from none; a page that meets a
/// deleted issue's mark is `404`, and a later page (which may not reach one) reads the issue
/// at once with its Query.
pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(issue_id): Id<IssueId>,
    Query(mut params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    params.remove("limit");
    params.remove("cursor");
    let mut errors = unknown_params(&params, &["order"]);
    let forward = match params.get("order").map(String::as_str) {
        None | Some("asc") => true,
        Some("desc") => false,
        Some(_) => {
            errors.push(FieldError::new("order", "must be asc or desc"));
            true
        }
    };
    if !errors.is_empty() {
        return Err(ApiError::from_errors(errors));
    }
    let order = if forward { "asc" } else { "desc" };
    let cursor = paging.bind(format!("issue_id={issue_id}&order={order}"));
    let start = cursor.start()?;
    let records = app.store.records();
    let tenant = &caller.tenant;
    let read = records.comments_page(tenant, &issue_id, (forward, paging.limit), start.as_ref());
    let (page, issue) = if start.is_some() {
        let (page, issue) = futures::try_join!(read, records.get_issue_item(tenant, &issue_id))?;
        (page, Some(issue.is_some()))
    } else {
        (read.await?, None)
    };
    let page = page
        .filter(|_| issue != Some(false))
        .ok_or(ApiError::NotFound("issue"))?;
    if issue.is_none()
        && page.items.is_empty()
        && records.get_issue_item(tenant, &issue_id).await?.is_none()
    {
        return Err(ApiError::NotFound("issue"));
    }
    let names = names_of(&app, &caller, page.items.iter().map(|(c, _)| &c.author)).await?;
    let items = page
        .items
        .into_iter()
        .map(|(c, after)| (CommentView::new(c, &names), after));
    render(items, page.next, &cursor)
}

/// `PATCH /comments/{comment_id}` → `200` comment, by its author only.
pub async fn edit(
    State(app): State<AppState>,
    caller: Caller,
    Id(id): Id<CommentId>,
    JsonBody(body): JsonBody<CommentBody>,
) -> ApiResult<Response> {
    let text = body.validate()?;
    let changed = app
        .store
        .records()
        .edit_comment(&caller.tenant, &id, &caller.user, (text, &now()))
        .await?;
    let comment = allowed(changed)?;
    comment_response(&app, &caller, StatusCode::OK, comment).await
}

/// `DELETE /comments/{comment_id}` → `204`, by its author only.
pub async fn delete(
    State(app): State<AppState>,
    caller: Caller,
    Id(id): Id<CommentId>,
) -> ApiResult<StatusCode> {
    let changed = app
        .store
        .records()
        .delete_comment(&caller.tenant, &id, &caller.user)
        .await?;
    allowed(changed)?;
    Ok(StatusCode::NO_CONTENT)
}

fn allowed<T>(change: CommentChange<T>) -> ApiResult<T> {
    match change {
        CommentChange::Done(t) => Ok(t),
        CommentChange::NotFound => Err(ApiError::NotFound(COMMENT)),
        CommentChange::NotAuthor => Err(ApiError::Forbidden(
            "only a comment's author may edit or delete it".into(),
        )),
    }
}
