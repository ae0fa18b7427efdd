//! Inboxes: the issues a participant is on, newest `updated_at` first, from participation
//! copies. A list over several partitions (roles, or the caller's teams) queries them in
//! parallel, merges by sort key and shows each issue once: [`crate::read::inbox`] is that
//! merge and its cursor; this picks the partitions, calls it and renders.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::{Path, Query, State};

use super::AppState;
use super::extract::{BoundCursor, Paging, path_id, unknown_params};
use super::views::{InboxItem, IssueView, List, participants_of};
use crate::auth::Caller;
use crate::cursor::Position;
use crate::domain::FieldError;
use crate::domain::ids::TeamId;
use crate::domain::{IssueState, Participant, ParticipantKind, Role};
use crate::http::error::{ApiError, ApiResult};
use crate::keys;
use crate::read::inbox;
use crate::read::names::names_fit;

/// One partition of a merged list.
struct Source {
    pk: String,
    kind: ParticipantKind,
    id: String,
}

impl Source {
    /// The participant this partition is the inbox of, in `role`.
    fn as_participant(&self, role: Role) -> Participant {
        Participant {
            kind: self.kind,
            id: self.id.clone(),
            role,
        }
    }
}

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
    sources: Vec<Source>,
    state: IssueState,
    paging: &Paging,
    cursor: &BoundCursor<'_>,
) -> ApiResult<Json<List<InboxItem>>> {
    let after = match cursor.start()? {
        None => None,
        Some(p) => Some(
            inbox::after_of(p).ok_or_else(|| ApiError::invalid("cursor", "cursor is malformed"))?,
        ),
    };
    let merged = inbox::read_merged(sources.len(), paging.limit, after, |i, limit, after| {
        let (store, pk) = (&app.store, &sources[i].pk);
        async move { store.query_inbox(pk, limit, after.as_deref()).await }
    })
    .await?;
    let mut cut = merged.last;
    let mut any_left = merged.any_left;
    let entries = merged
        .taken
        .iter()
        .map(|t| (t.issue_id.as_str(), t.summary.as_deref()));
    let mut found = app.store.issues_of_entries(&caller.tenant, entries).await?;
    let mut issues: Vec<(String, crate::domain::Issue, Vec<Participant>)> = merged
        .taken
        .into_iter()
        .filter_map(|t| {
            let via = t
                .via
                .into_iter()
                .map(|(i, role)| sources[i].as_participant(role));
            found.remove(&t.issue_id).map(|i| (t.sk, i, via.collect()))
        })
        // Copies of issues deleted or moved to another state since they were indexed.
        .filter(|(_, i, _)| i.state == state)
        .collect();
    // Names are bounded per page: past them the page ends at the last issue kept.
    let fit = names_fit(issues.iter().map(|(_, i, _)| i));
    if fit < issues.len() {
        cut = Some(issues[fit - 1].0.clone());
        any_left = true;
        issues.truncate(fit);
    }
    let names = app
        .store
        .names(
            &caller.tenant,
            &participants_of(issues.iter().map(|(_, i, _)| i)),
        )
        .await?;
    let items = issues
        .into_iter()
        .map(|(_, issue, via)| InboxItem {
            issue: IssueView::inbox_summary(issue, &names),
            via,
        })
        .collect();
    let next = cut.filter(|_| any_left).map(inbox::position_after);
    Ok(Json(List {
        items,
        next_cursor: next.map(|p| cursor.seal(&p)),
    }))
}

pub async fn my_issues(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<List<InboxItem>>> {
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
    let me = |role: Option<Role>| Source {
        pk: keys::index::inbox_pk(
            &caller.tenant,
            ParticipantKind::User,
            &caller.user,
            state,
            role,
        ),
        kind: ParticipantKind::User,
        id: caller.user.to_string(),
    };
    // No role filter: one partition. Roles: one per role, merged.
    let sources = if roles.is_empty() {
        vec![me(None)]
    } else {
        roles.iter().map(|r| me(Some(*r))).collect()
    };
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
    read(&app, &caller, sources, state, &paging, &cursor).await
}

pub async fn team_issues(
    State(app): State<AppState>,
    caller: Caller,
    Path(team_id): Path<String>,
    paging: Paging,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<List<InboxItem>>> {
    let state = state_only(&params)?;
    let team_id: TeamId = path_id(&team_id)?;
    if app
        .store
        .get_team(&caller.tenant, &team_id)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound("team"));
    }
    let sources = vec![Source {
        pk: keys::index::inbox_pk(&caller.tenant, ParticipantKind::Team, &team_id, state, None),
        kind: ParticipantKind::Team,
        id: team_id.to_string(),
    }];
    let params = format!("state={}&team_id={team_id}", state.as_str());
    let cursor = paging.bind(params);
    read(&app, &caller, sources, state, &paging, &cursor).await
}

pub async fn my_teams_issues(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<List<InboxItem>>> {
    let state = state_only(&params)?;
    // The caller's teams, read now: joining or leaving a team changes this list at once.
    let mut teams = BTreeMap::new();
    let mut start: Option<Position> = None;
    loop {
        let page = app
            .store
            .teams_of_user(&caller.tenant, &caller.user, None, start.as_ref())
            .await?;
        teams.extend(page.items.into_iter().map(|t| (t.id.clone(), t)));
        start = page.next;
        if start.is_none() {
            break;
        }
    }
    let sources = teams
        .keys()
        .map(|id| Source {
            pk: keys::index::inbox_pk(&caller.tenant, ParticipantKind::Team, id, state, None),
            kind: ParticipantKind::Team,
            id: id.to_string(),
        })
        .collect();
    let params = format!("state={}", state.as_str());
    let cursor = paging.bind_to_caller(params);
    read(&app, &caller, sources, state, &paging, &cursor).await
}
