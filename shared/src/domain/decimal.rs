//! DynamoDB Numbers, exactly: parsed from the JSON literal's digits (never through `f64`),
//! validated against DynamoDB's range and precision, and printed back in one canonical form.

use std::fmt;

/// Most significant digits DynamoDB keeps.
pub const MAX_DIGITS: usize = 38;
/// Smallest decimal exponent of a non-zero magnitude (1E-130).
pub const MIN_EXP: i32 = -130;
/// Largest decimal exponent of a magnitude (9.99…E+125).
pub const MAX_EXP: i32 = 125;

/// A number DynamoDB can store: `0`, or `±d.ddd… × 10^exp` with 1–38 significant digits and
/// `MIN_EXP <= exp <= MAX_EXP`.
///
/// `digits` never has leading or trailing zeros, so equal values have equal representations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DynNumber {
    negative: bool,
    /// Significant digits as ASCII, empty for zero.
    digits: String,
    /// Scientific exponent of the first digit (value = d.ddd × 10^exp); 0 for zero.
    exp: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    #[error("is not a number in JSON number syntax")]
    Syntax,
    #[error("has more than 38 significant digits")]
    TooPrecise,
    #[error(
        "is out of range: magnitude must be between 1E-130 and 9.9999999999999999999999999999999999999E+125"
    )]
    OutOfRange,
}

impl DynNumber {
    pub fn zero() -> Self {
        Self {
            negative: false,
            digits: String::new(),
            exp: 0,
        }
    }

    /// Parses JSON number syntax: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    pub fn parse(s: &str) -> Result<Self, NumberError> {
        let Literal {
            negative,
            int_part,
            frac_part,
            exp: exp_value,
        } = Literal::lex(s)?;
        let all: String = format!("{int_part}{frac_part}");
        let lead = all.bytes().take_while(|&c| c == b'0').count();
        let significant = all[lead..].trim_end_matches('0');
        if significant.is_empty() {
            return Ok(Self::zero());
        }
        if significant.len() > MAX_DIGITS {
            return Err(NumberError::TooPrecise);
        }
        // Position of the first significant digit relative to the decimal point.
        let exp = int_part.len() as i64 - lead as i64 - 1 + exp_value;
        if exp < i64::from(MIN_EXP) || exp > i64::from(MAX_EXP) {
            return Err(NumberError::OutOfRange);
        }
        Ok(Self {
            negative,
            digits: significant.to_string(),
            exp: exp as i32,
        })
    }

    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Significant digits, without leading or trailing zeros (empty for zero).
    pub fn digits(&self) -> &str {
        &self.digits
    }

    /// Scientific exponent: the value is `d.ddd × 10^exp`.
    pub fn exponent(&self) -> i32 {
        self.exp
    }

    /// Builds a number from its parts; `digits` must be significant digits only.
    pub fn from_parts(negative: bool, digits: &str, exp: i32) -> Result<Self, NumberError> {
        let mut text = String::new();
        if negative {
            text.push('-');
        }
        text.push_str(digits);
        text.push_str(&format!("E{}", exp - (digits.len() as i32 - 1)));
        Self::parse(&text)
    }
}

/// A JSON number literal cut into its parts, before normalisation.
struct Literal<'a> {
    negative: bool,
    int_part: &'a str,
    frac_part: &'a str,
    /// The literal's exponent, clamped so that absurd literals cannot overflow.
    exp: i64,
}

impl<'a> Literal<'a> {
    fn lex(s: &'a str) -> Result<Self, NumberError> {
        let mut rest = s;
        let negative = eat(&mut rest, b'-');
        let int_part = digits(&mut rest);
        if int_part.is_empty() || (int_part.len() > 1 && int_part.starts_with('0')) {
            return Err(NumberError::Syntax);
        }
        let mut frac_part = "";
        if eat(&mut rest, b'.') {
            frac_part = digits(&mut rest);
            if frac_part.is_empty() {
                return Err(NumberError::Syntax);
            }
        }
        let mut exp = 0;
        if eat(&mut rest, b'e') || eat(&mut rest, b'E') {
            exp = exponent(&mut rest)?;
        }
        if !rest.is_empty() {
            return Err(NumberError::Syntax);
        }
        Ok(Self {
            negative,
            int_part,
            frac_part,
            exp,
        })
    }
}

/// Consumes `c` if `rest` starts with it.
fn eat(rest: &mut &str, c: u8) -> bool {
    let found = rest.as_bytes().first() == Some(&c);
    if found {
        *rest = &rest[1..];
    }
    found
}

/// Consumes the ASCII digits `rest` starts with.
fn digits<'a>(rest: &mut &'a str) -> &'a str {
    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (digits, after) = rest.split_at(n);
    *rest = after;
    digits
}

/// Consumes an exponent's sign and digits (at least one), clamping its magnitude.
fn exponent(rest: &mut &str) -> Result<i64, NumberError> {
    let negative = eat(rest, b'-');
    if !negative {
        eat(rest, b'+');
    }
    let digits = digits(rest);
    if digits.is_empty() {
        return Err(NumberError::Syntax);
    }
    let value = digits.bytes().fold(0i64, |v, c| {
        (v * 10 + i64::from(c - b'0')).min(1_000_000_000)
    });
    Ok(if negative { -value } else { value })
}

impl std::str::FromStr for DynNumber {
    type Err = NumberError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for DynNumber {
    /// Canonical form, valid as a JSON number and as a DynamoDB `N`: plain decimal notation
    /// while it stays short, scientific (`1.5E+100`) otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return f.write_str("0");
        }
        if self.negative {
            f.write_str("-")?;
        }
        let n = self.digits.len() as i32;
        let exp = self.exp;
        if (0..MAX_DIGITS as i32).contains(&exp) {
            // Plain: integer part is the first exp+1 digits, padded with zeros.
            if n <= exp + 1 {
                f.write_str(&self.digits)?;
                for _ in 0..(exp + 1 - n) {
                    f.write_str("0")?;
                }
            } else {
                let split = (exp + 1) as usize;
                write!(f, "{}.{}", &self.digits[..split], &self.digits[split..])?;
            }
            Ok(())
        } else if (-6..0).contains(&exp) {
            f.write_str("0.")?;
            for _ in 0..(-exp - 1) {
                f.write_str("0")?;
            }
            f.write_str(&self.digits)
        } else {
            let (first, rest) = self.digits.split_at(1);
            if rest.is_empty() {
                write!(f, "{first}E{exp:+}")
            } else {
                write!(f, "{first}.{rest}E{exp:+}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(s: &str) -> String {
        DynNumber::parse(s).unwrap().to_string()
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(canon("0"), "0");
        assert_eq!(canon("-0.000"), "0");
        assert_eq!(canon("12.50"), "12.5");
        assert_eq!(canon("1E+2"), "100");
        assert_eq!(canon("1e2"), "100");
        assert_eq!(canon("-12.5"), "-12.5");
        assert_eq!(canon("0.001"), "0.001");
        assert_eq!(canon("1E-7"), "1E-7");
        assert_eq!(canon("1E+100"), "1E+100");
        assert_eq!(canon("1.5E+100"), "1.5E+100");
        assert_eq!(canon("1E-130"), "1E-130");
        assert_eq!(
            canon("9.9999999999999999999999999999999999999E+125"),
            "9.9999999999999999999999999999999999999E+125"
        );
        assert_eq!(
            canon("1.0000000000000000000000000000000000001"),
            "1.0000000000000000000000000000000000001"
        );
        // Trailing zeros are not significant digits.
        assert_eq!(
            canon("1000000000000000000000000000000000000000000"),
            "1E+42"
        );
    }

    #[test]
    fn rejects_what_dynamodb_rejects() {
        for bad in [
            "", "-", "01", "1.", ".5", "+1", "1e", "1E+", "0x10", "NaN", "1 ", " 1", "--1",
        ] {
            assert_eq!(DynNumber::parse(bad), Err(NumberError::Syntax), "{bad:?}");
        }
        assert_eq!(
            DynNumber::parse("1.00000000000000000000000000000000000001"),
            Err(NumberError::TooPrecise)
        );
        assert_eq!(DynNumber::parse("1E+126"), Err(NumberError::OutOfRange));
        assert_eq!(DynNumber::parse("1E-131"), Err(NumberError::OutOfRange));
        assert_eq!(DynNumber::parse("-1E+126"), Err(NumberError::OutOfRange));
        assert_eq!(
            DynNumber::parse("1E+99999999999999999999"),
            Err(NumberError::OutOfRange)
        );
    }

    fn any_number() -> impl Strategy<Value = DynNumber> {
        (any::<bool>(), "[1-9]([0-9]{0,36}[1-9])?", MIN_EXP..=MAX_EXP).prop_map(
            |(neg, digits, exp)| DynNumber {
                negative: neg,
                digits,
                exp,
            },
        )
    }

    proptest! {
        #[test]
        fn display_round_trips(n in any_number()) {
            let text = n.to_string();
            prop_assert_eq!(DynNumber::parse(&text).unwrap(), n);
        }

        #[test]
        fn display_is_valid_json_number(n in any_number()) {
            let text = n.to_string();
            let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert!(parsed.is_number());
        }

        #[test]
        fn equivalent_literals_normalise_alike(n in any_number(), zeros in 0usize..5, lead in 0usize..3) {
            // The same value written as an integer with padding zeros and a shifted exponent,
            // or with leading zeros after a decimal point, parses equal.
            let sign = if n.negative { "-" } else { "" };
            let digits = format!("{}{}", n.digits, "0".repeat(zeros));
            let as_integer = format!("{sign}{digits}E{}", n.exp - digits.len() as i32 + 1);
            prop_assert_eq!(DynNumber::parse(&as_integer).unwrap(), n.clone());
            let as_fraction = format!("{sign}0.{}{digits}E{}", "0".repeat(lead), n.exp + 1 + lead as i32);
            prop_assert_eq!(DynNumber::parse(&as_fraction).unwrap(), n);
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,60}") {
            let _ = DynNumber::parse(&s);
        }
    }
}
