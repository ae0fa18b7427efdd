//! The index's pure model: what an issue's index entries are and how the indexer tracks
//! them, with no AWS SDK types, so all of it is tested without an engine.
//!
//! - [`entries`](mod@entries): which entries an issue should have, given its project's fields.
//! - `basis`: what an issue's entries derive from.
//! - [`watermark`]: the indexer's compact record of an issue's entries ([`Basis`]: what they
//!   derive from; [`Watermark`]: what is stored, with any write in flight) and the step
//!   planner that turns it and a new basis into the writes of one step.
//! - [`summary`]: the list summary an entry carries, so a page needs no read of the issues.
//! - [`event`]: the stream event Lambda hands the indexer, decoded from its JSON.
//! - [`filter`]: conditions on any columns (the grid's `where`, a view's), held to issues.
//! - [`view`]: a saved view's definition, checked against its project's fields.
//! - [`history`]: an issue's history entry, the difference between two of its stream images.
//! - `record`: an issue as the indexer reads it, borrowed from a stream image.
//! - [`stream`]: what a stream record is about, from its keys.
//! - `codec`: an issue read from its item, through any view of its attributes.

pub(crate) mod basis;
pub(crate) mod codec;
pub mod entries;
pub mod event;
pub mod filter;
pub mod history;
pub(crate) mod record;
pub mod stream;
pub mod summary;
pub mod view;
pub mod watermark;

pub use entries::{
    ALL_STATES, BUILT_INS, Column, Entry, EntryList, EntryRef, Kind, column_scopes, encode_bound,
    encode_value, entries, entries_in_views,
};
pub use watermark::{Basis, Watermark};
