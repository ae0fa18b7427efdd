use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::domain::decimal::DynNumber;
use crate::domain::ids::{FieldId, ParticipantId, ProjectId};
use crate::domain::values::{FieldType, StoredValue};
use crate::domain::{Participant, Role};

fn def(id: u64, t: FieldType) -> FieldDef {
    FieldDef {
        id: FieldId::numbered(id),
        name: format!("f{id}"),
        field_type: t,
        options: (t == FieldType::Select).then(|| vec!["low".into(), "mid".into(), "high".into()]),
        sortable: true,
    }
}

/// A text, a number, a select and a date field.
fn defs() -> Vec<FieldDef> {
    vec![
        def(1, FieldType::Text),
        def(2, FieldType::Number),
        def(3, FieldType::Select),
        def(4, FieldType::Date),
    ]
}

fn fid(n: u64) -> String {
    FieldId::numbered(n).to_string()
}

fn issue(num: u64, title: &str, fields: &[(u64, StoredValue)]) -> Issue {
    Issue {
        id: IssueId::numbered(num),
        project_id: ProjectId::numbered(1),
        num,
        title: title.into(),
        state: IssueState::Open,
        description: None,
        fields: fields
            .iter()
            .map(|(f, v)| (FieldId::numbered(*f), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        participants: Vec::new(),
        version: 1,
        created_at: "2026-11-21T10:00:00.000Z".into(),
        updated_at: "2026-11-21T10:00:00.000Z".into(),
        parent_id: None,
    }
}

fn s(v: &str) -> StoredValue {
    StoredValue::S(v.into())
}

fn n(v: &str) -> StoredValue {
    StoredValue::N(DynNumber::parse(v).unwrap())
}

fn parse(raw: &str) -> Result<Filter, Vec<FieldError>> {
    Filter::parse(raw, &defs())
}

fn matches(raw: &str, issue: &Issue) -> bool {
    parse(raw).unwrap().matches(issue)
}

#[test]
fn each_fault_is_named_by_its_condition() {
    let (text, number, select) = (fid(1), fid(2), fid(3));
    let unknown = fid(9);
    for (raw, field) in [
        ("not json", "where"),
        ("{}", "where"),
        (r#"[["title"]]"#, "where[0]"),
        (r#"[["title","eq","a","b"]]"#, "where[0]"),
        (&format!(r#"[["{unknown}","eq","a"]]"#), "where[0]"),
        (r#"[["title","like","a"]]"#, "where[0]"),
        (
            &format!(r#"[["title","eq","a"],["{number}","prefix","1"]]"#),
            "where[1]",
        ),
        (
            r#"[["participant","lt",{"kind":"user","id":"u"}]]"#,
            "where[0]",
        ),
        (r#"[["parent","prefix","x"]]"#, "where[0]"),
        (r#"[["state","prefix","o"]]"#, "where[0]"),
        (&format!(r#"[["{number}","eq","abc"]]"#), "where[0]"),
        (&format!(r#"[["{number}","eq",true]]"#), "where[0]"),
        (&format!(r#"[["{select}","eq","urgent"]]"#), "where[0]"),
        (&format!(r#"[["{text}","eq",""]]"#), "where[0]"),
        (r#"[["num","eq",1.5]]"#, "where[0]"),
        (r#"[["num","eq","7"]]"#, "where[0]"),
        (r#"[["state","eq","pending"]]"#, "where[0]"),
        (r#"[["created_at","gt","yesterday"]]"#, "where[0]"),
        (r#"[["parent","eq","not-an-id"]]"#, "where[0]"),
        (
            r#"[["participant","eq",{"kind":"robot","id":"u"}]]"#,
            "where[0]",
        ),
        (
            r#"[["participant","eq",{"kind":"user","id":"u","x":1}]]"#,
            "where[0]",
        ),
        (
            r#"[["participant","eq",{"kind":"user","id":"u","role":"boss"}]]"#,
            "where[0]",
        ),
        (r#"[["title","in",[]]]"#, "where[0]"),
        (r#"[["title","in","a"]]"#, "where[0]"),
        (r#"[["title","exists","a"]]"#, "where[0]"),
        (r#"[["title","eq"]]"#, "where[0]"),
        (r#"[[1,"eq","a"]]"#, "where[0]"),
    ] {
        let errors = parse(raw).expect_err(raw);
        assert_eq!(errors.len(), 1, "{raw}: {errors:?}");
        assert_eq!(errors[0].field, field, "{raw}");
    }
    let many = format!("[{}]", [r#"["title","exists"]"#; 11].join(","));
    assert_eq!(parse(&many).unwrap_err()[0].field, "where");
    let ten = format!("[{}]", [r#"["title","exists"]"#; 10].join(","));
    assert!(parse(&ten).is_ok());
    let values: Vec<String> = (0..101).map(|i| format!("\"v{i}\"")).collect();
    let in_101 = format!(r#"[["title","in",[{}]]]"#, values.join(","));
    assert!(parse(&in_101).is_err());
    let in_100 = format!(r#"[["title","in",[{}]]]"#, values[..100].join(","));
    assert!(parse(&in_100).is_ok());
}

#[test]
fn ne_and_missing_match_issues_without_a_value_and_the_rest_do_not() {
    let without = issue(1, "a", &[]);
    let text = fid(1);
    for op in ["eq", "lt", "lte", "gt", "gte", "prefix"] {
        assert!(
            !matches(&format!(r#"[["{text}","{op}","x"]]"#), &without),
            "{op}"
        );
    }
    assert!(!matches(&format!(r#"[["{text}","in",["x"]]]"#), &without));
    assert!(!matches(&format!(r#"[["{text}","exists"]]"#), &without));
    assert!(matches(&format!(r#"[["{text}","ne","x"]]"#), &without));
    assert!(matches(&format!(r#"[["{text}","missing"]]"#), &without));
}

#[test]
fn text_compares_as_it_sorts_and_numbers_by_value() {
    let (text, number, select) = (fid(1), fid(2), fid(3));
    let i = issue(
        1,
        "Crème Brûlée",
        &[(1, s("Alpha")), (2, n("10")), (3, s("mid"))],
    );
    assert!(matches(&format!(r#"[["{text}","eq","ALPHA"]]"#), &i));
    assert!(matches(r#"[["title","prefix","CRE\u0300ME"]]"#, &i));
    assert!(matches(r#"[["title","eq","crème brûlée"]]"#, &i));
    assert!(matches(&format!(r#"[["{number}","gt",9]]"#), &i));
    assert!(matches(&format!(r#"[["{number}","eq","1E+1"]]"#), &i));
    assert!(!matches(&format!(r#"[["{number}","lt","-1"]]"#), &i));
    // Select options compare by their position: low < mid < high.
    assert!(matches(&format!(r#"[["{select}","gt","low"]]"#), &i));
    assert!(matches(&format!(r#"[["{select}","lt","high"]]"#), &i));
    assert!(matches(
        &format!(r#"[["{select}","in",["high","mid"]]]"#),
        &i
    ));
    assert!(matches(r#"[["num","lte",1],["state","eq","open"]]"#, &i));
    assert!(matches(
        r#"[["created_at","lt","2026-11-21T11:00:00.000+00:30"]]"#,
        &i
    ));
    assert!(!matches(
        r#"[["created_at","lt","2026-11-21T11:00:00.000+01:00"]]"#,
        &i
    ));
}

#[test]
fn participants_and_parents_match_by_identity() {
    let mut i = issue(2, "t", &[]);
    i.participants.push(Participant {
        kind: ParticipantKind::User,
        id: ParticipantId::parse("ana").unwrap(),
        role: Role::Assignee,
    });
    i.parent_id = Some(IssueId::numbered(1));
    let parent = IssueId::numbered(1).to_string();
    assert!(matches(
        r#"[["participant","eq",{"kind":"user","id":"ana"}]]"#,
        &i
    ));
    assert!(matches(
        r#"[["participant","eq",{"kind":"user","id":"ana","role":"assignee"}]]"#,
        &i
    ));
    assert!(!matches(
        r#"[["participant","eq",{"kind":"user","id":"ana","role":"watcher"}]]"#,
        &i
    ));
    assert!(!matches(
        r#"[["participant","eq",{"kind":"team","id":"ana"}]]"#,
        &i
    ));
    assert!(matches(
        r#"[["participant","ne",{"kind":"user","id":"bo"}]]"#,
        &i
    ));
    assert!(matches(r#"[["participant","exists"]]"#, &i));
    assert!(matches(&format!(r#"[["parent","eq","{parent}"]]"#), &i));
    assert!(!matches(r#"[["parent","missing"]]"#, &i));
    let orphan = issue(3, "t", &[]);
    assert!(matches(
        &format!(r#"[["parent","ne","{parent}"]]"#),
        &orphan
    ));
    assert!(matches(r#"[["participant","missing"]]"#, &orphan));
}

#[test]
fn equivalent_spellings_share_a_canonical_form() {
    let number = fid(2);
    let a = parse(&format!(
        r#"[["title","in",["B","a"]],["{number}","eq",10]]"#
    ))
    .unwrap();
    let b = parse(&format!(
        r#"[["title","in",["A","b"]],["{number}","eq","1E+1"]]"#
    ))
    .unwrap();
    assert_eq!(a.canonical(), b.canonical());
    let c = parse(r#"[["title","in",["A","c"]]]"#).unwrap();
    assert_ne!(a.canonical(), c.canonical());
}

#[test]
fn state_conditions_choose_the_scopes() {
    let states = |raw: &str| parse(raw).unwrap().states();
    assert_eq!(states("[]").len(), 2);
    assert_eq!(states(r#"[["state","eq","open"]]"#), vec![IssueState::Open]);
    assert_eq!(
        states(r#"[["state","ne","open"]]"#),
        vec![IssueState::Closed]
    );
    assert_eq!(
        states(r#"[["state","lt","open"]]"#),
        vec![IssueState::Closed]
    );
    assert!(states(r#"[["state","eq","open"],["state","eq","closed"]]"#).is_empty());
}

#[test]
fn an_equality_on_a_select_field_is_read_from_its_own_column() {
    let (number, select) = (fid(2), fid(3));
    let f = parse(&format!(
        r#"[["{number}","eq",1],["{select}","eq","high"]]"#
    ))
    .unwrap();
    let (column, _, (from, to)) = f.equality_source().unwrap();
    assert_eq!(column, Column::Field(select));
    assert!(from <= keys::index::value_sk(&encoding::select(2), 7));
    assert!(keys::index::value_sk(&encoding::select(2), 7) <= to);
    assert!(keys::index::value_sk(&encoding::select(1), 7) < from);
    // Text keys order equal values by spelling first: never a source.
    let text = fid(1);
    let t = parse(&format!(r#"[["{text}","eq","a"]]"#)).unwrap();
    assert!(t.equality_source().is_none());
}

/// The index's sort-key value of an issue in a column (as the indexer writes it).
fn encoded(issue: &Issue, column: &Column, defs: &[FieldDef]) -> Option<String> {
    match column {
        Column::Title => Some(encoding::text::encode(&issue.title)),
        Column::Field(id) => {
            let def = defs.iter().find(|d| d.id.as_str() == id)?;
            let v = issue.fields.get(id.as_str())?;
            match v {
                StoredValue::N(n) => Some(encoding::number::encode(n)),
                StoredValue::S(s) if def.field_type == FieldType::Text => {
                    Some(encoding::text::encode(s))
                }
                StoredValue::S(s) => value_key(def, ValueRef::S(s)),
            }
        }
        _ => column_key(&IssueRecord::of(issue), column, None),
    }
}

fn text_value() -> impl Strategy<Value = String> {
    let long = "x".repeat(70);
    prop_oneof![
        Just("alpha".to_string()),
        Just("Alpha".to_string()),
        Just("ALPHA!".to_string()),
        Just("é".to_string()),
        Just("e\u{301}".to_string()),
        Just("b".to_string()),
        Just(format!("{long}a")),
        Just(format!("{long}B")),
    ]
}

fn number_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-1"),
        Just("0"),
        Just("2.5"),
        Just("-0.25"),
        Just("1E+100"),
        Just("10")
    ]
    .prop_map(String::from)
}

prop_compose! {
    fn any_issue()(
        num in 1u64..50,
        title in text_value(),
        text in proptest::option::of(text_value()),
        number in proptest::option::of(number_value()),
        select in proptest::option::of(0usize..3),
    ) -> Issue {
        let mut fields = Vec::new();
        if let Some(t) = text { fields.push((1, s(&t))); }
        if let Some(x) = number { fields.push((2, n(&x))); }
        if let Some(o) = select { fields.push((3, s(["low", "mid", "high"][o]))); }
        issue(num, &title, &fields)
    }
}

/// A condition on one of the sortable columns, with a JSON value of its type.
fn any_condition() -> impl Strategy<Value = String> {
    let ops = prop_oneof![
        Just("eq"),
        Just("ne"),
        Just("lt"),
        Just("lte"),
        Just("gt"),
        Just("gte"),
        Just("in"),
        Just("prefix"),
        Just("exists"),
        Just("missing"),
    ];
    let column = prop_oneof![Just(0usize), Just(1), Just(2), Just(3)];
    (column, ops, text_value(), number_value(), 0usize..3).prop_filter_map(
        "prefix fits text only",
        |(c, op, t, x, o)| {
            let (name, value) = match c {
                0 => ("title".to_string(), serde_json::json!(t)),
                1 => (fid(1), serde_json::json!(t)),
                2 => (fid(2), serde_json::json!(x)),
                _ => (fid(3), serde_json::json!(["low", "mid", "high"][o])),
            };
            if op == "prefix" && c >= 2 {
                return None;
            }
            Some(match op {
                "exists" | "missing" => serde_json::json!([name, op]).to_string(),
                "in" => serde_json::json!([name, op, [value, value]]).to_string(),
                _ => serde_json::json!([name, op, value]).to_string(),
            })
        },
    )
}

proptest! {
    /// Narrowing never leaves a match out: every issue the conditions match has its key in the
    /// range read, for each column a grid may sort by; an equality's source holds every match.
    #[test]
    fn the_ranges_read_hold_every_match(
        issues in proptest::collection::vec(any_issue(), 1..20),
        conditions in proptest::collection::vec(any_condition(), 1..4),
    ) {
        let defs = defs();
        let raw = format!("[{}]", conditions.join(","));
        let filter = Filter::parse(&raw, &defs).unwrap();
        let columns = [Column::Title, Column::Field(fid(1)), Column::Field(fid(2)), Column::Field(fid(3))];
        for column in &columns {
            let Some((from, to)) = filter.narrowing(column) else { continue };
            for i in issues.iter().filter(|i| filter.matches(i)) {
                let value = encoded(i, column, &defs);
                prop_assert!(value.is_some(), "{raw}: a match without a value in a narrowed column");
                let sk = keys::index::value_sk(&value.unwrap(), i.num);
                prop_assert!(from <= sk && sk <= to, "{raw}: {sk:?} outside {from:?}..={to:?}");
            }
        }
        if let Some((column, _, (from, to))) = filter.equality_source() {
            let mut keys_in_range: Vec<(String, u64)> = Vec::new();
            for i in &issues {
                let Some(value) = encoded(i, &column, &defs) else { continue };
                let sk = keys::index::value_sk(&value, i.num);
                if from <= sk && sk <= to {
                    keys_in_range.push((sk, i.num));
                } else {
                    prop_assert!(!filter.matches(i), "{raw}: a match outside the source's range");
                }
            }
            // The range's keys are in `num` order: the grid's order sorted by `num`.
            let mut by_key = keys_in_range.clone();
            by_key.sort();
            let mut by_num = keys_in_range;
            by_num.sort_by_key(|(_, num)| *num);
            prop_assert_eq!(by_key, by_num);
        }
    }
}

#[test]
fn conditions_in_another_order_or_repeated_share_a_canonical_form() {
    let (number, select) = (fid(2), fid(3));
    let a = parse(&format!(
        r#"[["{number}","eq",1],["{select}","eq","high"]]"#
    ))
    .unwrap();
    let b = parse(&format!(
        r#"[["{select}","eq","high"],["{number}","eq",1],["{select}","eq","high"]]"#
    ))
    .unwrap();
    assert_eq!(a.canonical(), b.canonical());
    assert_eq!(a.equality_source(), b.equality_source());
}
