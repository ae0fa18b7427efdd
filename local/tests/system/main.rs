//! The system tests: one binary (one link, not twenty) for the behaviour of the shared crate's
//! router and indexer, tested through the local stack (`gridline-local`: the real router, the
//! indexer fed from the engine's real stream, the local IAM guard and Lambda/API Gateway limits)
//! against the embedded engine — or against DynamoDB Local when `GRIDLINE_TEST_DYNAMODB_ENDPOINT`
//! is set (`make test-ddblocal`). Each module is one concern; `support` holds what they share.

mod bad_input;
mod bounds;
mod checkpoint;
mod comments;
mod concurrency;
mod contract;
mod cors;
mod editing;
mod engine;
mod events;
mod fair_use;
mod faults;
mod field_jobs;
mod filters;
mod gateway;
mod grid;
mod guard;
mod history;
mod hot_columns;
mod idempotency;
mod inbox;
mod indexer_batches;
mod indexer_limits;
mod issues;
mod limits;
mod observability;
mod projects;
mod relations;
mod responses;
mod secret;
mod sub_issues;
mod support;
mod tenancy;
mod text;
mod views;
mod watermarks;
mod workspaces;
