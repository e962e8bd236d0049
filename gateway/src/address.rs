//! The address policy: whether a tunnel may dial one resolved address. One table of every
//! special-purpose range of the IANA registries, each with the class logs name and whether an
//! `allowCidrs` entry may except it (docs/gateway.md §3); [`decide`] is the whole decision and the
//! tunnel calls nothing else. IPv4-mapped or -compatible forms are never unwrapped first.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Why an address is not admitted: the class words of `specs` (`address_denied:<class>`).
pub use roundtable_specs::egress::AddressClass as DenyClass;

/// Whether an `allowCidrs` entry may admit the addresses of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exception {
    /// A provider, a proxy in front of one, or a test double can live here (a LAN, a tailnet, the
    /// host itself): an operator may name the network.
    Allowed,
    /// Never a provider: not a unicast destination, the cloud's control plane (its credentials),
    /// protocol plumbing, or an IPv6 form that carries an IPv4 address (an exception there would
    /// be a way around the IPv4 rows).
    Never,
}

/// One special-purpose range.
#[derive(Debug, Clone, Copy)]
struct Block {
    network: IpAddr,
    prefix: u8,
    class: DenyClass,
    exception: Exception,
}

impl Block {
    const fn v4(octets: [u8; 4], prefix: u8, class: DenyClass, exception: Exception) -> Self {
        let [a, b, c, d] = octets;
        Self { network: IpAddr::V4(Ipv4Addr::new(a, b, c, d)), prefix, class, exception }
    }

    const fn v6(segments: [u16; 8], prefix: u8, class: DenyClass, exception: Exception) -> Self {
        let [a, b, c, d, e, f, g, h] = segments;
        Self { network: IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h)), prefix, class, exception }
    }

    fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(network), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(ip) & mask == u32::from(network)
            }
            (IpAddr::V6(network), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(ip) & mask == u128::from(network)
            }
            _ => false,
        }
    }
}

use DenyClass as C;
use Exception::{Allowed, Never};

/// Every special-purpose block; the first that contains an address decides. The metadata
/// endpoints come first so that logs name them precisely and no wider row can make them
/// exceptable. What no row contains is public.
const BLOCKS: [Block; 31] = [
    // Metadata and credential endpoints. Azure's WireServer sits in public space; ECS task
    // credentials and EKS Pod Identity hand out the host's cloud role.
    Block::v4([168, 63, 129, 16], 32, C::Metadata, Never),
    Block::v4([192, 0, 0, 192], 32, C::Metadata, Never),
    Block::v4([169, 254, 169, 254], 32, C::Metadata, Never),
    Block::v4([169, 254, 170, 2], 32, C::Metadata, Never),
    Block::v4([169, 254, 170, 23], 32, C::Metadata, Never),
    Block::v4([100, 100, 100, 200], 32, C::Metadata, Never),
    // AWS's own services over IPv6: instance metadata (::254), Pod Identity (::23), DNS, NTP.
    Block::v6([0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0], 32, C::Metadata, Never),
    // IPv4.
    Block::v4([0, 0, 0, 0], 8, C::ThisNetwork, Never),
    Block::v4([10, 0, 0, 0], 8, C::Private, Allowed),
    Block::v4([100, 64, 0, 0], 10, C::Shared, Allowed),
    Block::v4([127, 0, 0, 0], 8, C::Loopback, Allowed),
    Block::v4([169, 254, 0, 0], 16, C::LinkLocal, Never),
    Block::v4([172, 16, 0, 0], 12, C::Private, Allowed),
    Block::v4([192, 0, 0, 0], 24, C::IetfProtocol, Never),
    Block::v4([192, 0, 2, 0], 24, C::Documentation, Allowed),
    Block::v4([192, 88, 99, 0], 24, C::Reserved, Never),
    Block::v4([192, 168, 0, 0], 16, C::Private, Allowed),
    Block::v4([198, 18, 0, 0], 15, C::Benchmarking, Allowed),
    Block::v4([198, 51, 100, 0], 24, C::Documentation, Allowed),
    Block::v4([203, 0, 113, 0], 24, C::Documentation, Allowed),
    Block::v4([224, 0, 0, 0], 4, C::Multicast, Never),
    Block::v4([255, 255, 255, 255], 32, C::Broadcast, Never),
    Block::v4([240, 0, 0, 0], 4, C::Reserved, Never),
    // IPv6: unique-local space may be excepted; everything else outside 2000::/3 (unspecified,
    // loopback, compatible, mapped, translated, NAT64, discard, SRv6, link-local, site-local,
    // multicast) may not. The three rows after fc00::/7 are the complement of 2000::/3.
    Block::v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, C::V6NonGlobal, Allowed),
    Block::v6([0, 0, 0, 0, 0, 0, 0, 0], 3, C::V6NonGlobal, Never),
    Block::v6([0x4000, 0, 0, 0, 0, 0, 0, 0], 2, C::V6NonGlobal, Never),
    Block::v6([0x8000, 0, 0, 0, 0, 0, 0, 0], 1, C::V6NonGlobal, Never),
    Block::v6([0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32, C::V6Documentation, Allowed),
    Block::v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, C::V6Documentation, Allowed),
    // Includes Teredo (2001::/32), which carries an IPv4 address.
    Block::v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, C::V6IetfProtocol, Never),
    Block::v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, C::V6SixToFour, Never),
];

fn block_of(ip: IpAddr) -> Option<&'static Block> {
    BLOCKS.iter().find(|block| block.contains(ip))
}

/// Why `ip` is not public, and whether an `allowCidrs` entry may admit it; `None` when it is public.
pub fn classify(ip: IpAddr) -> Option<(DenyClass, Exception)> {
    block_of(ip).map(|block| (block.class, block.exception))
}

/// What a tunnel knows besides the address: its exceptions and the host's own addresses.
#[derive(Debug, Clone, Copy)]
pub struct AddressPolicy<'a> {
    /// Explicit exceptions to the public-address rule (`allowCidrs`).
    pub allow_cidrs: &'a [IpNet],
    /// This host's own addresses: never dialed, whatever `allow_cidrs` says.
    pub self_addresses: &'a [IpAddr],
    /// When not empty, the only networks that may be dialed; it only narrows.
    pub dial_allow: &'a [IpNet],
}

/// How an address was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    Public,
    /// A non-public address admitted by this `allowCidrs` entry.
    Excepted(IpNet),
}

/// The decision for one resolved address, in order: never a self address (compared in canonical
/// form, so `::ffff:127.0.0.1` is `127.0.0.1`), then public or excepted by an entry its block
/// allows, then inside `dial_allow` when that is set.
pub fn decide(ip: IpAddr, policy: &AddressPolicy<'_>) -> Result<Admitted, DenyClass> {
    if policy.self_addresses.contains(&ip.to_canonical()) {
        return Err(DenyClass::SelfAddress);
    }
    let admitted = match block_of(ip) {
        None => Admitted::Public,
        Some(block) => match policy.allow_cidrs.iter().find(|net| net.contains(&ip)) {
            Some(net) if block.exception == Exception::Allowed => Admitted::Excepted(*net),
            _ => return Err(block.class),
        },
    };
    if !policy.dial_allow.is_empty() && !policy.dial_allow.iter().any(|net| net.contains(&ip)) {
        return Err(DenyClass::OutsideDialAllow);
    }
    Ok(admitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect(text)
    }

    fn net(text: &str) -> IpNet {
        text.parse().expect(text)
    }

    fn with_cidrs(allow_cidrs: &[IpNet]) -> AddressPolicy<'_> {
        AddressPolicy { allow_cidrs, self_addresses: &[], dial_allow: &[] }
    }

    /// Every special-purpose range (and its edges), its class, and whether an exception may
    /// admit it. `None` is public.
    const RANGES: &[(&str, Option<(DenyClass, Exception)>)] = &[
        // IPv4
        ("0.0.0.0", Some((C::ThisNetwork, Never))),
        ("0.1.2.3", Some((C::ThisNetwork, Never))),
        ("10.0.0.1", Some((C::Private, Allowed))),
        ("10.255.255.255", Some((C::Private, Allowed))),
        ("11.0.0.1", None),
        ("100.64.0.1", Some((C::Shared, Allowed))),
        ("100.127.255.254", Some((C::Shared, Allowed))),
        ("100.100.100.200", Some((C::Metadata, Never))),
        ("100.128.0.1", None),
        ("127.0.0.1", Some((C::Loopback, Allowed))),
        ("127.255.255.254", Some((C::Loopback, Allowed))),
        ("169.254.169.254", Some((C::Metadata, Never))),
        ("169.254.170.2", Some((C::Metadata, Never))),
        ("169.254.170.23", Some((C::Metadata, Never))),
        ("169.254.0.1", Some((C::LinkLocal, Never))),
        ("169.254.169.253", Some((C::LinkLocal, Never))),
        ("172.16.0.1", Some((C::Private, Allowed))),
        ("172.31.255.255", Some((C::Private, Allowed))),
        ("172.32.0.1", None),
        ("192.0.0.9", Some((C::IetfProtocol, Never))),
        ("192.0.0.170", Some((C::IetfProtocol, Never))),
        ("192.0.0.192", Some((C::Metadata, Never))),
        ("192.0.2.1", Some((C::Documentation, Allowed))),
        ("192.31.196.1", None),
        ("192.88.99.1", Some((C::Reserved, Never))),
        ("192.168.1.1", Some((C::Private, Allowed))),
        ("198.18.0.1", Some((C::Benchmarking, Allowed))),
        ("198.19.255.255", Some((C::Benchmarking, Allowed))),
        ("198.20.0.1", None),
        ("198.51.100.7", Some((C::Documentation, Allowed))),
        ("203.0.113.9", Some((C::Documentation, Allowed))),
        ("224.0.0.1", Some((C::Multicast, Never))),
        ("239.255.255.250", Some((C::Multicast, Never))),
        ("240.0.0.1", Some((C::Reserved, Never))),
        ("255.255.255.254", Some((C::Reserved, Never))),
        ("255.255.255.255", Some((C::Broadcast, Never))),
        ("168.63.129.16", Some((C::Metadata, Never))),
        ("168.63.129.17", None),
        ("93.184.216.34", None),
        ("8.8.8.8", None),
        // IPv6 outside 2000::/3
        ("::", Some((C::V6NonGlobal, Never))),
        ("::1", Some((C::V6NonGlobal, Never))),
        ("::8.8.8.8", Some((C::V6NonGlobal, Never))),
        ("::ffff:8.8.8.8", Some((C::V6NonGlobal, Never))),
        ("::ffff:10.0.0.1", Some((C::V6NonGlobal, Never))),
        ("::ffff:169.254.169.254", Some((C::V6NonGlobal, Never))),
        ("::ffff:0:8.8.8.8", Some((C::V6NonGlobal, Never))),
        ("64:ff9b::808:808", Some((C::V6NonGlobal, Never))),
        ("64:ff9b::a9fe:a9fe", Some((C::V6NonGlobal, Never))),
        ("64:ff9b:1::a9fe:a9fe", Some((C::V6NonGlobal, Never))),
        ("100::1", Some((C::V6NonGlobal, Never))),
        ("5f00::1", Some((C::V6NonGlobal, Never))),
        ("fc00::1", Some((C::V6NonGlobal, Allowed))),
        ("fdff:ffff::1", Some((C::V6NonGlobal, Allowed))),
        ("fd00:ec2::254", Some((C::Metadata, Never))),
        ("fd00:ec2::23", Some((C::Metadata, Never))),
        ("fd00:ec2::253", Some((C::Metadata, Never))),
        ("fe80::1", Some((C::V6NonGlobal, Never))),
        ("fec0::1", Some((C::V6NonGlobal, Never))),
        ("ff02::1", Some((C::V6NonGlobal, Never))),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some((C::V6NonGlobal, Never))),
        ("1fff:ffff::1", Some((C::V6NonGlobal, Never))),
        ("4000::1", Some((C::V6NonGlobal, Never))),
        // IPv6 inside 2000::/3
        ("2001::1", Some((C::V6IetfProtocol, Never))),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some((C::V6IetfProtocol, Never))),
        ("2001:1ff::1", Some((C::V6IetfProtocol, Never))),
        ("2001:200::1", None),
        ("2001:db8::1", Some((C::V6Documentation, Allowed))),
        ("3fff::1", Some((C::V6Documentation, Allowed))),
        ("3fff:fff::1", Some((C::V6Documentation, Allowed))),
        ("3fff:1000::1", None),
        ("2002:c000:0204::1", Some((C::V6SixToFour, Never))),
        ("2002:a9fe:a9fe::1", Some((C::V6SixToFour, Never))),
        ("2606:4700:4700::1111", None),
        ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
    ];

    #[test]
    fn every_special_range_has_its_class_and_exception() {
        for (text, expected) in RANGES {
            assert_eq!(classify(ip(text)), *expected, "{text}");
        }
    }

    #[test]
    fn an_exception_admits_exactly_the_exceptable_ranges() {
        for (text, expected) in RANGES {
            let address = ip(text);
            let own = IpNet::from(address);
            let covering: IpNet = match address {
                IpAddr::V4(_) => net("0.0.0.0/1"),
                IpAddr::V6(_) => net("::/1"),
            };
            let wide = [covering, if address.is_ipv4() { net("128.0.0.0/1") } else { net("8000::/1") }];
            let without = decide(address, &with_cidrs(&[]));
            match expected {
                None => {
                    assert_eq!(without, Ok(Admitted::Public), "{text}");
                    assert_eq!(decide(address, &with_cidrs(&[own])), Ok(Admitted::Public), "{text}");
                }
                Some((class, Exception::Allowed)) => {
                    assert_eq!(without, Err(*class), "{text} without an exception");
                    assert_eq!(decide(address, &with_cidrs(&[own])), Ok(Admitted::Excepted(own)), "{text}");
                    let by_wide = decide(address, &with_cidrs(&wide));
                    assert!(matches!(by_wide, Ok(Admitted::Excepted(_))), "{text}: {by_wide:?}");
                }
                Some((class, Exception::Never)) => {
                    assert_eq!(without, Err(*class), "{text} without an exception");
                    assert_eq!(decide(address, &with_cidrs(&[own])), Err(*class), "{text} under {own}");
                    assert_eq!(decide(address, &with_cidrs(&wide)), Err(*class), "{text} under {wide:?}");
                }
            }
        }
    }

    #[test]
    fn no_exception_reaches_a_metadata_endpoint() {
        let exceptions: Vec<IpNet> = [
            "169.254.0.0/16",
            "169.254.169.254/32",
            "169.254.170.0/24",
            "100.64.0.0/10",
            "100.100.100.200/32",
            "192.0.0.0/24",
            "168.63.129.16/32",
            "168.63.0.0/16",
            "fd00::/8",
            "fc00::/7",
            "fd00:ec2::/32",
            "fd00:ec2::254/128",
            "::ffff:0:0/96",
            "64:ff9b::/96",
            "2002::/16",
        ]
        .iter()
        .map(|text| net(text))
        .collect();
        let endpoints = [
            "169.254.169.254",
            "169.254.170.2",
            "169.254.170.23",
            "100.100.100.200",
            "192.0.0.192",
            "168.63.129.16",
            "fd00:ec2::254",
            "fd00:ec2::23",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
        ];
        for text in endpoints {
            let decided = decide(ip(text), &with_cidrs(&exceptions));
            assert!(decided.is_err(), "{text} admitted: {decided:?}");
        }
    }

    /// A small deterministic generator: the sweep below needs no crate and must repeat exactly.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Never admitted, whatever the exceptions: checked against the standard library's and the
    /// RFCs' definitions, not against [`BLOCKS`].
    fn never_admitted(ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => {
                let [a, b, c, d] = v4.octets();
                v4.is_multicast()
                    || v4.is_broadcast()
                    || a == 0
                    || a >= 240
                    || (a == 169 && b == 254)
                    || (a, b, c) == (192, 0, 0)
                    || [a, b, c, d] == [100, 100, 100, 200]
                    || [a, b, c, d] == [168, 63, 129, 16]
            }
            IpAddr::V6(v6) => {
                let s = v6.segments();
                let embeds_v4 = s[..5] == [0; 5] && matches!(s[5], 0 | 0xffff)
                    || s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0
                    || s[..2] == [0x64, 0xff9b]
                    || s[0] == 0x2002
                    || s[..2] == [0x2001, 0];
                embeds_v4
                    || v6.is_multicast()
                    || v6.is_unicast_link_local()
                    || s[..2] == [0xfd00, 0x0ec2]
                    || (s[0] & 0xe000 != 0x2000 && !v6.is_unique_local())
            }
        }
    }

    #[test]
    fn a_sweep_with_covering_exceptions_never_admits_what_must_stay_closed() {
        let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
        for round in 0..200_000 {
            // Half the addresses start from a special block's network, so its edges are hit.
            let ip = match (random.next() % 4, BLOCKS[round % BLOCKS.len()].network) {
                (0, IpAddr::V4(base)) => IpAddr::V4(Ipv4Addr::from(u32::from(base) ^ (random.next() as u32 & 0xffff))),
                (1, IpAddr::V6(base)) => IpAddr::V6(Ipv6Addr::from(u128::from(base) ^ u128::from(random.next()))),
                (2, _) => IpAddr::V4(Ipv4Addr::from(random.next() as u32)),
                _ => IpAddr::V6(Ipv6Addr::from(u128::from(random.next()) << 64 | u128::from(random.next()))),
            };
            let width = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = 1 + (random.next() % width) as u8;
            let covering = IpNet::new(ip, prefix).expect("prefix in range").trunc();
            let allow = [covering];
            match decide(ip, &with_cidrs(&allow)) {
                Ok(Admitted::Public) => assert_eq!(classify(ip), None, "{ip}"),
                Ok(Admitted::Excepted(net)) => {
                    assert_eq!(net, covering, "{ip}");
                    assert!(!never_admitted(ip), "{ip} admitted by {net}");
                    assert!(matches!(classify(ip), Some((_, Exception::Allowed))), "{ip}");
                }
                Err(class) => assert_eq!(classify(ip).map(|(c, _)| c), Some(class), "{ip}"),
            }
            if never_admitted(ip) {
                assert!(decide(ip, &with_cidrs(&allow)).is_err(), "{ip} under {covering}");
            }
        }
    }

    #[test]
    fn self_addresses_come_first_and_dial_allow_only_narrows() {
        let loopback = [net("127.0.0.0/8")];
        let own = [ip("127.0.0.1"), ip("192.168.1.5")];
        let policy = AddressPolicy { allow_cidrs: &loopback, self_addresses: &own, dial_allow: &[] };
        assert_eq!(decide(ip("127.0.0.1"), &policy), Err(DenyClass::SelfAddress));
        assert_eq!(decide(ip("::ffff:127.0.0.1"), &policy), Err(DenyClass::SelfAddress), "canonical form");
        assert_eq!(decide(ip("192.168.1.5"), &policy), Err(DenyClass::SelfAddress), "before the class");
        assert_eq!(decide(ip("127.0.0.5"), &policy), Ok(Admitted::Excepted(loopback[0])));
        // A mapped form is not unwrapped into the IPv4 exception.
        assert_eq!(decide(ip("::ffff:127.0.0.5"), &policy), Err(DenyClass::V6NonGlobal));
        let narrow = [net("93.184.216.0/24"), net("127.0.0.4/31")];
        let policy = AddressPolicy { allow_cidrs: &loopback, self_addresses: &own, dial_allow: &narrow };
        assert_eq!(decide(ip("93.184.216.34"), &policy), Ok(Admitted::Public));
        assert_eq!(decide(ip("8.8.8.8"), &policy), Err(DenyClass::OutsideDialAllow));
        assert_eq!(decide(ip("127.0.0.5"), &policy), Ok(Admitted::Excepted(loopback[0])));
        assert_eq!(decide(ip("127.0.0.9"), &policy), Err(DenyClass::OutsideDialAllow));
        // dial_allow never admits what the policy denies.
        let everything = [net("10.0.0.0/8")];
        let policy = AddressPolicy { allow_cidrs: &[], self_addresses: &[], dial_allow: &everything };
        assert_eq!(decide(ip("10.0.0.1"), &policy), Err(DenyClass::Private));
    }
}
