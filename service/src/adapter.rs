//! An adapter by name for every service surface (plans, capture, admission, diagnostics,
//! registered sessions): the project's declaration over the built-in template with the
//! operator's runtime override, through the reconciler's own lookup
//! (`roundtable_reconcilers::adapter::resolve`), so the service and the daemon never resolve an
//! adapter differently.

use std::borrow::Borrow;

use roundtable_source::Project;
use roundtable_specs::Object;
use roundtable_specs::adapter::ResolvedAdapter;
use roundtable_store::{AgentOverride, Store};

use crate::{Result, Service, ServiceError};

impl Service {
    /// Adapter `name` as it runs now: declared in the spec directory (or a built-in template),
    /// with the operator's override from this service's store.
    pub(crate) async fn adapter(&self, name: &str) -> Result<ResolvedAdapter> {
        let scan = self.scan().await?;
        let found = self.store.agent_override(name).await?;
        named(&scan.objects, name, found.as_ref())
    }
}

/// Adapter `name` among `objects`, under `agent_override`; not found when neither a declaration
/// nor a built-in template has the name.
pub(crate) fn named<O: Borrow<Object>>(
    objects: &[O],
    name: &str,
    agent_override: Option<&AgentOverride>,
) -> Result<ResolvedAdapter> {
    let declared = roundtable_specs::catalog::declared(objects, name);
    roundtable_reconcilers::adapter::resolve(name, declared, agent_override)
        .ok_or_else(|| ServiceError::NotFound { what: "adapter", id: name.to_owned() })
}

/// The operator's runtime override of adapter `name` recorded in `project`'s state store, for
/// surfaces that work without a service (`adapters plan`, `adapters capture`); none without a
/// project or before the store exists, which is never created here.
pub(crate) async fn recorded_override(project: Option<&Project>, name: &str) -> Result<Option<AgentOverride>> {
    let Some(project) = project else { return Ok(None) };
    let Some(store) = Store::open_existing(&project.store).await? else { return Ok(None) };
    let found = store.agent_override(name).await;
    store.close().await;
    Ok(found?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::agents::{PlanRequest, adapter_plan};

    #[tokio::test]
    async fn every_lookup_sees_an_adapter_as_the_operator_left_it() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join(".roundtable");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let declared = "apiVersion: roundtable.dev/v1alpha1\nkind: Adapter\nmetadata: {name: codex}\nspec: {image: 'codex:pinned'}\n";
        std::fs::write(dir.join("codex.yaml"), declared).expect("write");
        let project = Project::resolve(&dir).expect("project");
        let endpoint = "unix:///nonexistent.sock".to_owned();
        let runtime = Arc::new(roundtable_session_runtime::Unavailable { endpoint, reason: "none".into() });
        let service = Service::open(&project, runtime).await.expect("service");

        // Declared over the built-in template, a template alone, and neither.
        let codex = service.adapter("codex").await.expect("codex");
        assert_eq!(codex.image.as_ref().map(ToString::to_string).as_deref(), Some("codex:pinned"));
        assert!(!codex.command.is_empty(), "the template fills what the declaration leaves out");
        assert!(codex.enabled);
        assert!(service.adapter("claude").await.expect("a built-in").enabled);
        assert!(matches!(service.adapter("nope").await, Err(ServiceError::NotFound { what: "adapter", .. })));
        let request = PlanRequest::default();
        let before = serde_json::to_value(adapter_plan(Some(&project), "codex", &request).await.expect("plan"));

        // Disabled through the API: the service's lookup and the one without a service see it.
        service.set_agent_enabled("codex", false, false, |_| 0).await.expect("disable");
        assert!(!service.adapter("codex").await.expect("codex").enabled, "the service sees the override");
        let recorded = recorded_override(Some(&project), "codex").await.expect("read");
        assert!(recorded.is_some_and(|o| !o.state.allows_sessions()), "plans and capture see it too");
        assert!(service.adapter("claude").await.expect("a built-in").enabled, "only the one named");
        // `enabled` is all the override changes: the plan reads the same.
        let after = serde_json::to_value(adapter_plan(Some(&project), "codex", &request).await.expect("plan"));
        assert_eq!(after.ok(), before.ok());

        // Enabled again through the API, though nothing declares it disabled anyway.
        service.set_agent_enabled("codex", true, false, |_| 0).await.expect("enable");
        assert!(service.adapter("codex").await.expect("codex").enabled);
    }
}
