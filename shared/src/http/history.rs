//! `GET /issues/{issue_id}/history`: an issue's history, newest first, one entry per version
//! ([`crate::store::index::history`]): the first page is one Query of the index table (the
//! issue's watermark head, then its entries), so a page's cost does not grow with the issue's
//! age. An issue the index does not know yet (just created) or never knew is told apart by
//! one read of the records table: `200` with what there is, or `404`.

use std::collections::HashMap;

use axum::extract::{Query, State};

use super::AppState;
use super::extract::{Id, Paging, unknown_params};
use super::page::{PageBody, render};
use crate::auth::Caller;
use crate::domain::ids::IssueId;
use crate::http::error::{ApiError, ApiResult};
use crate::store::index::history::Indexed;

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(issue_id): Id<IssueId>,
    Query(mut params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    params.remove("limit");
    params.remove("cursor");
    let errors = unknown_params(&params, &[]);
    if !errors.is_empty() {
        return Err(ApiError::from_errors(errors));
    }
    let cursor = paging.bind(format!("issue_id={issue_id}"));
    let start = cursor.start()?;
    let page = app
        .store
        .index()
        .history_page(&caller.tenant, &issue_id, paging.limit, start.as_ref())
        .await?;
    match page.indexed {
        Indexed::Deleted => return Err(ApiError::NotFound("issue")),
        Indexed::Yes => {}
        Indexed::Unknown => {
            // Strongly consistent: an issue created a moment ago exists.
            let exists = app
                .store
                .records()
                .get_issue_item(&caller.tenant, &issue_id)
                .await?
                .is_some();
            if !exists {
                return Err(ApiError::NotFound("issue"));
            }
        }
    }
    render(page.entries, page.next, &cursor)
}
