//! `gridctl`: verify and repair the index, replay the indexer's failed batches, reshard a hot
//! project, list field jobs, give tenants their usage-plan keys, seed data — against the local
//! stack (`--endpoint`) or AWS (credentials and region from the environment).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use gridctl::{ops, replay, seed};
use gridline::domain::ids::{ProjectId, TenantId};
use gridline::indexer::Indexer;
use gridline::model::Entry;
use gridline::store::{Store, connect, sdk_config};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Parser)]
#[command(name = "gridctl", version, about = "Gridline's operator tool")]
struct Cli {
    /// A DynamoDB endpoint (the local stack's engine: http://127.0.0.1:8100); AWS when absent.
    #[arg(long, global = true, env = "DYNAMODB_ENDPOINT")]
    endpoint: Option<String>,
    /// The records table (the stack's RecordsTableName output).
    #[arg(
        long,
        global = true,
        env = "RECORDS_TABLE",
        default_value = "gridline-records"
    )]
    records_table: String,
    /// The index table (the stack's IndexTableName output).
    #[arg(
        long,
        global = true,
        env = "INDEX_TABLE",
        default_value = "gridline-index"
    )]
    index_table: String,
    /// Print one JSON document instead of text (and no progress bars).
    #[arg(long, global = true)]
    json: bool,
    /// Parallel scan segments per table.
    #[arg(long, global = true, default_value_t = 4)]
    segments: u32,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compare the index with a recomputation from the records; exit 1 on any drift.
    Verify {
        /// Entries of each kind to list.
        #[arg(long, default_value_t = 10)]
        show: usize,
    },
    /// Fix every drifted issue (safe while traffic flows), then verify; exit 1 if drift remains.
    Repair {
        /// Verify-and-fix rounds before giving up on issues the stream keeps changing.
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Record versions whose history entries cannot be rebuilt (made before the stack kept
        /// history, or lost past the stream's 24 hours) as lost, so verify stops reporting
        /// them. Run `gridctl replay` first for anything the on-failure queue still names.
        #[arg(long)]
        accept_lost_history: bool,
    },
    /// Rewrite watermarks still in the previous layout (every entry key) in the compact one,
    /// by re-indexing their issues; safe while traffic flows. `verify` counts them.
    Upgrade,
    /// Check every tenant's directory (the display names a page reads in one Query) against
    /// its profiles and teams; with --fix, write what is missing or stale (for data written
    /// before the directory existed). Safe while traffic flows; exit 1 if drift remains.
    Directory {
        #[arg(long)]
        fix: bool,
    },
    /// Re-drive the issues named by the indexer's on-failure messages.
    Replay {
        /// The stack's IndexerFailureQueueUrl; messages are deleted once replayed.
        #[arg(long, conflicts_with = "file")]
        queue_url: Option<String>,
        /// Messages one per line (the local stack writes .local/on-failure.jsonl).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Leave replayed messages on the queue.
        #[arg(long)]
        keep: bool,
    },
    /// A tenant's field jobs (a field added to, or deleted from, a project with issues) and
    /// their progress.
    Jobs {
        #[arg(long, default_value = "acme")]
        tenant: String,
    },
    /// Split a project's column partitions into `--shards` shards (1 to 16; 1 merges them
    /// back), for a project whose writes outgrow one partition. The grid stays exact
    /// throughout: the new layout is built beside the old one, reads switch, the old one is
    /// retired. Safe while traffic flows; run it again with the same count to finish one cut
    /// short.
    Reshard {
        #[arg(long, default_value = "acme")]
        tenant: String,
        #[arg(long)]
        project: String,
        #[arg(long)]
        shards: u16,
        /// Seconds to wait after each move of the project's layouts: longer than an indexer
        /// invocation that read them before can run (its timeout) and than a read is stale.
        /// After the switch it waits at least 3 s whatever this says: a grid instance serves
        /// the layout it read for 2 s.
        #[arg(long, default_value_t = gridline::ops::reshard::SETTLE.as_secs())]
        settle_seconds: u64,
    },
    /// Give tenants their usage-plan key, so API Gateway throttles each tenant on its own
    /// (TenantRateLimit): creates the API key the authorizer names for the tenant and adds it
    /// to the stack's usage plan. Until then the tenant's requests get 403. Safe to run again;
    /// exit 1 if a tenant's key is disabled. AWS only: the local stack needs no key.
    TenantKey {
        /// The tenants (their custom:tenant_id).
        #[arg(required = true)]
        tenants: Vec<String>,
        /// The stack's TenantUsagePlanId output.
        #[arg(long, env = "TENANT_USAGE_PLAN_ID")]
        usage_plan_id: String,
    },
    /// Create a realistic project: fields of every type, users, teams, issues.
    Seed {
        #[arg(long, default_value = "acme")]
        tenant: String,
        #[arg(long, default_value = "Seeded")]
        project: String,
        #[arg(long, default_value_t = 1000)]
        issues: u64,
        /// Custom fields beyond the five typed ones.
        #[arg(long, default_value_t = 0)]
        extra_fields: usize,
        #[arg(long, default_value_t = 20)]
        users: usize,
        #[arg(long, default_value_t = 5)]
        teams: usize,
        #[arg(long, default_value_t = 1)]
        rng_seed: u64,
    },
}

fn bar(json: bool, what: &str, len: u64) -> ProgressBar {
    if json {
        return ProgressBar::hidden();
    }
    let bar = if len == 0 {
        ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {msg}: {pos} items {per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        )
    } else {
        ProgressBar::new(len).with_style(
            ProgressStyle::with_template("{msg:10} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        )
    };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message(what.to_string());
    bar
}

/// A `--tenant` argument, checked.
fn tenant_id(tenant: &str) -> Result<TenantId> {
    TenantId::parse(tenant).with_context(|| format!("{tenant:?} is not a valid tenant id"))
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let code = match tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(run(cli)))
    {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gridctl: {e:#}");
            2
        }
    };
    std::process::exit(code);
}

async fn run(cli: Cli) -> Result<i32> {
    let client = connect(cli.endpoint.as_deref()).await;
    let store = Store::new(client, &cli.records_table, &cli.index_table);
    let json = cli.json;
    match cli.command {
        Command::Verify { show } => run_verify(&store, cli.segments, json, show).await,
        Command::Repair {
            rounds,
            accept_lost_history,
        } => run_repair(&store, (cli.segments, rounds), json, accept_lost_history).await,
        Command::Upgrade => run_upgrade(&store, cli.segments, json).await,
        Command::Directory { fix } => run_directory(&store, cli.segments, json, fix).await,
        Command::Jobs { tenant } => {
            let tenant = tenant_id(&tenant)?;
            run_jobs(&store, json, &tenant).await
        }
        Command::Reshard {
            tenant,
            project,
            shards,
            settle_seconds,
        } => {
            let tenant = tenant_id(&tenant)?;
            let project = ProjectId::parse(&project)
                .with_context(|| format!("{project:?} is not a valid project id"))?;
            let settle = Duration::from_secs(settle_seconds);
            run_reshard(&store, json, (&tenant, &project), shards, settle).await
        }
        Command::TenantKey {
            tenants,
            usage_plan_id,
        } => run_tenant_key(cli.endpoint.as_deref(), json, &tenants, &usage_plan_id).await,
        Command::Replay {
            queue_url,
            file,
            keep,
        } => run_replay(&store, cli.endpoint.as_deref(), json, queue_url, file, keep).await,
        Command::Seed {
            tenant,
            project,
            issues,
            extra_fields,
            users,
            teams,
            rng_seed,
        } => {
            let tenant = tenant_id(&tenant)?;
            let spec = seed::Spec {
                tenant,
                project_name: project,
                issues,
                extra_fields,
                users,
                teams,
                rng_seed,
            };
            run_seed(&store, json, &spec).await
        }
    }
}

/// `tenant-key`: one tenant at a time (API Gateway allows few key creations a second; the
/// SDK retries a throttled call). Exit 1 if a key is disabled.
async fn run_tenant_key(
    endpoint: Option<&str>,
    json: bool,
    tenants: &[String],
    plan: &str,
) -> Result<i32> {
    use gridctl::tenant_key::{Gateway, provision};
    anyhow::ensure!(
        endpoint.is_none(),
        "tenant-key works on AWS only: the local stack throttles every tenant without a key"
    );
    let tenants = tenants
        .iter()
        .map(|t| tenant_id(t))
        .collect::<Result<Vec<_>>>()?;
    let api = Gateway(aws_sdk_apigateway::Client::new(&sdk_config(None).await));
    let mut done = Vec::new();
    for tenant in &tenants {
        let p = provision(&api, plan, tenant).await?;
        if !json {
            let what = match (p.created, p.added_to_plan) {
                (true, _) => "created, in the plan",
                (false, true) => "existed, added to the plan",
                (false, false) => "already in the plan",
            };
            let off = if p.enabled {
                ""
            } else {
                " (DISABLED: the tenant still gets 403)"
            };
            println!("{}: key {} {what}{off}", p.tenant, p.key_id);
        }
        done.push(p);
    }
    if json {
        print_json(&done)?;
    }
    Ok(if done.iter().all(|p| p.enabled) { 0 } else { 1 })
}

/// `verify`: exit 0 when clean, 1 on any drift.
async fn run_verify(store: &Store, segments: u32, json: bool, show: usize) -> Result<i32> {
    let progress = bar(json, "scanning", 0);
    let report = ops::verify(store, segments, &progress).await?;
    progress.finish_and_clear();
    if json {
        print_json(&report)?;
    } else {
        print_verify(&report, show);
    }
    Ok(if report.is_clean() { 0 } else { 1 })
}

fn print_verify(report: &ops::VerifyReport, show: usize) {
    println!(
        "scanned {} records and {} index items: {} issues",
        report.records_scanned, report.index_scanned, report.issues
    );
    println!(
        "missing {}, extra {}, stale {} entries, in {} issues",
        report.missing, report.extra, report.stale, report.drifted_issues
    );
    if report.previous_layout_watermarks > 0 {
        println!(
            "{} watermarks in a previous layout, {} of their entries in the `all` scope (not drift; `gridctl upgrade` rewrites them)",
            report.previous_layout_watermarks, report.previous_layout_entries
        );
    }
    if report.parked > 0 {
        println!(
            "parked {} units (the indexer could not index them; see each reason)",
            report.parked
        );
    }
    for p in report.drift.parked.iter().take(show) {
        println!(
            "  parked   tenant {} | {}  at {} ({}): {}",
            p.tenant, p.subject, p.sequence_number, p.parked_at, p.reason
        );
    }
    if report.relations + report.tree + report.comments + report.history + report.view_counts > 0 {
        println!(
            "relations {}, tree {}, comments {}, history {}, view counts {} problems (`--json` lists them)",
            report.relations, report.tree, report.comments, report.history, report.view_counts
        );
    }
    let drift = &report.drift;
    let stale = drift.stale.iter().map(|s| &s.actual);
    print_entries("missing", drift.missing.iter().take(show));
    print_entries("extra", drift.extra.iter().take(show));
    print_entries("stale", stale.take(show));
    println!(
        "{}",
        if report.is_clean() {
            "clean"
        } else {
            "DRIFT: run `gridctl repair`"
        }
    );
}

/// One line per index entry, under a label padded so the keys line up.
fn print_entries<'a>(label: &str, entries: impl Iterator<Item = &'a Entry>) {
    for e in entries {
        println!(
            "  {label:<8} {} | {}  (issue {})",
            e.pk,
            e.sk.escape_debug(),
            e.issue_id
        );
    }
}

/// `repair`: exit 0 when the last verify is clean, 1 when drift remains.
async fn run_repair(
    store: &Store,
    (segments, rounds): (u32, u32),
    json: bool,
    accept_lost_history: bool,
) -> Result<i32> {
    let progress = |what: &str, len| bar(json, what, len);
    let report =
        ops::repair_with(store, (segments, rounds), accept_lost_history, &progress).await?;
    if json {
        print_json(&report)?;
    } else {
        println!(
            "{} round(s): fixed {} issues ({} entries written, {} deleted), {} already right, {} in flight",
            report.rounds,
            report.fixed,
            report.puts,
            report.deletes,
            report.already_right,
            report.in_flight
        );
        println!(
            "{}",
            if report.clean {
                "clean"
            } else {
                "drift remains: run again once writes settle"
            }
        );
    }
    Ok(if report.clean { 0 } else { 1 })
}

async fn run_upgrade(store: &Store, segments: u32, json: bool) -> Result<i32> {
    let report = ops::upgrade(store, segments, &|what, len| bar(json, what, len)).await?;
    if json {
        print_json(&report)?;
    } else {
        println!(
            "{} watermarks in a previous layout: {} upgraded, {} failed",
            report.found, report.upgraded, report.failed
        );
    }
    Ok(if report.failed == 0 { 0 } else { 1 })
}

/// `directory [--fix]`.
async fn run_directory(store: &Store, segments: u32, json: bool, fix: bool) -> Result<i32> {
    let report = gridline::ops::directory::sync(store, segments, fix, &|_| {}).await?;
    if json {
        print_json(&report)?;
    } else {
        println!(
            "{} names: {} missing from their directory, {} stale; {} fixed, {} changed since the scan",
            report.names, report.missing, report.stale, report.fixed, report.moved
        );
    }
    let drift = report.missing + report.stale;
    Ok(if drift == 0 || (fix && report.moved == 0) {
        0
    } else {
        1
    })
}

/// `jobs`: one line per job, oldest first.
async fn run_jobs(store: &Store, json: bool, tenant: &TenantId) -> Result<i32> {
    let mut jobs = store.index().list_jobs(tenant).await?;
    jobs.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    if json {
        print_json(&jobs)?;
        return Ok(0);
    }
    if jobs.is_empty() {
        println!("no field jobs");
    }
    for j in &jobs {
        println!(
            "{} {} of project {}: {} — step {}, {} issues in {} pages; started {}, moved {}",
            j.kind.as_str(),
            j.field_id,
            j.project_id,
            if j.finished { "finished" } else { "running" },
            j.step,
            j.issues,
            j.pages,
            j.started_at,
            j.updated_at
        );
    }
    Ok(0)
}

/// `reshard`: exit 0 once the project reads and writes `shards` shards only.
async fn run_reshard(
    store: &Store,
    json: bool,
    project: (&TenantId, &ProjectId),
    shards: u16,
    settle: Duration,
) -> Result<i32> {
    use gridline::ops::reshard::{self, Stage};
    let indexer = Indexer::new(store.clone());
    let bar = bar(json, "building", 0);
    let on_page = |stage: Stage, issues: usize| {
        bar.set_message(match stage {
            Stage::Build => "building",
            Stage::Switch => "switching",
            Stage::Retire => "retiring",
        });
        bar.inc(issues as u64);
    };
    let report = reshard::reshard(&indexer, store, project, shards, settle, &on_page).await?;
    bar.finish_and_clear();
    if json {
        print_json(&report)?;
    } else {
        println!(
            "project {} now has {} shard(s) (was {}): {:?}; {} issues re-indexed, {} writes",
            project.1, report.to, report.from, report.stages, report.issues, report.writes
        );
    }
    Ok(0)
}

/// `replay`: from the on-failure queue or a file of its messages.
async fn run_replay(
    store: &Store,
    endpoint: Option<&str>,
    json: bool,
    queue_url: Option<String>,
    file: Option<PathBuf>,
    keep: bool,
) -> Result<i32> {
    let config = sdk_config(endpoint).await;
    let streams = aws_sdk_dynamodbstreams::Client::new(&config);
    let indexer = Indexer::new(store.clone());
    let mut report = replay::ReplayReport::default();
    match (queue_url, file) {
        (Some(url), _) => {
            let sqs = aws_sdk_sqs::Client::new(&sdk_config(None).await);
            replay::from_queue(&sqs, &url, &streams, &indexer, keep, &mut report).await?;
        }
        (None, Some(path)) => {
            for body in replay::messages_from_file(&path)? {
                let batch = replay::parse_message(&body)?;
                let touched = replay::touched_by(&streams, &batch).await?;
                replay::redrive(&indexer, &touched, &mut report).await?;
                report.messages += 1;
            }
        }
        (None, None) => replay::no_source()?,
    }
    if json {
        print_json(&report)?;
    } else {
        println!(
            "{} message(s): re-indexed {} issues and {} projects ({} index writes), {} history entries rebuilt",
            report.messages,
            report.issues,
            report.projects,
            report.index_writes,
            report.history_entries
        );
    }
    Ok(0)
}

/// `seed`: one project with its fields, users, teams and issues.
async fn run_seed(store: &Store, json: bool, spec: &seed::Spec) -> Result<i32> {
    let progress = bar(json, "seeding", spec.issues.max(1));
    let seeded = seed::seed(store, spec, &progress).await?;
    progress.finish_and_clear();
    if json {
        print_json(&seeded)?;
    } else {
        println!(
            "project {} in tenant {}: {} issues, {} fields, {} users, {} teams",
            seeded.project_id,
            seeded.tenant,
            seeded.issues,
            seeded.fields.len(),
            seeded.users.len(),
            seeded.teams.len()
        );
    }
    Ok(0)
}
