//! A declared object as data: its spec by kind, its metadata, and the document it came from
//! (so any field can be located later). The parser makes them; everything else reads them.

use std::sync::Arc;

use crate::adapter::AdapterSpec;
use crate::assignment::AssignmentSpec;
use crate::finding::{Severity, ValidationError};
use crate::meta::{Kind, ObjectKey, ObjectMeta};
use crate::policy::AdmissionPolicySpec;
use crate::yaml::{Document, FieldPath, Position, Segment};

/// The spec of one object, by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    Adapter(AdapterSpec),
    Assignment(AssignmentSpec),
    AdmissionPolicy(AdmissionPolicySpec),
}

/// One declared object and where it was declared.
#[derive(Debug, Clone)]
pub struct Object {
    pub metadata: ObjectMeta,
    pub spec: Spec,
    pub origin: Origin,
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self.spec {
            Spec::Adapter(_) => Kind::Adapter,
            Spec::Assignment(_) => Kind::Assignment,
            Spec::AdmissionPolicy(_) => Kind::AdmissionPolicy,
        }
    }

    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.kind(), self.metadata.name.clone())
    }
}

/// The document an object came from, kept so that any field can be located later.
#[derive(Debug, Clone)]
pub struct Origin {
    pub file: Arc<str>,
    pub(crate) text: Arc<str>,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) first_line: usize,
    /// For entries of the legacy `config.yaml`, the key under `adapters:`.
    pub(crate) legacy_name: Option<String>,
}

impl Origin {
    fn document(&self) -> Document<'_> {
        Document { text: &self.text[self.start..self.end], offset: self.start, first_line: self.first_line }
    }

    /// The path as written in the file: `spec.providerHosts` is `adapters.<name>.provider_hosts`
    /// in the legacy format.
    pub fn written_path(&self, path: &FieldPath) -> FieldPath {
        let Some(name) = &self.legacy_name else {
            return path.clone();
        };
        let mut written = FieldPath::root().key("adapters").key(name);
        let segments = path.segments();
        let rest = match segments.first() {
            Some(Segment::Key(first)) if first == "spec" || first == "metadata" => &segments[1..],
            _ => segments,
        };
        for segment in rest {
            written = match segment {
                Segment::Key(key) if key == "name" && segments.first() == Some(&Segment::Key("metadata".into())) => {
                    written
                }
                Segment::Key(key) => written.key(&camel_to_snake(key)),
                Segment::Index(index) => written.index(*index),
            };
        }
        written
    }

    /// The scalar at `path` exactly as the file writes it, for messages that echo a value: a
    /// typed value prints in its canonical form (`1536Mi` for `1.5Gi`), which is not what the
    /// operator wrote.
    pub fn written_scalar(&self, path: &FieldPath) -> Option<String> {
        self.document().scalar(&self.written_path(path))
    }

    pub fn position(&self, path: &FieldPath) -> Position {
        self.document().locate(&self.written_path(path))
    }

    /// `file:line` of the document's start, for messages that point at another object.
    pub fn describe(&self) -> String {
        let line = self.position(&FieldPath::parse("metadata.name")).line;
        format!("{}:{}", self.file, line)
    }

    /// A finding about the field at `path` of this object.
    pub fn finding(&self, path: &FieldPath, severity: Severity, message: impl Into<String>) -> ValidationError {
        let position = self.position(path);
        ValidationError {
            file: self.file.to_string(),
            line: position.line,
            column: position.column,
            path: self.written_path(path).to_string(),
            message: message.into(),
            severity,
        }
    }

    pub fn error(&self, path: &FieldPath, message: impl Into<String>) -> ValidationError {
        self.finding(path, Severity::Error, message)
    }
}

fn camel_to_snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
