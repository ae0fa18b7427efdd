//! Adding a field to the seeded project: what the request costs, and how long until the
//! field's column is built.

use std::time::Instant;

use anyhow::Result;
use http::Method;
use serde_json::json;

use crate::Env;
use crate::settle::drain;

/// Adds a field to the seeded project through the API: the request's DynamoDB calls, and the
/// seconds until the field is sortable: the stream indexer's share (one message) and the field
/// job's run, as the job function runs it (a page of issues at a time, checkpointed, continued
/// in a new message when its time runs low). `None` when the job did not finish (its message
/// went to the dead-letter list).
pub(crate) async fn field_add(env: &Env) -> Result<(f64, Option<f64>)> {
    let mut poller = env.poller.lock().await;
    // What the earlier patterns wrote, indexed first so only the field's work is timed.
    drain(&mut poller).await?;
    let (p, _, me) = crate::project_points_caller(env);
    let path = format!("/projects/{p}/fields");
    let body = json!({"name": "Bench added", "type": "number"});
    let before = env.meter.now();
    let (status, reply) = env.call(me, Method::POST, &path, Some(body)).await?;
    anyhow::ensure!(status == 201, "{path}: {status} {reply}");
    let calls = (env.meter.now() - before).calls as f64;
    let worker = env.stack.job_worker()?;
    let dead = worker.queue.dead_letters().len();
    let started = Instant::now();
    drain(&mut poller).await?;
    let messages = worker.queue.len();
    worker.drain().await?;
    let seconds = started.elapsed().as_secs_f64();
    let finished = worker.queue.dead_letters().len() == dead;
    eprintln!(
        "   field add: {calls} calls; the stream sent {messages} job message(s); column {} in {seconds:.1} s",
        if finished {
            "built"
        } else {
            "not built (dead-letter)"
        }
    );
    Ok((calls, finished.then_some(seconds)))
}

/// Reorders the seeded project's `Priority` options (a select field every issue may hold)
/// through the API: the seconds until the field is sortable again, its Edit job having
/// re-indexed every issue as the job function runs it. `None` when the job did not finish.
pub(crate) async fn option_reorder(env: &Env) -> Result<Option<f64>> {
    let mut poller = env.poller.lock().await;
    drain(&mut poller).await?;
    let (p, _, me) = crate::project_points_caller(env);
    let field = &env.seeded.fields["Priority"];
    let path = format!("/projects/{p}/fields/{field}");
    let mut options: Vec<&str> = gridctl::seed::PRIORITIES.to_vec();
    options.reverse();
    let (status, reply) = env
        .call(
            me,
            Method::PATCH,
            &path,
            Some(json!({ "options": options })),
        )
        .await?;
    anyhow::ensure!(status == 200, "{path}: {status} {reply}");
    let worker = env.stack.job_worker()?;
    let dead = worker.queue.dead_letters().len();
    let started = Instant::now();
    drain(&mut poller).await?;
    worker.drain().await?;
    let seconds = started.elapsed().as_secs_f64();
    let finished = worker.queue.dead_letters().len() == dead;
    eprintln!(
        "   option reorder: column {} in {seconds:.1} s",
        if finished {
            "rebuilt"
        } else {
            "not rebuilt (dead-letter)"
        }
    );
    Ok(finished.then_some(seconds))
}

/// Deletes the seeded project through the API, last of a size's measures: the seconds until
/// nothing of it is left (its purge job's pages, as the job function runs them, and the
/// indexer's clean-up of each deleted issue off the stream, until both are idle), and the
/// write units both spend. `None` when the job did not finish.
pub(crate) async fn project_delete(env: &Env) -> Result<Option<(f64, f64)>> {
    let mut poller = env.poller.lock().await;
    drain(&mut poller).await?;
    let (p, _, me) = crate::project_points_caller(env);
    let (status, reply) = env
        .call(me, Method::DELETE, &format!("/projects/{p}"), None)
        .await?;
    anyhow::ensure!(status == 204, "delete {p}: {status} {reply}");
    let meter = crate::meter::Meter::new();
    let stack = &env.stack;
    poller.set_indexer(stack.indexer_on(meter.client(&stack.function_client("IndexerFunction"))));
    let mut worker = stack.job_worker()?;
    worker.jobs = stack.field_jobs_on(meter.client(&stack.function_client("FieldJobFunction")));
    let dead = worker.queue.dead_letters().len();
    let started = Instant::now();
    loop {
        drain(&mut poller).await?;
        if worker.queue.is_empty() {
            break;
        }
        worker.drain().await?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let wcu = meter.now().write_capacity;
    let finished = worker.queue.dead_letters().len() == dead;
    eprintln!(
        "   project delete: {} in {seconds:.1} s, {wcu:.0} WCU",
        if finished {
            "purged"
        } else {
            "not purged (dead-letter)"
        }
    );
    Ok(finished.then_some((seconds, wcu)))
}

/// `--project-delete N`: a project of `n` issues set up on an engine file in `dir`, then
/// deleted; the figures printed.
pub(crate) async fn project_delete_only(n: u64, dir: &std::path::Path) -> Result<()> {
    let db = dir.join(format!("gridline-bench-delete-{}.db", std::process::id()));
    let env = crate::setup(n, &db).await?;
    let done = project_delete(&env).await;
    drop(env);
    crate::remove_db(&db);
    let size = crate::results::size_label(n);
    match done? {
        Some((seconds, wcu)) => {
            println!(
                "project_delete_{size}_seconds {seconds:.1}\nproject_delete_{size}_wcu {wcu:.0}"
            )
        }
        None => println!("the purge job did not finish"),
    }
    Ok(())
}
