//! Exact sums of Kubernetes resource quantities, for the PodGroup's `minResources`: `500m` plus
//! `1` is `1500m`, `1Gi` plus `512Mi` is `1536Mi`. Pure.
//!
//! k8s-openapi's `Quantity` is only the string the user wrote, with no arithmetic; floating
//! point would turn `0.1 + 0.2` CPUs into `300.00000000000006m`. An [`Amount`] is an integer
//! count of nano-units (10⁻⁹, the finest suffix Kubernetes has), which holds every suffix
//! exactly: the decimal ones (`n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`), the binary ones
//! (`Ki` … `Ei`), and decimal exponents (`1e3`). A value finer than a nano-unit is rounded up, as
//! Kubernetes rounds.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Nano-units in one unit.
const NANOS: i128 = 1_000_000_000;

/// The binary suffixes, largest first, with their power of 1024.
const BINARY_SUFFIXES: [(&str, u32); 6] = [
    ("Ei", 6),
    ("Pi", 5),
    ("Ti", 4),
    ("Gi", 3),
    ("Mi", 2),
    ("Ki", 1),
];

/// The decimal suffixes, largest first, with their power of ten.
const DECIMAL_SUFFIXES: [(&str, i32); 10] = [
    ("E", 18),
    ("P", 15),
    ("T", 12),
    ("G", 9),
    ("M", 6),
    ("k", 3),
    ("", 0),
    ("m", -3),
    ("u", -6),
    ("n", -9),
];

/// An exact resource amount.
///
/// `binary` remembers whether every quantity summed into it was written with a binary suffix,
/// so that sums of memory print as `1536Mi` rather than `1610612736`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amount {
    nanos: i128,
    binary: bool,
}

/// A string that is not a Kubernetes quantity, or one too large to add up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a Kubernetes quantity ({why})")]
pub struct QuantityError {
    pub text: String,
    pub why: &'static str,
}

impl Amount {
    /// Nothing; adding to it keeps the other amount's format.
    pub const ZERO: Amount = Amount {
        nanos: 0,
        binary: true,
    };

    /// The sum, or `None` when it does not fit (far beyond any real resource).
    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        Some(Amount {
            nanos: self.nanos.checked_add(other.nanos)?,
            binary: self.binary && other.binary,
        })
    }

    /// `times` of this amount, or `None` when it does not fit.
    pub fn checked_mul(self, times: i128) -> Option<Amount> {
        Some(Amount {
            nanos: self.nanos.checked_mul(times)?,
            binary: self.binary,
        })
    }

    pub fn to_quantity(self) -> Quantity {
        Quantity(self.to_string())
    }
}

impl TryFrom<&Quantity> for Amount {
    type Error = QuantityError;

    fn try_from(quantity: &Quantity) -> Result<Self, Self::Error> {
        quantity.0.parse()
    }
}

impl FromStr for Amount {
    type Err = QuantityError;

    /// `<sign><digits>[.<digits>]<suffix>`, where the suffix is decimal (`m`, `k`, `M`, ...),
    /// binary (`Ki`, `Mi`, ...) or an exponent (`e3`, `E-2`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |why| QuantityError {
            text: text.to_owned(),
            why,
        };
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = unsigned
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(error("no digits"));
        }
        if fraction.contains('.') {
            return Err(error("two decimal points"));
        }
        let digits = format!("{whole}{fraction}");
        let significant = digits.trim_start_matches('0');
        let mantissa: i128 = if significant.is_empty() {
            0
        } else {
            significant.parse().map_err(|_| error("too large"))?
        };
        let fraction_digits =
            i32::try_from(fraction.len()).map_err(|_| error("too many digits"))?;

        // value = mantissa × 1024^binary_power × 10^(decimal_power − fraction_digits)
        let (binary_power, decimal_power, binary) = parse_suffix(suffix).ok_or_else(|| {
            error("unknown suffix: use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent")
        })?;
        let scaled = 1024_i128
            .checked_pow(binary_power)
            .and_then(|factor| mantissa.checked_mul(factor))
            .ok_or_else(|| error("too large"))?;
        let exponent = decimal_power + 9 - fraction_digits;
        let nanos = if exponent >= 0 {
            u32::try_from(exponent)
                .ok()
                .and_then(|e| 10_i128.checked_pow(e))
                .and_then(|factor| scaled.checked_mul(factor))
                .ok_or_else(|| error("too large"))?
        } else {
            // Finer than a nano-unit: round up, as Kubernetes does.
            match u32::try_from(-exponent)
                .ok()
                .and_then(|e| 10_i128.checked_pow(e))
            {
                Some(divisor) => scaled / divisor + i128::from(scaled % divisor != 0),
                None if scaled == 0 => 0,
                None => 1,
            }
        };
        Ok(Amount {
            nanos: if negative { -nanos } else { nanos },
            binary,
        })
    }
}

/// (power of 1024, power of ten, whether the suffix is binary), or `None` if unknown.
fn parse_suffix(suffix: &str) -> Option<(u32, i32, bool)> {
    if let Some(&(_, power)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((power, 0, true));
    }
    if let Some(&(_, power)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((0, power, false));
    }
    // `E` alone is exa; `E` or `e` followed by a signed integer is an exponent.
    let exponent = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Anything past ±60 cannot be a resource amount an i128 of nano-units holds.
    let power: i32 = exponent.parse().ok().filter(|p: &i32| p.abs() <= 60)?;
    Some((0, power, false))
}

impl fmt::Display for Amount {
    /// Kubernetes' canonical form: no fractional digits and the largest suffix that keeps the
    /// value exact; binary suffixes for binary amounts of at least 1Ki that are whole numbers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        if self.binary
            && self.nanos % NANOS == 0
            && self.nanos.unsigned_abs() >= 1024 * NANOS.unsigned_abs()
        {
            let units = self.nanos / NANOS;
            let (number, suffix) = BINARY_SUFFIXES
                .iter()
                .map(|&(suffix, power)| (suffix, 1024_i128.pow(power)))
                .find(|(_, factor)| units % factor == 0)
                .map_or((units, ""), |(suffix, factor)| (units / factor, suffix));
            return write!(f, "{number}{suffix}");
        }
        // `n` divides everything, so some suffix is always found.
        let (number, suffix) = DECIMAL_SUFFIXES
            .iter()
            .map(|&(suffix, power)| (suffix, 10_i128.pow((power + 9).unsigned_abs())))
            .find(|(_, unit)| self.nanos % unit == 0)
            .map_or((self.nanos, "n"), |(suffix, unit)| {
                (self.nanos / unit, suffix)
            });
        write!(f, "{number}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(text: &str) -> Amount {
        text.parse()
            .unwrap_or_else(|e| panic!("{text} should parse: {e}"))
    }

    fn sum(texts: &[&str]) -> String {
        texts
            .iter()
            .map(|t| amount(t))
            .try_fold(Amount::ZERO, Amount::checked_add)
            .expect("the sum fits")
            .to_string()
    }

    #[test]
    fn sums_are_exact_and_canonical() {
        let cases: &[(&[&str], &str)] = &[
            (&["500m", "1"], "1500m"),
            (&["1Gi", "512Mi"], "1536Mi"),
            (&["1", "1"], "2"),
            (&["100m", "200m"], "300m"),
            (&["0.1", "0.2"], "300m"),
            (&["1.5Gi"], "1536Mi"),
            (&["512Mi", "512Mi"], "1Gi"),
            (&["1k", "500"], "1500"),
            (&["1500", "1500"], "3k"),
            (&["1M", "1G"], "1001M"),
            (&["2T"], "2T"),
            (&["1e3"], "1k"),
            (&["1E6"], "1M"),
            (&["1E"], "1E"),
            (&["5e-3"], "5m"),
            (&["250u", "750u"], "1m"),
            (&["10n"], "10n"),
            (&["1Ki", "1000"], "2024"),
            (&["100Mi", "1G"], "1104857600"),
            (&["1000Mi"], "1000Mi"),
            (&["1536"], "1536"),
            (&["0.5Ki"], "512"),
            (&["+1", "-1"], "0"),
            (&["-1"], "-1"),
            (&["-2Gi"], "-2Gi"),
            (&["0"], "0"),
            (&["4", ".5", "3."], "7500m"),
            (&[], "0"),
        ];
        for (terms, expected) in cases {
            assert_eq!(sum(terms), *expected, "sum of {terms:?}");
        }
    }

    #[test]
    fn a_multiple_keeps_the_format() {
        assert_eq!(
            amount("512Mi")
                .checked_mul(3)
                .map(|a| a.to_string())
                .as_deref(),
            Some("1536Mi")
        );
        assert_eq!(
            amount("250m")
                .checked_mul(4)
                .map(|a| a.to_string())
                .as_deref(),
            Some("1")
        );
    }

    #[test]
    fn binary_sums_below_one_ki_or_fractional_print_as_decimal() {
        assert_eq!(sum(&["100Ki", "0.5Ki"]), "102912");
        // 0.1Ki is 102.4: not whole, so decimal.
        assert_eq!(sum(&["0.1Ki"]), "102400m");
    }

    #[test]
    fn a_value_finer_than_a_nano_unit_is_rounded_up() {
        assert_eq!(sum(&["0.1n"]), "1n");
        assert_eq!(sum(&["1e-12"]), "1n");
        assert_eq!(sum(&["1e-60"]), "1n");
        // The largest mantissa there is, rounded up without overflowing.
        let largest = format!("{}e-10", i128::MAX);
        assert_eq!(
            amount(&largest),
            amount(&format!("{}n", i128::MAX / 10 + 1))
        );
    }

    #[test]
    fn what_is_not_a_quantity_is_an_error_that_says_why() {
        for text in [
            "", "m", "1.2.3", "1x", "1 Gi", "1KI", "Gi", "1e", "1e+", "1e3.5", "--1", "1e999",
        ] {
            let error = text.parse::<Amount>().expect_err(text);
            assert_eq!(error.text, text);
            assert!(
                error.to_string().contains("is not a Kubernetes quantity"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_sum_too_large_for_an_i128_is_refused() {
        let huge = amount("100000000000E");
        assert_eq!(huge.checked_add(huge), None);
        assert_eq!(huge.checked_mul(2), None);
        assert!("1000000000000E".parse::<Amount>().is_err());
    }

    #[test]
    fn quantities_from_the_api_convert() {
        let quantity = Quantity("250m".into());
        assert_eq!(Amount::try_from(&quantity), Ok(amount("0.25")));
        assert_eq!(amount("0.25").to_quantity(), quantity);
    }
}
