//! Roundtable's credential broker (docs/broker.md): one per session, on the session's own
//! socket. The agent's provider CLI reaches it over plain HTTP on the container's loopback with
//! a per-session placeholder where its key would be; the broker checks the placeholder, swaps
//! in the real value where the provider's scheme puts it, and forwards to the Adapter's host
//! through the gateway's pinned resolver, address policy and dialer, counting tokens against the
//! session's budget.

mod body;
mod broker;
mod headers;
mod intercept;
mod journal;
mod keyring;
pub mod ledger;
mod mask;
pub mod metrics;
mod placeholders;
mod record;
mod redact;
mod rehearsal;
mod route;
mod secret;
mod serve;
mod settings;
mod upstream;
pub mod usage;

pub use body::Outgoing;
pub use broker::{Broker, Via};
pub use intercept::SessionCa;
pub use journal::{BrokerCounters, BrokerJournal};
pub use placeholders::Placeholders;
pub use rehearsal::{Rehearsal, SCRIPTED_STATUS};
pub use roundtable_specs::broker::{BrokerReason, Budget, RequestLine, Scheme, Tokens};
pub use secret::{Credential, Secret};
pub use serve::serve;
pub use settings::{BrokerError, BrokerLimits, BrokerSettings, Route};
