//! Projects and field definitions.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::extract::{Id, Ids, JsonBody, Paging, path_id};
use super::now;
use super::page::{PageBody, render};
use super::views::ProjectWithFields;
use crate::auth::Caller;
use crate::domain::ids::{FieldId, ProjectId};
use crate::domain::options_edit::{OptionEntry, plan};
use crate::domain::text::check_text;
use crate::domain::values::{FieldDef, FieldType};
use crate::domain::{NewFieldBody, NewProjectBody, Project};
use crate::http::error::{ApiError, ApiResult};
use crate::store::records::field_edit::{FieldPatch, PatchFieldError};

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
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<NewProjectBody>,
) -> ApiResult<Response> {
    body.validate()?;
    let project = Project {
        id: ProjectId::new(),
        name: body.name,
        created_at: now(),
    };
    app.store
        .records()
        .create_project(&caller.tenant, &project)
        .await?;
    Ok(created(format!("/projects/{}", project.id), project))
}

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
) -> ApiResult<PageBody> {
    let cursor = paging.bind("");
    let start = cursor.start()?;
    let page = app
        .store
        .records()
        .list_projects(&caller.tenant, paging.limit, start.as_ref())
        .await?;
    render(page.items, page.next, &cursor)
}

pub async fn get(
    State(app): State<AppState>,
    caller: Caller,
    Id(project_id): Id<ProjectId>,
) -> ApiResult<Json<ProjectWithFields>> {
    with_fields(&app, &caller.tenant, &project_id).await
}

/// The project with its fields (strongly consistent); `404` when there is none.
async fn with_fields(
    app: &AppState,
    tenant: &crate::domain::ids::TenantId,
    project_id: &ProjectId,
) -> ApiResult<Json<ProjectWithFields>> {
    let (project, fields) = app
        .store
        .records()
        .project_with_fields(tenant, project_id)
        .await?
        .ok_or(ApiError::NotFound(PROJECT))?;
    Ok(Json(ProjectWithFields {
        project: project.project(),
        fields,
    }))
}

/// `PATCH /projects/{project_id}` `{"name"}`: the project with its fields.
pub async fn patch(
    State(app): State<AppState>,
    caller: Caller,
    Id(project_id): Id<ProjectId>,
    JsonBody(body): JsonBody<NewProjectBody>,
) -> ApiResult<Json<ProjectWithFields>> {
    body.validate()?;
    if !app
        .store
        .records()
        .rename_project(&caller.tenant, &project_id, &body.name)
        .await?
    {
        return Err(ApiError::NotFound(PROJECT));
    }
    with_fields(&app, &caller.tenant, &project_id).await
}

/// `DELETE /projects/{project_id}`: the project is `404` at once; a purge job, started by the
/// stream, deletes its issues and everything else under it within seconds
/// (`store::records::project_delete`).
pub async fn delete(
    State(app): State<AppState>,
    caller: Caller,
    Id(project_id): Id<ProjectId>,
) -> ApiResult<StatusCode> {
    if app
        .store
        .records()
        .delete_project(&caller.tenant, &project_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(PROJECT))
    }
}

pub async fn create_field(
    State(app): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    JsonBody(body): JsonBody<NewFieldBody>,
) -> ApiResult<Response> {
    let project_id: ProjectId = path_id(&project_id)?;
    let def = body.into_def(FieldId::new())?;
    let def = app
        .store
        .records()
        .create_field(&caller.tenant, &project_id, &def)
        .await?;
    Ok(created(
        format!("/projects/{project_id}/fields/{}", def.id),
        def,
    ))
}

pub async fn list_fields(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(project_id): Id<ProjectId>,
) -> ApiResult<PageBody> {
    let cursor = paging.bind(format!("project_id={project_id}"));
    let start = cursor.start()?;
    let records = app.store.records();
    let list = records.list_fields(&caller.tenant, &project_id, paging.limit, start.as_ref());
    // The first page says whether the project exists (read at once, beside the fields): a
    // deleted project's fields are `404` at once, before its purge has removed them.
    let exists = async {
        match start {
            Some(_) => Ok(true),
            None => Ok(records
                .get_project(&caller.tenant, &project_id)
                .await?
                .is_some()),
        }
    };
    let (page, exists): (_, Result<bool, crate::store::StoreError>) = tokio::join!(list, exists);
    let page = page?;
    if !exists? {
        return Err(ApiError::NotFound(PROJECT));
    }
    render(page.items, page.next, &cursor)
}

pub async fn delete_field(
    State(app): State<AppState>,
    caller: Caller,
    Ids(project_id, field_id): Ids<ProjectId, FieldId>,
) -> ApiResult<StatusCode> {
    let (Some(project_id), Some(field_id)) = (project_id, field_id) else {
        return Err(ApiError::NotFound(FIELD));
    };
    if !app
        .store
        .records()
        .delete_field(&caller.tenant, &project_id, &field_id)
        .await?
    {
        return Err(ApiError::NotFound(FIELD));
    }
    delete_views_using(&app, &caller.tenant, &project_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PATCH /projects/{project_id}/fields/{field_id}` body.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldPatchBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    options: Option<Vec<OptionEntry>>,
    /// Accepted only as the field's own type: a type never changes.
    #[serde(default, rename = "type")]
    field_type: Option<FieldType>,
}

/// `PATCH /projects/{project_id}/fields/{field_id}` `{"name"?, "options"?}`: the field as it
/// is now. An options change that moves, renames or removes labels makes the field not
/// `sortable` until its job has rewritten the issues and rebuilt the column (`409` with
/// `Retry-After` for a second such change meanwhile, as for the grid).
pub async fn patch_field(
    State(app): State<AppState>,
    caller: Caller,
    Ids(project_id, field_id): Ids<ProjectId, FieldId>,
    JsonBody(body): JsonBody<FieldPatchBody>,
) -> ApiResult<Json<FieldDef>> {
    let (Some(project_id), Some(field_id)) = (project_id, field_id) else {
        return Err(ApiError::NotFound(FIELD));
    };
    let records = app.store.records();
    let (_, defs) = records
        .project_with_fields(&caller.tenant, &project_id)
        .await?
        .ok_or(ApiError::NotFound(PROJECT))?;
    let def = defs
        .into_iter()
        .find(|d| d.id == field_id)
        .ok_or(ApiError::NotFound(FIELD))?;
    let patch = plan_field_patch(&def, body)?;
    match records
        .patch_field(&caller.tenant, &project_id, &field_id, &patch)
        .await
    {
        Ok(def) => Ok(Json(def)),
        Err(PatchFieldError::NotFound) => Err(ApiError::NotFound(FIELD)),
        Err(PatchFieldError::Rebuilding) => Err(ApiError::ColumnIncomplete {
            field: field_id.to_string(),
            retry_after_s: super::grid::COLUMN_RETRY_AFTER_S,
        }),
        Err(e @ PatchFieldError::DefinitionsTooLarge) => Err(ApiError::Conflict(e.to_string())),
        Err(PatchFieldError::Invalid(errors)) => Err(ApiError::from_errors(errors)),
        Err(PatchFieldError::Store(e)) => Err(e.into()),
    }
}

/// The patch `body` asks of `def`, checked: `400` for another type, options on a field that
/// is not a select, an option list that does not hold, or nothing to change.
fn plan_field_patch(def: &FieldDef, body: FieldPatchBody) -> ApiResult<FieldPatch> {
    if body.field_type.is_some_and(|t| t != def.field_type) {
        return Err(ApiError::invalid("type", "a field's type cannot change"));
    }
    if let Some(name) = &body.name {
        check_text(name, 1, 128).map_err(|m| ApiError::invalid("name", m))?;
    }
    // Checked here against the definition read, and planned again in the write against the
    // one it is conditioned on (options changed meanwhile are planned anew).
    match (&body.options, &def.options) {
        (None, _) => {}
        (Some(new), Some(old)) => {
            plan(old, new).map_err(ApiError::from_errors)?;
        }
        (Some(_), None) => {
            return Err(ApiError::invalid(
                "options",
                "is only allowed for select fields",
            ));
        }
    }
    if body.name.is_none() && body.options.is_none() {
        return Err(ApiError::invalid("name", "give a new name or options"));
    }
    Ok(FieldPatch {
        name: body.name,
        options: body.options,
    })
}

/// After a field's delete: the views whose definitions no longer hold (they name it) are
/// deleted with it. Until then they answer `404` and the index keeps no list of them (both
/// check definitions against the fields), so a delete cut short here hides them all the same;
/// the next field delete of the project, or the view's own `DELETE`, finishes it.
async fn delete_views_using(
    app: &AppState,
    tenant: &crate::domain::ids::TenantId,
    project_id: &ProjectId,
) -> ApiResult<()> {
    let records = app.store.records();
    let Some((_, defs)) = records.project_with_fields(tenant, project_id).await? else {
        return Ok(());
    };
    for view in records.list_views(tenant, project_id).await? {
        if view.spec().check(&defs).is_err() {
            match records.delete_view(tenant, &view.id).await {
                Ok(()) | Err(crate::store::records::views::ViewWriteError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}
