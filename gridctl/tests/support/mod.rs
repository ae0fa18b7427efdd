//! gridctl's commands in tests run with the permissions `gridctl/iam-policy.json` documents
//! for them: a call outside them fails here as it would in AWS.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use gridline::indexer::Indexer;
use gridline::store::Store;
use gridline_local::Stack;
use gridline_local::guard::Policy;
use gridline_local::guard::iam::{ACCOUNT, REGION, table_arn};

pub const POLICY: &str = include_str!("../../iam-policy.json");

/// The statements of `command` (`Verify`, `Repair`, `Replay`, `Seed`: the prefix of its statements' `Sid`s).
pub fn policy(stack: &Stack, command: &str) -> Arc<Policy> {
    let subs: BTreeMap<String, String> = [
        ("RecordsTableArn", table_arn(&stack.tables.records)),
        ("IndexTableArn", table_arn(&stack.tables.index)),
        (
            "RecordsStreamArn",
            stack
                .records_stream_arn()
                .unwrap_or("no stream")
                .to_string(),
        ),
        (
            "IndexerFailureQueueArn",
            format!("arn:aws:sqs:{REGION}:{ACCOUNT}:gridline-IndexerFailureQueue"),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Arc::new(
        Policy::from_document(&format!("gridctl-{command}"), POLICY, Some(command), &subs)
            .expect("gridctl/iam-policy.json has the command's statements"),
    )
}

/// A store as `gridctl <command>` has it.
pub fn store(stack: &Stack, command: &str) -> Store {
    Store::new(
        stack.guarded(policy(stack, command)),
        &stack.tables.records,
        &stack.tables.index,
    )
}

/// The indexer `gridctl replay` re-drives with.
pub fn replay_indexer(stack: &Stack) -> Indexer {
    Indexer::new(store(stack, "Replay"))
}

/// The streams client `gridctl replay` reads the failed ranges with.
pub async fn replay_streams(stack: &Stack) -> aws_sdk_dynamodbstreams::Client {
    stack.guarded_streams(policy(stack, "Replay")).await
}

/// `gridctl verify` with its statements, in two segments.
pub async fn verify(api: &gridline_local::testing::TestApi) -> gridctl::ops::VerifyReport {
    gridctl::ops::verify(
        &store(&api.stack, "Verify"),
        2,
        &indicatif::ProgressBar::hidden(),
    )
    .await
    .expect("verify runs")
}

/// A progress bar for `repair` that draws nothing.
pub fn hidden(_: &str, _: u64) -> indicatif::ProgressBar {
    indicatif::ProgressBar::hidden()
}
