//! Agents as the HTTP API shows them: every adapter (built-in or declared) with capabilities
//! derived from its resolved configuration, its image's executable version from admission's
//! last probe, its active sessions and newest heartbeat; and operators' enable and disable, a
//! runtime override of `spec.enabled` with a real drain.

use roundtable_reconcilers::adapter::AdapterStatus;
use roundtable_reconcilers::conditions;
use roundtable_specs::events::EventReason;
use roundtable_specs::output::{AgentItem, AgentOverrideItem, AgentState, Health};
use roundtable_specs::{Catalog, Kind, ObjectKey};
use roundtable_store::{AgentOverride, OverrideChange};

use crate::{Result, Service, ServiceError};

/// One page of agents, in name order.
#[derive(Debug, Clone)]
pub struct AgentPage {
    pub items: Vec<AgentItem>,
    /// The last name of this page when more follow: the next page starts after it.
    pub next_after: Option<String>,
}

/// What an enable or disable did.
#[derive(Debug, Clone)]
pub struct AgentChange {
    pub agent: AgentItem,
    pub before: Option<AgentState>,
    /// Sessions that were queued or running when the change was made.
    pub active_sessions: Vec<String>,
    /// How many of them a forced disable asked to stop.
    pub cancelled: usize,
}

fn override_item(found: &AgentOverride) -> AgentOverrideItem {
    AgentOverrideItem { state: found.state, changed_at: found.changed_at.clone(), message: found.message.clone() }
}

impl Service {
    async fn catalog(&self) -> Result<Catalog> {
        Ok(Catalog::build(&self.scan().await?.objects))
    }

    /// Agents whose names sort after `after`, at most `limit` of them. Only the page is looked
    /// up in the store.
    pub async fn agents(&self, after: Option<&str>, limit: usize) -> Result<AgentPage> {
        let catalog = self.catalog().await?;
        let names: Vec<&String> = catalog
            .iter()
            .map(|(name, _)| name)
            .filter(|name| after.is_none_or(|after| name.as_str() > after))
            .collect();
        let more = names.len() > limit;
        let mut items = Vec::with_capacity(limit.min(names.len()));
        for name in names.into_iter().take(limit) {
            items.push(self.agent_from(&catalog, name).await?);
        }
        let next_after = if more { items.last().map(|item| item.id.clone()) } else { None };
        Ok(AgentPage { items, next_after })
    }

    /// One agent by its adapter name.
    pub async fn agent(&self, name: &str) -> Result<AgentItem> {
        let catalog = self.catalog().await?;
        self.agent_from(&catalog, name).await
    }

    async fn agent_from(&self, catalog: &Catalog, name: &str) -> Result<AgentItem> {
        let entry = catalog.get(name).ok_or_else(|| ServiceError::NotFound { what: "agent", id: name.to_owned() })?;
        let adapter = &entry.resolved;
        let key = ObjectKey::new(Kind::Adapter, name);
        let record = self.store.object(&key).await?.filter(|r| r.deleted_at.is_none());
        let status: AdapterStatus = record
            .as_ref()
            .and_then(|r| r.status_json.as_deref())
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let (health, message) = match &record {
            Some(_) => conditions::health(&self.store.conditions(&key).await?),
            None => (Health::None, "not declared: a built-in template only".to_owned()),
        };
        let found = self.store.agent_override(name).await?;
        let state = match &found {
            Some(found) => found.state,
            None if adapter.enabled => AgentState::Enabled,
            None => AgentState::Disabled,
        };
        Ok(AgentItem {
            id: name.to_owned(),
            slug: roundtable_specs::names::slug(name),
            provider: adapter.provider.as_str().to_owned(),
            builtin: entry.builtin,
            declared: entry.origin.is_some(),
            spec_enabled: adapter.enabled,
            state,
            r#override: found.as_ref().map(override_item),
            capabilities: adapter.capabilities().into_iter().collect(),
            image: adapter.image.as_ref().map(ToString::to_string),
            image_id: status.image_id,
            executable_version: status.evidence.and_then(|e| e.installed_version),
            active_sessions: self.store.active_sessions_of(name).await?,
            last_heartbeat: self.store.last_heartbeat_of_adapter(name).await?,
            health,
            message,
        })
    }

    /// Enables agent `name`, or disables it: at once when nothing of it runs, else `draining`
    /// until its last session ends (`force`: those sessions are cancelled through `cancel`, which
    /// returns how many it asked to stop). The session count and the change are one transaction.
    pub async fn set_agent_enabled(
        &self,
        name: &str,
        enabled: bool,
        force: bool,
        cancel: impl FnOnce(&str) -> usize,
    ) -> Result<AgentChange> {
        let catalog = self.catalog().await?;
        if catalog.get(name).is_none() {
            return Err(ServiceError::NotFound { what: "agent", id: name.to_owned() });
        }
        let message = match (enabled, force) {
            (true, _) => "enabled by an operator through the API",
            (false, false) => "disabled by an operator through the API",
            (false, true) => "disabled by an operator through the API (forced: active sessions cancelled)",
        };
        let OverrideChange { before, after, active_sessions } =
            self.store.set_agent_enabled(name, enabled, message).await?;
        let cancelled = if !enabled && force && !active_sessions.is_empty() { cancel(name) } else { 0 };
        let key = ObjectKey::new(Kind::Adapter, name);
        let event_message = match after.state {
            AgentState::Draining => format!(
                "{message}: draining, {} active session(s) finish first ({})",
                active_sessions.len(),
                active_sessions.join(", ")
            ),
            _ => message.to_owned(),
        };
        let reason = match after.state {
            AgentState::Enabled => EventReason::OperatorEnabled,
            AgentState::Draining => EventReason::OperatorDraining,
            AgentState::Disabled => EventReason::OperatorDisabled,
        };
        let event = roundtable_store::NewEvent {
            object: &key,
            severity: roundtable_store::Severity::Normal,
            reason: reason.into(),
            message: &event_message,
            record: None,
        };
        self.store.append_event(&event).await?;
        Ok(AgentChange { agent: self.agent_from(&catalog, name).await?, before, active_sessions, cancelled })
    }

    /// The Assignments that name agent `name` (a change to it concerns them).
    pub async fn assignments_of(&self, name: &str) -> Result<Vec<ObjectKey>> {
        Ok(self
            .scan()
            .await?
            .objects
            .into_iter()
            .filter_map(|object| match &object.spec {
                roundtable_specs::Spec::Assignment(spec) if spec.adapter == name => {
                    Some(ObjectKey::new(Kind::Assignment, object.metadata.name.clone()))
                }
                _ => None,
            })
            .collect())
    }
}
