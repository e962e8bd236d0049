//! The in-container relays: `roundtable proxy` started as an exec before the agent (one process
//! for the egress proxy and the broker's loopback listener), and waited for until it says it is
//! listening.

use std::time::Duration;

use bollard::Docker;
use futures::StreamExt as _;
use roundtable_session_runtime::{Captured, RuntimeError};
use roundtable_specs::layout as paths;

use crate::exec::start_attached;

/// Why the in-container proxy did not come up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyError {
    #[error("cannot start the egress proxy")]
    Start(#[source] RuntimeError),
    #[error("the egress proxy did not start: {said}")]
    NotListening { said: String },
}

/// Which relays a session's proxy process runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Relays {
    /// `HTTPS_PROXY` to the egress gateway's socket.
    pub(crate) egress: bool,
    /// The broker's loopback address (and, without a gateway, `HTTPS_PROXY`'s) to its socket.
    pub(crate) broker: bool,
}

/// Starts `roundtable proxy` as an exec and waits until it says it is listening (it checks each
/// sidecar socket is there first), so the agent never starts before its relays. Its output is
/// drained in the background for as long as it runs.
pub(crate) async fn start_proxy(docker: &Docker, container: &str, relays: Relays) -> Result<(), ProxyError> {
    let mut argv = vec![paths::BINARY.to_owned(), "proxy".into()];
    // In a brokered session `HTTPS_PROXY` is the broker too: a CLI that ignores its base URL
    // sends its `CONNECT` there and is intercepted (a session never has both sidecars).
    let routes = [
        (relays.egress, paths::PROXY_LISTEN, paths::EGRESS_SOCKET),
        (relays.broker && !relays.egress, paths::PROXY_LISTEN, paths::BROKER_SOCKET),
        (relays.broker, paths::BROKER_LISTEN, paths::BROKER_SOCKET),
    ];
    for (_, listen, socket) in routes.into_iter().filter(|(on, _, _)| *on) {
        argv.extend(["--listen".into(), listen.to_owned(), "--upstream".into(), format!("unix:{socket}")]);
    }
    let env = vec!["PATH=/usr/bin:/bin".to_owned()];
    let (_, mut output, _) =
        start_attached(docker, container, argv, env, false, 4096).await.map_err(ProxyError::Start)?;
    let mut said = Captured::default();
    let ready = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(chunk)) = output.next().await {
            said.push(&chunk.into_bytes(), 4096);
            if said.bytes.windows(9).any(|w| w == b"listening") {
                return true;
            }
        }
        false
    })
    .await;
    if ready != Ok(true) {
        let text = String::from_utf8_lossy(&said.bytes).trim().to_owned();
        return Err(ProxyError::NotListening { said: if text.is_empty() { "no output".into() } else { text } });
    }
    tokio::spawn(async move { while output.next().await.is_some() {} });
    Ok(())
}
