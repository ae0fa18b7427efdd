//! The `people` Lambda: profiles, teams and memberships, behind API Gateway.

use gridline::http::{Function, run_lambda};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    run_lambda(Function::People).await
}
