//! Workspaces, their members and invitations. Who may call each route is the route table's
//! gate (`access::guard`); what depends on whom the change is about (owners, leaving) is
//! decided here.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::access::Access;
use super::extract::{Id, JsonBody, Paging};
use super::page::{PageBody, render};
use super::{now, projects::created};
use crate::auth::{Caller, Identity};
use crate::domain::ParticipantKind;
use crate::domain::email::{MAX_EMAIL_LEN, is_email, normalise};
use crate::domain::ids::{InvitationId, TenantId, UserId};
use crate::domain::role::Role;
use crate::domain::text::check_text;
use crate::http::error::{ApiError, ApiResult};
use crate::store::records::workspaces::{
    Accepted, Invitation, MAX_WORKSPACES_CREATED, Membership, MembershipError, Workspace,
};

const WORKSPACE: &str = "workspace";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameBody {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChooseBody {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleBody {
    role: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InviteBody {
    email: String,
    role: String,
}

fn role_of(field: &str, role: &str) -> ApiResult<Role> {
    Role::parse(role)
        .ok_or_else(|| ApiError::invalid(field, "must be one of owner, admin, member, viewer"))
}

impl From<MembershipError> for ApiError {
    fn from(e: MembershipError) -> Self {
        match e {
            MembershipError::LastOwner | MembershipError::Changed => Self::Conflict(e.to_string()),
            MembershipError::Store(e) => e.into(),
        }
    }
}

/// `POST /workspaces`: a new workspace with the caller as its owner. In AWS its usage-plan key
/// is made first, so its first request after the caller's next token is not refused for want
/// of one (a key left by a failed create is harmless: no workspace names it).
pub async fn create(
    State(app): State<AppState>,
    identity: Identity,
    JsonBody(body): JsonBody<NameBody>,
) -> ApiResult<Response> {
    check_text(&body.name, 1, 256).map_err(|m| ApiError::invalid("name", m))?;
    let ws = Workspace {
        id: TenantId::new_workspace(),
        name: body.name,
    };
    if let Some(keys) = &app.usage_keys {
        keys.provision(&ws.id).await.map_err(|e| {
            // The cause names an API Gateway call, never a token.
            tracing::error!(error = %format!("{e:#}"), "the workspace's usage-plan key");
            ApiError::Unavailable("the workspace could not be set up; try again".into())
        })?;
    }
    if !app
        .store
        .records()
        .create_workspace(&ws, &identity.user, &now())
        .await?
    {
        return Err(ApiError::Conflict(format!(
            "a person may create at most {MAX_WORKSPACES_CREATED} workspaces"
        )));
    }
    let body = Membership {
        id: ws.id.clone(),
        name: ws.name,
        role: Role::Owner,
    };
    // No `Location`: a workspace is read as the token's tenant (`GET /workspace`), not by id.
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /me/workspaces`: the caller's workspaces with their roles, by id.
pub async fn mine(
    State(app): State<AppState>,
    identity: Identity,
    paging: Paging,
) -> ApiResult<PageBody> {
    let cursor = paging.bind_to_caller("");
    let start = cursor.start()?;
    let page = app
        .store
        .records()
        .workspaces_of(&identity.user, paging.limit, start.as_ref())
        .await?;
    render(page.items, page.next, &cursor)
}

/// `PUT /me/workspace`: the workspace the caller's next token names.
pub async fn choose(
    State(app): State<AppState>,
    identity: Identity,
    JsonBody(body): JsonBody<ChooseBody>,
) -> ApiResult<StatusCode> {
    let not_member = || ApiError::Forbidden("you are not a member of this workspace".into());
    let ws = TenantId::parse(&body.id).ok_or_else(not_member)?;
    if app
        .store
        .records()
        .choose_workspace(&identity.user, &ws)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_member())
    }
}

/// The token's tenant as a workspace: `404` on a tenant an operator provisioned.
async fn workspace_of(app: &AppState, tenant: &TenantId) -> ApiResult<Workspace> {
    app.store
        .records()
        .workspace(tenant)
        .await?
        .ok_or(ApiError::NotFound(WORKSPACE))
}

/// `GET /workspace`.
pub async fn get(State(app): State<AppState>, caller: Caller) -> ApiResult<Json<Workspace>> {
    Ok(Json(workspace_of(&app, &caller.tenant).await?))
}

#[derive(Serialize)]
pub struct MemberView {
    id: UserId,
    role: Role,
    display_name: Option<String>,
}

/// `GET /workspace/members`: by user id, with each one's profile name.
pub async fn members(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
) -> ApiResult<PageBody> {
    workspace_of(&app, &caller.tenant).await?;
    let cursor = paging.bind("");
    let start = cursor.start()?;
    let records = app.store.records();
    let page = records
        .workspace_members(&caller.tenant, paging.limit, start.as_ref())
        .await?;
    let who = page
        .items
        .iter()
        .map(|(m, _)| (ParticipantKind::User, m.user_id.to_string()))
        .collect();
    let mut names = records.names(&caller.tenant, &who).await?;
    let items = page.items.into_iter().map(|(m, after)| {
        let view = MemberView {
            display_name: names.remove(&(ParticipantKind::User, m.user_id.to_string())),
            id: m.user_id,
            role: m.role,
        };
        (view, after)
    });
    render(items, page.next, &cursor)
}

/// Only an owner may make or unmake an owner.
fn owner_only(access: Access, making: Role, current: Option<Role>) -> ApiResult<()> {
    let touches_owner = making == Role::Owner || current == Some(Role::Owner);
    if touches_owner && access.role() != Some(Role::Owner) {
        return Err(ApiError::Forbidden(
            "only an owner may make or unmake an owner".into(),
        ));
    }
    Ok(())
}

/// `PUT /workspace/members/{user_id}` `{"role"}`: adds or re-roles a member (owners and
/// admins; owners only where an owner is made or unmade).
pub async fn put_member(
    State(app): State<AppState>,
    caller: Caller,
    Extension(access): Extension<Access>,
    Id(user_id): Id<UserId>,
    JsonBody(body): JsonBody<RoleBody>,
) -> ApiResult<StatusCode> {
    let role = role_of("role", &body.role)?;
    let ws = workspace_of(&app, &caller.tenant).await?;
    let records = app.store.records();
    let current = records.role_of(&ws.id, &user_id).await?;
    owner_only(access, role, current)?;
    records.set_role(&ws, &user_id, role, current).await?;
    app.access.forget(&ws.id, &user_id);
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /workspace/members/{user_id}`: an admin removing a member, or a member leaving.
pub async fn remove_member(
    State(app): State<AppState>,
    caller: Caller,
    Extension(access): Extension<Access>,
    Id(user_id): Id<UserId>,
) -> ApiResult<StatusCode> {
    let ws = workspace_of(&app, &caller.tenant).await?;
    let records = app.store.records();
    let current = records.role_of(&ws.id, &user_id).await?;
    if user_id != caller.user {
        if !access.allows(crate::domain::role::Need::Admin) {
            return Err(ApiError::Forbidden(
                "only a workspace's owners and admins may remove another member".into(),
            ));
        }
        owner_only(access, Role::Member, current)?;
    }
    let current = current.ok_or(ApiError::NotFound("member"))?;
    records
        .remove_from_workspace(&ws.id, &user_id, current)
        .await?;
    app.access.forget(&ws.id, &user_id);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
pub struct InvitationView {
    id: InvitationId,
    email: String,
    role: Role,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<Workspace>,
}

impl InvitationView {
    fn of(inv: Invitation, with_workspace: bool) -> Self {
        Self {
            id: inv.id,
            email: inv.email,
            role: inv.role,
            created_at: inv.created_at,
            workspace: with_workspace.then_some(inv.workspace),
        }
    }
}

/// `POST /workspace/invitations` `{"email","role"}`.
pub async fn invite(
    State(app): State<AppState>,
    caller: Caller,
    Extension(access): Extension<Access>,
    JsonBody(body): JsonBody<InviteBody>,
) -> ApiResult<Response> {
    let role = role_of("role", &body.role)?;
    if body.email.len() > MAX_EMAIL_LEN || !is_email(body.email.trim()) {
        return Err(ApiError::invalid("email", "must be an email address"));
    }
    let ws = workspace_of(&app, &caller.tenant).await?;
    owner_only(access, role, None)?;
    let inv = Invitation {
        id: InvitationId::new(),
        email: normalise(&body.email),
        role,
        created_at: now(),
        workspace: ws,
    };
    if !app.store.records().create_invitation(&inv).await? {
        return Err(ApiError::Conflict(
            "an invitation of this workspace for this email is pending".into(),
        ));
    }
    Ok(created(
        format!("/workspace/invitations/{}", inv.id),
        InvitationView::of(inv, false),
    ))
}

/// `GET /workspace/invitations`: pending, oldest first.
pub async fn invitations(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
) -> ApiResult<PageBody> {
    workspace_of(&app, &caller.tenant).await?;
    let cursor = paging.bind("");
    let start = cursor.start()?;
    let page = app
        .store
        .records()
        .workspace_invitations(&caller.tenant, paging.limit, start.as_ref())
        .await?;
    let items = page
        .items
        .into_iter()
        .map(|(inv, after)| (InvitationView::of(inv, false), after));
    render(items, page.next, &cursor)
}

/// `DELETE /workspace/invitations/{invitation_id}`.
pub async fn revoke(
    State(app): State<AppState>,
    caller: Caller,
    Id(id): Id<InvitationId>,
) -> ApiResult<StatusCode> {
    workspace_of(&app, &caller.tenant).await?;
    if app
        .store
        .records()
        .revoke_invitation(&caller.tenant, &id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("invitation"))
    }
}

/// `GET /me/invitations`: pending for the caller's verified email (none while unverified).
pub async fn my_invitations(
    State(app): State<AppState>,
    identity: Identity,
    paging: Paging,
) -> ApiResult<PageBody> {
    let cursor = paging.bind_to_caller("");
    let start = cursor.start()?;
    let Some(email) = identity.verified_email() else {
        return render(Vec::<(InvitationView, _)>::new(), None, &cursor);
    };
    let page = app
        .store
        .records()
        .invitations_for(&email, paging.limit, start.as_ref())
        .await?;
    let items = page
        .items
        .into_iter()
        .map(|(inv, after)| (InvitationView::of(inv, true), after));
    render(items, page.next, &cursor)
}

/// `POST /invitations/{invitation_id}/accept`: only with the invitation's email, verified.
pub async fn accept(
    State(app): State<AppState>,
    identity: Identity,
    Id(id): Id<InvitationId>,
) -> ApiResult<StatusCode> {
    let records = app.store.records();
    let inv = records
        .invitation(&id)
        .await?
        .ok_or(ApiError::NotFound("invitation"))?;
    if identity.verified_email().as_deref() != Some(inv.email.as_str()) {
        return Err(ApiError::Forbidden(
            "the invitation is for another email, or your email is not verified".into(),
        ));
    }
    match records.accept_invitation(&inv, &identity.user).await? {
        Accepted::Joined(_) => {
            app.access.forget(&inv.workspace.id, &identity.user);
            Ok(StatusCode::NO_CONTENT)
        }
        Accepted::AlreadyMember => Err(ApiError::Conflict(
            "you are already a member of this workspace".into(),
        )),
        Accepted::NotFound => Err(ApiError::NotFound("invitation")),
    }
}
