//! The issue graph's access patterns: relating two issues, and reading an issue with ten
//! relations (the other issues' titles and states read with it).

use std::collections::BTreeMap;

use anyhow::Result;
use http::Method;

use crate::{Env, Stat, measure, request};

/// The rows these patterns add.
pub(crate) const RELATE: &str = "relate two issues";
pub(crate) const GET_10_RELATIONS: &str = "get issue with 10 relations";

/// Relates `s` fresh pairs of the seed's issues, then reads an issue related to ten others.
pub(crate) async fn relation_patterns(
    env: &Env,
    s: usize,
    rows: &mut BTreeMap<&'static str, Stat>,
) -> Result<()> {
    let me = env.seeded.users[0].as_str();
    let ids = &env.issue_ids;
    anyhow::ensure!(
        ids.len() > 2 * s + 11,
        "too few issues for the graph's patterns"
    );
    // Pairs past the hub and its ten: each PUT writes a new relation on both sides.
    let pairs = &ids[11..];
    let relate = measure(&env.meter, s, |i| {
        let path = format!(
            "/issues/{}/relations/relates_to/{}",
            pairs[2 * i],
            pairs[2 * i + 1]
        );
        async move { request(env, me, Method::PUT, path, None, 204).await }
    })
    .await?;
    rows.insert(RELATE, relate);
    let hub = &ids[0];
    for other in &ids[1..=10] {
        let path = format!("/issues/{hub}/relations/blocks/{other}");
        request(env, me, Method::PUT, path, None, 204).await?;
    }
    let get = measure(&env.meter, s, |_| {
        let path = format!("/issues/{hub}");
        async move { request(env, me, Method::GET, path, None, 200).await }
    })
    .await?;
    rows.insert(GET_10_RELATIONS, get);
    Ok(())
}
