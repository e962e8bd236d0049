//! The adapter catalog: built-in templates and declared Adapters merged, looked up by exact name.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use crate::adapter::{AdapterSpec, ResolvedAdapter};
use crate::builtins;
use crate::names::slug;
use crate::object::{Object, Origin, Spec};
use crate::output::AdapterItem;

/// One adapter as the project sees it.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    pub builtin: bool,
    /// The declaring document, when declared.
    pub origin: Option<Origin>,
    pub resolved: ResolvedAdapter,
}

/// Every adapter known to a project, alphabetical by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: BTreeMap<String, CatalogEntry>,
}

impl Catalog {
    /// Built-ins first, then each declared Adapter laid over its template (if any).
    /// The first declaration of a name wins; duplicates are reported by validation.
    pub fn build<O: Borrow<Object>>(objects: &[O]) -> Self {
        let mut entries = BTreeMap::new();
        for &name in builtins::BUILTIN_NAMES {
            if let Some(template) = builtins::template(name) {
                entries.insert(
                    name.to_owned(),
                    CatalogEntry { builtin: true, origin: None, resolved: template.resolve(name) },
                );
            }
        }
        for object in objects.iter().map(Borrow::borrow) {
            let Spec::Adapter(spec) = &object.spec else {
                continue;
            };
            let name = &object.metadata.name;
            if entries.get(name).is_some_and(|entry: &CatalogEntry| entry.origin.is_some()) {
                continue;
            }
            let template = builtins::template(name);
            let merged = template.as_ref().map_or_else(|| spec.clone(), |base| spec.over(base));
            entries.insert(
                name.clone(),
                CatalogEntry {
                    builtin: template.is_some(),
                    origin: Some(object.origin.clone()),
                    resolved: merged.resolve(name),
                },
            );
        }
        Self { entries }
    }

    /// Exact, case-sensitive lookup; there is no fallback.
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &CatalogEntry)> {
        self.entries.iter()
    }

    /// The rows of `adapters list`.
    pub fn items(&self) -> Vec<AdapterItem> {
        self.entries
            .iter()
            .map(|(name, entry)| {
                let adapter = &entry.resolved;
                AdapterItem {
                    name: name.clone(),
                    slug: slug(name),
                    builtin: entry.builtin,
                    declared_in: entry.origin.as_ref().map(Origin::describe),
                    enabled: adapter.enabled,
                    image: adapter.image.as_ref().map(ToString::to_string),
                    pinned: adapter.image.as_ref().is_some_and(|image| image.is_pinned()),
                    command: adapter.command.clone(),
                    args: adapter.args.clone(),
                    capabilities: adapter.capabilities().into_iter().collect(),
                    provider_hosts: adapter.provider_hosts.iter().map(ToString::to_string).collect(),
                    credential_env: adapter.credential_env.iter().map(ToString::to_string).collect(),
                    credential_mode: (!adapter.credential_env.is_empty()).then_some(adapter.credential_mode),
                    resources: adapter.resources.clone(),
                    output_limit: adapter.output_limit.to_string(),
                    timeout: adapter.timeout.to_string(),
                }
            })
            .collect()
    }
}

/// The first Adapter named `name` among `objects`: the declaration [`Catalog::build`] keeps (a
/// later one of the same name is a validation error and ignored).
pub fn declared<'a, O: Borrow<Object>>(objects: &'a [O], name: &str) -> Option<&'a AdapterSpec> {
    objects.iter().map(Borrow::borrow).find_map(|object| match &object.spec {
        Spec::Adapter(spec) if object.metadata.name == name => Some(spec),
        _ => None,
    })
}

/// The template for `name` merged with `spec`, as the reconcilers will run it before an
/// operator's runtime override (`roundtable_reconcilers::adapter::resolve` applies that).
pub fn resolve_declared(name: &str, spec: &AdapterSpec) -> ResolvedAdapter {
    builtins::template(name).map_or_else(|| spec.clone(), |base| spec.over(&base)).resolve(name)
}
