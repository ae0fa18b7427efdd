//! Gridline: a multi-tenant issue-tracker backend for AWS Lambda and DynamoDB.
//!
//! Handlers in `functions/*` only build state and run [`http::router`] (or the
//! [`index::indexer::Indexer`]); everything else lives here. Each layer calls only the layers
//! below it:
//!
//! - [`http`]: the edge. The route table, extractors (JSON bodies, the [`auth::Caller`], typed
//!   path ids, paging with bound cursors), handlers (parse → call → respond) and the
//!   problem+json mapping of every error.
//! - [`read`]: the read models, pure over page fetches: the grid's phase paging and the
//!   inboxes' k-way merge.
//! - [`index`]: the attribute index in one home: which entries an issue has, the stream
//!   classifier and consumer, index-table I/O, drift found and repaired.
//! - [`store`]: the DynamoDB adapter and the records table's items.
//! - [`keys`]: every key string of both tables, built and parsed in one place.
//! - [`encoding`]: order-preserving sort-key encodings.
//! - [`domain`]: types that validate themselves (typed ids, values, exact decimals) and
//!   their own validation errors.
//! - [`auth`], [`cursor`], [`config`], [`telemetry`]: the caller from verified claims,
//!   signed page cursors, the environment, logs and metrics.

pub mod auth;
pub mod config;
pub mod cursor;
pub mod domain;
pub mod encoding;
pub mod http;
pub mod indexer;
pub mod keys;
pub mod model;
pub mod ops;
pub mod read;
pub mod runtime;
pub mod store;
pub mod telemetry;
