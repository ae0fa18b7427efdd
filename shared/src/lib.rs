//! Gridline: a multi-tenant issue-tracker backend for AWS Lambda and DynamoDB.
//!
//! Handlers in `functions/*` only build state and run [`http::router`]; everything else lives
//! here, in small modules with one job each.

pub mod auth;
pub mod config;
pub mod cursor;
pub mod domain;
pub mod encoding;
pub mod error;
pub mod http;
pub mod index;
pub mod keys;
pub mod read;
pub mod store;
pub mod telemetry;
