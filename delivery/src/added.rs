//! What a patch adds, read from git's diff format: per file, the added lines with their line
//! numbers in the new file, and the totals the size gate counts. A binary file's literal is not
//! read as lines (it is counted by the bytes it adds).

/// One file of a patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileChange {
    /// The new path (the old one for a deletion).
    pub path: String,
    /// `(line in the new file, text)` of each added line.
    pub added: Vec<(u64, String)>,
    /// How many lines it removes.
    pub removed: u64,
    pub binary: bool,
}

/// Every file of a patch, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Added {
    pub files: Vec<FileChange>,
    /// Bytes of added lines (and binary literals), the size gate's measure.
    pub added_bytes: u64,
}

/// `a/x` or `b/x` of a `diff --git` line, quoted names included as git prints them.
fn strip_side(name: &str) -> String {
    let unquoted = name.trim().trim_matches('"');
    unquoted.strip_prefix("b/").or_else(|| unquoted.strip_prefix("a/")).unwrap_or(unquoted).to_owned()
}

/// Reads `patch` (git's `diff --binary` output).
pub fn read(patch: &[u8]) -> Added {
    let text = String::from_utf8_lossy(patch);
    let mut added = Added::default();
    let mut next_line = 0u64;
    let mut in_hunk = false;
    for line in text.split('\n') {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            // The new name is the part after the last ` b/`: names with spaces stay whole.
            let path = rest.rfind(" b/").map(|at| strip_side(&rest[at + 1..])).unwrap_or_else(|| strip_side(rest));
            added.files.push(FileChange { path, ..FileChange::default() });
            in_hunk = false;
            continue;
        }
        let Some(file) = added.files.last_mut() else { continue };
        if let Some(rest) = line.strip_prefix("+++ ") {
            if !in_hunk && rest.trim() != "/dev/null" {
                file.path = strip_side(rest);
            }
            continue;
        }
        if line.starts_with("GIT binary patch") {
            file.binary = true;
            in_hunk = false;
            continue;
        }
        if file.binary {
            added.added_bytes += line.len() as u64;
            continue;
        }
        if let Some(header) = line.strip_prefix("@@ ") {
            // `@@ -a,b +c,d @@`: the new side starts at line c.
            next_line = header
                .split_whitespace()
                .find_map(|part| part.strip_prefix('+'))
                .and_then(|start| start.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            in_hunk = true;
            continue;
        }
        if !in_hunk {
            continue;
        }
        if let Some(text) = line.strip_prefix('+') {
            added.added_bytes += text.len() as u64 + 1;
            file.added.push((next_line, text.to_owned()));
            next_line += 1;
        } else if line.starts_with(' ') {
            next_line += 1;
        } else if line.starts_with('-') {
            file.removed += 1;
        }
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_lines_carry_their_line_in_the_new_file() {
        let patch = b"diff --git a/src/x.rs b/src/x.rs\nindex 1..2 100644\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -3,2 +3,3 @@ fn a()\n keep\n+new one\n keep\n@@ -10,0 +11,1 @@\n+new two\ndiff --git a/my file.txt b/my file.txt\nnew file mode 100644\n--- /dev/null\n+++ b/my file.txt\n@@ -0,0 +1 @@\n+hello\n";
        let read = read(patch);
        let files: Vec<(&str, Vec<(u64, &str)>)> = read
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.added.iter().map(|(n, t)| (*n, t.as_str())).collect()))
            .collect();
        assert_eq!(files, [("src/x.rs", vec![(4, "new one"), (11, "new two")]), ("my file.txt", vec![(1, "hello")])]);
        assert_eq!(read.added_bytes, 8 + 8 + 6);
        assert_eq!(read.files.iter().map(|f| f.removed).sum::<u64>(), 0);
        let removal = b"diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,2 +1,1 @@\n-gone\n kept\n";
        assert_eq!(read_removed(removal), 1);
    }

    fn read_removed(patch: &[u8]) -> u64 {
        read(patch).files.iter().map(|f| f.removed).sum()
    }

    #[test]
    fn a_binary_literal_is_counted_not_read_as_lines() {
        let patch = b"diff --git a/b.bin b/b.bin\nnew file mode 100644\nindex 0..1\nGIT binary patch\nliteral 5\nMcmZ?d\n\nliteral 0\nKcmV+b0001\n";
        let read = read(patch);
        assert!(read.files[0].binary && read.files[0].added.is_empty());
        assert!(read.added_bytes > 0);
    }
}
