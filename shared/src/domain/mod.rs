//! Domain types and request validation. No AWS types here.

pub mod decimal;
pub mod email;
pub mod ids;
pub mod options_edit;
pub mod relation;
pub mod role;
pub mod text;
pub mod validation;
pub mod values;

pub use validation::{FieldError, IssueTooLarge, ValidationError};

use crate::domain::ids::{FieldId, IssueId, ParticipantId, ProjectId, UserId};
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use values::{FieldDef, StoredValue, parse_value};

/// Most custom fields a project may have.
pub const MAX_FIELDS_PER_PROJECT: usize = 400;
/// Largest item DynamoDB stores (400 KB), measured as it measures items (attribute names and
/// values): an issue whose issue item would pass it is `413`.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// Most participants an issue may have: it bounds the item, the indexer's copies and the names
/// a page looks up.
pub const MAX_PARTICIPANTS: usize = 100;
/// Most bytes of field definitions (names and option labels, UTF-8) per project: every grid
/// page, issue read and patch reads them all.
pub const MAX_FIELD_DEF_BYTES: usize = 64 * 1024;
/// Most teams a user belongs to: `/me/teams/issues` queries each of them.
pub const MAX_TEAMS_PER_USER: usize = 50;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Project {
    pub id: ProjectId,
    pub name: String,
    pub created_at: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IssueState {
    Open,
    Closed,
}

impl IssueState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(Self::Open),
            "closed" => Some(Self::Closed),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParticipantKind {
    User,
    Team,
}

impl ParticipantKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Team => "team",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(Self::User),
            "team" => Some(Self::Team),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Assignee,
    Reporter,
    Watcher,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Assignee => "assignee",
            Self::Reporter => "reporter",
            Self::Watcher => "watcher",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "assignee" => Some(Self::Assignee),
            "reporter" => Some(Self::Reporter),
            "watcher" => Some(Self::Watcher),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Participant {
    pub kind: ParticipantKind,
    pub id: ParticipantId,
    pub role: Role,
}

/// A participant as a request body lists it: its id is checked against its kind's rule by
/// the body's validation, which names the member that failed.
// Named as the type was before bodies and issues had types of their own: serde names it in
// the `400`s a malformed member gets.
#[derive(Clone, Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename = "Participant",
    expecting = "struct Participant"
)]
pub struct ParticipantBody {
    pub kind: ParticipantKind,
    pub id: String,
    pub role: Role,
}

/// An issue as stored: the issue item plus, when read whole, its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    pub id: IssueId,
    pub project_id: ProjectId,
    pub num: u64,
    pub title: String,
    pub state: IssueState,
    pub description: Option<String>,
    pub fields: BTreeMap<FieldId, StoredValue>,
    pub participants: Vec<Participant>,
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
    /// The issue it is a sub-issue of (same project), if any.
    pub parent_id: Option<IssueId>,
}

/// `POST /projects` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewProjectBody {
    pub name: String,
}

impl NewProjectBody {
    pub fn validate(&self) -> Result<(), ValidationError> {
        text::check_text(&self.name, 1, 256).map_err(|m| ValidationError::one("name", m))
    }
}

/// `POST /projects/{id}/fields` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewFieldBody {
    pub name: String,
    #[serde(rename = "type")]
    pub field_type: values::FieldType,
    #[serde(default)]
    pub options: Option<Vec<String>>,
}

impl NewFieldBody {
    pub fn into_def(self, id: FieldId) -> Result<FieldDef, ValidationError> {
        let errors = values::check_field_def(&self.name, self.field_type, self.options.as_deref());
        ValidationError::check(
            errors
                .into_iter()
                .map(|(f, m)| FieldError::new(f, m))
                .collect(),
        )?;
        Ok(FieldDef {
            id,
            name: self.name,
            field_type: self.field_type,
            options: self.options,
            // The store decides, when it creates the field.
            sortable: false,
        })
    }
}

/// `POST /projects/{id}/issues` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewIssueBody {
    pub title: String,
    #[serde(default)]
    pub state: Option<IssueState>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub fields: Option<BTreeMap<String, Box<RawValue>>>,
    #[serde(default)]
    pub participants: Option<Vec<ParticipantBody>>,
    #[serde(default)]
    pub parent_id: Option<String>,
}

/// A create request that passed validation.
#[derive(Debug, Clone)]
pub struct NewIssue {
    pub title: String,
    pub state: IssueState,
    pub description: Option<String>,
    pub fields: BTreeMap<FieldId, StoredValue>,
    pub participants: Vec<Participant>,
    /// Checked against the tree by the store (`store::records::tree`).
    pub parent_id: Option<IssueId>,
}

impl NewIssueBody {
    /// Validates against the project's field definitions; `caller` becomes a `reporter`
    /// unless the body lists them already.
    pub fn validate(self, defs: &[FieldDef], caller: &UserId) -> Result<NewIssue, ValidationError> {
        let mut errors = Vec::new();
        check_title(&self.title, &mut errors);
        if let Some(d) = &self.description {
            check_description(d, &mut errors);
        }
        let mut fields = BTreeMap::new();
        for (id, raw) in self.fields.unwrap_or_default() {
            if raw.get().trim() == "null" {
                continue; // Nothing to set: null means "no value".
            }
            match parse_field(defs, &id, &raw) {
                Ok((id, v)) => {
                    fields.insert(id, v);
                }
                Err(e) => errors.push(e),
            }
        }
        let listed = self.participants.unwrap_or_default();
        let (mut participants, caller_listed) = check_participants(&listed, caller, &mut errors);
        let parent_id = self
            .parent_id
            .as_deref()
            .and_then(|p| parse_parent(p, &mut errors));
        ValidationError::check(errors)?;
        if !caller_listed {
            participants.push(Participant {
                kind: ParticipantKind::User,
                id: ParticipantId::from(caller.clone()),
                role: Role::Reporter,
            });
        }
        participants.sort();
        // The size check needs the stored item: the store makes it (`413` from there).
        Ok(NewIssue {
            title: self.title,
            state: self.state.unwrap_or(IssueState::Open),
            description: self.description.filter(|d| !d.is_empty()),
            fields,
            participants,
            parent_id,
        })
    }
}

/// A `parent_id` as an issue id; one that cannot be an issue's names no issue of the project.
fn parse_parent(raw: &str, errors: &mut Vec<FieldError>) -> Option<IssueId> {
    let id = IssueId::parse(raw);
    if id.is_none() {
        errors.push(FieldError::new("parent_id", NO_SUCH_PARENT));
    }
    id
}

/// The `parent_id` error of an id that names no issue of the project.
pub const NO_SUCH_PARENT: &str = "is not an issue of this project";

/// `PATCH /issues/{id}` body: a JSON merge patch. `Some(None)` is an explicit `null`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuePatchBody {
    #[serde(default, deserialize_with = "explicit_null")]
    pub title: Option<Option<String>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub state: Option<Option<IssueState>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub description: Option<Option<String>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub fields: Option<Option<BTreeMap<String, Box<RawValue>>>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub parent_id: Option<Option<String>>,
}

/// Distinguishes a member set to `null` (`Some(None)`) from one that is absent (`None`).
pub(crate) fn explicit_null<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A patch that passed validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssuePatch {
    pub title: Option<String>,
    pub state: Option<IssueState>,
    /// `Some(None)` removes the description.
    pub description: Option<Option<String>>,
    /// `fields: null`: every value is removed before `set_fields` apply.
    pub clear_fields: bool,
    pub set_fields: BTreeMap<FieldId, StoredValue>,
    pub remove_fields: BTreeSet<FieldId>,
    /// The project's field ids the patch was validated against. A write of the whole `fields`
    /// map (a patch too large for per-key updates) keeps only these, so a value of a field
    /// deleted since — which the indexer may already have removed — is not written back.
    pub project_fields: Option<BTreeSet<FieldId>>,
    /// `Some(None)` detaches the issue from its parent.
    pub parent: Option<Option<IssueId>>,
}

impl IssuePatch {
    /// The patch without what would leave `current` as it is (a title it has, a value it
    /// holds, a field it lacks), so a request that changes nothing makes no new version (and
    /// no history entry of no changes).
    pub fn without_noops(mut self, current: &Issue) -> Self {
        if self.title.as_ref() == Some(&current.title) {
            self.title = None;
        }
        if self.state == Some(current.state) {
            self.state = None;
        }
        if self.description.as_ref() == Some(&current.description) {
            self.description = None;
        }
        if self.parent.as_ref() == Some(&current.parent_id) {
            self.parent = None;
        }
        if self.clear_fields {
            // Everything replaced: a no-op only when the result is what the issue holds.
            if self.set_fields == current.fields {
                self.clear_fields = false;
                self.set_fields.clear();
                self.remove_fields.clear();
            }
        } else {
            self.set_fields
                .retain(|id, v| current.fields.get(id) != Some(&*v));
            self.remove_fields
                .retain(|id| current.fields.contains_key(id));
        }
        self
    }

    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.parent.is_none()
            && self.title.is_none()
            && self.state.is_none()
            && self.description.is_none()
            && !self.clear_fields
            && self.set_fields.is_empty()
            && self.remove_fields.is_empty()
    }
}

impl IssuePatchBody {
    pub fn validate(self, defs: &[FieldDef]) -> Result<IssuePatch, ValidationError> {
        let mut errors = Vec::new();
        let mut patch = IssuePatch {
            project_fields: Some(defs.iter().map(|d| d.id.clone()).collect()),
            ..IssuePatch::default()
        };
        match self.title {
            Some(None) => errors.push(FieldError::new("title", "cannot be removed")),
            Some(Some(t)) => {
                check_title(&t, &mut errors);
                patch.title = Some(t);
            }
            None => {}
        }
        match self.state {
            Some(None) => errors.push(FieldError::new("state", "cannot be removed")),
            Some(Some(s)) => patch.state = Some(s),
            None => {}
        }
        patch.description = self.description.map(|d| d.filter(|d| !d.is_empty()));
        if let Some(Some(d)) = &patch.description {
            check_description(d, &mut errors);
        }
        match self.fields {
            Some(None) => patch.clear_fields = true,
            Some(Some(map)) => {
                for (id, raw) in map {
                    if raw.get().trim() == "null" {
                        match defs.iter().find(|d| d.id == id) {
                            Some(def) => {
                                patch.remove_fields.insert(def.id.clone());
                            }
                            None => errors.push(unknown_field(&id)),
                        }
                        continue;
                    }
                    match parse_field(defs, &id, &raw) {
                        Ok((id, v)) => {
                            patch.set_fields.insert(id, v);
                        }
                        Err(e) => errors.push(e),
                    }
                }
            }
            None => {}
        }
        patch.parent = self
            .parent_id
            .map(|p| p.and_then(|raw| parse_parent(&raw, &mut errors)));
        ValidationError::check(errors)?;
        Ok(patch)
    }
}

/// Checks a create's participants (valid ids, none twice, at most [`MAX_PARTICIPANTS`] with
/// the caller), with an error per member that fails: the listed participants, typed, and
/// whether the caller is among them (otherwise they join as reporter).
fn check_participants(
    participants: &[ParticipantBody],
    caller: &UserId,
    errors: &mut Vec<FieldError>,
) -> (Vec<Participant>, bool) {
    let mut seen = BTreeSet::new();
    let mut typed = Vec::with_capacity(participants.len());
    for (i, p) in participants.iter().enumerate() {
        match check_participant_id(p.kind, &p.id).and_then(|()| {
            ParticipantId::parse(&p.id).ok_or_else(|| "is not a valid id".to_string())
        }) {
            Ok(id) => typed.push(Participant {
                kind: p.kind,
                id,
                role: p.role,
            }),
            Err(m) => errors.push(FieldError::new(format!("participants[{i}].id"), m)),
        }
        if !seen.insert((p.kind, p.id.as_str())) {
            errors.push(FieldError::new(
                format!("participants[{i}]"),
                "lists a participant twice",
            ));
        }
    }
    let listed = seen.contains(&(ParticipantKind::User, caller.as_str()));
    // The caller joins as reporter unless listed, so they count too.
    if seen.len() + usize::from(!listed) > MAX_PARTICIPANTS {
        errors.push(FieldError::new(
            "participants",
            format!("an issue has at most {MAX_PARTICIPANTS} participants, the caller included"),
        ));
    }
    (typed, listed)
}

fn check_title(t: &str, errors: &mut Vec<FieldError>) {
    if let Err(m) = text::check_text(t, 1, text::MAX_TITLE_CHARS) {
        errors.push(FieldError::new("title", m));
    }
}

fn check_description(d: &str, errors: &mut Vec<FieldError>) {
    if let Err(m) = text::check_prose(d, text::MAX_DESCRIPTION_CHARS) {
        errors.push(FieldError::new("description", m));
    }
}

fn unknown_field(id: &str) -> FieldError {
    FieldError::new(format!("fields.{id}"), "is not a field of this project")
}

/// A value for the field `id` names, keyed by the field's own id.
fn parse_field(
    defs: &[FieldDef],
    id: &str,
    raw: &RawValue,
) -> Result<(FieldId, StoredValue), FieldError> {
    let def = defs
        .iter()
        .find(|d| d.id == id)
        .ok_or_else(|| unknown_field(id))?;
    let value = parse_value(def, raw).map_err(|m| FieldError::new(format!("fields.{id}"), m))?;
    Ok((def.id.clone(), value))
}

pub fn check_participant_id(kind: ParticipantKind, id: &str) -> Result<(), String> {
    let ok = match kind {
        ParticipantKind::User => ids::is_user_id(id),
        ParticipantKind::Team => ids::is_server_id(id),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("is not a valid {} id", kind.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use values::FieldType;

    fn alice() -> UserId {
        UserId::parse("alice").unwrap()
    }

    fn defs() -> Vec<FieldDef> {
        vec![FieldDef {
            id: FieldId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap(),
            name: "points".into(),
            field_type: FieldType::Number,
            options: None,
            sortable: true,
        }]
    }

    #[test]
    fn creator_becomes_reporter_unless_listed() {
        let body: NewIssueBody = serde_json::from_str(r#"{"title":"t"}"#).unwrap();
        let issue = body.validate(&defs(), &alice()).unwrap();
        assert_eq!(issue.participants[0].role, Role::Reporter);
        let body: NewIssueBody = serde_json::from_str(
            r#"{"title":"t","participants":[{"kind":"user","id":"alice","role":"assignee"}]}"#,
        )
        .unwrap();
        let issue = body.validate(&defs(), &alice()).unwrap();
        assert_eq!(issue.participants.len(), 1);
        assert_eq!(issue.participants[0].role, Role::Assignee);
    }

    #[test]
    fn patch_distinguishes_null_from_absent() {
        let body: IssuePatchBody = serde_json::from_str(
            r#"{"description":null,"fields":{"01ARZ3NDEKTSV4RRFFQ69G5FAV":null}}"#,
        )
        .unwrap();
        let patch = body.validate(&defs()).unwrap();
        assert_eq!(patch.description, Some(None));
        assert!(patch.remove_fields.contains("01ARZ3NDEKTSV4RRFFQ69G5FAV"));
        assert!(patch.title.is_none());
        let body: IssuePatchBody = serde_json::from_str(r#"{"title":null}"#).unwrap();
        assert!(body.validate(&defs()).is_err());
    }

    #[test]
    fn a_malformed_participant_is_named_as_the_contract_names_it() {
        let e = serde_json::from_str::<NewIssueBody>(r#"{"title":"t","participants":["alice"]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected struct Participant") && !e.contains("ParticipantBody"),
            "{e}"
        );
    }

    #[test]
    fn fields_outside_the_project_are_rejected() {
        let body: NewIssueBody =
            serde_json::from_str(r#"{"title":"t","fields":{"nope":1}}"#).unwrap();
        assert!(body.validate(&defs(), &alice()).is_err());
    }
}
