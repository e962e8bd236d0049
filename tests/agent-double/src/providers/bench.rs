//! `mcp-bench`: measures MCP tool calls through the session's bridge from inside the container.
//! Launched with Codex's plan (the adapter's `command` is `mcp-bench`), it reads Codex's manifest,
//! starts the server it names (`roundtable mcp stdio`), and times `task.get` calls one after the
//! other. Stdin holds the number of calls (default 1000). Prints one JSON line of figures.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;

use super::codex::Codex;
use super::mcp_client::Client;
use super::{Env, Parsed, Personality};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len().saturating_sub(1)) as f64 * p).round() as usize;
    sorted.get(index.min(sorted.len().saturating_sub(1))).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

pub fn run(args: &[String]) -> ExitCode {
    let env = Env::current();
    let Ok(Parsed::Run(mut codex)) = Codex::parse(args, &env) else {
        eprintln!("mcp-bench: expects Codex's plan (codex exec --json ... -)");
        return ExitCode::from(2);
    };
    let mut stdin = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut stdin);
    let calls: usize = stdin.trim().parse().unwrap_or(1000);
    let spec = match codex.server(&env) {
        Ok(Ok(spec)) => spec,
        Ok(Err(why)) | Err(super::Refusal { message: why, .. }) => {
            eprintln!("mcp-bench: no server: {why}");
            return ExitCode::from(1);
        }
    };
    let started = Instant::now();
    let mut client = match Client::connect(&spec, "mcp-bench") {
        Ok(client) => client,
        Err(error) => {
            eprintln!("mcp-bench: connect: {error}");
            return ExitCode::from(1);
        }
    };
    let connect = started.elapsed();
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let call = Instant::now();
        match client.call_tool("task.get", &json!({})) {
            Ok(Ok(_)) => times.push(call.elapsed()),
            other => {
                eprintln!("mcp-bench: task.get failed: {other:?}");
                return ExitCode::from(1);
            }
        }
    }
    client.close();
    times.sort();
    let total: Duration = times.iter().sum();
    println!(
        "{}",
        json!({
            "type": "bench",
            "calls": calls,
            "connectMs": connect.as_secs_f64() * 1e3,
            "p50Us": percentile(&times, 0.50),
            "p99Us": percentile(&times, 0.99),
            "meanUs": total.as_secs_f64() * 1e6 / calls.max(1) as f64,
        })
    );
    ExitCode::SUCCESS
}
