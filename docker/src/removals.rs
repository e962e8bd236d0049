//! The removals a session leaves under way once its outcome is handed back, and the wait for
//! all of them (`SessionRuntime::settled`): a removal is off the session's way, never forgotten.

use std::sync::Arc;

use tokio::sync::watch;

/// The removals under way, counted; clones share the count.
#[derive(Debug, Clone)]
pub(crate) struct Removals {
    under_way: Arc<watch::Sender<usize>>,
}

impl Default for Removals {
    fn default() -> Self {
        Self { under_way: Arc::new(watch::channel(0).0) }
    }
}

impl Removals {
    /// Runs `removal` on a task of its own, counted until it ends (or the task is dropped, with
    /// the runtime that ran it).
    pub(crate) fn spawn(&self, removal: impl Future<Output = ()> + Send + 'static) {
        self.under_way.send_modify(|count| *count += 1);
        let ended = Ended(self.under_way.clone());
        tokio::spawn(async move {
            let _ended = ended;
            removal.await;
        });
    }

    /// Resolves once no removal is under way.
    pub(crate) async fn settled(&self) {
        let mut count = self.under_way.subscribe();
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = count.wait_for(|count| *count == 0).await;
    }
}

/// Takes one removal off the count when dropped: when it ends, and also when it panicked or its
/// task was dropped, so a wait never hangs on a removal that can no longer end.
struct Ended(Arc<watch::Sender<usize>>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.send_modify(|count| *count = count.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn settled_waits_for_every_removal_under_way_and_no_longer() {
        let removals = Removals::default();
        removals.settled().await;
        let (finish, finished) = tokio::sync::oneshot::channel::<()>();
        removals.spawn(async move {
            let _ = finished.await;
        });
        removals.spawn(async { panic!("a removal that panicked still ends") });
        let waiting = tokio::time::timeout(Duration::from_millis(50), removals.settled()).await;
        assert!(waiting.is_err(), "a removal is still under way");
        let _ = finish.send(());
        tokio::time::timeout(Duration::from_secs(5), removals.clone().settled()).await.expect("settled");
    }
}
