//! A patch as one UpdateItem of the issue item: its update and condition expressions, built
//! apart from the SDK so their size is testable (DynamoDB's 4 KB per expression).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;

use super::items::{attr, fields_attr, value_to_attr};
use crate::domain::ids::FieldId;
use crate::domain::values::StoredValue;
use crate::domain::{Issue, IssuePatch};

/// DynamoDB's limit on one expression string.
pub const MAX_EXPRESSION_BYTES: usize = 4096;
/// An update's expression and substitutions, built apart from the SDK so its size is testable.
#[derive(Debug, Clone, Default)]
pub struct UpdateParts {
    pub update: String,
    pub condition: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

/// The update of a patch's issue item.
///
/// Small patches update only the members they name (`SET #f.#a0 = :a0`, `REMOVE #f.#r0`), so
/// concurrent patches to different members both survive without a read. With short
/// placeholders that covers some 250 fields; a patch whose expression would still pass
/// DynamoDB's 4 KB (up to 400 fields at once) writes the whole map instead: `base` merged with
/// the patch, conditioned on `base`'s version, and the caller re-reads, re-merges and retries
/// when another write got in first — so nothing is lost either way. `None` with `base` absent
/// means the patch needs a base.
pub fn patch_update(
    patch: &IssuePatch,
    expected_version: Option<u64>,
    now: &str,
    base: Option<&Issue>,
) -> Option<UpdateParts> {
    let mut expr = scalar_updates(patch, now);
    let condition = match expected_version {
        Some(v) => {
            expr.value(":expected", AttributeValue::N(v.to_string()));
            VERSION_CONDITION.to_string()
        }
        None => "attribute_exists(PK)".to_string(),
    };
    let mut parts = if patch.clear_fields {
        // The whole map is replaced; paths inside it cannot be set in the same expression.
        expr.set("#f = :f");
        expr.value(":f", fields_attr(&patch.set_fields));
        expr.finish(condition)
    } else {
        let keyed = keyed_fields(expr.clone(), patch);
        if keyed.len() <= MAX_EXPRESSION_BYTES {
            let condition = match differs(patch) {
                Some(d) if condition.len() + d.len() + 5 <= MAX_EXPRESSION_BYTES => {
                    format!("{condition} AND {d}")
                }
                _ => condition,
            };
            keyed.finish(condition)
        } else {
            // Too many keys for one expression: the whole map, merged from `base`.
            whole_map(expr, patch, expected_version, condition, base?)
        }
    };
    parent_condition(patch, base, &mut parts);
    Some(parts)
}

/// `parts` record `actor` as the user who made the version they write (every patch's update
/// starts with `SET`).
pub fn with_actor(mut parts: UpdateParts, actor: &str) -> UpdateParts {
    parts.update = parts.update.replacen("SET ", "SET #by = :by, ", 1);
    parts.names.insert("#by".into(), attr::UPDATED_BY.into());
    parts
        .values
        .insert(":by".into(), AttributeValue::S(actor.into()));
    parts
}

/// The condition of a write that must find the issue at an expected version.
const VERSION_CONDITION: &str = "attribute_exists(PK) AND #v = :expected";

/// An update expression being built: its SET and REMOVE clauses and their substitutions.
#[derive(Clone, Default)]
struct Expression {
    sets: Vec<String>,
    removes: Vec<String>,
    parts: UpdateParts,
}

impl Expression {
    fn name(&mut self, placeholder: &str, name: &str) {
        self.parts.names.insert(placeholder.into(), name.into());
    }

    fn value(&mut self, placeholder: &str, value: AttributeValue) {
        self.parts.values.insert(placeholder.into(), value);
    }

    fn set(&mut self, clause: impl Into<String>) {
        self.sets.push(clause.into());
    }

    /// The expression's length as `finish` writes it (counting a REMOVE clause either way).
    fn len(&self) -> usize {
        "SET ".len()
            + self.sets.iter().map(|x| x.len() + 2).sum::<usize>()
            + " REMOVE ".len()
            + self.removes.iter().map(|x| x.len() + 2).sum::<usize>()
            + " ADD #v :one, #dr :one".len()
            // What `with_actor` adds.
            + "#by = :by, ".len()
    }

    fn finish(self, condition: String) -> UpdateParts {
        let mut update = format!("SET {}", self.sets.join(", "));
        if !self.removes.is_empty() {
            update.push_str(&format!(" REMOVE {}", self.removes.join(", ")));
        }
        update.push_str(" ADD #v :one");
        if self.parts.names.contains_key("#dr") {
            update.push_str(", #dr :one");
        }
        UpdateParts {
            update,
            condition,
            ..self.parts
        }
    }
}

/// What every patch sets (the time, the version) and its title and state.
fn scalar_updates(patch: &IssuePatch, now: &str) -> Expression {
    let mut expr = Expression::default();
    expr.name("#u", attr::UPDATED_AT);
    expr.name("#v", attr::VERSION);
    expr.value(":now", AttributeValue::S(now.into()));
    expr.value(":one", AttributeValue::N("1".into()));
    expr.set("#u = :now");
    if let Some(title) = &patch.title {
        expr.set("#t = :t");
        expr.name("#t", attr::TITLE);
        expr.value(":t", AttributeValue::S(title.clone()));
    }
    if let Some(state) = patch.state {
        expr.set("#s = :s");
        expr.name("#s", attr::STATE);
        expr.value(":s", AttributeValue::S(state.as_str().into()));
    }
    if patch.clear_fields || !patch.set_fields.is_empty() || !patch.remove_fields.is_empty() {
        expr.name("#f", attr::FIELDS);
    }
    // The description is an item of its own: its change is marked on the issue item, which
    // is what the stream carries (see `crate::model::history`).
    if patch.description.is_some() {
        expr.name("#dr", attr::DESCRIPTION_REV);
    }
    match &patch.parent {
        None => {}
        Some(parent) => {
            expr.name("#pa", attr::PARENT_ID);
            match parent {
                Some(p) => {
                    expr.set("#pa = :pa");
                    expr.value(":pa", AttributeValue::S(p.to_string()));
                }
                None => expr.removes.push("#pa".into()),
            }
        }
    }
    expr
}

/// `condition` also holding the issue to the parent `base` has (a parent change is checked
/// against the tree as `base` stood in it).
fn parent_condition(patch: &IssuePatch, base: Option<&Issue>, parts: &mut UpdateParts) {
    let (Some(_), Some(base)) = (&patch.parent, base) else {
        return;
    };
    parts.names.insert("#pa".into(), attr::PARENT_ID.into());
    match &base.parent_id {
        Some(p) => {
            parts.condition.push_str(" AND #pa = :was_pa");
            parts
                .values
                .insert(":was_pa".into(), AttributeValue::S(p.to_string()));
        }
        None => parts.condition.push_str(" AND attribute_not_exists(#pa)"),
    }
}

/// A condition that the keyed update of `patch` changes something in the item as it is when
/// it lands (a request that read other values may find the issue already as it asks: then it
/// writes no version, and no history entry of no changes). `None` when the patch changes what
/// the item alone does not show (the description, the parent: their own conditions hold).
fn differs(patch: &IssuePatch) -> Option<String> {
    if patch.description.is_some() || patch.parent.is_some() || patch.clear_fields {
        return None;
    }
    let mut terms = Vec::new();
    if patch.title.is_some() {
        terms.push("#t <> :t".to_string());
    }
    if patch.state.is_some() {
        terms.push("#s <> :s".to_string());
    }
    for i in 0..patch.set_fields.len() {
        terms.push(format!("attribute_not_exists(#f.#a{i})"));
        terms.push(format!("#f.#a{i} <> :a{i}"));
    }
    for i in 0..patch.remove_fields.len() {
        terms.push(format!("attribute_exists(#f.#r{i})"));
    }
    // One flat disjunction: DynamoDB refuses redundant parentheses.
    match terms.len() {
        0 => None,
        1 => terms.pop(),
        _ => Some(format!("({})", terms.join(" OR "))),
    }
}

/// `expr` with each set and removed field value as its own path (`#f.#a0`, `#f.#r0`).
fn keyed_fields(mut expr: Expression, patch: &IssuePatch) -> Expression {
    for (i, (id, value)) in patch.set_fields.iter().enumerate() {
        expr.set(format!("#f.#a{i} = :a{i}"));
        expr.name(&format!("#a{i}"), id);
        expr.value(&format!(":a{i}"), value_to_attr(value));
    }
    for (i, id) in patch.remove_fields.iter().enumerate() {
        expr.removes.push(format!("#f.#r{i}"));
        expr.name(&format!("#r{i}"), id);
    }
    expr
}

/// `expr` writing the whole values map, `base`'s merged with the patch, conditioned on
/// `base`'s version when the caller gave none.
fn whole_map(
    mut expr: Expression,
    patch: &IssuePatch,
    expected_version: Option<u64>,
    mut condition: String,
    base: &Issue,
) -> UpdateParts {
    let mut fields: BTreeMap<FieldId, StoredValue> = base.fields.clone();
    fields.retain(|k, _| {
        !patch.remove_fields.contains(k)
            && patch
                .project_fields
                .as_ref()
                .is_none_or(|known| known.contains(k))
    });
    fields.extend(patch.set_fields.clone());
    expr.set("#f = :f");
    expr.value(":f", fields_attr(&fields));
    if expected_version.is_none() {
        expr.value(":expected", AttributeValue::N(base.version.to_string()));
        condition = VERSION_CONDITION.into();
    }
    expr.finish(condition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::IssueState;
    use crate::domain::ids::{IssueId, ProjectId};

    fn issue(fields: BTreeMap<FieldId, StoredValue>) -> Issue {
        Issue {
            id: IssueId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap(),
            project_id: ProjectId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAW").unwrap(),
            num: 1,
            title: "t".into(),
            state: IssueState::Open,
            description: None,
            fields,
            participants: Vec::new(),
            version: 7,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
            parent_id: None,
        }
    }

    fn ids(n: usize) -> Vec<FieldId> {
        (0..n)
            .filter_map(|i| FieldId::parse(&format!("01ARZ3NDEKTSV4RRFFQ69G{i:04}")))
            .collect()
    }

    #[test]
    fn a_patch_of_every_field_fits_in_one_expression() {
        let text = StoredValue::S("w".repeat(1024));
        for n in [1, 100, 250, 400] {
            let set = IssuePatch {
                title: Some("t".into()),
                state: Some(IssueState::Closed),
                set_fields: ids(n).into_iter().map(|k| (k, text.clone())).collect(),
                ..Default::default()
            };
            let remove = IssuePatch {
                remove_fields: ids(n).into_iter().collect(),
                ..Default::default()
            };
            let half = IssuePatch {
                set_fields: ids(n / 2).into_iter().map(|k| (k, text.clone())).collect(),
                remove_fields: ids(n).into_iter().skip(n / 2).collect(),
                ..Default::default()
            };
            let base = issue(ids(n).into_iter().map(|k| (k, text.clone())).collect());
            for (patch, expected) in [(&set, None), (&remove, None), (&half, Some(7))] {
                let parts = patch_update(patch, expected, "now", Some(&base)).unwrap();
                assert!(
                    parts.update.len() <= MAX_EXPRESSION_BYTES,
                    "{n}: {} bytes",
                    parts.update.len()
                );
                assert!(parts.condition.len() <= MAX_EXPRESSION_BYTES);
                // Every placeholder the expressions use is defined, and none is left over.
                let text = format!("{} {}", parts.update, parts.condition);
                for k in parts.names.keys().chain(parts.values.keys()) {
                    assert!(
                        text.split(|c: char| !(c.is_alphanumeric() || c == '#' || c == ':'))
                            .any(|w| w == k),
                        "{k} unused"
                    );
                }
            }
        }
    }

    #[test]
    fn small_patches_touch_only_their_keys_and_large_ones_merge_on_the_version() {
        let base = issue(
            ids(3)
                .into_iter()
                .map(|k| (k, StoredValue::S("x".into())))
                .collect(),
        );
        let small = IssuePatch {
            set_fields: [(ids(1)[0].clone(), StoredValue::S("y".into()))].into(),
            ..Default::default()
        };
        let parts = patch_update(&small, None, "now", None).unwrap();
        // Written only if it changes something when it lands.
        assert_eq!(
            parts.condition,
            "attribute_exists(PK) AND (attribute_not_exists(#f.#a0) OR #f.#a0 <> :a0)"
        );
        assert!(parts.update.contains("#f.#a0 = :a0"));

        let large = IssuePatch {
            set_fields: ids(400)
                .into_iter()
                .map(|k| (k, StoredValue::S("y".into())))
                .collect(),
            ..Default::default()
        };
        assert!(patch_update(&large, None, "now", None).is_none());
        let parts = patch_update(&large, None, "now", Some(&base)).unwrap();
        assert!(parts.condition.contains("#v = :expected"));
        assert_eq!(parts.values[":expected"], AttributeValue::N("7".into()));
        let AttributeValue::M(m) = &parts.values[":f"] else {
            panic!("a map")
        };
        assert_eq!(m.len(), 400);
    }

    #[test]
    fn a_whole_map_write_drops_values_of_fields_the_project_no_longer_has() {
        // `gone` was deleted after the issue was read; the indexer may already have swept it.
        let gone = FieldId::parse("01ARZ3NDEKTSV4RRFFQ69GG0NE").unwrap();
        let mut fields: BTreeMap<FieldId, StoredValue> = ids(3)
            .into_iter()
            .map(|k| (k, StoredValue::S("x".into())))
            .collect();
        fields.insert(gone.clone(), StoredValue::S("stale".into()));
        let base = issue(fields);
        let large = IssuePatch {
            set_fields: ids(400)
                .into_iter()
                .map(|k| (k, StoredValue::S("y".into())))
                .collect(),
            project_fields: Some(ids(400).into_iter().collect()),
            ..Default::default()
        };
        let parts = patch_update(&large, None, "now", Some(&base)).unwrap();
        let AttributeValue::M(m) = &parts.values[":f"] else {
            panic!("a map")
        };
        assert_eq!(m.len(), 400);
        assert!(!m.contains_key(gone.as_str()));
    }
}
