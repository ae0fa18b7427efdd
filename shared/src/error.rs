//! The names errors were imported by before they found their layers: validation errors live
//! in [`crate::domain::validation`], their HTTP form in [`crate::http::error`].

pub use crate::domain::validation::{FieldError, ValidationError};
pub use crate::http::error::{ApiError, ApiResult, PROBLEM_JSON, problem_response};
