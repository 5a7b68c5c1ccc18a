//! What fsd.toml and cleanerd.conf have in common: which file is read,
//! and how an error in it is reported (file, line, key, reason).

use std::fmt;
use std::path::{Path, PathBuf};

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file; `None` for the built-in defaults and the command line.
    pub file: Option<PathBuf>,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// The key, when the error concerns one.
    pub key: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl ConfigError {
    /// An error in `file`.
    pub fn in_file(
        file: &Path,
        line: Option<usize>,
        key: Option<&str>,
        reason: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: Some(file.to_path_buf()),
            line,
            key: key.map(str::to_owned),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}", file.display())?,
            None => write!(f, "built-in configuration")?,
        }
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Which file a configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Named on the command line: it must exist.
    Explicit(PathBuf),
    /// The system-wide file (`/etc/lfs/...`) if it exists, else the
    /// built-in defaults.
    System(&'static str),
}

impl Source {
    /// The file to parse and its text, or `None` for the built-in
    /// defaults. Rereading (SIGHUP) applies the same rule.
    pub fn read(&self) -> Result<Option<(PathBuf, String)>, ConfigError> {
        let path = match self {
            Source::Explicit(path) => path.as_path(),
            Source::System(path) => {
                let path = Path::new(path);
                if !path.exists() {
                    return Ok(None);
                }
                path
            }
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::in_file(
                path,
                None,
                None,
                format!("cannot read it: {}", crate::report::io_reason(&e)),
            )
        })?;
        Ok(Some((path.to_path_buf(), text)))
    }
}

/// The 1-based line holding byte `offset` of `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset.min(text.len()))
        .map_or(0, |t| t.matches('\n').count())
        + 1
}

/// If `text`, which is not valid TOML, looks like a nilfs-style `key value` file (nilfs_cleanerd.conf
/// writes `protection_period 3600`), the first such line and its key: the
/// caller explains how to convert it instead of reporting a TOML syntax
/// error. A line qualifies if it is a bare key, blanks, and a value, with
/// no `=`; comments (`#`) and blank lines are skipped.
pub fn nilfs_style_line(text: &str) -> Option<(usize, String)> {
    text.lines().enumerate().find_map(|(i, line)| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.contains('=') || line.starts_with('[') {
            return None;
        }
        let (key, value) = line.split_once(|c: char| c.is_ascii_whitespace())?;
        let bare = key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        (bare && !value.trim().is_empty()).then(|| (i + 1, key.to_owned()))
    })
}

/// What to say about a nilfs-style line (see [`nilfs_style_line`]).
pub fn nilfs_style_reason(key: &str) -> String {
    format!(
        "not TOML: \"{key} VALUE\" is the style of nilfs's configuration files; \
         here it is {key} = VALUE, with text values in double quotes \
         (the shipped file shows every key)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_file_line_and_key() {
        let e = ConfigError::in_file(Path::new("/etc/x"), Some(3), Some("k"), "bad");
        assert_eq!(e.to_string(), "/etc/x:3: k: bad");
        let e = ConfigError {
            file: None,
            line: None,
            key: None,
            reason: "bad".into(),
        };
        assert_eq!(e.to_string(), "built-in configuration: bad");
    }

    #[test]
    fn sources() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "a = 1\n").unwrap();
        assert_eq!(
            Source::Explicit(f.clone()).read().unwrap(),
            Some((f.clone(), "a = 1\n".to_owned()))
        );
        let missing = dir.path().join("missing");
        let e = Source::Explicit(missing.clone()).read().unwrap_err();
        assert!(e.reason.starts_with("cannot read it: "), "{e}");
        assert!(!e.reason.contains("os error"), "{e}");
        assert_eq!(
            Source::System("/nonexistent/lfs.conf").read().unwrap(),
            None
        );
    }

    #[test]
    fn lines() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }

    #[test]
    fn nilfs_style_files_are_recognised() {
        let nilfs = "# nilfs_cleanerd.conf\n\nprotection_period\t3600\nmin_clean_segments 10%\n";
        assert_eq!(
            nilfs_style_line(nilfs),
            Some((3, "protection_period".to_owned()))
        );
        assert_eq!(nilfs_style_line("protection_period = 3600\n"), None);
        assert_eq!(nilfs_style_line("[table]\nkey = 1\n"), None);
        assert_eq!(nilfs_style_line("# only comments\n"), None);
    }
}
