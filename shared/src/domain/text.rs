//! Length and character rules shared by every piece of user text.

/// Longest value of a `text` field, in Unicode code points.
pub const MAX_TEXT_CHARS: usize = 1024;
/// Longest issue title, in code points.
pub const MAX_TITLE_CHARS: usize = 256;
/// Longest issue description, in code points.
pub const MAX_DESCRIPTION_CHARS: usize = 100_000;

/// Checks `s` has `min..=max` code points and no C0 control character.
pub fn check_text(s: &str, min: usize, max: usize) -> Result<(), String> {
    let len = s.chars().count();
    if len < min || len > max {
        return Err(format!(
            "must be {min} to {max} characters long (got {len})"
        ));
    }
    if s.chars().any(|c| c < '\u{20}') {
        return Err("must not contain control characters (U+0000 to U+001F)".into());
    }
    Ok(())
}

/// Like [`check_text`], but line breaks and tabs are welcome (descriptions are prose).
pub fn check_prose(s: &str, max: usize) -> Result<(), String> {
    let len = s.chars().count();
    if len > max {
        return Err(format!("must be at most {max} characters long (got {len})"));
    }
    if s.chars()
        .any(|c| c < '\u{20}' && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err("must not contain control characters other than tab and line breaks".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_code_points_not_bytes() {
        assert!(check_text(&"😀".repeat(256), 1, 256).is_ok());
        assert!(check_text(&"😀".repeat(257), 1, 256).is_err());
    }

    #[test]
    fn prose_allows_newlines_but_not_other_controls() {
        assert!(check_prose("a\nb\tc\r\n", 10).is_ok());
        assert!(check_prose("a\u{0}b", 10).is_err());
    }
}
