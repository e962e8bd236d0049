//! The pinned path to an upstream host, shared by the tunnel and the credential broker: one
//! bounded lookup whose answer is the pin, every answer admitted by the address policy or the
//! whole pin refused, and a dial of the pinned addresses only (the first few, each within the
//! connect timeout). Typed results, so each caller reports them in its own lines.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use roundtable_specs::egress::GatewayReason;
use tokio::net::TcpStream;

use crate::address::{self, AddressPolicy, Admitted};
use crate::dial::Dial;
use crate::resolve::{LookupError, Resolve};

/// Pinned addresses tried per connection, in the resolver's order: each may take the whole
/// connect timeout, so a long answer must not hold a caller for minutes.
pub const MAX_DIAL_ATTEMPTS: usize = 4;

/// Why no pinned connection was had: the reason code, and for a resolver failure or the dials
/// the message(s) a log line carries (never sent to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
pub struct PinError {
    pub reason: GatewayReason,
    pub detail: Option<String>,
}

impl PinError {
    fn new(reason: impl Into<GatewayReason>) -> Self {
        Self { reason: reason.into(), detail: None }
    }
}

/// The one lookup of a host and how long it took.
#[derive(Debug)]
pub struct Lookup {
    pub elapsed: Duration,
    /// Every address of the answer in resolver order (never empty), or why there is none.
    pub result: Result<Vec<IpAddr>, PinError>,
}

/// Looks `host` (canonical, without the trailing dot) up once, as an FQDN, within `timeout`.
/// The answer is not cached: it is the pin of this one caller.
pub async fn resolve<R: Resolve>(resolver: &R, host: &str, timeout: Duration) -> Lookup {
    let started = Instant::now();
    let outcome = resolver.lookup(&format!("{host}."), timeout).await;
    let elapsed = started.elapsed();
    let result = match outcome {
        Err(LookupError::Timeout(_)) => Err(PinError::new(GatewayReason::DnsTimeout)),
        Err(LookupError::NoRecords) => Err(PinError::new(GatewayReason::DnsNoRecords)),
        Err(LookupError::Failed(message)) => Err(PinError { reason: GatewayReason::DnsError, detail: Some(message) }),
        Ok(addresses) if addresses.is_empty() => Err(PinError::new(GatewayReason::DnsNoRecords)),
        Ok(addresses) => Ok(addresses),
    };
    Lookup { elapsed, result }
}

/// Admits every address of a pin by `address::decide`, in resolver order, or refuses the whole
/// pin at the first that fails: a poisoned answer is never filtered down to its public part.
/// Returns the `allowCidrs` entries that admitted an address, each once.
pub fn admit(addresses: &[IpAddr], policy: &AddressPolicy<'_>) -> Result<Vec<IpNet>, PinError> {
    let mut allowed_by_cidr = Vec::new();
    for ip in addresses {
        if let Admitted::Excepted(net) = address::decide(*ip, policy).map_err(PinError::new)?
            && !allowed_by_cidr.contains(&net)
        {
            allowed_by_cidr.push(net);
        }
    }
    Ok(allowed_by_cidr)
}

/// One dial of one pinned address.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub target: SocketAddr,
    pub elapsed: Duration,
    /// Why it failed; `None` for the one that connected.
    pub error: Option<String>,
}

/// A connection to a pinned address.
#[derive(Debug)]
pub struct Connected {
    pub stream: TcpStream,
    pub dialed: SocketAddr,
}

/// The dials of one pin.
#[derive(Debug)]
pub struct Dialed {
    /// Across every attempt.
    pub elapsed: Duration,
    pub attempts: Vec<Attempt>,
    /// The connection, or `upstream_connect_failed` / `upstream_connect_timeout` (the last
    /// attempt decides) with one `address: error` per attempt, joined by `; `.
    pub result: Result<Connected, PinError>,
}

/// Dials the admitted addresses in the resolver's order, at most [`MAX_DIAL_ATTEMPTS`], each
/// within `connect_timeout`, and keeps the first that connects. Nothing else is ever dialed and
/// nothing is resolved again.
pub async fn dial<D: Dial>(dialer: &D, addresses: &[IpAddr], port: u16, connect_timeout: Duration) -> Dialed {
    let started = Instant::now();
    let mut attempts = Vec::new();
    let mut reason = GatewayReason::UpstreamConnectFailed;
    for ip in addresses.iter().take(MAX_DIAL_ATTEMPTS) {
        let target = SocketAddr::new(*ip, port);
        let dialing = Instant::now();
        let dialed = tokio::time::timeout(connect_timeout, dialer.dial(target)).await;
        let elapsed = dialing.elapsed();
        match dialed {
            Ok(Ok(stream)) => {
                attempts.push(Attempt { target, elapsed, error: None });
                return Dialed {
                    elapsed: started.elapsed(),
                    attempts,
                    result: Ok(Connected { stream, dialed: target }),
                };
            }
            Ok(Err(error)) => {
                reason = GatewayReason::UpstreamConnectFailed;
                attempts.push(Attempt { target, elapsed, error: Some(error.to_string()) });
            }
            Err(_) => {
                reason = GatewayReason::UpstreamConnectTimeout;
                attempts.push(Attempt {
                    target,
                    elapsed,
                    error: Some("no answer within the connect timeout".to_owned()),
                });
            }
        }
    }
    let detail = attempts
        .iter()
        .filter_map(|attempt| attempt.error.as_ref().map(|error| format!("{}: {error}", attempt.target)))
        .collect::<Vec<_>>()
        .join("; ");
    Dialed {
        elapsed: started.elapsed(),
        attempts,
        result: Err(PinError { reason, detail: (!detail.is_empty()).then_some(detail) }),
    }
}

/// Milliseconds with microsecond precision, as every gateway and broker line reports times.
pub fn millis(elapsed: Duration) -> f64 {
    (elapsed.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    struct Fixed(Result<Vec<IpAddr>, LookupError>);

    impl Resolve for Fixed {
        async fn lookup(&self, fqdn: &str, _timeout: Duration) -> Result<Vec<IpAddr>, LookupError> {
            assert!(fqdn.ends_with('.'), "looked up as an FQDN");
            self.0.clone()
        }
    }

    struct Refusing;

    impl Dial for Refusing {
        async fn dial(&self, _target: SocketAddr) -> io::Result<TcpStream> {
            Err(io::Error::from(io::ErrorKind::ConnectionRefused))
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[tokio::test]
    async fn a_lookup_maps_every_failure_to_its_reason() {
        let cases = [
            (Err(LookupError::NoRecords), GatewayReason::DnsNoRecords),
            (Ok(vec![]), GatewayReason::DnsNoRecords),
            (Err(LookupError::Timeout(Duration::from_secs(1))), GatewayReason::DnsTimeout),
            (Err(LookupError::Failed("servfail".into())), GatewayReason::DnsError),
        ];
        for (answer, reason) in cases {
            let lookup = resolve(&Fixed(answer), "api.example.com", Duration::from_secs(1)).await;
            assert_eq!(lookup.result.map_err(|e| e.reason), Err(reason));
        }
        let lookup = resolve(&Fixed(Ok(vec![ip("93.184.216.34")])), "api.example.com", Duration::from_secs(1)).await;
        assert_eq!(lookup.result, Ok(vec![ip("93.184.216.34")]));
    }

    #[test]
    fn one_bad_address_refuses_the_whole_pin() {
        let loopback: IpNet = "127.0.0.0/8".parse().expect("net");
        let allow = [loopback];
        let policy = AddressPolicy { allow_cidrs: &allow, self_addresses: &[], dial_allow: &[] };
        assert_eq!(admit(&[ip("93.184.216.34"), ip("127.0.0.9")], &policy), Ok(vec![loopback]));
        let refused = admit(&[ip("93.184.216.34"), ip("10.0.0.1")], &policy).expect_err("private");
        assert_eq!(refused.reason, GatewayReason::from(address::DenyClass::Private));
    }

    #[tokio::test]
    async fn only_the_first_few_pinned_addresses_are_dialed_and_each_failure_is_named() {
        let pin: Vec<IpAddr> = (1..=6).map(|n| ip(&format!("192.0.2.{n}"))).collect();
        let dialed = dial(&Refusing, &pin, 443, Duration::from_secs(1)).await;
        assert_eq!(dialed.attempts.len(), MAX_DIAL_ATTEMPTS);
        let error = dialed.result.expect_err("refused");
        assert_eq!(error.reason, GatewayReason::UpstreamConnectFailed);
        assert!(
            error.detail.as_deref().is_some_and(|d| d.starts_with("192.0.2.1:443: ") && d.contains("; 192.0.2.4:443"))
        );
    }
}
