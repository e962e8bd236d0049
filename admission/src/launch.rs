//! The one runtime decision every container of an Adapter's image starts under: the runtime
//! class gate's decision as a launch ([`launchable`]). Admission's probes, its canaries (a
//! brokered Adapter's route canary included) and agent diagnostics start theirs through
//! `Admitter::launch` (`authority.rs`), which takes it from here: when the gate refuses the
//! Adapter, nothing of its image runs. There is no fallback to the engine's default runtime,
//! which is exactly what the policy refused.

use roundtable_session_runtime::RuntimeError;
use roundtable_specs::admission::GateDecision;
use roundtable_specs::names::RuntimeClass;
use roundtable_specs::runtime_class::ResolvedRuntime;

/// The runtime the runtime class gate admitted for one Adapter's containers. Only
/// [`launchable`] makes one, from an admitting decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launchable {
    /// `None`: the engine's default, admitted only when no class is required and the engine
    /// could not say which runtime that is.
    pub(crate) class: Option<RuntimeClass>,
}

impl Launchable {
    /// The class containers are created under; `None`: the engine's default.
    pub fn class(&self) -> Option<&RuntimeClass> {
        self.class.as_ref()
    }
}

/// The runtime class gate refused an Adapter, so nothing of its image is started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nothing of adapter {}'s image is started: {decision}", decision.adapter)]
pub struct RuntimeRefused {
    /// The gate's refusal, with its reason, message and remediation.
    pub decision: Box<GateDecision>,
}

/// Why a container of an Adapter's image was not started, or did not run.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Refused(#[from] RuntimeRefused),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// For callers that report every failure to run a probe as the runtime's (agent diagnostics):
/// the refusal stays the source, so its words reach the report.
impl From<LaunchError> for RuntimeError {
    fn from(error: LaunchError) -> Self {
        match error {
            LaunchError::Runtime(error) => error,
            LaunchError::Refused(refused) => {
                RuntimeError::Engine { step: "the runtime class gate refused the container", source: Box::new(refused) }
            }
        }
    }
}

/// The runtime class gate's outcome as a launch: its runtime when it admitted, its refusal
/// otherwise. Pure; the one place a refusal turns into "start nothing".
pub fn launchable(decision: GateDecision, runtime: Option<ResolvedRuntime>) -> Result<Launchable, RuntimeRefused> {
    if !decision.admitted() {
        return Err(RuntimeRefused { decision: Box::new(decision) });
    }
    Ok(Launchable { class: runtime.map(|runtime| runtime.class) })
}

#[cfg(test)]
mod tests {
    use roundtable_specs::admission::{GateKind, Verdict};

    use super::*;

    fn decided(verdict: Verdict) -> GateDecision {
        GateDecision {
            gate: GateKind::RuntimeClass,
            adapter: "codex".into(),
            verdict,
            reason: (verdict == Verdict::Refuse).then(|| "runtime_not_allowed".into()),
            message: "adapter codex would run under runc".into(),
            remediation: String::new(),
            receipt: None,
        }
    }

    fn resolved(class: &str) -> ResolvedRuntime {
        ResolvedRuntime::new(class.parse().expect("class"), None)
    }

    #[test]
    fn a_refusal_starts_nothing_even_when_a_runtime_is_at_hand() {
        // The regression: the refused decision's runtime was `None`, read as "the engine's default".
        for runtime in [None, Some(resolved("runc"))] {
            let refused = launchable(decided(Verdict::Refuse), runtime).expect_err("refused");
            assert!(refused.to_string().starts_with("nothing of adapter codex's image is started"), "{refused}");
            assert!(refused.to_string().contains("runtime_not_allowed"), "{refused}");
        }
    }

    #[test]
    fn an_admission_launches_under_its_class_or_the_unnamed_default() {
        let under = launchable(decided(Verdict::Admit), Some(resolved("runsc"))).expect("admitted");
        assert_eq!(under.class().map(RuntimeClass::as_str), Some("runsc"));
        let default = launchable(decided(Verdict::Admit), None).expect("admitted");
        assert_eq!(default.class(), None);
    }

    #[test]
    fn a_refusal_reported_as_a_runtime_error_keeps_its_words() {
        let error: RuntimeError =
            LaunchError::from(RuntimeRefused { decision: Box::new(decided(Verdict::Refuse)) }).into();
        let chain = roundtable_telemetry::error_chain(&error);
        assert!(chain.contains("refused (runtime_not_allowed)"), "{chain}");
    }
}
