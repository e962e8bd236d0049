//! Roundtable's credential broker (docs/broker.md): one per session, on the session's own
//! socket. The agent's provider CLI reaches it over plain HTTP on the container's loopback with
//! a per-session placeholder where its key would be; the broker checks the placeholder, swaps
//! in the real value where the provider's scheme puts it, and forwards to the Adapter's host
//! through the gateway's pinned resolver, address policy and dialer, counting tokens against the
//! session's budget.

pub use roundtable_specs::broker::{BrokerReason, Budget, RequestLine, Scheme, Tokens};

pub mod ledger;
pub mod metrics;
pub mod usage;
