//! Issue create, read, patch and delete.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ApiResult};
use super::extract::{Id, JsonBody, if_match, path_id};
use super::views::{IssueView, RelationView, SubIssues};
use super::{AppState, now};
use crate::auth::Caller;
use crate::domain::ids::{IssueId, ParticipantId, ProjectId, TeamId, TenantId};
use crate::domain::values::FieldDef;
use crate::domain::{
    Issue, IssuePatch, IssuePatchBody, IssueState, IssueTooLarge, MAX_ITEM_BYTES, MAX_PARTICIPANTS,
    NewIssueBody, Participant, ParticipantKind, Role, ValidationError, check_participant_id,
};
use crate::store::records::issues::IssueWithGraph;
use crate::store::{ParticipantOutcome, PatchOutcome, ProjectItem, issue_item_size};

const ISSUE: &str = "issue";
const PROJECT: &str = "project";

/// An issue with its `ETag` (the version, quoted).
fn issue_response(status: StatusCode, issue: Issue, defs: &[FieldDef]) -> Response {
    view_response(status, IssueView::new(issue, defs))
}

/// An issue's view with its `ETag`.
fn view_response(status: StatusCode, view: IssueView) -> Response {
    let etag = HeaderValue::from_str(&format!("\"{}\"", view.version))
        .unwrap_or(HeaderValue::from_static("\"0\""));
    let location = format!("/issues/{}", view.id);
    let mut response = (status, Json(view)).into_response();
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
async fn defs_of(
    app: &AppState,
    tenant: &TenantId,
    project_id: &ProjectId,
) -> ApiResult<Vec<FieldDef>> {
    Ok(app
        .store
        .records()
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
    app: &AppState,
    tenant: &TenantId,
    project_id: &ProjectId,
    values: bool,
    validate: impl Fn(&[FieldDef]) -> Result<T, ValidationError>,
) -> ApiResult<Option<(ProjectItem, Vec<FieldDef>, T)>> {
    let check = |(project, defs): (ProjectItem, Vec<FieldDef>)| -> ApiResult<_> {
        let v = validate(&defs)?;
        Ok((project, defs, v))
    };
    if !values
        && let Some((project, defs)) = app
            .store
            .records()
            .project_with_fields_read(tenant, project_id, false)
            .await?
    {
        return match validate(&defs) {
            Ok(v) => Ok(Some((project, defs, v))),
            // The read may be stale: only a consistent read may refuse.
            Err(first) => match app
                .store
                .records()
                .project_with_fields(tenant, project_id)
                .await?
            {
                Some(found) => check(found).map(Some),
                None => Err(first.into()),
            },
        };
    }
    // A write of values, or a project not there yet for an eventually consistent read (or not
    // there at all).
    app.store
        .records()
        .project_with_fields(tenant, project_id)
        .await?
        .map(check)
        .transpose()
}

pub async fn create(
    State(app): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    JsonBody(body): JsonBody<NewIssueBody>,
) -> ApiResult<Response> {
    let project_id: ProjectId = path_id(&project_id)?;
    let values = body.fields.as_ref().is_some_and(|f| !f.is_empty());
    let (_, defs, new) = validated(&app, &caller.tenant, &project_id, values, |defs| {
        body.clone().validate(defs, &caller.user)
    })
    .await?
    .ok_or(ApiError::NotFound(PROJECT))?;
    let issue = app
        .store
        .records()
        .create_issue(
            &caller.tenant,
            &project_id,
            new,
            IssueId::new(),
            (now(), &caller.user),
        )
        .await?;
    Ok(issue_response(StatusCode::CREATED, issue, &defs))
}

/// `GET /issues/{id}`: the issue with its relations, the other issues' titles and states as
/// they are now (one BatchGetItem, eventually consistent; none without relations), and its
/// sub-issues counted by state from its children partitions (none read for an issue that
/// never had any). The field definitions and those reads go at once.
pub async fn get(
    State(app): State<AppState>,
    caller: Caller,
    Id(issue_id): Id<IssueId>,
) -> ApiResult<Response> {
    let tenant = &caller.tenant;
    let IssueWithGraph {
        issue,
        relations,
        had_children,
        comment_count,
    } = app
        .store
        .records()
        .get_issue_with_relations(tenant, &issue_id)
        .await?
        .ok_or(ApiError::NotFound(ISSUE))?;
    let others: Vec<String> = relations.iter().map(|r| r.other.to_string()).collect();
    let related = async {
        if others.is_empty() {
            return Ok(Vec::new());
        }
        let found = app
            .store
            .records()
            .batch_get_issues(tenant, &others)
            .await?;
        Ok::<_, ApiError>(found.into_values().collect())
    };
    let (defs, others, sub_issues) = futures::try_join!(
        defs_of(&app, tenant, &issue.project_id),
        related,
        sub_issues(&app, tenant, &issue_id, had_children),
    )?;
    let mut view = IssueView::new(issue, &defs);
    view.relations = Some(RelationView::ordered(relations, others));
    view.sub_issues = Some(sub_issues);
    view.comment_count = Some(comment_count);
    Ok(view_response(StatusCode::OK, view))
}

/// An issue's direct children by state, as of the index: a count of each state's children
/// partition (both at once), none read for an issue that never had a sub-issue.
async fn sub_issues(
    app: &AppState,
    tenant: &TenantId,
    issue_id: &IssueId,
    had_children: bool,
) -> ApiResult<SubIssues> {
    if !had_children {
        return Ok(SubIssues::default());
    }
    let index = app.store.index();
    let count = |state| {
        index.count(crate::keys::index::children_pk(
            tenant,
            issue_id.as_str(),
            state,
        ))
    };
    let (open, closed) = futures::try_join!(
        count(Some(IssueState::Open)),
        count(Some(IssueState::Closed))
    )?;
    Ok(SubIssues { open, closed })
}

/// The issue as stored now.
async fn issue_of(app: &AppState, tenant: &TenantId, issue_id: &IssueId) -> ApiResult<Issue> {
    app.store
        .records()
        .get_issue(tenant, issue_id)
        .await?
        .ok_or(ApiError::NotFound(ISSUE))
}

/// The issue as it is now, with its ETag: GET, and the answer after a change.
async fn current(app: &AppState, tenant: &TenantId, issue_id: &IssueId) -> ApiResult<Response> {
    let issue = issue_of(app, tenant, issue_id).await?;
    let defs = defs_of(app, tenant, &issue.project_id).await?;
    Ok(issue_response(StatusCode::OK, issue, &defs))
}

pub async fn patch(
    State(app): State<AppState>,
    caller: Caller,
    Path(issue_id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<IssuePatchBody>,
) -> ApiResult<Response> {
    let issue_id: IssueId = path_id(&issue_id)?;
    let expected = if_match(&headers)?;
    let current = issue_of(&app, &caller.tenant, &issue_id).await?;
    if let Some(v) = expected
        && v != current.version
    {
        return Err(ApiError::PreconditionFailed(v.to_string()));
    }
    let values = body.fields.is_some();
    let (_, defs, patch) = validated(&app, &caller.tenant, &current.project_id, values, |defs| {
        body.clone().validate(defs)
    })
    .await?
    .ok_or(ApiError::NotFound(ISSUE))?;
    // What the issue has already is no change: a patch of nothing else makes no version.
    let patch = patch.without_noops(&current);
    if patch.is_empty() {
        return Ok(issue_response(StatusCode::OK, current, &defs));
    }
    check_patched_size(&caller.tenant, &current, &patch)?;
    let outcome = app
        .store
        .records()
        .patch_issue(
            &caller.tenant,
            &current,
            &patch,
            expected,
            (&now(), &caller.user),
        )
        .await?;
    match outcome {
        PatchOutcome::Updated => {}
        PatchOutcome::TooLarge => return Err(IssueTooLarge.into()),
        PatchOutcome::Parent(refusal) => return Err(refusal.into()),
        PatchOutcome::NotFound => return Err(ApiError::NotFound(ISSUE)),
        PatchOutcome::VersionMismatch => {
            return Err(ApiError::PreconditionFailed(
                expected.unwrap_or_default().to_string(),
            ));
        }
    }
    let issue = issue_of(&app, &caller.tenant, &issue_id).await?;
    Ok(issue_response(StatusCode::OK, issue, &defs))
}

/// Refuses a patch whose item, as it will be stored (the merged values, the new title and
/// version, participants as they are), would not fit in one DynamoDB item.
fn check_patched_size(tenant: &TenantId, current: &Issue, patch: &IssuePatch) -> ApiResult<()> {
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
    if let Some(parent) = &patch.parent {
        merged.parent_id = parent.clone();
    }
    merged.version += 1;
    if issue_item_size(tenant, &merged)? > MAX_ITEM_BYTES {
        return Err(IssueTooLarge.into());
    }
    Ok(())
}

pub async fn delete(
    State(app): State<AppState>,
    caller: Caller,
    Id(issue_id): Id<IssueId>,
) -> ApiResult<StatusCode> {
    if app
        .store
        .records()
        .delete_issue(&caller.tenant, &issue_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(ISSUE))
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleBody {
    role: Role,
}

fn participant_path(kind: &str, id: &str) -> ApiResult<(ParticipantKind, ParticipantId)> {
    let kind = ParticipantKind::parse(kind)
        .ok_or_else(|| ApiError::invalid("kind", "must be user or team"))?;
    check_participant_id(kind, id).map_err(|m| ApiError::invalid("id", m))?;
    let id =
        ParticipantId::parse(id).ok_or_else(|| ApiError::invalid("id", "is not a valid id"))?;
    Ok((kind, id))
}

/// `PUT /issues/{id}/participants/{kind}/{id}`: adds the participant or changes their role.
pub async fn put_participant(
    State(app): State<AppState>,
    caller: Caller,
    Path((issue_id, kind, id)): Path<(String, String, String)>,
    JsonBody(body): JsonBody<RoleBody>,
) -> ApiResult<Response> {
    let issue_id: IssueId = path_id(&issue_id)?;
    let (kind, id) = participant_path(&kind, &id)?;
    if kind == ParticipantKind::Team {
        let no_team = || ApiError::invalid("id", "is not a team of this tenant");
        let team_id = TeamId::parse(&id).ok_or_else(no_team)?;
        if app
            .store
            .records()
            .get_team(&caller.tenant, &team_id)
            .await?
            .is_none()
        {
            return Err(no_team());
        }
    }
    let participant = Participant {
        kind,
        id,
        role: body.role,
    };
    match app
        .store
        .records()
        .put_participant(
            &caller.tenant,
            &issue_id,
            &participant,
            (&now(), &caller.user),
        )
        .await?
    {
        ParticipantOutcome::Saved => current(&app, &caller.tenant, &issue_id).await,
        ParticipantOutcome::NotFound => Err(ApiError::NotFound(ISSUE)),
        ParticipantOutcome::Full => Err(ApiError::Conflict(format!(
            "the issue has {MAX_PARTICIPANTS} participants, the most it may have"
        ))),
        ParticipantOutcome::TooLarge => Err(IssueTooLarge.into()),
    }
}

/// `DELETE /issues/{id}/participants/{kind}/{id}`.
pub async fn delete_participant(
    State(app): State<AppState>,
    caller: Caller,
    Path((issue_id, kind, id)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let issue_id: IssueId = path_id(&issue_id)?;
    let Ok((kind, id)) = participant_path(&kind, &id) else {
        return Err(ApiError::NotFound("participant"));
    };
    if app
        .store
        .records()
        .delete_participant(
            &caller.tenant,
            &issue_id,
            kind,
            &id,
            (&now(), Some(&caller.user)),
        )
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("participant"))
    }
}
