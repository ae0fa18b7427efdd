//! `make bench`: measures Gridline's access patterns at 1k, 10k and 100k issues on the local
//! stack — DynamoDB calls, capacity units, items read, latency — next to three other designs
//! for the grid's sorted page, implemented honestly in `baselines`: reading every issue and
//! sorting in memory, a table of field values read with one Query per issue, and a GSI on the
//! value with a FilterExpression for the issues without one; the indexer's throughput and write
//! amplification; each function's release binary size and cold-start init time. Writes
//! BENCHMARKS.md, benchmarks.svg and bench/results.json (the figures by name, for comparing
//! runs). Not part of `make test`: it measures, it asserts nothing.

mod activity;
mod baselines;
mod binaries;
mod delay;
mod field_add;
mod filters;
mod graph;
mod hot;
mod indexer;
mod membership;
mod meter;
mod plot;
mod report;
mod results;
mod settle;
mod views;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use axum::body::Body;
use clap::Parser;
use gridline::domain::ids::{IssueId, TenantId};
use gridline::store::Store;
use gridline_local::testing::{TestApi, into_reply, test_stack};
use gridline_local::{Data, Stack};
use http::Method;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tower::ServiceExt;

use meter::{Counts, Meter};
use settle::{drain, settle};

/// The indexer function's allocator (functions/indexer), so the core's figures are the
/// function's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Project sizes (issues).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    sizes: Vec<u64>,
    /// Samples per access pattern.
    #[arg(long, default_value_t = 40)]
    samples: usize,
    #[arg(long, default_value = "BENCHMARKS.md")]
    out: std::path::PathBuf,
    #[arg(long, default_value = "benchmarks.svg")]
    plot: std::path::PathBuf,
    /// The figures by name, as one flat JSON object (see `results`).
    #[arg(long, default_value = "bench/results.json")]
    results: std::path::PathBuf,
    /// Where the engine's SQLite files go, one per size, removed after it: RAM-backed
    /// `/dev/shm` when there is one, else the temp directory. A file rather than an in-memory
    /// engine so the local stack can index the engine's stream table (see
    /// `gridline_local::Engine::start`); without that, writes slow with the stream's length.
    #[arg(long)]
    engine_dir: Option<std::path::PathBuf>,
    /// Where the release binaries are (cargo build --release).
    #[arg(long, default_value = "target/release")]
    binaries: std::path::PathBuf,
    /// Only the indexer's pure core (`index_core_*`), printed in records/s; writes no file.
    /// For working on the core: it skips every other measure.
    #[arg(long)]
    core: bool,
    /// Issues seeded for the pure core's figures (their inserts and one update each are the
    /// records it indexes).
    #[arg(long, default_value_t = 5_000)]
    core_issues: u64,
    /// Only the delayed indexer's throughput (`indexer_issues_per_s_per_shard_5ms`) at these
    /// concurrencies, printed; writes no file.
    #[arg(long, value_delimiter = ',')]
    delayed: Vec<usize>,
    /// Only the hot-project partition-load figures (`hot_project_*`), printed; writes no file.
    #[arg(long)]
    hot: bool,
    /// Only what summaries in the index cost and save (`summaries_*`, `grid_page_f*`),
    /// printed; writes no file.
    #[arg(long)]
    summaries: bool,
    /// Only the membership check's cost (`membership_check_rcu_per_request`), printed;
    /// writes no file.
    #[arg(long)]
    membership: bool,
    /// Only a project delete (`project_delete_{size}_*`) of this many issues, printed.
    #[arg(long)]
    project_delete: Option<u64>,
}

/// One access pattern's figures, per operation.
#[derive(Debug, Clone, Default)]
pub struct Stat {
    pub samples: usize,
    pub calls: f64,
    pub capacity: f64,
    pub items: f64,
    pub rows: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The part of `capacity` consumed by writes.
    pub write_capacity: f64,
    /// The part of `capacity` consumed by display-name reads.
    pub names_capacity: f64,
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Runs `op` `samples` times, metering each run.
pub(crate) async fn measure<F, Fut>(meter: &Meter, samples: usize, mut op: F) -> Result<Stat>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<usize>>,
{
    let mut latencies = Vec::with_capacity(samples);
    let mut total = Counts::default();
    let mut rows = 0;
    let mut done = 0;
    for i in 0..samples {
        let before = meter.now();
        let started = Instant::now();
        let Some(n) = op(i).await.map(Some).or_else(|e| {
            if e.to_string() == "no more pages" {
                Ok(None)
            } else {
                Err(e)
            }
        })?
        else {
            break;
        };
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        let d = meter.now() - before;
        total.calls += d.calls;
        total.capacity += d.capacity;
        total.items += d.items;
        total.write_capacity += d.write_capacity;
        total.names_capacity += d.names_capacity;
        rows += n;
        done += 1;
    }
    latencies.sort_by(f64::total_cmp);
    let k = done.max(1) as f64;
    Ok(Stat {
        samples: done,
        calls: total.calls as f64 / k,
        capacity: total.capacity / k,
        items: total.items as f64 / k,
        rows: rows as f64 / k,
        p50_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        write_capacity: total.write_capacity / k,
        names_capacity: total.names_capacity / k,
    })
}

/// The local stack with a metered client for the API, and the seeded project.
pub(crate) struct Env {
    pub(crate) stack: Stack,
    pub(crate) meter: std::sync::Arc<Meter>,
    pub(crate) store: Store,
    pub(crate) app: axum::Router,
    pub(crate) seeded: gridctl::seed::Seeded,
    pub(crate) issue_ids: Vec<IssueId>,
    pub(crate) index_seconds: f64,
    pub(crate) stream_records: usize,
    /// The poller that indexed the seed, where it stopped.
    pub(crate) poller: tokio::sync::Mutex<gridline_local::stream::Poller>,
}

impl Env {
    pub(crate) async fn call(
        &self,
        user: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value)> {
        self.call_in(&self.seeded.tenant, user, method, path, body)
            .await
    }

    /// [`Env::call`] as a user of `tenant`.
    pub(crate) async fn call_in(
        &self,
        tenant: &TenantId,
        user: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value)> {
        let token = TestApi::token(user, tenant);
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {token}"));
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(
            body.map(|b| Body::from(b.to_string()))
                .unwrap_or_else(Body::empty),
        )?;
        let reply = into_reply(self.app.clone().oneshot(req).await?).await;
        anyhow::ensure!(reply.status.as_u16() < 500, "{path}: {}", reply.text);
        Ok((reply.status.as_u16(), reply.body))
    }
}

/// The benchmark's project of `n` issues, with a progress bar while it is written.
async fn seed(stack: &Stack, n: u64) -> Result<gridctl::seed::Seeded> {
    let bar = ProgressBar::new(n).with_message(format!("seeding {n} issues"));
    let started = Instant::now();
    let spec = gridctl::seed::Spec {
        tenant: TenantId::parse("acme").context("acme is not a valid tenant id")?,
        project_name: format!("Bench {n}"),
        issues: n,
        extra_fields: 0,
        users: 50,
        teams: 5,
        rng_seed: n,
    };
    let seeded = gridctl::seed::seed(&stack.state.store, &spec, &bar).await?;
    bar.finish_and_clear();
    eprintln!("   seeded in {:.1} s", started.elapsed().as_secs_f64());
    Ok(seeded)
}

/// The local stack on a file engine, seeded with a project of `n` issues and indexed.
pub(crate) async fn setup(n: u64, db: &std::path::Path) -> Result<Env> {
    let stack = test_stack(Data::File(db.to_path_buf())).await?;
    let seeded = seed(&stack, n).await?;
    // The indexer end to end: the real stream through the real handler.
    let mut poller = stack.poller(stack.indexer()).await;
    poller.emit_metrics = false;
    let started = Instant::now();
    let stream_records = drain(&mut poller).await?;
    let index_seconds = started.elapsed().as_secs_f64();

    let meter = Meter::new();
    // The baselines (the other designs in `baselines`) query through this store on the
    // unguarded admin client: no function's policy covers them.
    let store = Store::new(
        meter.client(&stack.client),
        &stack.tables.records,
        &stack.tables.index,
    );
    // Each function on its own guarded client, metered.
    let app = stack.router_with(|id| meter.client(&stack.function_client(id)));
    let issue_ids = issue_ids(&stack.state.store, &seeded).await?;
    Ok(Env {
        stack,
        meter,
        store,
        app,
        seeded,
        issue_ids,
        index_seconds,
        stream_records,
        poller: tokio::sync::Mutex::new(poller),
    })
}

/// Every issue id of the seeded project, page after page (setup, not metered).
pub(crate) async fn issue_ids(
    store: &Store,
    seeded: &gridctl::seed::Seeded,
) -> Result<Vec<IssueId>> {
    let mut ids = Vec::new();
    let mut start = None;
    loop {
        let page = store
            .records()
            .issues_of_project(&seeded.tenant, &seeded.project_id, start.as_ref(), 1000)
            .await?;
        ids.extend(page.items.into_iter().map(|i| i.id));
        start = page.next;
        if start.is_none() {
            return Ok(ids);
        }
    }
}

/// Removes an engine's SQLite file and its WAL companions.
pub(crate) fn remove_db(db: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// Follows a list's cursor page after page.
pub(crate) async fn pages(env: &Env, user: &str, first: String, samples: usize) -> Result<Stat> {
    pages_from(
        env,
        (&env.seeded.tenant, user),
        first.clone(),
        first,
        samples,
    )
    .await
}

/// Follows a list's cursor from `start` (the base path, or the base path with a cursor).
pub(crate) async fn pages_from(
    env: &Env,
    (tenant, user): (&TenantId, &str),
    first: String,
    start: String,
    samples: usize,
) -> Result<Stat> {
    // One page first, unmetered: the figures are a warm function's (a grid instance holds its
    // project's field definitions for a few seconds), as in production's steady traffic.
    let (status, body) = env.call_in(tenant, user, Method::GET, &first, None).await?;
    anyhow::ensure!(status == 200, "{first}: {status} {body}");
    // A grid page makes the column it sorts by hot: its fill job runs before pages are
    // measured, as it has long since run for a column production pages sort by.
    settle(env).await?;
    let next = std::rc::Rc::new(std::cell::RefCell::new(Some(start)));
    measure(&env.meter, samples, |_| {
        let next = next.clone();
        let first = first.clone();
        async move {
            let Some(path) = next.borrow_mut().take() else {
                anyhow::bail!("no more pages")
            };
            let (status, body) = env.call_in(tenant, user, Method::GET, &path, None).await?;
            anyhow::ensure!(status == 200, "{path}: {status} {body}");
            let rows = body["items"].as_array().map_or(0, Vec::len);
            *next.borrow_mut() = body["next_cursor"].as_str().map(|c| {
                let sep = if first.contains('?') { '&' } else { '?' };
                format!("{first}{sep}cursor={c}")
            });
            Ok(rows)
        }
    })
    .await
}

/// Inserts a pattern's figures, printing how long measuring it took (to see where a run's
/// time goes).
macro_rules! timed {
    ($rows:ident, $name:expr, $stat:expr $(,)?) => {{
        let started = Instant::now();
        let stat = $stat;
        eprintln!(
            "   {:<58} {:>7.1} s",
            $name,
            started.elapsed().as_secs_f64()
        );
        $rows.insert($name, stat);
    }};
}

/// Where the engines' files go: `--engine-dir`, else RAM-backed `/dev/shm` when there is one,
/// else the temp directory.
fn engine_dir(args: &Args) -> std::path::PathBuf {
    args.engine_dir.clone().unwrap_or_else(|| {
        let shm = std::path::PathBuf::from("/dev/shm");
        if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        }
    })
}

/// The shard counts the hot-project figures compare.
const HOT_SHARDS: &[u16] = &[1, 4, 8];

#[tokio::main]
async fn main() -> Result<()> {
    // The commit measured is the one checked out now, not when the run ends.
    results::revision();
    let args = Args::parse();
    let mut results = report::Results::default();
    let engine_dir = engine_dir(&args);
    if only(&args).await? {
        return Ok(());
    }
    // First: a binary that cannot start fails the run before the long measures.
    (results.binaries, results.missing_binaries) = binaries::binaries(&args.binaries).await?;
    for &n in &args.sizes {
        measure_size(n, &engine_dir, args.samples, &mut results).await?;
    }
    indexer_figures(args.core_issues, &mut results).await?;
    report::write(&results, &args.out, &args.plot)?;
    results::write(&results, &args.sizes, args.samples, &args.results)?;
    eprintln!(
        "wrote {}, {} and {}",
        args.out.display(),
        args.plot.display(),
        args.results.display()
    );
    Ok(())
}

/// The one measure `--core`, `--delayed`, `--summaries` or `--hot` asks for, printed; whether
/// one was asked (then the run measures nothing else and writes no file).
async fn only(args: &Args) -> Result<bool> {
    if args.core {
        let core = indexer::pure_core::indexer_core(args.core_issues).await?;
        for (name, (n, secs)) in [
            ("index_core_records_per_s", core.decoded),
            ("index_core_with_json_records_per_s", core.with_json),
            ("index_core_streamed_records_per_s", core.streamed),
        ] {
            println!("{name} {:.0}", n as f64 / secs);
        }
        return Ok(true);
    }
    for &c in &args.delayed {
        let (issues, secs) = indexer::delayed::indexer_delayed_at(c).await?;
        println!(
            "indexer_issues_per_s_per_shard_5ms at concurrency {c}: {:.0}",
            issues as f64 / secs
        );
    }
    if !args.delayed.is_empty() {
        return Ok(true);
    }
    if args.summaries {
        println!(
            "| custom fields | update WCU | thin | page RCU | thin | page calls / thin | break-even |"
        );
        for fields in [0, 50] {
            println!("{}", indexer::updates::summary_cost(fields).await?.row());
        }
        return Ok(true);
    }
    if let Some(n) = args.project_delete {
        field_add::project_delete_only(n, &engine_dir(args)).await?;
        return Ok(true);
    }
    if args.membership {
        let rcu = membership::membership_check_rcu().await?;
        println!("membership_check_rcu_per_request {rcu:.4}");
        return Ok(true);
    }
    if args.hot {
        for h in hot::hot_project(HOT_SHARDS).await? {
            println!(
                "hot_project_updates_per_s_per_partition_{}_shards {:.0} (wcu/s {:.0})",
                h.shards, h.column_updates_per_s, h.column_wcu_per_s
            );
        }
        return Ok(true);
    }
    Ok(false)
}

/// A project of `n` issues on an engine file in `engine_dir`: the indexer end to end, the
/// access patterns and the other designs with `s` samples, then adding a field; the file is
/// removed after.
async fn measure_size(
    n: u64,
    engine_dir: &std::path::Path,
    s: usize,
    results: &mut report::Results,
) -> Result<()> {
    eprintln!("== {n} issues");
    let db = engine_dir.join(format!("gridline-bench-{}-{n}.db", std::process::id()));
    let env = setup(n, &db).await?;
    results
        .index_e2e
        .push((n, env.stream_records, env.index_seconds));
    let mut rows = list_patterns(&env, s).await?;
    issue_patterns(&env, n, s, &mut rows).await?;
    other_designs(&env, n, s, &mut rows).await?;
    graph::relation_patterns(&env, s, &mut rows).await?;
    graph::tree_patterns(&env, s, &mut rows).await?;
    activity::comment_patterns(&env, s, &mut rows).await?;
    activity::history_patterns(&env, s, &mut rows).await?;
    // Late: the new field changes every issue's entries, and so does the view's job.
    let (calls, seconds) = field_add::field_add(&env).await?;
    results.field_add.push((n, calls, seconds));
    results
        .option_reorder
        .push((n, field_add::option_reorder(&env).await?));
    let (build, page) = views::view_patterns(&env, s).await?;
    results.view_build.push((n, build));
    rows.insert(views::VIEW_PAGE, page);
    results.patterns.push((n, rows));
    // Last: the project is gone after it.
    results
        .project_delete
        .push((n, field_add::project_delete(&env).await?));
    eprintln!(
        "   index: {} records in {:.1} s",
        env.stream_records, env.index_seconds
    );
    drop(env);
    remove_db(&db);
    Ok(())
}

/// The indexer's figures, each on a project of its own: the pure core on `core_issues`, what
/// updates write and what summaries cost, the delayed throughput, and the hot project.
async fn indexer_figures(core_issues: u64, results: &mut report::Results) -> Result<()> {
    let core = indexer::pure_core::indexer_core(core_issues).await?;
    (
        results.indexer_core,
        results.indexer_core_json,
        results.indexer_core_streamed,
    ) = (core.decoded, core.with_json, core.streamed);
    let amplification = indexer::updates::write_amplification().await?;
    let f5 = indexer::updates::update_costs(0, &[1], true, 0).await?;
    for views in [0, 10] {
        let costs = indexer::updates::update_costs(0, &[1], true, views).await?;
        let wcu = costs.first().map(|c| c.request_wcu + c.index_wcu);
        results.update_views.extend(wcu.map(|w| (views, w)));
    }
    results.board = Some(views::board_counts().await?);
    results.membership_check_rcu = Some(membership::membership_check_rcu().await?);
    results.summaries = vec![
        indexer::updates::summary_cost(0).await?,
        indexer::updates::summary_cost(50).await?,
    ];
    for (fields, costs) in [(5, &f5), (55, &amplification)] {
        if let Some(one) = costs.iter().find(|c| c.fields_changed == 1) {
            results
                .update_wcu
                .push((fields, one.request_wcu, one.index_wcu));
        }
    }
    results.amplification = amplification
        .iter()
        .map(|c| (c.fields_changed, c.index_write_requests, c.index_capacity))
        .collect();
    results.indexer_delayed = indexer::delayed::indexer_delayed().await?;
    results.hot = hot::hot_project(HOT_SHARDS).await?;
    Ok(())
}

/// The seeded project, its Points field, and the caller (the first user, in every team).
pub(crate) fn project_points_caller(env: &Env) -> (&str, &str, &str) {
    (
        &env.seeded.project_id,
        &env.seeded.fields["Points"],
        &env.seeded.users[0],
    )
}

/// The product's lists through the API: grid pages and inbox pages, cursor after cursor.
async fn list_patterns(env: &Env, s: usize) -> Result<BTreeMap<&'static str, Stat>> {
    let (p, points, me) = project_points_caller(env);
    let mut rows: BTreeMap<&'static str, Stat> = BTreeMap::new();
    timed!(
        rows,
        "grid page by custom field",
        pages(
            env,
            me,
            format!("/projects/{p}/issues?sort={points}&order=desc&state=open&limit=50"),
            s,
        )
        .await?,
    );
    timed!(
        rows,
        ALL_STATES,
        pages(
            env,
            me,
            format!("/projects/{p}/issues?sort={points}&order=desc&limit=50"),
            s,
        )
        .await?,
    );
    timed!(
        rows,
        "grid page with a range",
        pages(
            env,
            me,
            format!("/projects/{p}/issues?sort={points}&gte=100&lte=500&limit=50"),
            s,
        )
        .await?,
    );
    timed!(
        rows,
        filters::RARE_FILTER,
        pages(env, me, filters::rare_filter_path(env), s).await?,
    );
    timed!(rows, TEAM_OF_12, team_of_12(env, s).await?);
    timed!(
        rows,
        "my issues",
        pages(env, me, "/me/issues?limit=50".into(), s).await?,
    );
    timed!(
        rows,
        "my teams' issues (5 teams)",
        pages(env, me, "/me/teams/issues?limit=50".into(), s).await?,
    );
    Ok(rows)
}

/// The row of a grid page of every state: the `open` and `closed` scopes merged.
pub(crate) const ALL_STATES: &str = "grid page by custom field, every state";

/// The row of a grid page whose issues involve a team of 12 people.
pub(crate) const TEAM_OF_12: &str = "grid page by custom field, people from a team of 12";
/// The row of one issue create.
pub(crate) const CREATE: &str = "create issue";
/// The row of 50 creates at once on one project (per create).
pub(crate) const CREATE_50: &str = "create issue, 50 at once";

/// A grid page of 50 by a custom field in a project of 1,000 issues whose people are a team
/// of 12 and 2 teams (another tenant, seeded and indexed here), beside the seed's mix of 50
/// people and 5 teams, where nearly every issue names people no other issue on the page does:
/// what display names cost with a realistic team.
async fn team_of_12(env: &Env, s: usize) -> Result<Stat> {
    let spec = gridctl::seed::Spec {
        tenant: TenantId::parse("team12").context("team12 is not a valid tenant id")?,
        project_name: "Team of 12".into(),
        issues: 1000,
        extra_fields: 0,
        users: 12,
        teams: 2,
        rng_seed: 12,
    };
    let seeded = gridctl::seed::seed(&env.stack.state.store, &spec, &ProgressBar::hidden()).await?;
    drain(&mut *env.poller.lock().await).await?;
    let path = format!(
        "/projects/{}/issues?sort={}&order=desc&limit=50",
        seeded.project_id, seeded.fields["Points"]
    );
    let me = seeded.users[0].to_string();
    pages_from(env, (&seeded.tenant, &me), path.clone(), path, s).await
}

/// One issue through the API: read, created and patched (random issues, seeded by `n`).
async fn issue_patterns(
    env: &Env,
    n: u64,
    s: usize,
    rows: &mut BTreeMap<&'static str, Stat>,
) -> Result<()> {
    let (p, points, me) = project_points_caller(env);
    let ids = &env.issue_ids;
    let mut rng = StdRng::seed_from_u64(n);
    timed!(
        rows,
        "get issue",
        measure(&env.meter, s, |_| {
            let path = format!("/issues/{}", ids[rng.gen_range(0..ids.len())]);
            async move { request(env, me, Method::GET, path, None, 200).await }
        })
        .await?,
    );
    timed!(
        rows,
        CREATE,
        measure(&env.meter, s, |i| {
            let path = format!("/projects/{p}/issues");
            let body = json!({"title": format!("bench {i}"), "fields": {points: i}});
            async move { request(env, me, Method::POST, path, Some(body), 201).await }
        })
        .await?,
    );
    timed!(rows, CREATE_50, creates_at_once(env, 50).await?);
    let mut rng = StdRng::seed_from_u64(n + 1);
    timed!(
        rows,
        "patch issue",
        measure(&env.meter, s, |i| {
            let path = format!("/issues/{}", ids[rng.gen_range(0..ids.len())]);
            let body = json!({"title": format!("patched {i}"), "fields": {points: i}});
            async move { request(env, me, Method::PATCH, path, Some(body), 200).await }
        })
        .await?,
    );
    Ok(())
}

/// `n` creates sent at once on one project: calls and capacity per create (retries
/// included), and the spread of their latencies.
async fn creates_at_once(env: &Env, n: usize) -> Result<Stat> {
    let (p, points, me) = project_points_caller(env);
    let before = env.meter.now();
    let replies = futures::future::join_all((0..n).map(|i| {
        let path = format!("/projects/{p}/issues");
        let body = json!({"title": format!("at once {i}"), "fields": {points: i}});
        async move {
            let started = Instant::now();
            let reply = request(env, me, Method::POST, path, Some(body), 201).await;
            reply.map(|_| started.elapsed().as_secs_f64() * 1000.0)
        }
    }))
    .await;
    let mut latencies = replies.into_iter().collect::<Result<Vec<f64>>>()?;
    let d = env.meter.now() - before;
    latencies.sort_by(f64::total_cmp);
    let k = n as f64;
    Ok(Stat {
        samples: n,
        calls: d.calls as f64 / k,
        capacity: d.capacity / k,
        items: d.items as f64 / k,
        rows: 1.0,
        p50_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        write_capacity: d.write_capacity / k,
        names_capacity: d.names_capacity / k,
    })
}

/// One request of a single-issue pattern, which must answer `expect`: one row.
async fn request(
    env: &Env,
    user: &str,
    method: Method,
    path: String,
    body: Option<Value>,
    expect: u16,
) -> Result<usize> {
    let (status, reply) = env.call(user, method, &path, body).await?;
    anyhow::ensure!(status == expect, "{path}: {status} {reply}");
    Ok(1)
}

/// The three other designs for the grid's sorted page (see `baselines`), on the same engine
/// and data, and the grid's page at the position where the GSI design is weakest.
async fn other_designs(
    env: &Env,
    n: u64,
    s: usize,
    rows: &mut BTreeMap<&'static str, Stat>,
) -> Result<()> {
    let started = Instant::now();
    let base = baselines::Baselines::build(env).await?;
    eprintln!(
        "   baselines built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Reading every issue is slow at 10k issues and more: fewer samples there.
    let heavy = if n >= 100_000 {
        1
    } else if n >= 10_000 {
        3
    } else {
        s.min(10)
    };
    timed!(
        rows,
        baselines::SORT_IN_MEMORY,
        measure(&env.meter, heavy, |_| base.sort_in_memory(env)).await?,
    );
    timed!(
        rows,
        baselines::VALUES_TABLE,
        measure(&env.meter, heavy, |_| base.values_table(env)).await?,
    );
    timed!(
        rows,
        baselines::GSI_WITH_FILTER,
        measure(&env.meter, s.min(10), |_| base.gsi_missing_page(env)).await?,
    );
    timed!(
        rows,
        "grid page of missing values (same position)",
        base.grid_missing_page(env, s.min(10)).await?,
    );
    timed!(
        rows,
        baselines::GSI_VALUES,
        measure(&env.meter, s.min(10), |_| base.gsi_values_page(env)).await?,
    );
    for density in baselines::DENSITIES {
        timed!(
            rows,
            baselines::gsi_missing_row(density),
            measure(&env.meter, s.min(10), |_| base
                .gsi_missing_page_at(env, density))
            .await?,
        );
    }
    Ok(())
}
