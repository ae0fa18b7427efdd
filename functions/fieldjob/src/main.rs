//! The `fieldjob` Lambda: a field's column built, or a deleted field's values removed, a page
//! of issues at a time, off the stream (`gridline::indexer::field_job`).

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use gridline::config::Config;
use gridline::indexer::field_job::FieldJobs;
use gridline::runtime::{SqsQueue, deadline_at, handle_sqs};
use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The indexer's core (this function re-indexes with it) allocates and frees many small
/// strings and maps per issue, where glibc's allocator is slow and mimalloc is not
/// (`gridline-bench --core` measures it).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    gridline::telemetry::init_lambda();
    let store = Config::from_env()?.store().await;
    let concurrency = Config::indexer_concurrency()?;
    let queue = SqsQueue::from_env().await?;
    store.warm_up().await;
    let jobs = FieldJobs::new(store, Arc::new(queue), concurrency);
    let jobs = &jobs;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // The invocation's own deadline: a run stops starting pages well before it.
        let deadline = deadline_at(event.context.deadline);
        Ok::<_, Error>(handle_sqs(jobs, &event.payload, deadline).await)
    }))
    .await
}
