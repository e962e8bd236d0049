//! Generations as digests: the whole-spec digest (object generation) and the run-fields digest
//! (execution generation; a new one starts a new execution), over canonical JSON (sorted keys,
//! no whitespace).

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::object::{Object, Spec};

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The one canonical JSON form (object keys sorted, no whitespace): what digests and the audit
/// chain hash.
pub fn canonical_json<T: Serialize>(value: &T) -> String {
    // serde_json's Value keeps object keys sorted, which makes the text canonical.
    serde_json::to_value(value).map(|value| value.to_string()).unwrap_or_default()
}

/// Lowercase hex SHA-256 of the canonical JSON of `value`.
pub fn canonical_digest<T: Serialize>(value: &T) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// The digest of everything an object declares: a change of any field changes it.
pub fn object_digest(object: &Object) -> String {
    spec_digest(&object.metadata, &object.spec)
}

/// [`object_digest`] for a spec that may not come from a file (a referenced built-in).
pub fn spec_digest(metadata: &crate::meta::ObjectMeta, spec: &Spec) -> String {
    canonical_digest(&crate::resource::to_value(metadata, spec))
}

/// [`execution_digest`] for a bare spec.
pub fn run_digest(spec: &Spec) -> Option<String> {
    match spec {
        Spec::Assignment(spec) => Some(canonical_digest(&spec.run_fields())),
        _ => None,
    }
}

/// The digest of an Assignment's run fields; only their change starts a new execution.
pub fn execution_digest(object: &Object) -> Option<String> {
    run_digest(&object.spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_file;

    fn assignment(extra: &str) -> Object {
        let text = format!(
            "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata:\n  name: a\n{extra}spec:\n  adapter: generic\n  task: {{id: T-1, prompt: hi}}\n  readablePaths: [README.md]\n  retries: 0\n"
        );
        let mut parsed = parse_file("a.yaml", "a.yaml", &text);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        parsed.objects.remove(0)
    }

    #[test]
    fn non_run_fields_change_the_object_but_not_the_execution() {
        let base = assignment("");
        let labelled = assignment("  labels: {team: docs}\n");
        assert_ne!(object_digest(&base), object_digest(&labelled));
        assert_eq!(execution_digest(&base), execution_digest(&labelled));
        let digest = object_digest(&base);
        assert_eq!(digest.len(), 64);
        assert_eq!(digest, object_digest(&assignment("")), "digests are deterministic");
    }
}
