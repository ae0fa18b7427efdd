//! The indexer's throughput through one poller with each of its DynamoDB calls delayed by
//! about a round trip within a region.

use std::time::{Duration, Instant};

use anyhow::Result;
use gridline::store::Store;
use gridline_local::testing::TestApi;
use indicatif::ProgressBar;

use super::{first_issues, new_values, patch, spec, stack, updatable_fields};
use crate::delay::Delay;

/// What each of the indexer's DynamoDB calls waits in the delayed throughput figure: about a
/// round trip within a region.
pub(crate) const DELAY: Duration = Duration::from_millis(5);

/// Issues indexed per second through one poller when each of the indexer's DynamoDB calls
/// waits [`DELAY`] first: a 1-field update of each of a project's first issues, indexed with
/// the delay on (the seed is indexed before, at full speed). (issues, seconds).
pub(crate) async fn indexer_delayed() -> Result<(usize, f64)> {
    indexer_delayed_at(gridline::indexer::DEFAULT_CONCURRENCY).await
}

/// [`indexer_delayed`] with `concurrency` issues in flight.
pub(crate) async fn indexer_delayed_at(concurrency: usize) -> Result<(usize, f64)> {
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
        .poller(gridline::indexer::Indexer::new(delayed).with_concurrency(concurrency))
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
