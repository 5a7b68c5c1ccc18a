//! Amounts and times as administrators write them in cleanerd.conf(5).
//!
//! An [`Amount`] is a count of segments or blocks, a percentage, or a
//! number of bytes; which of those it is stays known until the
//! filesystem's geometry is (after connecting to fsd), when
//! [`Amount::resolve`] turns it into a count, always rounding up: asking for
//! "1M" of clean space on 4 KiB blocks means at least 256 blocks, never
//! 255.
//!
//! Byte suffixes, case-insensitive: `K`, `M`, `G`, `T`, `P` and `KiB`, `MiB`,
//! ... are powers of 1024; `kB`, `MB`, `GB`, `TB`, `PB` are powers of 1000
//! (SI); `B` is one byte. Times are seconds, or a number with `ms`, `s`, `m`,
//! `h` or `d`.

use std::fmt;
use std::time::Duration;

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

/// Splits `s` into its leading number (digits and at most one dot) and
/// the rest, trimmed.
fn split_number(s: &str) -> (&str, &str) {
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    (num, unit.trim())
}

/// A non-negative decimal number, or why not.
fn number(num: &str, whole: &str) -> Result<f64, String> {
    if num.is_empty() {
        return Err(format!("{whole:?} does not start with a number"));
    }
    let x: f64 = num
        .parse()
        .map_err(|_| format!("{whole:?}: {num:?} is not a number"))?;
    if !x.is_finite() {
        return Err(format!("{whole:?} is too large"));
    }
    Ok(x)
}

/// The multiplier of a byte suffix.
fn byte_unit(unit: &str) -> Option<u64> {
    let u = unit.to_ascii_lowercase();
    let (binary, si) = match u.as_str() {
        "b" => return Some(1),
        "k" | "kib" => (1, false),
        "kb" => (1, true),
        "m" | "mib" => (2, false),
        "mb" => (2, true),
        "g" | "gib" => (3, false),
        "gb" => (3, true),
        "t" | "tib" => (4, false),
        "tb" => (4, true),
        "p" | "pib" => (5, false),
        "pb" => (5, true),
        _ => return None,
    };
    Some(if si { 1000u64 } else { 1024u64 }.pow(binary))
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
    let mult = byte_unit(unit).ok_or_else(|| {
        format!(
            "{s:?} has an unknown unit {unit:?} (use %, K, M, G, T, KiB, MiB, ... (powers of 1024), kB, MB, GB, ... (powers of 1000) or B)"
        )
    })?;
    let bytes = (x * mult as f64).ceil();
    if bytes >= u64::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(Amount::Bytes(bytes as u64))
}

/// Parses a time: `"30"`, `"1.5"` (seconds), `"30s"`, `"500ms"`, `"5m"`,
/// `"1h"`, `"1d"`, `"1.5s"`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = split_number(s);
    let x = number(num, s)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => {
            return Err(format!(
                "{s:?} has an unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    seconds(x * scale).map_err(|e| format!("{s:?}: {e}"))
}

/// A non-negative, finite number of seconds as a [`Duration`].
pub fn seconds(x: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(x).map_err(|_| format!("{x} seconds is not a usable time"))
}

/// A duration as the shortest of `1.5s`, `5m`, `1h` that is exact.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if d.subsec_nanos() == 0 {
        let secs = d.as_secs();
        if secs != 0 && secs % 3600 == 0 {
            return format!("{}h", secs / 3600);
        }
        if secs != 0 && secs % 60 == 0 {
            return format!("{}m", secs / 60);
        }
    }
    format!("{s}s")
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

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration(" 10 S "), Ok(Duration::from_secs(10)));
        for (input, why) in [
            ("", "does not start with a number"),
            ("-1s", "does not start with a number"),
            ("5w", "unknown unit \"w\""),
            ("1.2.3", "is not a number"),
        ] {
            let e = parse_duration(input).unwrap_err();
            assert!(e.contains(why), "{input:?}: {e}");
        }
    }

    #[test]
    fn durations_format() {
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
