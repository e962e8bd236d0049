//! The one module that touches the YAML libraries: splitting a file into documents, typed
//! deserialization with field paths and positions, and finding the position of any field path.

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde_saphyr::granit_parser::{Event, Parser};
use serde_saphyr::{MessageFormatter, UserMessageFormatter};

/// The largest spec file read; larger ones are refused before parsing.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Where a value sits in a document, written `spec.readablePaths[1]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(Vec<Segment>);

impl FieldPath {
    pub fn root() -> Self {
        Self::default()
    }

    /// Builds a path from dotted text with `[n]` indexes; used for paths known at compile time.
    pub fn parse(text: &str) -> Self {
        let mut segments = Vec::new();
        for part in text.split('.').filter(|p| !p.is_empty()) {
            let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
            if !key.is_empty() {
                segments.push(Segment::Key(key.to_owned()));
            }
            while let Some((index, after)) = rest.split_once(']') {
                if let Ok(index) = index.parse() {
                    segments.push(Segment::Index(index));
                }
                rest = after.trim_start_matches('[');
            }
        }
        Self(segments)
    }

    pub fn key(mut self, key: &str) -> Self {
        self.0.push(Segment::Key(key.to_owned()));
        self
    }

    pub fn index(mut self, index: usize) -> Self {
        self.0.push(Segment::Index(index));
        self
    }

    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    fn parent(&self) -> Option<FieldPath> {
        let mut segments = self.0.clone();
        segments.pop().map(|_| Self(segments))
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if i == 0 => f.write_str(key)?,
                Segment::Key(key) => write!(f, ".{key}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A 1-based line and column in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

/// One YAML document of a file: its text and where it starts.
#[derive(Debug, Clone, Copy)]
pub struct Document<'a> {
    pub text: &'a str,
    /// Byte offset of `text` in the file.
    pub offset: usize,
    /// The file line (1-based) of the document's first line.
    pub first_line: usize,
}

/// A problem found while reading a document, positioned in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlProblem {
    pub position: Position,
    pub path: FieldPath,
    pub message: String,
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker).is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
}

fn is_blank_or_comment(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// Splits a YAML stream into documents. YAML forbids `---` and `...` at the start of a line
/// inside any scalar, so line-based splitting is exact. Documents holding nothing but
/// comments and markers are dropped.
pub fn split_documents<'a>(text: &'a str) -> Vec<Document<'a>> {
    let mut documents = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1usize;
    let mut has_content = false;
    let mut offset = 0usize;
    let push = |from: usize, to: usize, first_line: usize, content: bool, documents: &mut Vec<Document<'a>>| {
        if content {
            documents.push(Document { text: &text[from..to], offset: from, first_line });
        }
    };
    for (line_number, line) in (1usize..).zip(text.split_inclusive('\n')) {
        let bare = line.trim_end_matches(['\n', '\r']);
        if is_marker(bare, "---") {
            push(start, offset, start_line, has_content, &mut documents);
            start = offset;
            start_line = line_number;
            let after_marker = bare[3..].trim_start();
            has_content = !after_marker.is_empty() && !after_marker.starts_with('#');
        } else if is_marker(bare, "...") {
            push(start, offset + line.len(), start_line, has_content, &mut documents);
            start = offset + line.len();
            start_line = line_number + 1;
            has_content = false;
        } else if !is_blank_or_comment(bare) {
            has_content = true;
        }
        offset += line.len();
    }
    push(start, text.len(), start_line, has_content, &mut documents);
    documents
}

fn options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.strict_booleans = true;
    options
}

/// Operators' wording for the library's errors: what is wrong with the YAML, never which
/// library option would have accepted it. What is not reworded here comes from the library's
/// user-facing formatter.
struct Wording;

/// The range of an integer type, as the library names it (`u32`), for "expected …" messages.
fn integer_wording(ty: &str) -> Option<String> {
    let (low, high): (i128, i128) = match ty {
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" => (0, u64::MAX.into()),
        "usize" => (0, usize::MAX as i128),
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" => (i64::MIN.into(), i64::MAX.into()),
        _ => return None,
    };
    Some(format!("expected a whole number from {low} to {high}"))
}

/// `expected sequence start` and the like, in operators' words.
fn expected_wording(expected: &str) -> Cow<'static, str> {
    match expected {
        "sequence start" => "expected a list".into(),
        "mapping start" | "mapping" | "struct" => "expected a mapping (key: value lines)".into(),
        "string scalar" | "string" => "expected a string".into(),
        "scalar" => "expected a single value, not a list or mapping".into(),
        other => format!("expected {other}").into(),
    }
}

impl MessageFormatter for Wording {
    fn format_message<'a>(&self, error: &'a serde_saphyr::Error) -> Cow<'a, str> {
        use serde_saphyr::Error as E;
        match error {
            E::DuplicateMappingKey { key: Some(key), .. } => {
                format!("duplicate key `{key}`: a key may appear only once in a mapping").into()
            }
            E::DuplicateMappingKey { key: None, .. } => "duplicate key: a key may appear only once in a mapping".into(),
            E::InvalidScalar { ty, .. } => match *ty {
                "bool" => "expected true or false".into(),
                "f32" | "f64" => "expected a number".into(),
                "char" => "expected a single character".into(),
                other => integer_wording(other).map_or_else(|| format!("not a valid {other}").into(), Cow::Owned),
            },
            E::InvalidBooleanStrict { .. } => "expected true or false".into(),
            E::NullIntoString { .. } | E::InvalidCharNull { .. } => "expected a value, not null".into(),
            E::Unexpected { expected, .. } => expected_wording(expected),
            E::NonFiniteFloat { value, .. } => format!("{value} is not a finite number").into(),
            E::UnknownAnchor { .. } => "an alias (*name) refers to no anchor (&name) defined before it".into(),
            E::MergeKeyNotAllowed { .. } => "merge keys (<<) are not allowed; write the fields out".into(),
            E::Budget { .. }
            | E::AliasReplayCounterOverflow { .. }
            | E::AliasReplayLimitExceeded { .. }
            | E::AliasExpansionLimitExceeded { .. }
            | E::AliasReplayStackDepthExceeded { .. } => format!(
                "parse budget exceeded (an alias bomb or an oversized document): {}",
                UserMessageFormatter.format_message(error)
            )
            .into(),
            _ => UserMessageFormatter.format_message(error),
        }
    }
}

/// The error an alias or a snippet wraps.
fn original(mut error: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::AliasError { error: inner, .. }
    | serde_saphyr::Error::WithSnippet { error: inner, .. } = error
    {
        error = inner;
    }
    error
}

/// The message for an operator, without a position: we print positions ourselves, relative to
/// the file.
fn bare_message(error: &serde_saphyr::Error) -> String {
    let rendered = Wording.format_message(original(error));
    let mut message = rendered.trim();
    if let Some(rest) = message.strip_prefix("line ")
        && let Some((_, after)) = rest.split_once(": ")
    {
        message = after;
    }
    if let Some(at) = message.rfind(" at line ")
        && message[at + 9..].bytes().all(|b| b.is_ascii_digit() || b == b',' || b == b' ' || b.is_ascii_lowercase())
    {
        message = &message[..at];
    }
    if message.starts_with("tabs disallowed") {
        return "tabs are not allowed for indentation; indent with spaces".into();
    }
    message.to_owned()
}

impl Document<'_> {
    fn file_position(&self, line_in_document: usize, column: usize) -> Position {
        Position { line: self.first_line + line_in_document.saturating_sub(1), column: column.max(1) }
    }

    /// Deserializes the document into `T`, reporting the field path and position of the first error.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, YamlProblem> {
        // The path is captured on the way out; the library then adds the position to the error.
        let mut failed_at = FieldPath::root();
        let outcome = serde_saphyr::with_deserializer_from_str_with_options(self.text, options(), |deserializer| {
            serde_path_to_error::deserialize::<_, T>(deserializer).map_err(|error| {
                failed_at = convert_path(error.path());
                error.into_inner()
            })
        });
        let error = match outcome {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let path = failed_at;
        let position = match error.location() {
            Some(location) => self.file_position(location.line() as usize, location.column() as usize),
            None => self.locate(&path),
        };
        Err(YamlProblem { position, path, message: bare_message(&error) })
    }

    /// The scalar at `path` exactly as written (quotes removed), when there is one: what a
    /// message echoes, so it never shows a rounded or reformatted value.
    pub fn scalar(&self, path: &FieldPath) -> Option<String> {
        SpanIndex::build(self.text).scalars.into_iter().find(|(candidate, _)| candidate == path).map(|(_, text)| text)
    }

    /// The position of the value at `path`, or of its nearest ancestor that exists.
    pub fn locate(&self, path: &FieldPath) -> Position {
        let mut wanted = Some(path.clone());
        let index = SpanIndex::build(self.text);
        while let Some(candidate) = wanted {
            if let Some((line, column)) = index.find(&candidate) {
                return self.file_position(line, column);
            }
            wanted = candidate.parent();
        }
        self.file_position(1, 1)
    }
}

fn convert_path(path: &serde_path_to_error::Path) -> FieldPath {
    use serde_path_to_error::Segment as Theirs;
    FieldPath(
        path.iter()
            .filter_map(|segment| match segment {
                Theirs::Seq { index } => Some(Segment::Index(*index)),
                Theirs::Map { key } => Some(Segment::Key(key.clone())),
                Theirs::Enum { variant } => Some(Segment::Key(variant.clone())),
                Theirs::Unknown => None,
            })
            .collect(),
    )
}

// === SpanIndex ===

/// Positions (line, column; 1-based, relative to the document) of every value in a document.
/// A mapping value is placed at its key, which is where an operator looks for it.
struct SpanIndex {
    entries: Vec<(FieldPath, (usize, usize))>,
    /// The text of every scalar value (not key), by path.
    scalars: Vec<(FieldPath, String)>,
}

enum Slot {
    /// Inside a mapping; `key` is the key whose value comes next, if one was just read.
    Mapping {
        key: Option<String>,
        expecting_key: bool,
    },
    Sequence {
        next_index: usize,
    },
}

struct Frame {
    slot: Slot,
    /// Whether entering this collection pushed a segment onto the path.
    pushed: bool,
    /// False inside a complex (collection) mapping key, whose contents have no field path.
    recording: bool,
}

impl SpanIndex {
    fn build(text: &str) -> Self {
        let mut entries = Vec::new();
        let mut scalars = Vec::new();
        let mut stack: Vec<Frame> = Vec::new();
        let mut path: Vec<Segment> = Vec::new();
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let position = (span.start.line(), span.start.col() + 1);
            let starts_collection = matches!(event, Event::SequenceStart(..) | Event::MappingStart(..));
            if matches!(event, Event::MappingEnd | Event::SequenceEnd) {
                if let Some(frame) = stack.pop()
                    && frame.pushed
                {
                    path.pop();
                }
                continue;
            }
            if !starts_collection && !matches!(event, Event::Scalar(..) | Event::Alias(..)) {
                continue;
            }
            let recording = stack.last().is_none_or(|frame| frame.recording);
            let mut segment = None;
            let mut is_key = false;
            match stack.last_mut().map(|frame| &mut frame.slot) {
                Some(Slot::Mapping { key, expecting_key }) if *expecting_key => {
                    *expecting_key = false;
                    is_key = true;
                    *key = match &event {
                        Event::Scalar(text, ..) => Some(text.to_string()),
                        _ => None,
                    };
                    if let (true, Some(key)) = (recording, key.clone()) {
                        let mut key_path = path.clone();
                        key_path.push(Segment::Key(key));
                        entries.push((FieldPath(key_path), position));
                    }
                }
                Some(Slot::Mapping { key, expecting_key }) => {
                    *expecting_key = true;
                    segment = key.take().map(Segment::Key);
                }
                Some(Slot::Sequence { next_index }) => {
                    segment = Some(Segment::Index(*next_index));
                    *next_index += 1;
                    if recording {
                        let mut item_path = path.clone();
                        item_path.extend(segment.clone());
                        entries.push((FieldPath(item_path), position));
                    }
                }
                None => entries.push((FieldPath::root(), position)),
            }
            if let (Event::Scalar(text, ..), false, true, Some(segment)) = (&event, is_key, recording, &segment) {
                let mut value_path = path.clone();
                value_path.push(segment.clone());
                scalars.push((FieldPath(value_path), text.to_string()));
            }
            if starts_collection {
                let pushed = segment.is_some();
                path.extend(segment);
                let slot = match event {
                    Event::MappingStart(..) => Slot::Mapping { key: None, expecting_key: true },
                    _ => Slot::Sequence { next_index: 0 },
                };
                stack.push(Frame { slot, pushed, recording: recording && !is_key });
            }
        }
        Self { entries, scalars }
    }

    fn find(&self, path: &FieldPath) -> Option<(usize, usize)> {
        self.entries.iter().find(|(candidate, _)| candidate == path).map(|(_, position)| *position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn splits_on_document_markers_only_at_line_start() {
        let text = "# head\n---\na: 1\nb: |\n  --- not a marker\n---\n# only a comment\n---\nc: 3\n...\nd: 4\n";
        let docs = split_documents(text);
        let firsts: Vec<usize> = docs.iter().map(|d| d.first_line).collect();
        assert_eq!(firsts, [2, 8, 11]);
        assert!(docs[0].text.contains("not a marker"));
    }

    #[test]
    fn a_file_without_markers_is_one_document() {
        let docs = split_documents("a: 1\n");
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].first_line, 1);
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        spec: Inner,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
        #[serde(default)]
        paths: Vec<String>,
    }

    #[test]
    fn type_errors_carry_path_and_file_position() {
        let text = "---\nx: 0\n---\nspec:\n  paths: [a]\n  count: many\n";
        let docs = split_documents(text);
        let problem = docs[1].deserialize::<Outer>().expect_err("invalid");
        assert_eq!(problem.path.to_string(), "spec.count");
        assert_eq!(problem.position, Position { line: 6, column: 10 });
        assert!(!problem.message.contains("line"), "{}", problem.message);
    }

    #[test]
    fn unknown_fields_are_errors_with_their_path() {
        let docs = split_documents("spec:\n  count: 1\n  bogus: true\n");
        let problem = docs[0].deserialize::<Outer>().expect_err("unknown field");
        assert_eq!(problem.path.to_string(), "spec.bogus");
        assert_eq!(problem.position.line, 3);
        assert!(problem.message.contains("bogus"), "{}", problem.message);
    }

    #[test]
    fn locates_nested_values_and_falls_back_to_ancestors() {
        let text = "spec:\n  count: 1\n  paths:\n    - a\n    - ../b\n";
        let doc = split_documents(text)[0];
        assert_eq!(doc.locate(&FieldPath::parse("spec.paths[1]")), Position { line: 5, column: 7 });
        assert_eq!(doc.locate(&FieldPath::parse("spec.count")), Position { line: 2, column: 3 });
        assert_eq!(doc.locate(&FieldPath::parse("spec.missing")), Position { line: 1, column: 1 });
        assert_eq!(doc.locate(&FieldPath::parse("spec.paths[9]")), Position { line: 3, column: 3 });
    }

    #[test]
    fn scalars_are_found_as_written() {
        let text = "spec:\n  resources: {memory: 1.50Gi, cpus: 0.50}\n  args: [a, '0x10']\n  timeout: \"90s\"\n";
        let doc = split_documents(text)[0];
        let scalar = |path: &str| doc.scalar(&FieldPath::parse(path));
        assert_eq!(scalar("spec.resources.memory").as_deref(), Some("1.50Gi"));
        assert_eq!(scalar("spec.resources.cpus").as_deref(), Some("0.50"));
        assert_eq!(scalar("spec.args[1]").as_deref(), Some("0x10"));
        assert_eq!(scalar("spec.timeout").as_deref(), Some("90s"));
        assert_eq!(scalar("spec.resources"), None, "a mapping is not a scalar");
        assert_eq!(scalar("spec"), None);
    }

    #[test]
    fn alias_bombs_fail_within_the_budget() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..12 {
            let prev = level - 1;
            text.push_str(&format!(
                "a{level}: &a{level} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let doc = split_documents(&text)[0];
        let started = std::time::Instant::now();
        let outcome = doc.deserialize::<serde_json::Value>();
        let problem = outcome.expect_err("an alias bomb must not deserialize");
        assert!(problem.message.starts_with("parse budget exceeded"), "{}", problem.message);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
