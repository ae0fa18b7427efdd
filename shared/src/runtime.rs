//! The Lambda and SQS protocol, at the edge of the library: the stream batch response the
//! event source reads, the SQS batch response, metrics printed as EMF lines (CloudWatch reads
//! stdout), the field-job queue's SQS client and the environment that names it. The
//! use-cases in [`crate::indexer`] stay plain functions of their inputs.

use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use crate::config::ConfigError;
use crate::indexer::field_job::{
    FieldJob, FieldJobs, JobError, JobQueue, Outcome, QueueError, Sending,
};
use crate::indexer::{BatchOutcome, Indexer, Metrics};
use crate::model::event::StreamEvent;
use crate::telemetry::{Emf, MetricUnit, now_ms};

/// The queue's URL, in the indexer's and the job function's environment.
pub const QUEUE_URL_VAR: &str = "FIELD_JOB_QUEUE_URL";

/// The `Instant` of a Lambda invocation's deadline (milliseconds since the epoch, as the
/// runtime's context gives it).
pub fn deadline_at(epoch_ms: u64) -> Instant {
    let left = epoch_ms.saturating_sub(now_ms().max(0) as u64);
    Instant::now() + Duration::from_millis(left)
}

/// The stream batch response: with `retry_from`, the event source retries from that sequence
/// number on; without, the batch is done.
pub fn stream_response(retry_from: Option<String>) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    if let Some(seq) = retry_from {
        response.batch_item_failures.push(failed_item(Some(seq)));
    }
    response
}

fn failed_item(seq: Option<String>) -> DynamoDbBatchItemFailure {
    let mut failure = DynamoDbBatchItemFailure::default();
    failure.item_identifier = seq;
    failure
}

/// Handles a batch as Lambda sends it (the event's JSON) and prints its metrics as an EMF
/// line. JSON that is no stream event fails the invocation, as a payload the runtime cannot
/// decode does.
pub async fn handle_stream_json(
    indexer: &Indexer,
    json: &str,
) -> Result<DynamoDbEventResponse, serde_json::Error> {
    let event = StreamEvent::from_json(json)?;
    let BatchOutcome {
        retry_from,
        metrics,
    } = indexer.handle(&event).await;
    println!("{}", metrics.emf());
    Ok(stream_response(retry_from))
}

/// [`Indexer::handle`] of an event built with `aws_lambda_events`' types (the local stream
/// poller's and the tests'), through the JSON Lambda would send for it. One it could not
/// decode (it cannot happen: the types are plain data) is retried whole.
pub async fn handle_stream_event(
    indexer: &Indexer,
    event: &Event,
) -> (DynamoDbEventResponse, Metrics) {
    // An encoding that fails (it cannot: the types are plain data) is empty: no event.
    let json = serde_json::to_string(event).unwrap_or_default();
    match StreamEvent::from_json(&json) {
        Ok(decoded) => {
            let BatchOutcome {
                retry_from,
                metrics,
            } = indexer.handle(&decoded).await;
            (stream_response(retry_from), metrics)
        }
        Err(e) => {
            tracing::error!(error = %e, "stream event not decodable");
            let first = event.records.first();
            let seq = first.and_then(|r| r.change.sequence_number.clone());
            let mut response = DynamoDbEventResponse::default();
            response.batch_item_failures.push(failed_item(seq));
            (response, Metrics::default())
        }
    }
}

/// The job function's figures, one EMF line per invocation.
const JOB_METRICS: Emf<'static> = Emf {
    dimensions: &[&["Function"]],
    metrics: &[
        ("JobIssues", MetricUnit::Count),
        ("JobWrites", MetricUnit::Count),
        ("JobsFinished", MetricUnit::Count),
        ("JobFailures", MetricUnit::Count),
    ],
};

/// The job queue in AWS.
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl SqsQueue {
    pub fn new(client: aws_sdk_sqs::Client, url: String) -> Self {
        Self { client, url }
    }

    /// The queue `FIELD_JOB_QUEUE_URL` names, on the Lambda's credentials.
    pub async fn from_env() -> Result<Self, ConfigError> {
        let url = std::env::var(QUEUE_URL_VAR)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or(ConfigError::Missing(QUEUE_URL_VAR))?;
        // Not the DynamoDB endpoint: the SDK honours AWS_ENDPOINT_URL_SQS itself.
        let sdk = crate::store::sdk_config(None).await;
        Ok(Self::new(aws_sdk_sqs::Client::new(&sdk), url))
    }
}

impl JobQueue for SqsQueue {
    fn send<'a>(&'a self, job: &'a FieldJob) -> Sending<'a> {
        Box::pin(async move {
            let body = serde_json::to_string(job).map_err(|e| QueueError(e.to_string()))?;
            self.client
                .send_message()
                .queue_url(&self.url)
                .message_body(body)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| QueueError(aws_sdk_sqs::Error::from(e).to_string()))
        })
    }
}

/// An SQS event (one message per invocation in the template; any number works): each
/// message run until `deadline`. A message that fails is reported, so SQS delivers it
/// again after its visibility timeout and, after the queue's receive count, moves it to
/// the dead-letter queue. Prints the invocation's metrics as an EMF line.
pub async fn handle_sqs(jobs: &FieldJobs, event: &SqsEvent, deadline: Instant) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    let mut metrics = Metrics::default();
    let mut finished = 0;
    for message in &event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let outcome = match serde_json::from_str::<FieldJob>(message.body.as_deref().unwrap_or(""))
        {
            Ok(job) => jobs.run(&job, deadline, &mut metrics).await,
            Err(e) => Err(JobError::Message(e.to_string())),
        };
        match outcome {
            Ok(Outcome::Finished) => finished += 1,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(message_id = %id, error = %e, "field job failed; SQS delivers it again");
                response.add_failure(id);
            }
        }
    }
    let members = serde_json::json!({
        "Function": "fieldjob",
        "JobIssues": metrics.units,
        "JobWrites": metrics.writes,
        "JobsFinished": finished,
        "JobFailures": response.batch_item_failures.len(),
    });
    println!("{}", JOB_METRICS.document(now_ms(), members));
    response
}
