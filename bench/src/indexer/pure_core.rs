//! The indexer's pure core (plan, basis and step, no I/O) timed over real stream records.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, Result};
use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use gridline::domain::ids::IssueId;
use gridline::domain::values::FieldDef;
use gridline::indexer::{Unit, plan};
use gridline::model::Basis;
use gridline::model::event::{StreamEvent, StreamRecord};
use gridline::model::watermark::{Pending, Watermark};
use gridline_local::Stack;
use gridline_local::testing::TestApi;
use indicatif::ProgressBar;

use super::{new_values, patch, spec, stack, updatable_fields};

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
            ..
        } = unit
        {
            let desired = last.as_deref().map(|issue| {
                let (one, hot) = (gridline::keys::index::Shards::ONE, Default::default());
                Basis::of_record(issue, defs, one, &hot)
            });
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
pub(crate) const CORE_PASSES: usize = 5;

/// The pure core on real stream records in Lambda's batches of 100, one core, no I/O: the
/// seed's records (inserts) followed by a 1-field update of every issue (modifies), as
/// production's stream mixes them.
pub(crate) async fn indexer_core(issues: u64) -> Result<CoreFigures> {
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
        .records()
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
    time_core(n, &json, &defs)
}

/// The three timings of the pure core over the batches' event JSON, `n` records in all.
fn time_core(n: usize, json: &[String], defs: &[FieldDef]) -> Result<CoreFigures> {
    // Decoded: each batch's records as the indexer reads them, strings borrowed from its JSON,
    // decoded just before its core runs (as in the function: a batch of 100 is decoded, then
    // planned), and only the core timed.
    let mut writes = 0;
    let decoded = fastest(|| {
        let mut watermarks = HashMap::new();
        let mut secs = 0.0;
        for text in json {
            let e = StreamEvent::from_json(text)?;
            let started = Instant::now();
            writes += index_core(&e.records, defs, &mut watermarks);
            secs += started.elapsed().as_secs_f64();
        }
        Ok(secs)
    })?;
    // Every batch decoded first, then the core over all of them: the records stream from
    // memory, which no invocation does; printed beside.
    let batches = json
        .iter()
        .map(|text| StreamEvent::from_json(text))
        .collect::<Result<Vec<_>, _>>()?;
    let streamed = fastest(|| {
        let mut watermarks = HashMap::new();
        let started = Instant::now();
        for batch in &batches {
            writes += index_core(&batch.records, defs, &mut watermarks);
        }
        Ok(started.elapsed().as_secs_f64())
    })?;
    drop(batches);
    let with_json = fastest(|| {
        let mut watermarks = HashMap::new();
        let started = Instant::now();
        for text in json {
            let e = StreamEvent::from_json(text)?;
            writes += index_core(&e.records, defs, &mut watermarks);
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
pub(crate) struct CoreFigures {
    /// From each batch's records just decoded (the decoding not timed).
    pub(crate) decoded: (usize, f64),
    /// The same with each batch's JSON decoding timed.
    pub(crate) with_json: (usize, f64),
    /// From every batch decoded beforehand.
    pub(crate) streamed: (usize, f64),
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
