//! Gridline: a multi-tenant issue-tracker backend for AWS Lambda and DynamoDB.
//!
//! Handlers in `functions/*` only build state and run [`http::router`], the indexer
//! ([`runtime::handle_stream_json`]) or the field job ([`runtime::handle_sqs`]); everything
//! else lives here, in layers. A module imports only the layers below it (and, within its own
//! layer, only what `shared/tests/layout.rs` allows; that test keeps this rule true):
//!
//! 1. Foundations: [`domain`] (types that validate themselves: typed ids, values, exact
//!    decimals), [`encoding`] (order-preserving sort-key encodings), [`keys`] (every key
//!    string of both tables), [`cursor`] (signed page cursors), [`telemetry`] (logs, EMF).
//! 2. [`model`]: the index's pure model, no AWS SDK types: entries, the basis they derive
//!    from, the watermark and its step planner, list summaries, stream events and records,
//!    the issue codec.
//! 3. [`store`]: DynamoDB: the records table ([`store::records`]) and the index table
//!    ([`store::index`]), the one Query builder and backoff.
//! 4. Use-cases and read models: [`indexer`] (the stream: batches, one issue applied,
//!    re-index, field jobs), [`ops`] (drift, reshard; they may use the indexer and read
//!    models), `read` (the grid and the inboxes, each owning its whole query).
//! 5. The edge: [`http`] (routes, extractors, handlers: parse, call, render), [`auth`],
//!    [`authorizer`] (the API's Lambda authorizer), [`config`], [`runtime`] (the Lambda and
//!    SQS protocol).

pub mod auth;
pub mod authorizer;
pub mod config;
pub mod cursor;
pub mod domain;
pub mod encoding;
pub mod http;
pub mod indexer;
pub mod keys;
pub mod model;
pub mod ops;
pub(crate) mod read;
pub mod runtime;
pub mod store;
pub mod telemetry;
pub mod token_trigger;
pub mod usage_keys;
