//! The container engine's events as reconcile triggers, so what `status` says follows the engine
//! within moments instead of at the next resync: an image event re-reconciles the Adapters whose
//! image it names (every Adapter when it names only image IDs, or when the stream resumed after
//! a gap), and a managed container's end re-reconciles the Assignment its labels name. A burst of
//! events is gathered until the engine has been quiet for [`DEBOUNCE`], then triggered once. A
//! hint never carries the truth: the reconcile it triggers observes again.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use roundtable_controller::{Handle, Trigger};
use roundtable_session_runtime::hints::normalise_reference;
use roundtable_session_runtime::{EngineHint, SessionRuntime};
use roundtable_specs::{Kind, ObjectKey, Spec};
use roundtable_store::Store;

/// How long the engine must be quiet before a burst of events is acted on.
pub const DEBOUNCE: Duration = Duration::from_millis(200);
/// The longest a burst is gathered before its triggers go out, however busy the engine is.
pub const MAX_GATHER: Duration = Duration::from_secs(2);

/// The task that follows the engine's events while the daemon runs; stopped by [`stop`] or when
/// dropped.
///
/// [`stop`]: EngineHints::stop
#[derive(Default)]
pub struct EngineHints {
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl EngineHints {
    /// Follows `runtime`'s events and `also` (the daemon's pulls that end), triggering on
    /// `handle` the keys of `project` they touch.
    pub fn start(
        &self,
        runtime: &Arc<dyn SessionRuntime>,
        also: futures::stream::BoxStream<'static, EngineHint>,
        store: Store,
        project: String,
        handle: Handle<ObjectKey>,
    ) {
        let hints = futures::stream::select(runtime.hints(), also).boxed();
        let task = tokio::spawn(follow(hints, store, project, handle));
        if let Some(previous) = self.task.lock().unwrap_or_else(PoisonError::into_inner).replace(task) {
            previous.abort();
        }
    }

    pub fn stop(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
    }
}

impl Drop for EngineHints {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn follow(
    mut hints: futures::stream::BoxStream<'static, EngineHint>,
    store: Store,
    project: String,
    handle: Handle<ObjectKey>,
) {
    while let Some(first) = hints.next().await {
        let mut burst = vec![first];
        // Gathered until a quiet moment, but never longer than `MAX_GATHER`: a busy build host's
        // steady stream of tag and pull events would otherwise hold every hint back.
        let gathering_until = tokio::time::Instant::now() + MAX_GATHER;
        while let Ok(Some(hint)) = tokio::time::timeout(
            DEBOUNCE.min(gathering_until.saturating_duration_since(tokio::time::Instant::now())),
            hints.next(),
        )
        .await
        {
            burst.push(hint);
            if tokio::time::Instant::now() >= gathering_until {
                break;
            }
        }
        let adapters = match adapters(&store).await {
            Ok(adapters) => adapters,
            Err(error) => {
                tracing::warn!(error = %roundtable_telemetry::error_chain(&error), "engine events: cannot read the Adapters; the resync will catch up");
                continue;
            }
        };
        let keys = touched(&burst, &project, &adapters);
        tracing::debug!(events = burst.len(), triggered = keys.len(), "engine events");
        for key in keys {
            if !handle.trigger(Trigger::Resync(key)) {
                return;
            }
        }
    }
}

/// What an Adapter is known to run: its image reference (normalised) and the image ID the last
/// reconcile resolved it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterImage {
    pub key: ObjectKey,
    pub reference: Option<String>,
    pub image_id: Option<String>,
}

/// Every live Adapter in the store with its image.
async fn adapters(store: &Store) -> Result<Vec<AdapterImage>, roundtable_store::Error> {
    let mut adapters = Vec::new();
    for entry in store.object_index().await? {
        if entry.key.kind != Kind::Adapter || entry.deleted {
            continue;
        }
        let Some(record) = store.object(&entry.key).await? else { continue };
        // A spec that does not read names no image: only a whole-Adapters trigger reaches it.
        let reference = roundtable_reconcilers::desired::Desired::from_record(&record).ok().and_then(|desired| {
            match &desired.spec {
                // An operator's override changes only `enabled`, never the image, so the spec's
                // own resolution names it.
                Spec::Adapter(spec) => {
                    roundtable_specs::catalog::resolve_declared(&entry.key.name, spec).image.map(|i| i.to_string())
                }
                _ => None,
            }
        });
        let image_id = record
            .status_json
            .as_deref()
            .and_then(|json| serde_json::from_str::<roundtable_reconcilers::adapter::AdapterStatus>(json).ok())
            .and_then(|status| status.image_id);
        adapters.push(AdapterImage {
            key: entry.key,
            reference: reference.as_deref().map(normalise_reference),
            image_id,
        });
    }
    Ok(adapters)
}

/// The keys a burst of hints touches in `project`.
pub fn touched(burst: &[EngineHint], project: &str, adapters: &[AdapterImage]) -> BTreeSet<ObjectKey> {
    let mut keys = BTreeSet::new();
    let mut every_adapter = false;
    let mut named = BTreeSet::new();
    for hint in burst {
        match hint {
            EngineHint::Image { names } if names.iter().all(|name| EngineHint::is_image_id(name)) => {
                // Only IDs: which references pointed there is no longer known.
                every_adapter = true;
            }
            EngineHint::Image { names } => {
                named.extend(names.iter().map(|name| normalise_reference(name)));
            }
            EngineHint::Container { project: of, assignment: Some(assignment) } if of == project => {
                keys.insert(ObjectKey::new(Kind::Assignment, assignment.clone()));
            }
            EngineHint::Container { .. } => {}
            EngineHint::Resumed => every_adapter = true,
        }
    }
    for adapter in adapters {
        let names_it = |image: &Option<String>| image.as_ref().is_some_and(|image| named.contains(image));
        if every_adapter || names_it(&adapter.reference) || names_it(&adapter.image_id) {
            keys.insert(adapter.key.clone());
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(name: &str, reference: &str, id: &str) -> AdapterImage {
        AdapterImage {
            key: ObjectKey::new(Kind::Adapter, name),
            reference: Some(normalise_reference(reference)),
            image_id: Some(id.into()),
        }
    }

    fn id(digit: char) -> String {
        format!("sha256:{}", digit.to_string().repeat(64))
    }

    #[test]
    fn an_image_event_touches_the_adapters_it_names_and_an_id_alone_touches_all() {
        let adapters = [
            adapter("codex", "roundtable-test/agent", &id('a')),
            adapter("claude", "docker.io/library/other:1", &id('b')),
        ];
        let names = |hints: &[EngineHint]| -> Vec<String> {
            touched(hints, "p1", &adapters).into_iter().map(|k| k.to_string()).collect()
        };
        let retagged = EngineHint::Image { names: vec![id('c'), "roundtable-test/agent:latest".into()] };
        assert_eq!(names(&[retagged]), ["Adapter/codex"]);
        assert_eq!(names(&[EngineHint::Image { names: vec![id('b'), "other:1".into()] }]), ["Adapter/claude"]);
        let removed_by_id = EngineHint::Image { names: vec![id('a')] };
        assert_eq!(names(&[removed_by_id]), ["Adapter/claude", "Adapter/codex"]);
        assert_eq!(names(&[EngineHint::Image { names: vec!["unrelated:latest".into()] }]), Vec::<String>::new());
        assert_eq!(names(&[EngineHint::Resumed]), ["Adapter/claude", "Adapter/codex"]);

        let died = EngineHint::Container { project: "p1".into(), assignment: Some("fix".into()) };
        let elsewhere = EngineHint::Container { project: "p2".into(), assignment: Some("other".into()) };
        let probe = EngineHint::Container { project: "p1".into(), assignment: None };
        assert_eq!(names(&[died, elsewhere, probe]), ["Assignment/fix"]);
    }
}
