//! The indexer's figures, the binaries, and BENCHMARKS.md with its plot.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use gridline::domain::ids::{FieldId, IssueId, TenantId};
use gridline::domain::values::FieldDef;
use gridline::index::Basis;
use gridline::index::event::{StreamEvent, StreamRecord};
use gridline::index::indexer::{Unit, plan};
use gridline::index::watermark::{Pending, Watermark};
use gridline::store::Store;
use gridline_local::testing::{TestApi, test_stack};
use gridline_local::{Data, Stack};
use http::Method;
use indicatif::ProgressBar;
use serde_json::json;

use crate::delay::Delay;
use crate::meter::Meter;
use crate::{Stat, baselines};

#[derive(Default)]
pub struct Results {
    /// Per project size: pattern → figures.
    pub patterns: Vec<(u64, BTreeMap<&'static str, Stat>)>,
    /// (issues, stream records, seconds) of the indexer draining the seed's stream.
    pub index_e2e: Vec<(u64, usize, f64)>,
    /// (records, seconds) of the pure core: plan, basis and step, no I/O.
    pub indexer_core: (usize, f64),
    /// (records, seconds) of the same with the Lambda event's JSON decoded first.
    pub indexer_core_json: (usize, f64),
    /// (records, seconds) of the pure core over every batch decoded beforehand (its records
    /// streamed from memory rather than fresh from their decoding).
    pub indexer_core_streamed: (usize, f64),
    /// (fields changed, index write requests per update, WCU per update).
    pub amplification: Vec<(usize, f64, f64)>,
    /// A 1-field update's write capacity per project field count: (custom fields, the
    /// request's WCU, the indexer's WCU).
    pub update_wcu: Vec<(usize, f64, f64)>,
    /// What summaries in the index cost and save, per project field count.
    pub summaries: Vec<SummaryCost>,
    /// (issues, seconds) through one poller with each of the indexer's calls delayed by
    /// [`DELAY`].
    pub indexer_delayed: (usize, f64),
    /// Per project size: the POST field request's calls, and the seconds until the indexer
    /// had re-indexed the project (`None`: its invocation did not finish; see
    /// `crate::field_add`).
    pub field_add: Vec<(u64, f64, Option<f64>)>,
    /// (function, host binary bytes, arm64 bootstrap bytes, median init ms).
    pub binaries: Vec<(String, u64, Option<u64>, f64)>,
    /// Functions whose binary was not found (their rows are left out).
    pub missing_binaries: Vec<String>,
    /// The hot-project partition load, per shard count.
    pub hot: Vec<crate::hot::HotLoad>,
}

/// What each of the indexer's DynamoDB calls waits in the delayed throughput figure: about a
/// round trip within a region.
pub const DELAY: Duration = Duration::from_millis(5);

pub(crate) async fn stack() -> Result<Stack> {
    test_stack(Data::Memory).await
}

pub(crate) fn spec(issues: u64, extra_fields: usize) -> Result<gridctl::seed::Spec> {
    Ok(gridctl::seed::Spec {
        tenant: TenantId::parse("acme").context("acme is not a valid tenant id")?,
        project_name: "Indexer".into(),
        issues,
        extra_fields,
        users: 50,
        teams: 5,
        rng_seed: 3,
    })
}

/// Every record of the records table's stream so far, every shard from its start, and the
/// stream's ARN.
async fn stream_history(
    stack: &Stack,
) -> Result<(Vec<aws_sdk_dynamodbstreams::types::Record>, String)> {
    let streams = gridline_local::stream::streams_client(&stack.endpoint).await;
    let arn = stack
        .client
        .describe_table()
        .table_name(&stack.tables.records)
        .send()
        .await?
        .table
        .and_then(|t| t.latest_stream_arn)
        .context("the records table has a stream")?;
    let shards = streams.describe_stream().stream_arn(&arn).send().await?;
    let mut records = Vec::new();
    for shard in shards
        .stream_description
        .map(|d| d.shards.unwrap_or_default())
        .unwrap_or_default()
    {
        let mut it = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id.unwrap_or_default())
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await?
            .shard_iterator;
        while let Some(i) = it.take() {
            let out = streams
                .get_records()
                .shard_iterator(i)
                .limit(1000)
                .send()
                .await?;
            let got = out.records.unwrap_or_default();
            if got.is_empty() {
                break;
            }
            records.extend(got);
            it = out.next_shard_iterator;
        }
    }
    Ok((records, arn))
}

/// The indexer's pure path over one batch, only through its public API: `plan` groups the
/// records into units and decodes each issue's image, [`Basis::of_record`] derives what its entries
/// follow from, and [`Watermark::step`] plans the writes against its watermark (here held in
/// memory: what its previous record committed). Returns the planned writes. One function, so a
/// change of the core's interface is one edit here.
fn index_core(
    batch: &[StreamRecord<'_>],
    defs: &[FieldDef],
    watermarks: &mut HashMap<IssueId, Watermark>,
) -> usize {
    let mut writes = 0;
    let none = Pending::default();
    for (_, unit) in plan(batch).units {
        if let Unit::Issue {
            tenant,
            issue_id,
            last,
        } = unit
        {
            let desired = last
                .as_deref()
                .map(|issue| Basis::of_record(issue, defs, gridline::keys::index::Shards::ONE));
            let mut wm = watermarks.remove(&issue_id).unwrap_or_default();
            let step = wm.step(&tenant, &issue_id, desired.as_ref(), &none);
            writes += step.puts.len() + step.deletes.len();
            wm.version = last.as_ref().map_or(u64::MAX, |i| i.version);
            wm.committed = desired;
            watermarks.insert(issue_id, wm);
        }
    }
    writes
}

/// Timed passes of the pure core over the same records: the fastest is reported, as a
/// micro-benchmark does (the others lost time to the machine, not to the code).
const CORE_PASSES: usize = 5;

/// The pure core on real stream records in Lambda's batches of 100, one core, no I/O: the
/// seed's records (inserts) followed by a 1-field update of every issue (modifies), as
/// production's stream mixes them.
pub async fn indexer_core(issues: u64) -> Result<CoreFigures> {
    let stack = stack().await?;
    let seeded = gridctl::seed::seed(
        &stack.state.store,
        &spec(issues, 0)?,
        &ProgressBar::hidden(),
    )
    .await?;
    let router = stack.router();
    let token = TestApi::token(&seeded.users[0], &seeded.tenant);
    let points = updatable_fields(&seeded);
    for (i, id) in crate::issue_ids(&stack.state.store, &seeded)
        .await?
        .iter()
        .enumerate()
    {
        patch(&router, &token, id, new_values(&seeded, &points[..1], i)).await?;
    }
    let (records, arn) = stream_history(&stack).await?;
    let event = gridline_local::stream::to_event(&records, &arn)?;
    let defs = stack
        .state
        .store
        .project_with_fields(&seeded.tenant, &seeded.project_id)
        .await?
        .map(|(_, d)| d)
        .unwrap_or_default();
    let n = event.records.len();
    let json = event
        .records
        .chunks(100)
        .map(|batch| {
            let mut e = Event::default();
            e.records = batch.to_vec();
            serde_json::to_string(&e)
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Decoded: each batch's records as the indexer reads them, strings borrowed from its JSON,
    // decoded just before its core runs (as in the function: a batch of 100 is decoded, then
    // planned), and only the core timed.
    let mut writes = 0;
    let decoded = fastest(|| {
        let mut watermarks = HashMap::new();
        let mut secs = 0.0;
        for text in &json {
            let e = StreamEvent::from_json(text)?;
            let started = Instant::now();
            writes += index_core(&e.records, &defs, &mut watermarks);
            secs += started.elapsed().as_secs_f64();
        }
        Ok(secs)
    })?;
    // Every batch decoded first, then the core over all of them: the records (~40 MB at the
    // default 5,000 issues) stream from memory, which no invocation does; printed beside.
    let batches = json
        .iter()
        .map(|text| StreamEvent::from_json(text))
        .collect::<Result<Vec<_>, _>>()?;
    let streamed = fastest(|| {
        let mut watermarks = HashMap::new();
        let started = Instant::now();
        for batch in &batches {
            writes += index_core(&batch.records, &defs, &mut watermarks);
        }
        Ok(started.elapsed().as_secs_f64())
    })?;
    drop(batches);
    let with_json = fastest(|| {
        let mut watermarks = HashMap::new();
        let started = Instant::now();
        for text in &json {
            let e = StreamEvent::from_json(text)?;
            writes += index_core(&e.records, &defs, &mut watermarks);
        }
        Ok(started.elapsed().as_secs_f64())
    })?;
    std::hint::black_box(writes);
    Ok(CoreFigures {
        decoded: (n, decoded),
        with_json: (n, with_json),
        streamed: (n, streamed),
    })
}

/// The pure core's figures, each (records, seconds).
pub struct CoreFigures {
    /// From each batch's records just decoded (the decoding not timed).
    pub decoded: (usize, f64),
    /// The same with each batch's JSON decoding timed.
    pub with_json: (usize, f64),
    /// From every batch decoded beforehand.
    pub streamed: (usize, f64),
}

/// The fastest of [`CORE_PASSES`] runs of `pass`, each returning the seconds it timed.
fn fastest(mut pass: impl FnMut() -> Result<f64>) -> Result<f64> {
    let mut best = f64::INFINITY;
    // More passes for a profiler to sample (GRIDLINE_CORE_PASSES); the figure is the same.
    let passes = std::env::var("GRIDLINE_CORE_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CORE_PASSES);
    for _ in 0..passes {
        best = best.min(pass()?);
    }
    Ok(best)
}

/// What one round of issue updates cost: each issue patched once.
#[derive(Debug)]
pub struct UpdateCost {
    /// Custom fields each update changed.
    pub fields_changed: usize,
    /// The indexer's write requests per update.
    pub index_write_requests: f64,
    /// The indexer's capacity units per update (its watermark reads included).
    pub index_capacity: f64,
    /// The indexer's write capacity units per update.
    pub index_wcu: f64,
    /// The PATCH request's write capacity units per update.
    pub request_wcu: f64,
    /// After the rounds, a warm grid page of 50 open issues by Points: its read units (all
    /// but the names) and its DynamoDB calls (names included).
    pub page_rcu: f64,
    pub page_calls: f64,
}

/// A project of 100 issues updated and paged twice: indexed with summaries in the entries,
/// and with every entry thin (`Indexer::without_summaries`).
#[derive(Debug, Clone, Copy)]
pub struct SummaryCost {
    /// Custom fields in the project.
    pub fields: usize,
    /// A 1-field update's WCU (request and indexer) with summaries, and thin.
    pub update_wcu: (f64, f64),
    /// A page's read units (all but names), with summaries and thin.
    pub page_rcu: (f64, f64),
    /// A page's calls, with summaries and thin.
    pub page_calls: (f64, f64),
}

impl SummaryCost {
    /// Its row of the BENCHMARKS.md table (`write_summaries`'s columns).
    pub fn row(&self) -> String {
        let even = self
            .break_even()
            .map_or("— (too wide: every entry thin)".to_string(), |b| {
                format!("{b:.1}")
            });
        format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} / {:.0} | {even} |",
            self.fields,
            self.update_wcu.0,
            self.update_wcu.1,
            self.page_rcu.0,
            self.page_rcu.1,
            self.page_calls.0,
            self.page_calls.1,
        )
    }

    /// Page views per update at which summaries pay for themselves: the WCU they add per
    /// update, at five read units each (on-demand prices), over the read units they save per
    /// page; `None` when they save nothing (issues too wide to carry them).
    pub fn break_even(&self) -> Option<f64> {
        let added = self.update_wcu.0 - self.update_wcu.1;
        let saved = self.page_rcu.1 - self.page_rcu.0;
        (saved > 0.05).then(|| (added * 5.0 / saved).max(0.0))
    }
}

/// [`SummaryCost`] of a project with 5 + `extra_fields` custom fields.
pub async fn summary_cost(extra_fields: usize) -> Result<SummaryCost> {
    let on = update_costs(extra_fields, &[1], true).await?;
    let off = update_costs(extra_fields, &[1], false).await?;
    let (Some(on), Some(off)) = (on.first(), off.first()) else {
        anyhow::bail!("no update round");
    };
    Ok(SummaryCost {
        fields: 5 + extra_fields,
        update_wcu: (
            on.request_wcu + on.index_wcu,
            off.request_wcu + off.index_wcu,
        ),
        page_rcu: (on.page_rcu, off.page_rcu),
        page_calls: (on.page_calls, off.page_calls),
    })
}

/// Index writes per issue update touching 1, 5 and 50 custom fields, in a project with 55.
pub async fn write_amplification() -> Result<Vec<UpdateCost>> {
    update_costs(50, &[1, 5, 50], true).await
}

/// Updates of the 100 issues of a project with 5 + `extra_fields` custom fields, one round per
/// entry of `rounds` (the custom fields each update changes), the requests and the indexer each
/// metered on their own; each round then pages the grid once. `summaries`: entries carry the
/// issues' summaries (else every entry is thin).
pub async fn update_costs(
    extra_fields: usize,
    rounds: &[usize],
    summaries: bool,
) -> Result<Vec<UpdateCost>> {
    const ISSUES: usize = 100;
    let stack = stack().await?;
    let seeded = gridctl::seed::seed(
        &stack.state.store,
        &spec(ISSUES as u64, extra_fields)?,
        &ProgressBar::hidden(),
    )
    .await?;
    let (meter, mut poller) = metered_indexer(&stack, summaries).await?;
    let numbers = updatable_fields(&seeded);
    let ids = first_issues(&stack, &seeded).await?;
    let page = format!(
        "/projects/{}/issues?sort={}&state=open&limit=50",
        seeded.project_id, seeded.fields["Points"]
    );
    let requests = Meter::new();
    let router = stack.router_with(|id| requests.client(&stack.function_client(id)));
    let token = TestApi::token(&seeded.users[0], &seeded.tenant);
    let mut out = Vec::new();
    for (round, &k) in rounds.iter().enumerate() {
        let sent = requests.now();
        for id in &ids {
            let fields = new_values(&seeded, &numbers[..k.min(numbers.len())], round);
            patch(&router, &token, id, fields).await?;
        }
        let request = requests.now() - sent;
        let before = meter.now();
        poller.drain().await?;
        let d = meter.now() - before;
        let per = |x: f64| x / ids.len() as f64;
        // Warm: the first read holds the field definitions, the second is measured.
        let mut read = crate::meter::Counts::default();
        for _ in 0..2 {
            let at = requests.now();
            let reply = gridline_local::testing::send(
                router.clone(),
                Method::GET,
                &page,
                Some(&token),
                None,
                &[],
            )
            .await;
            anyhow::ensure!(reply.status == 200, "grid page: {}", reply.text);
            read = requests.now() - at;
        }
        out.push(UpdateCost {
            fields_changed: k,
            index_write_requests: per(d.write_requests as f64),
            index_capacity: per(d.capacity),
            index_wcu: per(d.write_capacity),
            request_wcu: per(request.write_capacity),
            page_rcu: read.capacity - read.write_capacity - read.names_capacity,
            page_calls: read.calls as f64,
        });
    }
    Ok(out)
}

/// The stack's stream poller feeding the indexer on its own guarded client, metered here, with
/// what the stream holds so far (the seed) indexed.
pub(crate) async fn metered_indexer(
    stack: &Stack,
    summaries: bool,
) -> Result<(std::sync::Arc<Meter>, gridline_local::stream::Poller)> {
    let meter = Meter::new();
    let metered = Store::new(
        meter.client(&stack.function_client("IndexerFunction")),
        &stack.tables.records,
        &stack.tables.index,
    );
    let mut indexer = gridline::index::indexer::Indexer::new(metered);
    if !summaries {
        indexer = indexer.without_summaries();
    }
    let mut poller = stack.poller(indexer).await;
    poller.emit_metrics = false;
    poller.drain().await?;
    Ok((meter, poller))
}

/// The fields the update rounds change: the extra fields and Points.
fn updatable_fields(seeded: &gridctl::seed::Seeded) -> Vec<FieldId> {
    seeded
        .fields
        .iter()
        .filter(|(name, _)| name.starts_with("Extra") || name.as_str() == "Points")
        .map(|(_, id)| id.clone())
        .collect()
}

/// The ids of the project's first page of issues.
async fn first_issues(stack: &Stack, seeded: &gridctl::seed::Seeded) -> Result<Vec<IssueId>> {
    let page = stack
        .state
        .store
        .issues_of_project(&seeded.tenant, &seeded.project_id, None, 1000)
        .await?;
    Ok(page.items.into_iter().map(|i| i.id).collect())
}

/// `PATCH /issues/{id}` with these field values, which must answer 200.
pub(crate) async fn patch(
    router: &axum::Router,
    token: &str,
    id: &IssueId,
    fields: serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let reply = gridline_local::testing::send(
        router.clone(),
        Method::PATCH,
        &format!("/issues/{id}"),
        Some(token),
        Some(&json!({ "fields": fields }).to_string()),
        &[],
    )
    .await;
    anyhow::ensure!(reply.status == 200, "patch: {}", reply.text);
    Ok(())
}

/// Issues indexed per second through one poller when each of the indexer's DynamoDB calls
/// waits [`DELAY`] first: a 1-field update of each of a project's first issues, indexed with
/// the delay on (the seed is indexed before, at full speed). (issues, seconds).
pub async fn indexer_delayed() -> Result<(usize, f64)> {
    indexer_delayed_at(gridline::index::indexer::DEFAULT_CONCURRENCY).await
}

/// [`indexer_delayed`] with `concurrency` issues in flight.
pub async fn indexer_delayed_at(concurrency: usize) -> Result<(usize, f64)> {
    let stack = stack().await?;
    let seeded =
        gridctl::seed::seed(&stack.state.store, &spec(200, 0)?, &ProgressBar::hidden()).await?;
    let delay = Delay::default();
    let delayed = Store::new(
        delay.client(&stack.function_client("IndexerFunction"))?,
        &stack.tables.records,
        &stack.tables.index,
    );
    let mut poller = stack
        .poller(gridline::index::indexer::Indexer::new(delayed).with_concurrency(concurrency))
        .await;
    poller.emit_metrics = false;
    poller.drain().await?;
    let numbers = updatable_fields(&seeded);
    let ids = first_issues(&stack, &seeded).await?;
    let router = stack.router();
    let token = TestApi::token(&seeded.users[0], &seeded.tenant);
    for id in &ids {
        patch(&router, &token, id, new_values(&seeded, &numbers[..1], 1)).await?;
    }
    delay.set(DELAY);
    let started = Instant::now();
    poller.drain().await?;
    let seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        poller.dead_letters.is_empty(),
        "the delayed indexer sent batches to the on-failure list"
    );
    Ok((ids.len(), seconds))
}

/// New values for `fields` in update round `round`, each of the field's own type: the extra
/// fields alternate number, text, date.
fn new_values(
    seeded: &gridctl::seed::Seeded,
    fields: &[FieldId],
    round: usize,
) -> serde_json::Map<String, serde_json::Value> {
    let mut values = serde_json::Map::new();
    for (j, f) in fields.iter().enumerate() {
        let name = seeded
            .fields
            .iter()
            .find(|(_, v)| *v == f)
            .map(|(n, _)| n.clone())
            .unwrap_or_default();
        let kind = name
            .strip_prefix("Extra ")
            .and_then(|i| i.parse::<usize>().ok())
            .map_or(0, |i| i % 3);
        let v = match kind {
            0 => json!(round * 1000 + j),
            1 => json!(format!("text {round} {j}")),
            _ => json!(format!("2027-0{}-1{}", 1 + round, j % 10)),
        };
        values.insert(f.to_string(), v);
    }
    values
}

const FUNCTIONS: [(&str, &str); 7] = [
    ("projects", "ProjectsFunction"),
    ("issues", "IssuesFunction"),
    ("grid", "GridFunction"),
    ("people", "PeopleFunction"),
    ("inbox", "InboxFunction"),
    ("indexer", "IndexerFunction"),
    ("fieldjob", "FieldJobFunction"),
];

/// Time from process start to the function's first `GET /runtime/invocation/next`: Lambda's
/// init phase (configuration, the client, the warm-up call to the engine).
async fn init_time(binary: &Path, engine: &str) -> Result<Duration> {
    let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
    let tx = std::sync::Arc::new(std::sync::Mutex::new(Some(tx)));
    let app = axum::Router::new().route(
        "/2018-06-01/runtime/invocation/next",
        axum::routing::get(move || {
            if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
                let _ = tx.send(Instant::now());
            }
            std::future::pending::<&'static str>()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let api = listener.local_addr()?.to_string();
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    let started = Instant::now();
    let mut child = tokio::process::Command::new(binary)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", &api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("RECORDS_TABLE", "records")
        .env("INDEX_TABLE", "index")
        .env("DYNAMODB_ENDPOINT", engine)
        .env("CURSOR_SIGNING_KEY", "bench-cursor-signing-key-0123456789")
        // The indexer and the job function send to the field-job queue (no call at init).
        .env(
            gridline::index::field_job::QUEUE_URL_VAR,
            "https://sqs.us-east-1.amazonaws.com/123456789012/bench-field-jobs",
        )
        .env("LOG_LEVEL", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let reached = tokio::time::timeout(Duration::from_secs(10), rx).await;
    let _ = child.kill().await;
    server.abort();
    let at =
        reached.with_context(|| format!("{}: init did not finish in 10 s", binary.display()))??;
    Ok(at - started)
}

/// Each function's binary in `dir`: sizes and median init time; and the functions whose
/// binary is not there (a debug run: `make bench` builds them), left out rather than failing
/// the run after its long measurements.
pub async fn binaries(dir: &Path) -> Result<(Vec<(String, u64, Option<u64>, f64)>, Vec<String>)> {
    let engine = stack().await?;
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for (name, logical) in FUNCTIONS {
        let path = dir.join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            eprintln!(
                "   {}: not found, left out (build the release binaries first; make bench does)",
                path.display()
            );
            missing.push(name.to_string());
            continue;
        };
        let size = meta.len();
        let arm = std::fs::metadata(Path::new(".aws-sam/build").join(logical).join("bootstrap"))
            .ok()
            .map(|m| m.len());
        let mut times = Vec::new();
        for _ in 0..10 {
            times.push(init_time(&path, &engine.endpoint).await?.as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        out.push((name.to_string(), size, arm, crate::percentile(&times, 0.5)));
    }
    Ok((out, missing))
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / 1_048_576.0)
}

/// Writes BENCHMARKS.md from the results, and its plot.
pub fn write(r: &Results, out: &Path, plot: &Path) -> Result<()> {
    let mut md = String::new();
    let host = std::process::Command::new("uname")
        .arg("-m")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    write_preamble(&mut md, &host)?;
    write_patterns(&mut md, r)?;
    write_other_designs(&mut md, r)?;
    write_densities(&mut md, r)?;
    write_indexer(&mut md, r)?;
    write_functions(&mut md, r, &host)?;
    write_results_names(&mut md)?;
    std::fs::write(out, md)?;
    plot_svg(r, plot)
}

/// How the figures were made: the command, the machine, the data.
fn write_preamble(md: &mut String, host: &str) -> Result<()> {
    writeln!(md, "# Benchmarks\n")?;
    writeln!(
        md,
        "Generated by `make bench` (release build; `cargo run --release -p gridline-bench`). Every figure below comes from that one command; rerun it to regenerate this file and `benchmarks.svg`. Machine: {} cores, {host}; the local stack (embedded engine on loopback, reached through the AWS SDK), so latencies are for a local engine, not AWS, and matter only relative to each other. Calls, capacity units and items read are what the engine reports for each DynamoDB request (`ReturnConsumedCapacity: TOTAL`, DynamoDB's rules: 4 KB read units, halved for eventually consistent reads; 1 KB write units), so they carry over to AWS.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )?;
    writeln!(
        md,
        "Data: one project per size, made by `gridctl seed` (five typed custom fields — number, select, date, text, datetime — about 20% of values missing; 50 users, 5 teams; each issue has a reporter, an assignee and sometimes a team watcher). Pages hold 50 issues. The caller of the inbox rows is in all 5 teams.\n"
    )?;
    writeln!(md, "![capacity and calls per page](benchmarks.svg)\n")?;
    Ok(())
}

/// A table's two header lines: `first`, then `columns` under each project size.
fn table_head(md: &mut String, first: &str, sizes: &[u64], columns: &[&str]) -> Result<()> {
    write!(md, "| {first} |")?;
    for n in sizes {
        write!(md, " {n}: {} |", columns.join(" | "))?;
    }
    writeln!(md)?;
    write!(md, "|---|")?;
    for _ in sizes {
        write!(md, "{}", "---:|".repeat(columns.len()))?;
    }
    writeln!(md)?;
    Ok(())
}

fn sizes(r: &Results) -> Vec<u64> {
    r.patterns.iter().map(|(n, _)| *n).collect()
}

/// The patterns' names, in the table's order.
fn pattern_names(r: &Results) -> Vec<&'static str> {
    r.patterns
        .first()
        .map(|(_, m)| m.keys().copied().collect())
        .unwrap_or_default()
}

/// Every access pattern's figures at every size.
fn write_patterns(md: &mut String, r: &Results) -> Result<()> {
    writeln!(md, "## Per access pattern\n")?;
    writeln!(
        md,
        "Per operation (a page, for lists): DynamoDB calls, capacity units (read + write), items read, and latency.\n"
    )?;
    table_head(
        md,
        "pattern",
        &sizes(r),
        &["calls", "CU", "items", "p50 / p99 ms"],
    )?;
    for name in pattern_names(r) {
        write!(md, "| {name} |")?;
        for (_, m) in &r.patterns {
            let s = &m[name];
            write!(
                md,
                " {:.1} | {:.1} | {:.0} | {:.1} / {:.1} |",
                s.calls, s.capacity, s.items, s.p50_ms, s.p99_ms
            )?;
        }
        writeln!(md)?;
    }
    Ok(())
}

/// The grid's page the other designs compare with: the page of every state, as theirs are
/// (runs before it was measured: the one page the grid had, which was of every state).
fn grid_page<'a>(m: &'a BTreeMap<&'static str, Stat>) -> Option<&'a Stat> {
    m.get(crate::ALL_STATES)
        .or_else(|| m.get("grid page by custom field"))
}

/// The baselines as multiples of the grid's page, and what each one is.
fn write_other_designs(md: &mut String, r: &Results) -> Result<()> {
    writeln!(
        md,
        "\n## The grid against three other designs: sort in memory, a table of field values, a GSI with a filter\n"
    )?;
    writeln!(
        md,
        "Capacity units and calls of one page of 50 sorted by a custom field, as a multiple of the grid's page of every state (`{}`).\n",
        crate::ALL_STATES
    )?;
    table_head(md, "design", &sizes(r), &["× CU", "× calls"])?;
    for name in pattern_names(r)
        .into_iter()
        .filter(|n| n.starts_with("baseline"))
    {
        write!(md, "| {name} |")?;
        for (_, m) in &r.patterns {
            let (Some(g), Some(b)) = (grid_page(m), m.get(name)) else {
                write!(md, " | |")?;
                continue;
            };
            write!(
                md,
                " {:.1}× | {:.1}× |",
                b.capacity / g.capacity.max(1e-9),
                b.calls / g.calls.max(1e-9)
            )?;
        }
        writeln!(md)?;
    }
    writeln!(
        md,
        "\n- *query the project, sort in memory*: every issue of the project is read (one Query of a partition holding the project's issues in full, paginated by DynamoDB's 1 MB pages), sorted, and the first 50 kept."
    )?;
    writeln!(
        md,
        "- *one query per issue (a table of field values)*: field values normalised into a table of their own, an item per issue and field (seed 003's design): the project's issue ids, then one Query per issue of its field values, a sort, and one BatchGetItem of the page."
    )?;
    writeln!(
        md,
        "- *GSI + FilterExpression*: a GSI keyed on the value serves the issues that have one, but cannot hold those that do not (its key attribute is missing), so their page is read from the base partition with `attribute_not_exists`, `Limit` 50 per call: the filter runs after the read, so every issue read costs whether it matches or not. With about 20% of values missing this reads about five issues per match, whatever the project's size; the rarer missing values are, the more it reads. The grid's page at the same position (`grid page of missing values`) reads only the page.\n"
    )?;
    Ok(())
}

/// The grid against the GSI design by missing-value density, and what names cost by people
/// mix.
fn write_densities(md: &mut String, r: &Results) -> Result<()> {
    writeln!(
        md,
        "## The grid against a GSI with a filter, by missing-value density
"
    )?;
    writeln!(
        md,
        "Read units per page of 50 over a whole listing sorted by a custom field, all but the display names (both designs read the same names). The GSI design serves the issues with a value from a GSI (`{}`: one Query) and those without from the base partition with a filter (`attribute_not_exists`, `Limit` 50, until 50 match), so its average is (1 − density) × its page of values + density × its page of missing values; the issues missing a value are picked by a stable hash of their id in the GSI design's copy. The grid reads any page the same way, whatever the density.
",
        baselines::GSI_VALUES
    )?;
    writeln!(
        md,
        "| size | missing | GSI: page of values | GSI: page of missing values (issues read) | GSI: per page | grid: per page (every state) | cheaper |"
    )?;
    writeln!(md, "|---:|---:|---:|---:|---:|---:|---|")?;
    for (n, m) in &r.patterns {
        let (Some(grid), Some(values)) = (grid_page(m), m.get(baselines::GSI_VALUES)) else {
            continue;
        };
        for density in baselines::DENSITIES {
            let (Some(missing), Some(average)) = (
                m.get(baselines::gsi_missing_row(density)),
                crate::results::gsi_per_page(m, density),
            ) else {
                continue;
            };
            let g = crate::results::rcu_issues(grid);
            writeln!(
                md,
                "| {n} | {density} % | {:.1} | {:.1} ({:.0}) | {average:.1} | {g:.1} | {} |",
                crate::results::rcu_issues(values),
                crate::results::rcu_issues(missing),
                missing.items,
                if g < average { "grid" } else { "GSI" },
            )?;
        }
    }
    writeln!(
        md,
        "
Display names per grid page (one BatchGetItem of the page's distinct people, each rounded up to 4 KB): the seed's mix (50 people, 5 teams) against a team of 12 people and 2 teams (`{}`).
",
        crate::TEAM_OF_12
    )?;
    writeln!(
        md,
        "| size | names RCU, seed's mix | names RCU, a team of 12 |"
    )?;
    writeln!(md, "|---:|---:|---:|")?;
    for (n, m) in &r.patterns {
        if let (Some(a), Some(b)) = (m.get("grid page by custom field"), m.get(crate::TEAM_OF_12)) {
            writeln!(
                md,
                "| {n} | {:.1} | {:.1} |",
                a.names_capacity, b.names_capacity
            )?;
        }
    }
    writeln!(md)?;
    Ok(())
}

/// The indexer's throughput, pure and end to end, and its write amplification.
fn write_indexer(md: &mut String, r: &Results) -> Result<()> {
    writeln!(md, "## The indexer\n")?;
    let core = [
        (
            format!("Pure core (`plan`, `Basis::of_record` and `Watermark::step` against each issue's watermark, over real stream records decoded into the indexer's records: the seed's inserts, then a 1-field update of each issue; batches of 100, each decoded from its event JSON just before its core runs, as in the function, and only the core timed; one core, no I/O, the fastest of {CORE_PASSES} passes)"),
            r.indexer_core,
            true,
        ),
        (
            "The same core over every batch decoded beforehand (how earlier runs measured it: the decoded records, about 40 MB, stream from memory, which no invocation does)".to_string(),
            r.indexer_core_streamed,
            false,
        ),
        (
            "The same from each batch's Lambda event JSON, decoded as the function decodes it (`index::event`, strings borrowed from the text)".to_string(),
            r.indexer_core_json,
            true,
        ),
    ];
    for (what, (recs, secs), headline) in core {
        let rate = format!("{:.0} records/s", recs as f64 / secs.max(1e-9));
        let rate = if headline {
            format!("**{rate}**")
        } else {
            rate
        };
        writeln!(md, "- {what}: {recs} records in {secs:.3} s, {rate}.")?;
    }
    for (n, recs, secs) in &r.index_e2e {
        writeln!(
            md,
            "- End to end at {n} issues (the seed's stream through the real handler, the local stream poller, the embedded engine): {recs} records in {secs:.1} s, **{:.0} records/s**.",
            *recs as f64 / secs.max(1e-9)
        )?;
    }
    let (issues, secs) = r.indexer_delayed;
    writeln!(
        md,
        "- Through one poller (one shard) with each of the indexer's DynamoDB calls delayed {} ms, about a round trip within a region (the local engine answers in well under a millisecond): a 1-field update of each of {issues} issues indexed in {secs:.1} s, **{:.0} issues/s**.",
        DELAY.as_millis(),
        issues as f64 / secs.max(1e-9)
    )?;
    for (n, calls, secs) in &r.field_add {
        let index = secs.map_or(
            "did not finish (its message went to the dead-letter list)".to_string(),
            |s| format!("finished in **{s:.1} s**"),
        );
        writeln!(
            md,
            "- Adding a field at {n} issues: the request makes {calls:.0} DynamoDB calls and the stream indexer sends one job message; the field job, run as the job function runs it, {index}."
        )?;
    }
    writeln!(
        md,
        "\nWrite amplification of one issue update (a project with 55 custom fields, 100 issues updated, the indexer's own calls counted):\n"
    )?;
    writeln!(
        md,
        "| custom fields changed | index write requests per update | WCU per update |\n|---:|---:|---:|"
    )?;
    for (k, w, c) in &r.amplification {
        writeln!(md, "| {k} | {w:.1} | {c:.1} |")?;
    }
    writeln!(
        md,
        "\nWrite capacity of a 1-field update, the request's and the indexer's (write operations only; 100 issues, each updated once):\n"
    )?;
    writeln!(
        md,
        "| custom fields in the project | request WCU | indexer WCU | total |\n|---:|---:|---:|---:|"
    )?;
    for (fields, request, index) in &r.update_wcu {
        writeln!(
            md,
            "| {fields} | {request:.1} | {index:.1} | {:.1} |",
            request + index
        )?;
    }
    writeln!(
        md,
        "\nEach changed column's entry moves (a delete and a put); `updated_at` always changes, and so do the participation copies (their sort key is `updated_at`); every other entry is put again with the issue's new summary where it carries one (see below); plus the watermark: its intent and its commit, each about 1 KB whatever the field count (it stores what the entries derive from, in buckets of fields, never the keys). WCU counts item sizes in 1 KB units.\n"
    )?;
    write_summaries(md, r)?;
    write_hot(md, r)?;
    Ok(())
}

/// What summaries in the index entries cost per update and save per page, and the break-even.
fn write_summaries(md: &mut String, r: &Results) -> Result<()> {
    if r.summaries.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "Summaries in the index: a project of 100 issues, each updated once (1 field), then a warm grid page of 50 open issues by a custom field; indexed with each entry carrying the issue's summary where the entry stays within 1 KB, and with every entry thin (`Indexer::without_summaries`). Break-even: page views per update at which the read units saved pay for the write units added, a write unit costing five read units.\n"
    )?;
    writeln!(
        md,
        "| custom fields | update WCU, summaries | update WCU, thin | page RCU, summaries | page RCU, thin | page calls, summaries / thin | break-even (page views per update) |\n|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for c in &r.summaries {
        writeln!(md, "{}", c.row())?;
    }
    writeln!(md)?;
    Ok(())
}

/// The hot-project partition load, per shard count.
fn write_hot(md: &mut String, r: &Results) -> Result<()> {
    if r.hot.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "A hot project: {} updates/s of one project, simulated from metered writes ({} 1-field updates of random issues of a {}-issue project, each indexed on its own so every write is attributed to its update, scaled). The busiest partitions, by shard count of the project's columns (`gridctl reshard`):\n",
        crate::hot::UPDATES_PER_S,
        crate::hot::UPDATES,
        crate::hot::ISSUES
    )?;
    writeln!(
        md,
        "| shards | busiest column partition | updates/s writing to it | its WCU/s | column partitions written | busiest inbox | its updates/s | its WCU/s |\n|---:|---|---:|---:|---:|---|---:|---:|"
    )?;
    for h in &r.hot {
        writeln!(
            md,
            "| {} | `{}` | {:.0} | {:.0} | {} | `{}` | {:.0} | {:.0} |",
            h.shards,
            h.hottest_column,
            h.column_updates_per_s,
            h.column_wcu_per_s,
            h.column_partitions,
            h.hottest_inbox,
            h.inbox_updates_per_s,
            h.inbox_wcu_per_s
        )?;
    }
    writeln!(
        md,
        "\nEvery update moves its `updated_at` entry (a delete and a put in the same partition), so the busiest partition takes two WCU per update that reaches it; DynamoDB serves at most 1,000 WCU/s per partition, and cannot split a partition whose sort key only grows. At 2,000 updates/s a project needs 8 shards to stay under that limit; 4 bring each partition to about a quarter of the updates. Team inboxes are not sharded: a team's inbox takes the updates of its issues only.\n"
    )?;
    Ok(())
}

/// Each function's binary sizes and init time.
fn write_functions(md: &mut String, r: &Results, host: &str) -> Result<()> {
    writeln!(md, "## Functions\n")?;
    writeln!(
        md,
        "Release binaries (`opt-level = \"s\"`, thin LTO, stripped). Init is the time from process start to the function's first request for work from a local Lambda runtime API: configuration, the DynamoDB client, and the warm-up Query against the local engine (median of 10). The arm64 column is the `bootstrap` `sam build` made, when present.\n"
    )?;
    writeln!(
        md,
        "| function | binary ({host}) | arm64 bootstrap | init (median) |\n|---|---:|---:|---:|"
    )?;
    for (name, size, arm, ms) in &r.binaries {
        writeln!(
            md,
            "| {name} | {} | {} | {ms:.1} ms |",
            mib(*size),
            arm.map_or("–".into(), mib)
        )?;
    }
    if !r.missing_binaries.is_empty() {
        writeln!(
            md,
            "\nNot measured, their binaries were not found: {} (build the release binaries first; `make bench` does).",
            r.missing_binaries.join(", ")
        )?;
    }
    writeln!(
        md,
        "\nThe HTTP functions' init reads the cursor key from the environment here; in AWS it reads it from Secrets Manager in parallel with the warm-up, which adds one HTTPS round trip."
    )?;
    Ok(())
}

/// What `bench/results.json` holds, name by name.
fn write_results_names(md: &mut String) -> Result<()> {
    writeln!(md, "\n## bench/results.json\n")?;
    writeln!(
        md,
        "The same run writes its figures to `bench/results.json` (`--results` for another path) as one flat JSON object of numbers, so a figure can be compared from run to run, and `_meta`: the sizes run, the samples, the build profile (debug figures do not compare with release ones), the git commit and whether the tree had uncommitted changes, the date, and the names left out with the reason. `{{size}}` is 1k, 10k or 100k; `{{function}}` a function's short name.\n"
    )?;
    writeln!(md, "| name | what |\n|---|---|")?;
    for (name, what) in crate::results::NAMES {
        writeln!(md, "| `{name}` | {what} |")?;
    }
    Ok(())
}

/// The plot's lines: the grid's two pages and the three other designs.
const SERIES: [(&str, (u8, u8, u8)); 5] = [
    (crate::ALL_STATES, (31, 119, 180)),
    ("grid page of missing values (same position)", (44, 160, 44)),
    (baselines::SORT_IN_MEMORY, (214, 39, 40)),
    (baselines::VALUES_TABLE, (148, 103, 189)),
    (baselines::GSI_WITH_FILTER, (255, 127, 14)),
];

/// Two log-log panels side by side: capacity units per page, and calls per page.
fn plot_svg(r: &Results, path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(550);
    draw_panel(&left, r, "capacity units per page", |s| s.capacity, true)?;
    draw_panel(&right, r, "DynamoDB calls per page", |s| s.calls, false)?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// One panel: `value` of each series against the project's size; the legend when `legend`.
fn draw_panel(
    area: &plotters::drawing::DrawingArea<
        plotters::prelude::SVGBackend<'_>,
        plotters::coord::Shift,
    >,
    r: &Results,
    title: &str,
    value: fn(&Stat) -> f64,
    legend: bool,
) -> Result<()> {
    use plotters::prelude::*;
    let xs: Vec<f64> = r.patterns.iter().map(|(n, _)| *n as f64).collect();
    let (xmin, xmax) = (
        xs.first().copied().unwrap_or(1.0) * 0.8,
        xs.last().copied().unwrap_or(10.0) * 1.25,
    );
    let ymax = r
        .patterns
        .iter()
        .flat_map(|(_, m)| m.values().map(value))
        .fold(1.0, f64::max)
        * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d((xmin..xmax).log_scale(), (0.1..ymax).log_scale())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("issues in the project")
        .x_label_formatter(&|x| format!("{:.0}", x))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (name, (red, green, blue)) in SERIES {
        let color = RGBColor(red, green, blue);
        let points: Vec<(f64, f64)> = r
            .patterns
            .iter()
            .filter_map(|(n, m)| m.get(name).map(|s| (*n as f64, value(s).max(0.1))))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(name.trim_start_matches("baseline: "))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if legend {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}
