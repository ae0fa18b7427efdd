//! Issue create, read, patch and delete.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::extract::{JsonBody, if_match};
use super::views::IssueView;
use crate::auth::Caller;
use crate::domain::ids::{is_server_id, new_id};
use crate::domain::values::{FieldDef, format_timestamp};
use crate::domain::{Issue, IssuePatchBody, NewIssueBody};
use crate::error::{ApiError, ApiResult};
use crate::store::{CreateIssueError, PatchOutcome};

const ISSUE: &str = "issue";
const PROJECT: &str = "project";

/// An issue with its `ETag` (the version, quoted).
fn issue_response(status: StatusCode, issue: Issue, defs: &[FieldDef]) -> Response {
    let etag = HeaderValue::from_str(&format!("\"{}\"", issue.version))
        .unwrap_or(HeaderValue::from_static("\"0\""));
    let location = format!("/issues/{}", issue.id);
    let mut response = (status, Json(IssueView::new(issue, defs))).into_response();
    response.headers_mut().insert(header::ETAG, etag);
    if status == StatusCode::CREATED
        && let Ok(location) = HeaderValue::from_str(&location)
    {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// The project's current field definitions (the issue's project always exists: projects are
/// never deleted).
async fn defs_of(s: &AppState, tenant: &str, project_id: &str) -> ApiResult<Vec<FieldDef>> {
    Ok(s.store
        .project_with_fields(tenant, project_id)
        .await?
        .map(|(_, defs)| defs)
        .unwrap_or_default())
}

pub async fn create(
    State(s): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    JsonBody(body): JsonBody<NewIssueBody>,
) -> ApiResult<Response> {
    if !is_server_id(&project_id) {
        return Err(ApiError::NotFound(PROJECT));
    }
    let (project, defs) = s
        .store
        .project_with_fields(&caller.tenant, &project_id)
        .await?
        .ok_or(ApiError::NotFound(PROJECT))?;
    let new = body.validate(&defs, &caller.user)?;
    let now = format_timestamp(time::OffsetDateTime::now_utc());
    let last_num = project.next_num.unwrap_or(0);
    match s
        .store
        .create_issue(&caller.tenant, &project_id, last_num, new, new_id(), now)
        .await
    {
        Ok(issue) => Ok(issue_response(StatusCode::CREATED, issue, &defs)),
        Err(CreateIssueError::ProjectNotFound) => Err(ApiError::NotFound(PROJECT)),
        Err(CreateIssueError::Store(e)) => Err(e.into()),
    }
}

pub async fn get(
    State(s): State<AppState>,
    caller: Caller,
    Path(issue_id): Path<String>,
) -> ApiResult<Response> {
    if !is_server_id(&issue_id) {
        return Err(ApiError::NotFound(ISSUE));
    }
    current(&s, &caller.tenant, &issue_id).await
}

/// The issue as it is now, with its ETag: GET, and the answer after a change.
async fn current(s: &AppState, tenant: &str, issue_id: &str) -> ApiResult<Response> {
    let issue = s
        .store
        .get_issue(tenant, issue_id)
        .await?
        .ok_or(ApiError::NotFound(ISSUE))?;
    let defs = defs_of(s, tenant, &issue.project_id).await?;
    Ok(issue_response(StatusCode::OK, issue, &defs))
}

pub async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(issue_id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<IssuePatchBody>,
) -> ApiResult<Response> {
    if !is_server_id(&issue_id) {
        return Err(ApiError::NotFound(ISSUE));
    }
    let expected = if_match(&headers)?;
    let current = s
        .store
        .get_issue(&caller.tenant, &issue_id)
        .await?
        .ok_or(ApiError::NotFound(ISSUE))?;
    if let Some(v) = expected
        && v != current.version
    {
        return Err(ApiError::PreconditionFailed(v.to_string()));
    }
    let defs = defs_of(&s, &caller.tenant, &current.project_id).await?;
    let patch = body.validate(&defs)?;
    if patch.is_empty() {
        return Ok(issue_response(StatusCode::OK, current, &defs));
    }
    // The size check needs the merged result; values of fields not in the patch are kept.
    let mut merged = if patch.clear_fields {
        Default::default()
    } else {
        current.fields.clone()
    };
    merged.retain(|k, _| !patch.remove_fields.contains(k));
    merged.extend(patch.set_fields.clone());
    crate::domain::check_item_size(
        patch.title.as_deref().unwrap_or(&current.title),
        &merged,
        &current.participants,
    )?;

    let now = format_timestamp(time::OffsetDateTime::now_utc());
    match s
        .store
        .patch_issue(&caller.tenant, &issue_id, &patch, expected, &now)
        .await?
    {
        PatchOutcome::Updated => {}
        PatchOutcome::NotFound => return Err(ApiError::NotFound(ISSUE)),
        PatchOutcome::VersionMismatch => {
            return Err(ApiError::PreconditionFailed(
                expected.unwrap_or_default().to_string(),
            ));
        }
    }
    let issue = s
        .store
        .get_issue(&caller.tenant, &issue_id)
        .await?
        .ok_or(ApiError::NotFound(ISSUE))?;
    Ok(issue_response(StatusCode::OK, issue, &defs))
}

pub async fn delete(
    State(s): State<AppState>,
    caller: Caller,
    Path(issue_id): Path<String>,
) -> ApiResult<StatusCode> {
    if !is_server_id(&issue_id) {
        return Err(ApiError::NotFound(ISSUE));
    }
    if s.store.delete_issue(&caller.tenant, &issue_id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(ISSUE))
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleBody {
    role: crate::domain::Role,
}

fn participant_path(kind: &str, id: &str) -> ApiResult<crate::domain::ParticipantKind> {
    let kind = crate::domain::ParticipantKind::parse(kind)
        .ok_or_else(|| ApiError::invalid("kind", "must be user or team"))?;
    crate::domain::check_participant_id(kind, id).map_err(|m| ApiError::invalid("id", m))?;
    Ok(kind)
}

/// `PUT /issues/{id}/participants/{kind}/{id}`: adds the participant or changes their role.
pub async fn put_participant(
    State(s): State<AppState>,
    caller: Caller,
    Path((issue_id, kind, id)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<RoleBody>,
) -> ApiResult<Response> {
    if !is_server_id(&issue_id) {
        return Err(ApiError::NotFound(ISSUE));
    }
    let kind = participant_path(&kind, &id)?;
    if kind == crate::domain::ParticipantKind::Team
        && s.store.get_team(&caller.tenant, &id).await?.is_none()
    {
        return Err(ApiError::invalid("id", "is not a team of this tenant"));
    }
    let participant = crate::domain::Participant {
        kind,
        id,
        role: body.role,
    };
    let now = format_timestamp(time::OffsetDateTime::now_utc());
    if !s
        .store
        .put_participant(&caller.tenant, &issue_id, &participant, &now)
        .await?
    {
        return Err(ApiError::NotFound(ISSUE));
    }
    current(&s, &caller.tenant, &issue_id).await
}

/// `DELETE /issues/{id}/participants/{kind}/{id}`.
pub async fn delete_participant(
    State(s): State<AppState>,
    caller: Caller,
    Path((issue_id, kind, id)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    if !is_server_id(&issue_id) {
        return Err(ApiError::NotFound(ISSUE));
    }
    let Ok(kind) = participant_path(&kind, &id) else {
        return Err(ApiError::NotFound("participant"));
    };
    let now = format_timestamp(time::OffsetDateTime::now_utc());
    if s.store
        .delete_participant(&caller.tenant, &issue_id, kind, &id, &now)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("participant"))
    }
}
