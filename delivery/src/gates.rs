//! The review gates at accept: what each finds in a proposal (the one secrets scanner,
//! `specs::secrets`, over what it adds as read from its objects, the flags it was given when it
//! was made, its size), and whether the policy and the operator's overrides let it through. One
//! decision, here; the CLI, the API and the console ask it.

use roundtable_specs::delivery::{Finding, GateAction, GateOverride, ProposalGate, ProposalGates};
use roundtable_specs::session::{ProposalFlag, ProposalFlagKind};

use roundtable_specs::secrets::patterns;

use crate::added::{Added, SCAN_LIMIT};
use crate::held::HeldCredentials;

/// Everything the gates find in a proposal, in a stable order. `added` comes from
/// [`crate::added::from_objects`]; a finding in a binary file names the file, not a line. `held`
/// compares the added lines with the credentials the daemon holds; without it (no audit key to
/// hash with) only the flags the daemon set when the proposal was made say whether one was added.
pub fn findings(
    added: &Added,
    flags: &[ProposalFlag],
    policy: &ProposalGates,
    held: Option<&HeldCredentials<'_>>,
) -> Vec<Finding> {
    let mut found = Vec::new();
    for file in &added.files {
        let secret = |rule: String, line: Option<u64>| Finding {
            gate: ProposalGate::Secrets,
            rule,
            path: file.path.clone(),
            line,
        };
        for (line, text) in &file.added {
            // A binary file's runs are numbered by byte offset, which is no line.
            let line = (!file.binary).then_some(*line);
            found.extend(scan(text, held).into_iter().map(|rule| secret(rule, line)));
        }
        if !file.deleted {
            // A name lands in the tree as its content does, and is shown wherever a file is
            // listed: a secret written as a file or folder name is a secret added. The finding
            // names the path with the secret masked: findings never carry the value.
            let rules = scan(&file.path, held);
            if !rules.is_empty() {
                let path = masked(&file.path, held);
                found.extend(rules.into_iter().map(|rule| Finding {
                    gate: ProposalGate::Secrets,
                    rule: format!("{rule} (in the path)"),
                    path: path.clone(),
                    line: None,
                }));
            }
        }
        if file.unscanned > 0 {
            // Past the bytes held in memory nothing was read, so the secrets gate cannot say the
            // file holds no secret: a secrets finding (a size override must not land one).
            found.push(secret(
                format!("unscanned ({} bytes past the first {} MiB not scanned)", file.unscanned, SCAN_LIMIT >> 20),
                None,
            ));
        }
    }
    for flag in flags {
        let (gate, rule) = match flag.kind {
            // The daemon compared the files with the values it gave the session.
            ProposalFlagKind::CredentialCanary => (ProposalGate::Secrets, "credential-value"),
            ProposalFlagKind::ProtectedPath => (ProposalGate::ProtectedPaths, "protected-path"),
            _ => continue,
        };
        found.push(Finding { gate, rule: rule.to_owned(), path: flag.path.clone(), line: None });
    }
    let files = added.files.len() as u64;
    if files > policy.max_files {
        found.push(Finding {
            gate: ProposalGate::Size,
            rule: format!("max-files ({files} > {})", policy.max_files),
            path: String::new(),
            line: None,
        });
    }
    if added.added_bytes > policy.max_added_bytes.bytes() {
        found.push(Finding {
            gate: ProposalGate::Size,
            rule: format!("max-added-bytes ({} > {})", added.added_bytes, policy.max_added_bytes.bytes()),
            path: String::new(),
            line: None,
        });
    }
    found.retain(|finding| policy.action(finding.gate) != GateAction::Off);
    found.sort();
    found.dedup();
    found
}

/// The secret rules `text` breaks, and `credential-value (NAME)` for each held credential it
/// holds. Both read the text as the rules do ([`patterns::shown`]): escape sequences and invisible
/// characters left out, so a held value split by a zero-width space is still found.
fn scan(text: &str, held: Option<&HeldCredentials<'_>>) -> Vec<String> {
    let mut rules: Vec<String> = patterns::scan_line(text).into_iter().map(str::to_owned).collect();
    if let Some(held) = held {
        rules.extend(
            held.scan_line(&patterns::shown(text)).into_iter().map(|name| format!("credential-value ({name})")),
        );
    }
    rules
}

/// `path` as the rules read it ([`patterns::shown`]) with each secret and held value in it
/// replaced by [`patterns::REDACTED`], overlapping ones by one.
fn masked(path: &str, held: Option<&HeldCredentials<'_>>) -> String {
    let shown = patterns::shown(path);
    let mut spans: Vec<std::ops::Range<usize>> = patterns::find(&shown).into_iter().map(|found| found.span).collect();
    if let Some(held) = held {
        spans.extend(held.spans(&shown).into_iter().map(|(span, _)| span));
    }
    spans.sort_by_key(|span| (span.start, span.end));
    let mut masked = String::with_capacity(shown.len());
    // The end of the last mask written, if any.
    let mut masked_to: Option<usize> = None;
    for span in spans {
        // A held value is matched by bytes; a cut inside a character masks the whole character.
        let start = (0..=span.start).rev().find(|at| shown.is_char_boundary(*at)).unwrap_or(0);
        let end = (span.end..=shown.len()).find(|at| shown.is_char_boundary(*at)).unwrap_or(shown.len());
        match masked_to {
            Some(to) if start <= to => masked_to = Some(to.max(end)),
            _ => {
                masked.push_str(shown.get(masked_to.unwrap_or(0)..start).unwrap_or_default());
                masked.push_str(patterns::REDACTED);
                masked_to = Some(end);
            }
        }
    }
    masked.push_str(shown.get(masked_to.unwrap_or(0)..).unwrap_or_default());
    masked
}

/// Why one finding stops an accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    pub finding: Finding,
    pub action: GateAction,
    /// The gate was overridden, but the policy does not let this `block` gate be.
    pub override_refused: bool,
}

impl std::fmt::Display for Unmet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gate = self.finding.gate;
        match (self.action, self.override_refused) {
            (GateAction::Block, true) => write!(
                f,
                "{} (blocks; the policy does not allow overriding {gate}: add it to AdmissionPolicy spec.proposals.allowOverride)",
                self.finding
            ),
            (GateAction::Block, false) => write!(f, "{} (blocks)", self.finding),
            _ => write!(f, "{} (needs --override {gate} --reason TEXT)", self.finding),
        }
    }
}

/// What the gates ask of an operator before an accept: the gates that need an override (with a
/// reason) and those that refuse even one. A page or a prompt offers exactly these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    pub overridable: Vec<ProposalGate>,
    pub blocking: Vec<ProposalGate>,
}

/// What `findings` ask of an operator under `policy`.
pub fn asked(findings: &[Finding], policy: &ProposalGates) -> Asked {
    let gates = |unmet: Vec<Unmet>| {
        let mut gates: Vec<ProposalGate> = unmet.into_iter().map(|u| u.finding.gate).collect();
        gates.sort();
        gates.dedup();
        gates
    };
    let stopped = gates(unmet(findings, policy, &[]));
    let every: Vec<GateOverride> =
        stopped.iter().map(|gate| GateOverride { gate: *gate, reason: "asked".into() }).collect();
    let blocking = gates(unmet(findings, policy, &every));
    let overridable = stopped.into_iter().filter(|gate| !blocking.contains(gate)).collect();
    Asked { overridable, blocking }
}

/// The findings an accept with `overrides` does not get past; empty: it may go ahead.
pub fn unmet(findings: &[Finding], policy: &ProposalGates, overrides: &[GateOverride]) -> Vec<Unmet> {
    findings
        .iter()
        .filter_map(|finding| {
            let action = policy.action(finding.gate);
            let overridden = overrides.iter().any(|o| o.gate == finding.gate && !o.reason.trim().is_empty());
            let passes = match action {
                GateAction::Off => true,
                GateAction::Review => overridden,
                GateAction::Block => overridden && policy.allow_override.contains(&finding.gate),
            };
            (!passes).then(|| Unmet {
                finding: finding.clone(),
                action,
                override_refused: action == GateAction::Block && overridden,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_specs::units::Quantity;

    fn patch(lines: &[&str]) -> Added {
        let mut text =
            String::from("diff --git a/config.env b/config.env\n--- /dev/null\n+++ b/config.env\n@@ -0,0 +1,9 @@\n");
        for line in lines {
            text.push_str(&format!("+{line}\n"));
        }
        crate::added::read(text.as_bytes())
    }

    fn over(gate: ProposalGate) -> GateOverride {
        GateOverride { gate, reason: "reviewed by hand".into() }
    }

    #[test]
    fn secrets_block_by_default_and_overriding_them_needs_the_policy() {
        let policy = ProposalGates::default();
        let found = findings(&patch(&["x=1", "AWS=AKIAIOSFODNN7EXAMPLF"]), &[], &policy, None);
        assert_eq!(
            found.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["secrets: aws-access-key at config.env:2"]
        );
        let refused = unmet(&found, &policy, &[over(ProposalGate::Secrets)]);
        assert!(refused[0].override_refused, "{refused:?}");
        let allowing = ProposalGates { allow_override: vec![ProposalGate::Secrets], ..ProposalGates::default() };
        assert!(unmet(&found, &allowing, &[over(ProposalGate::Secrets)]).is_empty());
        assert_eq!(unmet(&found, &allowing, &[]).len(), 1, "an override is still needed");
    }

    #[test]
    fn protected_paths_need_a_review_and_an_override_with_a_reason_passes_them() {
        let policy = ProposalGates::default();
        let flags = [ProposalFlag { kind: ProposalFlagKind::ProtectedPath, path: ".github/workflows/ci.yml".into() }];
        let found = findings(&patch(&["ok"]), &flags, &policy, None);
        assert_eq!(found.len(), 1);
        assert_eq!(unmet(&found, &policy, &[]).len(), 1);
        let blank = GateOverride { gate: ProposalGate::ProtectedPaths, reason: " ".into() };
        assert_eq!(unmet(&found, &policy, &[blank]).len(), 1, "a blank reason is no reason");
        assert!(unmet(&found, &policy, &[over(ProposalGate::ProtectedPaths)]).is_empty());
    }

    #[test]
    fn the_credential_canary_is_a_secret_and_size_caps_are_findings_and_off_is_off() {
        let flags = [ProposalFlag { kind: ProposalFlagKind::CredentialCanary, path: "README.md".into() }];
        let small =
            ProposalGates { max_files: 0, max_added_bytes: Quantity::from_bytes(3), ..ProposalGates::default() };
        let rules: Vec<String> =
            findings(&patch(&["hello"]), &flags, &small, None).iter().map(|f| f.rule.clone()).collect();
        assert_eq!(rules, ["credential-value", "max-added-bytes (6 > 3)", "max-files (1 > 0)"]);
        let off = ProposalGates { secrets: GateAction::Off, ..ProposalGates::default() };
        assert!(findings(&patch(&["AKIAIOSFODNN7EXAMPLF"]), &flags, &off, None).is_empty());
    }

    /// Hostile pass B3: a secret written as a file's name passed; a deleted file's name is the
    /// base's. The finding masks the secret in the path it names.
    #[test]
    fn a_secret_in_a_path_is_a_secrets_finding_that_masks_it() {
        let file =
            |path: &str, deleted: bool| crate::added::FileChange { path: path.into(), deleted, ..Default::default() };
        let added = Added {
            files: vec![
                file("docs/AKIAQ8ZR2LWX9VN4MT7P.md", false),
                file("gone/AKIAQ8ZR2LWX9VN4MT7Q.txt", true),
                file("src/ordinary.rs", false),
            ],
            added_bytes: 0,
        };
        let shown: Vec<String> =
            findings(&added, &[], &ProposalGates::default(), None).iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["secrets: aws-access-key (in the path) at docs/[REDACTED].md"]);
    }

    #[test]
    fn a_secret_in_a_binary_file_names_the_file_and_an_unscanned_tail_is_a_secrets_finding() {
        let file = crate::added::FileChange {
            path: "b.bin".into(),
            added: vec![(7, "AKIAIOSFODNN7EXAMPLF".into()), (90, "sk_live_51Hq8Zr2LwX9vN4mT7pK1sB6dH3".into())],
            binary: true,
            unscanned: 5,
            ..Default::default()
        };
        let added = Added { files: vec![file], added_bytes: 10 };
        let shown: Vec<String> =
            findings(&added, &[], &ProposalGates::default(), None).iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "secrets: aws-access-key at b.bin",
                "secrets: stripe-secret-key at b.bin",
                "secrets: unscanned (5 bytes past the first 16 MiB not scanned) at b.bin",
            ]
        );
    }
}
