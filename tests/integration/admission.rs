//! Receipt-gated admission on the real engine: every refusal reason reached through the real
//! evidence path (a probe container in the adapter's image, the contract, the transcript replay,
//! the canary, the receipt on disk), and the gate in the daemon's spawn path under `enforce`
//! and `warn`.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::support::{
    API, ShowLogOnPanic, commit_all, docker, engine_or_skip, ensure_test_images, json, nothing_left, roundtable,
    start_daemon_with_env, stderr, stdout, wait_until, write,
};

const IMAGE: &str = "roundtable-test/agent:latest";

/// A project declaring `codex`, `generic` and the custom `my-agent` on the test image.
fn project(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", "# Project\n");
    let specs = format!(
        "{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec: {{image: '{IMAGE}'}}\n---\n{API}\nkind: Adapter\nmetadata: {{name: generic}}\nspec: {{image: '{IMAGE}'}}\n---\n{API}\nkind: Adapter\nmetadata: {{name: my-agent}}\nspec: {{image: '{IMAGE}', command: fake-agent}}\n{extra}"
    );
    write(root, ".roundtable/specs.yaml", &specs);
    commit_all(root);
    dir
}

/// `admission check NAME --format json`: its exit code and the item.
fn check(root: &Path, name: &str, seal: bool) -> (Option<i32>, Value) {
    let mut args = vec!["admission", "check", name, "--format", "json"];
    if seal {
        args.push("--seal");
    }
    let out = roundtable(root, &args);
    assert!(out.status.code().is_some_and(|c| c <= 1), "{}{}", stdout(&out), stderr(&out));
    (out.status.code(), json(&out)["items"][0].clone())
}

/// A sealed receipt file's id.
fn sealed_id(sealed: &str) -> String {
    let sealed: Value = serde_json::from_str(sealed).expect("a receipt");
    sealed["id"].as_str().expect("an id").to_owned()
}

fn reason(item: &Value) -> String {
    item["decisions"][0]["reason"].as_str().unwrap_or("admitted").to_owned()
}

fn builtin_contract(name: &str) -> String {
    std::fs::read_to_string(crate::support::repo_root().join(format!("specs/contracts/{name}.yaml"))).expect("contract")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_reason_is_reached_through_the_real_evidence_path() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project("");
    let root = dir.path();

    // Green evidence alone does not admit: the receipt is the gate.
    let (code, item) = check(root, "codex", false);
    assert_eq!((code, reason(&item).as_str()), (Some(1), "no_receipt"), "{item:#}");
    assert_eq!(item["evidence"]["installedVersion"], "0.171.0");
    assert_eq!(item["evidence"]["conformance"], "ok");
    assert!(item["decisions"][0]["remediation"].as_str().is_some_and(|r| r.contains("admission check codex --seal")));

    // Sealing admits; the receipt lands beside the specs.
    let (code, item) = check(root, "codex", true);
    assert_eq!((code, reason(&item).as_str()), (Some(0), "admitted"), "{item:#}");
    let receipt_path = root.join(".roundtable/admission/codex.json");
    let sealed = std::fs::read_to_string(&receipt_path).expect("receipt");

    // A byte changed in the body: the id no longer matches.
    std::fs::write(
        &receipt_path,
        sealed.replace("\"installedVersion\": \"0.171.0\"", "\"installedVersion\": \"0.171.1\""),
    )
    .expect("tamper");
    assert_eq!(reason(&check(root, "codex", false).1), "receipt_tampered");
    std::fs::write(&receipt_path, &sealed).expect("restore");
    assert_eq!(reason(&check(root, "codex", false).1), "admitted");

    // A view without the key that sealed it cannot verify the receipt, and says so, naming where
    // it looked: not "no receipt" beside the receipt's id.
    let keyless = root.join(".no-such-audit.key");
    let keyless = keyless.to_str().expect("utf-8");
    let listed = roundtable(root, &["admission", "list", "--audit-key", keyless]);
    let said = stdout(&listed);
    let row = said.lines().find(|line| line.starts_with("codex ")).unwrap_or_default();
    assert!(row.contains("unverified (no audit key)") && !row.contains("no_receipt"), "{said}");
    let why = format!("codex: receipt {} cannot be verified: no audit key at {keyless}", &sealed_id(&sealed)[..12]);
    assert!(said.contains(&why) && said.contains("ROUNDTABLE_AUDIT_KEY"), "{said}");
    let listed = json(&roundtable(root, &["admission", "list", "--format", "json"]));
    let codex = listed["items"].as_array().and_then(|items| items.iter().find(|i| i["adapter"] == "codex").cloned());
    assert_eq!(codex.map(|item| reason(&item)).as_deref(), Some("admitted"), "with the key: {listed:#}");

    // Deleting the receipt withdraws the admission.
    std::fs::remove_file(&receipt_path).expect("delete");
    assert_eq!(reason(&check(root, "codex", false).1), "no_receipt");

    // A contract that requires a flag the CLI does not advertise (matched as a whole token).
    let contracts = root.join(".roundtable/contracts");
    std::fs::create_dir_all(&contracts).expect("mkdir");
    let wrong = builtin_contract("codex").replace("requiredFlags: [--json,", "requiredFlags: [--frobnicate, --json,");
    std::fs::write(contracts.join("codex.yaml"), &wrong).expect("write");
    let (_, item) = check(root, "codex", false);
    assert_eq!(reason(&item), "conformance_fail");
    assert!(item["decisions"][0]["message"].as_str().is_some_and(|m| m.contains("--frobnicate")), "{item:#}");
    // Sealed while refused, the receipt records the refusal; fixing the contract leaves it stored.
    assert_eq!(check(root, "codex", true).0, Some(1));
    std::fs::remove_file(contracts.join("codex.yaml")).expect("rm");
    assert_eq!(reason(&check(root, "codex", false).1), "stored_refusal");

    // A transcript that expects a command line the planner no longer makes.
    let diverged = builtin_contract("codex")
        .replace("--skip-git-repo-check, --dangerously", "--skip-git-repo-check, --ephemeral, --dangerously");
    std::fs::write(contracts.join("codex.yaml"), &diverged).expect("write");
    let (_, item) = check(root, "codex", false);
    assert_eq!(reason(&item), "replay_diverged");
    assert_eq!(item["evidence"]["transcripts"][0]["passed"], false);
    std::fs::remove_file(contracts.join("codex.yaml")).expect("rm");

    // A custom adapter has no contract until one is written for it; a contract without a
    // transcript is still refused.
    assert_eq!(reason(&check(root, "my-agent", false).1), "no_contract");
    std::fs::write(
        contracts.join("my-agent.yaml"),
        "adapter: my-agent\nversionCommand: [codex, --version]\nhelpCommand: [codex, exec, --help]\nrequiredFlags: [--json]\n",
    )
    .expect("write");
    assert_eq!(reason(&check(root, "my-agent", false).1), "no_transcript");

    // An image without the CLI: the probe is inconclusive.
    write(
        root,
        ".roundtable/claude.yaml",
        &format!("{API}\nkind: Adapter\nmetadata: {{name: claude}}\nspec: {{image: 'roundtable-test/empty:latest'}}\n"),
    );
    let (_, item) = check(root, "claude", false);
    assert_eq!(reason(&item), "conformance_skip", "{item:#}");

    // A red canary refuses whatever the receipt says: generic's canary runs `exit 3`.
    let red = builtin_contract("generic")
        .replace("prompt: echo hello > hello.txt", "prompt: exit 3")
        .replace("args: [-c, echo hello > hello.txt]", "args: [-c, exit 3]");
    std::fs::write(contracts.join("generic.yaml"), &red).expect("write");
    assert_eq!(check(root, "generic", true).0, Some(0));
    let canary = roundtable(root, &["admission", "canary", "generic", "--format", "json"]);
    assert_eq!(canary.status.code(), Some(1), "{}{}", stdout(&canary), stderr(&canary));
    assert_eq!(json(&canary)["items"][0]["verdict"], "red");
    assert_eq!(reason(&check(root, "generic", false).1), "canary_red");
    std::fs::remove_file(contracts.join("generic.yaml")).expect("rm");
    let canary = roundtable(root, &["admission", "canary", "generic"]);
    assert_eq!(canary.status.code(), Some(0), "{}{}", stdout(&canary), stderr(&canary));
    assert!(stdout(&canary).contains("green"), "{}", stdout(&canary));

    // The security floor decides beside admission: under enforce a CLI below it does not spawn.
    write(
        root,
        ".roundtable/policy.yaml",
        &format!(
            "{API}\nkind: AdmissionPolicy\nmetadata: {{name: default}}\nspec: {{mode: enforce, minVersions: {{codex: '0.200.0'}}}}\n"
        ),
    );
    let (_, item) = check(root, "codex", false);
    assert_eq!(item["decisions"][1]["reason"], "below_floor", "{item:#}");
    assert_eq!(item["decisions"][1]["message"], "version 0.171.0 is below the minimum 0.200.0");
    assert_eq!(item["spawn"], false);

    // Every seal and attestation is in the chain, which verifies.
    let verify = roundtable(root, &["audit", "verify"]);
    assert!(verify.status.success(), "{}{}", stdout(&verify), stderr(&verify));
    let list = json(&roundtable(root, &["admission", "list", "--format", "json"]));
    assert_eq!(list["kind"], "AdmissionList");
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_image_with_another_version_is_a_fingerprint_mismatch() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    // The same image with the CLI reporting a newer release.
    let container = docker(&["create", IMAGE, "true"]);
    docker(&[
        "commit",
        "--change",
        "ENV AGENT_DOUBLE_VERSION=0.172.0",
        &container,
        "roundtable-test/agent-next:latest",
    ]);
    docker(&["rm", &container]);

    let dir = project("");
    let root = dir.path();
    assert_eq!(check(root, "codex", true).0, Some(0));
    write(
        root,
        ".roundtable/codex.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec: {{image: 'roundtable-test/agent-next:latest'}}\n"
        ),
    );
    let specs = std::fs::read_to_string(root.join(".roundtable/specs.yaml")).expect("specs");
    let first = specs.split("---\n").skip(1).collect::<Vec<_>>().join("---\n");
    write(root, ".roundtable/specs.yaml", &first);
    let (code, item) = check(root, "codex", false);
    assert_eq!((code, reason(&item).as_str()), (Some(1), "fingerprint_mismatch"), "{item:#}");
    let message = item["decisions"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("version Some(\"0.171.0\") → Some(\"0.172.0\")"), "{message}");
    nothing_left(&engine, root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_past_its_ttl_is_stale_by_the_gates_clock() {
    let Some(_engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project("");
    let root = dir.path();
    assert_eq!(check(root, "codex", true).0, Some(0));
    // The project's own chain and key: the receipt is anchored there.
    let store = roundtable_store::Store::open(&root.join(".roundtable/state")).await.expect("store");
    let key = roundtable_store::audit::AuditKey::load(&root.join(".test-audit.key")).expect("key");
    let runtime: Arc<dyn roundtable_session_runtime::SessionRuntime> =
        Arc::new(roundtable_docker::DockerRuntime::connect().await.expect("engine"));
    let adapter = roundtable_specs::builtins::template("codex").expect("built-in").resolve("codex");
    let adapter = roundtable_specs::adapter::ResolvedAdapter { image: Some(IMAGE.parse().expect("image")), ..adapter };
    let paused = time::OffsetDateTime::now_utc() + time::Duration::hours(25);
    let admitter = roundtable_admission::Admitter::new(
        runtime,
        store,
        root.join(".roundtable"),
        crate::support::binary(),
        "test".into(),
        None,
    )
    .with_anchor_key(Some(Arc::new(key)), None);
    let policy = roundtable_specs::policy::AdmissionPolicySpec::default();
    assert!(admitter.check(&adapter, &policy).await.decision.admitted());
    let later = admitter.with_clock(Arc::new(move || paused));
    let decision = later.check(&adapter, &policy).await.decision;
    assert_eq!(decision.reason.as_deref(), Some("receipt_stale"), "{decision}");
}

const ENFORCE: &str = "---\napiVersion: roundtable.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: default}\nspec: {mode: enforce}\n";

/// Regression: a receipt copied from another project (same adapter, image and contract) was
/// admitted under `enforce`, so writing a file in the repository minted spawn authority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_copied_from_another_project_is_not_anchored_here() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let sealed_in = project(ENFORCE);
    assert_eq!(check(sealed_in.path(), "codex", true).0, Some(0));
    let receipt = std::fs::read(sealed_in.path().join(".roundtable/admission/codex.json")).expect("receipt");

    // B has never sealed and has no key: nothing here can verify the copy, and it is refused.
    let copied_to = project(ENFORCE);
    let root = copied_to.path();
    write(root, ".roundtable/admission/codex.json", std::str::from_utf8(&receipt).expect("utf-8"));
    let (code, item) = check(root, "codex", false);
    assert_eq!(
        (code, reason(&item).as_str(), &item["spawn"]),
        (Some(1), "receipt_unverified", &Value::Bool(false)),
        "{item:#}"
    );
    let message = item["decisions"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot be verified: no audit key at "), "{message}");
    assert_eq!(item["receipt"]["expiresAt"], Value::Null, "an unanchored receipt has no expiry: {item:#}");

    // Sealing here is what makes a receipt valid; A's file copied over it again still is not.
    assert_eq!(check(root, "codex", true).0, Some(0));
    assert_eq!(reason(&check(root, "codex", false).1), "admitted");
    write(root, ".roundtable/admission/codex.json", std::str::from_utf8(&receipt).expect("utf-8"));
    let (code, item) = check(root, "codex", false);
    assert_eq!((code, reason(&item).as_str()), (Some(1), "no_receipt"), "B's own chain does not record A's: {item:#}");
    nothing_left(&engine, root).await;
}

/// Regression: a sealed receipt whose `generatedAt` was moved to 2099 (its id recomputed, which
/// needs no key) was admitted, "expires 2099-01-02".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_dated_in_the_future_is_refused() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project(ENFORCE);
    let root = dir.path();
    assert_eq!(check(root, "codex", true).0, Some(0));
    let path = root.join(".roundtable/admission/codex.json");
    let mut sealed: roundtable_specs::admission::SealedReceipt =
        serde_json::from_slice(&std::fs::read(&path).expect("receipt")).expect("a receipt");
    sealed.receipt.generated_at = "2099-01-01T00:00:00Z".into();
    let forged = roundtable_specs::admission::SealedReceipt::seal(sealed.receipt);
    std::fs::write(&path, serde_json::to_string_pretty(&forged).expect("json")).expect("write");
    let (code, item) = check(root, "codex", false);
    assert_eq!((code, reason(&item).as_str()), (Some(1), "receipt_tampered"), "{item:#}");
    let message = item["decisions"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("generated at 2099-01-01T00:00:00Z, after now"), "{message}");
    assert_eq!(item["spawn"], false);
    nothing_left(&engine, root).await;
}

/// Regression: a failing version probe copied its whole output (100 KB seen) into the decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_the_version_probe_is_quoted_in_one_short_line() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project("");
    let root = dir.path();
    write(
        root,
        ".roundtable/contracts/my-agent.yaml",
        "adapter: my-agent\nversionCommand: [sh, -c, 'printf \"token=hun\"\"ter2 \"; head -c 100000 /dev/zero | tr \"\\\\000\" x']\nhelpCommand: [codex, exec, --help]\nrequiredFlags: [--json]\n",
    );
    let (code, item) = check(root, "my-agent", false);
    assert_eq!((code, reason(&item).as_str()), (Some(1), "conformance_skip"), "{item:#}");
    let message = item["decisions"][0]["message"].as_str().unwrap_or_default();
    assert!(message.len() < 500, "{} bytes: {}", message.len(), &message[..message.len().min(300)]);
    assert!(message.contains("token=[REDACTED] xxxx") && message.contains('…'), "{message}");
    // The argv (from the contract) splits the word; only the output could have joined it.
    assert!(!message.contains("hunter2"), "{message}");
    nothing_left(&engine, root).await;
}

/// The daemon's spawn path: under `enforce` an unsealed adapter's Assignment is Refused and no
/// agent container is created; after `--seal` it runs. `mock` is never blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_refuses_an_unsealed_adapter_until_it_is_sealed() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let extra = format!(
        "---\n{API}\nkind: AdmissionPolicy\nmetadata: {{name: default}}\nspec: {{mode: enforce}}\n---\n{API}\nkind: Assignment\nmetadata: {{name: gated}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: 'echo gated >> README.md'}}\n  readablePaths: [README.md]\n---\n{API}\nkind: Assignment\nmetadata: {{name: mocked}}\nspec:\n  adapter: mock\n  task: {{id: M, prompt: hello}}\n  readablePaths: [README.md]\n"
    );
    let dir = project(&extra);
    let root = dir.path();
    let executions = tempfile::tempdir().expect("executions");
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_owned());
    // The daemon and the CLI append to one chain: they share the key, as they do by default.
    let key = root.join(".test-audit.key");
    let _daemon =
        start_daemon_with_env(root, &[], executions.path(), &[("ROUNDTABLE_AUDIT_KEY", key.to_str().expect("utf-8"))]);
    let status_of = |name: &str| -> Option<Value> {
        let out = roundtable(root, &["describe", &format!("Assignment/{name}"), "--format", "json"]);
        out.status.success().then(|| json(&out))
    };
    let phase = |name: &str| status_of(name).and_then(|d| d["observed"]["phase"].as_str().map(str::to_owned));
    wait_until("the gated Assignment is refused", || phase("gated").as_deref() == Some("Refused")).await;
    wait_until("the mock Assignment runs regardless", || phase("mocked").as_deref() == Some("Succeeded")).await;
    let described = status_of("gated").expect("described");
    let ready =
        described["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned());
    let message = ready.as_ref().and_then(|r| r["message"].as_str()).unwrap_or_default().to_owned();
    assert!(message.contains("no_receipt") && message.contains("admission check generic --seal"), "{message}");
    // The refusal came before anything was created: no agent container ever ran for it.
    let project_id = roundtable_source::Project::resolve(&root.join(".roundtable")).expect("project").id;
    let labelled = engine.labelled(&project_id).await.expect("labelled");
    assert!(
        labelled.iter().all(|r| r.labels.get("roundtable.dev/assignment").map(String::as_str) != Some("gated")),
        "{labelled:?}"
    );
    let adapter = stdout(&roundtable(root, &["status"]));
    assert!(adapter.contains("no_receipt"), "status shows the adapter's admission: {adapter}");
    let policy = json(&roundtable(root, &["describe", "AdmissionPolicy/default", "--format", "json"]));
    assert_eq!(
        (policy["status"]["sync"].as_str(), policy["status"]["health"].as_str()),
        (Some("Synced"), Some("Healthy"))
    );

    // Sealing clears it: the next look starts the execution.
    assert_eq!(check(root, "generic", true).0, Some(0));
    wait_until("the sealed adapter's Assignment succeeds", || phase("gated").as_deref() == Some("Succeeded")).await;
    // `describe` shows the receipt the adapter is admitted by, its evidence and its expiry.
    wait_until("the adapter shows its receipt", || {
        let shown = stdout(&roundtable(root, &["describe", "Adapter/generic"]));
        shown.contains("Receipt:") && shown.contains("(admit) sealed") && shown.contains("expires 20")
    })
    .await;
    let shown = stdout(&roundtable(root, &["describe", "Adapter/generic"]));
    assert!(shown.contains("Transcript:    generic-script: replays clean"), "{shown}");

    // The chain holds the blocked refusal, the receipt, then the admitting gate.
    let chain = stdout(&roundtable(root, &["audit", "export"]));
    let entries: Vec<Value> = chain
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("row"))
        .map(|row| serde_json::from_str::<Value>(row["entry"].as_str().expect("entry")).expect("entry json"))
        .collect();
    // One entry per spawn holds every gate's decision.
    let gates: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "admission.gate")
        .flat_map(|e| e["record"]["decisions"].as_array().into_iter().flatten())
        .filter(|d| d["gate"] == "admission")
        .collect();
    assert!(gates.iter().any(|d| d["blocked"] == true && d["reason"] == "no_receipt"), "{gates:#?}");
    assert!(gates.iter().any(|d| d["verdict"] == "admit" && d["adapter"] == "generic"), "{gates:#?}");
    assert!(entries.iter().any(|e| e["kind"] == "admission.receipt"));
    drop(_daemon);
    let verify = roundtable(root, &["audit", "verify"]);
    assert!(verify.status.success(), "{}{}", stdout(&verify), stderr(&verify));
    nothing_left(&engine, root).await;
}

/// Under `warn` (the default) the refusal is recorded in the chain and the spawn goes ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_records_the_refusal_and_runs() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let extra = format!(
        "---\n{API}\nkind: Assignment\nmetadata: {{name: warned}}\nspec:\n  adapter: generic\n  task: {{id: T, prompt: 'echo warned >> README.md'}}\n  readablePaths: [README.md]\n"
    );
    let dir = project(&extra);
    let root = dir.path();
    let executions = tempfile::tempdir().expect("executions");
    let _log = ShowLogOnPanic(executions.path().join("daemon.log"), root.to_owned());
    let key = root.join(".test-audit.key");
    let daemon =
        start_daemon_with_env(root, &[], executions.path(), &[("ROUNDTABLE_AUDIT_KEY", key.to_str().expect("utf-8"))]);
    wait_until("the warned Assignment succeeds", || {
        let out = roundtable(root, &["describe", "Assignment/warned", "--format", "json"]);
        out.status.success() && json(&out)["observed"]["phase"] == "Succeeded"
    })
    .await;
    drop(daemon);
    // An operator's override is anchored too.
    assert!(roundtable(root, &["reconcile", "Assignment/warned"]).status.success());
    let chain = stdout(&roundtable(root, &["audit", "export"]));
    assert!(
        chain.contains(r#"\"blocked\":false"#) && chain.contains(r#"\"reason\":\"no_receipt\""#),
        "the refusal is in the chain: {chain}"
    );
    for kind in ["session.started", "session.ended", "reconcile.event", "proposal.submitted", "operator.reconcile"] {
        assert!(chain.contains(&format!(r#"\"kind\":\"{kind}\""#)), "{kind} is in the chain: {chain}");
    }
    // A proposal's entry is filed under the proposal, not read as a session's.
    let submitted = chain.lines().find(|line| line.contains(r#"\"kind\":\"proposal.submitted\""#)).unwrap_or_default();
    assert!(submitted.contains(r#"\"subject\":\"Proposal/"#), "{submitted}");
    // Reconcile events in the chain still read as themselves in `describe`.
    let described = stdout(&roundtable(root, &["describe", "Assignment/warned"]));
    assert!(described.contains("SpecChanged") && described.contains("Queued"), "{described}");
    let verify = roundtable(root, &["audit", "verify"]);
    assert!(verify.status.success(), "{}{}", stdout(&verify), stderr(&verify));
    let sessions = json(&roundtable(root, &["sessions", "list", "--format", "json"]));
    let admission = &sessions["items"][0]["detail"]["admission"];
    assert_eq!(admission[0]["verdict"], "refuse", "{admission:#}");
    nothing_left(&engine, root).await;
}

#[test]
fn validate_names_the_file_line_and_field_of_a_bad_contract() {
    let tree = crate::support::spec_tree(&[
        (".roundtable/contracts/x.yaml", "adapter: x\nversionCommand: [x]\nhelpCommand: [x]\nrequiredFlag: [-m]\n"),
        (
            ".roundtable/contracts/y.yaml",
            "adapter: y\nversionCommand: [y]\nhelpCommand: [y]\ntranscripts: [t.yaml, gone.yaml]\n",
        ),
        (".roundtable/contracts/t.yaml", "name: t\nprompt: p\nexpect: {args: [], stdin: prompt, env: []}\nbogus: 1\n"),
    ]);
    let out = roundtable(tree.path(), &["validate"]);
    assert_eq!(out.status.code(), Some(1));
    let said = stdout(&out) + &stderr(&out);
    assert!(said.contains("contracts/x.yaml:4:1: requiredFlag: unknown field"), "{said}");
    assert!(said.contains("contracts/t.yaml:4:1: bogus: unknown field"), "a named transcript is read as one: {said}");
    assert!(said.contains("contracts/gone.yaml") && said.contains("no such file"), "{said}");
    assert!(!said.contains("contracts/t.yaml:1:1"), "a transcript is not reported as a broken contract: {said}");
}

/// A brokered generic Adapter `fetcher` whose contract's transcript runs `script`.
fn fetcher_contract(script: &str) -> String {
    let quoted = script.replace('\'', "''");
    format!(
        "adapter: fetcher\nversionCommand: [sh, -c, 'echo sh 1.0']\nversionPattern: '(?m)^sh v?(\\S+)$'\nhelpCommand: [sh, -c, 'echo \"usage: sh [-c SCRIPT]\"']\nrequiredFlags: [-c]\ntranscripts:\n  - name: fetch\n    prompt: '{quoted}'\n    expect:\n      args: [-c, '{quoted}']\n      stdin: empty\n      env: [ACME_API_KEY, HOME, HTTPS_PROXY, NODE_EXTRA_CA_CERTS, NO_PROXY, PATH, REQUESTS_CA_BUNDLE, ROUNDTABLE_BROKER_URL, SSL_CERT_FILE, TMPDIR, https_proxy, no_proxy]\n      files: [/tmp/roundtable, /tmp/roundtable/home, /tmp/roundtable/tmp]\n      mounts: [/roundtable/source, /roundtable/workspace, /tmp, /roundtable/bin/roundtable, /roundtable/task.json, /run/roundtable]\n"
    )
}

fn canary_item(root: &Path, name: &str) -> (Option<i32>, Value) {
    let out = roundtable(root, &["admission", "canary", name, "--format", "json"]);
    (out.status.code(), json(&out)["items"][0].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brokered_cli_is_admitted_only_when_its_model_request_reaches_the_broker_with_the_placeholder() {
    let Some(engine) = engine_or_skip().await else { return };
    ensure_test_images();
    let dir = project(&format!(
        "---\n{API}\nkind: Adapter\nmetadata: {{name: fetcher}}\nspec: {{image: '{IMAGE}', command: sh, args: [-c], credentialEnv: [ACME_API_KEY], providerHosts: [api.openai.com]}}\n"
    ));
    let root = dir.path();

    // The (fake) Codex CLI follows the model provider Roundtable writes for it.
    let (code, item) = canary_item(root, "codex");
    assert_eq!((code, item["verdict"].as_str()), (Some(0), Some("green")), "{item:#}");
    let detail = item["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("at its base URL with the placeholder of CODEX_API_KEY"), "{detail}");

    // A client that ignores base URLs but honours HTTPS_PROXY and SSL_CERT_FILE is intercepted.
    let contracts = root.join(".roundtable/contracts");
    std::fs::create_dir_all(&contracts).expect("mkdir");
    let honest =
        r#"https-fetch https://api.openai.com/v1/responses --header "Authorization: Bearer $ACME_API_KEY" --data x"#;
    std::fs::write(contracts.join("fetcher.yaml"), fetcher_contract(honest)).expect("write");
    let (code, item) = canary_item(root, "fetcher");
    assert_eq!((code, item["verdict"].as_str()), (Some(0), Some("green")), "{item:#}");
    assert!(item["detail"].as_str().is_some_and(|d| d.contains("through HTTPS_PROXY, intercepted")), "{item:#}");

    // One that goes around the proxy and the base URL never reaches the broker: red, named as a
    // bypass, and the gate refuses it before it can spawn.
    let bypass = r#"env -u HTTPS_PROXY -u https_proxy https-fetch https://api.openai.com/v1/responses --header "Authorization: Bearer $ACME_API_KEY" --data x"#;
    std::fs::write(contracts.join("fetcher.yaml"), fetcher_contract(bypass)).expect("write");
    assert_eq!(check(root, "fetcher", true).0, Some(0), "the evidence is green and sealed");
    let (code, item) = canary_item(root, "fetcher");
    assert_eq!((code, item["verdict"].as_str()), (Some(1), Some("red")), "{item:#}");
    assert!(
        item["detail"].as_str().is_some_and(|d| d.starts_with("bypass: no request reached the broker")),
        "{item:#}"
    );
    let (_, checked) = check(root, "fetcher", false);
    assert_eq!(reason(&checked), "canary_red", "{checked:#}");

    // One that reaches the broker without its placeholder is refused by name too.
    let keyless = r#"https-fetch https://api.openai.com/v1/responses --header "Authorization: Bearer sk-own" --data x"#;
    std::fs::write(contracts.join("fetcher.yaml"), fetcher_contract(keyless)).expect("write");
    let (_, item) = canary_item(root, "fetcher");
    assert_eq!(item["verdict"], "red", "{item:#}");
    assert!(item["detail"].as_str().is_some_and(|d| d.contains("refused (no_placeholder")), "{item:#}");
    nothing_left(&engine, root).await;
}
