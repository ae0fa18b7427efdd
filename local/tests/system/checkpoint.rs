//! The local stream poller keeps its place beside the data file, as an event source mapping
//! keeps its own: a restart of `make dev` resumes after the last record it finished with, and a
//! checkpoint the stream cannot honour falls back to TRIM_HORIZON (re-delivery is safe).

use std::path::{Path, PathBuf};

use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use gridline::domain::ids::ProjectId;
use gridline_local::stream::checkpoint_path;
use gridline_local::testing::TestApi;
use serde_json::json;

use crate::support::{Buffer, acme};

/// A fresh directory for one test's data file.
fn data_file(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "gridline-checkpoint-{test}-{}-{}",
        std::process::id(),
        ulid::Ulid::new()
    ));
    dir.join("gridline.db")
}

/// The records table's stream: its ARN, its shard ids, and the sequence numbers it holds.
async fn stream(api: &TestApi) -> (String, Vec<String>, Vec<String>) {
    let streams = gridline_local::stream::streams_client(&api.stack.endpoint).await;
    let arn = api
        .stack
        .records_stream_arn()
        .expect("the records table has a stream")
        .to_string();
    let described = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap();
    let shards: Vec<String> = described
        .stream_description
        .unwrap()
        .shards
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| s.shard_id)
        .collect();
    let mut sequence = Vec::new();
    for shard in &shards {
        let mut iterator = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator;
        while let Some(it) = iterator {
            let out = streams
                .get_records()
                .shard_iterator(it)
                .send()
                .await
                .unwrap();
            let records = out.records.unwrap_or_default();
            if records.is_empty() {
                break;
            }
            sequence.extend(
                records
                    .iter()
                    .filter_map(|r| r.dynamodb.as_ref()?.sequence_number.clone()),
            );
            iterator = out.next_shard_iterator;
        }
    }
    (arn, shards, sequence)
}

/// Polls until a pass delivers nothing: how many records were delivered in all.
async fn drain(api: &TestApi) -> usize {
    let mut delivered = 0;
    for _ in 0..1000 {
        match api.poll_once().await {
            0 => return delivered,
            n => delivered += n,
        }
    }
    panic!("the stream did not drain");
}

fn write_checkpoint(path: &Path, arn: &str, shard: &str, seq: &str) {
    let file = json!({ "streams": { arn: { shard: seq } } });
    std::fs::write(checkpoint_path(path), file.to_string()).unwrap();
}

#[tokio::test]
async fn a_restart_on_the_data_file_resumes_after_the_last_record_finished_with() {
    let path = data_file("resume");
    let api = TestApi::on_file(&path).await;
    let project = api.project("P").await;
    api.issue(&project, json!({ "title": "before the restart" }))
        .await;
    let first = drain(&api).await;
    assert!(first > 0);
    let (arn, shards, _) = stream(&api).await;
    api.stop().await;
    // The engine closed its database: SQLite removes the write-ahead log with the last
    // connection.
    let mut wal = path.clone().into_os_string();
    wal.push("-wal");
    assert!(
        !Path::new(&wal).exists(),
        "the engine still holds the data file"
    );
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint_path(&path)).unwrap()).unwrap();
    assert!(saved["streams"][&arn].is_object(), "{saved}");

    let api = TestApi::on_file(&path).await;
    // The engine keeps the stream's ARN and shard ids on its file, so the checkpoint applies.
    let (arn_again, shards_again, before) = stream(&api).await;
    assert_eq!((&arn_again, &shards_again), (&arn, &shards));
    assert_eq!(
        api.poll_once().await,
        0,
        "a restart delivers nothing already done"
    );

    api.issue(&project, json!({ "title": "after the restart" }))
        .await;
    let second = drain(&api).await;
    let (_, _, after) = stream(&api).await;
    assert_eq!(first, before.len());
    assert_eq!(
        second,
        after.len() - before.len(),
        "each new record exactly once"
    );
    api.assert_index_matches_records(&acme(), &[ProjectId::parse(&project).unwrap()])
        .await;
    let page = api.get(&format!("/projects/{project}/issues")).await;
    assert_eq!(
        page.body["items"].as_array().map(Vec::len),
        Some(2),
        "{:?}",
        page.body
    );
    api.stop().await;
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn a_checkpoint_the_stream_cannot_honour_falls_back_to_the_horizon() {
    let path = data_file("fallback");
    let api = TestApi::on_file(&path).await;
    let project = api.project("P").await;
    for i in 0..3 {
        api.issue(&project, json!({ "title": format!("issue {i}") }))
            .await;
    }
    let (arn, shards, records) = stream(&api).await;
    let last = records.last().unwrap().clone();
    api.stop().await;

    // Past the stream's last record (dynoxide would hand out an iterator for it, and skip every
    // record until the stream caught up); older than its first (trimmed); the last record's
    // number padded past 40 digits (in the shard's range, but the engine refuses the
    // iterator); and the right number for an earlier stream of the table (a recreated table's).
    let earlier_stream = format!(
        "{}/stream/1.000000000",
        arn.split("/stream/").next().unwrap()
    );
    let padded = format!("{last:0>41}");
    let cases = [
        (
            arn.as_str(),
            "999999999999999999999999",
            "past the shard's last record",
        ),
        (
            arn.as_str(),
            "100000000000000000001",
            "older than the shard's oldest",
        ),
        (
            arn.as_str(),
            padded.as_str(),
            "the stream refused to resume",
        ),
        (
            earlier_stream.as_str(),
            last.as_str(),
            "the table's earlier stream",
        ),
    ];
    for (stream_arn, seq, warning) in cases {
        write_checkpoint(&path, stream_arn, &shards[0], seq);
        let log = Buffer::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let api = TestApi::on_file(&path).await;
        let delivered = {
            // This test's thread only (a current-thread runtime): the poller runs on it.
            let _guard = tracing::subscriber::set_default(subscriber);
            drain(&api).await
        };
        assert_eq!(delivered, records.len(), "checkpoint {seq} of {stream_arn}");
        assert!(log.text().contains(warning), "{}", log.text());
        api.assert_index_matches_records(&acme(), &[ProjectId::parse(&project).unwrap()])
            .await;
        api.stop().await;
        // The file now names where this run stopped, on the table's current stream only.
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(checkpoint_path(&path)).unwrap()).unwrap();
        assert_eq!(saved, json!({ "streams": { &arn: { &shards[0]: &last } } }));
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
