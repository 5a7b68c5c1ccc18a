//! Sizes and times as administrators write them, in configuration files
//! and on command lines, and sizes as the commands print them.
//!
//! Byte suffixes, case-insensitive, as coreutils (truncate, dd) reads
//! them: `K`, `M`, `G`, `T`, `P` and `KiB`, `MiB`, ... are powers of 1024;
//! `kB`, `MB`, `GB`, `TB`, `PB` are powers of 1000 (SI); `B` is one byte.
//! A number may have a fractional part (`1.5G`); the byte count is rounded
//! up. Times are seconds, or a number with `ms`, `s`, `m`, `h` or `d`.

use std::time::Duration;

/// The byte suffixes, for messages.
pub const SIZE_UNITS: &str =
    "K, M, G, T, P, KiB, MiB, ... (powers of 1024), kB, MB, GB, ... (powers of 1000) or B";

/// Splits `s` into its leading number (digits and dots) and the rest,
/// both trimmed.
pub fn split_number(s: &str) -> (&str, &str) {
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    (num, unit.trim())
}

/// A non-negative decimal number, or why not; `whole` names the input in
/// messages.
pub fn number(num: &str, whole: &str) -> Result<f64, String> {
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

/// The multiplier of a byte suffix (`""` is bytes), or `None` if `unit`
/// is not one.
pub fn byte_multiplier(unit: &str) -> Option<u64> {
    let (power, si) = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => return Some(1),
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
    Some(if si { 1000u64 } else { 1024u64 }.pow(power))
}

/// Parses a byte count: `"4096"`, `"64M"`, `"1GiB"`, `"500MB"`, `"1.5G"`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (num, unit) = split_number(s);
    let x = number(num, s)?;
    let mult = byte_multiplier(unit)
        .ok_or_else(|| format!("{s:?} has an unknown unit {unit:?} (use {SIZE_UNITS})"))?;
    if unit.is_empty() && num.contains('.') {
        return Err(format!("{s:?}: a byte count must be a whole number"));
    }
    // Exact for whole numbers, which is what people mostly write; the
    // float path only for fractions such as 1.5G.
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| format!("{s:?} is too large"));
    }
    let bytes = (x * mult as f64).ceil();
    if bytes >= u64::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(bytes as u64)
}

/// `1073741824` → `1.0 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
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
    fn sizes_binary_and_si() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 2K "), Ok(2048));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert_eq!(parse_size("2kB"), Ok(2000));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1gib"), Ok(1 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        // The point of one parser: MB is 10^6 wherever it is read.
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("500MB"), Ok(500_000_000));
        assert_eq!(parse_size("3gb"), Ok(3_000_000_000));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert_eq!(
            parse_size("0.5"),
            Err("\"0.5\": a byte count must be a whole number".into())
        );
    }

    #[test]
    fn bad_sizes_say_why() {
        for (input, why) in [
            ("", "does not start with a number"),
            ("G", "does not start with a number"),
            ("1X", "unknown unit \"X\""),
            ("1..2M", "is not a number"),
            ("99999999999999999999", "too large"),
            ("99999999999P", "too large"),
        ] {
            let e = parse_size(input).unwrap_err();
            assert!(e.contains(why), "{input:?}: {e}");
        }
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
        assert_eq!(human_bytes(3 << 19), "1.5 MiB");
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
