//! The `indexer` Lambda: the records table's stream in, the index table out.

use aws_lambda_events::event::dynamodb::Event;
use gridline::config::Config;
use gridline::index::indexer::Indexer;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    gridline::telemetry::init_lambda();
    let store = Config::from_env()?.store().await;
    let concurrency = Config::indexer_concurrency()?;
    store.warm_up().await;
    let indexer = Indexer::new(store).with_concurrency(concurrency);
    let indexer = &indexer;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        Ok::<_, Error>(indexer.handle_and_report(event.payload).await)
    }))
    .await
}
