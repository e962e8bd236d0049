//! Which Assignments name which Adapter, so that an Adapter whose reconcile changed something
//! (its `Ready` or `Admitted` condition, its generation, an operator's override) wakes the
//! Assignments naming it: an Assignment waiting for its Adapter is reconciled when the Adapter
//! moves, not looked at on a timer (kube-runtime's `watches` with a mapper, for the one relation
//! between our kinds). Kept in memory by the daemon's reconciler; a `status` or `plan` reconciler
//! is never connected and records nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use roundtable_controller::{Handle, Trigger};
use roundtable_specs::{Kind, ObjectKey};

/// The index and where its wakes go; cheap to clone (clones share both).
#[derive(Debug, Clone, Default)]
pub struct Dependents {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    index: Mutex<Index>,
    handle: OnceLock<Handle<ObjectKey>>,
}

/// Names are shared between the two maps, so an Assignment costs one name and two entries.
#[derive(Debug, Default)]
struct Index {
    /// Adapter name → the Assignments that name it.
    naming: HashMap<Arc<str>, HashSet<Arc<str>>>,
    /// Assignment name → the adapter it names.
    named: HashMap<Arc<str>, Arc<str>>,
}

impl Dependents {
    /// From now on, wakes are queued on `handle` (the controller's); the first handle stays.
    pub fn wake_with(&self, handle: Handle<ObjectKey>) {
        let _ = self.inner.handle.set(handle);
    }

    fn connected(&self) -> bool {
        self.inner.handle.get().is_some()
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.inner.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that Assignment `assignment` names adapter `adapter`: true when that is new (its
    /// first record, or it named another adapter), false when it was known or nothing is
    /// connected. To be woken by every change, it must be recorded before the Assignment's read
    /// of its adapter begins: a change the Adapter writes after the record wakes it, and one
    /// written before it is what the read finds. A read that began before a new record may have
    /// missed a change that woke nobody, and is made again.
    pub fn record(&self, assignment: &str, adapter: &str) -> bool {
        if !self.connected() {
            return false;
        }
        let mut index = self.index();
        if index.named.get(assignment).is_some_and(|named| &**named == adapter) {
            return false;
        }
        forget_in(&mut index, assignment);
        let assignment: Arc<str> = Arc::from(assignment);
        let adapter = index.naming.get_key_value(adapter).map_or_else(|| Arc::from(adapter), |(name, _)| name.clone());
        index.naming.entry(adapter.clone()).or_default().insert(assignment.clone());
        index.named.insert(assignment, adapter);
        true
    }

    /// Forgets Assignment `assignment` (it was removed).
    pub fn forget(&self, assignment: &str) {
        if self.connected() {
            forget_in(&mut self.index(), assignment);
        }
    }

    /// Queues a reconcile of every Assignment that names `adapter`; how many were queued.
    pub fn wake(&self, adapter: &str) -> usize {
        let Some(handle) = self.inner.handle.get() else { return 0 };
        let names: Vec<Arc<str>> =
            self.index().naming.get(adapter).map(|names| names.iter().cloned().collect()).unwrap_or_default();
        for name in &names {
            handle.trigger(Trigger::Resync(ObjectKey::new(Kind::Assignment, name.to_string())));
        }
        names.len()
    }
}

fn forget_in(index: &mut Index, assignment: &str) {
    let Some(adapter) = index.named.remove(assignment) else { return };
    if let Some(names) = index.naming.get_mut(&adapter) {
        names.remove(assignment);
        if names.is_empty() {
            index.naming.remove(&adapter);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(receiver: &mut tokio::sync::mpsc::UnboundedReceiver<Trigger<ObjectKey>>) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(trigger) = receiver.try_recv() {
            if let Trigger::Resync(key) = trigger {
                names.push(key.name);
            }
        }
        names.sort();
        names
    }

    #[test]
    fn an_adapter_wakes_the_assignments_that_name_it_now() {
        let (handle, mut receiver) = Handle::channel();
        let dependents = Dependents::default();
        assert!(!dependents.record("before-connecting", "a"));
        dependents.wake_with(handle);
        assert_eq!(dependents.wake("a"), 0, "nothing is recorded before the reconciler is connected");
        assert!(dependents.record("one", "a"), "a first record is new");
        assert!(!dependents.record("one", "a"), "the same record again is not");
        dependents.record("two", "a");
        dependents.record("three", "b");
        assert_eq!(dependents.wake("a"), 2);
        assert_eq!(woken(&mut receiver), ["one", "two"]);
        // An Assignment whose spec now names another adapter moves; a removed one is forgotten.
        assert!(dependents.record("two", "b"), "naming another adapter is new");
        dependents.forget("three");
        dependents.wake("a");
        dependents.wake("b");
        assert_eq!(woken(&mut receiver), ["one", "two"]);
        dependents.forget("one");
        assert_eq!(dependents.wake("a"), 0);
        assert!(!dependents.index().naming.contains_key("a"), "an adapter nobody names is not kept");
    }
}
