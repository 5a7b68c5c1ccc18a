//! Golden files: the expected output of a command, kept in
//! `tests/golden/` and compared byte for byte. With `LFS_BLESS=1` in the
//! environment [`check`] writes the output instead of comparing it (then
//! review the diff and commit the files).
//!
//! Output that changes from run to run is normalised before the
//! comparison, as little as needed: dates and times ([`dates`]), time
//! fields of JSON ([`json_times`]), or, for counters, every number and
//! the spacing around it ([`numbers`]), which leaves the layout.

use std::path::PathBuf;

use crate::workspace_root;

/// The variable that makes [`check`] rewrite the golden files.
pub const BLESS: &str = "LFS_BLESS";

/// Where the golden files are.
pub fn dir() -> PathBuf {
    workspace_root().join("tests").join("golden")
}

fn blessing() -> bool {
    std::env::var_os(BLESS).is_some_and(|v| v == "1")
}

/// Panics unless `actual` is the content of the golden file `name`, naming
/// the first line that differs; with `LFS_BLESS=1`, writes it instead.
#[track_caller]
pub fn check(name: &str, actual: &str) {
    let path = dir().join(name);
    if blessing() {
        std::fs::create_dir_all(dir())
            .unwrap_or_else(|e| panic!("creating {}: {e}", dir().display()));
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reading {}: {e} (run the test with {BLESS}=1 to create it)",
            path.display()
        )
    });
    if expected == actual {
        return;
    }
    let (n, want, got) = expected
        .lines()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(actual.lines().map(Some).chain(std::iter::repeat(None)))
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| (i + 1, a.unwrap_or("(end)"), b.unwrap_or("(end)")))
        .unwrap_or((0, "(a trailing newline)", "(none)"));
    panic!(
        "the output differs from {} at line {n}:\n  golden: {want:?}\n  now:    {got:?}\n\
         --- whole output ---\n{actual}\n\
         (if the change is meant, rerun with {BLESS}=1 and commit the file)",
        path.display()
    );
}

/// Replaces every `YYYY-MM-DD` by the letters and every `HH:MM:SS` by
/// `hh:mm:ss`.
pub fn dates(text: &str) -> String {
    let date = "dddd-dd-dd";
    let time = "dd:dd:dd";
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let at = |shape: &str| {
            bytes.get(i..i + shape.len()).is_some_and(|w| {
                w.iter().zip(shape.bytes()).all(|(&c, s)| {
                    if s == b'd' {
                        c.is_ascii_digit()
                    } else {
                        c == s
                    }
                })
            })
        };
        if at(date) {
            out.push_str("YYYY-MM-DD");
            i += date.len();
        } else if at(time) {
            out.push_str("hh:mm:ss");
            i += time.len();
        } else {
            // A whole character, so that UTF-8 survives.
            let c = text[i..].chars().next().unwrap_or_default();
            out.push(c);
            i += c.len_utf8().max(1);
        }
    }
    out
}

/// Replaces every checksum written as `0x` and 8 hex digits by
/// `0x________` (checksums cover times).
pub fn crcs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("0x") {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let digits = tail
            .get(2..10)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
        if digits.is_some() {
            out.push_str("0x________");
            rest = tail.get(10..).unwrap_or_default();
        } else {
            out.push_str("0x");
            rest = tail.get(2..).unwrap_or_default();
        }
    }
    out.push_str(rest);
    out
}

/// Replaces every run of digits (with a decimal point inside) by `N` and
/// every run of spaces by one space: what stays is the layout.
pub fn numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_digit() || *d == '.')
            {
                chars.next();
            }
            out.push('N');
        } else if c == ' ' {
            while chars.peek() == Some(&' ') {
                chars.next();
            }
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// Sets every field named in `keys`, at any depth, to 0, and returns the
/// document pretty-printed.
pub fn json_times(text: &str, keys: &[&str]) -> String {
    fn walk(v: &mut serde_json::Value, keys: &[&str]) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if keys.contains(&k.as_str()) {
                        *x = serde_json::Value::from(0);
                    } else {
                        walk(x, keys);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(x, keys)),
            _ => {}
        }
    }
    let mut v: serde_json::Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    walk(&mut v, keys);
    let mut s = serde_json::to_string_pretty(&v).expect("a JSON value prints");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_are_replaced() {
        assert_eq!(
            dates("cp 2026-12-04 03:26:32 UTC x 1234-5-67 é"),
            "cp YYYY-MM-DD hh:mm:ss UTC x 1234-5-67 é"
        );
    }

    #[test]
    fn checksums_are_replaced() {
        assert_eq!(
            crcs("crc 0x90fcb314 ok; 0x12 0xzz 0x0123456789"),
            "crc 0x________ ok; 0x12 0xzz 0x________89"
        );
    }

    #[test]
    fn numbers_and_spacing_are_replaced() {
        assert_eq!(
            numbers("fsyncs        12\nwa    1.250 x2"),
            "fsyncs N\nwa N xN"
        );
    }

    #[test]
    fn json_time_fields_are_zeroed_at_any_depth() {
        let s = json_times(
            r#"{"a":[{"last_mod":5,"n":1}],"ctime_ns":7}"#,
            &["last_mod", "ctime_ns"],
        );
        assert_eq!(
            s,
            "{\n  \"a\": [\n    {\n      \"last_mod\": 0,\n      \"n\": 1\n    }\n  ],\n  \"ctime_ns\": 0\n}\n"
        );
    }
}
