//! Per-peer counts for what a peer holds before it has proven anything (TLS handshakes in
//! flight, connections that have not yet presented the token), so one source address flooding
//! the API cannot use up the slots other peers need.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// Who counts as one peer: an IPv4 address, or an IPv6 /64 (one host or site is usually given a
/// whole /64, so counting single IPv6 addresses would bound nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerKey(IpAddr);

impl From<IpAddr> for PeerKey {
    fn from(address: IpAddr) -> Self {
        match address {
            IpAddr::V4(v4) => PeerKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(IpAddr::V4(v4)),
                None => PeerKey(IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX)))),
            },
        }
    }
}

/// At most `per_peer` slots held by any one peer at a time.
#[derive(Debug, Clone)]
pub struct PeerLimit {
    per_peer: usize,
    held: Arc<Mutex<HashMap<PeerKey, usize>>>,
}

impl PeerLimit {
    pub fn new(per_peer: usize) -> Self {
        Self { per_peer: per_peer.max(1), held: Arc::default() }
    }

    /// A slot for `peer`, or `None` when it already holds `per_peer`. The slot is given back when
    /// dropped.
    pub fn try_take(&self, peer: IpAddr) -> Option<PeerSlot> {
        let key = PeerKey::from(peer);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(key).or_insert(0);
        if *count >= self.per_peer {
            return None;
        }
        *count += 1;
        Some(PeerSlot { key, held: self.held.clone() })
    }
}

/// One slot of one peer.
#[derive(Debug)]
pub struct PeerSlot {
    key: PeerKey,
    held: Arc<Mutex<HashMap<PeerKey, usize>>>,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            // Peers come and go: an empty entry is removed so the map holds only live peers.
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_share_and_gets_it_back() {
        let limit = PeerLimit::new(2);
        let one: IpAddr = "127.0.0.2".parse().expect("address");
        let other: IpAddr = "127.0.0.1".parse().expect("address");
        let first = limit.try_take(one).expect("first");
        let _second = limit.try_take(one).expect("second");
        assert!(limit.try_take(one).is_none(), "a third is refused");
        assert!(limit.try_take(other).is_some(), "another peer is not affected");
        drop(first);
        assert!(limit.try_take(one).is_some(), "a slot given back can be taken again");
    }

    #[test]
    fn one_ipv6_slash_64_is_one_peer_and_mapped_ipv4_is_its_ipv4() {
        let cases: [(&str, &str, bool); 4] = [
            ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true),
            ("2001:db8:1:2::1", "2001:db8:1:3::1", false),
            ("::ffff:192.0.2.7", "192.0.2.7", true),
            ("192.0.2.7", "192.0.2.8", false),
        ];
        for (a, b, same) in cases {
            let (a, b): (IpAddr, IpAddr) = (a.parse().expect("a"), b.parse().expect("b"));
            assert_eq!(PeerKey::from(a) == PeerKey::from(b), same, "{a} and {b}");
        }
    }
}
