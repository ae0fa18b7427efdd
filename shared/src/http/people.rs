//! Profiles, teams and memberships.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::extract::{Id, Ids, JsonBody, Paging};
use super::page::{PageBody, render};
use super::{now, projects::created};
use crate::auth::Caller;
use crate::domain::ParticipantKind;
use crate::domain::ids::{TeamId, TenantId, UserId};
use crate::domain::text::check_text;
use crate::http::error::{ApiError, ApiResult};
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
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<ProfileBody>,
) -> ApiResult<Json<Profile>> {
    check_text(&body.display_name, 1, 128).map_err(|m| ApiError::invalid("display_name", m))?;
    let profile = Profile {
        id: caller.user.clone(),
        display_name: Some(body.display_name),
    };
    app.store
        .records()
        .put_profile(&caller.tenant, &profile)
        .await?;
    Ok(Json(profile))
}

pub async fn get_me(State(app): State<AppState>, caller: Caller) -> ApiResult<Json<Profile>> {
    Ok(Json(
        app.store
            .records()
            .get_profile(&caller.tenant, &caller.user)
            .await?,
    ))
}

pub async fn create_team(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<TeamBody>,
) -> ApiResult<Response> {
    check_text(&body.name, 1, 256).map_err(|m| ApiError::invalid("name", m))?;
    let team = Team {
        id: TeamId::new(),
        name: body.name,
        created_at: now(),
    };
    app.store
        .records()
        .create_team(&caller.tenant, &team)
        .await?;
    Ok(created(format!("/teams/{}", team.id), team))
}

async fn team_of(app: &AppState, tenant: &TenantId, team_id: &TeamId) -> ApiResult<Team> {
    app.store
        .records()
        .get_team(tenant, team_id)
        .await?
        .ok_or(ApiError::NotFound(TEAM))
}

pub async fn get_team(
    State(app): State<AppState>,
    caller: Caller,
    Id(team_id): Id<TeamId>,
) -> ApiResult<Json<Team>> {
    Ok(Json(team_of(&app, &caller.tenant, &team_id).await?))
}

/// `PATCH /teams/{team_id}` `{"name"}`: the team renamed everywhere at once (names are read
/// from the directory when lists are read).
pub async fn patch_team(
    State(app): State<AppState>,
    caller: Caller,
    Id(team_id): Id<TeamId>,
    JsonBody(body): JsonBody<TeamBody>,
) -> ApiResult<Json<Team>> {
    check_text(&body.name, 1, 256).map_err(|m| ApiError::invalid("name", m))?;
    if !app
        .store
        .records()
        .rename_team(&caller.tenant, &team_id, &body.name)
        .await?
    {
        return Err(ApiError::NotFound(TEAM));
    }
    Ok(Json(team_of(&app, &caller.tenant, &team_id).await?))
}

/// `DELETE /teams/{team_id}`: the team is gone at once (`404`, its name off every list); the
/// indexer then takes it off every issue (a system change on each) and every member's list,
/// within seconds (`store::records::team_delete`).
pub async fn delete_team(
    State(app): State<AppState>,
    caller: Caller,
    Id(team_id): Id<TeamId>,
) -> ApiResult<StatusCode> {
    if app
        .store
        .records()
        .delete_team(&caller.tenant, &team_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(TEAM))
    }
}

pub async fn add_member(
    State(app): State<AppState>,
    caller: Caller,
    Ids(team_id, user_id): Ids<TeamId, UserId>,
) -> ApiResult<StatusCode> {
    let team_id = team_id.ok_or(ApiError::NotFound(TEAM))?;
    let team = team_of(&app, &caller.tenant, &team_id).await?;
    let user_id = user_id.ok_or_else(|| ApiError::invalid("user_id", "is not a valid user id"))?;
    if app
        .store
        .records()
        .add_member(&caller.tenant, &team, &user_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(TEAM))
    }
}

pub async fn remove_member(
    State(app): State<AppState>,
    caller: Caller,
    Ids(team_id, user_id): Ids<TeamId, UserId>,
) -> ApiResult<StatusCode> {
    let (Some(team_id), Some(user_id)) = (team_id, user_id) else {
        return Err(ApiError::NotFound("membership"));
    };
    if app
        .store
        .records()
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
    id: UserId,
    display_name: Option<String>,
}

pub async fn list_members(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(team_id): Id<TeamId>,
) -> ApiResult<PageBody> {
    team_of(&app, &caller.tenant, &team_id).await?;
    let cursor = paging.bind(format!("team_id={team_id}"));
    let start = cursor.start()?;
    let page = app
        .store
        .records()
        .list_members(&caller.tenant, &team_id, paging.limit, start.as_ref())
        .await?;
    let who = page
        .items
        .iter()
        .map(|(u, _)| (ParticipantKind::User, u.to_string()))
        .collect();
    let mut names = app.store.records().names(&caller.tenant, &who).await?;
    let items = page.items.into_iter().map(|(id, after)| {
        let user = UserView {
            display_name: names.remove(&(ParticipantKind::User, id.to_string())),
            id,
        };
        (user, after)
    });
    render(items, page.next, &cursor)
}

async fn teams_list(
    app: &AppState,
    caller: &Caller,
    user_id: &UserId,
    paging: &Paging,
) -> ApiResult<PageBody> {
    let cursor = paging.bind(format!("user_id={user_id}"));
    let start = cursor.start()?;
    let records = app.store.records();
    let page = records
        .teams_of_user(&caller.tenant, user_id, Some(paging.limit), start.as_ref())
        .await?;
    // A user's edge keeps the name the team had when they joined; the directory has its
    // name now (a rename writes it with the team).
    let who = page
        .items
        .iter()
        .map(|(t, _)| (ParticipantKind::Team, t.id.to_string()))
        .collect();
    let mut names = records.names(&caller.tenant, &who).await?;
    let items = page.items.into_iter().map(|(mut team, after)| {
        if let Some(name) = names.remove(&(ParticipantKind::Team, team.id.to_string())) {
            team.name = name;
        }
        (team, after)
    });
    render(items, page.next, &cursor)
}

pub async fn my_teams(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
) -> ApiResult<PageBody> {
    teams_list(&app, &caller, &caller.user, &paging).await
}

pub async fn user_teams(
    State(app): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    paging: Paging,
) -> ApiResult<PageBody> {
    let user_id = UserId::parse(&user_id).ok_or(ApiError::NotFound("user"))?;
    teams_list(&app, &caller, &user_id, &paging).await
}
