//! An issue's history entry: the difference between two of its stream images, as the contract
//! renders it (`{"version","at","actor","action","changes"}`).
//!
//! The indexer makes one entry from each stream record that moves an issue's version (its old
//! and new images), so an entry's changes are exactly what that version's write changed. The
//! writes that change what the issue item alone does not show leave a mark on it that they did:
//! a description change moves [`attr::DESCRIPTION_REV`], a relation change sets
//! [`attr::RELATION_CHANGE`]; the actor is [`attr::UPDATED_BY`], which the system's own changes
//! remove. The entry is rendered here once, and stored and served as this JSON.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::domain::decimal::DynNumber;
use crate::domain::ids::IssueId;
use crate::domain::relation::RelationKind;
use crate::keys;
use crate::model::codec::{AttrView, attr};
use crate::model::event::{Attr, Image};

/// One version's history entry: its version and its JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub version: u64,
    pub json: String,
}

/// The [`attr::RELATION_CHANGE`] mark of a relation change with `other`: its kind before and
/// after (`None`: no relation).
pub fn relation_change(
    other: &IssueId,
    from: Option<RelationKind>,
    to: Option<RelationKind>,
) -> String {
    let kind = |k: Option<RelationKind>| k.map_or("", RelationKind::as_str);
    format!("{other}|{}|{}", kind(from), kind(to))
}

/// `(other, from, to)` of a [`relation_change`] mark.
fn parse_relation_change(mark: &str) -> Option<(&str, Option<&str>, Option<&str>)> {
    let mut parts = mark.split('|');
    let (other, from, to) = (parts.next()?, parts.next()?, parts.next()?);
    fn kind(k: &str) -> Option<&str> {
        (!k.is_empty()).then_some(k)
    }
    Some((other, kind(from), kind(to)))
}

#[derive(Serialize)]
struct EntryJson<'a> {
    version: u64,
    at: &'a str,
    actor: Option<&'a str>,
    action: &'static str,
    changes: Vec<ChangeJson>,
}

#[derive(Serialize)]
struct ParticipantJson {
    kind: &'static str,
    id: String,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ChangeJson {
    Value {
        field: String,
        from: Option<Box<RawValue>>,
        to: Option<Box<RawValue>>,
    },
    Description {
        field: &'static str,
    },
    Participant {
        field: &'static str,
        participant: ParticipantJson,
        from: Option<String>,
        to: Option<String>,
    },
    Relation {
        field: &'static str,
        issue_id: String,
        from: Option<String>,
        to: Option<String>,
    },
}

/// A value as the contract shows it: a string as itself, a number with its exact digits.
fn value_json(a: &Attr<'_>) -> Option<Box<RawValue>> {
    let text = match a {
        Attr::S(s) => serde_json::to_string(s.as_str()).ok()?,
        Attr::N(n) => DynNumber::parse(n.as_str())
            .map(|d| d.to_string())
            .unwrap_or_else(|_| n.as_str().to_string()),
        _ => return None,
    };
    RawValue::from_string(text).ok()
}

fn s<'a>(image: &'a Image<'a>, name: &str) -> Option<&'a str> {
    image.get(name).and_then(AttrView::s)
}

fn version_of(image: &Image<'_>) -> Option<u64> {
    image.get(attr::VERSION)?.n()?.parse().ok()
}

/// A participant's role in `image` (the edge set says who is one; the roles map, as what).
fn role_of<'a>(image: &'a Image<'a>, edge: &str) -> Option<&'a str> {
    let edges = image.get(attr::PARTICIPANTS).and_then(AttrView::ss)?;
    edges.iter().any(|e| e.as_str() == edge).then_some(())?;
    image.get(attr::ROLES)?.m()?.get(edge)?.s()
}

/// The entry of the version `new` holds, made by the write from `old` (none for the
/// insert that created the issue); `None` when the write made no new version (a comment count,
/// a deleted field's value, a repair), `new` holds none, or a record of a later version has no
/// old image (a stream that carried new images only: the difference is not in it).
pub fn entry_of(old: Option<&Image<'_>>, new: &Image<'_>) -> Option<HistoryEntry> {
    let version = version_of(new)?;
    match old {
        Some(old) if version_of(old).is_some_and(|v| v >= version) => return None,
        None if version != 1 => return None,
        _ => {}
    }
    let changes = match old {
        Some(old) => changes(old, new),
        None => Vec::new(),
    };
    let entry = EntryJson {
        version,
        at: s(new, attr::UPDATED_AT).unwrap_or_default(),
        actor: s(new, attr::UPDATED_BY),
        action: if old.is_none() { "created" } else { "updated" },
        changes,
    };
    let json = serde_json::to_string(&entry).ok()?;
    Some(HistoryEntry { version, json })
}

/// Every change from `old` to `new`: the built-in values, the description's mark, the field
/// values, the participants' roles and the relation mark.
fn changes(old: &Image<'_>, new: &Image<'_>) -> Vec<ChangeJson> {
    let mut changes = Vec::new();
    for name in [attr::TITLE, attr::STATE, attr::PARENT_ID] {
        let (from, to) = (old.get(name), new.get(name));
        if from != to {
            changes.push(ChangeJson::Value {
                field: name.to_string(),
                from: from.and_then(value_json),
                to: to.and_then(value_json),
            });
        }
    }
    if old.get(attr::DESCRIPTION_REV) != new.get(attr::DESCRIPTION_REV) {
        changes.push(ChangeJson::Description {
            field: "description",
        });
    }
    field_changes(old, new, &mut changes);
    participant_changes(old, new, &mut changes);
    let mark = s(new, attr::RELATION_CHANGE);
    if mark.is_some()
        && mark != s(old, attr::RELATION_CHANGE)
        && let Some((other, from, to)) = mark.and_then(parse_relation_change)
    {
        changes.push(ChangeJson::Relation {
            field: "relation",
            issue_id: other.to_string(),
            from: from.map(str::to_string),
            to: to.map(str::to_string),
        });
    }
    changes
}

/// The custom field values that differ, by field id.
fn field_changes(old: &Image<'_>, new: &Image<'_>, changes: &mut Vec<ChangeJson>) {
    let (old_fields, new_fields) = (
        old.get(attr::FIELDS).and_then(AttrView::m),
        new.get(attr::FIELDS).and_then(AttrView::m),
    );
    let mut ids: Vec<&str> = old_fields
        .iter()
        .chain(new_fields.iter())
        .flat_map(|m| m.keys().map(|k| k.as_str()))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        let from = old_fields.as_ref().and_then(|m| m.get(id));
        let to = new_fields.as_ref().and_then(|m| m.get(id));
        if from != to {
            changes.push(ChangeJson::Value {
                field: id.to_string(),
                from: from.and_then(value_json),
                to: to.and_then(value_json),
            });
        }
    }
}

/// The participants whose role differs (none: not a participant), by edge.
fn participant_changes(old: &Image<'_>, new: &Image<'_>, changes: &mut Vec<ChangeJson>) {
    let edges = |i: &'_ Image<'_>| -> Vec<String> {
        i.get(attr::PARTICIPANTS)
            .and_then(AttrView::ss)
            .unwrap_or_default()
            .iter()
            .map(|e| e.as_str().to_string())
            .collect()
    };
    let mut all = edges(old);
    all.extend(edges(new));
    all.sort_unstable();
    all.dedup();
    for edge in &all {
        let (from, to) = (role_of(old, edge), role_of(new, edge));
        if from != to
            && let Some((kind, id)) = keys::records::parse_participant_edge(edge)
        {
            changes.push(ChangeJson::Participant {
                field: "participant",
                participant: ParticipantJson {
                    kind: kind.as_str(),
                    id: id.to_string(),
                },
                from: from.map(str::to_string),
                to: to.map(str::to_string),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::StreamEvent;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// The entry of a MODIFY record from `old` to `new` (images as DynamoDB JSON).
    fn entry(old: Option<Value>, new: Value) -> Option<Value> {
        let record = json!({"Records": [{"eventName": "MODIFY", "dynamodb": {
            "Keys": {}, "NewImage": new, "OldImage": old.unwrap_or(Value::Null)}}]});
        let text = record.to_string();
        let event = StreamEvent::from_json(&text).unwrap();
        let d = &event.records[0].dynamodb;
        entry_of(d.old_image.as_ref(), d.new_image.as_ref().unwrap())
            .map(|e| serde_json::from_str(&e.json).unwrap())
    }

    fn issue(version: u64, extra: Value) -> Value {
        let mut v = json!({
            "title": {"S": "a"}, "state": {"S": "open"}, "version": {"N": version.to_string()},
            "updated_at": {"S": format!("2026-11-26T10:00:0{version}.000Z")},
            "updated_by": {"S": "u1"}
        });
        for (k, x) in extra.as_object().unwrap() {
            if x.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = x.clone();
            }
        }
        v
    }

    #[test]
    fn an_insert_is_created_with_no_changes() {
        let e = entry(None, issue(1, json!({}))).unwrap();
        assert_eq!(
            e,
            json!({"version": 1, "at": "2026-11-26T10:00:01.000Z", "actor": "u1",
                   "action": "created", "changes": []})
        );
    }

    #[test]
    fn a_later_version_without_its_old_image_makes_no_entry() {
        assert_eq!(entry(None, issue(4, json!({}))), None);
    }

    #[test]
    fn a_write_that_keeps_the_version_makes_no_entry() {
        let old = issue(3, json!({"comment_count": {"N": "1"}}));
        let new = issue(3, json!({"comment_count": {"N": "2"}}));
        assert_eq!(entry(Some(old), new), None);
        assert_eq!(entry(None, json!({"title": {"S": "x"}})), None);
    }

    #[test]
    fn every_kind_of_change_is_listed_in_the_contracts_shapes() {
        let old = issue(
            4,
            json!({"fields": {"M": {"F1": {"N": "1.50"}, "F2": {"S": "x"}}},
                   "participants": {"SS": ["user#u2", "team#t1"]},
                   "roles": {"M": {"user#u2": {"S": "assignee"}, "team#t1": {"S": "watcher"}}},
                   "desc_rev": {"N": "1"}, "rel_change": {"S": "B|blocks|"}}),
        );
        let new = issue(
            5,
            json!({"title": {"S": "b"}, "state": {"S": "closed"}, "parent_id": {"S": "P"},
                   "fields": {"M": {"F1": {"N": "2"}, "F3": {"S": "y"}}},
                   "participants": {"SS": ["user#u2", "user#u3"]},
                   "roles": {"M": {"user#u2": {"S": "reviewer"}, "user#u3": {"S": "assignee"}}},
                   "desc_rev": {"N": "2"}, "rel_change": {"S": "C||relates_to"},
                   "updated_by": null}),
        );
        let e = entry(Some(old), new).unwrap();
        assert_eq!(e["actor"], Value::Null);
        assert_eq!(e["action"], "updated");
        let changes: std::collections::HashSet<String> = e["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(Value::to_string)
            .collect();
        let expected: std::collections::HashSet<String> = [
            json!({"field": "title", "from": "a", "to": "b"}),
            json!({"field": "state", "from": "open", "to": "closed"}),
            json!({"field": "parent_id", "from": null, "to": "P"}),
            json!({"field": "description"}),
            json!({"field": "F1", "from": 1.5, "to": 2}),
            json!({"field": "F2", "from": "x", "to": null}),
            json!({"field": "F3", "from": null, "to": "y"}),
            json!({"field": "participant", "participant": {"kind": "team", "id": "t1"},
                   "from": "watcher", "to": null}),
            json!({"field": "participant", "participant": {"kind": "user", "id": "u2"},
                   "from": "assignee", "to": "reviewer"}),
            json!({"field": "participant", "participant": {"kind": "user", "id": "u3"},
                   "from": null, "to": "assignee"}),
            json!({"field": "relation", "issue_id": "C", "from": null, "to": "relates_to"}),
        ]
        .iter()
        .map(Value::to_string)
        .collect();
        assert_eq!(changes, expected);
    }

    #[test]
    fn numbers_keep_their_exact_digits() {
        let old = issue(
            1,
            json!({"fields": {"M": {"F": {"N": "123456789012345678901234567890.1"}}}}),
        );
        let new = issue(2, json!({"fields": {"M": {}}}));
        let record = json!({"Records": [{"dynamodb": {"NewImage": new, "OldImage": old}}]});
        let text = record.to_string();
        let event = StreamEvent::from_json(&text).unwrap();
        let d = &event.records[0].dynamodb;
        let e = entry_of(d.old_image.as_ref(), d.new_image.as_ref().unwrap()).unwrap();
        assert!(
            e.json
                .contains(r#""from":123456789012345678901234567890.1"#),
            "{}",
            e.json
        );
    }

    fn values() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            "[a-c]{0,2}".prop_map(|s| Some(json!({"S": s}))),
            (0u32..3).prop_map(|n| Some(json!({"N": n.to_string()}))),
        ]
    }

    proptest! {
        /// Applying an entry's changes to the old fields gives exactly the new ones, and each
        /// change changes something.
        #[test]
        fn changes_are_exactly_the_difference(
            old in proptest::collection::vec(values(), 4),
            new in proptest::collection::vec(values(), 4),
        ) {
            let map = |vals: &[Option<Value>]| -> Value {
                let mut m = serde_json::Map::new();
                for (i, v) in vals.iter().enumerate() {
                    if let Some(v) = v { m.insert(format!("F{i}"), v.clone()); }
                }
                json!({"M": m})
            };
            let plain = |v: &Option<Value>| -> Value {
                match v {
                    None => Value::Null,
                    Some(v) if v.get("S").is_some() => v["S"].clone(),
                    Some(v) => serde_json::from_str(v["N"].as_str().unwrap()).unwrap(),
                }
            };
            let e = entry(
                Some(issue(1, json!({"fields": map(&old)}))),
                issue(2, json!({"fields": map(&new)})),
            ).unwrap();
            let mut now: Vec<Value> = old.iter().map(plain).collect();
            for c in e["changes"].as_array().unwrap() {
                let i: usize = c["field"].as_str().unwrap()[1..].parse().unwrap();
                prop_assert_eq!(&now[i], &c["from"]);
                prop_assert_ne!(&c["from"], &c["to"]);
                now[i] = c["to"].clone();
            }
            let want: Vec<Value> = new.iter().map(plain).collect();
            prop_assert_eq!(now, want);
        }
    }
}
