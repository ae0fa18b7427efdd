//! What people say about an issue and what happened to it: posting a comment, reading a page
//! of 50 comments with their authors' names, and a page of 50 history entries.

use std::collections::BTreeMap;

use anyhow::Result;
use http::Method;

use crate::{Env, Stat, measure, request};

/// The rows these patterns add.
pub(crate) const COMMENT_CREATE: &str = "post a comment";
pub(crate) const COMMENTS_PAGE: &str = "comments page of 50";
pub(crate) const HISTORY_PAGE: &str = "history page of 50";

/// A comment of about 300 characters.
fn body(i: usize) -> serde_json::Value {
    let text = format!("Comment {i}: ") + &"seen again on the checkout page; ".repeat(9);
    serde_json::json!({ "body": text })
}

/// Posts `s` comments on the seed's last issue (measured), more by several authors until it
/// has 60, then reads the first page of 50.
pub(crate) async fn comment_patterns(
    env: &Env,
    s: usize,
    rows: &mut BTreeMap<&'static str, Stat>,
) -> Result<()> {
    let users = &env.seeded.users;
    anyhow::ensure!(!users.is_empty(), "the seed has no users");
    let issue = env
        .issue_ids
        .last()
        .ok_or_else(|| anyhow::anyhow!("the seed has no issues"))?;
    let path = format!("/issues/{issue}/comments");
    let me = users[0].as_str();
    let post = measure(&env.meter, s, |i| {
        let path = path.clone();
        async move { request(env, me, Method::POST, path, Some(body(i)), 201).await }
    })
    .await?;
    rows.insert(COMMENT_CREATE, post);
    for i in s..60 {
        let author = users[i % users.len().min(5)].as_str();
        request(env, author, Method::POST, path.clone(), Some(body(i)), 201).await?;
    }
    let page = measure(&env.meter, s, |_| {
        let path = format!("{path}?limit=50");
        async move { request(env, me, Method::GET, path, None, 200).await }
    })
    .await?;
    rows.insert(COMMENTS_PAGE, page);
    Ok(())
}

/// Gives the seed's first issue 60 versions (a title change each; the indexer makes their
/// entries from the stream), then reads the first page of 50 entries.
pub(crate) async fn history_patterns(
    env: &Env,
    s: usize,
    rows: &mut BTreeMap<&'static str, Stat>,
) -> Result<()> {
    let users = &env.seeded.users;
    anyhow::ensure!(!users.is_empty(), "the seed has no users");
    let issue = env
        .issue_ids
        .first()
        .ok_or_else(|| anyhow::anyhow!("the seed has no issues"))?;
    let me = users[0].as_str();
    let path = format!("/issues/{issue}");
    for i in 0..60 {
        let title = serde_json::json!({ "title": format!("Checkout fails, take {i}") });
        request(env, me, Method::PATCH, path.clone(), Some(title), 200).await?;
    }
    crate::drain(&mut *env.poller.lock().await).await?;
    let page = measure(&env.meter, s, |_| {
        let path = format!("{path}/history?limit=50");
        async move { request(env, me, Method::GET, path, None, 200).await }
    })
    .await?;
    rows.insert(HISTORY_PAGE, page);
    Ok(())
}
