//! Saved views' figures: a view's page beside the same filter ad hoc, the job that builds a view
//! for existing issues, a board's counts, and what views add to an issue update's writes.

use std::time::Instant;

use anyhow::{Context, Result};
use gridline::domain::ids::ViewId;
use gridline::store::Store;
use gridline_local::Stack;
use gridline_local::testing::{TestApi, send};
use http::Method;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::meter::Meter;
use crate::report::Results;
use crate::results::{Figures, Omitted, size_label};
use crate::settle::{drain, settle};
use crate::{Env, Stat};

/// The row of a page of the saved view of the rare filter's issues.
pub(crate) const VIEW_PAGE: &str = "view page (the rare filter, kept by the index)";

/// The options of the board's select field.
const STAGES: [&str; 10] = [
    "triage", "backlog", "next", "design", "build", "review", "test", "staged", "shipped", "done",
];

/// The rare filter's conditions (see `filters`): `Points` in [-50, -37.5), a band no other
/// pattern writes into (theirs are 0 and up), so the ad hoc filter and the view, measured at
/// different moments of a run, hold the same issues.
pub(crate) fn rare_conditions(points: &str) -> Value {
    json!([[points, "gte", -50], [points, "lt", -37.5]])
}

/// Saves the rare filter as a view of open issues sorted by `Due` (as the ad hoc row reads
/// them), builds it, and pages it: the seconds from the create until the view is ready
/// (`None`: its job did not finish), and its page's figures.
pub(crate) async fn view_patterns(env: &Env, s: usize) -> Result<(Option<f64>, Stat)> {
    let (p, points, me) = crate::project_points_caller(env);
    let body = json!({
        "name": "Rare", "where": rare_conditions(points),
        "sort": env.seeded.fields["Due"], "state": "open",
    });
    let (seconds, view) = build(env, &format!("/projects/{p}/views"), body).await?;
    eprintln!(
        "   view build: {}",
        seconds.map_or("not built (dead-letter)".into(), |s| format!("{s:.1} s"))
    );
    let page = crate::pages(env, me, format!("/views/{view}/issues?limit=50"), s).await?;
    Ok((seconds, page))
}

/// Creates a view through the API and runs what builds it (the stream's share, then the field
/// job, checkpointed as the job function runs it): the seconds until it is ready, and its id.
async fn build(env: &Env, path: &str, body: Value) -> Result<(Option<f64>, String)> {
    // What the earlier patterns wrote, indexed first so only the view's work is timed.
    settle(env).await?;
    let me = &env.seeded.users[0];
    let (status, reply) = env.call(me, Method::POST, path, Some(body)).await?;
    anyhow::ensure!(status == 201, "{path}: {status} {reply}");
    let id = reply["id"].as_str().context("a view id")?.to_string();
    let worker = env.stack.job_worker()?;
    let dead = worker.queue.dead_letters().len();
    let started = Instant::now();
    settle(env).await?;
    let seconds = started.elapsed().as_secs_f64();
    let (_, view) = env
        .call(me, Method::GET, &format!("/views/{id}"), None)
        .await?;
    let built = view["ready"] == true && worker.queue.dead_letters().len() == dead;
    Ok((built.then_some(seconds), id))
}

/// What reading a board's counts costs: its count items' Query alone, and the whole
/// `GET /views/{id}` (the view, its project's definitions, and that Query).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BoardCounts {
    pub(crate) counts_calls: f64,
    pub(crate) counts_rcu: f64,
    pub(crate) get_calls: f64,
    pub(crate) get_rcu: f64,
}

/// A board of a 10-option select field over 1,000 issues (about 1 in 11 without a value),
/// built and then read: its count items fill every shard with every group, as on any project
/// that size or larger (the Query reads the 32 items whatever the project's size).
pub(crate) async fn board_counts() -> Result<BoardCounts> {
    let stack = crate::indexer::stack().await?;
    let seeded = gridctl::seed::seed(
        &stack.state.store,
        &crate::indexer::spec(1000, 0)?,
        &ProgressBar::hidden(),
    )
    .await?;
    let token = TestApi::token(&seeded.users[0], &seeded.tenant);
    let call = |method: Method, path: String, body: Option<Value>| {
        let (router, token) = (stack.router(), token.clone());
        async move {
            let body = body.map(|b| b.to_string());
            send(router, method, &path, Some(&token), body.as_deref(), &[]).await
        }
    };
    let p = &seeded.project_id;
    let reply = call(
        Method::POST,
        format!("/projects/{p}/fields"),
        Some(json!({"name": "Stage", "type": "select", "options": STAGES})),
    )
    .await;
    anyhow::ensure!(reply.status == 201, "field: {}", reply.text);
    let stage = reply.body["id"].as_str().context("a field id")?.to_string();
    let mut rng = StdRng::seed_from_u64(10);
    for id in crate::issue_ids(&stack.state.store, &seeded).await? {
        let value = match rng.gen_range(0..11) {
            10 => Value::Null,
            k => json!(STAGES[k]),
        };
        let fields = json!({ &stage: value });
        let reply = call(
            Method::PATCH,
            format!("/issues/{id}"),
            Some(json!({"fields": fields})),
        );
        let reply = reply.await;
        anyhow::ensure!(reply.status == 200, "patch: {}", reply.text);
    }
    let body = json!({"name": "Board", "group_by": stage});
    let reply = call(Method::POST, format!("/projects/{p}/views"), Some(body)).await;
    anyhow::ensure!(reply.status == 201, "view: {}", reply.text);
    let view = reply.body["id"].as_str().context("a view id")?.to_string();
    settle_stack(&stack).await?;
    let reply = call(Method::GET, format!("/views/{view}"), None).await;
    anyhow::ensure!(reply.body["count"] == 1000, "the board: {}", reply.text);
    measure_counts(&stack, &seeded, &view, &token).await
}

/// [`BoardCounts`] of the built board `view`.
async fn measure_counts(
    stack: &Stack,
    seeded: &gridctl::seed::Seeded,
    view: &str,
    token: &str,
) -> Result<BoardCounts> {
    let meter = Meter::new();
    // The projects function's own guarded client: the Query its policy allows.
    let store = Store::new(
        meter.client(&stack.function_client("ProjectsFunction")),
        &stack.tables.records,
        &stack.tables.index,
    );
    let id = ViewId::parse(view).context("a view id")?;
    let item = stack
        .state
        .store
        .records()
        .get_view(&seeded.tenant, &id)
        .await?
        .context("the view")?;
    let before = meter.now();
    let counts = store
        .index()
        .view_counts(&seeded.tenant, view, item.rev)
        .await?;
    anyhow::ensure!(counts.total == 1000, "counts: {counts:?}");
    let read = meter.now() - before;
    let router = stack.router_with(|f| meter.client(&stack.function_client(f)));
    let before = meter.now();
    let reply = send(
        router,
        Method::GET,
        &format!("/views/{view}"),
        Some(token),
        None,
        &[],
    )
    .await;
    anyhow::ensure!(reply.status == 200, "get view: {}", reply.text);
    let get = meter.now() - before;
    Ok(BoardCounts {
        counts_calls: read.calls as f64,
        counts_rcu: read.capacity,
        get_calls: get.calls as f64,
        get_rcu: get.capacity,
    })
}

/// Indexes what the stream holds and runs the field jobs that starts, until both are idle.
async fn settle_stack(stack: &Stack) -> Result<()> {
    let mut poller = stack.poller(stack.indexer()).await;
    poller.emit_metrics = false;
    let worker = stack.job_worker()?;
    loop {
        drain(&mut poller).await?;
        if worker.queue.is_empty() {
            return Ok(());
        }
        worker.drain().await?;
    }
}

/// `views` views on the project of the update figures (`indexer::updates`), built: each update
/// there sets `Points` to 0, so it takes the issue out of one (`Points ne 0`) and into another
/// (`Points eq 0`); the others (`Points lt -1000`) hold none of its issues.
pub(crate) async fn update_views(
    stack: &Stack,
    router: &axum::Router,
    token: &str,
    seeded: &gridctl::seed::Seeded,
    views: usize,
) -> Result<()> {
    // The figures' claim holds only if every update sets `Points` to 0: with no extra field,
    // `Points` is the one field the rounds change (`indexer::updatable_fields`).
    anyhow::ensure!(
        views == 0 || seeded.fields.keys().all(|n| !n.starts_with("Extra")),
        "views are measured on the project without extra fields"
    );
    let points = &seeded.fields["Points"];
    for k in 0..views {
        let filter = match k {
            0 => json!([[points, "ne", 0]]),
            1 => json!([[points, "eq", 0]]),
            _ => json!([[points, "lt", -1000]]),
        };
        let reply = send(
            router.clone(),
            Method::POST,
            &format!("/projects/{}/views", seeded.project_id),
            Some(token),
            Some(&json!({"name": format!("v{k}"), "where": filter}).to_string()),
            &[],
        )
        .await;
        anyhow::ensure!(reply.status == 201, "view: {}", reply.text);
    }
    if views > 0 {
        // Built by the field job, as in production (the metered indexer has no job queue).
        settle_stack(stack).await?;
    }
    Ok(())
}

/// The views' figures by name (see `results::NAMES`).
pub(crate) fn view_figures(r: &Results, f: &mut Figures, omitted: &mut Omitted) {
    for (n, patterns) in &r.patterns {
        let size = size_label(*n);
        let Some(page) = patterns.get(VIEW_PAGE) else {
            continue;
        };
        let rcu = page.capacity - page.write_capacity;
        f.insert(format!("view_page_{size}_calls"), page.calls);
        f.insert(format!("view_page_{size}_rcu_total"), rcu);
        let filter = patterns.get(crate::filters::RARE_FILTER);
        if let Some(filter) = filter.filter(|s| s.rows > 0.0 && page.rows > 0.0) {
            let per_50 = |s: &Stat| (s.capacity - s.write_capacity) * 50.0 / s.rows;
            f.insert(
                format!("filter_to_view_{size}_rcu_ratio"),
                per_50(filter) / per_50(page),
            );
        }
    }
    for (n, seconds) in &r.view_build {
        let name = format!("view_build_{}_seconds", size_label(*n));
        match seconds {
            Some(s) => {
                f.insert(name, *s);
            }
            None => {
                omitted.insert(name, "the view's job did not finish".into());
            }
        }
    }
    if let Some(b) = &r.board {
        f.insert("view_counts_calls".into(), b.counts_calls);
        f.insert("view_counts_rcu".into(), b.counts_rcu);
        f.insert("view_get_calls".into(), b.get_calls);
        f.insert("view_get_rcu".into(), b.get_rcu);
    }
    for (views, wcu) in &r.update_views {
        f.insert(format!("update_1_field_wcu_f5_views_{views}"), *wcu);
    }
}
