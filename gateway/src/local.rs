//! This host's own interface addresses (the `self_address` class): a tunnel never reaches the
//! machine the gateway runs on, whatever `allowCidrs` says. Read from procfs, Linux only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Every address assigned to an interface of this network namespace; empty when procfs is
/// unreadable.
pub fn interface_addresses() -> Vec<IpAddr> {
    let mut addresses = std::fs::read_to_string("/proc/net/fib_trie").map(|t| v4_local(&t)).unwrap_or_default();
    addresses.extend(std::fs::read_to_string("/proc/net/if_inet6").map(|t| v6_local(&t)).unwrap_or_default());
    addresses.sort();
    addresses.dedup();
    addresses
}

/// The `/32 host LOCAL` leaves of the local table: one per assigned IPv4 address. Wider LOCAL
/// routes (127.0.0.0/8) are not interface addresses and are left to the address policy.
fn v4_local(fib_trie: &str) -> Vec<IpAddr> {
    let mut addresses = Vec::new();
    let mut leaf: Option<Ipv4Addr> = None;
    for line in fib_trie.lines().map(str::trim) {
        if let Some(address) = line.strip_prefix("|-- ") {
            leaf = address.parse().ok();
        } else if line.starts_with("/32 host LOCAL")
            && let Some(address) = leaf
        {
            addresses.push(IpAddr::V4(address));
        }
    }
    addresses
}

fn v6_local(if_inet6: &str) -> Vec<IpAddr> {
    if_inet6
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter_map(|hex| u128::from_str_radix(hex, 16).ok())
        .map(|bits| IpAddr::V6(Ipv6Addr::from(bits)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_addresses_come_from_host_leaves_only() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n     |-- 172.17.0.0\n        /16 link UNICAST\n     |-- 172.17.0.1\n        /32 host LOCAL\n     |-- 172.17.255.255\n        /32 link BROADCAST\n";
        assert_eq!(v4_local(trie), ["127.0.0.1".parse::<IpAddr>().expect("ip"), "172.17.0.1".parse().expect("ip")]);
        let inet6 = "00000000000000000000000000000001 01 80 10 80       lo\nfe800000000000000042acfffe110002 05 40 20 80  docker0\n";
        assert_eq!(
            v6_local(inet6),
            ["::1".parse::<IpAddr>().expect("ip"), "fe80::42:acff:fe11:2".parse().expect("ip")]
        );
    }
}
