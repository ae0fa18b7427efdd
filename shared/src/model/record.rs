//! An issue as the indexer reads it: exactly what its entries derive from, borrowed from the
//! stream record's image (or from an issue read from the table), never copied into an owned
//! [`Issue`] first. A stream batch decodes each issue's last image into one of these; the
//! basis ([`crate::model::Basis::of_record`]) is built from it once the project's fields are
//! known.
//!
//! Decoding checks what the owned decoding ([`crate::model::codec::issue_from_attrs`]) checks (every attribute the API
//! writes, with its type; every field value a string or a number), so an item the API would
//! never write is still refused, and parked, at the same place.

use std::collections::BTreeMap;

use crate::domain::decimal::DynNumber;
use crate::domain::ids::{FieldId, ProjectId, is_server_id, is_user_id};
use crate::domain::values::StoredValue;
use crate::domain::{Issue, IssueState, ParticipantKind, Role};
use crate::keys;
use crate::model::codec::{
    AttrView, Malformed, attr, check_issue_keys, issue_attr_missing, issue_text, issue_whole,
};
use crate::model::event::{Attr, Image};

/// An issue's custom field values, where they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValues<'a> {
    /// The image's `fields` map (every value checked to be a string or a number).
    Image(&'a Image<'a>),
    /// An issue read from the table.
    Stored(&'a BTreeMap<FieldId, StoredValue>),
    None,
}

/// One field value, borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    S(&'a str),
    /// A number as DynamoDB holds it (checked to parse).
    N(&'a str),
    /// A number already parsed.
    Number(&'a DynNumber),
}

impl<'a> FieldValues<'a> {
    /// The value of field `id`, if the issue has one.
    pub fn get(&self, id: &str) -> Option<ValueRef<'a>> {
        match *self {
            Self::Image(m) => match m.get(id)? {
                Attr::S(s) => Some(ValueRef::S(s.as_str())),
                Attr::N(n) => Some(ValueRef::N(n.as_str())),
                _ => None,
            },
            Self::Stored(m) => Some(match m.get(id)? {
                StoredValue::S(s) => ValueRef::S(s),
                StoredValue::N(n) => ValueRef::Number(n),
            }),
            Self::None => None,
        }
    }
}

/// A participant, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeatRef<'a> {
    pub kind: ParticipantKind,
    pub role: Role,
    pub id: &'a str,
}

/// What an issue's entries derive from, borrowed from where it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct IssueRecord<'a> {
    /// Owned: the key its project's field definitions are looked up by.
    pub project_id: ProjectId,
    pub num: u64,
    pub title: &'a str,
    pub state: IssueState,
    pub version: u64,
    pub created_at: &'a str,
    pub updated_at: &'a str,
    pub fields: FieldValues<'a>,
    pub seats: Vec<SeatRef<'a>>,
    /// The parent's id, as stored (checked to be an id).
    pub parent_id: Option<&'a str>,
}

impl<'a> IssueRecord<'a> {
    /// The issue a stream record's new image holds; `Err` if it is none the API would write.
    pub fn from_image(image: &'a Image<'a>) -> Result<Self, Malformed> {
        let missing = issue_attr_missing;
        let text = |name: &'static str| issue_text(image, name);
        let whole = |name: &'static str| issue_whole(image, name);
        check_issue_keys(image)?;
        if !crate::domain::ids::is_server_id(text("id")?) {
            return Err(missing("id"));
        }
        let fields = match image.get(attr::FIELDS).and_then(Attr::m) {
            Some(m) => {
                for (k, v) in m {
                    if !is_server_id(k.as_str()) {
                        return Err(Malformed(format!("field id {}", k.as_str())));
                    }
                    check_value(v)?;
                }
                FieldValues::Image(m)
            }
            None => FieldValues::None,
        };
        let roles = image.get(attr::ROLES).and_then(Attr::m);
        let seats = image
            .get(attr::PARTICIPANTS)
            .and_then(Attr::ss)
            .unwrap_or_default()
            .iter()
            .map(|e| {
                let e = e.as_str();
                let role = roles.and_then(|r| r.get(e)?.s());
                seat(e, role).ok_or_else(|| Malformed(format!("participant edge {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            project_id: ProjectId::parse(text("project_id")?)
                .ok_or_else(|| missing("project_id"))?,
            num: whole("num")?,
            title: text(attr::TITLE)?,
            state: IssueState::parse(text(attr::STATE)?).ok_or_else(|| missing(attr::STATE))?,
            version: whole(attr::VERSION)?,
            created_at: text("created_at")?,
            updated_at: text(attr::UPDATED_AT)?,
            fields,
            seats,
            parent_id: match image.get(attr::PARENT_ID) {
                None => None,
                Some(v) => Some(
                    v.s()
                        .filter(|p| is_server_id(p))
                        .ok_or_else(|| missing(attr::PARENT_ID))?,
                ),
            },
        })
    }

    /// An issue read from the table, borrowed.
    pub fn of(issue: &'a Issue) -> Self {
        Self {
            project_id: issue.project_id.clone(),
            num: issue.num,
            title: &issue.title,
            state: issue.state,
            version: issue.version,
            created_at: &issue.created_at,
            updated_at: &issue.updated_at,
            fields: FieldValues::Stored(&issue.fields),
            seats: issue
                .participants
                .iter()
                .map(|p| SeatRef {
                    kind: p.kind,
                    role: p.role,
                    id: &p.id,
                })
                .collect(),
            parent_id: issue.parent_id.as_ref().map(|p| p.as_str()),
        }
    }
}

/// A field value as the owned decoding accepts it: a string, or a number that
/// parses.
fn check_value(v: &Attr<'_>) -> Result<(), Malformed> {
    if v.s().is_some() {
        return Ok(());
    }
    let n = v
        .n()
        .ok_or_else(|| Malformed("field value of unexpected type".into()))?;
    DynNumber::parse(n)
        .map(|_| ())
        .map_err(|_| Malformed(format!("number {n}")))
}

/// A participant edge (`{kind}#{id}`) and its role, as the issue item holds them.
fn seat<'a>(edge: &'a str, role: Option<&str>) -> Option<SeatRef<'a>> {
    let (kind, id) = keys::records::parse_participant_edge(edge)?;
    // The owned decoding types the id: one it could not hold is refused here too.
    is_user_id(id).then_some(())?;
    Some(SeatRef {
        kind,
        role: Role::parse(role?)?,
        id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::StreamEvent;
    use crate::store::issue_from_image;
    use proptest::strategy::Strategy;
    use serde_json::json;

    fn image_json(fields: serde_json::Value, participants: serde_json::Value) -> String {
        json!({"Records": [{"dynamodb": {"NewImage": {
            "PK": {"S": "T#acme#I#01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "SK": {"S": "#ISSUE"},
            "GSI1PK": {"S": "x"}, "GSI1SK": {"S": "y"}, "entity": {"S": "issue"},
            "id": {"S": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "project_id": {"S": "01ARZ3NDEKTSV4RRFFQ69G5FAW"},
            "num": {"N": "7"}, "title": {"S": "say \"hi\""}, "state": {"S": "closed"}, "version": {"N": "3"},
            "created_at": {"S": "2026-11-21T20:42:03.123Z"}, "updated_at": {"S": "2026-11-22T20:42:03.123Z"},
            "fields": fields, "participants": participants,
            "roles": {"M": {"user#ann": {"S": "assignee"}, "team#01ARZ3NDEKTSV4RRFFQ69G5FAX": {"S": "watcher"}}}
        }}}]})
        .to_string()
    }

    const F1: &str = "01ARZ3NDEKTSV4RRFFQ69G0001";
    const F2: &str = "01ARZ3NDEKTSV4RRFFQ69G0002";
    const F3: &str = "01ARZ3NDEKTSV4RRFFQ69G0003";

    /// The record decoded from an image says what the owned issue decoded from it says.
    #[test]
    fn an_image_reads_as_the_issue_it_holds() {
        let text = image_json(
            json!({"M": {F1: {"S": "a"}, F2: {"N": "-1.50"}}}),
            json!({"SS": ["user#ann", "team#01ARZ3NDEKTSV4RRFFQ69G5FAX"]}),
        );
        let event = StreamEvent::from_json(&text).unwrap();
        let image = event.records[0].dynamodb.new_image.as_ref().unwrap();
        let issue = issue_from_image(image).unwrap();
        let record = IssueRecord::from_image(image).unwrap();
        let mut seats = record.seats.clone();
        seats.sort_by_key(|s| (s.kind, s.id));
        let owned = IssueRecord::of(&issue);
        assert_eq!(seats, owned.seats);
        assert_eq!(
            (record.num, record.title, record.state, record.version),
            (owned.num, owned.title, owned.state, owned.version)
        );
        assert_eq!(
            (record.created_at, record.updated_at, &record.project_id),
            (owned.created_at, owned.updated_at, &owned.project_id)
        );
        assert_eq!(record.fields.get(F1), Some(ValueRef::S("a")));
        assert_eq!(record.fields.get(F2), Some(ValueRef::N("-1.50")));
        assert!(matches!(owned.fields.get(F2), Some(ValueRef::Number(_))));
        assert_eq!(record.fields.get(F3), None);
    }

    /// Whatever the owned decoding refuses, this refuses too.
    #[test]
    fn an_item_the_api_would_not_write_is_refused_as_before() {
        for (fields, participants) in [
            (
                json!({"M": {F1: {"BOOL": true}}}),
                json!({"SS": ["user#ann"]}),
            ),
            (
                json!({"M": {F1: {"N": "1e999"}}}),
                json!({"SS": ["user#ann"]}),
            ),
            // A field key that is no field id.
            (
                json!({"M": {"f1": {"S": "a"}}}),
                json!({"SS": ["user#ann"]}),
            ),
            (json!({"M": {}}), json!({"SS": ["robot#x"]})),
            (json!({"M": {}}), json!({"SS": ["user#bob"]})),
        ] {
            let text = image_json(fields, participants);
            let event = StreamEvent::from_json(&text).unwrap();
            let image = event.records[0].dynamodb.new_image.as_ref().unwrap();
            assert!(issue_from_image(image).is_err(), "{text}");
            assert!(IssueRecord::from_image(image).is_err(), "{text}");
        }
        // Each attribute the API writes, missing or of another type or value.
        let good = image_json(json!({"M": {}}), json!({"SS": ["user#ann"]}));
        let mutations: Vec<(&str, Option<serde_json::Value>)> = vec![
            ("PK", None),
            ("SK", Some(json!({"N": "1"}))),
            ("GSI1PK", None),
            ("GSI1SK", None),
            ("entity", None),
            ("id", Some(json!({"S": "not-an-id"}))),
            ("id", None),
            ("project_id", Some(json!({"S": "p1"}))),
            ("num", None),
            ("num", Some(json!({"N": "-1"}))),
            ("num", Some(json!({"S": "7"}))),
            ("title", Some(json!({"N": "7"}))),
            ("state", Some(json!({"S": "done"}))),
            ("version", None),
            ("created_at", None),
            ("updated_at", Some(json!({"N": "1"}))),
        ];
        for (name, value) in mutations {
            let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
            let image = &mut v["Records"][0]["dynamodb"]["NewImage"];
            match value {
                Some(value) => image[name] = value,
                None => {
                    image.as_object_mut().unwrap().remove(name);
                }
            }
            let text = v.to_string();
            let event = StreamEvent::from_json(&text).unwrap();
            let image = event.records[0].dynamodb.new_image.as_ref().unwrap();
            assert!(issue_from_image(image).is_err(), "{name}: {text}");
            assert!(IssueRecord::from_image(image).is_err(), "{name}: {text}");
        }
        // And the unmutated image reads both ways.
        let event = StreamEvent::from_json(&good).unwrap();
        let image = event.records[0].dynamodb.new_image.as_ref().unwrap();
        assert!(issue_from_image(image).is_ok());
        assert!(IssueRecord::from_image(image).is_ok());
    }

    proptest::proptest! {
        /// The basis built from the borrowed record is the one built from the owned issue,
        /// for any values of every field type (numbers in any DynamoDB spelling, texts with
        /// escapes, select options, values a field cannot hold) and any participants.
        #[test]
        fn the_basis_of_the_record_is_the_basis_of_the_issue(
            title in "[a-zA-Z \"\\\\é]{0,12}",
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    "[a-z]{0,6}".prop_map(|s| json!({"S": s})),
                    ("-?(0|[1-9][0-9]{0,4})", "(\\.[0-9]{0,2}[1-9])?", "(e-?[1-9])?")
                        .prop_map(|(i, f, e)| json!({"N": format!("{i}{f}{e}")})),
                    proptest::prelude::Just(json!({"S": "b"})),
                ],
                6,
            ),
            present in proptest::collection::vec(proptest::prelude::any::<bool>(), 6),
            people in proptest::collection::btree_set("[a-c]", 0..3),
        ) {
            use crate::domain::ids::FieldId;
            use crate::domain::values::{FieldDef, FieldType};
            use crate::model::Basis;
            use crate::keys::index::Shards;
            let types = [
                FieldType::Text,
                FieldType::Number,
                FieldType::Date,
                FieldType::Datetime,
                FieldType::Select,
                FieldType::Number,
            ];
            let defs: Vec<FieldDef> = types
                .iter()
                .enumerate()
                .map(|(n, t)| FieldDef {
                    id: FieldId::numbered(n as u64 + 1),
                    name: format!("f{n}"),
                    field_type: *t,
                    options: (*t == FieldType::Select).then(|| vec!["a".into(), "b".into()]),
                    sortable: true,
                })
                .collect();
            let fields: serde_json::Map<String, serde_json::Value> = defs
                .iter()
                .zip(&values)
                .zip(&present)
                .filter(|(_, p)| **p)
                .map(|((d, v), _)| (d.id.to_string(), v.clone()))
                .collect();
            let edges: Vec<String> = people.iter().map(|p| format!("user#{p}")).collect();
            let roles: serde_json::Map<String, serde_json::Value> = edges
                .iter()
                .map(|e| (e.clone(), json!({"S": "watcher"})))
                .collect();
            let mut text = image_json(json!({"M": fields}), json!({"SS": edges}));
            // The image's title and roles, replaced (the helper's are fixed).
            let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let image = &mut v["Records"][0]["dynamodb"]["NewImage"];
            image["title"] = json!({"S": title});
            image["roles"] = json!({"M": roles});
            text = v.to_string();
            let event = StreamEvent::from_json(&text).unwrap();
            let image = event.records[0].dynamodb.new_image.as_ref().unwrap();
            let owned = issue_from_image(image);
            let record = IssueRecord::from_image(image);
            proptest::prop_assert_eq!(owned.is_ok(), record.is_ok());
            if let (Ok(owned), Ok(record)) = (owned, record) {
                for shards in [Shards::ONE, Shards::of(4).unwrap_or(Shards::ONE)] {
                    proptest::prop_assert_eq!(
                        Basis::of(&owned, &defs, shards),
                        Basis::of_record(&record, &defs, shards, &Default::default())
                    );
                }
            }
        }
    }
}
