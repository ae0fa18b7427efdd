//! The attribute index, in one place: what an issue's entries are, how the stream keeps them,
//! how they are stored, and how drift between them and the records is found and repaired.
//!
//! - [`entries`](mod@entries): pure — which entries an issue should have, given its project's fields.
//! - [`indexer`]: the stream consumer; writes the difference from the watermark.
//! - [`record`]: an issue as the indexer reads it, borrowed from the stream record's image.
//! - [`field_job`]: a field added or deleted, off the stream: the project re-indexed a page at
//!   a time by a queue-driven job with a checkpoint.
//! - [`reshard`]: a project's columns split into more (or fewer) shards while its grid stays
//!   exact: the new layout built beside the old one, reads switched, the old one retired.
//! - [`watermark`]: pure — the indexer's compact record of an issue's entries (what they derive
//!   from, what a write in flight may have changed), and how it is stored.
//! - [`table`]: index-table I/O (entries, watermarks, parked markers, column and inbox pages).
//! - [`drift`]: compares the index with a recomputation from the records; repairs it.
//! - [`scan`]: the whole-table scans and exact-version writes `drift` needs.
//! - [`stream`]: what a stream record is about, by its keys (the indexer's and `gridctl
//!   replay`'s one classifier).
//!
//! Keys of the index table are built in `crate::keys::index`; records-table reads the indexer
//! makes (issues of a project, one issue's summary) are in `crate::store`.

pub mod drift;
pub mod entries;
pub mod event;
pub mod field_job;
pub mod indexer;
pub mod record;
pub mod reshard;
pub mod scan;
pub mod stream;
pub mod summary;
pub mod table;
pub mod watermark;

pub use entries::{
    ALL_STATES, BUILT_INS, Column, Entry, EntryList, EntryRef, Kind, column_scopes, encode_bound,
    encode_value, entries,
};
pub use scan::{Table, entry_from_item};
pub use table::{
    ColumnQuery, InboxCopy, Parked, TOMBSTONE_TTL_SECS, intent_head_item, parked_from_item,
};
pub use watermark::{Basis, Watermark};
