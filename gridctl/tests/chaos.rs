//! Chaos on the local stack: across many randomised histories the indexer is killed mid-batch,
//! its writes fail, stall and come back throttled, batches arrive twice, old stream ranges are
//! replayed, outages push batches to the on-failure queue, and the local server restarts on
//! its data file. Field changes run as field jobs in the same history, through faults of their
//! own: a job killed mid-way is delivered again and resumes from its checkpoint, one that keeps
//! failing reaches the dead-letter list and is sent back. At the end the jobs finish, `gridctl
//! replay` re-drives the failed batches, and `gridctl verify` finds the index and the
//! participation copies equal to a recomputation from the records; every acknowledged write is
//! in the records and every field is sortable. `gridctl reshard` splits and merges the
//! project's columns mid-history, sometimes cut short after its first move and finished (or
//! turned back) later, so records of several shard layouts are on the stream. Relations, parent
//! changes and comments (posted, edited, deleted) run in the same histories; at the end every
//! issue's comment count is the number of its comments acknowledged, and no deleted issue's
//! comment is left.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gridctl::{ops, replay};
use gridline::indexer::field_job::FieldJobs;
use gridline::indexer::{DEFAULT_CONCURRENCY, Indexer};
use gridline::store::Store;
use gridline_local::chaos::{Chaos, Rates};
use gridline_local::jobs::{FIELD_JOB_FUNCTION, Worker};
use gridline_local::stream::Poller;
use gridline_local::testing::{Reply, TestApi, send, test_stack};
use gridline_local::{Data, INDEXER_FUNCTION, Stack};
use http::Method;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Fields every history's project starts with.
const WIDE: usize = 20;
const USERS: [&str; 4] = ["alice", "bob", "carol", "dave"];
const ROLES: [&str; 3] = ["assignee", "watcher", "reporter"];

async fn start(path: &Path) -> Stack {
    test_stack(Data::File(path.to_path_buf()))
        .await
        .expect("the stack starts on its data file")
}

/// The indexer as the mapping runs it, through a client with faults.
async fn faulty_poller(stack: &Stack, chaos: &Arc<Chaos>) -> Poller {
    let store = Store::new(
        chaos.client(&stack.function_client(INDEXER_FUNCTION)),
        &stack.tables.records,
        &stack.tables.index,
    );
    let jobs = stack.field_job_queue.sender(stack.policy(INDEXER_FUNCTION));
    let indexer = Indexer::new(store).with_jobs(Arc::new(jobs));
    let mut poller = stack.poller(indexer).await;
    poller.duplicate_delivery = true;
    // Stalls stop the invocation mid-batch, as its timeout would.
    poller.kill_switch = Some(chaos.kill_switch());
    poller.max_retries = 4;
    poller
}

/// The field-job function as its queue's mapping runs it, through a client with faults of its
/// own. Pages of 3 issues, 2 per message: a job spans several messages, and a kill falls
/// between checkpoints.
fn faulty_worker(stack: &Stack, chaos: &Arc<Chaos>) -> Worker {
    let store = Store::new(
        chaos.client(&stack.function_client(FIELD_JOB_FUNCTION)),
        &stack.tables.records,
        &stack.tables.index,
    );
    let sender = stack
        .field_job_queue
        .sender(stack.policy(FIELD_JOB_FUNCTION));
    let mut jobs = FieldJobs::new(store, Arc::new(sender), DEFAULT_CONCURRENCY);
    jobs.page_size = 3;
    jobs.pages_per_message = Some(2);
    let mut worker = stack
        .job_worker()
        .expect("the template has the job function");
    worker.jobs = jobs;
    worker.kill_switch = Some(chaos.kill_switch());
    // Fewer receives than the template's, so a few histories see the dead-letter list too.
    worker.max_receives = 2;
    worker
}

/// The job faults' rates: a page is ~15 writes, so a lower rate than the indexer's lets most
/// pages through while a job still meets kills, errors and dead letters.
const JOB_RATES: Rates = Rates {
    error: 0.02,
    stall: 0.02,
    throttle: 0.2,
};

/// The last job's: about one page in three is cut short.
const LAST_JOB_RATES: Rates = Rates {
    error: 0.02,
    stall: 0.06,
    throttle: 0.2,
};

async fn call(stack: &Stack, user: &str, method: Method, path: &str, body: Option<Value>) -> Reply {
    let token = TestApi::token(user, "acme");
    let body = body.map(|b| b.to_string());
    send(
        stack.router(),
        method,
        path,
        Some(&token),
        body.as_deref(),
        &[],
    )
    .await
}

/// Polls until the stream is drained or `max` batches were handled.
/// Alice creates something; its id.
async fn create(stack: &Stack, path: &str, body: Value) -> String {
    let r = call(stack, "alice", Method::POST, path, Some(body)).await;
    r.body["id"].as_str().unwrap().to_string()
}

async fn poll(poller: &mut Poller, max: usize) {
    for _ in 0..max {
        if poller.poll_once().await.expect("polling") == 0 {
            return;
        }
    }
}

/// The tenant of the token `call` sends.
fn tenant() -> gridline::domain::ids::TenantId {
    serde_json::from_value(json!("acme")).expect("a valid tenant id")
}

/// Everything runs out: the stream, then the jobs it started, with their dead letters sent
/// back (each resumes its job from the checkpoint), then what marking a field sortable put
/// on the stream; until both are quiet.
async fn run_out(
    stack: &Stack,
    poller: &mut Poller,
    worker: &Worker,
    totals: &mut BTreeMap<&str, u64>,
    seed: u64,
) {
    for round in 0.. {
        assert!(round < 50, "seed {seed}: the field jobs never finish");
        poll(poller, 5000).await;
        let n = worker.drain().await.expect("delivering field jobs");
        *totals.entry("job_invocations").or_default() += n as u64;
        let redriven = stack.field_job_queue.redrive();
        *totals.entry("job_dead_letters").or_default() += redriven as u64;
        if n == 0 && redriven == 0 {
            return;
        }
    }
}

/// `gridctl jobs`, with its permissions.
async fn list_jobs(stack: &Stack) -> Vec<gridline::indexer::field_job::Progress> {
    support::store(stack, "Jobs")
        .index()
        .list_jobs(&tenant())
        .await
        .expect("jobs are listed")
}

/// `gridctl verify`, with its permissions.
/// `gridctl reshard` of the project to `to` shards, or (`cut`) only its first move, as if the
/// command was stopped there. A reshard under way is finished, or turned back, instead.
async fn reshard(stack: &Stack, project: &str, to: u16, cut: bool) {
    use gridline::domain::ids::ProjectId;
    let store = support::store(stack, "Reshard");
    let project = ProjectId::parse(project).unwrap();
    let now = store
        .records()
        .get_project(&tenant(), &project)
        .await
        .unwrap()
        .unwrap();
    let read = now.read_shards();
    let to = match now.shards_also {
        // The count it goes to, or the one it came from: either ends it.
        Some(other) => {
            if to.is_multiple_of(2) {
                other
            } else {
                read
            }
        }
        None if cut && to != read => {
            let first = (read, None);
            assert!(
                store
                    .records()
                    .move_shards(&tenant(), &project, first, (read, Some(to)), "cut")
                    .await
                    .unwrap()
            );
            return;
        }
        None => to,
    };
    let indexer = Indexer::new(store.clone());
    let at = (&tenant(), &project);
    gridline::ops::reshard::reshard(&indexer, &store, at, to, Duration::ZERO, &|_, _| {})
        .await
        .expect("reshard");
}

/// Finishes a reshard left under way.
async fn finish_reshard(stack: &Stack, project: &str) {
    use gridline::domain::ids::ProjectId;
    let store = support::store(stack, "Reshard");
    let id = ProjectId::parse(project).unwrap();
    if let Some(to) = store
        .records()
        .get_project(&tenant(), &id)
        .await
        .unwrap()
        .unwrap()
        .shards_also
    {
        reshard(stack, project, to, false).await;
    }
}

/// The versions an issue's history lists, page after page (7 a page).
async fn history_versions(stack: &Stack, id: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("/issues/{id}/history?limit=7{cursor}");
        let r = call(stack, "alice", Method::GET, &path, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
        for e in r.body["items"].as_array().unwrap() {
            out.push(e["version"].as_u64().unwrap());
        }
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => return out,
        }
    }
}

/// A saved view created (a filter on a field, grouped by state, or none), reshaped, or
/// deleted.
async fn view_step(stack: &Stack, project: &str, fields: &[String], rng: &mut StdRng) {
    let views = call(
        stack,
        "alice",
        Method::GET,
        &format!("/projects/{project}/views"),
        None,
    )
    .await;
    let ids: Vec<String> = views.body["items"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|v| v["id"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    let f = &fields[rng.gen_range(0..fields.len())];
    let body = json!({"name": "v", "where": [[f, "gte", rng.gen_range(-3..3)]], "sort": f,
        "group_by": "state"});
    let r = match rng.gen_range(0..3) {
        0 if !ids.is_empty() => {
            let id = &ids[rng.gen_range(0..ids.len())];
            call(
                stack,
                "alice",
                Method::DELETE,
                &format!("/views/{id}"),
                None,
            )
            .await
        }
        1 if !ids.is_empty() => {
            let id = &ids[rng.gen_range(0..ids.len())];
            let body = json!({"order": if rng.gen_bool(0.5) { "desc" } else { "asc" }, "where": body["where"]});
            call(
                stack,
                "alice",
                Method::PATCH,
                &format!("/views/{id}"),
                Some(body),
            )
            .await
        }
        _ => {
            call(
                stack,
                "alice",
                Method::POST,
                &format!("/projects/{project}/views"),
                Some(body),
            )
            .await
        }
    };
    // A view of a field deleted meanwhile is gone (404).
    assert!(
        [200, 201, 204, 404].contains(&r.status.as_u16()),
        "{}",
        r.text
    );
}

/// Every view is ready and its count is the number of issues its list holds, page by page.
async fn check_view_counts(stack: &Stack, project: &str, seed: u64) {
    let views = call(
        stack,
        "alice",
        Method::GET,
        &format!("/projects/{project}/views"),
        None,
    )
    .await;
    for view in views.body["items"].as_array().unwrap() {
        assert_eq!(view["ready"], true, "seed {seed}: {view}");
        let id = view["id"].as_str().unwrap();
        let mut listed = 0;
        let mut path = format!("/views/{id}/issues?limit=100");
        loop {
            let r = call(stack, "alice", Method::GET, &path, None).await;
            assert_eq!(r.status, 200, "seed {seed}: {}", r.text);
            listed += r.body["items"].as_array().unwrap().len();
            match r.body["next_cursor"].as_str() {
                Some(c) => path = format!("/views/{id}/issues?limit=100&cursor={c}"),
                None => break,
            }
        }
        assert_eq!(view["count"], listed, "seed {seed}: {view}");
        let grouped: u64 = view["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["count"].as_u64().unwrap())
            .sum();
        assert_eq!(grouped, listed as u64, "seed {seed}: {view}");
    }
}

async fn verify(stack: &Stack) -> ops::VerifyReport {
    ops::verify(&support::store(stack, "Verify"), 3, &ProgressBar::hidden())
        .await
        .expect("verify runs")
}

#[derive(Debug, Clone, PartialEq)]
struct Expect {
    title: String,
    state: String,
    participants: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_converges_through_many_randomised_histories_of_faults_and_restarts() {
    let dir = std::env::temp_dir().join(format!("gridline-chaos-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut totals = BTreeMap::<&str, u64>::new();
    // More histories on demand: CHAOS_HISTORIES=100 cargo test -p gridctl --test chaos
    let histories: u64 = std::env::var("CHAOS_HISTORIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    // One history again: CHAOS_SEED=5 cargo test -p gridctl --test chaos
    let first: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let seeds = match std::env::var("CHAOS_SEED") {
        Ok(_) => first..first + 1,
        Err(_) => 0..histories,
    };
    for seed in seeds {
        let path = dir.join(format!("history-{seed}.db"));
        let mut rng = StdRng::seed_from_u64(seed);
        let chaos = Chaos::new(seed, Rates::default());
        let job_chaos = Chaos::new(seed + 1_000_000, JOB_RATES);
        let mut stack = start(&path).await;
        let mut poller = faulty_poller(&stack, &chaos).await;
        let mut worker = faulty_worker(&stack, &job_chaos);
        let mut dead_letters: Vec<Value> = Vec::new();

        let project = create(&stack, "/projects", json!({"name": "chaos"})).await;
        // Enough fields that watermarks keep them in buckets: updates read and rewrite some
        // buckets, closes and deletions all of them, field changes may change the layout.
        let mut fields: Vec<String> = Vec::new();
        for i in 0..WIDE {
            let path = format!("/projects/{project}/fields");
            let body = json!({"name": format!("w{i}"), "type": "number"});
            let r = call(&stack, "alice", Method::POST, &path, Some(body)).await;
            assert_eq!(r.status, 201, "{}", r.text);
            fields.push(r.body["id"].as_str().unwrap().into());
        }
        let team = create(&stack, "/teams", json!({"name": "ops"})).await;
        let mut model: BTreeMap<String, Expect> = BTreeMap::new();
        let mut deleted: Vec<String> = Vec::new();
        // Each live issue's comments (ids), as the API acknowledged them.
        let mut comments: BTreeMap<String, Vec<String>> = BTreeMap::new();

        for step in 0..45 {
            let live: Vec<String> = model.keys().cloned().collect();
            let pick = |rng: &mut StdRng| live[rng.gen_range(0..live.len())].clone();
            match rng.gen_range(0..116) {
                0..=24 => {
                    let mut values = serde_json::Map::new();
                    for f in &fields {
                        if rng.gen_bool(0.7) {
                            values.insert(f.clone(), json!(rng.gen_range(-5..5)));
                        }
                    }
                    let who = USERS[rng.gen_range(0..USERS.len())];
                    let mut participants =
                        vec![json!({"kind": "user", "id": who, "role": "assignee"})];
                    if rng.gen_bool(0.3) {
                        participants.push(json!({"kind": "team", "id": team, "role": "watcher"}));
                    }
                    let r = call(&stack, "alice", Method::POST, &format!("/projects/{project}/issues"),
                        Some(json!({"title": format!("t{step}"), "fields": values, "participants": participants}))).await;
                    assert_eq!(r.status, 201, "{}", r.text);
                    model.insert(
                        r.body["id"].as_str().unwrap().into(),
                        Expect {
                            title: format!("t{step}"),
                            state: "open".into(),
                            participants: r.body["participants"].as_array().unwrap().len(),
                        },
                    );
                }
                25..=54 if !live.is_empty() => {
                    let id = pick(&mut rng);
                    let state = if rng.gen_bool(0.3) { "closed" } else { "open" };
                    let mut body = json!({"title": format!("p{step}"), "state": state});
                    if !fields.is_empty() {
                        let f = fields[rng.gen_range(0..fields.len())].clone();
                        body["fields"] = json!({f: rng.gen_range(-5..5)});
                    }
                    let r = call(
                        &stack,
                        "alice",
                        Method::PATCH,
                        &format!("/issues/{id}"),
                        Some(body),
                    )
                    .await;
                    assert_eq!(r.status, 200, "{}", r.text);
                    let e = model.get_mut(&id).unwrap();
                    e.title = format!("p{step}");
                    e.state = state.into();
                }
                55..=69 if !live.is_empty() => {
                    let id = pick(&mut rng);
                    let who = USERS[rng.gen_range(0..USERS.len())];
                    let (method, body) = if rng.gen_bool(0.6) {
                        (
                            Method::PUT,
                            Some(json!({"role": ROLES[rng.gen_range(0..3)]})),
                        )
                    } else {
                        (Method::DELETE, None)
                    };
                    let r = call(
                        &stack,
                        "alice",
                        method,
                        &format!("/issues/{id}/participants/user/{who}"),
                        body,
                    )
                    .await;
                    // Removing someone who is not a participant is a 404; nothing changes.
                    assert!([200, 204, 404].contains(&r.status.as_u16()), "{}", r.text);
                    let now =
                        call(&stack, "alice", Method::GET, &format!("/issues/{id}"), None).await;
                    model.get_mut(&id).unwrap().participants =
                        now.body["participants"].as_array().unwrap().len();
                }
                70..=77 if !live.is_empty() => {
                    let id = pick(&mut rng);
                    let r = call(
                        &stack,
                        "alice",
                        Method::DELETE,
                        &format!("/issues/{id}"),
                        None,
                    )
                    .await;
                    assert_eq!(r.status, 204);
                    model.remove(&id);
                    comments.remove(&id);
                    deleted.push(id);
                }
                78..=82 => {
                    let r = call(
                        &stack,
                        "alice",
                        Method::POST,
                        &format!("/projects/{project}/fields"),
                        Some(json!({"name": format!("f{step}"), "type": "number"})),
                    )
                    .await;
                    assert_eq!(r.status, 201);
                    fields.push(r.body["id"].as_str().unwrap().into());
                }
                83..=85 if fields.len() > 1 => {
                    let f = fields.remove(rng.gen_range(0..fields.len()));
                    let r = call(
                        &stack,
                        "alice",
                        Method::DELETE,
                        &format!("/projects/{project}/fields/{f}"),
                        None,
                    )
                    .await;
                    assert_eq!(r.status, 204);
                }
                86..=89 => {
                    let cut = rng.gen_bool(0.4);
                    reshard(&stack, &project, rng.gen_range(1..=4), cut).await;
                    *totals.entry("reshards").or_default() += 1;
                }
                // Relations: both sides at once; a deleted issue's leave the others by the
                // stream (verify checks both sides).
                90..=94 if live.len() > 1 => {
                    let (a, b) = (pick(&mut rng), pick(&mut rng));
                    let kind =
                        ["blocks", "blocked_by", "duplicates", "relates_to"][rng.gen_range(0..4)];
                    let method = if rng.gen_bool(0.7) {
                        Method::PUT
                    } else {
                        Method::DELETE
                    };
                    let r = call(
                        &stack,
                        "alice",
                        method,
                        &format!("/issues/{a}/relations/{kind}/{b}"),
                        None,
                    )
                    .await;
                    // Self (400), not related so (404): nothing changes.
                    assert!([204, 400, 404].contains(&r.status.as_u16()), "{}", r.text);
                    *totals.entry("relation_changes").or_default() += u64::from(r.status == 204);
                }
                // Sub-issues: a parent set, moved or detached (a deleted parent's children are
                // detached by the stream; verify checks the edges and the children partitions).
                95..=99 if !live.is_empty() => {
                    let id = pick(&mut rng);
                    let parent = if rng.gen_bool(0.8) {
                        json!(pick(&mut rng))
                    } else {
                        Value::Null
                    };
                    let r = call(
                        &stack,
                        "alice",
                        Method::PATCH,
                        &format!("/issues/{id}"),
                        Some(json!({"parent_id": parent})),
                    )
                    .await;
                    // Itself (400), a cycle or too deep (409): nothing changes.
                    assert!([200, 400, 409].contains(&r.status.as_u16()), "{}", r.text);
                    *totals.entry("parent_changes").or_default() += u64::from(r.status == 200);
                }
                // Comments: posted, edited, deleted (a deleted issue's go with it, by the
                // stream or a replay; verify finds any left and checks every count).
                100..=109 if !live.is_empty() => {
                    let id = pick(&mut rng);
                    let on = comments.entry(id.clone()).or_default();
                    let (method, path, body) = match (rng.gen_range(0..10), on.is_empty()) {
                        (0..=5, _) | (_, true) => (
                            Method::POST,
                            format!("/issues/{id}/comments"),
                            Some(json!({"body": format!("step {step}")})),
                        ),
                        (6..=7, false) => (
                            Method::PATCH,
                            format!("/comments/{}", on[rng.gen_range(0..on.len())]),
                            Some(json!({"body": format!("edited at {step}")})),
                        ),
                        _ => {
                            let gone = on.swap_remove(rng.gen_range(0..on.len()));
                            (Method::DELETE, format!("/comments/{gone}"), None)
                        }
                    };
                    let r = call(&stack, "alice", method.clone(), &path, body).await;
                    assert!([200, 201, 204].contains(&r.status.as_u16()), "{}", r.text);
                    if method == Method::POST {
                        on.push(r.body["id"].as_str().unwrap().to_string());
                    }
                    *totals.entry("comment_changes").or_default() += 1;
                }
                // Saved views: created (bounded), reshaped or deleted; their lists and counts
                // follow through the same faults (verify checks both).
                110..=115 => {
                    view_step(&stack, &project, &fields, &mut rng).await;
                    *totals.entry("view_changes").or_default() += 1;
                }
                _ => {}
            }
            // The indexer's side of the history.
            match rng.gen_range(0..100) {
                0..=39 => poll(&mut poller, rng.gen_range(1..4)).await,
                40..=47 => {
                    // A new mapping from TRIM_HORIZON replays every old range.
                    let mut replayer = stack.poller(stack.indexer()).await;
                    poll(&mut replayer, rng.gen_range(1..50)).await;
                    *totals.entry("replays").or_default() += 1;
                }
                48..=53 => {
                    // An outage longer than the retries: batches go to the on-failure queue.
                    chaos.outage.store(true, Ordering::Relaxed);
                    poll(&mut poller, 8).await;
                    chaos.outage.store(false, Ordering::Relaxed);
                    *totals.entry("outages").or_default() += 1;
                }
                54..=58 => {
                    // The local server restarts on its data file; the mapping starts over.
                    dead_letters.append(&mut poller.dead_letters);
                    *totals.entry("job_undone").or_default() += worker.undone.into_inner();
                    drop(poller);
                    drop(stack);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    stack = start(&path).await;
                    poller = faulty_poller(&stack, &chaos).await;
                    worker = faulty_worker(&stack, &job_chaos);
                    *totals.entry("restarts").or_default() += 1;
                }
                _ => {}
            }
            // The job queue's side: the mapping delivers what is waiting.
            if rng.gen_bool(0.4) {
                let n = worker.run_once().await.expect("delivering field jobs");
                *totals.entry("job_invocations").or_default() += n as u64;
            }
        }
        // Everything runs out: the stream, then the jobs it started, with their dead letters
        // sent back (each resumes its job from the checkpoint), then what marking a field
        // sortable put on the stream; until both are quiet.
        run_out(&stack, &mut poller, &worker, &mut totals, seed).await;
        finish_reshard(&stack, &project).await;
        dead_letters.append(&mut poller.dead_letters);
        *totals.entry("job_undone").or_default() += worker.undone.into_inner();
        *totals.entry("dead_letters").or_default() += dead_letters.len() as u64;
        *totals.entry("faults").or_default() += chaos.faults();
        *totals.entry("job_faults").or_default() += job_chaos.faults();

        // gridctl replay for what reached the on-failure queue.
        let streams = support::replay_streams(&stack).await;
        let indexer = support::replay_indexer(&stack);
        let mut report = replay::ReplayReport::default();
        for message in &dead_letters {
            let batch = replay::parse_message(&message.to_string()).unwrap();
            let touched = replay::touched_by(&streams, &batch).await.unwrap();
            replay::redrive(&indexer, &touched, &mut report)
                .await
                .unwrap();
        }
        // A replayed delete's clean-up changes other issues (a relation removed, a child
        // detached: new versions), which reach the index through the stream, as the live
        // mapping (here without faults: they are over) takes them after a replay.
        let mut live = stack.poller(stack.indexer()).await;
        poll(&mut live, 5000).await;

        // gridctl verify: the index and the participation copies equal the recomputation.
        let found = verify(&stack).await;
        assert!(
            found.is_clean(),
            "seed {seed}: missing {} extra {} stale {} in {:?}; replayed {:?}; dead letters {}; \
             drift {:#?}",
            found.missing,
            found.extra,
            found.stale,
            found.drift.issues(),
            report.touched,
            dead_letters.len(),
            found.drift
        );
        assert_eq!(found.issues, model.len(), "seed {seed}");
        check_view_counts(&stack, &project, seed).await;
        for (id, on) in &comments {
            let r = call(&stack, "alice", Method::GET, &format!("/issues/{id}"), None).await;
            assert_eq!(r.body["comment_count"], on.len(), "seed {seed}: {id}");
        }
        // Exactly one history entry per version, newest first, through the API's pages.
        for id in model.keys() {
            let r = call(&stack, "alice", Method::GET, &format!("/issues/{id}"), None).await;
            let version = r.body["version"].as_u64().unwrap();
            let listed = history_versions(&stack, id).await;
            let want: Vec<u64> = (1..=version).rev().collect();
            assert_eq!(listed, want, "seed {seed}: {id}'s history");
        }

        // A last field, whose column nothing else rebuilds (a later job, a replay, an issue's
        // update would each index every issue with all the fields): its job alone, killed
        // often, must resume from its checkpoints and finish exact. A fault-free mapping reads
        // the stream first (a replay, whose field records may start jobs of their own: they
        // finish before the field exists).
        let last_job_chaos = Chaos::new(seed + 2_000_000, LAST_JOB_RATES);
        let worker = faulty_worker(&stack, &last_job_chaos);
        let mut poller = stack.poller(stack.indexer()).await;
        run_out(&stack, &mut poller, &worker, &mut totals, seed).await;
        let jobs_before = list_jobs(&stack).await;
        let r = call(
            &stack,
            "alice",
            Method::POST,
            &format!("/projects/{project}/fields"),
            Some(json!({"name": "last", "type": "number"})),
        )
        .await;
        assert_eq!(r.status, 201);
        fields.push(r.body["id"].as_str().unwrap().into());
        run_out(&stack, &mut poller, &worker, &mut totals, seed).await;
        let new_jobs: Vec<_> = list_jobs(&stack)
            .await
            .into_iter()
            .filter(|j| {
                !jobs_before
                    .iter()
                    .any(|b| (&b.field_id, b.kind) == (&j.field_id, j.kind))
            })
            .collect();
        assert_eq!(
            new_jobs
                .iter()
                .map(|j| (j.field_id.as_str(), j.finished))
                .collect::<Vec<_>>(),
            [(fields[fields.len() - 1].as_str(), true)],
            "seed {seed}: the last field's job, and only it"
        );
        assert!(
            poller.dead_letters.is_empty(),
            "seed {seed}: {:?}",
            poller.dead_letters
        );
        *totals.entry("job_undone").or_default() += worker.undone.into_inner();
        *totals.entry("job_faults").or_default() += last_job_chaos.faults();
        let found = verify(&stack).await;
        assert!(
            found.is_clean(),
            "seed {seed}: after the last field's job: missing {} extra {} stale {}; drift {:#?}; \
             jobs {:#?}",
            found.missing,
            found.extra,
            found.stale,
            found.drift,
            support::store(&stack, "Jobs")
                .index()
                .list_jobs(&tenant())
                .await
        );

        // No lost update: every acknowledged write is what the records hold.
        for (id, want) in &model {
            let r = call(&stack, "alice", Method::GET, &format!("/issues/{id}"), None).await;
            assert_eq!(r.status, 200, "seed {seed}");
            let got = Expect {
                title: r.body["title"].as_str().unwrap().into(),
                state: r.body["state"].as_str().unwrap().into(),
                participants: r.body["participants"].as_array().unwrap().len(),
            };
            assert_eq!(&got, want, "seed {seed}: issue {id}");
        }
        for id in &deleted {
            let r = call(&stack, "alice", Method::GET, &format!("/issues/{id}"), None).await;
            assert_eq!(r.status, 404, "seed {seed}: a deleted issue came back");
        }

        // Every field's column is complete, and the grid sorts by it.
        let r = call(
            &stack,
            "alice",
            Method::GET,
            &format!("/projects/{project}"),
            None,
        )
        .await;
        for f in &fields {
            let def = r.body["fields"]
                .as_array()
                .and_then(|defs| defs.iter().find(|d| &d["id"] == f));
            assert_eq!(
                def.map(|d| &d["sortable"]),
                Some(&json!(true)),
                "seed {seed}: field {f} is not sortable; jobs {:?}",
                support::store(&stack, "Jobs")
                    .index()
                    .list_jobs(&tenant())
                    .await
            );
            let path = format!("/projects/{project}/issues?sort={f}&limit=7");
            let r = call(&stack, "alice", Method::GET, &path, None).await;
            assert_eq!(r.status, 200, "seed {seed}: {}", r.text);
        }
        // The grid by number, a page at a time across however many shards: every live issue,
        // once, in number order.
        let mut listed: Vec<(u64, String)> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/projects/{project}/issues?sort=num&limit=7");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let r = call(&stack, "alice", Method::GET, &path, None).await;
            assert_eq!(r.status, 200, "seed {seed}: {}", r.text);
            for item in r.body["items"].as_array().unwrap() {
                let id = item["id"].as_str().unwrap().to_string();
                listed.push((item["num"].as_u64().unwrap(), id));
            }
            match r.body["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        assert!(
            listed.windows(2).all(|w| w[0].0 < w[1].0),
            "seed {seed}: grid order"
        );
        let ids: std::collections::BTreeSet<&String> = listed.iter().map(|(_, id)| id).collect();
        assert_eq!(
            ids,
            model.keys().collect(),
            "seed {seed}: the grid's issues"
        );
        *totals.entry("jobs").or_default() += support::store(&stack, "Jobs")
            .index()
            .list_jobs(&tenant())
            .await
            .map_or(0, |j| j.len() as u64);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("chaos totals over {histories} histories: {totals:?}");
    for kind in [
        "restarts",
        "replays",
        "outages",
        "dead_letters",
        "jobs",
        "job_faults",
        "job_undone",
        "job_dead_letters",
        "reshards",
    ] {
        assert!(
            totals.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} happened: {totals:?}"
        );
    }
}
