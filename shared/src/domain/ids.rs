//! Server-chosen ids (ULIDs) and the user-id rule.

use ulid::Ulid;

/// A new id: a ULID, so ids sort by creation time.
pub fn new_id() -> String {
    Ulid::new().to_string()
}

/// Whether `s` could be an id this server issued. Anything else cannot exist, so a path with
/// such an id is answered `404` without a database call.
pub fn is_server_id(s: &str) -> bool {
    Ulid::from_string(s).is_ok() && s.len() == 26
}

/// User ids are the token's `sub`: 1–128 printable ASCII characters other than `#`, which keeps
/// them safe inside keys.
pub fn is_user_id(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
}

/// Tenant ids follow the same rule as user ids.
pub fn is_tenant_id(s: &str) -> bool {
    is_user_id(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_recognised() {
        assert!(is_server_id(&new_id()));
        assert!(!is_server_id("nope"));
        assert!(!is_server_id("../etc"));
    }

    #[test]
    fn user_ids_exclude_key_separators() {
        assert!(is_user_id("7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6"));
        assert!(!is_user_id("a#b"));
        assert!(!is_user_id(""));
        assert!(!is_user_id("a b"));
    }
}
