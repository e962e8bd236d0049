//! The root package's one integration-test binary: the real `roundtable` binary, real files,
//! and the real container engine.

mod admission;
mod api;
mod audit;
mod broker;
mod cli;
mod codex_offline;
mod console;
mod container;
mod daemon;
mod defaults;
mod delivery;
mod diagnostics;
mod doctor;
mod egress;
mod engine_hints;
mod engine_restart;
mod execution;
mod fidelity;
mod gitops;
mod hook;
#[path = "../hostile/mod.rs"]
mod hostile;
mod http;
mod identity;
mod partitions;
mod podman;
mod private_engine;
mod providers;
mod pull;
mod real_clis;
mod registry;
mod remote_engine;
mod runtime_class;
mod scale_out;
mod schemas;
mod secrets;
mod state_files;
mod store_full;
mod support;
mod terminal;
mod tidy;
mod traces;
mod watch;
