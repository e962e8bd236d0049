//! The proposal page's diff: the parsed files (`diff.rs`) as rows of a unified or a split view,
//! every text escaped as the CLI escapes it, with the review gates' findings and the proposal's
//! flags placed at their file and, where they name one, their line.

use roundtable_specs::delivery::{Finding, GateAction};
use roundtable_specs::session::ProposalFlag;

use super::diff::{FileDiff, Hunk, Kind, Line};
use super::view::{shown, word};

/// How the page lays out each file's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One column of lines, old and new numbers side by side.
    Unified,
    /// The old file on the left, the new on the right, a removed line beside what replaced it.
    Split,
}

/// A finding or a flag where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// `block`, `review` or `off` (a finding's action), or `flag`.
    pub class: String,
    pub text: String,
}

/// One side of a row: a line number and the line, or nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cell {
    /// `add`, `del`, `ctx`, or `none` for a side with no line.
    pub class: &'static str,
    pub number: Option<u64>,
    pub text: String,
    /// The line has no newline at the end of the file.
    pub no_newline: bool,
}

/// One row of a file's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    /// `hunk` (its `text` is the header), or the line's kind (`add`, `del`, `ctx`) in the unified
    /// layout, or `pair` in the split layout.
    pub class: &'static str,
    /// The anchor of a row a note is at (`f2-n14`: file 2, new line 14).
    pub id: Option<String>,
    /// The unified layout's one line: `old` and `new` carry its numbers, `text` its text.
    pub text: String,
    pub old: Cell,
    pub new: Cell,
    /// What the gates and flags say of this line, shown beneath it.
    pub notes: Vec<Note>,
}

/// One file as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileView {
    /// `f1`, `f2`, …: the file's anchor, from the list of files.
    pub anchor: String,
    pub path: String,
    /// Where a renamed or copied file came from.
    pub from: Option<String>,
    pub status: &'static str,
    pub similarity: Option<u8>,
    /// `100644 → 100755`, when the mode changed.
    pub mode: Option<String>,
    pub binary: bool,
    pub added: u64,
    pub removed: u64,
    /// Notes about the file as a whole, or about a line this view does not show.
    pub notes: Vec<Note>,
    /// Every note of the file, at its head and at its lines.
    pub noted: usize,
    pub rows: Vec<Row>,
}

/// The diff as the page shows it, and where each finding and flag was placed (`#anchor`), in
/// the order given, for the lists above the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reviewed {
    pub files: Vec<FileView>,
    pub finding_links: Vec<Option<String>>,
    pub flag_links: Vec<Option<String>>,
}

/// A line's text as the page shows it: tabs as four spaces (the CLI's escape would show them as
/// `\t`), hidden characters escaped.
fn text_of(line: &str) -> String {
    shown(&line.replace('\t', "    "))
}

fn class_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Added => "add",
        Kind::Removed => "del",
        Kind::Context => "ctx",
    }
}

fn cell(line: &Line, number: Option<u64>) -> Cell {
    Cell { class: class_of(line.kind), number, text: text_of(&line.text), no_newline: line.no_newline }
}

fn hunk_row(hunk: &Hunk) -> Row {
    // As git writes it: a count of one is left out.
    let range = |start: u64, count: u64| if count == 1 { start.to_string() } else { format!("{start},{count}") };
    let header = format!(
        "@@ -{} +{} @@ {}",
        range(hunk.old_start, hunk.old_count),
        range(hunk.new_start, hunk.new_count),
        hunk.section
    );
    Row {
        class: "hunk",
        id: None,
        text: text_of(header.trim_end()),
        old: Cell::default(),
        new: Cell::default(),
        notes: Vec::new(),
    }
}

/// The unified layout: every line in order, numbered on the side(s) it has.
fn unified_rows(file: &FileDiff) -> Vec<Row> {
    let mut rows = Vec::new();
    for hunk in &file.hunks {
        rows.push(hunk_row(hunk));
        rows.extend(hunk.lines.iter().map(|line| Row {
            class: class_of(line.kind),
            id: None,
            text: text_of(&line.text),
            old: cell(line, line.old),
            new: cell(line, line.new),
            notes: Vec::new(),
        }));
    }
    rows
}

/// The split layout: context on both sides; a run of removed lines beside the run of added lines
/// that follows it, paired in order, the shorter run's side left empty.
fn split_rows(file: &FileDiff) -> Vec<Row> {
    let empty = || Cell { class: "none", ..Cell::default() };
    let pair = |old: Cell, new: Cell| Row { class: "pair", id: None, text: String::new(), old, new, notes: Vec::new() };
    let mut rows = Vec::new();
    for hunk in &file.hunks {
        rows.push(hunk_row(hunk));
        let lines = &hunk.lines;
        let mut at = 0;
        while at < lines.len() {
            if lines[at].kind == Kind::Context {
                rows.push(pair(cell(&lines[at], lines[at].old), cell(&lines[at], lines[at].new)));
                at += 1;
                continue;
            }
            let removed_end = at + lines[at..].iter().take_while(|l| l.kind == Kind::Removed).count();
            let added_end = removed_end + lines[removed_end..].iter().take_while(|l| l.kind == Kind::Added).count();
            let (removed, added) = (&lines[at..removed_end], &lines[removed_end..added_end]);
            for i in 0..removed.len().max(added.len()) {
                let old = removed.get(i).map_or_else(empty, |l| cell(l, l.old));
                let new = added.get(i).map_or_else(empty, |l| cell(l, l.new));
                rows.push(pair(old, new));
            }
            at = added_end;
        }
    }
    rows
}

/// Where the files of `files` go, `findings` and `flags` placed at theirs: a finding that names a
/// line the view shows goes beneath that line; one that names none, or a line the view leaves out
/// (whitespace ignored, a binary file), goes at its file's head, as do flags. What names no file
/// of the diff (the whole proposal, a file not taken) stays in the lists alone.
pub(crate) fn review(
    files: &[FileDiff],
    findings: &[(GateAction, Finding)],
    flags: &[ProposalFlag],
    layout: Layout,
) -> Reviewed {
    let mut finding_links = vec![None; findings.len()];
    let mut flag_links = vec![None; flags.len()];
    let mut views = Vec::with_capacity(files.len());
    for (index, file) in files.iter().enumerate() {
        let anchor = format!("f{}", index + 1);
        let mut rows = match layout {
            Layout::Unified => unified_rows(file),
            Layout::Split => split_rows(file),
        };
        let mut notes = Vec::new();
        for (at, (action, finding)) in findings.iter().enumerate() {
            if finding.path != file.path() {
                continue;
            }
            let note = Note { class: word(action), text: shown(&format!("{}: {}", finding.gate, finding.rule)) };
            let row = finding.line.and_then(|n| rows.iter_mut().find(|r| r.class != "hunk" && r.new.number == Some(n)));
            match (row, finding.line) {
                (Some(row), Some(line)) => {
                    let id = row.id.get_or_insert_with(|| format!("{anchor}-n{line}")).clone();
                    row.notes.push(note);
                    finding_links[at] = Some(id);
                }
                (_, line) => {
                    let text = match line {
                        Some(line) => format!("{} (line {line}, not shown in this view)", note.text),
                        None => note.text,
                    };
                    notes.push(Note { class: note.class, text });
                    finding_links[at] = Some(anchor.clone());
                }
            }
        }
        for (at, flag) in flags.iter().enumerate() {
            if flag.path == file.path() {
                notes.push(Note { class: "flag".into(), text: shown(&format!("flag: {}", flag.kind)) });
                flag_links[at] = Some(anchor.clone());
            }
        }
        let noted = notes.len() + rows.iter().map(|r| r.notes.len()).sum::<usize>();
        let mode = match (&file.old_mode, &file.new_mode) {
            (Some(old), Some(new)) if old != new => Some(format!("{old} → {new}")),
            _ => None,
        };
        let moved = matches!(file.status, super::diff::Status::Renamed | super::diff::Status::Copied);
        views.push(FileView {
            anchor,
            path: shown(file.path()),
            from: moved.then(|| shown(&file.old_path)),
            status: file.status.word(),
            similarity: if moved { file.similarity } else { None },
            mode,
            binary: file.binary,
            added: file.added,
            removed: file.removed,
            notes,
            noted,
            rows: std::mem::take(&mut rows),
        });
    }
    Reviewed { files: views, finding_links, flag_links }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::diff::parse;
    use roundtable_specs::delivery::ProposalGate;
    use roundtable_specs::session::ProposalFlagKind;

    const PATCH: &str = "\
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,5 +1,5 @@
 keep
-one
-two
+uno
 end
-tail
+cola
+\tmore\u{202e}\u{1b}[2J
diff --git a/old.md b/new.md
similarity index 100%
rename from old.md
rename to new.md
";

    /// A split row's side: its class and number.
    type Side<'a> = (&'a str, Option<u64>);

    fn finding(path: &str, line: Option<u64>) -> (GateAction, Finding) {
        let finding = Finding { gate: ProposalGate::Secrets, rule: "aws-access-key".into(), path: path.into(), line };
        (GateAction::Block, finding)
    }

    #[test]
    fn unified_rows_carry_both_numbers() {
        let reviewed = review(&parse(PATCH.as_bytes()), &[], &[], Layout::Unified);
        let rows: Vec<(&str, Option<u64>, Option<u64>)> =
            reviewed.files[0].rows.iter().map(|r| (r.class, r.old.number, r.new.number)).collect();
        assert_eq!(
            rows,
            [
                ("hunk", None, None),
                ("ctx", Some(1), Some(1)),
                ("del", Some(2), None),
                ("del", Some(3), None),
                ("add", None, Some(2)),
                ("ctx", Some(4), Some(3)),
                ("del", Some(5), None),
                ("add", None, Some(4)),
                ("add", None, Some(5)),
            ]
        );
        assert_eq!(
            reviewed.files[0].rows[8].text, "    more\\u{202e}\\u{1b}[2J",
            "tabs widened, hidden characters escaped"
        );
        let renamed = &reviewed.files[1];
        assert_eq!(
            (renamed.status, renamed.from.as_deref(), renamed.path.as_str()),
            ("renamed", Some("old.md"), "new.md")
        );
        assert_eq!(renamed.similarity, Some(100));
    }

    #[test]
    fn split_rows_pair_removed_lines_with_what_replaced_them() {
        let reviewed = review(&parse(PATCH.as_bytes()), &[], &[], Layout::Split);
        let sides: Vec<(Side, Side)> = reviewed.files[0]
            .rows
            .iter()
            .skip(1)
            .map(|r| ((r.old.class, r.old.number), (r.new.class, r.new.number)))
            .collect();
        assert_eq!(
            sides,
            [
                (("ctx", Some(1)), ("ctx", Some(1))),
                (("del", Some(2)), ("add", Some(2))),
                (("del", Some(3)), ("none", None)),
                (("ctx", Some(4)), ("ctx", Some(3))),
                (("del", Some(5)), ("add", Some(4))),
                (("none", None), ("add", Some(5))),
            ]
        );
    }

    #[test]
    fn findings_and_flags_are_placed_at_their_file_and_line() {
        let files = parse(PATCH.as_bytes());
        let findings = [
            finding("a.txt", Some(4)),
            finding("a.txt", None),
            finding("elsewhere", Some(1)),
            finding("a.txt", Some(40)),
        ];
        let flags = [
            ProposalFlag { kind: ProposalFlagKind::ProtectedPath, path: "new.md".into() },
            ProposalFlag { kind: ProposalFlagKind::NotGiven, path: "secret.env".into() },
        ];
        for layout in [Layout::Unified, Layout::Split] {
            let reviewed = review(&files, &findings, &flags, layout);
            let a = &reviewed.files[0];
            let at: Vec<(Option<u64>, usize)> =
                a.rows.iter().filter(|r| !r.notes.is_empty()).map(|r| (r.new.number, r.notes.len())).collect();
            assert_eq!(at, [(Some(4), 1)], "{layout:?}");
            assert_eq!(a.notes.len(), 2, "the file's own finding and the line it does not show: {:?}", a.notes);
            assert!(a.notes[1].text.ends_with("(line 40, not shown in this view)"), "{:?}", a.notes);
            assert_eq!(a.noted, 3);
            assert_eq!(
                reviewed.finding_links,
                [Some("f1-n4".to_owned()), Some("f1".to_owned()), None, Some("f1".to_owned())]
            );
            assert_eq!(reviewed.flag_links, [Some("f2".to_owned()), None]);
            assert_eq!(reviewed.files[1].notes[0].text, "flag: protectedPath");
        }
    }
}
