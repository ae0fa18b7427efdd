//! What validation refuses: the invalid members of a request, each with a message. The HTTP
//! layer renders it as a `400` problem document; nothing here knows about status codes.

use serde::Serialize;

/// One invalid member of a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A request that failed validation: every invalid member, in the order found. Its message
/// names the member when there is one, or counts them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", detail(.errors))]
pub struct ValidationError {
    pub errors: Vec<FieldError>,
}

impl ValidationError {
    /// One invalid member.
    pub fn one(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            errors: vec![FieldError::new(field, message)],
        }
    }

    /// `Ok` when nothing was found invalid.
    pub fn check(errors: Vec<FieldError>) -> Result<(), Self> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Self { errors })
        }
    }
}

fn detail(errors: &[FieldError]) -> String {
    match errors {
        [one] => format!("{}: {}", one.field, one.message),
        _ => format!("{} members of the request are invalid", errors.len()),
    }
}

/// An issue whose issue item would not fit in one DynamoDB item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the issue's title, field values and participants would take more than {} bytes, DynamoDB's item limit",
    super::MAX_ITEM_BYTES
)]
pub struct IssueTooLarge;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_error_names_its_member_and_more_are_counted() {
        assert_eq!(
            ValidationError::one("name", "is empty").to_string(),
            "name: is empty"
        );
        let two = ValidationError {
            errors: vec![FieldError::new("a", "x"), FieldError::new("b", "y")],
        };
        assert_eq!(two.to_string(), "2 members of the request are invalid");
        assert!(ValidationError::check(Vec::new()).is_ok());
    }
}
