//! Saved views: their definitions (the projects function: one item each in the project's
//! collection, with its counts from the index) and their lists (the grid function: a view's
//! list, or one group's, is a column of its project in the index, read a page at a time as the
//! grid reads a column, one Query per state scope and shard).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::value::RawValue;

use super::AppState;
use super::extract::{Id, JsonBody, Paging, path_id, unknown_params};
use super::fields_cache::{HeldView, ProjectFields};
use super::now;
use super::page::{PageBody, render};
use super::projects::created;
use crate::auth::Caller;
use crate::cursor::Position;
use crate::domain::IssueState;
use crate::domain::ids::{ProjectId, TenantId, ViewId};
use crate::domain::values::FieldDef;
use crate::http::error::{ApiError, ApiResult};
use crate::keys;
use crate::model::view::{CheckedView, Grouping, NO_GROUP, NewViewBody, ViewPatchBody};
use crate::read::grid::{GridQuery, PageRequest};
use crate::store::records::items::ProjectItem;
use crate::store::records::views::{ViewItem, ViewWriteError};

const VIEW: &str = "view";
const PROJECT: &str = "project";

/// How long a client waits before asking again for a view being built.
pub const VIEW_RETRY_AFTER_S: u32 = 5;

/// A view as the API shows it.
#[derive(Serialize)]
pub struct ViewBody {
    pub id: ViewId,
    pub project_id: ProjectId,
    pub name: String,
    #[serde(rename = "where")]
    pub filter: Box<RawValue>,
    pub sort: String,
    pub order: &'static str,
    pub state: Option<IssueState>,
    pub group_by: Option<String>,
    pub ready: bool,
    pub count: Option<i64>,
    pub groups: Option<Vec<GroupCount>>,
}

/// One group of a view: its value (an option label, a state, or `null` for issues without
/// one) and how many issues it holds.
#[derive(Serialize)]
pub struct GroupCount {
    pub value: Option<String>,
    pub count: i64,
}

impl From<ViewWriteError> for ApiError {
    fn from(e: ViewWriteError) -> Self {
        match e {
            ViewWriteError::NotFound => ApiError::NotFound(VIEW),
            ViewWriteError::TooManyViews => ApiError::Conflict(e.to_string()),
            ViewWriteError::Changed => ApiError::Conflict(e.to_string()),
            ViewWriteError::Store(e) => e.into(),
        }
    }
}

/// The groups of a grouping with their keys in the index, in the order `groups` lists them.
fn group_keys(grouping: &Grouping) -> Vec<(Option<String>, String)> {
    grouping
        .values()
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let key = match (grouping, &value) {
                (_, None) => NO_GROUP.to_string(),
                (Grouping::State, Some(state)) => state.clone(),
                (Grouping::Field(_), Some(_)) => crate::encoding::select(i),
            };
            (value, key)
        })
        .collect()
}

/// The project and its field definitions, strongly consistent; `404` for no project.
async fn project_of(
    app: &AppState,
    tenant: &TenantId,
    project: &ProjectId,
) -> ApiResult<(ProjectItem, Vec<FieldDef>)> {
    app.store
        .records()
        .project_with_fields(tenant, project)
        .await?
        .ok_or(ApiError::NotFound(PROJECT))
}

/// The project's field definitions, strongly consistent; `404` for no project.
async fn defs_of(
    app: &AppState,
    tenant: &TenantId,
    project: &ProjectId,
) -> ApiResult<Vec<FieldDef>> {
    Ok(project_of(app, tenant, project).await?.1)
}

/// A view's body with its counts (when ready): one Query of its count items.
async fn body_of(
    app: &AppState,
    tenant: &TenantId,
    item: ViewItem,
    checked: &CheckedView,
) -> ApiResult<ViewBody> {
    let (count, groups) = if item.ready {
        let counts = app
            .store
            .index()
            .view_counts(tenant, item.id.as_str(), item.rev)
            .await?;
        let groups = checked.grouping.as_ref().map(|g| {
            group_keys(g)
                .into_iter()
                .map(|(value, key)| GroupCount {
                    value,
                    count: counts.groups.get(&key).copied().unwrap_or(0),
                })
                .collect()
        });
        (Some(counts.total), groups)
    } else {
        (None, None)
    };
    let filter = RawValue::from_string(item.filter.clone())
        .map_err(|e| ApiError::Internal(crate::store::StoreError::Build(e.to_string())))?;
    Ok(ViewBody {
        id: item.id,
        project_id: item.project_id,
        name: item.name,
        filter,
        sort: item.sort,
        order: if item.descending { "desc" } else { "asc" },
        state: item.state,
        group_by: item.group_by,
        ready: item.ready,
        count,
        groups,
    })
}

/// A view and its checked definition; `404` for none, or one whose definition no longer
/// holds (it names a field deleted a moment ago, and is being deleted with it).
async fn read_view(app: &AppState, tenant: &TenantId, id: &ViewId) -> ApiResult<ReadView> {
    let project_id = id.project();
    let (item, (project, defs)) = futures::try_join!(
        async {
            app.store
                .records()
                .get_view(tenant, id)
                .await?
                .ok_or(ApiError::NotFound(VIEW))
        },
        project_of(app, tenant, &project_id),
    )
    .map_err(|e| match e {
        ApiError::NotFound(_) => ApiError::NotFound(VIEW),
        e => e,
    })?;
    let checked = item
        .spec()
        .check(&defs)
        .map_err(|_| ApiError::NotFound(VIEW))?;
    Ok(ReadView {
        item,
        checked,
        project,
        defs,
    })
}

/// A view as read, with its project.
struct ReadView {
    item: ViewItem,
    checked: CheckedView,
    project: ProjectItem,
    defs: Vec<FieldDef>,
}

pub async fn create(
    State(app): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    JsonBody(body): JsonBody<NewViewBody>,
) -> ApiResult<Response> {
    let project_id: ProjectId = path_id(&project_id)?;
    let defs = defs_of(&app, &caller.tenant, &project_id).await?;
    let (spec, checked) = body.spec(&defs).map_err(ApiError::from_errors)?;
    let id = ViewId::new(&project_id);
    let item = app
        .store
        .records()
        .create_view(&caller.tenant, &id, &spec, &now())
        .await?;
    let body = body_of(&app, &caller.tenant, item, &checked).await?;
    Ok(created(format!("/views/{id}"), body))
}

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(project_id): Id<ProjectId>,
) -> ApiResult<PageBody> {
    let defs = defs_of(&app, &caller.tenant, &project_id).await?;
    let cursor = paging.bind(format!("project_id={project_id}"));
    let after = cursor.start()?.and_then(|p| p.get(keys::SK).cloned());
    let mut items = app
        .store
        .records()
        .list_views(&caller.tenant, &project_id)
        .await?;
    // By name (ties by id); at most 50, so sorted here.
    let position = |v: &ViewItem| format!("{}\u{0}{}", v.name, v.id);
    items.sort_by_key(position);
    let limit = usize::try_from(paging.limit).unwrap_or(0);
    // Views whose definitions no longer hold (a field just deleted) are being deleted: left
    // out before the page is cut, so a page is never short while more remain.
    let rest: Vec<(ViewItem, CheckedView)> = items
        .into_iter()
        .filter(|v| after.as_ref().is_none_or(|a| position(v) > *a))
        .filter_map(|v| {
            let checked = v.spec().check(&defs).ok()?;
            Some((v, checked))
        })
        .collect();
    let more = rest.len() > limit;
    let bodies = rest.into_iter().take(limit).map(|(v, checked)| {
        let at = Position::from([(keys::SK.to_string(), position(&v))]);
        (v, checked, at)
    });
    let reads = bodies.map(|(v, checked, at)| {
        let app = &app;
        let tenant = &caller.tenant;
        async move { Ok::<_, ApiError>((body_of(app, tenant, v, &checked).await?, at)) }
    });
    let page: Vec<(ViewBody, Position)> = futures::future::try_join_all(reads).await?;
    let next = if more {
        page.last().map(|(_, at)| at.clone())
    } else {
        None
    };
    render(page, next, &cursor)
}

pub async fn get(
    State(app): State<AppState>,
    caller: Caller,
    Id(id): Id<ViewId>,
) -> ApiResult<Json<ViewBody>> {
    let read = read_view(&app, &caller.tenant, &id).await?;
    Ok(Json(
        body_of(&app, &caller.tenant, read.item, &read.checked).await?,
    ))
}

pub async fn patch(
    State(app): State<AppState>,
    caller: Caller,
    Id(id): Id<ViewId>,
    JsonBody(body): JsonBody<ViewPatchBody>,
) -> ApiResult<Json<ViewBody>> {
    // Another write to the view between the read and the write: read it again.
    for _ in 0..3 {
        let ReadView {
            item,
            checked,
            defs,
            ..
        } = read_view(&app, &caller.tenant, &id).await?;
        let spec = item.spec();
        let (next, next_checked) = body.apply(&spec, &defs).map_err(ApiError::from_errors)?;
        let reshaped = next.shape(&next_checked) != spec.shape(&checked);
        match app
            .store
            .records()
            .replace_view(&caller.tenant, &item, (&next, reshaped))
            .await
        {
            Ok(written) => {
                return Ok(Json(
                    body_of(&app, &caller.tenant, written, &next_checked).await?,
                ));
            }
            Err(ViewWriteError::Changed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ViewWriteError::Changed.into())
}

pub async fn delete(
    State(app): State<AppState>,
    caller: Caller,
    Id(id): Id<ViewId>,
) -> ApiResult<StatusCode> {
    app.store.records().delete_view(&caller.tenant, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /views/{id}/issues?group=`: the view's list (or one group's), a page at a time. A
/// warm instance holds the view and its project's definitions for a few seconds (as the grid
/// holds a project's, [`super::fields_cache`]), so a page is its list's Query and the names.
pub async fn issues(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(id): Id<ViewId>,
    Query(mut params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    params.remove("limit");
    params.remove("cursor");
    let errors = unknown_params(&params, &["group"]);
    if !errors.is_empty() {
        return Err(ApiError::from_errors(errors));
    }
    let tenant = &caller.tenant;
    // What the instance holds first; anything it refuses is asked again of a fresh read.
    let held = match held_view(&app, tenant, &id) {
        Some(held) => match list_of(&held, &params, &paging) {
            Ok(list) => Some((held, list)),
            Err(_) => None,
        },
        None => None,
    };
    let (view, (query, start)) = match held {
        Some(found) => found,
        None => {
            let fresh = fresh_view(&app, tenant, &id).await?;
            let list = list_of(&fresh, &params, &paging)?;
            (fresh, list)
        }
    };
    let cursor = paging.bind(query.canonical.as_str());
    let request = PageRequest {
        tenant,
        project_id: &view.held.item.project_id,
        defs: &view.fields.defs,
        query: &query,
        shards: view.fields.project.read_shards(),
        limit: paging.limit,
        start,
    };
    super::grid::read_page(&app, request, &cursor).await
}

/// A view with its project's definitions, as a list page reads them.
struct ListedView {
    held: Arc<HeldView>,
    fields: Arc<ProjectFields>,
    checked: CheckedView,
}

/// The view and its project as the instance holds them, if it holds both, read at the same
/// `fields_rev` (so no view of the project was created, reshaped or deleted in between).
fn held_view(app: &AppState, tenant: &TenantId, id: &ViewId) -> Option<ListedView> {
    let held = app.views.get(&(tenant.clone(), id.clone()))?;
    let fields = app.fields.get(&(tenant.clone(), id.project()))?;
    if fields.project.fields_rev != held.fields_rev {
        return None;
    }
    let checked = held.item.spec().check(&fields.defs).ok()?;
    Some(ListedView {
        held,
        fields,
        checked,
    })
}

/// The view and its project read now (strongly consistent), held for the next pages: the view
/// only when ready (one not ready, or gone, is forgotten and read again until it is).
async fn fresh_view(app: &AppState, tenant: &TenantId, id: &ViewId) -> ApiResult<ListedView> {
    let key = (tenant.clone(), id.clone());
    let ReadView {
        item,
        checked,
        project,
        defs,
    } = match read_view(app, tenant, id).await {
        Ok(read) => read,
        Err(e) => {
            app.views.remove(&key);
            return Err(e);
        }
    };
    let held = Arc::new(HeldView {
        item,
        fields_rev: project.fields_rev,
    });
    let fields = Arc::new(ProjectFields { project, defs });
    app.fields
        .put((tenant.clone(), id.project()), fields.clone());
    if held.item.ready {
        app.views.put(key, held.clone());
    } else {
        app.views.remove(&key);
    }
    Ok(ListedView {
        held,
        fields,
        checked,
    })
}

/// The query of a view's list (or of the group `params` names) and where the cursor resumes
/// it: `400` for a group the view does not have or a cursor of another shape, `409` with
/// `Retry-After` while the view is being built.
fn list_of(
    view: &ListedView,
    params: &HashMap<String, String>,
    paging: &Paging,
) -> ApiResult<(GridQuery, Option<Position>)> {
    let item = &view.held.item;
    let group = match (params.get("group"), &view.checked.grouping) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(ApiError::invalid("group", "the view has no group_by"));
        }
        (Some(value), Some(grouping)) => Some(group_key(grouping, value)?),
    };
    if !item.ready {
        return Err(ApiError::ViewNotReady {
            retry_after_s: VIEW_RETRY_AFTER_S,
        });
    }
    let column = match &group {
        None => keys::index::view_column(item.id.as_str(), item.rev),
        Some(g) => keys::index::view_group_column(item.id.as_str(), item.rev, g),
    };
    // Bound to the view's shape (its revision): a rename keeps cursors, a reshape ends them.
    let binding = format!(
        "view={}&rev={}&group={}",
        item.id,
        item.rev,
        group.as_deref().unwrap_or("~")
    );
    let query = GridQuery::of_view(column, item.descending, item.state, binding);
    let start = paging.bind(query.canonical.as_str()).start()?;
    Ok((query, start))
}

/// The index key of the group a `group` parameter names: an option label, `open`/`closed`,
/// or empty for issues without a value.
fn group_key(grouping: &Grouping, value: &str) -> ApiResult<String> {
    let wanted = (!value.is_empty()).then(|| value.to_string());
    group_keys(grouping)
        .into_iter()
        .find(|(v, _)| *v == wanted)
        .map(|(_, key)| key)
        .ok_or_else(|| ApiError::invalid("group", "must be one of the view's groups, or empty"))
}
