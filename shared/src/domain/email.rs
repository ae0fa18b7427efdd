//! Email addresses, as invitations name them and tokens carry them.

/// Longest address SMTP allows (RFC 5321's path limit less its angle brackets).
pub const MAX_EMAIL_LEN: usize = 254;

/// The form two addresses are compared in: Cognito treats emails case-insensitively, and so
/// does an invitation.
pub fn normalise(email: &str) -> String {
    email.trim().to_lowercase()
}

/// Whether `email` looks like an address: `local@domain`, no spaces or control characters,
/// at most [`MAX_EMAIL_LEN`] bytes. Deliverability is Cognito's check, not ours.
pub fn is_email(email: &str) -> bool {
    let Some((local, domain)) = email.rsplit_once('@') else {
        return false;
    };
    email.len() <= MAX_EMAIL_LEN
        && !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !email
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '#')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn addresses() {
        assert!(is_email("ana@example.com"));
        assert!(!is_email("ana@example"));
        assert!(!is_email("@example.com"));
        assert!(!is_email("ana example@x.org"));
        assert!(!is_email("a#b@x.org"));
        assert_eq!(normalise(" Ana@Example.COM "), "ana@example.com");
    }

    proptest! {
        /// Normalising is idempotent, and an address stays one.
        #[test]
        fn normalising_twice_changes_nothing(s in "[A-Za-z0-9.]{1,20}@[A-Za-z]{1,10}\\.[A-Za-z]{2,5}") {
            let once = normalise(&s);
            prop_assert_eq!(normalise(&once), once.clone());
            prop_assert!(is_email(&once));
        }
    }
}
