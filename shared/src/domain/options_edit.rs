//! A select field's new option list, as `PATCH /projects/{id}/fields/{field_id}` gives it:
//! labels kept, added, renamed (`{"label","was"}`), reordered; a label the list no longer
//! names is removed. [`plan`] turns it into what has to change on issues and in the index.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::FieldError;
use super::values::{FieldType, check_field_def};

/// One entry of the new list: a label (kept if the field has it, else added), or a label
/// with the one it renames.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum OptionEntry {
    Label(String),
    Renamed(Renamed),
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Renamed {
    pub label: String,
    #[serde(default)]
    pub was: Option<String>,
}

impl OptionEntry {
    fn label(&self) -> &str {
        match self {
            OptionEntry::Label(l) => l,
            OptionEntry::Renamed(r) => &r.label,
        }
    }

    /// The current label this entry continues, if any.
    fn source<'a>(&'a self, old: &[String]) -> Option<&'a str> {
        match self {
            OptionEntry::Renamed(Renamed { was: Some(w), .. }) => Some(w),
            _ => old
                .iter()
                .any(|o| o == self.label())
                .then_some(self.label()),
        }
    }
}

/// What values an edit changes on issues: each renamed label's new label, and the labels
/// removed. Stored on the field while its column is rebuilt, and read by the job that
/// rewrites the issues.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueChanges {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub renames: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub removed: BTreeSet<String>,
}

impl ValueChanges {
    pub fn is_empty(&self) -> bool {
        self.renames.is_empty() && self.removed.is_empty()
    }

    /// What `value` becomes: `Some(new)` for a renamed label, `None` for a removed one;
    /// `Some(value)` for any other.
    pub fn apply<'a>(&'a self, value: &'a str) -> Option<&'a str> {
        if self.removed.contains(value) {
            return None;
        }
        Some(self.renames.get(value).map_or(value, String::as_str))
    }
}

/// What an options edit does to a saved view's `where` (a JSON array of
/// `[column, operator, value]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhereFate {
    /// It names none of the changed labels of the field.
    Unchanged,
    /// It names a renamed label: the same `where` with the new labels.
    Follows(String),
    /// It names a removed label: the view is deleted.
    Deleted,
}

impl ValueChanges {
    /// What becomes of the `where` `raw` when `field`'s labels change so.
    pub fn where_fate(&self, raw: &str, field: &str) -> WhereFate {
        let Ok(mut conditions) = serde_json::from_str::<Vec<serde_json::Value>>(raw) else {
            return WhereFate::Unchanged;
        };
        let mut changed = false;
        for condition in &mut conditions {
            let Some(parts) = condition.as_array_mut() else {
                continue;
            };
            if parts.first().and_then(|c| c.as_str()) != Some(field) {
                continue;
            }
            let Some(value) = parts.get_mut(2) else {
                continue;
            };
            let labels: Vec<&mut serde_json::Value> = match value {
                serde_json::Value::Array(values) => values.iter_mut().collect(),
                one => vec![one],
            };
            for label in labels {
                let Some(text) = label.as_str() else { continue };
                match self.apply(text) {
                    None => return WhereFate::Deleted,
                    Some(now) if now != text => {
                        *label = serde_json::Value::String(now.to_string());
                        changed = true;
                    }
                    Some(_) => {}
                }
            }
        }
        match changed {
            true => WhereFate::Follows(serde_json::Value::Array(conditions).to_string()),
            false => WhereFate::Unchanged,
        }
    }
}

/// The edit, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionsPlan {
    /// The new list, in sort order.
    pub options: Vec<String>,
    pub changes: ValueChanges,
    /// Whether any kept label's place changed (a reorder, an insertion before it, a removal
    /// before it): its values' sort keys change, so the column is rebuilt.
    pub moved: bool,
}

impl OptionsPlan {
    /// Whether the field's column and issues need the field job: labels moved, renamed or
    /// removed. Labels added after the last kept one need nothing.
    pub fn needs_rebuild(&self) -> bool {
        self.moved || !self.changes.is_empty()
    }
}

/// Plans `new` against the field's current labels `old`, or says what is wrong with it.
pub fn plan(old: &[String], new: &[OptionEntry]) -> Result<OptionsPlan, Vec<FieldError>> {
    let options: Vec<String> = new.iter().map(|e| e.label().to_string()).collect();
    let mut errors: Vec<FieldError> = check_field_def("x", FieldType::Select, Some(&options))
        .into_iter()
        .map(|(f, m)| FieldError::new(f, m))
        .collect();
    let mut sources: Vec<Option<&str>> = Vec::with_capacity(new.len());
    for (i, entry) in new.iter().enumerate() {
        let source = entry.source(old);
        if let OptionEntry::Renamed(Renamed { was: Some(w), .. }) = entry
            && !old.contains(w)
        {
            errors.push(FieldError::new(
                format!("options[{i}].was"),
                "is not one of the field's labels",
            ));
        }
        // A label the field has may only continue itself: were it to name another option in
        // the same edit, an issue's value could not tell the old option from the new.
        if old.iter().any(|o| o == entry.label()) && source != Some(entry.label()) {
            errors.push(FieldError::new(
                format!("options[{i}].label"),
                "is a label of another option; rename in two steps",
            ));
        }
        if source.is_some() && sources.contains(&source) {
            errors.push(FieldError::new(
                format!("options[{i}]"),
                "continues a label an earlier entry continues",
            ));
        }
        sources.push(source);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut changes = ValueChanges::default();
    for (entry, source) in new.iter().zip(&sources) {
        if let Some(s) = source
            && *s != entry.label()
        {
            changes
                .renames
                .insert(s.to_string(), entry.label().to_string());
        }
    }
    changes.removed = old
        .iter()
        .filter(|o| !sources.contains(&Some(o.as_str())))
        .cloned()
        .collect();
    let moved = sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, old.iter().position(|o| Some(o.as_str()) == *s)?)))
        .any(|(new_at, old_at)| new_at != old_at);
    Ok(OptionsPlan {
        options,
        changes,
        moved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    fn entries(json: serde_json::Value) -> Vec<OptionEntry> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn appending_needs_nothing_renaming_and_removing_rewrite_reordering_moves() {
        let old = labels(&["low", "mid", "high"]);
        let add = plan(
            &old,
            &entries(serde_json::json!(["low", "mid", "high", "urgent"])),
        )
        .unwrap();
        assert!(!add.needs_rebuild());
        let rename = plan(
            &old,
            &entries(serde_json::json!(["low", {"label": "medium", "was": "mid"}, "high"])),
        )
        .unwrap();
        assert_eq!(rename.changes.renames["mid"], "medium");
        assert!(!rename.moved && rename.needs_rebuild());
        let remove = plan(&old, &entries(serde_json::json!(["low", "high"]))).unwrap();
        assert_eq!(remove.changes.removed, BTreeSet::from(["mid".to_string()]));
        assert!(remove.moved, "high moved up a place");
        let reorder = plan(&old, &entries(serde_json::json!(["high", "mid", "low"]))).unwrap();
        assert!(reorder.moved && reorder.changes.is_empty());
        let swap = serde_json::json!([
            "low", {"label": "high", "was": "mid"}, {"label": "mid", "was": "high"}
        ]);
        assert!(
            plan(&old, &entries(swap)).is_err(),
            "labels are not swapped in one edit"
        );
    }

    #[test]
    fn a_where_follows_a_rename_and_dies_with_a_removal() {
        let changes = ValueChanges {
            renames: BTreeMap::from([("mid".to_string(), "medium".to_string())]),
            removed: BTreeSet::from(["low".to_string()]),
        };
        let f = "01JDQ5S0000000000000000F01";
        let other = r#"[["title", "prefix", "mid"]]"#;
        assert_eq!(changes.where_fate(other, f), WhereFate::Unchanged);
        let renamed = format!(r#"[["{f}", "in", ["mid", "high"]], ["state", "eq", "open"]]"#);
        assert_eq!(
            changes.where_fate(&renamed, f),
            WhereFate::Follows(format!(
                r#"[["{f}","in",["medium","high"]],["state","eq","open"]]"#
            ))
        );
        let removed = format!(r#"[["{f}", "eq", "low"]]"#);
        assert_eq!(changes.where_fate(&removed, f), WhereFate::Deleted);
    }

    #[test]
    fn bad_lists_are_refused() {
        let old = labels(&["a", "b"]);
        for bad in [
            serde_json::json!([]),
            serde_json::json!(["a", "a"]),
            serde_json::json!(["a", {"label": "c", "was": "zzz"}]),
            serde_json::json!(["a", {"label": "c", "was": "a"}]),
            serde_json::json!([""]),
        ] {
            assert!(plan(&old, &entries(bad.clone())).is_err(), "{bad}");
        }
        assert!(
            serde_json::from_value::<Vec<OptionEntry>>(
                serde_json::json!([{"label": "x", "other": 1}])
            )
            .is_err()
        );
    }

    proptest! {
        /// Every current label ends up exactly once: kept (possibly renamed) or removed; and
        /// an issue's value maps to a label of the new list or to nothing.
        #[test]
        fn every_old_label_is_kept_renamed_or_removed(
            old in proptest::collection::btree_set("[a-e]{1,2}", 1..6),
            picks in proptest::collection::vec((0usize..8, "[a-g]{1,2}", any::<bool>()), 1..8),
        ) {
            let old: Vec<String> = old.into_iter().collect();
            let new: Vec<OptionEntry> = picks
                .iter()
                .map(|(i, label, rename)| match old.get(*i) {
                    Some(was) if *rename => OptionEntry::Renamed(Renamed {
                        label: label.clone(),
                        was: Some(was.clone()),
                    }),
                    _ => OptionEntry::Label(label.clone()),
                })
                .collect();
            if let Ok(p) = plan(&old, &new) {
                for o in &old {
                    // A label of the new list that the field had continues itself.
                    if p.options.contains(o) {
                        prop_assert_eq!(p.changes.apply(o), Some(o.as_str()));
                    }
                    match p.changes.apply(o) {
                        Some(now) => prop_assert!(p.options.iter().any(|l| l == now)),
                        None => prop_assert!(p.changes.removed.contains(o)),
                    }
                }
                let unchanged = p.options == old;
                prop_assert_eq!(unchanged, !p.needs_rebuild() && p.options.len() == old.len());
            }
        }
    }
}
