//! Text sort keys: case-insensitive order (Unicode simple case folding) with the original text
//! as tie-break, truncated on a character boundary to fit DynamoDB's 1,024-byte sort keys.

/// Separates the parts of a text sort key. It sorts below every character a value may contain
/// (values never contain C0 controls), so `"ab" SEP …` sorts before `"ab!" SEP …`; `#` would not.
pub const SEP: char = '\u{1}';

/// Longest text encoding, in bytes, so that a sort key with a type prefix, separator and
/// zero-padded issue number stays within DynamoDB's 1,024-byte limit.
pub const MAX_BYTES: usize = 1000;

/// Unicode simple case folding (one character to one character).
pub fn fold(s: &str) -> String {
    s.chars()
        .map(|c| {
            unicode_case_mapping::case_folded(c)
                .and_then(|cp| char::from_u32(cp.get()))
                .unwrap_or(c)
        })
        .collect()
}

/// `fold(s) SEP s`, cut to [`MAX_BYTES`] on a character boundary. Values that agree on their
/// first ~500 bytes may then tie, and ties break by issue number.
pub fn encode(s: &str) -> String {
    truncate(format!("{}{SEP}{s}", fold(s)), MAX_BYTES)
}

/// The original text, when the encoding was not truncated.
pub fn decode(e: &str) -> Option<&str> {
    e.split_once(SEP).map(|(_, original)| original)
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn case_insensitive_with_original_as_tie_break() {
        let mut names = vec![
            "beta", "Alpha", "alpha", "ALPHA!", "alpha#2", "Beta", "alpha 2",
        ];
        names.sort_by_key(|n| encode(n));
        // A value sorts before its extensions ("alpha" < "alpha 2" < "alpha!" < "alpha#2"): SEP is lowest.
        assert_eq!(
            names,
            vec![
                "Alpha", "alpha", "alpha 2", "ALPHA!", "alpha#2", "Beta", "beta"
            ]
        );
    }

    #[test]
    fn folding_is_unicode_simple_case_folding() {
        assert_eq!(fold("ΣΑΣ"), fold("σας"));
        assert_eq!(fold("ẞ"), "ß");
        assert_eq!(fold("Ǆ"), "ǆ");
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let e = encode(&"é".repeat(1024));
        assert!(e.len() <= MAX_BYTES);
        assert!(e.is_char_boundary(e.len()));
    }

    proptest! {
        #[test]
        fn order_follows_folded_then_original(a in "[ -~éÉßΣσς]{0,12}", b in "[ -~éÉßΣσς]{0,12}") {
            let expected = (fold(&a), a.clone()).cmp(&(fold(&b), b.clone()));
            prop_assert_eq!(encode(&a).cmp(&encode(&b)), expected);
        }

        #[test]
        fn short_values_round_trip(a in "\\PC{0,100}") {
            let a: String = a.chars().filter(|c| *c >= ' ').collect();
            let e = encode(&a);
            prop_assert_eq!(decode(&e), Some(a.as_str()));
        }
    }
}
