//! Filtered pages sorted by `num`: the source partition an equality selects may differ from
//! one page to the next, and a position resumes at the same issue number in either.

use crate::domain::ids::{FieldId, ProjectId};
use crate::domain::values::{FieldDef, FieldType};
use crate::encoding;
use crate::keys;
use crate::model::Column;

fn fid(n: u64) -> String {
    FieldId::numbered(n).to_string()
}

/// A select field (`low`, `mid`, `high`) as field 3, beside three others.
fn defs() -> Vec<FieldDef> {
    [
        FieldType::Text,
        FieldType::Number,
        FieldType::Select,
        FieldType::Date,
    ]
    .into_iter()
    .enumerate()
    .map(|(i, t)| FieldDef {
        id: FieldId::numbered(i as u64 + 1),
        name: format!("f{i}"),
        field_type: t,
        options: (t == FieldType::Select).then(|| vec!["low".into(), "mid".into(), "high".into()]),
        sortable: true,
    })
    .collect()
}

/// A grid query sorted by `num` with an equality on the select field, its field sortable or
/// not (function instances learn that a few seconds apart).
fn by_num_with_option(sortable: bool, desc: bool) -> super::GridQuery {
    let mut defs = defs();
    defs[2].sortable = sortable;
    let filter = format!(r#"[["{}","eq","high"]]"#, fid(3));
    let params = super::GridParams {
        order: desc.then_some("desc"),
        filter: Some(&filter),
        ..Default::default()
    };
    super::parse(&ProjectId::numbered(1), &params, &defs).unwrap()
}

#[test]
fn a_position_resumes_at_the_same_number_whichever_source_reads_it() {
    let from_field = by_num_with_option(true, false);
    let from_num = by_num_with_option(false, false);
    assert_eq!(from_field.source, Column::Field(fid(3)));
    assert_eq!(from_num.source, Column::Num);
    assert_eq!(from_field.canonical, from_num.canonical, "one binding");
    let at = |sk: String| {
        crate::cursor::Position::from([
            (keys::SK.to_string(), sk),
            (super::PHASE_MEMBER.to_string(), "v".to_string()),
        ])
    };
    let field_sk = keys::index::value_sk(&encoding::select(2), 7);
    let num_sk = keys::index::value_sk(&format!("{:020}", 7), 7);
    let moved = from_num.resume_at(Some(at(field_sk.clone()))).unwrap();
    assert_eq!(moved[keys::SK], num_sk);
    let moved = from_field.resume_at(Some(at(num_sk))).unwrap();
    assert_eq!(moved[keys::SK], field_sk);
}

#[test]
fn a_position_past_the_values_ends_a_source_without_missing_entries() {
    let from_field = by_num_with_option(true, true);
    let past = crate::cursor::Position::from([(super::PHASE_MEMBER.to_string(), "m".to_string())]);
    let start = from_field.resume_at(Some(past));
    let fetch = |_, _| async {
        panic!("nothing is left to read");
        #[allow(unreachable_code)]
        Ok::<_, ()>(crate::store::Page {
            items: Vec::new(),
            next: None,
        })
    };
    let pks = ["p".to_string()];
    let read =
        crate::read::ready(super::read_entries(&from_field, &pks, 10, start, fetch)).unwrap();
    assert!(read.entries.is_empty() && read.next.is_none());
}
