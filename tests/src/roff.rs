//! Turning man page source and mandoc output into plain text to search.

/// Roff source with the escapes that split option names removed: `\-`
/// becomes `-`, font changes (`\fB`, `\f(CW`, `\f[B]`) and zero-width
/// escapes (`\&`, `\%`, `\:`, ...) disappear, `\e` becomes `\`.
pub fn normalise(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('-') => out.push('-'),
            Some('e') => out.push('\\'),
            Some('&' | '%' | ':' | '/' | ',' | '^' | '|' | 'c' | ')') => {}
            Some('f') => match chars.next() {
                Some('(') => {
                    chars.next();
                    chars.next();
                }
                Some('[') => {
                    for c in chars.by_ref() {
                        if c == ']' {
                            break;
                        }
                    }
                }
                _ => {}
            },
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// mandoc's `-Tascii` output without its overstrikes: bold is `X\bX` and
/// underline `_\bX`; keep the last character of each.
pub fn strip_overstrike(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `text` contains `word` as a whole word: not inside a longer
/// word or option name (`-b` is not found in `--block-size`, `df` is not
/// found in `pdf`).
pub fn mentions(text: &str, word: &str) -> bool {
    let part_of_word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text.get(..at).and_then(|s| s.chars().next_back());
        let after = text.get(at + word.len()..).and_then(|s| s.chars().next());
        !before.is_some_and(part_of_word) && !after.is_some_and(part_of_word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_removes_escapes_inside_option_names() {
        assert_eq!(
            normalise(r"\fB\-b\fR, \fB\-\-block\-size\fP \fI\,bytes\/\fR"),
            "-b, --block-size bytes"
        );
        assert_eq!(normalise(r"\f(CW\-\-size\fP \f[B]\-L\f[]"), "--size -L");
        assert_eq!(normalise(r"\&.lfs \e \(em"), r".lfs \ \(em");
    }

    #[test]
    fn strip_overstrike_keeps_the_visible_character() {
        assert_eq!(strip_overstrike("-\u{8}-b\u{8}b x _\u{8}y"), "-b x y");
    }

    #[test]
    fn mentions_matches_whole_words_only() {
        assert!(mentions("use -b to set", "-b"));
        assert!(mentions("[-b bytes]", "-b"));
        assert!(mentions("-b,", "-b"));
        assert!(!mentions("--block-size", "-b"));
        assert!(!mentions("--block-size", "--block"));
        assert!(!mentions("a pdf file", "df"));
        assert!(mentions("fsctl df\n", "df"));
        assert!(!mentions("", "-b"));
    }
}
