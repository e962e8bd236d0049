//! What a backend's event stream tells the controller: hints that what it last observed may be
//! stale (an image tag moved, a managed container died). A hint never carries the truth; the
//! reconcile it triggers observes again.

/// One engine event, reduced to what it may have made stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineHint {
    /// An image was tagged, untagged, deleted, imported, loaded or pulled. `names` are what the
    /// event names it by: image IDs (`sha256:…`), references (`repo:tag`), or both.
    Image { names: Vec<String> },
    /// A container carrying Roundtable's labels died, ran out of memory or was destroyed.
    Container {
        /// Its `roundtable.dev/project` label.
        project: String,
        /// Its `roundtable.dev/assignment` label, when it ran one.
        assignment: Option<String>,
    },
    /// The stream was cut and is back: what happened in between was not reported, so whatever
    /// the hints cover is to be looked at again.
    Resumed,
}

impl EngineHint {
    /// Whether `name`, as an event names an image, is an image ID rather than a reference.
    pub fn is_image_id(name: &str) -> bool {
        let hex = name.strip_prefix("sha256:").unwrap_or(name);
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
    }
}

/// `reference` in the one spelling engines and specs are compared in: Docker Hub's implicit
/// registry and `library/` dropped, `:latest` added when neither a tag nor a digest is given.
pub fn normalise_reference(reference: &str) -> String {
    let bare = reference.strip_prefix("docker.io/").unwrap_or(reference);
    let bare = bare.strip_prefix("library/").unwrap_or(bare);
    let last = bare.rsplit('/').next().unwrap_or(bare);
    if last.contains(':') || last.contains('@') || EngineHint::is_image_id(bare) {
        bare.to_owned()
    } else {
        format!("{bare}:latest")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_compare_in_one_spelling() {
        for (given, normal) in [
            ("alpine", "alpine:latest"),
            ("docker.io/library/alpine:3", "alpine:3"),
            ("roundtable-test/agent", "roundtable-test/agent:latest"),
            ("registry:5000/team/agent", "registry:5000/team/agent:latest"),
            ("registry:5000/team/agent:v1", "registry:5000/team/agent:v1"),
            ("agent@sha256:0123", "agent@sha256:0123"),
        ] {
            assert_eq!(normalise_reference(given), normal, "{given}");
        }
        let id = format!("sha256:{}", "a".repeat(64));
        assert!(EngineHint::is_image_id(&id) && EngineHint::is_image_id(&"b".repeat(64)));
        assert!(!EngineHint::is_image_id("roundtable-test/agent:latest"));
        assert_eq!(normalise_reference(&id), id);
    }
}
