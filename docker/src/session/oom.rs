//! Whether the agent ran out of memory: the engine's `oom` events for the container, read once
//! the agent is done for the whole of its run (since → until), so none is missed by subscribing
//! late.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::EventsOptionsBuilder;
use futures::StreamExt as _;

/// Now, in unix seconds: where the agent's run starts for [`oom_seen`].
pub(super) fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Whether the engine reported an `oom` event for `container` since `since` (unix seconds).
pub(super) async fn oom_seen(docker: &Docker, container: &str, since: u64) -> bool {
    let filters = HashMap::from([("container", vec![container]), ("event", vec!["oom"])]);
    // `until` is now, to the nanosecond: the engine replays what happened and closes at once.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (since, until) = (since.to_string(), format!("{}.{:09}", now.as_secs(), now.subsec_nanos()));
    let options = EventsOptionsBuilder::default().filters(&filters).since(&since).until(&until).build();
    let mut events = docker.events(Some(options));
    let found = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(event) = events.next().await {
            if event.is_ok_and(|e| e.action.as_deref() == Some("oom")) {
                return true;
            }
        }
        false
    })
    .await;
    found.unwrap_or(false)
}
