//! What the indexer's figures share: a stack seeded with a small project, its metered indexer,
//! and the issue updates that give the indexer work.

pub(crate) mod delayed;
pub(crate) mod pure_core;
pub(crate) mod updates;

use anyhow::{Context, Result};
use gridline::domain::ids::{FieldId, IssueId, TenantId};
use gridline::store::Store;
use gridline_local::testing::test_stack;
use gridline_local::{Data, Stack};
use http::Method;
use serde_json::json;

use crate::meter::Meter;

/// The local stack on an in-memory engine.
pub(crate) async fn stack() -> Result<Stack> {
    test_stack(Data::Memory).await
}

/// The seed of a project of `issues` issues with 5 + `extra_fields` custom fields.
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
    let mut indexer = gridline::indexer::Indexer::new(metered);
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
        .records()
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
