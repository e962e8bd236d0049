//! What a proposal adds, per file: the added lines with their line numbers in the new file, and
//! the bytes the size gate counts. [`from_objects`] reads it from git's objects (the proposal's
//! tree against its base), which is what the review gates judge: every added or changed blob,
//! text by lines, binary by its printable runs, sizes from the blobs. [`read`] reads the patch
//! text, a display format only (`proposals diff --stat`): a patch can dress content up as
//! headers, and a binary literal is compressed.

use std::collections::HashMap;
use std::path::Path;

use roundtable_specs::secrets::patterns;

use crate::changes::{self, Blob, Blobs, ObjectsError};

/// One file a proposal adds, changes or deletes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileChange {
    /// The new path (the old one for a deletion).
    pub path: String,
    /// `(line in the new file, text)` of each added line; for a binary file, `(byte offset,
    /// text)` of each printable run it adds.
    pub added: Vec<(u64, String)>,
    /// How many lines it removes.
    pub removed: u64,
    pub binary: bool,
    /// The proposal deletes the file: its path is gone from the tree, so it names nothing new.
    pub deleted: bool,
    /// Bytes of the new blob past [`SCAN_LIMIT`], counted by the size gate and not scanned: the
    /// secrets gate reports them, as it cannot say they hold no secret.
    pub unscanned: u64,
}

/// Every file of a proposal, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Added {
    pub files: Vec<FileChange>,
    /// Bytes the proposal adds, the size gate's measure: from the objects, a new file's whole
    /// size, a changed text file's added lines, a changed binary file's whole new size (its
    /// literal in a patch is compressed and says nothing of the bytes that land).
    pub added_bytes: u64,
}

/// The most of one blob held in memory and scanned. A blob over it is scanned in its first
/// `SCAN_LIMIT` bytes, its whole size still counts, and the rest is reported as unscanned (a
/// `secrets` finding: what was not read may hold one), never passed silently.
pub const SCAN_LIMIT: u64 = 16 << 20;

/// The shortest run of printable bytes read from a binary file (as `strings` does).
pub const MIN_RUN: usize = 8;

/// What `patch` adds to `base` in `repo`, read from the objects: the patch applied to the base's
/// tree in a scratch index, then every blob that tree adds or changes.
pub fn from_objects(repo: &Path, base: &str, patch: &[u8]) -> Result<Added, ObjectsError> {
    let tree = changes::proposed_tree(repo, base, patch)?;
    let mut blobs = Blobs::open(repo, SCAN_LIMIT)?;
    let mut added = Added::default();
    for change in changes::changes(repo, base, &tree)? {
        let new = change.new_blob.as_deref().map(|id| blobs.read(id)).transpose()?;
        let old = change.old_blob.as_deref().map(|id| blobs.read(id)).transpose()?;
        let (file, bytes) = compared(change.path, old.as_ref(), new.as_ref());
        added.added_bytes += bytes;
        added.files.push(file);
    }
    Ok(added)
}

/// A blob's kept bytes as text, or none when it is binary: it holds a NUL byte or is not UTF-8
/// (a character cut by the scan limit is not held against it).
fn as_text(blob: &Blob) -> Option<&str> {
    if blob.bytes.contains(&0) {
        return None;
    }
    match std::str::from_utf8(&blob.bytes) {
        Ok(text) => Some(text),
        Err(cut) if cut.error_len().is_none() && blob.unread() > 0 => {
            std::str::from_utf8(&blob.bytes[..cut.valid_up_to()]).ok()
        }
        Err(_) => None,
    }
}

/// Each line with its number, from 1.
fn numbered_lines(text: &str) -> Vec<(u64, String)> {
    text.lines().enumerate().map(|(n, line)| (n as u64 + 1, line.to_owned())).collect()
}

fn printable(byte: u8) -> bool {
    byte == b'\t' || (0x20..0x7f).contains(&byte)
}

/// Whether a run of printable text goes on through `c`: the characters the secret rules read
/// through ([`patterns::invisible`]), so a secret split by a zero-width space or coloured by an
/// escape sequence (ESC, then printable bytes) stays one run, as it stays one token in a text
/// file. NUL and the other ASCII controls still end a run: they are what makes a file binary.
fn read_through(c: char) -> bool {
    c == '\u{1b}' || (!c.is_ascii() && patterns::invisible(c))
}

/// The character whose UTF-8 encoding starts `bytes`, and its length.
fn utf8_char(bytes: &[u8]) -> Option<(char, usize)> {
    let length = match bytes.first()? {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    };
    let c = std::str::from_utf8(bytes.get(..length)?).ok()?.chars().next()?;
    Some((c, length))
}

/// The runs of at least [`MIN_RUN`] printable ASCII bytes in `bytes`, with their offsets, and the
/// same in UTF-16LE (text as Windows tools and some formats store it, one NUL after each byte).
/// A run is read through [`read_through`] characters, then normalised as text files are
/// ([`patterns::shown`]): escape sequences and invisible characters removed.
pub fn printable_runs(bytes: &[u8]) -> Vec<(u64, String)> {
    let mut runs = Vec::new();
    let mut flush = |start: usize, run: &mut String| {
        let shown = patterns::shown(run).into_owned();
        if shown.len() >= MIN_RUN {
            runs.push((start as u64, shown));
        }
        run.clear();
    };
    let mut run = String::new();
    let mut start = 0;
    let mut at = 0;
    while at < bytes.len() {
        let (c, length) = match bytes[at] {
            byte if printable(byte) => (char::from(byte), 1),
            _ => utf8_char(&bytes[at..]).filter(|(c, _)| read_through(*c)).unwrap_or(('\0', 1)),
        };
        if c == '\0' {
            flush(start, &mut run);
        } else {
            if run.is_empty() {
                start = at;
            }
            run.push(c);
        }
        at += length;
    }
    flush(start, &mut run);
    for parity in [0, 1] {
        let mut run = String::new();
        let mut start = 0;
        for (n, pair) in bytes.get(parity..).unwrap_or_default().chunks_exact(2).enumerate() {
            let unit = char::from_u32(u32::from(pair[0]) | u32::from(pair[1]) << 8);
            match unit.filter(|c| (c.is_ascii() && printable(*c as u8)) || read_through(*c)) {
                Some(c) => {
                    if run.is_empty() {
                        start = parity + 2 * n;
                    }
                    run.push(c);
                }
                None => flush(start, &mut run),
            }
        }
        flush(start, &mut run);
    }
    runs.sort();
    runs
}

/// What one path adds, and the bytes it counts for: `old` is the base's blob (none for a new
/// file), `new` the proposal's (none for a deletion). Only what is new is reported: a line (or
/// printable run) is added when the base's version does not already have it, counted with
/// repeats, so a secret the base already held is not blamed on the proposal.
pub fn compared(path: String, old: Option<&Blob>, new: Option<&Blob>) -> (FileChange, u64) {
    let Some(new) = new else {
        let (binary, removed) = match old.map(|old| (old, as_text(old))) {
            Some((_, Some(text))) => (false, text.lines().count() as u64),
            Some((_, None)) => (true, 0),
            None => (false, 0),
        };
        return (FileChange { path, removed, binary, deleted: true, ..FileChange::default() }, 0);
    };
    let new_text = as_text(new);
    let pieces = |blob: &Blob| match new_text {
        Some(_) => as_text(blob).map_or_else(|| numbered_lines(&String::from_utf8_lossy(&blob.bytes)), numbered_lines),
        None => printable_runs(&blob.bytes),
    };
    let mut before: HashMap<String, u64> = HashMap::new();
    let old_pieces = old.map(pieces).unwrap_or_default();
    for (_, piece) in &old_pieces {
        *before.entry(piece.clone()).or_default() += 1;
    }
    let mut added = Vec::new();
    for (at, piece) in pieces(new) {
        match before.get_mut(&piece) {
            Some(count) if *count > 0 => *count -= 1,
            _ => added.push((at, piece)),
        }
    }
    let both_text = new_text.is_some() && old.is_some_and(|old| as_text(old).is_some());
    let removed = if both_text { before.values().sum() } else { 0 };
    let bytes = match old {
        Some(_) if both_text => added.iter().map(|(_, line)| line.len() as u64 + 1).sum::<u64>() + new.unread(),
        _ => new.size,
    };
    let file = FileChange { path, added, removed, binary: new_text.is_none(), deleted: false, unscanned: new.unread() };
    (file, bytes)
}

/// `a/x` or `b/x` of a `diff --git` line, quoted names included as git prints them.
fn strip_side(name: &str) -> String {
    let unquoted = name.trim().trim_matches('"');
    unquoted.strip_prefix("b/").or_else(|| unquoted.strip_prefix("a/")).unwrap_or(unquoted).to_owned()
}

/// Reads `patch` (git's `diff --binary` output) for display; the gates read [`from_objects`].
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
        // Inside a hunk, `+++ x` is an added line reading `++ x`, not a header.
        if let Some(rest) = line.strip_prefix("+++ ").filter(|_| !in_hunk) {
            if rest.trim() == "/dev/null" {
                file.deleted = true;
            } else {
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
        let deletion = super::read(
            b"diff --git a/a b/a\ndeleted file mode 100644\n--- a/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n",
        );
        assert!(deletion.files[0].deleted && !read.files[0].deleted);
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

    fn blob(bytes: &[u8]) -> Blob {
        Blob { bytes: bytes.to_vec(), size: bytes.len() as u64 }
    }

    /// Issue 48, item 4: a line `++ …` is a `+++ …` line in a patch and was read as a header.
    #[test]
    fn a_line_that_looks_like_a_header_in_a_patch_is_an_added_line() {
        let patch =
            b"diff --git a/k.txt b/k.txt\n--- a/k.txt\n+++ b/k.txt\n@@ -1 +1,2 @@\n keep\n+++ AKIAIOSFODNN7EXAMPLF\n";
        let read = read(patch);
        assert_eq!(read.files[0].path, "k.txt");
        assert_eq!(read.files[0].added, [(2, "++ AKIAIOSFODNN7EXAMPLF".to_owned())]);
        let (file, bytes) =
            compared("k.txt".into(), Some(&blob(b"keep\n")), Some(&blob(b"keep\n++ AKIAIOSFODNN7EXAMPLF\n")));
        assert_eq!(file.added, [(2, "++ AKIAIOSFODNN7EXAMPLF".to_owned())]);
        assert_eq!(bytes, 24);
    }

    /// Issue 48, item 5: one NUL byte made a file binary and its content unread.
    #[test]
    fn a_binary_blob_is_read_by_its_printable_runs() {
        let mut bytes = b"\0\x01key=AKIAIOSFODNN7EXAMPLF\n-----BEGIN RSA PRIVATE KEY-----\nMII\xff".to_vec();
        // The same key written as UTF-16LE, as some formats store text.
        bytes.extend("AKIAIOSFODNN7EXAMPLG".bytes().flat_map(|b| [b, 0]));
        let (file, bytes_counted) = compared("b.bin".into(), None, Some(&blob(&bytes)));
        assert!(file.binary);
        let runs: Vec<&str> = file.added.iter().map(|(_, run)| run.as_str()).collect();
        assert_eq!(runs, ["key=AKIAIOSFODNN7EXAMPLF", "-----BEGIN RSA PRIVATE KEY-----", "AKIAIOSFODNN7EXAMPLG"]);
        assert_eq!(file.added[0].0, 2, "a run carries its byte offset");
        assert_eq!(bytes_counted, bytes.len() as u64);
    }

    /// Hostile pass B6: a zero-width space or an ANSI colour inside a token cut a binary file's
    /// printable run in two, where a text file's reader reads through them.
    #[test]
    fn a_binary_run_reads_through_what_text_reads_through() {
        let token = "ghp_R8nQ2vX7kLm4pT9wZ3bY6cF1hJ5sD0aE8gU2";
        let (head, tail) = token.split_at(14);
        let mut bytes = format!("\0{head}\u{200b}{tail}\0{head}\u{1b}[31m{tail}\u{1b}[0m\x01\x01").into_bytes();
        bytes.extend(format!("{head}\u{2060}{tail}").encode_utf16().flat_map(u16::to_le_bytes));
        let runs: Vec<String> = printable_runs(&bytes).into_iter().map(|(_, run)| run).collect();
        assert_eq!(runs, [token; 3], "each run is the whole token, normalised");
        let split: Vec<String> =
            printable_runs(b"\0ghp_R8nQ2vX7\x01kLm4pT9wZ3bY6").into_iter().map(|(_, r)| r).collect();
        assert_eq!(split, ["ghp_R8nQ2vX7", "kLm4pT9wZ3bY6"], "other control bytes still end a run");
    }

    /// Issue 48, item 6: a binary file counts its real size, not its compressed literal's.
    #[test]
    fn sizes_come_from_the_blobs() {
        let big = Blob { bytes: vec![0; 1024], size: 64 << 20 };
        assert_eq!(compared("new.bin".into(), None, Some(&big)).1, 64 << 20);
        assert_eq!(compared("changed.bin".into(), Some(&blob(b"\0old")), Some(&big)).1, 64 << 20);
        let (file, _) = compared("new.bin".into(), None, Some(&big));
        assert_eq!(file.unscanned, (64 << 20) - 1024, "what was not held is said");
        let (file, bytes) = compared("t.txt".into(), Some(&blob(b"a\nb\n")), Some(&blob(b"a\nnew\nb\n")));
        assert_eq!((bytes, file.removed), (4, 0), "a changed text file counts its added lines");
        assert_eq!(
            compared("gone".into(), Some(&blob(b"a\nb\n")), None),
            (FileChange { path: "gone".into(), removed: 2, deleted: true, ..FileChange::default() }, 0)
        );
    }

    #[test]
    fn what_the_base_already_had_is_not_blamed_on_the_proposal() {
        let base = blob(b"old = AKIAIOSFODNN7EXAMPLF\nx\n");
        let new = blob(b"x\nold = AKIAIOSFODNN7EXAMPLF\nnew = AKIAIOSFODNN7EXAMPLG\nx\n");
        let (file, _) = compared("k".into(), Some(&base), Some(&new));
        assert_eq!(file.added, [(3, "new = AKIAIOSFODNN7EXAMPLG".to_owned()), (4, "x".to_owned())]);
        let (bin, _) = compared(
            "b".into(),
            Some(&blob(b"\0AKIAIOSFODNN7EXAMPLF")),
            Some(&blob(b"\0AKIAIOSFODNN7EXAMPLF\0more-text-here")),
        );
        assert_eq!(bin.added, [(22, "more-text-here".to_owned())]);
    }

    #[test]
    fn a_character_cut_by_the_scan_limit_keeps_a_text_file_text() {
        let cut = Blob { bytes: "aé".as_bytes()[..2].to_vec(), size: 100 };
        assert!(as_text(&cut).is_some());
        assert!(as_text(&blob(&"aé".as_bytes()[..2])).is_none(), "a whole blob that ends mid-character is binary");
        assert!(as_text(&blob(b"a\0b")).is_none());
    }
}
