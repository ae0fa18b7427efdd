//! The `grid` Lambda: a project's issues sorted by any column, behind API Gateway.

use gridline::http::{Function, run_lambda};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    run_lambda(Function::Grid).await
}
