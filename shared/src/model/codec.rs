//! The issue codec: an issue read from its records-table item through any view of its
//! attributes — the SDK's (what the store reads) or the stream event's (borrowed from the
//! Lambda event's JSON) — so the decoding and its checks are written once. An item the API
//! would never write is [`Malformed`], not half-read.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};

use crate::domain::decimal::DynNumber;
use crate::domain::ids::{FieldId, IssueId, ParticipantId, ProjectId};
use crate::domain::values::StoredValue;
use crate::domain::{Issue, IssueState, Participant, Role};
use crate::keys;

/// A stored item the API would never have written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
/// Displayed as the store's corrupt-item error is, so a parked unit's reason reads the same
/// whichever decoder refused the item.
#[error("stored item is malformed: {0}")]
pub struct Malformed(pub String);

/// Attribute names that update expressions refer to.
pub mod attr {
    pub const ENTITY: &str = "entity";
    pub const NEXT_NUM: &str = "next_num";
    pub const FIELD_COUNT: &str = "field_count";
    /// On the project: how many saved views it has (at most 50).
    pub const VIEW_COUNT: &str = "view_count";
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
    /// On the project: its hot columns, a string set of column names (built-in names and
    /// field ids) whose index entries carry issue summaries ([`crate::model::basis::Hot`]).
    pub const HOT: &str = "hot";
    /// On the project: the column just made hot, until its fill job begins (the stream
    /// filter passes project records that carry it).
    pub const HOT_FILL: &str = "hot_fill";
    /// Teams a user belongs to, on the user's membership counter item.
    pub const TEAM_COUNT: &str = "team_count";
    pub const TITLE: &str = "title";
    pub const STATE: &str = "state";
    pub const FIELDS: &str = "fields";
    pub const PARTICIPANTS: &str = "participants";
    pub const ROLES: &str = "roles";
    pub const VERSION: &str = "version";
    pub const UPDATED_AT: &str = "updated_at";
    /// On an issue: the user whose request made its version (absent: the system made it), for
    /// its history entry.
    pub const UPDATED_BY: &str = "updated_by";
    /// On an issue: counts its description's changes, so the version that changes it says so
    /// in the issue item the stream carries (the description is an item of its own).
    pub const DESCRIPTION_REV: &str = "desc_rev";
    /// On an issue: its last relation change, `{other}|{from}|{to}` (kinds; empty for none),
    /// so the version that relates or unrelates it says how in the issue item the stream
    /// carries (the edges are items of their own). Two relation changes in a row always differ.
    pub const RELATION_CHANGE: &str = "rel_change";
    pub const TEXT: &str = "text";
    /// On an issue: the issue it is a sub-issue of.
    pub const PARENT_ID: &str = "parent_id";
    /// On an issue: it has had sub-issues (set when one is attached, never cleared).
    pub const HAS_CHILDREN: &str = "has_children";
    /// On an issue: how many relations it has (both directions), kept by the transaction
    /// that adds or removes one, so concurrent relates never pass the bound.
    pub const RELATION_COUNT: &str = "rel_count";
    /// On an issue: how many comments it has, moved by the transaction that puts or deletes
    /// one (absent: none).
    pub const COMMENT_COUNT: &str = "comment_count";
    /// On an issue: moved by every comment post and delete (never down), so a repair of the
    /// count can condition on nothing having changed since it counted.
    pub const COMMENT_REV: &str = "comment_rev";
    /// On a relation edge: its kind as the partition's issue sees it.
    pub const KIND: &str = "kind";
    /// On a field definition: whether its column of the index is complete.
    pub const SORTABLE: &str = "sortable";
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

/// An issue item's attribute the API always writes was missing or of another type.
pub(crate) fn issue_attr_missing(name: &str) -> Malformed {
    Malformed(format!("issue item: {name} missing or mistyped"))
}

/// A string attribute an issue item must have.
pub(crate) fn issue_text<'m, A: AttrView>(
    item: &'m HashMap<A::Key, A, A::Hasher>,
    name: &str,
) -> Result<&'m str, Malformed> {
    item.get(name)
        .and_then(A::s)
        .ok_or_else(|| issue_attr_missing(name))
}

/// A whole-number attribute an issue item must have.
pub(crate) fn issue_whole<A: AttrView>(
    item: &HashMap<A::Key, A, A::Hasher>,
    name: &str,
) -> Result<u64, Malformed> {
    item.get(name)
        .and_then(A::n)
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| issue_attr_missing(name))
}

/// The keys and the entity: not read, but an item without them is none the API wrote.
pub(crate) fn check_issue_keys<A: AttrView>(
    item: &HashMap<A::Key, A, A::Hasher>,
) -> Result<(), Malformed> {
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

/// The issue its item holds: the attributes the store's `issue_item` writes, each
/// required with its type (an item the API would never write is corrupt, not half-read).
pub fn issue_from_attrs<A: AttrView>(
    item: &HashMap<A::Key, A, A::Hasher>,
    description: Option<&str>,
) -> Result<Issue, Malformed> {
    let missing = issue_attr_missing;
    let text = |name: &'static str| issue_text(item, name);
    let whole = |name: &'static str| issue_whole(item, name);
    check_issue_keys(item)?;
    let fields = match item.get(attr::FIELDS).and_then(A::m) {
        Some(m) => m
            .iter()
            .map(|(k, v)| {
                let id = FieldId::parse(k.borrow())
                    .ok_or_else(|| Malformed(format!("field id {}", k.borrow())))?;
                Ok((id, stored_value(v)?))
            })
            .collect::<Result<BTreeMap<_, _>, Malformed>>()?,
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
            parse_participant(e, role).ok_or_else(|| Malformed(format!("participant edge {e}")))
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
        parent_id: match item.get(attr::PARENT_ID) {
            None => None,
            Some(v) => Some(
                v.s()
                    .and_then(IssueId::parse)
                    .ok_or_else(|| missing(attr::PARENT_ID))?,
            ),
        },
    })
}

/// A stored field value: a string, or a number kept exact.
fn stored_value<A: AttrView>(a: &A) -> Result<StoredValue, Malformed> {
    if let Some(s) = a.s() {
        return Ok(StoredValue::S(s.to_string()));
    }
    let n = a
        .n()
        .ok_or_else(|| Malformed("field value of unexpected type".into()))?;
    DynNumber::parse(n)
        .map(StoredValue::N)
        .map_err(|_| Malformed(format!("number {n}")))
}

fn parse_participant(edge: &str, role: Option<&str>) -> Option<Participant> {
    let (kind, id) = keys::records::parse_participant_edge(edge)?;
    Some(Participant {
        kind,
        id: ParticipantId::parse(id)?,
        role: Role::parse(role?)?,
    })
}
