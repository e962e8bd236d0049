//! The provider CLIs' side: launch plans as the CLI prints them, output capture, registered
//! sessions and the resume briefing, and (on the real engine) each fake provider CLI reading its
//! manifest, calling tools through `roundtable mcp stdio` and producing a proposal.

use crate::support::{API, json, roundtable, spec_tree, stderr, stdout};

#[test]
fn adapters_plan_prints_argv_and_environment_names_never_values() {
    let tree = spec_tree(&[(
        ".roundtable/adapters.yaml",
        &format!("{API}\nkind: Adapter\nmetadata: {{name: codex}}\nspec:\n  credentialEnv: [CODEX_API_KEY]\n"),
    )]);
    let out = roundtable(
        tree.path(),
        &["adapters", "plan", "codex", "--prompt", "-x fix it", "--model", "o3", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let plan = json(&out);
    assert_eq!(plan["argv"][0], "codex");
    assert_eq!(plan["argv"].as_array().map(Vec::len), Some(9));
    assert_eq!(plan["argv"][7], "--model=o3");
    assert_eq!(plan["stdin"], "prompt", "the prompt goes on stdin, never into argv");
    assert!(plan["env"].as_array().expect("env").iter().all(|name| name.as_str().is_some_and(|n| !n.contains('='))));
    assert!(!stdout(&out).contains("-x fix it"));
    let unknown = roundtable(tree.path(), &["adapters", "plan", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("no adapter \"nope\""), "{}", stderr(&unknown));
}

#[test]
fn registered_sessions_feed_the_resume_briefing() {
    let tree = spec_tree(&[(
        ".roundtable/specs.yaml",
        &format!(
            "{API}\nkind: Adapter\nmetadata: {{name: opencode}}\nspec: {{supportsResume: true}}\n---\n{API}\nkind: Assignment\nmetadata: {{name: fix-typo}}\nspec:\n  adapter: opencode\n  task: {{id: T-9, title: Fix the typo, prompt: Fix it.}}\n  readablePaths: [README.md]\n"
        ),
    )]);
    let root = tree.path();
    let out = roundtable(
        root,
        &[
            "sessions",
            "register",
            "--assignment",
            "fix-typo",
            "--adapter",
            "opencode",
            "--external-id",
            "ses_abc123",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let session = &json(&out)["items"][0];
    let resume = session["detail"]["agent"]["resumeCommand"].as_array().expect("resume command").clone();
    assert_eq!(resume[resume.len() - 2], "ses_abc123");
    assert_eq!(session["cause"], "Registered");

    let refused = roundtable(
        root,
        &["sessions", "register", "--assignment", "fix-typo", "--adapter", "opencode", "--external-id", "x; rm -rf /"],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("invalid session id"), "{}", stderr(&refused));

    let briefing = roundtable(root, &["resume", "fix-typo", "--format", "json"]);
    assert!(briefing.status.success(), "{}", stderr(&briefing));
    let briefing = json(&briefing);
    assert_eq!(briefing["sessions"].as_array().map(Vec::len), Some(1));
    assert!(briefing["text"].as_str().is_some_and(|t| t.contains("ses_abc123")));
    assert_eq!(roundtable(root, &["resume", "unknown"]).status.code(), Some(1));
}
