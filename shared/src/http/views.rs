//! Response bodies.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::domain::values::FieldDef;
use crate::domain::{Issue, IssueState, Participant, Project};

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

/// An issue as the API returns it.
#[derive(Serialize)]
pub struct IssueView {
    pub id: String,
    pub project_id: String,
    pub num: u64,
    pub title: String,
    pub state: IssueState,
    /// `None` in list views, which omit the description; `Some(None)` is an issue without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    pub fields: BTreeMap<String, Box<RawValue>>,
    pub participants: Vec<Participant>,
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
}

impl IssueView {
    /// Renders `issue`, keeping only values of fields the project still defines: a deleted
    /// field's values disappear from every read at once.
    pub fn new(issue: Issue, defs: &[FieldDef]) -> Self {
        let fields = issue
            .fields
            .iter()
            .filter(|(id, _)| defs.iter().any(|d| &d.id == *id))
            .map(|(id, v)| (id.clone(), v.to_json()))
            .collect();
        Self {
            id: issue.id,
            project_id: issue.project_id,
            num: issue.num,
            title: issue.title,
            state: issue.state,
            description: Some(issue.description),
            fields,
            participants: issue.participants,
            version: issue.version,
            created_at: issue.created_at,
            updated_at: issue.updated_at,
        }
    }

    /// The issue as list views show it: without its description.
    pub fn summary(issue: Issue, defs: &[FieldDef]) -> Self {
        Self {
            description: None,
            ..Self::new(issue, defs)
        }
    }
}
