//! The filesystem every agent container sees, and the user it runs as: the contract between the
//! controller, the session runtime, the in-container commands and adapter authors. One owner.

/// The UID and GID every agent runs as and every writable volume belongs to.
pub const AGENT_UID: u32 = 1000;

/// The provisioned source, read-only.
pub const SOURCE: &str = "/roundtable/source";
/// The agent's writable workspace (seeded from the source; exported after the run).
pub const WORKSPACE: &str = "/roundtable/workspace";
/// Root-owned 0755, like every parent of a file a CLI trusts as system configuration (the
/// Gemini CLI ignores settings under a folder that is not root's or that others can write).
pub const TMP: &str = "/tmp";
/// The agent's scratch folder (its `TMPDIR`), its own 0700: `/tmp` itself is not writable.
pub const TMPDIR: &str = "/tmp/roundtable/tmp";
/// The controller's own static binary, read-only: PID 1, the self-check, the proxy, `mock`.
pub const BINARY: &str = "/roundtable/bin/roundtable";
/// The brief (assignment, task, base commit, manifest), read-only.
pub const TASK: &str = "/roundtable/task.json";
/// The session's socket directory.
pub const SOCKETS: &str = "/run/roundtable";
/// The session gateway's socket.
pub const EGRESS_SOCKET: &str = "/run/roundtable/egress.sock";
/// Where the in-container proxy listens; the agent's `HTTPS_PROXY`.
pub const PROXY_LISTEN: &str = "127.0.0.1:3128";
/// The agent's `HOME`.
pub const HOME: &str = "/tmp/roundtable/home";
/// The session's MCP endpoint (the agent reaches it through `roundtable mcp stdio`).
pub const MCP_SOCKET: &str = "/run/roundtable/mcp.sock";
/// Root-owned 0755: the manifests Roundtable writes for the agent CLI, and its private homes.
pub const AGENT_CONFIG: &str = "/tmp/roundtable";
/// The variable that carries the agent's MCP capability, set only in the agent exec's environment.
pub const CAPABILITY_ENV: &str = "ROUNDTABLE_AGENT_CAPABILITY";
/// The session broker's socket (docs/broker.md): provider requests with placeholders in, the
/// real credential swapped in on the host.
pub const BROKER_SOCKET: &str = "/run/roundtable/broker.sock";
/// Where the in-container relay listens for the broker: plain HTTP on the container's own
/// loopback, never leaving it.
pub const BROKER_LISTEN: &str = "127.0.0.1:3129";

/// The session CA's certificate (public): the trust bundle of a brokered agent, whose
/// `CONNECT`s to its provider hosts the broker terminates (docs/broker.md).
pub const SESSION_CA: &str = "/tmp/roundtable/session-ca.pem";

/// The variables that send an agent's HTTPS through the in-container relay: to the egress
/// gateway, or in a brokered session to the broker. Exactly these two: no `HTTP_PROXY` or
/// `ALL_PROXY`, so plain HTTP and other schemes have no route out.
pub fn proxy_env() -> [String; 2] {
    let proxy = format!("http://{PROXY_LISTEN}");
    [format!("HTTPS_PROXY={proxy}"), format!("https_proxy={proxy}")]
}

/// The base URL an agent uses for provider `host` through the broker: one path prefix per host,
/// so the broker takes the upstream host from the Adapter's list, never from the request.
pub fn broker_base_url(host: &str) -> String {
    format!("http://{BROKER_LISTEN}/{host}")
}
