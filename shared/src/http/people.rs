//! Profiles, teams and memberships.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::extract::{Id, JsonBody, Paging, path_id};
use super::views::List;
use super::{now, projects::created};
use crate::auth::Caller;
use crate::domain::ParticipantKind;
use crate::domain::ids::{TeamId, UserId, new_id};
use crate::domain::text::check_text;
use crate::error::{ApiError, ApiResult};
use crate::store::{Profile, Team};

const TEAM: &str = "team";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileBody {
    display_name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamBody {
    name: String,
}

pub async fn put_me(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<ProfileBody>,
) -> ApiResult<Json<Profile>> {
    check_text(&body.display_name, 1, 128).map_err(|m| ApiError::invalid("display_name", m))?;
    let profile = Profile {
        id: caller.user.to_string(),
        display_name: Some(body.display_name),
    };
    s.store.put_profile(&caller.tenant, &profile).await?;
    Ok(Json(profile))
}

pub async fn get_me(State(s): State<AppState>, caller: Caller) -> ApiResult<Json<Profile>> {
    Ok(Json(
        s.store.get_profile(&caller.tenant, &caller.user).await?,
    ))
}

pub async fn create_team(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<TeamBody>,
) -> ApiResult<Response> {
    check_text(&body.name, 1, 256).map_err(|m| ApiError::invalid("name", m))?;
    let team = Team {
        id: new_id(),
        name: body.name,
        created_at: now(),
    };
    s.store.create_team(&caller.tenant, &team).await?;
    Ok(created(format!("/teams/{}", team.id), team))
}

async fn team_of(s: &AppState, tenant: &str, team_id: &TeamId) -> ApiResult<Team> {
    s.store
        .get_team(tenant, team_id)
        .await?
        .ok_or(ApiError::NotFound(TEAM))
}

pub async fn get_team(
    State(s): State<AppState>,
    caller: Caller,
    Id(team_id): Id<TeamId>,
) -> ApiResult<Json<Team>> {
    Ok(Json(team_of(&s, &caller.tenant, &team_id).await?))
}

pub async fn add_member(
    State(s): State<AppState>,
    caller: Caller,
    Path((team_id, user_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let team = team_of(&s, &caller.tenant, &path_id(&team_id)?).await?;
    let user_id = UserId::parse(&user_id)
        .ok_or_else(|| ApiError::invalid("user_id", "is not a valid user id"))?;
    if s.store.add_member(&caller.tenant, &team, &user_id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(TEAM))
    }
}

pub async fn remove_member(
    State(s): State<AppState>,
    caller: Caller,
    Path((team_id, user_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let (Some(team_id), Some(user_id)) = (TeamId::parse(&team_id), UserId::parse(&user_id)) else {
        return Err(ApiError::NotFound("membership"));
    };
    if s.store
        .remove_member(&caller.tenant, &team_id, &user_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("membership"))
    }
}

#[derive(Serialize)]
pub struct UserView {
    id: String,
    display_name: Option<String>,
}

pub async fn list_members(
    State(s): State<AppState>,
    caller: Caller,
    q: Paging,
    Id(team_id): Id<TeamId>,
) -> ApiResult<Json<List<UserView>>> {
    team_of(&s, &caller.tenant, &team_id).await?;
    let cursor = q.bind(format!("team_id={team_id}"));
    let start = cursor.start()?;
    let page = s
        .store
        .list_members(&caller.tenant, &team_id, q.limit, start.as_ref())
        .await?;
    let who = page
        .items
        .iter()
        .map(|u| (ParticipantKind::User, u.clone()))
        .collect();
    let mut names = s.store.names(&caller.tenant, &who).await?;
    let items = page
        .items
        .into_iter()
        .map(|id| UserView {
            display_name: names.remove(&(ParticipantKind::User, id.clone())),
            id,
        })
        .collect();
    Ok(Json(List {
        items,
        next_cursor: page.next.map(|p| cursor.seal(&p)),
    }))
}

async fn teams_list(
    s: &AppState,
    caller: &Caller,
    user_id: &str,
    q: &Paging,
) -> ApiResult<Json<List<Team>>> {
    let cursor = q.bind(format!("user_id={user_id}"));
    let start = cursor.start()?;
    let page = s
        .store
        .teams_of_user(&caller.tenant, user_id, Some(q.limit), start.as_ref())
        .await?;
    Ok(Json(List {
        items: page.items,
        next_cursor: page.next.map(|p| cursor.seal(&p)),
    }))
}

pub async fn my_teams(
    State(s): State<AppState>,
    caller: Caller,
    q: Paging,
) -> ApiResult<Json<List<Team>>> {
    teams_list(&s, &caller, &caller.user, &q).await
}

pub async fn user_teams(
    State(s): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    q: Paging,
) -> ApiResult<Json<List<Team>>> {
    let user_id = UserId::parse(&user_id).ok_or(ApiError::NotFound("user"))?;
    teams_list(&s, &caller, &user_id, &q).await
}
