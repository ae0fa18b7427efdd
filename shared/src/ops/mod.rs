//! Operations on a running stack, safe while traffic flows: drift found and repaired
//! ([`drift`]), a project's columns resharded ([`reshard`]).

pub mod drift;
pub mod reshard;
