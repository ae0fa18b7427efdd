//! The `issues` Lambda: serves its routes of the shared router behind API Gateway.

use gridline::http::{Function, run_lambda};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    run_lambda(Function::Issues).await
}
