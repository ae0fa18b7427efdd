//! `gridctl verify`, `repair` and `replay` against the embedded engine and its real stream.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use gridctl::{ops, replay, seed};
use gridline::domain::ids::{IssueId, TenantId};
use gridline::indexer::Indexer;
use gridline::keys::index::ParkedUnit;
use gridline::store::Store;
use gridline_local::chaos::{Chaos, Rates};
use gridline_local::testing::{ALICE, TestApi};
use http::Method;
use indicatif::ProgressBar;
use serde_json::json;

/// Seeds a project of `issues` issues as `gridctl seed` would.
async fn seed_project(api: &TestApi, issues: u64) -> seed::Seeded {
    let store = support::store(&api.stack, "Seed");
    seed::seed(&store, &spec(issues), &ProgressBar::hidden())
        .await
        .unwrap()
}

fn spec(issues: u64) -> seed::Spec {
    seed::Spec {
        tenant: acme(),
        project_name: "Seeded".into(),
        issues,
        extra_fields: 1,
        users: 6,
        teams: 2,
        rng_seed: 7,
    }
}

fn acme() -> TenantId {
    TenantId::parse("acme").unwrap()
}

async fn verify(api: &TestApi) -> ops::VerifyReport {
    ops::verify(
        &support::store(&api.stack, "Verify"),
        3,
        &ProgressBar::hidden(),
    )
    .await
    .unwrap()
}

fn hidden(_: &str, _: u64) -> ProgressBar {
    ProgressBar::hidden()
}

/// An index-table item's key.
fn index_key(pk: &str, sk: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("PK".to_string(), AttributeValue::S(pk.into())),
        ("SK".to_string(), AttributeValue::S(sk.into())),
    ])
}

async fn delete_index_item(api: &TestApi, pk: &str, sk: &str) {
    api.stack
        .client
        .delete_item()
        .table_name(&api.stack.tables.index)
        .set_key(Some(index_key(pk, sk)))
        .send()
        .await
        .unwrap();
}

async fn put_index_item(api: &TestApi, pk: &str, sk: &str, issue_id: &str, role: Option<&str>) {
    let mut item = index_key(pk, sk);
    item.insert("issue_id".into(), AttributeValue::S(issue_id.into()));
    if let Some(r) = role {
        item.insert("role".into(), AttributeValue::S(r.into()));
    }
    api.put_index(item).await.unwrap();
}

#[tokio::test]
async fn verify_finds_each_kind_of_drift_and_repair_removes_it() {
    let api = TestApi::start().await;
    let seeded = seed_project(&api, 40).await;
    api.sync().await;
    let clean = verify(&api).await;
    assert!(clean.is_clean(), "{:?}", clean.drift);
    assert_eq!(clean.issues, 40);

    // Drift of every kind: entries lost, an entry no record calls for, an entry with the
    // wrong role (a participation copy), and the entries of an issue whose delete was lost.
    let entries = api.index_entries().await;
    let mut lost = entries.iter().filter(|e| e.role.is_none()).take(3);
    let (a, b, c) = (
        lost.next().unwrap(),
        lost.next().unwrap(),
        lost.next().unwrap(),
    );
    for e in [a, b, c] {
        delete_index_item(&api, &e.pk, &e.sk).await;
    }
    let copy = entries.iter().find(|e| e.role.is_some()).unwrap();
    put_index_item(&api, &copy.pk, &copy.sk, &copy.issue_id, Some("bogus")).await;
    let stray_pk = format!("T#acme#X#{}#num#all", seeded.project_id);
    put_index_item(
        &api,
        &stray_pk,
        "1zz\u{1}00000000000000000999",
        // No issue id at all: nothing any issue's repair reaches; repair deletes it as it is.
        "01JDQ5S0000000000000GHOST1",
        None,
    )
    .await;

    let found = verify(&api).await;
    assert_eq!(
        (found.missing, found.extra, found.stale),
        (3, 1, 1),
        "{:?}",
        found.drift
    );
    assert!(!found.is_clean());

    let report = ops::repair(&support::store(&api.stack, "Repair"), 3, 3, &hidden)
        .await
        .unwrap();
    assert!(report.clean, "{report:?}");
    assert_eq!(report.puts, 4, "3 missing + 1 stale rewritten: {report:?}");
    assert_eq!(report.deletes, 1, "the stray entry: {report:?}");
    assert!(verify(&api).await.is_clean());

    // The repaired index keeps working with the indexer: a later change is applied exactly.
    let issue = api
        .index_entries()
        .await
        .iter()
        .next()
        .unwrap()
        .issue_id
        .clone();
    let r = api
        .call(
            ALICE,
            Method::PATCH,
            &format!("/issues/{issue}"),
            Some(json!({"title": "after repair"})),
        )
        .await;
    assert_eq!(r.status, 200);
    api.sync().await;
    assert!(verify(&api).await.is_clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_is_safe_while_writes_and_the_indexer_run() {
    let api = std::sync::Arc::new(TestApi::start().await);
    let seeded = seed_project(&api, 30).await;
    api.sync().await;
    // Damage: drop a tenth of the entries.
    for (n, e) in api.index_entries().await.iter().enumerate() {
        if n % 10 == 0 {
            delete_index_item(&api, &e.pk, &e.sk).await;
        }
    }
    assert!(!verify(&api).await.is_clean());

    let ids: Vec<IssueId> = api
        .stack
        .state
        .store
        .records()
        .issues_of_project(&acme(), &seeded.project_id, None, 1000)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|i| i.id)
        .collect();
    let points = seeded.fields["Points"].clone();
    let writer = {
        let api = api.clone();
        let project = seeded.project_id.clone();
        tokio::spawn(async move {
            for step in 0..60 {
                let id = &ids[step % ids.len()];
                let r = api
                    .call(
                        ALICE,
                        Method::PATCH,
                        &format!("/issues/{id}"),
                        Some(
                            json!({"title": format!("w{step}"), "fields": {points.clone(): step}}),
                        ),
                    )
                    .await;
                assert_eq!(r.status, 200);
                if step % 7 == 0 {
                    api.issue(&project, json!({"title": format!("new {step}")}))
                        .await;
                }
                if step % 3 == 0 {
                    api.sync().await;
                }
            }
        })
    };
    // Repair runs while the writer and the indexer do.
    let mut rounds = 0;
    while !writer.is_finished() {
        ops::repair(&support::store(&api.stack, "Repair"), 2, 1, &hidden)
            .await
            .unwrap();
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    writer.await.unwrap();
    assert!(rounds > 0);
    api.sync().await;
    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 3, &hidden)
        .await
        .unwrap();
    assert!(report.clean, "{report:?}");
    let found = verify(&api).await;
    assert!(found.is_clean(), "{:?}", found.drift);
}

#[tokio::test]
async fn replay_redrives_what_the_on_failure_queue_names() {
    let api = TestApi::start().await;
    let seeded = seed_project(&api, 10).await;
    api.sync().await;

    // An outage of the index table outlasts the retries: the batch goes to the on-failure
    // "queue" and the shard moves on.
    let chaos = Chaos::new(
        1,
        Rates {
            error: 0.0,
            stall: 0.0,
            throttle: 0.0,
        },
    );
    let faulty = Store::new(
        chaos.client(&api.stack.function_client("IndexerFunction")),
        &api.stack.tables.records,
        &api.stack.tables.index,
    );
    let mut poller = api.stack.poller(Indexer::new(faulty)).await;
    poller.drain().await.unwrap();
    chaos
        .outage
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let issue = api
        .issue(
            &seeded.project_id,
            json!({"title": "written during the outage"}),
        )
        .await;
    poller.drain().await.unwrap();
    chaos
        .outage
        .store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(poller.dead_letters.len(), 1);
    let found = verify(&api).await;
    assert!(found.missing > 0, "the issue's entries are missing");

    // Replay reads the range the message names back from the stream and re-indexes.
    let streams = support::replay_streams(&api.stack).await;
    let indexer = support::replay_indexer(&api.stack);
    let mut report = replay::ReplayReport::default();
    for message in &poller.dead_letters {
        let batch = replay::parse_message(&message.to_string()).unwrap();
        let touched = replay::touched_by(&streams, &batch).await.unwrap();
        replay::redrive(&indexer, &touched, &mut report)
            .await
            .unwrap();
    }
    assert_eq!(report.issues, 1, "{report:?}");
    // The batch's record also rebuilt its history entry (verify checks every version's).
    assert_eq!(report.history_entries, 1, "{report:?}");
    assert!(
        matches!(&report.touched[0], replay::Touched::Issue { issue_id, .. } if issue_id == issue["id"].as_str().unwrap())
    );
    let found = verify(&api).await;
    assert!(found.is_clean(), "{:?}", found.drift);
}

#[tokio::test]
async fn a_parked_issue_is_drift_until_repair_reindexes_it_and_an_expired_tombstone_is_not() {
    let api = TestApi::start().await;
    let p = api.project("p").await;
    let issue = api.issue(&p, json!({"title": "parked"})).await;
    let gone = api.issue(&p, json!({"title": "gone"})).await;
    let (id, gone_id) = (
        issue["id"].as_str().unwrap().to_string(),
        gone["id"].as_str().unwrap().to_string(),
    );
    let r = api
        .call(ALICE, Method::DELETE, &format!("/issues/{gone_id}"), None)
        .await;
    assert_eq!(r.status, http::StatusCode::NO_CONTENT);
    api.sync().await;
    assert!(verify(&api).await.is_clean());

    // The deleted issue's tombstone carries its expiry; once TTL removes it, nothing drifts.
    let wm_key = |i: &str| {
        (
            gridline::keys::index::watermark_pk(&acme(), &IssueId::parse(i).unwrap()),
            gridline::keys::index::WATERMARK_SK.to_string(),
        )
    };
    let (pk, sk) = wm_key(&gone_id);
    let tomb = api
        .stack
        .client
        .get_item()
        .table_name(&api.stack.tables.index)
        .set_key(Some(index_key(&pk, &sk)))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert!(tomb.contains_key("expires_at"), "{tomb:?}");
    delete_index_item(&api, &pk, &sk).await;
    assert!(
        verify(&api).await.is_clean(),
        "a missing tombstone is not drift"
    );

    // A parked marker (as the indexer writes it) is listed, and verify is not clean.
    let parked = gridline::store::index::Parked {
        tenant: acme(),
        subject: id.clone(),
        reason: "ValidationException: Item size has exceeded the maximum allowed size".into(),
        sequence_number: "100".into(),
        parked_at: "2026-11-21T20:42:03Z".into(),
    };
    api.stack
        .state
        .store
        .index()
        .park(&parked, true)
        .await
        .unwrap();
    let found = verify(&api).await;
    assert!(!found.is_clean());
    assert_eq!(found.parked, 1);
    assert_eq!(found.drift.parked, vec![parked]);
    assert_eq!((found.missing, found.extra, found.stale), (0, 0, 0));

    // Repair re-indexes the parked issue from its record; its marker goes.
    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 2, &hidden)
        .await
        .unwrap();
    assert!(report.clean, "{report:?}");
    assert!(verify(&api).await.is_clean());
}

#[tokio::test]
async fn repair_reindexes_a_parked_project_and_acknowledges_a_parked_record() {
    let api = TestApi::start().await;
    let p = api.project("p").await;
    api.issue(&p, json!({"title": "one"})).await;
    api.sync().await;
    // A field whose record the indexer parked with the project: no job ever built it.
    let f = api
        .field(&p, json!({"name": "Points", "type": "number"}))
        .await;
    let marker = |subject: String| gridline::store::index::Parked {
        tenant: acme(),
        subject,
        reason: "malformed".into(),
        sequence_number: "7".into(),
        parked_at: "2026-11-21T20:42:03Z".into(),
    };
    for subject in [
        gridline::keys::index::parked_sk(ParkedUnit::Project, &p),
        gridline::keys::index::parked_sk(ParkedUnit::Record, "7"),
    ] {
        api.stack
            .state
            .store
            .index()
            .park(&marker(subject), false)
            .await
            .unwrap();
    }
    assert_eq!(verify(&api).await.parked, 2);

    // Both markers go, so repair can finish clean (it used to report them forever).
    let report = ops::repair(&support::store(&api.stack, "Repair"), 2, 2, &hidden)
        .await
        .unwrap();
    assert!(report.clean, "{report:?}");
    assert_eq!(
        (report.projects_reindexed, report.records_acknowledged),
        (1, 1)
    );
    assert!(verify(&api).await.is_clean());
    // Re-indexed whole, the project's waiting field is complete.
    let project = api.get(&format!("/projects/{p}")).await.body;
    assert_eq!(project["fields"][0]["id"], f.as_str());
    assert_eq!(project["fields"][0]["sortable"], true, "{project}");
}

/// Rewrites every watermark in the layout before the compact one (a version and every entry
/// key in a string set; no buckets), from what the compact one derives: a stack as the
/// previous release left it.
async fn downgrade_watermarks(api: &TestApi) -> usize {
    let store = &api.stack.state.store;
    let index = &api.stack.tables.index;
    let items = api
        .stack
        .client
        .scan()
        .table_name(index)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    let mut heads = 0;
    for item in &items {
        let pk = item["PK"].as_s().unwrap();
        let sk = item["SK"].as_s().unwrap();
        let Some((tenant, issue)) = gridline::keys::index::parse_watermark_pk(pk) else {
            continue;
        };
        // The issues' history shares the partition: it stays.
        if sk.starts_with(gridline::keys::index::HISTORY_SK_PREFIX) {
            continue;
        }
        if sk != gridline::keys::index::WATERMARK_SK {
            delete_index_item(api, pk, sk).await;
            continue;
        }
        let wm = store
            .index()
            .get_full_watermark(&tenant, &issue)
            .await
            .unwrap()
            .unwrap();
        let mut old = index_key(pk, sk);
        old.insert("version".into(), AttributeValue::N(wm.version.to_string()));
        let refs: Vec<String> = wm
            .certain(&tenant, &issue)
            .iter()
            .map(|e| gridline::keys::index::entry_ref(&tenant, &e.pk, &e.sk))
            .collect();
        if !refs.is_empty() {
            old.insert("entries".into(), AttributeValue::Ss(refs));
        }
        api.put_index(old).await.unwrap();
        heads += 1;
    }
    heads
}

/// A stack whose watermarks are all in the previous format keeps indexing exactly under
/// traffic while `gridctl upgrade` rewrites them, and ends with none left and verify clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_of_the_previous_watermark_layout_upgrades_under_traffic() {
    let api = TestApi::start().await;
    let narrow = api.project("narrow").await;
    let wide = api.project("wide").await;
    let points = api
        .field(&narrow, json!({"name": "points", "type": "number"}))
        .await;
    let mut wide_fields = Vec::new();
    for i in 0..16 {
        wide_fields.push(
            api.field(&wide, json!({"name": format!("n{i}"), "type": "number"}))
                .await,
        );
    }
    let mut issues = Vec::new();
    for i in 0..12 {
        let (p, fields) = if i % 2 == 0 {
            (&narrow, json!({points.clone(): i}))
        } else {
            let values: serde_json::Map<_, _> = wide_fields
                .iter()
                .map(|f| (f.clone(), json!(i * 100)))
                .collect();
            (&wide, serde_json::Value::Object(values))
        };
        let issue = api
            .issue(
                p,
                json!({"title": format!("issue {i}"), "fields": fields,
                       "participants": [{"kind": "user", "id": "bob", "role": "assignee"}]}),
            )
            .await;
        issues.push(issue["id"].as_str().unwrap().to_string());
    }
    let gone = issues.pop().unwrap();
    api.call(ALICE, Method::DELETE, &format!("/issues/{gone}"), None)
        .await;
    api.sync().await;
    let downgraded = downgrade_watermarks(&api).await;
    assert_eq!(downgraded, 12, "11 issues and a tombstone");
    let before = verify(&api).await;
    assert!(before.is_clean(), "{:?}", before.drift);
    assert_eq!(before.previous_layout_watermarks, 11);

    // Traffic (field changes, closes, a new participant, a new field) while upgrade runs.
    let traffic = async {
        for (n, id) in issues.iter().enumerate() {
            let body = match n % 3 {
                0 => json!({"state": "closed"}),
                1 => json!({"title": format!("renamed {n}")}),
                _ => json!({"fields": {points.clone(): 99}}),
            };
            let r = api
                .call(ALICE, Method::PATCH, &format!("/issues/{id}"), Some(body))
                .await;
            assert!(r.status.is_success() || n % 3 == 2, "{}", r.text);
            if n == 4 {
                api.field(&wide, json!({"name": "late", "type": "date"}))
                    .await;
            }
            api.sync().await;
        }
    };
    upgrade_during(&api, traffic).await;
}

/// Runs `traffic` and `gridctl upgrade` together; then the stream drains with nothing sent to
/// the on-failure queue, verify is clean and no watermark of a previous format is left.
async fn upgrade_during(
    api: &TestApi,
    traffic: impl std::future::Future<Output = ()>,
) -> ops::VerifyReport {
    let operator = support::store(&api.stack, "Upgrade");
    let upgrade = ops::upgrade(&operator, 2, &hidden);
    let ((), report) = tokio::join!(traffic, upgrade);
    let report = report.unwrap();
    assert_eq!(report.failed, 0, "{report:?}");
    api.sync().await;
    assert_eq!(api.dead_letters().await, 0);
    let after = verify(api).await;
    assert!(after.is_clean(), "{:?}", after.drift);
    assert_eq!(after.previous_layout_watermarks, 0, "{report:?}");
    after
}

/// Puts the stack in the layout before scopes were halved and entries carried summaries: every
/// entry thin, every column entry also in the `all` scope, and every watermark head marked as
/// that layout's (the format that wrote them, no summary digest). Returns the `all` entries
/// written.
async fn downgrade_scopes(api: &TestApi) -> usize {
    let index = &api.stack.tables.index;
    let mut written = 0;
    for entry in api.index_entries().await {
        put_index_item(
            api,
            &entry.pk,
            &entry.sk,
            &entry.issue_id,
            entry.role.as_deref(),
        )
        .await;
        let Some(scope) = gridline::keys::index::column_scope(&entry.pk) else {
            continue;
        };
        let at = entry.pk.find(&format!("#{scope}")).unwrap();
        let pk = format!(
            "{}#all{}",
            &entry.pk[..at],
            &entry.pk[at + 1 + scope.len()..]
        );
        put_index_item(api, &pk, &entry.sk, &entry.issue_id, None).await;
        written += 1;
    }
    let mut first = true;
    for mut item in api.scan_all(index).await {
        let pk = item["PK"].as_s().unwrap().clone();
        let sk = item["SK"].as_s().unwrap().clone();
        if gridline::keys::index::is_watermark_pk(&pk) && sk == gridline::keys::index::WATERMARK_SK
        {
            let format = gridline::store::index::watermark_item::FORMAT_ALL_SCOPE;
            item.insert("fmt".into(), AttributeValue::N(format.into()));
            item.remove(gridline::store::index::watermark_item::attr::SUMMARY_DIGEST);
            // One with a write of that release in flight: its placement token is the old kind.
            let (tenant, issue) = gridline::keys::index::parse_watermark_pk(&pk).unwrap();
            let wm =
                gridline::store::index::watermark_item::from_head(&tenant, &issue, &item).unwrap();
            if first && let Some(mut placement) = wm.committed.map(|c| c.placement) {
                placement.all_scope = true;
                let pending = gridline::model::watermark::Pending {
                    placements: [placement].into(),
                    ..Default::default()
                };
                let tokens: Vec<String> = pending.tokens().into_iter().collect();
                assert!(tokens.iter().all(|t| t.starts_with('P')));
                item.insert("pend".into(), AttributeValue::Ss(tokens));
                first = false;
            }
            api.put_index(item).await.unwrap();
        }
    }
    written
}

/// The unfiltered grid by number, every page: the issue ids in order.
async fn whole_grid(api: &TestApi, project: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = api
            .get(&format!(
                "/projects/{project}/issues?sort=num&limit=4{cursor}"
            ))
            .await;
        assert_eq!(page.status, 200, "{}", page.text);
        let items = page.body["items"].as_array().unwrap();
        ids.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return ids,
        }
    }
}

/// A stack whose entries are thin and whose column entries are still also in the `all` scope
/// (the layout before scopes were halved and summaries) serves the merged unfiltered grid at
/// once (thin entries' issues read as before), keeps indexing exactly under traffic while
/// `gridctl upgrade` retires that scope and writes the summaries, and ends with no `all` entry
/// left, every entry summarised and verify clean; at no point is a page empty or wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_with_the_all_scope_retires_it_under_traffic() {
    let api = TestApi::start().await;
    let p = api.project("scopes").await;
    let points = api
        .field(&p, json!({"name": "points", "type": "number"}))
        .await;
    let mut issues = Vec::new();
    for i in 0..10 {
        let issue = api
            .issue(
                &p,
                json!({"title": format!("issue {i}"), "fields": {points.clone(): i},
                       "participants": [{"kind": "user", "id": "bob", "role": "assignee"}]}),
            )
            .await;
        issues.push(issue["id"].as_str().unwrap().to_string());
    }
    for id in issues.iter().step_by(3) {
        let r = api
            .patch(&format!("/issues/{id}"), json!({"state": "closed"}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    api.sync().await;
    // No page has sorted yet: only the inbox copies carry summaries (small issues).
    let summarized = api.index_entries().await;
    assert!(
        summarized
            .iter()
            .all(|e| e.summary.is_some() == e.role.is_some()),
        "small issues"
    );
    let written = downgrade_scopes(&api).await;
    assert!(
        api.index_entries()
            .await
            .iter()
            .all(|e| e.summary.is_none())
    );
    assert_eq!(
        written,
        10 * (5 + 1),
        "every column entry, once more in `all`"
    );
    let before = verify(&api).await;
    assert!(before.is_clean(), "{:?}", before.drift);
    assert_eq!(before.previous_layout_watermarks, 10);
    assert_eq!(before.previous_layout_entries, written);
    // The grid reads the `open` and `closed` scopes merged: the whole project, in order.
    assert_eq!(whole_grid(&api, &p).await, issues);

    // Traffic while upgrade runs; the whole grid is checked after each change.
    let traffic = async {
        for (n, id) in issues.iter().enumerate() {
            let body = match n % 3 {
                0 => json!({"state": "open"}),
                1 => json!({"state": "closed", "title": format!("renamed {n}")}),
                _ => json!({"fields": {points.clone(): 99}}),
            };
            let r = api.patch(&format!("/issues/{id}"), body).await;
            assert_eq!(r.status, 200, "{}", r.text);
            api.sync().await;
            assert_eq!(whole_grid(&api, &p).await, issues, "after change {n}");
        }
    };
    let after = upgrade_during(&api, traffic).await;
    assert_eq!(after.previous_layout_entries, 0);
    let left = api.index_entries().await;
    assert!(
        left.iter()
            .all(|e| gridline::keys::index::column_scope(&e.pk) != Some("all")),
        "no `all` entry is left"
    );
    // The copies carry summaries again, and so does `num`, the column the grid sorts by
    // (hot since its first page); the other columns stay thin.
    assert!(
        left.iter()
            .all(|e| e.summary.is_some() == (e.role.is_some() || e.pk.contains("#num#"))),
        "every copy and hot entry carries its summary again"
    );
    assert_eq!(whole_grid(&api, &p).await, issues);
}

/// `gridctl jobs` reads a tenant's field jobs with its one statement: a field added to a
/// seeded project shows as a job that finished, with the project's issues counted.
#[tokio::test]
async fn jobs_lists_a_field_job_and_its_progress() {
    let api = TestApi::start().await;
    let seeded = seed_project(&api, 12).await;
    api.sync().await;
    let reply = api
        .post_field(
            seeded.project_id.as_str(),
            json!({"name": "Later", "type": "date"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let field = reply.body;
    assert_eq!(field["sortable"], false);
    api.sync().await;
    let jobs = support::store(&api.stack, "Jobs")
        .index()
        .list_jobs(&acme())
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].field_id.as_str(), field["id"].as_str().unwrap());
    assert!(jobs[0].finished);
    assert_eq!(jobs[0].issues, 12);
    let report = verify(&api).await;
    assert!(report.is_clean(), "{report:?}");
}

/// `gridctl directory`: a profile whose directory entry is missing (data from before the
/// directory) or stale is found, and `--fix` writes it with the directory's permissions only,
/// never undoing a rename made since its scan.
#[tokio::test]
async fn directory_finds_and_fixes_missing_and_stale_names() {
    let api = TestApi::start().await;
    let seeded = seed_project(&api, 3).await;
    let store = support::store(&api.stack, "Directory");
    let clean = gridline::ops::directory::sync(&store, 2, false, &|_| {})
        .await
        .unwrap();
    assert_eq!((clean.missing, clean.stale), (0, 0), "{clean:?}");
    assert_eq!(clean.names, 6 + 2);
    // One entry gone (as before the directory existed), one stale, one naming nobody.
    let dir_pk = gridline::keys::records::directory_pk(&acme());
    let edge = |u: &str| {
        gridline::keys::records::participant_edge(gridline::domain::ParticipantKind::User, u)
    };
    let users: Vec<String> = seeded.users.iter().map(|u| u.to_string()).collect();
    let client = &api.stack.client;
    let table = &api.stack.tables.records;
    client
        .delete_item()
        .table_name(table)
        .set_key(Some(index_key(&dir_pk, &edge(&users[0]))))
        .send()
        .await
        .unwrap();
    for (sk, name) in [(edge(&users[1]), "Old name"), (edge("ghost"), "Nobody")] {
        let mut item = index_key(&dir_pk, &sk);
        item.insert("entity".into(), AttributeValue::S("dir".into()));
        item.insert("n".into(), AttributeValue::S(name.into()));
        client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .send()
            .await
            .unwrap();
    }
    let found = gridline::ops::directory::sync(&store, 2, false, &|_| {})
        .await
        .unwrap();
    assert_eq!(
        (found.missing, found.stale, found.fixed),
        (1, 2, 0),
        "{found:?}"
    );
    let fixed = gridline::ops::directory::sync(&store, 2, true, &|_| {})
        .await
        .unwrap();
    assert_eq!((fixed.fixed, fixed.moved), (3, 0), "{fixed:?}");
    let after = gridline::ops::directory::sync(&store, 2, false, &|_| {})
        .await
        .unwrap();
    assert_eq!((after.missing, after.stale), (0, 0), "{after:?}");

    // A rename between a repair's scan and its write: the repair, holding the old name,
    // changes nothing (its transaction checks the profile too), whatever the entry holds.
    let user = gridline::domain::ParticipantKind::User;
    let renamed = gridline::store::Profile {
        id: seeded.users[2].clone(),
        display_name: Some("Renamed".into()),
    };
    api.stack
        .state
        .store
        .records()
        .put_profile(&acme(), &renamed)
        .await
        .unwrap();
    let scanned = format!("User {}", users[2]);
    for seen in [Some("Renamed"), Some(scanned.as_str())] {
        let wrote = store
            .records()
            .fix_directory_entry(&acme(), (user, &users[2]), seen, Some(&scanned))
            .await
            .unwrap();
        assert!(!wrote, "a repair undid a rename (entry seen as {seen:?})");
    }
    let now = gridline::ops::directory::sync(&store, 2, false, &|_| {})
        .await
        .unwrap();
    assert_eq!((now.missing, now.stale), (0, 0), "{now:?}");
}

/// A project deleted through the API leaves nothing for `verify` to report once its purge
/// job has run, and a workspace's people items (keys outside any tenant) are not drift.
#[tokio::test]
async fn a_purged_project_and_a_workspace_leave_verify_clean() {
    let api = TestApi::start().await;
    let seeded = seed_project(&api, 30).await;
    let keep = api.project("kept").await;
    api.issue(&keep, json!({"title": "stays"})).await;
    let ana = api.signed_in("ana", "ana@example.com").await;
    let ws = api
        .with_token(
            &ana,
            Method::POST,
            "/workspaces",
            Some(json!({"name": "W"})),
        )
        .await;
    assert_eq!(ws.status, 201, "{:?}", ws.body);
    api.sync().await;
    assert!(verify(&api).await.is_clean());

    let r = api
        .delete(&format!("/projects/{}", seeded.project_id))
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    api.sync().await;
    let report = verify(&api).await;
    assert!(report.is_clean(), "{:?}", report.drift);
    assert_eq!(report.issues, 1, "only the kept project's issue");
}
