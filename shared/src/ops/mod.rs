//! Operations on a running stack, safe while traffic flows: drift found and repaired
//! ([`drift`]), a project's columns resharded ([`reshard`]), the tenant directories checked
//! and repaired ([`directory`]); relations, the issue tree and comments checked against their
//! issues ([`relations`], [`tree`], [`comments`]); issues' history ([`history`]); and saved
//! views' counts ([`view_counts`]).

pub mod comments;
pub mod directory;
pub mod drift;
pub mod history;
pub mod relations;
pub mod reshard;
pub mod tree;
pub mod view_counts;
