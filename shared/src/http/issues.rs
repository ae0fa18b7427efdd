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
use crate::store::{CreateIssueError, ParticipantOutcome, PatchOutcome, issue_item_size};

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

/// The project's current field definitions, strongly consistent: a read shows a field's
/// values from the moment it exists until the moment it is deleted (the issue's project always
/// exists: projects are never deleted).
async fn defs_of(s: &AppState, tenant: &str, project_id: &str) -> ApiResult<Vec<FieldDef>> {
    Ok(s.store
        .project_with_fields(tenant, project_id)
        .await?
        .map(|(_, defs)| defs)
        .unwrap_or_default())
}

/// Validates a write against the project's field definitions. A write that sets or removes
/// field values (`values`) reads them strongly consistent: a field deleted a moment ago must
/// be refused (`400`), or its value could be stored after the indexer has swept the field's
/// values away. Any other write reads them eventually consistent (half the cost; they only
/// shape the answer) and, should that read refuse, validates again against a consistent read
/// before refusing, so a just-created project or field always validates.
async fn validated<T>(
    s: &AppState,
    tenant: &str,
    project_id: &str,
    values: bool,
    validate: impl Fn(&[FieldDef]) -> ApiResult<T>,
) -> ApiResult<Option<(crate::store::ProjectItem, Vec<FieldDef>, T)>> {
    if values {
        return match s.store.project_with_fields(tenant, project_id).await? {
            None => Ok(None),
            Some((project, defs)) => {
                let v = validate(&defs)?;
                Ok(Some((project, defs, v)))
            }
        };
    }
    let Some((project, defs)) = s
        .store
        .project_with_fields_read(tenant, project_id, false)
        .await?
    else {
        // Not there yet for an eventually consistent read, or not there at all.
        return Ok(
            match s.store.project_with_fields(tenant, project_id).await? {
                None => None,
                Some((project, defs)) => {
                    let v = validate(&defs)?;
                    Some((project, defs, v))
                }
            },
        );
    };
    match validate(&defs) {
        Ok(v) => Ok(Some((project, defs, v))),
        Err(first) => match s.store.project_with_fields(tenant, project_id).await? {
            Some((project, defs)) => {
                let v = validate(&defs)?;
                Ok(Some((project, defs, v)))
            }
            None => Err(first),
        },
    }
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
    let values = body.fields.as_ref().is_some_and(|f| !f.is_empty());
    let (project, defs, new) = validated(&s, &caller.tenant, &project_id, values, |defs| {
        body.clone().validate(defs, &caller.user)
    })
    .await?
    .ok_or(ApiError::NotFound(PROJECT))?;
    let now = format_timestamp(time::OffsetDateTime::now_utc());
    let last_num = project.next_num.unwrap_or(0);
    match s
        .store
        .create_issue(&caller.tenant, &project_id, last_num, new, new_id(), now)
        .await
    {
        Ok(issue) => Ok(issue_response(StatusCode::CREATED, issue, &defs)),
        Err(CreateIssueError::ProjectNotFound) => Err(ApiError::NotFound(PROJECT)),
        Err(CreateIssueError::TooLarge) => Err(crate::domain::too_large()),
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
    let values = body.fields.is_some();
    let (_, defs, patch) = validated(&s, &caller.tenant, &current.project_id, values, |defs| {
        body.clone().validate(defs)
    })
    .await?
    .ok_or(ApiError::NotFound(ISSUE))?;
    if patch.is_empty() {
        return Ok(issue_response(StatusCode::OK, current, &defs));
    }
    // The size check measures the item as it will be stored: the merged values, the new
    // title and version, participants as they are.
    let mut merged = current.clone();
    if patch.clear_fields {
        merged.fields.clear();
    }
    merged
        .fields
        .retain(|k, _| !patch.remove_fields.contains(k));
    merged.fields.extend(patch.set_fields.clone());
    if let Some(t) = &patch.title {
        merged.title = t.clone();
    }
    if let Some(st) = patch.state {
        merged.state = st;
    }
    merged.version += 1;
    if issue_item_size(&caller.tenant, &merged)? > crate::domain::MAX_ITEM_BYTES {
        return Err(crate::domain::too_large());
    }

    let now = format_timestamp(time::OffsetDateTime::now_utc());
    match s
        .store
        .patch_issue(&caller.tenant, &current, &patch, expected, &now)
        .await?
    {
        PatchOutcome::Updated => {}
        PatchOutcome::TooLarge => return Err(crate::domain::too_large()),
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
    match s
        .store
        .put_participant(&caller.tenant, &issue_id, &participant, &now)
        .await?
    {
        ParticipantOutcome::Saved => current(&s, &caller.tenant, &issue_id).await,
        ParticipantOutcome::NotFound => Err(ApiError::NotFound(ISSUE)),
        ParticipantOutcome::Full => Err(ApiError::Conflict(format!(
            "the issue has {} participants, the most it may have",
            crate::domain::MAX_PARTICIPANTS
        ))),
        ParticipantOutcome::TooLarge => Err(crate::domain::too_large()),
    }
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
