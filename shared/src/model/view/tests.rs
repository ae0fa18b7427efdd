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
