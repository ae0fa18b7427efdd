//! Order-preserving sort-key encodings: pure functions whose string order (DynamoDB compares
//! sort keys as UTF-8 bytes) equals the order of the values they encode.

pub mod number;
pub mod text;

/// Dates (`YYYY-MM-DD`) and UTC datetimes (`YYYY-MM-DDTHH:MM:SS.mmmZ`) are stored in fixed-width
/// forms whose string order is chronological, so they encode as themselves.
pub fn date(s: &str) -> String {
    s.to_string()
}

/// A select value sorts by its option's position, zero-padded.
pub fn select(position: usize) -> String {
    format!("{position:03}")
}

pub fn decode_select(s: &str) -> Option<usize> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn select_positions_sort_numerically(a in 0usize..1000, b in 0usize..1000) {
            prop_assert_eq!(select(a).cmp(&select(b)), a.cmp(&b));
            prop_assert_eq!(decode_select(&select(a)), Some(a));
        }

        #[test]
        fn utc_datetimes_sort_chronologically(a in 0i64..253_402_300_799_000, b in 0i64..253_402_300_799_000) {
            let fmt = |ms: i64| crate::domain::values::format_timestamp(
                time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap());
            prop_assert_eq!(date(&fmt(a)).cmp(&date(&fmt(b))), a.cmp(&b));
        }
    }
}
