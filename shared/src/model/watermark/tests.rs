use super::*;
use crate::domain::Issue;
use crate::domain::Participant;
use crate::domain::ids::{FieldId, ParticipantId};
use crate::domain::values::FieldDef;
use crate::domain::values::{FieldType, StoredValue};
use crate::model::basis::Hot;
use crate::model::summary::Summary;
use crate::store::Item;
use crate::store::index::intent_head_item;
use crate::store::index::watermark_item::*;
use crate::store::records::items::key;
use aws_sdk_dynamodb::types::AttributeValue;

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
use proptest::prelude::*;

/// DynamoDB's item limit.
const LIMIT: usize = 400 * 1024;

fn tenant() -> TenantId {
    TenantId::parse("acme").unwrap()
}

fn issue_id() -> IssueId {
    IssueId::numbered(1)
}

fn size(item: &Item) -> usize {
    crate::store::stored_size(item)
}

fn keys_of(set: &BTreeSet<Entry>) -> BTreeSet<(String, String)> {
    set.iter().map(|e| (e.pk.clone(), e.sk.clone())).collect()
}

// --- Strategies -------------------------------------------------------------------------------

/// Shard layouts: one shard (as most projects), four, and the pairs a reshard keeps.
fn shards() -> impl Strategy<Value = Shards> {
    let of = |n| Shards::of(n).unwrap_or(Shards::ONE);
    prop::sample::select(vec![
        Shards::ONE,
        of(4),
        Shards::of_project(Some(1), Some(4)),
        Shards::of_project(Some(4), Some(2)),
    ])
}

/// Placements, with the `all` scope of the layout before or without.
fn placement() -> impl Strategy<Value = Placement> {
    (
        (0..2u64, 1..3u64),
        prop::bool::ANY,
        shards(),
        prop::bool::weighted(0.25),
    )
        .prop_map(|((p, num), open, shards, all_scope)| Placement {
            project: ProjectId::numbered(100 + p),
            num,
            state: if open {
                IssueState::Open
            } else {
                IssueState::Closed
            },
            shards,
            all_scope,
        })
}

fn column() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("title".to_string()),
        Just("updated_at".to_string()),
        // Its entry is in the parent's children partition, not a column's.
        Just(crate::keys::index::PARENT_COLUMN.to_string()),
        (1..6u64).prop_map(|n| FieldId::numbered(n).to_string()),
    ]
}

fn value() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![Just("a"), Just("b"), Just("c\u{1}d")].prop_map(String::from))
}

fn seat() -> impl Strategy<Value = Seat> {
    (
        prop::bool::ANY,
        0..3usize,
        prop_oneof![Just("ann"), Just("bob")],
    )
        .prop_map(|(user, role, id)| Seat {
            kind: if user {
                ParticipantKind::User
            } else {
                ParticipantKind::Team
            },
            role: [Role::Assignee, Role::Reporter, Role::Watcher][role],
            id: id.into(),
        })
}

/// Summaries: none recorded, or one of two, narrow (every entry carries it) or too wide for
/// any entry.
fn summary() -> impl Strategy<Value = Summary> {
    (0..3u64, prop::bool::ANY).prop_map(|(digest, wide)| {
        let text: Option<std::sync::Arc<str>> = (digest > 0).then(|| {
            if wide {
                "w".repeat(1024).into()
            } else {
                format!("{{\"s\":{digest}}}").into()
            }
        });
        Summary {
            digest,
            compact: text.clone(),
            text,
        }
    })
}

/// Hot columns: every column, or a few.
fn hot() -> impl Strategy<Value = Hot> {
    prop_oneof![
        Just(Hot::All),
        prop::collection::btree_set(column(), 0..3).prop_map(|c| Hot::Only(c.into())),
    ]
}

fn basis() -> impl Strategy<Value = Basis> {
    (
        placement(),
        prop_oneof![Just("2026-01"), Just("2026-02")],
        prop::collection::btree_map(column(), value(), 0..5),
        prop::collection::btree_set(seat(), 0..3),
        summary(),
        hot(),
    )
        .prop_map(|(placement, u, columns, seats, summary, hot)| Basis {
            placement,
            updated_at: u.into(),
            columns,
            seats,
            summary,
            hot,
        })
}

fn pending() -> impl Strategy<Value = Pending> {
    (
        prop::collection::btree_set(placement(), 0..2),
        prop::collection::btree_set(prop_oneof![Just("2026-01"), Just("2026-03")], 0..2),
        prop::collection::btree_map(column(), prop::collection::btree_set(value(), 0..2), 0..3),
        prop::collection::btree_set(seat(), 0..2),
    )
        .prop_map(|(placements, u, columns, seats)| Pending {
            placements,
            updated_at: u.into_iter().map(String::from).collect(),
            columns,
            seats,
        })
}

/// A watermark with everything in its head (the protocol does not depend on the layout: the
/// I/O layer only leaves out fields whose buckets do not change).
fn watermark() -> impl Strategy<Value = Watermark> {
    (prop::option::of(basis()), pending()).prop_map(|(committed, pending)| Watermark {
        version: 3,
        committed,
        pending,
        ..Watermark::default()
    })
}

/// The column-by-column planner plans what the definition does: the same puts (with their
/// roles), the same deletes, each once, and the same intent.
fn same_plan(
    wm: &Watermark,
    desired: Option<&Basis>,
    extra: &Pending,
) -> Result<(), TestCaseError> {
    let (t, i) = (tenant(), issue_id());
    let lean = wm.step(&t, &i, desired, extra);
    let reference = wm.step_by_sets(&t, &i, desired, extra);
    let sorted = |l: &EntryList| {
        let mut v: Vec<_> = l.iter().map(|e| e.to_entry()).collect();
        v.sort();
        v
    };
    prop_assert_eq!(sorted(&lean.puts), sorted(&reference.puts));
    prop_assert_eq!(
        lean.deletes.len(),
        lean.deletes.keys().len(),
        "a delete twice"
    );
    prop_assert_eq!(lean.deletes.keys(), reference.deletes.keys());
    prop_assert_eq!(lean.intent, reference.intent);
    Ok(())
}

proptest! {
    /// The intent/commit protocol at column granularity: after the intent, every entry the
    /// step will put or delete is possible and none is certain, so a write cut short at any
    /// point leaves a watermark that still covers the index; after the commit, exactly the
    /// desired entries are certain and nothing else is possible.
    #[test]
    fn an_intent_makes_everything_the_step_touches_uncertain(
        wm in watermark(),
        desired in prop::option::of(basis()),
        extra in pending(),
    ) {
        let (t, i) = (tenant(), issue_id());
        let step = wm.step(&t, &i, desired.as_ref(), &extra);
        let mut during = wm.clone();
        during.pending.merge(step.intent.clone());
        let certain = keys_of(&during.certain(&t, &i));
        let possible = keys_of(&during.possible(&t, &i, &Pending::default()));
        let certain_before = keys_of(&wm.certain(&t, &i));
        let want = keys_of(&desired.as_ref().map(|d| d.entries(&t, &i)).unwrap_or_default());
        let deleted = step.deletes.keys();
        let put = step.puts.keys();
        for e in step.puts.iter().chain(step.deletes.iter()) {
            let k = (e.pk.to_string(), e.sk.to_string());
            prop_assert!(possible.contains(&k), "{k:?} not possible");
            // An entry put again only for a new summary is there whether or not the put
            // lands: its key stays certain (a step cut short leaves the old summary, and the
            // next step, still seeing another summary, puts it again).
            let rewritten = certain_before.contains(&k) && want.contains(&k);
            let kept = rewritten && !deleted.contains(&k);
            prop_assert!(!certain.contains(&k) || kept, "{k:?} still certain");
        }
        // Whatever was possible before (and whatever `extra` wrote) stays possible.
        let before = keys_of(&wm.possible(&t, &i, &extra));
        prop_assert!(before.is_subset(&possible));
        // The step makes the index exactly the desired entries, wherever it stood.
        prop_assert!(deleted.is_disjoint(&want));
        prop_assert!(before.difference(&want).all(|k| deleted.contains(k)));
        prop_assert!(want.iter().all(|k| put.contains(k) || certain_before.contains(k)));
        // Committed: the desired entries are certain, and nothing else is possible.
        let after = Watermark {
            version: 4,
            committed: desired.clone(),
            ..Watermark::default()
        };
        prop_assert_eq!(keys_of(&after.certain(&t, &i)), want.clone());
        prop_assert_eq!(keys_of(&after.possible(&t, &i, &Pending::default())), want);
    }

    /// The column-by-column planner plans exactly what the definition does.
    #[test]
    fn the_planner_plans_what_the_sets_do(
        wm in watermark(),
        desired in prop::option::of(basis()),
        extra in pending(),
    ) {
        same_plan(&wm, desired.as_ref(), &extra)?;
    }

    /// The same when the desired basis is the committed one changed a little (the common
    /// case, which the planner skips column by column), with or without something pending.
    #[test]
    fn the_planner_plans_what_the_sets_do_for_small_changes(
        committed in basis(),
        changes in prop::collection::btree_map(column(), value(), 0..3),
        moved in prop::option::of(placement()),
        updated in prop::bool::ANY,
        seats in prop::option::of(prop::collection::btree_set(seat(), 0..3)),
        pending in prop::option::of(pending()),
        extra in prop::option::of(pending()),
    ) {
        let wm = Watermark {
            version: 3,
            committed: Some(committed.clone()),
            pending: pending.unwrap_or_default(),
            ..Watermark::default()
        };
        let mut desired = committed;
        desired.columns.extend(changes);
        if let Some(p) = moved {
            desired.placement = p;
        }
        if updated {
            desired.updated_at = "2026-03".into();
        }
        if let Some(s) = seats {
            desired.seats = s;
        }
        same_plan(&wm, Some(&desired), &extra.unwrap_or_default())?;
    }

    #[test]
    fn pending_tokens_round_trip(p in pending()) {
        let tokens = p.tokens();
        let back = Pending::from_tokens(tokens.iter().map(String::as_str));
        prop_assert_eq!(back, Some(p));
    }

    #[test]
    fn a_head_round_trips(b in basis(), pend in pending(), version in 1..u64::MAX) {
        let (t, i) = (tenant(), issue_id());
        let wm = Watermark {
            version,
            committed: Some(b.clone()),
            ..Watermark::default()
        };
        let item = intent_head_item(&t, &i, &wm, &pend);
        let back = from_head(&t, &i, &item).unwrap();
        prop_assert_eq!(back.version, version);
        prop_assert_eq!(back.committed, Some(b));
        prop_assert_eq!(back.pending, pend);
        prop_assert!(back.legacy.is_none());
    }

    /// Split into buckets and read back, a basis is whole again; each bucket's digest is what
    /// the head says.
    #[test]
    fn buckets_round_trip(b in basis(), buckets in 1..5u16) {
        let (t, i) = (tenant(), issue_id());
        let (head, items) = commit_items(&t, &i, &Watermark::default(), Some(&b), 7, buckets);
        let mut wm = from_head(&t, &i, &head).unwrap();
        prop_assert_eq!(items.len(), usize::from(buckets));
        for (k, item) in items.iter().enumerate() {
            let fields = bucket_fields(item).unwrap();
            prop_assert_eq!(wm.buckets.digests[k], digest(&fields));
            wm.absorb_bucket(k as u16, Some(fields));
        }
        prop_assert_eq!(wm.committed, Some(b));
    }
}

/// A project's field definitions and an issue with a value in each, `participants` of them.
fn wide_issue(fields: usize, participants: usize) -> (Issue, Vec<FieldDef>) {
    let defs: Vec<FieldDef> = (0..fields)
        .map(|n| FieldDef {
            id: FieldId::numbered(n as u64 + 1),
            name: format!("f{n}"),
            field_type: [FieldType::Number, FieldType::Date, FieldType::Text][n % 3],
            options: None,
            sortable: true,
        })
        .collect();
    let values = defs
        .iter()
        .enumerate()
        .map(|(n, d)| {
            let v = match d.field_type {
                FieldType::Number => StoredValue::N(
                    crate::domain::decimal::DynNumber::parse(&format!("{}.5", n * 37)).unwrap(),
                ),
                FieldType::Date => StoredValue::S("2026-11-21".into()),
                _ => StoredValue::S(format!("value {n}")),
            };
            (d.id.clone(), v)
        })
        .collect();
    let participants = (0..participants)
        .map(|n| Participant {
            kind: ParticipantKind::User,
            id: ParticipantId::parse(&format!("user-{n}")).unwrap(),
            role: Role::Assignee,
        })
        .collect();
    let issue = Issue {
        id: issue_id(),
        project_id: ProjectId::numbered(2),
        num: 1234,
        title: "A typical issue title of some length".into(),
        state: IssueState::Open,
        description: None,
        fields: values,
        participants,
        version: 7,
        created_at: "2026-11-21T20:42:03.123Z".into(),
        updated_at: "2026-11-22T20:42:03.123Z".into(),
        parent_id: None,
    };
    (issue, defs)
}

/// A committed watermark of `basis` as stored, read back with every bucket.
fn stored(b: &Basis) -> (Watermark, Item, Vec<Item>) {
    let (t, i) = (tenant(), issue_id());
    let buckets = Buckets::choose(0, b);
    let (head, items) = commit_items(&t, &i, &Watermark::default(), Some(b), 7, buckets);
    let wm = from_head(&t, &i, &head).unwrap();
    (wm, head, items)
}

#[test]
fn an_update_of_one_field_reads_and_writes_about_one_kilobyte_at_5_fields_or_400() {
    let (t, i) = (tenant(), issue_id());
    for fields in [5, 55, 400] {
        let (issue, defs) = wide_issue(fields, 3);
        // Hot: the number and the field the update changes (pages sort by them).
        let hot = Hot::Only(std::sync::Arc::new(
            ["num".to_string(), defs[1].id.to_string()].into(),
        ));
        let b = Basis::of_hot(&issue, &defs, Shards::ONE, &hot);
        let (wm, head, items) = stored(&b);
        // One field changes, and `updated_at` with it.
        let mut next = issue.clone();
        next.fields
            .insert(defs[1].id.clone(), StoredValue::S("2026-12-01".into()));
        next.updated_at = "2026-11-23T20:42:03.123Z".into();
        let d = Basis::of_hot(&next, &defs, Shards::ONE, &hot);
        let buckets = Buckets::choose(wm.buckets.count, &d);
        assert_eq!(buckets, wm.buckets.count, "{fields} fields: same layout");
        let read = wm.buckets_to_read(Some(&d), buckets, &Pending::default());
        let largest_bucket = items.iter().map(size).max().unwrap_or(0);
        println!(
            "{fields} fields: {} buckets, head {} B, largest bucket {largest_bucket} B, buckets read for a 1-field update: {}",
            wm.buckets.count,
            size(&head),
            read.len()
        );
        assert!(read.len() <= 1, "{fields} fields: {read:?}");
        assert!(size(&head) < 1024, "{fields} fields: head {}", size(&head));
        assert!(
            largest_bucket < 1536,
            "{fields} fields: bucket {largest_bucket}"
        );
        // The head during the update's intent stays under one write unit.
        let mut full = wm.clone();
        for (k, item) in items.iter().enumerate() {
            if read.contains(&(k as u16)) {
                full.absorb_bucket(k as u16, bucket_fields(item));
            }
        }
        let mut compared = d.clone();
        compared.retain_columns(|c| full.has_read(c));
        let step = full.step(&t, &i, Some(&compared), &Pending::default());
        // The moved entries (the field's, `updated_at`'s, the inbox copies), and the hot
        // `num` column's again where the summary fits (its version changed); at 400 fields
        // it fits none, and only the moved entries are put. Cold columns are not touched.
        let puts = 1 + 1 + 3 * 2 + usize::from(d.summary != Summary::THIN);
        assert_eq!(
            step.puts.len(),
            puts,
            "{fields} fields: {:?}",
            step.puts.keys()
        );
        let during = intent_head_item(&t, &i, &full, &step.intent);
        assert!(
            size(&during) < 1024,
            "{fields} fields: intent {}",
            size(&during)
        );
    }
}

#[test]
fn a_state_change_reads_every_bucket() {
    let (issue, defs) = wide_issue(55, 2);
    let (wm, _, _) = stored(&Basis::of(&issue, &defs, Shards::ONE));
    let mut closed = issue.clone();
    closed.state = IssueState::Closed;
    let d = Basis::of(&closed, &defs, Shards::ONE);
    let read = wm.buckets_to_read(Some(&d), wm.buckets.count, &Pending::default());
    assert_eq!(read.len(), usize::from(wm.buckets.count));
    assert_eq!(
        wm.buckets_to_read(None, 0, &Pending::default()).len(),
        usize::from(wm.buckets.count)
    );
}

/// The largest issue the contract allows, at its most expensive: a 128-character tenant, 400
/// text fields whose values encode to the longest key, a title of 256, and 100 participants
/// with 128-character user ids.
#[test]
fn the_largest_issue_s_watermark_stays_far_below_the_item_limit() {
    let t = TenantId::parse(&"t".repeat(128)).unwrap();
    let i = issue_id();
    let defs: Vec<FieldDef> = (0..400)
        .map(|n| FieldDef {
            id: FieldId::numbered(n + 1),
            name: format!("f{n}"),
            field_type: FieldType::Text,
            options: None,
            sortable: true,
        })
        .collect();
    let issue = |c: char, state| Issue {
        id: i.clone(),
        project_id: ProjectId::numbered(2),
        num: u64::from(u32::MAX),
        title: c.to_string().repeat(256),
        state,
        description: None,
        fields: defs
            .iter()
            .map(|d| (d.id.clone(), StoredValue::S(c.to_string().repeat(1024))))
            .collect(),
        participants: (0..100)
            .map(|n| Participant {
                kind: ParticipantKind::User,
                id: ParticipantId::parse(&format!("{n:03}{}", "u".repeat(125))).unwrap(),
                role: Role::Assignee,
            })
            .collect(),
        version: 7,
        created_at: "2026-11-21T20:42:03.123Z".into(),
        updated_at: "2026-11-21T20:42:03.123Z".into(),
        parent_id: None,
    };
    let a = Basis::of(&issue('\u{10FFFF}', IssueState::Open), &defs, Shards::ONE);
    let mut b_issue = issue('\u{10FFFE}', IssueState::Closed);
    b_issue
        .participants
        .iter_mut()
        .for_each(|p| p.role = Role::Watcher);
    let b = Basis::of(&b_issue, &defs, Shards::ONE);
    let (wm, head, items) = stored(&a);
    assert!(wm.buckets.count <= MAX_BUCKETS);
    let largest_bucket = items.iter().map(size).max().unwrap_or(0);
    // The intent of a change that moves every entry, on top of an earlier one cut short.
    let mut full = wm.clone();
    for (k, item) in items.iter().enumerate() {
        full.absorb_bucket(k as u16, bucket_fields(item));
    }
    full.pending = Pending::all_of(&a);
    let step = full.step(&t, &i, Some(&b), &Pending::default());
    let during = size(&intent_head_item(&t, &i, &full, &step.intent));
    println!(
        "largest issue: {} buckets, head {} B, largest bucket {largest_bucket} B, head at its largest {during} B; limit {LIMIT}",
        wm.buckets.count,
        size(&head)
    );
    assert!(during < LIMIT / 2, "{during} bytes");
    assert!(largest_bucket < 4 * 1024, "{largest_bucket} bytes");
}

#[test]
fn a_watermark_of_the_previous_layout_is_read_as_its_keys() {
    let (t, i) = (tenant(), issue_id());
    let (issue, defs) = wide_issue(3, 1);
    // That layout's column entries were also in the `all` scope.
    let mut old = Basis::of(&issue, &defs, Shards::ONE);
    old.placement.all_scope = true;
    let entries = old.entries(&t, &i);
    let refs = |es: &BTreeSet<Entry>| {
        AttributeValue::Ss(
            es.iter()
                .map(|e| keys::index::entry_ref(&t, &e.pk, &e.sk))
                .collect(),
        )
    };
    let mut item = key(keys::index::watermark_pk(&t, &i), keys::index::WATERMARK_SK);
    item.insert("version".into(), n(4));
    item.insert("entries".into(), refs(&entries));
    let wm = from_head(&t, &i, &item).unwrap();
    assert_eq!(wm.version, 4);
    assert_eq!(keys_of(&wm.certain(&t, &i)), keys_of(&entries));
    // Its `all` scope goes, nothing else changes; a changed title moves its entry too.
    let d = Basis::of(&issue, &defs, Shards::ONE);
    let step = wm.step(&t, &i, Some(&d), &Pending::default());
    let all = |l: &EntryList| {
        l.iter()
            .filter(|e| keys::index::column_scope(e.pk) == Some(keys::index::ALL_SCOPE))
            .count()
    };
    // Its entries carry no summary yet: every one is put again, with it.
    assert_eq!((step.puts.len(), step.deletes.len()), (5 + 3 + 2, 5 + 3));
    assert!(step.puts.iter().all(|e| e.summary.is_some()));
    assert_eq!(all(&step.deletes), 5 + 3);
    let mut renamed = issue.clone();
    renamed.title = "Renamed".into();
    let step = wm.step(
        &t,
        &i,
        Some(&Basis::of(&renamed, &defs, Shards::ONE)),
        &Pending::default(),
    );
    assert_eq!(
        (step.puts.len(), step.deletes.len()),
        (5 + 3 + 2, 5 + 3 + 1)
    );
}

#[test]
fn layouts_keep_their_bucket_count_near_a_boundary() {
    let (issue, defs) = wide_issue(55, 1);
    let b = Basis::of(&issue, &defs, Shards::ONE);
    let n = Buckets::choose(0, &b);
    assert!(n > 0);
    // One more or one fewer field keeps it.
    let (more, more_defs) = wide_issue(56, 1);
    assert_eq!(
        Buckets::choose(n, &Basis::of(&more, &more_defs, Shards::ONE)),
        n
    );
    let (fewer, fewer_defs) = wide_issue(54, 1);
    assert_eq!(
        Buckets::choose(n, &Basis::of(&fewer, &fewer_defs, Shards::ONE)),
        n
    );
    // Few fields live in the head.
    let (small, small_defs) = wide_issue(5, 1);
    assert_eq!(
        Buckets::choose(0, &Basis::of(&small, &small_defs, Shards::ONE)),
        0
    );
    assert_eq!(
        Buckets::choose(n, &Basis::of(&small, &small_defs, Shards::ONE)),
        0
    );
}

#[test]
fn the_entries_of_a_basis_are_the_issue_s_entries() {
    let (t, i) = (tenant(), issue_id());
    let (issue, defs) = wide_issue(4, 2);
    let e = Basis::of(&issue, &defs, Shards::ONE).entries(&t, &i);
    assert_eq!(
        e,
        crate::model::entries(&t, &issue, &defs, Shards::ONE, &Hot::All)
    );
    assert_eq!(e.len(), (5 + 4) + 2 * 2);
}

/// Items as stored: the head and the buckets by sort key.
#[derive(Default)]
struct Stored {
    head: Item,
    buckets: BTreeMap<String, Item>,
}

impl Stored {
    /// Reads the head and `which` buckets, as the indexer does.
    fn read(&self, which: impl Fn(&Watermark) -> BTreeSet<u16>) -> Watermark {
        let (t, i) = (tenant(), issue_id());
        let mut wm = from_head(&t, &i, &self.head).unwrap();
        let n = wm.buckets.count;
        for k in which(&wm) {
            let item = self.buckets.get(&keys::index::watermark_bucket_sk(n, k));
            wm.absorb_bucket(k, item.and_then(bucket_fields));
        }
        wm
    }

    /// Commits `desired` as the indexer does; returns the bucket items written.
    fn commit(&mut self, desired: &Basis, version: u64) -> usize {
        let (t, i) = (tenant(), issue_id());
        let probe = self.read(|_| BTreeSet::new());
        let next = Buckets::choose(probe.buckets.count, desired);
        let read = probe.buckets_to_read(Some(desired), next, &Pending::default());
        let wm = self.read(|_| read.clone());
        let (head, items) = commit_items(&t, &i, &wm, Some(desired), version, next);
        let written = items.len();
        for item in items {
            let sk = crate::store::records::items::sk_of(&item)
                .unwrap()
                .to_string();
            self.buckets.insert(sk, item);
        }
        self.head = head;
        written
    }
}

proptest! {
    /// Value changes of a wide issue go to the head's overlay instead of a bucket write until
    /// the overlay is full, and read back whole the watermark is always exactly what was
    /// committed. The overlay never costs writes: a fold writes a bucket whose changes it
    /// held, each change held once, so an issue's bucket writes are at most what writing
    /// every changed bucket at once would make. (Not at most one an update: an update read
    /// whole, for a new summary, may fold two buckets; minimal cases are in the regressions
    /// file.)
    #[test]
    fn an_overlay_keeps_updates_to_the_head_and_reads_back_exact(
        changes in prop::collection::vec(prop::collection::vec((0..55usize, 0..1000u32), 1..3), 1..30),
    ) {
        let (issue, defs) = wide_issue(55, 3);
        let mut stored = Stored::default();
        let mut current = issue.clone();
        stored.commit(&Basis::of(&current, &defs, Shards::ONE), 1);
        let mut bucket_writes = 0;
        let mut changed_buckets = 0;
        let mut before = Basis::of(&current, &defs, Shards::ONE);
        for (v, change) in changes.iter().enumerate() {
            for (f, value) in change {
                current.fields.insert(
                    defs[*f].id.clone(),
                    StoredValue::S(format!("v{value}")),
                );
            }
            let desired = Basis::of(&current, &defs, Shards::ONE);
            let n = stored.read(|_| BTreeSet::new()).buckets.count;
            let (old, new) = (by_bucket(&before, n), by_bucket(&desired, n));
            changed_buckets += new.iter().filter(|(k, b)| old.get(k) != Some(b)).count();
            bucket_writes += stored.commit(&desired, v as u64 + 2);
            before = desired.clone();
            prop_assert!(size(&stored.head) < 1024, "head {}", size(&stored.head));
            let all = stored.read(|wm| (0..wm.buckets.count).collect());
            prop_assert_eq!(all.committed.as_ref(), Some(&desired));
            // Nothing changes: nothing to read.
            prop_assert!(all.buckets_to_read(Some(&desired), all.buckets.count, &Pending::default()).is_empty()
                || overlay_bytes(&all.overlay) > OVERLAY_MAX);
        }
        prop_assert!(bucket_writes <= changed_buckets, "{bucket_writes} bucket writes for {changed_buckets} bucket changes");
    }
}

#[test]
fn updates_of_the_same_few_fields_write_no_bucket() {
    let (mut issue, defs) = wide_issue(55, 3);
    let mut stored = Stored::default();
    stored.commit(&Basis::of(&issue, &defs, Shards::ONE), 1);
    let mut bucket_writes = 0;
    for v in 0..50u64 {
        for f in [1, 7, 30] {
            issue
                .fields
                .insert(defs[f].id.clone(), StoredValue::S(format!("{v}-{f}")));
        }
        bucket_writes += stored.commit(&Basis::of(&issue, &defs, Shards::ONE), v + 2);
    }
    assert_eq!(bucket_writes, 0);
}

#[test]
fn only_heads_with_the_previous_layout_s_keys_are_upgraded() {
    let (t, i) = (tenant(), issue_id());
    let head = |attrs: &[(&str, AttributeValue)]| {
        let mut item = key(keys::index::watermark_pk(&t, &i), keys::index::WATERMARK_SK);
        item.extend(attrs.iter().map(|(k, v)| (k.to_string(), v.clone())));
        item
    };
    let old = head(&[
        ("version", n(3)),
        ("entries", AttributeValue::Ss(vec!["x".into()])),
    ]);
    assert_eq!(previous_format_head(&old), Some((t.clone(), i.clone())));
    // Parked before it was ever indexed: a flag, no layout.
    assert_eq!(
        previous_format_head(&head(&[("parked", AttributeValue::Bool(true))])),
        None
    );
    // A tombstone expires on its own; a compact head is current.
    assert_eq!(
        previous_format_head(&head(&[("version", n(u64::MAX))])),
        None
    );
    assert_eq!(
        previous_format_head(&head(&[("version", n(3)), ("fmt", n(FORMAT))])),
        None
    );
    // A compact head whose entries are also in the `all` scope is of a previous format too,
    // once it has anything to rewrite.
    let all_scope = head(&[("version", n(3)), ("fmt", n(FORMAT_ALL_SCOPE))]);
    assert_eq!(
        previous_format_head(&all_scope),
        Some((t.clone(), i.clone()))
    );
    let tombstone = head(&[("version", n(u64::MAX)), ("fmt", n(FORMAT_ALL_SCOPE))]);
    assert_eq!(previous_format_head(&tombstone), None);
}

/// A head written before scopes were halved (and summaries) reads as a placement with the `all`
/// scope, keeps that format while an intent is recorded on it, and its next step deletes
/// exactly the `all`-scope entries and writes every other one again with its summary: the
/// layout retires issue by issue.
#[test]
fn a_head_with_the_all_scope_reads_as_it_was_written_and_its_next_step_retires_that_scope() {
    let (t, i) = (tenant(), issue_id());
    let (issue, defs) = wide_issue(4, 2);
    let desired = Basis::of(&issue, &defs, Shards::ONE);
    assert!(!desired.placement.all_scope);
    // That layout's heads had no summary digest either.
    let mut old = desired.clone();
    old.placement.all_scope = true;
    old.summary = Summary::recorded(0);
    let head = head_item(&t, &i, 5, Some(&old), &Buckets::default(), &BTreeMap::new());
    assert_eq!(head.get("fmt"), Some(&n(FORMAT_ALL_SCOPE)));
    assert!(!head.contains_key(attr::SUMMARY_DIGEST));
    let wm = from_head(&t, &i, &head).unwrap();
    assert_eq!(wm.committed.as_ref(), Some(&old));
    assert_eq!(keys_of(&wm.certain(&t, &i)), keys_of(&old.entries(&t, &i)));
    // Every desired entry is put again, with its summary; the `all` ones are deleted.
    let step = wm.step(&t, &i, Some(&desired), &Pending::default());
    assert_eq!(step.puts.keys(), keys_of(&desired.entries(&t, &i)));
    assert!(step.puts.iter().all(|e| e.summary.is_some()));
    let deleted = step.deletes.keys();
    let expected: BTreeSet<_> = keys_of(&old.entries(&t, &i))
        .difference(&keys_of(&desired.entries(&t, &i)))
        .cloned()
        .collect();
    assert_eq!(deleted, expected);
    assert_eq!(deleted.len(), 5 + 4);
    assert!(
        deleted
            .iter()
            .all(|(pk, _)| keys::index::column_scope(pk) == Some("all"))
    );
    // The intent names the new placement as a token of its own kind; the head keeps its
    // format until the commit writes the new basis.
    let during = intent_head_item(&t, &i, &wm, &step.intent);
    assert_eq!(during.get("fmt"), Some(&n(FORMAT_ALL_SCOPE)));
    let read = from_head(&t, &i, &during).unwrap();
    assert_eq!(
        read.pending.placements,
        BTreeSet::from([desired.placement.clone()])
    );
    let after = head_item(
        &t,
        &i,
        6,
        Some(&desired),
        &Buckets::default(),
        &BTreeMap::new(),
    );
    assert_eq!(after.get("fmt"), Some(&n(FORMAT)));
    let wm = from_head(&t, &i, &after).unwrap();
    let step = wm.step(&t, &i, Some(&desired), &Pending::default());
    assert!(step.puts.is_empty() && step.deletes.is_empty());
}
