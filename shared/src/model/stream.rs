//! What a records-table stream record is about, read from its keys with the parsers of
//! `crate::keys`: the one classifier the indexer (Lambda's stream events) and `gridctl replay`
//! (records read back from the stream) share.

use crate::domain::ids::{FieldId, IssueId, ProjectId, TeamId, TenantId};
use crate::keys;

/// The kind of a stream record (`eventName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Modify,
    Remove,
}

impl Op {
    /// `INSERT`, `MODIFY` or `REMOVE`; `None` for anything else.
    pub fn parse(event_name: &str) -> Option<Self> {
        match event_name {
            "INSERT" => Some(Self::Insert),
            "MODIFY" => Some(Self::Modify),
            "REMOVE" => Some(Self::Remove),
            _ => None,
        }
    }
}

/// What a record's item is, by its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// An issue's item: what its index entries are computed from.
    Issue { tenant: TenantId, issue_id: IssueId },
    /// Another item of an issue's partition (its description): no entry depends on it.
    IssueDetail { tenant: TenantId, issue_id: IssueId },
    /// A field definition of a project: its issues gain or lose the field's entries.
    Field {
        tenant: TenantId,
        project_id: ProjectId,
        field_id: FieldId,
    },
    /// A project's own item: its hot columns may have grown.
    Project {
        tenant: TenantId,
        project_id: ProjectId,
    },
    /// A team's own item: when it is removed, the team leaves every issue and membership.
    Team { tenant: TenantId, team_id: TeamId },
    /// Anything else (people, memberships): not the index's business.
    Ignored,
}

/// Why a record's keys cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("no PK")]
    NoPk,
    #[error("no SK")]
    NoSk,
    #[error("PK has no tenant")]
    NoTenant,
    #[error("issue PK")]
    IssuePk,
    #[error("project PK")]
    ProjectPk,
    #[error("field SK")]
    FieldSk,
}

/// Classifies a record by its keys (`None` when the record has no such key).
pub fn classify(pk: Option<&str>, sk: Option<&str>) -> Result<Change, Unreadable> {
    let pk = pk.ok_or(Unreadable::NoPk)?;
    let sk = sk.ok_or(Unreadable::NoSk)?;
    // A person's workspaces and invitations: no tenant's, and nothing the index holds (the
    // stream's filter passes none of them in AWS).
    if keys::workspaces::is_global(pk) {
        return Ok(Change::Ignored);
    }
    keys::tenant_of(pk).ok_or(Unreadable::NoTenant)?;
    if sk == keys::records::ISSUE_SK {
        let (tenant, issue_id) = keys::records::parse_issue_pk(pk).ok_or(Unreadable::IssuePk)?;
        return Ok(Change::Issue { tenant, issue_id });
    }
    if let Some(field_id) = sk.strip_prefix(keys::records::FIELD_SK_PREFIX) {
        let (tenant, project_id) =
            keys::records::parse_project_pk(pk).ok_or(Unreadable::ProjectPk)?;
        return Ok(Change::Field {
            tenant,
            project_id,
            field_id: FieldId::parse(field_id).ok_or(Unreadable::FieldSk)?,
        });
    }
    if let Some((tenant, issue_id)) = keys::records::parse_issue_pk(pk) {
        return Ok(Change::IssueDetail { tenant, issue_id });
    }
    if sk == keys::records::PROJECT_SK
        && let Some((tenant, project_id)) = keys::records::parse_project_pk(pk)
    {
        return Ok(Change::Project { tenant, project_id });
    }
    if sk == keys::records::TEAM_SK
        && let Some((tenant, team_id)) = keys::records::parse_team_pk(pk)
    {
        return Ok(Change::Team { tenant, team_id });
    }
    Ok(Change::Ignored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::records::*;

    #[test]
    fn records_are_classified_by_their_keys() {
        let acme = TenantId::parse("acme").unwrap();
        let (i1, p1, f1) = (
            IssueId::numbered(1),
            ProjectId::numbered(2),
            FieldId::numbered(3),
        );
        let issue = issue_pk(&acme, &i1);
        let project = project_pk(&acme, &p1);
        let field = field_sk(&f1);
        let in_issue = |sk| classify(Some(&issue), Some(sk));
        assert_eq!(
            in_issue(ISSUE_SK),
            Ok(Change::Issue {
                tenant: acme.clone(),
                issue_id: i1.clone()
            })
        );
        assert_eq!(
            in_issue(DESCRIPTION_SK),
            Ok(Change::IssueDetail {
                tenant: acme.clone(),
                issue_id: i1.clone()
            })
        );
        assert_eq!(
            classify(Some(&project), Some(&field)),
            Ok(Change::Field {
                tenant: acme.clone(),
                project_id: p1,
                field_id: f1
            })
        );
        assert_eq!(
            classify(Some(&project), Some(PROJECT_SK)),
            Ok(Change::Project {
                tenant: acme.clone(),
                project_id: ProjectId::numbered(2)
            })
        );
        let user = user_pk(&acme, &crate::domain::ids::UserId::parse("ann").unwrap());
        assert_eq!(classify(Some(&user), Some(PROFILE_SK)), Ok(Change::Ignored));
        assert_eq!(classify(None, Some(ISSUE_SK)), Err(Unreadable::NoPk));
        assert_eq!(
            classify(Some("G#U#ana"), Some("#CHOICE")),
            Ok(Change::Ignored),
            "a person's global items are not the index's"
        );
        assert_eq!(classify(Some(&issue), None), Err(Unreadable::NoSk));
        assert_eq!(
            classify(Some("#WARM-UP"), Some(ISSUE_SK)),
            Err(Unreadable::NoTenant)
        );
        assert_eq!(
            classify(Some(&project), Some(ISSUE_SK)),
            Err(Unreadable::IssuePk)
        );
        assert_eq!(
            classify(Some(&issue), Some(&field)),
            Err(Unreadable::ProjectPk)
        );
        assert_eq!(
            classify(Some(&project), Some("F#not-an-id")),
            Err(Unreadable::FieldSk)
        );
        // An issue key whose id is no issue id names no issue.
        assert_eq!(
            classify(Some("T#acme#I#x"), Some(ISSUE_SK)),
            Err(Unreadable::IssuePk)
        );
    }

    #[test]
    fn event_names_parse() {
        assert_eq!(Op::parse("INSERT"), Some(Op::Insert));
        assert_eq!(Op::parse("MODIFY"), Some(Op::Modify));
        assert_eq!(Op::parse("REMOVE"), Some(Op::Remove));
        assert_eq!(Op::parse("remove"), None);
    }
}
