//! Inboxes: the issues a participant is on, newest `updated_at` first, from participation
//! copies. A list over several partitions (roles, or the caller's teams) queries them in
//! parallel, merges by sort key and shows each issue once: [`crate::read::inbox`] is that
//! merge, its partitions and its cursor; this parses the request, calls
//! [`crate::read::inbox::page()`], reads the names and renders the page within its byte
//! budget ([`super::page`]).

use std::collections::{BTreeMap, HashMap};

use axum::extract::{Path, Query, State};

use super::AppState;
use super::extract::{BoundCursor, Paging, path_id, unknown_params};
use super::page::{PageBody, render};
use super::views::{InboxItem, IssueView, participants_of};
use crate::auth::Caller;
use crate::cursor::Position;
use crate::domain::FieldError;
use crate::domain::ids::TeamId;
use crate::domain::{IssueState, Role};
use crate::http::error::{ApiError, ApiResult};
use crate::read::inbox::{self, InboxRequest, Source};

fn parse_state(params: &HashMap<String, String>, errors: &mut Vec<FieldError>) -> IssueState {
    match params.get("state").map(String::as_str) {
        None => IssueState::Open,
        Some(s) => IssueState::parse(s).unwrap_or_else(|| {
            errors.push(FieldError::new("state", "must be open or closed"));
            IssueState::Open
        }),
    }
}

/// The `state` of a route that takes no other parameter.
fn state_only(params: &HashMap<String, String>) -> ApiResult<IssueState> {
    let mut errors = unknown_params(params, &["state"]);
    let state = parse_state(params, &mut errors);
    if errors.is_empty() {
        Ok(state)
    } else {
        Err(ApiError::from_errors(errors))
    }
}

/// Reads one page over `sources` (partitions of issues in `state`) and renders it.
async fn read(
    app: &AppState,
    caller: &Caller,
    sources: &[Source],
    state: IssueState,
    paging: &Paging,
    cursor: &BoundCursor<'_>,
) -> ApiResult<PageBody> {
    let after = match cursor.start()? {
        None => None,
        Some(p) => Some(
            inbox::after_of(p).ok_or_else(|| ApiError::invalid("cursor", "cursor is malformed"))?,
        ),
    };
    let request = InboxRequest {
        tenant: &caller.tenant,
        sources,
        state,
        limit: paging.limit,
        after,
    };
    let page = inbox::page(&app.store, request).await?;
    let names = app
        .store
        .records()
        .names(
            &caller.tenant,
            &participants_of(page.issues.iter().map(|(i, _)| &i.issue)),
        )
        .await?;
    let items = page.issues.into_iter().map(|(i, after)| {
        let item = InboxItem {
            issue: IssueView::inbox_summary(i.issue, &names),
            via: i.via,
        };
        (item, after)
    });
    render(items, page.next, cursor)
}

pub async fn my_issues(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    let mut errors = unknown_params(&params, &["state", "role"]);
    let state = parse_state(&params, &mut errors);
    let mut roles: Vec<Role> = Vec::new();
    if let Some(list) = params.get("role") {
        for r in list.split(',').map(str::trim) {
            match Role::parse(r) {
                Some(role) if !roles.contains(&role) => roles.push(role),
                Some(_) => {}
                None => errors.push(FieldError::new(
                    "role",
                    "must be assignee, reporter or watcher (comma-separated)",
                )),
            }
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::from_errors(errors));
    }
    roles.sort();
    let sources = Source::user_roles(&caller.user, &roles);
    let params = format!(
        "state={}&role={}",
        state.as_str(),
        roles
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    let cursor = paging.bind_to_caller(params);
    read(&app, &caller, &sources, state, &paging, &cursor).await
}

pub async fn team_issues(
    State(app): State<AppState>,
    caller: Caller,
    Path(team_id): Path<String>,
    paging: Paging,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    let state = state_only(&params)?;
    let team_id: TeamId = path_id(&team_id)?;
    if app
        .store
        .records()
        .get_team(&caller.tenant, &team_id)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound("team"));
    }
    let sources = [Source::team(&team_id)];
    let params = format!("state={}&team_id={team_id}", state.as_str());
    let cursor = paging.bind(params);
    read(&app, &caller, &sources, state, &paging, &cursor).await
}

pub async fn my_teams_issues(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    let state = state_only(&params)?;
    // The caller's teams, read now: joining or leaving a team changes this list at once.
    let mut teams = BTreeMap::new();
    let mut start: Option<Position> = None;
    loop {
        let page = app
            .store
            .records()
            .teams_of_user(&caller.tenant, &caller.user, None, start.as_ref())
            .await?;
        teams.extend(page.items.into_iter().map(|(t, _)| (t.id.clone(), t)));
        start = page.next;
        if start.is_none() {
            break;
        }
    }
    let sources: Vec<Source> = teams.keys().map(Source::team).collect();
    let params = format!("state={}", state.as_str());
    let cursor = paging.bind_to_caller(params);
    read(&app, &caller, &sources, state, &paging, &cursor).await
}
