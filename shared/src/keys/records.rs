//! Keys of the records table: projects and their fields, issues, people and teams.

use super::tenant_prefix;
use crate::domain::ParticipantKind;
use crate::domain::ids::{FieldId, IssueId, ProjectId, TeamId, TenantId, UserId};
use crate::encoding::text;

/// Sort key of a project's own item inside its collection; `#` sorts before the fields' `F#`.
pub const PROJECT_SK: &str = "#PROJECT";
/// Sort-key prefix of field definitions in a project's collection.
pub const FIELD_SK_PREFIX: &str = "F#";
/// Sort-key prefix of saved views in a project's collection (after the fields: `V` > `F`).
pub const VIEW_SK_PREFIX: &str = "V#";

/// Sort key of a saved view in its project's collection.
pub fn view_sk(view: &crate::domain::ids::ViewId) -> String {
    format!("{VIEW_SK_PREFIX}{}", view.own())
}
/// Sort key of an issue's item.
pub const ISSUE_SK: &str = "#ISSUE";
/// Sort key of an issue's long description, kept apart so summaries stay small.
pub const DESCRIPTION_SK: &str = "DESCRIPTION";
/// Sort-key prefix of an issue's relation edges (in its own partition, after its items:
/// `#` and `D` sort before `R`, so a read of the issue alone stops before them).
pub const RELATION_SK_PREFIX: &str = "R#";

/// Sort-key prefix of an issue's comments, in its partition after everything else (`~` sorts
/// after `#`, `D` and `R`), so a read of the issue and its relations stops before them.
pub const COMMENT_SK_PREFIX: &str = "~C#";

/// Sort keys of the two marks a deleted issue's delete leaves among its comments (when it has
/// any): the first and the last of the range (a ULID holds only `0-9A-Z`), so the first page
/// of its comments in either order, and the last, meets one and answers `404` while the
/// indexer deletes them; the marks go last.
pub const COMMENTS_GONE_SKS: [&str; 2] = [COMMENT_SK_PREFIX, "~C#~"];

/// The last sort key an issue's relation edges can have (ids never hold `~`).
pub const RELATION_SK_END: &str = "R#~";

/// Sort key of a comment in its issue's partition: oldest first, as its own part is a ULID.
pub fn comment_sk(comment: &crate::domain::ids::CommentId) -> String {
    format!("{COMMENT_SK_PREFIX}{}", comment.own())
}

/// The comment a [`comment_sk`] in `issue`'s partition names.
pub fn parse_comment_sk(issue: &IssueId, sk: &str) -> Option<crate::domain::ids::CommentId> {
    crate::domain::ids::CommentId::parse(&format!("{issue}{}", sk.strip_prefix(COMMENT_SK_PREFIX)?))
}

/// Sort key of the edge, in an issue's partition, to the issue it is related to.
pub fn relation_sk(other: &IssueId) -> String {
    format!("{RELATION_SK_PREFIX}{other}")
}

/// Partition of an issue's child edges (one item per sub-issue, sort key the child's id): the
/// tree's strongly consistent record of who is under whom, which a parent change walks.
pub fn children_pk(tenant: &TenantId, parent: &IssueId) -> String {
    format!("{}#I#{parent}#C", tenant_prefix(tenant))
}

/// Partition and sort key of a project's tree revision: every parent change in the project
/// moves it, conditioned on the revision its checks read, so parent changes apply one at a
/// time as their checks saw the tree.
pub fn tree_pk(tenant: &TenantId, project_id: &ProjectId) -> String {
    format!("{}#P#{project_id}#TREE", tenant_prefix(tenant))
}
pub const TREE_SK: &str = "#TREE";

/// The other issue of a [`relation_sk`].
pub fn parse_relation_sk(sk: &str) -> Option<IssueId> {
    IssueId::parse(sk.strip_prefix(RELATION_SK_PREFIX)?)
}

/// The `entity` attribute on every item, which stream filters and scans select by.
pub mod entity {
    pub const PROJECT: &str = "project";
    pub const FIELD: &str = "field";
    pub const VIEW: &str = "view";
    pub const ISSUE: &str = "issue";
    pub const DESCRIPTION: &str = "description";
    pub const IDEMPOTENCY: &str = "idempotency";
    pub const DIRECTORY: &str = "dir";
    pub const RELATION: &str = "relation";
    pub const CHILD: &str = "child";
    pub const TREE: &str = "tree";
    pub const COMMENT: &str = "comment";
    /// A deleted issue's mark among its comments (see `COMMENTS_GONE_SKS`).
    pub const COMMENTS_GONE: &str = "comments_gone";
}

/// Sort key of a remembered answer to a `POST` with an `Idempotency-Key`.
pub const IDEMPOTENCY_SK: &str = "#ANSWER";

/// Sort key of part `i` of a remembered answer too large for its item.
pub fn idempotency_part_sk(i: usize) -> String {
    format!("{IDEMPOTENCY_SK}#{i:02}")
}

/// Partition of a caller's `Idempotency-Key`: the key's digest (base64url, no `#`), as the
/// key itself may hold any printable character.
pub fn idempotency_pk(tenant: &TenantId, user: &UserId, key_digest: &str) -> String {
    format!("{}#IK#{user}#{key_digest}", tenant_prefix(tenant))
}

/// Partition of a project and its field definitions (one Query reads both).
pub fn project_pk(tenant: &TenantId, project_id: &ProjectId) -> String {
    format!("{}#P#{project_id}", tenant_prefix(tenant))
}

/// Past the last field definition's sort key in a project's collection (views' `V#` sort
/// after it): a Query of the project and its fields ends here.
pub fn fields_sk_end() -> String {
    format!("{FIELD_SK_PREFIX}{}", crate::encoding::text::TOP)
}

pub fn field_sk(field_id: &FieldId) -> String {
    format!("{FIELD_SK_PREFIX}{field_id}")
}

/// GSI1 partition listing a tenant's projects by name.
pub fn projects_gsi1_pk(tenant: &TenantId) -> String {
    format!("{}#PROJECTS", tenant_prefix(tenant))
}

/// GSI1 sort key of a project: case-insensitive name order, then the id for uniqueness.
pub fn project_gsi1_sk(name: &str, project_id: &ProjectId) -> String {
    format!("{}{}{project_id}", text::encode(name), text::SEP)
}

/// Partition of an issue: its issue item and its description.
pub fn issue_pk(tenant: &TenantId, issue_id: &IssueId) -> String {
    format!("{}#I#{issue_id}", tenant_prefix(tenant))
}

/// GSI1 partition listing a project's issues by number.
pub fn issues_by_num_gsi1_pk(tenant: &TenantId, project_id: &ProjectId) -> String {
    format!("{}#P#{project_id}#ISSUES", tenant_prefix(tenant))
}

/// Issue numbers zero-padded so string order is numeric order.
pub fn num_sk(num: u64) -> String {
    format!("{num:020}")
}

/// An entry of an issue's participant edge set: `{kind}#{id}`. The role lives in the issue's
/// `roles` map under the same key, so adding, re-roling and removing need no read.
pub fn participant_edge(kind: ParticipantKind, id: &str) -> String {
    format!("{}#{id}", kind.as_str())
}

/// `(kind, id)` of a participant edge; `None` for an unknown kind.
pub fn parse_participant_edge(edge: &str) -> Option<(ParticipantKind, &str)> {
    let (kind, id) = edge.split_once('#')?;
    Some((ParticipantKind::parse(kind)?, id))
}

// --- People and teams -----------------------------------------------------------------------

/// Partition of a user: the profile and the user's team memberships.
pub fn user_pk(tenant: &TenantId, user_id: &UserId) -> String {
    format!("{}#U#{user_id}", tenant_prefix(tenant))
}

pub const PROFILE_SK: &str = "#PROFILE";

/// Partition of a team: the team and its members.
pub fn team_pk(tenant: &TenantId, team_id: &TeamId) -> String {
    format!("{}#TEAM#{team_id}", tenant_prefix(tenant))
}

pub const TEAM_SK: &str = "#TEAM";

/// `(tenant, team)` of a [`team_pk`].
pub fn parse_team_pk(pk: &str) -> Option<(TenantId, TeamId)> {
    let mut parts = pk.strip_prefix("T#")?.split('#');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(t), Some("TEAM"), Some(team), None) => {
            Some((TenantId::parse(t)?, TeamId::parse(team)?))
        }
        _ => None,
    }
}
/// Sort-key prefix of a team's members (in the team's partition).
pub const MEMBER_SK_PREFIX: &str = "M#";
/// Sort-key prefix of a user's teams (in the user's partition).
pub const USER_TEAM_SK_PREFIX: &str = "TM#";

pub fn member_sk(user_id: &UserId) -> String {
    format!("{MEMBER_SK_PREFIX}{user_id}")
}

pub fn user_team_sk(team_id: &TeamId) -> String {
    format!("{USER_TEAM_SK_PREFIX}{team_id}")
}

/// The user's membership counter (in the user's partition, outside `TM#`), which keeps a
/// user's teams under their cap in the membership transaction. Apart from the profile, which
/// `PUT /me` replaces whole.
pub const USER_TEAM_COUNT_SK: &str = "#TEAMS";

/// Partition of a tenant's directory: every display name (users' and teams'), one small item
/// each, so a page's names are one Query of a few KB.
pub fn directory_pk(tenant: &TenantId) -> String {
    format!("{}#DIR", tenant_prefix(tenant))
}

/// Sort key of a person's directory entry: their participant edge (`user#…`, `team#…`).
pub fn directory_sk(kind: ParticipantKind, id: &str) -> String {
    participant_edge(kind, id)
}

/// `(tenant, project)` of a [`project_pk`].
pub fn parse_project_pk(pk: &str) -> Option<(TenantId, ProjectId)> {
    let mut parts = pk.strip_prefix("T#")?.split('#');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(t), Some("P"), Some(p), None) => Some((TenantId::parse(t)?, ProjectId::parse(p)?)),
        _ => None,
    }
}

/// `(tenant, issue)` of an [`issue_pk`].
pub fn parse_issue_pk(pk: &str) -> Option<(TenantId, IssueId)> {
    let mut parts = pk.strip_prefix("T#")?.split('#');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(t), Some("I"), Some(i), None) => Some((TenantId::parse(t)?, IssueId::parse(i)?)),
        _ => None,
    }
}
