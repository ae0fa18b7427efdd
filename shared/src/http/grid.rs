//! The grid: a project's issues sorted by any column, a page at a time. A page is one Query of
//! the column's partition in the index table (two where a descending page crosses from values
//! to issues without one; one per shard and per state scope: a page of every state merges the
//! `open` and `closed` ones), whose entries carry the issues' summaries, and one BatchGetItem
//! of the names on the page (and one of the issues whose entries are thin), whatever the
//! project's size; the project's field definitions are read when the instance has not read
//! them in the last seconds ([`FieldsCache`]). The query, from its partitions to the page's
//! issues, is [`crate::read::grid::page()`]; this interprets the request, calls it, reads the
//! names and renders the page within its byte budget ([`super::page`]).
//!
//! [`FieldsCache`]: super::fields_cache::FieldsCache

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};

use super::AppState;
use super::extract::{Id, Paging, unknown_params};
use super::fields_cache::ProjectFields;
use super::page::{PageBody, render};
use super::views::{IssueView, participants_of};
use crate::auth::Caller;
use crate::domain::ids::{ProjectId, TenantId};
use crate::domain::values::FieldDef;
use crate::http::error::{ApiError, ApiResult};
use crate::model::Column;
use crate::read::grid::{self, GridParams, GridQuery, PageRequest};

/// Interprets the query string against the project's fields.
fn parse(
    project_id: &ProjectId,
    params: &HashMap<String, String>,
    defs: &[FieldDef],
) -> Result<GridQuery, ApiError> {
    let known = ["sort", "order", "gte", "lte", "prefix", "state", "where"];
    let mut errors = unknown_params(params, &known);
    let get = |name: &str| params.get(name).map(String::as_str);
    let given = GridParams {
        sort: get("sort"),
        order: get("order"),
        state: get("state"),
        gte: get("gte"),
        lte: get("lte"),
        prefix: get("prefix"),
        filter: get("where"),
    };
    match grid::parse(project_id, &given, defs) {
        Ok(query) if errors.is_empty() => Ok(query),
        Ok(_) => Err(ApiError::from_errors(errors)),
        Err(more) => {
            errors.extend(more);
            Err(ApiError::from_errors(errors))
        }
    }
}

/// The project's fields, its shard count and the interpreted query. Eventually consistent, and
/// held by the instance for a few seconds ([`FieldsCache`]): the grid is fresh within seconds
/// anyway, a field created a moment ago is not sortable until its column is complete, and
/// during a reshard both layouts are exact until reads have moved on (see `gridctl reshard`).
/// A just-created project may not be there yet for this read: one consistent read tells before
/// a 404; and a query the held or read definitions refuse (its field may be that new) is parsed
/// again against a consistent read before it is refused.
async fn interpret(
    app: &AppState,
    tenant: &TenantId,
    project_id: &ProjectId,
    params: &HashMap<String, String>,
) -> ApiResult<(Arc<ProjectFields>, GridQuery)> {
    let held = match app.fields.get(&(tenant.clone(), project_id.clone())) {
        Some(held) => Some(held),
        None => {
            let read = match app
                .store
                .records()
                .project_with_fields_read(tenant, project_id, false)
                .await?
            {
                Some(found) => Some(found),
                None => {
                    app.store
                        .records()
                        .project_with_fields(tenant, project_id)
                        .await?
                }
            };
            read.map(|(project, defs)| hold(app, tenant, project_id, project, defs))
        }
    };
    let fields = held.ok_or(ApiError::NotFound("project"))?;
    match parse(project_id, params, &fields.defs).and_then(|q| sortable(q, &fields.defs)) {
        Ok(query) => Ok((fields, query)),
        Err(first) => match app
            .store
            .records()
            .project_with_fields(tenant, project_id)
            .await?
        {
            Some((project, defs)) => {
                let fresh = hold(app, tenant, project_id, project, defs);
                let query = sortable(parse(project_id, params, &fresh.defs)?, &fresh.defs)?;
                Ok((fresh, query))
            }
            None => Err(first),
        },
    }
}

/// What was just read, held for the next pages.
fn hold(
    app: &AppState,
    tenant: &TenantId,
    project_id: &ProjectId,
    project: crate::store::records::items::ProjectItem,
    defs: Vec<FieldDef>,
) -> Arc<ProjectFields> {
    let fields = Arc::new(ProjectFields { project, defs });
    app.fields
        .put((tenant.clone(), project_id.clone()), fields.clone());
    fields
}

/// A page sorted by a column makes it hot (its entries will carry summaries, filled by a
/// job): one conditional write the first time, none once the project's record says so. A
/// failure costs this page nothing: the next page sorted by it tries again.
async fn warm(
    app: &AppState,
    tenant: &TenantId,
    project_id: &ProjectId,
    fields: &ProjectFields,
    column: &str,
) {
    if fields.project.is_hot(column) {
        return;
    }
    match app
        .store
        .records()
        .mark_hot(tenant, project_id, column)
        .await
    {
        Ok(_) => {
            // Held as hot, so this instance's next pages write nothing.
            let mut project = fields.project.clone();
            project.hot.push(column.to_string());
            let defs = fields.defs.clone();
            hold(app, tenant, project_id, project, defs);
        }
        Err(e) => tracing::warn!(error = %e, column, "marking the column hot failed"),
    }
}

/// How long a client waits before asking again for a column being built: a field job
/// indexes thousands of issues a second, so most columns are done within one wait.
pub const COLUMN_RETRY_AFTER_S: u32 = 5;

/// The query, unless it sorts by a field whose column is not complete yet.
fn sortable(query: GridQuery, defs: &[FieldDef]) -> Result<GridQuery, ApiError> {
    match &query.column {
        Column::Field(id) => match defs.iter().find(|d| d.id.as_str() == id) {
            Some(def) if !def.sortable => Err(ApiError::ColumnIncomplete {
                field: def.id.to_string(),
                retry_after_s: COLUMN_RETRY_AFTER_S,
            }),
            _ => Ok(query),
        },
        _ => Ok(query),
    }
}

pub async fn list(
    State(app): State<AppState>,
    caller: Caller,
    paging: Paging,
    Id(project_id): Id<ProjectId>,
    Query(mut params): Query<HashMap<String, String>>,
) -> ApiResult<PageBody> {
    params.remove("limit");
    params.remove("cursor");
    let (fields, query) = interpret(&app, &caller.tenant, &project_id, &params).await?;
    let cursor = paging.bind(query.canonical.as_str());
    warm(
        &app,
        &caller.tenant,
        &project_id,
        &fields,
        query.source.name(),
    )
    .await;
    let request = PageRequest {
        tenant: &caller.tenant,
        project_id: &project_id,
        defs: &fields.defs,
        query: &query,
        shards: fields.project.read_shards(),
        limit: paging.limit,
        start: cursor.start()?,
    };
    read_page(&app, request, &cursor).await
}

/// Reads a page of a column (the grid's, or a saved view's), its participants' names, and
/// renders it.
pub(super) async fn read_page(
    app: &AppState,
    request: PageRequest<'_>,
    cursor: &super::extract::BoundCursor<'_>,
) -> ApiResult<PageBody> {
    let (tenant, defs) = (request.tenant, request.defs);
    let page = grid::page(&app.store, request).await?;
    let names = app
        .store
        .records()
        .names(tenant, &participants_of(page.issues.iter().map(|(i, _)| i)))
        .await?;
    let items = page
        .issues
        .into_iter()
        .map(|(i, after)| (IssueView::list_item(i, defs, &names), after));
    render(items, page.next, cursor)
}
