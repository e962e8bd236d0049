//! Whether a per-session sidecar (the egress gateway, the credential broker) is serving: one word
//! both their reports carry.

use crate::words::words;

words! {
    /// Whether a session's sidecar (egress gateway, broker) is serving.
    #[derive(Default)]
    SidecarState {
        /// While the session runs.
        #[default]
        Serving = "serving",
        Stopped = "stopped",
    }
}
