//! `gridctl reshard` against the embedded engine and its real stream: a project's columns
//! split into shards and merged back while the grid is read and written, with the
//! permissions `gridctl/iam-policy.json` gives the command.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use gridctl::{ops, seed};
use gridline::domain::ids::{IssueId, ProjectId, TenantId};
use gridline::indexer::Indexer;
use gridline::ops::reshard::{self, Report, ReshardError, Stage};
use gridline_local::testing::{ALICE, TestApi};
use http::{Method, StatusCode};
use indicatif::ProgressBar;
use serde_json::json;

fn acme() -> TenantId {
    TenantId::parse("acme").unwrap()
}

async fn seed_project(api: &TestApi, issues: u64) -> seed::Seeded {
    let spec = seed::Spec {
        tenant: acme(),
        project_name: "Hot".into(),
        issues,
        extra_fields: 1,
        users: 6,
        teams: 2,
        rng_seed: 11,
    };
    seed::seed(
        &support::store(&api.stack, "Seed"),
        &spec,
        &ProgressBar::hidden(),
    )
    .await
    .unwrap()
}

/// `gridctl reshard`, as the command runs it.
async fn run(
    api: &TestApi,
    project: &ProjectId,
    to: u16,
    settle: Duration,
) -> Result<Report, ReshardError> {
    let store = support::store(&api.stack, "Reshard");
    let indexer = Indexer::new(store.clone());
    reshard::reshard(&indexer, &store, (&acme(), project), to, settle, &|_, _| {}).await
}

/// Every issue id of a grid, following `next_cursor` with pages of `limit`.
async fn page_all(api: &TestApi, project: &ProjectId, query: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10_000 {
        let mut path = format!("/projects/{project}/issues?limit={limit}{query}");
        if let Some(c) = &cursor {
            assert!(c.len() < 2048, "a cursor stays under 2 KB");
            path.push_str(&format!("&cursor={c}"));
        }
        let r = api.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        let items = r.body["items"].as_array().unwrap();
        assert!(items.len() <= limit);
        ids.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return ids,
        }
    }
    panic!("paging did not end")
}

/// The grids a reader checks: by number, by a custom field (values then missing ones, both
/// phases of a descending read), and open issues by last update.
fn grids(points: &str) -> [String; 3] {
    [
        "&sort=num".to_string(),
        format!("&sort={points}&order=desc"),
        "&sort=updated_at&order=desc&state=open".to_string(),
    ]
}

/// After the stream has run out: the project's columns are in `layout` only (its shard count
/// as the keys carry it, `""` for one shard), and the index equals the recomputation.
async fn assert_only_layout(api: &TestApi, project: &ProjectId, layout: &str) {
    api.sync().await;
    assert_eq!(
        layouts_in_index(api, project).await,
        [layout.to_string()].into()
    );
    api.assert_index_matches_records(&acme(), std::slice::from_ref(project))
        .await;
}

/// The project's issues, from the records.
async fn issues(api: &TestApi, project: &ProjectId) -> Vec<gridline::domain::Issue> {
    api.stack
        .state
        .store
        .records()
        .issues_of_project(&acme(), project, None, 1000)
        .await
        .unwrap()
        .items
}

/// `gridctl verify`, as the command runs it, finds nothing.
async fn assert_verify_clean(api: &TestApi) {
    let found = ops::verify(
        &support::store(&api.stack, "Verify"),
        2,
        &ProgressBar::hidden(),
    )
    .await
    .unwrap();
    assert!(found.is_clean(), "{:?}", found.drift);
}

/// The column partitions of the project in the index, by their shard suffix (`""`: none).
async fn layouts_in_index(
    api: &TestApi,
    project: &ProjectId,
) -> std::collections::BTreeSet<String> {
    let prefix = format!("T#acme#X#{project}#");
    api.index_entries()
        .await
        .into_iter()
        .filter_map(|e| e.pk.strip_prefix(&prefix).map(str::to_string))
        .map(|rest| {
            // column#scope[#count.shard]
            let parts: Vec<&str> = rest.split('#').collect();
            parts.get(2).map_or(String::new(), |s| {
                s.split('.').next().unwrap_or("").to_string()
            })
        })
        .collect()
}

#[tokio::test]
async fn a_project_resharded_while_read_keeps_every_grid_page_exact() {
    let api = Arc::new(TestApi::start().await);
    let seeded = seed_project(&api, 45).await;
    api.sync().await;
    let project = seeded.project_id.clone();
    let points = seeded.fields["Points"].to_string();
    let mut before = Vec::new();
    for (n, q) in grids(&points).iter().enumerate() {
        before.push(page_all(&api, &project, q, 4 + n).await);
    }
    assert!(before.iter().all(|ids| !ids.is_empty()));

    // A reader pages every grid again and again while the reshard runs: no write happens, so
    // every read must return exactly what it did before.
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (api, project, done, reads) =
            (api.clone(), project.clone(), done.clone(), reads.clone());
        let (points, before) = (points.clone(), before.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                for (n, q) in grids(&points).iter().enumerate() {
                    let now = page_all(&api, &project, q, 4 + n).await;
                    assert_eq!(now, before[n], "grid {q} changed during the reshard");
                    reads.fetch_add(1, Ordering::SeqCst);
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let report = run(&api, &project, 4, Duration::from_millis(600))
        .await
        .unwrap();
    done.store(true, Ordering::SeqCst);
    reader.await.unwrap();
    assert!(
        reads.load(Ordering::SeqCst) >= 3,
        "the reader read during the reshard"
    );
    assert_eq!((report.from, report.to), (1, 4));
    assert_eq!(report.stages, [Stage::Build, Stage::Switch, Stage::Retire]);
    assert_eq!(report.issues, 2 * 45, "two passes over every issue");

    // The index holds the 4-shard layout only, exactly what the records call for.
    assert_only_layout(&api, &project, "4").await;
    for (n, q) in grids(&points).iter().enumerate() {
        for limit in [1, 3, 50] {
            assert_eq!(
                page_all(&api, &project, q, limit).await,
                before[n],
                "{q} by {limit}"
            );
        }
    }
    assert_verify_clean(&api).await;
}

#[tokio::test]
async fn a_reshard_under_writes_ends_exact_and_one_cut_short_is_finished_by_running_it_again() {
    let api = Arc::new(TestApi::start().await);
    let seeded = seed_project(&api, 30).await;
    api.sync().await;
    let project = seeded.project_id.clone();
    run(&api, &project, 3, Duration::ZERO).await.unwrap();

    // Writes and the indexer run throughout a reshard from 3 shards to 2.
    let ids: Vec<IssueId> = issues(&api, &project)
        .await
        .into_iter()
        .map(|i| i.id)
        .collect();
    let points = seeded.fields["Points"].clone();
    let writer = {
        let (api, project) = (api.clone(), project.clone());
        tokio::spawn(async move {
            for step in 0..40 {
                let id = &ids[step % ids.len()];
                let state = if step % 5 == 0 { "closed" } else { "open" };
                let body = json!({"title": format!("w{step}"), "state": state, "fields": {points.clone(): step}});
                let r = api
                    .call(ALICE, Method::PATCH, &format!("/issues/{id}"), Some(body))
                    .await;
                assert_eq!(r.status, 200, "{}", r.text);
                if step % 6 == 0 {
                    api.issue(project.as_ref(), json!({"title": format!("new {step}")}))
                        .await;
                }
                if step % 3 == 0 {
                    api.sync().await;
                }
            }
        })
    };
    let report = run(&api, &project, 2, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (3, 2));
    writer.await.unwrap();
    assert_only_layout(&api, &project, "2").await;
    // The grid by number is every issue, in number order.
    let by_num = page_all(&api, &project, "&sort=num", 7).await;
    let mut issues = issues(&api, &project).await;
    issues.sort_by_key(|i| i.num);
    assert_eq!(
        by_num,
        issues.iter().map(|i| i.id.to_string()).collect::<Vec<_>>()
    );

    // A reshard cut short after its first move (to 5 shards): a third count is refused; the
    // count it came from turns it back, its own count finishes it.
    let store = support::store(&api.stack, "Reshard");
    assert!(
        store
            .records()
            .move_shards(&acme(), &project, (2, None), (2, Some(5)), "cut")
            .await
            .unwrap()
    );
    assert!(matches!(
        run(&api, &project, 3, Duration::ZERO).await,
        Err(ReshardError::InProgress { reads: 2, other: 5 })
    ));
    // Turned back: the count it came from retires the one being built.
    let back = run(&api, &project, 2, Duration::ZERO).await.unwrap();
    assert_eq!(back.stages, [Stage::Switch, Stage::Retire]);
    assert_only_layout(&api, &project, "2").await;
    // The run that was turned back cannot move the project again once another reshard has
    // begun, though the layouts are the same pair again: its moves name its own run.
    assert!(
        store
            .records()
            .move_shards(&acme(), &project, (2, None), (2, Some(5)), "other")
            .await
            .unwrap()
    );
    assert!(
        !store
            .records()
            .move_shards(&acme(), &project, (2, Some(5)), (5, Some(2)), "cut")
            .await
            .unwrap(),
        "a stale run's switch is refused"
    );
    // That other one, cut short, is finished with its count (the run adopts its id).
    let finished = run(&api, &project, 5, Duration::ZERO).await.unwrap();
    assert_eq!(
        finished.stages,
        [Stage::Build, Stage::Switch, Stage::Retire]
    );
    assert_only_layout(&api, &project, "5").await;
    // Back to one shard: the keys of a project that never resharded.
    run(&api, &project, 1, Duration::ZERO).await.unwrap();
    assert_only_layout(&api, &project, "").await;
    assert_verify_clean(&api).await;
    assert_eq!(api.dead_letters().await, 0);
}

#[tokio::test]
async fn an_issue_the_build_cannot_index_stops_the_reshard_before_reads_switch() {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    use gridline::keys;
    let api = TestApi::start().await;
    let seeded = seed_project(&api, 12).await;
    api.sync().await;
    let project = seeded.project_id.clone();
    let before = page_all(&api, &project, "&sort=num", 5).await;
    // One issue's watermark made unreadable: indexing it fails for good, so it is parked.
    let victim = IssueId::parse(&before[3]).unwrap();
    api.stack
        .client
        .put_item()
        .table_name(&api.stack.tables.index)
        .item(keys::PK, S(keys::index::watermark_pk(&acme(), &victim)))
        .item(keys::SK, S(keys::index::WATERMARK_SK.into()))
        .item("version", S("not a number".into()))
        .send()
        .await
        .unwrap();
    let refused = run(&api, &project, 4, Duration::ZERO).await;
    assert!(
        matches!(refused, Err(ReshardError::Parked(1))),
        "{refused:?}"
    );
    // Reads still use the one layout every issue is in.
    let store = support::store(&api.stack, "Reshard");
    let now = store
        .records()
        .get_project(&acme(), &project)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((now.read_shards(), now.shards_also), (1, Some(4)));
    assert_eq!(page_all(&api, &project, "&sort=num", 5).await, before);
}

/// A grid instance serves the layout it read for a couple of seconds. A reshard with no settle
/// at all still waits for that after switching reads before it retires the old layout, so a
/// reader that read the project just before the reshard pages every issue right after it
/// (without the wait, its held layout's entries are gone and the grid comes back short).
#[tokio::test]
async fn a_reader_holding_the_old_layout_pages_every_issue_right_after_a_quick_reshard() {
    let api = TestApi::start().await;
    let seeded = seed_project(&api, 24).await;
    let project = seeded.project_id.clone();
    api.sync().await;
    let before = page_all(&api, &project, "&sort=num", 10).await;
    assert_eq!(before.len(), 24);
    run(&api, &project, 2, Duration::ZERO).await.unwrap();
    assert_eq!(page_all(&api, &project, "&sort=num", 10).await, before);
    assert_only_layout(&api, &project, "2").await;
}
