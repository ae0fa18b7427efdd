//! Numbers as fixed-width, order-preserving strings covering DynamoDB's whole range and
//! precision (the idea of the SQLite4 key encoding and HBase OrderedBytes, without HBase's loss
//! past 31 digits):
//!
//! - a sign class: `1` negative, `2` zero, `3` positive;
//! - the exponent plus 130 as three digits (0..=255), inverted (255 - e) for negatives, so a
//!   larger magnitude sorts first among negatives;
//! - the 38-digit mantissa, zero-padded, in nines' complement for negatives.
//!
//! Every encoding is 42 characters; zero is `2` followed by 41 zeros.

use crate::domain::decimal::{DynNumber, MAX_DIGITS, MIN_EXP};

pub const WIDTH: usize = 1 + 3 + MAX_DIGITS;

pub fn encode(n: &DynNumber) -> String {
    // Written byte by byte into one allocation: the indexer encodes every number column of
    // every issue it indexes.
    let mut out = String::with_capacity(WIDTH);
    if n.is_zero() {
        out.push('2');
        out.extend(std::iter::repeat_n('0', WIDTH - 1));
        return out;
    }
    let biased = (n.exponent() - MIN_EXP) as u32;
    let negative = n.is_negative();
    // Nines' complement for negatives, so a larger magnitude sorts first.
    let digit = |d: u8| char::from(if negative { b'9' - (d - b'0') } else { d });
    out.push(if negative { '1' } else { '3' });
    let exp = if negative { 255 - biased } else { biased };
    out.extend([exp / 100, exp / 10 % 10, exp % 10].map(|d| char::from(b'0' + d as u8)));
    let digits = n.digits();
    out.extend(digits.bytes().map(digit));
    out.extend(std::iter::repeat_n(
        digit(b'0'),
        MAX_DIGITS.saturating_sub(digits.len()),
    ));
    out
}

pub fn decode(s: &str) -> Option<DynNumber> {
    if s.len() != WIDTH || !s.is_ascii() {
        return None;
    }
    let (class, rest) = s.split_at(1);
    let (exp, mantissa) = rest.split_at(3);
    let exp: i32 = exp.parse().ok()?;
    match class {
        "2" => Some(DynNumber::zero()),
        "3" => DynNumber::from_parts(false, mantissa.trim_end_matches('0'), exp + MIN_EXP).ok(),
        "1" => {
            let digits: String = mantissa
                .bytes()
                .map(|d| char::from(b'9' - (d - b'0')))
                .collect();
            DynNumber::from_parts(true, digits.trim_end_matches('0'), 255 - exp + MIN_EXP).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decimal::MAX_EXP;
    use proptest::prelude::*;

    fn n(s: &str) -> DynNumber {
        DynNumber::parse(s).unwrap()
    }

    #[test]
    fn the_contracts_example_is_in_order() {
        let ordered = [
            "-9.9999999999999999999999999999999999999E+125",
            "-1E+125",
            "-1",
            "-0.55",
            "-0.5",
            "-1E-130",
            "0",
            "1E-130",
            "1",
            "1.0000000000000000000000000000000000001",
            "9.9999999999999999999999999999999999999E+125",
        ];
        let encoded: Vec<String> = ordered.iter().map(|s| encode(&n(s))).collect();
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(encoded, sorted);
        assert!(encoded.iter().all(|e| e.len() == WIDTH));
    }

    /// The encoding as the module's comment states it, through `format!`: the byte-by-byte
    /// encoder must write exactly this.
    fn plain_encode(n: &DynNumber) -> String {
        if n.is_zero() {
            return format!("2{}", "0".repeat(WIDTH - 1));
        }
        let biased = (n.exponent() - MIN_EXP) as u32;
        let mantissa = format!("{:0<width$}", n.digits(), width = MAX_DIGITS);
        if n.is_negative() {
            let complement: String = mantissa
                .bytes()
                .map(|d| char::from(b'9' - (d - b'0')))
                .collect();
            format!("1{:03}{complement}", 255 - biased)
        } else {
            format!("3{biased:03}{mantissa}")
        }
    }

    fn any_number() -> impl Strategy<Value = DynNumber> {
        prop_oneof![
            Just(DynNumber::zero()),
            (any::<bool>(), "[1-9]([0-9]{0,36}[1-9])?", MIN_EXP..=MAX_EXP)
                .prop_map(|(neg, d, e)| DynNumber::from_parts(neg, &d, e).unwrap()),
        ]
    }

    /// Exact comparison of two numbers, independent of the encoding.
    fn compare(a: &DynNumber, b: &DynNumber) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let sign = |x: &DynNumber| {
            if x.is_zero() {
                0
            } else if x.is_negative() {
                -1
            } else {
                1
            }
        };
        match sign(a).cmp(&sign(b)) {
            Equal if sign(a) == 0 => Equal,
            Equal => {
                let magnitude = a.exponent().cmp(&b.exponent()).then_with(|| {
                    let pad = |d: &str| format!("{d:0<38}");
                    pad(a.digits()).cmp(&pad(b.digits()))
                });
                if sign(a) < 0 {
                    magnitude.reverse()
                } else {
                    magnitude
                }
            }
            other => other,
        }
    }

    proptest! {
        #[test]
        fn the_encoder_writes_what_the_plain_statement_of_the_encoding_does(a in any_number()) {
            prop_assert_eq!(encode(&a), plain_encode(&a));
        }

        #[test]
        fn encoding_order_is_numeric_order(a in any_number(), b in any_number()) {
            prop_assert_eq!(encode(&a).cmp(&encode(&b)), compare(&a, &b));
        }

        #[test]
        fn encoding_round_trips_at_fixed_width(a in any_number()) {
            let e = encode(&a);
            prop_assert_eq!(e.len(), WIDTH);
            prop_assert_eq!(decode(&e), Some(a));
        }
    }
}
