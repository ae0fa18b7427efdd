//! `GET /issues/{issue_id}/children`: an issue's direct children as list summaries, by
//! number, from its children partitions ([`crate::read::children`]): one Query (of the state's
//! partition, or of every state's) and the names' read, whatever the project's size. An issue without
//! children, or none at all, is told apart only then (one read of the issue: `404`).

use std::collections::HashMap;

use axum::extract::{Query, State};

use super::AppState;
use super::extract::{Id, Paging, unknown_params};
use super::page::{PageBody, render};
use super::views::{IssueView, participants_of};
use crate::auth::Caller;
use crate::domain::ids::IssueId;
use crate::domain::{FieldError, IssueState};
use crate::http::error::{ApiError, ApiResult};
use crate::read::children::{self, ChildrenRequest};
use crate::read::inbox;

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(parent): Id<IssueId>,
    Query(mut params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    params.remove("limit");
    params.remove("cursor");
    let mut errors = unknown_params(&params, &["state"]);
    let state = match params.get("state").map(String::as_str) {
        None => None,
        Some(s) => {
            let parsed = IssueState::parse(s);
            if parsed.is_none() {
                errors.push(FieldError::new("state", "must be open or closed"));
            }
            parsed
        }
    };
    if !errors.is_empty() {
        return Err(ApiError::from_errors(errors));
    }
    let cursor = paging.bind(format!(
        "issue_id={parent}&state={}",
        state.map_or("", IssueState::as_str)
    ));
    let after = match cursor.start()? {
        None => None,
        Some(p) => Some(
            inbox::after_of(p).ok_or_else(|| ApiError::invalid("cursor", "cursor is malformed"))?,
        ),
    };
    let first = after.is_none();
    let request = ChildrenRequest {
        tenant: &caller.tenant,
        parent: &parent,
        state,
        limit: paging.limit,
        after,
    };
    let page = children::page(&app.store, request).await?;
    if first && page.issues.is_empty() && !issue_exists(&app, &caller, &parent).await? {
        return Err(ApiError::NotFound("issue"));
    }
    let names = app
        .store
        .records()
        .names(
            &caller.tenant,
            &participants_of(page.issues.iter().map(|(i, _)| i)),
        )
        .await?;
    let items = page
        .issues
        .into_iter()
        .map(|(i, after)| (IssueView::inbox_summary(i, &names), after));
    render(items, page.next, &cursor)
}

/// Whether the issue exists (a first page with no children tells nothing).
async fn issue_exists(app: &AppState, caller: &Caller, issue: &IssueId) -> ApiResult<bool> {
    Ok(app
        .store
        .records()
        .issue_project(&caller.tenant, issue)
        .await?
        .is_some())
}
