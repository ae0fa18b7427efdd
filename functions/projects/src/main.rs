//! The `projects` Lambda: serves its routes of the shared router behind API Gateway.

use gridline::http::{Group, run_lambda};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    run_lambda(Group::Projects).await
}
