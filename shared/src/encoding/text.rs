//! Text sort keys: case-insensitive order with the original text as tie-break.

/// Separates the parts of a text sort key. It sorts below every character a value may contain
/// (values never contain C0 controls), so `"ab" SEP …` sorts before `"ab!" SEP …`; `#` would not.
pub const SEP: char = '\u{1}';

/// Simple case folding (one character to one character), so lengths and boundaries are kept.
pub fn fold(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(l), None) => l,
                _ => c,
            }
        })
        .map(|c| if c == 'ς' { 'σ' } else { c })
        .collect()
}

/// `fold(s) SEP s`: sorts case-insensitively, ties by the original text.
pub fn encode(s: &str) -> String {
    format!("{}{SEP}{s}", fold(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn case_insensitive_with_original_as_tie_break() {
        let mut names = vec!["beta", "Alpha", "alpha", "ALPHA!", "alpha#2", "Beta"];
        names.sort_by_key(|n| encode(n));
        // A value sorts before its extensions ("alpha" < "alpha!" < "alpha#2"): SEP is lowest.
        assert_eq!(
            names,
            vec!["Alpha", "alpha", "ALPHA!", "alpha#2", "Beta", "beta"]
        );
    }

    proptest! {
        #[test]
        fn order_follows_folded_then_original(a in "[ -~é]{0,12}", b in "[ -~é]{0,12}") {
            let expected = (fold(&a), a.clone()).cmp(&(fold(&b), b.clone()));
            prop_assert_eq!(encode(&a).cmp(&encode(&b)), expected);
        }
    }
}
