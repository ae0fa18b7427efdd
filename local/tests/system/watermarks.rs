//! The compact watermark against the real engine: a head put whole (the indexer's commit,
//! `gridctl repair`) never overwrites a head that changed since it was read, even at the
//! same version, nor one another attempt recorded an intent on.

use gridline::domain::ids::{IssueId, ProjectId};
use gridline::model::EntryList;
use gridline::model::watermark::{Basis, CommitAt, Pending, Replaces, Step};
use gridline_local::testing::TestApi;

use crate::support::acme;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_replaced_or_given_an_intent_since_it_was_read_is_never_overwritten() {
    let api = TestApi::start().await;
    let (p, issue) = crate::support::wide_issue(&api, "p").await;
    api.sync().await;
    let store = &api.stack.state.store;
    let (t, id) = (
        acme(),
        IssueId::parse(issue["id"].as_str().unwrap()).unwrap(),
    );
    let now = store
        .records()
        .get_issue_item(&t, &id)
        .await
        .unwrap()
        .unwrap();
    let (project, defs) = store
        .records()
        .project_with_fields(&t, &ProjectId::parse(&p).unwrap())
        .await
        .unwrap()
        .unwrap();
    let fields_rev = project.fields_rev.unwrap_or(0);
    let basis = Basis::of(&now, &defs, gridline::keys::index::Shards::ONE);
    let read = store
        .index()
        .get_full_watermark(&t, &id)
        .await
        .unwrap()
        .unwrap();
    assert!(read.buckets.count > 0, "a bucketed watermark");

    // A repair replaces the head at the same version: a commit from the older read fails.
    assert!(
        store
            .index()
            .replace_watermark(
                &t,
                &id,
                Some(&read),
                Some(&basis),
                (read.version, fields_rev)
            )
            .await
            .unwrap()
    );
    let at = CommitAt {
        version: read.version + 1,
        buckets: read.buckets.count,
        fields_rev,
        pending_count: read.pending_count,
    };
    let (held, _) = store
        .index()
        .commit_watermark(
            (&t, &id),
            &read,
            Some(&basis),
            at,
            (Replaces::Older, &Default::default()),
        )
        .await
        .unwrap();
    assert!(!held, "a commit over a head replaced since it was read");

    // An intent recorded after a repair's read makes the repair fail.
    let fresh = store
        .index()
        .get_full_watermark(&t, &id)
        .await
        .unwrap()
        .unwrap();
    let mut puts = EntryList::for_issue(&id, 1);
    basis
        .entries(&t, &id)
        .iter()
        .take(1)
        .for_each(|e| puts.push_entry(e));
    let step = Step {
        intent: Pending::all_of(&basis),
        puts,
        deletes: EntryList::for_issue(&id, 0),
    };
    assert!(
        store
            .index()
            .record_intent(
                &t,
                &id,
                &fresh,
                &step,
                (fresh.version, Replaces::OlderOrSame)
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .index()
            .replace_watermark(
                &t,
                &id,
                Some(&fresh),
                Some(&basis),
                (fresh.version, fields_rev)
            )
            .await
            .unwrap(),
        "a repair over an intent recorded since its read"
    );
    // So does an indexer's commit: the intent's attempt may write entries (with its summary)
    // that the head it would put knows nothing of.
    let (held, _) = store
        .index()
        .commit_watermark(
            (&t, &id),
            &fresh,
            Some(&basis),
            CommitAt {
                version: fresh.version,
                buckets: fresh.buckets.count,
                fields_rev,
                pending_count: fresh.pending_count,
            },
            (Replaces::OlderOrSame, &Default::default()),
        )
        .await
        .unwrap();
    assert!(!held, "a commit over an intent recorded since its read");
    let after = store
        .index()
        .get_full_watermark(&t, &id)
        .await
        .unwrap()
        .unwrap();
    let (held, _) = store
        .index()
        .commit_watermark(
            (&t, &id),
            &after,
            Some(&basis),
            CommitAt {
                version: after.version,
                buckets: after.buckets.count,
                fields_rev,
                pending_count: after.pending_count,
            },
            (Replaces::OlderOrSame, &Default::default()),
        )
        .await
        .unwrap();
    assert!(held, "a commit that read the intent");
    // The stream's next delivery still converges.
    api.sync().await;
    api.assert_index_matches_records(&t, &[ProjectId::parse(&p).unwrap()])
        .await;
}
