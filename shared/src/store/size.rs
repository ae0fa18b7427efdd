//! DynamoDB's item size, in one place: what the `413` check, the watermark's bound and the
//! local stack's limit guard all measure against the 400 KB item limit.

use aws_sdk_dynamodb::types::AttributeValue;

use super::Item;

/// An item's size as DynamoDB measures it against its 400 KB limit: every attribute's name
/// plus its value (strings and binaries their bytes; numbers one byte per two significant
/// digits on each side of the point, plus one, plus one if negative; sets their elements;
/// lists and maps 3 bytes plus, per element, 1 byte and its name and value). The rule the
/// embedded engine applies byte-exact, so the `413` line is where AWS draws it.
pub fn stored_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(ss) => ss.iter().map(String::len).sum(),
        AttributeValue::Ns(ns) => ns.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(bs) => bs.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(l) => 3 + l.iter().map(|x| 1 + value_size(x)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, x)| k.len() + 1 + value_size(x))
                .sum::<usize>()
        }
        _ => 0,
    }
}

/// A number's stored size: its significant digits, in pairs, either side of the point.
pub fn number_size(n: &str) -> usize {
    let n = n.trim();
    let negative = n.starts_with('-');
    let n = n.trim_start_matches(['-', '+']);
    let (mantissa, exponent) = match n.find(['e', 'E']) {
        Some(at) => (&n[..at], n[at + 1..].parse::<i64>().unwrap_or(0)),
        None => (n, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = int.chars().chain(frac.chars()).collect();
    let point = int.len() as i64 + exponent;
    let lead = digits.len() - digits.trim_start_matches('0').len();
    let significant = digits.trim_matches('0');
    if significant.is_empty() {
        return 1;
    }
    let int_digits = (point - lead as i64).clamp(0, significant.len() as i64) as usize;
    let frac_digits = significant.len() - int_digits;
    int_digits.div_ceil(2) + frac_digits.div_ceil(2) + 1 + usize::from(negative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_sized_by_significant_digits() {
        for (n, size) in [
            ("0", 1),
            ("1", 2),
            ("12", 2),
            ("123", 3),
            ("-12", 3),
            ("1.5", 3),
            ("100", 2),
            ("0.001", 2),
            ("1E+100", 2),
            ("12345678901234567890123456789012345678", 20),
        ] {
            assert_eq!(number_size(n), size, "{n}");
        }
    }

    #[test]
    fn sizes_count_names_sets_and_maps() {
        let item = Item::from([
            ("ab".to_string(), AttributeValue::S("xyz".into())),
            (
                "s".to_string(),
                AttributeValue::Ss(vec!["a".into(), "bc".into()]),
            ),
            (
                "m".to_string(),
                AttributeValue::M([("k".to_string(), AttributeValue::S("v".into()))].into()),
            ),
        ]);
        assert_eq!(stored_size(&item), (2 + 3) + (1 + 3) + (1 + 3 + 1 + 1 + 1));
    }
}
