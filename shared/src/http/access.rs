//! Who may do what on a tenant: the one check every route's request passes before anything
//! else (the idempotency layer's replay included).
//!
//! - A tenant an operator provisioned (no workspace item) is open: every user its tokens
//!   name may do everything, as before workspaces.
//! - On a workspace's tenant the caller must be a member, and their role must allow what the
//!   route needs ([`Need`]); `403` otherwise, whatever the id in the path.
//!
//! The caller's role is one strongly consistent GetItem, held by the instance for
//! [`InstanceCache::MAX_AGE`] (2 s): a removed member is refused within that, well inside the
//! 5 s the contract allows, whatever their token says. Whether a tenant is a workspace never
//! changes (a workspace's tenant is a fresh ULID no operator tenant has, and workspaces are
//! not deleted), so the instance holds that answer for as long as it lives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use super::fields_cache::InstanceCache;
use crate::auth::{Identity, Unauthorized};
use crate::domain::ids::{TenantId, UserId};
use crate::domain::role::{Need, Role};
use crate::store::{Store, StoreError};

/// What a route asks of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// A valid token, with or without a tenant (a person's workspaces and invitations).
    Token,
    /// A tenant claim, and on a workspace's tenant a role that allows this.
    Tenant(Need),
}

/// The caller's standing on the token's tenant, as the guard found it; handlers that decide
/// by role (members, invitations) read it from the request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A tenant an operator provisioned: everyone may do everything.
    Open,
    /// A member of the workspace, with their role.
    Member(Role),
    /// Not (or no longer) a member of the workspace.
    Outsider,
}

impl Access {
    /// Whether this standing allows `need`.
    pub fn allows(self, need: Need) -> bool {
        match self {
            Access::Open => true,
            Access::Member(role) => role.allows(need),
            Access::Outsider => false,
        }
    }

    /// The role that decides owner-only changes: an operator's tenant acts as an owner.
    pub fn role(self) -> Option<Role> {
        match self {
            Access::Open => Some(Role::Owner),
            Access::Member(role) => Some(role),
            Access::Outsider => None,
        }
    }
}

/// Roles read in the last seconds, and which tenants are workspaces (per instance).
#[derive(Clone, Default)]
pub struct AccessCache {
    roles: InstanceCache<(TenantId, UserId), Option<Role>>,
    workspaces: Arc<Mutex<HashMap<TenantId, bool>>>,
}

/// Tenants whose kind an instance holds at most (it starts again empty past this).
const MAX_TENANTS: usize = 4096;

impl AccessCache {
    /// The caller's standing on `tenant`: at most one GetItem for the tenant's kind per
    /// instance, and one for the role every [`InstanceCache::MAX_AGE`].
    pub async fn access(
        &self,
        store: &Store,
        tenant: &TenantId,
        user: &UserId,
    ) -> Result<Access, StoreError> {
        if !self.is_workspace(store, tenant).await? {
            return Ok(Access::Open);
        }
        let key = (tenant.clone(), user.clone());
        let role = match self.roles.get(&key) {
            Some(role) => *role,
            None => {
                let role = store.records().role_of(tenant, user).await?;
                self.roles.put(key, Arc::new(role));
                role
            }
        };
        Ok(role.map_or(Access::Outsider, Access::Member))
    }

    /// Forgets `user`'s held role on `tenant`: this instance changed it.
    pub fn forget(&self, tenant: &TenantId, user: &UserId) {
        self.roles.remove(&(tenant.clone(), user.clone()));
    }

    async fn is_workspace(&self, store: &Store, tenant: &TenantId) -> Result<bool, StoreError> {
        let held = self
            .workspaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tenant)
            .copied();
        if let Some(known) = held {
            return Ok(known);
        }
        let known = store.records().workspace(tenant).await?.is_some();
        let mut workspaces = self
            .workspaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if workspaces.len() >= MAX_TENANTS {
            workspaces.clear();
        }
        workspaces.insert(tenant.clone(), known);
        Ok(known)
    }
}

/// The guard: the route's [`Gate`] (from the route table), the caller's token, and on a
/// workspace's tenant the caller's role. Runs outside the idempotency layer, so a remembered
/// answer is never replayed to someone who may no longer ask.
pub async fn guard(State(app): State<AppState>, req: Request<Body>, next: Next) -> Response {
    let Some(path) = req.extensions().get::<MatchedPath>() else {
        // No route matched: the fallback answers 404 (or 405), and serves nothing.
        return next.run(req).await;
    };
    let need = match super::gate_of(req.method(), path.as_str()) {
        Some(Gate::Tenant(need)) => need,
        // A valid token is checked by the handler's own extractor; a method the path does
        // not have is the router's 405 (HEAD asks what GET asks: `gate_of`).
        Some(Gate::Token) | None => return next.run(req).await,
    };
    let (mut parts, body) = req.into_parts();
    let identity = match Identity::from_request_parts(&mut parts, &app).await {
        Ok(identity) => identity,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let Some(tenant) = identity.tenant else {
        return ApiError::from(Unauthorized::NoTenant).into_response();
    };
    let access = match app.access.access(&app.store, &tenant, &identity.user).await {
        Ok(access) => access,
        Err(e) => return ApiError::from(e).into_response(),
    };
    if !access.allows(need) {
        return ApiError::Forbidden(refusal(access, need)).into_response();
    }
    parts.extensions.insert(access);
    next.run(Request::from_parts(parts, body)).await
}

fn refusal(access: Access, need: Need) -> String {
    match (access, need) {
        (Access::Member(role), Need::Admin) => format!(
            "only a workspace's owners and admins may do this; your role is {}",
            role.as_str()
        ),
        (Access::Member(role), _) => format!(
            "your role in this workspace ({}) may read but not write",
            role.as_str()
        ),
        _ => "you are not a member of this workspace".into(),
    }
}
