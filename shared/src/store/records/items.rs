//! Items of the records table and their mapping to domain types (via `serde_dynamo`).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::domain::ids::{FieldId, IssueId, ProjectId, TenantId};
use crate::domain::values::{FieldDef, FieldType, StoredValue};
use crate::domain::{Issue, IssueState, Participant, Project};
use crate::keys::{self, records::entity};
pub use crate::model::codec::{AttrView, attr, issue_from_attrs};
use crate::store::{Item, StoreError, stored_size};

#[derive(Clone, Serialize, Deserialize)]
pub struct ProjectItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "GSI1PK")]
    pub gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    pub gsi1sk: String,
    pub entity: String,
    pub id: ProjectId,
    pub name: String,
    pub created_at: String,
    /// Last issue number handed out; absent until the first issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_num: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_count: Option<u64>,
    /// See `attr::VIEW_COUNT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_bytes: Option<u64>,
    /// See `attr::FIELDS_REV`; absent (0) until the project's first field change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_rev: Option<u64>,
    /// See `attr::SHARDS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u16>,
    /// See `attr::SHARDS_ALSO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards_also: Option<u16>,
    /// See `attr::RESHARD_RUN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reshard_run: Option<String>,
    /// See `attr::HOT`.
    #[serde(with = "serde_dynamo::string_set")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hot: Vec<String>,
}

impl ProjectItem {
    pub fn new(tenant: &TenantId, p: &Project) -> Self {
        Self {
            pk: keys::records::project_pk(tenant, &p.id),
            sk: keys::records::PROJECT_SK.into(),
            gsi1pk: keys::records::projects_gsi1_pk(tenant),
            gsi1sk: keys::records::project_gsi1_sk(&p.name, &p.id),
            entity: entity::PROJECT.into(),
            id: p.id.clone(),
            name: p.name.clone(),
            created_at: p.created_at.clone(),
            next_num: None,
            field_count: None,
            view_count: None,
            field_bytes: None,
            fields_rev: None,
            shards: None,
            shards_also: None,
            reshard_run: None,
            hot: Vec::new(),
        }
    }

    /// The columns whose entries carry summaries.
    pub fn hot(&self) -> crate::model::basis::Hot {
        crate::model::basis::Hot::Only(std::sync::Arc::new(self.hot.iter().cloned().collect()))
    }

    /// Whether a column is hot.
    pub fn is_hot(&self, column: &str) -> bool {
        self.hot.iter().any(|c| c == column)
    }

    /// The shard count grid reads use.
    pub fn read_shards(&self) -> u16 {
        self.shards
            .filter(|n| keys::index::Shards::of(*n).is_some())
            .unwrap_or(1)
    }

    /// Every layout the indexer keeps the project's columns in.
    pub fn layouts(&self) -> keys::index::Shards {
        keys::index::Shards::of_project(self.shards, self.shards_also)
    }

    pub fn project(&self) -> Project {
        Project {
            id: self.id.clone(),
            name: self.name.clone(),
            created_at: self.created_at.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
pub struct FieldItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    pub entity: String,
    pub project_id: ProjectId,
    pub id: FieldId,
    pub name: String,
    #[serde(rename = "type")]
    pub field_type: FieldType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// Absent on definitions stored before the flag (their columns were built whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sortable: Option<bool>,
}

impl FieldItem {
    pub fn new(tenant: &TenantId, project_id: &ProjectId, f: &FieldDef) -> Self {
        Self {
            pk: keys::records::project_pk(tenant, project_id),
            sk: keys::records::field_sk(&f.id),
            entity: entity::FIELD.into(),
            project_id: project_id.clone(),
            id: f.id.clone(),
            name: f.name.clone(),
            field_type: f.field_type,
            options: f.options.clone(),
            sortable: Some(f.sortable),
        }
    }

    pub fn def(self) -> FieldDef {
        FieldDef {
            id: self.id,
            name: self.name,
            field_type: self.field_type,
            options: self.options,
            sortable: self.sortable.unwrap_or(true),
        }
    }
}

/// The scalar attributes of an issue's item; `fields` and `participants` are mapped
/// by hand because they hold exact numbers and a string set.
#[derive(Serialize, Deserialize)]
struct IssueScalars {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    entity: String,
    id: IssueId,
    project_id: ProjectId,
    num: u64,
    title: String,
    state: IssueState,
    version: u64,
    created_at: String,
    updated_at: String,
}

pub fn value_to_attr(v: &StoredValue) -> AttributeValue {
    match v {
        StoredValue::S(s) => AttributeValue::S(s.clone()),
        StoredValue::N(n) => AttributeValue::N(n.to_string()),
    }
}

pub fn fields_attr(fields: &BTreeMap<FieldId, StoredValue>) -> AttributeValue {
    AttributeValue::M(
        fields
            .iter()
            .map(|(k, v)| (k.to_string(), value_to_attr(v)))
            .collect(),
    )
}

/// The participant edge set (absent when empty: DynamoDB has no empty sets) and the roles map
/// (always present, so `SET roles.#edge` works without a read).
pub fn participants_attrs(ps: &[Participant]) -> (Option<AttributeValue>, AttributeValue) {
    let edge = |p: &Participant| keys::records::participant_edge(p.kind, &p.id);
    let edges = (!ps.is_empty()).then(|| AttributeValue::Ss(ps.iter().map(edge).collect()));
    let roles = AttributeValue::M(
        ps.iter()
            .map(|p| (edge(p), AttributeValue::S(p.role.as_str().into())))
            .collect(),
    );
    (edges, roles)
}

/// The item of an issue (without its description).
pub fn issue_item(tenant: &TenantId, issue: &Issue) -> Result<Item, StoreError> {
    let scalars = IssueScalars {
        pk: keys::records::issue_pk(tenant, &issue.id),
        sk: keys::records::ISSUE_SK.into(),
        gsi1pk: keys::records::issues_by_num_gsi1_pk(tenant, &issue.project_id),
        gsi1sk: keys::records::num_sk(issue.num),
        entity: entity::ISSUE.into(),
        id: issue.id.clone(),
        project_id: issue.project_id.clone(),
        num: issue.num,
        title: issue.title.clone(),
        state: issue.state,
        version: issue.version,
        created_at: issue.created_at.clone(),
        updated_at: issue.updated_at.clone(),
    };
    let mut item: Item = serde_dynamo::to_item(scalars)?;
    item.insert(attr::FIELDS.into(), fields_attr(&issue.fields));
    let (edges, roles) = participants_attrs(&issue.participants);
    if let Some(edges) = edges {
        item.insert(attr::PARTICIPANTS.into(), edges);
    }
    item.insert(attr::ROLES.into(), roles);
    if let Some(parent) = &issue.parent_id {
        item.insert(
            attr::PARENT_ID.into(),
            AttributeValue::S(parent.to_string()),
        );
    }
    Ok(item)
}

/// The size of an issue's item as it would be stored.
pub fn issue_item_size(tenant: &TenantId, issue: &Issue) -> Result<usize, StoreError> {
    Ok(stored_size(&issue_item(tenant, issue)?))
}

/// A field definition from its item.
pub fn field_def_from(item: Item) -> Result<FieldDef, StoreError> {
    Ok(serde_dynamo::from_item::<_, FieldItem>(item)?.def())
}

impl AttrView for AttributeValue {
    type Key = String;
    type Hasher = std::hash::RandomState;
    fn s(&self) -> Option<&str> {
        self.as_s().ok().map(String::as_str)
    }
    fn n(&self) -> Option<&str> {
        self.as_n().ok().map(String::as_str)
    }
    fn ss(&self) -> Option<&[String]> {
        self.as_ss().ok().map(Vec::as_slice)
    }
    fn m(&self) -> Option<&HashMap<String, Self>> {
        self.as_m().ok()
    }
}

/// An issue from its issue item and, if read, its description item.
pub fn issue_from(item: Item, description: Option<&Item>) -> Result<Issue, StoreError> {
    let description = description.and_then(|d| d.get(attr::TEXT)?.s());
    Ok(issue_from_attrs(&item, description)?)
}

/// An issue from a stream record's image, read where the event holds it: the owned decoding
/// the indexer's borrowed one (`model::record`) is tested against.
#[cfg(test)]
pub(crate) fn issue_from_image(
    image: &crate::model::event::Image<'_>,
) -> Result<Issue, StoreError> {
    Ok(issue_from_attrs(image, None)?)
}

/// The item holding an issue's long description.
pub fn description_item(tenant: &TenantId, issue_id: &IssueId, text: &str) -> Item {
    Item::from([
        (
            keys::PK.into(),
            AttributeValue::S(keys::records::issue_pk(tenant, issue_id)),
        ),
        (
            keys::SK.into(),
            AttributeValue::S(keys::records::DESCRIPTION_SK.into()),
        ),
        (
            attr::ENTITY.into(),
            AttributeValue::S(entity::DESCRIPTION.into()),
        ),
        (attr::TEXT.into(), AttributeValue::S(text.into())),
    ])
}

/// A string attribute value.
pub(crate) fn string(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub fn key(pk: String, sk: &str) -> Item {
    Item::from([
        (keys::PK.into(), AttributeValue::S(pk)),
        (keys::SK.into(), AttributeValue::S(sk.into())),
    ])
}

/// Key of an issue's item.
pub fn issue_key(tenant: &TenantId, issue_id: &IssueId) -> Item {
    key(
        keys::records::issue_pk(tenant, issue_id),
        keys::records::ISSUE_SK,
    )
}

/// Key of a project's own item.
pub fn project_key(tenant: &TenantId, project_id: &ProjectId) -> Item {
    key(
        keys::records::project_pk(tenant, project_id),
        keys::records::PROJECT_SK,
    )
}

pub fn sk_of(item: &Item) -> Option<&str> {
    match item.get(keys::SK) {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

pub fn pk_of(item: &Item) -> Option<&str> {
    match item.get(keys::PK) {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

/// Whether DynamoDB refused a write because the item would pass 400 KB.
pub(crate) fn item_too_large(e: &StoreError) -> bool {
    let StoreError::Dynamo { source, .. } = e else {
        return false;
    };
    match source.as_ref() {
        aws_sdk_dynamodb::Error::TransactionCanceledException(c) => {
            c.cancellation_reasons().iter().any(|r| {
                r.code() == Some("ValidationError")
                    && r.message().is_some_and(|m| m.contains("size"))
            })
        }
        other => {
            use aws_sdk_dynamodb::error::ProvideErrorMetadata;
            other.code() == Some("ValidationException")
                && other.message().is_some_and(|m| m.contains("Item size"))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::domain::ParticipantKind;
    use crate::domain::Role;
    use crate::domain::decimal::DynNumber;
    use crate::domain::ids::ParticipantId;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = StoredValue> {
        prop_oneof![
            any::<String>().prop_map(StoredValue::S),
            (-1_000_000i64..1_000_000, prop::bool::ANY).prop_map(|(i, half)| {
                let text = if half {
                    format!("{i}.25")
                } else {
                    i.to_string()
                };
                StoredValue::N(DynNumber::parse(&text).expect("a number"))
            }),
        ]
    }

    fn participant() -> impl Strategy<Value = Participant> {
        (
            prop::bool::ANY,
            "[a-z0-9._-]{1,12}",
            prop_oneof![
                Just(Role::Assignee),
                Just(Role::Reporter),
                Just(Role::Watcher)
            ],
        )
            .prop_map(|(user, id, role)| Participant {
                kind: if user {
                    ParticipantKind::User
                } else {
                    ParticipantKind::Team
                },
                id: ParticipantId::parse(&id).unwrap(),
                role,
            })
    }

    prop_compose! {
        /// Issues of every shape the API stores (no description).
        pub(crate) fn issue()(
            n in 1u64..1_000_000,
            title in any::<String>(),
            closed in prop::bool::ANY,
            fields in prop::collection::btree_map(0u64..50, value(), 0..8),
            participants in prop::collection::btree_map(
                (prop::bool::ANY, "[a-z]{1,6}"), participant(), 0..5),
            version in 1u64..u64::MAX,
        ) -> Issue {
            let mut participants: Vec<Participant> = participants.into_values().collect();
            participants.sort();
            // One role per participant: the edge set holds each (kind, id) once.
            participants.dedup_by(|a, b| a.kind == b.kind && a.id == b.id);
            Issue {
                id: IssueId::numbered(n),
                project_id: ProjectId::numbered(n + 1),
                num: n,
                title,
                state: if closed { IssueState::Closed } else { IssueState::Open },
                description: None,
                fields: fields
                    .into_iter()
                    .map(|(k, v)| (FieldId::numbered(k), v))
                    .collect(),
                participants,
                version,
                created_at: "2026-11-21T20:42:03.123Z".into(),
                updated_at: "2026-11-23T08:00:00.000Z".into(),
                parent_id: None,
            }
        }
    }

    proptest! {
        #[test]
        fn an_issue_reads_back_from_its_item_and_from_its_stream_image(issue in issue()) {
            let tenant = TenantId::parse("acme").unwrap();
            let item = issue_item(&tenant, &issue).unwrap();
            // The image as a stream event's JSON holds it, decoded as the indexer does.
            let image: serde_dynamo::Item = item.clone().into();
            let json = serde_json::to_string(&image).unwrap();
            let decoded: crate::model::event::Image<'_> = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(issue_from_image(&decoded).unwrap(), issue.clone());
            prop_assert_eq!(issue_from(item, None).unwrap(), issue);
        }
    }

    #[test]
    fn an_item_missing_or_mistyping_an_attribute_is_corrupt() {
        let tenant = TenantId::parse("acme").unwrap();
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let issue = proptest::strategy::ValueTree::current(&issue().new_tree(&mut runner).unwrap());
        let item = issue_item(&tenant, &issue).unwrap();
        for name in ["version", "PK", "entity", "num", "state"] {
            let mut without: serde_dynamo::Item = item.clone().into();
            without.remove(name);
            let json = serde_json::to_string(&without).unwrap();
            let decoded: crate::model::event::Image<'_> = serde_json::from_str(&json).unwrap();
            assert!(issue_from_image(&decoded).is_err(), "{name}");
        }
        let mut mistyped = item.clone();
        mistyped.insert("num".into(), AttributeValue::S("7".into()));
        assert!(issue_from(mistyped, None).is_err());
        let mut bad_state = item;
        bad_state.insert("state".into(), AttributeValue::S("pending".into()));
        assert!(issue_from(bad_state, None).is_err());
    }
}
