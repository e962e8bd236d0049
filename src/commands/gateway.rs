//! `roundtable gateway serve` (standalone egress gateway, decisions on stdout) and
//! `roundtable proxy` (the in-container forwarder to a gateway socket).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use roundtable_gateway::{DirectDialer, DnsResolver, Endpoint, Gateway, Listener, Settings, StdoutJournal};
use tokio_util::sync::CancellationToken;

use crate::cli::GatewayServeArgs;

pub async fn serve(args: &GatewayServeArgs) -> anyhow::Result<ExitCode> {
    let mut settings = Settings::new(&args.allow_hosts)?;
    settings.set_allow_cidrs(args.allow_cidrs.iter().map(|cidr| cidr.net()))?;
    settings.dial_allow = args.dial_allow.iter().map(|cidr| cidr.net()).collect();
    settings.self_addresses = roundtable_gateway::local::interface_addresses();
    settings.limits.max_tunnels = args.max_tunnels;
    settings.limits.idle_timeout = args.idle_timeout.as_std();
    settings.limits.header_timeout = args.handshake_timeout.as_std();
    settings.limits.client_hello_timeout = args.handshake_timeout.as_std();
    settings.limits.dns_timeout = args.dns_timeout.as_std();
    settings.limits.connect_timeout = args.connect_timeout.as_std();
    let resolver = match args.resolver {
        Some(server) => DnsResolver::new(&[server])?,
        None => DnsResolver::from_resolv_conf(Path::new("/etc/resolv.conf"))?,
    };
    let open_files = roundtable_gateway::limits::raise_open_file_limit().context("raising the open-file limit")?;
    let listener = Listener::bind(&args.listen).await.with_context(|| format!("cannot listen on {}", args.listen))?;
    let endpoint = listener.endpoint()?;
    eprintln!(
        "roundtable gateway: listening on {endpoint}; hosts {}; allowCidrs [{}]; dial limited to [{}]; open files {}",
        settings.allowlist().join(", "),
        join(settings.allow_cidrs()),
        join(&settings.dial_allow),
        open_files.map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
    );
    let counters = Arc::new(roundtable_gateway::Counters::default());
    let (journal, writer) = StdoutJournal::new(counters.clone());
    let journal = Arc::new(journal);
    let gateway = Arc::new(Gateway::with_counters(settings, resolver, DirectDialer, journal, counters));
    let cancel = cancelled_on_signal()?;
    roundtable_gateway::serve(gateway, Arc::new(listener), cancel).await;
    // Every tunnel has ended and the gateway is gone: the writer drains the queue and stops.
    tokio::task::spawn_blocking(move || writer.finish()).await?;
    if let Endpoint::Unix(path) = &endpoint {
        let _ = std::fs::remove_file(path);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn proxy(listen: &[Endpoint], upstream: &[Endpoint]) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        listen.len() == upstream.len(),
        "{} --listen but {} --upstream: each listener is carried to the upstream in the same position",
        listen.len(),
        upstream.len()
    );
    let mut routes = Vec::new();
    for (listen, upstream) in listen.iter().zip(upstream) {
        // Fail closed and say so when the runtime did not mount the sidecar's socket.
        if let Endpoint::Unix(path) = upstream {
            use std::os::unix::fs::FileTypeExt as _;
            let is_socket = std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_socket());
            anyhow::ensure!(is_socket, "the sidecar socket {} is missing: no egress from this sandbox", path.display());
        }
        let listener = Listener::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
        routes.push((listener, upstream.clone()));
    }
    let mut said = Vec::new();
    for (listener, upstream) in &routes {
        said.push((listener.endpoint()?, upstream.clone()));
    }
    // The runtime waits for this line, once every listener is bound, before it starts the agent.
    println!("{}", roundtable_gateway::forward::ready_line(&said));
    let cancel = cancelled_on_signal()?;
    let mut forwards = tokio::task::JoinSet::new();
    for (listener, upstream) in routes {
        forwards.spawn(roundtable_gateway::forward::forward(listener, upstream, cancel.clone()));
    }
    forwards.join_all().await;
    Ok(ExitCode::SUCCESS)
}

fn join(nets: &[ipnet::IpNet]) -> String {
    nets.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// A token cancelled on the first SIGINT or SIGTERM.
fn cancelled_on_signal() -> anyhow::Result<CancellationToken> {
    let cancel = CancellationToken::new();
    let shutdown = crate::signals::shutdown()?;
    let token = cancel.clone();
    tokio::spawn(async move {
        shutdown.await;
        token.cancel();
    });
    Ok(cancel)
}
