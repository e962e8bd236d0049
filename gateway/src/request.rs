//! The CONNECT request, before anything is resolved: bounded, strict parsing of the request head
//! (`CONNECT host:443 HTTP/1.1`, CRLF lines, no body) and the canonical-host and allowlist checks.
//! Every refusal maps to a reason code and an HTTP status (listed in docs/gateway.md). The host
//! rule itself is `roundtable_specs::names::check_host`, shared with `validate`.

use roundtable_specs::egress::GatewayReason;
use roundtable_specs::names::{HostError, check_host};

/// Bounds on the request head.
pub const MAX_REQUEST_LINE: usize = 2 * 1024;
pub const MAX_HEAD: usize = 8 * 1024;
pub const MAX_HEADER_LINES: usize = 32;

/// Why a CONNECT request is refused before `200`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestRefusal {
    BadRequestLine,
    MethodNotAllowed,
    HeadersTooLarge,
    BadAuthority,
    PortNotAllowed,
    HostInvalid,
    HostNotCanonical,
    IpLiteral,
    HostNotAllowlisted,
}

/// The reason code of each refusal (also the `X-Gateway-Deny` value).
impl From<RequestRefusal> for GatewayReason {
    fn from(refusal: RequestRefusal) -> Self {
        match refusal {
            RequestRefusal::BadRequestLine => GatewayReason::BadRequestLine,
            RequestRefusal::MethodNotAllowed => GatewayReason::MethodNotAllowed,
            RequestRefusal::HeadersTooLarge => GatewayReason::HeadersTooLarge,
            RequestRefusal::BadAuthority => GatewayReason::BadAuthority,
            RequestRefusal::PortNotAllowed => GatewayReason::PortNotAllowed,
            RequestRefusal::HostInvalid => GatewayReason::HostInvalid,
            RequestRefusal::HostNotCanonical => GatewayReason::HostNotCanonical,
            RequestRefusal::IpLiteral => GatewayReason::IpLiteral,
            RequestRefusal::HostNotAllowlisted => GatewayReason::HostNotAllowlisted,
        }
    }
}

impl RequestRefusal {
    /// The HTTP status sent with the refusal.
    pub fn status(self) -> u16 {
        match self {
            RequestRefusal::MethodNotAllowed => 405,
            RequestRefusal::HeadersTooLarge => 431,
            RequestRefusal::PortNotAllowed | RequestRefusal::IpLiteral | RequestRefusal::HostNotAllowlisted => 403,
            _ => 400,
        }
    }
}

/// Where reading the head stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    NeedMore,
    /// A complete head for `host`; bytes after it (the start of the ClientHello) begin at `end`.
    Complete {
        host: String,
        end: usize,
    },
    Refused(RequestRefusal),
}

/// Parses the request head from the bytes read so far.
pub fn parse_head(buffer: &[u8]) -> Head {
    let Some(line_end) = find_crlf(buffer, 0) else {
        return if buffer.len() > MAX_REQUEST_LINE {
            Head::Refused(RequestRefusal::BadRequestLine)
        } else {
            Head::NeedMore
        };
    };
    if line_end > MAX_REQUEST_LINE {
        return Head::Refused(RequestRefusal::BadRequestLine);
    }
    // Headers: up to an empty line, bounded; their content is ignored for routing.
    let mut offset = line_end + 2;
    let mut lines = 0;
    loop {
        let Some(end) = find_crlf(buffer, offset) else {
            return if buffer.len() > MAX_HEAD {
                Head::Refused(RequestRefusal::HeadersTooLarge)
            } else {
                Head::NeedMore
            };
        };
        if end > MAX_HEAD {
            return Head::Refused(RequestRefusal::HeadersTooLarge);
        }
        if end == offset {
            offset += 2;
            break;
        }
        let header = &buffer[offset..end];
        if header.contains(&b'\n') || header.contains(&b'\r') {
            return Head::Refused(RequestRefusal::BadRequestLine);
        }
        let name = header.split(|b| *b == b':').next().unwrap_or_default();
        if name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Head::Refused(RequestRefusal::BadRequestLine);
        }
        lines += 1;
        if lines > MAX_HEADER_LINES {
            return Head::Refused(RequestRefusal::HeadersTooLarge);
        }
        offset = end + 2;
    }
    match parse_request_line(&buffer[..line_end]) {
        Ok(host) => Head::Complete { host, end: offset },
        Err(refusal) => Head::Refused(refusal),
    }
}

fn find_crlf(buffer: &[u8], from: usize) -> Option<usize> {
    buffer.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

fn parse_request_line(line: &[u8]) -> Result<String, RequestRefusal> {
    let text = std::str::from_utf8(line).map_err(|_| RequestRefusal::BadRequestLine)?;
    let parts: Vec<&str> = text.split(' ').collect();
    let [method, authority, version] = parts.as_slice() else { return Err(RequestRefusal::BadRequestLine) };
    if !matches!(*version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(RequestRefusal::BadRequestLine);
    }
    if *method != "CONNECT" {
        return Err(RequestRefusal::MethodNotAllowed);
    }
    if authority.contains(['[', ']', '@', '%', '/']) {
        return Err(RequestRefusal::BadAuthority);
    }
    let (host, port) = authority.rsplit_once(':').ok_or(RequestRefusal::BadAuthority)?;
    // Byte-exact: "+443" and "0443" parse as 443 but are not it.
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.starts_with('0') {
        return Err(RequestRefusal::BadAuthority);
    }
    if port != "443" {
        return Err(RequestRefusal::PortNotAllowed);
    }
    canonical_host(host)
}

/// The host if it is a canonical DNS name, by the one host-name rule (`roundtable_specs::names::
/// check_host`, which `validate` applies to `providerHosts` too); IP literals and numeric forms are
/// refused.
pub fn canonical_host(host: &str) -> Result<String, RequestRefusal> {
    check_host(host).map_err(RequestRefusal::from)?;
    Ok(host.to_owned())
}

/// The reason code for each way a host breaks the host-name rule.
impl From<HostError> for RequestRefusal {
    fn from(error: HostError) -> Self {
        match error {
            HostError::IpLiteral | HostError::NumericLastLabel => RequestRefusal::IpLiteral,
            HostError::TrailingDot | HostError::Uppercase => RequestRefusal::HostNotCanonical,
            // Never on any allowlist, so refused as not allowlisted.
            HostError::SingleLabel | HostError::Localhost => RequestRefusal::HostNotAllowlisted,
            HostError::Empty
            | HostError::Scheme
            | HostError::Wildcard
            | HostError::PortOrBracket
            | HostError::Character(_)
            | HostError::TooLong
            | HostError::Label => RequestRefusal::HostInvalid,
        }
    }
}

/// Exact allowlist match of a canonical host.
pub fn check_allowed(host: &str, allowlist: &[String]) -> Result<(), RequestRefusal> {
    if allowlist.iter().any(|allowed| allowed == host) { Ok(()) } else { Err(RequestRefusal::HostNotAllowlisted) }
}

#[cfg(test)]
mod tests {
    use roundtable_specs::names::host_cases;

    use super::*;

    fn head(text: &str) -> Head {
        parse_head(text.as_bytes())
    }

    #[test]
    fn a_strict_connect_head_yields_the_host_and_keeps_what_follows() {
        let request = "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n\x16\x03\x01";
        assert_eq!(head(request), Head::Complete { host: "api.example.com".into(), end: request.len() - 3 });
        assert_eq!(head("CONNECT api.example.com:443 HTTP/1.1\r\nHost: x"), Head::NeedMore);
        assert_eq!(head("CONNECT api.exa"), Head::NeedMore);
    }

    #[test]
    fn every_request_refusal_has_its_code_and_status() {
        let big_headers = format!("CONNECT a.example.com:443 HTTP/1.1\r\n{}\r\n", "X-Pad: y\r\n".repeat(40));
        let long_line = format!("CONNECT {}.example.com:443 HTTP/1.1\r\n\r\n", "a".repeat(3000));
        let cases: Vec<(String, RequestRefusal, u16)> = vec![
            ("GET http://a.example.com/ HTTP/1.1\r\n\r\n".into(), RequestRefusal::MethodNotAllowed, 405),
            ("connect a.example.com:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::MethodNotAllowed, 405),
            ("CONNECT a.example.com:443\r\n\r\n".into(), RequestRefusal::BadRequestLine, 400),
            ("CONNECT a.example.com:443 HTTP/2\r\n\r\n".into(), RequestRefusal::BadRequestLine, 400),
            ("CONNECT  a.example.com:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::BadRequestLine, 400),
            (
                "CONNECT a.example.com:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n".into(),
                RequestRefusal::BadRequestLine,
                400,
            ),
            (long_line, RequestRefusal::BadRequestLine, 400),
            (big_headers, RequestRefusal::HeadersTooLarge, 431),
            ("CONNECT a.example.com HTTP/1.1\r\n\r\n".into(), RequestRefusal::BadAuthority, 400),
            ("CONNECT a.example.com:+443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::BadAuthority, 400),
            ("CONNECT a.example.com:0443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::BadAuthority, 400),
            ("CONNECT user@a.example.com:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::BadAuthority, 400),
            ("CONNECT [::1]:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::BadAuthority, 400),
            ("CONNECT a.example.com:80 HTTP/1.1\r\n\r\n".into(), RequestRefusal::PortNotAllowed, 403),
            ("CONNECT a_b.example.com:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::HostInvalid, 400),
            ("CONNECT a..example.com:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::HostInvalid, 400),
            ("CONNECT A.example.com:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::HostNotCanonical, 400),
            ("CONNECT a.example.com.:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::HostNotCanonical, 400),
            ("CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::IpLiteral, 403),
            ("CONNECT 127.1:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::IpLiteral, 403),
            ("CONNECT 2130706433:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::IpLiteral, 403),
            ("CONNECT 0x7f.0.0.1:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::IpLiteral, 403),
            ("CONNECT localhost:443 HTTP/1.1\r\n\r\n".into(), RequestRefusal::HostNotAllowlisted, 403),
        ];
        for (request, expected, status) in cases {
            assert_eq!(head(&request), Head::Refused(expected), "{request:?}");
            assert_eq!(expected.status(), status, "{request:?}");
        }
    }

    #[test]
    fn the_gateway_and_validate_decide_every_host_alike() {
        for (host, expected) in host_cases() {
            let specs = check_host(&host);
            assert_eq!(specs, expected, "{host:?}");
            let gateway = canonical_host(&host);
            assert_eq!(gateway.is_err(), specs.is_err(), "{host:?}: gateway {gateway:?}, specs {specs:?}");
            assert_eq!(gateway, specs.map(|()| host.clone()).map_err(RequestRefusal::from), "{host:?}");
            // Through a CONNECT head: the same decision, unless the authority syntax refuses first.
            let request = format!("CONNECT {host}:443 HTTP/1.1\r\n\r\n");
            match (head(&request), expected) {
                (Head::Complete { host: got, .. }, Ok(())) => assert_eq!(got, host),
                (Head::Refused(refusal), Err(error)) if refusal == RequestRefusal::from(error) => {}
                (Head::Refused(RequestRefusal::BadAuthority | RequestRefusal::BadRequestLine), Err(_))
                    if host.contains(['[', ']', '@', '%', '/', ' ']) => {}
                (got, _) => panic!("{host:?}: CONNECT gave {got:?}, the rule {expected:?}"),
            }
        }
    }

    #[test]
    fn each_host_error_has_its_reason_code() {
        let cases = [
            (HostError::Empty, GatewayReason::HostInvalid),
            (HostError::Scheme, GatewayReason::HostInvalid),
            (HostError::Wildcard, GatewayReason::HostInvalid),
            (HostError::PortOrBracket, GatewayReason::HostInvalid),
            (HostError::Character('_'), GatewayReason::HostInvalid),
            (HostError::TooLong, GatewayReason::HostInvalid),
            (HostError::Label, GatewayReason::HostInvalid),
            (HostError::TrailingDot, GatewayReason::HostNotCanonical),
            (HostError::Uppercase, GatewayReason::HostNotCanonical),
            (HostError::IpLiteral, GatewayReason::IpLiteral),
            (HostError::NumericLastLabel, GatewayReason::IpLiteral),
            (HostError::SingleLabel, GatewayReason::HostNotAllowlisted),
            (HostError::Localhost, GatewayReason::HostNotAllowlisted),
        ];
        for (error, reason) in cases {
            assert_eq!(GatewayReason::from(RequestRefusal::from(error)), reason, "{error:?}");
        }
    }

    #[test]
    fn the_allowlist_is_exact() {
        let allowlist = vec!["api.openai.com".to_owned()];
        assert_eq!(check_allowed("api.openai.com", &allowlist), Ok(()));
        for other in ["openai.com", "x.api.openai.com", "api.openai.com.evil.com"] {
            assert_eq!(check_allowed(other, &allowlist), Err(RequestRefusal::HostNotAllowlisted), "{other}");
        }
    }
}
