//! Text sort keys: case-insensitive order (Unicode simple case folding after NFC
//! normalisation) with the original text as tie-break, cut on a character boundary to a bound
//! that keeps an issue's keys, and so its watermark, small.

use unicode_normalization::UnicodeNormalization;

/// Separates the parts of a text sort key. It sorts below every character a value may contain
/// (values never contain C0 controls), so `"ab" SEP …` sorts before `"ab!" SEP …`; `#` would not.
pub const SEP: char = '\u{1}';

/// The highest character: no text sorts above a run of it longer than the text.
pub const TOP: char = '\u{10FFFF}';

/// Longest text encoding, in bytes. Every text value of an issue (title, state, up to 400
/// text fields) contributes at most this to the keys its watermark lists, so the watermark of
/// the largest issue the contract allows stays far below DynamoDB's 400 KB item limit (see
/// the indexer's size test). Values that agree on their first [`MAX_BYTES`] bytes of encoding
/// tie, and ties break by issue number.
pub const MAX_BYTES: usize = 64;

fn fold_char(c: char) -> char {
    unicode_case_mapping::case_folded(c)
        .and_then(|cp| char::from_u32(cp.get()))
        .unwrap_or(c)
}

/// NFC normalisation, then Unicode simple case folding (one character to one character):
/// composed and decomposed forms of a text fold alike.
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_fold(&mut out, s);
    out
}

/// [`fold`], appended to `out`. ASCII text is already NFC and folds to its lowercase, so the
/// common case skips the normaliser (the indexer encodes every title of every record).
fn push_fold(out: &mut String, s: &str) {
    if s.is_ascii() {
        out.extend(s.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        out.extend(s.nfc().map(fold_char));
    }
}

/// `fold(s) SEP s`, cut to [`MAX_BYTES`] on a character boundary. Values that agree on their
/// first [`MAX_BYTES`] bytes of encoding then tie, and ties break by issue number.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(2 * s.len() + SEP.len_utf8());
    push_fold(&mut out, s);
    out.push(SEP);
    out.push_str(s);
    truncate(out, MAX_BYTES)
}

/// What a `prefix` filter compares with the encodings: the folded prefix, cut like them (an
/// encoding holds at most [`MAX_BYTES`] bytes of folded text, so a longer prefix matches on its
/// first [`MAX_BYTES`] bytes).
pub fn prefix_key(p: &str) -> String {
    truncate(fold(p), MAX_BYTES)
}

/// The original text, when the encoding was not truncated.
pub fn decode(e: &str) -> Option<&str> {
    e.split_once(SEP).map(|(_, original)| original)
}

/// `s` cut to at most `max` bytes on a character boundary.
pub fn truncate(mut s: String, max: usize) -> String {
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

    proptest! {
        /// The ASCII shortcut folds as the normaliser and Unicode's case folding do.
        #[test]
        fn ascii_folds_as_unicode_does(s in "[ -~]{0,40}") {
            let slow: String = s.nfc().map(fold_char).collect();
            prop_assert_eq!(fold(&s), slow);
        }
    }

    #[test]
    fn composed_and_decomposed_forms_fold_as_one() {
        // "é" as one code point and as "e" + combining acute accent.
        assert_eq!(fold("Caf\u{e9}"), fold("cafe\u{301}"));
        assert_eq!(prefix_key("CAFE\u{301}"), prefix_key("caf\u{e9}"));
        // Before the normalisation, the decomposed form sorted before "cafz", the composed after.
        assert!(encode("cafe\u{301}") > encode("cafz"));
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let e = encode(&"é".repeat(1024));
        assert!(e.len() <= MAX_BYTES);
        assert!(e.is_char_boundary(e.len()));
        let e = encode(&"\u{10FFFF}".repeat(1024));
        assert!(e.len() <= MAX_BYTES && e.len() > MAX_BYTES - 4);
    }

    /// Text mixing ASCII, precomposed and decomposed accents, case pairs and characters up to
    /// U+10FFFF (no C0 controls, as the API guarantees).
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                proptest::char::range(' ', '~'),
                proptest::sample::select(vec![
                    'é',
                    'É',
                    'e',
                    'E',
                    '\u{301}',
                    '\u{300}',
                    '\u{327}',
                    'ç',
                    'Ç',
                    'ß',
                    'Σ',
                    'σ',
                    'ς',
                    'Å',
                    '\u{212B}',
                    '\u{30A}',
                    '\u{FFFF}',
                    '\u{10000}',
                    '\u{10FFFF}',
                ]),
                proptest::char::range('\u{80}', '\u{10FFFF}'),
            ],
            0..40,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    fn nfd(s: &str) -> String {
        s.nfd().collect()
    }

    fn nfc(s: &str) -> String {
        s.nfc().collect()
    }

    proptest! {
        #[test]
        fn order_follows_folded_then_original(a in "[ -~éÉßΣσς]{0,12}", b in "[ -~éÉßΣσς]{0,12}") {
            let expected = (fold(&a), a.clone()).cmp(&(fold(&b), b.clone()));
            prop_assert_eq!(encode(&a).cmp(&encode(&b)), expected);
        }

        /// Whatever their length, encodings never invert the order of (folded, original):
        /// truncation can only make values tie.
        #[test]
        fn order_is_preserved_up_to_ties(a in text(), b in text(), rep in 1usize..40) {
            let (a, b) = (a.repeat(rep), b.repeat(rep));
            let expected = (fold(&a), a.clone()).cmp(&(fold(&b), b.clone()));
            let got = encode(&a).cmp(&encode(&b));
            prop_assert!(got == expected || got == std::cmp::Ordering::Equal);
        }

        /// NFC and NFD forms of one text encode equal up to the tie-break (the original).
        #[test]
        fn normal_forms_encode_equal_up_to_the_tie_break(a in text()) {
            let (c, d) = (nfc(&a), nfd(&a));
            prop_assert_eq!(fold(&c), fold(&d));
            prop_assert_eq!(fold(&a), fold(&d));
            let head = |e: String| e.split_once(SEP).map(|(f, _)| f.to_string()).unwrap_or(e);
            prop_assert_eq!(head(encode(&c)), head(encode(&d)));
        }

        /// A prefix filter matches the same values whichever normal form the prefix or the value
        /// is written in.
        #[test]
        fn prefix_matching_is_the_same_for_every_normal_form(v in text(), cut in 0usize..40, other in text()) {
            let chars: Vec<char> = v.chars().collect();
            let p: String = chars[..cut.min(chars.len())].iter().collect();
            for p in [p, other] {
                prop_assume!(!p.is_empty());
                let matches = |value: &str, prefix: &str| {
                    let key = crate::keys::index::value_sk(&encode(value), 7);
                    crate::keys::index::value_floor(&prefix_key(prefix)) <= key
                        && key <= crate::keys::index::prefix_ceiling(&prefix_key(prefix))
                };
                let m = matches(&v, &p);
                prop_assert_eq!(m, matches(&nfd(&v), &p));
                prop_assert_eq!(m, matches(&nfc(&v), &nfd(&p)));
                prop_assert_eq!(m, matches(&nfd(&v), &nfc(&p)));
                // And it is a prefix test on the folded, normalised text.
                if fold(&v).len() < MAX_BYTES {
                    prop_assert_eq!(m, fold(&v).starts_with(&prefix_key(&p)));
                }
            }
        }

        #[test]
        fn short_values_round_trip(a in "\\PC{0,30}") {
            let a: String = a.chars().filter(|c| *c >= ' ').collect();
            prop_assume!(fold(&a).len() + 1 + a.len() <= MAX_BYTES);
            let e = encode(&a);
            prop_assert_eq!(decode(&e), Some(a.as_str()));
        }
    }
}
