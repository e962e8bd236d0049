//! Static validation: per-object rules and the rules across objects. Never touches the
//! repository, the engine or the state directory.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::adapter::{AdapterSpec, limits};
use crate::assignment::{AssignmentSpec, MAX_RETRIES};
use crate::builtins;
use crate::catalog::Catalog;
use crate::finding::{Severity, ValidationError};
use crate::meta::{Kind, ObjectKey};
use crate::names::{check_adapter_name, check_object_name, hidden_character_problem, slug};
use crate::object::{Object, Origin, Spec};
use crate::policy::AdmissionPolicySpec;
use crate::units::Duration;
use crate::yaml::FieldPath;

/// Every finding about a set of objects, in file order then position order.
pub fn validate<O: Borrow<Object>>(objects: &[O]) -> Vec<ValidationError> {
    let mut findings = Vec::new();
    for object in objects {
        check_object(object.borrow(), &mut findings);
    }
    check_across(objects, &mut findings);
    sort_findings(&mut findings);
    findings
}

/// The findings of the rules about one object alone. They depend on nothing else, so a rescan
/// keeps them for every file whose content did not change and checks only the changed files'.
pub fn validate_object(object: &Object) -> Vec<ValidationError> {
    let mut findings = Vec::new();
    check_object(object, &mut findings);
    findings
}

/// The findings of the rules across objects (duplicates, adapter slugs, the one AdmissionPolicy,
/// routing to adapters, image pinning under the policy, the names a policy uses): together with
/// [`validate_object`] of each object, what [`validate`] finds, unsorted.
pub fn validate_across<O: Borrow<Object>>(objects: &[O]) -> Vec<ValidationError> {
    let mut findings = Vec::new();
    check_across(objects, &mut findings);
    findings
}

/// [`validate_across`] with the findings about objects declared more than once kept apart, and
/// those objects' keys: such an object is *contested*. Neither declaration is applied and neither
/// file is blamed for its other objects (as Terraform applies nothing of a resource declared
/// twice), so a scan must tell these findings from the ones that break a file.
#[derive(Debug, Default)]
pub struct Across {
    /// One finding per declaration after the first, naming the first.
    pub declared_twice: Vec<ValidationError>,
    /// Every contested key with each place it is declared (`FILE:LINE`), in scan order.
    pub contested: BTreeMap<ObjectKey, Vec<String>>,
    /// Every other finding across objects.
    pub others: Vec<ValidationError>,
}

/// See [`Across`].
pub fn validate_across_apart<O: Borrow<Object>>(objects: &[O]) -> Across {
    let mut across = Across::default();
    for declarations in declared_more_than_once(objects) {
        let first = declarations[0];
        for later in &declarations[1..] {
            across.declared_twice.push(later.origin.error(
                &path("metadata.name"),
                format!(
                    "{} is declared twice; first at {}: neither declaration is applied and nothing runs for it until one is removed",
                    later.key(),
                    first.origin.describe()
                ),
            ));
        }
        across.contested.insert(first.key(), declarations.iter().map(|o| o.origin.describe()).collect());
    }
    check_across_but_duplicates(objects, &mut across.others);
    across
}

/// Every declaration of each key declared more than once, in the order given. Hashed: this runs
/// over every object on every rescan, and ordered lookups of 10,000 names were most of its cost.
fn declared_more_than_once<O: Borrow<Object>>(objects: &[O]) -> Vec<Vec<&Object>> {
    let mut first_seen: HashMap<(Kind, &str), usize> = HashMap::with_capacity(objects.len());
    let mut groups: Vec<Vec<&Object>> = Vec::new();
    let mut group_of: HashMap<usize, usize> = HashMap::new();
    for (at, object) in objects.iter().map(Borrow::borrow).enumerate() {
        match first_seen.entry((object.kind(), &object.metadata.name)) {
            std::collections::hash_map::Entry::Occupied(first) => {
                let first = *first.get();
                let group = *group_of.entry(first).or_insert_with(|| {
                    groups.push(vec![objects[first].borrow()]);
                    groups.len() - 1
                });
                groups[group].push(object);
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(at);
            }
        }
    }
    groups
}

/// File order, then position order: how findings are always shown.
pub fn sort_findings(findings: &mut [ValidationError]) {
    findings.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
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
        Spec::Adapter(spec) => check_adapter(name, spec, origin, out),
        Spec::Assignment(spec) => check_assignment(spec, origin, out),
        Spec::AdmissionPolicy(spec) => check_policy(spec, origin, out),
    }
}

fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

/// The value at `field` as the operator wrote it, for messages; the typed value's canonical form
/// when the file has no scalar there.
fn shown(origin: &Origin, field: &str, value: &impl std::fmt::Display) -> String {
    origin.written_scalar(&path(field)).unwrap_or_else(|| value.to_string())
}

/// Checks a limit against the smallest value the runtime can use (`below` says why a smaller one
/// is refused, given the value as written) and against its hard cap.
fn check_bounds<T: PartialOrd + std::fmt::Display>(
    value: Option<T>,
    floor: T,
    below: impl FnOnce(&str) -> String,
    cap: T,
    field: &str,
    origin: &Origin,
    out: &mut Vec<ValidationError>,
) {
    let Some(value) = value else { return };
    if value < floor {
        out.push(origin.error(&path(field), below(&shown(origin, field, &value))));
    } else if value > cap {
        out.push(origin.error(&path(field), format!("{} exceeds the hard cap of {cap}", shown(origin, field, &value))));
    }
}

/// A timeout (an Adapter's or an Assignment's): whole seconds, from 1s to 24h.
fn check_timeout(timeout: Option<Duration>, field: &str, origin: &Origin, out: &mut Vec<ValidationError>) {
    let Some(timeout) = timeout else { return };
    let written = shown(origin, field, &timeout);
    let problem = if timeout < limits::MIN_TIMEOUT {
        format!("{written} is too short: a timeout must be at least 1s")
    } else if timeout.as_std().subsec_nanos() != 0 {
        format!("{written} is not a whole number of seconds: timeouts are counted and reported in seconds")
    } else if timeout > limits::MAX_TIMEOUT {
        format!("{written} exceeds the hard cap of {}", limits::MAX_TIMEOUT_TEXT)
    } else {
        return;
    };
    out.push(origin.error(&path(field), problem));
}

/// Why a `credentialEnv` name cannot be passed to the agent, if it cannot: the sandbox sets it,
/// or it changes how everything in the sandbox runs.
fn reserved_env_problem(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    let proxy = matches!(upper.as_str(), "HTTP_PROXY" | "HTTPS_PROXY" | "ALL_PROXY" | "NO_PROXY");
    if upper == "PATH" {
        Some("the sandbox sets PATH, and another value would change which programs the agent runs")
    } else if upper == "HOME" {
        Some("the sandbox sets HOME to the agent's private home folder")
    } else if upper.starts_with("LD_") {
        Some("LD_* variables change how every program in the sandbox is loaded (LD_PRELOAD injects code into each)")
    } else if proxy {
        Some(
            "the sandbox sets the proxy variables so the agent reaches nothing but its egress gateway; another value would bypass or break it",
        )
    } else if upper.starts_with("ROUNDTABLE_") {
        Some("ROUNDTABLE_* variables are reserved for Roundtable itself")
    } else {
        None
    }
}

fn check_adapter(name: &str, spec: &AdapterSpec, origin: &Origin, out: &mut Vec<ValidationError>) {
    use crate::units::Quantity;
    let resources = spec.resources.clone().unwrap_or_default();
    let one_byte = Quantity::from_bytes(1);
    let positive = |_: &str| "must be greater than 0".to_owned();
    check_bounds(
        resources.memory,
        limits::MIN_MEMORY,
        |value| {
            format!("{value} is below {}, the smallest memory limit the container engine accepts", limits::MIN_MEMORY)
        },
        limits::MAX_MEMORY,
        "spec.resources.memory",
        origin,
        out,
    );
    check_bounds(
        resources.cpus,
        limits::MIN_CPUS,
        |value| {
            format!(
                "{value} is below 0.01 CPU, the smallest CPU limit the container engine accepts (Docker refuses less)"
            )
        },
        limits::MAX_CPUS,
        "spec.resources.cpus",
        origin,
        out,
    );
    check_bounds(resources.pids, 1, positive, limits::MAX_PIDS, "spec.resources.pids", origin, out);
    check_bounds(
        resources.workspace_size,
        limits::MIN_WORKSPACE,
        |value| {
            format!(
                "{value} is below {}: the workspace volume holds the files the agent is given and everything it writes, and less cannot hold even a small checkout",
                limits::MIN_WORKSPACE
            )
        },
        limits::MAX_WORKSPACE,
        "spec.resources.workspaceSize",
        origin,
        out,
    );
    check_bounds(resources.tmp_size, one_byte, positive, limits::MAX_TMP, "spec.resources.tmpSize", origin, out);
    check_bounds(spec.output_limit, one_byte, positive, limits::MAX_OUTPUT_LIMIT, "spec.outputLimit", origin, out);
    check_timeout(spec.timeout, "spec.timeout", origin, out);
    if let Some(command) = &spec.command
        && let Some(problem) = hidden_character_problem(command)
    {
        out.push(origin.error(&path("spec.command"), problem));
    }
    for (i, arg) in spec.args.iter().flatten().enumerate() {
        if arg.contains('\0') {
            out.push(origin.error(&path("spec.args").index(i), "NUL bytes cannot be passed as arguments"));
        }
    }
    for (i, name) in spec.credential_env.iter().flatten().enumerate() {
        if let Some(why) = reserved_env_problem(name.as_str()) {
            out.push(
                origin.error(
                    &path("spec.credentialEnv").index(i),
                    format!("{name} cannot be passed to the agent: {why}"),
                ),
            );
        }
    }
    // A built-in template may supply the pattern the spec leaves out.
    let template_pattern = crate::builtins::template(name).and_then(|template| template.resume_pattern);
    if spec.supports_resume == Some(true) && spec.resume_pattern.is_none() && template_pattern.is_none() {
        out.push(origin.error(&path("spec.supportsResume"), "supportsResume needs a resumePattern"));
    }
    if let Some(contract) = &spec.contract {
        let plain = !contract.is_empty()
            && !contract.contains(['/', '\\'])
            && !contract.starts_with('.')
            && hidden_character_problem(contract).is_none()
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
    check_effects(name, spec, origin, out);
    check_budget(spec.budget.as_ref(), origin, out);
    check_credentials(name, spec, origin, out);
}

/// A budget of 0 would refuse the session's first model request; no budget is "unset".
fn check_budget(budget: Option<&crate::broker::Budget>, origin: &Origin, out: &mut Vec<ValidationError>) {
    let Some(budget) = budget else { return };
    for (field, value) in [("spec.budget.tokens", budget.tokens), ("spec.budget.requests", budget.requests)] {
        if value == Some(0) {
            out.push(origin.error(
                &path(field),
                "must be greater than 0: a budget of 0 refuses the first model request; leave it out for no limit",
            ));
        }
    }
}

/// The opt-out and budgets nothing enforces, made visible: under `credentialMode: env` the raw
/// values are in the agent's environment, and budgets are kept only by the broker.
fn check_credentials(name: &str, spec: &AdapterSpec, origin: &Origin, out: &mut Vec<ValidationError>) {
    let adapter = crate::catalog::resolve_declared(name, spec);
    if spec.credential_mode == Some(crate::adapter::CredentialMode::Env) && !adapter.credential_env.is_empty() {
        let names: Vec<&str> = adapter.credential_env.iter().map(|name| name.as_str()).collect();
        out.push(origin.finding(
            &path("spec.credentialMode"),
            Severity::Warning,
            format!(
                "credentialMode: env puts the raw values of {} in the agent's environment, where any code it runs can print or spend them; remove it to keep them in the broker",
                names.join(", ")
            ),
        ));
    }
    if spec.budget.is_some_and(|budget| !budget.is_unlimited()) && !adapter.brokered() {
        out.push(origin.finding(
            &path("spec.budget"),
            Severity::Warning,
            format!(
                "{}, so this budget is not enforced: budgets are kept only by the credential broker",
                unbrokered_why(&adapter)
            ),
        ));
    }
}

/// Why an Adapter's sessions get no broker, for messages.
fn unbrokered_why(adapter: &crate::adapter::ResolvedAdapter) -> String {
    let name = &adapter.name;
    if adapter.credential_mode == crate::adapter::CredentialMode::Env {
        format!("adapter {name:?} sets credentialMode: env")
    } else if adapter.credential_env.is_empty() {
        format!("adapter {name:?} has no credentialEnv")
    } else {
        format!("adapter {name:?} has no providerHosts")
    }
}

/// A field the spec sets that nothing would ever act on, for the provider the Adapter resolves
/// to: an operator who sets it expects it to do something, so it is refused, not ignored.
fn check_effects(name: &str, spec: &AdapterSpec, origin: &Origin, out: &mut Vec<ValidationError>) {
    let adapter = crate::catalog::resolve_declared(name, spec);
    let provider = adapter.provider;
    let mut refuse = |field: &str, why: String| out.push(origin.error(&path(field), why));
    if spec.supports_mcp == Some(true) && !provider.can_use_mcp() {
        refuse(
            "spec.supportsMcp",
            format!(
                "provider {provider} is Roundtable's built-in stand-in and calls no tool, so supportsMcp has no effect; remove it, or use provider generic for a CLI that starts `roundtable mcp stdio` itself"
            ),
        );
    }
    if spec.captures_session_id == Some(true) && !provider.has_session_output() {
        refuse(
            "spec.capturesSessionId",
            format!(
                "provider {provider} has no output format to read a session id from, so capturesSessionId has no effect; remove it, or set the provider whose output this CLI writes"
            ),
        );
    }
    if spec.persistent_home == Some(true) && provider.state_folder().is_none() {
        refuse(
            "spec.persistentHome",
            format!(
                "provider {provider} keeps no session store to persist, so persistentHome has no effect; remove it"
            ),
        );
    }
    if spec.args.is_some() && provider.is_agent_cli() {
        refuse(
            "spec.args",
            format!(
                "provider {provider} builds its own argv (see `roundtable adapters plan {name}`), so args has no effect; remove it, or use provider generic to pass arguments of your own"
            ),
        );
    }
    if spec.resume_pattern.is_some() && !adapter.supports_resume {
        refuse(
            "spec.resumePattern",
            "a resume command is made from resumePattern only with supportsResume: true, so it has no effect; set supportsResume: true, or remove it".to_owned(),
        );
    }
    if !adapter.allow_cidrs.is_empty() && adapter.provider_hosts.is_empty() && spec.egress.is_some() {
        refuse(
            "spec.egress.allowCidrs",
            "without providerHosts no egress gateway runs, so allowCidrs has no effect; add the providerHosts they are for, or remove them".to_owned(),
        );
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
        let problem = hidden_character_problem(entry).or_else(|| readable_path_problem(entry).map(str::to_owned));
        if let Some(problem) = problem {
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
    if let Some(problem) = hidden_character_problem(revision) {
        out.push(origin.error(&path("spec.source.revision"), format!("{revision:?}: {problem}")));
    } else if revision.is_empty()
        || revision.starts_with('-')
        || revision.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        out.push(origin.error(
            &path("spec.source.revision"),
            "a revision is a branch, tag or commit: not empty, no whitespace, not starting with '-'",
        ));
    }
    let repo = &spec.source.repo;
    if let Some(problem) = hidden_character_problem(repo).or_else(|| repo_path_problem(repo).map(str::to_owned)) {
        out.push(origin.error(&path("spec.source.repo"), format!("{repo:?}: {problem}")));
    }
    if let Some(model) = &spec.model
        && (model.trim().is_empty() || has_control(model))
    {
        out.push(origin.error(&path("spec.model"), "must be a non-empty name without control characters"));
    }
    if spec.retries > MAX_RETRIES {
        out.push(origin.error(&path("spec.retries"), format!("at most {MAX_RETRIES}")));
    }
    check_timeout(spec.timeout, "spec.timeout", origin, out);
    check_budget(spec.budget.as_ref(), origin, out);
}

fn check_policy(spec: &AdmissionPolicySpec, origin: &Origin, out: &mut Vec<ValidationError>) {
    if spec.receipt_ttl.as_std().is_zero() {
        out.push(origin.error(&path("spec.receiptTtl"), "must be greater than 0s"));
    }
}

fn check_across<O: Borrow<Object>>(all: &[O], out: &mut Vec<ValidationError>) {
    let Across { declared_twice, others, .. } = validate_across_apart(all);
    out.extend(declared_twice);
    out.extend(others);
}

fn check_across_but_duplicates<O: Borrow<Object>>(all: &[O], out: &mut Vec<ValidationError>) {
    let objects = || all.iter().map(Borrow::borrow);

    // Adapter names whose slugs collide (receipts and contracts are stored by slug). Owners are
    // described only when a collision is reported: finding an object's line is not free.
    enum SlugOwner<'o> {
        BuiltIn(&'static str),
        Declared(&'o Object),
    }
    let mut slugs: BTreeMap<String, SlugOwner<'_>> =
        builtins::BUILTIN_NAMES.iter().map(|name| (slug(name), SlugOwner::BuiltIn(name))).collect();
    let mut declared_names = BTreeSet::new();
    for object in objects().filter(|o| o.kind() == Kind::Adapter) {
        let name = &object.metadata.name;
        if !declared_names.insert(name.as_str()) {
            continue;
        }
        let object_slug = slug(name);
        match slugs.get(&object_slug) {
            Some(SlugOwner::BuiltIn(built_in)) if built_in == name => {}
            Some(owner) => {
                let owner = match owner {
                    SlugOwner::BuiltIn(built_in) => format!("built-in adapter {built_in}"),
                    SlugOwner::Declared(first) => {
                        format!("adapter {:?} at {}", first.metadata.name, first.origin.describe())
                    }
                };
                out.push(object.origin.error(
                    &path("metadata.name"),
                    format!("adapter {name:?} has slug {object_slug:?}, which {owner} already uses"),
                ))
            }
            None => {
                slugs.insert(object_slug, SlugOwner::Declared(object));
            }
        }
    }

    // A policy declared twice under one name is reported as a duplicate, not as a second policy.
    let mut policy_names = BTreeSet::new();
    let policies: Vec<&Object> = objects()
        .filter(|o| o.kind() == Kind::AdmissionPolicy && policy_names.insert(o.metadata.name.as_str()))
        .collect();
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

    let catalog = Catalog::build(all);
    for object in objects() {
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
    let offered = if spec.requires.is_empty() { Default::default() } else { entry.resolved.capabilities() };
    for (i, capability) in spec.requires.iter().enumerate() {
        if !offered.contains(capability) {
            out.push(origin.error(
                &path("spec.requires").index(i),
                format!("adapter {:?} does not offer {}", spec.adapter, capability.as_str()),
            ));
        }
    }
    if let Some(model) = spec.model.as_deref().filter(|m| !m.is_empty())
        && !entry.resolved.provider.is_agent_cli()
    {
        out.push(origin.error(
            &path("spec.model"),
            format!(
                "adapter {:?} (provider {}) passes no model to its CLI, so model {model:?} has no effect; remove it, or put the model in the adapter's command or args",
                spec.adapter, entry.resolved.provider
            ),
        ));
    }
    if spec.budget.is_some_and(|budget| !budget.is_unlimited()) && !entry.resolved.brokered() {
        out.push(origin.finding(
            &path("spec.budget"),
            Severity::Warning,
            format!(
                "{}, so this budget is not enforced: budgets are kept only by the credential broker",
                unbrokered_why(&entry.resolved)
            ),
        ));
    }
    // A provider whose CLI's own default model is known not to work says so in its profile.
    if let Some(warning) = entry.resolved.provider.profile().no_model_warning
        && spec.model.as_deref().is_none_or(str::is_empty)
    {
        out.push(origin.finding(&path("spec.model"), Severity::Warning, warning));
    }
}

fn check_image_pinning(
    name: &str,
    spec: &AdapterSpec,
    origin: &Origin,
    policy: Option<&AdmissionPolicySpec>,
    out: &mut Vec<ValidationError>,
) {
    // The image as resolution would give it (the spec's, else its template's), without
    // resolving the whole Adapter once more.
    let template = builtins::template(name);
    let Some(image) = spec.image.as_ref().or(template.as_ref().and_then(|t| t.image.as_ref())) else { return };
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
            ("  resources: {cpus: 5m}\n", "spec.resources.cpus", "below 0.01 CPU", "  resources: {cpus: 10m}\n"),
            ("  resources: {cpus: 0}\n", "spec.resources.cpus", "below 0.01 CPU", "  resources: {cpus: 0.01}\n"),
            ("  resources: {memory: 5Mi}\n", "spec.resources.memory", "below 6Mi", "  resources: {memory: 6Mi}\n"),
            (
                "  resources: {workspaceSize: 512Ki}\n",
                "spec.resources.workspaceSize",
                "below 1Mi: the workspace volume holds",
                "  resources: {workspaceSize: 1Mi}\n",
            ),
            (
                "  resources: {tmpSize: 0}\n",
                "spec.resources.tmpSize",
                "greater than 0",
                "  resources: {tmpSize: 1Mi}\n",
            ),
            ("  timeout: 25h\n", "spec.timeout", "hard cap of 24h", "  timeout: 24h\n"),
            ("  timeout: 1ms\n", "spec.timeout", "at least 1s", "  timeout: 1s\n"),
            ("  timeout: 0s\n", "spec.timeout", "at least 1s", "  timeout: 1m\n"),
            ("  timeout: 1500ms\n", "spec.timeout", "whole number of seconds", "  timeout: 2000ms\n"),
            ("  command: \"qwen\\u202e\"\n", "spec.command", "U+202E (RIGHT-TO-LEFT OVERRIDE)", "  command: qwen\n"),
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
                "  credentialEnv: [OPENAI_API_KEY, LD_PRELOAD]\n",
                "spec.credentialEnv[1]",
                "LD_PRELOAD cannot be passed to the agent: LD_* variables",
                "  credentialEnv: [OPENAI_API_KEY, DEPLOY_KEY]\n",
            ),
            ("  credentialEnv: [LD_LIBRARY_PATH]\n", "spec.credentialEnv[0]", "LD_*", "  credentialEnv: [OLD_PATH]\n"),
            ("  credentialEnv: [PATH]\n", "spec.credentialEnv[0]", "sets PATH", "  credentialEnv: [MY_PATH]\n"),
            ("  credentialEnv: [HOME]\n", "spec.credentialEnv[0]", "sets HOME", "  credentialEnv: [HOMEBREW_TOKEN]\n"),
            (
                "  credentialEnv: [HTTPS_PROXY]\n",
                "spec.credentialEnv[0]",
                "egress gateway",
                "  credentialEnv: [PROXY_TOKEN]\n",
            ),
            (
                "  credentialEnv: [HTTP_PROXY]\n",
                "spec.credentialEnv[0]",
                "egress gateway",
                "  credentialEnv: [HTTP_TOKEN]\n",
            ),
            (
                "  credentialEnv: [ALL_PROXY]\n",
                "spec.credentialEnv[0]",
                "egress gateway",
                "  credentialEnv: [ALL_TOKENS]\n",
            ),
            (
                "  credentialEnv: [NO_PROXY]\n",
                "spec.credentialEnv[0]",
                "egress gateway",
                "  credentialEnv: [NO_TOKEN]\n",
            ),
            (
                "  credentialEnv: [ROUNDTABLE_DIR]\n",
                "spec.credentialEnv[0]",
                "reserved for Roundtable",
                "  credentialEnv: [ROUNDTABLES_KEY]\n",
            ),
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
                "  egress: {allowCidrs: [10.0.0.0/8]}\n  providerHosts: [llm.example.com]\n",
            ),
            (
                "  egress: {allowCidrs: ['::/0']}\n  providerHosts: [llm.example.com]\n",
                "spec.egress.allowCidrs[0]",
                "whole address family",
                "  egress: {allowCidrs: ['fd00::/8']}\n  providerHosts: [llm.example.com]\n",
            ),
            // A field nothing acts on for the provider the Adapter resolves to.
            (
                "  provider: mock\n  supportsMcp: true\n",
                "spec.supportsMcp",
                "calls no tool, so supportsMcp has no effect",
                "  supportsMcp: true\n",
            ),
            (
                "  capturesSessionId: true\n",
                "spec.capturesSessionId",
                "provider generic has no output format",
                "  provider: mock\n  capturesSessionId: true\n",
            ),
            (
                "  persistentHome: true\n",
                "spec.persistentHome",
                "provider generic keeps no session store",
                "  provider: claude\n  persistentHome: true\n",
            ),
            (
                "  provider: codex\n  args: [--fast]\n",
                "spec.args",
                "provider codex builds its own argv (see `roundtable adapters plan mine`)",
                "  args: [--fast]\n",
            ),
            (
                "  resumePattern: my-cli resume {{external_session_id}}\n",
                "spec.resumePattern",
                "only with supportsResume: true",
                "  supportsResume: true\n  resumePattern: my-cli resume {{external_session_id}}\n",
            ),
            (
                "  egress: {allowCidrs: [10.0.0.0/8]}\n",
                "spec.egress.allowCidrs",
                "without providerHosts no egress gateway runs",
                "  egress: {allowCidrs: [10.0.0.0/8]}\n  providerHosts: [llm.example.com]\n",
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
                "  supportsResume: true\n  resumePattern: my-cli resume {{external_session_id}}\n",
            ),
            (
                "  resumePattern: \"my-cli --id={{external_session_id}}\"\n",
                "spec.resumePattern",
                "whole argument",
                "  supportsResume: true\n  resumePattern: \"my-cli --id '{{external_session_id}}'\"\n",
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
                "  readablePaths: [\"docs\\u2066/x\"]\n",
                "spec.readablePaths[0]",
                "U+2066 (LEFT-TO-RIGHT ISOLATE)",
                "  readablePaths: [docs/x]\n",
            ),
            (
                "  readablePaths: [a]\n  timeout: 48h\n",
                "spec.timeout",
                "48h exceeds the hard cap of 24h",
                "  readablePaths: [a]\n  timeout: 24h\n",
            ),
            (
                "  readablePaths: [a]\n  timeout: 10ms\n",
                "spec.timeout",
                "10ms is too short: a timeout must be at least 1s",
                "  readablePaths: [a]\n  timeout: 10s\n",
            ),
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
            (
                "  readablePaths: [a]\n  model: gpt-5-codex\n",
                "spec.model",
                "adapter \"generic\" (provider generic) passes no model to its CLI",
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
    fn adapter_slug_collisions_name_the_first_owner() {
        // With a built-in: its own name is fine, another spelling of its slug is not.
        assert_clean(&findings(&[("a.yaml", &adapter("codex", "  command: codex\n"))]));
        let found = findings(&[("a.yaml", &adapter("'Codex'", "  command: codex\n"))]);
        assert_one(&found, "metadata.name", "slug \"codex\", which built-in adapter codex already uses");
        // Between declared adapters: the first keeps the slug and is named with its line.
        let two =
            format!("{}---\n{}", adapter("'Qwen CLI'", "  command: qwen\n"), adapter("qwen-cli", "  command: q\n"));
        let found = findings(&[("a.yaml", &two)]);
        assert_one(&found, "metadata.name", "slug \"qwen-cli\", which adapter \"Qwen CLI\" at a.yaml:4 already uses");
    }

    #[test]
    fn names_follow_their_kind() {
        assert_one(&findings(&[("a.yaml", &assignment("Fix_It", GOOD_ASSIGNMENT))]), "metadata.name", "invalid name");
        assert_clean(&findings(&[("a.yaml", &assignment("fix-it", GOOD_ASSIGNMENT))]));
        assert_clean(&findings(&[("a.yaml", &adapter("'Qwen CLI'", "  command: qwen\n"))]));
    }

    #[test]
    fn names_refuse_bidi_and_invisible_characters() {
        for name in ["\"fix\\u202eit\"", "\"fix\\u200bit\"", "\"fix\\u2066it\""] {
            let found = findings(&[("a.yaml", &assignment(name, GOOD_ASSIGNMENT))]);
            assert_one(&found, "metadata.name", "U+");
            assert!(!found[0].message.contains(['\u{202e}', '\u{200b}', '\u{2066}']), "{found:#?}");
        }
        assert_one(
            &findings(&[("a.yaml", &adapter("\"Qwen\\u202eCLI\"", "  command: qwen\n"))]),
            "metadata.name",
            "U+202E (RIGHT-TO-LEFT OVERRIDE)",
        );
        assert_one(
            &findings(&[("a.yaml", &policy("  mode: warn\n").replace("name: default", "name: \"def\\u200fault\""))]),
            "metadata.name",
            "U+200F (RIGHT-TO-LEFT MARK)",
        );
    }

    #[test]
    fn echoed_values_are_exactly_what_the_operator_wrote() {
        // Each value's canonical form differs from the text: a message must show the text.
        let cases: &[(&str, &str)] = &[
            ("  resources: {memory: 17.5Gi}\n", "17.5Gi exceeds the hard cap of 16Gi"),
            ("  resources: {memory: 18G}\n", "18G exceeds the hard cap of 16Gi"),
            ("  resources: {memory: '5000000'}\n", "5000000 is below 6Mi"),
            ("  resources: {memory: 1.5Ki}\n", "1.5Ki is below 6Mi"),
            ("  resources: {cpus: 8.5}\n", "8.5 exceeds the hard cap of 8"),
            ("  resources: {cpus: 0.005}\n", "0.005 is below 0.01 CPU"),
            ("  resources: {cpus: 0.0005}\n", "invalid CPU count \"0.0005\""),
            ("  resources: {cpus: 0.009}\n", "0.009 is below 0.01 CPU"),
            ("  resources: {workspaceSize: 0.5Mi}\n", "0.5Mi is below 1Mi"),
            ("  outputLimit: 16385Ki\n", "16385Ki exceeds the hard cap of 16Mi"),
            ("  timeout: 1440m1s\n", "1440m1s exceeds the hard cap of 24h"),
            ("  timeout: 90000s\n", "90000s exceeds the hard cap of 24h"),
            ("  timeout: 999ms\n", "999ms is too short"),
        ];
        for (spec, wanted) in cases {
            let found = findings(&[("a.yaml", &adapter("mine", spec))]);
            let errors: Vec<&str> = found.iter().map(|f| f.message.as_str()).collect();
            assert!(errors.iter().any(|m| m.starts_with(wanted)), "{spec:?}: {errors:?}");
        }
    }

    #[test]
    fn duplicates_name_both_files() {
        let found = findings(&[
            ("a.yaml", &assignment("fix", GOOD_ASSIGNMENT)),
            ("b.yaml", &assignment("fix", GOOD_ASSIGNMENT)),
        ]);
        assert_one(&found, "metadata.name", "declared twice; first at a.yaml:4");
        assert_eq!(found[0].file, "b.yaml");
        // Kept apart from the findings that break a file, with every place of the key.
        let objects: Vec<Object> = ["a.yaml", "b.yaml", "c.yaml"]
            .iter()
            .flat_map(|file| parse_file(file, file, &assignment("fix", GOOD_ASSIGNMENT)).objects)
            .collect();
        let across = validate_across_apart(&objects);
        assert_eq!(across.declared_twice.len(), 2, "{:?}", across.declared_twice);
        assert!(across.others.is_empty(), "{:?}", across.others);
        let places: Vec<&Vec<String>> = across.contested.values().collect();
        assert_eq!(places, [&vec!["a.yaml:4".to_owned(), "b.yaml:4".to_owned(), "c.yaml:4".to_owned()]]);
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
    fn a_codex_assignment_without_a_model_is_warned() {
        let assignment = |model: &str| {
            format!(
                "apiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {{name: a}}\nspec:\n  adapter: codex\n  task: {{id: T, prompt: p}}\n  readablePaths: [a]\n{model}"
            )
        };
        let found = findings(&[("a.yaml", &assignment(""))]);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!((found[0].severity, found[0].path.as_str()), (Severity::Warning, "spec.model"));
        assert!(found[0].message.contains("gpt-5-codex"), "{}", found[0].message);
        assert!(findings(&[("a.yaml", &assignment("  model: gpt-5-codex\n"))]).is_empty());
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

    #[test]
    fn the_env_opt_out_is_warned_at_its_field_and_line() {
        let found = findings(&[("a.yaml", &adapter("claude", "  credentialMode: env\n"))]);
        assert_eq!(found.len(), 1, "{found:#?}");
        let warning = &found[0];
        assert_eq!((warning.severity, warning.path.as_str()), (Severity::Warning, "spec.credentialMode"));
        assert_eq!((warning.file.as_str(), warning.line), ("a.yaml", 6));
        assert!(
            warning.message.contains("ANTHROPIC_API_KEY") && warning.message.contains("print"),
            "{}",
            warning.message
        );
        // Nothing to expose: no warning.
        assert!(findings(&[("a.yaml", &adapter("mine", "  credentialMode: env\n"))]).is_empty());
        assert!(findings(&[("a.yaml", &adapter("claude", "  credentialMode: broker\n"))]).is_empty());
    }

    #[test]
    fn budgets_are_warned_where_no_broker_keeps_them_and_zero_is_refused() {
        let on_adapter = |name: &str, spec: &str| findings(&[("a.yaml", &adapter(name, spec))]);
        assert!(on_adapter("claude", "  budget: {tokens: 1000}\n").is_empty(), "brokered: kept");
        let found = on_adapter("claude", "  credentialMode: env\n  budget: {tokens: 1000}\n");
        let budget: Vec<_> = found.iter().filter(|f| f.path == "spec.budget").collect();
        assert_eq!(budget.len(), 1, "{found:#?}");
        assert_eq!(budget[0].severity, Severity::Warning);
        assert!(budget[0].message.contains("credentialMode: env"), "{}", budget[0].message);
        let found = on_adapter("generic", "  budget: {requests: 5}\n");
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].message.contains("no credentialEnv"), "{}", found[0].message);
        assert_one(&on_adapter("claude", "  budget: {tokens: 0}\n"), "spec.budget.tokens", "greater than 0");
        assert_one(&on_adapter("claude", "  budget: {requests: 0}\n"), "spec.budget.requests", "greater than 0");

        let routed = |adapter: &str, budget: &str| {
            findings(&[(
                "b.yaml",
                &assignment(
                    "b",
                    &format!(
                        "  adapter: {adapter}\n  model: m\n  task: {{id: T, prompt: p}}\n  readablePaths: [a]\n{budget}"
                    ),
                ),
            )])
        };
        assert!(routed("claude", "  budget: {tokens: 10}\n").is_empty());
        let found = routed("generic", "  budget: {tokens: 10}\n");
        let warnings: Vec<_> = found.iter().filter(|f| f.path == "spec.budget").collect();
        assert_eq!(warnings.len(), 1, "{found:#?}");
        assert_eq!((warnings[0].severity, warnings[0].file.as_str()), (Severity::Warning, "b.yaml"));
        assert!(warnings[0].line > 0);
        let found = routed("claude", "  budget: {requests: 0}\n");
        assert_one(&found, "spec.budget.requests", "greater than 0");
    }
}
