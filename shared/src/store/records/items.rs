//! Items of the records table and their mapping to domain types (via `serde_dynamo`).

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::store::{Item, StoreError, stored_size};
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
    /// On the project: counts every field created or deleted, so the indexer can tell that
    /// definitions it read are older than the ones an issue was last indexed with.
    pub const FIELDS_REV: &str = "fields_rev";
    /// On the project: how many shards its column partitions are split into (absent: one).
    pub const SHARDS: &str = "shards";
    /// On the project, during a reshard: the other layout the indexer keeps exact beside
    /// [`SHARDS`] (the one being built, then the one being retired).
    pub const SHARDS_ALSO: &str = "shards_also";
    /// On the project, during a reshard: the run that started it, which every later move of
    /// that reshard names (so a run that lost the project to another cannot move it again).
    pub const RESHARD_RUN: &str = "reshard_run";
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
    /// On a field definition: whether its column of the index is complete.
    pub const SORTABLE: &str = "sortable";
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
    /// See [`attr::FIELDS_REV`]; absent (0) until the project's first field change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_rev: Option<u64>,
    /// See [`attr::SHARDS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u16>,
    /// See [`attr::SHARDS_ALSO`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards_also: Option<u16>,
    /// See [`attr::RESHARD_RUN`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reshard_run: Option<String>,
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
            fields_rev: None,
            shards: None,
            shards_also: None,
            reshard_run: None,
        }
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

/// An attribute value as the issue decoder reads it, whichever type holds it: the SDK's (what
/// the store reads) or the stream event's (`crate::model::event::Attr`, borrowed from the
/// Lambda event's JSON), so the issue decoder is written once over this view.
pub trait AttrView: Sized {
    /// A map key or set member: the decoder looks them up and reads them as `str`.
    type Key: Borrow<str> + Hash + Eq;
    /// The hasher of its maps.
    type Hasher: BuildHasher;
    fn s(&self) -> Option<&str>;
    fn n(&self) -> Option<&str>;
    fn ss(&self) -> Option<&[Self::Key]>;
    fn m(&self) -> Option<&HashMap<Self::Key, Self, Self::Hasher>>;
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

/// An issue from its summary item and, if read, its description item.
pub fn issue_from(item: Item, description: Option<&Item>) -> Result<Issue, StoreError> {
    let description = description.and_then(|d| d.get(attr::TEXT)?.s());
    issue_from_attrs(&item, description)
}

/// An issue from a stream record's image, read where the event holds it: the owned decoding
/// the indexer's borrowed one (`index::record`) is tested against.
#[cfg(test)]
pub(crate) fn issue_from_image(
    image: &crate::model::event::Image<'_>,
) -> Result<Issue, StoreError> {
    issue_from_attrs(image, None)
}

/// An issue item's attribute the API always writes was missing or of another type.
pub(crate) fn issue_attr_missing(name: &str) -> StoreError {
    StoreError::Corrupt(format!("issue item: {name} missing or mistyped"))
}

/// A string attribute an issue item must have.
pub(crate) fn issue_text<'m, A: AttrView>(
    item: &'m HashMap<A::Key, A, A::Hasher>,
    name: &str,
) -> Result<&'m str, StoreError> {
    item.get(name)
        .and_then(A::s)
        .ok_or_else(|| issue_attr_missing(name))
}

/// A whole-number attribute an issue item must have.
pub(crate) fn issue_whole<A: AttrView>(
    item: &HashMap<A::Key, A, A::Hasher>,
    name: &str,
) -> Result<u64, StoreError> {
    item.get(name)
        .and_then(A::n)
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| issue_attr_missing(name))
}

/// The keys and the entity: not read, but an item without them is none the API wrote.
pub(crate) fn check_issue_keys<A: AttrView>(
    item: &HashMap<A::Key, A, A::Hasher>,
) -> Result<(), StoreError> {
    for name in [
        keys::PK,
        keys::SK,
        keys::GSI1_PK,
        keys::GSI1_SK,
        attr::ENTITY,
    ] {
        issue_text(item, name)?;
    }
    Ok(())
}

/// The issue an issue's summary item holds: the attributes [`issue_item`] writes, each
/// required with its type (an item the API would never write is corrupt, not half-read).
pub fn issue_from_attrs<A: AttrView>(
    item: &HashMap<A::Key, A, A::Hasher>,
    description: Option<&str>,
) -> Result<Issue, StoreError> {
    let missing = issue_attr_missing;
    let text = |name: &'static str| issue_text(item, name);
    let whole = |name: &'static str| issue_whole(item, name);
    check_issue_keys(item)?;
    let fields = match item.get(attr::FIELDS).and_then(A::m) {
        Some(m) => m
            .iter()
            .map(|(k, v)| Ok((k.borrow().to_string(), stored_value(v)?)))
            .collect::<Result<BTreeMap<_, _>, StoreError>>()?,
        None => BTreeMap::new(),
    };
    let roles = item.get(attr::ROLES).and_then(A::m);
    let mut participants = item
        .get(attr::PARTICIPANTS)
        .and_then(A::ss)
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let e: &str = e.borrow();
            let role = roles.and_then(|r| r.get(e)?.s());
            parse_participant(e, role)
                .ok_or_else(|| StoreError::Corrupt(format!("participant edge {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    participants.sort();
    Ok(Issue {
        id: IssueId::parse(text("id")?).ok_or_else(|| missing("id"))?,
        project_id: ProjectId::parse(text("project_id")?).ok_or_else(|| missing("project_id"))?,
        num: whole("num")?,
        title: text(attr::TITLE)?.to_string(),
        state: IssueState::parse(text(attr::STATE)?).ok_or_else(|| missing(attr::STATE))?,
        description: description.map(str::to_string),
        fields,
        participants,
        version: whole(attr::VERSION)?,
        created_at: text("created_at")?.to_string(),
        updated_at: text(attr::UPDATED_AT)?.to_string(),
    })
}

/// A stored field value: a string, or a number kept exact.
fn stored_value<A: AttrView>(a: &A) -> Result<StoredValue, StoreError> {
    if let Some(s) = a.s() {
        return Ok(StoredValue::S(s.to_string()));
    }
    let n = a
        .n()
        .ok_or_else(|| StoreError::Corrupt("field value of unexpected type".into()))?;
    DynNumber::parse(n)
        .map(StoredValue::N)
        .map_err(|_| StoreError::Corrupt(format!("number {n}")))
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::domain::ParticipantKind;
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
                id,
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
                    .map(|(k, v)| (FieldId::numbered(k).to_string(), v))
                    .collect(),
                participants,
                version,
                created_at: "2026-11-21T20:42:03.123Z".into(),
                updated_at: "2026-11-23T08:00:00.000Z".into(),
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
