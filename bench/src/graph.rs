//! The issue graph's access patterns: relating two issues, and reading an issue with ten
//! relations (the other issues' titles and states read with it).

use std::collections::BTreeMap;

use anyhow::Result;
use http::Method;

use crate::{Env, Stat, measure, request};

/// The rows these patterns add.
pub(crate) const RELATE: &str = "relate two issues";
pub(crate) const GET_10_RELATIONS: &str = "get issue with 10 relations";
pub(crate) const CHILDREN_PAGE: &str = "children page of 50 (a parent of 200)";
pub(crate) const SET_PARENT: &str = "set parent at depth 3";

/// Children of the parent whose page is read.
const CHILDREN: usize = 200;

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

/// Gives one issue 200 children (depth 2 under a top-level one), reads the first page of 50,
/// then measures setting the parent of fresh issues to one of those children (depth 3).
pub(crate) async fn tree_patterns(
    env: &Env,
    s: usize,
    rows: &mut BTreeMap<&'static str, Stat>,
) -> Result<()> {
    let me = env.seeded.users[0].as_str();
    // Past the issues the relation patterns use.
    let ids = env.issue_ids.get(2 * s + 11..).unwrap_or_default();
    anyhow::ensure!(
        ids.len() > CHILDREN + s + 2,
        "too few issues for the tree's patterns"
    );
    let (root, parent) = (&ids[0], &ids[1]);
    let body = |p: &gridline::domain::ids::IssueId| serde_json::json!({"parent_id": p});
    request(
        env,
        me,
        Method::PATCH,
        format!("/issues/{parent}"),
        Some(body(root)),
        200,
    )
    .await?;
    for child in &ids[2..2 + CHILDREN] {
        request(
            env,
            me,
            Method::PATCH,
            format!("/issues/{child}"),
            Some(body(parent)),
            200,
        )
        .await?;
    }
    crate::settle::settle(env).await?;
    let page = measure(&env.meter, s, |_| {
        let path = format!("/issues/{parent}/children?limit=50");
        async move { request(env, me, Method::GET, path, None, 200).await }
    })
    .await?;
    rows.insert(CHILDREN_PAGE, page);
    let fresh = &ids[2 + CHILDREN..];
    let under = &ids[2];
    let set = measure(&env.meter, s, |i| {
        let path = format!("/issues/{}", fresh[i]);
        async move { request(env, me, Method::PATCH, path, Some(body(under)), 200).await }
    })
    .await?;
    rows.insert(SET_PARENT, set);
    Ok(())
}
