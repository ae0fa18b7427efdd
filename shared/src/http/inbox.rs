//! Inboxes: the issues a participant is on, newest `updated_at` first, from participation
//! copies. A list over several partitions (roles, or the caller's teams) queries them in
//! parallel, merges by sort key, shows each issue once, and keeps a position per partition,
//! cut at the last item actually returned, so following cursors returns every issue once.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::{Path, Query, State};

use super::AppState;
use super::extract::{ListQuery, unknown_params};
use super::views::{InboxItem, IssueView, List, participants_of};
use crate::auth::Caller;
use crate::cursor::{Position, Scope};
use crate::domain::ids::is_server_id;
use crate::domain::{IssueState, Participant, ParticipantKind, Role};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::keys;

/// Cursor value of a partition that has nothing more.
const DONE: &str = "~";

/// One partition of a merged list.
struct Source {
    /// Its name in the cursor.
    name: String,
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
    scope: &Scope<'_>,
) -> ApiResult<Json<List<InboxItem>>> {
    let mut positions = q.position(s, scope)?.unwrap_or_default();
    let pages = futures::future::join_all(sources.iter().map(|src| {
        let after = positions.get(&src.name).cloned();
        async move {
            match after.as_deref() {
                Some(DONE) => Ok(crate::store::Page {
                    items: Vec::new(),
                    next: None,
                }),
                other => s.store.query_inbox(&src.pk, q.limit, other).await,
            }
        }
    }))
    .await;
    // Every candidate, newest first; an issue several partitions hold has the same sort key in
    // each (updated_at#id), so its copies are adjacent.
    let mut candidates: Vec<(String, usize, String, String)> = Vec::new();
    let mut more = Vec::with_capacity(sources.len());
    for (i, page) in pages.into_iter().enumerate() {
        let page = page?;
        more.push(page.next.is_some());
        candidates.extend(
            page.items
                .into_iter()
                .map(|c| (c.sk, i, c.issue_id, c.role)),
        );
    }
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let fetched: Vec<usize> = (0..sources.len())
        .map(|i| candidates.iter().filter(|c| c.1 == i).count())
        .collect();

    let mut taken: Vec<(String, String, Vec<Participant>)> = Vec::new();
    let mut consumed = vec![0usize; sources.len()];
    let mut last_sk: Vec<Option<String>> = vec![None; sources.len()];
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
        if let Some(role) = Role::parse(&role) {
            taken[slot].2.push(Participant {
                kind: sources[i].kind,
                id: sources[i].id.clone(),
                role,
            });
        }
        consumed[i] += 1;
        last_sk[i] = Some(sk);
    }
    let mut any_left = false;
    for (i, src) in sources.iter().enumerate() {
        let exhausted = consumed[i] == fetched[i] && !more[i];
        if exhausted {
            positions.insert(src.name.clone(), DONE.into());
        } else {
            any_left = true;
            if let Some(sk) = &last_sk[i] {
                positions.insert(src.name.clone(), sk.clone());
            }
        }
    }

    let ids: Vec<String> = taken.iter().map(|t| t.1.clone()).collect();
    let mut found = s.store.batch_get_issues(&caller.tenant, &ids).await?;
    let issues: Vec<(crate::domain::Issue, Vec<Participant>)> = taken
        .into_iter()
        .filter_map(|(_, id, via)| found.remove(&id).map(|i| (i, via)))
        // Copies of issues deleted or moved to another state since they were indexed.
        .filter(|(i, _)| i.state == state)
        .collect();
    let names = s
        .store
        .names(
            &caller.tenant,
            &participants_of(issues.iter().map(|(i, _)| i)),
        )
        .await?;
    let items = issues
        .into_iter()
        .map(|(issue, via)| InboxItem {
            issue: IssueView::inbox_summary(issue, &names),
            via,
        })
        .collect();
    Ok(Json(List {
        items,
        next_cursor: any_left.then(|| s.cursor_key.seal(scope, &positions)),
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
        name: role.map_or("all".into(), |r| format!("r:{}", r.as_str())),
        pk: keys::inbox_pk(
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
    let scope = Scope {
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
        name: "team".into(),
        pk: keys::inbox_pk(&caller.tenant, "team", &team_id, state.as_str(), None),
        kind: ParticipantKind::Team,
        id: team_id.clone(),
    }];
    let params = format!("state={}&team_id={team_id}", state.as_str());
    let scope = Scope {
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
            name: format!("t:{id}"),
            pk: keys::inbox_pk(&caller.tenant, "team", id, state.as_str(), None),
            kind: ParticipantKind::Team,
            id: id.clone(),
        })
        .collect();
    let params = format!("state={}", state.as_str());
    let scope = Scope {
        tenant: &caller.tenant,
        route: "GET /me/teams/issues",
        params: &params,
        caller: Some(&caller.user),
    };
    read(&s, &caller, sources, state, &q, &scope).await
}
