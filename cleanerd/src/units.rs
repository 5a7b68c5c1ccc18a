//! Amounts as administrators write them in cleanerd.conf(5); sizes and
//! times are read by lfs-common's parser, the one fsd.toml and mkfs.lfs
//! use too.
//!
//! An [`Amount`] is a count of segments or blocks, a percentage, or a
//! number of bytes; which of those it is stays known until the
//! filesystem's geometry is (after connecting to fsd), when
//! [`Amount::resolve`] turns it into a count, always rounding up: asking for
//! "1M" of clean space on 4 KiB blocks means at least 256 blocks, never
//! 255.
//!
//! Byte suffixes are [`lfs_common::units`]'s: `K`, `M`, `KiB`, ... are
//! powers of 1024, `kB`, `MB`, ... powers of 1000.

use std::fmt;

use lfs_common::units::{byte_multiplier, number, parse_size, split_number, SIZE_UNITS};
pub use lfs_common::units::{format_duration, parse_duration, seconds};

/// How many segments or blocks, before the geometry is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// An exact count.
    Count(u64),
    /// A percentage (0 to 100) of a whole that depends on the key.
    Percent(f64),
    /// Bytes, converted to whole units, rounding up.
    Bytes(u64),
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Count(n) => write!(f, "{n}"),
            Amount::Percent(p) => write!(f, "{p}%"),
            Amount::Bytes(b) => write!(f, "{b} bytes"),
        }
    }
}

impl Amount {
    /// The count this amount means when a percentage is of `whole` and a
    /// unit holds `unit_bytes` bytes (rounding up). `unit_bytes` 0 (an
    /// impossible geometry) counts bytes as nothing.
    pub fn resolve(&self, whole: u64, unit_bytes: u64) -> u64 {
        match *self {
            Amount::Count(n) => n,
            Amount::Percent(p) => {
                // Exact for the integral percentages people write; the
                // float path only for fractions such as 12.5%.
                if p.fract() == 0.0 {
                    (u128::from(whole) * p as u128).div_ceil(100) as u64
                } else {
                    (whole as f64 * p / 100.0).ceil() as u64
                }
            }
            Amount::Bytes(b) => {
                b.checked_div(unit_bytes)
                    .map_or(0, |q| if b % unit_bytes == 0 { q } else { q + 1 })
            }
        }
    }
}

/// Parses an amount: `"12"` (a count), `"10%"`, `"12.5%"`, `"64M"`,
/// `"1GiB"`, `"500MB"`.
pub fn parse_amount(s: &str) -> Result<Amount, String> {
    let (num, unit) = split_number(s);
    let x = number(num, s)?;
    if unit.is_empty() {
        if num.contains('.') {
            return Err(format!(
                "{s:?}: a count must be a whole number (or add % or a byte unit)"
            ));
        }
        return num
            .parse()
            .map(Amount::Count)
            .map_err(|_| format!("{s:?} is too large"));
    }
    if unit == "%" {
        if x > 100.0 {
            return Err(format!("{s:?}: a percentage is at most 100%"));
        }
        return Ok(Amount::Percent(x));
    }
    if byte_multiplier(unit).is_none() {
        return Err(format!(
            "{s:?} has an unknown unit {unit:?} (use % or a byte unit: {SIZE_UNITS})"
        ));
    }
    parse_size(s).map(Amount::Bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_parse() {
        assert_eq!(parse_amount("12"), Ok(Amount::Count(12)));
        assert_eq!(parse_amount(" 0 "), Ok(Amount::Count(0)));
        assert_eq!(parse_amount("10%"), Ok(Amount::Percent(10.0)));
        assert_eq!(parse_amount("12.5 %"), Ok(Amount::Percent(12.5)));
        assert_eq!(parse_amount("100%"), Ok(Amount::Percent(100.0)));
        assert_eq!(parse_amount("64M"), Ok(Amount::Bytes(64 << 20)));
        assert_eq!(parse_amount("1GiB"), Ok(Amount::Bytes(1 << 30)));
        assert_eq!(parse_amount("1gib"), Ok(Amount::Bytes(1 << 30)));
        assert_eq!(parse_amount("2K"), Ok(Amount::Bytes(2048)));
        assert_eq!(parse_amount("2kB"), Ok(Amount::Bytes(2000)));
        assert_eq!(parse_amount("500MB"), Ok(Amount::Bytes(500_000_000)));
        assert_eq!(parse_amount("3GB"), Ok(Amount::Bytes(3_000_000_000)));
        assert_eq!(parse_amount("1TiB"), Ok(Amount::Bytes(1 << 40)));
        assert_eq!(parse_amount("1.5K"), Ok(Amount::Bytes(1536)));
        assert_eq!(parse_amount("4096B"), Ok(Amount::Bytes(4096)));
    }

    #[test]
    fn bad_amounts_say_why() {
        for (input, why) in [
            ("", "does not start with a number"),
            ("%", "does not start with a number"),
            ("abc", "does not start with a number"),
            ("1.5", "whole number"),
            ("101%", "at most 100%"),
            ("10X", "unknown unit \"X\""),
            ("1..2M", "is not a number"),
            ("99999999999999999999", "too large"),
            ("99999999999P", "too large"),
        ] {
            let e = parse_amount(input).unwrap_err();
            assert!(e.contains(why), "{input:?}: {e}");
        }
    }

    #[test]
    fn amounts_resolve_rounding_up() {
        // Of 1000 segments of 8 MiB (2048 blocks of 4 KiB).
        let seg = 8u64 << 20;
        assert_eq!(Amount::Count(7).resolve(1000, seg), 7);
        assert_eq!(Amount::Percent(10.0).resolve(1000, seg), 100);
        assert_eq!(Amount::Percent(10.0).resolve(1001, seg), 101);
        assert_eq!(Amount::Percent(12.5).resolve(1000, seg), 125);
        assert_eq!(Amount::Percent(0.1).resolve(1001, seg), 2);
        assert_eq!(Amount::Percent(0.0).resolve(1000, seg), 0);
        assert_eq!(Amount::Bytes(seg).resolve(1000, seg), 1);
        assert_eq!(Amount::Bytes(seg + 1).resolve(1000, seg), 2);
        assert_eq!(Amount::Bytes(1).resolve(1000, seg), 1);
        assert_eq!(Amount::Bytes(0).resolve(1000, seg), 0);
        // 1% of 2048 blocks is 20.48 blocks: 21.
        assert_eq!(Amount::Percent(1.0).resolve(2048, 4096), 21);
        assert_eq!(Amount::Bytes(1 << 20).resolve(2048, 4096), 256);
        assert_eq!(Amount::Bytes(5).resolve(2048, 0), 0);
    }
}
