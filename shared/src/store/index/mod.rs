//! The index table, which only the indexer writes: column entries, participation copies,
//! watermarks, issues' history, parked units, and the scans the operator's tools make.

pub mod history;
pub mod scan;
pub mod table;
pub mod view_counts;
pub mod watermark_item;

pub use scan::{Table, entry_from_item};
pub use table::{
    ColumnQuery, InboxCopy, Parked, TOMBSTONE_TTL_SECS, intent_head_item, parked_from_item,
};
