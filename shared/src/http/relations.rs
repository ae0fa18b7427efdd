//! Relations between issues: `PUT` and `DELETE /issues/{id}/relations/{kind}/{other_id}`.
//! Both sides change in one transaction (`store::records::relations`); `GET /issues/{id}`
//! shows them (`issues::get`).

use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::error::{ApiError, ApiResult};
use super::extract::path_id;
use super::{AppState, now};
use crate::auth::Caller;
use crate::domain::ids::IssueId;
use crate::domain::relation::{MAX_RELATIONS, RelationKind};
use crate::store::records::relations::RelateOutcome;

const ISSUE: &str = "issue";

/// The path's issue, kind and other issue: an unknown kind or a relation of an issue to
/// itself is `400`; an id that names no issue is `404`.
fn relation_path(
    issue: &str,
    kind: &str,
    other: &str,
) -> ApiResult<(IssueId, RelationKind, IssueId)> {
    let kind = RelationKind::parse(kind).ok_or_else(|| {
        let kinds: Vec<&str> = RelationKind::ALL.iter().map(|k| k.as_str()).collect();
        ApiError::invalid("kind", format!("must be one of {}", kinds.join(", ")))
    })?;
    let issue: IssueId = path_id(issue)?;
    let other: IssueId = path_id(other)?;
    if issue == other {
        return Err(ApiError::invalid(
            "other_id",
            "an issue cannot be related to itself",
        ));
    }
    Ok((issue, kind, other))
}

/// `PUT /issues/{issue_id}/relations/{kind}/{other_id}` → `204`: the relation on this issue
/// and its inverse on the other, replacing another kind the pair had; a relation that is
/// already there changes nothing.
pub async fn put_relation(
    State(app): State<AppState>,
    caller: Caller,
    Path((issue, kind, other)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let (issue, kind, other) = relation_path(&issue, &kind, &other)?;
    match app
        .store
        .records()
        .relate(
            &caller.tenant,
            (&issue, kind, &other),
            (&now(), &caller.user),
        )
        .await?
    {
        RelateOutcome::Saved | RelateOutcome::Unchanged => Ok(StatusCode::NO_CONTENT),
        RelateOutcome::NotFound | RelateOutcome::OtherNotFound => Err(ApiError::NotFound(ISSUE)),
        RelateOutcome::Full => Err(ApiError::Conflict(format!(
            "an issue may have at most {MAX_RELATIONS} relations, and one of the two has them"
        ))),
        RelateOutcome::TooLarge => Err(ApiError::PayloadTooLarge(
            "one of the two issues is at DynamoDB's item size limit: its relations cannot grow"
                .into(),
        )),
    }
}

/// `DELETE /issues/{issue_id}/relations/{kind}/{other_id}` → `204` (both sides), `404` when
/// this issue has no relation of that kind to the other.
pub async fn delete_relation(
    State(app): State<AppState>,
    caller: Caller,
    Path((issue, kind, other)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let (issue, kind, other) = match relation_path(&issue, &kind, &other) {
        Err(ApiError::NotFound(_)) => return Err(ApiError::NotFound("relation")),
        found => found?,
    };
    if app
        .store
        .records()
        .unrelate(
            &caller.tenant,
            (&issue, kind, &other),
            (&now(), &caller.user),
        )
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("relation"))
    }
}
