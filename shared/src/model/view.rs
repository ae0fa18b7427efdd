//! Saved views: a named filter and sort (and optionally a grouping) of a project's issues,
//! whose list the index keeps. This module holds what a request says about a view and how
//! it is checked against the project's fields; what the index makes of it lives with the
//! indexer.
//!
//! A view's *shape* ([`ViewSpec::shape`]) is everything its list derives from: its filter as
//! interpreted, sort, order, state and grouping. A change of shape rebuilds the list and ends
//! the view's cursors; a rename does neither.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::domain::text::check_text;
use crate::domain::values::{FieldDef, FieldType};
use crate::domain::{FieldError, IssueState, explicit_null};
use crate::keys;
use crate::model::Column;
use crate::model::filter::Filter;
use crate::model::filter::{parse_order, parse_state};
use crate::model::record::{IssueRecord, ValueRef};

/// Most views a project has (the 51st is `409`).
pub const MAX_VIEWS_PER_PROJECT: usize = 50;
/// Longest view name, in characters.
pub const MAX_VIEW_NAME_CHARS: usize = 256;
/// Longest `where` a view keeps, in bytes of its JSON as given: ten conditions of long
/// texts or `in` lists fit, and the view's item stays small (the indexer reads every view of
/// a project with its definitions).
pub const MAX_VIEW_WHERE_BYTES: usize = 16 * 1024;

/// `POST /projects/{id}/views` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewViewBody {
    pub name: String,
    #[serde(default, rename = "where")]
    pub filter: Option<Box<RawValue>>,
    #[serde(default)]
    pub sort: Option<String>,
    #[serde(default)]
    pub order: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub group_by: Option<String>,
}

/// `PATCH /views/{id}` body: any member of the create body; `null` returns a member to its
/// default (`Some(None)`), an absent one is left as it is (`None`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewPatchBody {
    #[serde(default, deserialize_with = "explicit_null")]
    pub name: Option<Option<String>>,
    #[serde(default, rename = "where", deserialize_with = "explicit_null")]
    pub filter: Option<Option<Box<RawValue>>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub sort: Option<Option<String>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub order: Option<Option<String>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub state: Option<Option<String>>,
    #[serde(default, deserialize_with = "explicit_null")]
    pub group_by: Option<Option<String>>,
}

/// A view's definition as stored: its members with their defaults applied. `filter` is the
/// `where` array as given (compact JSON), so a view shows what its author wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewSpec {
    pub name: String,
    /// The `where` array (`[]`: no conditions).
    pub filter: String,
    pub sort: String,
    pub descending: bool,
    pub state: Option<IssueState>,
    pub group_by: Option<String>,
}

/// What a view groups its issues by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grouping {
    State,
    /// A `select` field: one group per option, in option order, then issues without a value.
    Field(FieldDef),
}

/// A view checked against its project's fields: its filter parsed, its sort column and its
/// grouping resolved.
#[derive(Debug, Clone)]
pub struct CheckedView {
    pub filter: Filter,
    pub sort: Column,
    pub grouping: Option<Grouping>,
}

impl NewViewBody {
    /// The definition the body asks for, checked against the project's fields.
    pub fn spec(&self, defs: &[FieldDef]) -> Result<(ViewSpec, CheckedView), Vec<FieldError>> {
        let mut errors = Vec::new();
        let descending = parse_order(self.order.as_deref(), &mut errors);
        let state = parse_state(self.state.as_deref(), &mut errors);
        let spec = ViewSpec {
            name: self.name.clone(),
            filter: self
                .filter
                .as_ref()
                .map_or_else(|| "[]".to_string(), |raw| compact(raw.get())),
            sort: self.sort.clone().unwrap_or_else(|| "num".into()),
            descending,
            state,
            group_by: self.group_by.clone(),
        };
        match spec.check(defs) {
            Ok(checked) if errors.is_empty() => Ok((spec, checked)),
            Ok(_) => Err(errors),
            Err(more) => {
                errors.extend(more);
                Err(errors)
            }
        }
    }
}

impl ViewPatchBody {
    /// The definition `current` becomes, checked against the project's fields.
    pub fn apply(
        &self,
        current: &ViewSpec,
        defs: &[FieldDef],
    ) -> Result<(ViewSpec, CheckedView), Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut next = current.clone();
        match &self.name {
            None => {}
            Some(Some(name)) => next.name = name.clone(),
            Some(None) => errors.push(FieldError::new("name", "cannot be null")),
        }
        if let Some(filter) = &self.filter {
            next.filter = filter
                .as_ref()
                .map_or_else(|| "[]".to_string(), |raw| compact(raw.get()));
        }
        if let Some(sort) = &self.sort {
            next.sort = sort.clone().unwrap_or_else(|| "num".into());
        }
        if let Some(order) = &self.order {
            next.descending = parse_order(order.as_deref(), &mut errors);
        }
        if let Some(state) = &self.state {
            next.state = parse_state(state.as_deref(), &mut errors);
        }
        if let Some(group_by) = &self.group_by {
            next.group_by = group_by.clone();
        }
        match next.check(defs) {
            Ok(checked) if errors.is_empty() => Ok((next, checked)),
            Ok(_) => Err(errors),
            Err(more) => {
                errors.extend(more);
                Err(errors)
            }
        }
    }
}

impl ViewSpec {
    /// Checks the definition against the project's fields: a name of 1–256 characters, a
    /// `where` the grid would take, a column to sort by, and a grouping by `state` or a
    /// `select` field.
    pub fn check(&self, defs: &[FieldDef]) -> Result<CheckedView, Vec<FieldError>> {
        let mut errors = Vec::new();
        if let Err(m) = check_text(&self.name, 1, MAX_VIEW_NAME_CHARS) {
            errors.push(FieldError::new("name", m));
        }
        if self.filter.len() > MAX_VIEW_WHERE_BYTES {
            errors.push(FieldError::new(
                "where",
                format!("must be at most {MAX_VIEW_WHERE_BYTES} bytes of JSON"),
            ));
            return Err(errors);
        }
        let filter = Filter::parse(&self.filter, defs).unwrap_or_else(|more| {
            errors.extend(more);
            Filter::default()
        });
        let sort = Column::parse(&self.sort);
        if sort.kind(defs).is_none() {
            errors.push(FieldError::new(
                "sort",
                "must be num, title, state, created_at, updated_at or a field of this project",
            ));
        }
        let grouping = match self.group_by.as_deref() {
            None => None,
            Some("state") => Some(Grouping::State),
            Some(id) => match defs.iter().find(|d| d.id.as_str() == id) {
                Some(def) if def.field_type == FieldType::Select => {
                    Some(Grouping::Field(def.clone()))
                }
                _ => {
                    errors.push(FieldError::new(
                        "group_by",
                        "must be state or a select field of this project",
                    ));
                    None
                }
            },
        };
        if errors.is_empty() {
            Ok(CheckedView {
                filter,
                sort,
                grouping,
            })
        } else {
            Err(errors)
        }
    }

    /// Everything the view's list derives from, as interpreted (its filter's canonical form,
    /// defaults applied): a change of shape rebuilds the list, and a cursor of the view is
    /// bound to it.
    pub fn shape(&self, checked: &CheckedView) -> String {
        serde_json::json!([
            checked.filter.canonical(),
            checked.sort.name(),
            if self.descending { "desc" } else { "asc" },
            self.state.map(IssueState::as_str),
            self.group_by,
        ])
        .to_string()
    }
}

impl Grouping {
    /// The groups' values in the order `groups` lists them (for `state`: `closed`, `open`;
    /// for a field, its options), then `None` for issues without a value (listed even when
    /// it holds none).
    pub fn values(&self) -> Vec<Option<String>> {
        let named: Vec<String> = match self {
            Self::State => vec!["closed".into(), "open".into()],
            Self::Field(def) => def.options.clone().unwrap_or_default(),
        };
        named.into_iter().map(Some).chain([None]).collect()
    }
}

/// A view as the index keeps it: its id, the shape its list is built for (`rev`, which a
/// change of shape advances), its state and its checked definition.
#[derive(Debug, Clone)]
pub struct IndexedView {
    pub id: String,
    pub rev: u64,
    pub state: Option<IssueState>,
    pub checked: CheckedView,
}

/// The group key of issues without a value of the view's grouping field.
pub const NO_GROUP: &str = "-";

impl IndexedView {
    /// Whether the issue is in the view: in its state, meeting its filter.
    pub fn holds(&self, issue: &IssueRecord<'_>) -> bool {
        self.state.is_none_or(|s| s == issue.state) && self.checked.filter.matches_record(issue)
    }

    /// The key of the issue's group in a grouped view (`None` for a view without grouping):
    /// the state's name, or the position of the field's option ([`NO_GROUP`] without one).
    /// Positions, not labels: labels may hold any character.
    pub fn group_key(&self, issue: &IssueRecord<'_>) -> Option<String> {
        Some(match self.checked.grouping.as_ref()? {
            Grouping::State => issue.state.as_str().to_string(),
            Grouping::Field(def) => {
                let position = match issue.fields.get(def.id.as_str()) {
                    Some(ValueRef::S(label)) => def
                        .options
                        .as_deref()
                        .and_then(|o| o.iter().position(|x| x == label)),
                    _ => None,
                };
                position.map_or_else(|| NO_GROUP.to_string(), crate::encoding::select)
            }
        })
    }

    /// The index columns the issue has for this view: none when it is not in it; else the
    /// view's list and, grouped, its group's, each with the issue's sort value (`columns`:
    /// the basis' encoded values; `None`: no value, listed after the values).
    pub fn columns(
        &self,
        issue: &IssueRecord<'_>,
        columns: &std::collections::BTreeMap<String, Option<String>>,
    ) -> Vec<(String, Option<String>)> {
        if !self.holds(issue) {
            return Vec::new();
        }
        let value = columns.get(self.checked.sort.name()).cloned().flatten();
        let mut out = vec![(keys::index::view_column(&self.id, self.rev), value.clone())];
        if let Some(group) = self.group_key(issue) {
            out.push((
                keys::index::view_group_column(&self.id, self.rev, &group),
                value,
            ));
        }
        out
    }
}

/// The `where` array as given (its numbers keep their digits: no float ever holds them).
fn compact(raw: &str) -> String {
    raw.trim().to_string()
}

pub mod counts;

#[cfg(test)]
mod tests;
