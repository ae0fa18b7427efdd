//! Items of the records table and their mapping to domain types (via `serde_dynamo`).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::{Item, StoreError, stored_size};
use crate::domain::decimal::DynNumber;
use crate::domain::ids::{FieldId, IssueId, ProjectId, TenantId};
use crate::domain::values::{FieldDef, FieldType, StoredValue};
use crate::domain::{Issue, IssueState, Participant, Project, Role};
use crate::keys::{self, records::entity};

/// Attribute names that update expressions refer to.
pub mod attr {
    pub const ENTITY: &str = "entity";
    pub const NEXT_NUM: &str = "next_num";
    pub const FIELD_COUNT: &str = "field_count";
    /// Bytes of field definitions (names and options) on the project, for the 64 KB cap.
    pub const FIELD_BYTES: &str = "field_bytes";
    /// Teams a user belongs to, on the user's membership counter item.
    pub const TEAM_COUNT: &str = "team_count";
    pub const TITLE: &str = "title";
    pub const STATE: &str = "state";
    pub const FIELDS: &str = "fields";
    pub const PARTICIPANTS: &str = "participants";
    pub const ROLES: &str = "roles";
    pub const VERSION: &str = "version";
    pub const UPDATED_AT: &str = "updated_at";
    pub const TEXT: &str = "text";
}

#[derive(Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_bytes: Option<u64>,
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
            field_bytes: None,
        }
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
        }
    }

    pub fn def(self) -> FieldDef {
        FieldDef {
            id: self.id,
            name: self.name,
            field_type: self.field_type,
            options: self.options,
        }
    }
}

/// The scalar attributes of an issue's summary item; `fields` and `participants` are mapped
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

fn attr_to_value(a: &AttributeValue) -> Result<StoredValue, StoreError> {
    match a {
        AttributeValue::S(s) => Ok(StoredValue::S(s.clone())),
        AttributeValue::N(n) => DynNumber::parse(n)
            .map(StoredValue::N)
            .map_err(|_| StoreError::Corrupt(format!("number {n}"))),
        _ => Err(StoreError::Corrupt("field value of unexpected type".into())),
    }
}

pub fn fields_attr(fields: &BTreeMap<String, StoredValue>) -> AttributeValue {
    AttributeValue::M(
        fields
            .iter()
            .map(|(k, v)| (k.clone(), value_to_attr(v)))
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

/// The summary item of an issue (without its description).
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
    Ok(item)
}

/// The size of an issue's summary item as it would be stored.
pub fn issue_item_size(tenant: &TenantId, issue: &Issue) -> Result<usize, StoreError> {
    Ok(stored_size(&issue_item(tenant, issue)?))
}

/// A field definition from its item.
pub fn field_def_from(item: Item) -> Result<FieldDef, StoreError> {
    Ok(serde_dynamo::from_item::<_, FieldItem>(item)?.def())
}

/// An issue from its summary item and, if read, its description item.
pub fn issue_from(item: Item, description: Option<&Item>) -> Result<Issue, StoreError> {
    let fields = match item.get(attr::FIELDS) {
        Some(AttributeValue::M(m)) => m
            .iter()
            .map(|(k, v)| Ok((k.clone(), attr_to_value(v)?)))
            .collect::<Result<BTreeMap<_, _>, StoreError>>()?,
        _ => BTreeMap::new(),
    };
    let roles = match item.get(attr::ROLES) {
        Some(AttributeValue::M(m)) => Some(m),
        _ => None,
    };
    let mut participants = match item.get(attr::PARTICIPANTS) {
        Some(AttributeValue::Ss(edges)) => edges
            .iter()
            .map(|e| {
                let role = roles.and_then(|r| match r.get(e) {
                    Some(AttributeValue::S(role)) => Some(role.as_str()),
                    _ => None,
                });
                parse_participant(e, role)
                    .ok_or_else(|| StoreError::Corrupt(format!("participant edge {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => Vec::new(),
    };
    participants.sort();
    let s: IssueScalars = serde_dynamo::from_item(item)?;
    let description = description.and_then(|d| match d.get(attr::TEXT) {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    });
    Ok(Issue {
        id: s.id,
        project_id: s.project_id,
        num: s.num,
        title: s.title,
        state: s.state,
        description,
        fields,
        participants,
        version: s.version,
        created_at: s.created_at,
        updated_at: s.updated_at,
    })
}

fn parse_participant(edge: &str, role: Option<&str>) -> Option<Participant> {
    let (kind, id) = keys::records::parse_participant_edge(edge)?;
    Some(Participant {
        kind,
        id: id.to_string(),
        role: Role::parse(role?)?,
    })
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

/// Key of an issue's summary item.
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
