//! The `inbox` Lambda: "my issues", "my teams' issues" and a team's issues, behind API Gateway.

use gridline::http::{Function, run_lambda};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    run_lambda(Function::Inbox).await
}
