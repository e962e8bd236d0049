//! The evidence path without an engine: built-in contracts replay clean through the real
//! planner and capture, a changed plan diverges, and the fingerprint moves with what it covers.

use roundtable_admission::surface::Surface;
use roundtable_admission::{Evidence, contracts};
use roundtable_specs::admission::{CanaryVerdict, ConformanceVerdict, RefusalReason, SealedReceipt};
use roundtable_specs::builtins::{BUILTIN_NAMES, template};

fn green(version: &str) -> Surface {
    Surface { version: Some(version.into()), verdict: ConformanceVerdict::Ok, detail: "ok".into() }
}

fn evidence_for(name: &str, folder: &std::path::Path, image_id: &str, version: &str) -> Evidence {
    let adapter = template(name).expect("a built-in").resolve(name);
    let contract = contracts::load(folder, &adapter);
    Evidence::gather(&adapter, image_id.into(), contract, green(version), CanaryVerdict::Unknown, None)
}

#[test]
fn every_builtin_contract_replays_clean() {
    let empty = tempfile::tempdir().expect("tempdir");
    for name in BUILTIN_NAMES {
        let evidence = evidence_for(name, empty.path(), "sha256:aa", "1.0.0");
        assert_eq!(evidence.refusal(), None, "{name}: {:?}", evidence.replay);
        assert!(!evidence.replay.is_empty(), "{name}");
    }
}

#[test]
fn a_custom_contract_that_expects_another_command_line_diverges() {
    let folder = tempfile::tempdir().expect("tempdir");
    let (_, text) = roundtable_specs::contract::builtin(roundtable_specs::adapter::Provider::Codex);
    // The operator's copy still expects a flag the planner no longer passes.
    std::fs::write(
        folder.path().join("codex.yaml"),
        text.replace("--skip-git-repo-check, --dangerously", "--skip-git-repo-check, --ephemeral, --dangerously"),
    )
    .expect("write");
    let evidence = evidence_for("codex", folder.path(), "sha256:aa", "0.171.0");
    let (reason, detail) = evidence.refusal().expect("a refusal");
    assert_eq!(reason, RefusalReason::ReplayDiverged);
    assert!(detail.starts_with("transcript codex-exec: args: expected"), "{detail}");
}

#[test]
fn a_broken_contract_is_no_contract_naming_its_line() {
    let folder = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        folder.path().join("codex.yaml"),
        "adapter: codex\nversionCommand: [codex]\nhelpCommand: [codex]\nflags: []\n",
    )
    .expect("write");
    let (reason, detail) = evidence_for("codex", folder.path(), "sha256:aa", "1.0.0").refusal().expect("a refusal");
    assert_eq!(reason, RefusalReason::NoContract);
    assert!(detail.contains("codex.yaml:4:1: flags: unknown field"), "{detail}");
}

#[test]
fn the_fingerprint_is_deterministic_and_covers_image_version_and_contract() {
    let empty = tempfile::tempdir().expect("tempdir");
    let base = evidence_for("claude", empty.path(), "sha256:aa", "2.1.240");
    assert_eq!(base.fingerprint(), evidence_for("claude", empty.path(), "sha256:aa", "2.1.240").fingerprint());
    assert_ne!(base.fingerprint(), evidence_for("claude", empty.path(), "sha256:bb", "2.1.240").fingerprint());
    assert_ne!(base.fingerprint(), evidence_for("claude", empty.path(), "sha256:aa", "2.1.241").fingerprint());
    let (_, text) = roundtable_specs::contract::builtin(roundtable_specs::adapter::Provider::Claude);
    std::fs::write(empty.path().join("claude.yaml"), format!("{text}\n# a comment changes the bytes\n"))
        .expect("write");
    assert_ne!(base.fingerprint(), evidence_for("claude", empty.path(), "sha256:aa", "2.1.240").fingerprint());
}

#[test]
fn a_refusal_forbids_spawn_and_every_capability() {
    let empty = tempfile::tempdir().expect("tempdir");
    let adapter = template("codex").expect("built-in").resolve("codex");
    let evidence = Evidence::gather(
        &adapter,
        "sha256:aa".into(),
        Ok(None),
        Surface::skipped("no contract"),
        CanaryVerdict::Unknown,
        None,
    );
    let receipt = evidence.receipt(86_400, "2026-11-30T00:00:00Z".into(), None);
    assert_eq!(receipt.reason, Some(RefusalReason::NoContract));
    assert!(receipt.allowed_capabilities.is_empty());
    assert!(receipt.forbidden_capabilities.contains(&"spawn".to_owned()));
    assert!(receipt.remediation.contains("roundtable admission check codex --seal"), "{}", receipt.remediation);
    let admitted = evidence_for("codex", empty.path(), "sha256:aa", "0.171.0").receipt(
        86_400,
        "2026-11-30T00:00:00Z".into(),
        None,
    );
    assert_eq!(admitted.allowed_capabilities.first().map(String::as_str), Some("egress"));
    assert!(admitted.allowed_capabilities.contains(&"spawn".to_owned()));
    // The id is the hash of the canonical body: the same body, the same id.
    assert_eq!(SealedReceipt::seal(admitted.clone()).id, SealedReceipt::seal(admitted).id);
}

#[test]
fn a_receipt_sealed_for_the_broker_does_not_admit_the_adapter_in_env_mode() {
    use roundtable_admission::gate::admission;
    use roundtable_admission::{Anchor, Stored};
    use roundtable_specs::adapter::CredentialMode;
    let empty = tempfile::tempdir().expect("tempdir");
    let brokered = evidence_for("codex", empty.path(), "sha256:aa", "0.171.0");
    assert_eq!(brokered.credential_mode, Some(CredentialMode::Broker));
    let body = brokered.receipt(86_400, "2026-01-01T00:00:00Z".into(), None);
    assert_eq!(body.credential_mode, Some(CredentialMode::Broker), "the receipt records the mode");
    let stored = Stored::Found(Box::new(SealedReceipt::seal(body)));
    let now = time::OffsetDateTime::parse("2026-01-01T01:00:00Z", &time::format_description::well_known::Rfc3339)
        .expect("time");
    let anchor = Anchor::Recorded { seq: 1, at: now - time::Duration::minutes(30) };
    assert!(admission(&brokered, &stored, &anchor, 86_400, now).admitted());

    // The same image and CLI opted out, with a contract of its own that expects the env-mode
    // plan (the egress proxy, no broker): its evidence is green, but the receipt is not its own.
    let folder = tempfile::tempdir().expect("tempdir");
    let (_, text) = roundtable_specs::contract::builtin(roundtable_specs::adapter::Provider::Codex);
    std::fs::write(
        folder.path().join("codex.yaml"),
        text.replace(
            "HOME, HTTPS_PROXY, NODE_EXTRA_CA_CERTS, NO_PROXY, PATH, REQUESTS_CA_BUNDLE, ROUNDTABLE_AGENT_CAPABILITY, SSL_CERT_FILE, TMPDIR, https_proxy, no_proxy]",
            "HOME, HTTPS_PROXY, PATH, ROUNDTABLE_AGENT_CAPABILITY, TMPDIR, https_proxy]",
        ),
    )
    .expect("write");
    let mut adapter = template("codex").expect("a built-in").resolve("codex");
    adapter.credential_mode = CredentialMode::Env;
    let contract = contracts::load(folder.path(), &adapter);
    let env_mode =
        Evidence::gather(&adapter, "sha256:aa".into(), contract, green("0.171.0"), CanaryVerdict::Unknown, None);
    assert_eq!(env_mode.refusal(), None, "{:?}", env_mode.replay);
    assert_eq!(env_mode.credential_mode, Some(CredentialMode::Env));
    let decision = admission(&env_mode, &stored, &anchor, 86_400, now);
    assert_eq!(decision.reason.as_deref(), Some(RefusalReason::FingerprintMismatch.as_str()), "{}", decision.message);
    assert!(decision.message.contains("the credential mode broker → env"), "{}", decision.message);

    // The mode alone moves the fingerprint.
    let mut relabelled = brokered.clone();
    relabelled.credential_mode = Some(CredentialMode::Env);
    assert_ne!(relabelled.fingerprint(), brokered.fingerprint());
    assert_eq!(
        admission(&relabelled, &stored, &anchor, 86_400, now).reason.as_deref(),
        Some(RefusalReason::FingerprintMismatch.as_str())
    );
}
