//! The records table: projects and their fields, issues, people and teams, and their items.

pub mod comments;
pub mod directory;
pub mod field_edit;
pub mod idempotency;
pub(crate) mod issues;
pub(crate) mod items;
pub(crate) mod patch;
pub(crate) mod people;
pub(crate) mod project_delete;
pub(crate) mod projects;
pub mod relations;
pub(crate) mod renames;
pub mod team_delete;
pub mod tree;
pub mod views;
pub mod workspaces;
