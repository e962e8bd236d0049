//! Static validation: per-object rules and the rules across objects. Never touches the
//! repository, the engine or the state directory.

use std::collections::{BTreeMap, BTreeSet};

use crate::adapter::{AdapterSpec, limits};
use crate::assignment::{AssignmentSpec, MAX_RETRIES};
use crate::builtins;
use crate::catalog::{Catalog, resolve_declared};
use crate::meta::Kind;
use crate::names::{check_adapter_name, check_object_name, slug};
use crate::output::{Severity, ValidationError};
use crate::parse::{Object, Origin, Spec};
use crate::policy::AdmissionPolicySpec;
use crate::yaml::FieldPath;

/// Every finding about a set of objects, in file order then position order.
pub fn validate(objects: &[Object]) -> Vec<ValidationError> {
    let mut findings = Vec::new();
    for object in objects {
        check_object(object, &mut findings);
    }
    check_across(objects, &mut findings);
    findings.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    findings
}

fn path(text: &str) -> FieldPath {
    FieldPath::parse(text)
}

fn check_object(object: &Object, out: &mut Vec<ValidationError>) {
    let origin = &object.origin;
    let name = &object.metadata.name;
    let name_check = match object.kind() {
        Kind::Adapter => check_adapter_name(name),
        _ => check_object_name(name),
    };
    if let Err(error) = name_check {
        out.push(origin.error(&path("metadata.name"), error.0));
    }
    match &object.spec {
        Spec::Adapter(spec) => check_adapter(spec, origin, out),
        Spec::Assignment(spec) => check_assignment(spec, origin, out),
        Spec::AdmissionPolicy(spec) => check_policy(spec, origin, out),
    }
}

fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

fn check_cap<T: PartialOrd + std::fmt::Display>(
    value: Option<T>,
    zero: T,
    cap: T,
    field: &str,
    origin: &Origin,
    out: &mut Vec<ValidationError>,
) {
    if let Some(value) = value {
        if value <= zero {
            out.push(origin.error(&path(field), format!("must be greater than {zero}")));
        } else if value > cap {
            out.push(origin.error(&path(field), format!("{value} exceeds the hard cap of {cap}")));
        }
    }
}

fn check_adapter(spec: &AdapterSpec, origin: &Origin, out: &mut Vec<ValidationError>) {
    use crate::units::{Cpus, Quantity};
    let resources = spec.resources.clone().unwrap_or_default();
    let zero = Quantity::from_bytes(0);
    check_cap(resources.memory, Quantity::mebibytes(6), limits::MAX_MEMORY, "spec.resources.memory", origin, out);
    check_cap(resources.cpus, Cpus::whole(0), limits::MAX_CPUS, "spec.resources.cpus", origin, out);
    check_cap(resources.pids, 0, limits::MAX_PIDS, "spec.resources.pids", origin, out);
    check_cap(resources.workspace_size, zero, limits::MAX_WORKSPACE, "spec.resources.workspaceSize", origin, out);
    check_cap(resources.tmp_size, zero, limits::MAX_TMP, "spec.resources.tmpSize", origin, out);
    check_cap(spec.output_limit, zero, limits::MAX_OUTPUT_LIMIT, "spec.outputLimit", origin, out);
    if let Some(timeout) = spec.timeout
        && timeout.as_std().is_zero()
    {
        out.push(origin.error(&path("spec.timeout"), "must be greater than 0s"));
    }
    if let Some(command) = &spec.command
        && has_control(command)
    {
        out.push(origin.error(&path("spec.command"), "control characters are not allowed"));
    }
    for (i, arg) in spec.args.iter().flatten().enumerate() {
        if arg.contains('\0') {
            out.push(origin.error(&path("spec.args").index(i), "NUL bytes cannot be passed as arguments"));
        }
    }
    if spec.supports_resume == Some(true) && spec.resume_pattern.is_none() {
        out.push(origin.error(&path("spec.supportsResume"), "supportsResume needs a resumePattern"));
    }
    if let Some(contract) = &spec.contract {
        let plain = !contract.is_empty()
            && !contract.contains(['/', '\\'])
            && !contract.starts_with('.')
            && (contract.ends_with(".yaml") || contract.ends_with(".yml"));
        if !plain {
            out.push(origin.error(
                &path("spec.contract"),
                "a contract is a file name in .roundtable/contracts/, like codex.yaml (no folders)",
            ));
        }
    }
    report_duplicates(spec.provider_hosts.iter().flatten().map(ToString::to_string), "spec.providerHosts", origin, out);
    report_duplicates(spec.credential_env.iter().flatten().map(ToString::to_string), "spec.credentialEnv", origin, out);
    let cidrs = spec.egress.iter().flat_map(|e| e.allow_cidrs.iter()).map(ToString::to_string);
    report_duplicates(cidrs, "spec.egress.allowCidrs", origin, out);
    for (i, cidr) in spec.egress.iter().flat_map(|e| e.allow_cidrs.iter()).enumerate() {
        if let Some(problem) = cidr.refused_as_exception() {
            out.push(origin.error(&path("spec.egress.allowCidrs").index(i), problem));
        }
    }
}

fn report_duplicates(
    values: impl Iterator<Item = String>,
    field: &str,
    origin: &Origin,
    out: &mut Vec<ValidationError>,
) {
    let mut seen = BTreeSet::new();
    for (i, value) in values.enumerate() {
        if !seen.insert(value.clone()) {
            out.push(origin.error(&path(field).index(i), format!("{value} is listed twice")));
        }
    }
}

/// Why a readable path is refused, if it is.
fn readable_path_problem(entry: &str) -> Option<&'static str> {
    if entry.is_empty() {
        return Some("an empty path would grant nothing; name a file or folder");
    }
    if entry.starts_with('/') || entry.starts_with('\\') {
        return Some("must be relative to the repository root, not absolute");
    }
    if has_control(entry) {
        return Some("control characters are not allowed");
    }
    if entry.contains('\\') {
        return Some("use '/' as the separator");
    }
    let components: Vec<&str> = entry.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    if components.contains(&"..") {
        return Some("'..' is not allowed; paths stay inside the repository");
    }
    if components.contains(&".git") {
        return Some(".git is never exported to an agent");
    }
    None
}

/// Why `source.repo` is refused, if it is: it must name a folder inside the project root. This is
/// the lexical half; provisioning checks the resolved path (symlinks followed) as well.
fn repo_path_problem(repo: &str) -> Option<&'static str> {
    if repo.is_empty() {
        return Some("must be a path relative to the project root ('.' for the root itself)");
    }
    if repo.starts_with('/') || repo.starts_with('\\') {
        return Some("must be relative to the project root, not absolute");
    }
    if has_control(repo) {
        return Some("control characters are not allowed");
    }
    if repo.contains('\\') {
        return Some("use '/' as the separator");
    }
    let mut depth = 0usize;
    for component in repo.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if component == ".." {
            let Some(up) = depth.checked_sub(1) else {
                return Some(
                    "climbs out of the project root with '..'; the repository must be inside the project root",
                );
            };
            depth = up;
        } else {
            depth += 1;
        }
    }
    None
}

fn check_assignment(spec: &AssignmentSpec, origin: &Origin, out: &mut Vec<ValidationError>) {
    if spec.readable_paths.is_empty() {
        out.push(origin.error(
            &path("spec.readablePaths"),
            "readablePaths must name at least one path; an empty scope fails closed",
        ));
    }
    for (i, entry) in spec.readable_paths.iter().enumerate() {
        if let Some(problem) = readable_path_problem(entry) {
            out.push(origin.error(&path("spec.readablePaths").index(i), format!("{entry:?}: {problem}")));
        }
    }
    if spec.task.id.trim().is_empty() {
        out.push(origin.error(&path("spec.task.id"), "must not be empty"));
    }
    if spec.task.prompt.trim().is_empty() {
        out.push(origin.error(&path("spec.task.prompt"), "must not be empty"));
    }
    let revision = &spec.source.revision;
    if revision.is_empty() || revision.starts_with('-') || revision.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        out.push(origin.error(
            &path("spec.source.revision"),
            "a revision is a branch, tag or commit: not empty, no whitespace, not starting with '-'",
        ));
    }
    if let Some(problem) = repo_path_problem(&spec.source.repo) {
        out.push(origin.error(&path("spec.source.repo"), format!("{:?}: {problem}", spec.source.repo)));
    }
    if let Some(model) = &spec.model
        && (model.trim().is_empty() || has_control(model))
    {
        out.push(origin.error(&path("spec.model"), "must be a non-empty name without control characters"));
    }
    if spec.retries > MAX_RETRIES {
        out.push(origin.error(&path("spec.retries"), format!("at most {MAX_RETRIES}")));
    }
    if let Some(timeout) = spec.timeout
        && timeout.as_std().is_zero()
    {
        out.push(origin.error(&path("spec.timeout"), "must be greater than 0s"));
    }
}

fn check_policy(spec: &AdmissionPolicySpec, origin: &Origin, out: &mut Vec<ValidationError>) {
    if spec.receipt_ttl.as_std().is_zero() {
        out.push(origin.error(&path("spec.receiptTtl"), "must be greater than 0s"));
    }
}

fn check_across(objects: &[Object], out: &mut Vec<ValidationError>) {
    // Duplicate KIND/NAME, naming both places.
    let mut first_seen: BTreeMap<_, &Object> = BTreeMap::new();
    for object in objects {
        match first_seen.get(&object.key()) {
            Some(first) => out.push(object.origin.error(
                &path("metadata.name"),
                format!("{} is declared twice; first at {}", object.key(), first.origin.describe()),
            )),
            None => {
                first_seen.insert(object.key(), object);
            }
        }
    }

    // Adapter names whose slugs collide (receipts and contracts are stored by slug).
    let mut slugs: BTreeMap<String, String> =
        builtins::BUILTIN_NAMES.iter().map(|name| (slug(name), format!("built-in adapter {name}"))).collect();
    let mut declared_names = BTreeSet::new();
    for object in objects.iter().filter(|o| o.kind() == Kind::Adapter) {
        let name = &object.metadata.name;
        if !declared_names.insert(name.clone()) {
            continue;
        }
        let object_slug = slug(name);
        match slugs.get(&object_slug) {
            Some(owner) if owner != &format!("built-in adapter {name}") => out.push(object.origin.error(
                &path("metadata.name"),
                format!("adapter {name:?} has slug {object_slug:?}, which {owner} already uses"),
            )),
            Some(_) => {}
            None => {
                slugs.insert(object_slug, format!("adapter {name:?} at {}", object.origin.describe()));
            }
        }
    }

    let policies: Vec<&Object> = objects.iter().filter(|o| o.kind() == Kind::AdmissionPolicy).collect();
    for extra in policies.iter().skip(1) {
        out.push(extra.origin.error(
            &path("metadata.name"),
            format!("only one AdmissionPolicy is allowed; the first is at {}", policies[0].origin.describe()),
        ));
    }
    let policy = policies.first().and_then(|p| match &p.spec {
        Spec::AdmissionPolicy(spec) => Some((*p, spec)),
        _ => None,
    });

    let catalog = Catalog::build(objects);
    for object in objects {
        match &object.spec {
            Spec::Assignment(spec) => check_assignment_routing(spec, &object.origin, &catalog, out),
            Spec::Adapter(spec) => {
                check_image_pinning(&object.metadata.name, spec, &object.origin, policy.map(|(_, p)| p), out)
            }
            Spec::AdmissionPolicy(spec) => check_policy_names(spec, &object.origin, &catalog, out),
        }
    }
}

fn check_assignment_routing(spec: &AssignmentSpec, origin: &Origin, catalog: &Catalog, out: &mut Vec<ValidationError>) {
    let Some(entry) = catalog.get(&spec.adapter) else {
        let names: Vec<&str> = catalog.iter().map(|(name, _)| name.as_str()).collect();
        out.push(origin.error(
            &path("spec.adapter"),
            format!("unknown adapter {:?}; known adapters: {}", spec.adapter, names.join(", ")),
        ));
        return;
    };
    let offered = entry.resolved.capabilities();
    for (i, capability) in spec.requires.iter().enumerate() {
        if !offered.contains(capability) {
            out.push(origin.error(
                &path("spec.requires").index(i),
                format!("adapter {:?} does not offer {}", spec.adapter, capability.as_str()),
            ));
        }
    }
}

fn check_image_pinning(
    name: &str,
    spec: &AdapterSpec,
    origin: &Origin,
    policy: Option<&AdmissionPolicySpec>,
    out: &mut Vec<ValidationError>,
) {
    let resolved = resolve_declared(name, spec);
    let Some(image) = &resolved.image else { return };
    if image.is_pinned() {
        return;
    }
    let require_digest = policy.is_some_and(|p| p.require_digest);
    let severity = if require_digest { Severity::Error } else { Severity::Warning };
    let why = if require_digest { "the AdmissionPolicy sets requireDigest" } else { "tags can move" };
    out.push(origin.finding(
        &path("spec.image"),
        severity,
        format!("image {image} is not pinned ({why}); use a digest reference or a full image ID"),
    ));
}

fn check_policy_names(spec: &AdmissionPolicySpec, origin: &Origin, catalog: &Catalog, out: &mut Vec<ValidationError>) {
    for (i, name) in spec.exempt.iter().enumerate() {
        if catalog.get(name).is_none() {
            out.push(origin.error(&path("spec.exempt").index(i), format!("unknown adapter {name:?}")));
        }
    }
    for name in spec.min_versions.keys() {
        if catalog.get(name).is_none() {
            out.push(origin.error(&path("spec.minVersions").key(name), format!("unknown adapter {name:?}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_file;

    /// Parses and validates a set of files, returning every finding as `file:line path: message`.
    fn findings(files: &[(&str, &str)]) -> Vec<ValidationError> {
        let mut objects = Vec::new();
        let mut out = Vec::new();
        for (name, text) in files {
            let parsed = parse_file(name, name, text);
            objects.extend(parsed.objects);
            out.extend(parsed.errors);
        }
        out.extend(validate(&objects));
        out
    }

    fn adapter(name: &str, spec: &str) -> String {
        format!("apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata:\n  name: {name}\nspec:\n{spec}")
    }

    fn assignment(name: &str, spec: &str) -> String {
        format!("apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata:\n  name: {name}\nspec:\n{spec}")
    }

    const GOOD_ASSIGNMENT: &str =
        "  adapter: generic\n  task: {id: T-1, prompt: fix it}\n  readablePaths: [README.md, docs/]\n";

    fn policy(spec: &str) -> String {
        format!("apiVersion: roundtable.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata:\n  name: default\nspec:\n{spec}")
    }

    /// Asserts exactly one error, at `path`, whose message contains `needle`.
    fn assert_one(found: &[ValidationError], path: &str, needle: &str) {
        let errors: Vec<_> = found.iter().filter(|f| f.severity == Severity::Error).collect();
        assert_eq!(errors.len(), 1, "expected one error at {path}, got {found:#?}");
        assert_eq!(errors[0].path, path, "{found:#?}");
        assert!(errors[0].message.contains(needle), "{:?} lacks {needle:?}", errors[0].message);
        assert!(errors[0].line > 0 && errors[0].column > 0, "{found:#?}");
    }

    fn assert_clean(found: &[ValidationError]) {
        assert!(found.iter().all(|f| f.severity == Severity::Warning), "{found:#?}");
    }

    #[test]
    fn adapter_field_rules_fail_and_pass() {
        let cases: &[(&str, &str, &str, &str)] = &[
            // (failing spec, its path, message part, passing spec)
            ("  resources: {memory: 17Gi}\n", "spec.resources.memory", "hard cap", "  resources: {memory: 16Gi}\n"),
            ("  resources: {cpus: 9}\n", "spec.resources.cpus", "hard cap", "  resources: {cpus: 0.5}\n"),
            ("  resources: {pids: 5000}\n", "spec.resources.pids", "hard cap", "  resources: {pids: 4096}\n"),
            ("  resources: {pids: 0}\n", "spec.resources.pids", "greater than", "  resources: {pids: 1}\n"),
            (
                "  resources: {workspaceSize: 17Gi}\n",
                "spec.resources.workspaceSize",
                "hard cap",
                "  resources: {workspaceSize: 2Gi}\n",
            ),
            ("  resources: {tmpSize: 5Gi}\n", "spec.resources.tmpSize", "hard cap", "  resources: {tmpSize: 4Gi}\n"),
            ("  outputLimit: 17Mi\n", "spec.outputLimit", "hard cap", "  outputLimit: 16Mi\n"),
            ("  timeout: 30 minutes\n", "spec.timeout", "invalid duration", "  timeout: 30m\n"),
            (
                "  providerHosts: ['*.openai.com']\n",
                "spec.providerHosts[0]",
                "wildcard",
                "  providerHosts: [api.openai.com]\n",
            ),
            (
                "  providerHosts: [10.0.0.1]\n",
                "spec.providerHosts[0]",
                "IP literal",
                "  providerHosts: [api.example.com]\n",
            ),
            (
                "  providerHosts: [a.example.com, a.example.com]\n",
                "spec.providerHosts[1]",
                "twice",
                "  providerHosts: [a.example.com, b.example.com]\n",
            ),
            (
                "  credentialEnv: [codex_key]\n",
                "spec.credentialEnv[0]",
                "environment variable",
                "  credentialEnv: [CODEX_KEY]\n",
            ),
            (
                "  egress: {allowCidrs: [10.1.2.3/8]}\n",
                "spec.egress.allowCidrs[0]",
                "host bits",
                "  egress: {allowCidrs: [10.0.0.0/8]}\n",
            ),
            (
                "  egress: {allowCidrs: ['::/0']}\n",
                "spec.egress.allowCidrs[0]",
                "whole address family",
                "  egress: {allowCidrs: ['fd00::/8']}\n",
            ),
            (
                "  image: 'Bad Image'\n",
                "spec.image",
                "invalid image",
                "  image: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
            ),
            (
                "  resumePattern: my-cli resume\n",
                "spec.resumePattern",
                "exactly once",
                "  resumePattern: my-cli resume {{external_session_id}}\n",
            ),
            (
                "  resumePattern: \"my-cli --id={{external_session_id}}\"\n",
                "spec.resumePattern",
                "whole argument",
                "  resumePattern: \"my-cli --id '{{external_session_id}}'\"\n",
            ),
            (
                "  supportsResume: true\n",
                "spec.supportsResume",
                "resumePattern",
                "  supportsResume: true\n  resumePattern: x r {{external_session_id}}\n",
            ),
            ("  contract: ../x.yaml\n", "spec.contract", "file name", "  contract: mine.yaml\n"),
            ("  minVersion: latest\n", "spec.minVersion", "invalid version", "  minVersion: 1.2.3\n"),
            (
                "  imgae: busybox\n",
                "spec.imgae",
                "unknown field",
                "  image: busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
            ),
        ];
        for (bad, path, needle, good) in cases {
            assert_one(&findings(&[("a.yaml", &adapter("mine", bad))]), path, needle);
            assert_clean(&findings(&[("a.yaml", &adapter("mine", good))]));
        }
    }

    #[test]
    fn assignment_field_rules_fail_and_pass() {
        let base = "  adapter: generic\n  task: {id: T-1, prompt: fix it}\n";
        let cases: &[(&str, &str, &str, &str)] = &[
            ("  readablePaths: []\n", "spec.readablePaths", "fails closed", "  readablePaths: [README.md]\n"),
            (
                "  readablePaths: [/etc/passwd]\n",
                "spec.readablePaths[0]",
                "relative",
                "  readablePaths: [etc/passwd]\n",
            ),
            ("  readablePaths: [docs/../../x]\n", "spec.readablePaths[0]", "'..'", "  readablePaths: [docs/x]\n"),
            (
                "  readablePaths: [src, .git/config]\n",
                "spec.readablePaths[1]",
                ".git",
                "  readablePaths: [src, .github]\n",
            ),
            ("  readablePaths: ['']\n", "spec.readablePaths[0]", "empty path", "  readablePaths: [.]\n"),
            (
                "  readablePaths: [a]\n  retries: 11\n",
                "spec.retries",
                "at most",
                "  readablePaths: [a]\n  retries: 10\n",
            ),
            (
                "  readablePaths: [a]\n  source: {revision: --upload-pack=x}\n",
                "spec.source.revision",
                "'-'",
                "  readablePaths: [a]\n  source: {revision: v1.2}\n",
            ),
            (
                "  readablePaths: [a]\n  source: {repo: vendor/../../other}\n",
                "spec.source.repo",
                "climbs out of the project root",
                "  readablePaths: [a]\n  source: {repo: vendor/../services/api}\n",
            ),
            (
                "  readablePaths: [a]\n  source: {repo: /srv/other}\n",
                "spec.source.repo",
                "not absolute",
                "  readablePaths: [a]\n  source: {repo: ./srv/other}\n",
            ),
            (
                "  readablePaths: [a]\n  role: admin\n",
                "spec.role",
                "unknown variant",
                "  readablePaths: [a]\n  role: reviewer\n",
            ),
            (
                "  readablePaths: [a]\n  requires: [telepathy]\n",
                "spec.requires[0]",
                "unknown variant",
                "  readablePaths: [a]\n  requires: [readonlyWorkspace]\n",
            ),
            (
                "  readablePaths: [a]\n  requires: [mcp]\n",
                "spec.requires[0]",
                "does not offer mcp",
                "  readablePaths: [a]\n",
            ),
        ];
        for (bad, path, needle, good) in cases {
            assert_one(&findings(&[("a.yaml", &assignment("fix", &format!("{base}{bad}")))]), path, needle);
            assert_clean(&findings(&[("a.yaml", &assignment("fix", &format!("{base}{good}")))]));
        }
        // A missing required field names its parent.
        let missing = findings(&[("a.yaml", &assignment("fix", "  adapter: generic\n  task: {id: T-1, prompt: x}\n"))]);
        assert!(missing[0].message.contains("readablePaths"), "{missing:#?}");
    }

    #[test]
    fn names_follow_their_kind() {
        assert_one(&findings(&[("a.yaml", &assignment("Fix_It", GOOD_ASSIGNMENT))]), "metadata.name", "invalid name");
        assert_clean(&findings(&[("a.yaml", &assignment("fix-it", GOOD_ASSIGNMENT))]));
        assert_clean(&findings(&[("a.yaml", &adapter("'Qwen CLI'", "  command: qwen\n"))]));
    }

    #[test]
    fn duplicates_name_both_files() {
        let found = findings(&[
            ("a.yaml", &assignment("fix", GOOD_ASSIGNMENT)),
            ("b.yaml", &assignment("fix", GOOD_ASSIGNMENT)),
        ]);
        assert_one(&found, "metadata.name", "declared twice; first at a.yaml:4");
        assert_eq!(found[0].file, "b.yaml");
        // The same name in two kinds is fine.
        assert_clean(&findings(&[
            ("a.yaml", &assignment("codex", GOOD_ASSIGNMENT)),
            ("b.yaml", &adapter("codex", "  image: busybox\n")),
        ]));
    }

    #[test]
    fn adapter_slugs_must_not_collide() {
        let found = findings(&[
            ("a.yaml", &adapter("'Qwen CLI'", "  command: q\n")),
            ("b.yaml", &adapter("qwen-cli", "  command: q\n")),
        ]);
        assert_one(&found, "metadata.name", "slug \"qwen-cli\"");
        assert_one(
            &findings(&[("a.yaml", &adapter("Codex", "  command: q\n"))]),
            "metadata.name",
            "built-in adapter codex",
        );
        assert_clean(&findings(&[("a.yaml", &adapter("codex", "  command: q\n"))]));
    }

    #[test]
    fn assignments_name_known_adapters_exactly() {
        let unknown = assignment("fix", "  adapter: Codex\n  task: {id: T, prompt: p}\n  readablePaths: [a]\n");
        assert_one(&findings(&[("a.yaml", &unknown)]), "spec.adapter", "unknown adapter \"Codex\"");
        let custom = assignment("fix", "  adapter: qwen\n  task: {id: T, prompt: p}\n  readablePaths: [a]\n");
        assert_one(&findings(&[("a.yaml", &custom)]), "spec.adapter", "unknown adapter");
        assert_clean(&findings(&[("a.yaml", &custom), ("b.yaml", &adapter("qwen", "  command: qwen\n"))]));
    }

    #[test]
    fn at_most_one_admission_policy() {
        let found = findings(&[
            ("a.yaml", &policy("  mode: warn\n")),
            ("b.yaml", &policy("  mode: enforce\n").replace("default", "other")),
        ]);
        assert_one(&found, "metadata.name", "only one AdmissionPolicy");
        assert_clean(&findings(&[("a.yaml", &policy("  mode: warn\n"))]));
        assert_one(&findings(&[("a.yaml", &policy("  exempt: [nobody]\n"))]), "spec.exempt[0]", "unknown adapter");
        assert_one(&findings(&[("a.yaml", &policy("  mode: strict\n"))]), "spec.mode", "unknown variant");
    }

    #[test]
    fn tags_warn_unless_the_policy_requires_digests() {
        let tagged = adapter("mine", "  image: agent:v1\n");
        let found = findings(&[("a.yaml", &tagged)]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Warning);
        assert_one(
            &findings(&[("a.yaml", &tagged), ("p.yaml", &policy("  requireDigest: true\n"))]),
            "spec.image",
            "requireDigest",
        );
    }
}
