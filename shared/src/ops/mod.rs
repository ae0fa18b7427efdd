//! Operations on a running stack, safe while traffic flows: drift found and repaired
//! ([`drift`]), a project's columns resharded ([`reshard`]), the tenant directories checked
//! and repaired ([`directory`]).

pub mod directory;
pub mod drift;
pub mod relations;
pub mod reshard;
pub mod tree;
