//! Response bodies.

use crate::domain::ids::{FieldId, IssueId, ProjectId};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::value::RawValue;

use crate::domain::relation::RelationKind;
use crate::domain::values::FieldDef;
use crate::domain::{Issue, IssueState, Participant, ParticipantKind, Project};
use crate::store::records::relations::Relation;

/// `{"items": [...], "next_cursor": ...}`
#[derive(Serialize)]
pub struct List<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

#[derive(Serialize)]
pub struct ProjectWithFields {
    #[serde(flatten)]
    pub project: Project,
    pub fields: Vec<FieldDef>,
}

/// Display names of participants, looked up when a list is read.
pub type Names = HashMap<(ParticipantKind, String), String>;

#[derive(Serialize)]
pub struct ParticipantView {
    #[serde(flatten)]
    pub participant: Participant,
    /// In list views: a user's profile name or a team's name; absent when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// An issue as the API returns it.
#[derive(Serialize)]
pub struct IssueView {
    pub id: IssueId,
    pub project_id: ProjectId,
    pub num: u64,
    pub title: String,
    pub state: IssueState,
    /// `None` in list views, which omit the description; `Some(None)` is an issue without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    pub fields: BTreeMap<FieldId, Box<RawValue>>,
    pub participants: Vec<ParticipantView>,
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
    /// The issue it is a sub-issue of, or `null`.
    pub parent_id: Option<IssueId>,
    /// On `GET /issues/{id}` only: its direct children by state, as of the index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_issues: Option<SubIssues>,
    /// On `GET /issues/{id}` only: its relations, with the other issues as they are now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relations: Option<Vec<RelationView>>,
    /// On `GET /issues/{id}` only: how many comments it has, exact at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment_count: Option<u64>,
}

/// An issue's direct children by state.
#[derive(Serialize, Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubIssues {
    pub open: u64,
    pub closed: u64,
}

/// One of an issue's relations as `GET /issues/{id}` shows it.
#[derive(Serialize)]
pub struct RelationView {
    pub kind: RelationKind,
    pub issue: RelatedIssue,
}

/// The other issue of a relation: who it is and where it stands.
#[derive(Serialize)]
pub struct RelatedIssue {
    pub id: IssueId,
    pub project_id: ProjectId,
    pub num: u64,
    pub title: String,
    pub state: IssueState,
}

impl RelationView {
    /// `relations` with the other issues as read (`others`), in the contract's order: by
    /// kind, then the other issue's project and number. A relation whose other issue is gone
    /// (deleted, its clean-up under way) is left out.
    pub fn ordered(relations: Vec<Relation>, others: Vec<Issue>) -> Vec<Self> {
        let mut by_id: HashMap<IssueId, Issue> =
            others.into_iter().map(|i| (i.id.clone(), i)).collect();
        let mut views: Vec<Self> = relations
            .into_iter()
            .filter_map(|r| {
                let other = by_id.remove(&r.other)?;
                Some(RelationView {
                    kind: r.kind,
                    issue: RelatedIssue {
                        id: other.id,
                        project_id: other.project_id,
                        num: other.num,
                        title: other.title,
                        state: other.state,
                    },
                })
            })
            .collect();
        views.sort_by(|x, y| {
            (x.kind, &x.issue.project_id, x.issue.num).cmp(&(
                y.kind,
                &y.issue.project_id,
                y.issue.num,
            ))
        });
        views
    }
}

/// Every participant of these issues, for one names lookup per page.
pub fn participants_of<'a>(
    issues: impl IntoIterator<Item = &'a Issue>,
) -> BTreeSet<(ParticipantKind, String)> {
    issues
        .into_iter()
        .flat_map(|i| i.participants.iter().map(|p| (p.kind, p.id.to_string())))
        .collect()
}

impl IssueView {
    /// Renders `issue`. With `defs`, keeps only values of fields the project still defines (a
    /// deleted field's values disappear from every read at once); with `names`, it is a list
    /// view: no description, participants with their display names.
    fn build(issue: Issue, defs: Option<&[FieldDef]>, names: Option<&Names>) -> Self {
        let fields = issue
            .fields
            .iter()
            .filter(|(id, _)| defs.is_none_or(|d| d.iter().any(|d| &d.id == *id)))
            .map(|(id, v)| (id.clone(), v.to_json()))
            .collect();
        let participants = issue
            .participants
            .into_iter()
            .map(|p| ParticipantView {
                display_name: names.and_then(|n| n.get(&(p.kind, p.id.to_string())).cloned()),
                participant: p,
            })
            .collect();
        Self {
            id: issue.id,
            project_id: issue.project_id,
            num: issue.num,
            title: issue.title,
            state: issue.state,
            description: names.is_none().then_some(issue.description),
            fields,
            participants,
            version: issue.version,
            created_at: issue.created_at,
            updated_at: issue.updated_at,
            parent_id: issue.parent_id,
            sub_issues: None,
            relations: None,
            comment_count: None,
        }
    }

    /// The whole issue.
    pub fn new(issue: Issue, defs: &[FieldDef]) -> Self {
        Self::build(issue, Some(defs), None)
    }

    /// The issue as the grid shows it: without its description, with names.
    pub fn list_item(issue: Issue, defs: &[FieldDef], names: &Names) -> Self {
        Self::build(issue, Some(defs), Some(names))
    }

    /// The issue as an inbox shows it. Inboxes span projects, so values of a just-deleted
    /// field may show until the indexer has removed them from the issue (seconds).
    pub fn inbox_summary(issue: Issue, names: &Names) -> Self {
        Self::build(issue, None, Some(names))
    }
}

/// An inbox item: the summary and the participant entries that put it in this list.
#[derive(Serialize)]
pub struct InboxItem {
    #[serde(flatten)]
    pub issue: IssueView,
    pub via: Vec<Participant>,
}
