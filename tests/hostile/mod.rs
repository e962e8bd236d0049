//! Hostile tests: each is a break a hostile pass found against a trust boundary (the broker's
//! masks, the secrets gate, accept, provenance keys, protected paths, image pulls, runtime
//! classes, the webhook, the attempts an agent can make the controller grant), kept as a test that fails if the boundary breaks again. They compile into the
//! integration binary (`cargo test --test integration hostile::`).

mod accept;
mod attempts;
mod broker;
mod paths;
mod provenance;
mod pull;
mod runtime;
mod secrets_gate;
mod seed;
mod webhook;
