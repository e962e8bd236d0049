//! The `--secrets-file`: dotenv `KEY=VALUE` lines with the values for Adapters' `credentialEnv`,
//! refused unless only its owner can read it.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Why a secrets file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} has mode {mode:o}; a secrets file must be 0600")]
    Mode { path: PathBuf, mode: u32 },
    #[error("{path}:{line}: expected KEY=VALUE")]
    Syntax { path: PathBuf, line: usize },
}

/// The variables of a dotenv file: `KEY=VALUE` lines, `export ` prefixes, `#` comments and blank
/// lines allowed, one layer of matching quotes removed.
pub fn read(path: &Path) -> Result<HashMap<String, String>, SecretsError> {
    let read = |source| SecretsError::Read { path: path.to_owned(), source };
    let mode = std::fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
    if mode != 0o600 {
        return Err(SecretsError::Mode { path: path.to_owned(), mode });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    let mut secrets = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(SecretsError::Syntax { path: path.to_owned(), line: number + 1 });
        };
        secrets.insert(key.trim().to_owned(), unquote(value.trim()).to_owned());
    }
    Ok(secrets)
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote).and_then(|v| v.strip_suffix(quote)) {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str, mode: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secrets.env");
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        (dir, path)
    }

    #[test]
    fn dotenv_lines_are_read_and_an_open_file_is_refused() {
        let (_dir, path) = file("# keys\nexport A=1\nB = \"two words\"\nC='x=y'\n\n", 0o600);
        let secrets = read(&path).expect("read");
        assert_eq!(secrets.get("A").map(String::as_str), Some("1"));
        assert_eq!(secrets.get("B").map(String::as_str), Some("two words"));
        assert_eq!(secrets.get("C").map(String::as_str), Some("x=y"));
        let (_dir, open) = file("A=1\n", 0o644);
        assert!(matches!(read(&open), Err(SecretsError::Mode { mode: 0o644, .. })));
        let (_dir, broken) = file("A=1\nnot a pair\n", 0o600);
        assert_eq!(
            read(&broken).expect_err("syntax").to_string(),
            format!("{}:2: expected KEY=VALUE", broken.display())
        );
    }
}
