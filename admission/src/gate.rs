//! The spawn-path gates. Admission compares the live evidence with the sealed receipt: green
//! evidence alone does not admit, the receipt is the gate. Beside it, the security floor (the
//! installed CLI is at least the minimum safe version) and capability routing (the adapter
//! offers what the Assignment requires).

use roundtable_specs::adapter::{Capability, ResolvedAdapter};
use roundtable_specs::admission::{GateDecision, GateKind, RECEIPT_KIND, RefusalReason, SealedReceipt, Verdict};
use roundtable_specs::names::{RuntimeClass, VersionFloor};
use roundtable_specs::policy::AdmissionPolicySpec;
use roundtable_specs::runtime_class::{EngineRuntimes, HostPaths, ResolvedRuntime, RuntimeUnfit};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::evidence::Evidence;

/// What the receipt folder holds for an adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    Missing,
    /// There is a file but it is not a receipt that verifies: why.
    Unreadable(String),
    Found(Box<SealedReceipt>),
}

fn refuse(
    gate: GateKind,
    adapter: &str,
    reason: &str,
    message: String,
    remediation: String,
    receipt: Option<String>,
) -> GateDecision {
    GateDecision {
        gate,
        adapter: adapter.into(),
        verdict: Verdict::Refuse,
        reason: Some(reason.into()),
        message,
        remediation,
        receipt,
    }
}

fn admission_refusal(adapter: &str, reason: RefusalReason, message: String, receipt: Option<String>) -> GateDecision {
    refuse(GateKind::Admission, adapter, reason.as_str(), message, reason.remediation(adapter), receipt)
}

/// How far ahead of the gate's clock a receipt's `generatedAt` may be: the clocks of the
/// controller that sealed it and the one that checks it may differ a little, never by more.
pub const CLOCK_SKEW: time::Duration = time::Duration::minutes(5);

/// Where this project's audit chain records a receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// The `admission.receipt` entry `seq`, recorded at `at`, verified under the project's key.
    Recorded { seq: i64, at: OffsetDateTime },
    /// No entry of this chain that verifies names the receipt: why.
    Missing(String),
    /// The chain could not be read for want of its key (a view without the audit key): why,
    /// naming where the key was looked for.
    Unverifiable(String),
}

/// When a receipt recorded by the chain at `recorded_at` with `ttl_seconds` expires.
pub fn expiry(recorded_at: OffsetDateTime, ttl_seconds: u64) -> Option<OffsetDateTime> {
    recorded_at.checked_add(time::Duration::seconds(i64::try_from(ttl_seconds).ok()?))
}

/// When `sealed` expires under the policy's `ttl_seconds` (its own TTL can only shorten it),
/// counted from when the chain recorded it; `None` when it is not anchored.
pub fn receipt_expiry(sealed: &SealedReceipt, anchor: &Anchor, ttl_seconds: u64) -> Option<OffsetDateTime> {
    match anchor {
        Anchor::Recorded { at, .. } => expiry(*at, sealed.receipt.ttl_seconds.min(ttl_seconds)),
        Anchor::Missing(_) | Anchor::Unverifiable(_) => None,
    }
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// The admission gate: the live evidence against the stored receipt and where the chain
/// recorded it, at `now`, with the policy's `ttl_seconds` (a receipt's own TTL can only
/// shorten it). The file's own claims are checked first, then its anchor, then its age.
pub fn admission(
    evidence: &Evidence,
    stored: &Stored,
    anchor: &Anchor,
    ttl_seconds: u64,
    now: OffsetDateTime,
) -> GateDecision {
    let adapter = evidence.adapter.as_str();
    let receipt_id = match stored {
        Stored::Found(sealed) => Some(sealed.id.clone()),
        _ => None,
    };
    if let Some((reason, detail)) = evidence.refusal() {
        return admission_refusal(adapter, reason, detail, receipt_id);
    }
    let sealed = match stored {
        Stored::Missing => {
            return admission_refusal(
                adapter,
                RefusalReason::NoReceipt,
                "the evidence is green but no receipt is sealed".into(),
                None,
            );
        }
        Stored::Unreadable(why) => {
            return admission_refusal(adapter, RefusalReason::ReceiptTampered, why.clone(), None);
        }
        Stored::Found(sealed) => sealed,
    };
    let body = &sealed.receipt;
    if !sealed.intact() {
        return admission_refusal(
            adapter,
            RefusalReason::ReceiptTampered,
            format!("the receipt no longer hashes to its id {}", sealed.id),
            receipt_id,
        );
    }
    if body.kind != RECEIPT_KIND || body.adapter != adapter {
        let why = format!(
            "the receipt is a {:?} for adapter {:?}, not an {RECEIPT_KIND} for {adapter:?}",
            body.kind, body.adapter
        );
        return admission_refusal(adapter, RefusalReason::ReceiptTampered, why, receipt_id);
    }
    match OffsetDateTime::parse(&body.generated_at, &Rfc3339) {
        Ok(generated) if generated <= now + CLOCK_SKEW => {}
        Ok(_) => {
            let why = format!(
                "the receipt says it was generated at {}, after now ({}) by more than the {} minutes of clock skew allowed",
                body.generated_at,
                rfc3339(now),
                CLOCK_SKEW.whole_minutes()
            );
            return admission_refusal(adapter, RefusalReason::ReceiptTampered, why, receipt_id);
        }
        Err(_) => {
            let why = format!("the receipt's generatedAt {:?} does not parse", body.generated_at);
            return admission_refusal(adapter, RefusalReason::ReceiptStale, why, receipt_id);
        }
    }
    if let Anchor::Unverifiable(why) = anchor {
        let why = format!("receipt {} cannot be verified: {why}", short(&sealed.id));
        return admission_refusal(adapter, RefusalReason::ReceiptUnverified, why, receipt_id);
    }
    if let Anchor::Missing(why) = anchor {
        let why = format!(
            "receipt {} is not anchored in this project's audit chain ({why}); only `--seal` here makes a receipt valid",
            short(&sealed.id)
        );
        return admission_refusal(adapter, RefusalReason::NoReceipt, why, receipt_id);
    }
    if body.verdict == Verdict::Refuse {
        let why = format!("the sealed receipt records a refusal ({})", body.reason.map_or("unknown", |r| r.as_str()));
        return admission_refusal(adapter, RefusalReason::StoredRefusal, why, receipt_id);
    }
    match receipt_expiry(sealed, anchor, ttl_seconds) {
        Some(expires) if now <= expires => {}
        expires => {
            let why = match expires {
                Some(expires) => format!("the receipt expired at {}", rfc3339(expires)),
                None => "the receipt's TTL does not fit the clock".to_owned(),
            };
            return admission_refusal(adapter, RefusalReason::ReceiptStale, why, receipt_id);
        }
    }
    let live = evidence.fingerprint();
    if body.replay_fingerprint != live {
        let mut changed = Vec::new();
        if body.image_id != evidence.image_id {
            changed.push(format!("image {} → {}", short(&body.image_id), short(&evidence.image_id)));
        }
        if body.installed_version != evidence.surface.version {
            changed.push(format!("version {:?} → {:?}", body.installed_version, evidence.surface.version));
        }
        if body.contract_hash != evidence.contract_hash() {
            changed.push("the contract".into());
        }
        if body.profile_hash != evidence.profile_hash() {
            changed.push("the capability profile".into());
        }
        if body.credential_mode != evidence.credential_mode {
            let word = |mode: Option<roundtable_specs::adapter::CredentialMode>| mode.map_or("none", |m| m.as_str());
            changed.push(format!(
                "the credential mode {} → {}",
                word(body.credential_mode),
                word(evidence.credential_mode)
            ));
        }
        if body.runtime_class != evidence.runtime_class {
            let word = |class: Option<&RuntimeClass>| class.map_or("unknown", RuntimeClass::as_str).to_owned();
            changed.push(format!(
                "the runtime class {} → {}",
                word(body.runtime_class.as_ref()),
                word(evidence.runtime_class.as_ref())
            ));
        }
        if changed.is_empty() {
            changed.push("the transcript replay".into());
        }
        let why = format!("changed since sealing: {}", changed.join(", "));
        return admission_refusal(adapter, RefusalReason::FingerprintMismatch, why, receipt_id);
    }
    GateDecision {
        gate: GateKind::Admission,
        adapter: adapter.into(),
        verdict: Verdict::Admit,
        reason: None,
        message: format!(
            "receipt {} pins version {} in image {}",
            short(&sealed.id),
            body.installed_version.as_deref().unwrap_or("?"),
            short(&body.image_id)
        ),
        remediation: String::new(),
        receipt: receipt_id,
    }
}

fn short(id: &str) -> &str {
    let id = id.strip_prefix("sha256:").unwrap_or(id);
    &id[..id.len().min(12)]
}

/// The numbers of a version (`1.2.3-rc1` → `[1, 2, 3]`), padded to three.
fn numbers(version: &str) -> Option<[u64; 3]> {
    let core = version.trim().trim_start_matches('v').split(['-', '+', ' ']).next()?;
    let mut out = [0u64; 3];
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    for (slot, part) in out.iter_mut().zip(parts) {
        *slot = part.parse().ok()?;
    }
    Some(out)
}

/// The higher of two floors (the policy's and the Adapter's own).
pub fn floor_of<'a>(a: Option<&'a VersionFloor>, b: Option<&'a VersionFloor>) -> Option<&'a VersionFloor> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if numbers(a.as_str()) >= numbers(b.as_str()) { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The security floor: the installed version must be at least `floor`.
pub fn security_floor(adapter: &str, installed: Option<&str>, floor: Option<&VersionFloor>) -> GateDecision {
    let admit = |message: String| GateDecision {
        gate: GateKind::SecurityFloor,
        adapter: adapter.into(),
        verdict: Verdict::Admit,
        reason: None,
        message,
        remediation: String::new(),
        receipt: None,
    };
    let Some(floor) = floor else { return admit("no minimum version".into()) };
    let remediation = format!("pin an image whose CLI is at least {floor}");
    match installed.and_then(numbers) {
        Some(have) if Some(have) >= numbers(floor.as_str()) => {
            admit(format!("version {} is at least {floor}", installed.unwrap_or_default()))
        }
        Some(_) => refuse(
            GateKind::SecurityFloor,
            adapter,
            "below_floor",
            format!("version {} is below the minimum {floor}", installed.unwrap_or_default()),
            remediation,
            None,
        ),
        None => refuse(
            GateKind::SecurityFloor,
            adapter,
            "below_floor",
            format!("the installed version is unknown ({installed:?}); the minimum is {floor}"),
            remediation,
            None,
        ),
    }
}

/// The runtime class gate: the class `adapter` runs under (its own, else the policy's for all,
/// else the engine's default) must be one the policy allows and, when the engine says what it
/// has (`engine`), registered there and fit for the adapter's sessions. Returns the decision and,
/// when admitted, the runtime its sessions are created under and must prove from inside.
pub fn runtime_class(
    adapter: &ResolvedAdapter,
    policy: &AdmissionPolicySpec,
    engine: Option<&EngineRuntimes>,
) -> (GateDecision, Option<ResolvedRuntime>) {
    let name = adapter.name.as_str();
    let (class, chosen_by) = match (&adapter.runtime_class, &policy.runtime_class) {
        (Some(own), _) => (Some(own.clone()), "its own spec.runtimeClass"),
        (None, Some(policys)) => (Some(policys.clone()), "the AdmissionPolicy's spec.runtimeClass"),
        (None, None) => {
            (engine.and_then(|e| e.default.parse::<RuntimeClass>().ok()), "the engine's default, as it names none")
        }
    };
    let decision = |verdict: Verdict, reason: Option<&str>, message: String, remediation: String| GateDecision {
        gate: GateKind::RuntimeClass,
        adapter: name.into(),
        verdict,
        reason: reason.map(Into::into),
        message,
        remediation,
        receipt: None,
    };
    let Some(class) = class else {
        let message = "the engine's default runtime (the engine did not say which)".to_owned();
        if policy.require_runtime_class.is_empty() {
            return (decision(Verdict::Admit, None, message, String::new()), None);
        }
        let why = format!("{message} cannot be shown to be one the AdmissionPolicy requires");
        return (decision(Verdict::Refuse, Some("runtime_not_allowed"), why, require_remedy(policy)), None);
    };
    if !policy.require_runtime_class.is_empty() && !policy.require_runtime_class.contains(&class) {
        let has = match engine {
            Some(engine) => {
                format!("; the engine has {}", engine.registered.keys().cloned().collect::<Vec<_>>().join(", "))
            }
            None => String::new(),
        };
        let message = format!(
            "adapter {name} would run under {class} ({chosen_by}); the AdmissionPolicy requires {}{has}",
            names(&policy.require_runtime_class)
        );
        let lacking = engine.is_some_and(|engine| {
            policy.require_runtime_class.iter().all(|required| !engine.registered.contains_key(required.as_str()))
        });
        let remedy = if lacking {
            format!(
                "register {} with the engine (its daemon.json, docs/runtime-classes.md), then {}",
                names(&policy.require_runtime_class),
                require_remedy(policy)
            )
        } else {
            require_remedy(policy)
        };
        return (decision(Verdict::Refuse, Some("runtime_not_allowed"), message, remedy), None);
    }
    if let Some(HostPaths::NotSeen(why)) = engine.map(|e| &e.host_paths) {
        let message = format!(
            "the engine cannot see this host's files ({why}); sessions bind-mount the controller's binary, their source and their sockets from this host"
        );
        let remedy = "run the controller on the engine's machine, or point DOCKER_HOST at an engine there".to_owned();
        return (decision(Verdict::Refuse, Some("engine_without_host_paths"), message, remedy), None);
    }
    if let Some(engine) = engine
        && let Err(unfit) = engine.fit(&class, adapter.uses_host_sockets())
    {
        let reason = match unfit {
            RuntimeUnfit::NotRegistered { .. } | RuntimeUnfit::ChoiceIgnored { .. } => "runtime_unavailable",
            RuntimeUnfit::NoHostSockets { .. } => "runtime_without_host_sockets",
        };
        // The message says what to change in the engine's daemon.json.
        return (decision(Verdict::Refuse, Some(reason), unfit.to_string(), String::new()), None);
    }
    let runtime = ResolvedRuntime::new(class, engine.and_then(|e| e.host_kernel.clone()));
    let message = format!("runs under {}, which must show {} from inside", runtime.class, runtime.kernel.described());
    (decision(Verdict::Admit, None, message, String::new()), Some(runtime))
}

fn names(classes: &[RuntimeClass]) -> String {
    classes.iter().map(RuntimeClass::as_str).collect::<Vec<_>>().join(" or ")
}

fn require_remedy(policy: &AdmissionPolicySpec) -> String {
    format!(
        "set spec.runtimeClass to {} on the Adapter (or on the AdmissionPolicy, for all)",
        names(&policy.require_runtime_class)
    )
}

/// Capability routing: every capability `requires` names must be in the adapter's profile.
pub fn capability_routing(adapter: &ResolvedAdapter, requires: &[Capability]) -> GateDecision {
    let offered = adapter.capabilities();
    let missing: Vec<&str> = requires.iter().filter(|c| !offered.contains(c)).map(|c| c.as_str()).collect();
    if missing.is_empty() {
        let names: Vec<&str> = requires.iter().map(|c| c.as_str()).collect();
        return GateDecision {
            gate: GateKind::CapabilityRouting,
            adapter: adapter.name.clone(),
            verdict: Verdict::Admit,
            reason: None,
            message: if names.is_empty() { "nothing required".into() } else { format!("offers {}", names.join(", ")) },
            remediation: String::new(),
            receipt: None,
        };
    }
    refuse(
        GateKind::CapabilityRouting,
        &adapter.name,
        "capability_unmet",
        format!("adapter {} does not offer {}", adapter.name, missing.join(", ")),
        "route the Assignment to an adapter that offers them, or drop them from spec.requires".into(),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_specs::admission::CanaryVerdict;
    use roundtable_specs::runtime_class::SandboxKernel;

    /// Green evidence for the built-in codex, and a receipt of it generated at `generated_at`.
    fn sealed_at(generated_at: OffsetDateTime) -> (Evidence, Stored) {
        let empty = tempfile::tempdir().expect("tempdir");
        let adapter = roundtable_specs::builtins::template("codex").expect("built-in").resolve("codex");
        let contract = crate::contracts::load(empty.path(), &adapter);
        let surface = crate::surface::Surface {
            version: Some("0.171.0".into()),
            verdict: roundtable_specs::admission::ConformanceVerdict::Ok,
            detail: "ok".into(),
        };
        let evidence = Evidence::gather(&adapter, "sha256:aa".into(), contract, surface, CanaryVerdict::Unknown, None);
        let body = evidence.receipt(86_400, rfc3339(generated_at), None);
        (evidence, Stored::Found(Box::new(SealedReceipt::seal(body))))
    }

    fn recorded(at: OffsetDateTime) -> Anchor {
        Anchor::Recorded { seq: 7, at }
    }

    const DAY: u64 = 86_400;

    #[test]
    fn a_receipt_generated_after_now_is_refused_beyond_the_skew() {
        let now = OffsetDateTime::now_utc();
        let (evidence, stored) = sealed_at(now + time::Duration::minutes(4));
        assert!(admission(&evidence, &stored, &recorded(now), DAY, now).admitted(), "within the skew");
        let far = OffsetDateTime::parse("2099-01-01T00:00:00Z", &Rfc3339).expect("time");
        let (evidence, stored) = sealed_at(far);
        let refused = admission(&evidence, &stored, &recorded(now), DAY, now);
        assert_eq!(refused.reason.as_deref(), Some("receipt_tampered"), "{refused}");
        assert!(refused.message.contains("generated at 2099-01-01T00:00:00Z, after now"), "{}", refused.message);
    }

    #[test]
    fn a_receipt_expires_a_ttl_after_the_chain_recorded_it_whatever_the_file_says() {
        let now = OffsetDateTime::now_utc();
        // The file says it was generated a minute ago; the chain recorded it 25 hours ago.
        let (evidence, stored) = sealed_at(now - time::Duration::minutes(1));
        let anchor = recorded(now - time::Duration::hours(25));
        let stale = admission(&evidence, &stored, &anchor, DAY, now);
        assert_eq!(stale.reason.as_deref(), Some("receipt_stale"), "{stale}");
        let Stored::Found(sealed) = &stored else { unreachable!("sealed") };
        assert_eq!(receipt_expiry(sealed, &anchor, DAY), Some(now - time::Duration::hours(1)));
        assert!(admission(&evidence, &stored, &recorded(now - time::Duration::hours(23)), DAY, now).admitted());
        // The policy's TTL shortens the receipt's own.
        let short = admission(&evidence, &stored, &recorded(now - time::Duration::hours(2)), 3_600, now);
        assert_eq!(short.reason.as_deref(), Some("receipt_stale"), "{short}");
    }

    #[test]
    fn a_receipt_the_chain_does_not_record_is_no_receipt() {
        let now = OffsetDateTime::now_utc();
        let (evidence, stored) = sealed_at(now);
        let missing = Anchor::Missing("no admission.receipt entry names it".into());
        let refused = admission(&evidence, &stored, &missing, DAY, now);
        assert_eq!(refused.reason.as_deref(), Some("no_receipt"), "{refused}");
        assert!(refused.message.contains("is not anchored in this project's audit chain"), "{}", refused.message);
        assert!(refused.remediation.contains("admission check codex --seal"), "{}", refused.remediation);
        assert!(refused.receipt.is_some(), "the refusal names the receipt it saw");
    }

    fn engine() -> EngineRuntimes {
        EngineRuntimes {
            default: "runc".into(),
            registered: [("runc", vec![]), ("runsc", vec!["--host-uds=open".to_owned()]), ("runsc-sealed", vec![])]
                .into_iter()
                .map(|(name, args)| (name.to_owned(), args))
                .collect(),
            host_kernel: Some("6.1.0".into()),
            ..EngineRuntimes::default()
        }
    }

    fn adapter_on(runtime: Option<&str>, sockets: bool) -> ResolvedAdapter {
        let mut adapter = roundtable_specs::builtins::template("generic").expect("generic").resolve("agent");
        adapter.runtime_class = runtime.map(|r| r.parse().expect("class"));
        if sockets {
            adapter.provider_hosts = vec!["api.example.test".parse().expect("host")];
        }
        adapter
    }

    fn requiring(classes: &[&str]) -> AdmissionPolicySpec {
        AdmissionPolicySpec {
            require_runtime_class: classes.iter().map(|c| c.parse().expect("class")).collect(),
            ..AdmissionPolicySpec::default()
        }
    }

    #[test]
    fn the_runtime_class_is_the_adapters_else_the_policys_else_the_engines_default() {
        let (decision, runtime) = runtime_class(&adapter_on(None, true), &requiring(&[]), Some(&engine()));
        assert!(decision.admitted(), "{decision}");
        let runtime = runtime.expect("resolved");
        assert_eq!((runtime.class.as_str(), runtime.kernel), ("runc", SandboxKernel::Host));
        assert_eq!(runtime.host_kernel.as_deref(), Some("6.1.0"));
        let policy = AdmissionPolicySpec { runtime_class: Some("runsc".parse().expect("class")), ..requiring(&[]) };
        let (_, runtime) = runtime_class(&adapter_on(None, true), &policy, Some(&engine()));
        assert_eq!(runtime.expect("resolved").kernel, SandboxKernel::Gvisor);
        let (_, runtime) = runtime_class(&adapter_on(Some("runc"), true), &policy, Some(&engine()));
        assert_eq!(runtime.expect("resolved").class.as_str(), "runc", "the Adapter's own wins");
    }

    #[test]
    fn a_required_class_refuses_every_other_and_blocks_under_every_mode() {
        use roundtable_specs::policy::AdmissionMode;
        let (refused, runtime) =
            runtime_class(&adapter_on(Some("runc"), false), &requiring(&["runsc"]), Some(&engine()));
        assert_eq!(refused.reason.as_deref(), Some("runtime_not_allowed"), "{refused}");
        assert!(runtime.is_none());
        for mode in [AdmissionMode::Off, AdmissionMode::Warn, AdmissionMode::Enforce] {
            assert!(refused.blocks(mode), "{mode:?}");
        }
        let (admitted, _) = runtime_class(&adapter_on(Some("runsc"), true), &requiring(&["runsc"]), Some(&engine()));
        assert!(admitted.admitted() && !admitted.blocks(AdmissionMode::Enforce), "{admitted}");
        // An engine that cannot be asked cannot show its default is one required.
        let (unknown, _) = runtime_class(&adapter_on(None, false), &requiring(&["runsc"]), None);
        assert_eq!(unknown.reason.as_deref(), Some("runtime_not_allowed"), "{unknown}");
        // A declared class on an engine that cannot be asked goes ahead; the self-check proves it.
        let (declared, runtime) = runtime_class(&adapter_on(Some("runsc"), true), &requiring(&["runsc"]), None);
        assert!(declared.admitted() && runtime.is_some_and(|r| r.host_kernel.is_none()), "{declared}");
    }

    #[test]
    fn a_required_class_the_engine_lacks_is_refused_naming_the_class_and_what_the_engine_has() {
        let (refused, runtime) = runtime_class(&adapter_on(None, false), &requiring(&["gvisor"]), Some(&engine()));
        assert!(runtime.is_none(), "nothing to run under");
        assert_eq!(refused.reason.as_deref(), Some("runtime_not_allowed"), "{refused}");
        assert!(
            refused.message.contains("would run under runc (the engine's default, as it names none)")
                && refused.message.contains("requires gvisor; the engine has runc, runsc, runsc-sealed"),
            "{}",
            refused.message
        );
        assert!(refused.remediation.starts_with("register gvisor with the engine"), "{}", refused.remediation);
        // A required class the engine has: only the Adapter's choice is to change.
        let (refused, _) = runtime_class(&adapter_on(Some("runc"), false), &requiring(&["runsc"]), Some(&engine()));
        assert!(refused.message.contains("(its own spec.runtimeClass)"), "{}", refused.message);
        assert!(refused.remediation.starts_with("set spec.runtimeClass to runsc"), "{}", refused.remediation);
    }

    #[test]
    fn a_runtime_the_engine_lacks_or_that_cannot_reach_the_sockets_is_refused() {
        let (missing, _) = runtime_class(&adapter_on(Some("kata"), false), &requiring(&[]), Some(&engine()));
        assert_eq!(missing.reason.as_deref(), Some("runtime_unavailable"), "{missing}");
        let (sealed, _) = runtime_class(&adapter_on(Some("runsc-sealed"), true), &requiring(&[]), Some(&engine()));
        assert_eq!(sealed.reason.as_deref(), Some("runtime_without_host_sockets"), "{sealed}");
        // Without provider hosts or MCP it needs no socket, and runs.
        let (socketless, _) = runtime_class(&adapter_on(Some("runsc-sealed"), false), &requiring(&[]), Some(&engine()));
        assert!(socketless.admitted(), "{socketless}");
    }

    #[test]
    fn an_engine_that_cannot_see_this_hosts_files_refuses_every_adapter_under_every_mode() {
        use roundtable_specs::policy::AdmissionMode;
        let remote =
            EngineRuntimes { host_paths: HostPaths::NotSeen("bind source path does not exist".into()), ..engine() };
        let (refused, runtime) = runtime_class(&adapter_on(None, false), &requiring(&[]), Some(&remote));
        assert_eq!(refused.reason.as_deref(), Some("engine_without_host_paths"), "{refused}");
        assert!(refused.message.contains("bind source path does not exist"), "{refused}");
        assert!(runtime.is_none());
        for mode in [AdmissionMode::Off, AdmissionMode::Warn, AdmissionMode::Enforce] {
            assert!(refused.blocks(mode), "{mode:?}");
        }
        let seen = EngineRuntimes { host_paths: HostPaths::Seen, ..engine() };
        assert!(runtime_class(&adapter_on(None, false), &requiring(&[]), Some(&seen)).0.admitted());
    }

    #[test]
    fn routing_names_what_the_adapter_does_not_offer() {
        let generic = roundtable_specs::builtins::template("generic").expect("built-in").resolve("generic");
        let refused = capability_routing(&generic, &[Capability::ReadonlyWorkspace, Capability::Mcp]);
        assert_eq!(
            (refused.reason.as_deref(), refused.message.as_str()),
            (Some("capability_unmet"), "adapter generic does not offer mcp")
        );
        assert!(capability_routing(&generic, &[Capability::ReadonlyWorkspace]).admitted());
    }

    #[test]
    fn versions_compare_by_number_not_text() {
        let floor: VersionFloor = "0.50.0".parse().expect("floor");
        assert!(security_floor("codex", Some("0.171.0"), Some(&floor)).admitted());
        let low = security_floor("codex", Some("0.9.9"), Some(&floor));
        assert_eq!(
            (low.reason.as_deref(), low.message.as_str()),
            (Some("below_floor"), "version 0.9.9 is below the minimum 0.50.0")
        );
        assert!(!security_floor("codex", None, Some(&floor)).admitted());
        assert!(security_floor("codex", None, None).admitted());
        let higher: VersionFloor = "1.2".parse().expect("floor");
        assert_eq!(floor_of(Some(&floor), Some(&higher)), Some(&higher));
    }
}
