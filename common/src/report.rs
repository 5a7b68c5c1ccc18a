//! What a message looks like: every line a command writes to stderr is
//! `PROGRAM: TEXT` (log records add `warning: `, `error: `, `debug: `
//! before the text), and no text carries Rust's `(os error N)`: the
//! system's reason is enough, and the number is noise to an
//! administrator.

use std::fmt::Display;
use std::io;

/// An I/O error as people read it: its text without `(os error N)`.
pub fn io_reason(e: &io::Error) -> String {
    clean(&e.to_string())
}

/// `text` with every ` (os error N)` removed (anywhere: an error's text
/// often quotes another's).
pub fn clean(text: &str) -> String {
    const MARK: &str = " (os error ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let digits = after
            .find(|c: char| !c.is_ascii_digit() && c != '-')
            .unwrap_or(after.len());
        if digits > 0 && after[digits..].starts_with(')') {
            out.push_str(&rest[..at]);
            rest = &after[digits + 1..];
        } else {
            out.push_str(&rest[..at + MARK.len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The line a command prints for the error that ends it:
/// `PROGRAM: TEXT`, with a chain of causes as anyhow's `{:#}` writes it.
pub fn error_line(program: &str, error: &dyn Display) -> String {
    format!("{program}: {}", clean(&error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_numbers_go() {
        let e = io::Error::from_raw_os_error(2);
        assert_eq!(io_reason(&e), "No such file or directory");
        assert_eq!(
            clean("a: Permission denied (os error 13): b (os error 2)"),
            "a: Permission denied: b"
        );
        assert_eq!(clean("(os error x) stays"), "(os error x) stays");
        assert_eq!(clean("ends with (os error "), "ends with (os error ");
        assert_eq!(
            error_line("fsctl", &"no fsd (os error 111)"),
            "fsctl: no fsd"
        );
    }
}
