//! Projects and field definitions.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::extract::{Id, JsonBody, Paging, path_id};
use super::now;
use super::views::{List, ProjectWithFields};
use crate::auth::Caller;
use crate::domain::ids::{FieldId, ProjectId, new_id};
use crate::domain::{NewFieldBody, NewProjectBody, Project};
use crate::error::{ApiError, ApiResult};

const PROJECT: &str = "project";
const FIELD: &str = "field";

/// `201 Created` with the new resource and where it lives.
pub(super) fn created<T: serde::Serialize>(location: String, body: T) -> Response {
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response()
}

pub async fn create(
    State(s): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<NewProjectBody>,
) -> ApiResult<Response> {
    body.validate()?;
    let project = Project {
        id: new_id(),
        name: body.name,
        created_at: now(),
    };
    s.store.create_project(&caller.tenant, &project).await?;
    Ok(created(format!("/projects/{}", project.id), project))
}

pub async fn list(
    State(s): State<AppState>,
    caller: Caller,
    q: Paging,
) -> ApiResult<Json<List<Project>>> {
    let cursor = q.bind("");
    let start = cursor.start()?;
    let page = s
        .store
        .list_projects(&caller.tenant, q.limit, start.as_ref())
        .await?;
    Ok(Json(List {
        items: page.items,
        next_cursor: page.next.map(|p| cursor.seal(&p)),
    }))
}

pub async fn get(
    State(s): State<AppState>,
    caller: Caller,
    Id(project_id): Id<ProjectId>,
) -> ApiResult<Json<ProjectWithFields>> {
    let (project, fields) = s
        .store
        .project_with_fields(&caller.tenant, &project_id)
        .await?
        .ok_or(ApiError::NotFound(PROJECT))?;
    Ok(Json(ProjectWithFields {
        project: project.project(),
        fields,
    }))
}

pub async fn create_field(
    State(s): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    JsonBody(body): JsonBody<NewFieldBody>,
) -> ApiResult<Response> {
    let project_id: ProjectId = path_id(&project_id)?;
    let def = body.into_def(new_id())?;
    s.store
        .create_field(&caller.tenant, &project_id, &def)
        .await?;
    Ok(created(
        format!("/projects/{project_id}/fields/{}", def.id),
        def,
    ))
}

pub async fn list_fields(
    State(s): State<AppState>,
    caller: Caller,
    q: Paging,
    Id(project_id): Id<ProjectId>,
) -> ApiResult<Json<List<crate::domain::values::FieldDef>>> {
    let cursor = q.bind(format!("project_id={project_id}"));
    let start = cursor.start()?;
    let page = s
        .store
        .list_fields(&caller.tenant, &project_id, q.limit, start.as_ref())
        .await?;
    // An empty first page may mean no project at all; one read tells.
    if page.items.is_empty()
        && start.is_none()
        && s.store
            .get_project(&caller.tenant, &project_id)
            .await?
            .is_none()
    {
        return Err(ApiError::NotFound(PROJECT));
    }
    Ok(Json(List {
        items: page.items,
        next_cursor: page.next.map(|p| cursor.seal(&p)),
    }))
}

pub async fn delete_field(
    State(s): State<AppState>,
    caller: Caller,
    Path((project_id, field_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let (Some(project_id), Some(field_id)) =
        (ProjectId::parse(&project_id), FieldId::parse(&field_id))
    else {
        return Err(ApiError::NotFound(FIELD));
    };
    if s.store
        .delete_field(&caller.tenant, &project_id, &field_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(FIELD))
    }
}
