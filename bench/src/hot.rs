//! The hot-project figures: how much write load the busiest partition of a project's columns
//! takes when the project is updated 2,000 times a second, with its columns in one shard or
//! split (`gridctl reshard`). A partition-load simulation from metered writes: a project of
//! 1,000 issues gets 1-field updates of random issues, each indexed on its own so every write
//! the indexer sends is attributed to its update; per partition, the share of updates that
//! wrote to it and the writes it took, scaled to 2,000 updates/s. DynamoDB serves at most
//! 1,000 WCU/s per partition (every entry is under 1 KB, so a write is 1 WCU); a partition
//! whose key only grows (`updated_at`) cannot be split by DynamoDB's own adaptive capacity.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;
use gridline::indexer::Indexer;
use gridline::keys;
use gridline_local::testing::TestApi;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::indexer::{metered_indexer, patch, spec, stack};

/// The update rate the figures are scaled to.
pub(crate) const UPDATES_PER_S: f64 = 2000.0;
/// Issues of the simulated project.
pub(crate) const ISSUES: u64 = 1000;
/// Updates simulated per shard count.
pub(crate) const UPDATES: usize = 400;

/// The busiest partitions under the simulated load, at one shard count.
#[derive(Debug, Clone, Default)]
pub(crate) struct HotLoad {
    pub(crate) shards: u16,
    /// The busiest column partition: updates/s that write to it, and its writes/s (WCU/s).
    pub(crate) column_updates_per_s: f64,
    pub(crate) column_wcu_per_s: f64,
    pub(crate) hottest_column: String,
    /// Column partitions written at all.
    pub(crate) column_partitions: usize,
    /// The busiest inbox (team inboxes are not sharded): updates/s and WCU/s.
    pub(crate) inbox_updates_per_s: f64,
    pub(crate) inbox_wcu_per_s: f64,
    pub(crate) hottest_inbox: String,
}

/// Simulates the load at each shard count.
pub(crate) async fn hot_project(shard_counts: &[u16]) -> Result<Vec<HotLoad>> {
    let mut out = Vec::new();
    for &shards in shard_counts {
        out.push(one(shards).await?);
    }
    Ok(out)
}

async fn one(shards: u16) -> Result<HotLoad> {
    let stack = stack().await?;
    let seeded = gridctl::seed::seed(
        &stack.state.store,
        &spec(ISSUES, 0)?,
        &ProgressBar::hidden(),
    )
    .await?;
    let (tenant, project) = (&seeded.tenant, &seeded.project_id);
    let (meter, mut poller) = metered_indexer(&stack, true).await?;
    if shards > 1 {
        let store = &stack.state.store;
        let indexer = Indexer::new(store.clone());
        let at = (tenant, project);
        gridline::ops::reshard::reshard(&indexer, store, at, shards, Duration::ZERO, &|_, _| {})
            .await?;
        poller.drain().await?;
    }
    let ids = crate::issue_ids(&stack.state.store, &seeded).await?;
    let router = stack.router_with(|id| stack.function_client(id));
    let token = TestApi::token(&seeded.users[0], tenant);
    let points = seeded.fields["Points"].to_string();
    let mut rng = StdRng::seed_from_u64(u64::from(shards));
    // Per partition: updates that wrote to it, and its writes.
    let mut load: HashMap<String, (u64, u64)> = HashMap::new();
    for i in 0..UPDATES {
        let id = &ids[rng.gen_range(0..ids.len())];
        let mut fields = serde_json::Map::new();
        fields.insert(points.clone(), serde_json::json!(i));
        patch(&router, &token, id, fields).await?;
        let before = meter.partition_writes();
        poller.drain().await?;
        for (pk, writes) in meter.partition_writes() {
            let new = writes - before.get(&pk).copied().unwrap_or(0);
            if new > 0 {
                let l = load.entry(pk).or_default();
                l.0 += 1;
                l.1 += new;
            }
        }
    }
    let per_s = |n: u64| n as f64 / UPDATES as f64 * UPDATES_PER_S;
    let hottest = |prefix: &str| {
        load.iter()
            .filter(|(pk, _)| pk.starts_with(prefix))
            .max_by_key(|(pk, (updates, writes))| (*writes, *updates, pk.as_str()))
            .map(|(pk, (u, w))| (pk.clone(), per_s(*u), per_s(*w)))
            .unwrap_or_default()
    };
    let columns = keys::index::project_columns_prefix(tenant, project);
    let (hottest_column, column_updates_per_s, column_wcu_per_s) = hottest(&columns);
    let (hottest_inbox, inbox_updates_per_s, inbox_wcu_per_s) =
        hottest(&keys::index::inboxes_prefix(tenant));
    let hot = HotLoad {
        shards,
        column_updates_per_s,
        column_wcu_per_s,
        column_partitions: load.keys().filter(|pk| pk.starts_with(&columns)).count(),
        hottest_column: hottest_column.replacen(&columns, "", 1),
        inbox_updates_per_s,
        inbox_wcu_per_s,
        hottest_inbox: hottest_inbox.replacen(&keys::index::inboxes_prefix(tenant), "", 1),
    };
    eprintln!(
        "   hot project, {shards} shard(s): busiest column partition {} at {:.0} updates/s, {:.0} WCU/s; busiest inbox {} at {:.0} updates/s, {:.0} WCU/s",
        hot.hottest_column,
        hot.column_updates_per_s,
        hot.column_wcu_per_s,
        hot.hottest_inbox,
        hot.inbox_updates_per_s,
        hot.inbox_wcu_per_s
    );
    Ok(hot)
}
