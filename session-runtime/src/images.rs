//! Images as a backend reports them: what it holds under a reference ([`ImageDetails`]), how far a
//! pull has come ([`PullProgress`]), and the one check that the image held under a digest
//! reference is the one that digest names ([`holds_digest`]), which the controller makes of every
//! answer rather than trusting the engine or the registry behind it.

use std::fmt;

use crate::hints::normalise_reference;

/// What the engine holds under a reference.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageDetails {
    /// The full image ID, `sha256:…`.
    pub id: String,
    /// Every `repository@sha256:…` the engine says the image was pulled or pushed as (Docker's
    /// `RepoDigests`): the manifest digests it has verified for it.
    pub repo_digests: Vec<String>,
}

/// Whether `details`, the image an engine holds under `requested`, is the image `requested`
/// names. A reference with no digest (a tag, an image ID) names no manifest, so any image
/// holds it; a digest reference is held only when the engine lists exactly
/// `repository@digest` among the image's repo digests (spelled as references are compared:
/// Docker Hub's implicit registry and `library/` dropped), whatever else it lists.
pub fn holds_digest(requested: &str, details: &ImageDetails) -> bool {
    let Some((name, digest)) = requested.split_once('@') else { return true };
    // A tag beside the digest (`name:tag@sha256:…`) is not part of what the engine records.
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let repository = match name[last_slash..].rfind(':') {
        Some(colon) => &name[..last_slash + colon],
        None => name,
    };
    let wanted = normalise_reference(&format!("{repository}@{digest}"));
    details.repo_digests.iter().any(|held| normalise_reference(held) == wanted)
}

/// How far a pull has come: the bytes of the layers it downloads (layers the engine already has
/// are not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PullProgress {
    /// Bytes downloaded so far.
    pub current: u64,
    /// Bytes of every layer whose size the engine has announced so far.
    pub total: u64,
    /// Layers downloaded so far, of `layers` to download.
    pub layers_done: u32,
    pub layers: u32,
}

const MIB: f64 = 1024.0 * 1024.0;

/// `3.2 of 18.0 MiB`, or `starting` before the engine has named any layer's size.
impl fmt::Display for PullProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.total == 0 {
            return f.write_str(if self.layers == 0 { "starting" } else { "sizing layers" });
        }
        // Display only: the precision lost above 2^52 bytes does not matter.
        let (current, total) = (self.current.min(self.total) as f64 / MIB, self.total as f64 / MIB);
        write!(f, "{current:.1} of {total:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn held(repo_digests: &[&str]) -> ImageDetails {
        ImageDetails { id: B.into(), repo_digests: repo_digests.iter().map(|d| (*d).to_owned()).collect() }
    }

    #[test]
    fn a_digest_reference_is_held_only_under_exactly_its_repository_and_digest() {
        let requested = format!("127.0.0.1:5000/agents/codex@{A}");
        for (repo_digests, holds) in [
            (vec![format!("127.0.0.1:5000/agents/codex@{A}")], true),
            (vec![format!("other:1@{B}"), format!("127.0.0.1:5000/agents/codex@{A}")], true),
            (vec![format!("127.0.0.1:5000/agents/codex@{B}")], false),
            // The same digest under another repository or registry is another claim.
            (vec![format!("127.0.0.1:5001/agents/codex@{A}")], false),
            (vec![format!("127.0.0.1:5000/agents/codex-evil@{A}")], false),
            (vec![format!("127.0.0.1:5000/agents/codex@{A}x")], false),
            (vec![], false),
        ] {
            let shown: Vec<&str> = repo_digests.iter().map(String::as_str).collect();
            assert_eq!(holds_digest(&requested, &held(&shown)), holds, "{repo_digests:?}");
        }
    }

    #[test]
    fn docker_hubs_spellings_compare_equal_and_a_tag_beside_the_digest_is_ignored() {
        assert!(holds_digest(&format!("docker.io/library/alpine@{A}"), &held(&[&format!("alpine@{A}")])));
        assert!(holds_digest(&format!("alpine:3@{A}"), &held(&[&format!("alpine@{A}")])));
        assert!(holds_digest(&format!("registry:5000/x:v1@{A}"), &held(&[&format!("registry:5000/x@{A}")])));
        assert!(!holds_digest(&format!("alpine@{A}"), &held(&[&format!("evil/alpine@{A}")])));
    }

    #[test]
    fn a_reference_without_a_digest_names_no_manifest() {
        assert!(holds_digest("roundtable-test/agent:latest", &held(&[])));
        assert!(holds_digest(A, &held(&[])));
    }

    #[test]
    fn progress_reads_in_mebibytes() {
        let progress = PullProgress { current: 3 << 20, total: 18 << 20, layers_done: 1, layers: 2 };
        assert_eq!(progress.to_string(), "3.0 of 18.0 MiB");
        assert_eq!(PullProgress::default().to_string(), "starting");
        assert_eq!(PullProgress { layers: 2, ..PullProgress::default() }.to_string(), "sizing layers");
        let over = PullProgress { current: 5, total: 4, layers_done: 1, layers: 1 };
        assert_eq!(over.to_string(), "0.0 of 0.0 MiB", "never more than the total");
    }
}
