//! Inboxes: the issues a participant is on, newest `updated_at` first, from participation
//! copies. A list over several partitions (roles, or the caller's teams) queries them in
//! parallel, merges by sort key and shows each issue once. Its cursor is one sort key: the
//! last one the page consumed. Every copy ahead of it in any partition was fetched (each
//! partition's first `limit` copies, and a page holds at most `limit` issues), so every
//! partition resumes "after that key" — DynamoDB takes a start key with any sort key — and the
//! cursor stays the same size whatever the caller's teams (under 2 KB with 50 of them).

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::{Path, Query, State};

use super::AppState;
use super::extract::{ListQuery, unknown_params};
use super::views::{InboxItem, IssueView, List, names_fit, participants_of};
use crate::auth::Caller;
use crate::cursor::{Binding, Position};
use crate::domain::ids::is_server_id;
use crate::domain::{IssueState, Participant, ParticipantKind, Role};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::keys;

/// The cursor's member: the last sort key returned.
const AFTER: &str = "after";

/// One partition of a merged list.
struct Source {
    pk: String,
    kind: ParticipantKind,
    id: String,
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
    s: &AppState,
    caller: &Caller,
    sources: Vec<Source>,
    state: IssueState,
    q: &ListQuery,
    scope: &Binding<'_>,
) -> ApiResult<Json<List<InboxItem>>> {
    let after = match q.position(s, scope)? {
        None => None,
        Some(mut p) => Some(
            p.remove(AFTER)
                .ok_or_else(|| ApiError::invalid("cursor", "cursor is malformed"))?,
        ),
    };
    let pages = futures::future::join_all(
        sources
            .iter()
            .map(|src| s.store.query_inbox(&src.pk, q.limit, after.as_deref())),
    )
    .await;
    // Every candidate, newest first; an issue several partitions hold has the same sort key in
    // each (updated_at#id), so its copies are adjacent.
    let mut candidates: Vec<(String, usize, String, String)> = Vec::new();
    let mut more = false;
    for (i, page) in pages.into_iter().enumerate() {
        let page = page?;
        more |= page.next.is_some();
        candidates.extend(
            page.items
                .into_iter()
                .map(|c| (c.sk, i, c.issue_id, c.role)),
        );
    }
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let fetched = candidates.len();

    // Issues taken: the sort key of their last copy consumed, id, via.
    let mut taken: Vec<(String, String, Vec<Participant>)> = Vec::new();
    let mut consumed = 0usize;
    let mut last_sk = None;
    for (sk, i, id, role) in candidates {
        let same_as_last = taken.last().is_some_and(|t| t.0 == sk);
        if !same_as_last && taken.len() == q.limit as usize {
            break;
        }
        // While the index catches up, one issue's copies may carry different sort keys.
        let slot = match taken.iter().position(|t| t.1 == id) {
            Some(existing) => existing,
            None => {
                taken.push((sk.clone(), id, Vec::new()));
                taken.len() - 1
            }
        };
        taken[slot].0 = sk.clone();
        last_sk = Some(sk);
        if let Some(role) = Role::parse(&role) {
            taken[slot].2.push(Participant {
                kind: sources[i].kind,
                id: sources[i].id.clone(),
                role,
            });
        }
        consumed += 1;
    }
    let mut cut = last_sk;
    let mut any_left = consumed < fetched || more;

    let ids: Vec<String> = taken.iter().map(|t| t.1.clone()).collect();
    let mut found = s.store.batch_get_issues(&caller.tenant, &ids).await?;
    let mut issues: Vec<(String, crate::domain::Issue, Vec<Participant>)> = taken
        .into_iter()
        .filter_map(|(sk, id, via)| found.remove(&id).map(|i| (sk, i, via)))
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
    let names = s
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
    let next = cut
        .filter(|_| any_left)
        .map(|sk| Position::from([(AFTER.to_string(), sk)]));
    Ok(Json(List {
        items,
        next_cursor: next.map(|p| s.cursor_key.seal(scope, &p)),
    }))
}

pub async fn my_issues(
    State(s): State<AppState>,
    caller: Caller,
    q: ListQuery,
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
            "user",
            &caller.user,
            state.as_str(),
            role.map(Role::as_str),
        ),
        kind: ParticipantKind::User,
        id: caller.user.clone(),
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
    let scope = Binding {
        tenant: &caller.tenant,
        route: "GET /me/issues",
        params: &params,
        caller: Some(&caller.user),
    };
    read(&s, &caller, sources, state, &q, &scope).await
}

pub async fn team_issues(
    State(s): State<AppState>,
    caller: Caller,
    Path(team_id): Path<String>,
    q: ListQuery,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<List<InboxItem>>> {
    let state = state_only(&params)?;
    if !is_server_id(&team_id) || s.store.get_team(&caller.tenant, &team_id).await?.is_none() {
        return Err(ApiError::NotFound("team"));
    }
    let sources = vec![Source {
        pk: keys::index::inbox_pk(&caller.tenant, "team", &team_id, state.as_str(), None),
        kind: ParticipantKind::Team,
        id: team_id.clone(),
    }];
    let params = format!("state={}&team_id={team_id}", state.as_str());
    let scope = Binding {
        tenant: &caller.tenant,
        route: "GET /teams/{team_id}/issues",
        params: &params,
        caller: None,
    };
    read(&s, &caller, sources, state, &q, &scope).await
}

pub async fn my_teams_issues(
    State(s): State<AppState>,
    caller: Caller,
    q: ListQuery,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<List<InboxItem>>> {
    let state = state_only(&params)?;
    // The caller's teams, read now: joining or leaving a team changes this list at once.
    let mut teams = BTreeMap::new();
    let mut start: Option<Position> = None;
    loop {
        let page = s
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
            pk: keys::index::inbox_pk(&caller.tenant, "team", id, state.as_str(), None),
            kind: ParticipantKind::Team,
            id: id.clone(),
        })
        .collect();
    let params = format!("state={}", state.as_str());
    let scope = Binding {
        tenant: &caller.tenant,
        route: "GET /me/teams/issues",
        params: &params,
        caller: Some(&caller.user),
    };
    read(&s, &caller, sources, state, &q, &scope).await
}
