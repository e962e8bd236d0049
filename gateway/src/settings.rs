//! What one gateway enforces: the exact allowlist, the explicit address exceptions, the optional
//! narrowing of where it may dial, its bounds (timeouts, buffer sizes, tunnel count), and how a
//! spliced tunnel's bytes are moved.

use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Duration;

use ipnet::IpNet;
use roundtable_specs::egress::GatewayReason;

use crate::address::AddressPolicy;
use crate::client_hello;
use crate::request::canonical_host;

/// The port every tunnel goes to; the authority must say exactly `443`.
pub const UPSTREAM_PORT: u16 = 443;

/// Bounds with safe defaults; every one is configurable.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From accept to a complete CONNECT head.
    pub header_timeout: Duration,
    /// From `200` to a complete ClientHello.
    pub client_hello_timeout: Duration,
    /// One lookup's deadline, from its first query to its answer: every nameserver turn, resend
    /// and TCP retry is inside it (`resolve.rs`). Unanswered by then is `dns_timeout`.
    pub dns_timeout: Duration,
    /// One dial of one pinned address.
    pub connect_timeout: Duration,
    /// A spliced tunnel with no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// Tunnels open at once; more are answered `429 tunnel_limit`.
    pub max_tunnels: usize,
    pub client_hello: client_hello::Limits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            client_hello_timeout: Duration::from_secs(10),
            dns_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            // Provider streams can sit quiet while a model thinks; an hour bounds forgotten ones.
            idle_timeout: Duration::from_secs(3600),
            max_tunnels: 4096,
            client_hello: client_hello::Limits::default(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error(
        "allowed host {host:?} is not a canonical DNS name ({reason}): use lowercase letters, digits, '-' and '.', no IP literal, port, scheme, wildcard or trailing dot"
    )]
    BadHost { host: String, reason: GatewayReason },
    #[error("no allowed host: a gateway that reaches nothing is not started")]
    EmptyAllowlist,
    #[error("allowCidrs entry {0} covers a whole address family and would switch the address policy off")]
    WholeFamily(IpNet),
}

/// How an allowed tunnel's bytes are moved once the buffered bytes are replayed. Either way the
/// bytes, their counts, the idle timeout and the half-closes are the same; only the cost differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SplicePath {
    /// `splice(2)` through a pipe per direction, so the bytes never enter the gateway's memory
    /// (`zero_copy.rs`). A tunnel falls back to [`SplicePath::Copy`] when it cannot have it: a
    /// client stream that is not a socket, no pipes to be had, or a kernel (or seccomp filter) that
    /// refuses the first splice of a direction.
    #[default]
    Kernel,
    /// Read into and write from a buffer of the gateway's own, 16 KiB to 256 KiB per direction.
    Copy,
}

/// The variable that turns the kernel path off for every gateway of a process (`0`, `off`,
/// `false` or `copy`), read once.
pub const SPLICE_ENV: &str = "ROUNDTABLE_GATEWAY_SPLICE";

impl SplicePath {
    /// The path [`Settings::new`] starts from: [`SplicePath::Kernel`] unless [`SPLICE_ENV`] says
    /// otherwise. An operator can then fall back without a new build, should a kernel misbehave.
    pub fn from_env() -> Self {
        static FROM_ENV: OnceLock<SplicePath> = OnceLock::new();
        *FROM_ENV.get_or_init(|| Self::parse_env(std::env::var(SPLICE_ENV).ok().as_deref()))
    }

    fn parse_env(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            None | Some("" | "1" | "on" | "true" | "kernel") => SplicePath::Kernel,
            Some("0" | "off" | "false" | "copy") => SplicePath::Copy,
            Some(other) => {
                tracing::warn!(
                    value = other,
                    "{SPLICE_ENV} is neither 0/off/false/copy nor 1/on/true/kernel; splicing in the kernel"
                );
                SplicePath::Kernel
            }
        }
    }
}

/// One gateway's policy.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    allowlist: Vec<String>,
    /// Explicit exceptions to the public-address rule; empty by default.
    allow_cidrs: Vec<IpNet>,
    /// When not empty, the only networks the gateway may dial. It only narrows: an address must
    /// pass the address policy first.
    pub dial_allow: Vec<IpNet>,
    /// This host's own addresses, never dialed whatever `allow_cidrs` says.
    pub self_addresses: Vec<IpAddr>,
    pub limits: Limits,
    /// How allowed tunnels move their bytes; [`SplicePath::from_env`] when made by [`Settings::new`].
    pub splice_path: SplicePath,
}

impl Settings {
    /// Settings for `hosts`, each validated by the same canonical rules the CONNECT host meets.
    pub fn new(hosts: impl IntoIterator<Item = impl AsRef<str>>) -> Result<Self, SettingsError> {
        let mut allowlist = Vec::new();
        for host in hosts {
            let host = host.as_ref();
            let canonical = canonical_host(host)
                .map_err(|refusal| SettingsError::BadHost { host: host.to_owned(), reason: refusal.into() })?;
            if !allowlist.contains(&canonical) {
                allowlist.push(canonical);
            }
        }
        if allowlist.is_empty() {
            return Err(SettingsError::EmptyAllowlist);
        }
        Ok(Self { allowlist, splice_path: SplicePath::from_env(), ..Self::default() })
    }

    pub fn allowlist(&self) -> &[String] {
        &self.allowlist
    }

    pub fn allow_cidrs(&self) -> &[IpNet] {
        &self.allow_cidrs
    }

    /// What `address::decide` needs of these settings.
    pub fn address_policy(&self) -> AddressPolicy<'_> {
        AddressPolicy {
            allow_cidrs: &self.allow_cidrs,
            self_addresses: &self.self_addresses,
            dial_allow: &self.dial_allow,
        }
    }

    /// Sets the exceptions to the public-address rule; a `/0` is refused.
    pub fn set_allow_cidrs(&mut self, cidrs: impl IntoIterator<Item = IpNet>) -> Result<(), SettingsError> {
        let mut allow = Vec::new();
        for cidr in cidrs {
            if cidr.prefix_len() == 0 {
                return Err(SettingsError::WholeFamily(cidr));
            }
            if !allow.contains(&cidr) {
                allow.push(cidr);
            }
        }
        self.allow_cidrs = allow;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_hosts_meet_the_canonical_rules() {
        let settings = Settings::new(["api.openai.com", "api.openai.com", "api.anthropic.com"]).expect("valid");
        assert_eq!(settings.allowlist(), ["api.openai.com", "api.anthropic.com"]);
        for bad in ["*.openai.com", "API.openai.com", "api.openai.com.", "127.0.0.1", "localhost", "a.com:443"] {
            assert!(matches!(Settings::new([bad]), Err(SettingsError::BadHost { .. })), "{bad}");
        }
        assert_eq!(Settings::new(Vec::<String>::new()).err(), Some(SettingsError::EmptyAllowlist));
        let mut settings = Settings::new(["api.openai.com"]).expect("valid");
        for whole in ["0.0.0.0/0", "::/0"] {
            let net: IpNet = whole.parse().expect("net");
            assert_eq!(settings.set_allow_cidrs([net]), Err(SettingsError::WholeFamily(net)));
        }
    }

    #[test]
    fn the_splice_variable_only_ever_turns_the_kernel_path_off() {
        let cases = [
            (None, SplicePath::Kernel),
            (Some(""), SplicePath::Kernel),
            (Some("1"), SplicePath::Kernel),
            (Some("on"), SplicePath::Kernel),
            (Some("0"), SplicePath::Copy),
            (Some(" off "), SplicePath::Copy),
            (Some("false"), SplicePath::Copy),
            (Some("copy"), SplicePath::Copy),
            (Some("maybe"), SplicePath::Kernel),
        ];
        for (value, expected) in cases {
            assert_eq!(SplicePath::parse_env(value), expected, "{value:?}");
        }
    }
}
