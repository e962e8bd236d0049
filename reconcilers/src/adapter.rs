//! The Adapter reconciler: the image exists in the engine as what its reference names, or is
//! pulled in the background when it may be (a digest reference, or a tag the AdmissionPolicy
//! allows); its ID is recorded, and `Ready`/`Degraded` say why, a pull's progress included.

use roundtable_specs::adapter::{AdapterSpec, ResolvedAdapter};
use roundtable_specs::output::{Condition, ConditionStatus};
use roundtable_store::{AgentOverride, OverrideState};
use serde::{Deserialize, Serialize};

use roundtable_admission::GateOutcome;
use roundtable_specs::admission::{EvidenceSummary, GateDecision, GateKind, ReceiptSummary};
use roundtable_specs::policy::AdmissionMode;

use std::time::Duration;

use roundtable_session_runtime::PullProgress;
use roundtable_session_runtime::images::{ImageDetails, holds_digest};

use crate::backend::{BackendError, ImageBackend};
use crate::conditions::{ADMITTED, DEGRADED, READY, desired, reason};
use crate::pull::{FailureKind, PullFailure, PullState};

/// An Adapter's kind-specific status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdapterStatus {
    /// The image ID the reference resolved to in the engine.
    pub image_id: Option<String>,
    /// The AdmissionPolicy's mode when the gates were last decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_mode: Option<AdmissionMode>,
    /// The admission and security-floor decisions for the adapter (capability routing is
    /// decided per Assignment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission: Vec<GateDecision>,
    /// The evidence admission saw: image ID, version, contract, conformance, replay, canary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<EvidenceSummary>,
    /// The current receipt: id, verdict and expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptSummary>,
}

/// `no_receipt` → `NoReceipt`: a refusal reason as a condition reason.
fn camel(word: &str) -> String {
    word.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

/// The `Admitted` condition for the adapter-level gates.
fn admitted(outcome: &GateOutcome, generation: i64) -> Condition {
    use ConditionStatus::{False, True, Unknown};
    let mode = outcome.mode;
    let adapter_level: Vec<&GateDecision> =
        outcome.decisions.iter().filter(|d| d.gate != GateKind::CapabilityRouting).collect();
    // A refusal that blocks is the one to show (the runtime class's first: nothing of the image
    // ran then), ahead of any that is only recorded.
    let refused = roundtable_admission::authority::blocking_refusal(&adapter_level, mode)
        .or_else(|| adapter_level.iter().copied().find(|d| !d.admitted()));
    match refused {
        Some(refused) => {
            let reason = camel(refused.reason.as_deref().unwrap_or("refused"));
            let consequence =
                if refused.blocks(mode) { "spawns are refused" } else { "recorded; spawns continue under warn" };
            desired(ADMITTED, False, &reason, format!("{refused} ({consequence})"), generation)
        }
        None if mode == AdmissionMode::Off => desired(
            ADMITTED,
            Unknown,
            "AdmissionOff",
            "the AdmissionPolicy's mode is off: no gate runs but the runtime class",
            generation,
        ),
        None => {
            let message = adapter_level.iter().map(|d| d.message.as_str()).collect::<Vec<_>>().join("; ");
            desired(ADMITTED, True, reason::ADMITTED, message, generation)
        }
    }
}

/// What the engine says about the adapter's image, and this process's pull of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageState {
    /// Disabled adapters are not inspected.
    NotInspected,
    NotConfigured,
    /// No image is set and none is needed: the agent is roundtable's own mounted binary
    /// (the built-in `mock`), which runs in an empty image.
    NotNeeded,
    /// Not in the engine, and not pulled: why.
    Missing {
        why: NotPulled,
    },
    /// Not in the engine and pullable: this reconcile starts attempt `attempt` of the pull.
    ToPull {
        attempt: u32,
    },
    /// A pull of it runs (started by this Adapter or another naming the same image).
    Pulling {
        progress: PullProgress,
    },
    /// The last pull failed; the next is due in `retry_in`.
    PullFailed {
        failure: PullFailure,
        attempts: u32,
        retry_after: Duration,
        retry_in: Duration,
    },
    /// The engine holds the digest reference, but not as the image that digest names (its repo
    /// digests do not list it): refused, never run.
    DigestMismatch {
        id: String,
        repo_digests: Vec<String>,
    },
    Present {
        id: String,
        /// This process pulled it: what that took.
        pulled: Option<Pulled>,
    },
}

/// Why a missing image is not pulled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotPulled {
    /// A bare image ID: only the engine that built or loaded it has it.
    ImageId,
    /// A tag, and the AdmissionPolicy sets `requireDigest`.
    TagsNotAllowed,
    /// This process does not pull (`status`, `plan`, the CLI's `reconcile`): the daemon does.
    ByTheDaemon,
}

/// What a pull that brought the image took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pulled {
    pub bytes: u64,
    pub took: Duration,
}

/// Reads the engine and the pulls; writes nothing.
pub async fn observe_image<I: ImageBackend>(images: &I, adapter: &ResolvedAdapter) -> Result<ImageState, BackendError> {
    if !adapter.enabled {
        return Ok(ImageState::NotInspected);
    }
    let Some(image) = &adapter.image else {
        let own_binary = adapter.command == roundtable_specs::builtins::IN_CONTAINER_BINARY;
        return Ok(if own_binary { ImageState::NotNeeded } else { ImageState::NotConfigured });
    };
    let reference = image.as_str();
    let pull = images.pull_state(reference);
    if let Some(info) = images.inspect_image(reference).await? {
        // Checked on every look, not only after a pull: nothing that answers is trusted.
        let held = ImageDetails { id: info.id, repo_digests: info.repo_digests };
        if !holds_digest(reference, &held) {
            return Ok(ImageState::DigestMismatch { id: held.id, repo_digests: held.repo_digests });
        }
        let pulled = match pull {
            Some(PullState::Pulled { image_id, bytes, took }) if image_id == held.id => Some(Pulled { bytes, took }),
            _ => None,
        };
        return Ok(ImageState::Present { id: held.id, pulled });
    }
    let attempt = match pull {
        Some(PullState::Running { progress }) => return Ok(ImageState::Pulling { progress }),
        Some(PullState::Failed { failure, attempts, retry_after, retry_in }) if !retry_in.is_zero() => {
            return Ok(ImageState::PullFailed { failure, attempts, retry_after, retry_in });
        }
        Some(PullState::Failed { attempts, .. }) => attempts + 1,
        // Pulled once and gone since, or never pulled here.
        Some(PullState::Pulled { .. }) | None => 1,
    };
    let why = if image.is_image_id() {
        Some(NotPulled::ImageId)
    } else if !images.pulls() {
        Some(NotPulled::ByTheDaemon)
    } else if !image.is_pinned() && !images.tags_pullable().await {
        Some(NotPulled::TagsNotAllowed)
    } else {
        None
    };
    Ok(match why {
        Some(why) => ImageState::Missing { why },
        None => ImageState::ToPull { attempt },
    })
}

/// The adapter `name` as it runs: its declaration (`declared`, the first Adapter of that name)
/// laid over the built-in template of the same name, or the template alone when nothing declares
/// it, with the operator's runtime override of `enabled` (see [`with_override`]); `None` when
/// neither exists. This is the one lookup of an adapter by name: the reconciler resolves one here
/// once per reconcile and carries it in what it observed, and every service surface (plans,
/// capture, admission, diagnostics, registered sessions) resolves through it, so an adapter an
/// operator disabled reads as disabled everywhere.
pub fn resolve(
    name: &str,
    declared: Option<&AdapterSpec>,
    agent_override: Option<&AgentOverride>,
) -> Option<ResolvedAdapter> {
    let adapter = match declared {
        Some(spec) => roundtable_specs::catalog::resolve_declared(name, spec),
        None => roundtable_specs::builtins::template(name)?.resolve(name),
    };
    Some(with_override(adapter, agent_override))
}

/// `adapter` as an operator's runtime override leaves it: disabled while the override disables
/// or drains it, enabled while it enables it, whatever the spec says.
pub fn with_override(mut adapter: ResolvedAdapter, agent_override: Option<&AgentOverride>) -> ResolvedAdapter {
    if let Some(agent_override) = agent_override {
        adapter.enabled = agent_override.state == OverrideState::Enabled;
    }
    adapter
}

/// The conditions and status an Adapter should have; pure.
pub fn desired_state(
    adapter: &ResolvedAdapter,
    image: &ImageState,
    gates: Option<&GateOutcome>,
    agent_override: Option<&AgentOverride>,
    generation: i64,
) -> (Vec<Condition>, AdapterStatus) {
    use ConditionStatus::{False, True};
    let reference = adapter.image.as_ref().map(ToString::to_string).unwrap_or_default();
    let (ready, image_id) = match image {
        ImageState::NotInspected => {
            let message = match agent_override.filter(|o| o.state != OverrideState::Enabled) {
                Some(by) => format!("the adapter is {} by an operator through the API", by.state.as_str()),
                None => "the adapter is disabled (spec.enabled: false)".to_owned(),
            };
            (desired(READY, False, reason::DISABLED, message, generation), None)
        }
        ImageState::NotConfigured => (
            desired(
                READY,
                False,
                reason::IMAGE_NOT_CONFIGURED,
                "spec.image is not set; an image is required to execute",
                generation,
            ),
            None,
        ),
        ImageState::NotNeeded => (
            desired(
                READY,
                True,
                reason::NO_IMAGE_NEEDED,
                "the agent is roundtable's own binary; it runs in an empty image",
                generation,
            ),
            None,
        ),
        ImageState::Missing { why } => {
            let message = match why {
                NotPulled::ImageId => format!(
                    "image {reference} is an image ID, which no registry serves, and the engine does not have it: build or load it, or name it as repository@sha256:<digest> to have it pulled"
                ),
                NotPulled::TagsNotAllowed => format!(
                    "image {reference} is not in the engine and is a tag, which the AdmissionPolicy's requireDigest does not let be pulled: pin it as repository@sha256:<digest> (the digest `docker pull` prints, or the image's RepoDigests)"
                ),
                NotPulled::ByTheDaemon => {
                    format!("image {reference} is not in the engine; the daemon (`roundtable start`) pulls it")
                }
            };
            (desired(READY, False, reason::IMAGE_MISSING, message, generation), None)
        }
        ImageState::ToPull { attempt } => {
            let attempt = if *attempt > 1 { format!("; attempt {attempt}") } else { String::new() };
            let message = format!("pulling {reference} (starting{attempt})");
            (desired(READY, ConditionStatus::Unknown, reason::IMAGE_PULLING, message, generation), None)
        }
        ImageState::Pulling { progress } => {
            let message = format!("pulling {reference} ({progress})");
            (desired(READY, ConditionStatus::Unknown, reason::IMAGE_PULLING, message, generation), None)
        }
        ImageState::PullFailed { failure, attempts, retry_after, .. } => {
            let why = match failure.kind {
                FailureKind::DigestMismatch => reason::IMAGE_DIGEST_MISMATCH,
                FailureKind::Refused | FailureKind::TimedOut => reason::IMAGE_PULL_BACK_OFF,
            };
            let message = format!(
                "pulling {reference} failed (attempt {attempts}): {}; tried again {} s after it failed",
                failure.message,
                retry_after.as_secs()
            );
            (desired(READY, False, why, message, generation), None)
        }
        ImageState::DigestMismatch { id, repo_digests } => {
            let listed = if repo_digests.is_empty() { "none".to_owned() } else { repo_digests.join(", ") };
            let message = format!(
                "the engine holds image {id} under {reference}, but its repo digests ({listed}) do not include that digest: not the image the reference names, so nothing runs in it; remove that name from the engine and it is pulled again"
            );
            (desired(READY, False, reason::IMAGE_DIGEST_MISMATCH, message, generation), None)
        }
        ImageState::Present { id, .. } => (
            desired(READY, True, reason::IMAGE_RESOLVED, format!("image {reference} resolved to {id}"), generation),
            Some(id.clone()),
        ),
    };
    let pinned = adapter.image.as_ref().is_some_and(|image| image.is_pinned());
    let degraded = if matches!(image, ImageState::Present { .. }) && !pinned {
        desired(
            DEGRADED,
            True,
            reason::IMAGE_NOT_PINNED,
            format!("image {reference} is a tag, which can move; pin a digest or an image ID"),
            generation,
        )
    } else {
        desired(DEGRADED, False, reason::AS_EXPECTED, "", generation)
    };
    let mut conditions = vec![ready, degraded];
    let mut status = AdapterStatus { image_id, ..AdapterStatus::default() };
    if let Some(outcome) = gates {
        conditions.push(admitted(outcome, generation));
        status.admission_mode = Some(outcome.mode);
        status.admission =
            outcome.decisions.iter().filter(|d| d.gate != GateKind::CapabilityRouting).cloned().collect();
        status.evidence = outcome.evidence.clone();
        status.receipt = outcome.receipt.clone();
    }
    (conditions, status)
}
