//! The `indexer` Lambda: the records table's stream in, the index table out.

use gridline::config::Config;
use gridline::indexer::Indexer;
use gridline::runtime::{SqsQueue, handle_stream_json};
use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The indexer's core allocates and frees many small strings and maps per stream record;
/// glibc's allocator is slow there and mimalloc is not (`gridline-bench --core` measures it).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    gridline::telemetry::init_lambda();
    let store = Config::from_env()?.store().await;
    let concurrency = Config::indexer_concurrency()?;
    store.warm_up().await;
    let jobs = SqsQueue::from_env().await?;
    let indexer = Indexer::new(store)
        .with_concurrency(concurrency)
        .with_jobs(std::sync::Arc::new(jobs));
    let indexer = &indexer;
    // The event's JSON is kept as text and decoded by the indexer, borrowing from it
    // (`gridline::model::event`): no image is copied into an owned attribute map.
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<Box<serde_json::value::RawValue>>| async move {
            Ok::<_, Error>(handle_stream_json(indexer, event.payload.get()).await?)
        },
    ))
    .await
}

#[cfg(test)]
mod tests {
    use gridline::model::event::StreamEvent;
    use serde_json::value::RawValue;

    /// The payload reaches the handler as the runtime decodes it (through serde_path_to_error
    /// into the handler's type): every sample stream event arrives whole as text and decodes.
    #[test]
    fn the_runtime_hands_over_the_sample_events_as_text() {
        for name in [
            "indexer-insert",
            "indexer-modify",
            "indexer-remove",
            "indexer-batch-poison",
        ] {
            let path = format!("{}/../../events/{name}.json", env!("CARGO_MANIFEST_DIR"));
            let bytes = std::fs::read(&path).unwrap();
            let de = &mut serde_json::Deserializer::from_slice(&bytes);
            let raw: Box<RawValue> = serde_path_to_error::deserialize(de).unwrap();
            let event = StreamEvent::from_json(raw.get()).unwrap();
            assert!(!event.records.is_empty(), "{name}");
        }
    }
}
