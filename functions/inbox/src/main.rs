//! The `inbox` Lambda: "my issues", "my teams' issues" and a team's issues, behind API Gateway.

use gridline::http::{Group, run_lambda};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    run_lambda(Group::Inbox).await
}
