use super::*;
use crate::domain::ids::FieldId;

fn defs() -> Vec<FieldDef> {
    [FieldType::Number, FieldType::Select]
        .into_iter()
        .enumerate()
        .map(|(i, t)| FieldDef {
            id: FieldId::numbered(i as u64 + 1),
            name: format!("f{i}"),
            field_type: t,
            options: (t == FieldType::Select)
                .then(|| vec!["low".into(), "mid".into(), "high".into()]),
            sortable: true,
        })
        .collect()
}

fn fid(n: u64) -> String {
    FieldId::numbered(n).to_string()
}

fn body(json: serde_json::Value) -> NewViewBody {
    serde_json::from_value(json).unwrap()
}

#[test]
fn a_view_takes_the_grids_defaults() {
    let (spec, checked) = body(serde_json::json!({"name": "All"}))
        .spec(&defs())
        .unwrap();
    assert_eq!(spec.filter, "[]");
    assert_eq!(spec.sort, "num");
    assert!(!spec.descending && spec.state.is_none() && spec.group_by.is_none());
    assert!(checked.filter.is_empty() && checked.grouping.is_none());
    assert_eq!(checked.sort, Column::Num);
}

#[test]
fn every_bad_member_is_named() {
    let number = fid(1);
    let b = body(serde_json::json!({
        "name": "",
        "where": [["colour", "eq", "red"]],
        "sort": "nope",
        "order": "up",
        "state": "done",
        "group_by": number,
    }));
    let errors = b.spec(&defs()).unwrap_err();
    let mut fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    fields.sort();
    assert_eq!(
        fields,
        ["group_by", "name", "order", "sort", "state", "where[0]"]
    );
}

#[test]
fn a_view_groups_by_state_or_a_select_field_with_its_options_then_none() {
    let select = fid(2);
    let (_, checked) = body(serde_json::json!({"name": "Board", "group_by": select}))
        .spec(&defs())
        .unwrap();
    let values = checked.grouping.unwrap().values();
    assert_eq!(
        values,
        [
            Some("low".into()),
            Some("mid".into()),
            Some("high".into()),
            None
        ]
    );
    let (_, checked) = body(serde_json::json!({"name": "Board", "group_by": "state"}))
        .spec(&defs())
        .unwrap();
    assert_eq!(
        checked.grouping.unwrap().values(),
        [Some("closed".into()), Some("open".into()), None]
    );
}

#[test]
fn a_patch_keeps_what_it_does_not_name_and_null_restores_a_default() {
    let number = fid(1);
    // The `where` is kept as given: its numbers keep their digits.
    let raw = format!(
        r#"{{"name": "Mine", "sort": "{number}", "order": "desc", "state": "open",
            "where": [["{number}","gt",1.0000000000000000000000000000000000001E+100]]}}"#
    );
    let (spec, _) = serde_json::from_str::<NewViewBody>(&raw)
        .unwrap()
        .spec(&defs())
        .unwrap();
    assert_eq!(
        spec.filter,
        format!(r#"[["{number}","gt",1.0000000000000000000000000000000000001E+100]]"#)
    );
    let patch: ViewPatchBody =
        serde_json::from_value(serde_json::json!({"name": "Ours", "order": null})).unwrap();
    let (next, _) = patch.apply(&spec, &defs()).unwrap();
    assert_eq!(next.name, "Ours");
    assert!(!next.descending);
    assert_eq!(
        (next.sort.as_str(), next.state),
        (number.as_str(), spec.state)
    );
    let patch: ViewPatchBody = serde_json::from_value(serde_json::json!({"name": null})).unwrap();
    assert_eq!(patch.apply(&spec, &defs()).unwrap_err()[0].field, "name");
}

#[test]
fn the_shape_follows_what_the_list_derives_from_and_not_the_name() {
    let spec_of = |json: serde_json::Value| {
        let (spec, checked) = body(json).spec(&defs()).unwrap();
        spec.shape(&checked)
    };
    let a = spec_of(serde_json::json!({"name": "a", "where": [["title", "eq", "X"]]}));
    let renamed = spec_of(serde_json::json!({"name": "b", "where": [["title", "eq", "x"]]}));
    assert_eq!(a, renamed, "a rename and another spelling keep the shape");
    let desc =
        spec_of(serde_json::json!({"name": "a", "where": [["title", "eq", "X"]], "order": "desc"}));
    assert_ne!(a, desc);
    let grouped = spec_of(
        serde_json::json!({"name": "a", "where": [["title", "eq", "X"]], "group_by": "state"}),
    );
    assert_ne!(a, grouped);
}

fn indexed(json: serde_json::Value, rev: u64) -> IndexedView {
    let (spec, checked) = body(json).spec(&defs()).unwrap();
    IndexedView {
        id: crate::domain::ids::ProjectId::numbered(77).to_string(),
        rev,
        state: spec.state,
        checked,
    }
}

fn an_issue(points: Option<&str>, option: Option<&str>) -> crate::domain::Issue {
    use crate::domain::values::StoredValue;
    let mut fields = std::collections::BTreeMap::new();
    if let Some(p) = points {
        fields.insert(
            FieldId::numbered(1),
            StoredValue::N(crate::domain::decimal::DynNumber::parse(p).unwrap()),
        );
    }
    if let Some(o) = option {
        fields.insert(FieldId::numbered(2), StoredValue::S(o.into()));
    }
    crate::domain::Issue {
        id: crate::domain::ids::IssueId::numbered(5),
        project_id: crate::domain::ids::ProjectId::numbered(1),
        num: 5,
        title: "Five".into(),
        state: IssueState::Open,
        description: None,
        fields,
        participants: Vec::new(),
        version: 1,
        created_at: "2026-11-21T10:00:00.000Z".into(),
        updated_at: "2026-11-21T10:00:00.000Z".into(),
        parent_id: None,
    }
}

#[test]
fn an_issue_in_a_grouped_view_has_its_list_and_group_columns_with_its_sort_value() {
    use crate::keys::index::{Shards, view_column, view_group_column};
    use crate::model::basis::{Basis, Hot};
    let (number, select) = (fid(1), fid(2));
    let view = indexed(
        serde_json::json!({"name": "Board", "where": [[number, "gt", 1]], "sort": number,
            "group_by": select, "state": "open"}),
        3,
    );
    let issue = an_issue(Some("2.5"), Some("high"));
    let record = IssueRecord::of(&issue);
    let hot = Hot::Only(Default::default());
    let basis = Basis::of_record(&record, &defs(), Shards::ONE, &hot).with_views(
        &record,
        &defs(),
        std::slice::from_ref(&view),
    );
    let value = basis.columns[&number].clone();
    assert!(value.is_some());
    assert_eq!(basis.columns[&view_column(&view.id, 3)], value);
    let group = view_group_column(&view.id, 3, &crate::encoding::select(2));
    assert_eq!(basis.columns[&group], value);
    // Its entries in the view's partitions carry the summary, though no column is hot.
    let tenant = crate::domain::ids::TenantId::parse("acme").unwrap();
    let entries = basis.entries(&tenant, &issue.id);
    let in_view: Vec<_> = entries
        .iter()
        .filter(|e| e.pk.contains(&view_column(&view.id, 3)))
        .collect();
    assert_eq!(in_view.len(), 1);
    assert!(in_view[0].summary.is_some());
    // Out of the view: no columns. Without the option's value: the group of none.
    let out = an_issue(Some("0.5"), Some("high"));
    assert!(
        view.columns(&IssueRecord::of(&out), &basis.columns)
            .is_empty()
    );
    let no_option = an_issue(Some("9"), None);
    assert_eq!(
        view.group_key(&IssueRecord::of(&no_option)).as_deref(),
        Some(NO_GROUP)
    );
}

#[test]
fn a_commit_counts_the_views_an_issue_enters_and_leaves_and_only_live_ones() {
    use crate::keys::index::Shards;
    use crate::model::basis::{Basis, Hot};
    use counts::{LiveViews, count_deltas};
    let (number, select) = (fid(1), fid(2));
    let view = indexed(
        serde_json::json!({"name": "Board", "where": [[number, "gt", 1]], "group_by": select}),
        3,
    );
    let basis_of = |issue: &crate::domain::Issue| {
        let record = IssueRecord::of(issue);
        Basis::of_record(&record, &defs(), Shards::ONE, &Hot::All).with_views(
            &record,
            &defs(),
            std::slice::from_ref(&view),
        )
    };
    let live: LiveViews = [(view.id.clone(), 3)].into();
    let high = basis_of(&an_issue(Some("2"), Some("high")));
    let low = basis_of(&an_issue(Some("2"), Some("low")));
    let out = basis_of(&an_issue(Some("0"), Some("low")));
    let key = (view.id.clone(), 3);
    // Created in the view: +1 in all and in its group.
    let d = count_deltas(None, Some(&high), &live);
    assert_eq!(d[&key].total, 1);
    assert_eq!(d[&key].groups, [("002".to_string(), 1)].into());
    // Moved between groups: the total stays.
    let d = count_deltas(Some(&high), Some(&low), &live);
    assert_eq!(d[&key].total, 0);
    assert_eq!(
        d[&key].groups,
        [("000".to_string(), 1), ("002".to_string(), -1)].into()
    );
    // Left the view, then deleted while out: nothing more.
    assert_eq!(count_deltas(Some(&low), Some(&out), &live)[&key].total, -1);
    assert!(count_deltas(Some(&out), None, &live).is_empty());
    // Unchanged, or a view rebuilt since (another shape): nothing.
    assert!(count_deltas(Some(&high), Some(&high), &live).is_empty());
    let rebuilt: LiveViews = [(view.id.clone(), 4)].into();
    assert!(count_deltas(None, Some(&high), &rebuilt).is_empty());
}
