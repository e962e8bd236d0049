//! The address policy: which resolved addresses a tunnel may dial. Every special-purpose range of
//! the IANA registries is denied with a class for logs (the table is in docs/gateway.md); IPv6 is
//! allowed only inside 2000::/3 minus its special blocks, and IPv4-mapped or -compatible forms are
//! never unwrapped first.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Why an address is not public: the class words of `specs` (`address_denied:<class>`).
pub use roundtable_specs::egress::AddressClass as DenyClass;

/// `(network, prefix length, class)`. Metadata endpoints come first, so logs name them precisely.
const V4_DENY: [(u32, u8, DenyClass); 19] = [
    // Azure WireServer sits in public space but is a metadata endpoint; OCI's and the clouds'
    // link-local ones are inside ranges denied below anyway.
    (0xa83f_8110, 32, DenyClass::Metadata),
    (0xc000_00c0, 32, DenyClass::Metadata),
    (0xa9fe_a9fe, 32, DenyClass::Metadata),
    (0x0000_0000, 8, DenyClass::ThisNetwork),
    (0x0a00_0000, 8, DenyClass::Private),
    (0x6440_0000, 10, DenyClass::Shared),
    (0x7f00_0000, 8, DenyClass::Loopback),
    (0xa9fe_0000, 16, DenyClass::LinkLocal),
    (0xac10_0000, 12, DenyClass::Private),
    (0xc000_0000, 24, DenyClass::IetfProtocol),
    (0xc000_0200, 24, DenyClass::Documentation),
    (0xc058_6300, 24, DenyClass::Reserved),
    (0xc0a8_0000, 16, DenyClass::Private),
    (0xc612_0000, 15, DenyClass::Benchmarking),
    (0xc633_6400, 24, DenyClass::Documentation),
    (0xcb00_7100, 24, DenyClass::Documentation),
    (0xe000_0000, 4, DenyClass::Multicast),
    (0xffff_ffff, 32, DenyClass::Broadcast),
    (0xf000_0000, 4, DenyClass::Reserved),
];

fn v4_class(ip: Ipv4Addr) -> Option<DenyClass> {
    let bits = u32::from(ip);
    for (network, prefix, class) in &V4_DENY {
        let mask = if *prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(*prefix)) };
        if bits & mask == *network {
            return Some(*class);
        }
    }
    None
}

fn v6_class(ip: Ipv6Addr) -> Option<DenyClass> {
    let s = ip.segments();
    if (s[0] & 0xe000) != 0x2000 {
        // Outside global unicast: loopback, unspecified, mapped and compatible IPv4, NAT64,
        // unique-local, link-local, site-local, multicast, discard, SRv6.
        return Some(DenyClass::V6NonGlobal);
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 || s[0] == 0x3fff && s[1] < 0x1000 {
        return Some(DenyClass::V6Documentation);
    }
    if s[0] == 0x2001 && s[1] < 0x0200 {
        return Some(DenyClass::V6IetfProtocol);
    }
    if s[0] == 0x2002 {
        return Some(DenyClass::V6SixToFour);
    }
    None
}

/// Why `ip` may not be dialed, or `None` when it is public.
pub fn classify(ip: IpAddr) -> Option<DenyClass> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

/// The decision for one resolved address, with explicit exceptions.
pub fn allowed(ip: IpAddr, allow_cidrs: &[IpNet]) -> Result<(), DenyClass> {
    match classify(ip) {
        None => Ok(()),
        Some(_) if allow_cidrs.iter().any(|net| net.contains(&ip)) => Ok(()),
        Some(class) => Err(class),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_range_is_denied_with_its_class() {
        let cases: &[(&str, Option<DenyClass>)] = &[
            ("0.0.0.0", Some(DenyClass::ThisNetwork)),
            ("0.1.2.3", Some(DenyClass::ThisNetwork)),
            ("10.0.0.1", Some(DenyClass::Private)),
            ("100.64.0.1", Some(DenyClass::Shared)),
            ("100.100.100.200", Some(DenyClass::Shared)),
            ("100.128.0.1", None),
            ("127.0.0.1", Some(DenyClass::Loopback)),
            ("127.255.255.254", Some(DenyClass::Loopback)),
            ("169.254.169.254", Some(DenyClass::Metadata)),
            ("169.254.170.2", Some(DenyClass::LinkLocal)),
            ("172.16.0.1", Some(DenyClass::Private)),
            ("172.31.255.255", Some(DenyClass::Private)),
            ("172.32.0.1", None),
            ("192.0.0.9", Some(DenyClass::IetfProtocol)),
            ("192.0.0.192", Some(DenyClass::Metadata)),
            ("192.0.2.1", Some(DenyClass::Documentation)),
            ("192.88.99.1", Some(DenyClass::Reserved)),
            ("192.168.1.1", Some(DenyClass::Private)),
            ("198.18.0.1", Some(DenyClass::Benchmarking)),
            ("198.19.255.255", Some(DenyClass::Benchmarking)),
            ("198.20.0.1", None),
            ("198.51.100.7", Some(DenyClass::Documentation)),
            ("203.0.113.9", Some(DenyClass::Documentation)),
            ("224.0.0.1", Some(DenyClass::Multicast)),
            ("239.255.255.250", Some(DenyClass::Multicast)),
            ("240.0.0.1", Some(DenyClass::Reserved)),
            ("255.255.255.255", Some(DenyClass::Broadcast)),
            ("168.63.129.16", Some(DenyClass::Metadata)),
            ("93.184.216.34", None),
            ("8.8.8.8", None),
            ("::", Some(DenyClass::V6NonGlobal)),
            ("::1", Some(DenyClass::V6NonGlobal)),
            ("::ffff:8.8.8.8", Some(DenyClass::V6NonGlobal)),
            ("::ffff:10.0.0.1", Some(DenyClass::V6NonGlobal)),
            ("::8.8.8.8", Some(DenyClass::V6NonGlobal)),
            ("64:ff9b::808:808", Some(DenyClass::V6NonGlobal)),
            ("fc00::1", Some(DenyClass::V6NonGlobal)),
            ("fd00:ec2::254", Some(DenyClass::V6NonGlobal)),
            ("fe80::1", Some(DenyClass::V6NonGlobal)),
            ("fec0::1", Some(DenyClass::V6NonGlobal)),
            ("ff02::1", Some(DenyClass::V6NonGlobal)),
            ("2001::1", Some(DenyClass::V6IetfProtocol)),
            ("2001:1ff::1", Some(DenyClass::V6IetfProtocol)),
            ("2001:200::1", None),
            ("2001:db8::1", Some(DenyClass::V6Documentation)),
            ("3fff::1", Some(DenyClass::V6Documentation)),
            ("3fff:1000::1", None),
            ("2002:c000:0204::1", Some(DenyClass::V6SixToFour)),
            ("2606:4700:4700::1111", None),
        ];
        for (text, expected) in cases {
            let ip: IpAddr = text.parse().expect(text);
            assert_eq!(classify(ip), *expected, "{text}");
        }
    }

    #[test]
    fn allow_cidrs_are_explicit_exceptions() {
        let loopback: Vec<IpNet> = vec!["127.0.0.0/8".parse().expect("net")];
        assert_eq!(allowed("127.0.0.5".parse().expect("ip"), &loopback), Ok(()));
        assert_eq!(allowed("10.0.0.1".parse().expect("ip"), &loopback), Err(DenyClass::Private));
        // A mapped form is not unwrapped into the v4 exception.
        assert_eq!(allowed("::ffff:127.0.0.5".parse().expect("ip"), &loopback), Err(DenyClass::V6NonGlobal));
        assert_eq!(allowed("8.8.8.8".parse().expect("ip"), &[]), Ok(()));
    }
}
